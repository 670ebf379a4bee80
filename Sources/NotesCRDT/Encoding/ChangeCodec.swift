/// The compact binary encoding of a list of changes, shared by snapshots and bundles.
///
/// Replicas and notes are written once, in tables, and referred to by index; numbers are LEB128
/// varints; inserted text is UTF-8. Docs/BundleFormat.md describes the layout byte by byte.
public enum ChangeCodec {
    /// Appends the encoding of `changes` to `writer`.
    public static func encode(_ changes: [Change], into writer: inout BinaryWriter) {
        var replicas: [ReplicaID] = []
        var replicaIndex: [ReplicaID: Int] = [:]
        var notes: [NoteID] = []
        var noteIndex: [NoteID: Int] = [:]
        func replica(_ r: ReplicaID) {
            if replicaIndex[r] == nil { replicaIndex[r] = replicas.count; replicas.append(r) }
        }
        func note(_ n: NoteID) {
            if noteIndex[n] == nil { noteIndex[n] = notes.count; notes.append(n) }
        }
        for change in changes {
            replica(change.replica)
            for (r, _) in change.dependencies.sortedEntries { replica(r) }
            for op in change.operations {
                if let n = op.note { note(n) }
                switch op {
                case .insertText(_, let origin?, _): replica(origin.replica)
                case .deleteText(_, let targets): targets.forEach { replica($0.replica) }
                default: break
                }
            }
        }
        writer.varint(UInt64(replicas.count))
        for r in replicas { writer.raw(r.raw.bytes) }
        writer.varint(UInt64(notes.count))
        for n in notes { writer.raw(n.raw.bytes) }
        writer.varint(UInt64(changes.count))
        for change in changes {
            writer.varint(UInt64(replicaIndex[change.replica]!))
            writer.varint(change.startSeq)
            writer.varint(change.timestamp.rawValue)
            let deps = change.dependencies.sortedEntries
            writer.varint(UInt64(deps.count))
            for (r, seq) in deps {
                writer.varint(UInt64(replicaIndex[r]!))
                writer.varint(seq)
            }
            writer.varint(UInt64(change.operations.count))
            for op in change.operations {
                switch op {
                case .setNoteField(let n, let field, let value):
                    writer.byte(0)
                    writer.varint(UInt64(noteIndex[n]!))
                    encode(field, &writer)
                    encode(value, &writer)
                case .insertText(let n, let origin, let text):
                    writer.byte(1)
                    writer.varint(UInt64(noteIndex[n]!))
                    if let origin {
                        writer.varint(UInt64(replicaIndex[origin.replica]! + 1))
                        writer.varint(origin.seq)
                    } else {
                        writer.varint(0)
                    }
                    writer.varint(UInt64(text.count))
                    var utf8: [UInt8] = []
                    utf8.reserveCapacity(text.count)
                    for scalar in text { UTF8.encode(scalar) { utf8.append($0) } }
                    writer.varint(UInt64(utf8.count))
                    writer.raw(utf8)
                case .deleteText(let n, let targets):
                    writer.byte(2)
                    writer.varint(UInt64(noteIndex[n]!))
                    writer.varint(UInt64(targets.count))
                    for t in targets {
                        writer.varint(UInt64(replicaIndex[t.replica]!))
                        writer.varint(t.seq)
                        writer.varint(t.count)
                    }
                case .setTagField(let tag, let field, let value):
                    writer.byte(3)
                    writer.string(tag)
                    writer.byte(field.rawValue)
                    encode(value, &writer)
                }
            }
        }
    }

    /// The encoding of `changes`.
    public static func encode(_ changes: [Change]) -> [UInt8] {
        var writer = BinaryWriter()
        encode(changes, into: &writer)
        return writer.bytes
    }

    /// Decodes changes, checking every index and length against what is there.
    public static func decode(from reader: inout BinaryReader) throws -> [Change] {
        let replicaCount = try reader.count(max: reader.remaining / 16, "the replica count")
        var replicas: [ReplicaID] = []
        for _ in 0 ..< replicaCount { replicas.append(ReplicaID(Identifier128(bytes: try reader.raw(16))!)) }
        let noteCount = try reader.count(max: reader.remaining / 16, "the note count")
        var notes: [NoteID] = []
        for _ in 0 ..< noteCount { notes.append(NoteID(Identifier128(bytes: try reader.raw(16))!)) }
        func replica(_ r: inout BinaryReader) throws -> ReplicaID {
            replicas[try r.count(max: replicas.count - 1, "a replica index")]
        }
        func note(_ r: inout BinaryReader) throws -> NoteID {
            guard !notes.isEmpty else { throw CRDTError(.malformedEncoding, "an operation names a note but the note table is empty") }
            return notes[try r.count(max: notes.count - 1, "a note index")]
        }
        let changeCount = try reader.count(max: reader.remaining, "the change count")
        var changes: [Change] = []
        changes.reserveCapacity(changeCount)
        for _ in 0 ..< changeCount {
            guard !replicas.isEmpty else { throw CRDTError(.malformedEncoding, "a change but no replica table") }
            let author = try replica(&reader)
            let startSeq = try reader.varint()
            let timestamp = Timestamp(rawValue: try reader.varint())
            let depCount = try reader.count(max: replicas.count, "a dependency count")
            var deps = VersionVector()
            for _ in 0 ..< depCount {
                let r = try replica(&reader)
                deps[r] = try reader.varint()
            }
            let opCount = try reader.count(max: reader.remaining, "an operation count")
            var ops: [Operation] = []
            ops.reserveCapacity(opCount)
            for _ in 0 ..< opCount {
                let kind = try reader.byte()
                switch kind {
                case 0:
                    let n = try note(&reader)
                    let field = try decodeField(&reader)
                    ops.append(.setNoteField(note: n, field: field, value: try decodeValue(&reader)))
                case 1:
                    let n = try note(&reader)
                    let originIndex = try reader.count(max: replicas.count, "an origin replica index")
                    var origin: OpID? = nil
                    if originIndex > 0 { origin = OpID(replica: replicas[originIndex - 1], seq: try reader.varint()) }
                    let scalarCount = try reader.count(max: reader.remaining, "an insert's length")
                    let byteCount = try reader.count(max: reader.remaining, "an insert's byte length")
                    let bytes = try reader.raw(byteCount)
                    guard let text = String(validating: bytes, as: UTF8.self) else {
                        throw CRDTError(.malformedEncoding, "inserted text is not valid UTF-8 at byte \(reader.offset - byteCount)")
                    }
                    let scalars = Array(text.unicodeScalars)
                    guard scalars.count == scalarCount, scalarCount > 0 else {
                        throw CRDTError(.malformedEncoding, "an insert says \(scalarCount) characters but holds \(scalars.count)")
                    }
                    ops.append(.insertText(note: n, origin: origin, text: scalars))
                case 2:
                    let n = try note(&reader)
                    let targetCount = try reader.count(max: reader.remaining / 3, "a delete's target count")
                    var targets: [OpIDRange] = []
                    for _ in 0 ..< targetCount {
                        let r = try replica(&reader)
                        targets.append(OpIDRange(replica: r, seq: try reader.varint(), count: try reader.varint()))
                    }
                    ops.append(.deleteText(note: n, targets: targets))
                case 3:
                    let tag = try reader.string()
                    guard let field = TagField(rawValue: try reader.byte()) else {
                        throw CRDTError(.malformedEncoding, "unknown tag field at byte \(reader.offset - 1)")
                    }
                    ops.append(.setTagField(tag: tag, field: field, value: try decodeValue(&reader)))
                default:
                    throw CRDTError(.malformedEncoding, "unknown operation kind \(kind) at byte \(reader.offset - 1)")
                }
            }
            let change = Change(replica: author, startSeq: startSeq, timestamp: timestamp, dependencies: deps, operations: ops)
            do { try Notebook.checkShape(change) } catch let error as CRDTError {
                throw CRDTError(.malformedEncoding, "a change from \(author) is malformed: \(error.message)")
            }
            changes.append(change)
        }
        return changes
    }

    /// Decodes changes from bytes that hold nothing else.
    public static func decode(_ bytes: [UInt8]) throws -> [Change] {
        var reader = BinaryReader(bytes)
        let changes = try decode(from: &reader)
        guard reader.isAtEnd else { throw CRDTError(.malformedEncoding, "\(reader.remaining) unexpected bytes after the changes") }
        return changes
    }

    static func encode(_ field: NoteField, _ writer: inout BinaryWriter) {
        writer.byte(field.code)
        switch field {
        case .tag(let key), .extra(let key): writer.string(key)
        default: break
        }
    }

    static func decodeField(_ reader: inout BinaryReader) throws -> NoteField {
        let code = try reader.byte()
        switch code {
        case 0: return .title
        case 1: return .pinned
        case 2: return .archived
        case 3: return .color
        case 4: return .state
        case 5: return .createdAt
        case 6: return .tag(try reader.string())
        case 7: return .extra(try reader.string())
        default: throw CRDTError(.malformedEncoding, "unknown note field \(code) at byte \(reader.offset - 1)")
        }
    }

    static func encode(_ value: FieldValue, _ writer: inout BinaryWriter) {
        switch value {
        case .null: writer.byte(0)
        case .bool(let b): writer.byte(b ? 2 : 1)
        case .int(let i): writer.byte(3); writer.signedVarint(i)
        case .string(let s): writer.byte(4); writer.string(s)
        }
    }

    static func decodeValue(_ reader: inout BinaryReader) throws -> FieldValue {
        let kind = try reader.byte()
        switch kind {
        case 0: return .null
        case 1: return .bool(false)
        case 2: return .bool(true)
        case 3: return .int(try reader.signedVarint())
        case 4: return .string(try reader.string())
        default: throw CRDTError(.malformedEncoding, "unknown value kind \(kind) at byte \(reader.offset - 1)")
        }
    }
}

import Crypto
import Deflate
import NotesCRDT

// The bundle format written field by field with any value in any field: what a hostile writer
// could send, with the framing (lengths, checksum, DEFLATE) still right so that a reader gets
// past it to the values. Docs/BundleFormat.md is the layout.

/// How a varint is written: shortest, or padded with continuation bytes (LEB128 allows a value
/// to take more bytes than it needs; 10 is the most a 64-bit value may take).
public enum VarintWidth: Sendable, Hashable {
    case shortest
    /// Padded to `bytes` bytes (11 or more is too long for any reader).
    case padded(Int)
}

/// Appends wire values, each varint in the width it is told.
public struct RawWriter: Sendable {
    public private(set) var bytes: [UInt8] = []
    /// The width of the varints written from here on.
    public var width: VarintWidth = .shortest

    public init() {}

    public mutating func varint(_ value: UInt64) {
        var v = value
        var written = 0
        let total: Int
        if case .padded(let width) = width { total = width } else { total = 0 }
        while true {
            let low = UInt8(truncatingIfNeeded: v & 0x7F)
            v >>= 7
            written += 1
            if v == 0, written >= total {
                bytes.append(low)
                return
            }
            bytes.append(low | 0x80)
        }
    }

    public mutating func signedVarint(_ value: Int64) {
        varint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    public mutating func byte(_ value: UInt8) { bytes.append(value) }
    public mutating func raw(_ data: [UInt8]) { bytes += data }

    /// A varint byte length, then the bytes.
    public mutating func blob(_ data: [UInt8]) {
        varint(UInt64(data.count))
        bytes += data
    }
}

/// One change header of the change encoding, every field as written.
public struct RawHeader: Sendable, Hashable {
    public var author: UInt64
    public var startSeq: UInt64
    public var timestamp: UInt64
    /// (replica index, seq) pairs.
    public var dependencies: [RawDependency]
    /// The dependency count written (nil: `dependencies.count`).
    public var dependencyCount: UInt64?
    /// The operation count written: how many records of the columns are this change's.
    public var operationCount: UInt64

    public init(author: UInt64, startSeq: UInt64, timestamp: UInt64, dependencies: [RawDependency] = [],
                dependencyCount: UInt64? = nil, operationCount: UInt64) {
        self.author = author
        self.startSeq = startSeq
        self.timestamp = timestamp
        self.dependencies = dependencies
        self.dependencyCount = dependencyCount
        self.operationCount = operationCount
    }
}

public struct RawDependency: Sendable, Hashable {
    public var replica: UInt64
    public var seq: UInt64
    public init(replica: UInt64, seq: UInt64) {
        self.replica = replica
        self.seq = seq
    }
}

/// A reference written explicitly: a replica index and `opSeq - seq`.
public struct RawReference: Sendable, Hashable {
    public var replica: UInt64
    public var delta: Int64
    public init(replica: UInt64, delta: Int64) {
        self.replica = replica
        self.delta = delta
    }
}

/// A delete target written explicitly.
public struct RawTarget: Sendable, Hashable {
    public var reference: RawReference
    public var count: UInt64
    public init(_ reference: RawReference, count: UInt64) {
        self.reference = reference
        self.count = count
    }
}

/// One record of the columns (an operation, or a run of deletes), every field as written.
public enum RawRecord: Sendable, Hashable {
    /// Kind 0: the field and value bytes go to the explicit column as they are.
    case setNoteField(note: UInt64, field: [UInt8], value: [UInt8])
    /// Kind 1: insert mode (0 ... 3), the origin when the mode is 1, the length, the UTF-8.
    case insert(note: UInt64, mode: UInt8, origin: RawReference?, length: UInt64, text: [UInt8])
    /// Kind 2, delete mode 0 with targets (a target count of `targets.count`, or `targetCount`).
    case deleteExplicit(note: UInt64, targets: [RawTarget], targetCount: UInt64?)
    /// Kind 2, a predicted delete (mode 1 ... 3).
    case deletePredicted(note: UInt64, mode: UInt8)
    /// Kind 2, a run record: target count 0, the shape varint, a second delete mode, and the
    /// first target when that mode is 0.
    case run(note: UInt64, shape: UInt64, mode: UInt8, first: RawReference?)
    /// Kind 3: tag key, field byte, value bytes.
    case setTagField(tag: [UInt8], field: UInt8, value: [UInt8])
    /// Kind 3 with an empty tag key and field byte 2: a re-issue (`Operation.reissue`), its
    /// replica index, `opSeq - firstSeq` and count written in the varint width of the encoding
    /// (`setTagField` writes any other spelling, a non-empty tag or a cut value, as it is).
    case reissue(replica: UInt64, delta: Int64, count: UInt64)
}

/// A change encoding (the body of a bundle) as its parts, written by `bytes()`.
public struct RawChangeEncoding: Sendable, Hashable {
    /// The replica table's 16-byte entries, and the count written (nil: their number).
    public var replicas: [ReplicaID] = []
    public var replicaCount: UInt64?
    public var notes: [NoteID] = []
    public var noteCount: UInt64?
    public var headers: [RawHeader] = []
    public var headerCount: UInt64?
    public var records: [RawRecord] = []
    /// Written into the note column instead of the records' notes, when set: (run length, index) pairs.
    public var noteRuns: [(UInt64, UInt64)]? = nil
    /// Bytes added to (positive) or cut from (negative) the end of each of the 7 columns.
    public var columnSkew: [Int] = Array(repeating: 0, count: 7)
    /// Bytes after the last column.
    public var trailing: [UInt8] = []
    /// The width of every varint.
    public var width: VarintWidth = .shortest

    public init() {}

    /// `changes` written field by field as the format allows, every reference explicit (inserts
    /// after their origin or at the start, deletes by their targets, runs with their first
    /// target): what a reader decodes back to the same changes, and what a case then spoils one
    /// field of. The changes may be malformed (a re-issue past its change's end, of its own
    /// author, of no seqs...): they are written as they are.
    public init(_ changes: [Change]) {
        var replicaIndex: [ReplicaID: UInt64] = [:]
        var noteIndex: [NoteID: UInt64] = [:]
        func index(_ replica: ReplicaID) -> UInt64 {
            if let i = replicaIndex[replica] { return i }
            replicaIndex[replica] = UInt64(replicas.count)
            replicas.append(replica)
            return UInt64(replicas.count - 1)
        }
        func index(_ note: NoteID) -> UInt64 {
            if let i = noteIndex[note] { return i }
            noteIndex[note] = UInt64(notes.count)
            notes.append(note)
            return UInt64(notes.count - 1)
        }
        func reference(_ id: OpID, at seq: UInt64) -> RawReference {
            RawReference(replica: index(id.replica), delta: Int64(bitPattern: seq &- id.seq))
        }
        for change in changes {
            let author = index(change.replica)
            let dependencies = change.dependencies.sortedEntries.map { RawDependency(replica: index($0.replica), seq: $0.seq) }
            let first = records.count
            var seq = change.startSeq
            for op in change.operations {
                switch op {
                case .setNoteField(let note, let field, let value):
                    records.append(.setNoteField(note: index(note), field: Self.bytes(of: field), value: Self.bytes(of: value)))
                case .insertText(let note, let origin, let text):
                    let utf8 = Array(String(String.UnicodeScalarView(text)).utf8)
                    records.append(.insert(note: index(note), mode: origin == nil ? 0 : 1, origin: origin.map { reference($0, at: seq) },
                                           length: UInt64(text.count), text: utf8))
                case .deleteText(let note, let targets):
                    records.append(.deleteExplicit(note: index(note), targets: targets.map {
                        RawTarget(reference(OpID(replica: $0.replica, seq: $0.seq), at: seq), count: $0.count)
                    }, targetCount: nil))
                case .deleteEach(let note, let runs):
                    var at = seq
                    for run in runs {
                        let target = run.target(0)
                        if run.order == .whole {
                            records.append(.deleteExplicit(note: index(note), targets: [RawTarget(reference(OpID(replica: target.replica, seq: target.seq), at: at), count: target.count)],
                                                           targetCount: nil))
                        } else {
                            records.append(.run(note: index(note), shape: (run.range.count - 2) << 1 | (run.order == .forward ? 1 : 0), mode: 0,
                                                first: reference(OpID(replica: target.replica, seq: target.seq), at: at)))
                        }
                        at &+= run.operationCount
                    }
                case .setTagField(let tag, let field, let value):
                    records.append(.setTagField(tag: Array(tag.utf8), field: field.rawValue, value: Self.bytes(of: value)))
                case .reissue(let range):
                    records.append(.reissue(replica: index(range.replica), delta: Int64(bitPattern: seq &- range.seq), count: range.count))
                }
                seq &+= op.seqCount
            }
            headers.append(RawHeader(author: author, startSeq: change.startSeq, timestamp: change.timestamp.rawValue,
                                     dependencies: dependencies, operationCount: UInt64(records.count - first)))
        }
    }

    /// A string as the format writes it: its UTF-8 length, then the bytes.
    static func bytes(of string: String) -> [UInt8] {
        var w = RawWriter()
        w.blob(Array(string.utf8))
        return w.bytes
    }

    /// A note field's bytes (Docs/BundleFormat.md, "field").
    static func bytes(of field: NoteField) -> [UInt8] {
        switch field {
        case .tag(let key), .extra(let key): [field.code] + bytes(of: key)
        default: [field.code]
        }
    }

    /// A value's bytes (Docs/BundleFormat.md, "value").
    static func bytes(of value: FieldValue) -> [UInt8] {
        var w = RawWriter()
        switch value {
        case .null: w.byte(0)
        case .bool(let b): w.byte(b ? 2 : 1)
        case .int(let i):
            w.byte(3)
            w.signedVarint(i)
        case .string(let s):
            w.byte(4)
            w.blob(Array(s.utf8))
        }
        return w.bytes
    }

    public static func == (a: RawChangeEncoding, b: RawChangeEncoding) -> Bool { a.bytes() == b.bytes() }
    public func hash(into hasher: inout Hasher) { hasher.combine(bytes()) }

    /// The encoding's bytes.
    public func bytes() -> [UInt8] {
        var w = RawWriter()
        w.width = width
        w.varint(replicaCount ?? UInt64(replicas.count))
        for r in replicas { w.raw(r.raw.bytes) }
        w.varint(noteCount ?? UInt64(notes.count))
        for n in notes { w.raw(n.raw.bytes) }
        w.varint(headerCount ?? UInt64(headers.count))
        for h in headers {
            w.varint(h.author)
            w.varint(h.startSeq)
            w.varint(h.timestamp)
            w.varint(h.dependencyCount ?? UInt64(h.dependencies.count))
            for d in h.dependencies {
                w.varint(d.replica)
                w.varint(d.seq)
            }
            w.varint(h.operationCount)
        }
        var kinds = TwoBits()
        var noteIndexes: [UInt64] = []
        var insertModes = TwoBits()
        var deleteModes = TwoBits()
        var lengths = RawWriter()
        var explicit = RawWriter()
        var text: [UInt8] = []
        lengths.width = width
        explicit.width = width
        func reference(_ r: RawReference) {
            explicit.varint(r.replica)
            explicit.signedVarint(r.delta)
        }
        for record in records {
            switch record {
            case .setNoteField(let note, let field, let value):
                kinds.append(0)
                noteIndexes.append(note)
                explicit.raw(field)
                explicit.raw(value)
            case .insert(let note, let mode, let origin, let length, let bytes):
                kinds.append(1)
                noteIndexes.append(note)
                insertModes.append(mode)
                if mode == 1, let origin { reference(origin) }
                lengths.varint(length)
                text += bytes
            case .deleteExplicit(let note, let targets, let count):
                kinds.append(2)
                noteIndexes.append(note)
                deleteModes.append(0)
                explicit.varint(count ?? UInt64(targets.count))
                for t in targets {
                    reference(t.reference)
                    explicit.varint(t.count)
                }
            case .deletePredicted(let note, let mode):
                kinds.append(2)
                noteIndexes.append(note)
                deleteModes.append(mode)
            case .run(let note, let shape, let mode, let first):
                kinds.append(2)
                noteIndexes.append(note)
                deleteModes.append(0)
                explicit.varint(0)
                explicit.varint(shape)
                deleteModes.append(mode)
                if mode == 0, let first { reference(first) }
            case .setTagField(let tag, let field, let value):
                kinds.append(3)
                explicit.blob(tag)
                explicit.byte(field)
                explicit.raw(value)
            case .reissue(let replica, let delta, let count):
                kinds.append(3)
                explicit.varint(0)
                explicit.byte(2)
                explicit.varint(replica)
                explicit.signedVarint(delta)
                explicit.varint(count)
            }
        }
        var notesColumn = RawWriter()
        notesColumn.width = width
        if let runs = noteRuns {
            for (length, index) in runs {
                notesColumn.varint(length)
                notesColumn.varint(index)
            }
        } else {
            var i = 0
            while i < noteIndexes.count {
                var j = i + 1
                while j < noteIndexes.count, noteIndexes[j] == noteIndexes[i] { j += 1 }
                notesColumn.varint(UInt64(j - i))
                notesColumn.varint(noteIndexes[i])
                i = j
            }
        }
        let columns = [kinds.bytes, notesColumn.bytes, insertModes.bytes, deleteModes.bytes, lengths.bytes, explicit.bytes, text]
        for (index, column) in columns.enumerated() {
            var bytes = column
            let skew = index < columnSkew.count ? columnSkew[index] : 0
            if skew > 0 { bytes += Array(repeating: 0x55, count: skew) }
            if skew < 0 { bytes.removeLast(min(-skew, bytes.count)) }
            w.blob(bytes)
        }
        w.raw(trailing)
        return w.bytes
    }
}

/// 2-bit values, four to a byte, first in the low bits.
struct TwoBits {
    var bytes: [UInt8] = []
    var count = 0
    mutating func append(_ value: UInt8) {
        if count % 4 == 0 { bytes.append(0) }
        bytes[bytes.count - 1] |= (value & 3) << UInt8(2 * (count % 4))
        count += 1
    }
}

/// A bundle as its parts: framing, header, body, checksum, each as written.
public struct RawBundle: Sendable {
    public var magic: [UInt8] = Array("CRDTBNDL".utf8)
    public var version: UInt8 = 3
    public var sender = ReplicaID(Identifier128(high: 0xF022, low: 1))
    /// (replica, seq) entries of the sender's vector, in the order written.
    public var vector: [(ReplicaID, UInt64)] = []
    public var vectorCount: UInt64?
    /// The change encoding.
    public var body: [UInt8] = []
    /// Compress the body (flag bit 0) and declare this length (nil: the true one).
    public var compressed = false
    public var declaredLength: UInt64?
    /// Flags written (nil: what `compressed` says).
    public var flags: UInt8?
    /// The body length written (nil: the true one).
    public var bodyLength: UInt64?
    /// Spoil the checksum.
    public var badChecksum = false
    public var width: VarintWidth = .shortest

    public init() {}

    /// The bundle's bytes, with a valid SHA-256 unless `badChecksum`.
    public func bytes() -> [UInt8] {
        var w = RawWriter()
        w.width = width
        w.raw(magic)
        w.byte(version)
        var payload = body
        if compressed {
            var framed = RawWriter()
            framed.width = width
            framed.varint(declaredLength ?? UInt64(body.count))
            framed.raw(Deflate.compress(body, level: 1))
            payload = framed.bytes
        }
        w.byte(flags ?? (compressed ? 1 : 0))
        w.raw(sender.raw.bytes)
        w.varint(vectorCount ?? UInt64(vector.count))
        for (replica, seq) in vector {
            w.raw(replica.raw.bytes)
            w.varint(seq)
        }
        w.varint(bodyLength ?? UInt64(payload.count))
        w.raw(payload)
        var checksum = Array(w.bytes.withUnsafeBytes { Crypto.SHA256.hash(data: $0) })
        if badChecksum { checksum[0] ^= 1 }
        return w.bytes + checksum
    }
}

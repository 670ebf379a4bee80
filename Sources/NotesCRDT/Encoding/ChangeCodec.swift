/// The compact binary encoding of a list of changes, shared by snapshots and bundles.
///
/// Replicas and notes are written once, in tables, and referred to by index. Change headers are
/// written row by row; the operations of all changes are written in columns: a 2-bit kind per
/// operation, run-length-encoded note indexes, and for inserts and deletes a 2-bit "prediction"
/// code, because in real editing the origin of an insert and the target of a delete are almost
/// always the character just typed or just deleted. Only what the prediction misses is written out.
/// Inserted text is one UTF-8 block. Docs/BundleFormat.md describes the layout byte by byte.
public enum ChangeCodec {
    enum Kind: UInt8 { case setNoteField = 0, insertText = 1, deleteText = 2, setTagField = 3 }
    /// The field byte of a set-tag-field record that is a re-issue (`Operation.reissue`), with an
    /// empty tag key: no tag field has it.
    static let reissueField: UInt8 = 2

    /// What the decoder and encoder both remember while walking the operations: the last insert,
    /// the last delete, and every character inserted so far in the body (as seq ranges per replica,
    /// which grow in seq order), so that "the character typed just before / after this one" can
    /// be named without writing it out.
    struct Predictor {
        var lastInsertEnd: OpID?
        var lastDeleted: OpID?
        /// Per replica, its inserted ranges.
        var insertedBy: [(replica: ReplicaID, ranges: [(start: UInt64, count: UInt64)])] = []
        /// Where each replica is in `insertedBy`: searched linearly for the usual handful, hashed
        /// past that (a body from 65,536 replicas made every insert search them all).
        var slots = FirstUseIndex<ReplicaID>()
        /// The replicas (indexes into `insertedBy`) whose ranges are not in increasing seq order,
        /// because a bundle held overlapping pieces of their log. For them only the binary search
        /// answers, as it always has: the shortcut below could find another of two ranges that
        /// hold a seq, and the encoder and the decoder would disagree.
        var irregular: [Bool] = []

        /// Forgets everything, keeping the arrays' storage (for the next encoding).
        mutating func reset() {
            lastInsertEnd = nil
            lastDeleted = nil
            insertedBy.removeAll(keepingCapacity: true)
            slots.removeAll()
            irregular.removeAll(keepingCapacity: true)
            lastHit = nil
            lastInserter = 0
        }

        /// Where the author of the last insert is in `insertedBy` (a change's inserts are all its author's).
        var lastInserter = 0

        mutating func inserted(_ id: OpID, count: UInt64) {
            // Wrapping: the encoder may be handed a change no decoder would accept (never a decoded one).
            lastInsertEnd = OpID(replica: id.replica, seq: id.seq &+ count &- 1)
            let found = lastInserter < insertedBy.count && insertedBy[lastInserter].replica == id.replica
                ? lastInserter : slots.index(of: id.replica)
            if let i = found {
                lastInserter = i
                insertedBy.withUnsafeMutableBufferPointer { byReplica in
                    if let last = byReplica[i].ranges.last, id.seq < last.start &+ last.count { irregular[i] = true }
                    byReplica[i].ranges.append((id.seq, count))
                }
            } else {
                slots.add(id.replica)
                lastInserter = insertedBy.count
                insertedBy.append((id.replica, [(id.seq, count)]))
                irregular.append(false)
            }
        }

        mutating func deleted(_ targets: some Collection<OpIDRange>) {
            if let first = targets.first { lastDeleted = OpID(replica: first.replica, seq: first.seq) }
        }

        /// The range found last: predictions walk through the text just typed or deleted, so the
        /// next lookup is usually in the same range or the next one. (With ranges in increasing,
        /// disjoint order, the range that holds a seq is the one the binary search finds.)
        var lastHit: (replica: Int, index: Int)?

        /// Where `id`'s replica is in `insertedBy`, and the index of the range that holds `id`
        /// among that replica's inserted ranges, or nil.
        private mutating func rangeIndex(of id: OpID) -> (replica: Int, index: Int)? {
            if let hit = lastHit, insertedBy[hit.replica].replica == id.replica, !irregular[hit.replica] {
                let count = insertedBy[hit.replica].ranges.count
                for i in max(0, hit.index - 1) ... min(count - 1, hit.index + 1) {
                    let range = insertedBy[hit.replica].ranges[i]
                    if range.start <= id.seq, id.seq < range.start &+ range.count {
                        lastHit = (hit.replica, i)
                        return (hit.replica, i)
                    }
                }
            }
            let r: Int
            if lastInserter < insertedBy.count, insertedBy[lastInserter].replica == id.replica {
                r = lastInserter
            } else {
                guard let slot = slots.index(of: id.replica) else { return nil }
                r = slot
            }
            let found: (replica: Int, index: Int)? = insertedBy[r].ranges.withUnsafeBufferPointer { ranges in
                // The replica's last insert, the usual target of a delete (what was just typed).
                if !irregular[r], let last = ranges.last, last.start <= id.seq, id.seq < last.start &+ last.count {
                    return (r, ranges.count - 1)
                }
                var low = 0, high = ranges.count
                while low < high {
                    let mid = (low + high) / 2
                    if ranges[mid].start <= id.seq { low = mid + 1 } else { high = mid }
                }
                guard low > 0, id.seq < ranges[low - 1].start &+ ranges[low - 1].count else { return nil }
                return (r, low - 1)
            }
            if let found { lastHit = found }
            return found
        }

        /// The character inserted (in this body) just before `id` by the same replica.
        mutating func predecessor(of id: OpID?) -> OpID? {
            guard let id, let (r, index) = rangeIndex(of: id) else { return nil }
            let range = insertedBy[r].ranges[index]
            if id.seq > range.start { return OpID(replica: id.replica, seq: id.seq &- 1) }
            guard index > 0 else { return nil }
            let before = insertedBy[r].ranges[index - 1]
            return OpID(replica: id.replica, seq: before.start &+ before.count &- 1)
        }

        /// The character inserted (in this body) just after `id` by the same replica.
        mutating func successor(of id: OpID?) -> OpID? {
            guard let id, let (r, index) = rangeIndex(of: id) else { return nil }
            let range = insertedBy[r].ranges[index]
            if id.seq &+ 1 < range.start &+ range.count { return OpID(replica: id.replica, seq: id.seq &+ 1) }
            guard index + 1 < insertedBy[r].ranges.count else { return nil }
            return OpID(replica: id.replica, seq: insertedBy[r].ranges[index + 1].start)
        }

        /// Insert origin modes: 0 the start, 1 explicit, 2 the character inserted just before the
        /// last deleted one, 3 the last inserted character.
        mutating func insertMode(_ origin: OpID?) -> UInt8 {
            guard let origin else { return 0 }
            if origin == lastInsertEnd { return 3 }
            if origin == predecessor(of: lastDeleted) { return 2 }
            return 1
        }

        /// Delete modes (for a single character): 0 explicit, 1 the last inserted character,
        /// 2 the character inserted just before the last deleted one, 3 the one just after it.
        mutating func deleteMode(_ targets: some Collection<OpIDRange>) -> UInt8 {
            guard targets.count == 1, let target = targets.first, target.count == 1 else { return 0 }
            let id = OpID(replica: target.replica, seq: target.seq)
            if id == lastInsertEnd { return 1 }
            if id == predecessor(of: lastDeleted) { return 2 }
            if id == successor(of: lastDeleted) { return 3 }
            return 0
        }
    }

    /// Appends the encoding of `changes` to `writer`.
    public static func encode(_ changes: [Change], into writer: inout BinaryWriter) {
        var encoder = Encoder()
        encoder.encode(changes, into: &writer)
    }

    /// An encoder that keeps its working storage (the tables, the columns, the predictor's
    /// ranges) from one encoding to the next, so that encoding one change (a keystroke's log row)
    /// does not pay for allocating them again. The bytes are the same as
    /// `ChangeCodec.encode`'s; nothing of one encoding carries into the next.
    public struct Encoder: Sendable {
        var replicaIndex = FirstUseIndex<ReplicaID>()
        var noteIndex = FirstUseIndex<NoteID>()
        var kinds = TwoBitColumn()
        var noteColumn = RunLengthColumn()
        var insertModes = TwoBitColumn()
        var deleteModes = TwoBitColumn()
        var lengths = BinaryWriter()
        var text = BinaryWriter()
        var explicit = BinaryWriter()
        var predictor = Predictor()

        /// Creates an encoder with empty working storage.
        public init() {}

        /// The encoding of `changes`.
        public mutating func encode(_ changes: [Change]) -> [UInt8] {
            var writer = BinaryWriter(capacity: ChangeCodec.expectedSize(of: changes))
            encode(changes, into: &writer)
            return writer.bytes
        }

        /// Appends the encoding of `changes` to `writer`.
        public mutating func encode(_ changes: [Change], into writer: inout BinaryWriter) {
            replicaIndex.removeAll()
            noteIndex.removeAll()
            kinds.removeAll()
            noteColumn.removeAll()
            insertModes.removeAll()
            deleteModes.removeAll()
            lengths.removeAll()
            text.removeAll()
            explicit.removeAll()
            predictor.reset()
            ChangeCodec.encode(changes, into: &writer, using: &self)
        }
    }

    /// Appends the encoding of `changes` to `writer`, with the encoder's (emptied) storage.
    private static func encode(_ changes: [Change], into writer: inout BinaryWriter, using state: inout Encoder) {
        func replica(_ r: ReplicaID) { state.replicaIndex.add(r) }
        func note(_ n: NoteID) { state.noteIndex.add(n) }
        for change in changes {
            replica(change.replica)
            for entry in change.dependencies.storage { replica(entry.replica) }
            // In place: an operation copied out of the array retains and releases its payload.
            change.operations.withUnsafeBufferPointer { operations in
                for index in operations.indices {
                    switch operations[index] {
                    case .setNoteField(let n, _, _): note(n)
                    case .insertText(let n, let origin, _):
                        note(n)
                        if let origin { replica(origin.replica) }
                    case .deleteText(let n, let targets):
                        note(n)
                        for target in targets { replica(target.replica) }
                    case .deleteEach(let n, let runs):
                        note(n)
                        for run in runs { replica(run.range.replica) }
                    case .reissue(let range): replica(range.replica)
                    case .setTagField: break
                    }
                }
            }
        }
        writer.varint(UInt64(state.replicaIndex.keys.count))
        for r in state.replicaIndex.keys { writer.uint64(r.raw.high); writer.uint64(r.raw.low) }
        writer.varint(UInt64(state.noteIndex.keys.count))
        for n in state.noteIndex.keys { writer.uint64(n.raw.high); writer.uint64(n.raw.low) }

        writer.varint(UInt64(changes.count))
        for change in changes {
            writer.varint(UInt64(state.replicaIndex[change.replica]))
            writer.varint(change.startSeq)
            writer.varint(change.timestamp.rawValue)
            let deps = change.dependencies.storage  // sorted by replica, as `sortedEntries`
            writer.varint(UInt64(deps.count))
            for entry in deps {
                writer.varint(UInt64(state.replicaIndex[entry.replica]))
                writer.varint(entry.seq)
            }
            // Records: one per operation, and per run of a `deleteEach` (the decoder joins them again).
            writer.varint(UInt64(change.operations.reduce(0) { count, op in
                if case .deleteEach(_, let runs) = op { return count + runs.count }
                return count + 1
            }))
            var seq = change.startSeq
            /// Writes one delete operation.
            func delete(_ n: NoteID, _ targets: some Collection<OpIDRange>, at seq: UInt64) {
                state.kinds.append(Kind.deleteText.rawValue)
                state.noteColumn.append(UInt64(state.noteIndex[n]))
                let mode = state.predictor.deleteMode(targets)
                state.deleteModes.append(mode)
                if mode == 0 {
                    state.explicit.varint(UInt64(targets.count))
                    for t in targets {
                        state.explicit.varint(UInt64(state.replicaIndex[t.replica]))
                        state.explicit.signedVarint(Int64(bitPattern: seq &- t.seq))
                        state.explicit.varint(t.count)
                    }
                }
                state.predictor.deleted(targets)
            }
            /// Writes a run of two or more deletes of one character each as one record: an explicit
            /// delete of no targets, the run's length and order, then its first delete's target
            /// as a single delete would give it (a delete mode, and when that is explicit, the
            /// replica index and seq difference).
            func deleteRun(_ n: NoteID, _ run: DeleteRun, at seq: UInt64) {
                state.kinds.append(Kind.deleteText.rawValue)
                state.noteColumn.append(UInt64(state.noteIndex[n]))
                state.deleteModes.append(0)
                state.explicit.varint(0)
                state.explicit.varint((run.range.count - 2) << 1 | (run.order == .forward ? 1 : 0))
                let first = run.target(0)
                let mode = state.predictor.deleteMode(CollectionOfOne(first))
                state.deleteModes.append(mode)
                if mode == 0 {
                    state.explicit.varint(UInt64(state.replicaIndex[first.replica]))
                    state.explicit.signedVarint(Int64(bitPattern: seq &- first.seq))
                }
                state.predictor.deleted(CollectionOfOne(run.target(run.operationCount - 1)))
            }
            for op in change.operations {
                switch op {
                case .setNoteField(let n, let field, let value):
                    state.kinds.append(Kind.setNoteField.rawValue)
                    state.noteColumn.append(UInt64(state.noteIndex[n]))
                    encode(field, &state.explicit)
                    encode(value, &state.explicit)
                case .insertText(let n, let origin, let scalars):
                    state.kinds.append(Kind.insertText.rawValue)
                    state.noteColumn.append(UInt64(state.noteIndex[n]))
                    let mode = state.predictor.insertMode(origin)
                    state.insertModes.append(mode)
                    if mode == 1, let origin {
                        state.explicit.varint(UInt64(state.replicaIndex[origin.replica]))
                        state.explicit.signedVarint(Int64(bitPattern: seq &- origin.seq))
                    }
                    state.lengths.varint(UInt64(scalars.count))
                    state.text.utf8(scalars)
                    state.predictor.inserted(OpID(replica: change.replica, seq: seq), count: UInt64(scalars.count))
                case .deleteText(let n, let targets):
                    delete(n, targets, at: seq)
                case .deleteEach(let n, let runs):
                    var at = seq
                    for run in runs {
                        if run.operationCount >= 2 {
                            deleteRun(n, run, at: at)
                        } else {
                            delete(n, CollectionOfOne(run.range), at: at)
                        }
                        at &+= run.operationCount
                    }
                case .setTagField(let tag, let field, let value):
                    state.kinds.append(Kind.setTagField.rawValue)
                    state.explicit.string(tag)
                    state.explicit.byte(field.rawValue)
                    encode(value, &state.explicit)
                case .reissue(let range):
                    // A set-tag-field record of no tag and field byte 2 (Docs/BundleFormat.md).
                    state.kinds.append(Kind.setTagField.rawValue)
                    state.explicit.string("")
                    state.explicit.byte(ChangeCodec.reissueField)
                    state.explicit.varint(UInt64(state.replicaIndex[range.replica]))
                    state.explicit.signedVarint(Int64(bitPattern: seq &- range.seq))
                    state.explicit.varint(range.count)
                }
                seq &+= op.seqCount
            }
        }
        state.noteColumn.flush()
        for column in 0 ..< 7 {
            let bytes: [UInt8]
            switch column {
            case 0: bytes = state.kinds.bytes
            case 1: bytes = state.noteColumn.flushedBytes
            case 2: bytes = state.insertModes.bytes
            case 3: bytes = state.deleteModes.bytes
            case 4: bytes = state.lengths.bytes
            case 5: bytes = state.explicit.bytes
            default: bytes = state.text.bytes
            }
            writer.varint(UInt64(bytes.count))
            writer.raw(bytes)
        }
    }

    /// The encoding of `changes`.
    public static func encode(_ changes: [Change]) -> [UInt8] {
        var encoder = Encoder()
        return encoder.encode(changes)
    }

    /// Room for the tables and a few bytes per operation (the text comes on top), so the array is
    /// not reallocated as it grows for every change logged.
    static func expectedSize(of changes: [Change]) -> Int { 64 + 48 * min(changes.count, 1 << 14) }

    /// Decodes changes, checking every index and length against what is there, every sequence
    /// number against `Change.maxSeq`, and every count against `limits`.
    ///
    /// - Complexity: linear in the bytes read: every loop reads input, and a run of deletes
    ///   is taken as a range, whatever its length.
    public static func decode(from reader: inout BinaryReader, limits: Limits = .unlimited) throws -> [Change] {
        var used = Usage()
        return try decode(from: &reader, limits: limits, used: &used)
    }

    /// Decodes changes as `decode(from:limits:)` does, and says in `used` what of `limits` they
    /// took: a reader of several encodings in one bundle lowers the limits by it for the next.
    public static func decode(from reader: inout BinaryReader, limits: Limits, used: inout Usage) throws -> [Change] {
        let replicaCount = try reader.count(max: reader.remaining / 16, "the replica count")
        guard replicaCount <= limits.maxReplicas else { throw CRDTError(.limitExceeded, "more than \(limits.maxReplicas) replicas (\(replicaCount))") }
        var replicas: [ReplicaID] = []
        replicas.reserveCapacity(replicaCount)
        for _ in 0 ..< replicaCount { replicas.append(ReplicaID(Identifier128(bytes: try reader.raw(16))!)) }
        let noteCount = try reader.count(max: reader.remaining / 16, "the note count")
        guard noteCount <= limits.maxNotes else { throw CRDTError(.limitExceeded, "more than \(limits.maxNotes) notes (\(noteCount))") }
        var notes: [NoteID] = []
        notes.reserveCapacity(noteCount)
        for _ in 0 ..< noteCount { notes.append(NoteID(Identifier128(bytes: try reader.raw(16))!)) }
        func replica(_ r: inout BinaryReader) throws -> ReplicaID {
            guard !replicas.isEmpty else { throw CRDTError(.malformedEncoding, "a replica is named but the replica table is empty") }
            return replicas[try r.count(max: replicas.count - 1, "a replica index")]
        }
        /// A sequence number read from the wire: 1 ... Change.maxSeq.
        func checkedSeq(_ seq: UInt64, _ what: @autoclosure () -> String) throws -> UInt64 {
            guard seq >= 1, seq <= Change.maxSeq else {
                throw CRDTError(.malformedEncoding, "\(what()) is at seq \(seq), outside 1 ... 2^53 - 1")
            }
            return seq
        }

        struct Header {
            var author: ReplicaID
            var startSeq: UInt64
            var timestamp: Timestamp
            var deps: VersionVector
            var opCount: Int
        }
        // Every header takes at least 5 bytes.
        let changeCount = try reader.count(max: reader.remaining / 5, "the change count")
        guard changeCount <= limits.maxChanges else { throw CRDTError(.limitExceeded, "more than \(limits.maxChanges) changes (\(changeCount))") }
        var headers: [Header] = []
        headers.reserveCapacity(changeCount)
        var totalOps = 0
        var totalDeps = 0
        for _ in 0 ..< changeCount {
            let author = try replica(&reader)
            let startSeq = try checkedSeq(try reader.varint(), "a change")
            let timestamp = Timestamp(rawValue: try reader.varint())
            let depCount = try reader.count(max: replicas.count, "a dependency count")
            totalDeps += depCount
            guard totalDeps <= limits.maxDependencies else {
                throw CRDTError(.limitExceeded, "more than \(limits.maxDependencies) dependencies in all")
            }
            var deps = VersionVector()
            for _ in 0 ..< depCount {
                let r = try replica(&reader)
                let seq = try reader.varint()
                guard seq <= Change.maxSeq else { throw CRDTError(.malformedEncoding, "a change depends on seq \(seq) of \(r), past 2^53 - 1") }
                // In the order written (by replica), so that building the vector is linear.
                guard deps.appendSorted(r, seq) else {
                    throw CRDTError(.malformedEncoding, "a change's dependencies are not in increasing order of replica")
                }
            }
            let opCount = try reader.count(max: reader.remaining * 4 + 4, "an operation count")
            totalOps += opCount
            guard totalOps <= limits.maxOperations else {
                throw CRDTError(.limitExceeded, "more than \(limits.maxOperations) operations in all")
            }
            guard totalOps <= reader.remaining * 4 + 4 else { throw CRDTError(.malformedEncoding, "more operations than the bytes can hold") }
            headers.append(Header(author: author, startSeq: startSeq, timestamp: timestamp, deps: deps, opCount: opCount))
        }
        func column(_ what: String) throws -> BinaryReader {
            try reader.reader(over: try reader.count(max: reader.remaining, "the length of the \(what) column"))
        }
        var kinds = TwoBitReader(try column("kinds"))
        var noteColumn = RunLengthReader(try column("notes"))
        var insertModes = TwoBitReader(try column("insert modes"))
        var deleteModes = TwoBitReader(try column("delete modes"))
        var lengths = try column("lengths")
        var explicit = try column("explicit values")
        // The text column is read in place, insert by insert (see `scalars(_:from:at:into:)`),
        // into one buffer for the whole body that every insert's text is a view of.
        let textBytes = try reader.raw(try reader.count(max: reader.remaining, "the length of the text column"))
        var textOffset = 0  // from the column's start
        var textRoom = scalarCapacity(lengths: lengths, textBytes: textBytes.count)
        var textBuffer = ScalarBuffer.make(capacity: min(textRoom, ScalarBuffer.maxCount))
        var totalScalars = 0
        var deleteSpan: UInt64 = 0
        /// Counts `count` more characters named by deletes against the limit.
        func deleting(_ count: UInt64) throws {
            deleteSpan += count  // both at most 2^53 - 1: no overflow
            guard deleteSpan <= limits.maxDeleteSpan else {
                throw CRDTError(.limitExceeded, "the deletes name more than \(limits.maxDeleteSpan) characters in all")
            }
        }
        func note() throws -> NoteID {
            guard !notes.isEmpty else { throw CRDTError(.malformedEncoding, "an operation names a note but the note table is empty") }
            let index = try noteColumn.next()
            guard index < UInt64(notes.count) else { throw CRDTError(.malformedEncoding, "note index \(index) is out of range") }
            return notes.withUnsafeBufferPointer { $0[Int(index)] }  // checked just above
        }

        var predictor = Predictor()
        // Deletes of one target each, gathered into one `deleteEach` (one array, not one per
        // delete); empty between changes, its storage kept for the next.
        var gathered = GatheredDeletes()
        var changes: [Change] = []
        changes.reserveCapacity(changeCount)
        for header in headers {
            // Bounded by the bytes and the limits: checked above.
            var change = Change(replica: header.author, startSeq: header.startSeq, timestamp: header.timestamp,
                                dependencies: header.deps, capacity: header.opCount)
            // The next operation's seq: at most Change.maxSeq + 1, checked as each operation takes
            // its seqs, so that every sum below stays far inside 64 bits.
            var seq = header.startSeq
            /// Takes `count` seqs for the operation at `seq`, refusing seqs past Change.maxSeq.
            func take(_ count: UInt64) throws {
                guard count <= Change.maxSeq + 1 - seq else {
                    throw CRDTError(.malformedEncoding, "a change from \(header.author) passes seq 2^53 - 1")
                }
                seq += count
            }
            for _ in 0 ..< header.opCount {
                guard let kind = Kind(rawValue: try kinds.next()) else { preconditionFailure() }
                guard seq <= Change.maxSeq else {
                    throw CRDTError(.malformedEncoding, "a change from \(header.author) passes seq 2^53 - 1")
                }
                let op: Operation
                switch kind {
                case .setNoteField:
                    let n = try note()
                    let field = try decodeField(&explicit)
                    op = .setNoteField(note: n, field: field, value: try decodeValue(&explicit))
                case .insertText:
                    let n = try note()
                    var origin: OpID? = nil
                    switch try insertModes.next() {
                    case 0: origin = nil
                    case 1:
                        let r = try replica(&explicit)
                        let originSeq = seq &- UInt64(bitPattern: try explicit.signedVarint())
                        origin = OpID(replica: r, seq: try checkedSeq(originSeq, "an insert's origin"))
                    case 2:
                        guard let before = predictor.predecessor(of: predictor.lastDeleted) else {
                            throw CRDTError(.malformedEncoding, "an insert refers to a delete that is not there")
                        }
                        origin = before
                    default:
                        guard let last = predictor.lastInsertEnd else { throw CRDTError(.malformedEncoding, "an insert refers to an earlier insert that is not there") }
                        origin = last
                    }
                    let count = try lengths.count(max: textBytes.count - textOffset, "an insert's length")
                    guard count > 0 else { throw CRDTError(.malformedEncoding, "an insert of no characters") }
                    totalScalars += count
                    guard totalScalars <= limits.maxScalars else {
                        throw CRDTError(.limitExceeded, "the inserts hold more than \(limits.maxScalars) characters in all")
                    }
                    if count > textBuffer.room - textBuffer.written {
                        // Past what a buffer holds (2^32 - 1 scalars): the rest goes to another.
                        guard count <= ScalarBuffer.maxCount else {
                            throw CRDTError(.limitExceeded, "an insert of more than \(ScalarBuffer.maxCount) characters")
                        }
                        textRoom -= textBuffer.written
                        textBuffer = ScalarBuffer.make(capacity: min(textRoom, ScalarBuffer.maxCount), wide: textBuffer.isWide)
                    }
                    let textStart = textOffset
                    let text = try scalars(count, from: textBytes, at: &textOffset, into: textBuffer)
                    if textOffset - textStart > count, !textBuffer.isWide,
                       ScalarBuffer.prefersWide(count: textBuffer.written, wideScalars: textBuffer.wideTotal) {
                        // Mostly scalars past U+007F so far: the next inserts go to a wide buffer.
                        textRoom -= textBuffer.written
                        textBuffer = ScalarBuffer.make(capacity: min(textRoom, ScalarBuffer.maxCount), wide: true)
                    }
                    let start = seq
                    try take(UInt64(count))
                    predictor.inserted(OpID(replica: header.author, seq: start), count: UInt64(count))
                    if let deletes = gathered.take() { change.appendGathered(deletes) }
                    change.appendInsert(note: n, origin: origin, text: text)
                    continue
                case .deleteText:
                    let n = try note()
                    let single: OpIDRange
                    switch try deleteModes.next() {
                    case 0:
                        let targetCount = try explicit.count(max: explicit.remaining / 3, "a delete's target count")
                        if targetCount == 0 {
                            // A run of deletes (format 3): its shape, then its first delete's target.
                            let shape = try explicit.varint()
                            guard shape >> 1 <= DeleteRun.maxLength - 2 else {
                                throw CRDTError(.malformedEncoding, "a run of \(shape >> 1) deletes is longer than a run can be (2^31 - 1)")
                            }
                            let count = (shape >> 1) + 2
                            let forward = shape & 1 == 1
                            let first: OpID
                            switch try deleteModes.next() {
                            case 0:
                                let r = try replica(&explicit)
                                let targetSeq = seq &- UInt64(bitPattern: try explicit.signedVarint())
                                first = OpID(replica: r, seq: try checkedSeq(targetSeq, "a run of deletes"))
                            case 1:
                                guard let last = predictor.lastInsertEnd else { throw CRDTError(.malformedEncoding, "a delete refers to an insert that is not there") }
                                first = last
                            case 2:
                                guard let before = predictor.predecessor(of: predictor.lastDeleted) else {
                                    throw CRDTError(.malformedEncoding, "a delete refers to a delete that is not there")
                                }
                                first = before
                            default:
                                guard let after = predictor.successor(of: predictor.lastDeleted) else {
                                    throw CRDTError(.malformedEncoding, "a delete refers to a delete that is not there")
                                }
                                first = after
                            }
                            // Both at most 2^53 - 1 (first) and 2^31 - 1 (count): no overflow.
                            guard forward ? first.seq + count - 1 <= Change.maxSeq : first.seq >= count else {
                                throw CRDTError(.malformedEncoding, "a run of \(count) deletes from seq \(first.seq) goes outside 1 ... 2^53 - 1")
                            }
                            try deleting(count)
                            try take(count)
                            let run = forward
                                ? DeleteRun(range: OpIDRange(replica: first.replica, seq: first.seq, count: count), order: .forward)
                                : DeleteRun(range: OpIDRange(replica: first.replica, seq: first.seq - (count - 1), count: count), order: .backward)
                            let last = run.target(count - 1)
                            predictor.lastDeleted = OpID(replica: last.replica, seq: last.seq)
                            if gathered.note != n, let deletes = gathered.take() { change.appendGathered(deletes) }
                            gathered.add(run, in: n)
                            continue
                        }
                        totalOps += targetCount - 1
                        guard totalOps <= limits.maxOperations else {
                            throw CRDTError(.limitExceeded, "more than \(limits.maxOperations) operations and delete targets in all")
                        }
                        /// The next explicit target.
                        func target() throws -> OpIDRange {
                            let r = try replica(&explicit)
                            let targetSeq = try checkedSeq(seq &- UInt64(bitPattern: try explicit.signedVarint()), "a delete's target")
                            let count = try explicit.varint()
                            guard count >= 1, count <= Change.maxSeq - targetSeq + 1 else {
                                throw CRDTError(.malformedEncoding, "a delete of \(count) characters from seq \(targetSeq) is empty or passes 2^53 - 1")
                            }
                            try deleting(count)
                            return OpIDRange(replica: r, seq: targetSeq, count: count)
                        }
                        // A lone target (the usual explicit delete) is gathered as it is: an array
                        // for it was allocated and dropped at every such delete.
                        guard targetCount == 1 else {
                            var targets: [OpIDRange] = []
                            targets.reserveCapacity(targetCount)
                            for _ in 0 ..< targetCount { targets.append(try target()) }
                            predictor.lastDeleted = OpID(replica: targets[0].replica, seq: targets[0].seq)
                            if let deletes = gathered.take() { change.appendGathered(deletes) }
                            try take(1)
                            change.appendJoining(.deleteText(note: n, targets: targets))
                            continue
                        }
                        single = try target()
                    case 1:
                        guard let last = predictor.lastInsertEnd else { throw CRDTError(.malformedEncoding, "a delete refers to an insert that is not there") }
                        single = OpIDRange(replica: last.replica, seq: last.seq, count: 1)
                        try deleting(1)
                    case 2:
                        guard let before = predictor.predecessor(of: predictor.lastDeleted) else {
                            throw CRDTError(.malformedEncoding, "a delete refers to a delete that is not there")
                        }
                        single = OpIDRange(replica: before.replica, seq: before.seq, count: 1)
                        try deleting(1)
                    default:
                        guard let after = predictor.successor(of: predictor.lastDeleted) else {
                            throw CRDTError(.malformedEncoding, "a delete refers to a delete that is not there")
                        }
                        single = OpIDRange(replica: after.replica, seq: after.seq, count: 1)
                        try deleting(1)
                    }
                    predictor.lastDeleted = OpID(replica: single.replica, seq: single.seq)
                    if gathered.note != n, let deletes = gathered.take() { change.appendGathered(deletes) }
                    gathered.add(single, in: n)
                    try take(1)
                    continue
                case .setTagField:
                    let tag = try explicit.string()
                    let code = try explicit.byte()
                    if code == ChangeCodec.reissueField, tag.isEmpty {
                        let r = try replica(&explicit)
                        let first = try checkedSeq(seq &- UInt64(bitPattern: try explicit.signedVarint()), "a re-issue")
                        let count = try explicit.varint()
                        guard count >= 1, count <= Change.maxSeq - first + 1 else {
                            throw CRDTError(.malformedEncoding, "a re-issue of \(count) operations from seq \(first) is empty or passes 2^53 - 1")
                        }
                        op = .reissue(of: OpIDRange(replica: r, seq: first, count: count))
                        try take(1)
                        if let deletes = gathered.take() { change.appendGathered(deletes) }
                        change.appendJoining(op)
                        continue
                    }
                    guard let field = TagField(rawValue: code) else {
                        throw CRDTError(.malformedEncoding, "unknown tag field \(code) at byte \(explicit.offset - 1)")
                    }
                    op = .setTagField(tag: tag, field: field, value: try decodeValue(&explicit))
                }
                try take(1)
                if let deletes = gathered.take() { change.appendGathered(deletes) }
                change.appendJoining(op)
            }
            if let deletes = gathered.take() { change.appendGathered(deletes) }
            do { try Notebook.checkShape(change) } catch let error as CRDTError {
                throw CRDTError(.malformedEncoding, "a change from \(header.author) is malformed: \(error.message)")
            }
            changes.append(change)
        }
        guard textOffset == textBytes.count else { throw CRDTError(.malformedEncoding, "text left over after the last insert") }
        guard lengths.isAtEnd, explicit.isAtEnd else { throw CRDTError(.malformedEncoding, "values left over after the last operation") }
        used = Usage(changes: changeCount, dependencies: totalDeps, operations: totalOps, scalars: totalScalars, deleteSpan: deleteSpan)
        return changes
    }

    /// Room for the scalars the inserts of a body decode: the sum of the lengths column (what
    /// the inserts claim), at most one scalar per text byte. (Each insert's length is checked
    /// against the bytes left before it is decoded, so the inserts never decode more than this:
    /// they read a prefix of the same lengths, and take at least a byte per scalar.)
    static func scalarCapacity(lengths: BinaryReader, textBytes: Int) -> Int {
        var scan = lengths
        var total = 0
        while !scan.isAtEnd, total < textBytes, let length = try? scan.varint() {
            total = length >= UInt64(textBytes - total) ? textBytes : total + Int(length)
        }
        return total
    }

    /// Decodes the next `count` scalars of the UTF-8 in `bytes` from `offset` on (advanced past
    /// them) into `buffer`, after what it holds, and returns them as a view of it. Checked as they
    /// are decoded: no overlong forms, surrogates or values past U+10FFFF. (A string's scalar
    /// iterator is general and slower; an array per insert was allocated, zero-filled, filled,
    /// copied into the text's arena and freed again.)
    static func scalars(_ count: Int, from bytes: ArraySlice<UInt8>, at offset: inout Int, into buffer: ScalarBuffer) throws -> InsertedText {
        var failure: String?
        let first = buffer.written
        guard count <= buffer.room - first else {
            throw CRDTError(.malformedEncoding, "the inserts claim more text than there is")
        }
        var decoded = 0
        // A compact buffer's scalars past U+007F, appended to its table after the loop.
        var escaped: [UInt64] = []
        if !buffer.isWide {
            bytes.withUnsafeBufferPointer { utf8 in
                buffer.withUnsafeMutablePointerToElements { elements in
                    let out = elements + first
                    var i = offset
                    var n = 0
                    let end = utf8.count
                    let base = utf8.baseAddress!
                    while n < count {
                        // ASCII bytes are the scalars' bytes: copied sixteen, then eight, at a time.
                        while n + 16 <= count, i + 16 <= end {
                            let low = UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)
                            let high = UnsafeRawPointer(base + i + 8).loadUnaligned(as: UInt64.self)
                            guard (low | high) & 0x8080_8080_8080_8080 == 0 else { break }
                            UnsafeMutableRawPointer(out + n).storeBytes(of: low, as: UInt64.self)
                            UnsafeMutableRawPointer(out + n + 8).storeBytes(of: high, as: UInt64.self)
                            i += 16
                            n += 16
                        }
                        while n + 8 <= count, i + 8 <= end {
                            let word = UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)
                            guard word & 0x8080_8080_8080_8080 == 0 else { break }
                            UnsafeMutableRawPointer(out + n).storeBytes(of: word, as: UInt64.self)
                            i += 8
                            n += 8
                        }
                        guard n < count, i < end else { break }
                        let lead = utf8[i]
                        if lead < 0x80 {
                            out[n] = lead
                            i += 1
                            n += 1
                            continue
                        }
                        guard let (value, width) = multibyteScalar(utf8, at: i) else {
                            failure = "inserted text is not valid UTF-8"
                            break
                        }
                        out[n] = ScalarBuffer.escape
                        escaped.append(UInt64(first + n) << 32 | UInt64(value))
                        i += width
                        n += 1
                    }
                    decoded = n
                    offset = i
                }
            }
        } else {
            bytes.withUnsafeBufferPointer { utf8 in
                do {
                    let out = UnsafeMutableBufferPointer(start: buffer.wideElements + first, count: count)
                    var i = offset
                    var n = 0
                    let end = utf8.count
                    let base = utf8.baseAddress!
                    while n < count {
                        // Sixteen ASCII bytes at a time, widened in vector registers, the usual case.
                        while n + 16 <= count, i + 16 <= end {
                            // The ASCII test on two words: `SIMD16.max()` is a call, not inlined.
                            let low = UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)
                            let high = UnsafeRawPointer(base + i + 8).loadUnaligned(as: UInt64.self)
                            guard (low | high) & 0x8080_8080_8080_8080 == 0 else { break }
                            let bytes = UnsafeRawPointer(base + i).loadUnaligned(as: SIMD16<UInt8>.self)
                            UnsafeMutableRawPointer(out.baseAddress! + n).storeBytes(of: SIMD16<UInt32>(truncatingIfNeeded: bytes), as: SIMD16<UInt32>.self)
                            i += 16
                            n += 16
                        }
                        // Then eight.
                        while n + 8 <= count, i + 8 <= end {
                            let word = UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)
                            guard word & 0x8080_8080_8080_8080 == 0 else { break }
                            for k in 0 ..< 8 {
                                (out.baseAddress! + n + k).initialize(to: Unicode.Scalar(UInt8(truncatingIfNeeded: word >> (8 * UInt64(k)))))
                            }
                            i += 8
                            n += 8
                        }
                        guard n < count, i < end else { break }
                        let lead = utf8[i]
                        if lead < 0x80 {
                            (out.baseAddress! + n).initialize(to: Unicode.Scalar(lead))
                            i += 1
                            n += 1
                            continue
                        }
                        guard let (value, width) = multibyteScalar(utf8, at: i) else {
                            failure = "inserted text is not valid UTF-8"
                            break
                        }
                        (out.baseAddress! + n).initialize(to: Unicode.Scalar(value)!)
                        i += width
                        n += 1
                    }
                    decoded = n
                    offset = i
                }
            }
        }
        if let failure { throw CRDTError(.malformedEncoding, failure) }
        guard decoded == count else { throw CRDTError(.malformedEncoding, "the inserts claim more text than there is") }
        if !escaped.isEmpty { buffer.withUnsafeMutablePointerToHeader { $0.pointee.wide.append(contentsOf: escaped) } }
        buffer.written = first + count
        return InsertedText(buffer: buffer, start: first, count: count)
    }

    /// The scalar value of the multi-byte UTF-8 sequence at `i` and its length in bytes, or nil
    /// when it is not well formed (a bad lead or continuation byte, an overlong form, a surrogate,
    /// a value past U+10FFFF, or the end of the bytes inside it).
    private static func multibyteScalar(_ utf8: UnsafeBufferPointer<UInt8>, at i: Int) -> (UInt32, Int)? {
        let lead = utf8[i]
        let width: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        var value: UInt32
        switch lead {
        case 0xC2 ... 0xDF:
            width = 2
            value = UInt32(lead & 0x1F)
        case 0xE0 ... 0xEF:
            width = 3
            value = UInt32(lead & 0x0F)
            if lead == 0xE0 { low = 0xA0 } else if lead == 0xED { high = 0x9F }
        case 0xF0 ... 0xF4:
            width = 4
            value = UInt32(lead & 0x07)
            if lead == 0xF0 { low = 0x90 } else if lead == 0xF4 { high = 0x8F }
        default:
            return nil
        }
        guard i + width <= utf8.count else { return nil }
        for k in 1 ..< width {
            let byte = utf8[i + k]
            guard byte >= (k == 1 ? low : 0x80), byte <= (k == 1 ? high : 0xBF) else { return nil }
            value = value << 6 | UInt32(byte & 0x3F)
        }
        return (value, width)
    }

    /// Decodes changes from bytes that hold nothing else.
    public static func decode(_ bytes: [UInt8], limits: Limits = .unlimited) throws -> [Change] {
        var reader = BinaryReader(bytes)
        let changes = try decode(from: &reader, limits: limits)
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

/// Keys numbered in the order they were first added: the replica and note tables of an encoding.
/// Searched linearly while short (a change or a bundle names a handful), with a dictionary beside
/// the list once it grows, so encoding one change builds no hash table.
struct FirstUseIndex<Key: Hashable & Sendable>: Sendable {
    private(set) var keys: [Key] = []
    private var lookup: [Key: Int]?

    static var linearLimit: Int { 16 }

    /// Forgets every key, keeping the storage.
    mutating func removeAll() {
        keys.removeAll(keepingCapacity: true)
        lookup = nil
    }

    /// Numbers `key` if it is new.
    mutating func add(_ key: Key) {
        guard index(of: key) == nil else { return }
        keys.append(key)
        if var table = lookup {
            lookup = nil
            table[key] = keys.count - 1
            lookup = table
        } else if keys.count > Self.linearLimit {
            lookup = Dictionary(uniqueKeysWithValues: keys.enumerated().map { ($1, $0) })
        }
    }

    func index(of key: Key) -> Int? {
        if let lookup { return lookup[key] }
        for i in keys.indices where keys[i] == key { return i }
        return nil
    }

    /// The number of a key that was added.
    subscript(key: Key) -> Int { index(of: key)! }
}

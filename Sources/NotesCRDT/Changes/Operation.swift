/// One operation of a change. An insert of *n* characters consumes *n* sequence numbers (every
/// character has its own identity); every other operation consumes one.
public enum Operation: Hashable, Sendable {
    /// Writes a last-writer-wins field of a note (creating the note if it is new).
    case setNoteField(note: NoteID, field: NoteField, value: FieldValue)
    /// Inserts characters into a note's body after `origin` (nil: at the start). The first
    /// character's identity is the operation's; each following character comes after the previous.
    /// `text` is an `InsertedText`, a view that may share its buffer with other inserts: a decoder
    /// holds all the text of one encoding in one buffer (so a decoded change, kept, keeps that whole
    /// buffer alive). Make one from an array, a string, a slice of another or a literal.
    case insertText(note: NoteID, origin: OpID?, text: InsertedText)
    /// Deletes the characters with these identities from a note's body.
    case deleteText(note: NoteID, targets: [OpIDRange])
    /// Consecutive deletes of one range each, held as one value and run-length encoded: each run
    /// stands for `operationCount` deletes with consecutive sequence numbers, exactly as that many
    /// `deleteText`s of one target each would (see `DeleteRun`). A change joins such deletes
    /// (backspacing makes thousands of them), so the log, the decoder and the merge do not handle
    /// one value, with one array, per deleted character. A change never holds one that stands for a
    /// single delete (that is a `deleteText`).
    case deleteEach(note: NoteID, runs: [DeleteRun])
    /// Writes a field of a tag entity, by tag key.
    case setTagField(tag: String, field: TagField, value: FieldValue)
    /// Re-issues operations that a copy of another replica's database wrote under that replica's
    /// identity, and withdraws them there: the rest of this change (exactly `of.count` seqs, after
    /// this one) holds them again, in order, as this replica's, with their timestamps, and with
    /// every reference into the range renamed. A replica that holds the same operations under the
    /// old identity drops them there (Docs/Architecture.md, "Copied replicas"). Always a change's
    /// first operation; made by a store that finds its own branch of a forked identity.
    case reissue(of: OpIDRange)

    /// How many sequence numbers the operation consumes (at most `UInt64.max`: the runs of a
    /// `deleteEach` made by hand could stand for more, and a change refuses that shape).
    public var seqCount: UInt64 {
        switch self {
        case .insertText(_, _, let text): UInt64(text.count)
        case .deleteEach(_, let runs): runs.operationCount
        case .setNoteField, .deleteText, .setTagField, .reissue: 1
        }
    }

    /// The range a delete of exactly one target removes (nil for anything else).
    var singleDeleteTarget: (note: NoteID, target: OpIDRange)? {
        if case .deleteText(let note, let targets) = self, targets.count == 1 { return (note, targets[0]) }
        return nil
    }

    /// An insert's text, else empty, without retaining its buffer. (Binding a payload in a switch
    /// over an operation in a buffer copies the whole operation, through its value witness; only
    /// trivial values leave this match, so the operation is borrowed: see `UnretainedText`.)
    var unretainedInsertedText: UnretainedText {
        if case .insertText(_, _, let text) = self {
            return UnretainedText(buffer: .passUnretained(text.buffer), start: text.start, count: text.count)
        }
        return UnretainedText(buffer: .passUnretained(ScalarBuffer.empty), start: 0, count: 0)
    }

    /// How many targets a `deleteText` has, or runs a `deleteEach`, else 0; with `deleteTarget(_:)`
    /// and `deleteRun(_:)`, read without retaining the array (only trivial values leave the match).
    var deletePartCount: Int {
        switch self {
        case .deleteText(_, let targets): targets.count
        case .deleteEach(_, let runs): runs.count
        default: 0
        }
    }

    /// Target `i` of a `deleteText` (`i` below `deletePartCount`).
    func deleteTarget(_ i: Int) -> OpIDRange {
        guard case .deleteText(_, let targets) = self else { preconditionFailure("not a deleteText") }
        return targets[i]
    }

    /// Run `i` of a `deleteEach` (`i` below `deletePartCount`).
    func deleteRun(_ i: Int) -> DeleteRun {
        guard case .deleteEach(_, let runs) = self else { preconditionFailure("not a deleteEach") }
        return runs[i]
    }

    /// The note the operation touches, if any.
    public var note: NoteID? {
        switch self {
        case .setNoteField(let note, _, _), .insertText(let note, _, _), .deleteText(let note, _), .deleteEach(let note, _): note
        case .setTagField, .reissue: nil
        }
    }
}

/// The unit of the log and of exchange: consecutive operations of one replica.
///
/// Operation *i* has the sequence numbers that follow those of operation *i - 1*, and its
/// timestamp is `timestamp` advanced by the same distance, so one change carries one timestamp.
public struct Change: Hashable, Sendable {
    /// The largest sequence number a change may use, or refer to: 2^53 - 1.
    ///
    /// A replica makes one sequence number per operation, so no honest replica comes near it.
    /// Anything beyond it is refused as malformed (by the decoder before it is used, by
    /// `Notebook.apply` for a change made by hand), so that the sum of two sequence numbers or
    /// counts never overflows 64 bits, and every sequence number is exact in JSON (a double).
    public static let maxSeq: UInt64 = 1 << 53 - 1

    /// The replica that made the change.
    public let replica: ReplicaID
    /// The sequence number of the first operation.
    public let startSeq: UInt64
    /// The timestamp of the first operation; the rest follow one per sequence number.
    public let timestamp: Timestamp
    /// What the author had applied from other replicas when it made the change. (Its own earlier
    /// operations, `1 ..< startSeq`, are implied.)
    public let dependencies: VersionVector
    /// The operations, in order.
    public private(set) var operations: [Operation]
    /// How many sequence numbers the change covers.
    public private(set) var seqCount: UInt64
    /// What is wrong with the first malformed operation appended (an insert of no text, a delete
    /// of an empty range...), found as each is appended, so that `Notebook.checkShape` need not
    /// walk the operations again. Nil when every operation is well formed.
    private(set) var shapeProblem: String?
    /// One past the last seq that the change's re-issue operations cover (`Operation.reissue`:
    /// each covers the seqs right after it), 0 when it has none; checked against the change's
    /// end by `Notebook.checkShape`, once the change is whole.
    private(set) var reissueEnd: UInt64 = 0

    /// Whether the change holds a re-issue (`Operation.reissue`).
    package var containsReissue: Bool { reissueEnd > 0 }

    /// Creates a change. The operations must not be empty.
    public init(replica: ReplicaID, startSeq: UInt64, timestamp: Timestamp, dependencies: VersionVector,
                operations: [Operation]) {
        self.init(replica: replica, startSeq: startSeq, timestamp: timestamp, dependencies: dependencies,
                  capacity: operations.count)
        for op in operations { appendJoining(op) }  // joined, so equal changes are equal values
    }

    /// An empty change, filled by `appendJoining(_:)` (the decoder builds changes so, in one pass).
    init(replica: ReplicaID, startSeq: UInt64, timestamp: Timestamp, dependencies: VersionVector, capacity: Int) {
        self.replica = replica
        self.startSeq = startSeq
        self.timestamp = timestamp
        var deps = dependencies
        deps[replica] = 0
        self.dependencies = deps
        self.operations = []
        self.operations.reserveCapacity(capacity)
        self.seqCount = 0
        self.shapeProblem = nil
    }

    /// The last sequence number the change covers. (Wrapping: only a malformed change, which
    /// `Notebook.apply` refuses, has one that does not fit.)
    public var endSeq: UInt64 { startSeq &+ seqCount &- 1 }

    /// The identities the change covers.
    public var idRange: OpIDRange { OpIDRange(replica: replica, seq: startSeq, count: seqCount) }

    /// The timestamp of the operation with sequence number `seq`.
    public func timestamp(ofSeq seq: UInt64) -> Timestamp { timestamp.advanced(by: seq - startSeq) }

    /// The full causal context: the dependencies plus the author's own earlier operations.
    public var context: VersionVector {
        var vv = dependencies
        vv[replica] = startSeq &- 1  // (wrapping only for a malformed change at seq 0)
        return vv
    }

    /// The part of the change from sequence number `seq` on (an insert that straddles `seq` is cut,
    /// its remaining characters keeping their identities and origins). Nil when nothing is left.
    public func suffix(from seq: UInt64) -> Change? {
        if seq <= startSeq { return self }
        if seq > endSeq { return nil }
        // Walk back from the end: a suffix is usually short (the last few edits of a long log entry).
        var index = operations.count
        var opSeq = startSeq + seqCount
        while index > 0, opSeq > seq {
            index -= 1
            opSeq -= operations[index].seqCount
        }
        // Now operations[index] starts at opSeq <= seq and everything after it is kept.
        var ops: [Operation] = []
        ops.reserveCapacity(operations.count - index)
        for (offset, op) in operations[index...].enumerated() {
            if offset == 0, opSeq < seq {
                let skip = Int(seq - opSeq)
                switch op {
                case .insertText(let note, _, let text):
                    ops.append(.insertText(note: note, origin: OpID(replica: replica, seq: seq - 1), text: InsertedText(text[skip...])))
                case .deleteEach(let note, let runs):
                    // Drop the first `skip` deletes: whole runs, then part of the run they end in.
                    var remaining = UInt64(skip)
                    var rest: [DeleteRun] = []
                    for run in runs {
                        if remaining >= run.operationCount {
                            remaining -= run.operationCount
                        } else {
                            rest.append(remaining > 0 ? run.dropping(remaining) : run)
                            remaining = 0
                        }
                    }
                    ops.append(rest.operationCount == 1 ? .deleteText(note: note, targets: [rest[0].range])
                                                        : .deleteEach(note: note, runs: rest))
                default:
                    continue
                }
            } else {
                ops.append(op)
            }
        }
        return Change(replica: replica, startSeq: seq, timestamp: timestamp(ofSeq: seq), dependencies: dependencies, operations: ops)
    }

    /// The part of the change through sequence number `seq`, which must be one of its own (itself
    /// when it ends there): an insert or a run of deletes that straddles `seq` is cut, keeping its
    /// first characters or deletes; a re-issue keeps the operations kept after it (one that
    /// keeps none is dropped: the prefix then ends before `seq`, and may be empty).
    public func prefix(through seq: UInt64) -> Change {
        if seq >= endSeq { return self }
        precondition(seq >= startSeq, "a prefix of a change must keep something")
        var ops: [Operation] = []
        var opSeq = startSeq
        for op in operations {
            guard opSeq <= seq else { break }
            let count = op.seqCount
            if case .reissue(let range) = op, opSeq + range.count > seq {
                // A re-issue cut to the operations kept after it (none: dropped, and the prefix
                // ends before it), or it would re-issue past the change's end.
                if seq > opSeq { ops.append(.reissue(of: OpIDRange(replica: range.replica, seq: range.seq, count: seq - opSeq))) }
            } else if opSeq + count - 1 <= seq {
                ops.append(op)
            } else {
                let keep = seq - opSeq + 1  // at least 1, fewer than the operation's seqs
                switch op {
                case .insertText(let note, let origin, let text):
                    ops.append(.insertText(note: note, origin: origin, text: InsertedText(text[..<Int(keep)])))
                case .deleteEach(let note, let runs):
                    var kept: [DeleteRun] = []
                    var left = keep
                    for run in runs where left > 0 {
                        if run.operationCount <= left {
                            kept.append(run)
                            left -= run.operationCount
                        } else {
                            kept.append(run.keeping(left))
                            left = 0
                        }
                    }
                    ops.append(kept.operationCount == 1 ? .deleteText(note: note, targets: [kept[0].range])
                                                        : .deleteEach(note: note, runs: kept))
                default:
                    break
                }
            }
            opSeq += count
        }
        return Change(replica: replica, startSeq: startSeq, timestamp: timestamp, dependencies: dependencies, operations: ops)
    }

    /// Appends the operations of `next`, which must directly follow this change (same replica,
    /// the next sequence number and timestamp, the same dependencies). Inserts that continue the
    /// previous insert are joined into one operation.
    ///
    /// - Returns: false (and changes nothing) when `next` does not directly follow.
    mutating func append(_ next: Change) -> Bool {
        guard next.replica == replica, next.startSeq == startSeq &+ seqCount,
              next.timestamp == timestamp.advanced(by: seqCount), next.dependencies == dependencies else { return false }
        for op in next.operations { appendJoining(op) }
        return true
    }

    /// Appends one operation: an insert that continues the last insert extends it, and deletes of
    /// one target each join into a `deleteEach`.
    mutating func appendJoining(_ op: consuming Operation) {
        // Wrapping: a decoder builds changes before `Notebook.checkShape` rejects impossible seqs.
        let lastSeq = startSeq &+ seqCount &- 1
        let (total, overflow) = seqCount.addingReportingOverflow(op.seqCount)
        seqCount = overflow ? .max : total
        if shapeProblem == nil, overflow || total > Change.maxSeq {
            shapeProblem = "a change covers more than 2^53 - 1 sequence numbers"
        }
        if shapeProblem == nil { shapeProblem = op.shapeProblem }
        if shapeProblem == nil, case .reissue(let range) = op {
            // The operation's seq is lastSeq + 1; both are at most 2^53, so no sum here overflows.
            if range.replica == replica { shapeProblem = "a change re-issues operations of its own author" }
            reissueEnd = max(reissueEnd, lastSeq &+ 2 &+ range.count)
        }
        guard shapeProblem == nil else {
            // Kept as they come, not joined: joining does arithmetic on ranges that may be
            // anything (the change is refused as malformed anyway).
            operations.append(op)
            return
        }
        if case .insertText(let note2, let origin2, let more) = op, origin2 == OpID(replica: replica, seq: lastSeq),
           lastInsertNote == note2 {
            extendLastInsert(with: more)
        } else if let (note, target) = op.singleDeleteTarget, lastJoinsDelete(on: note) {
            extendLastDelete(with: target)
        } else if case .deleteEach(let note, let runs) = op, lastJoinsDelete(on: note) {
            extendLastDelete(with: runs)
        } else if case .deleteEach(let note, let runs) = op, !runs.isEmpty, (runs.count == 1 && runs[0].operationCount == 1) || !runs.isJoined {
            // Runs made by hand, not as joining their deletes makes them: joined again, so that
            // the same deletes are one value (and what a decoder gives back).
            var joined: [DeleteRun] = []
            for run in runs { joined.appendDeletes(of: run) }
            operations.append(joined.count == 1 && joined[0].operationCount == 1
                ? .deleteText(note: note, targets: [joined[0].range]) : .deleteEach(note: note, runs: joined))
        } else {
            operations.append(op)
        }
    }

    /// `appendJoining` of the deletes a decoder gathered (`GatheredDeletes`): a lone delete or runs
    /// joined already, which never join the operation before them (the decoder takes them out
    /// whenever another operation, or another note's delete, comes between). Their shape is
    /// checked as `appendJoining` checks it.
    mutating func appendGathered(_ op: consuming Operation) {
        let (total, overflow) = seqCount.addingReportingOverflow(op.seqCount)
        seqCount = overflow ? .max : total
        if shapeProblem == nil, overflow || total > Change.maxSeq {
            shapeProblem = "a change covers more than 2^53 - 1 sequence numbers"
        }
        if shapeProblem == nil { shapeProblem = op.shapeProblem }
        assert(shapeProblem != nil || op.note.map { !lastJoinsDelete(on: $0) } ?? true, "gathered deletes that join the operation before")
        operations.append(op)
    }

    /// `appendJoining(.insertText(note:origin:text:))`, for the decoder: the insert's shape is
    /// checked and the join decided from its parts, not by building the operation and matching it
    /// again (each match copied it, retaining its text).
    mutating func appendInsert(note: NoteID, origin: OpID?, text: consuming InsertedText) {
        let lastSeq = startSeq &+ seqCount &- 1
        let (total, overflow) = seqCount.addingReportingOverflow(UInt64(text.count))
        seqCount = overflow ? .max : total
        if shapeProblem == nil, overflow || total > Change.maxSeq {
            shapeProblem = "a change covers more than 2^53 - 1 sequence numbers"
        }
        if shapeProblem == nil {
            if text.isEmpty {
                shapeProblem = "an insert with no text"
            } else if let origin, origin.seq == 0 {
                shapeProblem = "an insert after seq 0"
            } else if let origin, origin.seq > Change.maxSeq {
                shapeProblem = "an insert after seq \(origin.seq), past 2^53 - 1"
            }
        }
        if shapeProblem == nil, origin == OpID(replica: replica, seq: lastSeq), lastInsertNote == note {
            extendLastInsert(with: text)
        } else {
            operations.append(.insertText(note: note, origin: origin, text: text))
        }
    }

    /// Turns the last operation (a delete of one target, or a `deleteEach`) into a `deleteEach`
    /// with a delete of `target` after it, without copying its runs.
    private mutating func extendLastDelete(with target: OpIDRange) {
        extendLastDelete { $0.appendDelete(target) }
    }

    /// Turns the last operation (a delete of one target, or a `deleteEach`) into a `deleteEach`
    /// with the deletes of `more` after it, as if appended one by one.
    private mutating func extendLastDelete(with more: [DeleteRun]) {
        extendLastDelete { runs in
            for run in more { runs.appendDeletes(of: run) }
        }
    }

    private mutating func extendLastDelete(_ extend: (inout [DeleteRun]) -> Void) {
        switch operations.removeLast() {
        case .deleteText(let note, let targets):
            var runs = [DeleteRun(targets[0])]
            extend(&runs)
            operations.append(.deleteEach(note: note, runs: runs))
        case .deleteEach(let note, var runs):
            extend(&runs)
            operations.append(.deleteEach(note: note, runs: runs))
        default:
            preconditionFailure("only a delete is extended")
        }
    }

    /// The note of the last operation when it is an insert. (Read in place: a copy of the
    /// operation retains and releases its payload.)
    private var lastInsertNote: NoteID? {
        operations.withUnsafeBufferPointer { ops in
            guard !ops.isEmpty, case .insertText(let note, _, _) = ops[ops.count - 1] else { return nil }
            return note
        }
    }

    /// Whether a delete of one target on `note` joins the last operation (read in place).
    private func lastJoinsDelete(on note: NoteID) -> Bool {
        operations.withUnsafeBufferPointer { ops in
            guard !ops.isEmpty else { return false }
            switch ops[ops.count - 1] {
            case .deleteText(let n, let targets): return n == note && targets.count == 1
            case .deleteEach(let n, _): return n == note
            default: return false
            }
        }
    }

    /// Appends characters to the last operation, an insert, without copying its text: a decoded
    /// insert that follows it in the same buffer widens its view; otherwise the operation is taken
    /// out of the array, so its text's buffer is uniquely referenced when it grows.
    private mutating func extendLastInsert(with more: InsertedText) {
        guard case .insertText(let note, let origin, var text) = operations.removeLast() else { preconditionFailure() }
        text.append(contentsOf: more)
        operations.append(.insertText(note: note, origin: origin, text: text))
    }
}

extension OpIDRange {
    /// Whether the range is non-empty and within `1 ... Change.maxSeq` (so that its end, and
    /// anything computed from it, is in range).
    var isWellFormed: Bool {
        count > 0 && seq > 0 && seq <= Change.maxSeq && count <= Change.maxSeq - seq + 1
    }
}

extension Operation {
    /// What is wrong with the operation's shape, whatever state it is applied to, or nil.
    var shapeProblem: String? {
        switch self {
        case .insertText(_, let origin, let text):
            if text.isEmpty { return "an insert with no text" }
            if let origin, origin.seq == 0 { return "an insert after seq 0" }
            if let origin, origin.seq > Change.maxSeq { return "an insert after seq \(origin.seq), past 2^53 - 1" }
        case .deleteText(_, let targets):
            if targets.isEmpty { return "a delete with no targets" }
            for t in targets where !t.isWellFormed {
                return "a delete of \(t.count) characters from seq \(t.seq): empty, or outside 1 ... 2^53 - 1"
            }
        case .deleteEach(_, let runs):
            if runs.isEmpty { return "a delete with no targets" }
            for run in runs where !run.range.isWellFormed || (run.order != .whole && run.range.count > DeleteRun.maxLength) {
                return "a run of \(run.range.count) deletes from seq \(run.range.seq): empty, longer than 2^31 - 1, or outside 1 ... 2^53 - 1"
            }
        case .reissue(let range):
            if !range.isWellFormed { return "a re-issue of \(range.count) operations from seq \(range.seq): empty, or outside 1 ... 2^53 - 1" }
        case .setNoteField, .setTagField:
            break
        }
        return nil
    }
}

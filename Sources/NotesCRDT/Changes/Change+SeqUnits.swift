extension Change {
    /// What one sequence number of a change does, spelled one way whatever joins and cuts the
    /// change went through: an insert's character with the identity it follows, one delete's
    /// targets, one field write. Two changes agree on a seq exactly when their units there are equal.
    enum SeqUnit: Equatable {
        case noteField(NoteID, NoteField, FieldValue)
        case tagField(String, TagField, FieldValue)
        case insert(NoteID, origin: OpID?, Unicode.Scalar)
        case deleteOne(NoteID, OpIDRange)
        case delete(NoteID, [OpIDRange])
        case reissue(OpIDRange)

        /// Strings compare by their bytes: Swift's `==` takes canonically equivalent spellings
        /// (é composed and decomposed) for equal, and two copies may write either.
        static func == (a: SeqUnit, b: SeqUnit) -> Bool {
            switch (a, b) {
            case let (.noteField(n1, f1, v1), .noteField(n2, f2, v2)): n1 == n2 && sameBytes(f1, f2) && sameBytes(v1, v2)
            case let (.tagField(t1, f1, v1), .tagField(t2, f2, v2)): t1.utf8.elementsEqual(t2.utf8) && f1 == f2 && sameBytes(v1, v2)
            case let (.insert(n1, o1, c1), .insert(n2, o2, c2)): n1 == n2 && o1 == o2 && c1 == c2
            case let (.deleteOne(n1, r1), .deleteOne(n2, r2)): n1 == n2 && r1 == r2
            case let (.delete(n1, r1), .delete(n2, r2)): n1 == n2 && r1 == r2
            case let (.reissue(r1), .reissue(r2)): r1 == r2
            default: false
            }
        }

        private static func sameBytes(_ a: NoteField, _ b: NoteField) -> Bool {
            switch (a, b) {
            case let (.tag(x), .tag(y)), let (.extra(x), .extra(y)): x.utf8.elementsEqual(y.utf8)
            default: a == b
            }
        }

        private static func sameBytes(_ a: FieldValue, _ b: FieldValue) -> Bool {
            if case .string(let x) = a, case .string(let y) = b { return x.utf8.elementsEqual(y.utf8) }
            return a == b
        }
    }

    /// Whether this change and `other`, of one author, hold the same operation (unit and
    /// timestamp) at every seq both hold: two copies of one database write one seq differently.
    /// True when they do not overlap or are of different authors. O(overlapping seqs + each
    /// change's operations before the overlap).
    package func agrees(with other: Change) -> Bool {
        guard replica == other.replica else { return true }
        let first = Swift.max(startSeq, other.startSeq), last = Swift.min(endSeq, other.endSeq)
        guard first <= last else { return true }
        var budget = Int.max
        guard var mine = SeqCursor(self, at: first, budget: &budget), var theirs = SeqCursor(other, at: first, budget: &budget) else { return false }
        var seq = first
        while true {
            if timestamp(ofSeq: seq) != other.timestamp(ofSeq: seq) || mine.unit != theirs.unit { return false }
            if seq == last { return true }
            seq += 1
            mine.advance()
            theirs.advance()
        }
    }

    /// Walks a change's units one seq at a time, from a given seq.
    struct SeqCursor {
        let change: Change
        private var op = 0
        private var opStart: UInt64
        private var offset: UInt64 = 0
        private var run = 0
        private var inRun: UInt64 = 0

        /// A cursor at `seq` (within the change), or nil when reaching it would step over more
        /// than `budget` operations (what is stepped over is taken from it).
        init?(_ change: Change, at seq: UInt64, budget: inout Int) {
            self.change = change
            opStart = change.startSeq
            let operations = change.operations
            while op < operations.count, opStart &+ operations[op].seqCount <= seq {
                opStart &+= operations[op].seqCount
                op += 1
                budget -= 1
                if budget < 0 { return nil }
            }
            guard op < operations.count else { return nil }
            offset = seq &- opStart
            if case .deleteEach(_, let runs) = operations[op] {
                var left = offset
                while run < runs.count, runs[run].operationCount <= left {
                    left -= runs[run].operationCount
                    run += 1
                    budget -= 1
                    if budget < 0 { return nil }
                }
                inRun = left
            }
        }

        /// The unit at the cursor.
        var unit: SeqUnit {
            switch change.operations[op] {
            case .setNoteField(let note, let field, let value):
                return .noteField(note, field, value)
            case .setTagField(let tag, let field, let value):
                return .tagField(tag, field, value)
            case .insertText(let note, let origin, let text):
                let follows = offset == 0 ? origin : OpID(replica: change.replica, seq: opStart &+ offset &- 1)
                return .insert(note, origin: follows, text[Int(offset)])
            case .deleteText(let note, let targets):
                return targets.count == 1 ? .deleteOne(note, targets[0]) : .delete(note, targets)
            case .deleteEach(let note, let runs):
                return .deleteOne(note, runs[run].target(inRun))
            case .reissue(let range):
                return .reissue(range)
            }
        }

        /// Moves to the next seq (past the change's end: the cursor must not be read again).
        mutating func advance() {
            let operation = change.operations[op]
            offset &+= 1
            if case .deleteEach(_, let runs) = operation {
                inRun &+= 1
                if inRun == runs[run].operationCount {
                    run += 1
                    inRun = 0
                }
            }
            if offset == operation.seqCount {
                opStart &+= operation.seqCount
                op += 1
                offset = 0
                run = 0
                inRun = 0
            }
        }
    }
}

/// One author's gap-free run of seqs, unit by unit, to check changes against it in time linear
/// in their overlap: `Change.agrees(with:)` steps over each change's operations before the
/// overlap, so checking many small files against one long joined change was quadratic.
package struct JoinedSeqs {
    package let author: ReplicaID
    package let first: UInt64
    private var held: [(timestamp: Timestamp, unit: Change.SeqUnit)] = []

    package init(author: ReplicaID, first: UInt64) {
        self.author = author
        self.first = first
    }

    /// The last seq held (`first - 1` when none is).
    package var last: UInt64 { first &- 1 &+ UInt64(held.count) }

    /// Adds `change`'s seqs past `last`. It must be the author's and start at or before `last + 1`.
    package mutating func append(_ change: Change) {
        precondition(change.replica == author && change.startSeq <= last &+ 1, "JoinedSeqs: not the next seqs of its author")
        guard change.endSeq > last else { return }
        var budget = Int.max
        var seq = Swift.max(change.startSeq, last &+ 1)
        guard var cursor = Change.SeqCursor(change, at: seq, budget: &budget) else { return }
        while true {
            held.append((change.timestamp(ofSeq: seq), cursor.unit))
            if seq == change.endSeq { return }
            seq += 1
            cursor.advance()
        }
    }

    /// Whether `change` holds the same operation (unit and timestamp) as this run at every seq
    /// both hold; true for another author's change or one that does not overlap.
    package func agrees(with change: Change) -> Bool {
        guard change.replica == author else { return true }
        let from = Swift.max(change.startSeq, first), to = Swift.min(change.endSeq, last)
        guard from <= to else { return true }
        var budget = Int.max
        guard var cursor = Change.SeqCursor(change, at: from, budget: &budget) else { return false }
        var seq = from
        while true {
            let mine = held[Int(seq - first)]
            if mine.timestamp != change.timestamp(ofSeq: seq) || mine.unit != cursor.unit { return false }
            if seq == to { return true }
            seq += 1
            cursor.advance()
        }
    }
}

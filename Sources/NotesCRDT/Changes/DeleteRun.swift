/// Consecutive deletes, run-length encoded: the element of `Operation.deleteEach`.
///
/// Backspacing through a typed word deletes its characters one by one, last first; each delete is
/// an operation with its own sequence number. A run holds such a sequence as one range and an
/// order, so a history of 77,000 backspaces is a few thousand runs (as Diamond types and Loro keep
/// delete runs), and validating or applying it touches each range once.
public struct DeleteRun: Hashable, Sendable {
    /// How the run's characters were deleted.
    public enum Order: UInt8, Hashable, Sendable {
        /// One delete of the whole range: one sequence number.
        case whole
        /// One delete per character, the last character first (backspace): `range.count` sequence numbers.
        case backward
        /// One delete per character, the first character first (the delete key): `range.count` sequence numbers.
        case forward
    }

    /// The characters deleted.
    public var range: OpIDRange
    /// How they were deleted.
    public var order: Order

    /// A run of one delete of `range` (`.whole`).
    public init(_ range: OpIDRange) {
        self.range = range
        self.order = .whole
    }

    /// A run; `order` other than `.whole` needs a range of at least two characters (a run of one
    /// character is `.whole`, so that one sequence of deletes has one spelling).
    public init(range: OpIDRange, order: Order) {
        self.range = range
        self.order = range.count == 1 ? .whole : order
    }

    /// The longest run: 2^31 - 1 deletes (what the wire format's run record can hold).
    public static let maxLength = UInt64(Int32.max)

    /// How many delete operations (sequence numbers) the run stands for.
    public var operationCount: UInt64 { order == .whole ? 1 : range.count }

    /// The range that the run's `index`-th delete removes.
    public func target(_ index: UInt64) -> OpIDRange {
        switch order {
        case .whole: range
        case .backward: OpIDRange(replica: range.replica, seq: range.seq + range.count - 1 - index, count: 1)
        case .forward: OpIDRange(replica: range.replica, seq: range.seq + index, count: 1)
        }
    }

    /// The ranges its deletes remove, in order.
    ///
    /// - Complexity: O(`operationCount`): for tests and models, never for a run from outside.
    public var targets: [OpIDRange] { (0 ..< operationCount).map(target) }

    /// Adds the next delete, of `next`, when it continues the run (the character just before a
    /// backward run, or just after a forward one, or either next to a run of one character).
    ///
    /// - Returns: false (and changes nothing) when it does not.
    mutating func extend(with next: OpIDRange) -> Bool {
        guard next.count == 1, next.replica == range.replica, range.count < DeleteRun.maxLength else { return false }
        switch order {
        case .whole where range.count == 1:
            if next.seq &+ 1 == range.seq {
                range = OpIDRange(replica: range.replica, seq: next.seq, count: 2)
                order = .backward
                return true
            }
            if next.seq == range.seq &+ 1 {
                range.count = 2
                order = .forward
                return true
            }
            return false
        case .backward where next.seq &+ 1 == range.seq:
            range.seq = next.seq
            range.count += 1
            return true
        case .forward where next.seq == range.seq &+ range.count:
            range.count += 1
            return true
        default:
            return false
        }
    }

    /// The run's first `count` deletes only (at least one, fewer than it has).
    func keeping(_ count: UInt64) -> DeleteRun {
        switch order {
        case .whole: self
        case .backward: DeleteRun(range: OpIDRange(replica: range.replica, seq: range.seq + range.count - count, count: count), order: .backward)
        case .forward: DeleteRun(range: OpIDRange(replica: range.replica, seq: range.seq, count: count), order: .forward)
        }
    }

    /// The run without its first `count` deletes (which must leave at least one).
    func dropping(_ count: UInt64) -> DeleteRun {
        switch order {
        case .whole: self
        case .backward: DeleteRun(range: OpIDRange(replica: range.replica, seq: range.seq, count: range.count - count), order: .backward)
        case .forward: DeleteRun(range: OpIDRange(replica: range.replica, seq: range.seq + count, count: range.count - count), order: .forward)
        }
    }
}

extension [DeleteRun] {
    /// Adds one delete of `target`: to the last run when it continues it, as a new run otherwise.
    public mutating func appendDelete(_ target: OpIDRange) {
        if !isEmpty, self[count - 1].extend(with: target) { return }
        append(DeleteRun(target))
    }

    /// Adds the deletes of `run`, one after another: the same runs as `appendDelete` of each of
    /// its targets in order, in a few steps whatever the run's length (a run from the wire may
    /// stand for 2^31 - 1 deletes).
    ///
    /// - Complexity: O(1).
    public mutating func appendDeletes(of run: DeleteRun) {
        // A run that does not continue the last one is taken as it is: its deletes one by one
        // would make it again (it is no longer than the longest run), in many more steps.
        if run.order != .whole, run.range.count >= 2, run.range.count <= DeleteRun.maxLength {
            var last = isEmpty ? nil : self[count - 1]
            if last?.extend(with: run.target(0)) != true {
                append(run)
                return
            }
        }
        let total = run.operationCount
        var index: UInt64 = 0
        while index < total {
            appendDelete(run.target(index))
            index += 1
            // Once the last run goes the way `run` does and ends with the delete just added, every
            // remaining delete continues it, up to the longest run; past that a new run starts
            // (at most twice: `run` itself is no longer than the longest run).
            let last = self[count - 1]
            guard index < total, last.order == run.order, last.order != .whole else { continue }
            let taken = Swift.min(total - index, DeleteRun.maxLength - last.range.count)
            guard taken > 0 else { continue }
            if run.order == .backward {
                self[count - 1].range = OpIDRange(replica: last.range.replica, seq: last.range.seq - taken, count: last.range.count + taken)
            } else {
                self[count - 1].range.count += taken
            }
            index += taken
        }
    }

    /// Whether the runs are as `appendDelete` of their deletes, one by one, makes them: no run of
    /// one character with an order, and no run that the one before it would have taken in.
    var isJoined: Bool {
        for i in indices {
            if self[i].range.count == 1, self[i].order != .whole { return false }
            if i > 0 {
                var previous = self[i - 1]
                if previous.extend(with: self[i].target(0)) { return false }
            }
        }
        return true
    }

    /// The delete operations the runs stand for (at most `UInt64.max`: runs made by hand could
    /// stand for more, and a change refuses them as malformed).
    public var operationCount: UInt64 { UInt64.saturatingSum(lazy.map(\.operationCount)) }
}

/// Deletes of one target each, on one note, gathered into one operation as they come (by the
/// decoder from the wire, by `BodyEditor` from edits): a lone delete stays a `deleteText` with the
/// array it came with, and the runs are gathered in an array kept from one `take()` to the next.
struct GatheredDeletes {
    /// The note of the gathered deletes; nil when none are gathered.
    private(set) var note: NoteID?
    private var first = OpIDRange(replica: ReplicaID(Identifier128(high: 0, low: 0)), seq: 0, count: 0)
    private var firstArray: [OpIDRange]?
    /// Empty while a lone delete is gathered. Its storage is reused, and each operation taken gets
    /// a copy of its length: growing a fresh array per operation reallocated it at every doubling.
    private var runs: [DeleteRun] = []

    /// Gathers a delete of `target` in `note` (the gathered note, or any when none is gathered).
    ///
    /// - Parameter array: `[target]` when the caller already has it, to log a lone delete with it.
    mutating func add(_ target: OpIDRange, in note: NoteID, array: [OpIDRange]? = nil) {
        if self.note == nil {
            self.note = note
            first = target
            firstArray = array
        } else {
            if runs.isEmpty { runs.append(DeleteRun(first)) }
            runs.appendDelete(target)
        }
    }

    /// Gathers the deletes of `run` (two or more) in `note`, as `add` of each of its targets would.
    mutating func add(_ run: DeleteRun, in note: NoteID) {
        if self.note == nil {
            self.note = note
        } else if runs.isEmpty {
            runs.append(DeleteRun(first))
        }
        runs.appendDeletes(of: run)
    }

    /// The gathered deletes as one operation (nil when there are none); gathers anew after.
    @inline(__always)  // asked before every operation the decoder appends, and usually nil
    mutating func take() -> Operation? {
        guard note != nil else { return nil }
        return takeGathered()
    }

    private mutating func takeGathered() -> Operation {
        let note = note!
        self.note = nil
        if runs.isEmpty {
            defer { firstArray = nil }
            return .deleteText(note: note, targets: firstArray ?? [first])
        }
        // Copied at its length: `Array(runs[...])` took the whole buffer, spare capacity and all,
        // and `removeAll` then allocated one as large for the next gathering.
        let op = Operation.deleteEach(note: note, runs: runs.withUnsafeBufferPointer { Array($0) })
        runs.removeAll(keepingCapacity: true)
        firstArray = nil
        return op
    }
}

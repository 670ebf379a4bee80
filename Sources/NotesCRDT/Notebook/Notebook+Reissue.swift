/// Re-issues: repairing a replica identity that two copies of one database both wrote.
///
/// Two copies of a replica's database that both write hand out the same seqs for different
/// operations (a fork). The copy that finds it withdraws its own branch: it makes its operations
/// again as changes of its own, newer identity, each led by a `.reissue(of:)` operation naming
/// the seqs it re-issues, with their timestamps and with every reference into the branch renamed.
/// A replica that applies such a change and holds the same operations under the old identity
/// (the same content at the same seqs, references renamed back) drops them there and rebuilds its
/// state from the log; operations of the old identity that come later and match a re-issue are
/// taken as duplicates. The other branch keeps the old identity's seqs. Docs/Architecture.md,
/// "Copied replicas".
extension Notebook {
    /// Operations of `original.replica` that a copy of its database wrote, held again as `by`'s
    /// seqs `firstSeq ...`, in order, one for one.
    public struct Reissue: Sendable, Hashable {
        /// The seqs re-issued, of the replica a copy of whose database wrote them.
        public var original: OpIDRange
        /// The replica that holds them again.
        public var by: ReplicaID
        /// The re-issuer's seq of the first of them (the one after its `.reissue` operation).
        public var firstSeq: UInt64

        /// The re-issuer's seqs that hold them.
        public var reissued: OpIDRange { OpIDRange(replica: by, seq: firstSeq, count: original.count) }
    }

    /// The re-issues applied here, in the order applied.
    public var reissues: [Reissue] { materialized.reissueTable.entries.map(\.reissue) }

    /// Changes that re-issue, as this replica's, the operations of `replica` from seq `first`
    /// through `last` that it holds (its own branch of a forked identity, which a store finds
    /// when a copy of its database wrote those seqs differently): one per log entry they are in,
    /// each led by a `.reissue(of:)` of its seqs, with their timestamps (the operation takes the
    /// timestamp before the first), their dependencies plus `replica`'s seqs before `first`,
    /// and every reference into the range renamed to the new seqs. Apply them with
    /// `apply(_:)`: the operations then leave `replica`'s seqs here too.
    ///
    /// - Returns: nothing when this replica holds none of those seqs (or is `replica`).
    public func reissuing(_ replica: ReplicaID, from first: UInt64, through last: UInt64) -> [Change] {
        if deferred != nil { return materialized.reissuing(replica, from: first, through: last) }
        guard replica != replicaID, first >= 1, first <= last, let indexes = historyIndex[replica] else { return [] }
        let held = min(last, versionVector[replica])
        guard first <= held else { return [] }
        // The log entries holding the seqs, cut to them, and where each goes.
        var slices: [Change] = []
        for index in indexes {
            let entry = history[index]
            guard entry.endSeq >= first, entry.startSeq <= held else { continue }
            guard let slice = entry.suffix(from: max(first, entry.startSeq))?.prefix(through: held),
                  !slice.operations.isEmpty, slice.timestamp.rawValue > 0 else { continue }  // (no timestamp before 0 for the operation: never made by a clock)
            slices.append(slice)
        }
        var map = SeqMap()
        var next = versionVector[replicaID] + 1
        var starts: [UInt64] = []
        for slice in slices {
            starts.append(next)
            map.add(from: slice.idRange, to: OpID(replica: replicaID, seq: next + 1))
            next += slice.seqCount + 1
        }
        var result: [Change] = []
        for (slice, start) in zip(slices, starts) {
            var dependencies = slice.dependencies
            dependencies[replica] = first - 1
            var operations: [Operation] = [.reissue(of: slice.idRange)]
            var budget = Int.max
            guard var cursor = Change.SeqCursor(slice, at: slice.startSeq, budget: &budget) else { continue }
            for _ in 0 ..< slice.seqCount {
                operations.append(Notebook.operation(of: Notebook.canonical(cursor.unit, map)))
                cursor.advance()
            }
            result.append(Change(replica: replicaID, startSeq: start, timestamp: Timestamp(rawValue: slice.timestamp.rawValue - 1),
                                 dependencies: dependencies, operations: operations))
        }
        return result
    }

    /// The operation that does what one seq's unit does (joined again by `Change`).
    private static func operation(of unit: Change.SeqUnit) -> Operation {
        switch unit {
        case .noteField(let note, let field, let value): .setNoteField(note: note, field: field, value: value)
        case .tagField(let tag, let field, let value): .setTagField(tag: tag, field: field, value: value)
        case .insert(let note, let origin, let scalar): .insertText(note: note, origin: origin, text: InsertedText([scalar]))
        case .deleteOne(let note, let target): .deleteText(note: note, targets: [target])
        case .delete(let note, let targets): .deleteText(note: note, targets: targets)
        case .reissue(let range): .reissue(of: range)
        }
    }

    /// `unit` with its identities mapped by `map` and its delete targets merged where they meet,
    /// so that a unit and its re-issue, renamed back, compare equal.
    static func canonical(_ unit: Change.SeqUnit, _ map: SeqMap) -> Change.SeqUnit {
        switch unit {
        case .insert(let note, let origin, let scalar): return .insert(note, origin: origin.map(map.map), scalar)
        case .deleteOne(let note, let target): return .delete(note, map.map([target]))
        case .delete(let note, let targets): return .delete(note, map.map(targets))
        case .reissue(let range):
            let mapped = map.map([range])
            return mapped.count == 1 ? .reissue(mapped[0]) : unit
        case .noteField, .tagField: return unit
        }
    }

    // MARK: Applying

    /// Records the re-issues of a change just applied and, when this replica holds any of the
    /// operations they re-issue, rebuilds its state without them.
    mutating func applyReissues(of change: Change) {
        guard change.reissueEnd > 0 else { return }
        let replicas = reissueTable.record(change)
        guard !rebuilding, !replicas.isEmpty else { return }
        let held = replicas.filter(holdsReissued)
        guard !held.isEmpty else { return }
        if rebuildDue != nil {
            rebuildDue!.formUnion(held)
        } else {
            rebuild()
        }
    }

    /// The most rebuilds a batch makes before its end: past it, a change of a replica whose
    /// re-issued operations are still held here is refused (it comes again with the next sync),
    /// so a batch of crafted re-issues and changes costs a bounded number of replays of the log.
    package static let maxRebuildsPerBatch = 8

    /// Starts a batch: rebuilds that re-issues call for wait for `endBatch()`, or for a change of
    /// a replica whose re-issued operations are still held (`beforeApplying`).
    package mutating func beginBatch() {
        if rebuildDue == nil {
            rebuildDue = []
            rebuildsInBatch = 0
        }
    }

    /// Ends a batch: the rebuild it called for, if any.
    package mutating func endBatch() {
        guard let due = rebuildDue else { return }
        rebuildDue = nil
        if !due.isEmpty { rebuild() }
    }

    /// Before a change of `replica` is applied in a batch: the rebuild its re-issued operations
    /// call for, so that it meets the state without them. False when the batch made its most
    /// rebuilds already (the change is then refused).
    mutating func rebuildIfDue(for replica: ReplicaID) -> Bool {
        guard let due = rebuildDue, due.contains(replica) else { return true }
        guard rebuildsInBatch < Notebook.maxRebuildsPerBatch else { return false }
        let made = rebuildsInBatch + 1
        rebuildDue = nil
        rebuild()
        rebuildDue = []
        rebuildsInBatch = made
        return true
    }

    /// Whether a log entry of `replica` holds operations a re-issue holds again, or a waiting or
    /// quarantined change of it has seqs a re-issue covers (it is tried again, and dropped there).
    private func holdsReissued(_ replica: ReplicaID) -> Bool {
        guard let span = reissueTable.span(of: replica) else { return false }
        func overlaps(_ change: Change) -> Bool {
            change.replica == replica && change.endSeq >= span.lowerBound && change.startSeq <= span.upperBound
        }
        for index in historyIndex[replica] ?? [] where overlaps(history[index]) {
            if reissuedRun(in: history[index], held: true) != nil { return true }
        }
        return pending.all.contains(where: overlaps) || quarantine.all.contains { overlaps($0.change) }
    }

    /// `change` without the seqs at which it holds what a re-issue holds again: nil when it holds
    /// none (apply it as it is), else the parts before and after the first such run (either may
    /// be missing; the part after waits for the seqs cut out, which never come: a branch that
    /// went on past what its copy re-issued).
    package func withoutReissued(_ change: Change) -> [Change]? {
        guard !reissueTable.isEmpty, let span = reissueTable.span(of: change.replica),
              change.endSeq >= span.lowerBound, change.startSeq <= span.upperBound,
              let run = reissuedRun(in: change) else { return nil }
        var parts: [Change] = []
        if run.lowerBound > change.startSeq {
            // (Empty when all it keeps is a re-issue operation whose operations are all cut.)
            let before = change.prefix(through: run.lowerBound - 1)
            if !before.operations.isEmpty { parts.append(before) }
        }
        if run.upperBound < change.endSeq, let after = change.suffix(from: run.upperBound + 1) { parts.append(after) }
        return parts
    }

    /// The first run of seqs at which `change` holds, with the same timestamps, what a re-issue
    /// holds again (references renamed back), or nil.
    ///
    /// A run starts where a re-issue starts, or at the change's first seq when that does not
    /// continue an operation held here under another timestamp than the re-issue's: after a fork
    /// the two branches may hold the same unit at a seq (the same character typed after each
    /// one's own operation at the seq before, which has one identity in both), and a change that
    /// continues the branch held here must not be taken for the withdrawn one.
    ///
    /// - Complexity: O(seqs of the change × re-issues that cover one seq), each step O(1) but
    ///   where a cursor must be placed anew (within the re-issuing change).
    ///
    /// - Parameter held: `change` is a log entry here (not one arriving).
    func reissuedRun(in change: Change, held: Bool = false) -> ClosedRange<UInt64>? {
        for start in [change.startSeq] + reissueTable.starts(of: change.replica, after: change.startSeq, through: change.endSeq) {
            if let run = reissuedRun(in: change, from: start, held: held) { return run }
        }
        return nil
    }

    private func reissuedRun(in change: Change, from start: UInt64, held: Bool) -> ClosedRange<UInt64>? {
        var budget = Int.max
        guard var cursor = Change.SeqCursor(change, at: start, budget: &budget) else { return nil }
        var source: (entry: Int, seq: UInt64, cursor: Change.SeqCursor, back: SeqMap)?
        var seq = start
        while true {
            var matched = false
            for index in reissueTable.covering(change.replica, seq) {
                let entry = reissueTable.entries[index]
                let at = entry.reissue.firstSeq + (seq - entry.reissue.original.seq)
                guard change.timestamp(ofSeq: seq) == entry.source.timestamp(ofSeq: at) else { continue }
                if seq == change.startSeq, !anchors(entry, at: seq, in: change, held: held) { continue }
                if let s = source, s.entry == index, s.seq + 1 == at {
                    source!.cursor.advance()
                    source!.seq = at
                } else {
                    var sourceBudget = Int.max
                    guard let placed = Change.SeqCursor(entry.source, at: at, budget: &sourceBudget) else { continue }
                    // Renamed back by this re-issuer's re-issues of the change's author alone: a
                    // reference to another re-issue's operation is one the change names as it is, too.
                    source = (index, at, placed, reissueTable.renamingBack(change.replica, by: entry.reissue.by))
                }
                if Notebook.canonical(cursor.unit, SeqMap()) == Notebook.canonical(source!.cursor.unit, source!.back) {
                    matched = true
                    break
                }
            }
            if !matched { return seq == start ? nil : start ... seq - 1 }
            if seq == change.endSeq { return start ... seq }
            cursor.advance()
            seq += 1
        }
    }

    /// Whether a run matching `entry` may start at `seq`, the first seq of `change`: the re-issue
    /// starts there; or this replica holds that seq and the change forks from what it holds
    /// (it is no repeat of it); or the operation before it is not held here, or is held with
    /// another timestamp than the re-issue's (another branch's, which the re-issue's does not
    /// continue). A log entry here (`held`) is judged by the operation before it alone.
    private func anchors(_ entry: ReissueTable.Entry, at seq: UInt64, in change: Change, held: Bool) -> Bool {
        let original = entry.reissue.original
        let have = versionVector[original.replica]
        // Over what is held: the change must not be a repeat of it (two branches may agree on
        // their first seqs after the fork, and part from there). Why not for a held entry: it is
        // what is held, so that test never anchored the withdrawn branch's tail taken on top of
        // the other branch (out of order, before its re-issue came), and the replica kept it.
        if !held, seq > original.seq, seq <= have { return forkPoint(of: change) != nil }
        guard seq > original.seq, have >= seq - 1, let held = heldCursor(of: OpID(replica: original.replica, seq: seq - 1)) else { return true }
        return held.change.timestamp(ofSeq: seq - 1) != entry.source.timestamp(ofSeq: entry.reissue.firstSeq + (seq - 1 - original.seq))
    }

    /// The seqs of `change` at which this replica's log holds the same operation (the same unit
    /// at the same timestamp), in runs: what of its branch of a forked identity a holder of
    /// `change` keeps (the simulator's reference, when a device's database is replaced). O(the
    /// change's seqs) after one placement per log entry.
    package func seqsHeldAlike(in change: Change) -> [ClosedRange<UInt64>] {
        var runs: [ClosedRange<UInt64>] = []
        let last = min(change.endSeq, versionVector[change.replica])
        guard change.startSeq <= last else { return runs }
        var budget = Int.max
        guard var theirs = Change.SeqCursor(change, at: change.startSeq, budget: &budget) else { return runs }
        var ours: Change.SeqCursor?
        var seq = change.startSeq
        while true {
            if ours == nil || ours!.change.endSeq < seq {
                var whole = Int.max
                ours = loggedChange(change.replica, seq).flatMap { Change.SeqCursor($0, at: seq, budget: &whole) }
            }
            if let held = ours, held.change.timestamp(ofSeq: seq) == change.timestamp(ofSeq: seq),
               Notebook.canonical(held.unit, SeqMap()) == Notebook.canonical(theirs.unit, SeqMap()) {
                if let end = runs.last?.upperBound, end + 1 == seq { runs[runs.count - 1] = runs[runs.count - 1].lowerBound ... seq } else { runs.append(seq ... seq) }
            }
            if seq == last { return runs }
            seq += 1
            theirs.advance()
            if ours != nil, ours!.change.endSeq >= seq { ours!.advance() }
        }
    }

    /// Per log entry, waiting and quarantined change of `replica` in `other`, the seqs at which
    /// this replica holds the same operations (`seqsHeldAlike(in:)`).
    package func seqsHeldAlike(of replica: ReplicaID, in other: Notebook) -> [ClosedRange<UInt64>] {
        let changes = (other.historyIndex[replica] ?? []).map { other.history[$0] }
            + other.pendingChanges.filter { $0.replica == replica }
            + other.quarantinedChanges.map(\.change).filter { $0.replica == replica }
        return changes.flatMap(seqsHeldAlike(in:))
    }

    /// A cursor at an operation in the log, or nil (not held, or deeper in its entry than the
    /// fork check's budget).
    private func heldCursor(of id: OpID) -> Change.SeqCursor? {
        guard let held = loggedChange(id.replica, id.seq) else { return nil }
        var budget = Notebook.forkCheckBudget
        return Change.SeqCursor(held, at: id.seq, budget: &budget)
    }

    /// Replays the log, the waiting changes and the quarantine into a fresh state that knows every
    /// re-issue from the start, so that the operations they re-issue are dropped where they were
    /// (and what referred to them waits or is quarantined, as for any missing operation).
    ///
    /// - Complexity: O(the log): a re-issue that finds its operations here is rare (a copied
    ///   database, once).
    mutating func rebuild() {
        self = replayed(as: replicaID)
    }

    /// This replica's log, waiting changes and quarantine replayed into a fresh state written as
    /// `identity` (the changes it made as its own identity are then another replica's), with its
    /// clock, its re-issues and the quarantine's counters: what a store that moves to a fresh
    /// identity to repair a fork of its own goes on from.
    package func replayed(as identity: ReplicaID) -> Notebook {
        if deferred != nil { return materialized.replayed(as: identity) }
        var fresh = Notebook(replicaID: identity, wallClock: wallClock, maxForwardDrift: clock.maxForwardDrift)
        fresh.rebuilding = true
        fresh.reissueTable = reissueTable
        fresh.quarantine.carryCounters(from: quarantine)
        for change in history { fresh.apply(change) }
        for change in pending.all { fresh.apply(change) }
        for entry in quarantine.all { fresh.apply(entry.change) }
        fresh.quarantine.uncountAdmissions(heldBy: quarantine)
        fresh.rebuilding = false
        fresh.clock.witnessLocal(clock.last)
        if latestTimestamp > fresh.latestTimestamp { fresh.latestTimestamp = latestTimestamp }
        fresh.logDamage = logDamage
        fresh.rebuilds = rebuilds + 1
        return fresh
    }
}

/// A map of identities onto others, range by range: an identity in a piece's `from` moves to
/// `to` at the same offset; every other stays.
struct SeqMap: Sendable {
    struct Piece: Sendable {
        var from: OpIDRange
        var to: OpID
    }

    /// Per replica, its pieces by increasing seq (they do not overlap).
    private var pieces: [ReplicaID: [Piece]] = [:]

    var isEmpty: Bool { pieces.isEmpty }

    /// Adds a piece; pieces of one replica must not overlap.
    mutating func add(from: OpIDRange, to: OpID) {
        var list = pieces[from.replica] ?? []
        let at = SeqMap.firstEnding(after: from.seq, in: list)
        list.insert(Piece(from: from, to: to), at: at)
        pieces[from.replica] = list
    }

    /// The index of the first piece that ends at or after `seq`.
    private static func firstEnding(after seq: UInt64, in list: [Piece]) -> Int {
        var low = 0
        var high = list.count
        while low < high {
            let mid = (low + high) / 2
            if list[mid].from.seq + list[mid].from.count <= seq { low = mid + 1 } else { high = mid }
        }
        return low
    }

    func map(_ id: OpID) -> OpID {
        guard let list = pieces[id.replica] else { return id }
        let i = SeqMap.firstEnding(after: id.seq, in: list)
        guard i < list.count, list[i].from.seq <= id.seq else { return id }
        return OpID(replica: list[i].to.replica, seq: list[i].to.seq + (id.seq - list[i].from.seq))
    }

    /// The ranges mapped, split where pieces begin and end, and joined again where they meet.
    func map(_ ranges: [OpIDRange]) -> [OpIDRange] {
        var result: [OpIDRange] = []
        func append(_ range: OpIDRange) {
            if let last = result.last, last.replica == range.replica, last.seq + last.count == range.seq {
                result[result.count - 1].count += range.count
            } else {
                result.append(range)
            }
        }
        for range in ranges {
            guard let list = pieces[range.replica], range.count > 0 else {
                append(range)
                continue
            }
            var seq = range.seq
            let end = range.seq + range.count  // well formed: at most 2^53
            var i = SeqMap.firstEnding(after: seq, in: list)
            while seq < end {
                if i < list.count, list[i].from.seq <= seq {
                    let piece = list[i]
                    let stop = min(end, piece.from.seq + piece.from.count)
                    append(OpIDRange(replica: piece.to.replica, seq: piece.to.seq + (seq - piece.from.seq), count: stop - seq))
                    seq = stop
                    i += 1
                } else {
                    let stop = i < list.count ? min(end, list[i].from.seq) : end
                    append(OpIDRange(replica: range.replica, seq: seq, count: stop - seq))
                    seq = stop
                }
            }
        }
        return result
    }
}

/// The re-issues a replica has applied, found by the seqs they re-issue and by the re-issuer's.
struct ReissueTable: Sendable {
    struct Entry: Sendable {
        var reissue: Notebook.Reissue
        /// The change that holds it (as applied), to compare operations against.
        var source: Change
    }

    private(set) var entries: [Entry] = []
    /// Per replica whose seqs were re-issued, indexes into `entries` by increasing first seq.
    private var byOriginal: [ReplicaID: [Int]] = [:]
    /// Per such replica, the lowest and highest seq re-issued.
    private var spans: [ReplicaID: ClosedRange<UInt64>] = [:]
    /// Per replica whose seqs were re-issued and re-issuer, the re-issuer's seqs mapped back to
    /// those of the replica it re-issues (`renamingBack(_:by:)`).
    private var renamings: [Renaming: SeqMap] = [:]
    struct Renaming: Hashable, Sendable {
        var original: ReplicaID
        var by: ReplicaID
    }
    /// The re-issuers' seqs held, to keep one entry per re-issue.
    private var keys: Set<OpID> = []
    /// Per replica whose seqs were re-issued, the most seqs one re-issue of it holds.
    private var longest: [ReplicaID: UInt64] = [:]
    /// The most entries a lookup steps back over.
    static let maxLookBack = 4096

    var isEmpty: Bool { entries.isEmpty }

    /// Adds the re-issues `change` holds, as applied; returns the replicas whose seqs they
    /// re-issue (those not known already).
    mutating func record(_ change: Change) -> [ReplicaID] {
        guard change.reissueEnd > 0 else { return [] }
        var seq = change.startSeq
        var replicas: [ReplicaID] = []
        for op in change.operations {
            if case .reissue(let range) = op, seq &+ range.count <= change.endSeq {
                // Kept only whole (a change cut past the operation holds only part of it).
                if add(Notebook.Reissue(original: range, by: change.replica, firstSeq: seq + 1), source: change) {
                    replicas.append(range.replica)
                }
            }
            seq &+= op.seqCount
        }
        return replicas
    }

    /// The changes the entries were recorded from, each once, in the order recorded: what a
    /// snapshot keeps, so that its log replays knowing every re-issue from the start, as the
    /// replica that wrote it did after a rebuild.
    var sources: [Change] {
        var seen: Set<OpID> = []
        var result: [Change] = []
        for entry in entries where seen.insert(OpID(replica: entry.source.replica, seq: entry.source.startSeq)).inserted {
            result.append(entry.source)
        }
        return result
    }

    /// Adds a re-issue (false when it is known already).
    mutating func add(_ reissue: Notebook.Reissue, source: Change) -> Bool {
        guard keys.insert(OpID(replica: reissue.by, seq: reissue.firstSeq)).inserted else { return false }
        let index = entries.count
        entries.append(Entry(reissue: reissue, source: source))
        var list = byOriginal[reissue.original.replica] ?? []
        var at = list.count
        while at > 0, entries[list[at - 1]].reissue.original.seq > reissue.original.seq { at -= 1 }
        list.insert(index, at: at)
        byOriginal[reissue.original.replica] = list
        let last = reissue.original.seq + reissue.original.count - 1
        let span = spans[reissue.original.replica].map { min($0.lowerBound, reissue.original.seq) ... max($0.upperBound, last) }
        spans[reissue.original.replica] = span ?? reissue.original.seq ... last
        longest[reissue.original.replica] = max(longest[reissue.original.replica] ?? 0, reissue.original.count)
        renamings[Renaming(original: reissue.original.replica, by: reissue.by), default: SeqMap()]
            .add(from: reissue.reissued, to: OpID(replica: reissue.original.replica, seq: reissue.original.seq))
        return true
    }

    /// `by`'s seqs that re-issue `original`'s mapped back to them: the inverse of what `by`
    /// renamed in its re-issues of `original` (`Notebook.reissuing`), and nothing else. Another
    /// re-issuer's seqs stay as named: a withdrawn operation and its re-issue both name them so.
    func renamingBack(_ original: ReplicaID, by: ReplicaID) -> SeqMap {
        renamings[Renaming(original: original, by: by)] ?? SeqMap()
    }

    /// The first seqs of `replica`'s re-issued ranges that are after `seq` and at most `last`, in
    /// order (at most `maxLookBack` of them).
    func starts(of replica: ReplicaID, after seq: UInt64, through last: UInt64) -> [UInt64] {
        guard let list = byOriginal[replica] else { return [] }
        var low = 0
        var high = list.count
        while low < high {
            let mid = (low + high) / 2
            if entries[list[mid]].reissue.original.seq <= seq { low = mid + 1 } else { high = mid }
        }
        var result: [UInt64] = []
        for i in list[low...].prefix(ReissueTable.maxLookBack) {
            let first = entries[i].reissue.original.seq
            guard first <= last else { break }
            if result.last != first { result.append(first) }
        }
        return result
    }

    /// The lowest and highest seq of `replica` re-issued, or nil.
    func span(of replica: ReplicaID) -> ClosedRange<UInt64>? { spans[replica] }

    /// The entries (indexes) whose re-issued seqs hold `replica`'s `seq`.
    func covering(_ replica: ReplicaID, _ seq: UInt64) -> [Int] {
        guard let list = byOriginal[replica] else { return [] }
        var high = list.count
        var low = 0
        while low < high {
            let mid = (low + high) / 2
            if entries[list[mid]].reissue.original.seq <= seq { low = mid + 1 } else { high = mid }
        }
        // Back from there while an entry could still reach `seq` (none is longer than the longest),
        // at most `maxLookBack` steps: a flood of re-issues cannot make every lookup walk them all.
        let reach = longest[replica] ?? 0
        var found: [Int] = []
        var i = low
        var steps = 0
        while i > 0, steps < ReissueTable.maxLookBack {
            i -= 1
            steps += 1
            let original = entries[list[i]].reissue.original
            if seq - original.seq >= reach { break }
            if seq - original.seq < original.count { found.append(list[i]) }
        }
        return found
    }
}

extension Notebook {
    /// What `apply(_:)` did with a change.
    public enum ApplyOutcome: Hashable, Sendable {
        /// Applied now (with any waiting changes it unblocked: `released` of them).
        case applied(released: Int)
        /// Already covered by the version vector: nothing to do.
        case duplicate
        /// Its dependencies are missing; it waits and is applied when they arrive.
        case pending
        /// Its dependencies are all here, but it refers to something that does not exist (an
        /// origin, deleted characters): it is kept aside in the quarantine with the reason
        /// (`quarantinedChanges`), and changes nothing. Its author's later changes wait behind
        /// it; a different, valid change for the same seqs takes its place.
        case quarantined(CRDTError)
        /// Malformed on its own, whatever the state (no operations, seqs outside
        /// 1 ... `Change.maxSeq`, an insert of no text...), or it refers to something that does
        /// not exist and the quarantine has no room for it (16 changes per replica, 4,096 in
        /// all): refused, not kept, nothing changes. (The bundle decoder refuses a malformed
        /// change before it gets here.)
        case rejected(CRDTError)
    }

    /// Applies a change from any replica. Idempotent, and concurrent changes commute.
    ///
    /// A change whose dependencies have not all been applied waits in the pending set and is
    /// applied as soon as they are. A change that is ready but refers to something that does
    /// not exist is quarantined (`.quarantined`), a malformed one refused (`.rejected`); either
    /// way nothing else changes, and changes from every other replica keep flowing.
    ///
    /// - Complexity: O(operations × log *n*) for the change itself.
    @discardableResult
    public mutating func apply(_ change: Change) -> ApplyOutcome {
        do { try Notebook.checkShape(change) } catch let error as CRDTError {
            quarantine.refuse()
            return .rejected(error)
        } catch {
            preconditionFailure("checkShape throws CRDTError only")
        }
        materialize()
        guard rebuildIfDue(for: change.replica) else {
            quarantine.refuse()
            return .rejected(CRDTError(.limitExceeded, "a batch dropped re-issued operations \(Notebook.maxRebuildsPerBatch) times already; a change of \(change.replica) at seqs \(change.startSeq)-\(change.endSeq) is not applied now (it comes again with the next sync)"))
        }
        if let parts = withoutReissued(change) {
            // The seqs a re-issue holds again are its copy's withdrawn branch: duplicates here.
            var outcome = ApplyOutcome.duplicate
            for part in parts {
                let result = apply(part)
                if case .duplicate = outcome { outcome = result }
            }
            return outcome
        }
        if let fork = forkPoint(of: change) {
            quarantine.refuse()
            return .rejected(CRDTError(.equivocation, "\(change.replica) wrote seq \(fork) twice, differently: this replica has one version and the change holds another (two copies of one replica's database wrote them)"))
        }
        switch readiness(of: change) {
        case .duplicate:
            return .duplicate
        case .blocked(let replica, let seq):
            // Bounded: changes whose dependencies never come (from a hostile peer) would pile up.
            // A refused one comes again with the next sync, once what it needs is here.
            guard pending.count < Notebook.maxPending else {
                quarantine.refuse()
                return .rejected(CRDTError(.limitExceeded, "\(Notebook.maxPending) changes already wait for their dependencies; a change of \(change.replica) at seqs \(change.startSeq)-\(change.endSeq) is not kept (it comes again once what it needs is here)"))
            }
            pending.add(change, waitingFor: replica, through: seq)
            // A re-issue withdraws its branch as soon as it is seen: one that waits for the other
            // branch's operations would otherwise wait for good where the withdrawn ones are held.
            applyReissues(of: change)
            return .pending
        case .ready(let ready):
            let admitted = quarantine.admitted
            if let reason = integrateOrQuarantine(ready) {
                guard quarantine.admitted > admitted || quarantine.reason(for: ready) != nil else {
                    return .rejected(CRDTError(reason.code, "\(reason.message) (not kept: the quarantine is full)"))
                }
                return .quarantined(reason)
            }
            applyReissues(of: ready)
            return .applied(released: drain(from: ready.replica))
        }
    }

    /// Applies changes in the order given (any order works; a causal order avoids waiting).
    ///
    /// - Returns: how many changes were applied (including released pending ones), how many
    ///   were duplicates, how many wait for dependencies at the end, how many entered the
    ///   quarantine and how many were refused (both including released ones).
    @discardableResult
    public mutating func apply<S: Sequence<Change>>(contentsOf changes: S)
        -> (applied: Int, duplicates: Int, pending: Int, quarantined: Int, rejected: Int) {
        var applied = 0
        var duplicates = 0
        let (admitted, refused) = (quarantine.admitted, quarantine.refused)
        beginBatch()
        defer { endBatch() }
        for change in changes {
            switch apply(change) {
            case .applied(let released): applied += 1 + released
            case .duplicate: duplicates += 1
            case .pending, .quarantined, .rejected: break
            }
        }
        return (applied, duplicates, pending.count, quarantine.admitted - admitted, quarantine.refused - refused)
    }

    /// Applies changes this replica stored itself after applying them (its log): every one
    /// must apply, so one that is quarantined or refused means the storage is damaged. A waiting
    /// change one of them releases may be quarantined, as it was when the log entry was first
    /// applied (a waiting change was never checked: it refers to what a re-issue withdrew, say).
    ///
    /// - Throws: the reason of the first change that does not apply.
    package mutating func applyStored<S: Sequence<Change>>(contentsOf changes: S) throws {
        for change in changes {
            switch apply(change) {
            case .quarantined(let reason), .rejected(let reason): throw reason
            case .applied, .duplicate, .pending: break
            }
        }
    }

    /// Exactly the operations that a replica at `version` lacks, as changes in a causal order
    /// (the first change of each replica cut where the other side's knowledge ends).
    ///
    /// - Complexity: O(*r* + *v* + *b* log *h* + *k* log *k*): a walk over both vectors, a binary
    ///   search per replica behind, then the *k* changes sent.
    public func changes(since version: VersionVector) -> [Change] {
        if deferred != nil { return materialized.changes(since: version) }
        // The log positions first (per replica, the first change that ends past what `version`
        // has, and every one after it), then each change copied once, in log order: a list of
        // (position, change) pairs sorted and mapped copied every change twice.
        var picked: [Int] = []
        var cuts: [(position: Int, from: UInt64)] = []  // a change the other side has part of
        var sorted = true
        // The replicas this log holds past `version`, found by walking both sorted vectors once:
        // a receive of one author's change per batch (a page of thousands of authors) asked this
        // at every batch, and a look-up per replica made that quadratic in a slow way.
        let mine = versionVector.storage
        let theirs = version.storage
        var t = 0
        for entry in mine {
            while t < theirs.count, theirs[t].replica < entry.replica { t += 1 }
            let have = t < theirs.count && theirs[t].replica == entry.replica ? theirs[t].seq : 0
            guard have < entry.seq, let indexes = historyIndex[entry.replica] else { continue }
            let low = firstLogEntry(in: indexes, endingAtOrAfter: have + 1)
            guard low < indexes.count else { continue }
            if history[indexes[low]].startSeq <= have { cuts.append((indexes[low], have + 1)) }
            if let last = picked.last, last > indexes[low] { sorted = false }
            picked.append(contentsOf: indexes[low...])
        }
        if !sorted { picked.sort() }
        var result: [Change] = []
        result.reserveCapacity(picked.count)
        for position in picked { result.append(history[position]) }
        for cut in cuts {
            var low = 0
            var high = picked.count
            while low < high {
                let mid = (low + high) / 2
                if picked[mid] < cut.position { low = mid + 1 } else { high = mid }
            }
            result[low] = history[cut.position].suffix(from: cut.from)!
        }
        return result
    }

    /// Every change in the log, in the order applied.
    public var allChanges: [Change] { materialized.history }

    /// Merges another replica's state into this one: afterwards this replica has applied
    /// everything the other had (its pending changes included).
    ///
    /// - Throws: when a change of the other replica does not apply here (it is quarantined or
    ///   refused here, and the rest is merged): the two replicas disagree on what exists.
    public mutating func merge(_ other: Notebook) throws {
        var failure: CRDTError?
        let admitted = quarantine.admitted
        for change in other.changes(since: versionVector) + other.pendingChanges {
            switch apply(change) {
            case .quarantined(let reason), .rejected(let reason): failure = failure ?? reason
            case .applied, .duplicate, .pending: break
            }
        }
        if let failure { throw failure }
        if quarantine.admitted != admitted, let last = quarantine.lastAdmitted { throw last.reason }
    }

    /// This replica's state merged with another's. `a.merging(b)` and `b.merging(a)` have the same
    /// digest.
    public func merging(_ other: Notebook) throws -> Notebook {
        var copy = self
        try copy.merge(other)
        return copy
    }

    // MARK: Internals

    enum Readiness {
        case duplicate
        /// Waits until `replica`'s operations through `seq` are applied.
        case blocked(ReplicaID, seq: UInt64)
        case ready(Change)
    }

    /// The first seq that `change` and the log both hold from its author, with different
    /// operations: an equivocation, which must never pass as a duplicate. Nil when they agree
    /// or do not overlap.
    ///
    /// First the timestamps: however changes are split or joined, an operation keeps its seq and
    /// timestamp, and a change's timestamps are consecutive, so one comparison per overlapping
    /// stored change finds most forks. Then the content, seq by seq (`Change.SeqUnit`, one
    /// spelling whatever the joins and cuts), since two copies can write one seq at one timestamp:
    /// typing that continues a run takes the timestamp after the character it follows. Finding
    /// where the overlap starts inside a stored change steps over its operations, at most
    /// `forkCheckBudget` of them (a joined change holds up to 65,536): past that only the
    /// timestamps are compared, so that many small duplicates cannot make the check quadratic.
    ///
    /// - Complexity: O(log *n* + overlapping stored changes + overlapping seqs + `forkCheckBudget`).
    public func forkPoint(of change: Change) -> UInt64? {
        let have = versionVector[change.replica]
        guard change.startSeq <= have, let indexes = historyIndex[change.replica] else { return nil }
        let last = min(change.endSeq, have)
        let low = firstLogEntry(in: indexes, endingAtOrAfter: change.startSeq)
        // The stored changes cover the author's seqs without a gap, so one cursor over `change`
        // walks on from each into the next. Each is compared whole before the next, so the seq
        // returned is the first that differs (a re-issue starts there).
        var budget = Notebook.forkCheckBudget
        var incoming: Change.SeqCursor?
        var contentChecked = true
        for index in indexes[low...] {
            let stored = history[index]
            guard stored.startSeq <= last else { break }
            let first = max(stored.startSeq, change.startSeq)
            if stored.timestamp(ofSeq: first) != change.timestamp(ofSeq: first) { return first }
            // Past the budget, only the timestamps of the rest are compared.
            guard contentChecked else { continue }
            let through = min(stored.endSeq, last)
            guard var mine = Change.SeqCursor(stored, at: first, budget: &budget) else {
                contentChecked = false
                continue
            }
            if incoming == nil {
                incoming = Change.SeqCursor(change, at: first, budget: &budget)
                if incoming == nil {
                    contentChecked = false
                    continue
                }
            }
            var seq = first
            while true {
                if mine.unit != incoming!.unit { return seq }
                incoming!.advance()
                if seq == through { break }
                mine.advance()
                seq += 1
            }
        }
        return nil
    }

    /// The lowest seq at or below `fork` (where `change` differs from what is held here) at which
    /// the two branches provably part, by timestamps alone: an author stamps each seq at least one
    /// past the one before, so the other branch's operation at a seq *k* below `fork` is stamped at
    /// most `change.timestamp(ofSeq: fork) - (fork - k)`, and one held here stamped later is
    /// another. Copies share their prefix with its timestamps, so an honest fork never reaches
    /// into it. A copy that found the fork where a chimera first showed it would otherwise re-issue
    /// from there, and again from lower down later. Nothing is inferred across re-issued
    /// operations (they keep their originals' timestamps); at most `forkCheckBudget` log entries
    /// are looked at.
    package func forkBound(of change: Change, at fork: UInt64) -> UInt64 {
        guard fork > 1, change.startSeq <= fork, fork <= change.endSeq, !change.containsReissue,
              let indexes = historyIndex[change.replica] else { return fork }
        let theirs = change.timestamp(ofSeq: fork).rawValue
        var index = firstLogEntry(in: indexes, endingAtOrAfter: fork - 1)
        guard index < indexes.count else { return fork }
        var bound = fork
        for _ in 0 ..< Notebook.forkCheckBudget {
            let entry = history[indexes[index]]
            guard entry.startSeq < bound, !entry.containsReissue else { break }
            // Within an entry the timestamps are consecutive, so the test is the same at every seq.
            let top = min(entry.endSeq, bound - 1)
            let (later, overflow) = entry.timestamp(ofSeq: top).rawValue.addingReportingOverflow(fork - top)
            guard overflow || later > theirs else { break }
            bound = entry.startSeq
            guard index > 0 else { break }
            index -= 1
        }
        return bound
    }

    /// At most this many operations are stepped over to find where an overlap starts inside a
    /// stored change, per fork check (see `forkPoint(of:)`).
    public static let forkCheckBudget = 4096

    /// At most this many changes wait for their dependencies (`.rejected` past it).
    public static let maxPending = 1 << 16

    func readiness(of change: Change) -> Readiness {
        let have = versionVector[change.replica]
        if change.endSeq <= have { return .duplicate }
        if change.startSeq > have + 1 { return .blocked(change.replica, seq: change.startSeq - 1) }
        // Wait for the smallest missing replica (entries are sorted by replica, so it is the first),
        // so that a seed replays the same way in every process.
        if let missing = change.dependencies.storage.first(where: { versionVector[$0.replica] < $0.seq }) {
            return .blocked(missing.replica, seq: missing.seq)
        }
        return .ready(change.suffix(from: have + 1)!)
    }

    /// Checks what can be checked of a change on its own: sequence numbers from 1 to
    /// `Change.maxSeq` (its own, its dependencies' and every one it refers to), timestamps that do
    /// not pass 2^64 - 1, and well-formed operations.
    static func checkShape(_ change: Change) throws {
        guard change.startSeq >= 1 else { throw CRDTError(.malformedChange, "a change starts at seq 0") }
        guard !change.operations.isEmpty, change.seqCount > 0 else {
            throw CRDTError(.malformedChange, "a change from \(change.replica) has no operations")
        }
        // Each operation's own shape, and the seqs they add up to, were checked as they were appended.
        if let problem = change.shapeProblem { throw CRDTError(.malformedChange, problem) }
        guard change.startSeq <= Change.maxSeq, change.seqCount <= Change.maxSeq - change.startSeq + 1 else {
            throw CRDTError(.malformedChange, "a change's sequence numbers (\(change.startSeq) and \(change.seqCount) more) pass 2^53 - 1")
        }
        guard change.seqCount - 1 <= UInt64.max - change.timestamp.rawValue else {
            throw CRDTError(.malformedChange, "a change's timestamps (from \(change.timestamp.rawValue), one per operation) pass 2^64 - 1")
        }
        if let entry = change.dependencies.storage.first(where: { $0.seq > Change.maxSeq }) {
            throw CRDTError(.malformedChange, "a change depends on seq \(entry.seq) of \(entry.replica), past 2^53 - 1")
        }
        if change.reissueEnd > change.endSeq &+ 1 {
            throw CRDTError(.malformedChange, "a change of \(change.replica) re-issues operations past its end (seq \(change.endSeq))")
        }
    }

    /// Checks that every identity the change refers to exists, in the state or earlier in the
    /// change itself, so that applying it cannot fail half-way.
    func validate(_ change: Change) throws {
        var checker = ReferenceChecker(replica: change.replica, startSeq: change.startSeq, notes: notes)
        var seq = change.startSeq
        // Through the buffer, so an operation is read in place, not copied (a copy retains its array).
        try change.operations.withUnsafeBufferPointer { operations in
        for index in operations.indices {
            switch operations[index] {
            case .insertText(let note, let origin, _):  // (binding the text would retain it)
                if let origin {
                    guard checker.exists(note, OpIDRange(replica: origin.replica, seq: origin.seq, count: 1), before: seq) else {
                        throw Notebook.missingOrigin(origin, in: note)
                    }
                }
                checker.inserted(note, start: seq, count: operations[index].seqCount)
            case .deleteText(let note, let targets):
                for target in targets {
                    guard checker.exists(note, target, before: seq) else {
                        throw Notebook.missingCharacters(target, in: note)
                    }
                }
            case .deleteEach(let note, let runs):
                // Every delete of a run names a character of its range (and nothing else).
                for i in runs.indices {
                    guard checker.exists(note, runs[i].range, before: seq) else {
                        let target = runs[i].range
                        throw Notebook.missingCharacters(target, in: note)
                    }
                }
            case .setNoteField, .setTagField, .reissue:
                break
            }
            seq += operations[index].seqCount
        }
        }
    }

    /// Applies a change that is ready and valid, records it, and advances the clocks.
    mutating func applyValidated(_ change: Change) {
        var seq = change.startSeq
        // Through the buffer, so an operation is read in place, not copied (a copy retains its array).
        change.operations.withUnsafeBufferPointer { operations in
        var index = 0
        while index < operations.count {
            guard let note = operations[index].note else {
                guard case .setTagField(let tag, let field, let value) = operations[index] else {
                    // A re-issue's own operation changes no note (`applyReissues` follows).
                    seq += 1
                    index += 1
                    continue
                }
                Notebook.write(&tagRecords[tag, default: [:]], field, value, change.timestamp(ofSeq: seq), OpID(replica: change.replica, seq: seq))
                seq += 1
                index += 1
                continue
            }
            // The operations that follow on the same note, applied in one access to its record.
            withRecord(note) { record in
                var end = index
                while end < operations.count, operations[end].note == note { end += 1 }
                /// The characters the group inserts (counted only for a large group, to reserve room).
                func characters() -> Int {
                    var total = 0
                    for i in index ..< end {
                        if case .insertText(_, _, let text) = operations[i] { total += text.count }
                    }
                    return total
                }
                // The text is taken out of the record while it is edited, so the record's other
                // fields can be written meanwhile (it stays uniquely referenced: no copy).
                var text = record.body
                record.body = .placeholder
                defer { record.body = text }
                let count = end - index
                if count >= Notebook.bulkOperations, count * 16 >= text.totalCharacters {
                    // A large batch (a whole history, a replayed log): in list form, the tree built once.
                    text.withBulkList { list in
                        list.reserve(characters: characters(), replica: change.replica, seqs: seq, span: change.endSeq - seq + 1)
                        Notebook.applyOperations(operations, from: &index, seq: &seq, of: change, on: note, to: &record, text: &list)
                    }
                } else {
                    // A large change reserves its text's room at once.
                    if count > 64 { text.reserve(characters: characters(), seqSpan: change.endSeq - seq + 1) }
                    Notebook.applyOperations(operations, from: &index, seq: &seq, of: change, on: note, to: &record, text: &text)
                }
            }
        }
        }
        finishApplying(change)
    }

    /// The note of a change whose operations are all on one note and are enough to be integrated
    /// in the text's list form (see `bulkOperations`), or nil.
    private func largeBatchNote(_ change: Change) -> NoteID? {
        let count = change.operations.count
        guard count >= Notebook.bulkOperations else { return nil }
        return change.operations.withUnsafeBufferPointer { operations -> NoteID? in
            guard let note = operations[0].note else { return nil }
            for index in 1 ..< count where operations[index].note != note { return nil }
            guard count * 16 >= notes[note]?.body.totalCharacters ?? 0 else { return nil }
            return note
        }
    }

    /// Applies a large batch on one note (a whole history arriving at a fresh replica) in one
    /// pass: the references are checked as the list form integrates them (it looks every one up
    /// anyway), instead of by `validate` first. The record and its text are copies until the
    /// end, so a missing reference throws with the replica as it was.
    private mutating func applyLargeBatch(_ change: Change, on note: NoteID) throws {
        var record = notes[note] ?? NoteRecord()
        var text = record.body
        record.body = .placeholder
        var missing: RGABulkList.MissingReference?
        change.operations.withUnsafeBufferPointer { operations in
            var index = 0
            var seq = change.startSeq
            missing = text.withCheckedBulkList { list in
                var characters = 0
                for i in operations.indices {
                    if case .insertText(_, _, let text) = operations[i] { characters += text.count }
                }
                list.reserve(characters: characters, replica: change.replica, seqs: change.startSeq, span: change.seqCount)
                Notebook.applyOperations(operations, from: &index, seq: &seq, of: change, on: note, to: &record, text: &list)
            }
        }
        switch missing {
        case .origin(let origin):
            throw Notebook.missingOrigin(origin, in: note)
        case .deleted(let target):
            throw Notebook.missingCharacters(target, in: note)
        case nil:
            break
        }
        record.body = text
        notes[note] = record
        finishApplying(change)
    }

    /// The error for an insert whose origin is not there (by `validate` or as a large batch is integrated).
    static func missingOrigin(_ origin: OpID, in note: NoteID) -> CRDTError {
        CRDTError(.unknownReference, "an insert into note \(note) follows \(origin), which does not exist")
    }

    /// The error for a delete naming characters that are not there.
    static func missingCharacters(_ target: OpIDRange, in note: NoteID) -> CRDTError {
        CRDTError(.unknownReference, "a delete in note \(note) names characters that do not exist (\(target.replica)@\(target.seq)+\(target.count))")
    }

    /// Advances the version vector and the clock past an applied change, and records it.
    private mutating func finishApplying(_ change: Change) {
        versionVector[change.replica] = change.endSeq
        if change.replica != replicaID { cachedDependencies = nil }
        let last = change.timestamp(ofSeq: change.endSeq)
        if last > latestTimestamp { latestTimestamp = last }
        // Our own changes too move the clock no further than the drift bound: a write that took a
        // timestamp just past a far-future one (see `commitLocal`) does not drag the writes after it.
        // (A local change the clock stamped is not past it: no wall-clock read then.)
        if last > clock.last { clock.observe(last, wallMilliseconds: wallClock.milliseconds()) }
        record(change)
        // Our own changes too: one replayed after a re-issue, released from waiting, or a re-issue
        // of our own can follow concurrent ones (a local edit costs one look at the vector).
        recordConflicts(of: change)
    }

    /// From how many operations on one note a change is integrated in the text's list form (when
    /// they are also at least a sixteenth of the characters already there: taking the text apart
    /// and building it again costs about as much as it holds).
    static let bulkOperations = 256

    /// Applies the operations from `index` on while they are on `note` (advancing `index` and
    /// `seq` past them): fields to the record, text operations to `text`.
    /// Applies the operations of `change` on one note (skipping, seq by seq, those on others).
    static func applyOperations<Text: TextIntegration>(of change: Change, on note: NoteID, to record: inout NoteRecord, text: inout Text) {
        change.operations.withUnsafeBufferPointer { operations in
            var index = 0
            var seq = change.startSeq
            while index < operations.count {
                if operations[index].note == note {
                    applyOperations(operations, from: &index, seq: &seq, of: change, on: note, to: &record, text: &text)
                } else {
                    seq += operations[index].seqCount
                    index += 1
                }
            }
        }
    }

    static func applyOperations<Text: TextIntegration>(
        _ operations: UnsafeBufferPointer<Operation>, from index: inout Int, seq: inout UInt64, of change: Change,
        on note: NoteID, to record: inout NoteRecord, text: inout Text
    ) {
        // Deletes only set flags, and where a character is inserted does not depend on them, so
        // a delete can wait while the next ones extend its range (backspacing deletes one
        // character after another, right to left).
        var waiting: OpIDRange? = nil
        defer { if let range = waiting { text.tombstone(range) } }
        func delete(_ target: OpIDRange) {
            if text.checksReferences { return text.tombstone(target) }  // it must be there now
            if let range = waiting, range.replica == target.replica {
                if target.seq + target.count == range.seq {
                    waiting = OpIDRange(replica: range.replica, seq: target.seq, count: range.count + target.count)
                    return
                }
                if range.seq + range.count == target.seq {
                    waiting = OpIDRange(replica: range.replica, seq: range.seq, count: range.count + target.count)
                    return
                }
            }
            if let range = waiting { text.tombstone(range) }
            waiting = target
        }
        // The last seqs of an edit and of any operation (not reserved) in the group, recorded
        // once at the end (the seqs of a change only grow).
        var lastEdit: UInt64 = 0
        var lastTouch: UInt64 = 0
        defer {
            if lastEdit > 0 { record.edits.raise(change.replica, to: lastEdit) }
            if lastTouch > 0 { record.touched.raise(change.replica, to: lastTouch) }
        }
        // One switch per operation, binding its payload once: each further read of the operation
        // (its note, its seq count) copied it out of the buffer, retaining and releasing its array.
        while index < operations.count {
            let timestamp = change.timestamp(ofSeq: seq)
            let id = OpID(replica: change.replica, seq: seq)
            switch operations[index] {
            case .setNoteField(let n, let field, let value):
                guard n == note else { return }
                let won = record.fields.write(field, value, timestamp, id)
                switch field {
                case .state:
                    if won { record.deleteContext = value == NoteLifecycle.deletedValue ? change.context(ofSeq: seq) : nil }
                    lastTouch = seq
                case .extra(let key) where key.hasPrefix(Notebook.reservedExtraPrefix):
                    if field == .resolution { record.resolveConflicts(seenBy: change, atSeq: seq) }
                default:
                    lastEdit = seq
                    lastTouch = seq
                }
                record.touch(timestamp)
                seq += 1
            case .insertText(let n, let origin, _):
                guard n == note else { return }
                // Unretained: the change holds the text while it is applied.
                let scalars = operations[index].unretainedInsertedText
                let count = UInt64(scalars.count)
                text.place(id: id, origin: origin, key: timestamp.rawValue, text: scalars)
                record.touch(timestamp.advanced(by: count - 1))
                seq += count
                lastEdit = seq - 1
                lastTouch = seq - 1
            case .deleteText(let n, _):
                guard n == note else { return }
                // Read in place, target by target: a copy of the array is an atomic retain and release.
                for i in 0 ..< operations[index].deletePartCount { delete(operations[index].deleteTarget(i)) }
                record.touch(timestamp)
                lastEdit = seq
                lastTouch = seq
                seq += 1
            case .deleteEach(let n, _):
                guard n == note else { return }
                var count: UInt64 = 0
                for i in 0 ..< operations[index].deletePartCount {  // in place, as a `deleteText`'s
                    let run = operations[index].deleteRun(i)
                    delete(run.range)
                    count += run.operationCount
                }
                record.touch(timestamp.advanced(by: count - 1))
                seq += count
                lastEdit = seq - 1
                lastTouch = seq - 1
            case .setTagField, .reissue:
                return  // no note: the group ends
            }
            index += 1
        }
    }

    /// Applies a write to a register, creating it if needed. Returns whether the write won.
    @discardableResult
    private static func write<Key: Hashable>(_ registers: inout [Key: LWWRegister<FieldValue>], _ key: Key,
                                             _ value: FieldValue, _ timestamp: Timestamp, _ writer: OpID) -> Bool {
        if registers[key] == nil {
            registers[key] = LWWRegister(value: value, timestamp: timestamp, writer: writer)
            return true
        }
        return registers[key]!.set(value, timestamp: timestamp, writer: writer)
    }

    /// Runs `body` on the note's record in place (one hash lookup), creating the record if needed.
    @inline(__always)
    private mutating func withRecord(_ note: NoteID, _ body: (inout NoteRecord) -> Void) {
        body(&notes[note, default: NoteRecord()])
    }

    /// A log entry stops taking joins at this many operations: a bootstrap's one run of 800,000
    /// would be one array, and its last doubling held both copies (63 MB) at the import's peak.
    static let maxJoinedOperations = 1 << 16

    /// Appends a change to the log, joining it to the previous one when it directly follows it
    /// (up to `maxJoinedOperations`).
    mutating func record(_ change: Change) {
        if !Notebook.join(change, onto: &history) {
            historyIndex[change.replica, default: []].append(history.count)
            history.append(change)
        }
        recordLogEntry(of: change)
    }

    /// Joins a change to the last of `log` when it directly follows it (up to
    /// `maxJoinedOperations`), as the log does; false (and nothing done) when it does not.
    static func join(_ change: Change, onto log: inout [Change]) -> Bool {
        // In place: the last change's operations stay uniquely referenced, so joining is amortized O(1).
        guard let lastIndex = log.indices.last, log[lastIndex].replica == change.replica,
              log[lastIndex].operations.count < Notebook.maxJoinedOperations else { return false }
        return log[lastIndex].append(change)
    }

    /// Integrates a change that is ready (`readiness(of:)`), or puts it in the quarantine when
    /// it refers to something that does not exist (an equal change already there is not
    /// validated again).
    ///
    /// - Returns: nil when it was applied, else why it is in the quarantine.
    private mutating func integrateOrQuarantine(_ ready: Change) -> CRDTError? {
        if let reason = quarantine.reason(for: ready) { return reason }
        do {
            if let note = largeBatchNote(ready) {
                try applyLargeBatch(ready, on: note)
            } else {
                try validate(ready)
                applyValidated(ready)
            }
            return nil
        } catch let error as CRDTError {
            quarantine.add(ready, reason: error)
            return error
        } catch {
            preconditionFailure("validation throws CRDTError only")
        }
    }

    /// Applies waiting changes that became ready, starting with those that waited for `replica`.
    ///
    /// Only the changes whose awaited operation is now applied are taken out and looked at again:
    /// a change waits filed under the replica and seq it waits for, so a batch whose changes arrive
    /// ahead of what they depend on releases each one once, rather than re-filing every waiting
    /// change at every step (quadratic in the batch). A released change that refers to something
    /// that does not exist goes to the quarantine. Quarantined changes whose seqs a valid change
    /// has now taken leave it (the part past what was applied, if any, is tried again).
    private mutating func drain(from replica: ReplicaID) -> Int {
        var released = 0
        var work = [replica]
        /// Applies `change` if it is ready now, files it again if not.
        func examine(_ change: Change) {
            guard rebuildIfDue(for: change.replica) else {
                quarantine.refuse()
                return
            }
            if let parts = withoutReissued(change) {
                for part in parts { examine(part) }
                return
            }
            switch readiness(of: change) {
            case .duplicate:
                return
            case .blocked(let other, let seq):
                pending.add(change, waitingFor: other, through: seq)
            case .ready(let ready):
                guard integrateOrQuarantine(ready) == nil else { return }
                applyReissues(of: ready)
                released += 1
                work.append(ready.replica)
            }
        }
        while let next = work.popLast() {
            for entry in quarantine.take(next, through: versionVector[next]) { examine(entry.change) }
            for change in pending.take(waitingFor: next, through: versionVector[next]) { examine(change) }
        }
        return released
    }
}

/// Changes that wait for their dependencies, filed under the replica whose progress they wait
/// for, in the order of the seq they wait for (equal seqs in arrival order).
///
/// Per replica a binary heap: filing a change and taking one out cost O(log *n*) whatever the
/// order they come in, so a bundle whose changes arrive in the worst order still files quickly.
struct PendingChanges: Sendable {
    private var waiting: [ReplicaID: [Waiting]] = [:]
    /// What is waiting, to drop a change that arrives twice in O(1) (a list scan per arrival would
    /// be quadratic in the number waiting).
    private var keys: Set<Key> = []
    /// How many changes have been filed: the arrival order of equal seqs.
    private var filed: UInt64 = 0

    struct Waiting: Sendable {
        var seq: UInt64
        var arrival: UInt64
        var change: Change

        func precedes(_ other: Waiting) -> Bool { (seq, arrival) < (other.seq, other.arrival) }
    }

    struct Key: Hashable, Sendable {
        var replica: ReplicaID
        var startSeq: UInt64
        var seqCount: UInt64
        init(_ change: Change) { (replica, startSeq, seqCount) = (change.replica, change.startSeq, change.seqCount) }

        func hash(into hasher: inout Hasher) {
            hasher.combine(replica)
            hasher.combine(startSeq)
            hasher.combine(seqCount)
        }

        /// The replica's keyed hash with the seqs folded into its seed (SipHash over the three
        /// fields was a few percent of a simulation, which applies and drains constantly).
        func _rawHashValue(seed: Int) -> Int {
            replica._rawHashValue(seed: seed ^ Int(truncatingIfNeeded: startSeq &* 0x9E37_79B9_7F4A_7C15 ^ seqCount))
        }
    }

    var count: Int { keys.count }

    /// Files `change` until `replica`'s operations through `seq` are applied (a change already
    /// waiting is not filed twice).
    ///
    /// - Complexity: O(log *n*).
    mutating func add(_ change: Change, waitingFor replica: ReplicaID, through seq: UInt64) {
        guard keys.insert(Key(change)).inserted else { return }
        filed += 1
        let entry = Waiting(seq: seq, arrival: filed, change: change)
        if let index = waiting.index(forKey: replica) {
            // In place (a copy of the heap would make pushing onto it copy it again).
            PendingChanges.push(entry, onto: &waiting.values[index])
        } else {
            waiting[replica] = [entry]
        }
    }

    /// Takes out the changes waiting for `replica` whose awaited seq is at most `applied`, in the
    /// order of the seqs they wait for.
    ///
    /// - Complexity: O(*k* log *n*) for *k* changes taken.
    mutating func take(waitingFor replica: ReplicaID, through applied: UInt64) -> [Change] {
        guard let index = waiting.index(forKey: replica), waiting.values[index][0].seq <= applied else { return [] }
        var taken: [Change] = []
        while let first = waiting.values[index].first, first.seq <= applied {
            taken.append(PendingChanges.popFirst(&waiting.values[index]).change)
        }
        if waiting.values[index].isEmpty { waiting.remove(at: index) }
        for change in taken { keys.remove(Key(change)) }
        return taken
    }

    /// Every waiting change, by replica, then as `take` would hand them out.
    var all: [Change] {
        waiting.keys.sorted().flatMap { waiting[$0]!.sorted { $0.precedes($1) }.map(\.change) }
    }

    /// Adds `entry` to a binary min-heap.
    private static func push(_ entry: Waiting, onto heap: inout [Waiting]) {
        heap.append(entry)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].precedes(heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the least entry of a non-empty binary min-heap.
    private static func popFirst(_ heap: inout [Waiting]) -> Waiting {
        heap.swapAt(0, heap.count - 1)
        let first = heap.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            guard left < heap.count else { break }
            var least = left
            if left + 1 < heap.count, heap[left + 1].precedes(heap[left]) { least = left + 1 }
            guard heap[least].precedes(heap[parent]) else { break }
            heap.swapAt(least, parent)
            parent = least
        }
        return first
    }
}

/// What `Notebook.validate(_:)` remembers while it walks a change: the inserts made earlier in the
/// change, per note, so a reference to one of them is found without the text.
struct ReferenceChecker {
    /// The change's replica and first sequence number.
    let replica: ReplicaID
    let startSeq: UInt64
    /// The notes of the replica, as they are before the change.
    let notes: [NoteID: NoteRecord]
    /// Per note, its inserts in increasing seq order.
    var ownInserts: [(note: NoteID, inserts: [(start: UInt64, count: UInt64)])] = []
    /// Where each note is in `ownInserts`: searched linearly for the few a change usually
    /// touches, hashed past that (a change typing into 65,536 notes searched them all at each).
    var noteSlots = FirstUseIndex<NoteID>()
    /// The insert found last (note index, insert index): deletes walk through text just typed.
    var lastHit: (note: Int, insert: Int)?
    /// The text of the note looked at last, when a reference was not to this change.
    var body: (note: NoteID, text: RGAText?)?
    /// Identities known to exist from the last lookup (in `verifiedNote`): a run of deletes names
    /// characters next to each other, so most references fall in the range found for the one before.
    var verified: (replica: ReplicaID, range: Range<UInt64>)?
    var verifiedNote: NoteID?
    /// The insert made last in this change: typing names the character just typed.
    var lastInsert: (note: NoteID, seqs: Range<UInt64>)?

    init(replica: ReplicaID, startSeq: UInt64, notes: [NoteID: NoteRecord]) {
        self.replica = replica
        self.startSeq = startSeq
        self.notes = notes
    }

    mutating func inserted(_ note: NoteID, start: UInt64, count: UInt64) {
        lastInsert = (note, start ..< start + count)
        if let i = noteSlots.index(of: note) {
            ownInserts[i].inserts.append((start, count))
        } else {
            noteSlots.add(note)
            ownInserts.append((note, [(start, count)]))
        }
    }

    /// The insert made earlier in this change, in `note`, that holds `seq` of the change's replica.
    mutating func ownInsert(_ note: NoteID, _ seq: UInt64) -> (start: UInt64, count: UInt64)? {
        if let hit = lastHit, ownInserts[hit.note].note == note {
            // In place: a copy of the list would retain it.
            for i in max(0, hit.insert - 1) ... min(ownInserts[hit.note].inserts.count - 1, hit.insert + 1) {
                let insert = ownInserts[hit.note].inserts[i]
                if insert.start <= seq, seq < insert.start + insert.count {
                    lastHit = (hit.note, i)
                    return insert
                }
            }
        }
        guard let n = noteSlots.index(of: note) else { return nil }
        let found: Int? = ownInserts[n].inserts.withUnsafeBufferPointer { inserts in
            var low = 0
            var high = inserts.count
            while low < high {
                let mid = (low + high) / 2
                if inserts[mid].start <= seq { low = mid + 1 } else { high = mid }
            }
            guard low > 0, seq < inserts[low - 1].start + inserts[low - 1].count else { return nil }
            return low - 1
        }
        guard let found else { return nil }
        lastHit = (n, found)
        return ownInserts[n].inserts[found]
    }

    /// Whether every character of `range` exists: in the note's text or inserted earlier in this
    /// change, before `seq` (a range may span both, when the log joined consecutive edits).
    mutating func exists(_ note: NoteID, _ range: OpIDRange, before seq: UInt64) -> Bool {
        if let last = lastInsert, range.replica == replica, range.seq >= last.seqs.lowerBound,
           range.endSeq <= last.seqs.upperBound, last.note == note {
            return true
        }
        if let known = verified, verifiedNote == note, range.seq >= known.range.lowerBound,
           range.endSeq <= known.range.upperBound, known.replica == range.replica {
            return true
        }
        var at = range.seq
        while at < range.endSeq {
            if range.replica == replica, at >= startSeq, at < seq, let own = ownInsert(note, at) {
                verified = (range.replica, own.start ..< own.start + own.count)
                verifiedNote = note
                at = own.start + own.count
                continue
            }
            if body?.note != note { body = (note, notes[note]?.body) }
            guard let runEnd = body?.text?.runEnd(containing: OpID(replica: range.replica, seq: at)) else { return false }
            verified = (range.replica, at ..< runEnd)
            verifiedNote = note
            at = runEnd
        }
        return true
    }
}

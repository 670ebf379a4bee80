import Foundation
import GRDB
import NotesCRDT

/// What `NoteStore.apply(_:)` did with a batch of changes.
public struct ApplyReport: Hashable, Sendable {
    /// Changes applied now, including waiting ones that the batch released.
    public var applied: Int
    /// Changes already covered by the version vector (harmless repeats).
    public var duplicates: Int
    /// Changes that wait for their dependencies after the batch (in the whole replica).
    public var pending: Int
    /// The notes whose materialized rows changed.
    public var touchedNotes: Int
    /// Changes of the batch (or released by it) that refer to something that does not exist,
    /// now kept aside in the quarantine (`NoteStore.quarantinedChanges()`).
    public var quarantined: Int = 0
    /// Changes of the batch refused and not kept (`Notebook.ApplyOutcome.rejected`): malformed
    /// on their own (a decoded bundle never holds one), or referring to something that does not
    /// exist when the quarantine had no room left for them.
    public var rejected: Int = 0
    /// Changes of the batch in this replica's own name that it never made (part of `rejected`),
    /// and changes of others made after seeing such seqs (they wait, not refused): another copy
    /// of this database writes as the same identity. The store then moved to a fresh one
    /// (`replicaID`, `identityChanges()`) before writing anything more.
    public var foreignOwnChanges: Int = 0
    /// Identities this replica wrote as (its own, or one it left) that a copy of its database
    /// wrote differently, found in the batch and repaired: its own branch of each was re-issued
    /// as the identity it writes as (`reissues()`), moving first to a fresh one when its
    /// current identity was forked, and the other branch applied.
    public var forksRepaired: Int = 0
    /// Others' identities found writing one seq twice, differently (part of `rejected`), one
    /// line each: two copies of one database, or a member that sealed one range twice. The
    /// version held here stays; the other waits for the copy that holds it to re-issue it.
    public var forks: [String] = []
}

/// A change kept aside in a store's quarantine: ready to apply, but it refers to something that
/// does not exist (see `Notebook.quarantinedChanges`).
public struct QuarantineEntry: Hashable, Sendable {
    /// The change's author.
    public var replica: ReplicaID
    /// The seqs it covers, `startSeq ... endSeq`.
    public var startSeq: UInt64
    /// The last seq it covers.
    public var endSeq: UInt64
    /// What kind of problem (a `CRDTError.Code` name, e.g. `unknownReference`).
    public var code: String
    /// Why it does not apply.
    public var reason: String
    /// When it was quarantined here (wall-clock milliseconds).
    public var receivedAt: UInt64

    /// Creates an entry.
    public init(replica: ReplicaID, startSeq: UInt64, endSeq: UInt64, code: String, reason: String, receivedAt: UInt64) {
        self.replica = replica
        self.startSeq = startSeq
        self.endSeq = endSeq
        self.code = code
        self.reason = reason
        self.receivedAt = receivedAt
    }
}

/// What a known peer has, as last heard.
public struct PeerState: Hashable, Sendable {
    /// The peer's replica identity.
    public var replica: ReplicaID
    /// The operations the peer has (the highest version vector heard from it).
    public var versionVector: VersionVector
    /// When it was last heard from (wall-clock milliseconds).
    public var lastSeen: UInt64
}

extension NoteStore {
    /// Applies changes from other replicas, in one transaction for the whole batch.
    ///
    /// Changes may come in any order and any number of times: duplicates are ignored, changes whose
    /// dependencies are missing are kept (durably) until they arrive. What was applied goes to the
    /// op log, waiting changes to the pending table, and the touched notes are re-materialized and
    /// re-indexed. A change that refers to something that does not exist is quarantined (kept in
    /// its own table with the reason, `quarantinedChanges()`), a malformed one refused; the rest
    /// of the batch is applied all the same.
    ///
    /// - Throws: only when the database cannot be read or written (or holds damaged data), never
    ///   because a change from elsewhere is invalid.
    @discardableResult
    public func apply(_ changes: [Change]) throws -> ApplyReport {
        try apply(changes, alsoWriting: nil)
    }

    /// Applies changes that come in batches, in one transaction for them all as `apply(_:)`
    /// applies one batch, holding one batch at a time: a new device bootstrapping from a large
    /// history decodes and applies it piece by piece, and each note is written once at the end.
    ///
    /// `next` hands over the next batch, or nil when there is none left (an error it throws
    /// rolls everything back); `progress` is told the report so far after each batch.
    ///
    /// - Returns: the report of the whole run.
    @discardableResult
    public func apply(batches next: () throws -> [Change]?, progress: (ApplyReport) -> Void = { _ in }) throws -> ApplyReport {
        try apply(batches: next, alsoWriting: nil, progress: progress)
    }

    /// `apply(_:)`, with `extra` written in the same transaction (what an encrypted space keeps
    /// beside the changes: the sealed units, the members' keys).
    ///
    /// `compacting` false leaves the snapshot that may be due to `compactIfDue()` (a sync's
    /// receive applies many batches and takes one snapshot at the end).
    func apply(_ changes: [Change], alsoWriting extra: ((Database) throws -> Void)?, compacting: Bool = true) throws -> ApplyReport {
        if changes.isEmpty {
            lock.lock(); defer { lock.unlock() }
            if let extra { try writeTransaction("cannot record the sealed units") { db in try extra(db) } }
            return ApplyReport(applied: 0, duplicates: 0, pending: try loadedState().notebook.pendingCount, touchedNotes: 0)
        }
        var batch: [Change]? = changes
        return try apply(batches: { defer { batch = nil }; return batch }, alsoWriting: extra, compacting: compacting, progress: { _ in })
    }

    private func apply(batches next: () throws -> [Change]?, alsoWriting extra: ((Database) throws -> Void)?, compacting: Bool = true,
                       progress: (ApplyReport) -> Void) throws -> ApplyReport {
        lock.lock(); defer { lock.unlock() }
        var moved: ReplicaID? = nil
        let report = try writeTransaction("cannot apply the changes") { db -> ApplyReport in
            let pendingBefore = loaded!.notebook.pendingCount
            let quarantineBefore = (loaded!.notebook.quarantineGeneration, loaded!.notebook.quarantineAdmissions,
                                    loaded!.notebook.quarantineRefusals)
            dirty = true
            var applied = 0
            var duplicates = 0
            var queued = false
            var foreignOwn = 0
            var skippedOwn = 0  // refused here, not by the notebook
            var othersForks: [ReplicaID: String] = [:]
            var sawUnmade = 0  // others' changes that depend on seqs in our name we never made
            var touches = TouchedNotes()
            let own = replicaID
            let ownMade = loaded!.notebook.versionVector[own]
            let rebuildsBefore = loaded!.notebook.rebuilds
            // Forks of identities this replica wrote as (its own, and those it left): the first seq
            // that differs, and the changes refused for it (applied again once it is repaired).
            let former = try formerIdentities(db)
            var forks: [ReplicaID: UInt64] = [:]
            var forked: [Change] = []
            // In our name past what we made, forking from nothing we made: another copy's
            // operations, applied at the end, once this replica writes as a fresh identity.
            var unmade: [Change] = []
            @discardableResult
            func noteFork(_ change: Change) -> Bool {
                let made = change.replica == own ? loaded!.notebook.versionVector[own] : former[change.replica]
                guard let made, change.startSeq <= made, let found = loaded!.notebook.forkPoint(of: change), found <= made else { return false }
                let seq = loaded!.notebook.forkBound(of: change, at: found)
                forks[change.replica] = min(forks[change.replica] ?? seq, seq)
                forked.append(change)
                return true
            }
            func report(touched: Int) -> ApplyReport {
                ApplyReport(applied: applied, duplicates: duplicates, pending: loaded!.notebook.pendingCount, touchedNotes: touched,
                            quarantined: loaded!.notebook.quarantineAdmissions - quarantineBefore.1,
                            rejected: loaded!.notebook.quarantineRefusals - quarantineBefore.2 + skippedOwn,
                            foreignOwnChanges: foreignOwn, forksRepaired: forks.count,
                            forks: othersForks.sorted { $0.key < $1.key }.map(\.value))
            }
            /// Applies a change to the notebook and counts what it did.
            func integrate(_ change: Change) -> Notebook.ApplyOutcome {
                let outcome = loaded!.notebook.apply(change)
                switch outcome {
                case .applied(let released):
                    applied += 1 + released
                    if released > 0 { queued = true }
                case .duplicate: duplicates += 1
                case .pending: queued = true
                case .quarantined, .rejected: break
                }
                return outcome
            }
            /// Logs what the changes applied since `before` added (and their re-issues).
            func logApplied(since before: VersionVector) throws {
                let newChanges = loaded!.notebook.changes(since: before)
                try log(newChanges, db)
                try recordReissues(of: newChanges, own: false, db)
                noteTouches(of: newChanges, in: &touches)
            }
            // Rebuilds that re-issues call for are made once, at the end of the batches (or
            // before a change of the re-issued replica), not at every re-issue.
            loaded!.notebook.beginBatch()
            while let changes = try next() {
                let before = loaded!.notebook.versionVector
                let appliedBefore = applied
                // In our name past what we made but what a re-issue holds again: the withdrawn
                // branch of a fork already repaired (a folder keeps its files), not a copy's.
                let changes = changes.flatMap { change -> [Change] in
                    guard change.replica == own, change.endSeq > before[own], let parts = loaded!.notebook.withoutReissued(change) else { return [change] }
                    if parts.isEmpty { duplicates += 1 }
                    return parts
                }
                for change in changes {
                    // Seqs in our name past what we made: a copy of this database wrote them. Applied
                    // now, our next operations would repeat their seqs; so they wait for the move.
                    if change.replica == own, change.endSeq > loaded!.notebook.versionVector[own] {
                        if noteFork(change) { skippedOwn += 1 } else { unmade.append(change) }
                        foreignOwn += 1
                        continue
                    }
                    // Another's change made after seeing seqs in our name past what we made: a copy
                    // of us wrote them. It waits for them; our own next seqs must not be what
                    // releases it (a delete would then stand against edits it never saw).
                    if change.replica != own, change.dependencies[own] > loaded!.notebook.versionVector[own] {
                        foreignOwn += 1
                        sawUnmade += 1
                    }
                    if case .rejected(let error) = integrate(change), error.code == .equivocation {
                        if change.replica == own { foreignOwn += 1 }  // counted once, in `rejected` already
                        if !noteFork(change), othersForks[change.replica] == nil {
                            othersForks[change.replica] = error.message + "; the version held here stays, and the other waits for a copy that holds it to re-issue it"
                        }
                    }
                }
                // Logged batch by batch, so that only one batch's changes are held; the notes are
                // written once, after the last.
                if applied > appliedBefore { try logApplied(since: before) }
                progress(report(touched: touches.notes.count))
            }
            // The copy's operations past ours are another replica's once this one moves (below, in
            // this transaction): kept now, a sync brings everything it was given at once.
            if forks.isEmpty, !unmade.isEmpty {
                let before = loaded!.notebook.versionVector
                let appliedBefore = applied
                for change in unmade { _ = integrate(change) }
                if applied > appliedBefore { try logApplied(since: before) }
            }
            loaded!.notebook.endBatch()
            if !forks.isEmpty {
                moved = try reissueForks(forks, madeThrough: former, thenApplying: forked + unmade, db)
            }
            // A re-issue dropped operations held here (or this replica re-issued its own): the
            // state was rebuilt from the log, so the log and every note are written anew.
            let rebuilt = loaded!.notebook.rebuilds != rebuildsBefore || !forks.isEmpty
            let pendingAfter = loaded!.notebook.pendingCount
            if !rebuilt, queued || pendingAfter != pendingBefore {
                try writePending(db)
            }
            let quarantineChanged = loaded!.notebook.quarantineGeneration != quarantineBefore.0
            if !rebuilt, quarantineChanged { try writeQuarantine(db) }
            var touched = 0
            if rebuilt {
                try rewriteAfterRebuild(db)
                touched = inLoadedNotebook { $0.noteCount }
            } else if applied > 0 {
                touched = try materialize(touches, db)
            }
            try extra?(db)
            // Another replica re-issued operations this one made in its name, the same (only a
            // copy of this database, or a forger, can): they are that replica's now, so this
            // one's next operations must not take their seqs again.
            if moved == nil, loaded!.notebook.versionVector[own] < ownMade {
                moved = try NoteStore.retire(own, db, options: options, salt: "re-issued",
                                             reason: "a sync brought a re-issue of operations this replica made in its name (seqs \(loaded!.notebook.versionVector[own] + 1) to \(ownMade)): another copy of this database made them too, and holds them as its own",
                                             madeThrough: ownMade)
            }
            if foreignOwn > 0, moved == nil {
                moved = try NoteStore.retire(own, db, options: options, salt: "",
                                             reason: "a sync brought \(foreignOwn - sawUnmade) change(s) in this replica's name that it never made"
                                                 + (sawUnmade > 0 ? " and \(sawUnmade) made after seeing such seqs" : "") + ": another copy of this database writes as it",
                                             madeThrough: ownMade)
            }
            if applied > 0 || queued || quarantineChanged || moved != nil || rebuilt { try bumpRevision(db) } else { dirty = false }
            return report(touched: touched)
        }
        if let moved {
            // Loaded again as the new identity at the next use (the snapshot may name the old one).
            identity.withLock { $0 = moved }
            loaded = nil
        }
        if compacting { compactIfDue() }
        return report
    }

    /// Takes the snapshot if enough changes were logged since the last (after batches applied
    /// with `compacting` false).
    func compactIfDueLocking() {
        lock.lock(); defer { lock.unlock() }
        compactIfDue()
    }

    /// Exactly the changes a replica at `version` lacks, in a causal order.
    public func changes(since version: VersionVector) throws -> [Change] {
        lock.lock(); defer { lock.unlock() }
        // Read in place: through `notebook`, the whole notebook was copied (retained and
        // released) to cut a few changes from its log.
        let changes = try loaded?.notebook.changes(since: version) ?? loadedState().notebook.changes(since: version)
        // What leaves may come back: a restore over the file must not hand these seqs out again.
        let own = replicaID
        if let last = changes.lazy.filter({ $0.replica == own }).map(\.endSeq).max() { raiseSeqMark(to: last) }
        return changes
    }

    /// The changes that wait for their dependencies.
    public var pendingChanges: [Change] {
        get throws { try notebook.pendingChanges }
    }

    /// Records what a peer has (its version vector, merged with what was known) and that it was
    /// heard from now (or at `seenAt`, wall-clock milliseconds).
    public func recordPeer(_ replica: ReplicaID, versionVector: VersionVector, seenAt: UInt64? = nil) throws {
        lock.lock(); defer { lock.unlock() }
        let now = seenAt ?? options.wallClock.milliseconds()
        do {
            try queue.writeWithoutTransaction { db in
                try transaction(db, begin: "BEGIN IMMEDIATE TRANSACTION") {
                    var vector = versionVector
                    let key = replica.raw.bytes
                    try statement("SELECT version_vector FROM peers WHERE replica = ?", db).forEachRow(.blob(key)) {
                        vector.merge(try VersionVector(storeBytes: SQLColumn.blob($0, 0)))
                    }
                    try statement("INSERT OR REPLACE INTO peers (replica, version_vector, last_seen) VALUES (?, ?, ?)", db)
                        .run(.blob(key), .blob(vector.storeBytes), .int(Int64(now)))
                }
            }
        } catch {
            throw StoreError.wrap(error, "cannot record peer \(replica)")
        }
    }

    /// Every known peer, by replica identity.
    public func peers() throws -> [PeerState] {
        do {
            return try queue.read { db in
                try Row.fetchAll(db, sql: "SELECT replica, version_vector, last_seen FROM peers ORDER BY replica").map { row in
                    let replicaBlob = try row.stored("replica", as: Data.self)
                    let vectorBlob = try row.stored("version_vector", as: Data.self)
                    guard let replica = ReplicaID(blob: [UInt8](replicaBlob)) else {
                        throw StoreError(.corrupt, "a peer's replica identity is not 16 bytes")
                    }
                    return PeerState(replica: replica, versionVector: try VersionVector(storeBytes: [UInt8](vectorBlob)),
                                     lastSeen: try row.storedUnsigned("last_seen"))
                }
            }
        } catch {
            throw StoreError.wrap(error, "cannot read the peers")
        }
    }

    /// The peer's state, or nil when it was never heard from.
    public func peer(_ replica: ReplicaID) throws -> PeerState? {
        try peers().first { $0.replica == replica }
    }

    /// Brings the pending table in line with the notebook's waiting changes: the rows of changes
    /// that no longer wait (released by the batch) go, the changes that newly wait are inserted;
    /// a change that still waits keeps its row (and its `received_at`).
    ///
    /// Rewriting the whole table encoded every waiting change again at every batch that changed
    /// the set: with a device behind a partition, hundreds of changes per batch.
    func writePending(_ db: Database) throws {
        var rows = try pendingRows(db)
        let waiting = loaded!.notebook.pendingChanges
        var current = Set<PendingKey>(minimumCapacity: waiting.count)
        let now = Int64(options.wallClock.milliseconds())
        let insert = try statement("""
            INSERT INTO pending_changes (replica, start_seq, end_seq, received_at, payload) VALUES (?, ?, ?, ?, ?)
            """, db)
        for change in waiting {
            let key = PendingKey(change)
            guard current.insert(key).inserted, rows[key] == nil else { continue }
            try insert.run(.blob(change.replica.raw.bytes), .int(Int64(bitPattern: change.startSeq)),
                           .int(Int64(bitPattern: change.endSeq)), .int(now), .blob(logEncoder.encode([change])))
            rows[key] = db.lastRowID
        }
        let delete = try statement("DELETE FROM pending_changes WHERE row = ?", db)
        for (key, row) in rows where !current.contains(key) {
            try delete.run(.int(row))
            rows[key] = nil
        }
        loaded!.pendingRows = rows
    }

    /// The pending table's rows by the change they hold, from what this connection knows or read.
    private func pendingRows(_ db: Database) throws -> [PendingKey: Int64] {
        if let rows = loaded!.pendingRows { return rows }
        var rows: [PendingKey: Int64] = [:]
        try statement("SELECT row, replica, start_seq, end_seq FROM pending_changes", db).forEachRow { row in
            guard let replica = ReplicaID(blob: SQLColumn.blob(row, 1)) else {
                throw StoreError(.corrupt, "a pending change's replica identity is not 16 bytes")
            }
            rows[PendingKey(replica: replica, startSeq: UInt64(bitPattern: SQLColumn.int(row, 2)),
                            endSeq: UInt64(bitPattern: SQLColumn.int(row, 3)))] = SQLColumn.int(row, 0)
        }
        return rows
    }
}

extension NoteStore {
    /// The changes in the quarantine: ready to apply but referring to something that does not
    /// exist, each with its author, seqs, reason and when it came, by author and seq.
    public func quarantinedChanges() throws -> [QuarantineEntry] {
        try read("cannot read the quarantine") { db in
            var entries: [QuarantineEntry] = []
            try statement("""
                SELECT replica, start_seq, end_seq, reason_code, reason, received_at FROM quarantined_changes
                ORDER BY replica, start_seq, row
                """, db).forEachRow { row in
                guard let replica = ReplicaID(blob: SQLColumn.blob(row, 0)) else {
                    throw StoreError(.corrupt, "a quarantined change's replica identity is not 16 bytes")
                }
                entries.append(QuarantineEntry(replica: replica, startSeq: UInt64(bitPattern: SQLColumn.int(row, 1)),
                                               endSeq: UInt64(bitPattern: SQLColumn.int(row, 2)), code: SQLColumn.text(row, 3),
                                               reason: SQLColumn.text(row, 4), receivedAt: UInt64(bitPattern: SQLColumn.int(row, 5))))
            }
            return entries
        }
    }

    /// Brings the quarantine table in line with the notebook's quarantine: rows of changes that
    /// left it go, changes that entered it are inserted (with the time now); a change still there
    /// keeps its row and its `received_at`.
    func writeQuarantine(_ db: Database) throws {
        var rows: [[UInt8]: Int64] = [:]
        try statement("SELECT row, payload FROM quarantined_changes", db).forEachRow { row in
            rows[SQLColumn.blob(row, 1)] = SQLColumn.int(row, 0)
        }
        let now = Int64(bitPattern: options.wallClock.milliseconds())
        let insert = try statement("""
            INSERT INTO quarantined_changes (replica, start_seq, end_seq, reason_code, reason, received_at, payload)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """, db)
        var kept = Set<Int64>()
        for entry in loaded!.notebook.quarantinedChanges {
            let payload = logEncoder.encode([entry.change])
            if let row = rows[payload] {
                kept.insert(row)
                continue
            }
            try insert.run(.blob(entry.change.replica.raw.bytes), .int(Int64(bitPattern: entry.change.startSeq)),
                           .int(Int64(bitPattern: entry.change.endSeq)), .text(entry.reason.code.description),
                           .text(entry.reason.message), .int(now), .blob(payload))
            rows[payload] = db.lastRowID
            kept.insert(db.lastRowID)
        }
        let delete = try statement("DELETE FROM quarantined_changes WHERE row = ?", db)
        for row in rows.values where !kept.contains(row) { try delete.run(.int(row)) }
    }

    /// Reads the quarantine table back into `notebook` (at load, and after another process wrote).
    func readQuarantine(into notebook: inout Notebook, _ db: Database) throws {
        var entries: [Notebook.QuarantinedChange] = []
        try statement("SELECT reason_code, reason, payload FROM quarantined_changes ORDER BY row", db).forEachRow { row in
            let reason = CRDTError(CRDTError.Code(named: SQLColumn.text(row, 0)) ?? .unknownReference, SQLColumn.text(row, 1))
            do {
                for change in try ChangeCodec.decode(SQLColumn.blob(row, 2)) {
                    entries.append(Notebook.QuarantinedChange(change: change, reason: reason))
                }
            } catch let error as CRDTError {
                throw StoreError(.corrupt, "a quarantined change cannot be read: \(error.message)")
            }
        }
        notebook.replaceQuarantine(with: entries)
    }
}

/// Which change a row of the pending table holds: its author and seq range.
struct PendingKey: Hashable {
    var replica: ReplicaID
    var startSeq: UInt64
    var endSeq: UInt64

    init(replica: ReplicaID, startSeq: UInt64, endSeq: UInt64) {
        self.replica = replica
        self.startSeq = startSeq
        self.endSeq = endSeq
    }

    init(_ change: Change) {
        self.init(replica: change.replica, startSeq: change.startSeq, endSeq: change.endSeq)
    }
}

/// A move of a replica to a fresh identity (`NoteStore.identityChanges()`).
public struct IdentityChange: Hashable, Sendable {
    /// The identity it stopped writing as (its operations stay, as another replica's).
    public var retired: ReplicaID
    /// The identity it writes as from then on.
    public var new: ReplicaID
    /// Wall-clock milliseconds when it moved.
    public var at: UInt64
    /// Why: the database file is a copy, or a sync brought changes in its name that it never made.
    public var reason: String
}

extension NoteStore {
    /// The identities this replica left, oldest first: a database file that is a copy of another
    /// (or restored from a backup) moves to a fresh identity when it is opened, and so does one
    /// that receives changes in its name that it never made, so two copies never write the same
    /// sequence numbers (Docs/Architecture.md, "Copied replicas").
    public func identityChanges() throws -> [IdentityChange] {
        try read("cannot read the replica's identity history") { db in
            try Row.fetchAll(db, sql: "SELECT retired_id, new_id, retired_at, reason FROM replica_history ORDER BY row").map { row in
                let retired = try row.stored("retired_id", as: Data.self)
                let new = try row.stored("new_id", as: Data.self)
                guard let retiredID = ReplicaID(blob: [UInt8](retired)), let newID = ReplicaID(blob: [UInt8](new)) else {
                    throw StoreError(.corrupt, "a retired replica identity is not 16 bytes")
                }
                let at = try row.stored("retired_at", as: Int64.self)
                return IdentityChange(retired: retiredID, new: newID, at: UInt64(max(0, at)), reason: try row.stored("reason"))
            }
        }
    }
}

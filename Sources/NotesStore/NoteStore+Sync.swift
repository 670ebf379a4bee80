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
    /// re-indexed. A malformed change (one that refers to characters that do not exist) rejects the
    /// whole batch: nothing of it is applied.
    @discardableResult
    public func apply(_ changes: [Change]) throws -> ApplyReport {
        lock.lock(); defer { lock.unlock() }
        guard !changes.isEmpty else {
            return ApplyReport(applied: 0, duplicates: 0, pending: try loadedState().notebook.pendingCount, touchedNotes: 0)
        }
        let report = try writeTransaction("cannot apply the changes") { db -> ApplyReport in
            let before = loaded!.notebook.versionVector
            let pendingBefore = loaded!.notebook.pendingCount
            dirty = true
            var applied = 0
            var duplicates = 0
            var queued = false
            for change in changes {
                switch try loaded!.notebook.apply(change) {
                case .applied(let released):
                    applied += 1 + released
                    if released > 0 { queued = true }
                case .duplicate:
                    duplicates += 1
                case .pending:
                    queued = true
                }
            }
            let pendingAfter = loaded!.notebook.pendingCount
            if queued || pendingAfter != pendingBefore {
                try writePending(db)
            }
            var touched = 0
            if applied > 0 {
                let newChanges = loaded!.notebook.changes(since: before)
                try log(newChanges, db)
                touched = try materialize(newChanges, db)
            }
            if applied > 0 || queued { try bumpRevision(db) } else { dirty = false }
            return ApplyReport(applied: applied, duplicates: duplicates, pending: pendingAfter, touchedNotes: touched)
        }
        compactIfDue()
        return report
    }

    /// Exactly the changes a replica at `version` lacks, in a causal order.
    public func changes(since version: VersionVector) throws -> [Change] {
        lock.lock(); defer { lock.unlock() }
        // Read in place: through `notebook`, the whole notebook was copied (retained and
        // released) to cut a few changes from its log.
        if let changes = loaded?.notebook.changes(since: version) { return changes }
        return try loadedState().notebook.changes(since: version)
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
                    let replicaBlob: Data = row["replica"]
                    let vectorBlob: Data = row["version_vector"]
                    guard let replica = ReplicaID(blob: [UInt8](replicaBlob)) else {
                        throw StoreError(.corrupt, "a peer's replica identity is not 16 bytes")
                    }
                    return PeerState(replica: replica, versionVector: try VersionVector(storeBytes: [UInt8](vectorBlob)),
                                     lastSeen: UInt64(row["last_seen"] as Int64))
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

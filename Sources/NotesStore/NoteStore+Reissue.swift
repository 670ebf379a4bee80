import Foundation
import GRDB
import NotesCRDT

/// A re-issue this store knows of (`NoteStore.reissues()`): operations a copy of a replica's
/// database wrote under its identity, held again as another's (Docs/Architecture.md, "Copied
/// replicas").
public struct ReissueRecord: Hashable, Sendable {
    /// The identity two copies wrote, and the seqs of it re-issued.
    public var replica: ReplicaID
    /// The first seq re-issued.
    public var startSeq: UInt64
    /// How many seqs.
    public var count: UInt64
    /// The identity that holds them again, from `firstSeq` on.
    public var by: ReplicaID
    /// Its seq of the first of them.
    public var firstSeq: UInt64
    /// Whether this store re-issued them (its own branch of the forked identity), or applied
    /// another replica's re-issue.
    public var own: Bool
    /// When it was applied here (wall-clock milliseconds).
    public var appliedAt: UInt64
}

extension NoteStore {
    /// The re-issues made or applied here, oldest first.
    public func reissues() throws -> [ReissueRecord] {
        try read("cannot read the re-issues") { db in
            try Row.fetchAll(db, sql: "SELECT replica, start_seq, count, by, first_seq, own, applied_at FROM reissues ORDER BY row").map { row in
                guard let replica = ReplicaID(blob: [UInt8](try row.stored("replica", as: Data.self))),
                      let by = ReplicaID(blob: [UInt8](try row.stored("by", as: Data.self))) else {
                    throw StoreError(.corrupt, "a re-issue's identity is not 16 bytes")
                }
                return ReissueRecord(replica: replica, startSeq: try row.storedUnsigned("start_seq"), count: try row.storedUnsigned("count"),
                                     by: by, firstSeq: try row.storedUnsigned("first_seq"), own: try row.stored("own", as: Bool.self),
                                     appliedAt: try row.storedUnsigned("applied_at"))
            }
        }
    }

    /// The identities this replica left, with the last seq it made as each (a re-issue of a
    /// fork of one of them takes only what it made). A move recorded before that was kept
    /// counts as having made nothing.
    func formerIdentities(_ db: Database) throws -> [ReplicaID: UInt64] {
        var result: [ReplicaID: UInt64] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT retired_id, made_through FROM replica_history") {
            guard let id = ReplicaID(blob: [UInt8](try row.stored("retired_id", as: Data.self))) else {
                throw StoreError(.corrupt, "a retired replica identity is not 16 bytes")
            }
            let made = try row.stored("made_through", as: Int64?.self) ?? 0
            result[id] = max(result[id] ?? 0, UInt64(max(0, made)))
        }
        return result
    }

    /// Records the re-issues `changes` hold (when applied here).
    func recordReissues(of changes: [Change], own: Bool, _ db: Database) throws {
        let now = Int64(clamping: options.wallClock.milliseconds())
        for change in changes where change.containsReissue {
            var seq = change.startSeq
            for op in change.operations {
                if case .reissue(let range) = op {
                    try db.execute(sql: """
                        INSERT OR IGNORE INTO reissues (replica, start_seq, count, by, first_seq, own, applied_at)
                        VALUES (?, ?, ?, ?, ?, ?, ?)
                        """, arguments: [Data(range.replica.raw.bytes), Int64(range.seq), Int64(range.count),
                                         Data(change.replica.raw.bytes), Int64(seq + 1), own, now])
                }
                seq += op.seqCount
            }
        }
    }

    /// Repairs forked identities of this replica, in the caller's transaction: for each, its own
    /// branch from the first seq that differs (through what it made as that identity) is
    /// re-issued as the identity it writes as, moving first to a fresh one when its current
    /// identity is the forked one; then the refused changes of the other branches are applied.
    ///
    /// - Returns: the fresh identity, when it moved.
    func reissueForks(_ forks: [ReplicaID: UInt64], madeThrough: [ReplicaID: UInt64], thenApplying refused: [Change],
                      _ db: Database) throws -> ReplicaID? {
        let own = replicaID
        var notebook = loaded!.notebook
        var moved: ReplicaID?
        let described = forks.sorted { $0.key < $1.key }.map { "seq \($0.value) of \($0.key)" }.joined(separator: ", ")
        if let first = forks[own] {
            let fresh = try NoteStore.retire(own, db, options: options, salt: "fork \(first)",
                                             reason: "a sync brought changes a copy of this database wrote in its name, differently from seq \(first) on: this replica's own from there are re-issued as its new identity",
                                             madeThrough: notebook.versionVector[own])
            notebook = notebook.replayed(as: fresh)
            moved = fresh
        }
        var reissued: [Change] = []
        notebook.beginBatch()
        // Seqs this replica already re-issued hold the other branch's operations now (applied
        // after that repair): a later repair from lower down must not take them for its own.
        let ours = Set([own] + Array(madeThrough.keys))
        for (replica, first) in forks.sorted(by: { $0.key < $1.key }) {
            let made = replica == own ? loaded!.notebook.versionVector[own] : madeThrough[replica] ?? 0
            let withdrawn = notebook.reissues.filter { ours.contains($0.by) && $0.original.replica == replica }.map(\.original)
            for range in NoteStore.seqs(from: first, through: made, without: withdrawn) {
                let changes = notebook.reissuing(replica, from: range.lowerBound, through: range.upperBound)
                for change in changes {
                    if case .rejected(let error) = notebook.apply(change) {
                        throw StoreError(.corrupt, "re-issuing \(described) failed: \(error.message)")
                    }
                }
                reissued += changes
            }
        }
        for change in refused { notebook.apply(change) }
        notebook.endBatch()
        loaded!.notebook = notebook
        try recordReissues(of: reissued, own: true, db)
        // What it can undo follows its edits to the seqs they now have.
        for change in reissued {
            guard case .reissue(let range) = change.operations.first else { continue }
            let shift = Int64(change.startSeq + 1) - Int64(range.seq)
            try db.execute(sql: "UPDATE undo_stack SET replica = ?, start_seq = start_seq + ?, end_seq = end_seq + ? WHERE replica = ? AND start_seq >= ? AND end_seq <= ?",
                           arguments: [Data(change.replica.raw.bytes), shift, shift, Data(range.replica.raw.bytes),
                                       Int64(range.seq), Int64(range.seq + range.count - 1)])
        }
        return moved
    }

    /// The runs of seqs `first ... last` outside `ranges` (all of one replica), in order.
    static func seqs(from first: UInt64, through last: UInt64, without ranges: [OpIDRange]) -> [ClosedRange<UInt64>] {
        guard first <= last else { return [] }
        var runs: [ClosedRange<UInt64>] = []
        var next = first
        for range in ranges.sorted(by: { $0.seq < $1.seq }) where range.count > 0 {
            let end = range.seq + (range.count - 1)
            guard end >= next else { continue }
            guard range.seq <= last else { break }
            if range.seq > next { runs.append(next ... range.seq - 1) }
            guard end < last else { return runs }
            next = end + 1
        }
        runs.append(next ... last)
        return runs
    }

    /// After the notebook was rebuilt from its log (a re-issue dropped operations it held), in
    /// the caller's transaction: the log is written anew as a snapshot, and every note, the
    /// waiting changes and the quarantine again.
    func rewriteAfterRebuild(_ db: Database) throws {
        let state = loaded!
        try db.execute(sql: "INSERT OR REPLACE INTO snapshot (id, through_row, made_at, payload) VALUES (1, ?, ?, ?)",
                       arguments: [state.lastLogRow, Int64(clamping: options.wallClock.milliseconds()), Data(state.notebook.snapshot())])
        try db.execute(sql: "DELETE FROM changes WHERE row <= ?", arguments: [state.lastLogRow])
        try db.execute(sql: "UPDATE replica SET snapshot_generation = (CASE WHEN snapshot_generation >= 9223372036854775807 THEN 0 ELSE snapshot_generation + 1 END) WHERE id = 1")
        loaded!.snapshotGeneration = loaded!.snapshotGeneration.nextCount
        loaded!.changesSinceSnapshot = 0
        loaded!.tagStateStale = true
        try writePending(db)
        try writeQuarantine(db)
        var touches = TouchedNotes()
        for id in inLoadedNotebook({ $0.noteIDs }) { touches.notes[id] = true }
        for table in ["notes", "deleted_notes"] {
            for hex in try String.fetchAll(db, sql: "SELECT id FROM \(table)") {
                if let id = NoteID(hex: hex), touches.notes[id] == nil { touches.notes[id] = true }
            }
        }
        _ = try materialize(touches, db)
    }
}

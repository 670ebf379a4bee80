import Foundation
import GRDB
import NotesCRDT
import NotesSync

extension NoteStore: SyncReplica {
    /// What the store has applied: its version vector.
    public func currentVersion() throws -> VersionVector { try versionVector }

    /// Applies changes from elsewhere with `apply(_:)`, in one transaction, and reports what happened.
    public func integrate(_ changes: [Change]) throws -> IntegrationReport {
        IntegrationReport(try apply(changes))
    }

    /// Applies one batch of a receive in its own transaction, as `integrate(_:)`, leaving the
    /// snapshot that may be due to `integrationFinished()` (one snapshot per sync, not per page).
    public func integrate(batch changes: [Change]) throws -> IntegrationReport {
        IntegrationReport(try apply(changes, alsoWriting: nil, compacting: false))
    }

    /// Applies the batches in one transaction with `apply(batches:progress:)`: each is logged as
    /// it comes, the notes are written once at the end.
    public func integrate(batches next: () throws -> [Change]?, progress: (IntegrationReport) -> Void) throws -> IntegrationReport {
        IntegrationReport(try apply(batches: next, progress: { progress(IntegrationReport($0)) }))
    }

    /// Takes the snapshot the batches left, if one is due.
    public func integrationFinished() throws {
        compactIfDueLocking()
    }

    /// Records what a peer has (merged with what was known).
    public func recordPeer(_ replica: ReplicaID, version: VersionVector) throws {
        try recordPeer(replica, versionVector: version)
    }

    /// Its own identity with what it made, and each it moved away from with what it made there.
    public func writtenIdentities() throws -> VersionVector {
        let own = try versionVector[replicaID]
        return try read("cannot read the replica's identities") { db in
            var written = VersionVector()
            for (id, made) in try formerIdentities(db) where made > 0 { written[id] = made }
            written[replicaID] = own
            return written
        }
    }

    /// What was recorded for `remote`; an empty vector (everything to check) for one never met.
    public func checkedVersion(at remote: String) throws -> VersionVector? {
        try read("cannot read what was checked at \(remote)") { db in
            var version = VersionVector()
            for row in try Row.fetchAll(db, sql: "SELECT replica, seq FROM remote_checks WHERE remote = ?", arguments: [remote]) {
                guard let id = ReplicaID(blob: [UInt8](try row.stored("replica", as: Data.self))) else {
                    throw StoreError(.corrupt, "a checked identity is not 16 bytes")
                }
                version[id] = try row.storedUnsigned("seq")
            }
            return version
        }
    }

    /// From the re-issues made or applied here: per identity, its re-issued span cut to what the
    /// store holds of it (after a re-issue, what is held there is the branch that stays).
    public func keptBranches() throws -> [ReplicaID: ClosedRange<UInt64>] {
        let version = try versionVector
        var kept: [ReplicaID: ClosedRange<UInt64>] = [:]
        for reissue in try reissues() where reissue.count > 0 {
            let (last, overflow) = reissue.startSeq.addingReportingOverflow(reissue.count - 1)
            let held = min(overflow ? .max : last, version[reissue.replica])
            guard reissue.startSeq <= held else { continue }
            let span = kept[reissue.replica].map { min($0.lowerBound, reissue.startSeq) ... max($0.upperBound, held) }
            kept[reissue.replica] = span ?? reissue.startSeq ... held
        }
        return kept
    }

    public func recordChecked(_ version: VersionVector, at remote: String) throws {
        lock.lock(); defer { lock.unlock() }
        try writeTransaction("cannot record what was checked at \(remote)") { db in
            for entry in version.sortedEntries {
                try db.execute(sql: "INSERT OR REPLACE INTO remote_checks (remote, replica, seq) VALUES (?, ?, ?)",
                               arguments: [remote, Data(entry.replica.raw.bytes), Int64(clamping: entry.seq)])
            }
        }
    }
}

extension IntegrationReport {
    /// What a store's `apply` did, as a sync reports it.
    public init(_ report: ApplyReport) {
        self.init(applied: report.applied, duplicates: report.duplicates, pending: report.pending,
                  quarantined: report.quarantined, rejected: report.rejected, foreignOwnChanges: report.foreignOwnChanges,
                  forksRepaired: report.forksRepaired, forks: report.forks)
    }
}

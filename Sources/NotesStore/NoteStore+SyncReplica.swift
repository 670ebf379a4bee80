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
}

extension IntegrationReport {
    /// What a store's `apply` did, as a sync reports it.
    public init(_ report: ApplyReport) {
        self.init(applied: report.applied, duplicates: report.duplicates, pending: report.pending,
                  quarantined: report.quarantined, rejected: report.rejected, foreignOwnChanges: report.foreignOwnChanges,
                  forksRepaired: report.forksRepaired)
    }
}

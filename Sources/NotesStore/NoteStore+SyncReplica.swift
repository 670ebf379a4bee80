import NotesCRDT
import NotesSync

extension NoteStore: SyncReplica {
    public func currentVersion() throws -> VersionVector { try versionVector }

    public func integrate(_ changes: [Change]) throws -> IntegrationReport {
        let report = try apply(changes)
        return IntegrationReport(applied: report.applied, duplicates: report.duplicates, pending: report.pending,
                                 quarantined: report.quarantined, rejected: report.rejected)
    }

    public func recordPeer(_ replica: ReplicaID, version: VersionVector) throws {
        try recordPeer(replica, versionVector: version)
    }
}

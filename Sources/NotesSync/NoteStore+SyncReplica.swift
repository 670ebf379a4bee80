import NotesCRDT
import NotesStore

extension NoteStore: SyncReplica {
    public var syncReplicaID: ReplicaID { replicaID }

    public func syncVersion() throws -> VersionVector { try versionVector }

    public func syncChanges(since version: VersionVector) throws -> [Change] { try changes(since: version) }

    public func syncApply(_ changes: [Change]) throws -> (applied: Int, duplicates: Int, pending: Int) {
        let report = try apply(changes)
        return (report.applied, report.duplicates, report.pending)
    }

    public func syncRecordPeer(_ replica: ReplicaID, version: VersionVector) throws {
        try recordPeer(replica, versionVector: version)
    }
}

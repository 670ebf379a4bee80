import NotesCRDT

/// A bundle that arrived through a transport, with where it came from (a file name, a URL).
public struct ReceivedBundle: Sendable {
    public var bundle: SyncBundle
    public var source: String

    public init(bundle: SyncBundle, source: String) {
        self.bundle = bundle
        self.source = source
    }
}

/// What a transport could not read this time and will try again on the next sync (a file still
/// being copied in, say). Not an error: nothing of it was applied.
public struct SkippedInput: Sendable, Hashable {
    public var source: String
    public var reason: String

    public init(source: String, reason: String) {
        self.source = source
        self.reason = reason
    }
}

/// Moves bundles between this replica and the others. The file transport here and the HTTP
/// transport implement it; the sync engine drives it. Transports only move bytes: what to send
/// and what to apply is decided by `SyncStateMachine` and the engine.
public protocol SyncTransport: Sendable {
    /// What the other side (a folder, a relay) already has, so that we send only what it lacks.
    func remoteVersion(for local: ReplicaID) async throws -> VersionVector
    /// Hands over a bundle of changes the other side lacks.
    func send(_ bundle: SyncBundle) async throws
    /// Bundles that may hold what a replica at `version` lacks, and what could not be read this time.
    func receive(for local: ReplicaID, version: VersionVector) async throws -> (bundles: [ReceivedBundle], skipped: [SkippedInput])
}

/// The replica that a sync runs against: the store, or a simulated device.
public protocol SyncReplica: AnyObject, Sendable {
    var syncReplicaID: ReplicaID { get }
    func syncVersion() throws -> VersionVector
    func syncChanges(since version: VersionVector) throws -> [Change]
    /// Applies changes in one transaction; returns (applied, duplicates, pending).
    func syncApply(_ changes: [Change]) throws -> (applied: Int, duplicates: Int, pending: Int)
    func syncRecordPeer(_ replica: ReplicaID, version: VersionVector) throws
}

import NotesCRDT

/// A bundle that arrived through a transport, with where it came from (a file name, a URL).
public struct ReceivedBundle: Sendable {
    /// The bundle, checked whole; or one record of a record page, checked itself after the
    /// page's framing was checked whole (`continuesPage` for the records after the first).
    public var bundle: SyncBundle
    /// Where it came from, for messages.
    public var source: String
    /// Whether this continues the page handed over before it (a record page goes record by
    /// record, so that only a record at a time is held decoded): counted as one bundle with it.
    public var continuesPage: Bool

    /// Wraps a bundle read from `source`.
    public init(bundle: SyncBundle, source: String, continuesPage: Bool = false) {
        self.bundle = bundle
        self.source = source
        self.continuesPage = continuesPage
    }
}

/// Something a transport could not use this time (a file still being copied in, a file whose
/// name lies about what it holds). Not an error: nothing of it was applied, and a later sync looks
/// again.
public struct SkippedInput: Sendable, Hashable, Codable {
    /// The file or URL.
    public var source: String
    /// Why it was skipped.
    public var reason: String

    /// Records that `source` was skipped for `reason`.
    public init(source: String, reason: String) {
        self.source = source
        self.reason = reason
    }
}

/// What a transport brought back when it handed a bundle over.
public struct SendResult: Sendable {
    /// Bundles that came back with the send (a relay answers an upload with what the sender lacks).
    public var replies: [ReceivedBundle]
    /// Whether `replies` already hold everything the other side has that the sender lacked, so
    /// that no separate receive is needed.
    public var complete: Bool

    /// A send that brought nothing back (a folder).
    public static let nothing = SendResult(replies: [], complete: false)

    /// Wraps the replies to a send.
    public init(replies: [ReceivedBundle], complete: Bool) {
        self.replies = replies
        self.complete = complete
    }
}

/// What a transport found for a replica.
public struct ReceiveResult: Sendable {
    /// Bundles that may hold what the replica lacks (some may hold only a sender's version).
    public var bundles: [ReceivedBundle]
    /// What could not be used this time.
    public var skipped: [SkippedInput]

    /// Wraps what a receive found.
    public init(bundles: [ReceivedBundle], skipped: [SkippedInput] = []) {
        self.bundles = bundles
        self.skipped = skipped
    }
}

/// Moves bundles between a replica and the others: a shared folder (`FolderTransport`) or a relay
/// (`RelayTransport`). Transports only move and check bytes; what to send and what to apply is
/// decided by `SyncSession`, and `SyncEngine` performs it.
public protocol SyncTransport: Sendable {
    /// What the other side (a folder, a relay) already has, so that only what it lacks is sent.
    func remoteVersion(for local: ReplicaID) async throws -> VersionVector
    /// Hands over a bundle of changes the other side lacks (its `senderVersion` is what the sender has).
    func send(_ bundle: SyncBundle) async throws -> SendResult
    /// Bundles that may hold what a replica at `version` lacks, and what could not be read this time.
    func receive(for local: ReplicaID, version: VersionVector) async throws -> ReceiveResult
    /// Whether the other side's readers check each sealed unit and refuse only that one (a
    /// folder's readers skip one file), so that a replica may pass on units it took on their
    /// recipient tag without checking their signatures first. False (the default): a relay
    /// refuses a whole upload for one unit whose signature does not verify.
    var checksEachSealedUnit: Bool { get }
    /// `send(_:)`, handing each bundle that comes back to `each` as it arrives (a relay's pages),
    /// so that a large answer is never held whole.
    ///
    /// - Returns: `SendResult.complete`: whether the replies held everything the sender lacked.
    func send(_ bundle: SyncBundle, each: (ReceivedBundle) async throws -> Void) async throws -> Bool
    /// `receive(for:version:)`, handing each bundle to `each` as it is read (a relay's page, a
    /// folder's file), so that a large history is never held whole.
    ///
    /// - Returns: what could not be used this time.
    func receive(for local: ReplicaID, version: VersionVector, each: (ReceivedBundle) async throws -> Void) async throws -> [SkippedInput]
    /// What names the other side (a folder's path, a relay's space) for as long as it holds the
    /// same changes, so that a replica can remember which of its own operations it has found
    /// there as it made them (`SyncReplica.checkedVersion(at:)`); nil (the default): none.
    var checkKey: String? { get }
    /// Hands over changes at seqs the other side may hold another branch of (a copied replica's
    /// fork, repaired by a re-issue): a side that keeps one operation per seq (a relay) keeps
    /// these beside what it holds, so that a replica that lacks the seqs gets both branches and
    /// keeps the one no re-issue withdrew; a folder writes them as files. False (the default):
    /// nothing was sent.
    func sendAgain(_ bundle: SyncBundle) async throws -> Bool
}

extension SyncTransport {
    public var checksEachSealedUnit: Bool { false }
    public var checkKey: String? { nil }
    public func sendAgain(_ bundle: SyncBundle) async throws -> Bool { false }

    /// Collects the replies with `send(_:)`, then hands them over one by one.
    public func send(_ bundle: SyncBundle, each: (ReceivedBundle) async throws -> Void) async throws -> Bool {
        let result = try await send(bundle)
        for reply in result.replies { try await each(reply) }
        return result.complete
    }

    /// Collects the bundles with `receive(for:version:)`, then hands them over one by one.
    public func receive(for local: ReplicaID, version: VersionVector, each: (ReceivedBundle) async throws -> Void) async throws -> [SkippedInput] {
        let result = try await receive(for: local, version: version)
        for bundle in result.bundles { try await each(bundle) }
        return result.skipped
    }
}

/// What a replica did with a batch of received changes.
public struct IntegrationReport: Sendable, Hashable, Codable {
    /// Changes applied now, including waiting ones that the batch released.
    public var applied: Int
    /// Changes already covered (harmless repeats).
    public var duplicates: Int
    /// Changes that wait for their dependencies after the batch (in the whole replica).
    public var pending: Int
    /// Changes of the batch kept aside in the quarantine: they refer to something that does not exist.
    public var quarantined: Int
    /// Changes of the batch refused and not kept (malformed, or the quarantine was full).
    public var rejected: Int
    /// Why sealed units of the batch were refused, one line each (in an encrypted space).
    public var refused: [String] = []
    /// Sealed units' changes in this replica's own name that it never made (another copy of it).
    public var foreignOwnChanges = 0
    /// Identities this replica wrote as that a copy of its database wrote differently, repaired
    /// by the batch: its own branch of each re-issued as the identity it writes as now.
    public var forksRepaired = 0
    /// Others' identities found writing one seq twice, differently (their changes are part of
    /// `rejected`), one line each: two copies of one database, or a member that sealed one range
    /// twice.
    public var forks: [String] = []

    /// A report of what a batch did.
    public init(applied: Int = 0, duplicates: Int = 0, pending: Int = 0, quarantined: Int = 0, rejected: Int = 0,
                refused: [String] = [], foreignOwnChanges: Int = 0, forksRepaired: Int = 0, forks: [String] = []) {
        self.applied = applied
        self.duplicates = duplicates
        self.pending = pending
        self.quarantined = quarantined
        self.rejected = rejected
        self.refused = refused
        self.foreignOwnChanges = foreignOwnChanges
        self.forksRepaired = forksRepaired
        self.forks = forks
    }

    /// Adds what a later batch did (the pending count is the later batch's: it is a state).
    package mutating func add(_ later: IntegrationReport) {
        applied += later.applied
        duplicates += later.duplicates
        pending = later.pending
        quarantined += later.quarantined
        rejected += later.rejected
        refused += later.refused
        foreignOwnChanges += later.foreignOwnChanges
        forksRepaired += later.forksRepaired
        forks.appendNew(later.forks)
    }
}

extension Array where Element: Equatable {
    /// Appends the elements of `more` not in the array yet (a report's lines, once each).
    package mutating func appendNew(_ more: [Element]) {
        for element in more where !contains(element) { append(element) }
    }
}

/// A replica that may be in an end-to-end encrypted space: it seals its own changes, keeps the
/// sealed units it receives to pass them on as they are, and opens them. `NoteStore` conforms.
public protocol SealedSyncReplica: SyncReplica {
    /// Whether the replica is in an encrypted space (then it syncs only sealed bundles).
    func isInEncryptedSpace() throws -> Bool
    /// The sealed units a replica at `version` lacks, after sealing this replica's own changes
    /// that no unit holds yet.
    func sealedUnits(since version: VersionVector) throws -> [SealedUnit]
    /// `sealedUnits(since:)`, where `checkingTaggedUnits` false passes on units taken on their
    /// recipient tag without checking their signatures (for a destination that checks each unit).
    func sealedUnits(since version: VersionVector, checkingTaggedUnits: Bool) throws -> [SealedUnit]
    /// Opens the units and applies what they hold in one transaction; units that do not verify
    /// are refused (reported, kept aside), not thrown.
    ///
    /// - Throws: `SyncError` `.wrongKey` when units were received, none is sealed under this
    ///   replica's key, and it never opened one of another replica (nothing is applied).
    func integrate(sealed units: [SealedUnit]) throws -> IntegrationReport
    /// `integrate(sealed:)` for one batch of a receive that comes in several, as `integrate(batch:)`.
    func integrate(sealedBatch units: [SealedUnit]) throws -> IntegrationReport
}

/// The replica a sync runs against: `NoteStore` conforms (in NotesStore); a test may use its own.
public protocol SyncReplica: AnyObject, Sendable {
    /// The replica's identity.
    var replicaID: ReplicaID { get }
    /// What the replica has applied.
    func currentVersion() throws -> VersionVector
    /// Exactly the changes a replica at `version` lacks, in a causal order.
    func changes(since version: VersionVector) throws -> [Change]
    /// Applies changes from elsewhere in one transaction. Invalid changes are set aside, not thrown.
    func integrate(_ changes: [Change]) throws -> IntegrationReport
    /// Applies one batch of a receive that comes in several (a relay's page, a folder's file), in
    /// its own transaction; the replica may leave housekeeping to `integrationFinished()`.
    func integrate(batch changes: [Change]) throws -> IntegrationReport
    /// Applies the batches `next` hands over (nil when none is left) in one transaction,
    /// holding one at a time; `progress` is told after each. An error `next` throws rolls all
    /// of them back.
    func integrate(batches next: () throws -> [Change]?, progress: (IntegrationReport) -> Void) throws -> IntegrationReport
    /// Called once after the last batch of a receive (also after a failed one): housekeeping
    /// left for the end (a store's snapshot).
    func integrationFinished() throws
    /// Records what a peer has (merged with what was known).
    func recordPeer(_ replica: ReplicaID, version: VersionVector) throws
    /// The identities this replica wrote as, each with the last seq it made as it: its own, and
    /// those it moved away from. A copy of its database may have written the same seqs
    /// differently, so a sync takes what the other side holds of them back to compare
    /// (Docs/Sync.md, "Checking the other side's copy of our own").
    func writtenIdentities() throws -> VersionVector
    /// How far the other side named `remote` (`SyncTransport.checkKey`) was found to hold this
    /// replica's written identities as it made them; nil (the default): the replica does not
    /// check, and a sync takes nothing back.
    func checkedVersion(at remote: String) throws -> VersionVector?
    /// Records how far `remote` was found to hold the written identities as they were made.
    func recordChecked(_ version: VersionVector, at remote: String) throws
    /// Per identity whose seqs a re-issue withdrew on one branch, the seqs of that span this
    /// replica holds of the branch that stays (the first through the last): the other side may
    /// hold the withdrawn branch there, so a sync sends them again (`SyncTransport.sendAgain`).
    func keptBranches() throws -> [ReplicaID: ClosedRange<UInt64>]
}

extension SyncReplica {
    public func writtenIdentities() throws -> VersionVector {
        var written = VersionVector()
        written[replicaID] = try currentVersion()[replicaID]
        return written
    }

    public func checkedVersion(at remote: String) throws -> VersionVector? { nil }

    public func recordChecked(_ version: VersionVector, at remote: String) throws {}

    public func keptBranches() throws -> [ReplicaID: ClosedRange<UInt64>] { [:] }
}

extension SealedSyncReplica {
    public func sealedUnits(since version: VersionVector, checkingTaggedUnits: Bool) throws -> [SealedUnit] {
        try sealedUnits(since: version)
    }

    public func integrate(sealedBatch units: [SealedUnit]) throws -> IntegrationReport {
        try integrate(sealed: units)
    }
}

extension SyncReplica {
    public func integrate(batch changes: [Change]) throws -> IntegrationReport {
        try integrate(changes)
    }

    public func integrationFinished() throws {}

    /// Applies each batch in its own transaction (`integrate(batch:)`): a replica that can hold
    /// one transaction across batches does better.
    public func integrate(batches next: () throws -> [Change]?, progress: (IntegrationReport) -> Void) throws -> IntegrationReport {
        var total = IntegrationReport()
        while let batch = try next() {
            total.add(try integrate(batch: batch))
            progress(total)
        }
        try integrationFinished()
        if total == IntegrationReport() { return try integrate([]) }
        return total
    }
}

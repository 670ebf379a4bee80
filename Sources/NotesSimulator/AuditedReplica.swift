import NotesCRDT
import NotesStore
import NotesSync

/// The device's store as the sync engine sees it, with every batch it integrates checked: the
/// report must say what the CRDT did with those changes (`SyncReport.applied` and `duplicates`
/// are shown to users and decide whether a sync did anything). A count read off the log cannot
/// be exact (the log joins a change to the one before it when it directly follows), so the same
/// changes are applied again to the notebook as it was, and the counts compared.
final class AuditedReplica: SealedSyncReplica, @unchecked Sendable {
    let store: NoteStore
    /// What the checks found, in order (read after the sync).
    private(set) var problems: [String] = []
    /// CPU time the replays took: not the sync's (`syncSeconds` is the shipped code's).
    private(set) var auditNanoseconds: UInt64 = 0

    init(_ store: NoteStore) { self.store = store }

    var replicaID: ReplicaID { store.replicaID }
    func currentVersion() throws -> VersionVector { try store.currentVersion() }
    func changes(since version: VersionVector) throws -> [Change] { try store.changes(since: version) }
    func integrationFinished() throws { try store.integrationFinished() }
    func recordPeer(_ replica: ReplicaID, version: VersionVector) throws { try store.recordPeer(replica, version: version) }
    func writtenIdentities() throws -> VersionVector { try store.writtenIdentities() }
    func checkedVersion(at remote: String) throws -> VersionVector? { try store.checkedVersion(at: remote) }
    func recordChecked(_ version: VersionVector, at remote: String) throws { try store.recordChecked(version, at: remote) }
    func keptBranches() throws -> [ReplicaID: ClosedRange<UInt64>] { try store.keptBranches() }
    func isInEncryptedSpace() throws -> Bool { try store.isInEncryptedSpace() }
    func sealedUnits(since version: VersionVector) throws -> [SealedUnit] { try store.sealedUnits(since: version) }
    func sealedUnits(since version: VersionVector, checkingTaggedUnits: Bool) throws -> [SealedUnit] {
        try store.sealedUnits(since: version, checkingTaggedUnits: checkingTaggedUnits)
    }
    // Sealed units are opened inside the store: what they held is not seen here, so not audited.
    func integrate(sealed units: [SealedUnit]) throws -> IntegrationReport { try store.integrate(sealed: units) }
    func integrate(sealedBatch units: [SealedUnit]) throws -> IntegrationReport { try store.integrate(sealedBatch: units) }

    func integrate(_ changes: [Change]) throws -> IntegrationReport {
        try audited(changes) { try store.integrate(changes) }
    }

    func integrate(batch changes: [Change]) throws -> IntegrationReport {
        try audited(changes) { try store.integrate(batch: changes) }
    }

    func integrate(batches next: () throws -> [Change]?, progress: (IntegrationReport) -> Void) throws -> IntegrationReport {
        let before = try store.notebook
        let id = store.replicaID
        var handed: [Change] = []
        let report = try store.integrate(batches: {
            let batch = try next()
            if let batch { handed.append(contentsOf: batch) }
            return batch
        }, progress: progress)
        audit(report, of: handed, before: before, id: id)
        return report
    }

    private func audited(_ changes: [Change], _ integrate: () throws -> IntegrationReport) throws -> IntegrationReport {
        let before = try store.notebook
        let id = store.replicaID
        let report = try integrate()
        audit(report, of: changes, before: before, id: id)
        return report
    }

    private func audit(_ report: IntegrationReport, of changes: [Change], before: Notebook, id: ReplicaID) {
        // Changes in its own name that it never made move the store to a new identity, and a fork
        // of an identity it wrote as is repaired by re-issuing: not counted here.
        guard store.replicaID == id, report.forksRepaired == 0, let after = try? store.versionVector else { return }
        let started = SealingTime.cpuNanoseconds()
        defer { auditNanoseconds &+= SealingTime.cpuNanoseconds() &- started }
        if let problem = Simulation.integrationMiscount(report, of: changes, before: before, after: after) { problems.append(problem) }
    }
}

extension Simulation {
    /// Whether a store's report of integrating `changes` says what the CRDT does with them from
    /// the notebook `before`: the same applied (released waiting ones included) and duplicate
    /// counts. Nil when it does, or when `before` was not what the store started from (its
    /// version vector then ends elsewhere: another process wrote meanwhile).
    static func integrationMiscount(_ report: IntegrationReport, of changes: [Change], before: Notebook, after: VersionVector) -> String? {
        var replay = before
        let counts = replay.apply(contentsOf: changes)
        guard replay.versionVector == after else { return nil }
        if report.applied != counts.applied || report.duplicates != counts.duplicates {
            return "a batch of \(changes.count) change(s) was reported as \(report.applied) applied and \(report.duplicates) duplicate(s); the CRDT applies \(counts.applied) and finds \(counts.duplicates) duplicate(s)"
        }
        return nil
    }
}

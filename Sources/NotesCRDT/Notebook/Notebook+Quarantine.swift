extension Notebook {
    /// A change kept aside because it refers to something that does not exist, with the reason.
    public struct QuarantinedChange: Hashable, Sendable {
        /// The change (the part of it that was not applied yet when it was tried).
        public var change: Change
        /// Why it does not apply.
        public var reason: CRDTError

        /// A quarantined change.
        public init(change: Change, reason: CRDTError) {
            self.change = change
            self.reason = reason
        }
    }

    /// The changes in the quarantine, by replica and then in the order they came.
    ///
    /// A change is quarantined when its dependencies are all here but it refers to something
    /// that does not exist (an origin, deleted characters): forged, or damaged in a way no
    /// checksum caught. It does not advance the version vector, so its author's later changes
    /// wait (pending) behind it, while every other replica's changes keep flowing. When a valid
    /// change takes its seqs (the real one after a forged one), it leaves the quarantine.
    ///
    /// The quarantine keeps at most 16 changes of one replica and 4,096 in all; a change that
    /// does not apply when there is no room is refused (`.rejected`, not kept).
    ///
    /// The quarantine is not part of `snapshot()`: a store keeps it in its own table.
    public var quarantinedChanges: [QuarantinedChange] { quarantine.all }

    /// How many changes are in the quarantine.
    public var quarantinedCount: Int { quarantine.count }

    /// How many times a change has entered the quarantine since this notebook was made or
    /// loaded (a store compares it before and after a batch to know whether to write).
    package var quarantineAdmissions: Int { quarantine.admitted }

    /// How many changes have been refused (`ApplyOutcome.rejected`, or released from the pending
    /// set when the quarantine had no room) since this notebook was made or loaded.
    package var quarantineRefusals: Int { quarantine.refused }

    /// Increases whenever a change enters or leaves the quarantine.
    package var quarantineGeneration: Int { quarantine.generation }

    /// Replaces the quarantine by the changes a store kept in its own table (read when it loads
    /// the notebook, or after another process wrote): not validated again. A change that the
    /// version vector covers, or that a valid change has passed, has no place there and is left out.
    package mutating func replaceQuarantine(with entries: [QuarantinedChange]) {
        materialize()
        quarantine.removeAll()
        for entry in entries {
            let have = versionVector[entry.change.replica]
            guard have < entry.change.endSeq, entry.change.startSeq <= have &+ 1 else { continue }
            quarantine.add(entry.change, reason: entry.reason, counting: false)
        }
    }
}

/// The changes that were ready but refer to something that does not exist, filed per replica.
///
/// Every change of a replica in here starts at most one past what is applied of that replica
/// (it was ready when it came): they compete for the replica's next seqs, and when a valid
/// change takes them, `take(_:through:)` hands them back (to be tried again from there).
///
/// It holds at most `perReplica` changes of one replica and `total` in all: every advance of a
/// replica tries its quarantined changes again, so without a bound a peer could make each
/// valid change cost as much as everything it had forged before (and fill the store).
struct Quarantine: Sendable {
    /// The most changes of one replica kept.
    static let perReplica = 16
    /// The most changes kept in all.
    static let total = 4096

    private var byReplica: [ReplicaID: [Notebook.QuarantinedChange]] = [:]
    /// How many changes are here.
    private(set) var count = 0
    /// How many changes have entered, ever.
    private(set) var admitted = 0
    /// How many changes have been refused, ever: malformed ones, and ones there was no room for.
    private(set) var refused = 0
    /// +1 whenever a change enters or leaves.
    private(set) var generation = 0
    /// The change that entered last.
    private(set) var lastAdmitted: Notebook.QuarantinedChange?

    /// The reason an equal change is here, or nil.
    ///
    /// - Complexity: O(changes of its replica here: at most `perReplica`), plus comparing equal headers.
    func reason(for change: Change) -> CRDTError? {
        byReplica[change.replica]?.first { $0.change == change }?.reason
    }

    /// Whether another change of `replica` would be kept.
    func hasRoom(for replica: ReplicaID) -> Bool {
        count < Quarantine.total && (byReplica[replica]?.count ?? 0) < Quarantine.perReplica
    }

    /// Keeps `change` aside with its reason (an equal change is kept once), when there is room.
    ///
    /// - Parameter counting: whether it counts as newly admitted (not when restored from storage).
    mutating func add(_ change: Change, reason: CRDTError, counting: Bool = true) {
        guard self.reason(for: change) == nil else { return }
        guard hasRoom(for: change.replica) else {
            if counting { refused += 1 }
            return
        }
        let entry = Notebook.QuarantinedChange(change: change, reason: reason)
        byReplica[change.replica, default: []].append(entry)
        count += 1
        generation += 1
        if counting {
            admitted += 1
            lastAdmitted = entry
        }
    }

    /// Counts a change refused as malformed.
    mutating func refuse() { refused += 1 }

    /// Goes on from another quarantine's counters (a state rebuilt from the log, whose changes
    /// are tried again).
    mutating func carryCounters(from other: Quarantine) {
        admitted = other.admitted
        refused = other.refused
        generation = other.generation + 1
    }

    /// Uncounts the admissions of changes `other` held already (tried again by a rebuild: only
    /// what the rebuild newly quarantined counts).
    mutating func uncountAdmissions(heldBy other: Quarantine) {
        admitted -= all.filter { other.reason(for: $0.change) != nil }.count
    }

    /// Empties the quarantine (the counters go on).
    mutating func removeAll() {
        guard count > 0 else { return }
        byReplica = [:]
        count = 0
        generation += 1
    }

    /// Takes out the changes of `replica` that start at or before `applied` (seqs a valid change
    /// has taken since they came).
    mutating func take(_ replica: ReplicaID, through applied: UInt64) -> [Notebook.QuarantinedChange] {
        guard var list = byReplica[replica], list.contains(where: { $0.change.startSeq <= applied }) else { return [] }
        let taken = list.filter { $0.change.startSeq <= applied }
        list.removeAll { $0.change.startSeq <= applied }
        byReplica[replica] = list.isEmpty ? nil : list
        count -= taken.count
        generation += 1
        return taken
    }

    /// Every change here, by replica, then in the order they came.
    var all: [Notebook.QuarantinedChange] { byReplica.keys.sorted().flatMap { byReplica[$0]! } }
}

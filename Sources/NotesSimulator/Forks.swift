import NotesCRDT
import NotesStore

/// Forks published before anyone sees them (`faults.forks`): a device's database copied onto
/// another device keeping its file identity, so that both write as one replica identity, and both
/// go on editing and syncing through their hubs. Docs/Simulation.md, "Faults".
extension Simulation {
    /// A fork made by the `fork` fault: who shares `identity` from seq `base` on.
    struct ForkRecord {
        var identity: ReplicaID
        var base: UInt64
        var source: Int
        var target: Int
        /// The reference's branches of the two databases (`SimDevice.branch`).
        var sourceBranch: Int
        var targetBranch: Int
        /// The devices that re-issued their own branch of it, and the identities that hold those
        /// re-issues.
        var repairedBy: Set<Int> = []
        var reissuedAs: Set<ReplicaID> = []

        /// The branch device `d` writes on, if it is one of the two.
        func branch(of d: Int) -> Int? { d == source ? sourceBranch : d == target ? targetBranch : nil }
    }

    /// Device `source`'s database is copied onto device `d` keeping its file identity, as a copy
    /// an older build made (or one no check at open can see): nothing at open moves it, so both
    /// devices write as one replica identity from here on, each its own operations at the same
    /// seqs. Both go on editing and syncing as before (the copy through the hubs of `d`), so each
    /// branch reaches relays, folders and other devices before anyone sees the fork. Whoever
    /// finds the other branch's operations at seqs it wrote must re-issue its own (the store's
    /// `reissues()`, followed by `followIdentity`); at the end every edit of both copies is there.
    ///
    /// What device `d` had made and never passed on is gone, as for any copy over it. A device in
    /// a fork not repaired yet is neither forked again nor copied from.
    func forkReplica(_ d: Int, from source: Int) async {
        guard spaceKey == nil, source != d, !dead.contains(source), !inUnrepairedFork(source), !inUnrepairedFork(d) else {
            return skipReplacement(d)
        }
        // Two databases per identity at a time: a third copy of an identity whose fork is not
        // settled would take the other copy's withdrawn branch for a fork of its own and re-issue
        // operations it shares with the copy it was made from (see Docs/Simulation.md, "forks").
        let written = Set([devices[source].replicaID] + devices[source].retired)
        do {
            for fork in forkRecords where written.contains(fork.identity) {
                guard try settled(fork) else { return skipReplacement(d) }
            }
        } catch {
            return violation("device \(source): cannot read its store: \(error)")
        }
        let original = devices[source]
        let identity = original.replicaID
        let base: UInt64
        do {
            base = try original.store.versionVector[identity]
        } catch {
            return violation("device \(source): cannot read its version vector: \(error)")
        }
        stats.forks += 1
        let branch = nextBranch
        nextBranch += 1
        await replaceStore(of: d, branch: branch) { device in
            device.database = try InMemoryDatabase(copying: original.database, label: original.database.label)
            let store = try NoteStore.open(device.database, options: storeOptions(d))
            if store.replicaID != identity {
                violation("device \(d): a copy of device \(source)'s database that kept its file identity moved to \(store.replicaID) at open (nothing there can tell it is a copy)")
            }
            return store
        }
        forkRecords.append(ForkRecord(identity: identity, base: base, source: source, target: d, sourceBranch: original.branch, targetBranch: branch))
        if Simulation.printsSteps { print("t=\(elapsed) FORK d\(source) -> d\(d) as \(identity) from seq \(base)") }
        trace.add(elapsed, d, .fork, Int64(source), Int64(base))
    }

    /// Whether the device writes as (or wrote as) an identity that another database wrote
    /// differently at some seqs, and neither has re-issued its own branch yet: the reference
    /// could not tell which of its operations a replacement would lose, so none happens then.
    func inUnrepairedFork(_ d: Int) -> Bool {
        let device = devices[d]
        return ([device.replicaID] + device.retired).contains { !reference.contestedSeqs(of: $0, branch: device.branch).isEmpty }
    }

    /// A replacement (reinstall, copy, restore, death, fork) not made: the device is in a fork
    /// not repaired yet.
    func skipReplacement(_ d: Int) {
        stats.replacementsSkipped += 1
        trace.add(elapsed, d, .fork, -1)
    }

    /// After a step that handed the device's store changes from elsewhere: when the store
    /// re-issued its own branch of a forked identity (new own records in `reissues()`), the
    /// reference takes the device's branch of that identity back from the first seq re-issued
    /// and records the re-issuing changes (what the store made as the identity it writes as);
    /// when it moved to a new identity, the device writes as that one from then on. The undo
    /// stack follows the re-issued edits.
    ///
    /// - Returns: the store's new own re-issue records.
    @discardableResult
    func followIdentity(_ device: SimDevice, before identity: ReplicaID) throws -> [ReissueRecord] {
        let now = device.replicaID
        let own = try device.store.reissues().filter(\.own)
        let fresh = own.count > device.ownReissues ? Array(own[device.ownReissues...]) : []
        device.ownReissues = own.count
        let moved = now != identity
        guard moved || !fresh.isEmpty else { return [] }
        device.notes = nil
        if Simulation.printsSteps { print("t=\(elapsed) d\(device.index) \(identity) -> \(now) re-issued \(fresh.map { "\($0.replica):\($0.startSeq)+\($0.count) as \($0.by):\($0.firstSeq)" })") }
        var from: [ReplicaID: UInt64] = [:]
        for record in fresh { from[record.replica] = min(from[record.replica] ?? record.startSeq, record.startSeq) }
        for (replica, first) in from.sorted(by: { $0.key < $1.key }) {
            reference.withdraw(replica, branch: device.branch, from: first)
            stats.forksRepaired += 1
            for i in forkRecords.indices where forkRecords[i].identity == replica && forkRecords[i].branch(of: device.index) == device.branch {
                if forkRecords[i].repairedBy.insert(device.index).inserted, forkRecords[i].repairedBy.count == 2 { stats.forksRepairedTwice += 1 }
                for record in fresh where record.replica == replica { forkRecords[i].reissuedAs.insert(record.by) }
            }
        }
        stats.reissuedOperations += fresh.reduce(0) { $0 + Int($1.count) }
        if moved {
            device.retired.append(identity)
            device.lastOwnSeq = nil
        }
        // What the store made as the identity it writes as since the device last made something:
        // the re-issuing changes.
        let notebook = try device.store.notebook
        var since = notebook.versionVector
        since[now] = moved ? 0 : device.lastOwnSeq ?? 0
        let made = notebook.changes(since: since).filter { $0.replica == now }
        for change in made { reference.record(change, branch: device.branch) }
        if let last = made.last { device.lastOwnSeq = last.endSeq }
        if device.undoLog.replica == identity {
            device.undoLog.follow(fresh, from: identity, to: now)
        } else if !fresh.isEmpty {
            // Edits of an identity it left moved onto the one it writes as: where they stand on
            // the store's stack is not followed.
            device.undoLog.known = false
        }
        return fresh
    }

    /// Whether the device may edit now: it holds no operation of a forked identity (past where
    /// the databases parted) that a re-issue may still take back, unless it writes as that
    /// identity on its own branch. An edit depends on everything its device holds, so an edit made
    /// on top of a branch its writer later withdraws depends on operations that no longer exist
    /// under that identity: it waits for them for good, and a store that rebuilds its state
    /// without them holds its own later changes waiting (its version vector goes back, and its
    /// next edit repeats seqs that left it). Docs/Simulation.md, "Faults" (`forks`).
    ///
    /// A fork is settled when no two devices write on its branches and the one still writing as
    /// the identity (if any) holds every re-issue of the other branch: a withdrawn operation that
    /// reaches it later is then a duplicate, so no more re-issues can come. A device may build on
    /// the identity's operations once the fork is settled and every one of them it holds is one
    /// the reference still records (none withdrawn).
    func mayEditBesideForks(_ d: Int) throws -> Bool {
        guard !forkRecords.isEmpty, !scenario.faults.editOnUnsettledForks else { return true }
        let device = devices[d]
        let notebook = try device.store.notebook
        for fork in forkRecords {
            let identity = fork.identity
            guard notebook.versionVector[identity] > fork.base else { continue }
            // Its own branch: whatever it withdraws later, it re-issues with its own edits.
            if device.replicaID == identity, fork.branch(of: d) == device.branch { continue }
            guard try settled(fork) else { return false }
            var since = notebook.versionVector
            since[identity] = fork.base
            for change in notebook.changes(since: since) where change.replica == identity {
                for seq in max(change.startSeq, fork.base + 1) ... change.endSeq where !reference.records(change, at: seq) { return false }
            }
        }
        return true
    }

    /// Whether a fork is settled (see `mayEditBesideForks`).
    func settled(_ fork: ForkRecord) throws -> Bool {
        // Seqs both branches wrote differently and neither withdrew: a re-issue is still to come
        // (a copy that moved on seeing only the other's later seqs re-issued nothing).
        for branch in [fork.sourceBranch, fork.targetBranch] where !reference.contestedSeqs(of: fork.identity, branch: branch).isEmpty {
            return false
        }
        let writers = [fork.source, fork.target].filter { m in
            !dead.contains(m) && devices[m].replicaID == fork.identity && devices[m].branch == fork.branch(of: m)
        }
        switch writers.count {
        case 2: return false
        case 1:
            let held = try devices[writers[0]].store.notebook.reissues
            return fork.reissuedAs.allSatisfy { by in held.contains { $0.by == by && $0.original.replica == fork.identity } }
        default: return true
        }
    }

    /// Whether a change was made by a forked identity past where its databases parted, or after
    /// seeing such operations: what it refers to may be another branch's than what a device holds
    /// at those seqs (a chimera a relay or a folder built), so it may be quarantined until the
    /// re-issue of the branch it saw reaches that device.
    func madeOnAForkedIdentity(_ change: Change) -> Bool {
        forkRecords.contains { fork in
            change.replica == fork.identity ? change.endSeq > fork.base : change.dependencies[fork.identity] > fork.base
        }
    }
}

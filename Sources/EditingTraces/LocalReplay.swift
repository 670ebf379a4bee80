import Foundation
import NotesCRDT

/// A trace replayed as local edits through the public `Notebook` API (see `TraceReplayer`, which
/// runs it and then merges the history). It needs NotesCRDT only, so that Benchmarks/merge-phases
/// links this file in rather than copying it.
public struct LocalReplay {
    public let trace: EditingTrace
    /// The one clock every replica reads (the run is deterministic).
    public let clock = FixedWallClock(1_600_000_000_000)
    /// The note the trace edits, and the replica that made it from the start content.
    public let noteID: NoteID
    public let setup: Notebook
    /// The identity a fresh replica that merges the history takes.
    public let mergeID: ReplicaID
    let base: [Change]
    let firstID: ReplicaID
    /// The patches of a sequential trace in one list, as the peers' replay takes them.
    let patches: [EditingTrace.Patch]

    /// The most replicas a concurrent replay keeps (lanes: one per agent, one more per branch an
    /// agent edits at once); the published traces need two or three.
    public static let maxLanes = 4096

    public init(_ trace: EditingTrace) {
        self.trace = trace
        var setupRNG = SplitMix64(seed: 0x5EED)
        noteID = NoteID.random(using: &setupRNG)
        var setup = Notebook(replicaID: ReplicaID.random(using: &setupRNG), wallClock: clock)
        setup.createNote(id: noteID, title: trace.name, body: trace.startContent)
        self.setup = setup
        base = setup.changes(since: VersionVector())
        // The same identities in every replay, so each does the same work.
        firstID = ReplicaID.random(using: &setupRNG)
        mergeID = ReplicaID.random(using: &setupRNG)
        patches = trace.kind == .sequential ? trace.transactions.flatMap(\.patches) : []
    }

    /// Replays every patch as local edits on fresh replicas: the replicas, the patches
    /// applied, and the nanoseconds the edits took.
    public func run() throws -> (replicas: [Notebook], patches: Int, nanos: UInt64) {
        var replicas = [Notebook(replicaID: firstID, wallClock: clock)]
        try replicas[0].applyStored(contentsOf: base)
        let baseVersion = replicas[0].versionVector

        var patchCount = 0
        let start = DispatchTime.now().uptimeNanoseconds
        /// Applies one transaction's patches to `body`, checking each against the text first.
        func edit(_ body: inout BodyEditor, _ txn: EditingTrace.Transaction, _ index: Int) throws {
            patchCount += txn.patches.count
            for (p, patch) in txn.patches.enumerated() {
                try apply(patch, to: &body, at: "transaction \(index), patch \(p)")
            }
        }
        if trace.kind == .sequential {
            // One batch, as the peers replay it in one transaction.
            try replicas[0].editBody(noteID) { body in
                for index in patches.indices { try apply(patches[index], to: &body, at: place(ofPatch: index)) }
            }
            patchCount = patches.count
            return (replicas, patchCount, DispatchTime.now().uptimeNanoseconds - start)
        }
        // A lane is one replica and the chain of transactions it made. The format promises that
        // each agent's transactions are totally ordered, so an agent is one lane; a trace that
        // breaks the promise gets a lane more for the agent's other branch, not a refusal.
        var laneAgent: [Int] = []
        var lanesOfAgent: [Int: [Int]] = [:]
        var laneIDs = SplitMix64(seed: 0x1A7E)  // the same identities in every replay
        var authored: [[Change]] = []
        var laneOf: [ReplicaID: Int] = [:]
        var versionAfter: [VersionVector] = []
        versionAfter.reserveCapacity(trace.transactions.count)
        for (index, txn) in trace.transactions.enumerated() {
            var target = baseVersion
            for parent in txn.parents { target.merge(versionAfter[parent]) }
            let lanes = lanesOfAgent[txn.agent, default: []]
            let a: Int
            if let free = lanes.first(where: { replicas[$0].versionVector.isCovered(by: target) }) {
                a = free
            } else {
                a = laneAgent.count
                // Every lane is a replica, and each transaction merges version vectors as long as
                // the lanes: a trace whose every transaction starts a branch would cost the
                // square of its length.
                guard a < LocalReplay.maxLanes else {
                    throw TraceError("transaction \(index) of agent \(txn.agent) needs a replica more than the \(LocalReplay.maxLanes) a replay keeps (one per agent, and one per branch an agent edits at once)")
                }
                if a > 0 {  // lane 0 is the replica made above
                    replicas.append(Notebook(replicaID: ReplicaID.random(using: &laneIDs), wallClock: clock))
                    try replicas[a].applyStored(contentsOf: base)
                }
                laneAgent.append(txn.agent)
                lanesOfAgent[txn.agent, default: []].append(a)
                authored.append([])
                laneOf[replicas[a].replicaID] = a
            }
            // What the parents' history holds and the lane lacks: per other lane, its changes
            // past what the lane has, found by binary search (no table of lanes by lanes).
            for range in replicas[a].versionVector.missing(from: target) {
                guard let b = laneOf[range.replica] else { continue }  // the setup's: every lane has it
                let changes = authored[b]
                var next = 0
                var end = changes.count
                while next < end {  // the first change that ends at or past the range's start
                    let middle = (next + end) / 2
                    if changes[middle].endSeq < range.seq { next = middle + 1 } else { end = middle }
                }
                while next < changes.count, changes[next].endSeq <= range.seq + range.count - 1 {
                    try replicas[a].applyStored(contentsOf: CollectionOfOne(changes[next]))
                    next += 1
                }
            }
            guard replicas[a].versionVector == target else {
                throw TraceError("transaction \(index) of agent \(txn.agent) cannot be replayed: its parents' history does not end on transaction boundaries")
            }
            // Each transaction is one batch, whose changes the other lanes receive later.
            authored[a] += try replicas[a].editBody(noteID) { body in try edit(&body, txn, index) }
            versionAfter.append(replicas[a].versionVector)
        }
        return (replicas, patchCount, DispatchTime.now().uptimeNanoseconds - start)
    }

    /// "transaction T, patch P" for the `index`th of a sequential trace's patches, as the concurrent
    /// replay names them (counted through the transactions only when a message needs it).
    private func place(ofPatch index: Int) -> String {
        var transaction = 0
        var patch = index
        while patch >= trace.transactions[transaction].patches.count {
            patch -= trace.transactions[transaction].patches.count
            transaction += 1
        }
        return "transaction \(transaction), patch \(patch)"
    }
}

/// Applies one patch to `body`, checking it against the text first (without adding position and
/// count, which a hostile trace can set near `Int.max`).
private func apply(_ patch: EditingTrace.Patch, to body: inout BodyEditor, at place: @autoclosure () -> String) throws {
    // (A trace made in code, not parsed, may hold negatives too.)
    guard patch.position >= 0, patch.deleteCount >= 0, patch.position <= body.count, patch.deleteCount <= body.count - patch.position else {
        throw TraceError("\(place()) at \(patch.position) deleting \(patch.deleteCount) is past the end of the text (\(body.count))")
    }
    if patch.deleteCount > 0 { try body.delete(patch.position ..< patch.position + patch.deleteCount) }
    if !patch.insert.isEmpty { try body.insert(patch.insert, at: patch.position) }
}

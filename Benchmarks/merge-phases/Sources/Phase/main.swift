// The merge of a trace's whole history, phase by phase (inflate, decode, apply, read): see setup.sh.
import Foundation
import NotesCRDT
import Deflate
#if canImport(Glibc)
import Glibc
#endif


let args = CommandLine.arguments
let path = args[1]
let iterations = args.count > 2 ? Int(args[2])! : 20
let mode = args.count > 3 ? args[3] : "all"
let trace = try EditingTrace.load(path: path)
nonisolated(unsafe) let clock = FixedWallClock(1_600_000_000_000)
var setupRNG = SplitMix64(seed: 0x5EED)
nonisolated(unsafe) let noteID = NoteID.random(using: &setupRNG)
var setup = Notebook(replicaID: ReplicaID.random(using: &setupRNG), wallClock: clock)
setup.createNote(id: noteID, title: trace.name, body: trace.startContent)
let base = setup.changes(since: VersionVector())
let firstID = ReplicaID.random(using: &setupRNG)
nonisolated(unsafe) let mergeID = ReplicaID.random(using: &setupRNG)
let patches = trace.kind == .sequential ? trace.transactions.flatMap(\.patches) : []
enum TraceReplayer { static let maxLanes = 1024 }

@inline(never) func phaseInflate(_ c: [UInt8], _ n: Int) throws -> [UInt8] { try Deflate.decompress(c, length: n) }
@inline(never) func phaseDecode(_ b: [UInt8]) throws -> [Change] { try ChangeCodec.decode(b) }
@inline(never) func phaseApply(_ changes: [Change]) throws -> Notebook {
    var fresh = Notebook(replicaID: mergeID, wallClock: clock)
    try fresh.applyStored(contentsOf: changes)
    return fresh
}
@inline(never) func phaseRead(_ n: Notebook) -> String { n.body(of: noteID)!.string }
@MainActor func run() throws {
        func replayLocally() throws -> (replicas: [Notebook], patches: Int, nanos: UInt64) {
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
                for index in patches.indices { try apply(patches[index], to: &body, at: "patch \(index)") }
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
                guard a < TraceReplayer.maxLanes else {
                    throw TraceError("transaction \(index) of agent \(txn.agent) needs a replica more than the \(TraceReplayer.maxLanes) a replay keeps (one per agent, and one per branch an agent edits at once)")
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


    func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }
    if mode == "local" {
        for _ in 0 ..< iterations { let t = now(); _ = try replayLocally(); print("local", Double(now() - t) / 1e6) }
        return
    }
    let cache = "/tmp/phase-enc-\(trace.name).bin"
    var encoding: [UInt8]
    if mode == "cg", let data = FileManager.default.contents(atPath: cache) {
        encoding = [UInt8](data)
    } else {
        let (replicas, _, _) = try replayLocally()
        var everything = setup
        for replica in replicas { try everything.merge(replica) }
        let history = everything.changes(since: VersionVector())
        encoding = ChangeCodec.encode(history)
        FileManager.default.createFile(atPath: cache, contents: Data(encoding))
    }
    let compressed = Deflate.compress(encoding, level: encoding.count < 1 << 16 ? 1 : 9)
    let history = [0]
    if mode == "stats" {
        let changes = try ChangeCodec.decode(encoding)
        var ins = 0, insChars = 0, delEach = 0, delRuns = 0, delRunChars = 0, delText = 0, delTargets = 0, other = 0, ops = 0
        var runOrders = [0, 0, 0]
        for c in changes { for op in c.operations { ops += 1
            switch op {
            case .insertText(_, _, let t): ins += 1; insChars += t.count
            case .deleteEach(_, let runs): delEach += 1; delRuns += runs.count; for r in runs { delRunChars += Int(r.range.count); runOrders[Int(r.order.rawValue)] += 1 }
            case .deleteText(_, let ts): delText += 1; delTargets += ts.count
            default: other += 1
            } } }
        print("changes \(changes.count) ops \(ops) inserts \(ins) chars \(insChars) deleteEach \(delEach) runs \(delRuns) (whole/back/fwd \(runOrders)) runChars \(delRunChars) deleteText \(delText) targets \(delTargets) other \(other)")
        var f = Notebook(replicaID: mergeID, wallClock: clock); try f.applyStored(contentsOf: changes)
        print("runs after merge", f.body(of: noteID)!.runCount, "visible", f.body(of: noteID)!.count)
        return
    }
    var times: [[Double]] = [[], [], [], [], []]
    var expected: String? = nil
    for _ in 0 ..< iterations {
        let t0 = now()
        let inflated = try phaseInflate(compressed, encoding.count)
        let t1 = now()
        let changes = try phaseDecode(inflated)
        let t2 = now()
        let fresh = try phaseApply(changes)
        let t3 = now()
        let text = phaseRead(fresh)
        let t4 = now()
        if expected == nil { expected = text } else { precondition(text == expected) }
        times[0].append(Double(t1 - t0) / 1e6); times[1].append(Double(t2 - t1) / 1e6)
        times[2].append(Double(t3 - t2) / 1e6); times[3].append(Double(t4 - t3) / 1e6); times[4].append(Double(t4 - t0) / 1e6)
    }
    precondition(expected!.unicodeScalars.elementsEqual(trace.endContent.unicodeScalars), "wrong text")
    func med(_ v: [Double]) -> Double { let s = v.sorted(); return s[s.count / 2] }
    func mn(_ v: [Double]) -> Double { v.min()! }
    print(String(format: "%@ inflate %.3f decode %.3f apply %.3f read %.3f total %.3f | min total %.3f (n=%d, enc %d bytes, %d changes)",
                 trace.name, med(times[0]), med(times[1]), med(times[2]), med(times[3]), med(times[4]), mn(times[4]), iterations, encoding.count, history.count))
}
try run()

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

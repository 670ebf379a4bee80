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
let local = LocalReplay(trace)
nonisolated(unsafe) let clock = local.clock
nonisolated(unsafe) let noteID = local.noteID
nonisolated(unsafe) let mergeID = local.mergeID
let setup = local.setup

@inline(never) func phaseInflate(_ c: [UInt8], _ n: Int) throws -> [UInt8] { try Deflate.decompress(c, length: n) }
@inline(never) func phaseDecode(_ b: [UInt8]) throws -> [Change] { try ChangeCodec.decode(b) }
@inline(never) func phaseApply(_ changes: [Change]) throws -> Notebook {
    var fresh = Notebook(replicaID: mergeID, wallClock: clock)
    try fresh.applyStored(contentsOf: changes)
    return fresh
}
@inline(never) func phaseRead(_ n: Notebook) -> String { n.body(of: noteID)!.string }
@MainActor func run() throws {
    func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }
    if mode == "local" {
        for _ in 0 ..< iterations { let t = now(); _ = try local.run(); print("local", Double(now() - t) / 1e6) }
        return
    }
    let cache = "/tmp/phase-enc-\(trace.name).bin"
    var encoding: [UInt8]
    if mode == "cg", let data = FileManager.default.contents(atPath: cache) {
        encoding = [UInt8](data)
    } else {
        if ProcessInfo.processInfo.environment["TRIM"] != nil { _ = phaseMallocTrim(0) }
        let (replicas, _, _) = try local.run()
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
    if mode == "cold" {
        // Each merge of the process on its own line, phase by phase: ms / minor page faults. The
        // first merge's replica is kept, as a caller keeps what it merged. Environment: TRIM=1
        // gives freed memory back before the replay, COLD_TRIM=1 before the first merge (as
        // `trace replay` does); DLOPEN=1 loads libdeflate first; WARMUP_TRACE=path merges another
        // trace's history first (the code warm, the memory not); MARK=1 writes each phase's
        // name to stderr (to match allocations logged by an LD_PRELOAD shim).
        func faults() -> Int { var u = rusage(); getrusage(RUSAGE_SELF.rawValue, &u); return u.ru_minflt }
        let env = ProcessInfo.processInfo.environment
        func mark(_ s: String) { if env["MARK"] != nil { var s = s; s.withUTF8 { _ = write(2, $0.baseAddress, $0.count) } } }
        var kept: [Notebook] = []
        if env["DLOPEN"] != nil { _ = LibDeflate.shared }
        if let other = env["WARMUP_TRACE"] {
            let o = LocalReplay(try EditingTrace.load(path: other))
            var all = o.setup
            for r in try o.run().replicas { try all.merge(r) }
            let enc = ChangeCodec.encode(all.changes(since: VersionVector()))
            var nb = Notebook(replicaID: o.mergeID, wallClock: o.clock)
            try nb.applyStored(contentsOf: ChangeCodec.decode(Deflate.decompress(Deflate.compress(enc), length: enc.count)))
            _ = nb.body(of: o.noteID)!.string
        }
        if env["COLD_TRIM"] != nil { _ = phaseMallocTrim(0) }
        for i in 0 ..< iterations {
            let f0 = faults(), t0 = now()
            mark("PHASE \(i) inflate\n")
            let inflated = try phaseInflate(compressed, encoding.count)
            let f1 = faults(), t1 = now()
            mark("PHASE \(i) decode\n")
            let changes = try phaseDecode(inflated)
            let f2 = faults(), t2 = now()
            mark("PHASE \(i) apply\n")
            let fresh = try phaseApply(changes)
            let f3 = faults(), t3 = now()
            mark("PHASE \(i) read\n")
            let text = phaseRead(fresh)
            let f4 = faults(), t4 = now()
            if i == 0 { kept.append(fresh) }
            precondition(text.unicodeScalars.elementsEqual(trace.endContent.unicodeScalars), "wrong text")
            print(String(format: "%d inflate %.3f/%d decode %.3f/%d apply %.3f/%d read %.3f/%d total %.3f/%d", i,
                         Double(t1 - t0) / 1e6, f1 - f0, Double(t2 - t1) / 1e6, f2 - f1, Double(t3 - t2) / 1e6, f3 - f2,
                         Double(t4 - t3) / 1e6, f4 - f3, Double(t4 - t0) / 1e6, f4 - f0))
        }
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
@_silgen_name("malloc_trim") func phaseMallocTrim(_ pad: Int) -> Int32

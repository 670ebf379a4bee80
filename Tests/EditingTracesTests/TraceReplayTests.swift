import EditingTraces
import Foundation
import Testing

/// The recorded editing sessions in Tests/Fixtures/traces are an oracle: every correct sequence CRDT
/// must end with exactly `endContent`, the concurrent trace included.
struct TraceReplayTests {
    /// Tests/Fixtures/traces in this checkout (the traces are committed with the tests).
    static let tracesFolder: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures/traces")

    static let traceFiles = ["automerge-paper", "rustcode", "sveltecomponent", "friendsforever"]

    @Test(arguments: traceFiles)
    func traceReproducesEndContent(name: String) throws {
        let path = TraceReplayTests.tracesFolder.appendingPathComponent("\(name).json.gz").path
        let trace = try EditingTrace.load(path: path)
        let result = try TraceReplayer(trace).run(repeats: 0)
        #expect(result.matches, "\(name) differs from endContent at scalar \(result.firstDifference ?? -1)")
        #expect(result.length == trace.endContent.unicodeScalars.count)
        #expect(result.patches == trace.transactions.reduce(0) { $0 + $1.patches.count })
        #expect(result.encodedBytes > 0)
    }

    @Test func repeatMergesWarmOnFreshReplicasAndReportsTheColdOneApart() throws {
        let path = TraceReplayTests.tracesFolder.appendingPathComponent("sveltecomponent.json.gz").path
        let trace = try EditingTrace.load(path: path)
        let result = try TraceReplayer(trace).run(repeats: 3)
        #expect(result.matches)
        #expect(result.repeats == 3)
        #expect(result.mergeWarmMs.count == 3)
        #expect(result.mergeWarmMs.allSatisfy { $0 > 0 })
        #expect(result.mergeMs == result.mergeWarmMs.sorted()[1], "the median of the warm merges")
        #expect(result.mergeColdMs > 0)
        #expect(result.localReplayColdMs > 0)
        #if os(Linux)
        #expect((result.mergeColdFaults ?? -1) >= 0, "the cold merge's page faults, counted")
        #endif
        // With no repeats, the figures are the cold ones.
        let once = try TraceReplayer(trace).run(repeats: 0)
        #expect(once.mergeWarmMs.isEmpty)
        #expect(once.mergeMs == once.mergeColdMs)
        #expect(once.localReplayMs == once.localReplayColdMs)
        #expect(once.encodedBytes == result.encodedBytes)
    }

    @Test func concurrentTraceUsesOneReplicaPerAgent() throws {
        let path = TraceReplayTests.tracesFolder.appendingPathComponent("friendsforever.json.gz").path
        let trace = try EditingTrace.load(path: path)
        #expect(trace.kind == .concurrent)
        #expect(trace.numAgents == 2)
        #expect(trace.transactions.contains { $0.parents.count > 1 })
    }

    @Test func smallConcurrentTraceMerges() throws {
        // Two agents type at different places from the same parent, then a merge transaction.
        let json = """
        {"kind":"concurrent","numAgents":2,"endContent":"Hi there, you",
         "txns":[
          {"parents":[],"agent":0,"patches":[[0,0,"Hi you"]]},
          {"parents":[0],"agent":1,"patches":[[2,0," there,"]]},
          {"parents":[0],"agent":0,"patches":[[6,0,""]]},
          {"parents":[1,2],"agent":0,"patches":[]}
         ]}
        """
        let trace = try EditingTrace.parse(Data(json.utf8), name: "small")
        let result = try TraceReplayer(trace).run()
        #expect(result.matches)
    }

    @Test func anAgentEditingTwoBranchesAtOnceGetsALaneForEach() throws {
        // The format promises an agent's transactions are ordered; this trace breaks it (1 and 2 are
        // concurrent, both agent 0), and the replay still ends with the merged text.
        let json = """
        {"kind":"concurrent","numAgents":2,"endContent":"Hi there, you!",
         "txns":[
          {"parents":[],"agent":0,"patches":[[0,0,"Hi you"]]},
          {"parents":[0],"agent":0,"patches":[[2,0," there,"]]},
          {"parents":[0],"agent":0,"patches":[[6,0,"!"]]},
          {"parents":[2],"agent":0,"patches":[[0,1,"H"]]},
          {"parents":[1,3],"agent":1,"patches":[]}
         ]}
        """
        let result = try TraceReplayer(EditingTrace.parse(Data(json.utf8), name: "branches")).run(repeats: 1)
        #expect(result.matches, "differs at \(result.firstDifference ?? -1)")
    }

    @Test func agentNumbersAndCountsAreNotAllocatedFor() throws {
        // A declared count of agents far beyond memory, and a first agent that is not 0.
        let json = """
        {"kind":"concurrent","numAgents":1000000000000,"endContent":"ab",
         "txns":[{"parents":[],"agent":987654321,"patches":[[0,0,"a"]]},
                 {"parents":[0],"agent":5,"patches":[[1,0,"b"]]}]}
        """
        let trace = try EditingTrace.parse(Data(json.utf8), name: "agents")
        #expect(trace.numAgents == 1_000_000_000_000)
        #expect(try TraceReplayer(trace).run(repeats: 0).matches)
    }

    @Test func aPatchWithATimestampIsRead() throws {
        let json = #"{"endContent":"ab","txns":[{"patches":[[0,0,"ab","2023-11-22T04:49:00+00:00"]]}]}"#
        #expect(try TraceReplayer(EditingTrace.parse(Data(json.utf8), name: "quad")).run(repeats: 0).matches)
    }

    @Test(arguments: [(Int.max, 0), (0, Int.max), (Int.max, Int.max), (1, Int.max)])
    func patchesAtTheEdgesOfIntAreRefused(position: Int, deleteCount: Int) throws {
        for kind in ["", #""kind":"concurrent","#] {
            let json = #"{\#(kind)"endContent":"","txns":[{"parents":[],"agent":0,"patches":[[0,0,"x"],[\#(position),\#(deleteCount),""]]}]}"#
            // Refused when read (past 2^53, no JSON number is exact) or, were it read, at replay.
            #expect { try TraceReplayer(EditingTrace.parse(Data(json.utf8), name: "edge")).run(repeats: 0) } throws: {
                "\($0)".contains("past the end") || "\($0)".contains("whole numbers from 0 to 2^53")
            }
        }
    }

    @Test func canonicallyEquivalentButDifferentScalarsAreAMismatch() throws {
        // "é" as e + combining acute against the precomposed endContent: equal as Strings, not as scalars.
        let json = #"{"endContent":"\u00e9","txns":[{"patches":[[0,0,"e\u0301"]]}]}"#
        let result = try TraceReplayer(EditingTrace.parse(Data(json.utf8), name: "nfc")).run(repeats: 0)
        #expect(!result.matches)
        #expect(result.firstDifference == 0)
    }

    @Test func wrongEndContentIsReportedAsAMismatch() throws {
        let json = #"{"startContent":"","endContent":"abd","txns":[{"patches":[[0,0,"abc"]]}]}"#
        let result = try TraceReplayer(EditingTrace.parse(Data(json.utf8), name: "bad")).run()
        #expect(!result.matches)
        #expect(result.firstDifference == 2)
    }

    @Test(arguments: [
        ("not json at all", "not valid JSON"),
        (#"[1,2,3]"#, "not a JSON object"),
        (#"{"endContent":""}"#, "no \"txns\" array"),
        (#"{"txns":[]}"#, "no \"endContent\" string"),
        (#"{"endContent":"","txns":[{"patches":[[0,"x"]]}]}"#, "transaction 0, patch 0"),
        (#"{"kind":"concurrent","endContent":"","txns":[{"parents":[3],"agent":0,"patches":[]}]}"#, "parent"),
    ])
    func malformedTraceIsRejectedWithAClearError(json: String, expected: String) {
        #expect {
            _ = try EditingTrace.parse(Data(json.utf8), name: "bad")
        } throws: { error in
            "\(error)".contains(expected)
        }
    }

    @Test func patchPastTheEndIsAnError() throws {
        let json = #"{"endContent":"","txns":[{"patches":[[5,0,"x"]]}]}"#
        let trace = try EditingTrace.parse(Data(json.utf8), name: "bad")
        #expect { try TraceReplayer(trace).run() } throws: { "\($0)".contains("past the end") }
    }

    @Test func missingAndCorruptFilesAreErrors() throws {
        #expect { try EditingTrace.load(path: "/nonexistent/trace.json") } throws: { "\($0)".contains("no such file") }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("trace-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        // A gzip header followed by garbage.
        let corrupt = dir.appendingPathComponent("corrupt.json.gz")
        try Data([0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xff, 0xfe, 0x01]).write(to: corrupt)
        #expect { try EditingTrace.load(path: corrupt.path) } throws: { "\($0)".contains("gzip") }
        // A real trace, truncated.
        let original = try Data(contentsOf: TraceReplayTests.tracesFolder.appendingPathComponent("sveltecomponent.json.gz"))
        let truncated = dir.appendingPathComponent("truncated.json.gz")
        try original.prefix(original.count / 2).write(to: truncated)
        #expect { try EditingTrace.load(path: truncated.path) } throws: { "\($0)".contains("truncated") }
    }
}

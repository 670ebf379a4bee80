@testable import EditingTraces
import Foundation
import NotesCRDT
import Testing

/// A trace file given to `crdt-sync trace replay` is input from outside: whatever it holds, reading
/// and replaying it ends in the replay or in a `TraceError` that names the problem, never a trap.
struct HostileTraceTests {
    /// JSON values where a whole number is due: edges of Int, Int64, UInt64 and of doubles'
    /// exact range, fractions, negatives, and values of other types.
    static let hostileNumbers = [
        "-1", "0", "1", "1.5", "-0.0", "1e300", "-1e300", "9007199254740992", "9007199254740993", "9223372036854775807",
        "9223372036854775808", "18446744073709551615", "18446744073709551616", "1e19", "4294967296", "\"3\"", "true", "null",
        "[]", "{}", "2147483648",
    ]

    /// Strings with unpaired surrogates, control characters, and escapes.
    static let hostileStrings = ["\"\\ud800\"", "\"\\udc00x\"", "\"a\\u0000b\"", "\"\\ud83d\\ude00\"", "\"\"", "\"e\\u0301\"", "3", "null"]

    /// A small valid trace as JSON, its parts in slots the cases replace.
    static func trace(concurrent: Bool, _ slot: (String, String) -> String) -> String {
        if concurrent {
            return """
            {"kind":"concurrent","numAgents":\(slot("numAgents", "2")),"endContent":\(slot("end", "\"Hi there, you\"")),
             "txns":[
              {"parents":[],"agent":\(slot("agent", "0")),"patches":[[\(slot("pos", "0")),\(slot("del", "0")),\(slot("text", "\"Hi you\""))]]},
              {"parents":[\(slot("parent", "0"))],"agent":1,"patches":[[2,0," there,"]]},
              {"parents":[0],"agent":0,"patches":[[6,0,""]]},
              {"parents":[1,2],"agent":0,"patches":[]}
             ]}
            """
        }
        return """
        {"startContent":\(slot("start", "\"ab\"")),"endContent":\(slot("end", "\"xabc\"")),
         "txns":[{"patches":[[\(slot("pos", "2")),\(slot("del", "0")),\(slot("text", "\"c\""))]]},{"patches":[[0,0,"x"]]}]}
        """
    }

    /// Reads and replays `json`; a `TraceError` is a refusal, any other error a failure of the promise.
    static func outcome(_ json: [UInt8]) -> Result<Bool, TraceError>? {
        do {
            let trace = try EditingTrace.parse(Data(json), name: "hostile")
            return .success(try TraceReplayer(trace).run(repeats: 0).matches)
        } catch let error as TraceError {
            return .failure(error)
        } catch {
            return nil
        }
    }

    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func hostileTracesAreReplayedOrRefusedWithAMessage(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        var refused = 0
        var replayed = 0
        var messages: Set<String> = []
        for _ in 0 ..< 300 {
            let concurrent = rng.below(2) == 0
            // One or two slots get a hostile value; the rest keep theirs.
            let targets: Set<String> = [rng.pick(["numAgents", "agent", "pos", "del", "text", "parent", "end", "start"]),
                                        rng.pick(["pos", "del", "agent", "none"])]
            var chosen: [String: String] = [:]
            for target in targets {
                chosen[target] = ["text", "end", "start"].contains(target) ? rng.pick(Self.hostileStrings) : rng.pick(Self.hostileNumbers)
            }
            var bytes = Array(Self.trace(concurrent: concurrent) { name, valid in chosen[name] ?? valid }.utf8)
            switch rng.below(6) {
            case 0: bytes = Array(bytes.prefix(rng.below(bytes.count)))  // cut anywhere
            case 1: bytes.insert(rng.pick([0xFF, 0xC0, 0xED, 0x80]), at: rng.below(bytes.count))  // not UTF-8
            default: break
            }
            guard let outcome = Self.outcome(bytes) else {
                Issue.record("an error that is not a TraceError for \(String(decoding: bytes, as: UTF8.self))")
                continue
            }
            switch outcome {
            case .success: replayed += 1
            case .failure(let error):
                #expect(!error.message.isEmpty)
                refused += 1
                messages.insert(String(error.message.prefix(24)))
            }
        }
        // The cases reach both ends and several of the checks.
        #expect(replayed > 10)
        #expect(refused > 100)
        #expect(messages.count > 4, "\(messages)")
    }

    @Test func numbersPastTheirRangeAreRefusedNotTrapped() throws {
        let cases: [(String, String)] = [
            ("pos", "9223372036854775807"), ("del", "9223372036854775807"), ("pos", "1e300"), ("del", "1.5"), ("pos", "-1"),
            ("agent", "9223372036854775807"), ("numAgents", "9223372036854775807"), ("agent", "1e300"),
            ("parent", "18446744073709551615"), ("del", "9007199254740993"),
        ]
        for (slot, value) in cases {
            let json = Array(Self.trace(concurrent: true) { name, valid in name == slot ? value : valid }.utf8)
            guard case .failure(let error)? = Self.outcome(json) else {
                Issue.record("\(slot) = \(value) was not refused")
                continue
            }
            #expect(!error.message.isEmpty)
        }
        // A delete past the end, and one whose end overflows an Int, name the patch.
        for (pos, del) in [("2", "5"), ("9007199254740992", "9007199254740992"), ("0", "9007199254740992")] {
            let json = Array(Self.trace(concurrent: false) { name, valid in name == "pos" ? pos : name == "del" ? del : valid }.utf8)
            guard case .failure(let error)? = Self.outcome(json) else {
                Issue.record("[\(pos), \(del)] was not refused")
                continue
            }
            #expect(error.message.contains("past the end of the text"), "\(error.message)")
        }
    }

    /// A trace made in code, not parsed, gets the same checks of its patches at replay.
    @Test func aTraceMadeInCodeWithPatchesOutOfRangeIsRefused() throws {
        var trace = try EditingTrace.parse(Data(Self.trace(concurrent: true) { $1 }.utf8), name: "made")
        #expect(try TraceReplayer(trace).run(repeats: 0).matches)
        for (position, count) in [(Int.max, 0), (0, Int.max), (-1, 0), (0, -1), (Int.min, Int.max)] {
            trace.transactions[0].patches[0].position = position
            trace.transactions[0].patches[0].deleteCount = count
            #expect { _ = try TraceReplayer(trace).run(repeats: 0) } throws: { ($0 as? TraceError)?.message.contains("past the end") == true }
        }
    }

    /// Transactions that each start a branch of one agent (parents empty, something typed): each
    /// needs a replica of its own, and a replay keeps at most `maxLanes` (without the bound, 50,000
    /// of them, a 2 MB file, would merge version vectors of up to 50,000 entries per transaction).
    @Test(arguments: [10, 300, TraceReplayer.maxLanes + 1])
    func branchesPastTheLaneBoundAreRefused(transactions: Int) throws {
        let txns = (0 ..< transactions).map { _ in #"{"parents":[],"agent":0,"patches":[[0,0,"x"]]}"# }
        let json = #"{"kind":"concurrent","endContent":"","txns":["# + txns.joined(separator: ",") + "]}"
        let trace = try EditingTrace.parse(Data(json.utf8), name: "branches")
        if transactions <= TraceReplayer.maxLanes {
            #expect(try TraceReplayer(trace).run(repeats: 0).length == transactions)  // every branch's "x", merged
        } else {
            #expect { _ = try TraceReplayer(trace).run(repeats: 0) } throws: { ($0 as? TraceError)?.message.contains("a replica more than") == true }
        }
    }

    /// A gzip file that inflates past the limit is refused once it passes it, not inflated whole.
    @Test func aGzipThatInflatesPastTheLimitIsRefused() throws {
        let url = TraceReplayTests.tracesFolder.appendingPathComponent("sveltecomponent.json.gz")
        let bytes = [UInt8](try Data(contentsOf: url))
        let whole = try Gzip.decompress(bytes)
        #expect { _ = try Gzip.decompress(bytes, limit: whole.count - 1) } throws: {
            ($0 as? TraceError)?.message.contains("inflates to more than") == true
        }
        #expect(try Gzip.decompress(bytes, limit: whole.count) == whole)
        // Cut, it is truncated; damaged, corrupt.
        #expect(throws: TraceError.self) { _ = try Gzip.decompress(Array(bytes.prefix(bytes.count / 2))) }
        var damaged = bytes
        damaged[bytes.count / 2] ^= 0xFF
        #expect(throws: TraceError.self) { _ = try Gzip.decompress(damaged) }
    }
}

/// Draws as the cases were made: the generator's next number modulo the bound.
private extension SplitMix64 {
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
    mutating func pick<T>(_ values: [T]) -> T { values[below(values.count)] }
}

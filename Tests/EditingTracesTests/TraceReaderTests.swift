@testable import EditingTraces
import Foundation
import NotesCRDT
import Testing

/// The trace's JSON reader: the JSON grammar it takes and refuses, and the checks of a trace's values.
struct TraceReaderTests {
    static func parse(_ json: String) throws -> EditingTrace {
        try EditingTrace.parse(Data(json.utf8), name: "reader")
    }

    /// The message a refusal of `json` gives (when read, or at replay), or nil when it is not refused.
    static func refusal(_ json: String) -> String? {
        do {
            _ = try TraceReplayer(parse(json)).run(repeats: 0)
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test(arguments: [
        (#"[[true,false,"x"]]"#, "its position is true"),
        (#"[[0,false,"x"]]"#, "its deleteCount is false"),
        (#"[[null,0,"x"]]"#, "its position is null"),
        (#"[["0",0,"x"]]"#, #"its position is "0""#),
        (#"[[0,0,true]]"#, "its text is true, not a string"),
        (#"[[1.5,0,"x"]]"#, "its position is 1.5"),
        (#"[[0,1e-1,"x"]]"#, "its deleteCount is 1e-1"),
        (#"[[-1,0,"x"]]"#, "its position is -1"),
        (#"[[0,0,"x","2023-11-22T04:49:00+00:00",1]]"#, "more than four elements"),
        (#"[[0,0,"x",5]]"#, "its fourth element is 5"),
        (#"[[0,0]]"#, "it has 2 elements"),
        (#"[7]"#, "it is 7"),
    ])
    func aPatchThatIsNotWholeNumbersAndTextIsRefusedNamingIt(patches: String, expected: String) {
        let json = #"{"endContent":"","txns":[{"patches":[[0,0,""]]},{"patches":[[0,0,""],\#(patches.dropFirst().dropLast())]}]}"#
        let message = Self.refusal(json)
        #expect(message?.contains("transaction 1, patch 1 is not [position, deleteCount, \"text\"]") == true, "\(message ?? "accepted")")
        #expect(message?.contains(expected) == true, "\(message ?? "accepted")")
    }

    @Test func wholeNumbersMayBeWrittenAsAnyJSONNumber() throws {
        let trace = try Self.parse(#"{"endContent":"","numAgents":2E0,"txns":[{"patches":[[1.0,10e-1,"a"],[-0,0.0e5,"b"],[12.5e1,100e-2,"c"]]}]}"#)
        #expect(trace.transactions[0].patches.map(\.position) == [1, 0, 125])
        #expect(trace.transactions[0].patches.map(\.deleteCount) == [1, 0, 1])
        #expect(trace.numAgents == 2)
        // 2^53 is the largest; one more is refused, however written.
        #expect(try Self.parse(#"{"endContent":"","txns":[{"patches":[[9007199254740992,0,""]]}]}"#).transactions[0].patches[0].position == 1 << 53)
        for big in ["9007199254740993", "9.007199254740993e15", "1e16", "1e999999999999999999", "123456789012345678901234567890"] {
            #expect(Self.refusal(#"{"endContent":"","txns":[{"patches":[[\#(big),0,""]]}]}"#)?.contains("its position is \(big)") == true, "\(big)")
        }
    }

    @Test func agentsAndParentsAreWholeNumbers() {
        let concurrent = { (agent: String, parents: String) in
            #"{"kind":"concurrent","endContent":"ab","txns":[{"parents":[],"agent":0,"patches":[[0,0,"a"]]},{"parents":\#(parents),"agent":\#(agent),"patches":[[1,0,"b"]]}]}"#
        }
        #expect(Self.refusal(concurrent("0", "[0]")) == nil)
        #expect(Self.refusal(concurrent("true", "[0]"))?.contains(#"transaction 1: "agent" is true, not a whole number"#) == true)
        #expect(Self.refusal(concurrent("1.5", "[0]"))?.contains(#""agent" is 1.5"#) == true)
        #expect(Self.refusal(concurrent("0", "[false]"))?.contains("transaction 1 names a parent that is not an earlier transaction: false") == true)
        #expect(Self.refusal(concurrent("0", "[1]"))?.contains("transaction 1 names a parent that is not an earlier transaction: 1") == true)
        #expect(Self.refusal(concurrent("0", "0"))?.contains(#"transaction 1: "parents" is 0, not an array"#) == true)
        // In a sequential trace too, an agent is a whole number.
        #expect(Self.refusal(#"{"endContent":"a","txns":[{"agent":true,"patches":[[0,0,"a"]]}]}"#)?.contains(#""agent" is true"#) == true)
        #expect(Self.refusal(#"{"endContent":"","numAgents":true,"txns":[]}"#)?.contains("numAgents is not a whole number from 0 to 2^53: true") == true)
    }

    @Test func anUnknownKindIsRefusedNamingIt() throws {
        #expect(Self.refusal(#"{"kind":"crdt","endContent":"","txns":[]}"#)?.contains(#"unknown "kind" "crdt""#) == true)
        #expect(Self.refusal(#"{"kind":3,"endContent":"","txns":[]}"#)?.contains(#""kind" is 3, not a string"#) == true)
        #expect(try Self.parse(#"{"kind":"sequential","endContent":"","txns":[]}"#).kind == .sequential)
        #expect(try Self.parse(#"{"endContent":"","txns":[]}"#).kind == .sequential)
    }

    @Test func aSequentialPatchPastTheEndNamesItsTransactionAndPatch() {
        let json = #"{"endContent":"","txns":[{"patches":[[0,0,"abcd"]]},{"patches":[[0,0,""],[9,0,"x"]]}]}"#
        #expect(Self.refusal(json)?.contains("transaction 1, patch 1 at 9 deleting 0 is past the end of the text (4)") == true, "\(Self.refusal(json) ?? "")")
    }

    @Test func stringsTakeEveryEscape() throws {
        let json = #"{"endContent":"","txns":[{"patches":[[0,0,"q\"b\\s\/\b\f\n\r\t\u0041\u00e9\u4E2D\ud83d\ude00 é中😀 \u0000"]]}]}"#
        #expect(try Self.parse(json).transactions[0].patches[0].insert == "q\"b\\s/\u{8}\u{c}\n\r\tA\u{e9}\u{4e2d}\u{1F600} \u{e9}\u{4e2d}\u{1F600} \u{0}")
        // A plain non-ASCII string, and one that mixes raw UTF-8 with escapes after it.
        #expect(try Self.parse(#"{"endContent":"é😀","txns":[{"patches":[[0,0,"😀x\n"]]}]}"#).endContent == "é😀")
        #expect(try Self.parse(#"{"endContent":"","txns":[{"patches":[[0,0,"😀x\n"]]}]}"#).transactions[0].patches[0].insert == "😀x\n")
    }

    @Test(arguments: [#""\ud800""#, #""\udc00x""#, #""\ud83dx""#, #""\ud83d\u0041""#, #""\ud83d\ud83d""#, #""a\udfff""#])
    func anUnpairedSurrogateIsRefused(text: String) {
        let message = Self.refusal(#"{"endContent":"","txns":[{"patches":[[0,0,\#(text)]]}]}"#)
        #expect(message?.contains("unpaired surrogate") == true, "\(message ?? "accepted")")
        #expect(message?.contains("(in transaction 0, patch 0)") == true, "\(message ?? "accepted")")
    }

    @Test func stringsMustBeUTF8WithoutRawControlCharacters() {
        for bad in [[0xFF], [0xC3], [0xED, 0xA0, 0x80], [0xC0, 0xAF]] as [[UInt8]] {
            let json = Array(#"{"endContent":"","txns":[{"patches":[[0,0,"a"#.utf8) + bad + Array(#""]]}]}"#.utf8)
            #expect { _ = try EditingTrace.parse(Data(json), name: "utf8") } throws: { "\($0)".contains("is not valid UTF-8") }
        }
        #expect(Self.refusal("{\"endContent\":\"a\nb\",\"txns\":[]}")?.contains("control character") == true)
        #expect(Self.refusal(#"{"endContent":"\x","txns":[]}"#)?.contains("expected an escape") == true)
        #expect(Self.refusal(#"{"endContent":"\u12G4","txns":[]}"#)?.contains("four hex digits") == true)
    }

    @Test func unknownKeysAreSkippedInAnyOrder() throws {
        // The corpus's extra fields, and others of every JSON type, before and after the ones read.
        let json = #"""
        { "meta": {"a": [1, -2.5e-3, true, false, null, {"b": "\u00e9\ud83d\ude00\""}], "c": {}}, "txns": [
            {"numChildren": 1, "kind": "x", "id": [], "time": "2020-01-01T00:00:00Z", "timestamp": "t",
             "patches": [[0, 0, "ab"]], "agent": 0, "parents": [], "extra": {"patches": 7}},
            {"patches": [[1, 0, "c"]], "\u0070arents": [0], "agent": 1, "time": "2020-01-01T00:00:01Z", "numChildren": 0}
          ],
          "endContent": "acb", "numAgents": 2, "startContent": "", "kind": "concurrent", "z": [[[[]]]] }
        """#
        let trace = try Self.parse(json)
        #expect(trace.kind == .concurrent, "the kind after the transactions")
        #expect(trace.numAgents == 2)
        #expect(trace.transactions.map(\.parents) == [[], [0]])
        #expect(trace.transactions.map(\.agent) == [0, 1])
        #expect(try TraceReplayer(trace).run(repeats: 0).matches)
        // A concurrent trace whose kind comes last still has its transactions' parents checked.
        let late = #"{"endContent":"","txns":[{"patches":[],"parents":[0],"agent":0}],"kind":"concurrent"}"#
        #expect(Self.refusal(late)?.contains("transaction 0 names a parent that is not an earlier transaction: 0") == true)
        let noAgent = #"{"endContent":"","txns":[{"patches":[],"parents":[]}],"kind":"concurrent"}"#
        #expect(Self.refusal(noAgent)?.contains(#"transaction 0 lacks "agent""#) == true)
        // A sequential trace is one chain whatever its transactions say.
        let sequential = try Self.parse(#"{"endContent":"ab","txns":[{"patches":[[0,0,"a"]],"parents":[],"agent":4},{"patches":[[1,0,"b"]]}]}"#)
        #expect(sequential.transactions.map(\.parents) == [[], [0]])
        #expect(sequential.transactions.map(\.agent) == [0, 0])
        #expect(sequential.numAgents == 1)
    }

    @Test func aKeyTheTraceReadsMayNotComeTwice() {
        #expect(Self.refusal(#"{"endContent":"","endContent":"","txns":[]}"#)?.contains(#"the key "endContent" appears twice"#) == true)
        #expect(Self.refusal(#"{"endContent":"","txns":[{"patches":[],"patches":[]}]}"#)?.contains(#"transaction 0 has the key "patches" twice"#) == true)
    }

    @Test func deepNestingIsRefused() throws {
        let nested = { (depth: Int) in #"{"endContent":"","meta":"# + String(repeating: "[", count: depth) + String(repeating: "]", count: depth) + #","txns":[]}"# }
        #expect(try Self.parse(nested(100)).transactions.isEmpty)
        #expect(Self.refusal(nested(200))?.contains("nested more than 128 deep") == true)
        #expect(Self.refusal(nested(1_000_000))?.contains("nested more than 128 deep") == true)
    }

    /// Every cut of a trace is refused as JSON that ends early, naming the byte and where in the trace it is.
    @Test func truncatedJSONIsRefusedWhereItEnds() throws {
        let json = #"{"kind":"concurrent","endContent":"a\u00e9😀\ud83d\ude00","txns":[{"parents":[],"agent":0,"patches":[[0,0,"a\u00e9😀\ud83d\ude00"]]},{"parents":[0],"agent":0,"patches":[[3,10e-1,"x"],[1,1,""]],"time":true}]}"#
        let bytes = Array(json.utf8)
        #expect(try EditingTrace.parse(Data(bytes), name: "whole").transactions.count == 2)
        for cut in 0 ..< bytes.count {
            #expect {
                _ = try EditingTrace.parse(Data(bytes.prefix(cut)), name: "cut")
            } throws: { error in
                let message = "\(error)"
                return message.contains("not valid JSON: the input ends early, at byte \(cut) (truncated?)")
            }
        }
        #expect(Self.refusal(String(json[..<json.range(of: "10e-1")!.lowerBound]))?.contains("(in transaction 1, patch 0)") == true)
    }

    @Test(arguments: [
        (#"{"endContent":"","txns":[]} x"#, "expected nothing after the top-level value at byte 28, found 'x'"),
        (#"{"endContent":"","txns":[],}"#, "expected a key (a string) at byte 27, found '}'"),
        (#"{"endContent":"","txns":[{"patches":[[0,0,"a"],]}]}"#, "expected a value at byte 47, found ']' (in transaction 0, patch 1)"),
        (#"{"endContent":"","txns":[{"patches":[[01,0,"a"]]}]}"#, "expected no digit after a leading 0 at byte 39"),
        (#"{"endContent":"" "txns":[]}"#, "expected ',' or '}' at byte 17"),
        (#"{"endContent":"","txns":[{"patches":[[0,0,"a"]]}],"x":tru}"#, "expected true at byte 57, found '}'"),
        ("", "the input ends early, at byte 0"),
        (#""text""#, "the top level is not a JSON object"),
    ])
    func malformedJSONIsRefusedNamingWhereAndWhat(json: String, expected: String) {
        let message = Self.refusal(json)
        #expect(message?.contains(expected) == true, "\(message ?? "accepted")")
    }

    /// Strings of any scalars, written by JSONSerialization and with every scalar as a \u escape,
    /// read back as they were.
    @Test func randomStringsReadBackExactly() throws {
        var rng = SplitMix64(seed: 7)
        let pool: [ClosedRange<UInt32>] = [0 ... 0x7F, 0x80 ... 0x7FF, 0x800 ... 0xD7FF, 0xE000 ... 0xFFFF, 0x10000 ... 0x10FFFF]
        for _ in 0 ..< 200 {
            let scalars = (0 ..< Int(rng.next() % 20)).map { _ in
                let range = pool[Int(rng.next() % UInt64(pool.count))]
                return Unicode.Scalar(range.lowerBound + UInt32(rng.next() % UInt64(range.count)))!
            }
            let text = String(String.UnicodeScalarView(scalars))
            let serialized = try JSONSerialization.data(withJSONObject: ["endContent": text, "txns": [["patches": [[0, 0, text]]]]] as [String: Any])
            let trace = try EditingTrace.parse(serialized, name: "random")
            #expect(trace.endContent.unicodeScalars.elementsEqual(text.unicodeScalars))
            #expect(trace.transactions[0].patches[0].insert.unicodeScalars.elementsEqual(text.unicodeScalars))
            let escaped = text.utf16.map { #"\u"# + String(("000" + String($0, radix: 16)).suffix(4)) }.joined()
            let read = try Self.parse(#"{"endContent":"\#(escaped)","txns":[]}"#).endContent
            #expect(read.unicodeScalars.elementsEqual(text.unicodeScalars), "\(escaped)")
        }
    }

    /// The published traces read the same as JSONSerialization reads them.
    @Test(arguments: ["sveltecomponent", "friendsforever"])
    func theFixturesReadAsJSONSerializationReadsThem(name: String) throws {
        let path = TraceReplayTests.tracesFolder.appendingPathComponent("\(name).json.gz").path
        let trace = try EditingTrace.load(path: path)
        let json = Data(try Gzip.decompress([UInt8](Data(contentsOf: URL(fileURLWithPath: path)))))
        let root = try #require(JSONSerialization.jsonObject(with: json) as? [String: Any])
        let txns = try #require(root["txns"] as? [[String: Any]])
        #expect(trace.endContent == root["endContent"] as? String)
        #expect(trace.transactions.count == txns.count)
        for (index, (txn, expected)) in zip(trace.transactions, txns).enumerated() {
            let patches = try #require(expected["patches"] as? [[Any]])
            #expect(txn.patches.count == patches.count, "transaction \(index)")
            for (patch, raw) in zip(txn.patches, patches) {
                #expect(patch.position == (raw[0] as? Int) && patch.deleteCount == (raw[1] as? Int) && patch.insert == (raw[2] as? String), "transaction \(index)")
            }
            if trace.kind == .concurrent {
                #expect(txn.parents == expected["parents"] as? [Int] && txn.agent == expected["agent"] as? Int, "transaction \(index)")
            }
        }
    }
}

import EditingTraces
import Foundation
import NotesCRDT
import Testing

/// Concurrent traces made from a seed, in the format's shape beyond the one recorded here: up to
/// eight agents, branches and merges of several parents, non-ASCII and astral characters. Each
/// agent edits only inside its own line, so no two agents insert at one place (the format's rule)
/// and the expected text is known without a CRDT: a line reads as its agent last left it among the
/// transaction's ancestors.
struct GeneratedTraceTests {
    /// A trace as JSON, and its expected end.
    static func generate(seed: UInt64) -> (json: Data, endContent: String, agents: Int, merges: Int) {
        var rng = SplitMix64(seed: seed)
        let agents = Int.random(in: 2 ... 8, using: &rng)
        let alphabet = Array("abcdefghij klmnop\u{e9}\u{f1}\u{4e2d}\u{1F600}\u{1F9D1}".unicodeScalars)
        // Per agent, its line's text after each of its transactions (index 0: before any).
        var lines: [[[Unicode.Scalar]]] = Array(repeating: [[]], count: agents)
        // Per transaction: how many transactions of each agent its history holds.
        var seen: [[Int]] = []
        var txns: [[String: Any]] = []
        let prefix: (Int) -> [Unicode.Scalar] = { Array("L\($0):".unicodeScalars) }

        func document(_ counts: [Int]) -> [Unicode.Scalar] {
            (0 ..< agents).flatMap { prefix($0) + lines[$0][counts[$0]] + ["\n"] }
        }
        // The first transaction writes every line's fixed frame; agents edit only inside their own.
        let frame = document(Array(repeating: 0, count: agents))
        txns.append(["parents": [Int](), "agent": 0, "patches": [[0, 0, String(String.UnicodeScalarView(frame))] as [Any]]])
        seen.append(Array(repeating: 0, count: agents))
        var last = Array(repeating: 0, count: agents)  // each agent's newest transaction (0: the frame)
        var merges = 0
        let count = Int.random(in: 30 ... 160, using: &rng)
        for index in 1 ... count {
            let a = Int.random(in: 0 ..< agents, using: &rng)
            // An agent's transactions are ordered: its newest is always an ancestor. Sometimes one
            // more parent, concurrent with it.
            var parents = [last[a]]
            var counts = seen[last[a]]
            let other = Int.random(in: 0 ..< index, using: &rng)
            let otherCounts = seen[other]
            let concurrent = zip(counts, otherCounts).contains { $0 < $1 } && zip(counts, otherCounts).contains { $0 > $1 }
            if Bool.random(using: &rng), concurrent {
                parents.append(other)
                counts = zip(counts, otherCounts).map { max($0, $1) }
                merges += 1
            } else if zip(counts, otherCounts).allSatisfy({ $0 <= $1 }), otherCounts[a] == counts[a] {
                parents = [other]  // a later state that holds the agent's newest: fine as the only parent
                counts = otherCounts
            }
            // Patches inside line a, against the document of the parents.
            var line = lines[a][counts[a]]
            var start = 0
            for k in 0 ..< a { start += prefix(k).count + lines[k][counts[k]].count + 1 }
            start += prefix(a).count
            var patches: [[Any]] = []
            for _ in 0 ..< Int.random(in: 1 ... 3, using: &rng) {
                let at = Int.random(in: 0 ... line.count, using: &rng)
                let delete = line.isEmpty || Bool.random(using: &rng) ? 0 : Int.random(in: 0 ... min(4, line.count - at), using: &rng)
                let insert = (0 ..< Int.random(in: delete == 0 ? 1 ... 6 : 0 ... 6, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! }
                line.replaceSubrange(at ..< at + delete, with: insert)
                patches.append([start + at, delete, String(String.UnicodeScalarView(insert))])
            }
            lines[a].append(line)
            counts[a] = lines[a].count - 1
            last[a] = index
            seen.append(counts)
            txns.append(["parents": parents, "agent": a, "patches": patches])
        }
        // The last transaction merges every branch.
        let heads = (0 ..< agents).map { last[$0] }.filter { head in
            !(0 ..< agents).contains { last[$0] != head && seen[last[$0]].indices.allSatisfy { seen[head][$0] <= seen[last[$0]][$0] } }
        }
        let all = (0 ..< agents).map { lines[$0].count - 1 }
        txns.append(["parents": Array(Set(heads)).sorted(), "agent": 0, "patches": [[Any]]()])
        let end = String(String.UnicodeScalarView(document(all)))
        let root: [String: Any] = ["kind": "concurrent", "numAgents": agents, "endContent": end, "txns": txns]
        return (try! JSONSerialization.data(withJSONObject: root), end, agents, merges)
    }

    @Test(arguments: 1 ... 40 as ClosedRange<UInt64>)
    func aGeneratedConcurrentTraceEndsWithItsEndContent(seed: UInt64) throws {
        let (json, end, agents, _) = GeneratedTraceTests.generate(seed: seed)
        let trace = try EditingTrace.parse(json, name: "generated-\(seed)")
        #expect(trace.kind == .concurrent)
        #expect(trace.numAgents == agents)
        let result = try TraceReplayer(trace).run(repeats: 0)
        #expect(result.matches, "seed \(seed) differs at scalar \(result.firstDifference ?? -1)")
        #expect(result.length == end.unicodeScalars.count)
    }

    @Test func theGeneratorMakesBranchesAndMerges() {
        let merges = (1 ... 40 as ClosedRange<UInt64>).map { GeneratedTraceTests.generate(seed: $0).merges }
        #expect(merges.filter { $0 > 0 }.count >= 30, "most traces have merges of two branches: \(merges)")
    }
}

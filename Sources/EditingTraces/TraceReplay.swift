import Foundation
import NotesCRDT

/// What a replay of a trace measured.
public struct TraceReplayResult: Sendable, Codable {
    public var trace: String
    public var kind: String
    /// Whether the final body equals the trace's `endContent`.
    public var matches: Bool
    /// The final body's length in Unicode scalars.
    public var length: Int
    public var expectedLength: Int
    public var transactions: Int
    public var patches: Int
    /// Milliseconds to replay every patch as local edits through the public API.
    public var localReplayMs: Double
    /// Milliseconds to decode the whole history as one encoded batch and apply it to a fresh
    /// replica, up to reading its text.
    public var mergeMs: Double
    /// Bytes of the whole history, encoded.
    public var encodedBytes: Int
    /// Changes in the history after coalescing.
    public var changes: Int
    /// Runs that hold the final body.
    public var runs: Int
    /// Index of the first character where the text differs from `endContent`, when it does.
    public var firstDifference: Int?
}

/// Replays an editing trace through the public `Notebook` API.
///
/// Sequential traces run on one replica. Concurrent traces run one replica per agent: before each
/// transaction, the agent's replica receives exactly the changes in its parents' history that it
/// lacks (through `apply(_:)`, as a sync would deliver them), so the transaction's positions apply
/// to the document they were recorded against. Every replica reads time from one fixed clock, so
/// the run is deterministic (the hybrid logical clock then counts like a Lamport clock).
public struct TraceReplayer {
    public let trace: EditingTrace

    public init(_ trace: EditingTrace) { self.trace = trace }

    public func run() throws -> TraceReplayResult {
        let clock = FixedWallClock(1_600_000_000_000)
        var setupRNG = SplitMix64(seed: 0x5EED)
        let noteID = NoteID.random(using: &setupRNG)
        var setup = Notebook(replicaID: ReplicaID.random(using: &setupRNG), wallClock: clock)
        setup.createNote(id: noteID, title: trace.name, body: trace.startContent)
        let base = setup.changes(since: VersionVector())

        var replicas: [Notebook] = (0 ..< trace.numAgents).map { _ in
            Notebook(replicaID: ReplicaID.random(using: &setupRNG), wallClock: clock)
        }
        for i in replicas.indices { try replicas[i].apply(contentsOf: base) }
        let baseVersion = replicas[0].versionVector

        // Per agent: the changes of each of its transactions, with the version after it.
        var versionAfter: [VersionVector] = []
        versionAfter.reserveCapacity(trace.transactions.count)
        var authored: [[Change]] = Array(repeating: [], count: trace.numAgents)
        var consumed = Array(repeating: Array(repeating: 0, count: trace.numAgents), count: trace.numAgents)
        var patchCount = 0

        let start = DispatchTime.now().uptimeNanoseconds
        for (index, txn) in trace.transactions.enumerated() {
            let a = txn.agent
            if trace.kind == .concurrent {
                var target = baseVersion
                for parent in txn.parents { target.merge(versionAfter[parent]) }
                for b in 0 ..< trace.numAgents where b != a {
                    let limit = target[replicas[b].replicaID]
                    while consumed[a][b] < authored[b].count, authored[b][consumed[a][b]].endSeq <= limit {
                        try replicas[a].apply(authored[b][consumed[a][b]])
                        consumed[a][b] += 1
                    }
                }
                guard replicas[a].versionVector == target else {
                    throw TraceError("transaction \(index) of agent \(a) cannot be replayed: the agent has seen history outside its parents")
                }
            }
            for patch in txn.patches {
                patchCount += 1
                let length = replicas[a].body(of: noteID)!.count
                guard patch.position + patch.deleteCount <= length else {
                    throw TraceError("transaction \(index): patch at \(patch.position) deleting \(patch.deleteCount) is past the end of the text (\(length))")
                }
                if patch.deleteCount > 0, let change = try replicas[a].deleteText(noteID, patch.position ..< patch.position + patch.deleteCount) {
                    authored[a].append(change)
                }
                if !patch.insert.isEmpty, let change = try replicas[a].insertText(noteID, at: patch.position, patch.insert) {
                    authored[a].append(change)
                }
            }
            if trace.kind == .concurrent { versionAfter.append(replicas[a].versionVector) }
        }
        let localNanos = DispatchTime.now().uptimeNanoseconds - start

        // The whole history: what every replica made, in causal order.
        var everything = setup
        for replica in replicas { try everything.merge(replica) }
        let history = everything.changes(since: VersionVector())
        let encoded = ChangeCodec.encode(history)

        let mergeStart = DispatchTime.now().uptimeNanoseconds
        var fresh = Notebook(replicaID: ReplicaID.random(using: &setupRNG), wallClock: clock)
        try fresh.apply(contentsOf: ChangeCodec.decode(encoded))
        let text = fresh.body(of: noteID)!.string
        let mergeNanos = DispatchTime.now().uptimeNanoseconds - mergeStart

        let expected = trace.endContent
        let matches = text == expected
        var firstDifference: Int? = nil
        if !matches {
            firstDifference = zip(text.unicodeScalars, expected.unicodeScalars).enumerated().first { $0.element.0 != $0.element.1 }?.offset
                ?? min(text.unicodeScalars.count, expected.unicodeScalars.count)
        }
        return TraceReplayResult(
            trace: trace.name, kind: trace.kind.rawValue, matches: matches,
            length: text.unicodeScalars.count, expectedLength: expected.unicodeScalars.count,
            transactions: trace.transactions.count, patches: patchCount,
            localReplayMs: Double(localNanos) / 1e6, mergeMs: Double(mergeNanos) / 1e6,
            encodedBytes: encoded.count, changes: history.count,
            runs: fresh.body(of: noteID)!.runCount, firstDifference: firstDifference)
    }
}

/// SplitMix64: a small, fast, seeded generator, so replays are repeatable.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

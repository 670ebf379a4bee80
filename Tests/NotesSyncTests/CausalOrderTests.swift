import NotesCRDT
import NotesSync
import Testing

/// The order a sync session sends and applies changes in (`CausalOrder.canonical`): the same
/// whatever order they came in, causal, and in runs of one author's changes.
struct CausalOrderTests {
    /// Three replicas typing, each in its own note and in a shared one, syncing now and then,
    /// with clocks that disagree: a history whose authors interleave in time, with dependencies
    /// between them.
    static func history(seed: UInt64) throws -> [Change] {
        var rng = SplitMix64(seed: seed)
        var replicas = (0 ..< 3).map { i in
            Notebook(replicaID: ReplicaID.random(using: &rng), wallClock: FixedWallClock(1_700_000_000_000 + UInt64(i) * 7_000))
        }
        let shared = replicas[0].createNote(id: NoteID.random(using: &rng), title: "shared").id
        var own: [NoteID] = []
        for i in replicas.indices {
            replicas[i].apply(contentsOf: replicas[0].changes(since: replicas[i].versionVector))
            own.append(replicas[i].createNote(id: NoteID.random(using: &rng), title: "own \(i)").id)
        }
        for step in 0 ..< 120 {
            let i = Int(rng.next() % 3)
            replicas[i].wallClock = FixedWallClock(1_700_000_000_000 + UInt64(step) * 1_000 + UInt64(i) * 7_000)
            let note = rng.next() % 2 == 0 ? shared : own[i]
            let length = replicas[i].body(of: note)?.count ?? 0
            _ = try replicas[i].insertText(note, at: Int(rng.next() % UInt64(length + 1)), "w\(step) ")
            if rng.next() % 6 == 0 {
                let j = Int(rng.next() % 3)
                replicas[j].apply(contentsOf: replicas[i].changes(since: replicas[j].versionVector))
            }
        }
        var everything = replicas[0]
        for other in replicas.dropFirst() { try everything.merge(other) }
        return everything.changes(since: VersionVector())
    }

    static func authorSwitches(_ changes: [Change]) -> Int {
        zip(changes, changes.dropFirst()).filter { $0.replica != $1.replica }.count
    }

    @Test(arguments: [UInt64(1), 2, 3, 4])
    func theOrderIsCausalTheSameForAnyInputAndKeepsAuthorsTogether(_ seed: UInt64) throws {
        let changes = try Self.history(seed: seed)
        var rng = SplitMix64(seed: seed ^ 0xCA7)
        let ordered = CausalOrder.canonical(changes.shuffled(using: &rng))
        #expect(CausalOrder.canonical(changes.shuffled(using: &rng)) == ordered)
        #expect(CausalOrder.canonical(changes.reversed()) == ordered)
        // The same changes.
        let key = { (c: Change) in (c.replica, c.startSeq) }
        #expect(ordered.sorted { key($0) < key($1) } == changes.sorted { key($0) < key($1) })
        // Causal: a fresh replica applies each as it comes.
        var fresh = Notebook(replicaID: ReplicaID.random(using: &rng), wallClock: FixedWallClock(0))
        for change in ordered {
            #expect(fresh.apply(change) == .applied(released: 0))
        }
        var reference = Notebook(replicaID: ReplicaID.random(using: &rng), wallClock: FixedWallClock(0))
        reference.apply(contentsOf: changes)
        #expect(fresh.digest() == reference.digest())
        // In fewer runs than the order of their timestamps.
        let byTime = changes.sorted { ($0.timestamp, $0.replica, $0.startSeq) < ($1.timestamp, $1.replica, $1.startSeq) }
        #expect(Self.authorSwitches(ordered) < Self.authorSwitches(byTime))
    }
}

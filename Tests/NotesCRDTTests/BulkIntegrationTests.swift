@testable import NotesCRDT
import Testing

/// A large batch of remote operations on one note is integrated in the text's list form
/// (`RGABulkList`) and the tree is built once. It must give exactly what integrating the same
/// operations one by one in the tree gives: the same characters, keys, origins and tombstones.
struct BulkIntegrationTests {
    /// Every text operation of `changes` on `note`, fed to `text` as `Notebook` feeds them.
    static func feed<Text: TextIntegration>(_ changes: some Sequence<Change>, note: NoteID, to text: inout Text) {
        for change in changes {
            var seq = change.startSeq
            for op in change.operations {
                if op.note == note {
                    switch op {
                    case .insertText(_, let origin, let scalars):
                        text.place(id: OpID(replica: change.replica, seq: seq), origin: origin,
                                   key: change.timestamp(ofSeq: seq).rawValue, scalars: scalars)
                    case .deleteText(_, let targets):
                        for target in targets { text.tombstone(target) }
                    case .deleteEach(_, let runs):
                        for run in runs { text.tombstone(run.range) }
                    default:
                        break
                    }
                }
                seq += op.seqCount
            }
        }
    }

    /// Several replicas editing concurrently (inserts inside each other's runs, deletes of each
    /// other's text, clocks that jump back): their history, in a causal order.
    static func history(seed: UInt64) throws -> (changes: [Change], notes: [NoteID], reference: Notebook) {
        var sim = Simulation(seed: seed, replicaCount: 3, outOfOrderDeliveries: false)
        try sim.run(steps: 300)
        var everything = makeNotebook(50)
        for replica in sim.replicas { try everything.merge(replica) }
        return (everything.changes(since: VersionVector()), everything.noteIDs, everything)
    }

    @Test(arguments: (1 as UInt64) ... 12)
    func aWholeHistoryInListFormGivesTheSameText(seed: UInt64) throws {
        let (changes, notes, reference) = try Self.history(seed: seed)
        for note in notes {
            var bulk = RGAText()
            bulk.withBulkList { list in Self.feed(changes, note: note, to: &list) }
            let expected = reference.body(of: note)!
            #expect(bulk.invariantViolation() == nil, "seed \(seed)")
            #expect(bulk.structureDifference(from: expected) == nil, "seed \(seed)")
            #expect(bulk.string == expected.string)
        }
    }

    /// An insert after a character in the middle of a run, whose next character has the same key
    /// and the greater replica: the rest of the run sorts first and is skipped whole.
    @Test func anInsertSkipsTheRestOfARunThatSortsFirst() throws {
        var a = makeNotebook(2)  // the greater replica id: its character wins the tie
        var b = makeNotebook(1)
        let (id, _) = a.createNote(title: "t", body: "")
        try a.insertText(id, at: 0, "a")
        try b.merge(a)
        try a.insertText(id, at: 1, "b")  // one key after "a": the run "ab"
        try b.insertText(id, at: 1, "X")  // concurrently after "a", with the same key as "b"
        var everything = makeNotebook(9)
        try everything.merge(a)
        try everything.merge(b)
        #expect(everything.note(id)?.body == "abX")
        var bulk = RGAText()
        bulk.withBulkList { list in Self.feed(everything.changes(since: VersionVector()), note: id, to: &list) }
        #expect(bulk.string == "abX")
        #expect(bulk.structureDifference(from: everything.body(of: id)!) == nil)
    }

    /// The list form taken from a text that already holds characters (a replica that had the
    /// first half and receives the rest), then integrated further one by one.
    @Test(arguments: [11, 12, 13, 14] as [UInt64])
    func theListFormOfAnExistingTextContinuesIt(seed: UInt64) throws {
        let (changes, notes, reference) = try Self.history(seed: seed)
        let half = changes.count / 2
        let threeQuarters = changes.count * 3 / 4
        for note in notes {
            var text = RGAText()
            Self.feed(changes[..<half], note: note, to: &text)
            text.withBulkList { list in Self.feed(changes[half ..< threeQuarters], note: note, to: &list) }
            Self.feed(changes[threeQuarters...], note: note, to: &text)
            #expect(text.invariantViolation() == nil, "seed \(seed)")
            #expect(text.structureDifference(from: reference.body(of: note)!) == nil, "seed \(seed)")
        }
    }

    /// Through `Notebook.apply`: a batch of 600 edits (typing, backspaces and jumps into text
    /// another replica wrote) is one change. A fresh replica integrates it in list form; a replica
    /// that holds a long text of its own in the note, one by one. Both agree with the author.
    @Test func aLargeChangeAppliesAlikeInEitherForm() throws {
        var rng = SplitMix64(seed: 77)
        var a = makeNotebook(1)
        let (id, _) = a.createNote(title: "t", body: randomText(40, using: &rng))
        var b = makeNotebook(2)
        try b.merge(a)
        try b.insertText(id, at: 10, "written by b, between a's characters")
        try a.merge(b)
        var long = makeNotebook(4)
        try long.merge(a)
        try long.insertText(id, at: long.body(of: id)!.count, randomText(20_000, using: &rng))
        let before = a.versionVector
        try a.editBody(id) { body in
            var cursor = 5
            for _ in 0 ..< 600 {
                if rng.chance(0.3), cursor > 0 {
                    try body.delete(cursor - 1 ..< cursor)
                    cursor -= 1
                } else if rng.chance(0.1) {
                    cursor = rng.int(0 ... body.count)
                } else {
                    try body.insert(randomText(rng.int(1 ... 3), using: &rng), at: cursor)
                    cursor += 1
                }
                cursor = min(cursor, body.count)
            }
        }
        let batch = a.changes(since: before)
        #expect(batch.count == 1)
        #expect(batch[0].operations.count >= Notebook.bulkOperations, "large enough for the list form")
        #expect(batch[0].operations.count * 16 < long.body(of: id)!.totalCharacters, "too small against long's text")

        var fresh = makeNotebook(3)
        try fresh.apply(contentsOf: a.changes(since: VersionVector()))
        #expect(fresh.body(of: id)!.invariantViolation() == nil)
        #expect(fresh.body(of: id)!.structureDifference(from: a.body(of: id)!) == nil)

        try long.apply(contentsOf: batch)
        try a.merge(long)
        #expect(long.body(of: id)!.invariantViolation() == nil)
        #expect(long.body(of: id)!.structureDifference(from: a.body(of: id)!) == nil)
        #expect(long.digest() == a.digest())
    }
}

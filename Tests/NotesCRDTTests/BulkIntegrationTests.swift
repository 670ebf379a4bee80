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
        fresh.apply(contentsOf: a.changes(since: VersionVector()))
        #expect(fresh.body(of: id)!.invariantViolation() == nil)
        #expect(fresh.body(of: id)!.structureDifference(from: a.body(of: id)!) == nil)

        long.apply(contentsOf: batch)
        try a.merge(long)
        #expect(long.body(of: id)!.invariantViolation() == nil)
        #expect(long.body(of: id)!.structureDifference(from: a.body(of: id)!) == nil)
        #expect(long.digest() == a.digest())
    }

    /// A pasted block cut into many pieces by the same batch (more than a lookup walks through,
    /// so its entries are pointed at each piece), its pieces spread over many leaves, then edited
    /// further one by one in the built tree (whose entries name the list's runs): the same text as
    /// the author's, and every character found by its identity, deleted ones included.
    @Test(arguments: [5, 6, 7] as [UInt64])
    func aPasteCutIntoManyPiecesGivesTheSameText(seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        var a = makeNotebook(1)
        let (id, _) = a.createNote(title: "t", body: "")
        /// Inserts and deletes all over the text.
        func scatter(_ body: inout BodyEditor, _ count: Int) throws {
            for _ in 0 ..< count {
                let at = rng.int(0 ..< body.count)
                if rng.chance(0.5) {
                    try body.delete(at ..< min(at + rng.int(1 ... 3), body.count))
                } else {
                    try body.insert(randomText(rng.int(1 ... 4), using: &rng), at: at)
                }
            }
        }
        try a.editBody(id) { body in
            try body.insert(randomText(3_000, using: &rng), at: 0)
            try scatter(&body, 400)
        }
        let middle = a.versionVector
        let history = a.changes(since: VersionVector())
        #expect(history.last!.operations.count >= Notebook.bulkOperations, "large enough for the list form")
        var bulk = RGAText()
        bulk.withBulkList { list in Self.feed(history, note: id, to: &list) }
        #expect(bulk.invariantViolation() == nil, "seed \(seed)")
        #expect(bulk.structureDifference(from: a.body(of: id)!) == nil, "seed \(seed)")
        for character in a.body(of: id)!.characters() {
            #expect(bulk.contains(character.id), "seed \(seed): \(character.id)")
        }
        try a.editBody(id) { body in try scatter(&body, 100) }
        Self.feed(a.changes(since: middle), note: id, to: &bulk)
        #expect(bulk.invariantViolation() == nil, "seed \(seed)")
        #expect(bulk.structureDifference(from: a.body(of: id)!) == nil, "seed \(seed)")
        #expect(bulk.string == a.body(of: id)!.string)
    }

    /// What is wrong with the bad operation in `aLargeBatchWithAMissingReferenceThrowsAndChangesNothing`.
    enum BadReference: CaseIterable {
        case unknownOrigin, originInAnotherNote, deleteOfUnknownCharacters, deleteOfALaterInsert, deletePartlyThere
    }

    /// A fresh replica checks a large batch's references as the list form integrates it (not by
    /// `validate` first). It must reject exactly what `validate` rejects, with the same error,
    /// and leave the replica as it was. The same bad change goes to a replica with a short text
    /// (the list form, checked as it goes) and to one with a long text (too small a batch for the
    /// list form there: validated first, then applied one by one).
    @Test(arguments: BadReference.allCases)
    func aLargeBatchWithAMissingReferenceThrowsAndChangesNothing(bad: BadReference) throws {
        var short = makeNotebook(1)
        let id = short.createNote(id: noteID(1), title: "kept", body: "abc").id
        let other = short.createNote(id: noteID(2), body: "zz").id
        var long = short
        var rng = SplitMix64(seed: 5)
        try long.insertText(id, at: 3, randomText(20_000, using: &rng))

        // 300 inserts at the start of the text (none joins the one before), one bad operation at
        // index 150, deletes of characters typed earlier in the change.
        let author = replica(2)
        var operations: [Operation] = []
        for index in 0 ..< 320 {
            let seq = UInt64(operations.count + 1)  // every operation here takes one seq
            if index == 150 {
                switch bad {
                case .unknownOrigin:
                    operations.append(.insertText(note: id, origin: OpID(replica: replica(7), seq: 3), text: InsertedText("x")))
                case .originInAnotherNote:
                    operations.append(.insertText(note: id, origin: try #require(short.body(of: other)).identity(at: 0), text: InsertedText("x")))
                case .deleteOfUnknownCharacters:
                    operations.append(.deleteText(note: id, targets: [OpIDRange(replica: replica(1), seq: 900_000, count: 2)]))
                case .deleteOfALaterInsert:
                    // Inserted by this change, but by the next operation: not there yet (a delete
                    // gathered to be integrated later would find it).
                    operations.append(.deleteText(note: id, targets: [OpIDRange(replica: author, seq: seq + 1, count: 1)]))
                case .deletePartlyThere:
                    operations.append(.deleteText(note: id, targets: [OpIDRange(replica: author, seq: 140, count: 20)]))
                }
            } else if index % 10 == 9 {
                operations.append(.deleteText(note: id, targets: [OpIDRange(replica: author, seq: seq - 3, count: 1)]))
            } else {
                operations.append(.insertText(note: id, origin: nil, text: InsertedText("k")))
            }
        }
        let change = Change(replica: author, startSeq: 1, timestamp: Timestamp(milliseconds: baseTime + 10),
                            dependencies: short.versionVector, operations: operations)
        #expect(change.operations.count >= Notebook.bulkOperations)
        #expect(change.operations.count * 16 >= short.body(of: id)!.totalCharacters, "the list form on the short text")
        #expect(change.operations.count * 16 < long.body(of: id)!.totalCharacters, "validated first on the long text")

        var messages: [String] = []
        for var replica in [short, long] {
            let (digest, version, text) = (replica.digest(), replica.versionVector, replica.body(of: id)!.string)
            let error = replica.apply(change).quarantineReason
            #expect(error?.code == .unknownReference, "\(bad)")
            messages.append(error?.message ?? "")
            #expect(replica.digest() == digest, "\(bad)")
            #expect(replica.versionVector == version)
            #expect(replica.body(of: id)!.string == text)
            #expect(replica.body(of: id)!.invariantViolation() == nil)
            #expect(replica.note(id)?.title == "kept")
            #expect(replica.pendingCount == 0)
        }
        #expect(messages[0] == messages[1], "both forms name the same problem")

        // Without the bad operation the same batch applies in both forms, alike.
        operations[150] = .insertText(note: id, origin: nil, text: InsertedText("k"))
        let good = Change(replica: author, startSeq: 1, timestamp: Timestamp(milliseconds: baseTime + 10),
                          dependencies: short.versionVector, operations: operations)
        short.apply(good)
        long.apply(good)
        try long.merge(short)
        try short.merge(long)
        #expect(short.digest() == long.digest())
        #expect(short.body(of: id)!.invariantViolation() == nil)
        #expect(short.body(of: id)!.structureDifference(from: long.body(of: id)!) == nil)
    }
}

import NotesCRDT
import Testing

/// `Notebook.editBody`: many edits of a body in one batch, logged as one change.
struct BodyEditingTests {
    /// One random edit of a text of `length` scalars: (delete range, inserted text, insert offset).
    struct Edit {
        var delete: Range<Int>?
        var insert: String
        var at: Int
    }

    static func randomEdits(_ count: Int, startLength: Int, seed: UInt64) -> [Edit] {
        var rng = SplitMix64(seed: seed)
        var length = startLength
        var edits: [Edit] = []
        var cursor = 0
        for _ in 0 ..< count {
            var edit = Edit(delete: nil, insert: "", at: 0)
            // Mostly typing on from the cursor, sometimes a jump, a backspace or a selection.
            if rng.chance(0.2) { cursor = rng.int(0 ... length) }
            if rng.chance(0.25), cursor > 0 {
                let start = max(0, cursor - rng.int(1 ... 4))
                edit.delete = start ..< cursor
                length -= cursor - start
                cursor = start
            }
            if edit.delete == nil || rng.chance(0.3) {
                edit.insert = rng.chance(0.7) ? randomText(1, using: &rng) : randomText(rng.int(1 ... 5), using: &rng)
                edit.at = cursor
                let n = edit.insert.unicodeScalars.count
                length += n
                cursor += n
            }
            edits.append(edit)
        }
        return edits
    }

    static func setUp() -> (Notebook, NoteID) {
        var nb = makeNotebook(1)
        let id = nb.createNote(id: noteID(1), title: "t", body: "hello world").id
        return (nb, id)
    }

    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func aBatchGivesTheTextOfTheSameEditsMadeOneByOne(seed: UInt64) throws {
        let edits = Self.randomEdits(300, startLength: 11, seed: seed)
        var (batched, id) = Self.setUp()
        var single = batched
        let before = batched.versionVector
        let changes = try batched.editBody(id) { body in
            for edit in edits {
                if let range = edit.delete { try body.delete(range) }
                if !edit.insert.isEmpty { try body.insert(edit.insert, at: edit.at) }
            }
        }
        for edit in edits {
            if let range = edit.delete { try single.deleteText(id, range) }
            if !edit.insert.isEmpty { try single.insertText(id, at: edit.at, edit.insert) }
        }
        #expect(batched.note(id)?.body == single.note(id)?.body)
        #expect(changes.count == 1, "one batch, one change")
        // The batch takes a sequence number per insert character and per delete, like the edits one by one.
        #expect(batched.versionVector == single.versionVector)
        #expect(changes.first?.startSeq == before[replica(1)] + 1)
        // Another replica that receives the change (or the coalesced log) has exactly this state.
        let fromChanges = try replay(Self.setUpChanges() + changes)
        #expect(fromChanges.digest() == batched.digest())
        let fromLog = try replay(ChangeCodec.decode(ChangeCodec.encode(batched.allChanges)))
        #expect(fromLog.digest() == batched.digest())
        #expect(fromLog.note(id)?.body == batched.note(id)?.body)
        #expect(fromLog.body(of: id)!.structureDifference(from: batched.body(of: id)!) == nil)
        #expect(fromChanges.body(of: id)!.structureDifference(from: batched.body(of: id)!) == nil)
        #expect(batched.body(of: id)!.invariantViolation() == nil)
    }

    /// The changes that `setUp()` makes (its replica is deterministic).
    static func setUpChanges() throws -> [Change] { setUp().0.allChanges }

    @Test func editorReadsTheTextAsItIsEdited() throws {
        var (nb, id) = Self.setUp()
        try nb.editBody(id) { body in
            #expect(body.count == 11)
            try body.replace(0 ..< 5, with: "howdy")
            #expect(body.string == "howdy world")
            try body.insert("!", at: body.count)
            #expect(body.count == 12)
        }
        #expect(nb.note(id)?.body == "howdy world!")
    }

    @Test func anEmptyBatchMakesNoChange() throws {
        var (nb, id) = Self.setUp()
        let before = (nb.versionVector, nb.digest(), nb.historyCount)
        let changes = try nb.editBody(id) { body in
            try body.insert("", at: 3)
            try body.delete(4 ..< 4)
        }
        #expect(changes.isEmpty)
        #expect(nb.versionVector == before.0)
        #expect(nb.digest() == before.1)
        #expect(nb.historyCount == before.2)
    }

    @Test func aFailingEditKeepsTheEditsBeforeItAndChangesNothingItself() throws {
        var (nb, id) = Self.setUp()
        let before = nb.versionVector
        #expect(throws: CRDTError.self) {
            try nb.editBody(id) { body in
                try body.insert("abc", at: 0)
                try body.delete(0 ..< 1)
                try body.insert("x", at: 99)  // past the end
            }
        }
        #expect(nb.note(id)?.body == "bchello world")
        // The two edits made are logged: another replica gets them from the log.
        let copy = try replay(nb.changes(since: VersionVector()))
        #expect(copy.note(id)?.body == "bchello world")
        #expect(copy.digest() == nb.digest())
        #expect(nb.versionVector[replica(1)] == before[replica(1)] + 4)
        // And the replica goes on editing normally.
        try nb.insertText(id, at: 0, "a")
        #expect(nb.note(id)?.body == "abchello world")
    }

    @Test func aMissingNoteIsAnError() throws {
        var (nb, _) = Self.setUp()
        let digest = nb.digest()
        #expect(throws: CRDTError.self) { try nb.editBody(noteID(99)) { _ in } }
        #expect(nb.digest() == digest)
    }

    @Test func aBatchConcurrentWithRemoteEditsConverges() throws {
        var (a, id) = Self.setUp()
        var b = makeNotebook(2)
        b.apply(contentsOf: a.allChanges)
        let base = a.versionVector
        try a.editBody(id) { body in
            try body.insert("A", at: 5)
            try body.insert("B", at: 6)
            try body.delete(0 ..< 1)
        }
        try b.editBody(id) { body in
            try body.insert("xy", at: 5)
            try body.delete(8 ..< 11)
        }
        let fromA = a.changes(since: base)
        a.apply(contentsOf: b.changes(since: base))
        b.apply(contentsOf: fromA)
        #expect(a.digest() == b.digest())
        #expect(a.note(id)?.body == b.note(id)?.body)
        // Each side's typing stays together.
        let body = a.note(id)!.body
        #expect(body.contains("AB") && body.contains("xy"), "\(body)")
    }

    /// Next to text stamped by a clock far ahead (that ours refused to follow), an insert must take
    /// keys above that text's to land where it was typed: the batch then starts a second change.
    @Test func aBatchNextToFarFutureTextLandsWhereTyped() throws {
        var (future, local, id) = try farFutureNote()
        let changes = try local.editBody(id) { body in
            try body.insert("a", at: 2)  // after z: nothing there, the clock's own key will do
            try body.insert("n", at: 1)  // between o and z: must go above z's key
            try body.insert("m", at: 2)  // typed on after n
        }
        #expect(local.note(id)?.body == "onmza")
        #expect(changes.count == 2)
        future.apply(contentsOf: local.changes(since: future.versionVector))
        #expect(future.digest() == local.digest())
        #expect(future.note(id)?.body == "onmza")
    }
}

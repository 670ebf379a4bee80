import NotesCRDT
import Testing

/// Merges a person can see (issue 18, part 4): what marks a note, what each side's version and
/// the merged result are, and how a resolve clears the mark everywhere and for good.
struct NotebookConflictsTests {
    /// Two replicas that both have a note with this body, at their wall clocks.
    func pair(body: String, wallA: UInt64 = baseTime + 10, wallB: UInt64 = baseTime + 20) throws -> (Notebook, Notebook, NoteID) {
        let (a, b, id, _) = try pairWithCreation(body: body, wallA: wallA, wallB: wallB)
        return (a, b, id)
    }

    func pairWithCreation(body: String, wallA: UInt64 = baseTime + 10, wallB: UInt64 = baseTime + 20) throws -> (Notebook, Notebook, NoteID, Change) {
        var a = makeNotebook(1)
        let (id, created) = a.createNote(id: noteID(1), title: "shopping", body: body)
        var b = makeNotebook(2)
        try b.apply(created)
        a.setWallTime(wallA)
        b.setWallTime(wallB)
        return (a, b, id, created)
    }

    func exchange(_ a: inout Notebook, _ b: inout Notebook) throws {
        let toB = a.changes(since: b.versionVector)
        try a.apply(contentsOf: b.changes(since: a.versionVector))
        try b.apply(contentsOf: toB)
    }

    /// The example: both laptops changed "eggs", one to "butter", one to "cheese". The
    /// merge keeps both words (character-level merging is right) and marks the note; each side's
    /// version shows its own word, the merged result both.
    @Test func eggsToButterAndCheeseIsAMarkedMerge() throws {
        var (a, b, id) = try pair(body: "milk, eggs, bread")
        try a.replaceBody(id, with: "milk, butter, bread")
        try b.replaceBody(id, with: "milk, cheese, bread")
        #expect(a.note(id)?.hasConflicts == false, "nothing concurrent yet")
        try exchange(&a, &b)
        let merged = try #require(a.note(id)?.body)
        #expect(merged == "milk, cheesebutter, bread" || merged == "milk, buttercheese, bread")
        for nb in [a, b] {
            #expect(nb.note(id)?.body == merged)
            #expect(nb.note(id)?.hasConflicts == true)
            #expect(nb.conflictedNoteIDs == [id])
            let conflicts = try nb.conflicts(of: id)
            #expect(conflicts.count == 1)
            let conflict = try #require(conflicts.first)
            #expect(conflict.kind == .body)
            #expect(conflict.sides.map(\.replica) == [replica(1), replica(2)])
            #expect(conflict.sides.map(\.note.body) == ["milk, butter, bread", "milk, cheese, bread"])
            #expect(conflict.merged.body == merged)
            let region = DifferingRegion(conflict.sides.map(\.note.body) + [conflict.merged.body], context: 7)
            #expect(region.parts == ["butter", "cheese", String(merged.dropFirst(6).dropLast(7))])
            #expect(region.before == "milk, " && region.after == ", bread")
        }
        #expect(a.digest() == b.digest())
    }

    /// Concurrent titles: one wins by last-writer-wins, and the note is marked with both values.
    @Test func concurrentTitlesAreAMarkedMerge() throws {
        var (a, b, id) = try pair(body: "")
        try a.setTitle(id, "from a")
        try b.setTitle(id, "from b")
        try exchange(&a, &b)
        for nb in [a, b] {
            #expect(nb.note(id)?.title == "from b", "b's clock is later")
            let conflict = try #require(try nb.conflicts(of: id).first)
            #expect(conflict.kind == .field(.title))
            #expect(conflict.sides.map(\.note.title) == ["from a", "from b"])
            #expect(conflict.merged.title == "from b")
        }
    }

    /// What is not a conflict: concurrent edits of different regions, of different fields, the
    /// same value written twice, edits one after the other.
    @Test func editsThatDoNotMeetAreNotMarked() throws {
        var (a, b, id) = try pair(body: "first line\nsecond line")
        try a.insertText(id, at: 5, "!")  // in the first line
        try b.insertText(id, at: 22, "?")  // at the end of the second
        try b.deleteText(id, 11 ..< 17)  // "second"
        try a.setTitle(id, "renamed")
        try b.setPinned(id, true)
        try a.setTag(id, "work", member: true)
        try b.setTag(id, "work", member: true)  // the same value
        try exchange(&a, &b)
        try a.setTitle(id, "renamed again")  // after seeing everything
        try a.insertText(id, at: 0, ">")
        try exchange(&a, &b)
        for nb in [a, b] {
            #expect(nb.note(id)?.hasConflicts == false)
            #expect(try nb.conflicts(of: id).isEmpty)
        }
        #expect(a.note(id)?.body == ">first! line\n line?")
    }

    /// The three body regions the definition names: inserts at the same place, an insert after a
    /// character the other side deleted, deletes of the same characters.
    @Test(arguments: ["same place", "into deleted text", "same characters deleted"])
    func bodyRegionsThatMeet(_ situation: String) throws {
        var (a, b, id) = try pair(body: "abcdef")
        switch situation {
        case "same place":
            try a.insertText(id, at: 3, "X")
            try b.insertText(id, at: 3, "Y")
        case "into deleted text":
            try a.deleteText(id, 2 ..< 4)  // "cd"
            try b.insertText(id, at: 3, "Y")  // after "c"
        default:
            try a.deleteText(id, 1 ..< 4)  // "bcd"
            try b.deleteText(id, 3 ..< 5)  // "de"
        }
        try exchange(&a, &b)
        for nb in [a, b] {
            #expect(nb.note(id)?.hasConflicts == true, "\(situation)")
            #expect(try nb.conflicts(of: id).map(\.kind) == [.body])
        }
        #expect(a.digest() == b.digest())
    }

    /// A resolve on one replica clears the mark on every replica it reaches; a replica that gets
    /// the old concurrent edits later (with the resolve, in any causal order) is not marked; a new
    /// concurrent edit the resolve did not see marks the note again.
    @Test func aResolveClearsTheMarkEverywhereAndForGood() throws {
        var (a, b, id, created) = try pairWithCreation(body: "milk, eggs")
        try a.replaceBody(id, with: "milk, butter")
        try b.replaceBody(id, with: "milk, cheese")
        try exchange(&a, &b)
        let resolve = try #require(try a.resolveConflicts(id))
        #expect(a.note(id)?.hasConflicts == false)
        #expect(try a.conflicts(of: id).isEmpty)
        try exchange(&a, &b)
        #expect(b.note(id)?.hasConflicts == false)
        #expect(a.digest() == b.digest())

        // A third replica gets everything, in orders that put the old edits and the resolve
        // every way causal delivery allows (and the resolve first: it waits).
        var everything = a.allChanges
        for seed in 0 ..< 20 as Range<UInt64> {
            var rng = SplitMix64(seed: seed)
            everything.shuffle(using: &rng)
            var c = makeNotebook(3)
            try c.apply(contentsOf: seed == 0 ? [resolve] + everything : everything)
            #expect(c.pendingCount == 0)
            #expect(c.note(id)?.hasConflicts == false)
            #expect(c.digest() == a.digest())
        }

        // c edits the same place without having seen the resolve (nor the merge): marked again.
        var c = makeNotebook(3, at: baseTime + 30)
        try c.apply(created)
        #expect(c.note(id)?.body == "milk, eggs")
        try c.replaceBody(id, with: "milk, jam")
        try a.apply(contentsOf: c.changes(since: a.versionVector))
        #expect(a.note(id)?.hasConflicts == true)
        let pairs = try a.conflicts(of: id).map { $0.sides.map(\.replica) }
        #expect(pairs.allSatisfy { $0.contains(replica(3)) }, "only the merge with c's new edit")
    }

    /// A resolve is recorded in the log and replicated like any change; resolving twice records
    /// nothing the second time.
    @Test func resolvingTwiceRecordsNothing() throws {
        var (a, b, id) = try pair(body: "x")
        try a.setColor(id, "red")
        try b.setColor(id, "blue")
        try exchange(&a, &b)
        let count = a.historyCount
        #expect(try a.resolveConflicts(id) != nil)
        #expect(try a.resolveConflicts(id) == nil)
        #expect(a.historyCount == count + 1)
        #expect(a.note(id)?.extras.isEmpty == true, "the reserved field is not an app field")
    }

    /// Inserts the log joined, seen only in part by a concurrent insert at the place where the part
    /// seen ends: the merge is found whichever way the changes arrive, joined or one by one.
    @Test func aJoinedInsertSeenInPartStillMeetsAConcurrentInsert() throws {
        var (a, b, id) = try pair(body: "")
        let first = try #require(try a.insertText(id, at: 0, "ab"))
        try b.apply(first)
        try a.insertText(id, at: 2, "cd")  // continues "ab": the log joins the two
        try b.insertText(id, at: 2, "Z")  // after "b", not having seen "cd"
        #expect(a.allChanges.filter { $0.replica == replica(1) }.count <= 2)
        var viaJoined = makeNotebook(5)
        try viaJoined.apply(contentsOf: a.allChanges + b.allChanges.filter { $0.replica == replica(2) })
        var viaB = b
        try viaB.apply(contentsOf: a.changes(since: b.versionVector))
        try a.apply(contentsOf: b.changes(since: a.versionVector))
        for nb in [a, viaB, viaJoined] {
            #expect(nb.note(id)?.hasConflicts == true)
            #expect(nb.digest() == a.digest())
        }
    }
}

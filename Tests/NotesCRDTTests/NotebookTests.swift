import NotesCRDT
import PropertyBased
import Testing

struct NotebookTests {
    // MARK: Notes and fields

    @Test func createNoteSetsEveryField() throws {
        var nb = makeNotebook(1)
        let (id, change) = nb.createNote(id: noteID(1), title: "Plan", body: "Buy milk", tags: [" Work ", "home", "  "])
        let note = try #require(nb.note(id))
        #expect(note.title == "Plan")
        #expect(note.body == "Buy milk")
        #expect(note.state == .active)
        #expect(note.createdAt == baseTime)
        #expect(note.tags == [" Work ", "home"])
        #expect(!note.pinned && !note.archived && note.color == nil)
        #expect(nb.tags.map(\.key) == ["home", "work"])
        #expect(change.replica == replica(1) && change.startSeq == 1)
        #expect(nb.versionVector == VersionVector([replica(1): change.endSeq]))
        #expect(nb.noteIDs == [id])
        #expect(nb.allNotes.map(\.id) == [id])
    }

    @Test func fieldEdits() throws {
        var nb = makeNotebook(1)
        let id = nb.createNote(id: noteID(1)).id
        try nb.setTitle(id, "T")
        try nb.setPinned(id, true)
        try nb.setArchived(id, true)
        try nb.setColor(id, "red")
        try nb.setTag(id, "Ideas", member: true)
        try nb.setExtra(id, "rating", .int(5))
        try nb.setTagField("ideas", .color, .string("blue"))
        var note = try #require(nb.note(id))
        #expect(note.title == "T" && note.pinned && note.archived && note.color == "red")
        #expect(note.tags == ["Ideas"])
        #expect(note.extras == ["rating": .int(5)])
        #expect(nb.tags.map(\.key) == ["ideas"])
        #expect(nb.tags.first?.name == "Ideas")
        #expect(nb.tags.first?.color == "blue")
        try nb.setColor(id, nil)
        try nb.setTag(id, "IDEAS", member: false)
        note = try #require(nb.note(id))
        #expect(note.color == nil)
        #expect(note.tags.isEmpty)
        try nb.setState(id, .trashed)
        #expect(nb.note(id)?.state == .trashed)
        #expect(nb.allNotes.count == 1)
        try nb.setState(id, .deleted)
        #expect(nb.allNotes.isEmpty)
        #expect(nb.noteCount == 1)
    }

    @Test func editsOfAnUnknownNoteThrowNotFound() {
        var nb = makeNotebook(1)
        let error = #expect(throws: CRDTError.self) { try nb.setTitle(noteID(5), "x") }
        #expect(error?.code == .notFound)
        #expect(throws: CRDTError.self) { try nb.setTag(noteID(5), "x", member: true) }
        #expect(throws: CRDTError.self) { try nb.replaceBody(noteID(5), with: "x") }
        #expect(nb.versionVector.isEmpty)
    }

    @Test func emptyTagNamesAreRejected() {
        var nb = makeNotebook(1)
        let id = nb.createNote(id: noteID(1)).id
        let error = #expect(throws: CRDTError.self) { try nb.setTag(id, "   ", member: true) }
        #expect(error?.code == .outOfBounds)
        #expect(Notebook.tagKey("  Work\n") == "work")
        #expect(Notebook.tagKey("ÉTÉ") == "été")
    }

    // MARK: Causal delivery

    @Test func aChangeBeforeItsDependencyWaitsThenApplies() throws {
        var author = makeNotebook(1)
        let (id, c1) = author.createNote(id: noteID(1), title: "a")
        let c2 = try #require(try author.insertText(id, at: 0, "hello"))
        var reader = makeNotebook(2)
        let empty = reader.digest()
        #expect(reader.apply(c2) == .pending)
        #expect(reader.pendingCount == 1)
        #expect(reader.pendingChanges == [c2])
        #expect(reader.note(id) == nil)
        #expect(reader.digest() == empty)
        // The same change again still waits, once.
        #expect(reader.apply(c2) == .pending)
        #expect(reader.pendingCount == 1)
        #expect(reader.apply(c1) == .applied(released: 1))
        #expect(reader.pendingCount == 0)
        #expect(reader.note(id)?.body == "hello")
        #expect(reader.digest() == author.digest())
        #expect(reader.versionVector == author.versionVector)
        // Duplicates are harmless.
        #expect(reader.apply(c1) == .duplicate)
        #expect(reader.apply(c2) == .duplicate)
        #expect(reader.digest() == author.digest())
    }

    @Test func aChangeWaitsForAnotherReplicasDependency() throws {
        var a = makeNotebook(1)
        let (id, created) = a.createNote(id: noteID(1), body: "ab")
        var b = makeNotebook(2)
        b.apply(created)
        let typed = try #require(try b.insertText(id, at: 1, "X"))
        #expect(typed.dependencies == VersionVector([replica(1): created.endSeq]))
        var c = makeNotebook(3)
        #expect(c.apply(typed) == .pending)
        #expect(c.pendingCount == 1)
        let result = c.apply(contentsOf: [created])
        #expect(result.applied == 2 && result.duplicates == 0 && result.pending == 0)
        #expect(c.note(id)?.body == "aXb")
        #expect(c.digest() == b.digest())
    }

    @Test func aChainOfWaitingChangesIsReleasedInOneGo() throws {
        var a = makeNotebook(1)
        let (id, created) = a.createNote(id: noteID(1))
        var titles: [Change] = []
        for i in 0 ..< 5 {
            a.setWallTime(baseTime + UInt64(i) * 1000)
            titles.append(try #require(try a.setTitle(id, "v\(i)")))
        }
        var b = makeNotebook(2)
        for change in titles.reversed() { #expect(b.apply(change) == .pending) }
        #expect(b.pendingCount == 5)
        #expect(b.note(id) == nil)
        #expect(b.apply(created) == .applied(released: 5))
        #expect(b.pendingCount == 0)
        #expect(b.note(id)?.title == "v4")
        #expect(b.digest() == a.digest())
        #expect(b.versionVector == a.versionVector)
    }

    @Test func eachWaitingChangeIsReleasedWhenTheOperationItWaitsForArrives() throws {
        // b types five words, c answers each one as it sees it: c's k-th change needs b's k-th.
        var a = makeNotebook(1)
        let (id, created) = a.createNote(id: noteID(1), body: "x")
        var b = makeNotebook(2)
        var c = makeNotebook(3)
        b.apply(created)
        c.apply(created)
        var typed: [Change] = []
        var answers: [Change] = []
        for i in 0 ..< 5 {
            b.setWallTime(baseTime + UInt64(i) * 1000)
            let word = try #require(try b.insertText(id, at: 0, "b\(i)"))
            typed.append(word)
            c.apply(word)
            c.setWallTime(baseTime + UInt64(i) * 1000 + 500)
            answers.append(try #require(try c.insertText(id, at: 0, "c\(i)")))
        }
        var reader = makeNotebook(4)
        reader.apply(created)
        // c's changes arrive first, newest first: each waits for its own word of b's (and for c's
        // change before it).
        for answer in answers.reversed() { #expect(reader.apply(answer) == .pending) }
        #expect(reader.pendingCount == 5)
        // b's words one at a time: each releases exactly the answer that waited for it.
        for (i, word) in typed.enumerated() {
            #expect(reader.apply(word) == .applied(released: 1))
            #expect(reader.pendingCount == 4 - i)
            #expect(reader.versionVector[replica(3)] == answers[i].endSeq)
        }
        #expect(reader.digest() == c.digest())
        #expect(reader.note(id)?.body == c.note(id)?.body)
    }

    // MARK: Malformed changes

    @Test func anInsertAfterAnUnknownOriginIsQuarantinedAndChangesNothing() throws {
        var nb = makeNotebook(1)
        let id = nb.createNote(id: noteID(1), title: "kept", body: "abc").id
        let digest = nb.digest()
        let version = nb.versionVector
        let bad = Change(replica: replica(2), startSeq: 1, timestamp: Timestamp(milliseconds: baseTime + 1), dependencies: version,
                         operations: [
                             .setNoteField(note: id, field: .title, value: .string("lost")),
                             .insertText(note: id, origin: OpID(replica: replica(7), seq: 3), text: InsertedText("x")),
                         ])
        let error = try #require(nb.apply(bad).quarantineReason)
        #expect(error.code == .unknownReference)
        #expect(nb.digest() == digest)
        #expect(nb.versionVector == version)
        #expect(nb.note(id)?.title == "kept")
        #expect(nb.pendingCount == 0)
        #expect(nb.quarantinedChanges == [Notebook.QuarantinedChange(change: bad, reason: error)])
        // An origin that exists, but in another note, is unknown too.
        let other = nb.createNote(id: noteID(2), body: "zz").id
        let originInOther = try #require(nb.body(of: other)).identity(at: 0)
        let crossNote = Change(replica: replica(2), startSeq: 1, timestamp: Timestamp(milliseconds: baseTime + 1),
                               dependencies: nb.versionVector,
                               operations: [.insertText(note: id, origin: originInOther, text: InsertedText("x"))])
        let digest2 = nb.digest()
        #expect(nb.apply(crossNote).quarantineReason?.code == .unknownReference)
        #expect(nb.digest() == digest2)
        #expect(nb.quarantinedCount == 2)
    }

    @Test func aDeleteOfUnknownCharactersIsQuarantined() throws {
        var nb = makeNotebook(1)
        let id = nb.createNote(id: noteID(1), body: "abc").id
        let digest = nb.digest()
        let bad = Change(replica: replica(2), startSeq: 1, timestamp: Timestamp(milliseconds: baseTime + 1), dependencies: nb.versionVector,
                         operations: [.deleteText(note: id, targets: [OpIDRange(replica: replica(1), seq: 4, count: 50)])])
        #expect(nb.apply(bad).quarantineReason?.code == .unknownReference)
        #expect(nb.digest() == digest)
        #expect(nb.quarantinedChanges.map(\.change) == [bad])
    }

    @Test func badlyShapedChangesAreRejectedAsMalformed() throws {
        var nb = makeNotebook(1)
        let id = nb.createNote(id: noteID(1), body: "abc").id
        let digest = nb.digest()
        let shapes: [Change] = [
            Change(replica: replica(2), startSeq: 1, timestamp: .zero, dependencies: VersionVector(), operations: []),
            Change(replica: replica(2), startSeq: 0, timestamp: .zero, dependencies: VersionVector(),
                   operations: [.setNoteField(note: id, field: .title, value: .null)]),
            Change(replica: replica(2), startSeq: 1, timestamp: .zero, dependencies: VersionVector(),
                   operations: [.insertText(note: id, origin: nil, text: [])]),
            Change(replica: replica(2), startSeq: 1, timestamp: .zero, dependencies: VersionVector(),
                   operations: [.deleteText(note: id, targets: [])]),
            Change(replica: replica(2), startSeq: 1, timestamp: .zero, dependencies: VersionVector(),
                   operations: [.deleteText(note: id, targets: [OpIDRange(replica: replica(1), seq: 4, count: 0)])]),
            Change(replica: replica(2), startSeq: .max, timestamp: .zero, dependencies: VersionVector(),
                   operations: [.setNoteField(note: id, field: .title, value: .null), .setNoteField(note: id, field: .title, value: .null)]),
        ]
        for change in shapes {
            guard case .rejected(let error) = nb.apply(change) else {
                Issue.record("\(change) was not rejected")
                continue
            }
            #expect(error.code == .malformedChange)
        }
        #expect(nb.digest() == digest)
        #expect(nb.pendingCount == 0)
        #expect(nb.quarantinedCount == 0)
    }

    // MARK: Last writer wins, through the notebook

    /// Two replicas that share one note.
    func pair(wallA: UInt64 = baseTime, wallB: UInt64 = baseTime) throws -> (Notebook, Notebook, NoteID) {
        var a = makeNotebook(1)
        let (id, created) = a.createNote(id: noteID(1), title: "original", body: "0123456789")
        var b = makeNotebook(2)
        b.apply(created)
        a.setWallTime(wallA)
        b.setWallTime(wallB)
        return (a, b, id)
    }

    func exchange(_ a: inout Notebook, _ b: inout Notebook) throws {
        let toB = a.changes(since: b.versionVector)
        let toA = b.changes(since: a.versionVector)
        a.apply(contentsOf: toA)
        b.apply(contentsOf: toB)
    }

    @Test func concurrentRenameAndPinBothSurvive() throws {
        var (a, b, id) = try pair()
        try a.setTitle(id, "renamed")
        try b.setPinned(id, true)
        try b.setTag(id, "urgent", member: true)
        try exchange(&a, &b)
        for nb in [a, b] {
            let note = try #require(nb.note(id))
            #expect(note.title == "renamed")
            #expect(note.pinned)
            #expect(note.tags == ["urgent"])
        }
        #expect(a.digest() == b.digest())
    }

    @Test(arguments: [(UInt64(5_000), UInt64(1_000)), (1_000, 5_000)] as [(UInt64, UInt64)])
    func concurrentRenamesResolveToTheLaterTimestamp(_ offsetA: UInt64, _ offsetB: UInt64) throws {
        var (a, b, id) = try pair(wallA: baseTime + offsetA, wallB: baseTime + offsetB)
        let ca = try #require(try a.setTitle(id, "from a"))
        let cb = try #require(try b.setTitle(id, "from b"))
        try exchange(&a, &b)
        let expected = ca.timestamp > cb.timestamp ? "from a" : "from b"
        #expect(expected == (offsetA > offsetB ? "from a" : "from b"))
        #expect(a.note(id)?.title == expected)
        #expect(b.note(id)?.title == expected)
        #expect(a.digest() == b.digest())
    }

    @Test func renamesWithTheSameTimestampResolveToTheGreaterReplica() throws {
        var (a, b, id) = try pair()
        let ca = try #require(try a.setTitle(id, "from a"))
        let cb = try #require(try b.setTitle(id, "from b"))
        try #require(ca.timestamp == cb.timestamp)
        try exchange(&a, &b)
        #expect(replica(2) > replica(1))
        #expect(a.note(id)?.title == "from b")
        #expect(b.note(id)?.title == "from b")
        #expect(a.digest() == b.digest())
    }

    @Test func aLocalWriteAfterSeeingARemoteOneWinsEvenWithASlowClock() throws {
        var (a, b, id) = try pair(wallA: baseTime + 50_000, wallB: baseTime)
        try a.setTitle(id, "first")
        try exchange(&a, &b)
        try b.setTitle(id, "second")  // b's wall clock is behind, but it saw a's write
        try exchange(&a, &b)
        #expect(a.note(id)?.title == "second")
        #expect(b.note(id)?.title == "second")
    }

    /// Issue 18, part 2: a deletes the note; b, not having seen the delete, edits it. The edit
    /// brings it back, to the trash, marked as restored by a concurrent edit (and as a merge to
    /// review), on both sides; the delete and the edits are all in the log.
    @Test func aNoteDeletedWhileEditedElsewhereComesBackToTheTrash() throws {
        var (a, b, id) = try pair(wallA: baseTime + 10, wallB: baseTime + 20)
        let delete = try #require(try a.setState(id, .deleted))
        #expect(a.note(id)?.state == .deleted && a.allNotes.isEmpty)
        let rename = try #require(try b.setTitle(id, "renamed later"))
        let append = try #require(try b.insertText(id, at: 10, " more"))
        try exchange(&a, &b)
        for nb in [a, b] {
            let note = try #require(nb.note(id))
            #expect(note.state == .trashed)
            #expect(note.restoredByConcurrentEdit)
            #expect(note.hasConflicts)
            #expect(note.title == "renamed later")
            #expect(note.body == "0123456789 more")
            #expect(nb.allNotes.map(\.id) == [id])
            let logged = Set(nb.allChanges.flatMap { change in (change.startSeq ... change.endSeq).map { OpID(replica: change.replica, seq: $0) } })
            for change in [delete, rename, append] { #expect(logged.contains(OpID(replica: change.replica, seq: change.endSeq))) }
            #expect(try nb.conflicts(of: id).map(\.kind) == [.deletedWhileEdited])
        }
        #expect(a.digest() == b.digest())

        // Deleting it again, now that every edit has been seen, deletes it for good.
        try #require(try a.setState(id, .deleted))
        try exchange(&a, &b)
        for nb in [a, b] {
            #expect(nb.note(id)?.state == .deleted)
            #expect(nb.note(id)?.restoredByConcurrentEdit == false)
            #expect(nb.allNotes.isEmpty)
        }
        #expect(a.digest() == b.digest())
    }

    /// The same in the other order of arrival, and with edits of every kind (a pin, a tag, a
    /// delete of characters): any edit the delete did not see brings the note back; a state write
    /// (trash) does not count as an edit.
    @Test(arguments: ["pin", "tag", "delete text", "trash"])
    func whichConcurrentWritesBringADeletedNoteBack(_ kind: String) throws {
        var (a, b, id) = try pair(wallA: baseTime + 30, wallB: baseTime + 20)
        switch kind {
        case "pin": try b.setPinned(id, true)
        case "tag": try b.setTag(id, "work", member: true)
        case "delete text": try b.deleteText(id, 0 ..< 3)
        default: try b.setState(id, .trashed)
        }
        try a.setState(id, .deleted)  // later by the clock: the delete wins the state field
        try b.apply(contentsOf: a.changes(since: b.versionVector))  // b gets the delete first this time
        try a.apply(contentsOf: b.changes(since: a.versionVector))
        let comesBack = kind != "trash"
        for nb in [a, b] {
            #expect(nb.note(id)?.state == (comesBack ? .trashed : .deleted))
            #expect(nb.note(id)?.restoredByConcurrentEdit == comesBack)
        }
        #expect(a.digest() == b.digest())
    }

    /// A deleted note can be restored while its tombstone exists (always): its body and fields are
    /// all there. Restoring wins over the delete even when the delete came from a clock far ahead.
    @Test func aDeletedNoteCanBeRestored() throws {
        var future = makeNotebook(1, at: baseTime + tenYears)
        let (id, created) = future.createNote(id: noteID(1), title: "kept", body: "all of it")
        try future.setState(id, .deleted)
        var local = makeNotebook(2)
        try local.apply(contentsOf: [created] + future.changes(since: VersionVector()))
        #expect(local.note(id)?.state == .deleted)
        let restore = try #require(try local.setState(id, .active))
        #expect(restore.timestamp > future.fieldTimestamp(id, .state)!, "the restore jumped past the delete")
        #expect(local.note(id)?.state == .active)
        #expect(local.note(id)?.body == "all of it")
        #expect(local.clock.last.milliseconds <= baseTime + HybridLogicalClock.defaultMaxForwardDrift + 1, "the clock stayed near the wall clock")
        try future.apply(restore)
        #expect(future.note(id)?.state == .active)
        #expect(future.digest() == local.digest())
    }

    // MARK: Clocks far ahead (issue 18, part 3)

    /// A replica ten years fast writes the title; every replica that sees it and then writes the
    /// title wins, in both directions of the exchange, without its clock going into the future.
    @Test func aTitleWrittenAfterSeeingOneFromTenYearsAheadWins() throws {
        var future = makeNotebook(1, at: baseTime + tenYears)
        let id = future.createNote(id: noteID(1), title: "from 2033").id
        try future.setTitle(id, "pinned until 2033?")
        var a = makeNotebook(2)
        var b = makeNotebook(3, at: baseTime + 5)
        try a.apply(contentsOf: future.allChanges)
        try b.apply(contentsOf: future.allChanges)
        let mine = try #require(try a.setTitle(id, "later, from a"))
        #expect(a.note(id)?.title == "later, from a")
        #expect(a.clock.last.milliseconds <= baseTime + HybridLogicalClock.defaultMaxForwardDrift + 1)
        // A write of another field goes on at the wall clock: only the write that had to jump did.
        let pin = try #require(try a.setPinned(id, true))
        #expect(pin.timestamp.milliseconds <= baseTime + HybridLogicalClock.defaultMaxForwardDrift + 1)
        #expect(pin.timestamp < mine.timestamp)
        try b.apply(contentsOf: a.changes(since: b.versionVector))
        try future.apply(contentsOf: a.changes(since: future.versionVector))
        #expect(b.note(id)?.title == "later, from a")
        #expect(future.note(id)?.title == "later, from a")
        // b, having seen a's write, writes again: it wins too.
        try b.setTitle(id, "later still, from b")
        try a.apply(contentsOf: b.changes(since: a.versionVector))
        try future.apply(contentsOf: b.changes(since: future.versionVector))
        for nb in [a, b, future] { #expect(nb.note(id)?.title == "later still, from b") }
        #expect(Set([a, b, future].map { $0.digest() }).count == 1)
    }

    /// Tag entity fields follow the same rule.
    @Test func aTagColorWrittenAfterSeeingOneFromTheFutureWins() throws {
        var future = makeNotebook(1, at: baseTime + tenYears)
        future.createNote(id: noteID(1), tags: ["Work"])
        try future.setTagField("work", .color, .string("red"))
        var local = makeNotebook(2)
        try local.apply(contentsOf: future.allChanges)
        try local.setTagField("work", .color, .string("blue"))
        try future.apply(contentsOf: local.changes(since: future.versionVector))
        for nb in [local, future] { #expect(nb.tags.first?.color == "blue") }
    }

    /// The fast replica's own clock comes back to the wall clock once that is corrected, and its
    /// writes still beat its own earlier ones from the future.
    @Test func aClockThatWasAheadComesBackWhenCorrected() throws {
        var device = makeNotebook(1, at: baseTime + tenYears)
        let (id, _) = device.createNote(id: noteID(1), title: "wrong clock")
        device.setWallTime(baseTime + 1000)  // corrected
        let fixed = try #require(try device.setTitle(id, "right clock"))
        #expect(device.note(id)?.title == "right clock")
        let pin = try #require(try device.setPinned(id, true))
        #expect(pin.timestamp.milliseconds <= baseTime + 1000 + HybridLogicalClock.defaultMaxForwardDrift + 1,
                "ticks from the wall clock again (at most the drift bound ahead)")
        #expect(fixed.timestamp.milliseconds > baseTime + tenYears - 1, "the title write jumped past the old one")
        let replay = try replay(device.allChanges)
        #expect(replay.digest() == device.digest())
    }

    /// A body edit next to text from a clock far ahead lands where it was typed, and the clock
    /// stays at the wall clock.
    @Test func anInsertNextToFarFutureTextDoesNotDragTheClock() throws {
        var (_, local, id) = try farFutureNote()
        try local.insertText(id, at: 1, "n")
        try local.insertText(id, at: 2, "e")
        #expect(local.note(id)?.body == "onez")
        #expect(local.clock.last.milliseconds <= baseTime + HybridLogicalClock.defaultMaxForwardDrift + 1)
        try local.editBody(id) { body in try body.insert("!", at: body.count) }
        #expect(local.note(id)?.body == "onez!")
        #expect(local.clock.last.milliseconds <= baseTime + HybridLogicalClock.defaultMaxForwardDrift + 1)
    }

    // MARK: Edits that change nothing

    @Test func writesThatChangeNothingRecordNothing() throws {
        var a = makeNotebook(1)
        let (id, _) = a.createNote(id: noteID(1), title: "same", tags: ["work"])
        let before = a.versionVector
        #expect(try a.setTitle(id, "same") == nil)
        #expect(try a.setPinned(id, false) == nil, "an unset flag reads false")
        #expect(try a.setArchived(id, false) == nil)
        #expect(try a.setColor(id, nil) == nil)
        #expect(try a.setTag(id, "home", member: false) == nil, "not in the tag")
        #expect(try a.setTag(id, "WORK", member: true) == nil, "already in it")
        #expect(try a.setState(id, .active) == nil, "restoring an active note")
        #expect(try a.setExtra(id, "x", .null) == nil)
        #expect(try a.resolveConflicts(id) == nil, "nothing to resolve")
        #expect(a.versionVector == before)
        #expect(try a.setPinned(id, true) != nil)
        #expect(try a.setPinned(id, true) == nil, "pinning twice")
        try a.setState(id, .deleted)
        #expect(try a.setState(id, .deleted) == nil, "deleting twice")
        #expect(throws: CRDTError.self) { try a.setExtra(id, "crdt-sync.resolved", .bool(true)) }
    }

    @Test func concurrentTagCreationAgreesOnOneName() throws {
        var (a, b, id) = try pair(wallA: baseTime + 10, wallB: baseTime + 20)
        try a.setTag(id, "Work", member: true)
        try b.setTag(id, "WORK", member: true)
        try exchange(&a, &b)
        #expect(a.tags.map(\.key) == ["work"])
        #expect(a.tags.first?.name == "WORK")  // b's write is later
        #expect(a.note(id)?.tags == ["WORK"])
        #expect(a.digest() == b.digest())
    }

    // MARK: Concurrent text

    /// Two replicas type a word, one scalar at a time, at the same offset; neither word is interleaved
    /// with the other, whatever the clocks say.
    @Test(arguments: [
        (UInt64(0), UInt64(0), UInt64(0)), (10, 0, 1), (0, 10, 1), (0, 0, 1), (100, 0, 0), (0, 3, 2),
    ] as [(UInt64, UInt64, UInt64)])
    func concurrentTypingAtOnePlaceDoesNotInterleave(_ offsetA: UInt64, _ offsetB: UInt64, _ step: UInt64) throws {
        var (a, b, id) = try pair()
        for (i, (x, y)) in zip("hello".unicodeScalars, "world".unicodeScalars).enumerated() {
            a.setWallTime(baseTime + offsetA + UInt64(i) * step)
            b.setWallTime(baseTime + offsetB + UInt64(i) * step)
            try a.insertText(id, at: 5 + i, String(x))
            try b.insertText(id, at: 5 + i, String(y))
        }
        #expect(a.note(id)?.body == "01234hello56789")
        #expect(b.note(id)?.body == "01234world56789")
        try exchange(&a, &b)
        let merged = try #require(a.note(id)?.body)
        #expect(merged == b.note(id)?.body)
        #expect(merged == "01234helloworld56789" || merged == "01234worldhello56789")
        #expect(a.digest() == b.digest())
    }

    @Test func concurrentInsertAndDeleteOfTheSameRegion() throws {
        var (a, b, id) = try pair()
        try a.deleteText(id, 2 ..< 8)  // 0189
        try b.insertText(id, at: 5, "XY")  // 01234XY56789
        try exchange(&a, &b)
        #expect(a.note(id)?.body == "01XY89")
        #expect(b.note(id)?.body == "01XY89")
        #expect(a.body(of: id)!.invariantViolation() == nil)
    }

    @Test func emojiCombiningMarksAndCJKSurviveAMerge() throws {
        var (a, b, id) = try pair()
        try a.insertText(id, at: 3, "👩\u{200D}💻 e\u{301}")
        try b.insertText(id, at: 7, "日本語\u{1F3FD}")
        try b.deleteText(id, 0 ..< 1)
        try exchange(&a, &b)
        let expected = scalars("12👩\u{200D}💻 e\u{301}3456日本語\u{1F3FD}789")
        #expect(a.scalars(of: id) == expected)
        #expect(b.scalars(of: id) == expected)
        // Through the codec too.
        let copy = try replay(ChangeCodec.decode(ChangeCodec.encode(a.allChanges)))
        #expect(copy.scalars(of: id) == expected)
    }

    /// A local insert lands where the user typed it, even when the text around it came from a replica
    /// whose clock is far ahead (beyond the drift bound, so our clock does not follow it).
    @Test func aLocalInsertLandsWhereTypedNextToFarFutureText() throws {
        var (future, local, id) = try farFutureNote()
        #expect(future.note(id)?.body == "oz")
        #expect(local.note(id)?.body == "oz")
        try local.insertText(id, at: 1, "n")
        #expect(local.note(id)?.body == "onz", "the user typed n between o and z")
        // And both sides agree whatever happened.
        future.apply(contentsOf: local.changes(since: future.versionVector))
        #expect(future.digest() == local.digest())
    }

    // MARK: Exchange

    @Test func changesSinceIsExactlyWhatTheOtherSideLacks() throws {
        var (a, b, id) = try pair()
        let typed = try #require(try a.insertText(id, at: 0, "abc"))
        b.apply(typed)  // b has a's insert, but not what follows
        let pinned = try #require(try a.setPinned(id, true))
        try b.insertText(id, at: 13, "xyz")  // at the end of "abc0123456789"
        #expect(a.changes(since: a.versionVector).isEmpty)
        let toB = a.changes(since: b.versionVector)
        #expect(toB.map(\.idRange) == [pinned.idRange])
        #expect(b.versionVector.missing(from: a.versionVector) == [pinned.idRange])
        b.apply(contentsOf: toB)
        #expect(a.versionVector.isCovered(by: b.versionVector))
        a.apply(contentsOf: b.changes(since: a.versionVector))
        #expect(a.versionVector == b.versionVector)
        #expect(a.digest() == b.digest())
        #expect(a.note(id)?.body == "abc0123456789xyz")
        // A vector that ends in the middle of an insert cuts the insert there.
        let cut = VersionVector([replica(1): typed.startSeq])  // the first of "abc" only
        let sent = a.changes(since: cut)
        let first = try #require(sent.first { $0.replica == replica(1) })
        #expect(first.startSeq == typed.startSeq + 1)
        #expect(first.operations.first == .insertText(note: id, origin: OpID(replica: replica(1), seq: typed.startSeq), text: InsertedText("bc")))
        #expect(sent.allSatisfy { $0.replica != replica(1) || $0.startSeq > typed.startSeq })
    }

    @Test func mergeBringsOverEverythingIncludingWaitingChanges() throws {
        var (a, b, id) = try pair()
        try a.insertText(id, at: 0, "A")
        try b.insertText(id, at: 0, "B")
        // c holds a change that waits.
        var source = makeNotebook(5)
        source.apply(contentsOf: a.allChanges)
        let waiting = try #require(try source.setTitle(id, "from 5"))
        b.apply(waiting)
        #expect(b.pendingCount == 1)
        let merged = try b.merging(a)
        #expect(merged.pendingCount == 0)
        #expect(merged.note(id)?.title == "from 5")
        #expect(try a.merging(b).digest() == merged.digest())
        #expect(try merged.merging(merged).digest() == merged.digest())
    }

    // MARK: Snapshots

    @Test func snapshotRoundTrip() throws {
        var sim = Simulation(seed: 2024, replicaCount: 3)
        sim.syncWithChangesAsMade = true
        try sim.run(steps: 150)
        for original in sim.replicas {
            let restored = try Notebook(snapshot: original.snapshot(), wallClock: original.wallClock)
            #expect(restored.replicaID == original.replicaID)
            #expect(restored.digest() == original.digest())
            #expect(restored.versionVector == original.versionVector)
            #expect(restored.bodies == original.bodies)
            #expect(restored.pendingCount == original.pendingCount)
            #expect(restored.clock == original.clock)
            #expect(restored.allNotes == original.allNotes)
            // The restored replica goes on exactly as the original would.
            var x = original
            var y = restored
            guard let id = x.noteIDs.first else { continue }
            let cx = try x.insertText(id, at: 0, "more")
            let cy = try y.insertText(id, at: 0, "more")
            #expect(cx == cy)
            #expect(x.digest() == y.digest())
        }
    }

    @Test func damagedSnapshotsAreRejected() throws {
        var nb = makeNotebook(1)
        let id = nb.createNote(id: noteID(1), title: "t", body: "hello").id
        try nb.insertText(id, at: 5, " world")
        let bytes = nb.snapshot()
        for n in stride(from: 0, to: bytes.count, by: 1) {
            #expect(throws: CRDTError.self, "prefix \(n)") { try Notebook(snapshot: Array(bytes.prefix(n))) }
        }
        var wrongMagic = bytes
        wrongMagic[0] ^= 0xFF
        #expect(throws: CRDTError.self) { try Notebook(snapshot: wrongMagic) }
        var wrongVersion = bytes
        wrongVersion[8] = 99
        #expect(throws: CRDTError.self) { try Notebook(snapshot: wrongVersion) }
        #expect(throws: CRDTError.self) { try Notebook(snapshot: bytes + [0]) }
    }

    // MARK: Splices

    @Test(arguments: [
        ("", "", 0, 0, ""),
        ("abc", "abc", 3, 0, ""),
        ("", "abc", 0, 0, "abc"),
        ("abc", "", 0, 3, ""),
        ("hello world", "hello brave world", 6, 0, "brave "),
        ("hello brave world", "hello world", 6, 6, ""),
        ("abcdef", "abXYef", 2, 2, "XY"),
        ("aaa", "aaaa", 3, 0, "a"),
        ("aaaa", "aa", 2, 2, ""),
        ("e\u{301}", "e\u{300}", 1, 1, "\u{300}"),
    ] as [(String, String, Int, Int, String)])
    func minimalSplice(_ old: String, _ new: String, _ offset: Int, _ deleteCount: Int, _ insert: String) {
        let splice = TextSplice.minimal(from: scalars(old), to: scalars(new))
        #expect(splice.offset == offset)
        #expect(splice.deleteCount == deleteCount)
        #expect(splice.insert == scalars(insert))
    }

    @Test func minimalSpliceTurnsOldIntoNewAndKeepsTheLongestPrefixAndSuffix() async {
        let text = Gen.int(in: 0 ... 3).map { "ab😀\u{301}".unicodeScalars.map { $0 }[$0] }.array(of: 0 ... 12)
        await propertyCheck(count: 300, input: text, text) { old, new in
            let s = TextSplice.minimal(from: old, to: new)
            var result = old
            result.replaceSubrange(s.offset ..< s.offset + s.deleteCount, with: s.insert)
            #expect(result == new)
            let prefix = zip(old, new).prefix { $0 == $1 }.count
            #expect(s.offset == prefix)
            // The common suffix cannot be extended either.
            if s.deleteCount > 0, !s.insert.isEmpty {
                #expect(old[s.offset + s.deleteCount - 1] != new[s.offset + s.insert.count - 1])
            }
            #expect(s.offset + s.deleteCount <= old.count)
        }
    }

    @Test func replaceBodyKeepsAConcurrentEditElsewhere() throws {
        var (a, b, id) = try pair()
        try a.replaceBody(id, with: "01234567")  // drops "89"
        try b.insertText(id, at: 2, "ab")
        try exchange(&a, &b)
        #expect(a.note(id)?.body == "01ab234567")
        #expect(b.note(id)?.body == "01ab234567")
    }
}

/// Reproductions of bugs found by the random scripts, pinned.
struct NotebookRegressionTests {
    /// A delete whose range covers characters the receiver has and characters inserted earlier in
    /// the same change (what a coalesced log entry, cut by changes(since:), looks like after
    /// "type, then select back over older text and delete") must apply.
    @Test func aDeleteSpanningOldTextAndTextInsertedEarlierInTheSameChangeApplies() throws {
        var a = makeNotebook(1)
        let (id, created) = a.createNote(id: noteID(1), body: "ab")
        var b = makeNotebook(2)
        b.apply(created)
        try a.insertText(id, at: 2, "c")  // "abc": continues the run
        try a.deleteText(id, 1 ..< 3)  // deletes "bc": one range, A@5+2
        #expect(a.note(id)?.body == "a")
        let toB = a.changes(since: b.versionVector)
        #expect(b.apply(contentsOf: toB).quarantined == 0)
        #expect(b.note(id)?.body == "a")
        #expect(b.digest() == a.digest())
        #expect(throws: Never.self) { try b.merge(a) }
        #expect(b.versionVector == a.versionVector)
    }

    /// Same root cause, through the pending set: the change waits, is released when its dependency
    /// arrives, fails validation there and is silently dropped, so the replica never catches up.
    @Test func aReleasedWaitingChangeIsAppliedNotDropped() throws {
        var a = makeNotebook(1)
        let (id, created) = a.createNote(id: noteID(1), body: "ab")
        try a.insertText(id, at: 2, "c")
        try a.deleteText(id, 1 ..< 3)
        let rest = a.changes(since: VersionVector([replica(1): created.endSeq]))
        var b = makeNotebook(2)
        for change in rest { #expect(b.apply(change) == .pending) }
        #expect(b.apply(created) == .applied(released: rest.count))
        #expect(b.pendingCount == 0)
        #expect(b.versionVector == a.versionVector)
        #expect(b.note(id)?.body == "a")
    }

    /// Same root cause, through a snapshot: the replica's own log holds such an entry (coalesced
    /// after a remote change broke the previous one), and the snapshot cannot be read back.
    @Test func aSnapshotWithADeleteSpanningTwoLogEntriesRestores() throws {
        var a = makeNotebook(1)
        let id = a.createNote(id: noteID(1), body: "ab").id
        var other = makeNotebook(2, at: baseTime - 1_000)  // behind, so a's clock is not raised
        a.apply(other.createNote(id: noteID(2), title: "elsewhere").change)
        try a.insertText(id, at: 2, "c")
        try a.deleteText(id, 1 ..< 3)
        #expect(a.note(id)?.body == "a")
        let restored: Notebook?
        do { restored = try Notebook(snapshot: a.snapshot(), wallClock: a.wallClock) } catch {
            Issue.record("the snapshot of a healthy replica cannot be read back: \(error)")
            restored = nil
        }
        #expect(restored?.digest() == a.digest())
        #expect(restored?.versionVector == a.versionVector)
    }

    /// The same bug reached through a random script (a replica types, then deletes back over text
    /// another replica already has; that replica then syncs from it through changes(since:)):
    /// `Simulation(seed: 92, replicaCount: 2)`, 150 steps.
    @Test func pinnedScriptSeed92() throws {
        var sim = Simulation(seed: 92, replicaCount: 2)
        #expect(throws: Never.self) { try sim.run(steps: 150) }
        #expect(throws: Never.self) { try sim.syncAll() }
        let reference = try replay(sim.made)
        for nb in sim.replicas { #expect(nb.digest() == reference.digest()) }
    }
}

/// A note with many tags: its registers are found by binary search past the first few, so every
/// write, in any order, must land on its own register and read back, through a snapshot too.
struct ManyTagsTests {
    @Test func manyTagsWrittenInAnyOrderReadBack() throws {
        var rng = SplitMix64(seed: 2026)
        var notebook = Notebook(replicaID: ReplicaID.random(using: &rng), wallClock: FixedWallClock(1_700_000_000_000))
        let id = notebook.createNote(title: "many", body: "b").id
        var names = (0 ..< 600).map { "tag \($0 * 7919 % 600)" }
        names.shuffle(using: &rng)
        var expected: Set<String> = []
        for (i, name) in names.enumerated() {
            _ = try notebook.setTag(id, name, member: true)
            expected.insert(name)
            if i % 3 == 0, let drop = expected.randomElement(using: &rng) {
                _ = try notebook.setTag(id, drop, member: false)
                expected.remove(drop)
            }
            if i % 50 == 0 { _ = try notebook.setTitle(id, "many \(i)") }
        }
        let tags = try #require(notebook.note(id)?.tags)
        #expect(Set(tags) == expected && tags.count == expected.count)
        #expect(notebook.note(id)?.title == "many 550")
        let reopened = try Notebook(snapshot: notebook.snapshot(), wallClock: FixedWallClock(1_700_000_000_000))
        #expect(Set(try #require(reopened.note(id)?.tags)) == expected)
        // Another replica that takes the changes in one batch ends the same.
        var other = Notebook(replicaID: ReplicaID.random(using: &rng), wallClock: FixedWallClock(1_700_000_000_000))
        for change in notebook.changes(since: VersionVector()) { _ = other.apply(change) }
        #expect(other.digest() == notebook.digest())
    }
}

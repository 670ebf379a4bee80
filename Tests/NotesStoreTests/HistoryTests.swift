import Foundation
import NotesCRDT
@testable import NotesStore
import Testing

/// A note's versions, the note at a version or a time, restoring one, undo, and device names
/// (NoteStore+History.swift), across replicas that sync.
struct HistoryTests {
    static let start: UInt64 = 1_800_000_000_000

    /// Both stores get what the other has.
    func exchange(_ a: NoteStore, _ b: NoteStore) throws {
        try b.apply(try a.changes(since: try b.versionVector))
        try a.apply(try b.changes(since: try a.versionVector))
    }

    @Test func versionsFromBothDevicesHaveTheSameLabelsAndContentsOnEach() throws {
        let clock = SettableClock(HistoryTests.start)
        let a = try NoteStore.openInMemory(options: StoreOptions(wallClock: clock))
        let b = try NoteStore.openInMemory(options: StoreOptions(wallClock: clock))
        let id = try a.createNote(title: "Groceries", body: "milk")
        try exchange(a, b)
        clock.set(HistoryTests.start + 1000)
        try b.appendText(id, " eggs")
        try a.setTitle(id, "Shopping")  // concurrent with b's append
        try exchange(a, b)

        let onA = try a.versions(of: id)
        let onB = try b.versions(of: id)
        #expect(onA.count == 3)
        #expect(Set(onA.map(\.label)) == Set(onB.map(\.label)))
        #expect(Set(onA.map(\.replica)) == [a.replicaID, b.replicaID])
        for version in onA {
            let point = try b.resolveVersion(version.label)
            #expect(try a.note(id, at: point) == b.note(id, at: point))
        }
        // Each version is the note as its author had it: b appended without having seen the new title.
        let append = try #require(onA.first { $0.replica == b.replicaID })
        #expect(append.edits == [.inserted(count: 5, pieces: [" eggs"])])
        let atAppend = try #require(try a.note(id, at: a.resolveVersion(append.label)))
        #expect(atAppend.title == "Groceries" && atAppend.body == "milk eggs")
        let retitle = try #require(onB.first { $0.edits.contains(.field(.title, from: .string("Groceries"), to: .string("Shopping"))) })
        #expect(try b.note(id, at: b.resolveVersion(retitle.label))?.body == "milk")
        #expect(onA.first?.edits.first == .created)
    }

    @Test func theNoteAtATimeHasEveryChangeStampedUpToThen() throws {
        let clock = SettableClock(HistoryTests.start)
        let store = try NoteStore.openInMemory(options: StoreOptions(wallClock: clock))
        let id = try store.createNote(title: "v1", body: "first")
        clock.set(HistoryTests.start + 60_000)
        try store.setTitle(id, "v2")
        clock.set(HistoryTests.start + 120_000)
        try store.replaceBody(id, with: "second")

        #expect(try store.note(id, at: .time(milliseconds: HistoryTests.start - 1)) == nil)
        let first = try #require(try store.note(id, at: .time(milliseconds: HistoryTests.start + 59_999)))
        #expect(first.title == "v1" && first.body == "first")
        let middle = try #require(try store.note(id, at: .time(milliseconds: HistoryTests.start + 60_000)))
        #expect(middle.title == "v2" && middle.body == "first")
        #expect(try store.note(id, at: .time(milliseconds: HistoryTests.start + 200_000))?.body == "second")
        #expect(try store.note(id, at: .time(milliseconds: (1 << 48) - 1))?.body == "second")  // the last time a timestamp holds
    }

    @Test func anAppendRightAfterTheCreationIsItsOwnVersionAtItsOwnTime() throws {
        let clock = SettableClock(HistoryTests.start)
        let store = try NoteStore.openInMemory(options: StoreOptions(wallClock: clock))
        let id = try store.createNote(title: "W3", body: "hello")
        clock.set(HistoryTests.start + 2000)
        try store.appendText(id, " world")  // continues the creation's text: the log joins the two

        let versions = try store.versions(of: id)
        #expect(versions.count == 2)
        #expect(versions.map(\.timestamp.milliseconds) == [HistoryTests.start, HistoryTests.start + 2000])
        #expect(versions.last?.edits == [.inserted(count: 6, pieces: [" world"])])
        #expect(try store.note(id, at: .time(milliseconds: HistoryTests.start + 1000))?.body == "hello")
        #expect(try store.note(id, at: .time(milliseconds: HistoryTests.start + 2000))?.body == "hello world")
        // An undo is a version of its own, at its time.
        clock.set(HistoryTests.start + 4000)
        try store.undo()
        clock.set(HistoryTests.start + 6000)
        try store.appendText(id, "!")
        #expect(try store.versions(of: id).map(\.timestamp.milliseconds).suffix(2) == [HistoryTests.start + 4000, HistoryTests.start + 6000])
        #expect(try store.note(id, at: .time(milliseconds: HistoryTests.start + 5000))?.body == "hello")
    }

    @Test func aSeqInsideAnEditStandsForTheWholeEdit() throws {
        let clock = SettableClock(HistoryTests.start)
        let a = try NoteStore.openInMemory(options: StoreOptions(wallClock: clock))
        let b = try NoteStore.openInMemory(options: StoreOptions(wallClock: clock))
        let id = try a.createNote(title: "Groceries", body: "milk")
        try a.appendText(id, ", eggs")  // joined in the log with the creation
        let versions = try a.versions(of: id)
        #expect(versions.count == 2)
        let created = versions[0].seq, appended = versions[1].seq
        for seq in 1 ... appended {
            let note = try #require(try a.note(id, at: .operation(a.replicaID, seq: seq)))
            #expect(note.title == "Groceries", "seq \(seq)")
            #expect(note.body == (seq <= created ? "milk" : "milk, eggs"), "seq \(seq)")
        }
        #expect(try a.restore(id, to: .operation(a.replicaID, seq: created + 2)) == false)
        try a.restore(id, to: .operation(a.replicaID, seq: created - 1))
        #expect(try a.note(id)?.body == "milk")

        // Another device's edit: its log entry, whole.
        clock.set(HistoryTests.start + 1000)
        let other = try b.createNote(title: "Plan", body: "abc")
        clock.set(HistoryTests.start + 2000)
        try b.setTitle(other, "Plan B")
        try exchange(a, b)
        let made = try #require(try b.versions(of: other).first).seq
        for seq in 1 ... made {
            let note = try #require(try a.note(other, at: .operation(b.replicaID, seq: seq)))
            #expect(note.title == "Plan" && note.body == "abc", "seq \(seq)")
        }
    }

    @Test func restoringAVersionMakesNewOperationsThatSync() throws {
        let a = try NoteStore.openInMemory()
        let b = try NoteStore.openInMemory()
        let id = try a.createNote(title: "Plan", body: "one two three", tags: ["work"])
        let created = try #require(try a.versions(of: id).last)
        try a.setTitle(id, "Plan B")
        try a.replaceBody(id, with: "one 2 three four")
        try a.setTag(id, "work", member: false)
        try a.setPinned(id, true)
        try exchange(a, b)
        let before = try a.versionVector[a.replicaID]
        let labels = try a.versions(of: id).map(\.label)

        #expect(try a.restore(id, to: a.resolveVersion(created.label)))
        let restored = try #require(try a.note(id))
        #expect(restored.title == "Plan" && restored.body == "one two three" && restored.tags == ["work"] && !restored.pinned)
        #expect(try a.versionVector[a.replicaID] > before)
        // Restoring what the note already reads changes nothing.
        #expect(try !a.restore(id, to: a.resolveVersion(created.label)))
        try exchange(a, b)
        let there = try #require(try b.note(id))
        #expect(there.title == "Plan" && there.body == "one two three" && there.tags == ["work"] && !there.pinned)
        #expect(try b.digest() == a.digest())
        // The versions in between are still there, the restore after them.
        let after = try a.versions(of: id).map(\.label)
        #expect(Array(after.prefix(labels.count)) == labels && after.count > labels.count)
    }

    @Test func aBadVersionOrAMomentBeforeTheNoteChangesNothing() throws {
        let clock = SettableClock(HistoryTests.start)
        let store = try NoteStore.openInMemory(options: StoreOptions(wallClock: clock))
        let id = try store.createNote(title: "x", body: "y")
        let digest = try store.digest()
        #expect(throws: StoreError.self) { try store.resolveVersion("not-a-version") }
        #expect(throws: StoreError.self) { try store.resolveVersion("ffffffff-1") }
        #expect(throws: StoreError.self) { try store.note(id, at: .operation(store.replicaID, seq: 999)) }
        #expect(throws: StoreError.self) { try store.restore(id, to: .time(milliseconds: HistoryTests.start - 1)) }
        #expect(try store.digest() == digest)
    }

    @Test func undoIsAStackOfThisDevicesEdits() throws {
        let store = try NoteStore.openInMemory()
        let id = try store.createNote(title: "Title", body: "hello")
        try store.setTitle(id, "Changed")
        try store.appendText(id, " world")
        try store.setPinned(id, true)

        #expect(try store.undo()?.notes == [id])
        #expect(try store.note(id)?.pinned == false)
        try store.undo()
        #expect(try store.note(id)?.body == "hello")
        try store.undo()
        #expect(try store.note(id)?.title == "Title")
        try store.undo()
        #expect(try store.note(id) == nil)
        #expect(try store.isDeleted(id))
        #expect(try store.undo() == nil)
    }

    @Test func undoOfOneNoteSkipsEditsOfOthers() throws {
        let store = try NoteStore.openInMemory()
        let first = try store.createNote(title: "first", body: "")
        let second = try store.createNote(title: "second", body: "")
        try store.setTitle(first, "first, renamed")
        try store.setTitle(second, "second, renamed")
        #expect(try store.undo(first)?.notes == [first])
        #expect(try store.note(first)?.title == "first")
        #expect(try store.note(second)?.title == "second, renamed")
    }

    @Test func undoKeepsConcurrentEditsFromOtherDevices() throws {
        let a = try NoteStore.openInMemory()
        let b = try NoteStore.openInMemory()
        let id = try a.createNote(title: "T", body: "hello world")
        try exchange(a, b)
        try a.appendText(id, "!!!")
        try b.insertText(id, at: 6, "big ")
        try exchange(a, b)
        #expect(try a.note(id)?.body == "hello big world!!!")

        #expect(try a.undo()?.changed == true)
        #expect(try a.note(id)?.body == "hello big world")
        try exchange(a, b)
        #expect(try b.note(id)?.body == "hello big world")

        // A title that another device wrote after ours stays.
        try a.setTitle(id, "mine")
        try exchange(a, b)
        try b.setTitle(id, "theirs")
        try exchange(a, b)
        #expect(try a.undo()?.changed == false)
        #expect(try a.note(id)?.title == "theirs")
    }

    @Test func insertedAndDeletedTextIsSummarizedInDocumentOrder() throws {
        let a = try NoteStore.openInMemory()
        let b = try NoteStore.openInMemory()
        let id = try a.createNote(title: "T", body: "aaa bbb ccc")
        try exchange(a, b)
        try b.insertText(id, at: 4, "XX")
        try a.deleteText(id, at: 0, count: 8)
        try exchange(a, b)
        try a.undo()  // inserts "bbb " after XX, then "aaa " before it
        #expect(try a.note(id)?.body == "aaa XXbbb ccc")
        #expect(try a.versions(of: id).last?.edits == [.inserted(count: 8, pieces: ["aaa ", "bbb "])])

        let body = "one two three four"
        try a.replaceBody(id, with: body)
        try a.applyEditedText(id, original: NoteText(title: "T", body: body), edited: NoteText(title: "T", body: "ONE two three FOUR"))
        #expect(try a.versions(of: id).last?.edits == [.inserted(count: 7, pieces: ["ONE", "FOUR"]), .deleted(count: 7, pieces: ["one", "four"])])
    }

    @Test func undoOfADeleteInsertsTheTextAgainWhereItWas() throws {
        let a = try NoteStore.openInMemory()
        let b = try NoteStore.openInMemory()
        let id = try a.createNote(title: "T", body: "abcdef")
        try exchange(a, b)
        try a.deleteText(id, at: 2, count: 2)
        try b.insertText(id, at: 0, "X")
        try b.appendText(id, "Y")
        try exchange(a, b)
        #expect(try a.note(id)?.body == "XabefY")
        try a.undo()
        #expect(try a.note(id)?.body == "XabcdefY")
        // A replace (delete and insert in one edit) is reverted whole.
        try a.replaceBody(id, with: "Xab--efY")
        try a.undo()
        #expect(try a.note(id)?.body == "XabcdefY")
    }

    @Test(arguments: StoreKind.allCases)
    func deviceNamesReachOtherDevices(_ kind: StoreKind) throws {
        let folder = TemporaryFolder()
        let a = try makeStore(kind, folder)
        let b = try NoteStore.openInMemory()
        #expect(try a.setDeviceName(" laptop "))
        #expect(try !a.setDeviceName("laptop"))
        #expect(throws: StoreError.self) { try a.setDeviceName("  ") }
        _ = try b.createNote(title: "from b")
        try exchange(a, b)
        #expect(try b.deviceNames() == [a.replicaID: "laptop"])
        try b.setDeviceName("phone")
        try a.setDeviceName("desk")
        try exchange(a, b)
        #expect(try a.deviceNames() == [a.replicaID: "desk", b.replicaID: "phone"])
        #expect(try b.deviceNames() == a.deviceNames())
        // Naming is not an edit to undo.
        #expect(try a.undo() == nil)
        if kind == .file {
            let reopened = try NoteStore.open(path: folder.file("notes.db"))
            #expect(try reopened.deviceNames()[b.replicaID] == "phone")
        }
    }
}

extension HistoryTests {
    @Test func thisDevicesVersionsAreOnePerEditEvenWhenTheLogJoinsThem() throws {
        // A clock that stands still: every change follows the last exactly, and the log joins them.
        let store = try NoteStore.openInMemory(options: StoreOptions(wallClock: FixedWallClock(HistoryTests.start)))
        let id = try store.createNote(title: "t", body: "ab")
        try store.appendText(id, "cd")
        try store.appendText(id, "ef")
        let versions = try store.versions(of: id)
        #expect(versions.count == 3)
        #expect(versions.last?.edits == [.inserted(count: 2, pieces: ["ef"])])
        let middle = try #require(try store.note(id, at: store.resolveVersion(versions[1].label)))
        #expect(middle.body == "abcd")
        // Another device, which has the changes joined, shows one version with the last label.
        let other = try NoteStore.openInMemory()
        try other.apply(try store.changes(since: VersionVector()))
        #expect(try other.versions(of: id).count < 3)
        #expect(try other.versions(of: id).last?.label == versions.last?.label)
    }

    @Test func reservedTagNamesAndDeletedNotes() throws {
        let store = try NoteStore.openInMemory()
        let id = try store.createNote(title: "t", body: "x")
        #expect(throws: StoreError.self) { try store.setTag(id, "crdt-sync.device.00", member: true) }
        #expect(throws: StoreError.self) { try store.createNote(title: "u", tags: ["CRDT-sync.x"]) }
        // Undoing an edit of a note another device deleted since leaves it deleted.
        let other = try NoteStore.openInMemory()
        try store.appendText(id, "y")
        try exchange(store, other)
        try other.setState(id, .deleted)
        try exchange(store, other)
        #expect(try store.undo()?.changed == false)
        #expect(try store.isDeleted(id))
    }

    /// `log` and a note's versions read without loading the replica (the snapshot's log and the
    /// rows after it, decoded, nothing replayed) are exactly what the loaded replica gives: with
    /// snapshots taken along the way, another device's changes, one-note edits and an undo.
    @Test(arguments: [UInt64(1), 2, 3])
    func theLogReadWithoutLoadingIsTheLoadedOne(seed: UInt64) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("unloaded-log-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("replica.db").path
        let clock = SettableClock(HistoryTests.start)
        let options = StoreOptions(wallClock: clock, snapshotInterval: 7)
        var rng = SplitMix64(seed: seed)
        let other = try NoteStore.openInMemory(options: options)
        var notes: [NoteID] = []
        for round in 0 ..< 12 {
            let mine = try NoteStore.open(path: path, options: options)
            clock.set(HistoryTests.start + UInt64(round) * 1000)
            if notes.isEmpty || rng.next() % 3 == 0 { notes.append(try mine.createNote(title: "n\(round)", body: "body \(round)")) }
            let note = notes[Int(rng.next() % UInt64(notes.count))]
            _ = try mine.appendText(note, " typed")
            _ = try mine.appendText(note, " on")
            _ = try mine.setTitle(note, "title \(rng.next() % 4)")
            _ = try mine.setTag(note, "t\(rng.next() % 2)", member: true)
            if rng.next() % 2 == 0 { _ = try mine.deleteText(note, at: 0, count: 2) }
            if rng.next() % 4 == 0 { _ = try mine.undo(note) }
            _ = try other.appendText(try other.createNote(title: "other \(round)", body: "x"), "y")
            if round % 3 == 2 {
                try mine.apply(try other.changes(since: try mine.versionVector))
                try other.apply(try mine.changes(since: try other.versionVector))
                if let shared = notes.first { _ = try other.appendText(shared, " from the other") }
            }
            try mine.close()
        }
        let unloaded = try NoteStore.open(path: path, options: options)
        let log = try #require(try unloaded.unloadedLog(), "the log could not be read without loading")
        let everything = try unloaded.history()
        let perNote = try notes.map { try unloaded.versions(of: $0) }
        let oneNote = try unloaded.history(of: notes[0])
        try unloaded.reload()
        #expect(try unloaded.unloadedLog() == nil)
        #expect(log == (try unloaded.notebook.allChanges))
        #expect(everything == (try unloaded.history()))
        #expect(oneNote == (try unloaded.history(of: notes[0])))
        for (index, note) in notes.enumerated() {
            #expect(perNote[index] == (try unloaded.versions(of: note)), "note \(index)")
        }
        #expect(perNote.contains { $0.count > 3 }, "no note has a history worth comparing")
        try unloaded.close()
    }
}

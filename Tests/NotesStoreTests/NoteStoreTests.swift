import Foundation
import GRDB
import NotesCRDT
import NotesTestSupport
@testable import NotesStore
import Testing

/// Where a test's store lives: the same test body runs against both.
enum StoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case memory, file
    var testDescription: String { rawValue }
}

/// A temporary folder, removed when the value goes away.
final class TemporaryFolder: @unchecked Sendable {
    let path: String
    init() {
        path = NSTemporaryDirectory() + "notesstore-tests-" + UUID().uuidString
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
    func file(_ name: String) -> String { path + "/" + name }
}

func makeStore(_ kind: StoreKind, _ folder: TemporaryFolder, options: StoreOptions = StoreOptions()) throws -> NoteStore {
    switch kind {
    case .memory: return try NoteStore.openInMemory(options: options)
    case .file: return try NoteStore.open(path: folder.file("notes.db"), options: options)
    }
}

struct NoteStoreTests {
    @Test(arguments: StoreKind.allCases)
    func createEditAndList(_ kind: StoreKind) throws {
        let folder = TemporaryFolder()
        let store = try makeStore(kind, folder)
        #expect(store.wasCreated)
        let a = try store.createNote(title: "Groceries", body: "milk and eggs", tags: ["Home"])
        let b = try store.createNote(title: "Meeting", body: "garden budget")
        try store.appendText(a, ", bread")
        try store.insertText(a, at: 0, "fresh ")
        try store.deleteText(b, at: 0, count: 7)
        try store.setPinned(b, true)
        try store.setColor(a, "yellow")
        try store.setTag(a, "work", member: true)

        let noteA = try #require(try store.note(a))
        #expect(noteA.body == "fresh milk and eggs, bread")
        #expect(noteA.tags == ["Home", "work"])
        #expect(noteA.color == "yellow")
        #expect(try store.note(b)?.body == "budget")
        #expect(try store.list().map(\.id) == [b, a])  // pinned first
        #expect(try store.list(tag: "HOME").map(\.id) == [a])

        try store.setArchived(a, true)
        #expect(try store.list().map(\.id) == [b])
        #expect(try store.list(.archived).map(\.id) == [a])
        try store.setState(b, .trashed)
        #expect(try store.list(.trashed).map(\.id) == [b])
        try store.setState(b, .deleted)
        #expect(try store.list(.all).map(\.id) == [a])
        #expect(try store.note(b) == nil)
        #expect(throws: StoreError.self) { try store.setTitle(b, "back?") }

        // The materialized state matches the CRDT state.
        let notebook = try store.notebook
        #expect(notebook.note(a)?.body == noteA.body)
        #expect(try store.digest() == notebook.digest())
    }

    @Test(arguments: StoreKind.allCases)
    func reopeningGivesTheSameState(_ kind: StoreKind) throws {
        guard kind == .file else { return }
        let folder = TemporaryFolder()
        let path = folder.file("notes.db")
        var ids: [NoteID] = []
        let digest: String
        do {
            let store = try NoteStore.open(path: path, options: StoreOptions(snapshotInterval: 7))
            for i in 0 ..< 5 { ids.append(try store.createNote(title: "note \(i)", body: "body \(i)")) }
            for i in 0 ..< 30 { try store.appendText(ids[i % 5], " more \(i)") }
            digest = try store.digest()
            try store.close()
        }
        let reopened = try NoteStore.open(path: path, create: false)
        #expect(!reopened.wasCreated)
        #expect(try reopened.digest() == digest)
        let status = try reopened.status()
        #expect(status.snapshotThroughRow > 0)
        #expect(status.logRows < 7)
        #expect(try reopened.list().count == 5)
    }

    @Test(arguments: StoreKind.allCases)
    func applyRemoteChangesInAnyOrderWithPending(_ kind: StoreKind) throws {
        let folder = TemporaryFolder()
        let store = try makeStore(kind, folder)
        let (author, changes) = SyntheticWorkload.notebook(seed: 3, notes: 5, operations: 400)
        // The second half first: it waits for the first.
        let half = changes.count / 2
        let first = try store.apply(Array(changes[half...]))
        #expect(first.applied == 0)
        #expect(first.pending > 0)
        #expect(try store.noteCount() == 0)
        let second = try store.apply(Array(changes[..<half]) + Array(changes[..<10]))
        #expect(second.pending == 0)
        #expect(try store.digest() == author.digest())
        #expect(try store.list(.all).count == 5)
        for note in author.allNotes {
            #expect(try store.note(note.id)?.body == note.body)
            #expect(try store.note(note.id)?.title == note.title)
        }
        // What we lack from the author is nothing; what the author lacks from us is nothing.
        #expect(try store.changes(since: author.versionVector).isEmpty)
        #expect(try store.changes(since: VersionVector()).count >= 1)
        // Duplicates are harmless.
        let again = try store.apply(changes)
        #expect(again.applied == 0)
        #expect(again.duplicates == changes.count)
    }

    @Test func pendingChangesSurviveReopening() throws {
        let folder = TemporaryFolder()
        let path = folder.file("notes.db")
        let (author, changes) = SyntheticWorkload.notebook(seed: 9, notes: 3, operations: 100)
        do {
            let store = try NoteStore.open(path: path)
            try store.apply(Array(changes.dropFirst()))
            #expect(try store.pendingChanges.count > 0)
        }
        let store = try NoteStore.open(path: path, create: false)
        #expect(try store.pendingChanges.count > 0)
        try store.apply([changes[0]])
        #expect(try store.digest() == author.digest())
        #expect(try store.pendingChanges.isEmpty)
        let reopened = try NoteStore.open(path: path, create: false)
        #expect(try reopened.digest() == author.digest())
    }

    /// A change that refers to characters that do not exist is quarantined; the rest of the
    /// batch is applied, and the quarantine survives reopening the store.
    @Test(arguments: StoreKind.allCases)
    func aChangeThatDoesNotApplyIsQuarantinedAndTheRestOfTheBatchApplied(_ kind: StoreKind) throws {
        let folder = TemporaryFolder()
        let store = try makeStore(kind, folder)
        let (_, changes) = SyntheticWorkload.notebook(seed: 5, notes: 2, operations: 50)
        let stranger = ReplicaID(Identifier128(high: 99, low: 99))
        let bogus = Change(replica: stranger, startSeq: 1, timestamp: Timestamp(milliseconds: 1), dependencies: VersionVector(),
                           operations: [.deleteText(note: NoteID(Identifier128(high: 1, low: 1)),
                                                    targets: [OpIDRange(replica: stranger, seq: 500, count: 1)])])
        let report = try store.apply([bogus] + changes)
        #expect(report.quarantined == 1)
        #expect(report.applied == changes.count)
        #expect(try store.noteCount() == 2)
        #expect(try store.versionVector[stranger] == 0)
        let entries = try store.quarantinedChanges()
        #expect(entries.map { [$0.startSeq, $0.endSeq] } == [[1, 1]])
        #expect(entries.first?.replica == stranger)
        #expect(entries.first?.code == "unknownReference")
        #expect(entries.first?.reason.contains("do not exist") == true)
        // The same change again is not quarantined twice.
        #expect(try store.apply([bogus]).quarantined == 0)
        #expect(try store.quarantinedChanges().count == 1)
        if kind == .file {
            let digest = try store.digest()
            try store.close()
            let reopened = try NoteStore.open(path: folder.file("notes.db"), create: false)
            #expect(try reopened.quarantinedChanges() == entries)
            #expect(try reopened.notebook.quarantinedChanges.map(\.change) == [bogus])
            #expect(try reopened.digest() == digest)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func searchRanksPrefixesAndSnippets(_ kind: StoreKind) throws {
        let folder = TemporaryFolder()
        let store = try makeStore(kind, folder)
        let groceries = try store.createNote(title: "Groceries", body: "milk, eggs, bread")
        let recipe = try store.createNote(title: "Cake recipe", body: "eggs, flour, sugar and more eggs; milk")
        let trashed = try store.createNote(title: "Old", body: "eggs")
        try store.setState(trashed, .trashed)
        #expect(try store.search("milk").map(\.note.id).sorted() == [groceries, recipe].sorted())
        #expect(try store.search("groc*").map(\.note.id) == [groceries])
        #expect(try store.search("GROCERIES").first?.note.id == groceries)
        #expect(try store.search("recipe flour").map(\.note.id) == [recipe])
        #expect(try store.search("\"flour sugar\"").map(\.note.id) == [recipe])
        #expect(try store.search("flour bread").isEmpty)
        #expect(try store.search("eggs").contains { $0.note.id == trashed } == false)
        #expect(try store.search("flour").first?.snippet.contains("[flour]") == true)
        #expect(throws: StoreError.self) { try store.search("  *  ") }
        // Title matches weigh more than body matches.
        let cake = try store.createNote(title: "Sugar", body: "")
        #expect(try store.search("sugar").first?.note.id == cake)
    }

    @Test(arguments: StoreKind.allCases)
    func searchAcrossChunksOfALargeNote(_ kind: StoreKind) throws {
        let folder = TemporaryFolder()
        let store = try makeStore(kind, folder)
        var random = SyntheticWorkload.Generator(seed: 1)
        let words = ["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit"]
        var text = ""
        for _ in 0 ..< 6000 { text += words[Int(random.next() % 8)] + " " }
        let note = try store.createNote(title: "Long", body: "aardvark " + text + "zebra")
        #expect(try store.search("aardvark zebra").map(\.note.id) == [note])
        // Edit in the middle: the stored body and the index follow.
        try store.insertText(note, at: 20_000, " platypus ")
        #expect(try store.search("platypus").map(\.note.id) == [note])
        #expect(try store.note(note)?.body == (try store.notebook.note(note)?.body))
        try store.replaceBody(note, with: "short now")
        #expect(try store.search("aardvark").isEmpty)
        #expect(try store.note(note)?.body == "short now")
    }

    @Test(arguments: StoreKind.allCases)
    func chunksStayConsistentUnderRandomEdits(_ kind: StoreKind) throws {
        let folder = TemporaryFolder()
        let store = try makeStore(kind, folder)
        var random = SyntheticWorkload.Generator(seed: 11)
        var text = ""
        for i in 0 ..< 3000 { text += "w\(i) " }
        let note = try store.createNote(title: "t", body: text)
        for _ in 0 ..< 60 {
            let length = try store.note(note)!.bodyLength
            if random.next() % 3 == 0, length > 100 {
                try store.deleteText(note, at: Int(random.next() % UInt64(length - 50)), count: Int(random.next() % 50))
            } else {
                try store.insertText(note, at: Int(random.next() % UInt64(length + 1)), "new\(random.next() % 1000) ")
            }
            #expect(try store.note(note)?.body == (try store.notebook.note(note)?.body))
        }
    }

    @Test func chunkerCutsAtWhitespaceAndResynchronizes() {
        var text = ""
        for i in 0 ..< 5000 { text += "word\(i) " }
        let chunks = TextChunker.chunks(text)
        #expect(chunks.joined() == text)
        #expect(chunks.count > 5)
        #expect(chunks.dropLast().allSatisfy { $0.hasSuffix(" ") })
        var edited = text
        edited.insert(contentsOf: "inserted ", at: edited.index(edited.startIndex, offsetBy: 20_000))
        let after = TextChunker.chunks(edited)
        let differing = Set(after).symmetricDifference(Set(chunks)).count
        #expect(differing <= 4)
        #expect(TextChunker.chunks("").isEmpty)
    }

    /// The chunks a store keeps for a body, edited a piece at a time, are always the chunks of
    /// the whole body, also where a chunk is cut back at its last whitespace after 4 KiB without a
    /// cut (runs of varied bytes without whitespace, such as a pasted URL or base64 data).
    @Test func storedChunksAreAlwaysTheChunksOfTheWholeBody() throws {
        var rng = SplitMix64(seed: 13)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        func run(_ length: Int) -> String { String((0 ..< length).map { _ in alphabet[Int(rng.next() % 64)] }) }
        let store = try NoteStore.openInMemory()
        let note = try store.createNote(title: "data", body: "note " + run(6000) + " tail " + run(3000))
        for step in 0 ..< 60 {
            let length = try #require(try store.note(note)).bodyLength
            let at = Int(rng.next() % UInt64(length + 1))
            switch rng.next() % 4 {
            case 0: try store.insertText(note, at: at, " ")
            case 1: try store.insertText(note, at: at, run(Int(rng.next() % 900)))
            case 2: try store.insertText(note, at: at, "word \(step) ")
            default:
                if length > 10 { try store.deleteText(note, at: min(at, length - 1), count: 1 + Int(rng.next() % UInt64(min(300, length - min(at, length - 1))))) }
            }
            let body = try #require(try store.note(note)?.body)
            let stored = try store.queue.read {
                try String.fetchAll($0, sql: "SELECT body FROM note_text WHERE note = ? AND ord >= 0 ORDER BY ord", arguments: [note.description])
            }
            #expect(stored == TextChunker.chunks(body), "step \(step)")
        }
    }

    @Test(arguments: StoreKind.allCases)
    func peersAreRecorded(_ kind: StoreKind) throws {
        let folder = TemporaryFolder()
        let store = try makeStore(kind, folder)
        let peer = ReplicaID(Identifier128(high: 7, low: 7))
        var vector = VersionVector()
        vector[peer] = 10
        try store.recordPeer(peer, versionVector: vector, seenAt: 1000)
        vector[peer] = 4
        vector[store.replicaID] = 3
        try store.recordPeer(peer, versionVector: vector, seenAt: 2000)
        let state = try #require(try store.peer(peer))
        #expect(state.versionVector[peer] == 10)
        #expect(state.versionVector[store.replicaID] == 3)
        #expect(state.lastSeen == 2000)
    }

    /// In-memory stores are copies of one migrated database with 2 KiB pages (a smaller rollback
    /// journal per transaction); a file keeps SQLite's default page size.
    @Test func inMemoryStoresHaveTheirOwnPageSize() throws {
        let store = try NoteStore.openInMemory()
        _ = try store.createNote(title: "a", body: String(repeating: "words and more words ", count: 400))
        #expect(try store.queue.read { try Int.fetchOne($0, sql: "PRAGMA page_size") } == NoteStore.inMemoryPageSize)
        #expect(try store.queue.read { try String.fetchOne($0, sql: "PRAGMA integrity_check") } == "ok")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pagesize-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = try NoteStore.open(path: folder.appendingPathComponent("r.db").path)
        #expect(try file.queue.read { try Int.fetchOne($0, sql: "PRAGMA page_size") } == 4096)
        try file.close()
    }

    @Test func resolvingIdPrefixes() throws {
        let store = try NoteStore.openInMemory()
        let a = try store.createNote(title: "a", id: NoteID(hex: "abcd0000000000000000000000000001")!)
        _ = try store.createNote(title: "b", id: NoteID(hex: "abcd0000000000000000000000000002")!)
        #expect(try store.resolveNote("ABCD0000000000000000000000000001") == a)
        #expect(throws: StoreError.self) { try store.resolveNote("abcd") }
        #expect(throws: StoreError.self) { try store.resolveNote("ffff") }
        #expect(throws: StoreError.self) { try store.resolveNote("xyz") }
        do { _ = try store.resolveNote("abc"); Issue.record("expected an error") } catch let error as StoreError {
            #expect(error.code == .ambiguous)
        }
    }

    @Test func aVirtualClockDrivesTimestamps() throws {
        let store = try NoteStore.openInMemory(options: StoreOptions(wallClock: FixedWallClock(1_234_000)))
        let note = try store.createNote(title: "x")
        #expect(try store.note(note)?.createdAt == 1_234_000)
        #expect(try store.history().first?.timestamp.milliseconds == 1_234_000)
    }
}

import Foundation
import GRDB
import NotesCRDT
@testable import NotesStore
import Testing

/// The full-text index is brought up to date before it is read (`NoteStore+SearchIndex.swift`):
/// edits record which rows' entries are stale, and a search re-indexes them first. What a search
/// finds, its ranks and its snippets must be what indexing in every transaction gave.
struct SearchIndexTests {
    static func staleRows(_ store: NoteStore) throws -> Int {
        try store.read("stale rows") { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM note_fts_stale") ?? -1 }
    }

    @Test(arguments: StoreKind.allCases)
    func editsThenSearchFindsNewWordsAndNotRemovedOnes(_ kind: StoreKind) throws {
        let folder = TemporaryFolder()
        let store = try makeStore(kind, folder)
        let a = try store.createNote(title: "Walrus", body: "apple banana cherry ")
        let b = try store.createNote(title: "Other", body: "banana split ")
        #expect(try store.search("apple").map(\.note.id) == [a])
        #expect(try Self.staleRows(store) == 0)
        // Typing and deleting, several times in the same chunk, then a retitle, before any search.
        try store.deleteText(a, at: 0, count: 6)                 // "apple " goes
        try store.insertText(a, at: 0, "durian ")
        try store.appendText(a, "elderberry ")
        try store.deleteText(b, at: 0, count: 7)                 // "banana " goes from b
        try store.setTitle(a, "Narwhal")
        #expect(try Self.staleRows(store) > 0)
        #expect(try store.search("apple").isEmpty)
        #expect(try store.search("walrus").isEmpty)
        #expect(try store.search("durian").map(\.note.id) == [a])
        #expect(try store.search("elderberry").first?.snippet.contains("[elderberry]") == true)
        #expect(try store.search("narwhal").map(\.note.id) == [a])
        #expect(try store.search("banana").map(\.note.id) == [a])
        #expect(try store.search("split").map(\.note.id) == [b])
        #expect(try Self.staleRows(store) == 0)
        // A note deleted for good, and one created, between two searches.
        try store.setState(b, .deleted)
        let c = try store.createNote(title: "Fig", body: "grape ")
        #expect(try store.search("split").isEmpty)
        #expect(try store.search("grape").map(\.note.id) == [c])
        try MaterializationTests.checkIndex(store)
    }

    /// The check the simulator makes (`searchIndexProblems`) sees an index entry left stale, a
    /// title row that is not the note's title, and text of a note that is not stored.
    @Test func theIndexCheckSeesStaleEntriesWrongTitlesAndStrayText() throws {
        let store = try NoteStore.openInMemory()
        let a = try store.createNote(title: "Walrus", body: "apple banana ")
        _ = try store.createNote(title: "Other", body: "cherry ")
        #expect(try store.searchIndexProblems() == [])
        // A body row changed without recording its entry as stale (what a write that forgot it leaves).
        try store.queue.writeWithoutTransaction { db in
            try db.execute(sql: "UPDATE note_text SET body = 'durian ' WHERE note = ? AND ord >= 0", arguments: [a.raw.hex])
        }
        let stale = try store.searchIndexProblems()
        #expect(stale.count == 1 && stale[0].contains("does not hold the notes' text"), "\(stale)")
        #expect(try store.search("durian").isEmpty)
        // Indexed again from the stored text, then a title row that says another title.
        try store.queue.writeWithoutTransaction { db in try db.execute(sql: "INSERT INTO note_fts (note_fts) VALUES ('rebuild')") }
        #expect(try store.searchIndexProblems() == [])
        try store.queue.writeWithoutTransaction { db in
            try db.execute(sql: "UPDATE note_text SET title = 'Narwhal' WHERE note = ? AND ord = -1", arguments: [a.raw.hex])
            try db.execute(sql: "INSERT INTO note_fts (note_fts) VALUES ('rebuild')")
        }
        let titled = try store.searchIndexProblems()
        #expect(titled.count == 1 && titled[0].contains("1 note(s) have no title row") && titled[0].contains(a.raw.hex), "\(titled)")
        // Text of a note nobody stores.
        try store.queue.writeWithoutTransaction { db in
            try db.execute(sql: "UPDATE note_text SET title = 'Walrus' WHERE note = ? AND ord = -1", arguments: [a.raw.hex])
            try db.execute(sql: "INSERT INTO note_text (note, ord, title) VALUES ('00ff', -1, 'stray')")
            try db.execute(sql: "INSERT INTO note_fts (note_fts) VALUES ('rebuild')")
        }
        let stray = try store.searchIndexProblems()
        #expect(stray.count == 1 && stray[0].contains("rows of 1 note(s) that are not stored (first 00ff)"), "\(stray)")
    }

    /// The same edits on two stores, one bringing its index up to date after every edit (what
    /// writing the index in every transaction gave), one only when it searches: the same hits,
    /// ranks and snippets.
    @Test(arguments: [UInt64(7), 8, 9])
    func searchingAfterManyEditsGivesWhatIndexingEveryEditGave(_ seed: UInt64) throws {
        var seeds = SplitMix64(seed: seed)
        let replica = ReplicaID.random(using: &seeds)
        let eager = try NoteStore.openInMemory(replicaID: replica)
        let lazy = try NoteStore.openInMemory(replicaID: replica)
        var eagerRandom = SplitMix64(seed: seed)
        var lazyRandom = SplitMix64(seed: seed)
        let queries = ["alpha", "gamma*", "café", "日本", "title", "note", "\"beta gamma\"", "zeta epsilon", "de*"]
        var hits = 0
        for step in 0 ..< 240 {
            try MaterializationTests.randomEdit(eager, &eagerRandom)
            try eager.updateSearchIndex()
            try MaterializationTests.randomEdit(lazy, &lazyRandom)
            if step % 60 == 59 {
                #expect(try Self.staleRows(lazy) > 0)
                for query in queries {
                    let expected = try eager.search(query)
                    let found = try lazy.search(query)
                    hits += found.count
                    #expect(found.map(\.note.id) == expected.map(\.note.id), "seed \(seed), step \(step), \(query)")
                    #expect(found.map(\.rank) == expected.map(\.rank), "seed \(seed), step \(step), \(query)")
                    #expect(found.map(\.snippet) == expected.map(\.snippet), "seed \(seed), step \(step), \(query)")
                }
                #expect(try Self.staleRows(lazy) == 0)
            }
        }
        #expect(hits > 20)
        try MaterializationTests.checkIndex(lazy)
    }

    /// A process killed after its edits committed, before any search: the records of the stale
    /// rows are in the database with the rows, and the next process's search brings the index up
    /// to date. (The files are copied while the first store is still open, as a SIGKILL leaves
    /// them: the committed transactions in the WAL, nothing else done.)
    @Test func aCrashBeforeTheIndexIsUpdatedLosesNothing() throws {
        let folder = TemporaryFolder()
        let path = folder.file("notes.db")
        let store = try NoteStore.open(path: path)
        let note = try store.createNote(title: "Crash", body: "before ")
        #expect(try store.search("before").map(\.note.id) == [note])
        try store.deleteText(note, at: 0, count: 7)
        try store.appendText(note, "quokka wombat ")
        try store.setTitle(note, "Restarted")
        #expect(try Self.staleRows(store) > 0)
        let copy = folder.file("copy.db")
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: path + suffix) {
            try FileManager.default.copyItem(atPath: path + suffix, toPath: copy + suffix)
        }
        let reopened = try NoteStore.open(path: copy, create: false)
        #expect(try Self.staleRows(reopened) > 0)
        #expect(try reopened.search("before").isEmpty)
        #expect(try reopened.search("crash").isEmpty)
        #expect(try reopened.search("quokka").map(\.note.id) == [note])
        #expect(try reopened.search("restarted").map(\.note.id) == [note])
        try MaterializationTests.checkIndex(reopened)
        // The store that was copied goes on as if nothing happened.
        #expect(try store.search("wombat").map(\.note.id) == [note])
        try MaterializationTests.checkIndex(store)
    }

    /// An in-memory store remembers which rows have a stale-index record and skips writing them
    /// again; a transaction that fails rolls its records back, so it must forget what it
    /// remembered, or the next edit of the row would leave the index behind.
    @Test func aFailedEditForgetsTheStaleRecordsItRolledBack() throws {
        let store = try NoteStore.openInMemory()
        let note = try store.createNote(title: "Kept", body: "alpha ")
        #expect(try store.search("alpha").map(\.note.id) == [note])
        #expect(try Self.staleRows(store) == 0)
        // Every record written from now on fails while the flag is up, and the edit with it.
        try store.queue.writeWithoutTransaction { db in
            try db.execute(sql: """
                CREATE TABLE fail_flag (x);
                CREATE TRIGGER fail_stale AFTER INSERT ON note_fts_stale WHEN EXISTS (SELECT 1 FROM fail_flag)
                BEGIN SELECT RAISE(ABORT, 'injected failure'); END;
                INSERT INTO fail_flag VALUES (1);
                """)
        }
        #expect(throws: StoreError.self) { try store.appendText(note, "beta ") }
        #expect(try store.note(note)?.body == "alpha ")
        try store.queue.writeWithoutTransaction { db in try db.execute(sql: "DELETE FROM fail_flag") }
        try store.appendText(note, "gamma ")
        #expect(try Self.staleRows(store) > 0)
        #expect(try store.search("gamma").map(\.note.id) == [note])
        #expect(try store.search("beta").isEmpty)
        try MaterializationTests.checkIndex(store)
    }

    @Test(arguments: StoreKind.allCases)
    func updatingTheIndexLeavesNothingStaleAndPassesFTS5sCheck(_ kind: StoreKind) throws {
        let folder = TemporaryFolder()
        let store = try makeStore(kind, folder)
        var rng = SplitMix64(seed: 12)
        for _ in 0 ..< 150 { try MaterializationTests.randomEdit(store, &rng) }
        let stale = try Self.staleRows(store)
        #expect(stale > 0)
        #expect(try store.updateSearchIndex() == stale)
        #expect(try Self.staleRows(store) == 0)
        #expect(try store.updateSearchIndex() == 0)
        try store.queue.writeWithoutTransaction { db in
            try db.execute(sql: "INSERT INTO note_fts (note_fts) VALUES ('integrity-check')")
        }
    }
}

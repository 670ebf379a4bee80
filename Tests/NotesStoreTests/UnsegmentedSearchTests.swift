import Foundation
import GRDB
import NotesCRDT
@testable import NotesStore
import Testing

/// Search finds substrings of scripts written without spaces between words, through the index
/// (`UnsegmentedScriptTokenizer`), and Latin text is indexed and ranked as `unicode61` did.
struct UnsegmentedSearchTests {
    @Test(arguments: StoreKind.allCases)
    func substringsOfUnsegmentedScriptsAreFound(_ kind: StoreKind) throws {
        let folder = TemporaryFolder()
        let store = try makeStore(kind, folder)
        let tokyo = try store.createNote(title: "予定", body: "東京で会議。その後、大阪へ。")
        let seoul = try store.createNote(title: "여행", body: "서울에서 만나요")
        let thai = try store.createNote(title: "Thai", body: "ภาษาไทยง่ายนิดเดียว")
        let mixed = try store.createNote(title: "Mixed", body: "meeting東京2026 and more")
        let latin = try store.createNote(title: "Latin", body: "Tokyo meeting notes")

        func found(_ query: String) throws -> Set<NoteID> { Set(try store.search(query).map(\.note.id)) }
        #expect(try found("東京") == [tokyo, mixed])
        #expect(try found("会議") == [tokyo])
        #expect(try found("京") == [tokyo, mixed])
        #expect(try found("で会") == [tokyo])
        #expect(try found("大阪") == [tokyo])
        #expect(try found("京東").isEmpty)                    // the characters, but not side by side
        #expect(try found("会議 大阪") == [tokyo])             // two terms: both in the note
        #expect(try found("会議 서울").isEmpty)
        #expect(try found("서울") == [seoul])
        #expect(try found("만나") == [seoul])
        #expect(try found("ไทย") == [thai])
        #expect(try found("予定") == [tokyo])                  // titles too
        #expect(try found("meeting") == [mixed, latin])       // the Latin run beside CJK stays a word
        #expect(try found("2026") == [mixed])
        #expect(try found("東京*") == [tokyo, mixed])          // a prefix
        // The snippet marks the matched characters, not the whole run.
        #expect(try store.search("会議").first?.snippet.contains("[会議]") == true)
        #expect(try store.search("会議").first?.snippet.contains("東京で") == true)

        // Edits are seen by the next search (the index is brought up to date first).
        try store.appendText(seoul, " 부산")
        #expect(try found("부산") == [seoul])
        try store.deleteText(tokyo, at: 0, count: 2)
        #expect(try found("東京") == [mixed])
    }

    /// For text without unsegmented scripts, the index holds what `unicode61` (diacritics
    /// removed) made: the same rows match every query, with the same bm25 ranks.
    @Test func latinTextIsIndexedAndRankedAsUnicode61Did() throws {
        let queue = try DatabaseQueue()
        let documents = [
            "The quick brown fox jumps over the lazy dog",
            "Über café naïve résumé façade — déjà vu",
            "fox fox fox, a very foxy document about foxes",
            "Groceries: milk, eggs, bread; two eggs for the cake",
            "co-operate e-mail don't isn't 3.14 1,000 user@example.com",
            "ΑΒΓ Ελληνικά κείμενο and Кириллица текст",
        ]
        try queue.write { db in
            UnsegmentedScriptTokenizer.register(db)
            try db.execute(sql: """
                CREATE VIRTUAL TABLE plain USING fts5(body, tokenize = 'unicode61 remove_diacritics 2', prefix = '2 3');
                CREATE VIRTUAL TABLE ours USING fts5(body, tokenize = '\(UnsegmentedScriptTokenizer.name)', prefix = '2 3');
                """)
            for (index, document) in documents.enumerated() {
                try db.execute(sql: "INSERT INTO plain (rowid, body) VALUES (?, ?)", arguments: [index, document])
                try db.execute(sql: "INSERT INTO ours (rowid, body) VALUES (?, ?)", arguments: [index, document])
            }
            for query in ["\"fox\"", "\"cafe\"", "\"naive\" OR \"fox\"", "\"eggs\"", "\"two eggs\"", "\"fo\"*", "\"e mail\"",
                          "\"example\"", "\"κείμενο\"", "\"текст\"", "\"the\"", "\"resume\""] {
                func ranked(_ table: String) throws -> [String] {
                    try Row.fetchAll(db, sql: "SELECT rowid, bm25(\(table)) AS rank, snippet(\(table), 0, '[', ']', '…', 8) AS s FROM \(table) WHERE \(table) MATCH ? ORDER BY rank, rowid",
                                     arguments: [query]).map { "\($0["rowid"] as Int64) \($0["rank"] as Double) \($0["s"] as String)" }
                }
                let plain = try ranked("plain")
                #expect(!plain.isEmpty, "the query \(query) matches something")
                #expect(try ranked("ours") == plain, "query \(query)")
            }
        }
    }

    /// A database indexed before this tokenizer is indexed again when it is opened.
    @Test func anOlderIndexIsRebuiltAtOpen() throws {
        let folder = TemporaryFolder()
        let path = folder.file("notes.db")
        var store: NoteStore? = try NoteStore.open(path: path)
        let note = try store!.createNote(title: "会議", body: "東京で会議。")
        store = nil
        // What a database made before migration v8 holds: the unicode61 index, and no v8 row.
        var configuration = Configuration()
        configuration.prepareDatabase { db in UnsegmentedScriptTokenizer.register(db) }
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        try queue.write { db in
            try db.execute(sql: """
                DROP TABLE note_fts;
                CREATE VIRTUAL TABLE note_fts USING fts5(
                    title, body, content = 'note_text', content_rowid = 'id',
                    tokenize = 'unicode61 remove_diacritics 2', prefix = '2 3');
                INSERT INTO note_fts (note_fts) VALUES ('rebuild');
                DELETE FROM grdb_migrations WHERE identifier = 'v8-fts-unsegmented-scripts';
                """)
            #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM note_fts WHERE note_fts MATCH '\"京\"'") == 0)
        }
        try queue.close()
        let reopened = try NoteStore.open(path: path)
        #expect(try reopened.search("京").map(\.note.id) == [note])
        try reopened.read("integrity") { db in try db.execute(sql: "INSERT INTO note_fts (note_fts) VALUES ('integrity-check')") }
    }
}

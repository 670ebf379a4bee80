import Foundation
import GRDB
import NotesCRDT
@testable import NotesStore
import NotesTestSupport
import Testing

/// The materialized tables that edits and batches keep up to date piece by piece (only the rows,
/// tag rows, title rows and body chunks that changed) must equal what materializing every note
/// from nothing gives, and the full-text index must match its content.
struct MaterializationTests {
    /// Everything materialized, without row ids and chunk positions (which depend on history),
    /// nor when this replica saw each note change (its own clock's business).
    struct Tables: Equatable {
        var notes: [[String]]
        var tags: [[String]]
        var text: [[String]]
        var deleted: [[String]]
    }

    static func tables(_ store: NoteStore) throws -> Tables {
        try store.read("tables") { db in
            func strings(_ sql: String) throws -> [[String]] {
                try Row.fetchAll(db, sql: sql).map { row in
                    (0 ..< row.count).map { (row[$0] as DatabaseValue).description }
                }
            }
            return Tables(
                notes: try strings("SELECT \(NoteStore.noteColumns.replacingOccurrences(of: ", notes.changed_here_at", with: "")) FROM notes ORDER BY id"),
                tags: try strings("SELECT tag, note FROM note_tags ORDER BY tag, note"),
                text: try strings("SELECT note, ord >= 0, title, body FROM note_text ORDER BY note, ord"),
                deleted: try strings("SELECT * FROM deleted_notes ORDER BY id"))
        }
    }

    /// FTS5's own check that the index holds exactly the content table's words, once it is
    /// brought up to date (as it is before every search).
    static func checkIndex(_ store: NoteStore, sourceLocation: SourceLocation = #_sourceLocation) throws {
        try store.updateSearchIndex()
        try store.queue.writeWithoutTransaction { db in
            try db.execute(sql: "INSERT INTO note_fts (note_fts) VALUES ('integrity-check')")
        }
        // The index against the stored text, and the stored titles against the notes.
        #expect(try store.searchIndexProblems() == [], sourceLocation: sourceLocation)
    }

    /// A random edit of `store`'s notes: typing, deleting, pasting long text (new chunks),
    /// cutting much (chunks go), renaming, tagging, trashing, restoring, deleting for good; and
    /// with `renamingTags`, renaming a tag (its key stays; every note in it lists the new name).
    static func randomEdit(_ store: NoteStore, _ rng: inout SplitMix64, renamingTags: Bool = false) throws {
        let words = ["alpha ", "beta ", "gamma ", "café ", "日本 ", "🙂 ", "delta\n", "epsilon ", "zeta "]
        let notes = try store.list(.all).sorted { $0.id < $1.id }
        if notes.isEmpty || rng.next() % 20 == 0 {
            try store.createNote(title: "note \(rng.next() % 100)", body: words[Int(rng.next() % 9)],
                                 tags: rng.next() % 2 == 0 ? ["Work"] : [], id: NoteID.random(using: &rng))
            return
        }
        let note = notes[Int(rng.next() % UInt64(notes.count))]
        let length = note.bodyLength
        func offset() -> Int { Int(rng.next() % UInt64(length + 1)) }
        switch rng.next() % 12 {
        case 0, 1, 2, 3:
            try store.insertText(note.id, at: offset(), words[Int(rng.next() % 9)])
        case 4:
            // A paste of several kilobytes: new chunks in the middle of the body.
            let paste = (0 ..< 300 + Int(rng.next() % 600)).map { _ in words[Int(rng.next() % 9)] }.joined()
            try store.insertText(note.id, at: offset(), paste)
        case 5, 6:
            guard length > 0 else { return }
            let at = Int(rng.next() % UInt64(length))
            try store.deleteText(note.id, at: at, count: 1 + Int(rng.next() % UInt64(min(20, length - at))))
        case 7:
            // A big cut: whole chunks go.
            guard length > 0 else { return }
            let at = Int(rng.next() % UInt64(length))
            try store.deleteText(note.id, at: at, count: Int(rng.next() % UInt64(length - at + 1)))
        case 8:
            try store.setTitle(note.id, "title \(rng.next() % 1000)")
        case 9:
            if renamingTags, rng.next() % 4 == 0 {
                let name = ["Work", "WORK", "work", "Home", "HOME"][Int(rng.next() % 5)]
                try store.edit { _ = try $0.setTagField(name, .name, .string(name)) }
            } else {
                try store.setTag(note.id, ["Work", "home", "Later"][Int(rng.next() % 3)], member: rng.next() % 3 != 0)
            }
        case 10:
            try store.setState(note.id, note.state == .trashed ? .active : .trashed)
        default:
            if rng.next() % 4 == 0, notes.count > 2 { try store.setState(note.id, .deleted) } else { try store.setPinned(note.id, rng.next() % 2 == 0) }
        }
    }

    @Test(arguments: [UInt64(1), 2, 3, 4])
    func editsKeepTheSameTablesAsMaterializingFromNothing(_ seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        let store = try NoteStore.openInMemory(replicaID: ReplicaID.random(using: &rng))
        for step in 0 ..< 300 {
            try Self.randomEdit(store, &rng, renamingTags: true)
            if step % 50 == 49 {
                // A second replica gets everything in one batch: every note materialized once, from nothing.
                let fresh = try NoteStore.openInMemory()
                try fresh.apply(try store.changes(since: VersionVector()))
                #expect(try Self.tables(fresh) == Self.tables(store), "seed \(seed), step \(step)")
                try Self.checkIndex(store)
            }
        }
        // Chunking was exercised: some note has several body chunks.
        let chunked = try store.read("chunks") { db in
            try Int.fetchOne(db, sql: "SELECT max(n) FROM (SELECT count(*) AS n FROM note_text WHERE ord >= 0 GROUP BY note)") ?? 0
        }
        #expect(chunked >= 2)
    }

    @Test(arguments: [UInt64(5), 6])
    func batchesOfRemoteChangesKeepTheSameTablesAsMaterializingFromNothing(_ seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        let author = try NoteStore.openInMemory(replicaID: ReplicaID.random(using: &rng))
        let follower = try NoteStore.openInMemory(replicaID: ReplicaID.random(using: &rng))
        for round in 0 ..< 12 {
            for _ in 0 ..< 25 { try Self.randomEdit(author, &rng, renamingTags: true) }
            for _ in 0 ..< 5 { try Self.randomEdit(follower, &rng, renamingTags: true) }
            // Both ways, in batches: each batch re-materializes the notes it touched.
            try follower.apply(try author.changes(since: try follower.versionVector))
            try author.apply(try follower.changes(since: try author.versionVector))
            let fresh = try NoteStore.openInMemory()
            try fresh.apply(try author.changes(since: VersionVector()))
            #expect(try Self.tables(follower) == Self.tables(fresh), "seed \(seed), round \(round)")
            #expect(try Self.tables(author) == Self.tables(fresh), "seed \(seed), round \(round)")
            try Self.checkIndex(follower)
            try Self.checkIndex(author)
        }
    }
}

/// A store keeps in memory what the materialized tables hold for the notes it wrote
/// (`NoteStore.Loaded.materialized`) instead of reading them back before every write. That record
/// must never outlive the rows it describes: another process writing the same file, a failed
/// transaction and a reload all drop it.
struct MaterializedRecordTests {
    @Test func twoProcessesEditingOneFileKeepTheTablesRight() throws {
        let folder = TemporaryFolder()
        let path = folder.file("shared.db")
        let a = try NoteStore.open(path: path)
        let b = try NoteStore.open(path: path)
        var rng = SplitMix64(seed: 9)
        let id = try a.createNote(title: "shared", body: "one two three ", id: NoteID.random(using: &rng))
        let second = try b.createNote(title: "second", body: "four five ", id: NoteID.random(using: &rng))
        for step in 0 ..< 60 {
            // Both write the same note in turns: each must see what the other wrote to the tables.
            let writer = step % 3 == 0 ? b : a
            let length = try writer.note(id)?.bodyLength ?? 0
            switch step % 4 {
            case 0: try writer.insertText(id, at: Int(rng.next() % UInt64(length + 1)), "word\(step) ")
            case 1: try writer.setTitle(id, "title \(step)")
            case 2: try writer.setTag(id, ["Work", "home"][step % 2], member: step % 8 != 2)
            default:
                let paste = (0 ..< 200).map { "paste\(step)x\($0) " }.joined()
                try writer.insertText(id, at: Int(rng.next() % UInt64(length + 1)), paste)
            }
            if step % 2 == 1 {
                try (writer === a ? b : a).appendText(second, "more\(step) ")
            }
        }
        // The other process types last: the first one's search finds it right away.
        try b.appendText(id, " zebraword ")
        try a.refresh()
        let fresh = try NoteStore.openInMemory()
        try fresh.apply(try a.changes(since: VersionVector()))
        #expect(try MaterializationTests.tables(a) == MaterializationTests.tables(fresh))
        #expect(try MaterializationTests.tables(b) == MaterializationTests.tables(fresh))
        try MaterializationTests.checkIndex(a)
        #expect(try a.search("zebraword").map(\.note.id) == [id])
        #expect(try b.search("title").map(\.note.id).contains(id))
    }

    @Test func aQuarantinedChangeLeavesTheTablesRight() throws {
        let store = try NoteStore.openInMemory()
        let id = try store.createNote(title: "a", body: "xyz ")
        // Valid changes first in the batch, then one that refers to a character that does not
        // exist: it is quarantined, the rest applied, and the tables are those of the valid ones.
        let (_, remote) = SyntheticWorkload.notebook(seed: 3, notes: 1, operations: 60)
        let malformed = Change(
            replica: ReplicaID(Identifier128(high: 0, low: 1)), startSeq: 1, timestamp: Timestamp(milliseconds: 1),
            dependencies: VersionVector(),
            operations: [.insertText(note: id, origin: OpID(replica: ReplicaID(Identifier128(high: 0, low: 2)), seq: 1), text: ["x"])])
        #expect(try store.apply(remote + [malformed]).quarantined == 1)
        try store.apply(remote)
        try store.appendText(id, "more ")
        let fresh = try NoteStore.openInMemory()
        try fresh.apply(try store.changes(since: VersionVector()))
        #expect(try MaterializationTests.tables(store) == MaterializationTests.tables(fresh))
        try MaterializationTests.checkIndex(store)
    }
}

/// A database written before the store kept the full-text index itself (migration
/// `v2-fts-written-by-the-store`) had triggers doing it; opening it drops them, and the index
/// stays right through the edits that follow.
struct IndexUpgradeTests {
    /// A database at `path` after 40 random edits, with its index up to date (as every version
    /// before v3 left it), then made what an older version left by `sql`.
    static func olderDatabase(_ path: String, _ rng: inout SplitMix64, sql: String) throws {
        let store = try NoteStore.open(path: path)
        for _ in 0 ..< 40 { try MaterializationTests.randomEdit(store, &rng) }
        try store.updateSearchIndex()
        try store.close()
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in try db.execute(sql: sql) }
        try queue.close()
    }

    @Test func aDatabaseWithTheIndexTriggersIsUpgraded() throws {
        let folder = TemporaryFolder()
        let path = folder.file("old.db")
        var rng = SplitMix64(seed: 31)
        // What the previous version left: the v1 triggers, no v2 migration, and none after it.
        try Self.olderDatabase(path, &rng, sql: """
            CREATE TRIGGER note_text_ai AFTER INSERT ON note_text BEGIN
                INSERT INTO note_fts (rowid, title, body) VALUES (new.id, new.title, new.body);
            END;
            CREATE TRIGGER note_text_ad AFTER DELETE ON note_text BEGIN
                INSERT INTO note_fts (note_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
            END;
            CREATE TRIGGER note_text_au AFTER UPDATE ON note_text BEGIN
                INSERT INTO note_fts (note_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
                INSERT INTO note_fts (rowid, title, body) VALUES (new.id, new.title, new.body);
            END;
            DELETE FROM grdb_migrations WHERE identifier = 'v2-fts-written-by-the-store';
            DROP TABLE note_fts_stale;
            DELETE FROM grdb_migrations WHERE identifier = 'v3-fts-brought-up-to-date-before-reads';
            """)
        let store = try NoteStore.open(path: path)
        let triggers = try store.read("triggers") { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master WHERE type = 'trigger'") ?? -1
        }
        #expect(triggers == 0)
        for _ in 0 ..< 80 { try MaterializationTests.randomEdit(store, &rng) }
        let note = try #require(try store.list(.all).first)
        try store.appendText(note.id, " quokka ")
        try store.setTitle(note.id, "wombat title")
        try MaterializationTests.checkIndex(store)
        let fresh = try NoteStore.openInMemory()
        try fresh.apply(try store.changes(since: VersionVector()))
        #expect(try MaterializationTests.tables(fresh) == MaterializationTests.tables(store))
        if note.state == .active {
            #expect(try store.search("quokka").map(\.note.id) == [note.id])
            #expect(try store.search("wombat").map(\.note.id) == [note.id])
        }
    }
}

/// A database written before the store brought its index up to date only before reads (migration
/// `v3-fts-brought-up-to-date-before-reads`) has its index up to date; opening it adds the table of
/// stale rows, empty, and the index stays right through the edits and searches that follow.
struct LazyIndexUpgradeTests {
    @Test func aDatabaseFromV2IsUpgraded() throws {
        let folder = TemporaryFolder()
        let path = folder.file("v2.db")
        var rng = SplitMix64(seed: 33)
        try IndexUpgradeTests.olderDatabase(path, &rng, sql: """
            DROP TABLE note_fts_stale;
            DELETE FROM grdb_migrations WHERE identifier = 'v3-fts-brought-up-to-date-before-reads';
            """)
        let store = try NoteStore.open(path: path)
        #expect(try SearchIndexTests.staleRows(store) == 0)
        try MaterializationTests.checkIndex(store)
        for _ in 0 ..< 80 { try MaterializationTests.randomEdit(store, &rng) }
        let note = try #require(try store.list(.active).first)
        try store.appendText(note.id, " quokka ")
        #expect(try store.search("quokka").map(\.note.id) == [note.id])
        try MaterializationTests.checkIndex(store)
    }
}

/// The op log keeps a batch of remote changes as one row per run of one author's consecutive
/// changes, and reads them back as they were.
struct LogRowTests {
    @Test(arguments: StoreKind.allCases)
    func aBatchFromOneAuthorIsOneRowAndReadsBack(_ kind: StoreKind) throws {
        let folder = TemporaryFolder()
        let store = try makeStore(kind, folder)
        let (author, remote) = SyntheticWorkload.notebook(seed: 21, notes: 3, operations: 300)
        #expect(remote.count > 20)
        try store.apply(remote)
        #expect(try store.status().logRows == 1)
        // Changes of two authors, interleaved in runs: a row per run.
        let (_, other) = SyntheticWorkload.notebook(seed: 22, notes: 2, operations: 100)
        let half = other.count / 2
        try store.apply(Array(other[..<half]))
        try store.apply(Array(other[half...]))
        #expect(try store.status().logRows == 3)
        let id = try store.createNote(title: "local", body: "mine ")
        try store.appendText(id, "again ")
        #expect(try store.status().logRows == 5)
        let digest = try store.digest()
        try store.reload()
        #expect(try store.digest() == digest)
        #expect(try store.versionVector[author.replicaID] == author.versionVector[author.replicaID])
        #expect(try store.changes(since: VersionVector()).count > 0)
    }

    /// The snapshot is refreshed after `snapshotInterval` changes (as the notebook lists them),
    /// however many log rows hold them.
    @Test func aBigBatchStillBringsTheSnapshot() throws {
        // Two replicas that edit in turns and exchange everything each time: their changes do
        // not coalesce (each depends on the other's latest), so a history has many of them.
        let x = try NoteStore.openInMemory()
        let y = try NoteStore.openInMemory()
        let note = try x.createNote(title: "t", body: "start ")
        for i in 0 ..< 12 {
            try y.apply(try x.changes(since: try y.versionVector))
            try y.appendText(note, "y\(i) ")
            try x.appendText(note, "x\(i) ")
            try x.apply(try y.changes(since: try x.versionVector))
        }
        let history = try x.changes(since: VersionVector())
        #expect(history.count >= 16)
        let store = try NoteStore.openInMemory(options: StoreOptions(snapshotInterval: 16))
        try store.apply(history)
        let status = try store.status()
        #expect(status.logRows == 0)
        #expect(status.snapshotThroughRow > 0)
        let digest = try store.digest()
        try store.reload()
        #expect(try store.digest() == digest)
        #expect(digest == (try x.digest()))
    }

    @Test func notesReadsWhatNoteReads() throws {
        let store = try NoteStore.openInMemory()
        let a = try store.createNote(title: "a", body: "alpha ")
        let b = try store.createNote(title: "b", body: String(repeating: "beta gamma ", count: 400))
        let gone = try store.createNote(title: "c")
        try store.setState(gone, .deleted)
        let unknown = NoteID.random()
        let read = try store.notes([b, unknown, a, gone])
        #expect(read == [try store.note(b), nil, try store.note(a), nil])
        #expect(read[0]?.body?.count == 4400)
    }
}

/// The pending table is kept in line with the waiting changes one row at a time (released ones
/// deleted, new ones inserted), not rewritten: it must hold exactly the waiting changes, and read
/// back as them.
struct PendingTableTests {
    static func rows(_ store: NoteStore) throws -> [String] {
        try store.read("pending rows") { db in
            try Row.fetchAll(db, sql: "SELECT replica, start_seq, end_seq FROM pending_changes").map { row in
                "\((row[0] as Data).map { String(format: "%02x", $0) }.joined()) \(row[1] as Int64)-\(row[2] as Int64)"
            }.sorted()
        }
    }

    static func waiting(_ store: NoteStore) throws -> [String] {
        try store.pendingChanges.map { "\($0.replica.raw.bytes.map { String(format: "%02x", $0) }.joined()) \($0.startSeq)-\($0.endSeq)" }.sorted()
    }

    @Test(arguments: StoreKind.allCases)
    func thePendingTableHoldsExactlyTheWaitingChanges(_ kind: StoreKind) throws {
        let folder = TemporaryFolder()
        let store = try makeStore(kind, folder)
        let (author, remote) = SyntheticWorkload.notebook(seed: 14, notes: 3, operations: 300)
        var rng = SplitMix64(seed: 15)
        let shuffled = remote.shuffled(using: &rng)
        var most = 0
        for start in stride(from: 0, to: shuffled.count, by: 7) {
            try store.apply(Array(shuffled[start ..< min(start + 7, shuffled.count)]))
            let waiting = try Self.waiting(store)
            most = max(most, waiting.count)
            #expect(try Self.rows(store) == waiting)
            if start % 35 == 0 {
                // Read back as a restarted process would: the same waiting changes.
                try store.reload()
                #expect(try Self.waiting(store) == waiting)
            }
        }
        #expect(most > 10)
        #expect(try store.pendingChanges.isEmpty)
        #expect(try Self.rows(store).isEmpty)
        #expect(try store.digest() == author.digest())
    }
}

struct ReloadTests {
    @Test(arguments: StoreKind.allCases)
    func reloadReadsBackWhatWasCommitted(_ kind: StoreKind) throws {
        let folder = TemporaryFolder()
        let store = try makeStore(kind, folder, options: StoreOptions(snapshotInterval: 16))
        var ids: [NoteID] = []
        for i in 0 ..< 4 { ids.append(try store.createNote(title: "note \(i)", body: "body \(i)")) }
        for i in 0 ..< 40 { try store.appendText(ids[i % 4], " more \(i)") }
        // Some changes wait for a dependency: they must come back from the pending table.
        let (_, remote) = SyntheticWorkload.notebook(seed: 11, notes: 2, operations: 40)
        try store.apply(Array(remote.dropFirst()))
        let before = try store.notebook
        #expect(before.pendingCount > 0)

        try store.reload()
        let after = try store.notebook
        #expect(after.versionVector == before.versionVector)
        #expect(after.digest() == before.digest())
        #expect(after.pendingCount == before.pendingCount)

        // The store goes on as before: new edits get the next seq, the waiting changes are released.
        try store.appendText(ids[0], " after")
        #expect(try store.versionVector[store.replicaID] == before.versionVector[store.replicaID] + 6)  // a seq per character
        try store.apply([remote[0]])
        #expect(try store.pendingChanges.isEmpty)
        #expect(try store.note(ids[0])?.body.map { $0.hasSuffix(" after") } == true)
    }

    @Test func aQuarantinedChangeIsStillThereAfterReload() throws {
        let store = try NoteStore.openInMemory()
        let id = try store.createNote(title: "a", body: "xyz")
        let digest = try store.digest()
        let malformed = Change(
            replica: ReplicaID(Identifier128(high: 0, low: 1)), startSeq: 1, timestamp: Timestamp(milliseconds: 1),
            dependencies: VersionVector(),
            operations: [.insertText(note: id, origin: OpID(replica: ReplicaID(Identifier128(high: 0, low: 2)), seq: 1), text: ["x"])])
        #expect(try store.apply([malformed]).quarantined == 1)
        try store.reload()
        #expect(try store.digest() == digest)
        #expect(try store.notebook.quarantinedChanges.map(\.change) == [malformed])
        #expect(try store.quarantinedChanges().count == 1)
    }
}

struct PreviewTests {
    /// The preview as it was first written, a scalar at a time.
    static func reference(_ body: String) -> String {
        var result = String.UnicodeScalarView()
        var count = 0
        var started = false
        for scalar in body.unicodeScalars {
            if scalar == "\n" || scalar == "\r" {
                if started { break } else { continue }
            }
            if !started, scalar.properties.isWhitespace { continue }
            started = true
            result.append(scalar)
            count += 1
            if count >= 80 { break }
        }
        return String(result)
    }

    @Test func thePreviewIsTheFirstNonEmptyLineCutAt80Scalars() {
        let pieces = ["a", "word ", " ", "\n", "\r\n", "\t", "\u{A0}", "\u{2028}", "café", "🙂", "日本", "e\u{301}", "\u{85}", "  \n  "]
        var rng = SplitMix64(seed: 5)
        for _ in 0 ..< 2000 {
            let body = (0 ..< Int(rng.next() % 60)).map { _ in pieces[Int(rng.next() % UInt64(pieces.count))] }.joined()
            #expect(NoteStore.preview(of: body) == Self.reference(body), "\(body.debugDescription)")
        }
        #expect(NoteStore.preview(of: "\n\n  Title line\nsecond") == "Title line")
        #expect(NoteStore.preview(of: String(repeating: "x", count: 100)).unicodeScalars.count == 80)
    }
}

/// The write path binds its values through the SQLite C API (`Statement.run`).
struct RawStatementTests {
    @Test func emptyTextsAndMissingValuesAreStoredAsTheyAre() throws {
        let store = try NoteStore.openInMemory()
        let id = try store.createNote(title: "", body: "")
        var note = try #require(try store.note(id))
        #expect(note.title == "" && note.body == "" && note.preview == "" && note.color == nil && !note.pinned)
        try store.setColor(id, "red")
        try store.setPinned(id, true)
        try store.insertText(id, at: 0, "café 🙂 日本")
        note = try #require(try store.note(id))
        #expect(note.color == "red" && note.pinned && note.body == "café 🙂 日本" && note.bodyLength == 9)
        try store.setColor(id, nil)
        try store.setTitle(id, "")
        note = try #require(try store.note(id))
        #expect(note.color == nil && note.title == "")
        #expect(try store.search("café").map(\.note.id) == [id])
        try MaterializationTests.checkIndex(store)
    }

    /// note(_:) and notes(_:) read their columns with the C API, list(_:) through GRDB's rows.
    @Test func noteReadsTheRowAsListDoes() throws {
        var rng = SplitMix64(seed: 41)
        let store = try NoteStore.openInMemory(replicaID: ReplicaID.random(using: &rng))
        for _ in 0 ..< 150 { try MaterializationTests.randomEdit(store, &rng) }
        let first = try #require(try store.list(.all).first)
        try store.setColor(first.id, "blue")
        let listed = try store.list(.all, includeBody: true)
        #expect(listed.count > 3)
        #expect(listed.contains { $0.color != nil } && listed.contains { $0.color == nil })
        #expect(listed.contains { !$0.tags.isEmpty } && listed.contains { $0.state == .trashed || $0.pinned })
        for note in listed {
            #expect(try store.note(note.id) == note)
        }
        #expect(try store.notes(listed.map(\.id)) == listed.map { Optional($0) })
    }

    @Test func aFailingStatementThrowsSQLitesErrorAndLeavesTheStatementUsable() throws {
        let store = try NoteStore.openInMemory()
        try store.queue.write { db in
            let insert = try db.cachedStatement(sql: "INSERT INTO note_text (note, ord, body) VALUES (?, ?, ?)")
            try insert.run(.text("n"), .int(1), .text("one"))
            do {
                try insert.run(.text("n"), .int(1), .text("again"))
                Issue.record("a duplicate (note, ord) was accepted")
            } catch let error as DatabaseError {
                #expect(error.resultCode == .SQLITE_CONSTRAINT)
                #expect(error.message?.contains("UNIQUE constraint failed") == true)
            }
            try insert.run(.text("n"), .int(2), .text("two"))
            #expect(try String.fetchAll(db, sql: "SELECT body FROM note_text WHERE note = 'n' ORDER BY ord") == ["one", "two"])
        }
    }
}

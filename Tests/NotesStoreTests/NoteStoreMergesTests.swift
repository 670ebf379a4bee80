import Foundation
import GRDB
import NotesCRDT
@testable import NotesStore
import Testing

/// A wall clock a test sets by hand, shared by the stores that read it.
final class SettableClock: WallClock, @unchecked Sendable {
    private let lock = NSLock()
    private var now: UInt64
    init(_ now: UInt64) { self.now = now }
    func milliseconds() -> UInt64 { lock.withLock { now } }
    func set(_ value: UInt64) { lock.withLock { now = value } }
}

/// Deleted notes, deletes against edits, clocks far ahead and merges to review, as the store
/// keeps and shows them (NoteStore+Merges.swift).
struct NoteStoreMergesTests {
    static let start: UInt64 = 1_700_000_000_000
    static let tenYears: UInt64 = 10 * 365 * 86_400_000

    /// Both stores get what the other has.
    func exchange(_ a: NoteStore, _ b: NoteStore) throws {
        try b.apply(try a.changes(since: try b.versionVector))
        try a.apply(try b.changes(since: try a.versionVector))
    }

    func twoStores(_ kind: StoreKind, _ folder: TemporaryFolder, clockA: UInt64 = start, clockB: UInt64 = start)
        throws -> (NoteStore, NoteStore) {
        let a: NoteStore
        let b: NoteStore
        switch kind {
        case .memory:
            a = try NoteStore.openInMemory(options: StoreOptions(wallClock: FixedWallClock(clockA)))
            b = try NoteStore.openInMemory(options: StoreOptions(wallClock: FixedWallClock(clockB)))
        case .file:
            a = try NoteStore.open(path: folder.file("a.db"), options: StoreOptions(wallClock: FixedWallClock(clockA)))
            b = try NoteStore.open(path: folder.file("b.db"), options: StoreOptions(wallClock: FixedWallClock(clockB)))
        }
        return (a, b)
    }

    /// Issue 18, part 2, in the store: the note comes back to the trash on both sides, listed
    /// with the mark, both the delete and the edit in its history.
    @Test(arguments: StoreKind.allCases)
    func aNoteDeletedWhileEditedElsewhereIsInTheTrashOnBothSides(_ kind: StoreKind) throws {
        let folder = TemporaryFolder()
        let (a, b) = try twoStores(kind, folder, clockB: Self.start + 5)
        let id = try a.createNote(title: "shared", body: "base")
        try exchange(a, b)
        #expect(try a.setState(id, .deleted))
        #expect(try b.appendText(id, " from B"))
        #expect(try a.list(.all).isEmpty)
        #expect(try a.list(.deleted).map(\.id) == [id])
        try exchange(a, b)
        for store in [a, b] {
            let trashed = try store.list(.trashed)
            #expect(trashed.map(\.id) == [id])
            #expect(trashed.first?.restoredByConcurrentEdit == true)
            #expect(trashed.first?.hasConflicts == true)
            #expect(try store.note(id)?.body == "base from B")
            #expect(try store.list(.deleted).isEmpty)
            #expect(try store.conflictedNotes().map(\.id) == [id])
            let lines = try store.history(of: id).flatMap(\.summary)
            #expect(lines.contains { $0.hasSuffix(": deleted") })
            #expect(lines.contains { $0.hasSuffix("inserted 7 characters") })
        }
        #expect(try a.digest() == b.digest())
        #expect(try MaterializationTests.tables(a) == MaterializationTests.tables(b))
    }

    /// A deleted note is found by id prefix, listed with `.deleted`, shown with its body, not
    /// editable until restored, and restored with everything in it.
    @Test(arguments: StoreKind.allCases)
    func aDeletedNoteCanBeFoundShownAndRestored(_ kind: StoreKind) throws {
        let folder = TemporaryFolder()
        let store = try makeStore(kind, folder)
        let id = try store.createNote(title: "old", body: "keep me", tags: ["work"])
        try store.setPinned(id, true)
        try store.setState(id, .deleted)
        #expect(try store.resolveNote(String(id.description.prefix(6))) == id)
        #expect(try store.note(id) == nil)
        #expect(try store.isDeleted(id))
        let deleted = try #require(try store.list(.deleted).first)
        #expect(deleted.id == id && deleted.state == .deleted && deleted.title == "old" && deleted.preview == "keep me")
        #expect(deleted.deletedAt != nil)
        let shown = try #require(try store.deletedNote(id))
        #expect(shown.body == "keep me" && shown.tags == ["work"] && shown.pinned)
        #expect(throws: StoreError.self) { try store.setTitle(id, "edited") }
        do {
            try store.appendText(id, "x")
        } catch let error as StoreError {
            #expect(error.code == .notFound && error.message.contains("is deleted"))
        }
        #expect(try store.setState(id, .active))
        #expect(try store.note(id)?.body == "keep me")
        #expect(try store.list(.deleted).isEmpty)
        #expect(try store.list().map(\.id) == [id])
        #expect(try store.isDeleted(id) == false)
    }

    /// Commands that change nothing record nothing: no log row, no new operation.
    @Test(arguments: StoreKind.allCases)
    func editsThatChangeNothingRecordNothing(_ kind: StoreKind) throws {
        let folder = TemporaryFolder()
        let store = try makeStore(kind, folder)
        let id = try store.createNote(title: "same", tags: ["work"])
        try store.setPinned(id, true)
        let version = try store.versionVector
        let entries = try store.history().count
        #expect(try store.setPinned(id, true) == false)
        #expect(try store.setTag(id, "home", member: false) == false)
        #expect(try store.setState(id, .active) == false)
        #expect(try store.setTitle(id, "same") == false)
        #expect(try store.setColor(id, nil) == false)
        #expect(try store.setArchived(id, false) == false)
        #expect(try store.resolveConflicts(id) == false)
        #expect(try store.replaceBody(id, with: "") == false)
        #expect(try store.versionVector == version)
        #expect(try store.history().count == entries)
    }

    /// Concurrent titles mark the note on both sides; a resolve on one clears it on both, and
    /// resolving again changes nothing.
    @Test(arguments: StoreKind.allCases)
    func aResolveOnOneStoreClearsTheMarkOnBoth(_ kind: StoreKind) throws {
        let folder = TemporaryFolder()
        let (a, b) = try twoStores(kind, folder, clockB: Self.start + 5)
        let id = try a.createNote(title: "plan")
        try exchange(a, b)
        try a.setTitle(id, "plan A")
        try b.setTitle(id, "plan B")
        try exchange(a, b)
        for store in [a, b] {
            #expect(try store.note(id)?.hasConflicts == true)
            let conflict = try #require(try store.conflicts(of: id).first)
            #expect(conflict.kind == .field(.title))
            #expect(conflict.sides.map(\.note.title) == (a.replicaID < b.replicaID ? ["plan A", "plan B"] : ["plan B", "plan A"]))
        }
        #expect(try b.resolveConflicts(id))
        #expect(try b.resolveConflicts(id) == false)
        try exchange(a, b)
        for store in [a, b] {
            #expect(try store.note(id)?.hasConflicts == false)
            #expect(try store.conflictedNotes().isEmpty)
        }
        #expect(try a.history(of: id).flatMap(\.summary).contains { $0.contains("resolved") })
    }

    /// A note stamped by a clock ten years ahead does not stay on top of the list: it sorts by
    /// when this device saw it change (plus the drift bound), and a title written after seeing
    /// its title wins.
    @Test(arguments: StoreKind.allCases)
    func aNoteFromTheFutureDoesNotStayOnTop(_ kind: StoreKind) throws {
        let folder = TemporaryFolder()
        let clock = SettableClock(Self.start)
        let (future, _) = try twoStores(kind, folder, clockA: Self.start + Self.tenYears)
        let local: NoteStore = kind == .memory
            ? try NoteStore.openInMemory(options: StoreOptions(wallClock: clock))
            : try NoteStore.open(path: folder.file("local.db"), options: StoreOptions(wallClock: clock))
        let fromTheFuture = try future.createNote(title: "from 2033")
        try exchange(future, local)
        clock.set(Self.start + 120_000)
        let mine = try local.createNote(title: "mine, two minutes later")
        #expect(try local.list().map(\.id) == [mine, fromTheFuture])
        let stored = try #require(try local.note(fromTheFuture))
        #expect(stored.updatedAt > Self.start + Self.tenYears - 1, "the note keeps the time its change carries")
        #expect(stored.effectiveUpdatedAt == Self.start + NoteStore.updateTimeDrift)
        #expect(try local.setTitle(fromTheFuture, "renamed here"))
        try exchange(future, local)
        #expect(try future.note(fromTheFuture)?.title == "renamed here")
        #expect(try local.note(fromTheFuture)?.title == "renamed here")
    }

    /// A database from before migration v5 gets its tombstones, marks and restored notes at the
    /// next open, from the CRDT state (the same tables as materializing from nothing).
    @Test func aDatabaseFromBeforeVersionFiveIsBroughtUpToDate() throws {
        let folder = TemporaryFolder()
        let path = folder.file("old.db")
        let (a, b) = try twoStores(.memory, folder, clockB: Self.start + 5)
        let restored = try a.createNote(title: "restored", body: "x")
        let deleted = try a.createNote(title: "deleted")
        let merged = try a.createNote(title: "merged")
        try exchange(a, b)
        try a.setState(restored, .deleted)
        try b.appendText(restored, "y")
        try a.setState(deleted, .deleted)
        try a.setTitle(merged, "from a")
        try b.setTitle(merged, "from b")
        try exchange(a, b)
        let old = try NoteStore.open(path: path)
        try old.apply(try a.changes(since: VersionVector()))
        try old.close()
        // What version 4 left: no v5 columns and tables, and rows only for notes not deleted by
        // last-writer-wins (as it materialized them).
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            try db.execute(sql: """
                DROP TABLE deleted_notes;
                DROP TABLE rematerialize;
                DROP INDEX notes_listing;
                ALTER TABLE notes DROP COLUMN conflicted;
                ALTER TABLE notes DROP COLUMN restored;
                ALTER TABLE notes DROP COLUMN changed_here_at;
                CREATE INDEX notes_listing ON notes (state, archived, pinned DESC, updated_at DESC);
                DELETE FROM notes WHERE id = '\(restored)';
                DELETE FROM note_tags WHERE note = '\(restored)';
                DELETE FROM note_text WHERE note = '\(restored)';
                DELETE FROM grdb_migrations WHERE identifier = 'v5-deleted-notes-conflicts-and-local-change-times';
                """)
        }
        try queue.close()
        let reopened = try NoteStore.open(path: path)
        #expect(try reopened.list(.deleted).map(\.id) == [deleted])
        #expect(try reopened.list(.trashed).map(\.id) == [restored])
        #expect(try reopened.conflictedNotes().map(\.id).sorted() == [restored, merged].sorted())
        #expect(try MaterializationTests.tables(reopened) == MaterializationTests.tables(a))
        let again = try NoteStore.open(path: path)  // the work is done once
        #expect(try again.read("rematerialize") { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM rematerialize") } == 0)
    }
}

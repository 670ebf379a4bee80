import Foundation
import GRDB
import NotesCRDT

// Deleted notes (tombstones) and merges of concurrent edits, as the store keeps and shows them.

extension StoredNote {
    /// A note from the CRDT (`Notebook.note(_:)`, a side of `NoteStore.conflicts(of:)`), as the
    /// store's reads give notes: with its body, and `deletedAt` for a deleted one.
    public init(_ note: Note, deletedAt: UInt64? = nil) {
        self.init(note, body: note.body, deletedAt: deletedAt)
    }

    init(_ note: Note, body: String?, deletedAt: UInt64?) {
        let scalars = note.body.unicodeScalars
        self.init(id: note.id, title: note.title, body: body, preview: NoteStore.preview(of: note.body),
                  bodyLength: scalars.count, pinned: note.pinned, archived: note.archived, color: note.color,
                  state: note.state, tags: note.tags, createdAt: note.createdAt, updatedAt: note.updatedAt,
                  hasConflicts: note.hasConflicts, restoredByConcurrentEdit: note.restoredByConcurrentEdit,
                  deletedAt: deletedAt)
    }
}

extension NoteStore {
    /// Writes the tombstone row of a note that is deleted as a reader sees it (`Note.state`).
    func writeTombstone(_ id: NoteID, _ db: Database) throws {
        guard let note = inLoadedNotebook({ $0.noteFields(id) }), note.state == .deleted else { return }
        let body = inLoadedNotebook { $0.body(of: id) }
        let utf8 = body?.utf8 ?? []
        let deletedAt = inLoadedNotebook { $0.fieldTimestamp(id, .state)?.milliseconds } ?? note.updatedAt
        try statement("""
            INSERT OR REPLACE INTO deleted_notes (id, title, created_at, updated_at, deleted_at, body_length, preview)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """, db).run(.text(id.description), .text(note.title),
                         .int(Int64(bitPattern: note.createdAt)), .int(Int64(bitPattern: note.updatedAt)),
                         .int(Int64(bitPattern: deletedAt)), .int(Int64(body?.count ?? 0)), .text(NoteStore.preview(ofUTF8: utf8)))
    }

    /// Deleted notes, most recently deleted first. (Their tags are not listed: a tombstone row
    /// holds a summary, and `deletedNote(_:)` every field.)
    func deletedNotes(tag: String?, includeBody: Bool, limit: Int?) throws -> [StoredNote] {
        guard tag == nil else { throw StoreError(.invalidArgument, "deleted notes are not listed by tag") }
        var notes = try read("cannot list the deleted notes") { db -> [StoredNote] in
            var sql = "SELECT id, CAST(title AS BLOB), created_at, updated_at, deleted_at, body_length, CAST(preview AS BLOB) FROM deleted_notes ORDER BY deleted_at DESC, id"
            var arguments: StatementArguments = []
            if let limit {
                sql += " LIMIT ?"
                _ = arguments.append(contentsOf: [max(0, limit)])
            }
            return try Row.fetchAll(db, sql: sql, arguments: arguments).map { row in
                let hex = try row.stored(0, as: String.self)
                guard let id = NoteID(hex: hex) else { throw StoreError(.corrupt, "a deleted note has a bad id \(hex)") }
                return StoredNote(id: id, title: try row.storedText(1), body: nil, preview: try row.storedText(6), bodyLength: try row.stored(5),
                                  pinned: false, archived: false, color: nil, state: .deleted, tags: [],
                                  createdAt: try row.storedUnsigned(2), updatedAt: try row.storedUnsigned(3),
                                  deletedAt: try row.storedUnsigned(4))
            }
        }
        if includeBody {
            let notebook = try self.notebook
            for i in notes.indices { notes[i].body = notebook.note(notes[i].id)?.body ?? "" }
        }
        return notes
    }

    /// A deleted note, with its body and every field (from the CRDT: the tombstone row holds a
    /// summary), or nil when the note is not deleted or unknown.
    public func deletedNote(_ id: NoteID) throws -> StoredNote? {
        let deletedAt = try read("cannot read note \(id)") { db in
            try Int64.fetchOne(db, sql: "SELECT deleted_at FROM deleted_notes WHERE id = ?", arguments: [id.description])
        }
        guard let deletedAt, let note = try notebook.note(id), note.state == .deleted else { return nil }
        return StoredNote(note, body: note.body, deletedAt: try NoteStore.unsigned(deletedAt, what: "deleted_at"))
    }

    /// Whether a note is deleted (has a tombstone row).
    public func isDeleted(_ id: NoteID) throws -> Bool {
        try read("cannot read note \(id)") { db in
            try Int.fetchOne(db, sql: "SELECT 1 FROM deleted_notes WHERE id = ?", arguments: [id.description]) != nil
        }
    }

    /// The notes marked as merged with concurrent edits that nobody resolved (`Note.hasConflicts`),
    /// pinned first, then the most recently changed. Reads the materialized table only.
    public func conflictedNotes() throws -> [StoredNote] {
        try read("cannot list the notes with merges to review") { db in
            var notes: [StoredNote] = []
            let rows = try Row.fetchCursor(db, sql: "SELECT \(NoteStore.noteColumns) FROM notes WHERE conflicted = 1 ORDER BY \(NoteStore.listOrder)")
            while let row = try rows.next() { notes.append(try NoteStore.storedNote(row)) }
            return notes
        }
    }

    /// The unresolved merges of concurrent edits on a note: each side's version and the merged
    /// result (`Notebook.conflicts(of:)`; loads the CRDT state).
    public func conflicts(of id: NoteID) throws -> [NoteConflict] {
        let notebook = try self.notebook
        guard notebook.note(id) != nil else { throw StoreError(.notFound, "there is no note \(id)") }
        do {
            return try notebook.conflicts(of: id)
        } catch let error as CRDTError {
            throw StoreError(.corrupt, "the merges of note \(id) cannot be replayed: \(error.message)")
        }
    }

    /// Marks a note's merges as reviewed, on every replica this reaches (`Notebook.resolveConflicts(_:)`).
    ///
    /// - Returns: whether anything was resolved (false: the note had no mark; nothing is recorded).
    @discardableResult
    public func resolveConflicts(_ id: NoteID) throws -> Bool {
        try edit(requiringKnown: id) { try $0.resolveConflicts(id) != nil }
    }

    /// Re-materializes every note once when a migration asked for it (a new column or table that
    /// the CRDT fills from the existing log), in one transaction.
    func rematerializeIfAsked() throws {
        lock.lock(); defer { lock.unlock() }
        let asked = try read("cannot read the store's pending work") { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM rematerialize") ?? 0
        }
        guard asked > 0 else { return }
        try writeTransaction("cannot bring the materialized notes up to date") { db in
            dirty = true
            var stale = StaleIndexRows()
            for id in inLoadedNotebook({ $0.noteIDs }) {
                try materialize(id, bodyTouched: false, &stale, db)
            }
            try recordStaleIndex(stale, db)
            try db.execute(sql: "DELETE FROM rematerialize")
            try bumpRevision(db)
        }
    }
}

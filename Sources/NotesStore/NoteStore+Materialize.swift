import Foundation
import GRDB
import NotesCRDT

/// One body chunk as stored in `note_text`.
struct StoredChunk: Equatable {
    var id: Int64
    var ord: Int64
    var body: String
}

/// What the materialized tables hold for one note, as the connection that wrote (or read) them
/// in a write transaction knows it: no row, or the row's title and tag list and, when known, its
/// body chunks in order. It saves reading them back before every re-materialization; it is only
/// ever a copy of committed rows (see `NoteStore.Loaded.materialized`).
enum MaterializedNote {
    case absent
    case present(title: String, tags: String, chunks: [StoredChunk]?)
}

/// The full-text index entries a transaction removes and adds, in order, written to `note_fts`
/// after the transaction's other statements (`NoteStore.writeIndex`).
///
/// FTS5 writes what it holds in memory to a new index segment at the end of every statement that
/// opens a statement journal once it has pending data. The triggers that kept `note_fts` in step
/// with `note_text` made every write of a title or a chunk such a statement, so a batch that
/// touched twenty chunks wrote twenty segments (and merged them later). Single-row `INSERT`s into
/// `note_fts` open no statement journal: the entries of one transaction go to one segment, at
/// COMMIT.
struct IndexWrites {
    enum Kind { case delete, insert }
    var entries: [(kind: Kind, row: Int64, title: String, body: String)] = []
    mutating func delete(_ row: Int64, title: String, body: String) { entries.append((.delete, row, title, body)) }
    mutating func insert(_ row: Int64, title: String, body: String) { entries.append((.insert, row, title, body)) }
}

extension NoteStore {
    /// Gap between the `ord` of consecutive body chunks, so a chunk can be inserted between two.
    static let chunkOrderGap: Int64 = 1 << 20

    /// Re-materializes every note the changes touched (and every note in a tag they renamed).
    ///
    /// - Returns: how many notes were written.
    @discardableResult
    func materialize(_ changes: [Change], _ db: Database) throws -> Int {
        var touched: [NoteID: Bool] = [:]  // note -> body touched
        var renamedTags: Set<String> = []
        for change in changes {
            for op in change.operations {
                switch op {
                case .setNoteField(let note, _, _):
                    if touched[note] == nil { touched[note] = false }
                case .insertText(let note, _, _), .deleteText(let note, _), .deleteEach(let note, _):
                    touched[note] = true
                case .setTagField(let tag, let field, _):
                    if field == .name { renamedTags.insert(tag) }
                }
            }
        }
        for tag in renamedTags {
            for hex in try String.fetchAll(db.cachedStatement(sql: "SELECT note FROM note_tags WHERE tag = ?"), arguments: [tag]) {
                if let id = NoteID(hex: hex), touched[id] == nil { touched[id] = false }
            }
        }
        var index = IndexWrites()
        for (note, bodyTouched) in touched {
            try materialize(note, bodyTouched: bodyTouched, &index, db)
        }
        try writeIndex(index, db)
        return touched.count
    }

    /// Writes the index entries, in order: a delete names the row and the exact values it was
    /// indexed with (FTS5's external-content rule), an insert the new values.
    func writeIndex(_ index: IndexWrites, _ db: Database) throws {
        guard !index.entries.isEmpty else { return }
        // By row, keeping each row's entries in their order: FTS5 also writes out what it holds
        // when a row id comes that is lower than the previous one.
        let entries = index.entries.enumerated().sorted { ($0.element.row, $0.offset) < ($1.element.row, $1.offset) }.map(\.element)
        let delete = try db.cachedStatement(sql: "INSERT INTO note_fts (note_fts, rowid, title, body) VALUES ('delete', ?, ?, ?)")
        let insert = try db.cachedStatement(sql: "INSERT INTO note_fts (rowid, title, body) VALUES (?, ?, ?)")
        for entry in entries {
            try (entry.kind == .delete ? delete : insert).run(.int(entry.row), .text(entry.title), .text(entry.body))
        }
    }

    /// Writes one note's materialized row, tag rows, title and body chunks from the notebook.
    ///
    /// Only what differs from the stored row is written: the row itself (every edit moves
    /// `updated_at`), the tag rows when the tag list changed, the title row when the title
    /// changed, and, when the body was touched, the body chunks that differ (`syncChunks`).
    /// What the tables hold is taken from `Loaded.materialized` when this connection knows it,
    /// else read. Every statement is compiled once per connection.
    func materialize(_ id: NoteID, bodyTouched: Bool, _ index: inout IndexWrites, _ db: Database) throws {
        let hex = id.description
        guard let note = loaded!.notebook.noteFields(id), note.state != .deleted else {
            try db.cachedStatement(sql: "DELETE FROM notes WHERE id = ?").execute(arguments: [hex])
            try db.cachedStatement(sql: "DELETE FROM note_tags WHERE note = ?").execute(arguments: [hex])
            for row in try Row.fetchAll(db.cachedStatement(sql: "SELECT id, title, body FROM note_text WHERE note = ?"), arguments: [hex]) {
                index.delete(row[0], title: row[1], body: row[2])
            }
            try db.cachedStatement(sql: "DELETE FROM note_text WHERE note = ?").execute(arguments: [hex])
            remember(id, .absent)
            return
        }
        let old = try materializedRow(id, db)
        let isNew = old == nil
        let tags = note.tags.joined(separator: "\u{1F}")
        var body = ""
        if !isNew, bodyTouched {
            let text = loaded!.notebook.body(of: id)
            body = text?.string ?? ""
            try db.cachedStatement(sql: """
                UPDATE notes SET title = ?, pinned = ?, archived = ?, color = ?, state = ?, tags = ?,
                    created_at = ?, updated_at = ?, body_length = ?, preview = ? WHERE id = ?
                """).run(.text(note.title), .bool(note.pinned), .bool(note.archived), .optionalText(note.color),
                         .text(note.state.rawValue), .text(tags), .int(Int64(note.createdAt)), .int(Int64(note.updatedAt)),
                         .int(Int64(text?.count ?? 0)), .text(NoteStore.preview(of: body)), .text(hex))
        } else if isNew {
            let text = loaded!.notebook.body(of: id)
            body = text?.string ?? ""
            try db.cachedStatement(sql: """
                INSERT INTO notes (id, title, pinned, archived, color, state, tags, created_at, updated_at, body_length, preview)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (id) DO UPDATE SET title = excluded.title, pinned = excluded.pinned,
                    archived = excluded.archived, color = excluded.color, state = excluded.state,
                    tags = excluded.tags, created_at = excluded.created_at, updated_at = excluded.updated_at,
                    body_length = excluded.body_length, preview = excluded.preview
                """).run(.text(hex), .text(note.title), .bool(note.pinned), .bool(note.archived), .optionalText(note.color),
                         .text(note.state.rawValue), .text(tags), .int(Int64(note.createdAt)), .int(Int64(note.updatedAt)),
                         .int(Int64(text?.count ?? 0)), .text(NoteStore.preview(of: body)))
        } else {
            try db.cachedStatement(sql: """
                UPDATE notes SET title = ?, pinned = ?, archived = ?, color = ?, state = ?, tags = ?,
                    created_at = ?, updated_at = ? WHERE id = ?
                """).run(.text(note.title), .bool(note.pinned), .bool(note.archived), .optionalText(note.color),
                         .text(note.state.rawValue), .text(tags), .int(Int64(note.createdAt)), .int(Int64(note.updatedAt)),
                         .text(hex))
        }
        // The tag rows follow the row's tag list, the title row its title (both are written in the
        // same transactions as the row), so they are rewritten only when those changed.
        if isNew || old!.tags != tags {
            try db.cachedStatement(sql: "DELETE FROM note_tags WHERE note = ?").execute(arguments: [hex])
            let insertTag = try db.cachedStatement(sql: "INSERT OR IGNORE INTO note_tags (tag, note) VALUES (?, ?)")
            for name in note.tags {
                try insertTag.execute(arguments: [Notebook.tagKey(name), hex])
            }
        }
        if isNew {
            if let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT id, title, body FROM note_text WHERE note = ? AND ord = -1"),
                                          arguments: [hex]) {
                if (row[1] as String) != note.title {
                    try retitle(row[0], from: row[1], to: note.title, body: row[2], &index, db)
                }
            } else {
                try db.cachedStatement(sql: "INSERT INTO note_text (note, ord, title) VALUES (?, -1, ?)").run(.text(hex), .text(note.title))
                index.insert(db.lastInsertedRowID, title: note.title, body: "")
            }
        } else if old!.title != note.title {
            if let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT id, title, body FROM note_text WHERE note = ? AND ord = -1"),
                                          arguments: [hex]) {
                try retitle(row[0], from: row[1], to: note.title, body: row[2], &index, db)
            }
        }
        var chunks = old?.chunks
        if isNew || bodyTouched {
            chunks = try syncChunks(hex, body: body, old: isNew ? nil : old!.chunks, &index, db)
        }
        remember(id, .present(title: note.title, tags: tags, chunks: chunks))
    }

    /// Sets the title of a title row, and its index entry.
    private func retitle(_ row: Int64, from old: String, to title: String, body: String, _ index: inout IndexWrites, _ db: Database) throws {
        try db.cachedStatement(sql: "UPDATE note_text SET title = ? WHERE id = ?").run(.text(title), .int(row))
        index.delete(row, title: old, body: body)
        index.insert(row, title: title, body: body)
    }

    /// The stored title and tag list of a note (nil: it has no row), from what this connection
    /// knows or from the table.
    func materializedRow(_ id: NoteID, _ db: Database) throws -> (title: String, tags: String, chunks: [StoredChunk]?)? {
        switch loaded!.materialized[id] {
        case .present(let title, let tags, let chunks)?:
            return (title, tags, chunks)
        case .absent?:
            return nil
        case nil:
            guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT title, tags FROM notes WHERE id = ?"),
                                             arguments: [id.description]) else {
                remember(id, .absent)
                return nil
            }
            let known = (title: row[0] as String, tags: row[1] as String, chunks: [StoredChunk]?.none)
            remember(id, .present(title: known.title, tags: known.tags, chunks: nil))
            return known
        }
    }

    /// Records what the tables hold for a note (in the transaction that wrote or read it).
    /// The record is bounded: past `materializedLimit` notes it starts again from nothing.
    func remember(_ id: NoteID, _ note: MaterializedNote) {
        if loaded!.materialized.count >= NoteStore.materializedLimit, loaded!.materialized[id] == nil {
            loaded!.materialized.removeAll(keepingCapacity: true)
        }
        loaded!.materialized[id] = note
    }

    /// The most notes whose materialized state a store keeps in memory.
    static let materializedLimit = 512

    /// Brings a note's body chunks in line with `body`, writing only the chunks that differ.
    ///
    /// - Parameter old: the stored chunks in order, when known (else they are read).
    /// - Returns: the chunks stored now, in order.
    func syncChunks(_ hex: String, body: String, old known: [StoredChunk]?, _ index: inout IndexWrites,
                    _ db: Database) throws -> [StoredChunk] {
        let new = TextChunker.chunks(body)
        let old = try known ?? Row.fetchAll(db.cachedStatement(sql: "SELECT id, ord, body FROM note_text WHERE note = ? AND ord >= 0 ORDER BY ord"),
                                            arguments: [hex]).map { StoredChunk(id: $0[0], ord: $0[1], body: $0[2]) }
        var prefix = 0
        let limit = min(old.count, new.count)
        while prefix < limit, old[prefix].body == new[prefix] { prefix += 1 }
        var suffix = 0
        while suffix < limit - prefix, old[old.count - 1 - suffix].body == new[new.count - 1 - suffix] { suffix += 1 }
        let oldMiddle = old[prefix ..< old.count - suffix]
        let newMiddle = new[prefix ..< new.count - suffix]
        let updated = min(oldMiddle.count, newMiddle.count)
        var result = Array(old[..<prefix])
        result.reserveCapacity(new.count)
        let update = try db.cachedStatement(sql: "UPDATE note_text SET body = ? WHERE id = ?")
        for i in 0 ..< updated {
            let row = oldMiddle[prefix + i]
            try update.run(.text(newMiddle[prefix + i]), .int(row.id))
            index.delete(row.id, title: "", body: row.body)
            index.insert(row.id, title: "", body: newMiddle[prefix + i])
            result.append(StoredChunk(id: row.id, ord: row.ord, body: newMiddle[prefix + i]))
        }
        let delete = try db.cachedStatement(sql: "DELETE FROM note_text WHERE id = ?")
        for row in oldMiddle.dropFirst(updated) {
            try delete.run(.int(row.id))
            index.delete(row.id, title: "", body: row.body)
        }
        let extra = Array(newMiddle.dropFirst(updated))
        guard !extra.isEmpty else {
            result.append(contentsOf: old[(old.count - suffix)...])
            return result
        }
        let low: Int64 = prefix + updated > 0 ? old[prefix + updated - 1].ord : 0
        let step: Int64
        if suffix > 0 {
            step = (old[old.count - suffix].ord - low) / Int64(extra.count + 1)
        } else {
            step = NoteStore.chunkOrderGap
        }
        let insert = try db.cachedStatement(sql: "INSERT INTO note_text (note, ord, body) VALUES (?, ?, ?)")
        if step < 1 {
            // No room between the neighbours: number the whole body afresh.
            // The rows still there are the prefix, the updated ones (with their new text) and the suffix.
            for row in result + old[(old.count - suffix)...] {
                index.delete(row.id, title: "", body: row.body)
            }
            try db.cachedStatement(sql: "DELETE FROM note_text WHERE note = ? AND ord >= 0").execute(arguments: [hex])
            result.removeAll(keepingCapacity: true)
            for (position, chunk) in new.enumerated() {
                let ord = Int64(position + 1) * NoteStore.chunkOrderGap
                try insert.run(.text(hex), .int(ord), .text(chunk))
                index.insert(db.lastInsertedRowID, title: "", body: chunk)
                result.append(StoredChunk(id: db.lastInsertedRowID, ord: ord, body: chunk))
            }
            return result
        }
        for (position, chunk) in extra.enumerated() {
            let ord = low + Int64(position + 1) * step
            try insert.run(.text(hex), .int(ord), .text(chunk))
            index.insert(db.lastInsertedRowID, title: "", body: chunk)
            result.append(StoredChunk(id: db.lastInsertedRowID, ord: ord, body: chunk))
        }
        result.append(contentsOf: old[(old.count - suffix)...])
        return result
    }

    /// The body's first non-empty line, at most 80 scalars.
    static func preview(of body: String) -> String {
        // One slice of the body: past the leading blank lines and whitespace, up to the line's
        // end or 80 scalars.
        let scalars = body.unicodeScalars
        var start = scalars.startIndex
        while start < scalars.endIndex, scalars[start].properties.isWhitespace { start = scalars.index(after: start) }
        var end = start
        var count = 0
        while end < scalars.endIndex, count < 80, scalars[end] != "\n", scalars[end] != "\r" {
            end = scalars.index(after: end)
            count += 1
        }
        return String(scalars[start ..< end])
    }
}

import Foundation
import GRDB
import NotesCRDT

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
        for (note, bodyTouched) in touched {
            try materialize(note, bodyTouched: bodyTouched, db)
        }
        return touched.count
    }

    /// Writes one note's materialized row, tag rows, title and body chunks from the notebook.
    ///
    /// Only what differs from the stored row is written: the row itself (every edit moves
    /// `updated_at`), the tag rows when the tag list changed, the title row when the title
    /// changed, and, when the body was touched, the body chunks that differ (`syncChunks`).
    /// Every statement is compiled once per connection.
    func materialize(_ id: NoteID, bodyTouched: Bool, _ db: Database) throws {
        let hex = id.description
        guard let note = loaded!.notebook.noteFields(id), note.state != .deleted else {
            try db.cachedStatement(sql: "DELETE FROM notes WHERE id = ?").execute(arguments: [hex])
            try db.cachedStatement(sql: "DELETE FROM note_tags WHERE note = ?").execute(arguments: [hex])
            try db.cachedStatement(sql: "DELETE FROM note_text WHERE note = ?").execute(arguments: [hex])
            return
        }
        let old = try Row.fetchOne(db.cachedStatement(sql: "SELECT title, tags FROM notes WHERE id = ?"), arguments: [hex])
        let isNew = old == nil
        let tags = note.tags.joined(separator: "\u{1F}")
        var body = ""
        if isNew || bodyTouched {
            let text = loaded!.notebook.body(of: id)
            body = text?.string ?? ""
            try db.cachedStatement(sql: """
                INSERT INTO notes (id, title, pinned, archived, color, state, tags, created_at, updated_at, body_length, preview)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (id) DO UPDATE SET title = excluded.title, pinned = excluded.pinned,
                    archived = excluded.archived, color = excluded.color, state = excluded.state,
                    tags = excluded.tags, created_at = excluded.created_at, updated_at = excluded.updated_at,
                    body_length = excluded.body_length, preview = excluded.preview
                """).execute(arguments: [hex, note.title, note.pinned, note.archived, note.color, note.state.rawValue, tags,
                                         Int64(note.createdAt), Int64(note.updatedAt), text?.count ?? 0,
                                         NoteStore.preview(of: body)])
        } else {
            try db.cachedStatement(sql: """
                UPDATE notes SET title = ?, pinned = ?, archived = ?, color = ?, state = ?, tags = ?,
                    created_at = ?, updated_at = ? WHERE id = ?
                """).execute(arguments: [note.title, note.pinned, note.archived, note.color, note.state.rawValue, tags,
                                         Int64(note.createdAt), Int64(note.updatedAt), hex])
        }
        // The tag rows follow the row's tag list, the title row its title (both are written in the
        // same transactions as the row), so they are rewritten only when those changed.
        if isNew || (old![1] as String) != tags {
            try db.cachedStatement(sql: "DELETE FROM note_tags WHERE note = ?").execute(arguments: [hex])
            let insertTag = try db.cachedStatement(sql: "INSERT OR IGNORE INTO note_tags (tag, note) VALUES (?, ?)")
            for name in note.tags {
                try insertTag.execute(arguments: [Notebook.tagKey(name), hex])
            }
        }
        if isNew {
            if let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT id, title FROM note_text WHERE note = ? AND ord = -1"),
                                          arguments: [hex]) {
                if (row["title"] as String) != note.title {
                    try db.cachedStatement(sql: "UPDATE note_text SET title = ? WHERE id = ?").execute(arguments: [note.title, row["id"] as Int64])
                }
            } else {
                try db.cachedStatement(sql: "INSERT INTO note_text (note, ord, title) VALUES (?, -1, ?)").execute(arguments: [hex, note.title])
            }
        } else if (old![0] as String) != note.title {
            try db.cachedStatement(sql: "UPDATE note_text SET title = ? WHERE note = ? AND ord = -1").execute(arguments: [note.title, hex])
        }
        if isNew || bodyTouched {
            try syncChunks(hex, body: body, db)
        }
    }

    /// Brings a note's body chunks in line with `body`, writing only the chunks that differ.
    func syncChunks(_ hex: String, body: String, _ db: Database) throws {
        let new = TextChunker.chunks(body)
        let old = try Row.fetchAll(db.cachedStatement(sql: "SELECT id, ord, body FROM note_text WHERE note = ? AND ord >= 0 ORDER BY ord"),
                                   arguments: [hex]).map { (id: $0[0] as Int64, ord: $0[1] as Int64, body: $0[2] as String) }
        var prefix = 0
        let limit = min(old.count, new.count)
        while prefix < limit, old[prefix].body == new[prefix] { prefix += 1 }
        var suffix = 0
        while suffix < limit - prefix, old[old.count - 1 - suffix].body == new[new.count - 1 - suffix] { suffix += 1 }
        let oldMiddle = old[prefix ..< old.count - suffix]
        let newMiddle = new[prefix ..< new.count - suffix]
        let updated = min(oldMiddle.count, newMiddle.count)
        let update = try db.cachedStatement(sql: "UPDATE note_text SET body = ? WHERE id = ?")
        for i in 0 ..< updated {
            try update.execute(arguments: [newMiddle[prefix + i], oldMiddle[prefix + i].id])
        }
        let delete = try db.cachedStatement(sql: "DELETE FROM note_text WHERE id = ?")
        for row in oldMiddle.dropFirst(updated) {
            try delete.execute(arguments: [row.id])
        }
        let extra = Array(newMiddle.dropFirst(updated))
        guard !extra.isEmpty else { return }
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
            try db.cachedStatement(sql: "DELETE FROM note_text WHERE note = ? AND ord >= 0").execute(arguments: [hex])
            for (index, chunk) in new.enumerated() {
                try insert.execute(arguments: [hex, Int64(index + 1) * NoteStore.chunkOrderGap, chunk])
            }
            return
        }
        for (index, chunk) in extra.enumerated() {
            try insert.execute(arguments: [hex, low + Int64(index + 1) * step, chunk])
        }
    }

    /// The body's first non-empty line, at most 80 scalars.
    static func preview(of body: String) -> String {
        var result = String.UnicodeScalarView()
        var count = 0  // result.count walks the view: counted here instead
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
}

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
                case .insertText(let note, _, _), .deleteText(let note, _):
                    touched[note] = true
                case .setTagField(let tag, let field, _):
                    if field == .name { renamedTags.insert(tag) }
                }
            }
        }
        for tag in renamedTags {
            for hex in try String.fetchAll(db, sql: "SELECT note FROM note_tags WHERE tag = ?", arguments: [tag]) {
                if let id = NoteID(hex: hex), touched[id] == nil { touched[id] = false }
            }
        }
        for (note, bodyTouched) in touched {
            try materialize(note, bodyTouched: bodyTouched, db)
        }
        return touched.count
    }

    /// Writes one note's materialized row, tag rows, title and body chunks from the notebook.
    func materialize(_ id: NoteID, bodyTouched: Bool, _ db: Database) throws {
        let hex = id.description
        guard let note = loaded!.notebook.noteFields(id), note.state != .deleted else {
            try db.execute(sql: "DELETE FROM notes WHERE id = ?", arguments: [hex])
            try db.execute(sql: "DELETE FROM note_tags WHERE note = ?", arguments: [hex])
            try db.execute(sql: "DELETE FROM note_text WHERE note = ?", arguments: [hex])
            return
        }
        let isNew = try Int.fetchOne(db, sql: "SELECT 1 FROM notes WHERE id = ?", arguments: [hex]) == nil
        let tags = note.tags.joined(separator: "\u{1F}")
        let body = isNew || bodyTouched ? loaded!.notebook.body(of: id)?.utf8String ?? "" : ""
        if isNew || bodyTouched {
            try db.execute(sql: """
                INSERT INTO notes (id, title, pinned, archived, color, state, tags, created_at, updated_at, body_length, preview)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (id) DO UPDATE SET title = excluded.title, pinned = excluded.pinned,
                    archived = excluded.archived, color = excluded.color, state = excluded.state,
                    tags = excluded.tags, created_at = excluded.created_at, updated_at = excluded.updated_at,
                    body_length = excluded.body_length, preview = excluded.preview
                """, arguments: [hex, note.title, note.pinned, note.archived, note.color, note.state.rawValue, tags,
                                 Int64(note.createdAt), Int64(note.updatedAt), loaded!.notebook.body(of: id)?.count ?? 0,
                                 NoteStore.preview(of: body)])
        } else {
            try db.execute(sql: """
                UPDATE notes SET title = ?, pinned = ?, archived = ?, color = ?, state = ?, tags = ?,
                    created_at = ?, updated_at = ? WHERE id = ?
                """, arguments: [note.title, note.pinned, note.archived, note.color, note.state.rawValue, tags,
                                 Int64(note.createdAt), Int64(note.updatedAt), hex])
        }
        try db.execute(sql: "DELETE FROM note_tags WHERE note = ?", arguments: [hex])
        for name in note.tags {
            try db.execute(sql: "INSERT OR IGNORE INTO note_tags (tag, note) VALUES (?, ?)",
                           arguments: [Notebook.tagKey(name), hex])
        }
        if let row = try Row.fetchOne(db, sql: "SELECT id, title FROM note_text WHERE note = ? AND ord = -1", arguments: [hex]) {
            if (row["title"] as String) != note.title {
                try db.execute(sql: "UPDATE note_text SET title = ? WHERE id = ?", arguments: [note.title, row["id"] as Int64])
            }
        } else {
            try db.execute(sql: "INSERT INTO note_text (note, ord, title) VALUES (?, -1, ?)", arguments: [hex, note.title])
        }
        if isNew || bodyTouched {
            try syncChunks(hex, body: body, db)
        }
    }

    /// Brings a note's body chunks in line with `body`, writing only the chunks that differ.
    func syncChunks(_ hex: String, body: String, _ db: Database) throws {
        let new = TextChunker.chunks(body)
        let old = try Row.fetchAll(db, sql: "SELECT id, ord, body FROM note_text WHERE note = ? AND ord >= 0 ORDER BY ord",
                                   arguments: [hex]).map { (id: $0["id"] as Int64, ord: $0["ord"] as Int64, body: $0["body"] as String) }
        var prefix = 0
        let limit = min(old.count, new.count)
        while prefix < limit, old[prefix].body == new[prefix] { prefix += 1 }
        var suffix = 0
        while suffix < limit - prefix, old[old.count - 1 - suffix].body == new[new.count - 1 - suffix] { suffix += 1 }
        let oldMiddle = old[prefix ..< old.count - suffix]
        let newMiddle = new[prefix ..< new.count - suffix]
        let updated = min(oldMiddle.count, newMiddle.count)
        for i in 0 ..< updated {
            try db.execute(sql: "UPDATE note_text SET body = ? WHERE id = ?",
                           arguments: [newMiddle[prefix + i], oldMiddle[prefix + i].id])
        }
        for row in oldMiddle.dropFirst(updated) {
            try db.execute(sql: "DELETE FROM note_text WHERE id = ?", arguments: [row.id])
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
        if step < 1 {
            // No room between the neighbours: number the whole body afresh.
            try db.execute(sql: "DELETE FROM note_text WHERE note = ? AND ord >= 0", arguments: [hex])
            for (index, chunk) in new.enumerated() {
                try db.execute(sql: "INSERT INTO note_text (note, ord, body) VALUES (?, ?, ?)",
                               arguments: [hex, Int64(index + 1) * NoteStore.chunkOrderGap, chunk])
            }
            return
        }
        for (index, chunk) in extra.enumerated() {
            try db.execute(sql: "INSERT INTO note_text (note, ord, body) VALUES (?, ?, ?)",
                           arguments: [hex, low + Int64(index + 1) * step, chunk])
        }
    }

    /// The body's first non-empty line, at most 80 scalars.
    static func preview(of body: String) -> String {
        var result = String.UnicodeScalarView()
        var started = false
        for scalar in body.unicodeScalars {
            if scalar == "\n" || scalar == "\r" {
                if started { break } else { continue }
            }
            if !started, scalar.properties.isWhitespace { continue }
            started = true
            result.append(scalar)
            if result.count >= 80 { break }
        }
        return String(result)
    }
}

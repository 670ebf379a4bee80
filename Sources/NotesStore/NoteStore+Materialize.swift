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

/// The `note_text` rows whose full-text entries a transaction makes stale, each with what
/// `note_fts` holds for it as far as the transaction knows, in the order they were touched;
/// written to `note_fts_stale` after the transaction's other statements (`recordStaleIndex`).
///
/// The index itself is not written in the transaction: it is brought up to date before it is
/// read (`NoteStore.updateSearchIndex`). A keystroke then costs one small row here, or nothing
/// when its chunk is already stale, instead of tokenizing the chunk's old and new text and
/// writing an FTS5 segment at COMMIT.
struct StaleIndexRows {
    var entries: [(row: Int64, indexed: Bool, title: String, body: String)] = []
    /// The whole index is marked for a rebuild (`NoteStore.rebuildIndexMarker`): rows are not
    /// recorded one by one.
    var rebuilding = false
    /// The row's text changes, or the row goes: it was indexed with these values, unless a
    /// record of it is already there (an earlier transaction, or earlier in this one).
    mutating func changed(_ row: Int64, title: String, body: String) {
        if !rebuilding { entries.append((row, true, title, body)) }
    }
    /// A new row: the index holds nothing for its id, unless a record of it is already there (a
    /// row that went had that id).
    mutating func added(_ row: Int64) {
        if !rebuilding { entries.append((row, false, "", "")) }
    }
}

/// The notes a batch of changes touched (note -> whether its body was), and the tags it renamed.
struct TouchedNotes {
    var notes: [NoteID: Bool] = [:]
    var renamedTags: Set<String> = []
}

extension NoteStore {
    /// The `note_fts_stale` row that stands for every row: the index is rebuilt from `note_text`
    /// (no `note_text` row has id 0: SQLite numbers them from 1).
    static let rebuildIndexMarker: Int64 = 0
    /// A transaction re-materializing at least this many notes, and as many as the store had,
    /// marks the index for a rebuild.
    static let rebuildIndexThreshold = 4096

    /// Gap between the `ord` of consecutive body chunks, so a chunk can be inserted between two.
    static let chunkOrderGap: Int64 = 1 << 20

    /// Re-materializes every note the changes touched (and every note in a tag they renamed).
    ///
    /// - Returns: how many notes were written.
    @discardableResult
    func materialize(_ changes: [Change], _ db: Database) throws -> Int {
        var touched = TouchedNotes()
        noteTouches(of: changes, in: &touched)
        return try materialize(touched, db)
    }

    /// Adds the notes `changes` touch (and the tags they rename) to `touched`.
    func noteTouches(of changes: [Change], in touched: inout TouchedNotes) {
        for change in changes {
            for op in change.operations {
                switch op {
                case .setNoteField(let note, _, _):
                    if touched.notes[note] == nil { touched.notes[note] = false }
                case .insertText(let note, _, _), .deleteText(let note, _), .deleteEach(let note, _):
                    touched.notes[note] = true
                case .setTagField(let tag, let field, _):
                    loaded!.tagStateStale = true
                    if field == .name { touched.renamedTags.insert(tag) }
                case .reissue:
                    break
                }
            }
        }
    }

    /// Re-materializes the notes in `touched` (and every note in a tag it renamed).
    ///
    /// - Returns: how many notes were written.
    func materialize(_ touches: TouchedNotes, _ db: Database) throws -> Int {
        var touched = touches.notes
        let renamedTags = touches.renamedTags
        for tag in renamedTags {
            try statement("SELECT note FROM note_tags WHERE tag = ?", db).forEachRow(.text(tag)) {
                if let id = NoteID(hex: SQLColumn.text($0, 0)), touched[id] == nil { touched[id] = false }
            }
        }
        var stale = StaleIndexRows()
        // Touching as many notes as the store had (a bootstrap): one marker makes the next read
        // rebuild the index from `note_text`, instead of a record per row (a quarter of a million).
        var empty = false
        if touched.count >= NoteStore.rebuildIndexThreshold,
           try touched.count >= Int.fetchOne(statement("SELECT count(*) FROM notes", db)) ?? 0 {
            try statement("INSERT OR IGNORE INTO note_fts_stale (row, indexed) VALUES (?, 0)", db).run(.int(NoteStore.rebuildIndexMarker))
            stale.rebuilding = true
            // Into empty tables (a new device), each note skips the reads and deletes that find
            // nothing: five of its eleven statements.
            empty = try Bool.fetchOne(statement("""
                SELECT NOT EXISTS (SELECT 1 FROM notes) AND NOT EXISTS (SELECT 1 FROM deleted_notes)
                    AND NOT EXISTS (SELECT 1 FROM note_text) AND NOT EXISTS (SELECT 1 FROM note_tags)
                    AND NOT EXISTS (SELECT 1 FROM note_state)
                """, db)) ?? false
        }
        // In key order (the tables are keyed by the id's hex): a bootstrap's tens of thousands of
        // inserts then append to each B-tree instead of landing on random pages.
        let ordered = touched.count > 64 ? touched.sorted { $0.key < $1.key } : Array(touched)
        for (note, bodyTouched) in ordered {
            try materialize(note, bodyTouched: bodyTouched, &stale, intoEmptyTables: empty, db)
            // Written as it goes: a bootstrap's records would hold every note's text at once.
            if stale.entries.count >= 4096 {
                try recordStaleIndex(stale, db)
                stale.entries.removeAll(keepingCapacity: true)
            }
        }
        try recordStaleIndex(stale, db)
        return touched.count
    }

    /// Records the rows whose index entries are stale in `note_fts_stale`, in the order they were
    /// touched: the first record of a row says what the index holds for it, and stays until the
    /// index is brought up to date (`INSERT OR IGNORE`).
    ///
    /// With exclusive access, the rows known to have a record already are skipped (`staleRecorded`).
    func recordStaleIndex(_ stale: StaleIndexRows, _ db: Database) throws {
        guard !stale.entries.isEmpty else { return }
        let record = try statement("INSERT OR IGNORE INTO note_fts_stale (row, indexed, title, body) VALUES (?, ?, ?, ?)", db)
        let remember = options.access == .exclusive
        for entry in stale.entries {
            if remember, !staleRecorded.insert(entry.row).inserted { continue }
            try record.run(.int(entry.row), .bool(entry.indexed), .text(entry.title), .text(entry.body))
        }
    }

    /// Writes one note's materialized row, tag rows, title and body chunks from the notebook.
    ///
    /// Only what differs from the stored row is written: the row itself (every edit moves
    /// `updated_at`), the tag rows when the tag list changed, the title row when the title
    /// changed, and, when the body was touched, the body chunks that differ (`syncChunks`).
    /// What the tables hold is taken from `Loaded.materialized` when this connection knows it,
    /// else read. Every statement is compiled once per connection. `intoEmptyTables`: the
    /// materialized tables held nothing when the transaction began, and no other note's rows
    /// are written for this one, so nothing is read or deleted.
    func materialize(_ id: NoteID, bodyTouched: Bool, _ stale: inout StaleIndexRows, intoEmptyTables empty: Bool = false,
                     _ db: Database) throws {
        let hex = id.description
        // The note's state for one-note edits: written when this is one (the edit's replica holds
        // the note), else dropped, so that a stored state is never behind the log.
        if loaded!.notebook.isPartial {
            try recordOneNoteState(id, db)
        } else if !empty {
            try statement("DELETE FROM note_state WHERE note = ?", db).run(.text(hex))
        }
        try recordDigest(id, db)
        guard let note = inLoadedNotebook({ $0.noteFields(id) }), note.state != .deleted else {
            if empty {
                remember(id, .absent)
                try writeTombstone(id, db)
                return
            }
            try statement("DELETE FROM notes WHERE id = ?", db).run(.text(hex))
            try statement("DELETE FROM note_tags WHERE note = ?", db).run(.text(hex))
            try statement("SELECT id, title, body FROM note_text WHERE note = ?", db).forEachRow(.text(hex)) {
                stale.changed(SQLColumn.int($0, 0), title: SQLColumn.text($0, 1), body: SQLColumn.text($0, 2))
            }
            try statement("DELETE FROM note_text WHERE note = ?", db).run(.text(hex))
            remember(id, .absent)
            try writeTombstone(id, db)
            return
        }
        let old = empty ? nil : try materializedRow(id, db)
        let isNew = old == nil
        let tags = note.tags.joined(separator: "\u{1F}")
        let changedHere = Int64(bitPattern: options.wallClock.milliseconds())
        // A note that gets a row may have been a tombstone (restored, or brought back by an edit).
        if isNew, !empty { try statement("DELETE FROM deleted_notes WHERE id = ?", db).run(.text(hex)) }
        var body: [UInt8] = []  // the body's UTF-8, when it is written
        if !isNew, bodyTouched {
            let text = inLoadedNotebook { $0.body(of: id) }
            body = text?.utf8 ?? []
            try statement("""
                UPDATE notes SET title = ?, pinned = ?, archived = ?, color = ?, state = ?, tags = ?,
                    created_at = ?, updated_at = ?, body_length = ?, preview = ?, conflicted = ?, restored = ?,
                    changed_here_at = ? WHERE id = ?
                """, db).run(.text(note.title), .bool(note.pinned), .bool(note.archived), .optionalText(note.color),
                         .text(note.state.rawValue), .text(tags), .int(Int64(note.createdAt)), .int(Int64(note.updatedAt)),
                         .int(Int64(text?.count ?? 0)), .text(NoteStore.preview(ofUTF8: body)), .bool(note.hasConflicts),
                         .bool(note.restoredByConcurrentEdit), .int(changedHere), .text(hex))
        } else if isNew {
            let text = inLoadedNotebook { $0.body(of: id) }
            body = text?.utf8 ?? []
            try statement("""
                INSERT INTO notes (id, title, pinned, archived, color, state, tags, created_at, updated_at, body_length, preview,
                    conflicted, restored, changed_here_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (id) DO UPDATE SET title = excluded.title, pinned = excluded.pinned,
                    archived = excluded.archived, color = excluded.color, state = excluded.state,
                    tags = excluded.tags, created_at = excluded.created_at, updated_at = excluded.updated_at,
                    body_length = excluded.body_length, preview = excluded.preview, conflicted = excluded.conflicted,
                    restored = excluded.restored, changed_here_at = excluded.changed_here_at
                """, db).run(.text(hex), .text(note.title), .bool(note.pinned), .bool(note.archived), .optionalText(note.color),
                         .text(note.state.rawValue), .text(tags), .int(Int64(note.createdAt)), .int(Int64(note.updatedAt)),
                         .int(Int64(text?.count ?? 0)), .text(NoteStore.preview(ofUTF8: body)), .bool(note.hasConflicts),
                         .bool(note.restoredByConcurrentEdit), .int(changedHere))
        } else {
            try statement("""
                UPDATE notes SET title = ?, pinned = ?, archived = ?, color = ?, state = ?, tags = ?,
                    created_at = ?, updated_at = ?, conflicted = ?, restored = ?, changed_here_at = ? WHERE id = ?
                """, db).run(.text(note.title), .bool(note.pinned), .bool(note.archived), .optionalText(note.color),
                         .text(note.state.rawValue), .text(tags), .int(Int64(note.createdAt)), .int(Int64(note.updatedAt)),
                         .bool(note.hasConflicts), .bool(note.restoredByConcurrentEdit), .int(changedHere), .text(hex))
        }
        // The tag rows follow the row's tag list, the title row its title (both are written in the
        // same transactions as the row), so they are rewritten only when those changed.
        if isNew {
            if !empty { try statement("DELETE FROM note_tags WHERE note = ?", db).run(.text(hex)) }
            let insertTag = try statement("INSERT OR IGNORE INTO note_tags (tag, note) VALUES (?, ?)", db)
            for name in note.tags {
                try insertTag.run(.text(Notebook.tagKey(name)), .text(hex))
            }
        } else if old!.tags != tags {
            // The rows are by tag key: only the keys that came or went are written (a renamed
            // tag changes the list, not its keys). The keys there are read rather than worked out
            // from the stored list, whose names may be empty or hold the separator.
            var before: Set<String> = []
            try statement("SELECT tag FROM note_tags WHERE note = ?", db).forEachRow(.text(hex)) { before.insert(SQLColumn.text($0, 0)) }
            let after = Set(note.tags.map(Notebook.tagKey))
            for key in before.subtracting(after).sorted() {
                try statement("DELETE FROM note_tags WHERE tag = ? AND note = ?", db).run(.text(key), .text(hex))
            }
            for key in after.subtracting(before).sorted() {
                try statement("INSERT OR IGNORE INTO note_tags (tag, note) VALUES (?, ?)", db).run(.text(key), .text(hex))
            }
        }
        if isNew {
            if !empty, let row = try titleRow(hex, db) {
                if row.title != note.title {
                    try retitle(row.id, from: row.title, to: note.title, body: row.body, &stale, db)
                }
            } else {
                try statement("INSERT INTO note_text (note, ord, title) VALUES (?, -1, ?)", db).run(.text(hex), .text(note.title))
                stale.added(db.lastRowID)
            }
        } else if old!.title != note.title {
            if let row = try titleRow(hex, db) {
                try retitle(row.id, from: row.title, to: note.title, body: row.body, &stale, db)
            }
        }
        var chunks = old?.chunks
        if isNew || bodyTouched {
            chunks = try syncChunks(hex, body: body, old: empty ? [] : isNew ? nil : old!.chunks, &stale, db)
        }
        remember(id, .present(title: note.title, tags: tags, chunks: chunks))
    }

    /// Reads the loaded notebook in place: a read through `loaded!.notebook` copied the whole
    /// notebook (a retain and a release of every one of its arrays and tables) for every note
    /// materialized.
    func inLoadedNotebook<T>(_ read: (inout Notebook) -> T) -> T {
        read(&loaded!.notebook)
    }

    /// A note's title row in `note_text`, if it has one.
    private func titleRow(_ hex: String, _ db: Database) throws -> (id: Int64, title: String, body: String)? {
        var row: (id: Int64, title: String, body: String)?
        try statement("SELECT id, title, body FROM note_text WHERE note = ? AND ord = -1", db).forEachRow(.text(hex)) {
            row = (SQLColumn.int($0, 0), SQLColumn.text($0, 1), SQLColumn.text($0, 2))
        }
        return row
    }

    /// Sets the title of a title row (its index entry goes stale).
    private func retitle(_ row: Int64, from old: String, to title: String, body: String, _ stale: inout StaleIndexRows, _ db: Database) throws {
        try statement("UPDATE note_text SET title = ? WHERE id = ?", db).run(.text(title), .int(row))
        stale.changed(row, title: old, body: body)
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
            var row: (title: String, tags: String)?
            try statement("SELECT title, tags FROM notes WHERE id = ?", db).forEachRow(.text(id.description)) {
                row = (SQLColumn.text($0, 0), SQLColumn.text($0, 1))
            }
            guard let row else {
                remember(id, .absent)
                return nil
            }
            let known = (title: row.title, tags: row.tags, chunks: [StoredChunk]?.none)
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

    /// Brings a note's body chunks in line with `body` (its UTF-8), writing only the chunks that differ.
    ///
    /// The body is cut whole (`TextChunker.ends(of:)`); its chunks that equal the stored ones at
    /// its start and at its end are compared as bytes, and only the chunks in between become
    /// strings.
    ///
    /// - Parameter old: the stored chunks in order, when known (else they are read).
    /// - Returns: the chunks stored now, in order.
    func syncChunks(_ hex: String, body: [UInt8], old known: [StoredChunk]?, _ stale: inout StaleIndexRows,
                    _ db: Database) throws -> [StoredChunk] {
        let old = try known ?? storedChunks(hex, db)
        let (prefix, suffix, newMiddle) = body.withUnsafeBufferPointer { bytes -> (Int, Int, [String]) in
            func equal(_ chunk: String, _ range: Range<Int>) -> Bool {
                var chunk = chunk
                return chunk.withUTF8 { stored in
                    stored.count == range.count && (range.isEmpty || memcmp(stored.baseAddress!, bytes.baseAddress! + range.lowerBound, range.count) == 0)
                }
            }
            let ends = TextChunker.ends(of: bytes)
            var starts = [0]
            starts.append(contentsOf: ends.dropLast())
            let limit = min(old.count, ends.count)
            var prefix = 0
            while prefix < limit, equal(old[prefix].body, starts[prefix] ..< ends[prefix]) { prefix += 1 }
            var suffix = 0
            while suffix < limit - prefix,
                  equal(old[old.count - 1 - suffix].body, starts[ends.count - 1 - suffix] ..< ends[ends.count - 1 - suffix]) {
                suffix += 1
            }
            let middle = (prefix ..< ends.count - suffix).map {
                String(decoding: UnsafeBufferPointer(rebasing: bytes[starts[$0] ..< ends[$0]]), as: UTF8.self)
            }
            return (prefix, suffix, middle)
        }
        let oldMiddle = old[prefix ..< old.count - suffix]
        let updated = min(oldMiddle.count, newMiddle.count)
        var result = Array(old[..<prefix])
        result.reserveCapacity(prefix + newMiddle.count + suffix)
        let update = try statement("UPDATE note_text SET body = ? WHERE id = ?", db)
        for i in 0 ..< updated {
            let row = oldMiddle[prefix + i]
            try update.run(.text(newMiddle[i]), .int(row.id))
            stale.changed(row.id, title: "", body: row.body)
            result.append(StoredChunk(id: row.id, ord: row.ord, body: newMiddle[i]))
        }
        let delete = try statement("DELETE FROM note_text WHERE id = ?", db)
        for row in oldMiddle.dropFirst(updated) {
            try delete.run(.int(row.id))
            stale.changed(row.id, title: "", body: row.body)
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
        let insert = try statement("INSERT INTO note_text (note, ord, body) VALUES (?, ?, ?)", db)
        if step < 1 {
            // No room between the neighbours: number the whole body afresh.
            // The rows still there are the prefix, the updated ones (with their new text) and the suffix.
            for row in result + old[(old.count - suffix)...] {
                stale.changed(row.id, title: "", body: row.body)
            }
            try statement("DELETE FROM note_text WHERE note = ? AND ord >= 0", db).run(.text(hex))
            result.removeAll(keepingCapacity: true)
            let new = old[..<prefix].map(\.body) + newMiddle + old[(old.count - suffix)...].map(\.body)
            for (position, chunk) in new.enumerated() {
                let ord = Int64(position + 1) * NoteStore.chunkOrderGap
                try insert.run(.text(hex), .int(ord), .text(chunk))
                stale.added(db.lastRowID)
                result.append(StoredChunk(id: db.lastRowID, ord: ord, body: chunk))
            }
            return result
        }
        for (position, chunk) in extra.enumerated() {
            let ord = low + Int64(position + 1) * step
            try insert.run(.text(hex), .int(ord), .text(chunk))
            stale.added(db.lastRowID)
            result.append(StoredChunk(id: db.lastRowID, ord: ord, body: chunk))
        }
        result.append(contentsOf: old[(old.count - suffix)...])
        return result
    }

    /// A note's body chunks as stored, in order.
    private func storedChunks(_ hex: String, _ db: Database) throws -> [StoredChunk] {
        var chunks: [StoredChunk] = []
        try statement("SELECT id, ord, body FROM note_text WHERE note = ? AND ord >= 0 ORDER BY ord", db).forEachRow(.text(hex)) {
            chunks.append(StoredChunk(id: SQLColumn.int($0, 0), ord: SQLColumn.int($0, 1), body: SQLColumn.text($0, 2)))
        }
        return chunks
    }

    /// The body's first non-empty line, at most 80 scalars.
    static func preview(of body: String) -> String {
        var body = body
        return body.withUTF8 { preview(ofUTF8: $0) }
    }

    /// `preview(of:)` of a body given as UTF-8 bytes.
    static func preview(ofUTF8 body: [UInt8]) -> String {
        body.withUnsafeBufferPointer { preview(ofUTF8: $0) }
    }

    /// One slice of the body's UTF-8: past the leading blank lines and whitespace, up to the
    /// line's end or 80 scalars. Walked over the bytes in place (a scalar's length is in its
    /// first byte; line ends are ASCII), with a scalar's properties read only for non-ASCII
    /// leading whitespace, so no string view's index arithmetic is paid.
    static func preview(ofUTF8 bytes: UnsafeBufferPointer<UInt8>) -> String {
        func length(_ byte: UInt8) -> Int { byte < 0x80 ? 1 : byte < 0xE0 ? 2 : byte < 0xF0 ? 3 : 4 }
        var start = 0
        while start < bytes.count {
            let byte = bytes[start]
            if byte < 0x80 {
                guard byte == 0x20 || (0x09 ... 0x0D).contains(byte) else { break }
                start += 1
            } else {
                let end = min(bytes.count, start + length(byte))
                let scalar = String(decoding: UnsafeBufferPointer(rebasing: bytes[start ..< end]), as: UTF8.self).unicodeScalars.first
                guard let scalar, scalar.properties.isWhitespace else { break }
                start = end
            }
        }
        var end = start
        var count = 0
        while end < bytes.count, count < 80 {
            let byte = bytes[end]
            if byte == 0x0A || byte == 0x0D { break }
            end = min(bytes.count, end + length(byte))
            count += 1
        }
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[start ..< end]), as: UTF8.self)
    }
}

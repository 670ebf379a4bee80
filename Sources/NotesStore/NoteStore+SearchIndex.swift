import GRDB

/// The full-text index (`note_fts`) is brought up to date when it is read, not in every write.
///
/// A write transaction changes `note_text` (a title, the body chunks an edit touched) and records,
/// for each row it changed, what the index holds for that row id (`note_fts_stale`, see
/// `StaleIndexRows`); the record is written only the first time after the index was last brought
/// up to date. Before the index is read (a search, `updateSearchIndex()`), one write transaction
/// removes the recorded entries with the values they were indexed with, indexes those rows'
/// current text, and clears the records. The index then holds exactly what indexing in every
/// transaction would have left, so ranks and snippets are the same; the records are written with
/// the rows they describe, so a crash loses nothing either.
extension NoteStore {
    /// Brings the full-text index up to date now: re-indexes the titles and body chunks written
    /// since it last was, in one write transaction.
    ///
    /// `search` does this itself when it is needed; an app may call it when idle so that the
    /// first search after many edits does not pay for it.
    ///
    /// - Returns: how many rows (titles and body chunks) were re-indexed.
    /// - Complexity: proportional to the text of the rows changed since the index was last up to
    ///   date (each re-indexed once, however many times it changed).
    @discardableResult
    public func updateSearchIndex() throws -> Int {
        do {
            return try queue.inDatabase { db in
                try self.transaction(db, begin: "BEGIN IMMEDIATE TRANSACTION") { try self.reindexStaleRows(db) }
            }
        } catch {
            throw StoreError.wrap(error, "cannot bring the search index up to date")
        }
    }

    /// Runs `body`, which reads the full-text index, in a transaction in which the index is up to
    /// date: a read transaction when nothing is stale (the common case), else one write transaction
    /// that first re-indexes the stale rows.
    func readIndexed<T>(_ what: @autoclosure () -> String, _ body: (Database) throws -> T) throws -> T {
        do {
            return try queue.inDatabase { db in
                var result: T?
                try self.transaction(db, begin: "BEGIN DEFERRED TRANSACTION") {
                    if try !NoteStore.indexIsStale(db) { result = try body(db) }
                }
                if let result { return result }
                return try self.transaction(db, begin: "BEGIN IMMEDIATE TRANSACTION") {
                    try self.reindexStaleRows(db)
                    return try body(db)
                }
            }
        } catch {
            throw StoreError.wrap(error, what())
        }
    }

    /// Whether some rows' index entries are stale.
    static func indexIsStale(_ db: Database) throws -> Bool {
        try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM note_fts_stale)")) ?? false
    }

    /// In a write transaction: removes the stale entries (with the values they were indexed with),
    /// indexes the rows' current text, and clears the records.
    ///
    /// Each statement writes its entries in row-id order (FTS5 writes a segment early when a row
    /// id comes lower than the one before), and the two make two segments.
    ///
    /// The records are gone (or will be, once this transaction commits; if it fails, the records
    /// stay, and writing one again is harmless), so `staleRecorded` is emptied.
    ///
    /// - Returns: how many rows were re-indexed.
    @discardableResult
    func reindexStaleRows(_ db: Database) throws -> Int {
        staleRecorded.removeAll()
        let count = try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM note_fts_stale")) ?? 0
        guard count > 0 else { return 0 }
        let rebuild = try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM note_fts_stale WHERE row = ?)"),
                                        arguments: [NoteStore.rebuildIndexMarker]) ?? false
        if rebuild {
            // A bootstrap marked it: every row is indexed again, whatever the other records say.
            try db.execute(sql: """
                INSERT INTO note_fts (note_fts) VALUES ('rebuild');
                DELETE FROM note_fts_stale;
                """)
            return try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM note_text")) ?? 0
        }
        try db.execute(sql: """
            INSERT INTO note_fts (note_fts, rowid, title, body)
                SELECT 'delete', row, title, body FROM note_fts_stale WHERE indexed ORDER BY row;
            INSERT INTO note_fts (rowid, title, body)
                SELECT id, title, body FROM note_text WHERE id IN (SELECT row FROM note_fts_stale) ORDER BY id;
            DELETE FROM note_fts_stale;
            """)
        return count
    }
}

extension NoteStore {
    /// For checks (the simulator, tests): how the search index disagrees with the notes, after it
    /// is brought up to date. Empty when the full-text index holds exactly `note_text` (SQLite's
    /// own comparison of the two) and `note_text` has one title row for each stored note, with its
    /// title, and rows for no other note.
    package func searchIndexProblems() throws -> [String] {
        try updateSearchIndex()
        return try queue.inDatabase { db in
            var problems: [String] = []
            do {
                // With rank 1, FTS5 also tokenizes the content table's rows and compares them with its index.
                try db.execute(sql: "INSERT INTO note_fts (note_fts, rank) VALUES ('integrity-check', 1)")
            } catch {
                problems.append("the full-text index does not hold the notes' text as stored (\(error))")
            }
            let untitled = try String.fetchAll(db, sql: """
                SELECT notes.id FROM notes LEFT JOIN note_text ON note_text.note = notes.id AND note_text.ord = -1
                WHERE note_text.id IS NULL OR note_text.title != notes.title ORDER BY notes.id
                """)
            if let first = untitled.first {
                problems.append("\(untitled.count) note(s) have no title row in the search text, or one with another title (first \(first))")
            }
            let orphans = try String.fetchAll(db, sql: """
                SELECT DISTINCT note FROM note_text WHERE note NOT IN (SELECT id FROM notes) ORDER BY note
                """)
            if let first = orphans.first {
                problems.append("the search text holds rows of \(orphans.count) note(s) that are not stored (first \(first))")
            }
            return problems
        }
    }
}

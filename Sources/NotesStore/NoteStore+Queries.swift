import Foundation
import GRDB
import NotesCRDT

/// A note as stored in the materialized table: every field, and the body when it was asked for.
public struct StoredNote: Hashable, Sendable {
    /// The note's identity.
    public var id: NoteID
    /// The title.
    public var title: String
    /// The body text; nil when the query did not fetch it (see `preview`).
    public var body: String?
    /// The body's first line, cut short.
    public var preview: String
    /// The body's length in Unicode scalars.
    public var bodyLength: Int
    /// Whether the note is pinned.
    public var pinned: Bool
    /// Whether the note is archived.
    public var archived: Bool
    /// The color name, or nil when none is set.
    public var color: String?
    /// `.active` or `.trashed`; `.deleted` only in `list(.deleted)` and `deletedNote(_:)` (deleted
    /// notes have no row in the other reads).
    public var state: NoteLifecycle
    /// The tag names, sorted.
    public var tags: [String]
    /// Wall-clock milliseconds.
    public var createdAt: UInt64
    /// Wall-clock milliseconds of the latest operation on the note, as the device that made it
    /// stamped it (`Note.updatedAt`): far ahead when that device's clock was.
    public var updatedAt: UInt64
    /// Whether concurrent edits were merged in the same region or field and not resolved since
    /// (`Note.hasConflicts`).
    public var hasConflicts: Bool = false
    /// Whether the note is in the trash because an edit made without seeing its delete brought it
    /// back (`Note.restoredByConcurrentEdit`).
    public var restoredByConcurrentEdit: Bool = false
    /// Wall-clock milliseconds (this device's clock) when this replica last saw the note change:
    /// an edit made here, or changes to it received. Not replicated.
    public var changedHereAt: UInt64 = 0
    /// When the winning delete was made (its timestamp's milliseconds); deleted notes only.
    public var deletedAt: UInt64? = nil

    /// When the note last changed, for showing and sorting: `updatedAt`, but never more than
    /// `maxForwardDrift` (a minute) after this device saw the change, so a note stamped by a clock
    /// years ahead does not stay on top of every list until then.
    /// (`updatedAt` itself when `changedHereAt` is not known: a note made from the CRDT.)
    public var effectiveUpdatedAt: UInt64 {
        changedHereAt == 0 ? updatedAt : min(updatedAt, changedHereAt &+ NoteStore.updateTimeDrift)
    }
}

/// Which notes `NoteStore.list` returns.
public enum ListScope: String, Sendable, CaseIterable {
    /// Notes that are neither archived nor trashed.
    case active
    /// Archived notes (not trashed).
    case archived
    /// Trashed notes.
    case trashed
    /// Every note that is not deleted.
    case all
    /// Deleted notes (tombstones): they can be shown, their history read, and restored.
    case deleted
}

/// One search result.
public struct SearchHit: Hashable, Sendable {
    /// The note (without its body).
    public var note: StoredNote
    /// Its bm25 rank: lower is better (SQLite's convention).
    public var rank: Double
    /// A passage around the best match, matched words in [brackets].
    public var snippet: String
}

/// One entry of the history: a change, who made it, when, and what it did.
public struct HistoryEntry: Hashable, Sendable {
    /// The replica that made the change.
    public var replica: ReplicaID
    /// Whether this replica made it.
    public var isLocal: Bool
    /// The first seq the change covers.
    public var startSeq: UInt64
    /// The last seq the change covers.
    public var endSeq: UInt64
    /// The timestamp of its first operation.
    public var timestamp: Timestamp
    /// The notes it touched.
    public var notes: [NoteID]
    /// What it did, one line per kind of operation.
    public var summary: [String]
}

/// What `NoteStore.status()` reports.
public struct StoreStatus: Hashable, Sendable {
    /// This replica's identity.
    public var replica: ReplicaID
    /// The database file, or nil for an in-memory store.
    public var path: String?
    /// The operations this replica has applied.
    public var versionVector: VersionVector
    /// Notes that are not deleted.
    public var notes: Int
    /// Received changes that wait for their dependencies.
    public var pendingChanges: Int
    /// Rows in the op log after the snapshot.
    public var logRows: Int
    /// How many log rows the snapshot has absorbed up to (0: no snapshot yet).
    public var snapshotThroughRow: Int64
    /// The known peers and what each has.
    public var peers: [PeerState]
    /// The digest of the visible state (`NoteStore.digest()`): equal on two replicas exactly when
    /// their visible states are.
    public var digest: String
}

extension NoteStore {
    /// The columns `storedNote(_:body:)` reads, in this order.
    /// Qualified, for the queries that join `notes`. The text a person wrote is selected as a
    /// BLOB, so that a U+0000 in it does not cut it short (`storedText`).
    static let noteColumns = """
        notes.id, CAST(notes.title AS BLOB), notes.pinned, notes.archived, CAST(notes.color AS BLOB), notes.state, \
        CAST(notes.tags AS BLOB), notes.created_at, notes.updated_at, notes.body_length, CAST(notes.preview AS BLOB), \
        notes.conflicted, notes.restored, notes.changed_here_at
        """

    /// How far after this device saw a change a note's shown update time may be (the clock's
    /// default drift bound); the listing index (migration v5) spells the same number.
    public static let updateTimeDrift: UInt64 = 60_000

    /// The order of `list`: pinned first, then the most recently changed (`effectiveUpdatedAt`).
    static let listOrder = "pinned DESC, min(updated_at, changed_here_at + 60000) DESC, id"

    /// A row of `noteColumns`, read by position (a lookup by name lowercases and compares column
    /// names for every value; this runs for every note of every `list`).
    static func storedNote(_ row: Row, body: String? = nil) throws -> StoredNote {
        let hex = try row.stored(0, as: String.self)
        guard let id = NoteID(hex: hex) else { throw StoreError(.corrupt, "a materialized note has a bad id \(hex)") }
        let tags = try row.storedText(6)
        return StoredNote(
            id: id, title: try row.storedText(1), body: body, preview: try row.storedText(10), bodyLength: try row.stored(9),
            pinned: try row.stored(2), archived: try row.stored(3), color: try row.storedOptionalText(4),
            state: NoteLifecycle(rawValue: try row.stored(5)) ?? .active,
            tags: tags.isEmpty ? [] : tags.split(separator: "\u{1F}", omittingEmptySubsequences: false).map(String.init),
            createdAt: try row.storedUnsigned(7), updatedAt: try row.storedUnsigned(8),
            hasConflicts: try row.stored(11), restoredByConcurrentEdit: try row.stored(12), changedHereAt: try row.storedUnsigned(13))
    }

    /// `storedNote(_:body:)` for the current row of a statement stepped by `forEachRow`: the same
    /// columns, read the same way, without a GRDB row. The row was looked up by `id` (its primary
    /// key), so its id column is not parsed again.
    static func storedNote(columnsOf handle: OpaquePointer, id: NoteID) -> StoredNote {
        let tags = SQLColumn.text(handle, 6)
        return StoredNote(
            id: id, title: SQLColumn.text(handle, 1), body: nil, preview: SQLColumn.text(handle, 10),
            bodyLength: Int(SQLColumn.int(handle, 9)),
            pinned: SQLColumn.int(handle, 2) != 0, archived: SQLColumn.int(handle, 3) != 0, color: SQLColumn.optionalText(handle, 4),
            state: NoteLifecycle(rawValue: SQLColumn.text(handle, 5)) ?? .active,
            tags: tags.isEmpty ? [] : tags.split(separator: "\u{1F}", omittingEmptySubsequences: false).map(String.init),
            createdAt: UInt64(bitPattern: SQLColumn.int(handle, 7)), updatedAt: UInt64(bitPattern: SQLColumn.int(handle, 8)),
            hasConflicts: SQLColumn.int(handle, 11) != 0, restoredByConcurrentEdit: SQLColumn.int(handle, 12) != 0,
            changedHereAt: UInt64(bitPattern: SQLColumn.int(handle, 13)))
    }

    /// The row of a note and its body chunks in order, in one statement: a row per chunk (the
    /// note's columns repeated, the chunk's text last), or one row with no text for an empty body.
    /// The columns are `noteColumns`, in that order.
    static let noteWithBodySQL: StaticString = """
        SELECT notes.id, notes.title, notes.pinned, notes.archived, notes.color, notes.state, notes.tags,
            notes.created_at, notes.updated_at, notes.body_length, notes.preview, notes.conflicted, notes.restored,
            notes.changed_here_at, note_text.body
        FROM notes LEFT JOIN note_text ON note_text.note = notes.id AND note_text.ord >= 0
        WHERE notes.id = ? ORDER BY note_text.ord
        """

    /// The materialized row of one note, with its body, or nil (read with `forEachRow`).
    ///
    /// One statement for the row and the chunks (`noteWithBodySQL`), not two: the simulator reads
    /// every note a step touched this way, after every step.
    func storedNote(_ id: NoteID, _ db: Database) throws -> StoredNote? {
        var note: StoredNote?
        var body = ""
        try statement(NoteStore.noteWithBodySQL, db).forEachRow(.text(id.description)) {
            if note == nil { note = NoteStore.storedNote(columnsOf: $0, id: id) }
            if let chunk = SQLColumn.optionalText($0, 14) { body += chunk }
        }
        note?.body = body
        return note
    }

    /// Runs `body` in one read transaction (so that its queries see one state even while another
    /// process writes), with BEGIN and COMMIT compiled once per connection.
    ///
    /// With exclusive access this connection, which runs one thing at a time, is the database's
    /// only one: nothing can write between two of `body`'s queries, so they run without BEGIN and
    /// COMMIT.
    func read<T>(_ what: @autoclosure () -> String, _ body: (Database) throws -> T) throws -> T {
        do {
            return try queue.inDatabase { db in
                if options.access == .exclusive { return try body(db) }
                return try transaction(db, begin: "BEGIN DEFERRED TRANSACTION") { try body(db) }
            }
        } catch {
            throw StoreError.wrap(error, what())
        }
    }

    /// Runs `body` between `begin` and COMMIT, both compiled once per connection (`statement`),
    /// and rolls back when it throws.
    ///
    /// BEGIN and COMMIT run through the SQLite C API (`Statement.run`), like the statements
    /// between them. Through GRDB's `execute`, its per-statement bookkeeping (observation,
    /// suspension and cancellation checks, and a wall-clock read for `transactionDate` at every
    /// BEGIN) would be paid by every keystroke. Nothing here
    /// uses what that bookkeeping serves; `Database.isInsideTransaction`, which the rollback
    /// below and GRDB's own checks read, asks SQLite (`sqlite3_get_autocommit`). GRDB's own record
    /// of the transaction (`transactionDate`) is therefore not kept: nothing may read it.
    func transaction<T>(_ db: Database, begin: StaticString, _ body: () throws -> T) throws -> T {
        try statement(begin, db).run()
        do {
            let result = try body()
            try statement("COMMIT TRANSACTION", db).run()
            return result
        } catch {
            if db.isInsideTransaction { try? db.rollback() }
            throw error
        }
    }

    static func body(of hex: String, _ db: Database) throws -> String {
        var body = ""
        try db.cachedStatement(sql: "SELECT body FROM note_text WHERE note = ? AND ord >= 0 ORDER BY ord").forEachRow(.text(hex)) {
            body += SQLColumn.text($0, 0)
        }
        return body
    }

    /// Notes in `scope` (and in tag `tag`, if given): pinned first, then the most recently changed
    /// (by `StoredNote.effectiveUpdatedAt`). Deleted notes (`.deleted`) come most recently deleted first.
    ///
    /// Reads the materialized tables only; never loads the CRDT state (but the bodies of deleted
    /// notes, with `includeBody`, come from it).
    public func list(_ scope: ListScope = .active, tag: String? = nil, includeBody: Bool = false, limit: Int? = nil) throws -> [StoredNote] {
        if scope == .deleted { return try deletedNotes(tag: tag, includeBody: includeBody, limit: limit) }
        var conditions: [String] = []
        var arguments: [SQLValue] = []
        switch scope {
        case .active: conditions.append("state = 'active' AND archived = 0")
        case .archived: conditions.append("state = 'active' AND archived = 1")
        case .trashed: conditions.append("state = 'trashed'")
        case .all, .deleted: break
        }
        if let tag {
            conditions.append("id IN (SELECT note FROM note_tags WHERE tag = ?)")
            arguments.append(.text(Notebook.tagKey(tag)))
        }
        var sql = "SELECT \(NoteStore.noteColumns) FROM notes"
        if !conditions.isEmpty { sql += " WHERE " + conditions.joined(separator: " AND ") }
        sql += " ORDER BY " + NoteStore.listOrder
        if let limit {
            sql += " LIMIT ?"
            arguments.append(.int(Int64(max(0, limit))))
        }
        return try read("cannot list the notes") { db in
            // A handful of distinct statements (scope, tag or not, limit or not), each compiled once
            // per connection. Columns are read through the C API, as one note's are (no GRDB `Row`
            // and no existential per column).
            var notes: [StoredNote] = []
            try db.cachedStatement(sql: sql).forEachRow(arguments) { handle in
                let hex = SQLColumn.text(handle, 0)
                guard let id = NoteID(hex: hex) else { throw StoreError(.corrupt, "a materialized note has a bad id \(hex)") }
                notes.append(NoteStore.storedNote(columnsOf: handle, id: id))
            }
            if includeBody {
                for i in notes.indices { notes[i].body = try NoteStore.body(of: notes[i].id.description, db) }
            }
            return notes
        }
    }

    /// The note with this identity, with its body, or nil when it is unknown or deleted (a deleted
    /// note is read with `deletedNote(_:)`).
    public func note(_ id: NoteID) throws -> StoredNote? {
        try read("cannot read note \(id)") { db in try storedNote(id, db) }
    }

    /// The notes with these identities, with their bodies, in the same order (nil for a note
    /// that has no row: unknown or deleted), read in one read transaction.
    public func notes(_ ids: [NoteID]) throws -> [StoredNote?] {
        try read("cannot read notes") { db in try ids.map { try storedNote($0, db) } }
    }

    /// The note whose id starts with `prefix` (hex digits, as git names commits), deleted notes
    /// included (a command that cannot work on one says so: `edit` of a deleted note is refused,
    /// `restore` brings it back).
    ///
    /// - Throws: `.invalidArgument` for a prefix that is not hex, `.notFound` when no note matches,
    ///   `.ambiguous` when several do.
    public func resolveNote(_ prefix: String) throws -> NoteID {
        let lowered = prefix.lowercased()
        guard !lowered.isEmpty, lowered.count <= 32, lowered.allSatisfy({ $0.isHexDigit && $0.isASCII }) else {
            throw StoreError(.invalidArgument, "'\(prefix)' is not a note id (ids are up to 32 hex digits; a unique prefix is enough)")
        }
        let matches = try read("cannot look up note \(prefix)") { db in
            try String.fetchAll(db, sql: """
                SELECT id FROM notes WHERE id >= ?1 AND id < ?2
                UNION ALL SELECT id FROM deleted_notes WHERE id >= ?1 AND id < ?2
                ORDER BY id LIMIT 6
                """, arguments: [lowered, lowered + "g"])
        }
        switch matches.count {
        case 0: throw StoreError(.notFound, "no note has an id that starts with '\(prefix)'")
        case 1: return NoteID(hex: matches[0])!
        default:
            let shown = matches.prefix(5).map { String($0.prefix(lowered.count + 4)) }.joined(separator: ", ")
            throw StoreError(.ambiguous, "'\(prefix)' names more than one note (\(shown)\(matches.count > 5 ? ", ..." : "")); give more digits")
        }
    }

    /// Full-text search over titles and bodies of notes that are not trashed.
    ///
    /// The query is words (every word must occur, in the title or the body), `prefix*` words, and
    /// "quoted phrases". Results are ranked by bm25 (a title match weighs ten times a body match),
    /// best first, each with a snippet.
    ///
    /// The first search after edits re-indexes the titles and body chunks they changed (one write
    /// transaction; see `updateSearchIndex()`).
    public func search(_ query: String, limit: Int = 20) throws -> [SearchHit] {
        let terms = SearchQuery.terms(query)
        guard !terms.isEmpty else {
            throw StoreError(.invalidArgument, "the search query '\(query)' has no words to look for")
        }
        var ctes: [String] = []
        for index in terms.indices {
            // bm25() is only allowed in a plain full-text query: rank the rows first, then group them by note.
            ctes.append("""
                m\(index) AS MATERIALIZED (SELECT rowid AS id, bm25(note_fts, 10.0, 1.0) AS rank FROM note_fts WHERE note_fts MATCH ?),
                t\(index) AS (SELECT note_text.note AS note, min(m\(index).rank) AS rank
                    FROM m\(index) JOIN note_text ON note_text.id = m\(index).id GROUP BY note_text.note)
                """)
        }
        let rank = terms.indices.map { "t\($0).rank" }.joined(separator: " + ")
        let joins = terms.indices.dropFirst().map { "JOIN t\($0) ON t\($0).note = t0.note" }.joined(separator: " ")
        let sql = """
            WITH \(ctes.joined(separator: ",\n"))
            SELECT \(NoteStore.noteColumns),
                \(rank) AS rank
            FROM t0 \(joins) JOIN notes ON notes.id = t0.note
            WHERE notes.state = 'active'
            ORDER BY rank, notes.id LIMIT ?
            """
        var arguments = StatementArguments(terms)
        _ = arguments.append(contentsOf: [max(0, limit)])
        let anyTerm = terms.joined(separator: " OR ")
        // The index is brought up to date first when edits left it stale (see NoteStore+SearchIndex).
        return try readIndexed("cannot search the notes") { db in
            // A handful of distinct statements (scope, tag or not, limit or not), each compiled once per connection.
            try Row.fetchAll(db.cachedStatement(sql: sql), arguments: arguments).map { row in
                let note = try NoteStore.storedNote(row)
                let snippet = try String.fetchOne(db, sql: """
                    SELECT snippet(note_fts, -1, '[', ']', '…', 12) FROM note_fts
                    WHERE note_fts MATCH ? AND rowid IN (SELECT id FROM note_text WHERE note = ?)
                    ORDER BY bm25(note_fts, 10.0, 1.0) LIMIT 1
                    """, arguments: [anyTerm, note.id.description]) ?? ""
                return SearchHit(note: note, rank: try row.stored("rank"), snippet: snippet)
            }
        }
    }

    /// The history of changes (of one note, or of everything), oldest first, as applied here.
    ///
    /// Consecutive changes that directly follow each other are shown as one (the log coalesces them).
    public func history(of note: NoteID? = nil) throws -> [HistoryEntry] {
        let log = try unloadedLog() ?? self.notebook.allChanges
        return log.compactMap { change -> HistoryEntry? in
            let ops = change.operations.filter { note == nil || $0.note == note }
            guard !ops.isEmpty else { return nil }
            var notes: [NoteID] = []
            var seen = Set<NoteID>()  // a joined change can span every note: `contains` was quadratic
            for op in ops { if let n = op.note, seen.insert(n).inserted { notes.append(n) } }
            return HistoryEntry(replica: change.replica, isLocal: change.replica == replicaID, startSeq: change.startSeq,
                                endSeq: change.endSeq, timestamp: change.timestamp, notes: notes,
                                summary: HistoryEntry.summarize(ops))
        }
    }

    /// The replica's identity, version vector, counts, peers and digest.
    public func status() throws -> StoreStatus {
        let (stored, wasLoaded) = try lock.withLock { (try storedStatus(), loaded != nil) }
        if var status = stored {
            status.peers = try peers()
            return status
        }
        let notebook = try lock.withLock {
            let notebook = try loadedState().notebook
            // Stored, so that the next status need not load the replica (a read-only database
            // still gets its status).
            if !wasLoaded { try? writeTransaction("cannot record the stored states") { db in try recordStoredStates(db) } }
            return notebook
        }
        let (notes, logRows, through) = try read("cannot read the status") { db in
            (try Int.fetchOne(db, sql: "SELECT count(*) FROM notes") ?? 0,
             try Int.fetchOne(db, sql: "SELECT count(*) FROM changes") ?? 0,
             try Int64.fetchOne(db, sql: "SELECT through_row FROM snapshot WHERE id = 1") ?? 0)
        }
        return StoreStatus(replica: replicaID, path: path, versionVector: notebook.versionVector, notes: notes,
                           pendingChanges: notebook.pendingCount, logRows: logRows, snapshotThroughRow: through,
                           peers: try peers(), digest: try digest())
    }

    /// The number of notes that are not deleted (from the materialized table).
    public func noteCount() throws -> Int {
        try read("cannot count the notes") { db in try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM notes")) ?? 0 }
    }
}

extension HistoryEntry {
    /// One line per kind of operation: text inserts and deletes are added up per note.
    static func summarize(_ ops: [NotesCRDT.Operation]) -> [String] {
        var lines: [String] = []
        var inserted: [NoteID: Int] = [:]
        var deleted: [NoteID: UInt64] = [:]
        var order: [NoteID] = []
        var created = Set<NoteID>()  // looked up per state op; searching `lines` was quadratic
        func quote(_ s: String) -> String {
            let short = s.unicodeScalars.count > 40 ? String(String.UnicodeScalarView(s.unicodeScalars.prefix(40))) + "…" : s
            return "\"\(short)\""
        }
        for op in ops {
            switch op {
            case .setNoteField(let note, let field, let value):
                let n = String(note.description.prefix(8))
                switch (field, value) {
                case (.createdAt, _):
                    lines.append("created note \(n)")
                    created.insert(note)
                case (.title, _): lines.append("note \(n): title \(quote(value.stringValue ?? ""))")
                case (.pinned, .bool(let b)): lines.append("note \(n): \(b ? "pinned" : "unpinned")")
                case (.archived, .bool(let b)): lines.append("note \(n): \(b ? "archived" : "unarchived")")
                case (.color, .string(let c)): lines.append("note \(n): color \(c)")
                case (.color, _): lines.append("note \(n): color cleared")
                case (.state, .string(let s)):
                    if s != NoteLifecycle.active.rawValue || !created.contains(note) {
                        lines.append("note \(n): \(s == "active" ? "restored" : s)")
                    }
                case (.tag(let key), .bool(let b)): lines.append("note \(n): \(b ? "tagged" : "untagged") \(key)")
                case (.resolution, _): lines.append("note \(n): resolved the merges of concurrent edits")
                default: lines.append("note \(n): \(field) = \(value)")
                }
            case .insertText(let note, _, let text):
                if inserted[note] == nil, deleted[note] == nil { order.append(note) }
                inserted[note, default: 0] += text.count
            case .deleteText(let note, let targets):
                if inserted[note] == nil, deleted[note] == nil { order.append(note) }
                deleted[note, default: 0] += targets.reduce(0) { $0 + $1.count }
            case .deleteEach(let note, let runs):
                if inserted[note] == nil, deleted[note] == nil { order.append(note) }
                deleted[note, default: 0] += runs.reduce(0) { $0 + $1.range.count }
            case .setTagField(let tag, let field, let value):
                lines.append("tag \(tag): \(field == .name ? "name" : "color") \(value)")
            case .reissue(let range):
                lines.append("re-issued \(range.count) operation\(range.count == 1 ? "" : "s") of \(range.replica) from seq \(range.seq), which a copy of its database wrote")
            }
        }
        for note in order {
            let n = String(note.description.prefix(8))
            if let count = inserted[note] { lines.append("note \(n): inserted \(count) character\(count == 1 ? "" : "s")") }
            if let count = deleted[note] { lines.append("note \(n): deleted \(count) character\(count == 1 ? "" : "s")") }
        }
        return lines
    }
}

/// Turns what a person types into FTS5 phrase strings, one per term.
enum SearchQuery {
    static func terms(_ query: String) -> [String] {
        var terms: [String] = []
        var current = ""
        var inQuotes = false
        func flush(phrase: Bool) {
            defer { current = "" }
            var word = current.trimmingCharacters(in: .whitespaces)
            var isPrefix = false
            if !phrase, word.hasSuffix("*") {
                isPrefix = true
                while word.hasSuffix("*") { word.removeLast() }
            }
            guard word.unicodeScalars.contains(where: { $0.properties.isAlphabetic || $0.properties.numericType != nil }) else { return }
            terms.append("\"" + word.replacingOccurrences(of: "\"", with: "\"\"") + "\"" + (isPrefix ? "*" : ""))
        }
        for character in query {
            if character == "\"" {
                flush(phrase: inQuotes)
                inQuotes.toggle()
            } else if character.isWhitespace, !inQuotes {
                flush(phrase: false)
            } else {
                current.append(character)
            }
        }
        flush(phrase: inQuotes)
        return terms
    }
}

import Foundation
import GRDB
import NotesCRDT
import NotesSync

/// The relay's storage in one SQLite file (GRDB), the default for one relay process.
///
/// Per space and author, the records are rows keyed by (space, author, startSeq) holding the
/// record's endSeq and payload; `relay_author` keeps per author the highest seq held (the space's
/// version vector) beside the counts. The file is in WAL mode with `synchronous = NORMAL`
/// (`FULL` with `powerLoss`): a committed append survives the process being killed at any instant.
public final class SQLiteRelayStorage: RelayStorage {
    /// The file, or nil in memory.
    public let path: String?
    let writer: any DatabaseWriter
    /// 16 bytes that identify this storage (its relay), made when the file was created.
    public let relayID: [UInt8]
    /// Signalled after each append that stored something (one process: only its own appends).
    public let changes = RelayChangeSignals()

    /// `PRAGMA application_id` of a relay file ("CRDR").
    static let applicationID: Int32 = 0x4352_4452

    /// Opens (creating if needed) the relay file at `path`.
    ///
    /// - Parameter powerLoss: fsync the WAL at every commit, so a power cut loses nothing either.
    public convenience init(path: String, powerLoss: Bool = false) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.label = "SQLiteRelayStorage"
        let synchronous = powerLoss ? "FULL" : "NORMAL"
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
        }
        let folder = (path as NSString).deletingLastPathComponent
        if !folder.isEmpty, !FileManager.default.fileExists(atPath: folder) {
            try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        }
        let pool: DatabasePool
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
        } catch {
            throw RelayStorageError(.failure, "\(path): cannot open the relay store (\(SQLiteRelayStorage.describe(error)))")
        }
        try self.init(writer: pool, path: path, relayID: nil)
    }

    /// A relay storage in memory (tests and the simulator: the same SQL, lost when released).
    ///
    /// - Parameter relayID: the relay's identity (random by default; the simulator passes a seeded one).
    public static func inMemory(relayID: [UInt8]? = nil) throws -> SQLiteRelayStorage {
        let queue: DatabaseQueue
        do { queue = try DatabaseQueue() } catch {
            throw RelayStorageError(.failure, "cannot open an in-memory relay store (\(describe(error)))")
        }
        return try SQLiteRelayStorage(writer: queue, path: nil, relayID: relayID)
    }

    private init(writer: any DatabaseWriter, path: String?, relayID fixedID: [UInt8]?) throws {
        self.writer = writer
        self.path = path
        let location = path ?? "memory"
        do {
            try writer.read { db in
                let applicationID = try Int32.fetchOne(db, sql: "PRAGMA application_id") ?? 0
                let tableCount = try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master") ?? 0
                guard applicationID == SQLiteRelayStorage.applicationID || (applicationID == 0 && tableCount == 0) else {
                    throw RelayStorageError(.failure, "\(location) is not a crdt-sync relay store (another kind of SQLite file); nothing was changed")
                }
            }
            try SQLiteRelayStorage.migrator.migrate(writer)
            relayID = try writer.write { db -> [UInt8] in
                try db.execute(sql: "PRAGMA application_id = \(SQLiteRelayStorage.applicationID)")
                if let existing = try Data.fetchOne(db, sql: "SELECT value FROM relay_meta WHERE key = 'relay_id'") {
                    return [UInt8](existing)
                }
                let fresh = fixedID ?? ReplicaID.random().raw.bytes
                try db.execute(sql: "INSERT INTO relay_meta(key, value) VALUES ('relay_id', ?)", arguments: [Data(fresh)])
                return fresh
            }
        } catch let error as RelayStorageError {
            throw error
        } catch {
            throw RelayStorageError(.failure, "\(location): cannot prepare the relay store (\(SQLiteRelayStorage.describe(error)))")
        }
    }

    /// Schema migrations; never edit one once it has shipped, add another.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE relay_meta (key TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL);
                CREATE TABLE relay_author (
                    space TEXT NOT NULL, author BLOB NOT NULL,
                    seq INTEGER NOT NULL, changes INTEGER NOT NULL, bytes INTEGER NOT NULL,
                    PRIMARY KEY (space, author)) WITHOUT ROWID;
                CREATE TABLE relay_change (
                    id INTEGER PRIMARY KEY,
                    space TEXT NOT NULL, author BLOB NOT NULL,
                    startSeq INTEGER NOT NULL, endSeq INTEGER NOT NULL,
                    payload BLOB NOT NULL,
                    UNIQUE (space, author, startSeq));
                CREATE INDEX relay_change_end ON relay_change(space, author, endSeq);
                """)
        }
        // A record that straddles what the space holds is stored whole (the relay does not cut
        // what it may not be able to read), so two records of an author may start at one seq;
        // each ends past all before it, so the end is what is unique.
        migrator.registerMigration("v2-records-unique-by-end") { db in
            try db.execute(sql: """
                CREATE TABLE relay_change_v2 (
                    id INTEGER PRIMARY KEY,
                    space TEXT NOT NULL, author BLOB NOT NULL,
                    startSeq INTEGER NOT NULL, endSeq INTEGER NOT NULL,
                    payload BLOB NOT NULL,
                    UNIQUE (space, author, endSeq));
                INSERT INTO relay_change_v2 (id, space, author, startSeq, endSeq, payload)
                    SELECT id, space, author, startSeq, endSeq, payload FROM relay_change;
                DROP TABLE relay_change;
                ALTER TABLE relay_change_v2 RENAME TO relay_change;
                """)
        }
        // End-to-end encrypted spaces: a record may be a sealed unit, and a space is either
        // sealed or plain for good (its first record decides).
        migrator.registerMigration("v3-e2e-sealed-records") { db in
            try db.execute(sql: """
                ALTER TABLE relay_change ADD COLUMN sealed INTEGER NOT NULL DEFAULT 0;
                CREATE TABLE relay_space_kind (space TEXT PRIMARY KEY NOT NULL, sealed INTEGER NOT NULL) WITHOUT ROWID;
                CREATE TABLE relay_signing_key (
                    space TEXT NOT NULL, author BLOB NOT NULL, public_key BLOB NOT NULL,
                    PRIMARY KEY (space, author)) WITHOUT ROWID;
                """)
        }
        // Records sent again (a copied replica's other branch, at seqs the space holds) lie beside
        // an author's chain: two records may end at one seq, so the end is no longer unique.
        migrator.registerMigration("v4-records-sent-again") { db in
            try db.execute(sql: """
                CREATE TABLE relay_change_v4 (
                    id INTEGER PRIMARY KEY,
                    space TEXT NOT NULL, author BLOB NOT NULL,
                    startSeq INTEGER NOT NULL, endSeq INTEGER NOT NULL,
                    payload BLOB NOT NULL,
                    sealed INTEGER NOT NULL DEFAULT 0,
                    again INTEGER NOT NULL DEFAULT 0);
                INSERT INTO relay_change_v4 (id, space, author, startSeq, endSeq, payload, sealed)
                    SELECT id, space, author, startSeq, endSeq, payload, sealed FROM relay_change;
                DROP TABLE relay_change;
                ALTER TABLE relay_change_v4 RENAME TO relay_change;
                CREATE INDEX relay_change_end ON relay_change(space, author, endSeq);
                """)
        }
        return migrator
    }

    // MARK: RelayStorage

    /// Stores the records that extend what the space holds, in one transaction; returns the
    /// indexes of those stored.
    public func append(space: String, records: [RelayRecord]) async throws -> [Int] {
        try await append(space: space, records: records, again: false)
    }

    public func appendAgain(space: String, records: [RelayRecord]) async throws -> [Int] {
        try await append(space: space, records: records, again: true)
    }

    private func append(space: String, records: [RelayRecord], again: Bool) async throws -> [Int] {
        guard !records.isEmpty else { return [] }
        if let refusal = RelayRecord.rangeRefusal(records) { throw refusal }
        do {
            let stored = try await writer.write { db in try SQLiteRelayStorage.append(db, space: space, records, again: again) }
            if !stored.isEmpty { changes.signal(space) }
            return stored
        } catch let error as RelayStorageError {
            throw error
        } catch {
            throw RelayStorageError(.failure, "relay store: \(SQLiteRelayStorage.describe(error))")
        }
    }

    /// One page of the records a client at `clientVersion` lacks, in arrival order.
    public func page(space: String, after clientVersion: VersionVector, limits: RelayPageLimits,
                     needsPayload: @escaping @Sendable (Int64) -> Bool = { _ in true }) async throws -> RelayPage {
        do {
            return try await writer.read { db in
                try SQLiteRelayStorage.page(db, space: space, clientVersion: clientVersion, limits: limits, needsPayload: needsPayload)
            }
        } catch let error as RelayStorageError {
            throw error
        } catch {
            throw RelayStorageError(.failure, "relay store: \(SQLiteRelayStorage.describe(error))")
        }
    }

    /// What the space holds: its version vector and counts.
    /// What is wrong with how `space` is stored (empty when nothing is), for the simulator's
    /// checks: per author, the chain's records (not those sent again) in arrival order each end
    /// past all before them and start no later than the seq after them, from seq 1; the author's
    /// row holds the chain's end and the count and bytes of every record.
    package func chainProblems(space: String) async throws -> [String] {
        try await writer.read { db in
            var problems: [String] = []
            var rows: [ReplicaID: (end: UInt64, changes: Int, bytes: Int)] = [:]
            for row in try Row.fetchAll(db, sql: """
                SELECT author, startSeq, endSeq, length(payload), again FROM relay_change WHERE space = ? ORDER BY author, id
                """, arguments: [space]) {
                let author = try SQLiteRelayStorage.replica(try row.stored(0))
                let start = UInt64(bitPattern: try row.stored(1, as: Int64.self))
                let end = UInt64(bitPattern: try row.stored(2, as: Int64.self))
                var entry = rows[author] ?? (0, 0, 0)
                entry.changes += 1
                entry.bytes += try row.stored(3, as: Int.self)
                if try !row.stored(4, as: Bool.self) {
                    if end <= entry.end || start < 1 || start > entry.end + 1 {
                        problems.append("the relay's chain of \(author) holds a record of seqs \(start)-\(end) after one that ends at \(entry.end)")
                    }
                    entry.end = max(entry.end, end)
                }
                rows[author] = entry
            }
            for row in try Row.fetchAll(db, sql: "SELECT author, seq, changes, bytes FROM relay_author WHERE space = ?", arguments: [space]) {
                let author = try SQLiteRelayStorage.replica(try row.stored(0))
                let counted = (end: UInt64(bitPattern: try row.stored(1, as: Int64.self)), changes: try row.stored(2, as: Int.self), bytes: try row.stored(3, as: Int.self))
                let actual = rows.removeValue(forKey: author) ?? (0, 0, 0)
                if counted != actual {
                    problems.append("the relay's row of \(author) says seq \(counted.end), \(counted.changes) records, \(counted.bytes) bytes; its records say \(actual.end), \(actual.changes), \(actual.bytes)")
                }
            }
            for author in rows.keys.sorted() { problems.append("the relay holds records of \(author) but no row for it") }
            return problems
        }
    }

    public func status(space: String) async throws -> RelaySpaceStatus {
        do {
            return try await writer.read { db in
                var status = RelaySpaceStatus(space: space, version: VersionVector(), authors: 0, changes: 0, operations: 0, bytes: 0)
                for row in try Row.fetchAll(db.cachedStatement(sql: "SELECT author, seq, changes, bytes FROM relay_author WHERE space = ?"),
                                            arguments: [space]) {
                    let author = try SQLiteRelayStorage.replica(try row.stored(0))
                    let seq = UInt64(bitPattern: try row.stored(1, as: Int64.self))
                    status.version[author] = seq
                    status.authors += 1
                    status.changes += try row.stored(2, as: Int.self)
                    let (sum, overflow) = status.operations.addingReportingOverflow(seq)
                    status.operations = overflow ? .max : sum
                    status.bytes += try row.stored(3, as: Int.self)
                }
                return status
            }
        } catch let error as RelayStorageError {
            throw error
        } catch {
            throw RelayStorageError(.failure, "relay store: \(SQLiteRelayStorage.describe(error))")
        }
    }

    /// Spaces, changes and payload bytes in all (the per-author summary rows, not the records).
    public func totals() async throws -> RelayTotals? {
        do {
            return try await writer.read { db in
                let row = try Row.fetchOne(db, sql: "SELECT count(DISTINCT space), coalesce(sum(changes), 0), coalesce(sum(bytes), 0) FROM relay_author")
                return RelayTotals(spaces: try row?.stored(0) ?? 0, changes: try row?.stored(1) ?? 0, bytes: try row?.stored(2) ?? 0)
            }
        } catch {
            throw RelayStorageError(.failure, "relay store: \(SQLiteRelayStorage.describe(error))")
        }
    }

    // MARK: Inside transactions

    struct Coverage {
        var seq: UInt64
        var changes: Int
        var bytes: Int
        var touched = false
    }

    /// Stores the records that extend what the space holds; returns the indexes of those stored.
    static func append(_ db: Database, space: String, _ records: [RelayRecord], again: Bool = false) throws -> [Int] {
        var coverage: [ReplicaID: Coverage] = [:]
        var stored: [Int] = []
        let insert = try db.cachedStatement(sql: "INSERT INTO relay_change(space, author, startSeq, endSeq, payload, sealed, again) VALUES (?, ?, ?, ?, ?, ?, ?)")
        let sealed = try kind(db, space: space, first: records[0].sealed)
        if let other = records.first(where: { $0.sealed != sealed }) {
            throw RelayStorageError(.encryption, sealed
                ? "this space is end-to-end encrypted: it takes only sealed bundles (a plaintext change of \(other.author) was refused)"
                : "this space is not encrypted: it takes no sealed bundles (a sealed unit of \(other.author) was refused)")
        }
        for (index, record) in records.enumerated() {
            let author = record.author
            if coverage[author] == nil {
                let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT seq, changes, bytes FROM relay_author WHERE space = ? AND author = ?"),
                                           arguments: [space, Data(author.raw.bytes)])
                coverage[author] = try row.map { Coverage(seq: UInt64(bitPattern: try $0.stored(0, as: Int64.self)), changes: try $0.stored(1), bytes: try $0.stored(2)) }
                    ?? Coverage(seq: 0, changes: 0, bytes: 0)
            }
            if let key = record.signingKey {
                // The first key stored for an author is its key here: a unit signed by another is
                // a member writing in its name (or a stolen token with a key of its own).
                let known = try Data.fetchOne(db.cachedStatement(sql: "SELECT public_key FROM relay_signing_key WHERE space = ? AND author = ?"),
                                              arguments: [space, Data(author.raw.bytes)])
                if let known, [UInt8](known) != key {
                    throw RelayStorageError(.encryption, "a sealed unit of \(author) is signed with another key than the one this space holds for it; nothing was stored")
                }
                if known == nil {
                    try db.execute(sql: "INSERT INTO relay_signing_key(space, author, public_key) VALUES (?, ?, ?)",
                                   arguments: [space, Data(author.raw.bytes), Data(key)])
                }
            }
            let covered = coverage[author]!.seq
            if record.endSeq <= covered {
                // Sent again: kept beside the chain, once per payload at those seqs.
                guard again, try Bool.fetchOne(db, sql: """
                    SELECT 1 FROM relay_change WHERE space = ? AND author = ? AND endSeq = ? AND startSeq = ? AND payload = ?
                    """, arguments: [space, Data(author.raw.bytes), Int64(bitPattern: record.endSeq), Int64(bitPattern: record.startSeq),
                                     Data(record.payload)]) == nil else { continue }
                try insert.execute(arguments: [space, Data(author.raw.bytes), Int64(bitPattern: record.startSeq),
                                               Int64(bitPattern: record.endSeq), Data(record.payload), record.sealed, true])
                coverage[author]!.changes += 1
                coverage[author]!.bytes += record.payload.count
                coverage[author]!.touched = true
                stored.append(index)
                continue
            }
            guard record.startSeq >= 1, record.startSeq - 1 <= covered else {
                throw RelayStorageError(.gap, "changes of \(author) from seq \(record.startSeq) would leave a gap: the relay holds them up to seq \(covered)")
            }
            try insert.execute(arguments: [space, Data(author.raw.bytes), Int64(bitPattern: record.startSeq),
                                           Int64(bitPattern: record.endSeq), Data(record.payload), record.sealed, false])
            coverage[author]!.seq = record.endSeq
            coverage[author]!.changes += 1
            coverage[author]!.bytes += record.payload.count
            coverage[author]!.touched = true
            stored.append(index)
        }
        let upsert = try db.cachedStatement(sql: """
            INSERT INTO relay_author(space, author, seq, changes, bytes) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT(space, author) DO UPDATE SET seq = excluded.seq, changes = excluded.changes, bytes = excluded.bytes
            """)
        for (author, entry) in coverage where entry.touched {
            try upsert.execute(arguments: [space, Data(author.raw.bytes), Int64(bitPattern: entry.seq), entry.changes, entry.bytes])
        }
        return stored
    }

    /// Whether the space is sealed: as recorded, else plain when it already holds records, else
    /// as its first record (`first`), recorded now.
    static func kind(_ db: Database, space: String, first: Bool) throws -> Bool {
        if let known = try Bool.fetchOne(db.cachedStatement(sql: "SELECT sealed FROM relay_space_kind WHERE space = ?"), arguments: [space]) {
            return known
        }
        let holds = try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM relay_author WHERE space = ? LIMIT 1"), arguments: [space]) ?? false
        let sealed = holds ? false : first
        try db.execute(sql: "INSERT INTO relay_space_kind(space, sealed) VALUES (?, ?)", arguments: [space, sealed])
        return sealed
    }

    /// One page of the rows a client at `clientVersion` lacks: per lagging author, the rows past
    /// its entry in seq order (their identities only, through the (space, author, endSeq) index),
    /// merged across authors in arrival order until the page is full; then the picked rows'
    /// payloads. So a page is a causal prefix of what is missing and each author's part of it is
    /// contiguous.
    static func page(_ db: Database, space: String, clientVersion: VersionVector, limits: RelayPageLimits,
                     needsPayload: (Int64) -> Bool = { _ in true }) throws -> RelayPage {
        var version = VersionVector()
        var lagging: [(author: ReplicaID, key: Data, have: UInt64)] = []
        for row in try Row.fetchAll(db.cachedStatement(sql: "SELECT author, seq FROM relay_author WHERE space = ? ORDER BY author"),
                                    arguments: [space]) {
            let key = try row.stored(0, as: Data.self)
            let author = try replica(key)
            let seq = UInt64(bitPattern: try row.stored(1, as: Int64.self))
            version[author] = seq
            if seq > clientVersion[author] { lagging.append((author, key, clientVersion[author])) }
        }
        guard !lagging.isEmpty else { return RelayPage(records: [], version: version, more: false) }
        let select = try db.cachedStatement(sql: """
            SELECT id, startSeq, endSeq, length(payload), again FROM relay_change
            WHERE space = ? AND author = ? AND endSeq > ? ORDER BY endSeq, id LIMIT ?
            """)
        typealias Candidate = RelayPageCandidate
        var queues: [[Candidate]] = []
        for entry in lagging {
            // An entry beyond what SQLite's signed integers hold has everything stored.
            guard entry.have <= UInt64(Int64.max) else { continue }
            var queue: [Candidate] = []
            let rows = try Row.fetchCursor(select, arguments: [space, entry.key, Int64(entry.have), limits.maxChanges])
            while let row = try rows.next() {
                queue.append(Candidate(try row.stored(0), entry.author, UInt64(bitPattern: try row.stored(1, as: Int64.self)), UInt64(bitPattern: try row.stored(2, as: Int64.self)), try row.stored(3),
                                       again: try row.stored(4)))
            }
            if !queue.isEmpty { queues.append(queue) }
        }
        let (picked, delivered) = RelayPageCandidate.pick(queues, limits: limits)
        let payload = try db.cachedStatement(sql: "SELECT payload, sealed FROM relay_change WHERE id = ?")
        var records: [RelayStoredRecord] = []
        records.reserveCapacity(picked.count)
        for row in picked {
            var data = Data()
            var sealed = false
            if needsPayload(row.id), let fetched = try Row.fetchOne(payload, arguments: [row.id]) {
                data = try fetched.stored(0)
                sealed = try fetched.stored(1)
            }
            records.append(RelayStoredRecord(arrival: row.id, record: RelayRecord(author: row.author, startSeq: row.startSeq, endSeq: row.endSeq,
                                                                                  payload: [UInt8](data), sealed: sealed, again: row.again)))
        }
        let more = lagging.contains { entry in (delivered[entry.author] ?? entry.have) < version[entry.author] }
        return RelayPage(records: records, version: version, more: more)
    }

    static func replica(_ data: Data) throws -> ReplicaID {
        guard let id = Identifier128(bytes: data) else {
            throw RelayStorageError(.failure, "relay store: an author id of \(data.count) bytes (expected 16)")
        }
        return ReplicaID(id)
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? DatabaseError { return error.message ?? "\(error.resultCode)" }
        if let error = error as? RelayStorageError { return error.message }
        return "\(error)"
    }
}

/// GRDB's row subscript stops the process on a value of another type than asked for; a damaged
/// relay store may hold anything, so the storage reads through this, which throws instead.
extension Row {
    func stored<Value: DatabaseValueConvertible>(_ index: Int, as type: Value.Type = Value.self) throws -> Value {
        do { return try decode(Value.self, atIndex: index) } catch {
            throw RelayStorageError(.failure, "relay store: a stored value has another type than its column's (\(error))")
        }
    }
}

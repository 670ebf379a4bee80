import Foundation
import Logging
import NotesCRDT
import NotesRelay
import NotesSync
import PostgresNIO
import Synchronization

/// The relay's storage in PostgreSQL, for several relay processes over one database.
///
/// Every instance keeps the `RelayStorage` rules through the database's own guarantees: an append
/// is one READ COMMITTED transaction that first creates or locks the space's row in `relay_space`
/// (`INSERT ... ON CONFLICT DO UPDATE`), so appends of one space are serialized across all instances, each
/// reads the authors' current heads after taking the lock, and arrival numbers (an identity
/// column, taken under the lock) commit in order within a space. A page is read in one
/// REPEATABLE READ, READ ONLY transaction: one snapshot, so the version vector and the records
/// agree. An append that stored something sends `NOTIFY crdt_sync_relay, 'space'` (delivered at
/// commit); every instance LISTENs on a dedicated connection and signals `changes`, so live push
/// works whichever instance took the upload. Docs/HTTP.md, "PostgreSQL", says more.
public final class PostgresRelayStorage: RelayStorage {
    /// 16 bytes that identify this relay: one per database, shared by every instance over it.
    public let relayID: [UInt8]
    /// Signalled after this instance's appends and when another instance's NOTIFY arrives.
    public let changes = RelayChangeSignals()
    /// Where the database is.
    public let location: PostgresLocation
    let client: PostgresClient
    let logger: Logger
    private let runTask: Task<Void, Never>
    private let listenTask: Task<Void, Never>
    private let listenConnection: ConnectionHolder

    /// The channel of NOTIFY; the payload is the space's name.
    static let channel = "crdt_sync_relay"
    /// The key of the advisory lock that serializes migrations across instances ("CRDR" "MIGR").
    static let migrationLock: Int64 = 0x4352_4452_4D49_4752

    /// Connects to the database at `location`, creates or migrates the schema (under an advisory
    /// lock, so instances starting together do not race), and starts listening for other
    /// instances' appends before returning.
    ///
    /// - Parameters:
    ///   - maxConnections: the pool's size (one more connection listens).
    ///   - relayID: the identity of a new database (random by default); an existing one keeps its own.
    public static func connect(_ location: PostgresLocation, maxConnections: Int = 20, relayID: [UInt8]? = nil,
                               logger: Logger = Logger(label: "crdt-sync.relay.postgres")) async throws -> PostgresRelayStorage {
        let configuration = try location.connectionConfiguration()
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
        } catch {
            throw RelayStorageError(.failure, "\(location.redacted): cannot connect to PostgreSQL (\(describe(error)))")
        }
        let id: [UInt8]
        do {
            id = try await migrate(connection, relayID: relayID, logger: logger)
        } catch {
            try? await connection.close()
            if let error = error as? RelayStorageError { throw error }
            throw RelayStorageError(.failure, "\(location.redacted): cannot prepare the relay schema (\(describe(error)))")
        }
        return try await PostgresRelayStorage(location: location, relayID: id, listening: connection,
                                              maxConnections: maxConnections, logger: logger)
    }

    private init(location: PostgresLocation, relayID: [UInt8], listening connection: PostgresConnection,
                 maxConnections: Int, logger: Logger) async throws {
        self.location = location
        self.relayID = relayID
        self.logger = logger
        var options = PostgresClient.Configuration.Options()
        options.maximumConnections = max(1, maxConnections)
        var configuration = try location.clientConfiguration()
        configuration.options = options
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.client = client
        runTask = Task { await client.run() }
        let held = ConnectionHolder(connection)
        listenConnection = held
        let (ready, readyContinuation) = AsyncStream<Result<Void, any Error>>.makeStream()
        listenTask = Task { [changes] in
            await PostgresRelayStorage.listen(first: connection, location: location, held: held, changes: changes,
                                              ready: readyContinuation, logger: logger)
        }
        for await outcome in ready {
            if case .failure(let error) = outcome {
                listenTask.cancel()
                runTask.cancel()
                throw RelayStorageError(.failure, "\(location.redacted): cannot LISTEN (\(PostgresRelayStorage.describe(error)))")
            }
            break
        }
    }

    deinit {
        listenTask.cancel()
        runTask.cancel()
        let connection = listenConnection.connection.withLock { $0 }
        connection?.close().whenComplete { _ in }
    }

    /// Stops listening and closes the pool; the storage is unusable afterwards.
    public func close() async {
        listenTask.cancel()
        if let connection = listenConnection.connection.withLock({ $0 }) { try? await connection.close() }
        await listenTask.value
        runTask.cancel()
        await runTask.value
    }

    // MARK: Schema

    /// One schema migration: never edit one once it has shipped, append another.
    struct Migration {
        var version: Int
        var name: String
        var statements: [String]
    }

    static let migrations: [Migration] = [
        Migration(version: 1, name: "relay-pg-v1", statements: [
            "CREATE TABLE relay_meta (key text PRIMARY KEY, value bytea NOT NULL)",
            // One row per space: appends of a space lock it.
            "CREATE TABLE relay_space (space text PRIMARY KEY)",
            """
            CREATE TABLE relay_author (
                space text NOT NULL REFERENCES relay_space(space), author bytea NOT NULL,
                seq bigint NOT NULL, changes bigint NOT NULL, bytes bigint NOT NULL,
                PRIMARY KEY (space, author))
            """,
            """
            CREATE TABLE relay_change (
                arrival bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                space text NOT NULL REFERENCES relay_space(space), author bytea NOT NULL,
                start_seq bigint NOT NULL, end_seq bigint NOT NULL, payload bytea NOT NULL,
                UNIQUE (space, author, end_seq))
            """,
        ]),
    ]

    /// Applies the migrations this database lacks in one transaction under an advisory lock, and
    /// returns the relay's identity (made by the first instance).
    static func migrate(_ connection: PostgresConnection, relayID fixedID: [UInt8]?, logger: Logger) async throws -> [UInt8] {
        try await transaction(connection, begin: "BEGIN ISOLATION LEVEL READ COMMITTED", logger: logger) { connection in
            try await connection.run("SELECT pg_advisory_xact_lock(\(migrationLock))", logger: logger)
            try await connection.run("""
                CREATE TABLE IF NOT EXISTS relay_migrations (
                    version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())
                """, logger: logger)
            var applied = Set<Int>()
            for try await version in try await connection.query("SELECT version FROM relay_migrations", logger: logger).decode(Int32.self) {
                applied.insert(Int(version))
            }
            let known = migrations.map(\.version).max() ?? 0
            if let newer = applied.max(), newer > known {
                throw RelayStorageError(.failure, "the database has relay schema version \(newer), newer than this crdt-sync knows (\(known)); nothing was changed")
            }
            for migration in migrations where !applied.contains(migration.version) {
                for statement in migration.statements {
                    try await connection.run(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.run("INSERT INTO relay_migrations(version, name) VALUES (\(Int32(migration.version)), \(migration.name))",
                                           logger: logger)
            }
            let fresh = Data(fixedID ?? ReplicaID.random().raw.bytes)
            try await connection.run("INSERT INTO relay_meta(key, value) VALUES ('relay_id', \(fresh)) ON CONFLICT (key) DO NOTHING",
                                       logger: logger)
            let values = try await connection.query("SELECT value FROM relay_meta WHERE key = 'relay_id'", logger: logger).decode(Data.self)
            var found: [UInt8]?
            for try await value in values { found = [UInt8](value) }
            if let found { return found }
            throw RelayStorageError(.failure, "relay_meta holds no relay_id")
        }
    }

    // MARK: LISTEN

    /// LISTENs on a dedicated connection and signals each notified space; after a reconnect it
    /// signals every space, since notifications sent while it was away are lost.
    static func listen(first: PostgresConnection, location: PostgresLocation, held: ConnectionHolder,
                       changes: RelayChangeSignals, ready: AsyncStream<Result<Void, any Error>>.Continuation, logger: Logger) async {
        var connection: PostgresConnection? = first
        var reconnected = false
        var readyContinuation: AsyncStream<Result<Void, any Error>>.Continuation? = ready
        while !Task.isCancelled {
            do {
                let current: PostgresConnection
                if let connection { current = connection } else {
                    current = try await PostgresConnection.connect(configuration: try location.connectionConfiguration(), id: 0, logger: logger)
                    held.connection.withLock { $0 = current }
                    if Task.isCancelled { try? await current.close(); break }
                }
                connection = nil
                try await current.listen(on: channel) { notifications in
                    readyContinuation?.yield(.success(()))
                    readyContinuation?.finish()
                    readyContinuation = nil
                    if reconnected {
                        for try await space in try await current.query("SELECT space FROM relay_space", logger: logger).decode(String.self) {
                            changes.signal(space)
                        }
                    }
                    for try await notification in notifications { changes.signal(notification.payload) }
                }
                try? await current.close()
            } catch {
                if let readyContinuation {
                    readyContinuation.yield(.failure(error))
                    readyContinuation.finish()
                    return
                }
                if Task.isCancelled { break }
                logger.warning("PostgreSQL LISTEN connection lost; reconnecting", metadata: ["error": "\(describe(error))"])
            }
            if let stale = held.connection.withLock({ value -> PostgresConnection? in defer { value = nil }; return value }) { try? await stale.close() }
            reconnected = true
            try? await Task.sleep(for: .milliseconds(500))
        }
    }

    // MARK: RelayStorage

    /// Stores the records that extend what the space holds, in one transaction under the space's
    /// row lock; returns the indexes of those stored.
    public func append(space: String, records: [RelayRecord]) async throws -> [Int] {
        guard !records.isEmpty else { return [] }
        // Its schema keeps no sealed flag nor first-seen signing keys yet: storing a sealed unit as a
        // plain change would serve it as one, so encrypted spaces are refused until it does.
        if let sealed = records.first(where: \.sealed) {
            throw RelayStorageError(.encryption, "this relay stores its spaces in PostgreSQL, which does not hold end-to-end encrypted spaces yet (a sealed unit of \(sealed.author) was refused; use a relay over SQLite)")
        }
        let logger = self.logger
        let stored = try await withStorageErrors {
            try await self.client.withConnection { connection in
                try await Self.transaction(connection, begin: "BEGIN ISOLATION LEVEL READ COMMITTED", logger: logger) { connection in
                    try await Self.append(connection, space: space, records, logger: logger)
                }
            }
        }
        if !stored.isEmpty { changes.signal(space) }
        return stored
    }

    /// One page of the records a client at `clientVersion` lacks, in arrival order, from one snapshot.
    public func page(space: String, after clientVersion: VersionVector, limits: RelayPageLimits,
                     needsPayload: @escaping @Sendable (Int64) -> Bool = { _ in true }) async throws -> RelayPage {
        let logger = self.logger
        return try await withStorageErrors {
            try await self.client.withConnection { connection in
                try await Self.transaction(connection, begin: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", logger: logger) { connection in
                    try await Self.page(connection, space: space, clientVersion: clientVersion, limits: limits,
                                        needsPayload: needsPayload, logger: logger)
                }
            }
        }
    }

    /// What the space holds: its version vector and counts (one statement, so one snapshot).
    public func status(space: String) async throws -> RelaySpaceStatus {
        try await withStorageErrors {
            var status = RelaySpaceStatus(space: space, version: VersionVector(), authors: 0, changes: 0, operations: 0, bytes: 0)
            let rows = try await self.client.query("SELECT author, seq, changes, bytes FROM relay_author WHERE space = \(space)", logger: self.logger)
            for try await (key, seq, changes, bytes) in rows.decode((Data, Int64, Int64, Int64).self) {
                let stored = UInt64(bitPattern: seq)
                status.version[try Self.replica(key)] = stored
                status.authors += 1
                status.changes += Int(changes)
                let (sum, overflow) = status.operations.addingReportingOverflow(stored)
                status.operations = overflow ? .max : sum
                status.bytes += Int(bytes)
            }
            return status
        }
    }

    /// Spaces, changes and payload bytes in all, from the per-author summary rows (for metrics).
    public func totals() async throws -> RelayTotals? {
        try await withStorageErrors {
            let rows = try await self.client.query(
                "SELECT count(DISTINCT space), coalesce(sum(changes), 0)::bigint, coalesce(sum(bytes), 0)::bigint FROM relay_author",
                logger: self.logger)
            for try await (spaces, changes, bytes) in rows.decode((Int64, Int64, Int64).self) {
                return RelayTotals(spaces: Int(spaces), changes: Int(changes), bytes: Int(bytes))
            }
            return RelayTotals(spaces: 0, changes: 0, bytes: 0)
        }
    }

    // MARK: Inside transactions

    struct Coverage {
        var seq: UInt64
        var changes: Int64
        var bytes: Int64
        var touched = false
    }

    /// Locks the space, then stores the records that extend what it holds (the same rules as
    /// `SQLiteRelayStorage`), then notifies the other instances (at commit): four statements.
    static func append(_ connection: PostgresConnection, space: String, _ records: [RelayRecord], logger: Logger) async throws -> [Int] {
        // Creates the space's row or locks it: every append of the space waits here, whichever instance.
        try await connection.run(
            "INSERT INTO relay_space(space) VALUES (\(space)) ON CONFLICT (space) DO UPDATE SET space = excluded.space", logger: logger)
        // Read after the lock: READ COMMITTED takes a fresh snapshot per statement, so these are current.
        var coverage: [ReplicaID: Coverage] = [:]
        for try await (key, seq, changes, bytes) in try await connection.query(
            "SELECT author, seq, changes, bytes FROM relay_author WHERE space = \(space)", logger: logger).decode((Data, Int64, Int64, Int64).self) {
            coverage[try replica(key)] = Coverage(seq: UInt64(bitPattern: seq), changes: changes, bytes: bytes)
        }
        var stored: [Int] = []
        for (index, record) in records.enumerated() {
            let author = record.author
            let covered = coverage[author]?.seq ?? 0
            if record.endSeq <= covered { continue }
            guard record.startSeq >= 1, record.startSeq - 1 <= covered else {
                throw RelayStorageError(.gap, "changes of \(author) from seq \(record.startSeq) would leave a gap: the relay holds them up to seq \(covered)")
            }
            var entry = coverage[author] ?? Coverage(seq: 0, changes: 0, bytes: 0)
            entry.seq = record.endSeq
            entry.changes += 1
            entry.bytes += Int64(record.payload.count)
            entry.touched = true
            coverage[author] = entry
            stored.append(index)
        }
        guard !stored.isEmpty else { return [] }
        // The records (in order, so arrival follows it), the authors' heads and the notification, in one statement.
        var binds = PostgresBindings(capacity: 1 + stored.count * 4 + coverage.count * 4)
        binds.append(space)
        var sql = "WITH new_changes AS (INSERT INTO relay_change(space, author, start_seq, end_seq, payload) VALUES "
        for (position, index) in stored.enumerated() {
            let record = records[index]
            let base = binds.count
            sql += (position == 0 ? "" : ", ") + "($1, $\(base + 1), $\(base + 2), $\(base + 3), $\(base + 4))"
            binds.append(ByteBuffer(bytes: record.author.raw.bytes))
            binds.append(Int64(bitPattern: record.startSeq))
            binds.append(Int64(bitPattern: record.endSeq))
            binds.append(ByteBuffer(bytes: record.payload))
        }
        sql += "), new_heads AS (INSERT INTO relay_author(space, author, seq, changes, bytes) VALUES "
        var first = true
        for (author, entry) in coverage where entry.touched {
            let base = binds.count
            sql += (first ? "" : ", ") + "($1, $\(base + 1), $\(base + 2), $\(base + 3), $\(base + 4))"
            first = false
            binds.append(ByteBuffer(bytes: author.raw.bytes))
            binds.append(Int64(bitPattern: entry.seq))
            binds.append(entry.changes)
            binds.append(entry.bytes)
        }
        sql += " ON CONFLICT (space, author) DO UPDATE SET seq = excluded.seq, changes = excluded.changes, bytes = excluded.bytes)"
        sql += " SELECT pg_notify('\(channel)', $1)"
        try await connection.run(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
        return stored
    }

    /// One page of the rows a client at `clientVersion` lacks, as `SQLiteRelayStorage.page`: per
    /// lagging author the rows past its entry in seq order, merged by arrival until the page is
    /// full, then the picked rows' payloads.
    static func page(_ connection: PostgresConnection, space: String, clientVersion: VersionVector, limits: RelayPageLimits,
                     needsPayload: (Int64) -> Bool, logger: Logger) async throws -> RelayPage {
        var version = VersionVector()
        var lagging: [(author: ReplicaID, key: Data, have: UInt64)] = []
        for try await (key, seq) in try await connection.query(
            "SELECT author, seq FROM relay_author WHERE space = \(space) ORDER BY author", logger: logger).decode((Data, Int64).self) {
            let author = try replica(key)
            let stored = UInt64(bitPattern: seq)
            version[author] = stored
            if stored > clientVersion[author] { lagging.append((author, key, clientVersion[author])) }
        }
        guard !lagging.isEmpty else { return RelayPage(records: [], version: version, more: false) }
        typealias Candidate = RelayPageCandidate
        // An entry beyond what signed bigints hold has everything stored.
        let asked = lagging.filter { $0.have <= UInt64(Int64.max) }
        var byAuthor: [Data: [Candidate]] = [:]
        if !asked.isEmpty {
            // Per lagging author, its first rows past the client's entry (one statement for all authors).
            let keys = asked.map { ByteBuffer(bytes: $0.key) }
            let haves = asked.map { Int64($0.have) }
            let rows = try await connection.query("""
                SELECT c.author, c.arrival, c.start_seq, c.end_seq, length(c.payload)::bigint
                FROM unnest(\(keys)::bytea[], \(haves)::bigint[]) AS lag(author, have)
                CROSS JOIN LATERAL (
                    SELECT author, arrival, start_seq, end_seq, payload FROM relay_change
                    WHERE space = \(space) AND author = lag.author AND end_seq > lag.have ORDER BY end_seq LIMIT \(Int64(limits.maxChanges))) c
                ORDER BY c.author, c.end_seq
                """, logger: logger)
            let authors = Dictionary(asked.map { ($0.key, $0.author) }, uniquingKeysWith: { first, _ in first })
            for try await (key, id, start, end, size) in rows.decode((Data, Int64, Int64, Int64, Int64).self) {
                guard let author = authors[key] else { continue }
                byAuthor[key, default: []].append(Candidate(id, author, UInt64(bitPattern: start), UInt64(bitPattern: end), Int(size)))
            }
        }
        let queues = asked.compactMap { byAuthor[$0.key] }
        let (picked, delivered) = RelayPageCandidate.pick(queues, limits: limits)
        let wanted = picked.map(\.id).filter { needsPayload($0) }
        var payloads: [Int64: Data] = [:]
        if !wanted.isEmpty {
            for try await (id, payload) in try await connection.query(
                "SELECT arrival, payload FROM relay_change WHERE arrival = ANY(\(wanted))", logger: logger).decode((Int64, Data).self) {
                payloads[id] = payload
            }
        }
        let records = picked.map { row in
            RelayStoredRecord(arrival: row.id, record: RelayRecord(author: row.author, startSeq: row.startSeq, endSeq: row.endSeq,
                                                                   payload: payloads[row.id].map { [UInt8]($0) } ?? []))
        }
        let more = lagging.contains { entry in (delivered[entry.author] ?? entry.have) < version[entry.author] }
        return RelayPage(records: records, version: version, more: more)
    }

    // MARK: Helpers

    /// Runs `body` in a transaction begun with `begin`; rolls back if it throws.
    static func transaction<Result: Sendable>(_ connection: PostgresConnection, begin: String, logger: Logger,
                                              _ body: (PostgresConnection) async throws -> Result) async throws -> Result {
        try await connection.run(PostgresQuery(unsafeSQL: begin), logger: logger)
        let result: Result
        do {
            result = try await body(connection)
        } catch {
            try? await connection.run("ROLLBACK", logger: logger)
            throw error
        }
        try await connection.run("COMMIT", logger: logger)
        return result
    }

    func withStorageErrors<Result>(_ body: () async throws -> Result) async throws -> Result {
        do {
            return try await body()
        } catch let error as RelayStorageError {
            throw error
        } catch {
            throw RelayStorageError(.failure, "relay store (PostgreSQL): \(Self.describe(error))")
        }
    }

    static func replica(_ data: Data) throws -> ReplicaID {
        guard let id = Identifier128(bytes: data) else {
            throw RelayStorageError(.failure, "relay store: an author id of \(data.count) bytes (expected 16)")
        }
        return ReplicaID(id)
    }

    /// A readable message: PostgreSQL's own for a server error, the cause of a connection failure.
    static func describe(_ error: any Error) -> String {
        if let error = error as? RelayStorageError { return error.message }
        if let error = error as? PostgresTransactionError {
            if let inner = error.closureError ?? error.commitError ?? error.beginError { return describe(inner) }
        }
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] {
                return message + (error.serverInfo?[.sqlState].map { " [SQLSTATE \($0)]" } ?? "")
            }
            if let underlying = error.underlying { return "\(error.code): \(underlying)" }
            return "\(error.code)"
        }
        return "\(error)"
    }
}

extension PostgresConnection {
    /// Runs a statement to its end: its error comes with its last row, so a statement whose rows
    /// are not read could fail unseen (and the COMMIT after it silently roll back).
    func run(_ query: PostgresQuery, logger: Logger) async throws {
        for try await _ in try await self.query(query, logger: logger) {}
    }
}

/// The LISTEN connection of the moment, so that `close()` can close it under the listening task.
final class ConnectionHolder: Sendable {
    let connection: Mutex<PostgresConnection?>
    init(_ connection: PostgresConnection?) { self.connection = Mutex(connection) }
}

/// Where a PostgreSQL database is: parsed from a URL
/// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require]`.
public struct PostgresLocation: Sendable, Hashable, CustomStringConvertible {
    public enum TLSMode: String, Sendable, Hashable { case disable, prefer, require }

    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String
    public var tls: TLSMode

    /// Parses a URL; throws `RelayStorageError(.failure, ...)` naming what is wrong.
    public init(url: String) throws {
        guard let components = URLComponents(string: url), let scheme = components.scheme,
              scheme == "postgres" || scheme == "postgresql" else {
            throw RelayStorageError(.failure, "\"\(PostgresLocation.redact(url))\" is not a PostgreSQL URL (postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE)")
        }
        guard let user = components.user, !user.isEmpty else {
            throw RelayStorageError(.failure, "the PostgreSQL URL names no user (postgres://USER@HOST/DATABASE)")
        }
        username = user.removingPercentEncoding ?? user
        password = components.password.map { $0.removingPercentEncoding ?? $0 }
        host = components.host.flatMap { $0.isEmpty ? nil : $0 } ?? "127.0.0.1"
        port = components.port ?? 5432
        guard (1 ... 65535).contains(port) else { throw RelayStorageError(.failure, "the PostgreSQL URL's port \(port) is out of range") }
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        database = path.isEmpty ? username : (path.removingPercentEncoding ?? path)
        tls = .prefer
        for item in components.queryItems ?? [] {
            switch item.name {
            case "sslmode":
                guard let value = item.value, let mode = TLSMode(rawValue: value) else {
                    throw RelayStorageError(.failure, "the PostgreSQL URL's sslmode must be disable, prefer or require")
                }
                tls = mode
            default:
                throw RelayStorageError(.failure, "the PostgreSQL URL has an unknown parameter \"\(item.name)\" (only sslmode is understood)")
            }
        }
    }

    /// The URL without its password, for logs and messages.
    public var redacted: String { "postgres://\(username)@\(host):\(port)/\(database)" }
    public var description: String { redacted }

    static func redact(_ url: String) -> String {
        guard var components = URLComponents(string: url), components.password != nil else { return url }
        components.password = "***"
        return components.string ?? url
    }

    func connectionConfiguration() throws -> PostgresConnection.Configuration {
        let mode: PostgresConnection.Configuration.TLS
        switch tls {
        case .disable: mode = .disable
        case .prefer: mode = .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
        case .require: mode = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
        }
        var configuration = PostgresConnection.Configuration(host: host, port: port, username: username, password: password,
                                                             database: database, tls: mode)
        configuration.options.connectTimeout = .seconds(10)
        return configuration
    }

    func clientConfiguration() throws -> PostgresClient.Configuration {
        let mode: PostgresClient.Configuration.TLS
        switch tls {
        case .disable: mode = .disable
        case .prefer: mode = .prefer(.makeClientConfiguration())
        case .require: mode = .require(.makeClientConfiguration())
        }
        return PostgresClient.Configuration(host: host, port: port, username: username, password: password, database: database, tls: mode)
    }
}

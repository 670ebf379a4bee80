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
/// is one statement, `SELECT crdt_relay_append(...)` (a PL/pgSQL function, its own READ COMMITTED
/// transaction), which first creates or locks the space's row in `relay_space` (`INSERT ... ON
/// CONFLICT DO UPDATE`), so appends of one space are serialized across all instances; it reads the
/// authors' heads and signing keys after taking the lock, fixes the space's kind (sealed or plain)
/// with its first stored record, and takes arrival numbers (an identity column) under the lock, so
/// they commit in order within a space; records sent again (`appendAgain`) go through the same
/// function, kept beside the chain as `SQLiteRelayStorage` keeps them. A page is one statement too
/// (one snapshot, so the version vector and the records agree), and a sync request's append and
/// page one statement together (`crdt_relay_sync`). After an append that stored something has committed, the instance sends
/// `NOTIFY crdt_sync_relay, 'space'` (batched); every instance LISTENs on a dedicated connection
/// and signals `changes`, so live push works whichever instance took the upload. Docs/HTTP.md,
/// "PostgreSQL", says more.
public final class PostgresRelayStorage: RelayStorage {
    /// 16 bytes that identify this relay: one per database, shared by every instance over it.
    public let relayID: [UInt8]
    /// Signalled after this instance's appends and when another instance's NOTIFY arrives.
    public let changes = RelayChangeSignals()
    /// Where the database is.
    public let location: PostgresLocation
    let client: PostgresClient
    let logger: Logger
    let notifier: Notifier
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
        notifier = Notifier(client: client, logger: logger)
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
        await notifier.flush()
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
        // End-to-end encrypted spaces, as SQLiteRelayStorage's "v3-e2e-sealed-records": a record may be
        // a sealed unit; a space is sealed or plain for good (`relay_space.sealed`, fixed by the first
        // append that stores, NULL until then); an author's first signing key is its only one.
        Migration(version: 2, name: "relay-pg-v2-sealed-spaces", statements: [
            "ALTER TABLE relay_change ADD COLUMN sealed boolean NOT NULL DEFAULT false",
            "ALTER TABLE relay_space ADD COLUMN sealed boolean",
            // Until now every stored record was plain (sealed units were refused).
            "UPDATE relay_space SET sealed = false",
            """
            CREATE TABLE relay_signing_key (
                space text NOT NULL REFERENCES relay_space(space), author bytea NOT NULL, public_key bytea NOT NULL,
                PRIMARY KEY (space, author))
            """,
        ]),
        // An append in one statement (one round trip, its own transaction): lock the space, check
        // kind, keys and gaps, store. Errors carry their own SQLSTATE and the record's index. No
        // NOTIFY inside: a notifying commit takes a database-wide lock, which would serialize every
        // append (and its commit flush) behind the others while holding its space's row lock.
        // A sync request (an append, then a page that sees it) is one statement too.
        Migration(version: 3, name: "relay-pg-v3-append-function", statements: [appendFunctionV3, syncFunctionV3]),
        // Records sent again, as SQLiteRelayStorage's "v4-records-sent-again": a copied replica's
        // other branch, at seqs the space holds, lies beside the author's chain (`again`), so two
        // records may end at one seq; the chain's are still one per end (a partial unique index).
        // The append and sync functions that keep and serve them are overloads (one argument
        // more, `again`): version 3's stay, so instances not yet upgraded go on working.
        Migration(version: 4, name: "relay-pg-v4-records-sent-again", statements: [
            // A constant default: existing rows are not rewritten, and read as in the chain.
            "ALTER TABLE relay_change ADD COLUMN again boolean NOT NULL DEFAULT false",
            "CREATE UNIQUE INDEX relay_change_chain ON relay_change (space, author, end_seq) WHERE NOT again",
            // Pages and the check for a record sent again read an author's records, chain and
            // sent again, in (end, arrival) order.
            "CREATE INDEX relay_change_end ON relay_change (space, author, end_seq, arrival)",
            "ALTER TABLE relay_change DROP CONSTRAINT relay_change_space_author_end_seq_key",
            appendFunction, syncFunction,
        ]),
    ]

    /// Migration 3's `crdt_relay_sync` (frozen: migration 4 adds the one in use, `syncFunction`):
    /// `crdt_relay_append` (when there are records), then the page statement (`pageSQLV3`, its own
    /// snapshot, which holds the append); rows as `pageSQLV3`'s, after one row per stored record's
    /// index (a NULL author, the index as the number).
    static let syncFunctionV3 = """
        CREATE FUNCTION crdt_relay_sync(p_space text, p_authors bytea[], p_starts bigint[], p_ends bigint[],
                                        p_payloads bytea[], p_sealed boolean[], p_keys bytea[],
                                        p_client_authors bytea[], p_client_haves bigint[], p_max_changes bigint, p_max_bytes bigint)
        RETURNS TABLE (o_author bytea, o_number bigint, o_start bigint, o_end bigint, o_sealed boolean, o_payload bytea)
        LANGUAGE plpgsql AS $fn$
        BEGIN
            IF coalesce(array_length(p_authors, 1), 0) > 0 THEN
                RETURN QUERY SELECT NULL::bytea, stored::bigint, NULL::bigint, NULL::bigint, NULL::boolean, NULL::bytea
                    FROM unnest(crdt_relay_append(p_space, p_authors, p_starts, p_ends, p_payloads, p_sealed, p_keys)) AS stored;
            END IF;
            RETURN QUERY \(pageSQLV3.replacingOccurrences(of: "$1", with: "p_space").replacingOccurrences(of: "$2", with: "p_client_authors")
                .replacingOccurrences(of: "$3", with: "p_client_haves").replacingOccurrences(of: "$4", with: "p_max_changes")
                .replacingOccurrences(of: "$5", with: "p_max_bytes"));
        END
        $fn$
        """

    /// `crdt_relay_sync` (migration 4): `crdt_relay_append` with `p_again` (when there are records),
    /// then the page statement (`pageSQL`, its own snapshot, which holds the append); rows as
    /// `pageSQL`'s, after one row per stored record's index (a NULL author, the index as the number).
    static let syncFunction = """
        CREATE FUNCTION crdt_relay_sync(p_space text, p_authors bytea[], p_starts bigint[], p_ends bigint[],
                                        p_payloads bytea[], p_sealed boolean[], p_keys bytea[], p_again boolean,
                                        p_client_authors bytea[], p_client_haves bigint[], p_max_changes bigint, p_max_bytes bigint)
        RETURNS TABLE (o_author bytea, o_number bigint, o_start bigint, o_end bigint, o_sealed boolean, o_payload bytea, o_again boolean)
        LANGUAGE plpgsql AS $fn$
        BEGIN
            IF coalesce(array_length(p_authors, 1), 0) > 0 THEN
                RETURN QUERY SELECT NULL::bytea, stored::bigint, NULL::bigint, NULL::bigint, NULL::boolean, NULL::bytea, NULL::boolean
                    FROM unnest(crdt_relay_append(p_space, p_authors, p_starts, p_ends, p_payloads, p_sealed, p_keys, p_again)) AS stored;
            END IF;
            RETURN QUERY \(pageSQL.replacingOccurrences(of: "$1", with: "p_space").replacingOccurrences(of: "$2", with: "p_client_authors")
                .replacingOccurrences(of: "$3", with: "p_client_haves").replacingOccurrences(of: "$4", with: "p_max_changes")
                .replacingOccurrences(of: "$5", with: "p_max_bytes"));
        END
        $fn$
        """

    /// `crdt_relay_append` (migration 4): the rules of `SQLiteRelayStorage.append`, server-side,
    /// under the space's row lock; returns the indexes (from 0) of the records stored. With
    /// `p_again` (`appendAgain`), a record that ends at or before what the space holds of its
    /// author is kept beside the chain (`again`), unless one with the same author, seqs and payload
    /// is stored already. Seqs are a UInt64's bits in a bigint, so they are compared with the sign
    /// bit flipped (unsigned order).
    static let appendFunction = """
        CREATE FUNCTION crdt_relay_append(p_space text, p_authors bytea[], p_starts bigint[], p_ends bigint[],
                                          p_payloads bytea[], p_sealed boolean[], p_keys bytea[], p_again boolean)
        RETURNS integer[] LANGUAGE plpgsql AS $fn$
        DECLARE
            v_kind boolean;
            v_stored integer[] := '{}';
            v_covered bigint;
            v_known bytea;
            v_count integer := coalesce(array_length(p_authors, 1), 0);
            v_sign constant bigint := -9223372036854775808;
        BEGIN
            -- Creates the space's row or locks it: every append of the space, whichever instance,
            -- waits here; the first append that stores fixes the kind (a refused one rolls back).
            INSERT INTO relay_space AS s (space, sealed) VALUES (p_space, p_sealed[1])
                ON CONFLICT (space) DO UPDATE SET sealed = coalesce(s.sealed, excluded.sealed)
                RETURNING s.sealed INTO v_kind;
            FOR i IN 1 .. v_count LOOP
                IF p_sealed[i] IS DISTINCT FROM v_kind THEN
                    RAISE EXCEPTION 'the space is % and a record is not', CASE WHEN v_kind THEN 'sealed' ELSE 'plain' END
                        USING ERRCODE = 'CRK01', DETAIL = (i - 1)::text || ' ' || v_kind::text;
                END IF;
            END LOOP;
            -- READ COMMITTED: each statement below reads what committed before the lock, and this
            -- function's own writes.
            FOR i IN 1 .. v_count LOOP
                IF octet_length(p_keys[i]) > 0 THEN
                    SELECT public_key INTO v_known FROM relay_signing_key WHERE space = p_space AND author = p_authors[i];
                    IF NOT FOUND THEN
                        INSERT INTO relay_signing_key(space, author, public_key) VALUES (p_space, p_authors[i], p_keys[i]);
                    ELSIF v_known <> p_keys[i] THEN
                        RAISE EXCEPTION 'a unit is signed with another key than the first' USING ERRCODE = 'CRS01', DETAIL = (i - 1)::text;
                    END IF;
                END IF;
                SELECT seq INTO v_covered FROM relay_author WHERE space = p_space AND author = p_authors[i];
                IF NOT FOUND THEN v_covered := 0; END IF;
                IF (p_ends[i] # v_sign) <= (v_covered # v_sign) THEN
                    -- A repeat; sent again, kept beside the chain once per payload at those seqs
                    -- (the author's row exists: it covers the record's end, at least seq 1).
                    CONTINUE WHEN p_again IS NOT TRUE OR EXISTS (
                        SELECT 1 FROM relay_change WHERE space = p_space AND author = p_authors[i] AND end_seq = p_ends[i]
                            AND start_seq = p_starts[i] AND payload = p_payloads[i]);
                    INSERT INTO relay_change(space, author, start_seq, end_seq, payload, sealed, again)
                        VALUES (p_space, p_authors[i], p_starts[i], p_ends[i], p_payloads[i], p_sealed[i], true);
                    UPDATE relay_author SET changes = changes + 1, bytes = bytes + octet_length(p_payloads[i])
                        WHERE space = p_space AND author = p_authors[i];
                    v_stored := v_stored || (i - 1);
                    CONTINUE;
                END IF;
                -- Past the test above v_covered < UInt64.max, so its + 1 cannot overflow.
                IF p_starts[i] = 0 OR (p_starts[i] # v_sign) > (v_covered # v_sign) + 1 THEN
                    RAISE EXCEPTION 'a record would leave a gap' USING ERRCODE = 'CRG01', DETAIL = (i - 1)::text || ' ' || v_covered::text;
                END IF;
                INSERT INTO relay_change(space, author, start_seq, end_seq, payload, sealed, again)
                    VALUES (p_space, p_authors[i], p_starts[i], p_ends[i], p_payloads[i], p_sealed[i], false);
                INSERT INTO relay_author AS a (space, author, seq, changes, bytes)
                    VALUES (p_space, p_authors[i], p_ends[i], 1, octet_length(p_payloads[i]))
                    ON CONFLICT (space, author) DO UPDATE SET seq = excluded.seq, changes = a.changes + 1, bytes = a.bytes + excluded.bytes;
                v_stored := v_stored || (i - 1);
            END LOOP;
            RETURN v_stored;
        END
        $fn$
        """

    /// Migration 3's `crdt_relay_append` (frozen: migration 4 adds the one in use, `appendFunction`).
    static let appendFunctionV3 = """
        CREATE FUNCTION crdt_relay_append(p_space text, p_authors bytea[], p_starts bigint[], p_ends bigint[],
                                          p_payloads bytea[], p_sealed boolean[], p_keys bytea[])
        RETURNS integer[] LANGUAGE plpgsql AS $fn$
        DECLARE
            v_kind boolean;
            v_stored integer[] := '{}';
            v_covered bigint;
            v_known bytea;
            v_count integer := coalesce(array_length(p_authors, 1), 0);
            v_sign constant bigint := -9223372036854775808;
        BEGIN
            -- Creates the space's row or locks it: every append of the space, whichever instance,
            -- waits here; the first append that stores fixes the kind (a refused one rolls back).
            INSERT INTO relay_space AS s (space, sealed) VALUES (p_space, p_sealed[1])
                ON CONFLICT (space) DO UPDATE SET sealed = coalesce(s.sealed, excluded.sealed)
                RETURNING s.sealed INTO v_kind;
            FOR i IN 1 .. v_count LOOP
                IF p_sealed[i] IS DISTINCT FROM v_kind THEN
                    RAISE EXCEPTION 'the space is % and a record is not', CASE WHEN v_kind THEN 'sealed' ELSE 'plain' END
                        USING ERRCODE = 'CRK01', DETAIL = (i - 1)::text || ' ' || v_kind::text;
                END IF;
            END LOOP;
            -- READ COMMITTED: each statement below reads what committed before the lock, and this
            -- function's own writes.
            FOR i IN 1 .. v_count LOOP
                IF octet_length(p_keys[i]) > 0 THEN
                    SELECT public_key INTO v_known FROM relay_signing_key WHERE space = p_space AND author = p_authors[i];
                    IF NOT FOUND THEN
                        INSERT INTO relay_signing_key(space, author, public_key) VALUES (p_space, p_authors[i], p_keys[i]);
                    ELSIF v_known <> p_keys[i] THEN
                        RAISE EXCEPTION 'a unit is signed with another key than the first' USING ERRCODE = 'CRS01', DETAIL = (i - 1)::text;
                    END IF;
                END IF;
                SELECT seq INTO v_covered FROM relay_author WHERE space = p_space AND author = p_authors[i];
                IF NOT FOUND THEN v_covered := 0; END IF;
                CONTINUE WHEN (p_ends[i] # v_sign) <= (v_covered # v_sign);
                -- Past the line above v_covered < UInt64.max, so its + 1 cannot overflow.
                IF p_starts[i] = 0 OR (p_starts[i] # v_sign) > (v_covered # v_sign) + 1 THEN
                    RAISE EXCEPTION 'a record would leave a gap' USING ERRCODE = 'CRG01', DETAIL = (i - 1)::text || ' ' || v_covered::text;
                END IF;
                INSERT INTO relay_change(space, author, start_seq, end_seq, payload, sealed)
                    VALUES (p_space, p_authors[i], p_starts[i], p_ends[i], p_payloads[i], p_sealed[i]);
                INSERT INTO relay_author AS a (space, author, seq, changes, bytes)
                    VALUES (p_space, p_authors[i], p_ends[i], 1, octet_length(p_payloads[i]))
                    ON CONFLICT (space, author) DO UPDATE SET seq = excluded.seq, changes = a.changes + 1, bytes = a.bytes + excluded.bytes;
                v_stored := v_stored || (i - 1);
            END LOOP;
            RETURN v_stored;
        END
        $fn$
        """

    /// Applies the migrations this database lacks in one transaction under an advisory lock, and
    /// returns the relay's identity (made by the first instance).
    ///
    /// - Parameter upTo: the last version to apply (tests make older schemas with it).
    static func migrate(_ connection: PostgresConnection, relayID fixedID: [UInt8]?, upTo: Int = .max, logger: Logger) async throws -> [UInt8] {
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
            for migration in migrations where !applied.contains(migration.version) && migration.version <= upTo {
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

    /// Stores the records that extend what the space holds: one statement (`crdt_relay_append`),
    /// its own READ COMMITTED transaction under the space's row lock; returns the indexes of those stored.
    public func append(space: String, records: [RelayRecord]) async throws -> [Int] {
        try await append(space: space, records: records, again: false)
    }

    /// `append`, but a record at seqs the space holds is kept beside the author's chain, once per
    /// payload: the same statement, with `again`.
    public func appendAgain(space: String, records: [RelayRecord]) async throws -> [Int] {
        try await append(space: space, records: records, again: true)
    }

    private func append(space: String, records: [RelayRecord], again: Bool) async throws -> [Int] {
        guard !records.isEmpty else { return [] }
        if let refusal = RelayRecord.rangeRefusal(records) { throw refusal }
        let statement = AppendStatement(records, space: space, again: again)
        let stored: [Int] = try await withStorageErrors {
            do {
                var indexes: [Int] = []
                try await self.client.each(statement, logger: self.logger) { indexes = $0.map(Int.init) }
                return indexes
            } catch let error as PSQLError {
                if let refusal = Self.refusal(error, records) { throw refusal }
                throw error
            }
        }
        if !stored.isEmpty {
            changes.signal(space)
            notifier.notify(space)
        }
        return stored
    }

    /// One page of the records a client at `clientVersion` lacks, in arrival order: one statement,
    /// so one snapshot (the vector and the records agree) without a transaction around it.
    public func page(space: String, after clientVersion: VersionVector, limits: RelayPageLimits,
                     needsPayload: @escaping @Sendable (Int64) -> Bool = { _ in true }) async throws -> RelayPage {
        try await withStorageErrors {
            try await Self.page(self.client, space: space, clientVersion: clientVersion, limits: limits,
                                needsPayload: needsPayload, logger: self.logger)
        }
    }

    /// An append, then a page that sees it: one statement (`crdt_relay_sync`), one round trip.
    public func appendThenPage(space: String, records: [RelayRecord], after clientVersion: VersionVector, limits: RelayPageLimits,
                               needsPayload: @escaping @Sendable (Int64) -> Bool) async throws -> (stored: [Int], page: RelayPage) {
        if let refusal = RelayRecord.rangeRefusal(records) { throw refusal }
        let (clientAuthors, haves) = Self.clientArrays(clientVersion)
        let statement = SyncStatement(
            append: AppendStatement(records, space: space, again: false),
            clientAuthors: clientAuthors, haves: haves, maxChanges: Int64(limits.maxChanges), maxBytes: Int64(limits.maxBytes))
        let builder: PageBuilder = try await withStorageErrors {
            do {
                var builder = PageBuilder()
                try await self.client.each(statement, logger: self.logger) { row in
                    try builder.add(row.0, row.1, row.2, row.3, row.4, row.5, row.6, needsPayload: needsPayload)
                }
                return builder
            } catch let error as PSQLError {
                if let refusal = Self.refusal(error, records) { throw refusal }
                throw error
            }
        }
        if !builder.stored.isEmpty {
            changes.signal(space)
            notifier.notify(space)
        }
        return (builder.stored, builder.page(after: clientVersion))
    }

    /// What the space holds: its version vector and counts (one statement, so one snapshot).
    public func status(space: String) async throws -> RelaySpaceStatus {
        try await withStorageErrors {
            var status = RelaySpaceStatus(space: space, version: VersionVector(), authors: 0, changes: 0, operations: 0, bytes: 0)
            try await self.client.each(StatusStatement(space: space), logger: self.logger) { key, seq, changes, bytes in
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
            // Leased here, not by `client.query` (see `PostgresClient.each`).
            try await self.client.withConnection { connection in
                let rows = try await connection.query(
                    "SELECT count(DISTINCT space), coalesce(sum(changes), 0)::bigint, coalesce(sum(bytes), 0)::bigint FROM relay_author",
                    logger: self.logger)
                var totals = RelayTotals(spaces: 0, changes: 0, bytes: 0)
                for try await (spaces, changes, bytes) in rows.decode((Int64, Int64, Int64).self) {
                    totals = RelayTotals(spaces: Int(spaces), changes: Int(changes), bytes: Int(bytes))
                }
                return totals
            }
        }
    }

    // MARK: Statements

    /// The refusal a `crdt_relay_append` error stands for (by its SQLSTATE), with the messages
    /// `SQLiteRelayStorage` gives; nil for any other error.
    static func refusal(_ error: PSQLError, _ records: [RelayRecord]) -> RelayStorageError? {
        guard let state = error.serverInfo?[.sqlState], ["CRK01", "CRS01", "CRG01"].contains(state) else { return nil }
        let detail = (error.serverInfo?[.detail] ?? "").split(separator: " ")
        guard let index = detail.first.flatMap({ Int($0) }), records.indices.contains(index) else { return nil }
        let record = records[index]
        switch state {
        case "CRK01":
            return RelayStorageError(.encryption, detail.dropFirst().first == "true"
                ? "this space is end-to-end encrypted: it takes only sealed bundles (a plaintext change of \(record.author) was refused)"
                : "this space is not encrypted: it takes no sealed bundles (a sealed unit of \(record.author) was refused)")
        case "CRS01":
            return RelayStorageError(.encryption, "a sealed unit of \(record.author) is signed with another key than the one this space holds for it; nothing was stored")
        default:
            let covered = detail.dropFirst().first.flatMap { Int64($0) }.map { UInt64(bitPattern: $0) } ?? 0
            return RelayStorageError(.gap, "changes of \(record.author) from seq \(record.startSeq) would leave a gap: the relay holds them up to seq \(covered)")
        }
    }

    /// The page statement: the space's vector (rows with a NULL start) and the page's records with
    /// their payloads and `again`. Per lagging author its first rows past the client's entry in
    /// (end_seq, arrival) order (through the (space, author, end_seq, arrival) index): its queue.
    /// The queues merged as `RelayPageCandidate.pick` merges them (the queue whose head arrived
    /// first goes next) are the candidates ordered by (`lead`, `place`), where `lead` is the latest
    /// arrival up to a row in its queue and `place` its place there: a head is taken only after
    /// every head that arrived before it, and the rows after it that arrived earlier (records sent
    /// again, which lie at seqs the chain holds) follow it. (Without records sent again, an
    /// author's rows in seq order are in arrival order, and this is ordering them all by
    /// arrival.) The page is the prefix within `$4` rows and `$5` bytes (the first row always fits).
    static let pageSQL = """
        WITH client(author, have) AS (SELECT * FROM unnest($2::bytea[], $3::bigint[])),
        heads AS (
            SELECT a.author, a.seq, coalesce(c.have, 0) AS have
            FROM relay_author a LEFT JOIN client c ON c.author = a.author WHERE a.space = $1),
        candidates AS (
            SELECT h.author, r.arrival, r.end_seq, r.size FROM heads h CROSS JOIN LATERAL (
                SELECT arrival, end_seq, octet_length(payload) AS size FROM relay_change
                WHERE space = $1 AND author = h.author AND end_seq > h.have ORDER BY end_seq, arrival LIMIT $4) r
            WHERE h.seq > h.have),
        queued AS (
            SELECT arrival, size, max(arrival) OVER q AS lead, row_number() OVER q AS place FROM candidates
            WINDOW q AS (PARTITION BY author ORDER BY end_seq, arrival ROWS UNBOUNDED PRECEDING)),
        picked AS (
            SELECT arrival, row_number() OVER w AS n, sum(size) OVER w AS total FROM queued
            WINDOW w AS (ORDER BY lead, place ROWS UNBOUNDED PRECEDING))
        SELECT author, seq, NULL::bigint, NULL::bigint, NULL::boolean, NULL::bytea, NULL::boolean FROM heads
        UNION ALL
        SELECT c.author, c.arrival, c.start_seq, c.end_seq, c.sealed, c.payload, c.again
        FROM picked p JOIN relay_change c ON c.arrival = p.arrival
        WHERE p.n <= $4 AND (p.n = 1 OR p.total <= $5)
        """

    /// Migration 3's page statement (frozen: `crdt_relay_sync` of version 3 holds it; `pageSQL` is
    /// the one in use).
    static let pageSQLV3 = """
        WITH client(author, have) AS (SELECT * FROM unnest($2::bytea[], $3::bigint[])),
        heads AS (
            SELECT a.author, a.seq, coalesce(c.have, 0) AS have
            FROM relay_author a LEFT JOIN client c ON c.author = a.author WHERE a.space = $1),
        candidates AS (
            SELECT r.arrival, r.size FROM heads h CROSS JOIN LATERAL (
                SELECT arrival, octet_length(payload) AS size FROM relay_change
                WHERE space = $1 AND author = h.author AND end_seq > h.have ORDER BY end_seq LIMIT $4) r
            WHERE h.seq > h.have),
        picked AS (
            SELECT arrival, row_number() OVER w AS n, sum(size) OVER w AS total FROM candidates WINDOW w AS (ORDER BY arrival))
        SELECT author, seq, NULL::bigint, NULL::bigint, NULL::boolean, NULL::bytea FROM heads
        UNION ALL
        SELECT c.author, c.arrival, c.start_seq, c.end_seq, c.sealed, c.payload
        FROM picked p JOIN relay_change c ON c.arrival = p.arrival
        WHERE p.n <= $4 AND (p.n = 1 OR p.total <= $5)
        """

    /// One page of the rows a client at `clientVersion` lacks (see `pageSQL`).
    static func page(_ client: PostgresClient, space: String, clientVersion: VersionVector, limits: RelayPageLimits,
                     needsPayload: (Int64) -> Bool, logger: Logger) async throws -> RelayPage {
        let (authors, haves) = clientArrays(clientVersion)
        let statement = PageStatement(space: space, authors: authors, haves: haves,
                                      maxChanges: Int64(limits.maxChanges), maxBytes: Int64(limits.maxBytes))
        var builder = PageBuilder()
        try await client.each(statement, logger: logger) { row in
            try builder.add(row.0, row.1, row.2, row.3, row.4, row.5, row.6, needsPayload: needsPayload)
        }
        return builder.page(after: clientVersion)
    }

    /// A client's vector as the statements take it; an entry beyond what signed bigints hold has
    /// everything the relay can hold.
    static func clientArrays(_ version: VersionVector) -> (authors: [ByteBuffer], haves: [Int64]) {
        let entries = version.sortedEntries
        return (entries.map { ByteBuffer(bytes: $0.replica.raw.bytes) }, entries.map { Int64(clamping: $0.seq) })
    }

    /// A page from the page statement's rows: stored indexes (no author), heads (no start), records.
    struct PageBuilder {
        var stored: [Int] = []
        var version = VersionVector()
        var records: [RelayStoredRecord] = []
        var delivered: [ReplicaID: UInt64] = [:]

        mutating func add(_ key: Data?, _ number: Int64, _ start: Int64?, _ end: Int64?, _ sealed: Bool?, _ payload: Data?, _ again: Bool?,
                          needsPayload: (Int64) -> Bool) throws {
            guard let key else {
                stored.append(Int(number))
                return
            }
            let author = try PostgresRelayStorage.replica(key)
            guard let start, let end else {
                version[author] = UInt64(bitPattern: number)
                return
            }
            let record = RelayRecord(author: author, startSeq: UInt64(bitPattern: start), endSeq: UInt64(bitPattern: end),
                                     payload: needsPayload(number) ? payload.map { [UInt8]($0) } ?? [] : [], sealed: sealed ?? false,
                                     again: again ?? false)
            records.append(RelayStoredRecord(arrival: number, record: record))
            delivered[author] = max(delivered[author] ?? 0, record.endSeq)
        }

        func page(after clientVersion: VersionVector) -> RelayPage {
            let more = version.sortedEntries.contains { entry in
                entry.seq > clientVersion[entry.replica] && (delivered[entry.replica] ?? clientVersion[entry.replica]) < entry.seq
            }
            return RelayPage(records: ordered(), version: version, more: more)
        }

        /// The records in the order `RelayPageCandidate.pick` gives them (`SQLiteRelayStorage`'s):
        /// they are the first of each author's queue (in (endSeq, arrival) order), so merging
        /// those again gives the page's order. Arrival order when no record was sent again.
        func ordered() -> [RelayStoredRecord] {
            var queues: [ReplicaID: [RelayPageCandidate]] = [:]
            var byArrival: [Int64: RelayStoredRecord] = [:]
            for stored in records {
                let record = stored.record
                queues[record.author, default: []].append(
                    RelayPageCandidate(stored.arrival, record.author, record.startSeq, record.endSeq, 0, again: record.again))
                byArrival[stored.arrival] = stored
            }
            let sorted = queues.values.map { $0.sorted { ($0.endSeq, $0.id) < ($1.endSeq, $1.id) } }
            let merged = RelayPageCandidate.pick(sorted, limits: RelayPageLimits(maxChanges: records.count, maxBytes: .max)).picked
            return merged.compactMap { byArrival[$0.id] }
        }
    }

    // MARK: Prepared statements (each connection parses and plans them once)

    struct AppendStatement: PostgresPreparedStatement {
        static let name = "crdt_sync_relay_append_v4"
        static let sql = "SELECT crdt_relay_append($1, $2::bytea[], $3::bigint[], $4::bigint[], $5::bytea[], $6::boolean[], $7::bytea[], $8::boolean)"
        typealias Row = [Int32]
        var space: String
        var authors: [ByteBuffer]
        var starts: [Int64]
        var ends: [Int64]
        var payloads: [ByteBuffer]
        var sealed: [Bool]
        var keys: [ByteBuffer]
        var again: Bool

        /// The records as arrays; an empty key stands for none (a real one is 32 bytes).
        init(_ records: [RelayRecord], space: String, again: Bool) {
            self.space = space
            authors = records.map { ByteBuffer(bytes: $0.author.raw.bytes) }
            starts = records.map { Int64(bitPattern: $0.startSeq) }
            ends = records.map { Int64(bitPattern: $0.endSeq) }
            payloads = records.map { ByteBuffer(bytes: $0.payload) }
            sealed = records.map(\.sealed)
            keys = records.map { ByteBuffer(bytes: $0.signingKey ?? []) }
            self.again = again
        }

        func makeBindings() throws -> PostgresBindings {
            var binds = PostgresBindings(capacity: 8)
            binds.append(space)
            binds.append(authors)
            binds.append(starts)
            binds.append(ends)
            binds.append(payloads)
            binds.append(sealed)
            binds.append(keys)
            binds.append(again)
            return binds
        }

        func decodeRow(_ row: PostgresRow) throws -> [Int32] { try row.decode([Int32].self) }
    }

    struct PageStatement: PostgresPreparedStatement {
        static let name = "crdt_sync_relay_page_v4"
        static var sql: String { PostgresRelayStorage.pageSQL }
        typealias Row = (Data, Int64, Int64?, Int64?, Bool?, Data?, Bool?)
        var space: String
        var authors: [ByteBuffer]
        var haves: [Int64]
        var maxChanges: Int64
        var maxBytes: Int64

        func makeBindings() throws -> PostgresBindings {
            var binds = PostgresBindings(capacity: 5)
            binds.append(space)
            binds.append(authors)
            binds.append(haves)
            binds.append(maxChanges)
            binds.append(maxBytes)
            return binds
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }

    struct SyncStatement: PostgresPreparedStatement {
        static let name = "crdt_sync_relay_sync_v4"
        static let sql = """
            SELECT * FROM crdt_relay_sync($1, $2::bytea[], $3::bigint[], $4::bigint[], $5::bytea[], $6::boolean[], $7::bytea[], $8::boolean,
                                          $9::bytea[], $10::bigint[], $11, $12)
            """
        typealias Row = (Data?, Int64, Int64?, Int64?, Bool?, Data?, Bool?)
        var append: AppendStatement
        var clientAuthors: [ByteBuffer]
        var haves: [Int64]
        var maxChanges: Int64
        var maxBytes: Int64

        func makeBindings() throws -> PostgresBindings {
            var binds = try append.makeBindings()
            binds.append(clientAuthors)
            binds.append(haves)
            binds.append(maxChanges)
            binds.append(maxBytes)
            return binds
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }

    struct StatusStatement: PostgresPreparedStatement {
        static let name = "crdt_sync_relay_status_v1"
        static let sql = "SELECT author, seq, changes, bytes FROM relay_author WHERE space = $1"
        typealias Row = (Data, Int64, Int64, Int64)
        var space: String

        func makeBindings() throws -> PostgresBindings {
            var binds = PostgresBindings(capacity: 1)
            binds.append(space)
            return binds
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
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

extension PostgresClient {
    /// Every row of `statement`, on a pooled connection handed back however the statement ends.
    /// Not `PostgresClient.execute`/`query`: when a statement's error arrives before its rows are
    /// taken (a refused append, now and then) they never give the connection back (postgres-nio 1.33.2).
    func each<Statement: PostgresPreparedStatement>(_ statement: Statement, logger: Logger,
                                                    _ body: (Statement.Row) throws -> Void) async throws {
        try await withConnection { connection in
            for try await row in try await connection.execute(statement, logger: logger) { try body(row) }
        }
    }
}

extension PostgresConnection {
    /// Runs a statement to its end: its error comes with its last row, so a statement whose rows
    /// are not read could fail unseen (and the COMMIT after it silently roll back).
    func run(_ query: PostgresQuery, logger: Logger) async throws {
        for try await _ in try await self.query(query, logger: logger) {}
    }
}

/// Tells the other instances which spaces grew: NOTIFY after the appends committed (never inside
/// them, see migration 3), one statement for all the spaces that grew while the previous one ran,
/// so at most one notifying commit per instance is in flight. A notification lost to a failure
/// (logged) delays other instances' waiters until their wait runs out and they look again.
final class Notifier: Sendable {
    private let state = Mutex<(pending: Set<String>, running: Task<Void, Never>?)>(([], nil))
    private let client: PostgresClient
    private let logger: Logger

    init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Sends a notification for `space` soon (at once when none is in flight).
    func notify(_ space: String) {
        state.withLock { state in
            state.pending.insert(space)
            if state.running == nil { state.running = Task { await self.drain() } }
        }
    }

    /// Waits until what was asked is sent (before the pool closes).
    func flush() async {
        while let running = state.withLock({ $0.running }) { await running.value }
    }

    private func drain() async {
        while true {
            let spaces = state.withLock { state -> [String] in
                let taken = Array(state.pending)
                state.pending = []
                if taken.isEmpty { state.running = nil }
                return taken
            }
            if spaces.isEmpty { return }
            do {
                // Leased here, not by `client.query` (see `PostgresClient.each`).
                try await client.withConnection { connection in
                    try await connection.run(
                        "SELECT pg_notify(\(PostgresRelayStorage.channel), space) FROM unnest(\(spaces)::text[]) AS space", logger: logger)
                }
            } catch {
                logger.warning("PostgreSQL NOTIFY failed; other instances' waiters will look again when their wait runs out",
                               metadata: ["error": "\(PostgresRelayStorage.describe(error))", "spaces": "\(spaces.count)"])
            }
        }
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

import Foundation
import NotesCRDT
import NotesRelay
@testable import NotesRelayPostgres
import NotesSync
import PostgresNIO
import Synchronization
import Testing

/// Several relay instances (each a `PostgresRelayStorage`, with its own pool and LISTEN
/// connection) over one PostgreSQL database.
@Suite(.enabled(if: RelayBackend.postgresURL != nil, RelayBackend.postgresNote))
struct PostgresRelayStorageTests {
    static func instance() async throws -> PostgresRelayStorage {
        try await PostgresRelayStorage.connect(try PostgresLocation(url: RelayBackend.postgresURL ?? ""), maxConnections: 4)
    }

    /// `count` changes of one fresh author, one record each.
    static func authorRecords(_ count: Int) throws -> [RelayRecord] {
        var notebook = Notebook(replicaID: .random(), wallClock: FixedWallClock(1_700_000_000_000))
        let (id, first) = notebook.createNote(title: "0")
        var changes = [first]
        for index in 1 ..< count { changes.append(try #require(try notebook.setTitle(id, "\(index)"))) }
        return records(changes)
    }

    /// Every author's records through a page walk: seqs 1...n contiguous, none twice.
    static func walk(_ storage: any RelayStorage, _ space: String, pageSize: Int = 7) async throws -> [ReplicaID: [UInt64]] {
        var cursor = VersionVector()
        var seqs: [ReplicaID: [UInt64]] = [:]
        while true {
            let page = try await storage.page(space: space, after: cursor, limits: RelayPageLimits(maxChanges: pageSize))
            for stored in page.records {
                #expect(stored.record.startSeq == cursor[stored.record.author] + 1)
                cursor[stored.record.author] = stored.record.endSeq
                seqs[stored.record.author, default: []].append(stored.record.startSeq)
            }
            if !page.more { return seqs }
        }
    }

    /// First writers racing through two instances: a new space gets one kind (a sealed and a plain
    /// first append, exactly one stored), and an author one signing key (two first units under
    /// different keys, exactly one stored); the loser is refused as an encryption error.
    @Test func firstWritersThroughTwoInstancesFixOneKindAndOneKey() async throws {
        let a = try await Self.instance()
        let b = try await Self.instance()
        for round in 0 ..< 8 {
            let space = uniqueSpace("race")
            let author = ReplicaID.random()
            async let sealed = Self.outcome { try await a.append(space: space, records: [SealedRelayStorageTests.sealed(author, 1, 1)]) }
            async let plain = Self.outcome { try await b.append(space: space, records: SealedRelayStorageTests.plainRecords()) }
            let outcomes = await [sealed, plain]
            #expect(outcomes.filter { $0 == nil }.count == 1, "round \(round): \(outcomes)")
            #expect(outcomes.compactMap { $0 } == [.encryption], "round \(round)")
            let served = try await SealedRelayStorageTests.all(a, space)
            #expect(served.count == 1 && served[0].sealed == (outcomes[0] == nil), "round \(round)")

            let keyed = uniqueSpace("keys")
            async let first = Self.outcome { try await a.append(space: keyed, records: [SealedRelayStorageTests.sealed(author, 1, 1, key: SealedRelayStorageTests.key(1))]) }
            async let second = Self.outcome { try await b.append(space: keyed, records: [SealedRelayStorageTests.sealed(author, 1, 1, key: SealedRelayStorageTests.key(2))]) }
            let keys = await [first, second]
            #expect(keys.filter { $0 == nil }.count == 1 && keys.compactMap { $0 } == [.encryption], "round \(round): \(keys)")
            #expect(try await b.status(space: keyed).changes == 1, "round \(round)")
        }
        await a.close()
        await b.close()
    }

    /// nil when `body` succeeds, else the kind of storage error it threw.
    static func outcome(_ body: () async throws -> [Int]) async -> RelayStorageError.Kind? {
        do {
            _ = try await body()
            return nil
        } catch let error as RelayStorageError {
            return error.kind
        } catch {
            return .failure
        }
    }

    /// A database written with the first schema (plain spaces only) migrates to sealed spaces: its
    /// spaces stay plain, and a new space takes its first writer's kind.
    @Test func aDatabaseOfTheFirstSchemaKeepsItsSpacesPlain() async throws {
        let logger = Logger(label: "test")
        let base = try PostgresLocation(url: RelayBackend.postgresURL ?? "")
        let admin = try await PostgresConnection.connect(configuration: try base.connectionConfiguration(), id: 1, logger: logger)
        let name = "crdt_sync_v1_\(UUID().uuidString.prefix(8).lowercased())"
        try await admin.run(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
        var location = base
        location.database = name
        let plain = SealedRelayStorageTests.plainRecords()[0]
        let author = Data(plain.author.raw.bytes), payload = Data(plain.payload)
        let old = try await PostgresConnection.connect(configuration: try location.connectionConfiguration(), id: 2, logger: logger)
        _ = try await PostgresRelayStorage.migrate(old, relayID: nil, upTo: 1, logger: logger)
        try await old.run("INSERT INTO relay_space(space) VALUES ('old')", logger: logger)
        try await old.run("INSERT INTO relay_author(space, author, seq, changes, bytes) VALUES ('old', \(author), 1, 1, \(Int64(payload.count)))",
                          logger: logger)
        try await old.run("INSERT INTO relay_change(space, author, start_seq, end_seq, payload) VALUES ('old', \(author), 1, 1, \(payload))",
                          logger: logger)
        try await old.close()

        let storage = try await PostgresRelayStorage.connect(location, maxConnections: 2)
        let served = try await SealedRelayStorageTests.all(storage, "old")
        #expect(served.map(\.payload) == [plain.payload] && served.allSatisfy { !$0.sealed })
        await #expect(throws: RelayStorageError.self) {
            _ = try await storage.append(space: "old", records: [SealedRelayStorageTests.sealed(.random(), 1, 1)])
        }.map { #expect($0.kind == .encryption && $0.message.contains("not encrypted"), "\($0.message)") }
        #expect(try await storage.append(space: "new", records: [SealedRelayStorageTests.sealed(.random(), 1, 1)]) == [0])
        await storage.close()
        try await admin.run(PostgresQuery(unsafeSQL: "DROP DATABASE \(name)"), logger: logger)
        try await admin.close()
    }

    /// A database from before records sent again (schema version 3) migrates with its rows as they
    /// were (arrival numbers, seqs, payloads; none sent again), takes records sent again beside
    /// the chain, and still holds the chain to one record per end. Version 3's append function
    /// (an instance not yet upgraded) goes on storing and skipping repeats as before.
    @Test func aDatabaseFromBeforeRecordsSentAgainKeepsItsRecords() async throws {
        let logger = Logger(label: "test")
        let base = try PostgresLocation(url: RelayBackend.postgresURL ?? "")
        let admin = try await PostgresConnection.connect(configuration: try base.connectionConfiguration(), id: 1, logger: logger)
        let name = "crdt_sync_v3_\(UUID().uuidString.prefix(8).lowercased())"
        try await admin.run(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
        var location = base
        location.database = name
        let (first, second) = try SQLiteRelayStorageTests.forkedChanges()
        let author = first[0].replica
        let old = try await PostgresConnection.connect(configuration: try location.connectionConfiguration(), id: 2, logger: logger)
        _ = try await PostgresRelayStorage.migrate(old, relayID: nil, upTo: 3, logger: logger)
        #expect(try await Self.appendV3(old, "s", records(first), logger: logger) == Array(first.indices).map(Int32.init))
        let before = try await Self.rows(old, logger: logger)
        try await old.close()

        let storage = try await PostgresRelayStorage.connect(location, maxConnections: 2)
        let migrated = try await PostgresConnection.connect(configuration: try location.connectionConfiguration(), id: 3, logger: logger)
        #expect(try await Self.rows(migrated, logger: logger) == before)
        #expect(before.count == first.count)
        let page = try await storage.page(space: "s", after: VersionVector(), limits: RelayPageLimits())
        #expect(page.records.map(\.record.payload) == records(first).map(\.payload) && page.records.allSatisfy { !$0.record.again })
        #expect(try await storage.appendAgain(space: "s", records: records(second)) == Array(second.indices))
        #expect(try await storage.appendAgain(space: "s", records: records(second)).isEmpty)
        #expect(try await Self.rows(migrated, logger: logger).filter(\.again).map(\.payload) == records(second).map { Data($0.payload) })
        // The chain is still one record per end: a second one (not sent again) is refused.
        let chainRepeat = "INSERT INTO relay_change(space, author, start_seq, end_seq, payload) SELECT space, author, start_seq, end_seq, payload FROM relay_change WHERE NOT again LIMIT 1"
        await #expect(throws: (any Error).self) { try await migrated.run(PostgresQuery(unsafeSQL: chainRepeat), logger: logger) }
        // Version 3's function: a repeat is skipped (sent again or not), the next record stored.
        var more = Notebook(replicaID: author, wallClock: FixedWallClock(1_700_000_009_000))
        _ = try more.apply(contentsOf: first)
        _ = more.createNote(title: "next")
        var holds = VersionVector()
        holds[author] = first.last!.endSeq
        let tail = more.changes(since: holds)
        #expect(try await Self.appendV3(migrated, "s", records(second + tail), logger: logger) == Array(second.count ..< second.count + tail.count).map(Int32.init))
        #expect(try await storage.status(space: "s").version[author] == tail.last!.endSeq)
        #expect(try await storage.status(space: "s").changes == first.count + second.count + tail.count)
        try await migrated.close()
        await storage.close()
        try await admin.run(PostgresQuery(unsafeSQL: "DROP DATABASE \(name)"), logger: logger)
        try await admin.close()
    }

    struct ChangeRow: Hashable {
        var arrival: Int64, space: String, author: Data, start: Int64, end: Int64, payload: Data, sealed: Bool, again: Bool
    }

    /// Every row of relay_change, in arrival order (`again` false where the column is not there yet).
    static func rows(_ connection: PostgresConnection, logger: Logger) async throws -> [ChangeRow] {
        var hasAgain = false
        for try await count in try await connection.query(
            "SELECT count(*) FROM information_schema.columns WHERE table_name = 'relay_change' AND column_name = 'again'", logger: logger).decode(Int64.self) {
            hasAgain = count > 0
        }
        let sql = "SELECT arrival, space, author, start_seq, end_seq, payload, sealed, \(hasAgain ? "again" : "false") FROM relay_change ORDER BY arrival"
        var rows: [ChangeRow] = []
        for try await (arrival, space, author, start, end, payload, sealed, again) in try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger)
            .decode((Int64, String, Data, Int64, Int64, Data, Bool, Bool).self) {
            rows.append(ChangeRow(arrival: arrival, space: space, author: author, start: start, end: end, payload: payload, sealed: sealed, again: again))
        }
        return rows
    }

    /// An append through version 3's `crdt_relay_append` (seven arguments), as an instance from
    /// before version 4 makes it.
    static func appendV3(_ connection: PostgresConnection, _ space: String, _ records: [RelayRecord], logger: Logger) async throws -> [Int32] {
        let authors = records.map { ByteBuffer(bytes: $0.author.raw.bytes) }
        let starts = records.map { Int64(bitPattern: $0.startSeq) }
        let ends = records.map { Int64(bitPattern: $0.endSeq) }
        let payloads = records.map { ByteBuffer(bytes: $0.payload) }
        let sealed = records.map(\.sealed)
        let keys = records.map { _ in ByteBuffer() }
        var stored: [Int32] = []
        for try await indexes in try await connection.query(
            "SELECT crdt_relay_append(\(space), \(authors)::bytea[], \(starts)::bigint[], \(ends)::bigint[], \(payloads)::bytea[], \(sealed)::boolean[], \(keys)::bytea[])",
            logger: logger).decode([Int32].self) {
            stored = indexes
        }
        return stored
    }

    @Test func instancesStartingTogetherShareOneSchemaAndIdentity() async throws {
        async let first = Self.instance()
        async let second = Self.instance()
        let (a, b) = try await (first, second)
        #expect(a.relayID == b.relayID)
        #expect(a.relayID.count == 16)
        await a.close()
        await b.close()
    }

    /// Concurrent uploads of one space through two instances: each author's clients resend
    /// growing prefixes through both (as retrying clients do); every change is stored exactly once.
    @Test func concurrentAppendsThroughTwoInstancesStoreEachChangeOnce() async throws {
        let a = try await Self.instance()
        let b = try await Self.instance()
        let space = uniqueSpace()
        let perAuthor = 40
        let authors = try (0 ..< 6).map { _ in try Self.authorRecords(perAuthor) }
        let stored = try await withThrowingTaskGroup(of: Int.self) { group in
            for (index, all) in authors.enumerated() {
                for (client, instance) in [a, b].enumerated() {
                    let step = 3 + client + index % 3
                    group.addTask {
                        var count = 0
                        var end = 0
                        while end < all.count {
                            end = min(all.count, end + step)
                            count += try await instance.append(space: space, records: Array(all[0 ..< end])).count
                        }
                        return count
                    }
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(stored == authors.count * perAuthor)
        for instance in [a, b] {
            let status = try await instance.status(space: space)
            #expect(status.changes == authors.count * perAuthor)
            #expect(status.authors == authors.count)
            let seqs = try await Self.walk(instance, space)
            for all in authors {
                #expect(seqs[all[0].author] == all.map(\.startSeq))
                #expect(status.version[all[0].author] == all.last?.endSeq)
            }
        }
        await a.close()
        await b.close()
    }

    /// One branch sent again through two instances at once, by several clients (as devices that
    /// hold it do, and their retries): it is kept once, beside the chain.
    @Test func aBranchSentAgainThroughTwoInstancesAtOnceIsKeptOnce() async throws {
        let a = try await Self.instance()
        let b = try await Self.instance()
        for round in 0 ..< 6 {
            let space = uniqueSpace("again")
            let (first, second) = try SQLiteRelayStorageTests.forkedChanges()
            #expect(try await a.append(space: space, records: records(first)) == Array(first.indices))
            let stored = try await withThrowingTaskGroup(of: Int.self) { group in
                for client in 0 ..< 6 {
                    let instance = client % 2 == 0 ? a : b
                    group.addTask { try await instance.appendAgain(space: space, records: records(second)).count }
                }
                return try await group.reduce(0, +)
            }
            #expect(stored == second.count, "round \(round)")
            let status = try await b.status(space: space)
            #expect(status.changes == first.count + second.count && status.version[first[0].replica] == first.last!.endSeq, "round \(round)")
            let page = try await a.page(space: space, after: VersionVector(), limits: RelayPageLimits())
            #expect(page.records.filter(\.record.again).map(\.record.payload) == records(second).map(\.payload), "round \(round)")
        }
        await a.close()
        await b.close()
    }

    /// A reader paging through one instance while another writes sees, at every page, a prefix:
    /// each author contiguous, within the page's version, in arrival order.
    @Test func aReaderThroughOneInstanceSeesPrefixesWhileAnotherWrites() async throws {
        let writer = try await Self.instance()
        let reader = try await Self.instance()
        let space = uniqueSpace()
        let authors = try (0 ..< 3).map { _ in try Self.authorRecords(30) }
        let writing = Task {
            for index in 0 ..< 30 {
                for all in authors { _ = try await writer.append(space: space, records: [all[index]]) }
            }
        }
        var cursor = VersionVector()
        var final = VersionVector()
        for all in authors { final[all[0].author] = all.last!.endSeq }
        var pages = 0
        while cursor != final {
            let page = try await reader.page(space: space, after: cursor, limits: RelayPageLimits(maxChanges: 4))
            pages += 1
            #expect(zip(page.records, page.records.dropFirst()).allSatisfy { $0.arrival < $1.arrival })
            for stored in page.records {
                #expect(stored.record.startSeq == cursor[stored.record.author] + 1)
                #expect(stored.record.endSeq <= page.version[stored.record.author])
                cursor[stored.record.author] = stored.record.endSeq
            }
            #expect(page.version.isCovered(by: cursor) == !page.more)
            if page.records.isEmpty { await Task.yield() }
            if pages > 100_000 { break }
        }
        try await writing.value
        #expect(cursor == final)
        await writer.close()
        await reader.close()
    }

    /// Appends refused by the database (a gap, the wrong kind, another signing key), far more than
    /// the pool has connections, through `append` and `appendThenPage` (a sync request's path):
    /// each is refused with its kind, and then a valid append and a page still answer. A refused
    /// statement could keep its pooled connection, so crafted uploads hung the relay for everyone.
    @Test(arguments: [1, 4])
    func refusedAppendsHandTheirConnectionsBack(poolSize: Int) async throws {
        let storage = try await PostgresRelayStorage.connect(try PostgresLocation(url: RelayBackend.postgresURL ?? ""), maxConnections: poolSize)
        let plain = uniqueSpace("refused-plain")
        let sealed = uniqueSpace("refused-sealed")
        let author = ReplicaID.random()
        #expect(try await storage.append(space: plain, records: [RelayRecord(author: author, startSeq: 1, endSeq: 1, payload: [1])]) == [0])
        #expect(try await storage.append(space: sealed, records: [SealedRelayStorageTests.sealed(author, 1, 1, key: SealedRelayStorageTests.key(1))]) == [0])
        // Each passes the range check before the database, so crdt_relay_append itself refuses it.
        let refusals: [(space: String, records: [RelayRecord], kind: RelayStorageError.Kind)] = [
            (plain, [RelayRecord(author: author, startSeq: 3, endSeq: 3, payload: [3])], .gap),
            (plain, [SealedRelayStorageTests.sealed(author, 2, 2)], .encryption),
            (sealed, [SealedRelayStorageTests.sealed(author, 2, 2, key: SealedRelayStorageTests.key(2))], .encryption),
        ]
        // One at a time: the pool's event loop is then idle, which is when a refusal's error
        // could arrive before its rows were taken (a pool kept busy hid the leak).
        var refused = 0
        for round in 0 ..< 1500 {
            let refusal = refusals[round % refusals.count]
            // Each call bounded (not the whole run), so a slow machine is not taken for a hang.
            let answer = try await Self.answering(within: .seconds(30), "refused append \(round)") { () -> RelayStorageError? in
                do {
                    if round % 2 == 0 {
                        _ = try await storage.append(space: refusal.space, records: refusal.records)
                    } else {
                        _ = try await storage.appendThenPage(space: refusal.space, records: refusal.records, after: VersionVector(),
                                                             limits: RelayPageLimits(maxChanges: 10), needsPayload: { _ in true })
                    }
                    return nil
                } catch let error as RelayStorageError {
                    return error
                }
            }
            // No answer (recorded): with the pool stuck, every later call would only wait too.
            guard let answer else { break }
            guard let error = answer else {
                Issue.record("round \(round): an append the rules refuse was taken")
                break
            }
            #expect(error.kind == refusal.kind, "round \(round): \(error.message)")
            refused += 1
        }
        #expect(refused == 1500)
        if refused == 1500 {
            let answered = try await Self.answering(within: .seconds(30), "an append and a page after the refusals") {
                let stored = try await storage.append(space: plain, records: [RelayRecord(author: author, startSeq: 2, endSeq: 2, payload: [2])])
                let page = try await storage.page(space: plain, after: VersionVector(), limits: RelayPageLimits(maxChanges: 10))
                return (stored, page.records.map(\.record.endSeq))
            }
            #expect(answered?.0 == [0] && answered?.1 == [1, 2])
        }
        await storage.close()
    }

    /// `body`'s result, or nil (recorded as an issue) when it has not answered within `limit`, so a
    /// hang fails the test instead of stalling the run; `body` is then left running.
    static func answering<T: Sendable>(within limit: Duration, _ what: String,
                                       _ body: @escaping @Sendable () async throws -> T) async throws -> T? {
        let first = FirstOutcome<T>()
        let outcome = await withCheckedContinuation { continuation in
            first.wait(continuation)
            let timer = Task {
                do { try await Task.sleep(for: limit) } catch { return }
                first.resolve(nil)
            }
            Task {
                let result: Result<T, any Error>
                do { result = .success(try await body()) } catch { result = .failure(error) }
                timer.cancel()
                first.resolve(result)
            }
        }
        guard let outcome else {
            Issue.record("\(what): no answer within \(limit)")
            return nil
        }
        return try outcome.get()
    }

    /// An append through instance A wakes B's listeners (NOTIFY, LISTEN).
    @Test func anAppendThroughOneInstanceSignalsTheOther() async throws {
        let a = try await Self.instance()
        let b = try await Self.instance()
        let space = uniqueSpace()
        let signals = b.changes.stream()
        let waiting = Task {
            for await changed in signals where changed == space { return true }
            return false
        }
        // Bounded, so that a lost notification fails the test rather than hanging it.
        let timeout = Task {
            try await Task.sleep(for: .seconds(30))
            waiting.cancel()
        }
        _ = try await a.append(space: space, records: try Self.authorRecords(2))
        #expect(await waiting.value)
        timeout.cancel()
        await a.close()
        await b.close()
    }
}

/// Whichever outcome comes first resumes the waiter; later ones are dropped.
final class FirstOutcome<T: Sendable>: Sendable {
    private let waiter = Mutex<CheckedContinuation<Result<T, any Error>?, Never>?>(nil)

    func wait(_ continuation: CheckedContinuation<Result<T, any Error>?, Never>) { waiter.withLock { $0 = continuation } }

    func resolve(_ outcome: Result<T, any Error>?) { waiter.withLock { $0.take() }?.resume(returning: outcome) }
}

/// What needs no server: URLs, and a server that is not there.
struct PostgresLocationTests {
    @Test func parsesURLs() throws {
        let location = try PostgresLocation(url: "postgres://relay:s%40cret@db.example:6543/notes?sslmode=require")
        #expect(location.username == "relay")
        #expect(location.password == "s@cret")
        #expect(location.host == "db.example")
        #expect(location.port == 6543)
        #expect(location.database == "notes")
        #expect(location.tls == .require)
        #expect(!location.redacted.contains("cret"))
        let defaults = try PostgresLocation(url: "postgresql://me@localhost")
        #expect(defaults.port == 5432)
        #expect(defaults.database == "me")
        #expect(defaults.tls == .prefer)
    }

    @Test(arguments: ["http://x/y", "postgres://host/db", "postgres://u@h/db?sslmode=maybe", "postgres://u@h/db?timeout=3", "not a url"])
    func refusesBadURLs(_ url: String) {
        #expect(throws: RelayStorageError.self) { _ = try PostgresLocation(url: url) }
    }

    @Test func anUnreachableServerIsAClearError() async throws {
        // Port 1 on loopback: nothing listens there.
        let location = try PostgresLocation(url: "postgres://u:secret@127.0.0.1:1/db?sslmode=disable")
        do {
            _ = try await PostgresRelayStorage.connect(location)
            Issue.record("connected to nothing")
        } catch let error as RelayStorageError {
            #expect(error.message.contains("cannot connect to PostgreSQL"))
            #expect(error.message.contains("127.0.0.1:1"))
            #expect(!error.message.contains("secret"))
        }
    }
}

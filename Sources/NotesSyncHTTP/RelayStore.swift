import Foundation
import GRDB
import NotesCRDT
import NotesSync

/// What a space on the relay holds: its version vector and counts.
public struct RelaySpaceStatus: Sendable, Hashable {
    /// The space's name.
    public var space: String
    /// Per author, the operations the relay holds contiguously from seq 1.
    public var version: VersionVector
    /// Authors with at least one stored change.
    public var authors: Int
    /// Stored changes (rows).
    public var changes: Int
    /// Operations (sequence numbers) those changes cover.
    public var operations: UInt64
    /// Bytes of encoded changes stored.
    public var bytes: Int
}

/// One answer of the relay to a client: what it stored of the client's bundle, and one page of
/// what the client lacks.
public struct RelayExchange: Sendable {
    /// Changes of the request that were new to the relay and are now stored.
    public var stored: Int
    /// Changes of the request that the relay already had (or that did not follow on from what it has).
    public var ignored: Int
    /// The page: changes the client lacks, in the order the relay received them (a causal order).
    public var changes: [Change]
    /// The space's version vector after the request.
    public var version: VersionVector
    /// Whether the client lacks more than this page.
    public var more: Bool
}

/// How large one page of a relay's answer may be.
public struct RelayPageLimits: Sendable, Hashable {
    /// At most this many changes per page (at least 1).
    public var maxChanges: Int
    /// At most this many bytes of encoded changes per page (a single larger change still goes alone).
    public var maxBytes: Int

    public init(maxChanges: Int = 1000, maxBytes: Int = 1 << 20) {
        self.maxChanges = max(1, maxChanges)
        self.maxBytes = max(1, maxBytes)
    }
}

/// The relay's storage: changes per space in one SQLite file, with no CRDT knowledge beyond
/// version vectors.
///
/// Per space and author, the relay keeps the changes it has as rows keyed by (space, author,
/// startSeq), each holding the change's own encoding (`ChangeCodec.encode([change])`) and its
/// endSeq. The rows of one author always cover 1 ... n without gap or overlap, so the space's
/// version vector is, per author, the endSeq of the last row (kept in `relay_author` beside the
/// counts). A change already covered is skipped, one that straddles the coverage is trimmed with
/// `Change.suffix(from:)`, and one that would leave a gap is not stored (the client sends it again
/// once the relay's vector shows that it still lacks it). Every request is stored in one
/// transaction: all of its new changes or none. The file is in WAL mode with `synchronous =
/// NORMAL` (`FULL` with `powerLoss` durability): a committed request survives the process being
/// killed at any instant.
public final class RelayStore: Sendable {
    /// The file, or nil in memory.
    public let path: String?
    let writer: any DatabaseWriter
    /// The relay's own 16 random bytes, made when the file is created.
    let relayID: [UInt8]
    /// Recently served changes, decoded: every change is served to every other client of its
    /// space, so it is decoded once rather than once per client.
    let decodedChanges = DecodedChangeCache(capacity: 50_000)

    /// `PRAGMA application_id` of a relay file ("CRDR").
    static let applicationID: Int32 = 0x4352_4452

    /// Opens (creating if needed) the relay file at `path`.
    ///
    /// - Parameter powerLoss: fsync the WAL at every commit, so a power cut loses nothing either.
    public convenience init(path: String, powerLoss: Bool = false) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.label = "RelayStore"
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
            throw SyncError(.io, "\(path): cannot open the relay store (\(RelayStore.describe(error)))")
        }
        try self.init(writer: pool, path: path)
    }

    /// A relay store in memory (for tests; lost when released).
    public static func inMemory() throws -> RelayStore {
        let queue: DatabaseQueue
        do { queue = try DatabaseQueue() } catch {
            throw SyncError(.io, "cannot open an in-memory relay store (\(describe(error)))")
        }
        return try RelayStore(writer: queue, path: nil)
    }

    private init(writer: any DatabaseWriter, path: String?) throws {
        self.writer = writer
        self.path = path
        let location = path ?? "memory"
        do {
            try writer.read { db in
                let applicationID = try Int32.fetchOne(db, sql: "PRAGMA application_id") ?? 0
                let tableCount = try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master") ?? 0
                guard applicationID == RelayStore.applicationID || (applicationID == 0 && tableCount == 0) else {
                    throw SyncError(.io, "\(location) is not a crdt-sync relay store (another kind of SQLite file); nothing was changed")
                }
            }
            try RelayStore.migrator.migrate(writer)
            relayID = try writer.write { db -> [UInt8] in
                try db.execute(sql: "PRAGMA application_id = \(RelayStore.applicationID)")
                if let existing = try Data.fetchOne(db, sql: "SELECT value FROM relay_meta WHERE key = 'relay_id'") {
                    return [UInt8](existing)
                }
                let fresh = ReplicaID.random().raw.bytes
                try db.execute(sql: "INSERT INTO relay_meta(key, value) VALUES ('relay_id', ?)", arguments: [Data(fresh)])
                return fresh
            }
        } catch let error as SyncError {
            throw error
        } catch {
            throw SyncError(.io, "\(location): cannot prepare the relay store (\(RelayStore.describe(error)))")
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
        return migrator
    }

    /// The replica identity the relay signs its answers for `space` with: stable per relay file
    /// and space, so clients record the space on this relay as one peer.
    public func relayReplica(for space: String) -> ReplicaID {
        let digest = SHA256.digest(relayID + Array("crdt-sync relay space\u{0}".utf8) + Array(space.utf8))
        return ReplicaID(Identifier128(bytes: digest[0 ..< 16])!)
    }

    // MARK: Exchange

    /// Stores what is new in `incoming` (in one transaction) and returns one page of what a client
    /// at `clientVersion` lacks.
    public func exchange(space: String, incoming: [Change], clientVersion: VersionVector,
                         limits: RelayPageLimits = RelayPageLimits()) async throws -> RelayExchange {
        // Encode outside the transaction; sort so that each author's changes come in seq order.
        let prepared = incoming
            .sorted { ($0.replica, $0.startSeq) < ($1.replica, $1.startSeq) }
            .map { (change: $0, payload: ChangeCodec.encode([$0])) }
        let stored: Int
        let page: RawPage
        do {
            // The write holds the one writer lock only for the insert; the page is read after it
            // (from a snapshot that includes it), beside other requests' reads.
            stored = prepared.isEmpty ? 0 : try await writer.write { db in try RelayStore.store(db, space: space, prepared) }
            page = try await writer.read { db in try RelayStore.page(db, space: space, clientVersion: clientVersion, limits: limits) }
        } catch {
            throw SyncError(.io, "relay store: \(RelayStore.describe(error))")
        }
        var changes: [Change] = []
        changes.reserveCapacity(page.rows.count)
        for row in page.rows {
            let decoded: [Change]
            if let cached = decodedChanges.get(row.id) {
                decoded = cached
            } else {
                do { decoded = try ChangeCodec.decode(row.payload) } catch {
                    throw SyncError(.io, "relay store: a stored change of \(row.author) at \(row.startSeq) does not decode (\(error))")
                }
                decodedChanges.put(row.id, decoded)
            }
            for change in decoded {
                let have = clientVersion[change.replica]
                if let part = change.suffix(from: have + 1) { changes.append(part) }
            }
        }
        return RelayExchange(stored: stored, ignored: incoming.count - stored, changes: changes,
                             version: page.version, more: page.more)
    }

    /// What the space holds.
    public func status(space: String) async throws -> RelaySpaceStatus {
        do {
            return try await writer.read { db in
                var status = RelaySpaceStatus(space: space, version: VersionVector(), authors: 0, changes: 0, operations: 0, bytes: 0)
                for row in try Row.fetchAll(db, sql: "SELECT author, seq, changes, bytes FROM relay_author WHERE space = ?", arguments: [space]) {
                    let author = try RelayStore.replica(row["author"])
                    let seq: Int64 = row["seq"]
                    status.version[author] = UInt64(seq)
                    status.authors += 1
                    status.changes += row["changes"] as Int
                    status.operations += UInt64(seq)
                    status.bytes += row["bytes"] as Int
                }
                return status
            }
        } catch let error as SyncError {
            throw error
        } catch {
            throw SyncError(.io, "relay store: \(RelayStore.describe(error))")
        }
    }

    // MARK: Inside transactions

    struct Coverage {
        var seq: UInt64
        var changes: Int
        var bytes: Int
        var touched = false
    }

    /// Stores the changes that follow on from what the space holds; returns how many were stored.
    static func store(_ db: Database, space: String, _ prepared: [(change: Change, payload: [UInt8])]) throws -> Int {
        var coverage: [ReplicaID: Coverage] = [:]
        var stored = 0
        let insert = try db.cachedStatement(sql: "INSERT INTO relay_change(space, author, startSeq, endSeq, payload) VALUES (?, ?, ?, ?, ?)")
        for (change, payload) in prepared {
            let author = change.replica
            if coverage[author] == nil {
                let row = try Row.fetchOne(db, sql: "SELECT seq, changes, bytes FROM relay_author WHERE space = ? AND author = ?",
                                           arguments: [space, Data(author.raw.bytes)])
                coverage[author] = row.map { Coverage(seq: UInt64($0["seq"] as Int64), changes: $0["changes"], bytes: $0["bytes"]) }
                    ?? Coverage(seq: 0, changes: 0, bytes: 0)
            }
            let covered = coverage[author]!.seq
            // Already held, or would leave a gap: not stored.
            guard change.endSeq > covered, change.startSeq <= covered + 1 else { continue }
            var toStore = change
            var bytes = payload
            if change.startSeq <= covered, let part = change.suffix(from: covered + 1) {
                toStore = part
                bytes = ChangeCodec.encode([part])
            }
            try insert.execute(arguments: [space, Data(author.raw.bytes), Int64(toStore.startSeq), Int64(toStore.endSeq), Data(bytes)])
            coverage[author]!.seq = toStore.endSeq
            coverage[author]!.changes += 1
            coverage[author]!.bytes += bytes.count
            coverage[author]!.touched = true
            stored += 1
        }
        let upsert = try db.cachedStatement(sql: """
            INSERT INTO relay_author(space, author, seq, changes, bytes) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT(space, author) DO UPDATE SET seq = excluded.seq, changes = excluded.changes, bytes = excluded.bytes
            """)
        for (author, entry) in coverage where entry.touched {
            try upsert.execute(arguments: [space, Data(author.raw.bytes), Int64(entry.seq), entry.changes, entry.bytes])
        }
        return stored
    }

    struct RawRow {
        var id: Int64
        var author: ReplicaID
        var startSeq: UInt64
        var endSeq: UInt64
        var payload: [UInt8]
    }

    struct RawPage {
        var rows: [RawRow]
        var version: VersionVector
        var more: Bool
    }

    /// One page of the rows a client at `clientVersion` lacks: per author, the rows past its
    /// entry in seq order, merged across authors in the order the relay received them, so a page
    /// is a causal prefix of what is missing and each author's part of it is contiguous.
    static func page(_ db: Database, space: String, clientVersion: VersionVector, limits: RelayPageLimits) throws -> RawPage {
        var version = VersionVector()
        var lagging: [(author: ReplicaID, key: Data, have: UInt64)] = []
        for row in try Row.fetchAll(db, sql: "SELECT author, seq FROM relay_author WHERE space = ?", arguments: [space]) {
            let key: Data = row["author"]
            let author = try replica(key)
            let seq = UInt64(row["seq"] as Int64)
            version[author] = seq
            if seq > clientVersion[author] { lagging.append((author, key, clientVersion[author])) }
        }
        guard !lagging.isEmpty else { return RawPage(rows: [], version: version, more: false) }
        let select = try db.cachedStatement(sql: """
            SELECT id, startSeq, endSeq, payload FROM relay_change
            WHERE space = ? AND author = ? AND endSeq > ? ORDER BY endSeq LIMIT ?
            """)
        var queues: [[RawRow]] = []
        for entry in lagging {
            let rows = try Row.fetchAll(select, arguments: [space, entry.key, Int64(entry.have), limits.maxChanges]).map {
                RawRow(id: $0["id"], author: entry.author, startSeq: UInt64($0["startSeq"] as Int64),
                       endSeq: UInt64($0["endSeq"] as Int64), payload: [UInt8]($0["payload"] as Data))
            }
            if !rows.isEmpty { queues.append(rows) }
        }
        // Merge by arrival, keeping each author's rows in seq order.
        var heads = [Int](repeating: 0, count: queues.count)
        var result: [RawRow] = []
        var bytes = 0
        var delivered: [ReplicaID: UInt64] = [:]
        while result.count < limits.maxChanges {
            var best = -1
            for (index, queue) in queues.enumerated() where heads[index] < queue.count {
                if best < 0 || queue[heads[index]].id < queues[best][heads[best]].id { best = index }
            }
            guard best >= 0 else { break }
            let row = queues[best][heads[best]]
            if !result.isEmpty, bytes + row.payload.count > limits.maxBytes { break }
            result.append(row)
            bytes += row.payload.count
            heads[best] += 1
            delivered[row.author] = row.endSeq
        }
        let more = lagging.contains { entry in (delivered[entry.author] ?? entry.have) < version[entry.author] }
        return RawPage(rows: result, version: version, more: more)
    }

    static func replica(_ data: Data) throws -> ReplicaID {
        guard let id = Identifier128(bytes: data) else {
            throw SyncError(.io, "relay store: an author id of \(data.count) bytes (expected 16)")
        }
        return ReplicaID(id)
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? DatabaseError { return error.message ?? "\(error.resultCode)" }
        if let error = error as? SyncError { return error.message }
        return "\(error)"
    }
}

/// Decoded stored changes by row id, the most recent `capacity` or so (rows are never changed, so
/// an entry never goes stale).
final class DecodedChangeCache: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [Int64: [Change]] = [:]
    private var newest: Int64 = 0
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    func get(_ id: Int64) -> [Change]? {
        lock.lock(); defer { lock.unlock() }
        return entries[id]
    }

    func put(_ id: Int64, _ changes: [Change]) {
        lock.lock(); defer { lock.unlock() }
        entries[id] = changes
        newest = max(newest, id)
        if entries.count > capacity {
            // Keep the newest half: old rows are wanted only by clients that have been away.
            let cutoff = newest - Int64(capacity / 2)
            entries = entries.filter { $0.key > cutoff }
        }
    }
}

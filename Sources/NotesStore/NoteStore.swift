import Foundation
import Synchronization
import GRDB
import NotesCRDT
import NotesSync

/// How a store is opened and how it behaves.
public struct StoreOptions: Sendable {
    /// What is guaranteed once a write returns.
    public enum Durability: Sendable, Hashable {
        /// Survives the process being killed at any instant (SIGKILL, a crash): WAL with
        /// `synchronous = NORMAL`. A power cut may lose the last few transactions, never consistency.
        case processCrash
        /// Also survives a power cut: the WAL is fsynced at every commit (`synchronous = FULL`).
        /// Much slower per edit.
        case powerLoss
    }

    /// Where wall-clock time comes from (passed to the notebook); a simulator passes a virtual clock.
    public var wallClock: any WallClock
    /// After this many changes logged past the snapshot, the snapshot is refreshed and those log rows
    /// folded in. (A row holds one change, or a run of one author's consecutive changes from a batch.)
    public var snapshotInterval: Int
    /// How long to wait for another process that holds the database before failing, in seconds.
    public var busyTimeout: Double
    /// What a committed write survives.
    public var durability: Durability

    /// Who else may use the database.
    public enum Access: Sendable, Hashable {
        /// Other processes (or other stores in this one) may open the same database: every
        /// transaction first catches up with what they committed. What the command line uses.
        case shared
        /// This store is the database's only user for as long as it is open: it skips looking
        /// for others' writes. For an app that owns its database outright.
        case exclusive
    }

    /// Who else may use the database.
    public var access: Access
    /// Random bits mixed into a fresh identity when the replica moves to one: two copies of a
    /// database that move in the same millisecond must not draw the same. A simulator passes a
    /// seeded source, so that a seed replays its run.
    public var entropy: @Sendable () -> UInt64
    /// A folder outside the databases' own that keeps a second copy of each database file's seq
    /// mark (nil, the default: only the mark beside the file). A backup of a database's folder
    /// restored over it brings back the mark beside it too, and the restore goes unseen; the
    /// copy here stays (the command line uses `$XDG_STATE_HOME/crdt-sync/seqmarks`).
    public var seqMarkCopies: String? = nil

    /// Creates options; the defaults suit an app or the command line.
    public init(wallClock: any WallClock = SystemWallClock(), snapshotInterval: Int = 4096,
                busyTimeout: Double = 10, durability: Durability = .processCrash, access: Access = .shared,
                entropy: @escaping @Sendable () -> UInt64 = { UInt64.random(in: .min ... .max) }) {
        self.wallClock = wallClock
        self.snapshotInterval = max(1, snapshotInterval)
        self.busyTimeout = busyTimeout
        self.durability = durability
        self.access = access
        self.entropy = entropy
    }
}

/// The address of a SQL string literal: the key of `NoteStore.statements`.
struct StatementKey: Hashable {
    let address: UInt

    init(_ sql: StaticString) { address = UInt(bitPattern: sql.utf8Start) }

    func hash(into hasher: inout Hasher) { hasher.combine(address) }

    /// The address mixed with the table's seed (the keys are a few dozen literals of this program).
    func _rawHashValue(seed: Int) -> Int {
        var h = UInt64(address) ^ UInt64(UInt(bitPattern: seed))
        h = (h ^ (h >> 30)) &* 0xBF58_476D_1CE4_E5B9
        h = (h ^ (h >> 27)) &* 0x94D0_49BB_1331_11EB
        return Int(truncatingIfNeeded: h ^ (h >> 31))
    }
}

/// One durable replica of a notebook in one SQLite database file.
///
/// The store keeps the replica's identity and clock, the op log (compact binary changes), the
/// changes that wait for their dependencies, a snapshot of the CRDT state, materialized notes for
/// listing, a full-text index, and what each known peer has. Every local edit and every applied
/// batch of remote changes is one SQLite transaction: the log, the materialized rows and the index
/// move together or not at all. Docs/Storage.md describes the schema.
///
/// Reads of the materialized notes (`list`, `note`, `search`) go to SQLite and never load the
/// CRDT state; the `Notebook` is loaded (snapshot plus the log after it) the first time an edit,
/// an apply or a CRDT read needs it. Several processes may use one database: each write
/// transaction first catches up with what others committed.
///
/// All methods are synchronous and thread-safe (one lock per store).
public final class NoteStore: @unchecked Sendable {
    /// This replica's identity: the one its new operations are written as. It changes only when
    /// the store finds it is a copy (`identityChanges()`): at open when the database file is not
    /// the one the identity was given to, or when a sync brings changes in its name that it never
    /// made.
    public var replicaID: ReplicaID { identity.withLock { $0 } }
    let identity: Mutex<ReplicaID>
    /// The seq mark as last read or written, and where it is kept (`SeqMark`).
    let seqMark = Mutex<SeqMark?>(nil)
    nonisolated(unsafe) var seqMarkPlace: SeqMark.Place?  // set once, at open
    /// The database file, or nil for an in-memory store.
    public let path: String?
    /// The in-memory database the store is open on, kept alive while the store is.
    var memoryDatabase: InMemoryDatabase?
    /// The options the store was opened with.
    public let options: StoreOptions
    /// Whether opening this store created the replica (a new database).
    public let wasCreated: Bool

    let queue: DatabaseQueue
    let lock = NSLock()
    /// Sealed units whose signatures this store verified (an encrypted space's second look is free).
    let verifiedUnits = VerifiedUnits()
    /// The space sealer of the stored keys, and those keys' bytes (`sealer(_:)`).
    let sealerCache = Mutex<(raw: [UInt8], sealer: SpaceSealer)?>(nil)

    /// The CRDT state as loaded from the database, and where in the log it stands.
    struct Loaded {
        var notebook: Notebook
        var lastLogRow: Int64
        var revision: Int64
        var snapshotGeneration: Int64
        /// Changes in the log rows after the snapshot (a row holds one change or a run of them).
        var changesSinceSnapshot: Int
        /// What the materialized tables hold for the notes this connection last wrote or read
        /// in a write transaction (see `MaterializedNote`). Dropped with the rest of `Loaded`
        /// (a failed transaction, a reload) and whenever another process has written.
        var materialized: [NoteID: MaterializedNote] = [:]
        /// The pending table's row ids by the change they hold, when known (see `writePending`);
        /// dropped with the rest of `Loaded`, and whenever another process has written.
        var pendingRows: [PendingKey: Int64]?
        /// Whether `replica.tag_state` may differ from the notebook's tags: true until this state
        /// first writes it, and after a change to a tag.
        var tagStateStale = true
    }

    var loaded: Loaded?
    /// How many edits ran on one note's stored state (`editOneNote`) since the store was opened.
    var oneNoteEditCount = 0

    /// The partial replica one-note edits run on, kept from one to the next (`editOneNote`).
    struct OneNoteCache {
        var notebook: Notebook
        /// The database's revision as of the last edit: another process that writes moves it.
        var revision: Int64
        /// The edits of each note since the replica read it.
        var edits: [NoteID: Int] = [:]
        /// The notes whose `note_state` row holds the state the replica has.
        var stored: Set<NoteID> = []
    }

    var oneNoteCache: OneNoteCache?
    /// The cache's bookkeeping while a one-note edit's transaction runs (its replica is in `loaded`).
    var oneNoteWriting: OneNoteCache?
    /// Set while a transaction has mutated `loaded`; a failed transaction then drops it.
    var dirty = false
    /// With exclusive access, the `note_text` rows that have a committed record in
    /// `note_fts_stale`, so that a transaction does not run `INSERT OR IGNORE` for them again
    /// (a keystroke in a chunk already stale wrote nothing, in a statement that bound the
    /// chunk's whole text). Only read and written inside the queue's closures; emptied when the
    /// index is brought up to date and when a write transaction fails. A shared store has none:
    /// another process may bring the index up to date without this one knowing.
    var staleRecorded: Set<Int64> = []
    /// The statements of the store's own reads and writes, compiled once on this connection and
    /// found by the address of their SQL literal (`statement(_:_:)`). Only used inside the
    /// queue's closures.
    var statements: [StatementKey: Statement] = [:]
    /// Encodes log and pending rows, keeping its working storage from one row to the next (a
    /// keystroke's row is a few dozen bytes). Used under `lock`.
    var logEncoder = ChangeCodec.Encoder()

    deinit {
        // Finalized before the connection closes (the queue goes after this body).
        statements.removeAll()
    }

    /// Closes the database now, as a release of the last reference would (the WAL is
    /// checkpointed), and keeps the replica's memory until the process exits: a command-line
    /// tool about to exit need not free a notebook of 80,000 notes one allocation at a time (a
    /// sixth of a bootstrap's import). The store cannot be used afterwards.
    package func closeForExit() throws {
        lock.lock(); defer { lock.unlock() }
        queue.inDatabase { _ in statements.removeAll() }
        try queue.close()
        _ = Unmanaged.passRetained(self)
    }

    private init(queue: DatabaseQueue, replicaID: ReplicaID, path: String?, options: StoreOptions, wasCreated: Bool) {
        self.queue = queue
        self.identity = Mutex(replicaID)
        self.path = path
        self.options = options
        self.wasCreated = wasCreated
    }

    // MARK: Opening

    /// Opens the replica database at `path`, creating it (and its folder) when it does not exist
    /// and `create` is true.
    ///
    /// A file that is not a replica database, one written by a newer version, or a location that
    /// cannot be written gets a `StoreError` and is left exactly as it was.
    public static func open(path: String, options: StoreOptions = StoreOptions(), create: Bool = true) throws -> NoteStore {
        let fileManager = FileManager.default
        var isDirectory: ObjCBool = false
        let exists = fileManager.fileExists(atPath: path, isDirectory: &isDirectory)
        if exists, isDirectory.boolValue {
            throw StoreError(.cannotOpen, "\(path) is a folder, not a replica database")
        }
        if !exists {
            guard create else {
                throw StoreError(.noReplica, "there is no replica database at \(path) (run `crdt-sync init` to create one)")
            }
            let folder = (path as NSString).deletingLastPathComponent
            let directory = folder.isEmpty ? "." : folder
            if !fileManager.fileExists(atPath: directory) {
                do {
                    try fileManager.createDirectory(atPath: directory, withIntermediateDirectories: true)
                } catch {
                    throw StoreError(.readOnly, "cannot create the folder \(directory) for the replica database", underlying: "\(error.localizedDescription)")
                }
            }
            guard fileManager.isWritableFile(atPath: directory) else {
                throw StoreError(.readOnly, "cannot create a replica database in \(directory): the folder is not writable")
            }
        }

        var configuration = Configuration()
        configuration.busyMode = .timeout(options.busyTimeout)
        configuration.label = "NoteStore"
        let synchronous = options.durability == .powerLoss ? "FULL" : "NORMAL"
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
            try db.execute(sql: "PRAGMA cache_size = -8192")
            UnsegmentedScriptTokenizer.register(db)
        }
        let queue: DatabaseQueue
        do {
            queue = try DatabaseQueue(path: path, configuration: configuration)
        } catch {
            throw describeOpenFailure(error, path: path)
        }

        // Look before writing anything: the file must be empty or one of ours, of a known version.
        let fresh: Bool
        do {
            fresh = try queue.read { db in
                let applicationID = try Int32.fetchOne(db, sql: "PRAGMA application_id") ?? 0
                let tableCount = try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master") ?? 0
                if applicationID == Schema.applicationID {
                    if try Schema.migrator.hasBeenSuperseded(db) {
                        throw StoreError(.newerSchema, "\(path) was written by a newer version of crdt-sync (its schema has migrations this version does not know); upgrade crdt-sync to open it")
                    }
                    return false
                }
                guard applicationID == 0, tableCount == 0 else {
                    throw StoreError(.notAReplica, "\(path) is an SQLite database but not a crdt-sync replica")
                }
                return true
            }
        } catch {
            try? queue.close()
            throw describeOpenFailure(error, path: path)
        }
        if fresh, !create {
            try? queue.close()
            throw StoreError(.noReplica, "\(path) is empty, not a replica database (run `crdt-sync init` to create one)")
        }

        do {
            try queue.writeWithoutTransaction { db in
                let mode = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
                if mode?.lowercased() != "wal" {
                    throw StoreError(.database, "cannot switch \(path) to WAL mode (it stays in \(mode ?? "an unknown") mode)")
                }
            }
            return try finishOpening(queue, path: path, options: options, newReplica: nil, fileIdentity: fileIdentity(of: path),
                                     markPlace: .beside(path, copy: options.seqMarkCopies.flatMap { SeqMark.copyPath(of: path, in: $0) }))
        } catch {
            try? queue.close()
            throw describeOpenFailure(error, path: path)
        }
    }

    /// Opens a store in a new database that lives in memory only (tests).
    ///
    /// - Parameter replicaID: the replica's identity; a random one by default.
    public static func openInMemory(replicaID: ReplicaID? = nil, options: StoreOptions = StoreOptions()) throws -> NoteStore {
        try open(try InMemoryDatabase(), options: options, replicaID: replicaID)
    }

    /// Opens the store in an in-memory database, creating the replica when the database is new.
    ///
    /// The database outlives the store: a store closed and opened again on it finds what was
    /// committed, as an app restarted over the same file would (the simulator's crashes).
    ///
    /// - Parameter replicaID: the identity of a new replica; a random one by default.
    public static func open(_ database: InMemoryDatabase, options: StoreOptions = StoreOptions(),
                            replicaID: ReplicaID? = nil) throws -> NoteStore {
        do {
            var configuration = Configuration()
            configuration.label = "NoteStore.memory"
            configuration.busyMode = .timeout(options.busyTimeout)
            configuration.prepareDatabase { db in UnsegmentedScriptTokenizer.register(db) }
            let queue = try DatabaseQueue(path: database.uri, configuration: configuration)
            let store = try finishOpening(queue, path: nil, options: options, newReplica: replicaID,
                                          fileIdentity: "memory:\(database.label)", markPlace: .memory(database))
            store.memoryDatabase = database
            return store
        } catch {
            throw StoreError.wrap(error, "cannot open the in-memory store \(database.name)")
        }
    }

    /// An empty in-memory database with every migration applied, made once per process, which
    /// each new in-memory store copies (SQLite's backup API, page by page).
    ///
    /// Running the migrations parses and executes the schema's statements (and FTS5 makes its
    /// shadow tables) for every store, a noticeable share of a simulation run's work. A copy holds
    /// the same rows and schema, and is a plain in-memory database like one migrated in place.
    ///
    /// Its pages are 2 KiB (`inMemoryPageSize`), and so are its copies' (a backup into an
    /// in-memory database takes the source's page size).
    static let emptyDatabase = Result<DatabaseQueue, any Error> {
        var configuration = Configuration()
        configuration.label = "NoteStore.memory.empty"
        configuration.prepareDatabase { db in UnsegmentedScriptTokenizer.register(db) }
        let queue = try DatabaseQueue(configuration: configuration)
        try queue.inDatabase { try $0.execute(sql: "PRAGMA page_size = \(inMemoryPageSize)") }
        try Schema.migrator.migrate(queue)
        return queue
    }

    /// The page size of in-memory stores. The first write to a page in a transaction copies the
    /// whole page into the rollback journal; a keystroke writes a few rows in four or five
    /// tables, one page each, so smaller pages copy less. Files keep the default, the size of a
    /// disk block.
    static let inMemoryPageSize = 2048

    /// Where a database file is: its device and inode, which a copy, a restore from a backup or
    /// a file put in its place does not share. Nil when the file cannot be looked at.
    static func fileIdentity(of path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return "\(info.st_dev):\(info.st_ino)"
    }

    private static func finishOpening(_ queue: DatabaseQueue, path: String?, options: StoreOptions,
                                      newReplica: ReplicaID?, fileIdentity: String?, markPlace: SeqMark.Place) throws -> NoteStore {
        try Schema.migrator.migrate(queue)
        let previousMark = markPlace.read()
        var mark: SeqMark? = nil
        let (replica, created) = try queue.writeWithoutTransaction { db -> (ReplicaID, Bool) in
            var result: (ReplicaID, Bool)!
            try db.inTransaction(.immediate) {
                try Schema.checkValueTypes(db)
                try NoteStore.checkLogRows(after: Int64.fetchOne(db, sql: "SELECT through_row FROM snapshot WHERE id = 1") ?? 0, db)
                if let row = try Row.fetchOne(db, sql: "SELECT replica_id, file_identity FROM replica WHERE id = 1") {
                    let blob = try row.stored("replica_id", as: Data.self)
                    guard var replica = ReplicaID(blob: [UInt8](blob)) else {
                        throw StoreError(.corrupt, "the stored replica identity is not 16 bytes")
                    }
                    let recorded = try row.stored("file_identity", as: String?.self)
                    if let fileIdentity, recorded != fileIdentity {
                        if recorded != nil {
                            // A copy of the file (or a restored backup): the original may go on
                            // writing as this identity, so this one must never write as it again.
                            // It made none of its seqs (made through 0): the original repairs their
                            // forks; a copy that re-issued them would withdraw the original's edits.
                            replica = try retire(replica, db, options: options, salt: fileIdentity,
                                                 reason: "the database file is a copy (or was restored from a backup): it is not the file this identity was given to",
                                                 madeThrough: 0)
                        }
                        try db.execute(sql: "UPDATE replica SET file_identity = ? WHERE id = 1", arguments: [fileIdentity])
                    }
                    (replica, mark) = try checkSeqMark(previousMark, replica: replica, db, options: options)
                    result = (replica, false)
                } else {
                    // A replica that lost its identity row: made anew, it would belong to nobody's log (refused before writing).
                    if try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM snapshot) OR EXISTS (SELECT 1 FROM changes)") == true {
                        throw StoreError(.corrupt, "the replica row is missing, but the file holds changes")
                    }
                    let replica = newReplica ?? ReplicaID.random()
                    try db.execute(sql: "INSERT INTO replica (id, replica_id, created_at, file_identity) VALUES (1, ?, ?, ?)",
                                   arguments: [Data(replica.raw.bytes), Int64(options.wallClock.milliseconds()), fileIdentity])
                    mark = SeqMark(replica: replica, seq: 0)  // a mark left by a database deleted here is not this one's
                    result = (replica, true)
                }
                return .commit
            }
            return result
        }
        if let mark, mark != previousMark { markPlace.write(mark) }
        let store = NoteStore(queue: queue, replicaID: replica, path: path, options: options, wasCreated: created)
        store.seqMark.withLock { $0 = mark }
        store.seqMarkPlace = markPlace
        try store.rematerializeIfAsked()
        return store
    }

    /// Moves the replica to a fresh identity (in the caller's transaction) and records why; the
    /// old identity's operations stay in the log as another replica's. The new identity is drawn
    /// from the old one, the wall clock and `salt`, so a simulation replays it.
    static func retire(_ old: ReplicaID, _ db: Database, options: StoreOptions, salt: String, reason: String,
                       madeThrough: UInt64? = nil) throws -> ReplicaID {
        let now = options.wallClock.milliseconds()
        let made = try madeThrough ?? heldSeq(of: old, db, options: options)
        let count = try Int.fetchOne(db, sql: "SELECT count(*) FROM replica_history") ?? 0
        // FNV-1a over what sets this move apart; SplitMix64 spreads it over the 128 bits.
        var seed: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in old.raw.bytes + Array("\(now) \(salt) \(count) \(options.entropy())".utf8) { seed = (seed ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        var generator = SplitMix64(seed: seed)
        var fresh = ReplicaID.random(using: &generator)
        if let signingKey = try Data.fetchOne(db, sql: "SELECT signing_key FROM space_key WHERE id = 1") {
            // In an encrypted space the id is made from a signing key: a new key, unpredictable to
            // anyone without the old one (a copy holds the old one, but not the generator's draw).
            let draw = (0 ..< 4).flatMap { _ in withUnsafeBytes(of: generator.next()) { Array($0) } }
            let signer = SigningIdentity(deriving: [UInt8](signingKey) + draw)
            fresh = signer.replicaID
            try db.execute(sql: "UPDATE space_key SET signing_key = ? WHERE id = 1", arguments: [Data(signer.rawRepresentation)])
            try db.execute(sql: "INSERT OR IGNORE INTO space_member (replica, public_key, first_seen) VALUES (?, ?, ?)",
                           arguments: [Data(fresh.raw.bytes), Data(signer.publicKey), Int64(clamping: now)])
        }
        try db.execute(sql: "UPDATE replica SET replica_id = ? WHERE id = 1", arguments: [Data(fresh.raw.bytes)])
        try db.execute(sql: "INSERT INTO replica_history (retired_id, new_id, retired_at, reason, made_through) VALUES (?, ?, ?, ?, ?)",
                       arguments: [Data(old.raw.bytes), Data(fresh.raw.bytes), Int64(clamping: now), reason, Int64(clamping: made)])
        return fresh
    }

    private static func describeOpenFailure(_ error: any Error, path: String) -> StoreError {
        if let error = error as? StoreError { return error }
        var wrapped = StoreError.wrap(error, "cannot open \(path)")
        if wrapped.code == .notAReplica {
            wrapped.message = "\(path) is not a crdt-sync replica database (it is not an SQLite database)"
        } else if wrapped.code == .readOnly {
            wrapped.message = "cannot open \(path): it is read-only (or its folder is)"
        }
        return wrapped
    }

    /// Closes the database. The store must not be used afterwards.
    public func close() throws {
        lock.lock(); defer { lock.unlock() }
        flushOneNoteStates()
        do {
            // The store's own statements are finalized first: SQLite does not close a connection
            // that still has statements.
            queue.inDatabase { _ in statements.removeAll() }
            try queue.close()
        } catch {
            throw StoreError.wrap(error, "cannot close the database")
        }
    }

    // MARK: The CRDT state

    /// The replica's CRDT state (loaded from the snapshot and the log on first use).
    public var notebook: Notebook {
        get throws {
            lock.lock(); defer { lock.unlock() }
            // The loaded notebook alone (a copy of the whole loaded state retained and released
            // all of it; the simulator reads the notebook after every step).
            if let notebook = loaded?.notebook { return notebook }
            return try loadedState().notebook
        }
    }

    /// The version vector: what this replica has applied, per replica.
    ///
    /// Read straight from the loaded state: going through `notebook` copied the whole loaded
    /// state (every field retained and released) to read one vector, and the simulator reads it
    /// around every edit and sync.
    public var versionVector: VersionVector {
        get throws {
            lock.lock(); defer { lock.unlock() }
            if let vector = loaded?.notebook.versionVector { return vector }
            return try loadedState().notebook.versionVector
        }
    }

    /// Notebook.digest() of the state: equal on two replicas exactly when their visible states are.
    ///
    /// Read from the digests the writes keep per note, without loading the replica.
    public func digest() throws -> String {
        lock.lock(); defer { lock.unlock() }
        return try digestLocked()
    }

    /// Re-reads what other processes committed since this store last looked.
    public func refresh() throws {
        lock.lock(); defer { lock.unlock() }
        do {
            try queue.read { db in try self.makeCurrent(db) }
        } catch {
            loaded = nil
            throw StoreError.wrap(error, "cannot read the replica")
        }
    }

    /// Drops the CRDT state held in memory and reads it back from the database (the snapshot, the
    /// log rows after it, the pending changes), as a process that restarts would.
    ///
    /// Nothing committed is lost by this, and nothing uncommitted survives it. A simulator uses it
    /// to restart a device whose store lives in memory (an in-memory database cannot be reopened).
    public func reload() throws {
        lock.lock(); defer { lock.unlock() }
        loaded = nil
        oneNoteCache = nil
        _ = try loadedState()
    }

    func loadedState() throws -> Loaded {
        if let loaded { return loaded }
        do {
            let state = try queue.read { db in try self.load(db) }
            loaded = state
            return state
        } catch {
            throw StoreError.wrap(error, "cannot load the replica's notes")
        }
    }

    /// Reads the snapshot, then applies the log rows after it and the pending changes.
    func load(_ db: Database) throws -> Loaded {
        // From here on edits run on the whole replica; what one-note edits kept is dropped.
        oneNoteCache = nil
        guard let meta = try Row.fetchOne(db, sql: "SELECT revision, snapshot_generation, replica_id FROM replica WHERE id = 1") else {
            throw StoreError(.corrupt, "the replica row is missing")
        }
        // Another process on this database may have moved it to a fresh identity.
        let storedID = try meta.stored("replica_id", as: Data.self)
        if let stored = ReplicaID(blob: [UInt8](storedID)), stored != replicaID { identity.withLock { $0 = stored } }
        let replicaID = self.replicaID
        var notebook: Notebook
        var through: Int64 = 0
        if let snapshot = try Row.fetchOne(db, sql: "SELECT through_row, payload FROM snapshot WHERE id = 1") {
            through = try snapshot.stored("through_row")
            let payload = try snapshot.stored("payload", as: Data.self)
            do {
                notebook = try Notebook(snapshot: [UInt8](payload), wallClock: options.wallClock)
            } catch let error as CRDTError {
                throw StoreError(.corrupt, "the stored snapshot cannot be read: \(error.message)")
            }
            if notebook.replicaID != replicaID {
                // Made before the replica moved to its identity: restored as the identity it has now.
                let retired = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM replica_history WHERE retired_id = ?)",
                                                arguments: [Data(notebook.replicaID.raw.bytes)]) ?? false
                guard retired else {
                    throw StoreError(.corrupt, "the stored snapshot belongs to another replica (\(notebook.replicaID))")
                }
                notebook = try Notebook(snapshot: [UInt8](payload), wallClock: options.wallClock, replicaID: replicaID)
            }
        } else {
            notebook = Notebook(replicaID: replicaID, wallClock: options.wallClock)
        }
        var state = Loaded(notebook: notebook, lastLogRow: through, revision: try meta.stored("revision"),
                           snapshotGeneration: try meta.stored("snapshot_generation"), changesSinceSnapshot: 0)
        try applyLogRows(after: through, to: &state, db)
        return state
    }

    /// Refuses a log whose rows do not follow the snapshot: the snapshot is written with the rows
    /// it holds deleted in one transaction, and rows are numbered upwards for good
    /// (AUTOINCREMENT), so a row at or before its `through_row`, or a `through_row` past every
    /// row ever written, is damage, and loading past it would leave the tail out unnoticed.
    /// Checked at open, so a full load (which reads the rows after `through_row`) need not.
    static func checkLogRows(after through: Int64, _ db: Database) throws {
        if let first = try Int64.fetchOne(db, sql: "SELECT min(row) FROM changes"), first <= max(through, 0) {
            throw StoreError(.corrupt, "the log's row \(first) is at or before the rows the snapshot holds (through row \(through)); the changes table or the snapshot row was changed by hand or damaged")
        }
        let written = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'changes'") ?? 0
        if through > written {
            throw StoreError(.corrupt, "the snapshot holds log rows through row \(through), past the last row ever written (\(written)); the snapshot row was changed by hand or damaged")
        }
    }

    /// Applies log rows after `row`, reads the quarantine, then applies the stored pending changes.
    func applyLogRows(after row: Int64, to state: inout Loaded, _ db: Database) throws {
        let rows = try Row.fetchCursor(db.cachedStatement(sql: "SELECT row, payload FROM changes WHERE row > ? ORDER BY row"), arguments: [row])
        while let row = try rows.next() {
            let rowID = try row.stored("row", as: Int64.self)
            // Read as any SQL type: a file made elsewhere may hold another than a blob (GRDB traps on a conversion it cannot make).
            guard let payload = Data.fromDatabaseValue(row["payload"]) else {
                throw StoreError(.corrupt, "log row \(rowID) holds no change encoding (its payload is not a blob)")
            }
            do {
                let changes = try ChangeCodec.decode([UInt8](payload))
                try state.notebook.applyStored(contentsOf: changes)
                state.changesSinceSnapshot += changes.count
            } catch let error as CRDTError {
                throw StoreError(.corrupt, "log row \(rowID) cannot be applied: \(error.message)")
            }
            state.lastLogRow = rowID
        }
        try readQuarantine(into: &state.notebook, db)
        let pending = try Data.fetchAll(db.cachedStatement(sql: "SELECT payload FROM pending_changes ORDER BY row"))
        for payload in pending {
            do {
                // A stored waiting change that no longer applies goes to the quarantine, as it
                // would have when released (the next write stores it there).
                state.notebook.apply(contentsOf: try ChangeCodec.decode([UInt8](payload)))
            } catch let error as CRDTError {
                throw StoreError(.corrupt, "a stored pending change cannot be read: \(error.message)")
            }
        }
    }

    /// Brings `loaded` up to what is committed: nothing to do when no other process wrote, the log
    /// rows it added when the snapshot is the same, a full reload otherwise.
    func makeCurrent(_ db: Database) throws {
        guard var state = loaded else {
            loaded = try load(db)
            return
        }
        // Nobody else uses the database.
        if options.access == .exclusive { return }
        guard let meta = try Row.fetchOne(db.cachedStatement(sql: "SELECT revision, snapshot_generation FROM replica WHERE id = 1")) else {
            throw StoreError(.corrupt, "the replica row is missing")
        }
        let revision = try meta.stored("revision", as: Int64.self)
        let generation = try meta.stored("snapshot_generation", as: Int64.self)
        if revision == state.revision { return }
        if generation != state.snapshotGeneration {
            loaded = nil
            loaded = try load(db)
            return
        }
        loaded = nil
        try applyLogRows(after: state.lastLogRow, to: &state, db)
        state.revision = revision
        // The other process re-materialized notes too: what was known of the tables is stale.
        state.materialized = [:]
        state.pendingRows = nil
        loaded = state
    }

    /// The statement for `sql`, compiled on this connection the first time.
    ///
    /// GRDB's `cachedStatement(sql:)` finds a statement by hashing its whole SQL text, at every
    /// use; a literal's address hashes in a few instructions.
    func statement(_ sql: StaticString, _ db: Database) throws -> Statement {
        let key = StatementKey(sql)
        if let statement = statements[key] { return statement }
        let statement = try db.makeStatement(sql: sql.description)
        statements[key] = statement
        return statement
    }

    // MARK: Writing

    /// Runs `body` in one IMMEDIATE write transaction, after catching up with other processes.
    /// When it fails after the in-memory notebook was changed, the notebook is dropped and reloaded
    /// from disk on next use, so a failed transaction leaves no trace in memory either.
    func writeTransaction<T>(_ what: @autoclosure () -> String, _ body: (Database) throws -> T) throws -> T {
        dirty = false
        do {
            return try queue.writeWithoutTransaction { db in
                // BEGIN and COMMIT are compiled once per connection, like every statement of the
                // write path (`statement(_:_:)`), rather than parsed at every edit.
                do {
                    return try self.transaction(db, begin: "BEGIN IMMEDIATE TRANSACTION") {
                        try self.makeCurrent(db)
                        return try body(db)
                    }
                } catch {
                    // The records this transaction wrote were rolled back.
                    self.staleRecorded.removeAll()
                    throw error
                }
            }
        } catch {
            if dirty { loaded = nil }
            dirty = false
            throw StoreError.wrap(error, what())
        }
    }

    /// Marks the end of a write transaction that changed the log: bumps the revision (and stores
    /// the clock beside it).
    ///
    /// With exclusive access nobody else reads the revision, and nothing reads the stored clock
    /// back (the notebook's clock comes from its snapshot and log), so the row is not written.
    func bumpRevision(_ db: Database) throws {
        // The replica-wide state a one-note edit starts from (`editOneNote`) moves with the log.
        let state = loaded!.notebook.encodedReplicaState()
        if options.access == .shared {
            try statement("UPDATE replica SET revision = (CASE WHEN revision >= 9223372036854775807 THEN 0 ELSE revision + 1 END), clock = ?, replica_state = ? WHERE id = 1", db)
                .run(.int(Int64(bitPattern: loaded!.notebook.clock.last.rawValue)), .blob(state))
        } else {
            try statement("UPDATE replica SET replica_state = ? WHERE id = 1", db).run(.blob(state))
        }
        if loaded!.tagStateStale {
            try statement("UPDATE replica SET tag_state = ? WHERE id = 1", db).run(.blob(loaded!.notebook.encodedTagState()))
            loaded!.tagStateStale = false
        }
        loaded!.revision = loaded!.revision.nextCount
    }

    /// Appends changes to the op log: one row per run of consecutive changes of one author whose
    /// seq ranges follow each other (`ChangeCodec.encode` of the run), so a batch of remote
    /// changes, which comes grouped by author, takes a row per author rather than per change.
    func log(_ changes: [Change], _ db: Database) throws {
        let now = Int64(options.wallClock.milliseconds())
        let insert = try statement("""
            INSERT INTO changes (replica, start_seq, end_seq, timestamp, local, logged_at, payload)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """, db)
        var start = changes.startIndex
        while start < changes.endIndex {
            let first = changes[start]
            var end = start + 1
            while end < changes.endIndex, changes[end].replica == first.replica, changes[end].startSeq == changes[end - 1].endSeq &+ 1 {
                end += 1
            }
            let payload = logEncoder.encode(end == start + 1 ? [first] : Array(changes[start ..< end]))
            try insert.run(.blob(first.replica.raw.bytes), .int(Int64(bitPattern: first.startSeq)),
                           .int(Int64(bitPattern: changes[end - 1].endSeq)), .int(Int64(bitPattern: first.timestamp.rawValue)),
                           .bool(first.replica == replicaID), .int(now), .blob(payload))
            loaded!.lastLogRow = db.lastRowID
            loaded!.changesSinceSnapshot += end - start
            start = end
        }
    }

    /// Refreshes the snapshot when enough log rows have piled up since the last one.
    func compactIfDue() {
        guard let count = loaded?.changesSinceSnapshot, count >= options.snapshotInterval else { return }
        try? compactLocked()
    }

    /// Writes a fresh snapshot of the whole state and deletes the log rows it covers.
    ///
    /// Done automatically every `StoreOptions.snapshotInterval` logged changes; call it to fold the log now.
    public func compact() throws {
        lock.lock(); defer { lock.unlock() }
        try compactLocked()
    }

    func compactLocked() throws {
        try writeTransaction("cannot refresh the snapshot") { db in
            let state = loaded!
            try db.execute(sql: "INSERT OR REPLACE INTO snapshot (id, through_row, made_at, payload) VALUES (1, ?, ?, ?)",
                           arguments: [state.lastLogRow, Int64(options.wallClock.milliseconds()), Data(state.notebook.snapshot())])
            try db.execute(sql: "DELETE FROM changes WHERE row <= ?", arguments: [state.lastLogRow])
            try db.execute(sql: "UPDATE replica SET snapshot_generation = (CASE WHEN snapshot_generation >= 9223372036854775807 THEN 0 ELSE snapshot_generation + 1 END) WHERE id = 1")
            try bumpRevision(db)
            loaded!.snapshotGeneration = loaded!.snapshotGeneration.nextCount
            loaded!.changesSinceSnapshot = 0
        }
    }
}

extension Int64 {
    /// The next value of a stored counter that only says "changed" (the revision, the snapshot
    /// generation): 0 after `Int64.max`, as the SQL that bumps it, so that a value written into
    /// the file by hand cannot stop writes with an overflow.
    var nextCount: Int64 { self == .max ? 0 : self + 1 }
}

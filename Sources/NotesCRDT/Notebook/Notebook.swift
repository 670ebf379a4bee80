/// One replica of a person's notes: the CRDT state of every note and tag, the log of changes, the
/// version vector, and the changes that wait for their dependencies.
///
/// Local edits produce `Change`s (returned, and kept in the log); `apply(_:)` takes changes from
/// elsewhere in any order, any number of times. Two notebooks that have applied the same changes
/// have the same state and the same `digest()`, whatever the order.
///
/// The notebook never reads the system clock or a random source on its own: it takes wall time
/// from its `wallClock` and new note identities from the caller (or `NoteID.random()`).
public struct Notebook: Sendable {
    /// This replica's identity.
    public let replicaID: ReplicaID
    /// Where wall-clock time comes from.
    public var wallClock: any WallClock
    /// The hybrid logical clock.
    public internal(set) var clock: HybridLogicalClock
    /// What has been applied, per replica.
    public internal(set) var versionVector = VersionVector()

    var notes: [NoteID: NoteRecord] = [:]
    var tagRecords: [String: [TagField: LWWRegister<FieldValue>]] = [:]
    /// Every applied change, in the order applied (a causal order).
    var history: [Change] = []
    /// For each replica, the indexes into `history` of its changes, by increasing seq.
    var historyIndex: [ReplicaID: [Int]] = [:]
    var pending = PendingChanges()
    /// Changes that were ready but refer to something that does not exist (see `quarantinedChanges`).
    var quarantine = Quarantine()
    /// The dependencies of the next local change (the version vector without this replica's own
    /// entry), kept between local edits so that each keystroke does not copy the vector. Cleared
    /// when a change from another replica is applied.
    var cachedDependencies: VersionVector?
    /// The log, still encoded, of a replica opened with `Notebook(snapshot:deferringLog: true)`
    /// (nil otherwise): `notes` and `tagRecords` then hold the state as the snapshot recorded it
    /// (bodies as text only), and `history` and `pending` are empty until `materialize()`.
    var deferred: DeferredLog?
    /// Why the deferred log of the snapshot this replica was opened from did not replay (nil when
    /// it did, or was not deferred): `materialize()` then kept what of it applies.
    public internal(set) var logDamage: CRDTError?
    /// Where the conflict check last started reading a replica's log for changes from another
    /// (see `LogCursor`): a cache, found again by binary search whenever it is missing. One per
    /// pair of replicas that edit concurrently, a handful; bounded (`maxLogCursors`), as a bundle
    /// from thousands of authors would keep one per pair of them.
    var logCursors: [LogCursor.Key: LogCursor] = [:]
    /// The conflict check's working lists, kept to be reused (see `recordConflicts(of:)`).
    var conflictScratch = ConcurrentOperations()
    /// The latest timestamp of any change applied (a replica that replays its log observes it
    /// again, so a partial replica does too: see `Notebook(partialReplica:tags:notes:)`).
    package internal(set) var latestTimestamp = Timestamp.zero
    /// Whether this replica holds only some notes and none of the log before its own new changes
    /// (see `Notebook(partialReplica:tags:notes:)`).
    package internal(set) var isPartial = false
    /// The note whose `logEntries` `recordLogEntry(of:)` last added a log entry to (a cache).
    var lastLogEntry: (replica: ReplicaID, entry: Int32, note: NoteID)?
    /// The re-issues applied (`Operation.reissue`): operations a copy of another replica's
    /// database wrote, held again as the re-issuer's, and dropped where they were.
    var reissueTable = ReissueTable()
    /// Set while `rebuild()` replays the log, so that a re-issue met again does not start another.
    var rebuilding = false
    /// How many times the state was rebuilt from the log to drop re-issued operations (a store
    /// compares it before and after a batch: every note may have changed).
    package internal(set) var rebuilds = 0
    /// In a batch (`beginBatch()`): the replicas whose re-issued operations are still held here,
    /// dropped by one rebuild at the batch's end or before a change of one of them is applied.
    var rebuildDue: Set<ReplicaID>?
    /// Rebuilds a batch made before its end.
    var rebuildsInBatch = 0

    /// Creates an empty replica.
    public init(replicaID: ReplicaID, wallClock: any WallClock = SystemWallClock(),
                maxForwardDrift: UInt64 = HybridLogicalClock.defaultMaxForwardDrift) {
        self.replicaID = replicaID
        self.wallClock = wallClock
        self.clock = HybridLogicalClock(maxForwardDrift: maxForwardDrift)
    }

    // MARK: Reading

    /// The identities of every note (deleted ones included), sorted.
    public var noteIDs: [NoteID] { notes.keys.sorted() }

    /// The number of notes known, deleted ones included.
    public var noteCount: Int { notes.count }

    /// The note with this identity, or nil.
    public func note(_ id: NoteID) -> Note? {
        guard let record = notes[id] else { return nil }
        return makeNote(id, record)
    }

    /// Every note that is not deleted, sorted by identity. (A note deleted while another device
    /// edited it is not deleted: see `Note.restoredByConcurrentEdit`.)
    public var allNotes: [Note] {
        notes.keys.sorted().compactMap { id in
            let note = makeNote(id, notes[id]!)
            return note.state == .deleted ? nil : note
        }
    }

    /// The body of a note as CRDT text (for position and identity conversions).
    ///
    /// - Complexity: O(1); O(size of the log) in a replica whose log is deferred (see
    ///   `materialize()`).
    public func body(of id: NoteID) -> RGAText? {
        deferred == nil ? notes[id]?.body : materialized.notes[id]?.body
    }

    /// The tags known, sorted by key.
    public var tags: [Tag] {
        tagRecords.keys.sorted().map { key in
            let fields = tagRecords[key]!
            return Tag(key: key, name: fields[.name]?.value.stringValue ?? key, color: fields[.color]?.value.stringValue)
        }
    }

    /// The key a tag name is known by: the name with surrounding space trimmed, lowercased.
    public static func tagKey(_ name: String) -> String {
        var scalars = Substring(name).unicodeScalars
        while let first = scalars.first, first.properties.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.properties.isWhitespace { scalars.removeLast() }
        return String(String.UnicodeScalarView(scalars)).lowercased()
    }

    /// The number of changes waiting for their dependencies.
    public var pendingCount: Int { deferred?.pendingCount ?? pending.count }

    /// The changes waiting for their dependencies.
    public var pendingChanges: [Change] { materialized.pending.all }

    /// The number of changes in the log (after coalescing).
    public var historyCount: Int { deferred?.historyCount ?? history.count }

    /// This replica, with a deferred log decoded (itself when there is none).
    var materialized: Notebook {
        guard deferred != nil else { return self }
        var copy = self
        copy.materialize()
        return copy
    }

    /// The public view of a note's record.
    ///
    /// One pass over the record's fields (a lookup per named field hashed the field, and the
    /// pass was needed anyway for the tags); the body is left empty unless `withBody`.
    func makeNote(_ id: NoteID, _ record: NoteRecord, withBody: Bool = true) -> Note {
        var title = ""
        var pinned = false
        var archived = false
        var color: String?
        var state = NoteLifecycle.active
        var createdAt: UInt64 = 0
        var tags: [String] = []
        var extras: [String: FieldValue] = [:]
        for (field, register) in record.fields {
            let value = register.value
            switch field {
            case .title: title = value.stringValue ?? ""
            case .pinned: pinned = value.boolValue ?? false
            case .archived: archived = value.boolValue ?? false
            case .color: color = value.stringValue
            case .state: state = record.state
            case .createdAt: createdAt = UInt64(max(0, value.intValue ?? 0))
            case .tag(let key):
                if value == .bool(true) { tags.append(tagRecords[key]?[.name]?.value.stringValue ?? key) }
            case .extra(let key):
                if !key.hasPrefix(Notebook.reservedExtraPrefix) { extras[key] = value }
            }
        }
        return Note(
            id: id,
            title: title,
            body: withBody ? record.body.string : "",
            pinned: pinned,
            archived: archived,
            color: color,
            state: state,
            tags: tags.sorted(),
            createdAt: createdAt,
            updatedAt: record.updatedAt.milliseconds,
            extras: extras,
            restoredByConcurrentEdit: record.isRestoredByConcurrentEdit && state == .trashed,
            hasConflicts: !record.conflicts.isEmpty
        )
    }
}

/// A note as a reader sees it: the current value of every field and the body text.
public struct Note: Hashable, Sendable, Identifiable {
    /// The note's identity.
    public var id: NoteID
    /// The title.
    public var title: String
    /// The body text.
    public var body: String
    /// Whether the note is pinned.
    public var pinned: Bool
    /// Whether the note is archived.
    public var archived: Bool
    /// The color name, or nil when none is set.
    public var color: String?
    /// The state a reader sees: `.trashed` for a note whose winning state write is a delete that
    /// an edit it did not see brought back (see `restoredByConcurrentEdit`).
    public var state: NoteLifecycle
    /// The names of the tags the note is in, sorted.
    public var tags: [String]
    /// When the note was created (wall-clock milliseconds of its creator).
    public var createdAt: UInt64
    /// When the note last changed (milliseconds of the latest operation applied to it).
    public var updatedAt: UInt64
    /// App-defined fields (keys starting with `Notebook.reservedExtraPrefix` are not shown).
    public var extras: [String: FieldValue]
    /// Whether the note was deleted on one device while another edited it without having seen the
    /// delete: it is then kept, in the trash, rather than deleted (Docs/Architecture.md).
    public var restoredByConcurrentEdit: Bool = false
    /// Whether concurrent edits from different devices were merged in the same region of the body
    /// or the same field, and no device has resolved that merge since (`Notebook.conflicts(of:)`
    /// says what they were, `Notebook.resolveConflicts(_:)` clears the mark everywhere).
    public var hasConflicts: Bool = false
}

/// A tag as a reader sees it.
public struct Tag: Hashable, Sendable {
    /// The tag's key: its name, lowercased.
    public var key: String
    /// The name as last written.
    public var name: String
    /// The color, or nil.
    public var color: String?
}

/// The CRDT state of one note: a register per field and the RGA body, and what the delete and
/// conflict rules need to know of its history.
struct NoteRecord: Sendable {
    var fields = FieldRegisters()
    var body = RGAText()
    var updatedAt: Timestamp = .zero
    /// What the delete and conflict rules keep of the note's history, in one box: a record is
    /// copied whenever it is read out of the notebook's table, and one reference to retain costs
    /// less than one per list (the store reads a note's fields after every edit).
    var rules = NoteRules()

    /// Per author, the highest seq of an edit of the note: a body operation or a write of a field
    /// other than the state and the reserved ones. A join of the edits applied, so the same in any order.
    var edits: VersionVector {
        get { rules.storage.edits }
        _modify { rules.makeUnique(); yield &rules.storage.edits }
    }
    /// Per author, the highest seq of any operation on the note but the reserved ones: a change
    /// whose dependencies cover it cannot be concurrent with anything here (the conflict check's
    /// fast path).
    var touched: VersionVector {
        get { rules.storage.touched }
        _modify { rules.makeUnique(); yield &rules.storage.touched }
    }
    /// The causal context of the winning state write when it is `deleted` (nil otherwise): the
    /// delete stands only if every edit of the note is in it.
    var deleteContext: VersionVector? {
        get { rules.storage.deleteContext }
        _modify { rules.makeUnique(); yield &rules.storage.deleteContext }
    }
    /// The maximal conflict points no resolve covers (see `ConflictPoint`).
    var conflicts: [ConflictPoint] {
        get { rules.storage.conflicts }
        _modify { rules.makeUnique(); yield &rules.storage.conflicts }
    }
    /// Per replica, which of its log entries (places in `Notebook.historyIndex[replica]`) hold
    /// operations on the note, in order: the conflict check reads only those. Rebuilt with the log.
    var logEntries: [(replica: ReplicaID, entries: [Int32])] {
        get { rules.storage.logEntries }
        _modify { rules.makeUnique(); yield &rules.storage.logEntries }
    }

    func value(_ field: NoteField) -> FieldValue { fields[field]?.value ?? .null }

    /// Moves `updatedAt` forward to `timestamp` if it is later.
    mutating func touch(_ timestamp: Timestamp) {
        if timestamp > updatedAt { updatedAt = timestamp }
    }

    /// The state written last (by last-writer-wins), whatever the edits.
    var writtenState: NoteLifecycle {
        value(.state).stringValue.flatMap(NoteLifecycle.init(rawValue:)) ?? .active
    }

    /// Whether the winning state write is a delete that some edit did not see.
    var isRestoredByConcurrentEdit: Bool {
        guard let context = deleteContext else { return false }
        return !edits.isCovered(by: context)
    }

    /// The state a reader sees: a delete that an edit did not see leaves the note in the trash.
    var state: NoteLifecycle {
        let written = writtenState
        return written == .deleted && isRestoredByConcurrentEdit ? .trashed : written
    }
}

/// The delete and conflict rules' state of one note (see `NoteRecord`), a value with
/// copy-on-write storage: the storage is written only when uniquely referenced.
struct NoteRules: @unchecked Sendable {
    final class Storage {
        // Unchecked: a class's stored properties check exclusivity at run time on every write
        // (`swift_beginAccess`, 1.8% of a concurrent trace's replay); they are written only
        // through `makeUnique()`, by one owner.
        @exclusivity(unchecked) var edits = VersionVector()
        @exclusivity(unchecked) var touched = VersionVector()
        @exclusivity(unchecked) var deleteContext: VersionVector?
        @exclusivity(unchecked) var conflicts: [ConflictPoint] = []
        @exclusivity(unchecked) var logEntries: [(replica: ReplicaID, entries: [Int32])] = []

        init() {}

        init(copying other: Storage) {
            edits = other.edits
            touched = other.touched
            deleteContext = other.deleteContext
            conflicts = other.conflicts
            logEntries = other.logEntries
        }
    }

    var storage = Storage()

    mutating func makeUnique() {
        if !isKnownUniquelyReferenced(&storage) { storage = Storage(copying: storage) }
    }
}

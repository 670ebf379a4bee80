extension Notebook {
    /// Creates a note and returns its identity with the change that made it.
    ///
    /// - Parameter id: the new note's identity; a random one by default (pass one made from a
    ///   seeded generator for deterministic runs).
    @discardableResult
    public mutating func createNote(id: NoteID = .random(), title: String = "", body: String = "",
                                    tags: [String] = []) -> (id: NoteID, change: Change) {
        materialize()
        var ops: [Operation] = [
            .setNoteField(note: id, field: .createdAt, value: .int(Int64(wallClock.milliseconds()))),
            .setNoteField(note: id, field: .state, value: .string(NoteLifecycle.active.rawValue)),
            .setNoteField(note: id, field: .title, value: .string(title)),
        ]
        for name in tags where !Notebook.tagKey(name).isEmpty {
            let key = Notebook.tagKey(name)
            if tagRecords[key] == nil { ops.append(.setTagField(tag: key, field: .name, value: .string(name))) }
            ops.append(.setNoteField(note: id, field: .tag(key), value: .bool(true)))
        }
        if !body.isEmpty, notes[id] == nil {
            ops.append(.insertText(note: id, origin: nil, text: InsertedText(body)))
        }
        return (id, commitLocal(ops))
    }

    /// Sets a note's title.
    ///
    /// - Returns: the change, or nil when the title already is `title` (nothing is recorded).
    @discardableResult
    public mutating func setTitle(_ note: NoteID, _ title: String) throws -> Change? {
        try setField(note, .title, .string(title))
    }

    /// Pins or unpins a note.
    ///
    /// - Returns: the change, or nil when the note already is (nothing is recorded).
    @discardableResult
    public mutating func setPinned(_ note: NoteID, _ pinned: Bool) throws -> Change? {
        try setField(note, .pinned, .bool(pinned))
    }

    /// Archives or unarchives a note.
    ///
    /// - Returns: the change, or nil when the note already is (nothing is recorded).
    @discardableResult
    public mutating func setArchived(_ note: NoteID, _ archived: Bool) throws -> Change? {
        try setField(note, .archived, .bool(archived))
    }

    /// Sets a note's color (nil clears it).
    ///
    /// - Returns: the change, or nil when the color already is `color` (nothing is recorded).
    @discardableResult
    public mutating func setColor(_ note: NoteID, _ color: String?) throws -> Change? {
        try setField(note, .color, color.map(FieldValue.string) ?? .null)
    }

    /// Moves a note to the trash, restores it, or deletes it.
    ///
    /// Works on a deleted note too (restoring it). A delete stands only if every edit of the note
    /// is in its causal context: an edit made elsewhere without having seen it brings the note
    /// back, to the trash (`Note.restoredByConcurrentEdit`).
    ///
    /// - Returns: the change, or nil when the note already is in `state` as a reader sees it
    ///   (`Note.state`; nothing is recorded).
    @discardableResult
    public mutating func setState(_ note: NoteID, _ state: NoteLifecycle) throws -> Change? {
        try setField(note, .state, .string(state.rawValue))
    }

    /// Adds a note to a tag (creating the tag entity when it is new) or removes it.
    ///
    /// - Returns: the change, or nil when the note already is (or is not) in the tag (nothing is
    ///   recorded).
    @discardableResult
    public mutating func setTag(_ note: NoteID, _ name: String, member: Bool) throws -> Change? {
        materialize()
        let key = Notebook.tagKey(name)
        guard !key.isEmpty else { throw CRDTError(.outOfBounds, "a tag name cannot be empty") }
        guard let record = notes[note] else { throw CRDTError(.notFound, "no note \(note)") }
        if (record.value(.tag(key)) == .bool(true)) == member, !member || tagRecords[key] != nil { return nil }
        var ops: [Operation] = []
        if member, tagRecords[key] == nil { ops.append(.setTagField(tag: key, field: .name, value: .string(name))) }
        ops.append(.setNoteField(note: note, field: .tag(key), value: .bool(member)))
        return commitLocal(ops)
    }

    /// Writes a field of a tag entity (its display name or color).
    @discardableResult
    public mutating func setTagField(_ name: String, _ field: TagField, _ value: FieldValue) throws -> Change {
        materialize()
        let key = Notebook.tagKey(name)
        guard !key.isEmpty else { throw CRDTError(.outOfBounds, "a tag name cannot be empty") }
        return commitLocal([.setTagField(tag: key, field: field, value: value)])
    }

    /// Writes an app-defined field of a note.
    ///
    /// - Returns: the change, or nil when the field already holds `value` (nothing is recorded).
    /// - Throws: `.outOfBounds` for a key that starts with `reservedExtraPrefix`.
    @discardableResult
    public mutating func setExtra(_ note: NoteID, _ key: String, _ value: FieldValue) throws -> Change? {
        try setField(note, .extra(key), value)
    }

    /// Writes any field of a note.
    ///
    /// The write takes a timestamp above the one it replaces, so it wins against every write this
    /// replica has seen, even one stamped by a clock far ahead (see `commitLocal`).
    ///
    /// - Returns: the change, or nil when the field already reads `value` (an unset flag reads
    ///   false, an unset title ""; the state as `Note.state` shows it): nothing is recorded.
    /// - Throws: `.notFound` for an unknown note, `.outOfBounds` for a reserved extra key.
    @discardableResult
    public mutating func setField(_ note: NoteID, _ field: NoteField, _ value: FieldValue) throws -> Change? {
        materialize()
        guard let record = notes[note] else { throw CRDTError(.notFound, "no note \(note)") }
        if case .extra(let key) = field, key.hasPrefix(Notebook.reservedExtraPrefix) {
            throw CRDTError(.outOfBounds, "extra field keys that start with \"\(Notebook.reservedExtraPrefix)\" are reserved")
        }
        if Notebook.reads(record, field, as: value) { return nil }
        return commitLocal([.setNoteField(note: note, field: field, value: value)])
    }

    /// Whether a note's field already reads `value` as a reader sees it, so that writing it would
    /// change nothing.
    static func reads(_ record: NoteRecord, _ field: NoteField, as value: FieldValue) -> Bool {
        let current = record.value(field)
        switch field {
        case .title:
            guard case .string(let new) = value else { return current == value }
            return (current.stringValue ?? "") == new && (current == .null || current.stringValue != nil)
        case .pinned, .archived, .tag:
            guard case .bool(let new) = value else { return current == value }
            return (current.boolValue ?? false) == new && (current == .null || current.boolValue != nil)
        case .state:
            guard let new = value.stringValue.flatMap(NoteLifecycle.init(rawValue:)) else { return current == value }
            return record.state == new && (new != .trashed || !record.isRestoredByConcurrentEdit)
        default:
            return current == value
        }
    }

    /// Inserts text at a Unicode-scalar offset of a note's body.
    ///
    /// - Complexity: O(log *n*) in the body's length, plus the inserted text.
    @discardableResult
    public mutating func insertText(_ note: NoteID, at offset: Int, _ text: String) throws -> Change? {
        materialize()
        let scalars = InsertedText(text)
        guard let length = bodyLength(note) else { throw CRDTError(.notFound, "no note \(note)") }
        guard offset >= 0, offset <= length else {
            throw CRDTError(.outOfBounds, "offset \(offset) is outside the body (0...\(length))")
        }
        guard !scalars.isEmpty else { return nil }
        return commitInsert(note: note, at: offset, scalars: scalars)
    }

    /// The length of a note's body, or nil when there is no such note. (A function, so that the
    /// copy of the record it reads is gone before the caller mutates the text: a second reference
    /// would make that mutation copy the whole text.)
    private func bodyLength(_ note: NoteID) -> Int? {
        notes[note]?.body.count
    }

    /// Deletes the Unicode scalars in `range` of a note's body.
    ///
    /// - Complexity: O(log *n* + runs in the range).
    @discardableResult
    public mutating func deleteText(_ note: NoteID, _ range: Range<Int>) throws -> Change? {
        materialize()
        guard let targets = try deleteTargets(note, range) else { return nil }
        return commitLocal([.deleteText(note: note, targets: targets)])
    }

    /// The identities a local delete of `range` names (nil when the range is empty), read in one
    /// lookup of the note.
    private func deleteTargets(_ note: NoteID, _ range: Range<Int>) throws -> [OpIDRange]? {
        guard let body = notes[note]?.body else { throw CRDTError(.notFound, "no note \(note)") }
        guard range.lowerBound >= 0, range.upperBound <= body.count else {
            throw CRDTError(.outOfBounds, "range \(range) is outside the body (0..<\(body.count))")
        }
        guard !range.isEmpty else { return nil }
        return body.identities(of: range)
    }

    /// Replaces the whole body by `text` through the minimal splice: the common prefix and suffix
    /// stay (with their identities), so concurrent edits elsewhere in the text survive.
    ///
    /// - Returns: the changes made (none when the text is unchanged).
    @discardableResult
    public mutating func replaceBody(_ note: NoteID, with text: String) throws -> [Change] {
        materialize()
        guard let current = notes[note]?.body.string else { throw CRDTError(.notFound, "no note \(note)") }
        let old = Array(current.unicodeScalars)
        let new = Array(text.unicodeScalars)
        let splice = TextSplice.minimal(from: old, to: new)
        var changes: [Change] = []
        if splice.deleteCount > 0, let c = try deleteText(note, splice.offset ..< splice.offset + splice.deleteCount) {
            changes.append(c)
        }
        if !splice.insert.isEmpty {
            changes.append(commitInsert(note: note, at: splice.offset, scalars: InsertedText(splice.insert)))
        }
        return changes
    }

    // MARK: Committing

    /// Stamps local operations with the next sequence numbers and timestamps, applies them, and logs them.
    ///
    /// A write to a register takes a timestamp above the register's current one when the clock is
    /// below it (the register holds a write stamped by a clock far ahead, beyond the drift bound
    /// our clock does not follow): a write made after seeing another always wins against it, and
    /// last-writer-wins stays a plain maximum. Only this change jumps; the clock stays where it
    /// is (`finishApplying` moves it no further than the drift bound).
    mutating func commitLocal(_ ops: [Operation]) -> Change {
        let seqCount = ops.reduce(0) { $0 + $1.seqCount }
        var timestamp = clock.tick(wallMilliseconds: wallClock.milliseconds(), count: seqCount)
        let floor = registerFloor(ops)
        if timestamp < floor { timestamp = floor }
        return commit(ops, timestamp: timestamp)
    }

    /// The least first timestamp at which every register write of `ops` beats the register's
    /// current write (zero when none needs more than the clock gives).
    func registerFloor(_ ops: [Operation]) -> Timestamp {
        var floor: UInt64 = 0
        var offset: UInt64 = 0
        for op in ops {
            var current: Timestamp?
            switch op {
            case .setNoteField(let note, let field, _): current = notes[note]?.fields[field]?.timestamp
            case .setTagField(let tag, let field, _): current = tagRecords[tag]?[field]?.timestamp
            default: break
            }
            if let current, current.rawValue &+ 1 > offset { floor = max(floor, current.rawValue &+ 1 - offset) }
            offset += op.seqCount
        }
        return Timestamp(rawValue: floor)
    }

    mutating func commit(_ ops: [Operation], timestamp: Timestamp) -> Change {
        let change = Change(replica: replicaID, startSeq: versionVector[replicaID] + 1, timestamp: timestamp,
                            dependencies: localDependencies(), operations: ops)
        applyValidated(change)
        return change
    }

    /// The dependencies of the next local change: the version vector without this replica's entry.
    mutating func localDependencies() -> VersionVector {
        if let cached = cachedDependencies { return cached }
        var vector = versionVector
        vector[replicaID] = 0
        cachedDependencies = vector
        return vector
    }

    /// A local insert. Its characters must sort before every existing child of their origin, so the
    /// text lands where the user typed it. When they continue this replica's own last insert, they
    /// take the keys right after it, so typing stays one run.
    mutating func commitInsert(note: NoteID, at offset: Int, scalars: InsertedText) -> Change {
        let context = notes[note]!.body.insertContext(at: offset)
        let nextSeq = versionVector[replicaID] + 1
        let count = UInt64(scalars.count)
        let op = Operation.insertText(note: note, origin: context.origin, text: scalars)
        if let origin = context.origin, let originKey = context.originKey, origin.replica == replicaID,
           origin.seq == nextSeq - 1, context.firstChildKey == nil {
            return commit([op], timestamp: Timestamp(rawValue: originKey + 1))
        }
        var timestamp = clock.tick(wallMilliseconds: wallClock.milliseconds(), count: count)
        // RGA needs every character's key above its origin's and above the origin's existing
        // children. Our clock may be below them when it refused to follow a clock beyond the
        // drift bound; then this edit alone goes just past them, so it lands where it was typed
        // (and the clock stays where it is: `finishApplying` bounds it).
        let floor = max(context.originKey.map { $0 + 1 } ?? 0, context.firstChildKey.map { $0 + 1 } ?? 0)
        if timestamp.rawValue < floor { timestamp = Timestamp(rawValue: floor) }
        return commit([op], timestamp: timestamp)
    }
}

/// The minimal splice that turns one scalar sequence into another: keep the common prefix and
/// suffix, delete what lies between in the old, insert what lies between in the new.
public struct TextSplice: Hashable, Sendable {
    /// Where the splice starts, in scalars.
    public var offset: Int
    /// How many scalars of the old text it removes.
    public var deleteCount: Int
    /// What it inserts.
    public var insert: [Unicode.Scalar]

    /// The minimal splice from `old` to `new`.
    ///
    /// - Complexity: O(*n*).
    public static func minimal(from old: [Unicode.Scalar], to new: [Unicode.Scalar]) -> TextSplice {
        var prefix = 0
        let limit = min(old.count, new.count)
        while prefix < limit, old[prefix] == new[prefix] { prefix += 1 }
        var suffix = 0
        while suffix < limit - prefix, old[old.count - 1 - suffix] == new[new.count - 1 - suffix] { suffix += 1 }
        return TextSplice(offset: prefix, deleteCount: old.count - prefix - suffix,
                          insert: Array(new[prefix ..< new.count - suffix]))
    }
}

/// A note as a reader sees it: the current value of every field and the body text.
public struct Note: Hashable, Sendable, Identifiable {
    public var id: NoteID
    public var title: String
    public var body: String
    public var pinned: Bool
    public var archived: Bool
    /// The color name, or nil when none is set.
    public var color: String?
    public var state: NoteLifecycle
    /// The names of the tags the note is in, sorted.
    public var tags: [String]
    /// When the note was created (wall-clock milliseconds of its creator).
    public var createdAt: UInt64
    /// When the note last changed (milliseconds of the latest operation applied to it).
    public var updatedAt: UInt64
    /// App-defined fields.
    public var extras: [String: FieldValue]
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

/// The CRDT state of one note: a register per field and the RGA body.
struct NoteRecord: Sendable {
    var fields: [NoteField: LWWRegister<FieldValue>] = [:]
    var body = RGAText()
    var updatedAt: Timestamp = .zero

    func value(_ field: NoteField) -> FieldValue { fields[field]?.value ?? .null }

    /// Moves `updatedAt` forward to `timestamp` if it is later.
    mutating func touch(_ timestamp: Timestamp) {
        if timestamp > updatedAt { updatedAt = timestamp }
    }
}

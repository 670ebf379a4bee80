/// The value of a last-writer-wins field.
public enum FieldValue: Hashable, Sendable, CustomStringConvertible {
    /// No value (the field is unset).
    case null
    /// A boolean.
    case bool(Bool)
    /// A signed 64-bit integer.
    case int(Int64)
    /// A string.
    case string(String)

    /// The string, when this is one.
    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    /// The boolean, when this is one.
    public var boolValue: Bool? { if case .bool(let b) = self { return b } else { return nil } }
    /// The integer, when this is one.
    public var intValue: Int64? { if case .int(let i) = self { return i } else { return nil } }

    /// The value as text: `null`, the boolean or integer, or the string in double quotes.
    public var description: String {
        switch self {
        case .null: return "null"
        case .bool(let b): return String(b)
        case .int(let i): return String(i)
        case .string(let s): return "\"\(s)\""
        }
    }
}

/// The lifecycle state of a note, itself a last-writer-wins field.
public enum NoteLifecycle: String, Hashable, Sendable, CaseIterable {
    /// A live note.
    case active
    /// In the trash; can be restored.
    case trashed
    /// Deleted for good: hidden everywhere, its body cleared of meaning. Kept as a tombstone so a
    /// concurrent edit elsewhere cannot bring it back by accident.
    case deleted
}

/// A field of a note. Each is its own last-writer-wins register.
public enum NoteField: Hashable, Sendable, Comparable {
    /// The note's title.
    case title
    /// Whether the note is pinned.
    case pinned
    /// Whether the note is archived.
    case archived
    /// The note's color name.
    case color
    /// The note's lifecycle state (`NoteLifecycle`).
    case state
    /// When the note was created (wall-clock milliseconds of its creator).
    case createdAt
    /// Membership in the tag with this tag key (see `Notebook.tagKey(_:)`).
    case tag(String)
    /// An app-defined field.
    case extra(String)

    /// A stable small number for encoding and ordering.
    public var code: UInt8 {
        switch self {
        case .title: 0
        case .pinned: 1
        case .archived: 2
        case .color: 3
        case .state: 4
        case .createdAt: 5
        case .tag: 6
        case .extra: 7
        }
    }

    /// The key string for `.tag` and `.extra`; empty otherwise.
    public var key: String {
        switch self {
        case .tag(let k), .extra(let k): k
        default: ""
        }
    }

    /// Orders fields by `code`, then by `key`.
    public static func < (lhs: NoteField, rhs: NoteField) -> Bool {
        (lhs.code, lhs.key) < (rhs.code, rhs.key)
    }
}

/// A field of a tag entity.
public enum TagField: UInt8, Hashable, Sendable, Comparable, CaseIterable {
    /// The name as the user typed it (the tag's key is its lowercased form).
    case name = 0
    /// The tag's color name.
    case color = 1

    /// Orders tag fields by their raw value.
    public static func < (lhs: TagField, rhs: TagField) -> Bool { lhs.rawValue < rhs.rawValue }
}

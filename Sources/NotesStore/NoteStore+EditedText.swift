import NotesCRDT

/// A note's title and body as a person edits them in a text editor.
///
/// The editor file is the title on the first line, an empty line, then the body, then a newline
/// (most editors add one at the end of a file; it is not part of the body). A title's line breaks
/// are written as spaces, so the first line is always the whole title.
public struct NoteText: Hashable, Sendable {
    /// The title (one line in the file).
    public var title: String
    /// The body, exactly.
    public var body: String

    public init(title: String, body: String) {
        self.title = title
        self.body = body
    }

    /// The text of the editor file.
    public var editorFile: String {
        oneLineTitle + "\n\n" + body + "\n"
    }

    /// The title as the file's first line: its line breaks written as spaces.
    var oneLineTitle: String {
        String(String.UnicodeScalarView(title.unicodeScalars.map { $0 == "\n" || $0 == "\r" ? " " : $0 }))
    }

    /// Reads back an editor file that was written as `original.editorFile`: CRLF line ends are
    /// read as LF when the editor brought them (the written file had none), and a first line
    /// still as written keeps `original.title` (a title with line breaks is not flattened).
    public init(editorFile text: String, writtenFrom original: NoteText) {
        var text = text
        if Self.hasCRLF(text), !Self.hasCRLF(original.editorFile) {
            text = String(String.UnicodeScalarView(Self.withoutCR(text.unicodeScalars)))
        }
        self.init(editorFile: text)
        if title == original.oneLineTitle { title = original.title }
    }

    static func hasCRLF(_ text: String) -> Bool {
        var previous: Unicode.Scalar?
        for scalar in text.unicodeScalars {
            if scalar == "\n", previous == "\r" { return true }
            previous = scalar
        }
        return false
    }

    /// The scalars with each CR that ends a line (before an LF) left out.
    static func withoutCR(_ scalars: String.UnicodeScalarView) -> [Unicode.Scalar] {
        var out: [Unicode.Scalar] = []
        out.reserveCapacity(scalars.count)
        for scalar in scalars {
            if scalar == "\n", out.last == "\r" { out.removeLast() }
            out.append(scalar)
        }
        return out
    }

    /// Reads an editor file back: the first line is the title; an empty line after it is left
    /// out; the rest, without one final newline, is the body.
    public init(editorFile text: String) {
        var scalars = Substring(text).unicodeScalars[...]
        if scalars.last == "\n" { scalars.removeLast() }
        guard let newline = scalars.firstIndex(of: "\n") else {
            self.init(title: String(String.UnicodeScalarView(scalars)), body: "")
            return
        }
        let title = String(String.UnicodeScalarView(scalars[..<newline]))
        var rest = scalars[scalars.index(after: newline)...]
        if rest.first == "\n" { rest.removeFirst() }
        self.init(title: title, body: String(String.UnicodeScalarView(rest)))
    }
}

/// What `applyEditedText` changed.
public struct EditedTextResult: Hashable, Sendable {
    /// Whether the title was set.
    public var titleChanged: Bool
    /// How many splices (a delete, an insert, or a replace) the body took.
    public var bodySplices: Int
    /// Whether anything was recorded.
    public var changed: Bool { titleChanged || bodySplices > 0 }
}

/// What `renameTag` did.
public struct TagRenameResult: Hashable, Sendable {
    /// The notes in the tag (moved, unless nothing changed).
    public var notes: Int
    /// The tag's name as it was stored before.
    public var oldName: String
    /// The tag's name as stored now (an existing tag the notes joined keeps its own).
    public var newName: String
    /// Whether anything was recorded (false: the tag already had that name).
    public var changed: Bool
}

/// A tag with how many notes are in it.
public struct TagCount: Hashable, Sendable {
    /// The tag's display name.
    public var name: String
    /// The notes in it that are not trashed or deleted.
    public var notes: Int

    public init(name: String, notes: Int) {
        self.name = name
        self.notes = notes
    }
}

extension NoteStore {
    /// Saves what a person did to a note in an editor: `original` is the text they were given,
    /// `edited` what they saved. The title is set only if they changed it; the body gets the few
    /// splices that turn `original.body` into `edited.body` (`TextDiff`), made on the note's
    /// current body, so that what another device changed while the editor was open stays.
    /// One transaction.
    ///
    /// - Throws: `StoreError` `.notFound` when the note does not exist or is deleted.
    @discardableResult
    public func applyEditedText(_ note: NoteID, original: NoteText, edited: NoteText) throws -> EditedTextResult {
        let titleEdited = edited.title != original.title
        let originalBody = Array(original.body.unicodeScalars)
        let editedBody = Array(edited.body.unicodeScalars)
        if !titleEdited, originalBody == editedBody { return EditedTextResult(titleChanged: false, bodySplices: 0) }
        return try edit(requiring: note, allowingDeleted: false, onlyOn: note) { notebook in
            let titleChanged = titleEdited ? try notebook.setTitle(note, edited.title) != nil : false
            let current = Array(notebook.body(of: note)?.string.unicodeScalars ?? "".unicodeScalars)
            let splices = TextDiff.rebase(original: originalBody, edited: editedBody, current: current)
            if !splices.isEmpty { try notebook.applySplices(note, splices) }
            return EditedTextResult(titleChanged: titleChanged, bodySplices: splices.count)
        }
    }

    /// The tags of notes that are neither trashed nor deleted, with their counts, by name
    /// (tags no such note is in are left out).
    public func tagCounts() throws -> [TagCount] {
        var counts: [String: TagCount] = [:]
        for note in try list(.all) where note.state == .active {
            for name in note.tags {
                counts[Notebook.tagKey(name), default: TagCount(name: name, notes: 0)].notes += 1
            }
        }
        return counts.values.sorted { ($0.name.lowercased(), $0.name) < ($1.name.lowercased(), $1.name) }
    }

    /// Renames a tag: every note in `old` (trashed ones too) is taken out of it and put in `new`,
    /// in one transaction, as tag operations that merge with other devices' (a note put in `old`
    /// elsewhere meanwhile stays in `old`). When `new` exists, the notes join it. A change of
    /// case only renames the tag entity; the same name again records nothing. Names are trimmed.
    ///
    /// - Returns: the notes in the tag, the names as stored, and whether anything was recorded.
    /// - Throws: `.notFound` when no note is in `old`; `.invalidArgument` for an empty name.
    @discardableResult
    public func renameTag(_ old: String, to new: String) throws -> TagRenameResult {
        let old = Self.trimmedTagName(old), new = Self.trimmedTagName(new)
        let oldKey = Notebook.tagKey(old)
        let newKey = Notebook.tagKey(new)
        guard !oldKey.isEmpty, !newKey.isEmpty else { throw StoreError(.invalidArgument, "a tag name cannot be empty") }
        try Self.checkTagName(new)
        return try edit { notebook in
            let members = notebook.allNotes.filter { note in note.state != .deleted && note.tags.contains { Notebook.tagKey($0) == oldKey } }
            guard !members.isEmpty else { throw StoreError(.notFound, "there is no tag \(old)") }
            func storedName(_ key: String, _ typed: String) -> String { notebook.tags.first { $0.key == key }?.name ?? typed }
            let oldName = storedName(oldKey, old)
            if oldKey == newKey {
                guard oldName != new else { return TagRenameResult(notes: members.count, oldName: oldName, newName: oldName, changed: false) }
                try notebook.setTagField(new, .name, .string(new))
                return TagRenameResult(notes: members.count, oldName: oldName, newName: new, changed: true)
            }
            for note in members {
                _ = try notebook.setTag(note.id, old, member: false)
                _ = try notebook.setTag(note.id, new, member: true)
            }
            return TagRenameResult(notes: members.count, oldName: oldName, newName: storedName(newKey, new), changed: true)
        }
    }

    /// Deletes every note in the trash, in one transaction (`restore` brings any back).
    ///
    /// - Returns: how many notes were deleted.
    @discardableResult
    public func emptyTrash() throws -> Int {
        let trashed = try list(.trashed).map(\.id)
        guard !trashed.isEmpty else { return 0 }
        return try edit { notebook in
            var count = 0
            for id in trashed where notebook.note(id)?.state == .trashed {
                if try notebook.setState(id, .deleted) != nil { count += 1 }
            }
            return count
        }
    }
}

extension Notebook {
    /// Makes splices (decreasing offsets, as `TextDiff.rebase` gives them) on a note's body, as
    /// one batch.
    mutating func applySplices(_ note: NoteID, _ splices: [TextSplice]) throws {
        try editBody(note) { editor in
            for splice in splices {
                try editor.replace(splice.offset ..< splice.offset + splice.deleteCount,
                                   with: String(String.UnicodeScalarView(splice.insert)))
            }
        }
    }
}

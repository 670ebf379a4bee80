import NotesCRDT

/// One edit of a note, for `NoteStore.edit(_:_:)`, which makes several in one transaction.
///
/// Offsets and counts are in Unicode scalars of the body as it is when the edit comes (after the
/// edits before it in the same call).
public enum NoteEdit: Hashable, Sendable {
    /// Sets the title.
    case title(String)
    /// Replaces the body by the minimal splice (the common prefix and suffix are kept).
    case body(String)
    /// Adds text at the end of the body.
    case append(String)
    /// Inserts text at an offset (0 ... the body's length).
    case insert(String, at: Int)
    /// Deletes `count` scalars from an offset.
    case delete(at: Int, count: Int)
    /// Pins or unpins.
    case pinned(Bool)
    /// Archives or unarchives.
    case archived(Bool)
    /// Sets the color (nil clears it).
    case color(String?)
    /// Moves to the trash, restores, or deletes for good.
    case state(NoteLifecycle)
    /// Puts the note in a tag or takes it out.
    case tag(String, member: Bool)

    /// The body's length after this edit, from `length` before it, or the error that says why
    /// the edit does not fit (checked without overflow, whatever the numbers).
    func bodyLength(after length: Int) throws -> Int {
        switch self {
        case .body(let text):
            return text.unicodeScalars.count
        case .append(let text):
            return length + text.unicodeScalars.count
        case .insert(let text, let offset):
            guard offset >= 0, offset <= length else {
                throw StoreError(.invalidArgument, "cannot insert at offset \(offset): the body has \(length) characters (offsets 0 to \(length))")
            }
            return length + text.unicodeScalars.count
        case .delete(let offset, let count):
            guard count >= 0 else { throw StoreError(.invalidArgument, "cannot delete a negative number of characters (\(count))") }
            guard offset >= 0, offset <= length, count <= length - offset else {
                throw StoreError(.invalidArgument, "cannot delete \(count) characters at offset \(offset): the body has \(length)")
            }
            return length - count
        case .tag(let name, _):
            guard !Notebook.tagKey(name).isEmpty else { throw StoreError(.invalidArgument, "a tag name cannot be empty") }
            try NoteStore.checkTagName(name)
            return length
        case .title, .pinned, .archived, .color, .state:
            return length
        }
    }

    /// Makes the edit on `note` in `notebook` (after `bodyLength(after:)` accepted it).
    func apply(to note: NoteID, in notebook: inout Notebook) throws {
        let length = notebook.body(of: note)?.count ?? 0
        _ = try bodyLength(after: length)
        switch self {
        case .title(let title): _ = try notebook.setTitle(note, title)
        case .body(let text): _ = try notebook.replaceBody(note, with: text)
        case .append(let text): _ = try notebook.insertText(note, at: length, text)
        case .insert(let text, let offset): _ = try notebook.insertText(note, at: offset, text)
        case .delete(let offset, let count): _ = try notebook.deleteText(note, offset ..< offset + count)
        case .pinned(let pinned): _ = try notebook.setPinned(note, pinned)
        case .archived(let archived): _ = try notebook.setArchived(note, archived)
        case .color(let color): _ = try notebook.setColor(note, color)
        case .state(let state): _ = try notebook.setState(note, state)
        case .tag(let name, let member): _ = try notebook.setTag(note, NoteStore.trimmedTagName(name), member: member)
        }
    }
}

extension NoteStore {
    /// Makes several edits of one note, in order, in one transaction: all of them, or (when one
    /// does not fit: an offset past the end of the body, a count past it, an empty tag name)
    /// none, with an error that says which.
    ///
    /// Every offset and count is checked against the body's length before anything is written
    /// (the length each edit leaves is worked out from the ones before it).
    ///
    /// - Throws: `StoreError` `.notFound` when the note does not exist or is deleted,
    ///   `.invalidArgument` for an edit that does not fit.
    public func edit(_ note: NoteID, _ edits: [NoteEdit]) throws {
        guard !edits.isEmpty else { return }
        try edit(requiring: note, allowingDeleted: false, onlyOn: note) { notebook in
            var length = notebook.body(of: note)?.count ?? 0
            for (index, edit) in edits.enumerated() {
                do {
                    length = try edit.bodyLength(after: length)
                } catch let error as StoreError where edits.count > 1 {
                    throw StoreError(error.code, "edit \(index + 1) of \(edits.count): \(error.message); nothing was changed")
                }
            }
            for edit in edits { try edit.apply(to: note, in: &notebook) }
        }
    }
}

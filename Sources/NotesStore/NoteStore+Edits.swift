import GRDB
import NotesCRDT

extension NoteStore {
    /// Performs a local edit: runs `body` on the notebook, then persists the changes it made (the
    /// log rows, the touched notes' materialized rows and their index entries) in one transaction.
    ///
    /// If the transaction fails, the edit is not visible in memory either (the notebook is reloaded
    /// from disk). Errors thrown by `body` before it changed anything (a missing note, an offset out
    /// of range) come back as `StoreError`s.
    ///
    /// - Returns: what `body` returned.
    @discardableResult
    public func edit<T>(_ body: (inout Notebook) throws -> T) throws -> T {
        try edit(requiring: nil, body)
    }

    /// `edit(_:)`, refused with `.notFound` unless `note` has a materialized row (exists, not deleted).
    func edit<T>(requiring note: NoteID?, _ body: (inout Notebook) throws -> T) throws -> T {
        lock.lock(); defer { lock.unlock() }
        let result = try writeTransaction("cannot save the edit") { db -> T in
            if let note, try materializedRow(note, db) == nil {
                throw StoreError(.notFound, "there is no note \(note)")
            }
            let before = loaded!.notebook.versionVector[replicaID]
            let result: T
            do {
                result = try body(&loaded!.notebook)
            } catch {
                if loaded!.notebook.versionVector[replicaID] != before { dirty = true }
                throw error
            }
            let after = loaded!.notebook.versionVector[replicaID]
            guard after > before else { return result }
            dirty = true
            var known = loaded!.notebook.versionVector
            known[replicaID] = before
            let changes = loaded!.notebook.changes(since: known)
            try log(changes, db)
            try materialize(changes, db)
            try bumpRevision(db)
            return result
        }
        compactIfDue()
        return result
    }

    /// Creates a note and returns its identity.
    @discardableResult
    public func createNote(title: String, body: String = "", tags: [String] = [], id: NoteID = .random()) throws -> NoteID {
        try edit { $0.createNote(id: id, title: title, body: body, tags: tags).id }
    }

    /// Sets a note's title.
    public func setTitle(_ note: NoteID, _ title: String) throws {
        try editLive(note) { try $0.setTitle(note, title) }
    }

    /// Replaces a note's body by the minimal splice (common prefix and suffix kept).
    public func replaceBody(_ note: NoteID, with text: String) throws {
        try editLive(note) { try $0.replaceBody(note, with: text) }
    }

    /// Inserts text at a Unicode-scalar offset of a note's body.
    public func insertText(_ note: NoteID, at offset: Int, _ text: String) throws {
        try editLive(note) { try $0.insertText(note, at: offset, text) }
    }

    /// Appends text to a note's body.
    public func appendText(_ note: NoteID, _ text: String) throws {
        try editLive(note) { notebook in
            try notebook.insertText(note, at: notebook.body(of: note)?.count ?? 0, text)
        }
    }

    /// Deletes `count` Unicode scalars of a note's body from `offset` on.
    public func deleteText(_ note: NoteID, at offset: Int, count: Int) throws {
        guard count >= 0 else { throw StoreError(.invalidArgument, "cannot delete a negative number of characters") }
        try editLive(note) { notebook in
            try NoteEdit.delete(at: offset, count: count).apply(to: note, in: &notebook)
        }
    }

    /// Pins or unpins a note.
    public func setPinned(_ note: NoteID, _ pinned: Bool) throws {
        try editLive(note) { try $0.setPinned(note, pinned) }
    }

    /// Archives or unarchives a note.
    public func setArchived(_ note: NoteID, _ archived: Bool) throws {
        try editLive(note) { try $0.setArchived(note, archived) }
    }

    /// Sets a note's color (nil clears it).
    public func setColor(_ note: NoteID, _ color: String?) throws {
        try editLive(note) { try $0.setColor(note, color) }
    }

    /// Moves a note to the trash (`.trashed`), restores it (`.active`), or deletes it for good (`.deleted`).
    public func setState(_ note: NoteID, _ state: NoteLifecycle) throws {
        try editLive(note) { try $0.setState(note, state) }
    }

    /// Adds a note to a tag (`member: true`) or removes it.
    public func setTag(_ note: NoteID, _ name: String, member: Bool) throws {
        guard !Notebook.tagKey(name).isEmpty else { throw StoreError(.invalidArgument, "a tag name cannot be empty") }
        try editLive(note) { try $0.setTag(note, name, member: member) }
    }

    /// An edit of a note that must exist and not be deleted.
    private func editLive<T>(_ note: NoteID, _ body: (inout Notebook) throws -> T) throws {
        try edit(requiring: note) { notebook in _ = try body(&notebook) }
    }
}

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
        try edit(requiring: note, allowingDeleted: false, body)
    }

    /// `edit(_:)`, refused with `.notFound` unless `note` exists, live or deleted.
    func edit<T>(requiringKnown note: NoteID, _ body: (inout Notebook) throws -> T) throws -> T {
        try edit(requiring: note, allowingDeleted: true, body)
    }

    private func edit<T>(requiring note: NoteID?, allowingDeleted: Bool, _ body: (inout Notebook) throws -> T) throws -> T {
        lock.lock(); defer { lock.unlock() }
        let result = try writeTransaction("cannot save the edit") { db -> T in
            if let note, try materializedRow(note, db) == nil {
                let deleted = try Int.fetchOne(db, sql: "SELECT 1 FROM deleted_notes WHERE id = ?", arguments: [note.description]) != nil
                if !deleted { throw StoreError(.notFound, "there is no note \(note)") }
                if !allowingDeleted {
                    throw StoreError(.notFound, "note \(note) is deleted (`crdt-sync restore \(note.description.prefix(8))` brings it back)")
                }
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
    ///
    /// - Returns: whether anything changed (false: the title already is `title`; nothing is recorded).
    @discardableResult
    public func setTitle(_ note: NoteID, _ title: String) throws -> Bool {
        try editLive(note) { try $0.setTitle(note, title) != nil }
    }

    /// Replaces a note's body by the minimal splice (common prefix and suffix kept).
    ///
    /// - Returns: whether anything changed (false: the body already is `text`).
    @discardableResult
    public func replaceBody(_ note: NoteID, with text: String) throws -> Bool {
        try editLive(note) { try !$0.replaceBody(note, with: text).isEmpty }
    }

    /// Inserts text at a Unicode-scalar offset of a note's body.
    ///
    /// - Returns: whether anything changed (false: `text` is empty).
    @discardableResult
    public func insertText(_ note: NoteID, at offset: Int, _ text: String) throws -> Bool {
        try editLive(note) { try $0.insertText(note, at: offset, text) != nil }
    }

    /// Appends text to a note's body.
    ///
    /// - Returns: whether anything changed (false: `text` is empty).
    @discardableResult
    public func appendText(_ note: NoteID, _ text: String) throws -> Bool {
        try editLive(note) { notebook in
            try notebook.insertText(note, at: notebook.body(of: note)?.count ?? 0, text) != nil
        }
    }

    /// Deletes `count` Unicode scalars of a note's body from `offset` on.
    ///
    /// - Returns: whether anything changed (false: `count` is 0).
    @discardableResult
    public func deleteText(_ note: NoteID, at offset: Int, count: Int) throws -> Bool {
        guard count >= 0 else { throw StoreError(.invalidArgument, "cannot delete a negative number of characters") }
        try editLive(note) { notebook in
            try NoteEdit.delete(at: offset, count: count).apply(to: note, in: &notebook)
        }
        return count > 0
    }

    /// Pins or unpins a note.
    ///
    /// - Returns: whether anything changed (false: it already was; nothing is recorded).
    @discardableResult
    public func setPinned(_ note: NoteID, _ pinned: Bool) throws -> Bool {
        try editLive(note) { try $0.setPinned(note, pinned) != nil }
    }

    /// Archives or unarchives a note.
    ///
    /// - Returns: whether anything changed (false: it already was; nothing is recorded).
    @discardableResult
    public func setArchived(_ note: NoteID, _ archived: Bool) throws -> Bool {
        try editLive(note) { try $0.setArchived(note, archived) != nil }
    }

    /// Sets a note's color (nil clears it).
    ///
    /// - Returns: whether anything changed (false: it already was; nothing is recorded).
    @discardableResult
    public func setColor(_ note: NoteID, _ color: String?) throws -> Bool {
        try editLive(note) { try $0.setColor(note, color) != nil }
    }

    /// Moves a note to the trash (`.trashed`), restores it (`.active`), or deletes it (`.deleted`).
    ///
    /// Works on deleted notes too: restoring one brings it back (while its tombstone exists, which
    /// is always). A delete made while another device edits the note without having seen it does
    /// not stand: the note comes back, in the trash (`Note.restoredByConcurrentEdit`).
    ///
    /// - Returns: whether anything changed (false: the note already is in `state` as a reader sees
    ///   it; nothing is recorded).
    @discardableResult
    public func setState(_ note: NoteID, _ state: NoteLifecycle) throws -> Bool {
        try edit(requiringKnown: note) { try $0.setState(note, state) != nil }
    }

    /// Adds a note to a tag (`member: true`) or removes it.
    ///
    /// - Returns: whether anything changed (false: it already was, or was not, in the tag; nothing
    ///   is recorded).
    @discardableResult
    public func setTag(_ note: NoteID, _ name: String, member: Bool) throws -> Bool {
        guard !Notebook.tagKey(name).isEmpty else { throw StoreError(.invalidArgument, "a tag name cannot be empty") }
        return try editLive(note) { try $0.setTag(note, name, member: member) != nil }
    }

    /// An edit of a note that must exist and not be deleted.
    private func editLive<T>(_ note: NoteID, _ body: (inout Notebook) throws -> T) throws -> T {
        try edit(requiring: note, body)
    }
}

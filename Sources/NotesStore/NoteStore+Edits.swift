import Foundation
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
        try edit(requiring: note, allowingDeleted: true, onlyOn: note, body)
    }

    /// A one-note edit needs the whole replica (see `editOneNote`).
    struct NeedsWholeReplica: Error {}

    func edit<T>(requiring note: NoteID?, allowingDeleted: Bool, onlyOn oneNote: NoteID? = nil, undo: UndoRecording = .push,
                         _ body: (inout Notebook) throws -> T) throws -> T {
        lock.lock(); defer { lock.unlock() }
        // An edit of one note, with nothing loaded yet (the command line, an app's first write),
        // runs on that note's stored state alone; without a stored state, the whole replica is
        // loaded and every note's state written, once.
        var recordStates = false
        if loaded == nil, let oneNote {
            do {
                return try editOneNote(oneNote, requiring: note, allowingDeleted: allowingDeleted, undo: undo, body)
            } catch is NeedsWholeReplica {
                recordStates = true
            }
        }
        let result = try writeTransaction("cannot save the edit") { db -> T in
            let result = try changeAndRecord(requiring: note, allowingDeleted: allowingDeleted, undo: undo, body, db)
            if recordStates { try recordStoredStates(db) }
            return result
        }
        compactIfDue()
        return result
    }

    /// Runs `body` on `loaded`, then logs and materializes the changes it made (in the caller's
    /// transaction). `note`, when given, must exist (and not be deleted unless `allowingDeleted`).
    private func changeAndRecord<T>(requiring note: NoteID?, allowingDeleted: Bool, undo: UndoRecording,
                                    _ body: (inout Notebook) throws -> T,
                                    _ db: Database) throws -> T {
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
        try recordUndo(undo, seqs: before + 1 ... max(before + 1, after), made: after > before, db)
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

    /// An edit of note `id` alone (or its creation) on a replica that holds only the notes it
    /// edits, the clock, the version vector and the tags, read from what the writes stored
    /// (`replica.replica_state`, `replica.tag_state`, `note_state`) and kept between edits while
    /// no other process writes (`OneNoteCache`): its cost follows the note, not the notebook. The
    /// changes are the ones the whole replica would make.
    ///
    /// - Throws: `NeedsWholeReplica` (with nothing written) when a state is missing or damaged,
    ///   or the edit reaches beyond the note (a renamed tag's other notes).
    private func editOneNote<T>(_ id: NoteID, requiring note: NoteID?, allowingDeleted: Bool, undo: UndoRecording,
                                _ body: (inout Notebook) throws -> T) throws -> T {
        var cache = oneNoteCache
        oneNoteCache = nil  // back only once the transaction commits
        defer { loaded = nil; dirty = false }
        do {
            return try queue.writeWithoutTransaction { db in
                let result = try self.transaction(db, begin: "BEGIN IMMEDIATE TRANSACTION") {
                    guard let meta = try Row.fetchOne(db.cachedStatement(sql: """
                        SELECT revision, snapshot_generation, replica_id, replica_state, tag_state FROM replica WHERE id = 1
                        """)) else { throw StoreError(.corrupt, "the replica row is missing") }
                    let revision = try meta.stored("revision", as: Int64.self)
                    // Another process wrote: what this one kept may be behind.
                    if options.access == .shared, cache?.revision != revision { cache = nil }
                    if cache == nil {
                        let storedID = try meta.stored("replica_id", as: Data.self)
                        guard let replicaState = try meta.stored("replica_state", as: Data?.self), let tagState = try meta.stored("tag_state", as: Data?.self),
                              ReplicaID(blob: [UInt8](storedID)) == replicaID else { throw NeedsWholeReplica() }
                        do {
                            cache = OneNoteCache(notebook: try Notebook(partialReplica: replicaID, wallClock: options.wallClock,
                                                                        replicaState: [UInt8](replicaState), tags: [UInt8](tagState), notes: []),
                                                 revision: revision)
                        } catch is CRDTError {
                            throw NeedsWholeReplica()  // damaged: written again from the whole replica
                        }
                    }
                    if !cache!.notebook.holds(id) {
                        let hex = id.description
                        if let payload = try Data.fetchOne(db.cachedStatement(sql: "SELECT payload FROM note_state WHERE note = ?"), arguments: [hex]) {
                            do {
                                try cache!.notebook.insertNoteState(id, [UInt8](payload))
                            } catch is CRDTError {
                                throw NeedsWholeReplica()
                            }
                            cache!.stored.insert(id)
                        } else if try Bool.fetchOne(db.cachedStatement(sql: """
                            SELECT EXISTS (SELECT 1 FROM notes WHERE id = ?1) OR EXISTS (SELECT 1 FROM deleted_notes WHERE id = ?1)
                            """), arguments: [hex]) ?? false {
                            throw NeedsWholeReplica()
                        }
                    }
                    loaded = Loaded(notebook: cache!.notebook, lastLogRow: 0, revision: revision,
                                    snapshotGeneration: try meta.stored("snapshot_generation"), changesSinceSnapshot: 0)
                    cache!.notebook = Notebook(replicaID: replicaID)  // the one copy is in `loaded` meanwhile
                    oneNoteWriting = cache
                    defer { cache = oneNoteWriting; oneNoteWriting = nil }
                    let result = try changeAndRecord(requiring: note, allowingDeleted: allowingDeleted, undo: undo, body, db)
                    // Moving on to another note: the states of those typed into are written now.
                    try writeOneNoteStates(except: id, db)
                    return result
                }
                cache!.notebook = loaded!.notebook
                cache!.revision = loaded!.revision
                oneNoteEditCount += 1
                oneNoteCache = cache
                return result
            }
        } catch let error as NeedsWholeReplica {
            throw error
        } catch {
            throw StoreError.wrap(error, "cannot save the edit")
        }
    }

    /// Writes (in a one-note edit's transaction) the stored state of a note it changed: at its
    /// first edit since it was read (all a command makes), and every `oneNoteStateInterval`
    /// edits after; in between, the row goes (the next one-note edit that finds no row loads
    /// the whole replica), and the state waits in `OneNoteCache` for the next write of it.
    func recordOneNoteState(_ id: NoteID, _ db: Database) throws {
        let count = oneNoteWriting?.edits[id] ?? 0
        oneNoteWriting?.edits[id] = count + 1
        if count % NoteStore.oneNoteStateInterval == 0 {
            guard let state = inLoadedNotebook({ $0.encodedNoteState(id) }) else { throw NeedsWholeReplica() }
            try statement("INSERT OR REPLACE INTO note_state (note, payload) VALUES (?, ?)", db).run(.text(id.description), .blob(state))
            oneNoteWriting?.stored.insert(id)
        } else if oneNoteWriting?.stored.remove(id) != nil {
            try statement("DELETE FROM note_state WHERE note = ?", db).run(.text(id.description))
        }
    }

    /// Writes the states the one-note replica holds and has not stored, but `except`'s.
    func writeOneNoteStates(except: NoteID?, _ db: Database) throws {
        guard let pending = oneNoteWriting?.edits.keys.filter({ $0 != except && !oneNoteWriting!.stored.contains($0) }),
              !pending.isEmpty else { return }
        let insert = try statement("INSERT OR REPLACE INTO note_state (note, payload) VALUES (?, ?)", db)
        for id in pending {
            guard let state = inLoadedNotebook({ $0.encodedNoteState(id) }) else { continue }
            try insert.run(.text(id.description), .blob(state))
            oneNoteWriting!.stored.insert(id)
        }
    }

    /// Writes, before the store closes, the states one-note edits kept unwritten, if no other
    /// process wrote since (they would be behind it).
    func flushOneNoteStates() {
        guard var cache = oneNoteCache, cache.edits.keys.contains(where: { !cache.stored.contains($0) }) else { return }
        oneNoteCache = nil
        try? queue.writeWithoutTransaction { db in
            try self.transaction(db, begin: "BEGIN IMMEDIATE TRANSACTION") {
                let revision = try Int64.fetchOne(db.cachedStatement(sql: "SELECT revision FROM replica WHERE id = 1"))
                guard options.access == .exclusive || revision == cache.revision else { return }
                loaded = Loaded(notebook: cache.notebook, lastLogRow: 0, revision: cache.revision, snapshotGeneration: 0, changesSinceSnapshot: 0)
                defer { loaded = nil }
                cache.notebook = Notebook(replicaID: replicaID)
                oneNoteWriting = cache
                defer { oneNoteWriting = nil }
                try writeOneNoteStates(except: nil, db)
            }
        }
    }

    /// How often a note typed into through one-note edits has its state written (see `recordOneNoteState`).
    static let oneNoteStateInterval = 64

    /// Writes the replica-wide state, the state of every note that has none and every note's
    /// digest (in the caller's transaction, on the whole replica), so that the next one-note
    /// edits and readers of the digest need not load it.
    func recordStoredStates(_ db: Database) throws {
        let notebook = loaded!.notebook
        try statement("UPDATE replica SET replica_state = ?, tag_state = ? WHERE id = 1", db)
            .run(.blob(notebook.encodedReplicaState()), .blob(notebook.encodedTagState()))
        loaded!.tagStateStale = false
        var recorded: Set<String> = []
        try statement("SELECT note FROM note_state", db).forEachRow { recorded.insert(SQLColumn.text($0, 0)) }
        let insert = try statement("INSERT INTO note_state (note, payload) VALUES (?, ?)", db)
        for id in notebook.noteIDs where !recorded.contains(id.description) {
            if let state = notebook.encodedNoteState(id) { try insert.run(.text(id.description), .blob(state)) }
        }
        try recordAllDigests(db)
    }

    /// Creates a note and returns its identity.
    @discardableResult
    public func createNote(title: String, body: String = "", tags: [String] = [], id: NoteID = .random()) throws -> NoteID {
        let tags = tags.map(NoteStore.trimmedTagName)
        for tag in tags { try NoteStore.checkTagName(tag) }
        return try edit(requiring: nil, allowingDeleted: false, onlyOn: id) { $0.createNote(id: id, title: title, body: body, tags: tags).id }
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
    /// - Throws: `.notFound` when moving a deleted note to the trash (restoring it, `.active`, is
    ///   the way back).
    @discardableResult
    public func setState(_ note: NoteID, _ state: NoteLifecycle) throws -> Bool {
        // Trashing a deleted note would bring it back unasked; only `.active` (restore) may do that.
        if state == .trashed { return try editLive(note) { try $0.setState(note, state) != nil } }
        return try edit(requiringKnown: note) { try $0.setState(note, state) != nil }
    }

    /// Adds a note to a tag (`member: true`) or removes it.
    ///
    /// - Returns: whether anything changed (false: it already was, or was not, in the tag; nothing
    ///   is recorded).
    @discardableResult
    public func setTag(_ note: NoteID, _ name: String, member: Bool) throws -> Bool {
        let name = NoteStore.trimmedTagName(name)
        guard !Notebook.tagKey(name).isEmpty else { throw StoreError(.invalidArgument, "a tag name cannot be empty") }
        try NoteStore.checkTagName(name)
        return try editLive(note) { try $0.setTag(note, name, member: member) != nil }
    }

    /// An edit of a note that must exist and not be deleted.
    private func editLive<T>(_ note: NoteID, _ body: (inout Notebook) throws -> T) throws -> T {
        try edit(requiring: note, allowingDeleted: false, onlyOn: note, body)
    }
}

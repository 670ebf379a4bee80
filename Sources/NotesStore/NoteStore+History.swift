import Foundation
import GRDB
import NotesCRDT

/// A moment of a note's history: a version (an operation, named as `NoteRevision.label` names it)
/// or a time.
public enum NotePoint: Hashable, Sendable {
    /// Right after the operation `(replica, seq)`, as its author had the notebook then.
    case operation(ReplicaID, seq: UInt64)
    /// After every operation stamped at or before this time (see `Notebook.context(atTime:)`).
    case time(Timestamp)

    /// The latest moment within wall-clock millisecond `milliseconds` (every counter value in it).
    public static func time(milliseconds: UInt64) -> NotePoint {
        .time(Timestamp(milliseconds: milliseconds, counter: .max))
    }
}

/// What `NoteStore.undo(_:)` reverted.
public struct UndoResult: Hashable, Sendable {
    /// This replica's sequence numbers the reverted edit made.
    public var seqs: ClosedRange<UInt64>
    /// The notes it touched.
    public var notes: [NoteID]
    /// Whether reverting it changed anything (false: later edits had replaced all of it, or
    /// another device deleted the notes since).
    public var changed: Bool
    /// The notes it touched that another device has deleted since: the undo leaves them deleted
    /// and reverts nothing in them.
    public var deletedElsewhere: [NoteID] = []
}

/// How a local edit goes on the undo stack (`undo_stack`, Docs/Storage.md "Undo").
enum UndoRecording {
    /// A new edit: pushed.
    case push
    /// Not undoable (a device name).
    case none
    /// The undo of stack row `row`: marks it undone, pushes nothing.
    case undoes(Int64)
}

extension NoteStore {
    // MARK: Versions

    /// The versions of a note, oldest first: one per logged change with operations on it, in the
    /// order applied here, each with a label that names it alike on every device.
    ///
    /// This device's own versions are one per edit (per command), as the undo stack records them,
    /// even where the log joined consecutive edits into one change.
    public func versions(of id: NoteID) throws -> [NoteRevision] {
        if let log = try unloadedLog() {
            return Notebook.revisions(of: id, in: log, replicaID: replicaID, ownEdits: try ownEdits())
        }
        return try notebook.revisions(of: id, ownEdits: ownEdits())
    }

    /// The log as the loaded replica would hold it (`Notebook.allChanges`), read without loading
    /// the replica: the snapshot's log and the rows after it decoded, nothing replayed (on a
    /// notebook of a million operations, 0.6 s less for `log`). Nil when the replica is loaded
    /// already, or when the stored log is not a plain one (`Notebook.storedLog`).
    func unloadedLog() throws -> [Change]? {
        lock.lock(); defer { lock.unlock() }
        guard loaded == nil else { return nil }
        let me = replicaID
        return try read("cannot read the log") { db in
            let snapshot = try Row.fetchOne(db, sql: "SELECT through_row, payload FROM snapshot WHERE id = 1")
            let through = try snapshot?.stored("through_row", as: Int64.self) ?? 0
            var later: [Change] = []
            let rows = try Row.fetchCursor(db, sql: "SELECT row, payload FROM changes WHERE row > ? ORDER BY row", arguments: [through])
            while let row = try rows.next() {
                let rowID = try row.stored("row", as: Int64.self)
                guard let payload = Data.fromDatabaseValue(row["payload"]) else {
                    throw StoreError(.corrupt, "log row \(rowID) holds no change encoding")
                }
                do {
                    later += try ChangeCodec.decode([UInt8](payload))
                } catch let error as CRDTError {
                    throw StoreError(.corrupt, "log row \(rowID) cannot be read: \(error.message)")
                }
            }
            do {
                return try Notebook.storedLog(snapshot: (try snapshot?.stored("payload", as: Data.self)).map { [UInt8]($0) }, replicaID: me, later: later)
            } catch let error as CRDTError {
                throw StoreError(.corrupt, "the stored snapshot cannot be read: \(error.message)")
            }
        }
    }

    /// This device's edits as the undo stack records them (undos too), with the time each was made.
    func ownEdits() throws -> [OwnEdit] {
        let me = replicaID
        return try read("cannot read the undo stack") { db in
            try Row.fetchAll(db, sql: "SELECT start_seq, end_seq, made_at FROM undo_stack WHERE replica = ?", arguments: [Data(me.raw.bytes)]).map { row in
                let made = try row.stored(2, as: Int64?.self)
                return OwnEdit(seqs: try row.storedSeqs(0, 1), time: try made.map { Timestamp(milliseconds: try NoteStore.unsigned($0, what: "made_at")) })
            }
        }
    }

    /// The moment a version label names: `REPLICA-SEQ`, where REPLICA is a unique prefix (hex) of
    /// a replica this one has operations of (`NoteRevision.label`).
    ///
    /// - Throws: `.invalidArgument` for text of another shape, `.notFound` or `.ambiguous` for the
    ///   replica prefix.
    public func resolveVersion(_ label: String) throws -> NotePoint {
        let parts = label.lowercased().split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, (1 ... 32).contains(parts[0].count), parts[0].allSatisfy({ $0.isHexDigit && $0.isASCII }),
              let seq = UInt64(parts[1]), seq >= 1 else {
            throw StoreError(.invalidArgument, "'\(label)' is not a version (versions read REPLICA-SEQ, e.g. 1a2b3c4d-17, as `history` prints them)")
        }
        let matches = try versionVector.sortedEntries.map(\.replica).filter { $0.description.hasPrefix(parts[0]) }
        switch matches.count {
        case 0: throw StoreError(.notFound, "no replica this one has heard of has an id that starts with '\(parts[0])' (version '\(label)')")
        case 1: return .operation(matches[0], seq: seq)
        default: throw StoreError(.ambiguous, "'\(parts[0])' names more than one replica; give more digits")
        }
    }

    /// The note as it was at `point`, or nil when it did not exist then. Deleted notes too. A
    /// version is a whole edit: an operation inside one stands for the note after all of it
    /// (`Notebook.context(ofOperation:seq:ownEdits:)`); this device's edits are at the time each
    /// was made.
    ///
    /// - Throws: `.notFound` for an operation the log does not hold.
    public func note(_ id: NoteID, at point: NotePoint) throws -> Note? {
        let notebook = try self.notebook
        let cut: VersionVector
        switch point {
        case .operation(let replica, let seq):
            guard let context = notebook.context(ofOperation: replica, seq: seq, ownEdits: try ownEdits()) else {
                throw StoreError(.notFound, "this replica has no version \(NoteRevision.label(replica, seq)) (its log holds \(replica.description.prefix(8)) up to seq \(notebook.versionVector[replica]))")
            }
            cut = context
        case .time(let timestamp):
            cut = notebook.context(atTime: timestamp, ownEdits: try ownEdits())
        }
        do {
            return try notebook.note(id, at: cut)
        } catch let error as CRDTError {
            throw StoreError(.invalidArgument, "cannot rebuild note \(id) at that version: \(error.message)")
        }
    }

    /// Makes the note read as it did at `point` again, as new operations (the fields that differ
    /// written, the body changed by the minimal splice), which sync like any edit. Deleted notes too.
    ///
    /// - Returns: whether anything changed (false: the note already reads so).
    /// - Throws: `.notFound` when the note did not exist at `point`; nothing is written then.
    @discardableResult
    public func restore(_ id: NoteID, to point: NotePoint) throws -> Bool {
        guard let target = try note(id, at: point) else {
            throw StoreError(.notFound, "note \(id.description.prefix(8)) did not exist yet at that moment")
        }
        return try edit(requiringKnown: id) { try !$0.restore(id, to: target).isEmpty }
    }

    // MARK: Undo

    /// Reverts this device's latest local edit that is not undone yet (of `note`, when given), as
    /// new operations (see `Notebook.revert(_:)`): edits from other devices stay. A local edit is
    /// one call of an editing method (one command); an undo is not itself on the stack, so a
    /// second undo reverts the edit before. Device names are not undone.
    ///
    /// - Returns: what was reverted, or nil when there is nothing to undo.
    @discardableResult
    public func undo(_ note: NoteID? = nil) throws -> UndoResult? {
        let me = replicaID
        let rows = try read("cannot read the undo stack") { db in
            try Row.fetchAll(db, sql: "SELECT row, start_seq, end_seq FROM undo_stack WHERE replica = ? AND undone_at IS NULL AND is_undo = 0 ORDER BY row DESC",
                             arguments: [Data(me.raw.bytes)]).map { (row: try $0.stored(0, as: Int64.self), seqs: try $0.storedSeqs(1, 2)) }
        }
        guard !rows.isEmpty else { return nil }
        let notebook = try self.notebook
        for row in rows {
            let seqs = row.seqs
            let notes = notebook.notes(touchedByOwn: seqs)
            if let note, !notes.contains(note) { continue }
            var changed = false
            let deleted = try edit(requiring: nil, allowingDeleted: true, undo: .undoes(row.row)) { notebook in
                changed = try !notebook.revert(seqs).isEmpty
                return notes.filter { notebook.isDeletedByAnotherReplica($0) }
            }
            return UndoResult(seqs: seqs, notes: notes, changed: changed, deletedElsewhere: deleted)
        }
        return nil
    }

    /// Records a local edit on the undo stack as `undo` says (in the edit's transaction).
    func recordUndo(_ undo: UndoRecording, seqs: ClosedRange<UInt64>, made: Bool, _ db: Database) throws {
        switch undo {
        case .push:
            guard made else { return }
            try statement("INSERT INTO undo_stack (replica, start_seq, end_seq, made_at) VALUES (?, ?, ?, ?)", db)
                .run(.blob(replicaID.raw.bytes), .int(Int64(seqs.lowerBound)), .int(Int64(seqs.upperBound)), .int(Int64(options.wallClock.milliseconds())))
            // The stack keeps this device's last thousand edits.
            let row = db.lastInsertedRowID
            if row % 64 == 0 { try statement("DELETE FROM undo_stack WHERE row <= ?", db).run(.int(row - 1000)) }
        case .undoes(let row):
            try statement("UPDATE undo_stack SET undone_at = ? WHERE row = ?", db)
                .run(.int(Int64(options.wallClock.milliseconds())), .int(row))
            // The undo is a version of its own (history, `show --at`), though not itself undoable.
            if made {
                try statement("INSERT INTO undo_stack (replica, start_seq, end_seq, made_at, is_undo) VALUES (?, ?, ?, ?, 1)", db)
                    .run(.blob(replicaID.raw.bytes), .int(Int64(seqs.lowerBound)), .int(Int64(seqs.upperBound)), .int(Int64(options.wallClock.milliseconds())))
            }
        case .none:
            break
        }
    }

    // MARK: Device names

    /// The tag key a replica's device name is kept under: a tag entity of its own, reserved
    /// (`Notebook.reservedExtraPrefix`), whose name field is a last-writer-wins register that
    /// syncs with everything else.
    public static func deviceNameKey(_ replica: ReplicaID) -> String {
        Notebook.reservedExtraPrefix + "device." + replica.description
    }

    /// Names this device, on every replica it syncs with (`deviceNames()`).
    ///
    /// - Returns: whether anything changed (false: it already had that name).
    /// - Throws: `.invalidArgument` for an empty name, one over 64 characters, or one with control characters.
    @discardableResult
    public func setDeviceName(_ name: String) throws -> Bool {
        let trimmed = name.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty, trimmed.count <= 64, !trimmed.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw StoreError(.invalidArgument, "a device name must be 1 to 64 characters, without control characters ('\(name)' is not)")
        }
        if try deviceNames()[replicaID] == trimmed { return false }
        let key = NoteStore.deviceNameKey(replicaID)
        try edit(requiring: nil, allowingDeleted: false, undo: .none) { _ = try $0.setTagField(key, .name, .string(trimmed)) }
        return true
    }

    /// A tag name as stored: without the surrounding whitespace it is matched without.
    static func trimmedTagName(_ name: String) -> String {
        var scalars = Substring(name).unicodeScalars
        while let first = scalars.first, first.properties.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.properties.isWhitespace { scalars.removeLast() }
        return String(String.UnicodeScalarView(scalars))
    }

    /// Refuses a tag name in the reserved namespace (`crdt-sync.`), where device names live.
    static func checkTagName(_ name: String) throws {
        if Notebook.tagKey(name).hasPrefix(Notebook.reservedExtraPrefix) {
            throw StoreError(.invalidArgument, "tag names that start with \"\(Notebook.reservedExtraPrefix)\" are reserved ('\(name)')")
        }
    }

    /// The device names known here (this device's and those synced from others), by replica.
    ///
    /// Read from the stored tag state when there is one, so that `status` need not load the replica.
    public func deviceNames() throws -> [ReplicaID: String] {
        let prefix = Notebook.reservedExtraPrefix + "device."
        let stored = try read("cannot read the device names") { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT replica_state, tag_state FROM replica WHERE id = 1"))
        }
        var tags: [Tag]
        if let stored, let replicaState = try stored.stored("replica_state", as: Data?.self), let tagState = try stored.stored("tag_state", as: Data?.self),
           let partial = try? Notebook(partialReplica: replicaID, wallClock: options.wallClock,
                                       replicaState: [UInt8](replicaState), tags: [UInt8](tagState), notes: []) {
            tags = partial.tags
        } else {
            tags = try notebook.tags
        }
        var names: [ReplicaID: String] = [:]
        for tag in tags where tag.key.hasPrefix(prefix) {
            if let replica = ReplicaID(hex: tag.key.dropFirst(prefix.count)) { names[replica] = tag.name }
        }
        return names
    }
}

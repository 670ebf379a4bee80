import Crypto
import Foundation
import GRDB
import GRDBSQLite
import NotesCRDT

/// The digest and the status read from what the writes keep (`note_digest`, `replica_state`,
/// `tag_state`), without loading every note and the log.
extension NoteStore {
    /// Up to this many Unicode scalars, a note's digest is worked out at every write of it; a
    /// longer body being typed into leaves it to the next reader of the digest.
    static let eagerDigestLimit = 16_384

    /// Writes (in the caller's transaction) the digest of a note the loaded replica changed, or
    /// NULL for a long body, or drops it for a note the replica does not know.
    func recordDigest(_ id: NoteID, _ db: Database) throws {
        let hex = id.description
        let digest: [UInt8]?
        switch inLoadedNotebook({ $0.noteDigestInput(id, unlessLongerThan: NoteStore.eagerDigestLimit) }) {
        case .unknown:
            try statement("DELETE FROM note_digest WHERE note = ?", db).run(.text(hex))
            return
        case .long: digest = nil
        // The same SHA-256 as NotesCRDT's own, from BoringSSL (SHA extensions): a bootstrap
        // hashes 80,000 notes.
        case .bytes(let input): digest = Array(Crypto.SHA256.hash(data: input))
        }
        try statement("INSERT OR REPLACE INTO note_digest (note, digest) VALUES (?, ?)", db)
            .run(.text(hex), digest.map { SQLValue.blob($0) } ?? .optionalText(nil))
    }

    /// Writes the digest of every note of the loaded (whole) replica, and marks them complete.
    func recordAllDigests(_ db: Database) throws {
        let notebook = loaded!.notebook
        try statement("DELETE FROM note_digest", db).run()
        let insert = try statement("INSERT INTO note_digest (note, digest) VALUES (?, ?)", db)
        for id in notebook.noteIDs {
            try insert.run(.text(id.description), .blob(notebook.noteDigest(id)!))
        }
        try statement("UPDATE replica SET digests_complete = 1 WHERE id = 1", db).run()
    }

    /// The replica-wide state the last write stored (a partial replica without notes), or nil
    /// when none is stored yet.
    func storedReplicaState(_ db: Database) throws -> Notebook? {
        guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT replica_state, tag_state FROM replica WHERE id = 1")),
              let replicaState = try row.stored("replica_state", as: Data?.self), let tagState = try row.stored("tag_state", as: Data?.self) else { return nil }
        return try? Notebook(partialReplica: replicaID, wallClock: options.wallClock, replicaState: [UInt8](replicaState),
                             tags: [UInt8](tagState), notes: [])
    }

    /// The digest from `note_digest`, working out the ones not stored from the notes' stored
    /// states; nil when that is not enough (no complete digests, a note without a stored state).
    func storedDigest(_ db: Database) throws -> String? {
        guard try Bool.fetchOne(db.cachedStatement(sql: "SELECT digests_complete FROM replica WHERE id = 1")) == true,
              let replica = try storedReplicaState(db) else { return nil }
        var digests: [(NoteID, [UInt8])] = []
        var missing = false
        // Through the C API: ten thousand rows through GRDB's generic row decoding cost more
        // than the rest of the command.
        try statement("SELECT note, digest FROM note_digest ORDER BY note", db).forEachRow { handle in
            guard let text = sqlite3_column_text(handle, 0),
                  let raw = Identifier128(hexUTF8: UnsafeBufferPointer(start: text, count: Int(sqlite3_column_bytes(handle, 0)))) else {
                throw StoreError(.corrupt, "a note digest has a bad id")
            }
            let digest = SQLColumn.blob(handle, 1)
            digests.append((NoteID(raw), digest))
            if digest.isEmpty { missing = true }
        }
        if missing {
            for index in digests.indices where digests[index].1.isEmpty {
                let hex = digests[index].0.description
                guard let payload = try Data.fetchOne(db.cachedStatement(sql: "SELECT payload FROM note_state WHERE note = ?"), arguments: [hex]),
                      var one = try? Notebook(partialReplica: replicaID, wallClock: options.wallClock,
                                              replicaState: replica.encodedReplicaState(), tags: replica.encodedTagState(), notes: []) else { return nil }
                guard (try? one.insertNoteState(digests[index].0, [UInt8](payload))) != nil,
                      let digest = one.noteDigest(digests[index].0) else { return nil }
                digests[index].1 = digest
            }
        }
        return replica.digest(noteDigests: digests)
    }

    /// The digest (`Notebook.digest()`), read from the stored note digests when the replica is
    /// not loaded; when they are not complete, the replica is loaded once and they are written.
    func digestLocked() throws -> String {
        if let loaded { return loaded.notebook.digest() }
        if let digest = try read("cannot read the digest", { db in try storedDigest(db) }) { return digest }
        let notebook = try loadedState().notebook
        // Written so that the next reader need not load; a read-only database still gets its digest.
        try? writeTransaction("cannot record the digests") { db in try recordStoredStates(db) }
        return notebook.digest()
    }

    /// The status from what the writes store, or nil when something it needs is not stored.
    func storedStatus() throws -> StoreStatus? {
        guard loaded == nil else { return nil }
        return try read("cannot read the status") { db -> StoreStatus? in
            guard let replica = try storedReplicaState(db), let digest = try storedDigest(db) else { return nil }
            return StoreStatus(replica: replicaID, path: path, versionVector: replica.versionVector,
                               notes: try Int.fetchOne(db, sql: "SELECT count(*) FROM notes") ?? 0,
                               pendingChanges: try Int.fetchOne(db, sql: "SELECT count(*) FROM pending_changes") ?? 0,
                               logRows: try Int.fetchOne(db, sql: "SELECT count(*) FROM changes") ?? 0,
                               snapshotThroughRow: try Int64.fetchOne(db, sql: "SELECT through_row FROM snapshot WHERE id = 1") ?? 0,
                               peers: [], digest: digest)
        }
    }

    /// Every stored note state (`note_state`), for checks.
    package func storedNoteStates() throws -> [(NoteID, [UInt8])] {
        try read("cannot read the note states") { db in
            try Row.fetchAll(db, sql: "SELECT note, payload FROM note_state ORDER BY note").compactMap { row in
                let payload = try row.stored(1, as: Data.self)
                return NoteID(hex: try row.stored(0, as: String.self)).map { ($0, [UInt8](payload)) }
            }
        }
    }
}

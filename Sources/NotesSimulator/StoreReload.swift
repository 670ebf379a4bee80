import NotesStore

/// Makes a store read its state back from its database, as a restarted process would.
///
/// An in-memory database cannot be reopened, so a restart keeps the database and drops everything
/// the store holds in memory: `NoteStore.reload()` reads the CRDT state back from the snapshot,
/// the log rows after it and the pending changes.
enum StoreReload {
    static func reload(_ store: NoteStore) throws {
        try store.reload()
    }
}

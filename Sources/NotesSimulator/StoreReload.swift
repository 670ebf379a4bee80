import NotesCRDT
import NotesStore

/// Makes a store read its state back from its database, as a restarted process would.
///
/// NoteStore has no public "drop what is in memory and reload" (and an in-memory database cannot
/// be reopened), so this uses a documented behaviour instead: a batch that `NoteStore.apply`
/// rejects as malformed leaves no trace in memory either, because the store drops its in-memory
/// notebook and reloads it (snapshot, log rows after it, pending changes) on next use. The batch
/// here is one change that inserts after a character that exists nowhere; it is rejected whole
/// before anything is written.
enum StoreReload {
    private static let nowhere = ReplicaID(Identifier128(high: 0, low: 1))

    static func reload(_ store: NoteStore) throws {
        let malformed = Change(
            replica: nowhere, startSeq: 1, timestamp: Timestamp(milliseconds: 1), dependencies: VersionVector(),
            operations: [.insertText(note: NoteID(Identifier128(high: 0, low: 1)),
                                     origin: OpID(replica: ReplicaID(Identifier128(high: 0, low: 2)), seq: 1), text: ["x"])])
        do {
            try store.apply([malformed])
        } catch {
            return  // Rejected, as it must be: the in-memory state is dropped and read back from the database.
        }
        throw SimulationError("the store accepted a change that inserts after a character that does not exist")
    }
}

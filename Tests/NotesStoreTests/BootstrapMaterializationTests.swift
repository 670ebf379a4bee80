import GRDB
import NotesCRDT
import NotesTestSupport
@testable import NotesStore
import Testing

/// A bootstrap (a transaction re-materializing at least `rebuildIndexThreshold` notes, as many as
/// the store had) takes shortcuts: one marker instead of a search-index record per row, and no
/// reads or deletes when the tables were empty. It must end exactly where re-materializing the
/// same history a few hundred changes at a time ends.
struct BootstrapMaterializationTests {
    static func history() throws -> [Change] {
        var (notebook, changes) = SyntheticWorkload.notebook(seed: 7, notes: NoteStore.rebuildIndexThreshold + 300, operations: 40_000)
        // Deleted and trashed notes too: a deleted note gets a tombstone row, not a note row.
        for id in notebook.noteIDs.prefix(40) {
            if let change = try notebook.setState(id, id.raw.low % 2 == 0 ? .deleted : .trashed) { changes.append(change) }
        }
        return changes
    }

    static func digests(_ store: NoteStore) throws -> [[String]] {
        try store.read("digests") { db in
            try Row.fetchAll(db, sql: "SELECT note, hex(digest) FROM note_digest ORDER BY note").map { [$0[0], $0[1]] }
        }
    }

    static func staleRows(_ store: NoteStore) throws -> [Int64] {
        try store.read("stale") { db in try Int64.fetchAll(db, sql: "SELECT row FROM note_fts_stale ORDER BY row") }
    }

    /// A few hundred changes per transaction: each touches fewer notes than the threshold.
    static func applyInPieces(_ changes: [Change], to store: NoteStore) throws {
        for start in stride(from: 0, to: changes.count, by: 500) {
            try store.apply(Array(changes[start ..< min(start + 500, changes.count)]))
        }
    }

    @Test func aBootstrapEndsWhereSmallAppliesEnd() throws {
        let changes = try Self.history()
        let small = try NoteStore.openInMemory()
        try Self.applyInPieces(changes, to: small)
        #expect(try Self.staleRows(small).first != NoteStore.rebuildIndexMarker, "small applies record rows one by one")

        let whole = try NoteStore.openInMemory()
        try whole.apply(changes)
        #expect(try Self.staleRows(whole) == [NoteStore.rebuildIndexMarker], "a bootstrap records one marker")
        #expect(try MaterializationTests.tables(whole) == MaterializationTests.tables(small))
        #expect(try Self.digests(whole) == Self.digests(small))
        #expect(try whole.digest() == small.digest())
        #expect(try !whole.list(.deleted).isEmpty && whole.list(.deleted).map(\.id) == small.list(.deleted).map(\.id))
        for word in ["alpha", "garden", "tango 1", "zulu"] {
            #expect(try whole.search(word, limit: 50).map(\.note.id) == small.search(word, limit: 50).map(\.note.id), "\(word)")
        }
        #expect(try Self.staleRows(whole).isEmpty, "the search rebuilt the index")
        try MaterializationTests.checkIndex(whole)
        try MaterializationTests.checkIndex(small)
    }

    /// Into a store that already has a note: the index is still rebuilt once, but every note's
    /// rows are looked up as usual (the tables were not empty).
    @Test func aBootstrapIntoANonEmptyStoreKeepsWhatItHad() throws {
        let changes = try Self.history()
        let store = try NoteStore.openInMemory()
        let mine = try store.createNote(title: "mine, from before", body: "kept through the bootstrap", tags: ["work"])
        try store.apply(changes)
        let reference = try NoteStore.openInMemory()
        try Self.applyInPieces(try store.changes(since: VersionVector()), to: reference)
        #expect(try MaterializationTests.tables(store) == MaterializationTests.tables(reference))
        #expect(try Self.digests(store) == Self.digests(reference))
        #expect(try store.search("bootstrap").map(\.note.id) == [mine])
        try MaterializationTests.checkIndex(store)
    }
}

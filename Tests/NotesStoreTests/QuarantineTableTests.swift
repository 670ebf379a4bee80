import Foundation
import GRDB
import NotesCRDT
import NotesStore
import Testing

/// The store's quarantine: a change that does not apply is kept in its own table, in the apply's
/// transaction; the rest of the batch applies; reopening keeps it; a valid change takes its place.
struct QuarantineTableTests {
    static let (x, y, z) = (ReplicaID(Identifier128(high: 7, low: 1)), ReplicaID(Identifier128(high: 7, low: 2)),
                            ReplicaID(Identifier128(high: 7, low: 3)))
    static let note = NoteID(Identifier128(high: 8, low: 1))
    static let time = Timestamp(milliseconds: 1_700_000_000_000)

    static func title(_ author: ReplicaID, _ start: UInt64, _ text: String, after deps: VersionVector = VersionVector()) -> Change {
        Change(replica: author, startSeq: start, timestamp: time.advanced(by: start), dependencies: deps,
               operations: [.setNoteField(note: note, field: .title, value: .string(text)),
                            .setNoteField(note: note, field: .createdAt, value: .int(1))])
    }

    static func insert(_ author: ReplicaID, _ start: UInt64, _ text: String, after deps: VersionVector = VersionVector()) -> Change {
        Change(replica: author, startSeq: start, timestamp: time.advanced(by: start), dependencies: deps,
               operations: [.insertText(note: note, origin: nil, text: InsertedText(text))])
    }

    /// Deletes characters that nobody inserted.
    static func poisoned(_ author: ReplicaID, _ start: UInt64) -> Change {
        Change(replica: author, startSeq: start, timestamp: time.advanced(by: start), dependencies: VersionVector(),
               operations: [.deleteText(note: note, targets: [OpIDRange(replica: ReplicaID(Identifier128(high: 9, low: 9)), seq: 1, count: 3)])])
    }

    /// The case: one poisoned change from X, valid ones from Y and Z in the same batch.
    @Test(arguments: StoreKind.allCases)
    func aPoisonedChangeFromOneAuthorStopsOnlyThatAuthor(_ kind: StoreKind) throws {
        let folder = TemporaryFolder()
        let clock = FixedWallClock(1_700_000_123_000)
        var store = try makeStore(kind, folder, options: StoreOptions(wallClock: clock))
        // Y's seqs 1-2, X's poisoned seq 1 then seqs 3-9 (waiting for seq 2), Z's seqs 1-2.
        let batch = [Self.title(Self.y, 1, "from y"), Self.poisoned(Self.x, 1), Self.insert(Self.x, 3, "x later"),
                     Self.insert(Self.z, 1, "z ", after: VersionVector([Self.y: 2]))]
        let report = try store.apply(batch)
        #expect(report.applied == 2)
        #expect(report.quarantined == 1)
        #expect(report.pending == 1)
        #expect(report.rejected == 0)
        #expect(try store.versionVector == VersionVector([Self.y: 2, Self.z: 2]))
        #expect(try store.note(Self.note)?.title == "from y")
        #expect(try store.note(Self.note)?.body == "z ")
        #expect(try store.pendingChanges == [Self.insert(Self.x, 3, "x later")])
        let expected = [QuarantineEntry(replica: Self.x, startSeq: 1, endSeq: 1, code: "unknownReference",
                                        reason: try #require(try store.notebook.quarantinedChanges.first?.reason.message),
                                        receivedAt: 1_700_000_123_000)]
        #expect(try store.quarantinedChanges() == expected)
        #expect(expected[0].reason.contains("names characters that do not exist"))
        // More of Z keeps flowing; X's later changes keep waiting.
        #expect(try store.apply([Self.insert(Self.z, 3, "more")]).applied == 1)
        #expect(try store.apply([Self.insert(Self.x, 10, "x even later")]).pending == 2)
        let digest = try store.digest()
        if kind == .file {
            // Reopening keeps the quarantine, the waiting changes and the state.
            try store.close()
            store = try NoteStore.open(path: folder.file("notes.db"), options: StoreOptions(wallClock: clock), create: false)
            #expect(try store.quarantinedChanges() == expected)
            #expect(try store.digest() == digest)
            #expect(try store.pendingChanges.count == 2)
        } else {
            try store.reload()
            #expect(try store.quarantinedChanges() == expected)
            #expect(try store.notebook.quarantinedCount == 1)
        }
        // The real change for X's seqs 1-2: applied, the poisoned row deleted, X's later ones released.
        let released = try store.apply([Self.title(Self.x, 1, "from x")])
        #expect(released.applied == 3)
        #expect(released.quarantined == 0)
        #expect(try store.quarantinedChanges().isEmpty)
        #expect(try store.pendingChanges.isEmpty)
        #expect(try store.versionVector[Self.x] == 21)
        if kind == .file {
            try store.close()
            store = try NoteStore.open(path: folder.file("notes.db"), create: false)
            #expect(try store.quarantinedChanges().isEmpty)
            #expect(try store.notebook.quarantinedCount == 0)
        }
    }

    /// A quarantined change survives compaction (the snapshot does not hold it, its table does).
    @Test func theQuarantineSurvivesASnapshot() throws {
        let folder = TemporaryFolder()
        let store = try NoteStore.open(path: folder.file("notes.db"), options: StoreOptions(snapshotInterval: 1))
        try store.apply([Self.poisoned(Self.x, 1), Self.title(Self.y, 1, "y")])
        try store.compact()
        try store.close()
        let reopened = try NoteStore.open(path: folder.file("notes.db"), create: false)
        #expect(try reopened.quarantinedChanges().map(\.replica) == [Self.x])
        #expect(try reopened.notebook.quarantinedChanges.map(\.change) == [Self.poisoned(Self.x, 1)])
    }

    /// Two processes on one file: one quarantines, the other sees it, and writing its own
    /// quarantine does not drop the other's row.
    @Test func anotherConnectionSeesTheQuarantine() throws {
        let folder = TemporaryFolder()
        let first = try NoteStore.open(path: folder.file("notes.db"))
        let second = try NoteStore.open(path: folder.file("notes.db"))
        _ = try second.digest()  // loaded before the first writes
        try first.apply([Self.poisoned(Self.x, 1)])
        try second.apply([Self.poisoned(Self.y, 1)])
        #expect(Set(try first.quarantinedChanges().map(\.replica)) == [Self.x, Self.y])
        try first.refresh()
        #expect(try first.notebook.quarantinedCount == 2)
        #expect(try second.notebook.quarantinedCount == 2)
    }

    /// A database from before the quarantine (migration v3) opens, gets the table, and works.
    @Test func aDatabaseFromBeforeTheQuarantineIsMigrated() throws {
        let folder = TemporaryFolder()
        let path = folder.file("notes.db")
        let store = try NoteStore.open(path: path)
        let id = try store.createNote(title: "kept")
        try store.close()
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            try db.execute(sql: "DROP TABLE quarantined_changes; DELETE FROM grdb_migrations WHERE identifier = 'v4-quarantine'")
        }
        try queue.close()
        let reopened = try NoteStore.open(path: path, create: false)
        #expect(try reopened.note(id)?.title == "kept")
        #expect(try reopened.quarantinedChanges().isEmpty)
        #expect(try reopened.apply([Self.poisoned(Self.x, 1)]).quarantined == 1)
        #expect(try reopened.quarantinedChanges().count == 1)
    }

    /// Changes made by hand that are malformed on their own are refused and counted, not kept,
    /// and do not stop the batch.
    @Test func malformedChangesAreRefusedAndCounted() throws {
        let store = try NoteStore.openInMemory()
        let empty = Change(replica: Self.x, startSeq: 1, timestamp: Self.time, dependencies: VersionVector(), operations: [])
        let pastTheLastSeq = Change(replica: Self.x, startSeq: Change.maxSeq + 1, timestamp: Self.time, dependencies: VersionVector(),
                                    operations: [.setNoteField(note: Self.note, field: .title, value: .null)])
        let report = try store.apply([empty, pastTheLastSeq, Self.title(Self.y, 1, "y")])
        #expect(report.rejected == 2)
        #expect(report.applied == 1)
        #expect(try store.quarantinedChanges().isEmpty)
    }
}

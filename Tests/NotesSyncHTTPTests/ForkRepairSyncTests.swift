import Foundation
import NotesCRDT
import NotesRelay
@testable import NotesStore
import NotesSync
import NotesSyncHTTP
import Testing

/// Issue 18, repair, through the shipped transports: two databases that wrote as one identity
/// (a copy no check caught, or made with a build before the checks), synced L1, L2, L1 through a
/// folder or a relay, end equal with both edits, and a device that joins later gets the same.
struct ForkRepairSyncTests {
    static func diverged() throws -> (first: NoteStore, second: NoteStore, note: NoteID) {
        let database = try InMemoryDatabase(label: "notes.db")
        let first = try NoteStore.open(database, options: StoreOptions(wallClock: FixedWallClock(1_700_000_000_000)))
        let note = try first.createNote(title: "shared", body: "base")
        try first.close()
        let copy = try InMemoryDatabase(copying: database, label: "notes.db")
        let a = try NoteStore.open(database, options: StoreOptions(wallClock: FixedWallClock(1_700_000_100_000)))
        let b = try NoteStore.open(copy, options: StoreOptions(wallClock: FixedWallClock(1_700_000_200_000)))
        #expect(a.replicaID == b.replicaID)
        _ = try a.appendText(note, " (edited on L1)")
        _ = try b.appendText(note, " [typed on L2]")
        _ = try b.createNote(title: "only on L2", body: "new")
        return (a, b, note)
    }

    static func expectConverged(_ stores: [NoteStore], note: NoteID) throws {
        let digests = try stores.map { try $0.digest() }
        #expect(Set(digests).count == 1, "\(digests)")
        for store in stores {
            let body = try #require(try store.note(note)?.body)
            #expect(body.contains("(edited on L1)") && body.contains("[typed on L2]"), "\(body)")
            #expect(try store.list().contains { $0.title == "only on L2" })
        }
    }

    @Test func throughAFolder() async throws {
        let (l1, l2, note) = try Self.diverged()
        let files = InMemoryFileSystem()
        try files.createDirectory("/shared")
        let folder = FolderTransport(folder: "/shared", fileSystem: files)
        let engine = SyncEngine(retry: RetryPolicy(maxAttempts: 1))
        _ = try await engine.sync(l1, over: folder)
        let second = try await engine.sync(l2, over: folder)
        #expect(second.forksRepaired == 1)
        _ = try await engine.sync(l1, over: folder)
        try Self.expectConverged([l1, l2], note: note)
        // A third device reading the folder gets the same, whatever it met first.
        let l3 = try NoteStore.openInMemory()
        _ = try await engine.sync(l3, over: folder)
        try Self.expectConverged([l1, l2, l3], note: note)
    }

    @Test func throughARelay() async throws {
        try await withRelay { relay, client in
            let (l1, l2, note) = try Self.diverged()
            let transport = try RelayTransport(url: relay.url, space: "notes", token: notesToken, http: client)
            let engine = SyncEngine(retry: RetryPolicy(maxAttempts: 1))
            _ = try await engine.sync(l1, over: transport)
            // By version vectors L2 lacks nothing and the relay lacks only L2's tail: the check
            // takes back what the relay holds in L2's name, which shows the fork.
            let second = try await engine.sync(l2, over: transport)
            #expect(second.forksRepaired == 1)
            #expect(second.checkedChanges > 0)
            _ = try await engine.sync(l1, over: transport)
            try Self.expectConverged([l1, l2], note: note)
            let l3 = try NoteStore.openInMemory()
            _ = try await engine.sync(l3, over: transport)
            try Self.expectConverged([l1, l2, l3], note: note)
            // Nothing more to check, and nothing more to take: a quiet sync.
            let again = try await engine.sync(l2, over: transport)
            #expect(again.checkedChanges == 0 && again.applied == 0 && again.forksRepaired == 0, "\(again)")
        }
    }
}

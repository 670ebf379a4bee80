import Foundation
import NotesCRDT
@testable import NotesRelay
import NotesStore
import NotesSync
import Testing

func temporaryFolder() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("crdt-sync-relay-tests-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// The records of a replica's changes, as the relay service makes them.
func records(_ changes: [Change]) -> [RelayRecord] {
    changes.map { RelayRecord(author: $0.replica, startSeq: $0.startSeq, endSeq: $0.endSeq, payload: ChangeCodec.encode([$0])) }
}

/// The rules every relay storage keeps, against each backend (SQLite in memory and in a file;
/// PostgreSQL when configured); then what is SQLite's own.
struct SQLiteRelayStorageTests {
    @Test(arguments: RelayBackend.available)
    func storesEachRecordOnceAndRefusesGaps(_ backend: RelayBackend) async throws {
        try await backend.with { storage in
            let name = backend.rawValue
            let s = uniqueSpace()
            var a = Notebook(replicaID: .random(), wallClock: FixedWallClock(1_700_000_000_000))
            let (id, created) = a.createNote(title: "t", body: "0123456789")
            let all = [created, try #require(try a.insertText(id, at: 10, "abcdef")), try #require(try a.setPinned(id, true))]
            #expect(try await storage.append(space: s, records: records(Array(all.prefix(1)))) == [0], "\(name)")
            #expect(try await storage.append(space: s, records: records(all)) == Array(1 ..< all.count), "\(name)")
            #expect(try await storage.append(space: s, records: records(all)).isEmpty, "\(name)")
            let status = try await storage.status(space: s)
            #expect(status.changes == all.count, "\(name)")
            #expect(status.version == a.versionVector, "\(name)")
            #expect(status.operations == a.versionVector[a.replicaID], "\(name)")
            // A record that would leave a gap refuses the whole append, and nothing of it is stored.
            var b = Notebook(replicaID: .random(), wallClock: FixedWallClock(1_700_000_000_000))
            let (bid, _) = b.createNote(title: "b")
            let gap = records([try #require(try b.setPinned(bid, true))])
            await #expect(throws: RelayStorageError.self, "\(name)") {
                _ = try await storage.append(space: s, records: records(Array(all.prefix(0))) + gap)
            }
            #expect(try await storage.status(space: s).version[b.replicaID] == 0, "\(name)")
            // Spaces are separate.
            #expect(try await storage.status(space: uniqueSpace("other")).changes == 0, "\(name)")
        }
    }

    @Test(arguments: RelayBackend.available)
    func pagesAreCausalPrefixesInArrivalOrder(_ backend: RelayBackend) async throws {
        try await backend.with { storage in
            let name = backend.rawValue
            let s = uniqueSpace()
            // Three authors, interleaved arrivals.
            let stores = try (0 ..< 3).map { _ in try NoteStore.openInMemory() }
            var arrivals: [Change] = []
            for round in 0 ..< 4 {
                for store in stores {
                    let before = try store.versionVector
                    _ = try store.createNote(title: "round \(round)")
                    let new = try store.changes(since: before)
                    arrivals += new
                    _ = try await storage.append(space: s, records: records(new))
                }
            }
            var cursor = VersionVector()
            var seen: [RelayRecord] = []
            var pages = 0
            while true {
                let page = try await storage.page(space: s, after: cursor, limits: RelayPageLimits(maxChanges: 5))
                pages += 1
                for stored in page.records {
                    #expect(stored.record.startSeq == cursor[stored.record.author] + 1, "\(name): each author's part is contiguous")
                    cursor[stored.record.author] = stored.record.endSeq
                    seen.append(stored.record)
                }
                #expect(zip(page.records, page.records.dropFirst()).allSatisfy { $0.arrival < $1.arrival }, "\(name)")
                if !page.more { break }
                #expect(!page.records.isEmpty, "\(name)")
            }
            #expect(pages == 3, "\(name)")  // 12 records, 5 per page
            #expect(seen.map(\.startSeq) == arrivals.map(\.startSeq), "\(name)")
            #expect(seen.map(\.author) == arrivals.map(\.replica), "\(name)")
        }
    }

    @Test func refusesAFileThatIsNotARelayStore() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("replica.db").path
        _ = try NoteStore.open(path: path)
        #expect(throws: RelayStorageError.self) { _ = try SQLiteRelayStorage(path: path) }
    }

    @Test func relayIdentityIsStablePerFile() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("r.sqlite").path
        let first = try SQLiteRelayStorage(path: path)
        let again = try SQLiteRelayStorage(path: path)
        #expect(first.relayID == again.relayID)
        #expect(try SQLiteRelayStorage.inMemory().relayID != first.relayID)
        #expect(try SQLiteRelayStorage.inMemory(relayID: Array(repeating: 7, count: 16)).relayID == Array(repeating: 7, count: 16))
    }
}

import Foundation
import NotesCRDT
import NotesStore
import NotesSync
@testable import NotesSyncHTTP
import Testing

/// The relay's storage without HTTP, in memory and in a file.
struct RelayStoreTests {
    static func makeStores() throws -> [(String, RelayStore)] {
        let folder = try temporaryFolder()
        return [("memory", try RelayStore.inMemory()), ("file", try RelayStore(path: folder.appendingPathComponent("r.sqlite").path))]
    }

    @Test func storesEachChangeOnceAndTrimsStraddlers() async throws {
        for (name, relay) in try Self.makeStores() {
            let a = try NoteStore.openInMemory()
            let id = try a.createNote(title: "t", body: "0123456789")
            try a.appendText(id, "abcdef")
            let all = try a.changes(since: VersionVector())
            let big = try #require(all.first { $0.seqCount > 5 })
            // What comes before the big change, then the whole history.
            var firstPart = VersionVector()
            firstPart[a.replicaID] = big.startSeq + 2
            let prefixChanges = all.prefix { $0.endSeq < big.startSeq }
            _ = try await relay.exchange(space: "s", incoming: Array(prefixChanges), clientVersion: VersionVector())
            let full = try await relay.exchange(space: "s", incoming: all, clientVersion: try a.versionVector)
            #expect(full.changes.isEmpty, "\(name)")
            #expect(full.version == (try a.versionVector), "\(name)")
            let again = try await relay.exchange(space: "s", incoming: all, clientVersion: try a.versionVector)
            #expect(again.stored == 0, "\(name)")
            let status = try await relay.status(space: "s")
            #expect(status.changes == all.count, "\(name)")
            #expect(status.operations == (try a.versionVector).totalOperations, "\(name)")
            // A client in the middle of the big change gets the rest of it only.
            let partial = try await relay.exchange(space: "s", incoming: [], clientVersion: firstPart)
            #expect(partial.changes.first?.startSeq == big.startSeq + 3, "\(name)")
            #expect(partial.changes.first?.replica == a.replicaID, "\(name)")
            // A change that would leave a gap is not stored.
            let b = try NoteStore.openInMemory()
            let bid = try b.createNote(title: "b")
            try b.appendText(bid, "x")
            let bChanges = try b.changes(since: VersionVector())
            let gap = try await relay.exchange(space: "s", incoming: Array(bChanges.dropFirst()), clientVersion: VersionVector())
            #expect(gap.stored == 0, "\(name)")
            #expect(gap.version[b.replicaID] == 0, "\(name)")
            // Spaces are separate.
            #expect(try await relay.status(space: "other").changes == 0, "\(name)")
        }
    }

    @Test func refusesAFileThatIsNotARelayStore() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("replica.db").path
        _ = try NoteStore.open(path: path)
        #expect(throws: SyncError.self) { _ = try RelayStore(path: path) }
    }

    @Test func relayIdentityIsStablePerFileAndSpace() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("r.sqlite").path
        let first = try RelayStore(path: path)
        let again = try RelayStore(path: path)
        #expect(first.relayReplica(for: "a") == again.relayReplica(for: "a"))
        #expect(first.relayReplica(for: "a") != first.relayReplica(for: "b"))
    }
}

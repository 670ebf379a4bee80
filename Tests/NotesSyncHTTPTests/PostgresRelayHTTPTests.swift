import Foundation
import NotesCRDT
import NotesRelay
import NotesRelayPostgres
import NotesRelayServer
import NotesStore
import NotesSync
@testable import NotesSyncHTTP
import Testing

/// Two relay servers (two instances) over one PostgreSQL database, carried over HTTP: replicas
/// syncing through either converge, and each change is held once.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["CRDT_SYNC_TEST_POSTGRES"].map { !$0.isEmpty } ?? false,
                "set CRDT_SYNC_TEST_POSTGRES to a PostgreSQL URL (Scripts/with-postgres.sh does) to test the relay over PostgreSQL"))
struct PostgresRelayHTTPTests {
    @Test func replicasSyncingThroughTwoInstancesConverge() async throws {
        let location = try PostgresLocation(url: ProcessInfo.processInfo.environment["CRDT_SYNC_TEST_POSTGRES"] ?? "")
        let space = "http-\(UUID().uuidString.lowercased())"
        let token = "tok-\(UUID().uuidString)"
        var relays: [RunningRelay] = []
        var storages: [PostgresRelayStorage] = []
        for _ in 0 ..< 2 {
            let storage = try await PostgresRelayStorage.connect(location, maxConnections: 4)
            storages.append(storage)
            let service = RelayService(storage: storage, tokens: try RelayTokens([(space: space, token: token)]))
            relays.append(try await RelayServer(service: service, configuration: RelayServerConfiguration(host: "127.0.0.1", port: 0),
                                                logger: quietLogger).start())
        }
        let client = HTTPRelayClient()
        let engine = SyncEngine(retry: RetryPolicy(maxAttempts: 1))
        let result: Result<Void, any Error>
        do {
            let transports = try relays.map { try client.transport(url: $0.url, space: space, token: token) }
            let stores = try (0 ..< 4).map { _ in try NoteStore.openInMemory() }
            let id = try stores[0].createNote(title: "shared", body: "start")
            _ = try await engine.sync(stores[0], over: transports[0])
            for (index, store) in stores.enumerated().dropFirst() { _ = try await engine.sync(store, over: transports[index % 2]) }
            // Concurrent edits, each replica syncing through alternate instances at the same time, twice.
            for (index, store) in stores.enumerated() { _ = try store.appendText(id, " \(index)") }
            for round in 0 ..< 2 {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (index, store) in stores.enumerated() {
                        group.addTask { _ = try await engine.sync(store, over: transports[(index + round) % 2]) }
                    }
                    try await group.waitForAll()
                }
            }
            for (index, store) in stores.enumerated() { _ = try await engine.sync(store, over: transports[index % 2]) }
            #expect(Set(try stores.map { try $0.digest() }).count == 1)
            let body = try #require(try stores[3].note(id)?.body)
            for index in 0 ..< 4 { #expect(body.contains(" \(index)")) }
            // Both instances answer with the same vector: the replicas' own.
            let expected = try stores[0].versionVector
            for transport in transports { #expect(try await transport.status().versionVector() == expected) }
            result = .success(())
        } catch {
            result = .failure(error)
        }
        try? await client.shutdown()
        for relay in relays { await relay.stop() }
        for storage in storages { await storage.close() }
        try result.get()
    }
}

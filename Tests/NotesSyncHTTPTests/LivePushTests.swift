import Foundation
import NotesCRDT
import NotesRelay
import NotesRelayServer
import NotesStore
import NotesSync
@testable import NotesSyncHTTP
import Testing

/// Live push over a real relay, and `SyncEngine.watch` over a relay and over a folder.
struct LivePushTests {
    @Test func aWatchingClientLearnsOfAnotherClientsUpload() async throws {
        try await withRelay { relay, client in
            let transport = try client.transport(url: relay.url, space: "notes", token: notesToken)
            let a = try NoteStore.openInMemory()
            let b = try NoteStore.openInMemory()
            let bVersion = try b.versionVector
            let waiting = Task { try await transport.waitForChanges(after: bVersion, seconds: 25) }
            _ = try a.createNote(title: "pushed", body: "over http")
            _ = try await SyncEngine().sync(a, over: transport)
            #expect(try await waiting.value == a.versionVector)
        }
    }

    @Test func aLongPollOutlastsTheIdleTimeout() async throws {
        // An idle timeout shorter than the wait: a long poll in progress must not be cut by it.
        try await withRelay(server: RelayServerConfiguration(idleTimeoutSeconds: 1)) { relay, client in
            let transport = try client.transport(url: relay.url, space: "notes", token: notesToken)
            let b = try NoteStore.openInMemory()
            #expect(try await transport.waitForChanges(after: b.versionVector, seconds: 3) == nil)
        }
    }

    @Test func watchYieldsAReportAfterAnotherReplicasChangeThroughARelay() async throws {
        try await withRelay { relay, client in
            let transport = try client.transport(url: relay.url, space: "notes", token: notesToken)
            let a = try NoteStore.openInMemory()
            let b = try NoteStore.openInMemory()
            let id = try a.createNote(title: "from a", body: "watched")
            var events = SyncEngine().watch(b, over: transport).makeAsyncIterator()
            guard case .synced(let first)? = try await events.next() else { Issue.record("no first sync"); return }
            #expect(first.receivedChanges == 0)
            _ = try await SyncEngine().sync(a, over: transport)
            guard case .synced(let pushed)? = try await events.next() else { Issue.record("no pushed sync"); return }
            #expect(pushed.applied == 1)
            #expect(try b.note(id)?.title == "from a")
        }
    }

    @Test func watchPollsAFolderAndEndsWhenCancelled() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let transport = FolderTransport(folder: folder.path)
        let a = try NoteStore.openInMemory()
        let b = try NoteStore.openInMemory()
        let id = try a.createNote(title: "from a", body: "through a folder")
        let received = Task {
            for try await event in SyncEngine().watch(b, over: transport, options: SyncWatchOptions(pollMilliseconds: 20)) {
                if case .synced(let report) = event, report.applied > 0 { return report.applied }
            }
            return 0
        }
        _ = try await SyncEngine().sync(a, over: transport)
        #expect(try await received.value == 1)
        #expect(try b.note(id)?.title == "from a")

        // Cancelling the consuming task ends the sequence (it would otherwise poll for ever).
        let watching = Task {
            var syncs = 0
            for try await event in SyncEngine().watch(b, over: transport, options: SyncWatchOptions(pollMilliseconds: 20)) {
                if case .synced = event { syncs += 1 }
            }
            return syncs
        }
        watching.cancel()
        _ = try await watching.value
    }

    @Test func watchReportsAnUnreachableRelayAndRetries() async throws {
        let client = HTTPRelayClient()
        defer { Task { try? await client.shutdown() } }
        // A port nothing listens on (bound and closed by a relay just stopped).
        let url = try await withRelay { relay, _ in relay.url }
        let transport = try client.transport(url: url, space: "notes", token: notesToken)
        let b = try NoteStore.openInMemory()
        let engine = SyncEngine(retry: RetryPolicy(maxAttempts: 1), sleep: { _ in try await Task.sleep(for: .milliseconds(1)) })
        var failures = 0
        for try await event in engine.watch(b, over: transport) {
            guard case .failed(let error, _) = event else { Issue.record("synced with no relay"); break }
            #expect(error.code == .transient)
            failures += 1
            if failures == 2 { break }
        }
        #expect(failures == 2)
    }
}

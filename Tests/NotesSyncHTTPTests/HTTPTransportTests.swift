import AsyncHTTPClient
import Foundation
import NotesCRDT
import NotesStore
import NotesRelay
import NotesRelayServer
@testable import NotesSync
@testable import NotesSyncHTTP
import Testing

/// Replicas syncing through a live relay with the real engine and the HTTP transport.
struct HTTPTransportTests {
    let engine = SyncEngine(retry: RetryPolicy(maxAttempts: 1))

    @Test func threeReplicasConvergeThroughARelay() async throws {
        try await withRelay { relay, client in
            let transport = try client.transport(url: relay.url, space: "notes", token: notesToken)
            let a = try NoteStore.openInMemory()
            let b = try NoteStore.openInMemory()
            let c = try NoteStore.openInMemory()
            let id = try a.createNote(title: "Plan", body: "one two three")
            for store in [a, b, c] { _ = try await engine.sync(store, over: transport) }
            #expect(try b.digest() == a.digest())
            #expect(try c.digest() == a.digest())
            // Concurrent edits while apart, then all three sync at the same time, twice.
            try a.insertText(id, at: 4, "AAA ")
            try b.insertText(id, at: 4, "BBB ")
            try c.appendText(id, " four")
            try a.setTitle(id, "Plan v2")
            try b.setPinned(id, true)
            try c.setTag(id, "work", member: true)
            let other = try b.createNote(title: "From b", body: "b's own note")
            for _ in 0 ..< 2 {
                async let x = engine.sync(a, over: transport)
                async let y = engine.sync(b, over: transport)
                async let z = engine.sync(c, over: transport)
                _ = try await (x, y, z)
            }
            for store in [a, b, c] { _ = try await engine.sync(store, over: transport) }
            let digests = try [a, b, c].map { try $0.digest() }
            #expect(Set(digests).count == 1)
            let note = try #require(try c.notebook.note(id))
            #expect(note.title == "Plan v2")
            #expect(note.pinned)
            #expect(note.tags == ["work"])
            #expect(note.body.contains("AAA "))
            #expect(note.body.contains("BBB "))
            #expect(note.body.hasSuffix(" four"))
            #expect(try a.note(other)?.title == "From b")
            // The relay holds exactly what the replicas have, each change once.
            let status = try await transport.status()
            #expect(try status.versionVector() == a.versionVector)
            // Each replica recorded the relay (space) as a peer.
            #expect(try a.peers().count == 1)
            // Another space sees none of it.
            let team = try client.transport(url: relay.url, space: "team", token: teamToken)
            #expect(try await team.status().changes == 0)
        }
    }

    @Test func sameBundleTwiceIsStoredOnce() async throws {
        try await withRelay { relay, client in
            let transport = try client.transport(url: relay.url, space: "notes", token: notesToken)
            let a = try NoteStore.openInMemory()
            let id = try a.createNote(title: "once")
            try a.appendText(id, "hello")
            let bundle = SyncBundle(sender: a.replicaID, senderVersion: try a.versionVector, changes: try a.changes(since: VersionVector()))
            let first = try await transport.exchange(bundle)
            let second = try await transport.exchange(bundle)
            #expect(first.stored == bundle.changes.count)
            #expect(second.stored == 0)
            #expect(first.bundle.changes.isEmpty)  // nothing a lacks
            let status = try await transport.status()
            #expect(status.changes == 1)  // one record: the author's changes of the request
            #expect(try status.versionVector() == a.versionVector)
            // A bundle that overlaps what is stored (from an older vector) stores only the new part.
            try a.appendText(id, " world")
            let overlapping = SyncBundle(sender: a.replicaID, senderVersion: try a.versionVector, changes: try a.changes(since: VersionVector()))
            let held = try await transport.status().versionVector()
            let third = try await transport.exchange(overlapping)
            // Only what goes past the relay's vector is stored (of a change that straddles it, when
            // the log joined the typing into the change the relay has part of, only its new part);
            // what the relay held already is not stored again.
            // (`stored` counts the changes of the stored record, the straddler among them.)
            #expect(third.stored >= overlapping.changes.filter { $0.endSeq > held[a.replicaID] }.count)
            #expect(third.stored >= 1 && third.stored <= overlapping.changes.count)
            #expect(try await transport.status().versionVector() == a.versionVector)
        }
    }

    /// `count` replicas that each made a note and synced it (so many changes of many authors).
    func crowd(_ count: Int, through transport: RelayTransport) async throws -> [NoteStore] {
        var stores: [NoteStore] = []
        for i in 0 ..< count {
            let store = try NoteStore.openInMemory()
            let id = try store.createNote(title: "note \(i)", body: "body of \(i)")
            try store.setPinned(id, i % 2 == 0)
            _ = try await engine.sync(store, over: transport)
            stores.append(store)
        }
        return stores
    }

    @Test func historyLargerThanOnePage() async throws {
        try await withRelay(page: RelayPageLimits(maxChanges: 7, maxBytes: 1 << 20)) { relay, client in
            let transport = try client.transport(url: relay.url, space: "notes", token: notesToken)
            let others = try await crowd(12, through: transport)
            let a = others[0]
            _ = try await engine.sync(a, over: transport)
            let status = try await transport.status()
            // Each replica uploaded its changes (a note made and pinned) in one request: one
            // record each, 12 in all, more than one page of 7.
            #expect(status.changes == 12)

            // One request gets one page, and says there is more.
            let b = try NoteStore.openInMemory()
            let page = try await transport.exchange(SyncBundle(sender: b.replicaID, senderVersion: VersionVector(), changes: []))
            #expect(page.more)
            #expect(Set(page.bundle.changes.map(\.replica)).count == 7)
            #expect(page.bundle.senderVersion == (try a.versionVector))

            // The transport pages until the relay says no more.
            let report = try await engine.sync(b, over: transport)
            #expect(report.receivedBundles == (status.changes + 6) / 7)
            #expect(report.pending == 0)
            #expect(try b.digest() == a.digest())
            #expect(try b.versionVector == a.versionVector)
        }
    }

    @Test func pagesAreCutByBytesToo() async throws {
        try await withRelay(page: RelayPageLimits(maxChanges: 1000, maxBytes: 200)) { relay, client in
            let transport = try client.transport(url: relay.url, space: "notes", token: notesToken)
            let others = try await crowd(6, through: transport)
            _ = try await engine.sync(others[0], over: transport)
            let b = try NoteStore.openInMemory()
            let page = try await transport.exchange(SyncBundle(sender: b.replicaID, senderVersion: VersionVector(), changes: []))
            #expect(page.more)
            #expect(page.bundle.changes.count < 12)
            _ = try await engine.sync(b, over: transport)
            #expect(try b.digest() == others[0].digest())
        }
    }

    /// A client that dies after applying only part of what it received syncs again from its own
    /// vector and ends up complete.
    @Test func interruptedClientResumes() async throws {
        try await withRelay(page: RelayPageLimits(maxChanges: 5)) { relay, client in
            let transport = try client.transport(url: relay.url, space: "notes", token: notesToken)
            let others = try await crowd(8, through: transport)
            let a = others[0]
            let id = try a.createNote(title: "resume")
            for i in 0 ..< 25 { try a.appendText(id, "\(i),") }
            _ = try await engine.sync(a, over: transport)

            let b = try NoteStore.openInMemory()
            try b.createNote(title: "b was here")
            // b posts its changes, gets a first page, applies only part of it, and "dies".
            let first = try await transport.exchange(SyncBundle(sender: b.replicaID, senderVersion: try b.versionVector,
                                                                changes: try b.changes(since: VersionVector())))
            #expect(first.stored == 1)
            #expect(first.more)
            try b.apply(Array(first.bundle.changes.prefix(3)))
            // Restarted, it syncs normally: nothing is lost, nothing is applied twice. (The change
            // it posted outside a sync is taken back once to check it is b's as b made it: the
            // only repeat.)
            let report = try await engine.sync(b, over: transport)
            #expect(report.sentChanges == 0)
            #expect(report.checkedChanges == 1 && report.duplicates == 1, "\(report)")
            #expect(report.pending == 0)
            _ = try await engine.sync(a, over: transport)
            #expect(try b.digest() == a.digest())

            // A change that straddles the client's vector comes back trimmed to what it lacks.
            let c = try NoteStore.openInMemory()
            let whole = try a.changes(since: VersionVector())
            let straddled = try #require(whole.first { $0.seqCount > 2 })
            var vector = VersionVector()
            vector[straddled.replica] = straddled.startSeq  // as if c had the first op only
            let reply = try await transport.exchange(SyncBundle(sender: c.replicaID, senderVersion: vector, changes: []))
            let firstOfAuthor = try #require(reply.bundle.changes.first { $0.replica == straddled.replica })
            #expect(firstOfAuthor.startSeq == straddled.startSeq + 1)
        }
    }

    /// The relay's file survives a restart with nothing lost, and a client whose sync meets a
    /// stopped relay retries (reporting each retry) until the relay is back.
    @Test func relayRestartLosesNothing() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("relay.sqlite").path
        let a = try NoteStore.openInMemory()
        let b = try NoteStore.openInMemory()
        let id = try a.createNote(title: "durable", body: "before the restart")
        let port = try await withRelay(store: SQLiteRelayStorage(path: path)) { relay, client in
            let transport = try client.transport(url: relay.url, space: "notes", token: notesToken)
            _ = try await engine.sync(a, over: transport)
            return relay.port
        }
        // The relay is down: a sync retries with backoff, and goes through once it is back.
        try a.appendText(id, " and after")
        let retries = Counter()
        let client = HTTPRelayClient()
        let transport = try client.transport(url: "http://127.0.0.1:\(port)", space: "notes", token: notesToken)
        let patient = SyncEngine(retry: RetryPolicy(maxAttempts: 30, baseDelayMilliseconds: 20, maxDelayMilliseconds: 100),
                                 onRetry: { _, _, error in
                                     #expect(error.code == .transient)
                                     retries.increment()
                                 })
        let pending = Task { try await patient.sync(a, over: transport) }
        while retries.value < 2 { try await Task.sleep(nanoseconds: 10_000_000) }
        let report = try await withRelay(store: SQLiteRelayStorage(path: path), port: port) { relay, relayClient in
            let report = try await pending.value
            let other = try relayClient.transport(url: relay.url, space: "notes", token: notesToken)
            _ = try await engine.sync(b, over: other)
            return report
        }
        try? await client.shutdown()
        #expect(report.retries >= 2)
        #expect(try b.digest() == a.digest())
        #expect(try b.note(id)?.body == "before the restart and after")
        // Opened once more: everything is there.
        let reopened = try SQLiteRelayStorage(path: path)
        let status = try await reopened.status(space: "notes")
        #expect(status.version == (try a.versionVector))
    }
}

/// The transport's request economy, and a relay that lost its data.
struct HTTPTransportCacheTests {
    let engine = SyncEngine(retry: RetryPolicy(maxAttempts: 1))

    @Test func aSyncIsTwoRequestsAndKeepsNoState() async throws {
        try await withRelay { relay, client in
            let counter = CountingHTTP(base: client)
            let transport = try RelayTransport(url: relay.url, space: "notes", token: notesToken, http: counter)
            let a = try NoteStore.openInMemory()
            let id = try a.createNote(title: "one")
            _ = try await engine.sync(a, over: transport)
            #expect(counter.count == 2)  // status, then the POST with the changes, answered with what a lacks
            try a.appendText(id, "more")
            let report = try await engine.sync(a, over: transport)
            #expect(report.sentChanges == 1)
            #expect(counter.count == 4)
            _ = try await engine.sync(a, over: transport)
            #expect(counter.count == 6)  // nothing to send: status, then an empty POST
        }
    }

    /// A relay that lost what it had (restored from an old backup, say) is filled again by the
    /// next syncs, although the transport remembered a larger vector.
    @Test func aRelayThatLostDataIsRefilled() async throws {
        let a = try NoteStore.openInMemory()
        let id = try a.createNote(title: "kept by the replica", body: "text")
        let client = HTTPRelayClient()
        defer { Task { try? await client.shutdown() } }
        let port = try await withRelay { relay, _ in relay.port }
        let transport = try client.transport(url: "http://127.0.0.1:\(port)", space: "notes", token: notesToken)
        try await withRelay(port: port) { _, _ in
            _ = try await engine.sync(a, over: transport)
            #expect(try await transport.status().changes > 0)
        }
        try await withRelay(port: port) { _, _ in  // a new, empty store on the same port
            _ = try await engine.sync(a, over: transport)
            try a.appendText(id, " and more")
            _ = try await engine.sync(a, over: transport)
            let b = try NoteStore.openInMemory()
            _ = try await engine.sync(b, over: transport)
            #expect(try b.digest() == a.digest())
        }
    }
}

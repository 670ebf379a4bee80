import Foundation
import NotesCRDT
@testable import NotesSync
import NotesStore
import NotesTestSupport
import Testing

/// A sync's receive applied page by page (`SyncEngine`, `SyncSession.arrived`): the outcome is
/// that of one batch, whatever the page size and the order the relay took changes in, and a
/// transport that fails part way leaves a consistent store that the next sync completes.
struct StreamedReceiveTests {
    /// A relay over a scripted HTTP: it holds `arrival` (each author's changes in seq order,
    /// interleaved as they arrived) and answers pages of at most `pageSize` changes.
    final class ScriptedRelay: HTTPCalling, @unchecked Sendable {
        let lock = NSLock()
        let arrival: [Change]
        let pageSize: Int
        let relay = ReplicaID.random()
        /// Asked senderVersions of the POSTs, in order.
        var asked: [VersionVector] = []
        /// Answers the POST with this index (from 0) with this status once, instead of a page.
        var failing: (post: Int, status: Int)?

        init(arrival: [Change], pageSize: Int) {
            self.arrival = arrival
            self.pageSize = pageSize
        }

        var version: VersionVector {
            var version = VersionVector()
            for change in arrival where change.endSeq > version[change.replica] { version[change.replica] = change.endSeq }
            return version
        }

        func call(_ request: HTTPCallRequest, maxResponseBytes: Int) async throws -> HTTPCallResponse {
            if request.method == "GET" {
                return HTTPCallResponse(status: 200, headers: ["Content-Type": RelayProtocol.bundleContentType],
                                        body: SyncBundle(sender: relay, senderVersion: version, changes: []).encoded())
            }
            let cursor = try SyncBundle.decode(request.body).senderVersion
            let index: Int = lock.withLock { asked.append(cursor); return asked.count - 1 }
            if let failing, failing.post == index {
                self.failing = nil
                return HTTPCallResponse(status: failing.status, headers: [:], body: Array(#"{"error":"scripted failure"}"#.utf8))
            }
            let rest = arrival.filter { $0.endSeq > cursor[$0.replica] }
            return HTTPCallResponse(status: 200, headers: [RelayProtocol.moreHeader: rest.count > pageSize ? "1" : "0",
                                                           "Content-Type": RelayProtocol.bundleContentType],
                                    body: SyncBundle(sender: relay, senderVersion: version, changes: Array(rest.prefix(pageSize))).encoded())
        }
    }

    /// Three authors editing shared notes, merging now and then (so that changes depend on other
    /// authors'): every change as made, each author's in seq order.
    static func history(seed: UInt64) throws -> [Change] {
        try MixedHistory.threeAuthors(seed: seed, steps: 150, thirdEdit: .pin)
    }

    /// The changes interleaved at random, each author's kept in seq order (what a relay may hold).
    static func arrival(_ changes: [Change], seed: UInt64) -> [Change] {
        var rng = SplitMix64(seed: seed)
        var queues = Dictionary(grouping: changes, by: \.replica).sorted { $0.key < $1.key }
            .map { $0.value.sorted { $0.startSeq < $1.startSeq }[...] }
        var result: [Change] = []
        while !queues.isEmpty {
            let q = Int(rng.next() % UInt64(queues.count))
            result.append(queues[q].popFirst()!)
            if queues[q].isEmpty { queues.remove(at: q) }
        }
        return result
    }

    /// What a replica shows: digest, version vector, notes, waiting changes.
    struct Outcome: Equatable {
        var digest: String
        var version: VersionVector
        var notes: [StoredNote]
        var pending: [Change]

        init(_ store: NoteStore) throws {
            digest = try store.digest()
            version = try store.versionVector
            // When this device wrote a note's row is its own clock's business: left out.
            notes = try store.list(.all, includeBody: true).map { var note = $0; note.changedHereAt = 0; return note }
            pending = try store.pendingChanges.sorted { ($0.replica, $0.startSeq) < ($1.replica, $1.startSeq) }
        }
    }

    static func oneBatch(_ changes: [Change]) throws -> Outcome {
        let store = try NoteStore.openInMemory()
        try store.apply(changes)
        return try Outcome(store)
    }

    /// An engine that commits every `changesPerTransaction` changes (1: every page; nil: the
    /// whole receive in one transaction).
    static func engine(_ changesPerTransaction: Int?) -> SyncEngine {
        var engine = SyncEngine(sleep: { _ in }, random: { 0 })
        engine.changesPerTransaction = changesPerTransaction
        return engine
    }

    @Test(arguments: [(UInt64(1), 1, 1), (2, 7, 1), (3, 50, 1), (4, 1000, 1), (5, 7, 30), (6, 3, 1000),
                      (7, 1, nil), (8, 7, nil), (9, 50, nil)] as [(UInt64, Int, Int?)])
    func aStreamedPullEqualsOneBatch(seed: UInt64, pageSize: Int, changesPerTransaction: Int?) async throws {
        let changes = try Self.history(seed: seed)
        let expected = try Self.oneBatch(changes)
        var outcomes: [Outcome] = []
        for order in 0 ..< 3 as Range<UInt64> {
            let relay = ScriptedRelay(arrival: Self.arrival(changes, seed: seed &* 31 &+ order), pageSize: pageSize)
            let store = try NoteStore.openInMemory()
            let report = try await Self.engine(changesPerTransaction).sync(store, over: RelayTransport(url: "http://relay", space: "s", token: "t", http: relay))
            #expect(report.receivedChanges == changes.count)
            #expect(report.applied == changes.count)
            #expect(report.pending == 0)
            // Each page was asked for once: the pages were applied as they came.
            #expect(relay.asked.count == (changes.count + pageSize - 1) / pageSize)
            outcomes.append(try Outcome(store))
        }
        for outcome in outcomes { #expect(outcome == expected) }
    }

    /// An author's last changes never reached the relay: what depends on them waits, as it
    /// would have in one batch, whatever the order the rest came in.
    @Test(arguments: [(UInt64(5), 1), (6, nil)] as [(UInt64, Int?)])
    func whatWaitsIsWhatOneBatchLeavesWaiting(seed: UInt64, changesPerTransaction: Int?) async throws {
        let all = try Self.history(seed: seed)
        let cut = all.first!.replica
        let ofCut = all.filter { $0.replica == cut }
        let missingFrom = ofCut[ofCut.count / 3].startSeq
        let changes = all.filter { $0.replica != cut || $0.startSeq < missingFrom }
        let expected = try Self.oneBatch(changes)
        #expect(!expected.pending.isEmpty)
        for order in 0 ..< 3 as Range<UInt64> {
            let relay = ScriptedRelay(arrival: Self.arrival(changes, seed: seed &+ order), pageSize: 5)
            let store = try NoteStore.openInMemory()
            let report = try await Self.engine(changesPerTransaction).sync(store, over: RelayTransport(url: "http://relay", space: "s", token: "t", http: relay))
            #expect(try Outcome(store) == expected)
            #expect(report.pending == expected.pending.count)
        }
    }

    /// Committing every page, a relay that fails for good part way: the pages applied stay
    /// (each was one transaction), the store is what one batch of them gives, and the next
    /// sync asks only for the rest.
    @Test func aFailedPullKeepsItsPagesAndTheNextSyncAsksForTheRest() async throws {
        let changes = try Self.history(seed: 7)
        let arrival = Self.arrival(changes, seed: 8)
        let relay = ScriptedRelay(arrival: arrival, pageSize: 10)
        relay.failing = (post: 3, status: 400)
        let store = try NoteStore.openInMemory()
        let transport = try RelayTransport(url: "http://relay", space: "s", token: "t", http: relay)
        await #expect(throws: SyncError.self) { _ = try await Self.engine(1).sync(store, over: transport) }
        #expect(try Outcome(store) == Self.oneBatch(Array(arrival.prefix(30))))
        let kept = try store.versionVector
        #expect(!kept.isEmpty)

        let report = try await Self.engine(1).sync(store, over: transport)
        #expect(relay.asked[4] == kept)
        #expect(report.receivedChanges == changes.count - 30 + (try Self.oneBatch(Array(arrival.prefix(30))).pending.count))
        #expect(try Outcome(store) == Self.oneBatch(changes))
    }

    /// In one transaction (the default), a relay that fails for good part way leaves the store
    /// as it was: nothing of the receive is applied; the next sync brings it all.
    @Test func aFailedPullInOneTransactionLeavesTheStoreAsItWas() async throws {
        let changes = try Self.history(seed: 12)
        let relay = ScriptedRelay(arrival: Self.arrival(changes, seed: 13), pageSize: 10)
        relay.failing = (post: 3, status: 400)
        let store = try NoteStore.openInMemory()
        let before = try Outcome(store)
        let transport = try RelayTransport(url: "http://relay", space: "s", token: "t", http: relay)
        await #expect(throws: SyncError.self) { _ = try await Self.engine(nil).sync(store, over: transport) }
        #expect(try Outcome(store) == before)
        let report = try await Self.engine(nil).sync(store, over: transport)
        #expect(report.receivedChanges == changes.count)
        #expect(try Outcome(store) == Self.oneBatch(changes))
    }

    /// A relay that fails once in a way that may pass: the retry asks from what the session
    /// received so far (whether applied or not), and repeats are taken once.
    @Test(arguments: [1, 1000, nil] as [Int?])
    func aRetriedPageResumesFromWhatWasReceived(changesPerTransaction: Int?) async throws {
        let changes = try Self.history(seed: 9)
        let relay = ScriptedRelay(arrival: Self.arrival(changes, seed: 10), pageSize: 10)
        relay.failing = (post: 2, status: 503)
        let store = try NoteStore.openInMemory()
        let report = try await Self.engine(changesPerTransaction).sync(store, over: RelayTransport(url: "http://relay", space: "s", token: "t", http: relay))
        #expect(report.retries == 1)
        // Page 1 was the last received: the retry asks from where the failed request did.
        #expect(relay.asked[3] == relay.asked[2])
        #expect(relay.asked[3] != VersionVector())
        #expect(report.receivedChanges == changes.count)
        #expect(report.applied == changes.count)
        #expect(try Outcome(store) == Self.oneBatch(changes))
    }

    /// A store that counts how it is asked to apply.
    final class CountingReplica: SyncReplica, @unchecked Sendable {
        let store: NoteStore
        let lock = NSLock()
        var transactions = 0
        var batchesSeen = 0
        init(_ store: NoteStore) { self.store = store }
        var replicaID: ReplicaID { store.replicaID }
        func currentVersion() throws -> VersionVector { try store.currentVersion() }
        func changes(since version: VersionVector) throws -> [Change] { try store.changes(since: version) }
        func integrate(_ changes: [Change]) throws -> IntegrationReport { try store.integrate(changes) }
        func recordPeer(_ replica: ReplicaID, version: VersionVector) throws { try store.recordPeer(replica, version: version) }
        func integrate(batches next: () throws -> [Change]?, progress: (IntegrationReport) -> Void) throws -> IntegrationReport {
            lock.withLock { transactions += 1 }
            return try store.integrate(batches: {
                let batch = try next()
                if batch != nil { self.lock.withLock { self.batchesSeen += 1 } }
                return batch
            }, progress: progress)
        }
    }

    /// By default every page goes to one transaction, page by page; a sync that brings nothing
    /// opens none.
    @Test func theDefaultIsOneTransactionFedPageByPage() async throws {
        let changes = try Self.history(seed: 14)
        let relay = ScriptedRelay(arrival: Self.arrival(changes, seed: 15), pageSize: 9)
        let replica = CountingReplica(try NoteStore.openInMemory())
        let transport = try RelayTransport(url: "http://relay", space: "s", token: "t", http: relay)
        _ = try await SyncEngine().sync(replica, over: transport)
        #expect(replica.transactions == 1)
        #expect(replica.batchesSeen == (changes.count + 8) / 9)
        let again = try await SyncEngine().sync(replica, over: transport)
        #expect(again.receivedChanges == 0)
        #expect(replica.transactions == 1)
        #expect(try Outcome(replica.store) == Self.oneBatch(changes))
    }

    /// A folder's files are applied one by one, with the same outcome as one batch.
    @Test func aFolderPullEqualsOneBatch() async throws {
        let changes = try Self.history(seed: 11)
        let fileSystem = InMemoryFileSystem()
        let folder = FolderTransport(folder: "/sync", fileSystem: fileSystem)
        // Each author's changes written by its own replica, a few per file.
        for (author, own) in Dictionary(grouping: changes, by: \.replica) {
            var version = VersionVector()
            for piece in stride(from: 0, to: own.count, by: 4) {
                let slice = Array(own[piece ..< min(piece + 4, own.count)])
                version[author] = slice.last!.endSeq
                _ = try await folder.send(SyncBundle(sender: author, senderVersion: version, changes: slice))
            }
        }
        let store = try NoteStore.openInMemory()
        let report = try await Self.engine(nil).sync(store, over: folder)
        #expect(report.receivedBundles > 3)
        #expect(report.receivedChanges == changes.count)
        #expect(try Outcome(store) == Self.oneBatch(changes))
    }

    /// Session level: a bundle delivered twice is counted once (and handed over again: a
    /// streamed session keeps no changes to tell a repeat from another branch at the same seqs,
    /// and the replica takes a repeat for a duplicate); changes in our own name that we
    /// never made are handed over before the replica moves identity and after (another's to it
    /// then, applied as one batch would apply them all), and all are counted as a copy's.
    @Test func repeatsAreTakenOnceAndForeignOwnChangesAfterTheMoveAreHandedOver() throws {
        var a = Notebook(replicaID: .random(), wallClock: FixedWallClock(1))
        var copy = a
        _ = a.createNote(title: "original")
        // The copy's first change has the seqs of a's: the next ones are past what a made.
        let foreign = (0 ..< 4).map { i in copy.createNote(title: "by the copy \(i)").change }.dropFirst()
        var session = SyncSession(local: a.replicaID, version: a.versionVector, batchSize: 1)
        _ = try session.start()
        _ = try session.remoteVersionReceived(a.versionVector)
        let sender = ReplicaID.random()
        let first = ReceivedBundle(bundle: SyncBundle(sender: sender, senderVersion: copy.versionVector, changes: Array(foreign.prefix(2))), source: "1")
        guard case .apply(let batch) = try session.arrived(first) else { Issue.record("expected a batch"); return }
        #expect(batch.count == 2)
        try session.batchApplied(IntegrationReport(applied: 2, foreignOwnChanges: 2))
        guard case .apply(let again) = try session.arrived(first) else { Issue.record("expected the repeat handed over"); return }
        #expect(again == Array(foreign.prefix(2)))
        try session.batchApplied(IntegrationReport(duplicates: 2))
        let rest = ReceivedBundle(bundle: SyncBundle(sender: sender, senderVersion: copy.versionVector, changes: Array(foreign.dropFirst(2))), source: "2")
        guard case .apply(let after) = try session.arrived(rest) else { Issue.record("expected the rest as a batch"); return }
        #expect(after == Array(foreign.dropFirst(2)))
        try session.batchApplied(IntegrationReport(applied: after.count))
        guard case .recordPeers = try session.receivedAll(skipped: []) else { Issue.record("expected recordPeers"); return }
        guard case .finish(let report) = try session.peersRecorded() else { Issue.record("expected finish"); return }
        #expect(report.receivedChanges == foreign.count)
        #expect(report.foreignOwnChanges == foreign.count)
        #expect(report.applied == foreign.count)
        #expect(report.rejected == 0)
    }

    @Test func seqRangesTellWhatWasCovered() {
        var ranges = SeqRanges()
        // (start, end, whether it is new) in the order inserted.
        let steps: [(UInt64, UInt64, Bool)] = [(5, 7, true), (6, 6, false), (1, 2, true), (3, 4, true), (1, 7, false), (7, 9, true),
                                               (2, 9, false), (11, 11, true), (10, 12, true), (1, 12, false), (.max, .max, true), (.max, .max, false)]
        var answers: [Bool] = []
        for (start, end, _) in steps { answers.append(ranges.insert(start, end)) }
        #expect(answers == steps.map(\.2))
    }
}

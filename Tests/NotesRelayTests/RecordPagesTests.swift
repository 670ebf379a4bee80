import Foundation
import NotesCRDT
@testable import NotesRelay
import NotesStore
import NotesTestSupport
@testable import NotesSync
import Testing

/// The relay's record pages (format version 5) against its version 3 pages: a replica that pulls
/// either ends the same as one that applied the whole history in one batch, whatever the page size,
/// whether it already holds part of a stored record, or whether it asks for record pages at all.
struct RecordPagesTests {
    static let space = "s"
    static let token = "t"

    /// `RelayTransport`'s requests straight into a `RelayService`: notes each sync answer's format
    /// version, and can answer one POST (by index from 0) with a failure or other bytes instead.
    final class ServiceHTTP: HTTPCalling, @unchecked Sendable {
        let service: RelayService
        private let lock = NSLock()
        private var posts = 0
        private(set) var versions: [UInt8] = []
        var failing: (post: Int, status: Int)?
        var replacing: (post: Int, body: [UInt8])?

        init(service: RelayService) { self.service = service }

        func call(_ request: HTTPCallRequest, maxResponseBytes: Int) async throws -> HTTPCallResponse {
            let index: Int = lock.withLock {
                if request.method == "POST" { posts += 1 }
                return posts - 1
            }
            let path = URLComponents(string: request.url)!.path
            let response = await service.handle(RelayRequest(method: request.method, path: path, headers: request.headers, body: request.body))
            guard request.method == "POST" else { return HTTPCallResponse(status: response.status, headers: response.headers, body: response.body) }
            if let failing, failing.post == index {
                return HTTPCallResponse(status: failing.status, headers: [:], body: Array(#"{"error":"scripted failure"}"#.utf8))
            }
            var body = response.body
            if let replacing, replacing.post == index { body = replacing.body }
            lock.withLock { if response.status == 200 { versions.append(body[SyncBundle.magic.count]) } }
            return HTTPCallResponse(status: response.status, headers: response.headers, body: body)
        }
    }

    /// Three authors editing shared notes, merging now and then: every change as made.
    static func history(seed: UInt64) throws -> [Change] {
        try MixedHistory.threeAuthors(seed: seed, steps: 120, thirdEdit: .deleteFirst)
    }

    /// What a replica holds, to compare.
    struct Outcome: Equatable {
        var digest: String
        var version: VersionVector
        var notes: [StoredNote]
        var pending: Int

        init(_ store: NoteStore) throws {
            digest = try store.digest()
            version = try store.versionVector
            notes = try store.list(.all, includeBody: true).map { var note = $0; note.changedHereAt = 0; return note }
            pending = try store.pendingChanges.count
        }
    }

    static func oneBatch(_ changes: [Change]) throws -> Outcome {
        let store = try NoteStore.openInMemory()
        try store.apply(changes)
        return try Outcome(store)
    }

    /// A relay holding `changes`, posted `perPost` at a time in the order made (each post stores
    /// one record per author in it), and the records' ranges per author.
    static func relay(_ changes: [Change], perPost: Int, page: RelayPageLimits,
                      storage: (any RelayStorage)? = nil, space: String = space) async throws -> (RelayService, [(ReplicaID, ClosedRange<UInt64>)]) {
        let service = RelayService(storage: try storage ?? SQLiteRelayStorage.inMemory(), tokens: try RelayTokens([(space: space, token: token)]),
                                   limits: RelayLimits(page: page))
        var version = VersionVector()
        var records: [(ReplicaID, ClosedRange<UInt64>)] = []
        for start in stride(from: 0, to: changes.count, by: perPost) {
            let piece = Array(changes[start ..< min(changes.count, start + perPost)])
            for change in piece { version[change.replica] = max(version[change.replica], change.endSeq) }
            let response = await RelayServiceTests.post(service, space, SyncBundle(sender: .random(), senderVersion: version, changes: piece),
                                                        token: token)
            #expect(response.status == 200)
            for author in Set(piece.map(\.replica)) {
                let mine = piece.filter { $0.replica == author }
                records.append((author, mine.first!.startSeq ... mine.last!.endSeq))
            }
        }
        return (service, records)
    }

    static func transport(_ http: ServiceHTTP, records: Bool, space: String = space) throws -> RelayTransport {
        var transport = try RelayTransport(url: "http://relay", space: space, token: token, http: http)
        transport.acceptsRecords = records
        return transport
    }

    static let engine = SyncEngine(retry: RetryPolicy(maxAttempts: 1), sleep: { _ in }, random: { 0 })

    @Test(arguments: [(UInt64(1), 1, 1000), (2, 3, 1000), (3, 1000, 1000), (4, 2, 300), (5, 1000, 1 << 20)] as [(UInt64, Int, Int)])
    func recordPagesApplyAsVersion3Pages(seed: UInt64, pageChanges: Int, pageBytes: Int) async throws {
        let changes = try Self.history(seed: seed)
        let expected = try Self.oneBatch(changes)
        let (service, _) = try await Self.relay(changes, perPost: 5, page: RelayPageLimits(maxChanges: pageChanges, maxBytes: pageBytes))
        for records in [true, false] {
            let http = ServiceHTTP(service: service)
            let store = try NoteStore.openInMemory()
            let report = try await Self.engine.sync(store, over: try Self.transport(http, records: records))
            #expect(report.applied == changes.count)
            #expect(try Outcome(store) == expected)
            // A client that asks gets record pages; one that does not (from before them), version 3.
            #expect(!http.versions.isEmpty)
            #expect(http.versions.allSatisfy { $0 == (records ? SyncBundle.recordsFormatVersion : SyncBundle.formatVersion) })
        }
    }

    /// A replica that holds the first seqs of stored records gets them cut off (the relay decodes
    /// those records), and ends as the one batch.
    @Test(arguments: [(UInt64(11), 7), (12, 13), (13, 31)] as [(UInt64, Int)])
    func aClientWhoseVersionCutsIntoAStoredRecord(seed: UInt64, held: Int) async throws {
        let changes = try Self.history(seed: seed)
        let expected = try Self.oneBatch(changes)
        let (service, records) = try await Self.relay(changes, perPost: 6, page: RelayPageLimits(maxChanges: 2))
        var has = VersionVector()
        for change in changes.prefix(held) { has[change.replica] = max(has[change.replica], change.endSeq) }
        #expect(records.contains { author, range in range.lowerBound <= has[author] && has[author] < range.upperBound })
        for asksForRecords in [true, false] {
            let http = ServiceHTTP(service: service)
            let store = try NoteStore.openInMemory()
            try store.apply(Array(changes.prefix(held)))
            _ = try await Self.engine.sync(store, over: try Self.transport(http, records: asksForRecords))
            #expect(try Outcome(store) == expected)
            #expect(http.versions.allSatisfy { $0 == (asksForRecords ? 5 : 3) })
        }
        // The cut record, as the relay serves it: starting right after what the client has.
        let http = ServiceHTTP(service: service)
        let first = try await Self.transport(http, records: true).exchange(SyncBundle(sender: .random(), senderVersion: has, changes: []))
        #expect(!first.bundle.changes.isEmpty)
        #expect(first.bundle.changes.allSatisfy { $0.startSeq > has[$0.replica] })
    }

    /// Uploads that straddle what the relay holds (a replica resending changes another already
    /// sent) are stored whole, so a page may hold two records of one author that overlap: the
    /// record page cuts the later one past what the page gives, as a version 5 reader requires
    /// (it served them overlapping, which every record-page client refused: the fuzzed relay
    /// requests found it).
    @Test(arguments: [(UInt64(41), 1000), (42, 3), (43, 1)] as [(UInt64, Int)])
    func uploadsThatStraddleWhatTheRelayHoldsGiveRecordsThatDoNotOverlap(seed: UInt64, pageChanges: Int) async throws {
        let changes = try Self.history(seed: seed)
        let expected = try Self.oneBatch(changes)
        let service = RelayService(storage: try SQLiteRelayStorage.inMemory(), tokens: try RelayTokens([(space: Self.space, token: Self.token)]),
                                   limits: RelayLimits(page: RelayPageLimits(maxChanges: pageChanges)))
        var version = VersionVector()
        var sent = 0
        for end in stride(from: 5, through: changes.count + 4, by: 5) {
            // Each upload goes back over the last 8 changes of the one before it.
            let piece = Array(changes[max(0, sent - 8) ..< min(changes.count, end)])
            sent = min(changes.count, end)
            for change in piece { version[change.replica] = max(version[change.replica], change.endSeq) }
            let response = await RelayServiceTests.post(service, Self.space, SyncBundle(sender: .random(), senderVersion: version, changes: piece),
                                                        token: Self.token)
            #expect(response.status == 200)
        }
        // A page for a client with nothing: both readers take it, and it holds each seq once.
        var request = RelayRequest(method: "POST", path: RelayProtocol.syncPath(space: Self.space),
                                   headers: ["Authorization": "Bearer \(Self.token)", "Accept": RelayProtocol.recordsAccept],
                                   body: SyncBundle(sender: .random(), senderVersion: VersionVector(), changes: []).encoded())
        let page = await service.handle(request).body
        let decoded = try SyncBundle.decode(page)
        var reader = try #require(try SyncBundle.RecordReader(page))
        var read: [Change] = []
        while let record = try reader.next() { read += record }
        #expect(read == decoded.changes)
        #expect(try SyncBundle.recordCoverage(page) != nil)
        var seen = Set<String>()
        for change in decoded.changes { #expect(seen.insert("\(change.replica)@\(change.startSeq)").inserted) }
        request.headers["accept"] = RelayProtocol.bundleContentType
        let version3 = await service.handle(request).body
        #expect(version3[SyncBundle.magic.count] == 3)
        // The version 3 answer too gives each seq once (it repeated the overlap).
        var seen3 = Set<String>()
        for change in try SyncBundle.decode(version3).changes {
            for seq in change.startSeq ... change.endSeq { #expect(seen3.insert("\(change.replica)@\(seq)").inserted) }
        }
        #expect(seen3.count == seenSeqs(decoded.changes))
        for asksForRecords in [true, false] {
            let http = ServiceHTTP(service: service)
            let store = try NoteStore.openInMemory()
            _ = try await Self.engine.sync(store, over: try Self.transport(http, records: asksForRecords))
            #expect(try Outcome(store) == expected)
            #expect(http.versions.allSatisfy { $0 == (asksForRecords ? 5 : 3) })
        }
    }

    /// The pull asks for the next page before it decodes the current one; a relay that fails part
    /// way (or a page that is refused) leaves the store as it was (one transaction), and the next
    /// sync brings it all.
    @Test(arguments: [1, 2, 4])
    func aPipelinedPullThatFailsPartWayLeavesTheStoreAsItWas(failingPost: Int) async throws {
        let changes = try Self.history(seed: 21)
        let (service, _) = try await Self.relay(changes, perPost: 4, page: RelayPageLimits(maxChanges: 3))
        let store = try NoteStore.openInMemory()
        try store.apply(Array(changes.prefix(5)))
        let before = try Outcome(store)
        let failing = ServiceHTTP(service: service)
        failing.failing = (post: failingPost, status: 500)
        await #expect(throws: SyncError.self) { _ = try await Self.engine.sync(store, over: try Self.transport(failing, records: true)) }
        #expect(try Outcome(store) == before)
        // A record page whose frame lies about its changes (past what the client has, so it is
        // asked past before it is decoded): refused whole, nothing applied.
        let lying = ServiceHTTP(service: service)
        let author = changes[0].replica
        let stranger = changes.first { $0.replica != author }!
        lying.replacing = (post: failingPost, body: SyncBundle.encodedRecords(
            sender: .random(), senderVersion: VersionVector(),
            records: [SyncBundle.Record(author: author, startSeq: 10_000, endSeq: 10_000 + stranger.seqCount - 1, encoding: ChangeCodec.encode([stranger]))]))
        await #expect { _ = try await Self.engine.sync(store, over: try Self.transport(lying, records: true)) } throws: { error in
            (error as? SyncError).map { $0.message.contains("holds a change of") } ?? false
        }
        #expect(try Outcome(store) == before)
        _ = try await Self.engine.sync(store, over: try Self.transport(ServiceHTTP(service: service), records: true))
        #expect(try Outcome(store) == Self.oneBatch(changes))
    }

    /// Every storage backend serves the same record pages (PostgreSQL with Scripts/with-postgres.sh).
    @Test(arguments: RelayBackend.available)
    func recordPagesFromEveryBackend(_ backend: RelayBackend) async throws {
        let changes = try Self.history(seed: 31)
        let expected = try Self.oneBatch(changes)
        try await backend.with { storage in
            let space = uniqueSpace()
            let (service, _) = try await Self.relay(changes, perPost: 5, page: RelayPageLimits(maxChanges: 4), storage: storage, space: space)
            let store = try NoteStore.openInMemory()
            try store.apply(Array(changes.prefix(9)))
            let http = ServiceHTTP(service: service)
            _ = try await Self.engine.sync(store, over: try Self.transport(http, records: true, space: space))
            #expect(try Outcome(store) == expected)
            #expect(http.versions.count > 3 && http.versions.allSatisfy { $0 == 5 })
        }
    }

    /// How many seqs the changes cover.
    func seenSeqs(_ changes: [Change]) -> Int { changes.reduce(0) { $0 + Int($1.seqCount) } }
}

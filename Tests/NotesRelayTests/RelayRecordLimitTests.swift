import Foundation
import NotesCRDT
@testable import NotesRelay
import NotesSync
import Testing

/// What one token holder can upload without stopping the space for everyone: a record no answer
/// could carry back, or more authors than an answer's version vector may hold.
struct RelayRecordLimitTests {
    static let token = "tok-s-1"

    static func post(_ service: RelayService, _ bundle: SyncBundle, accept: String? = nil) async -> RelayResponse {
        var headers = ["Authorization": "Bearer \(token)"]
        if let accept { headers["Accept"] = accept }
        return await service.handle(RelayRequest(method: "POST", path: "/v1/spaces/s/sync", headers: headers, body: bundle.encoded()))
    }

    /// The writer's body limit of these tests, and the relay's record limit beside it: small, so
    /// that the tests run in a debug build beside the others (the shipped 8 and 9 MiB take the
    /// same code paths).
    static let writerLimit = 64 << 10
    static let relayLimit = writerLimit + (8 << 10)

    static func service(maxAuthors: Int = 16_384) throws -> RelayService {
        RelayService(storage: try SQLiteRelayStorage.inMemory(), tokens: try RelayTokens([(space: "s", token: token)]),
                     limits: RelayLimits(maxAuthorsPerSpace: maxAuthors, maxRecordBytes: relayLimit))
    }

    /// 17 MB of one letter compresses to 16 KB: the relay took it, and then every answer of the
    /// space was larger than a client takes. A record past the limit is refused, and the space
    /// syncs on.
    @Test func aRecordNoAnswerCouldCarryIsRefused() async throws {
        let service = try Self.service()
        var a = Notebook(replicaID: ReplicaID(Identifier128(high: 21, low: 21)), wallClock: FixedWallClock(1_700_000_000_000))
        _ = a.createNote(title: "small", body: "fine")
        let before = a.changes(since: VersionVector())
        #expect(await Self.post(service, SyncBundle(sender: a.replicaID, senderVersion: a.versionVector, changes: before)).status == 200)
        let version = a.versionVector
        _ = a.createNote(title: String(repeating: "a", count: 4 * Self.relayLimit))
        let poison = SyncBundle(sender: a.replicaID, senderVersion: a.versionVector, changes: a.changes(since: version))
        #expect(poison.encoded().count < Self.relayLimit / 4)
        let refused = await Self.post(service, poison)
        #expect(refused.status == 400)
        #expect(String(decoding: refused.body, as: UTF8.self).contains("more than the \(Self.relayLimit) the relay keeps in one record"))
        // A new client still gets the space, in an answer it takes.
        let client = ReplicaID(Identifier128(high: 22, low: 22))
        let answer = await Self.post(service, SyncBundle(sender: client, senderVersion: VersionVector(), changes: []),
                                     accept: RelayProtocol.bundleContentType + ", " + RelayProtocol.recordsAccept)
        #expect(answer.status == 200 && answer.body.count <= SyncBundle.maxBytes)
        #expect(try SyncBundle.decode(answer.body).senderVersion == version)
    }

    /// What an honest writer sends of a note of four-byte characters goes through a relay and
    /// back: the pieces keep each body within the writer's limit (at the shipped limits: a note of
    /// 4.2 million emoji went out in one bundle of 16.8 MB, which no answer could carry back).
    @Test func aLargeNoteOfWideCharactersGoesThroughTheRelay() async throws {
        let service = try Self.service()
        var a = Notebook(replicaID: ReplicaID(Identifier128(high: 23, low: 23)), wallClock: FixedWallClock(1_700_000_000_000))
        let body = String(repeating: "😀", count: Self.writerLimit)
        let (note, _) = a.createNote(title: "wide", body: body)
        let pieces = try SyncBundle.pieces(sender: a.replicaID, senderVersion: a.versionVector, changes: a.changes(since: VersionVector()),
                                           maxRecordBytes: Self.writerLimit)
        #expect(pieces.count >= 4)
        for piece in pieces {
            var encoder = ChangeCodec.Encoder()
            #expect(encoder.encode(piece.changes).count <= Self.writerLimit)
            #expect(await Self.post(service, piece).status == 200)
        }
        var b = Notebook(replicaID: ReplicaID(Identifier128(high: 24, low: 24)), wallClock: FixedWallClock(1_700_000_000_000))
        var more = true
        while more {
            let answer = await Self.post(service, SyncBundle(sender: b.replicaID, senderVersion: b.versionVector, changes: []),
                                         accept: RelayProtocol.bundleContentType + ", " + RelayProtocol.recordsAccept)
            #expect(answer.status == 200 && answer.body.count <= SyncBundle.maxBytes)
            let bundle = try SyncBundle.decode(answer.body)
            guard !bundle.changes.isEmpty else { break }
            b.apply(contentsOf: bundle.changes)
            more = answer.headers[RelayProtocol.moreHeader] == "1" || b.versionVector != a.versionVector
        }
        #expect(b.body(of: note)?.string == body)
        #expect(b.digest() == a.digest())
    }

    /// Past the limit, an upload that brings new authors is refused whole; authors already in the
    /// space go on uploading.
    @Test func authorsPastTheLimitAreRefused() async throws {
        let service = try Self.service(maxAuthors: 3)
        var books = (1 ... 4).map { Notebook(replicaID: ReplicaID(Identifier128(high: 30, low: UInt64($0))), wallClock: FixedWallClock(1_700_000_000_000)) }
        for i in 0 ..< 3 {
            _ = books[i].createNote(title: "n\(i)")
            let bundle = SyncBundle(sender: books[i].replicaID, senderVersion: books[i].versionVector, changes: books[i].changes(since: VersionVector()))
            #expect(await Self.post(service, bundle).status == 200)
        }
        _ = books[3].createNote(title: "one too many")
        let refused = await Self.post(service, SyncBundle(sender: books[3].replicaID, senderVersion: books[3].versionVector,
                                                          changes: books[3].changes(since: VersionVector())))
        #expect(refused.status == 400)
        #expect(String(decoding: refused.body, as: UTF8.self).contains("past the 3 a space may hold"))
        let status = try await service.storage.status(space: "s")
        #expect(status.authors == 3)
        let version = books[0].versionVector
        _ = books[0].createNote(title: "still fine")
        #expect(await Self.post(service, SyncBundle(sender: books[0].replicaID, senderVersion: books[0].versionVector,
                                                    changes: books[0].changes(since: version))).status == 200)
    }

    /// Uploads that each fit in a bundle alone but together pass what one bundle's records may
    /// hold (each deletes 16,777,216 characters: 162 bytes): the relay filled pages by records and
    /// bytes only, so from the second such upload on no client could decode a page and the space
    /// stopped syncing for every device. Each page now stops at the reader's limits.
    @Test(arguments: [false, true]) func pagesStayWithinWhatAReaderTakesTogether(records: Bool) async throws {
        let service = try Self.service()
        let note = NoteID(Identifier128(high: 31, low: 31))
        let target = ReplicaID(Identifier128(high: 32, low: 32))
        var all = VersionVector()
        for k: UInt64 in 1 ... 5 {
            let author = ReplicaID(Identifier128(high: 33, low: k))
            let change = Change(replica: author, startSeq: 1, timestamp: Timestamp(milliseconds: 1_700_000_000_000 + k),
                                dependencies: VersionVector(),
                                operations: [.deleteText(note: note, targets: [OpIDRange(replica: target, seq: 1, count: 1 << 24)])])
            all[author] = 1
            var sent = VersionVector()
            sent[author] = 1
            #expect(await Self.post(service, SyncBundle(sender: author, senderVersion: sent, changes: [change])).status == 200)
        }
        let client = ReplicaID(Identifier128(high: 34, low: 34))
        var version = VersionVector()
        var pages = 0
        var more = true
        while more, pages < 20 {
            let answer = await Self.post(service, SyncBundle(sender: client, senderVersion: version, changes: []),
                                         accept: records ? RelayProtocol.bundleContentType + ", " + RelayProtocol.recordsAccept : nil)
            #expect(answer.status == 200)
            let bundle = try SyncBundle.decode(answer.body)
            #expect(bundle.changes.count == 1, "one 16 M delete a page")
            for change in bundle.changes { version[change.replica] = max(version[change.replica], change.endSeq) }
            more = answer.headers[RelayProtocol.moreHeader] == "1"
            pages += 1
        }
        #expect(version == all)
        #expect(pages == 5)
    }

    /// The decoded-change cache is bounded by the bytes it was decoded from, not only by count.
    @Test func theDecodedCacheKeepsWithinItsBytes() {
        let cache = DecodedChangeCache(capacity: 50_000, byteCapacity: 1000)
        for id in 1 ... 100 { cache.put(Int64(id), DecodedRecord(changes: [], usage: .init()), bytes: 100) }
        #expect(cache.keptBytes <= 1000)
        #expect(cache.get(100) != nil)
        #expect(cache.get(1) == nil)
        cache.put(101, DecodedRecord(changes: [], usage: .init()), bytes: 5000)
        #expect(cache.get(101) == nil)
    }
}

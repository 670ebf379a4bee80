import Foundation
import NotesCRDT
@testable import NotesRelay
import NotesStore
import NotesSync
import Testing

/// The relay's protocol logic, without HTTP.
struct RelayServiceTests {
    static let token = "tok-s-1"

    /// A service over `backend` with one space of its own (a shared PostgreSQL database holds other tests' spaces).
    static func withService(_ backend: RelayBackend, pageSize: Int = 1000,
                            _ body: (RelayService, String) async throws -> Void) async throws {
        let space = uniqueSpace()
        try await backend.with { storage in
            let service = RelayService(storage: storage, tokens: try RelayTokens([(space: space, token: token)]),
                                       limits: RelayLimits(page: RelayPageLimits(maxChanges: pageSize)))
            try await body(service, space)
        }
    }

    static func post(_ service: RelayService, _ space: String, _ bundle: SyncBundle, token: String? = RelayServiceTests.token) async -> RelayResponse {
        await post(service, space, bundle.encoded(), token: token)
    }

    static func post(_ service: RelayService, _ space: String, _ body: [UInt8], token: String? = RelayServiceTests.token) async -> RelayResponse {
        var headers: [String: String] = [:]
        if let token { headers["Authorization"] = "Bearer \(token)" }
        return await service.handle(RelayRequest(method: "POST", path: "/v1/spaces/\(space)/sync", headers: headers, body: body))
    }

    static func message(_ response: RelayResponse) -> String {
        (try? JSONDecoder().decode([String: String].self, from: Data(response.body)))?["error"] ?? String(decoding: response.body, as: UTF8.self)
    }

    @Test(arguments: RelayBackend.available)
    func aBranchSentAgainReachesAClientThatLacksItsSeqs(_ backend: RelayBackend) async throws {
        try await Self.withService(backend) { service, space in
            let (first, second) = try SQLiteRelayStorageTests.forkedChanges()
            let author = first[0].replica
            var version = VersionVector()
            version[author] = first.last!.endSeq
            #expect(await Self.post(service, space, SyncBundle(sender: author, senderVersion: version, changes: first)).status == 200)
            let again = await service.handle(RelayRequest(method: "POST", path: "/v1/spaces/\(space)/sync",
                                                          headers: ["authorization": "Bearer \(Self.token)", "x-crdt-again": "1"],
                                                          body: SyncBundle(sender: author, senderVersion: version, changes: second).encoded()))
            #expect(again.status == 200)
            #expect(again.headers[RelayProtocol.storedHeader] == String(second.count))
            // A client that reads record bundles gets the page as changes (a record bundle holds
            // one chain per author), both branches whole.
            let client = ReplicaID.random()
            let answer = await service.handle(RelayRequest(method: "POST", path: "/v1/spaces/\(space)/sync",
                                                           headers: ["authorization": "Bearer \(Self.token)",
                                                                     "accept": RelayProtocol.bundleContentType + ", " + RelayProtocol.recordsAccept],
                                                           body: SyncBundle(sender: client, senderVersion: VersionVector(), changes: []).encoded()))
            #expect(answer.status == 200)
            let bundle = try SyncBundle.decode(answer.body)
            #expect(Set(bundle.changes) == Set(first + second))
            // Sent without the header, the other branch is a repeat: nothing is stored.
            #expect(await Self.post(service, space, SyncBundle(sender: author, senderVersion: version, changes: second))
                .headers[RelayProtocol.storedHeader] == "0")
        }
    }

    @Test(arguments: RelayBackend.available)
    func authorization(_ backend: RelayBackend) async throws {
        try await Self.withService(backend) { service, space in
            let empty = SyncBundle(sender: .random(), senderVersion: VersionVector(), changes: [])
            #expect(await Self.post(service, space, empty, token: nil).status == 401)
            #expect(await Self.post(service, space, empty, token: "wrong").status == 401)
            #expect(await Self.post(service, space, empty).status == 200)
            let other = await service.handle(RelayRequest(method: "GET", path: "/v1/spaces/t/status", headers: ["authorization": "Bearer \(Self.token)"]))
            #expect(other.status == 403)
            #expect(await service.handle(RelayRequest(method: "GET", path: "/healthz")).status == 200)
            #expect(await service.handle(RelayRequest(method: "GET", path: "/v1/other")).status == 404)
            #expect(await service.handle(RelayRequest(method: "PUT", path: "/v1/spaces/\(space)/sync")).status == 405)
        }
    }

    @Test(arguments: RelayBackend.available)
    func storesAndAnswersWithWhatTheClientLacks(_ backend: RelayBackend) async throws {
        try await Self.withService(backend) { service, space in
            let a = try NoteStore.openInMemory()
            let b = try NoteStore.openInMemory()
            _ = try a.createNote(title: "from a", body: "hello")
            let upload = SyncBundle(sender: a.replicaID, senderVersion: try a.versionVector, changes: try a.changes(since: VersionVector()))
            let stored = await Self.post(service, space, upload)
            #expect(stored.status == 200)
            #expect(stored.headers[RelayProtocol.storedHeader] == "\(upload.changes.count)")
            let reply = try SyncBundle.decode(await Self.post(service, space, SyncBundle(sender: b.replicaID, senderVersion: VersionVector(), changes: [])).body)
            #expect(reply.sender == service.relayReplica(for: space))
            #expect(reply.senderVersion == (try a.versionVector))
            try b.apply(reply.changes)
            #expect(try b.digest() == a.digest())
        }
    }

    /// What the relay can tell is wrong without CRDT knowledge is refused with 400 and a reason,
    /// and nothing of the request is stored.
    @Test(arguments: RelayBackend.available)
    func refusesUploadsItCanTellAreWrong(_ backend: RelayBackend) async throws {
        try await Self.withService(backend) { service, space in
            var a = Notebook(replicaID: .random(), wallClock: FixedWallClock(1_700_000_000_000))
            let (id, first) = a.createNote(title: "t")
            let changes = [first, try #require(try a.setPinned(id, true)), try #require(try a.setTitle(id, "u"))]
            let version = a.versionVector
            // A gap inside the request.
            let holed = await Self.post(service, space, SyncBundle(sender: a.replicaID, senderVersion: version, changes: [changes[0], changes[2]]))
            #expect(holed.status == 400)
            #expect(Self.message(holed).contains("gap"))
            // A gap against what the space holds.
            let ahead = await Self.post(service, space, SyncBundle(sender: a.replicaID, senderVersion: version, changes: [changes[2]]))
            #expect(ahead.status == 400)
            #expect(Self.message(ahead).contains("would leave a gap"))
            // Changes past what the sender says it has.
            var behind = version
            behind[a.replicaID] = 1
            let lying = await Self.post(service, space, SyncBundle(sender: a.replicaID, senderVersion: behind, changes: changes))
            #expect(lying.status == 400)
            #expect(Self.message(lying).contains("past what the sender says it has"))
            // Not a bundle, or damaged.
            #expect(await Self.post(service, space, Array("hello".utf8)).status == 400)
            var damaged = SyncBundle(sender: a.replicaID, senderVersion: version, changes: changes).encoded()
            damaged[damaged.count / 2] ^= 0x40
            let refused = await Self.post(service, space, damaged)
            #expect(refused.status == 400)
            #expect(Self.message(refused).contains("not a valid bundle"))
            #expect(try await service.storage.status(space: space).changes == 0)
        }
    }

    @Test(arguments: RelayBackend.available)
    func pagesFollowTheClientsVector(_ backend: RelayBackend) async throws {
        try await Self.withService(backend, pageSize: 2) { service, space in
            let a = try NoteStore.openInMemory()
            for i in 0 ..< 5 { _ = try a.createNote(title: "n\(i)") }
            // One request per change: the relay keeps one record per author and request, and pages by records.
            let changes = try a.changes(since: VersionVector())
            var sent = VersionVector()
            for change in changes {
                sent[a.replicaID] = change.endSeq
                #expect(await Self.post(service, space, SyncBundle(sender: a.replicaID, senderVersion: sent, changes: [change])).status == 200)
        }
        let b = try NoteStore.openInMemory()
        var cursor = VersionVector()
        var pages = 0
        while true {
            let response = await Self.post(service, space, SyncBundle(sender: b.replicaID, senderVersion: cursor, changes: []))
            let page = try SyncBundle.decode(response.body)
            pages += 1
            try b.apply(page.changes)
            for change in page.changes { cursor[change.replica] = max(cursor[change.replica], change.endSeq) }
            if response.headers[RelayProtocol.moreHeader] != "1" { break }
        }
        #expect(pages == (changes.count + 1) / 2)
        #expect(try b.digest() == a.digest())
        }
    }
}

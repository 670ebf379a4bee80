import Foundation
import NotesCRDT
@testable import NotesRelay
import NotesStore
import NotesSync
import Testing

/// The relay's long poll (`GET /v1/spaces/{space}/changes`), without HTTP.
struct RelayPushTests {
    static let token = "tok-s-1"
    static let otherToken = "tok-t-2"

    static func service(push: RelayPushLimits = RelayPushLimits()) throws -> RelayService {
        RelayService(storage: try SQLiteRelayStorage.inMemory(),
                     tokens: try RelayTokens([(space: "s", token: token), (space: "t", token: otherToken), (space: "u", token: "tok-u-3")]),
                     limits: RelayLimits(push: push))
    }

    static func poll(_ service: RelayService, space: String = "s", since: VersionVector = VersionVector(), wait: String) async -> RelayResponse {
        await service.handle(RelayRequest(method: "GET", path: "/v1/spaces/\(space)/changes",
                                          headers: ["Authorization": "Bearer \(["s": token, "t": otherToken, "u": "tok-u-3"][space]!)",
                                                    "Accept": RelayProtocol.bundleContentType],
                                          query: ["since": RelayProtocol.sinceParameter(since), "wait": wait]))
    }

    static func upload(_ service: RelayService, from store: NoteStore) async throws -> RelayResponse {
        let bundle = SyncBundle(sender: store.replicaID, senderVersion: try store.versionVector, changes: try store.changes(since: VersionVector()))
        return await service.handle(RelayRequest(method: "POST", path: "/v1/spaces/s/sync", headers: ["Authorization": "Bearer \(token)"],
                                                 body: bundle.encoded()))
    }

    /// Waits (without a clock) until `count` clients wait on `space`.
    static func waitForWaiters(_ service: RelayService, _ space: String, count: Int) async {
        while service.waiters.count(space) < count { try? await Task.sleep(for: .milliseconds(2)) }
    }

    @Test func aWaiterIsReleasedByAnAppendThroughTheSameStorage() async throws {
        let service = try Self.service()
        let a = try NoteStore.openInMemory()
        _ = try a.createNote(title: "pushed", body: "hello")
        let waiting = Task { await Self.poll(service, wait: "60") }
        await Self.waitForWaiters(service, "s", count: 1)
        #expect(try await Self.upload(service, from: a).status == 200)
        let answer = await waiting.value
        #expect(answer.status == 200)
        #expect(try SyncBundle.decodeHeader(answer.body).senderVersion == a.versionVector)
        #expect(service.waiters.count("s") == 0)
    }

    @Test func answersAtOnceWhenTheSpaceIsAheadAndTimesOutOtherwise() async throws {
        let service = try Self.service()
        let a = try NoteStore.openInMemory()
        _ = try a.createNote(title: "already there")
        _ = try await Self.upload(service, from: a)
        // Behind: answered at once, however long the client would wait.
        #expect(await Self.poll(service, since: VersionVector(), wait: "60").status == 200)
        // Up to date: nothing comes, so 204 when the wait runs out (and at once with wait=0).
        #expect(await Self.poll(service, since: try a.versionVector, wait: "0").status == 204)
        #expect(await Self.poll(service, since: try a.versionVector, wait: "1").status == 204)
        // Another space's changes do not count.
        #expect(await Self.poll(service, space: "t", since: VersionVector(), wait: "0").status == 204)
    }

    @Test func waitersAreBoundedPerSpaceAndInAll() async throws {
        let service = try Self.service(push: RelayPushLimits(maxWaitersPerSpace: 1, maxWaiters: 2))
        let first = Task { await Self.poll(service, wait: "60") }
        await Self.waitForWaiters(service, "s", count: 1)
        let refused = await Self.poll(service, wait: "60")
        #expect(refused.status == 503)
        #expect(refused.headers["Retry-After"] != nil)
        let second = Task { await Self.poll(service, space: "t", wait: "60") }
        await Self.waitForWaiters(service, "t", count: 1)
        // Two wait in all: a third space, with nobody waiting on it yet, is refused too.
        #expect(await Self.poll(service, space: "u", wait: "60").status == 503)
        // A cancelled wait (the server shutting down) ends with 204 and frees its place.
        first.cancel()
        second.cancel()
        #expect(await first.value.status == 204)
        #expect(await second.value.status == 204)
        #expect(service.waiters.count("s") == 0 && service.waiters.count("t") == 0)
    }

    @Test func badParametersAreRefusedWithTheReason() async throws {
        let service = try Self.service()
        func poll(_ query: [String: String], token: String? = RelayPushTests.token) async -> RelayResponse {
            await service.handle(RelayRequest(method: "GET", path: "/v1/spaces/s/changes",
                                              headers: token.map { ["Authorization": "Bearer \($0)"] } ?? [:], query: query))
        }
        #expect(await poll(["wait": "0"], token: nil).status == 401)
        #expect(await poll(["wait": "0"], token: Self.otherToken).status == 403)
        let badVector = await poll(["since": "nothex:3", "wait": "0"])
        #expect(badVector.status == 400)
        #expect(String(decoding: badVector.body, as: UTF8.self).contains("HEX:SEQ"))
        let badWait = await poll(["wait": "-1"])
        #expect(badWait.status == 400)
        #expect(String(decoding: badWait.body, as: UTF8.self).contains("wait"))
        #expect(await service.handle(RelayRequest(method: "POST", path: "/v1/spaces/s/changes",
                                                  headers: ["Authorization": "Bearer \(Self.token)"])).status == 405)
    }

    @Test func theSinceParameterRoundTrips() throws {
        var vector = VersionVector()
        vector[.random()] = 7
        vector[.random()] = 123_456_789
        #expect(try RelayProtocol.parseSince(RelayProtocol.sinceParameter(vector)) == vector)
        #expect(try RelayProtocol.parseSince("") == VersionVector())
    }
}

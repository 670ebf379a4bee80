import Foundation
import NotesCRDT
@testable import NotesSync
import Testing

/// The relay client's logic over a scripted `HTTPCalling`.
struct RelayTransportTests {
    /// Answers with a script of responses, recording the requests.
    final class ScriptedHTTP: HTTPCalling, @unchecked Sendable {
        let lock = NSLock()
        var requests: [HTTPCallRequest] = []
        var answer: (HTTPCallRequest) throws -> HTTPCallResponse

        init(_ answer: @escaping (HTTPCallRequest) throws -> HTTPCallResponse) { self.answer = answer }

        func call(_ request: HTTPCallRequest, maxResponseBytes: Int) async throws -> HTTPCallResponse {
            lock.withLock { requests.append(request) }
            return try answer(request)
        }
    }

    static func page(_ changes: [Change], more: Bool, relay: ReplicaID, version: VersionVector) -> HTTPCallResponse {
        HTTPCallResponse(status: 200, headers: [RelayProtocol.moreHeader: more ? "1" : "0", "Content-Type": RelayProtocol.bundleContentType],
                         body: SyncBundle(sender: relay, senderVersion: version, changes: changes).encoded())
    }

    @Test func receiveFollowsThePagesWithTheCursorAdvanced() async throws {
        var author = Notebook(replicaID: .random(), wallClock: FixedWallClock(1))
        var changes: [Change] = []
        for i in 0 ..< 5 { changes.append(author.createNote(title: "n\(i)").change) }
        let relay = ReplicaID.random()
        let http = ScriptedHTTP { request in
            let asked = try SyncBundle.decode(request.body).senderVersion[author.replicaID]
            let rest = changes.filter { $0.startSeq > asked }
            return Self.page(Array(rest.prefix(2)), more: rest.count > 2, relay: relay, version: author.versionVector)
        }
        let transport = try RelayTransport(url: "http://relay.example/", space: "s", token: "t", http: http)
        let result = try await transport.receive(for: .random(), version: VersionVector())
        #expect(result.bundles.flatMap(\.bundle.changes) == changes)
        #expect(http.requests.count == 3)
        #expect(http.requests.allSatisfy { $0.url == "http://relay.example/v1/spaces/s/sync" && $0.headers["Authorization"] == "Bearer t" })
    }

    @Test func aRelayThatSaysMoreButSendsNothingIsTransient() async throws {
        let http = ScriptedHTTP { _ in Self.page([], more: true, relay: .random(), version: VersionVector()) }
        let transport = try RelayTransport(url: "http://relay", space: "s", token: "t", http: http)
        await #expect(throws: SyncError.self) { _ = try await transport.receive(for: .random(), version: VersionVector()) }
    }

    @Test func sendSplitsAndReturnsTheLastAnswersPages() async throws {
        var author = Notebook(replicaID: .random(), wallClock: FixedWallClock(1))
        var changes: [Change] = []
        for i in 0 ..< 7 { changes.append(author.createNote(title: "n\(i)").change) }
        let http = ScriptedHTTP { _ in Self.page([], more: false, relay: .random(), version: VersionVector()) }
        var transport = try RelayTransport(url: "http://relay", space: "s", token: "t", http: http)
        transport.maxChangesPerRequest = 3
        let result = try await transport.send(SyncBundle(sender: author.replicaID, senderVersion: author.versionVector, changes: changes))
        #expect(result.complete)
        #expect(http.requests.count == 3)
        let sent = try http.requests.flatMap { try SyncBundle.decode($0.body).changes }
        #expect(sent == changes)
    }

    @Test(arguments: [(401, SyncError.Code.rejected), (403, .rejected), (413, .rejected), (400, .rejected),
                      (408, .transient), (429, .transient), (500, .transient), (503, .transient)])
    func statusCodesMapToRetryOrRefusal(status: Int, expected: SyncError.Code) async throws {
        let http = ScriptedHTTP { _ in HTTPCallResponse(status: status, body: Array("{\"error\":\"because\"}".utf8)) }
        let transport = try RelayTransport(url: "http://relay", space: "s", token: "t", http: http)
        do {
            _ = try await transport.remoteVersion(for: .random())
            Issue.record("no error for \(status)")
        } catch let error as SyncError {
            #expect(error.code == expected)
            #expect(error.message.contains("because"))
        }
    }

    @Test func aNetworkFailureAndADamagedAnswerAreTransient() async throws {
        struct Unreachable: Error {}
        let down = ScriptedHTTP { _ in throw Unreachable() }
        let transport = try RelayTransport(url: "http://relay", space: "s", token: "t", http: down)
        await #expect(throws: SyncError.self) { _ = try await transport.receive(for: .random(), version: VersionVector()) }
        let damaged = ScriptedHTTP { _ in
            var response = Self.page([], more: false, relay: .random(), version: VersionVector())
            response.body[response.body.count - 1] ^= 1
            return response
        }
        do {
            _ = try await RelayTransport(url: "http://relay", space: "s", token: "t", http: damaged).receive(for: .random(), version: VersionVector())
            Issue.record("a damaged answer was accepted")
        } catch let error as SyncError {
            #expect(error.code == .transient)
        }
    }

    @Test(arguments: ["ftp://relay", "relay.example", "http://", ""])
    func badURLsAreRefused(url: String) {
        #expect(throws: SyncError.self) { _ = try RelayTransport(url: url, space: "s", token: "t", http: ScriptedHTTP { _ in HTTPCallResponse(status: 200) }) }
    }

    /// What a server says in a refusal reaches the terminal as one printable line: escapes that
    /// would move the cursor or recolor it are written out, a web server's HTML page is named.
    @Test func aServersMessageCannotBreakTheTerminal() {
        let hostile = RelayTransport.message(Array("denied\u{1B}[2J\u{1B}]0;owned\u{07}\nsecond line\r\u{202E}txt.exe\u{9B}".utf8))
        #expect(!hostile.unicodeScalars.contains { $0.value < 0x20 || (0x7F ..< 0xA0).contains($0.value) || $0 == "\u{202E}" }, "\(hostile)")
        #expect(hostile.hasPrefix("denied\\u{1B}[2J"), "\(hostile)")
        #expect(hostile.contains("second line"))
        let json = RelayTransport.message(Array(#"{"error": "bad\u001b[31m token"}"#.utf8))
        #expect(json == "bad\\u{1B}[31m token")
        let page = RelayTransport.message(Array("\n<!DOCTYPE HTML>\n<html><head><title>Error response</title></head><body>404</body></html>".utf8))
        #expect(page.hasPrefix("an HTML page (\"Error response\"), not a crdt-sync relay's answer"), "\(page)")
        let long = RelayTransport.message(Array(repeating: UInt8(ascii: "x"), count: 10_000))
        #expect(long.count == 301 && long.hasSuffix("…"))
        #expect(RelayTransport.message([]) == "(no message)")
    }
}

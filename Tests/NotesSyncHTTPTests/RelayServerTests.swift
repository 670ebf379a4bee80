import AsyncHTTPClient
import Foundation
import NotesCRDT
import NotesStore
import NotesRelay
import NotesRelayServer
@testable import NotesSync
@testable import NotesSyncHTTP
import Testing

/// The relay over a live socket: endpoints, authentication, limits, errors.
struct RelayServerTests {
    @Test func healthz() async throws {
        try await withRelay { relay, client in
            let response = try await rawRequest(client, "GET", "\(relay.url)/healthz")
            #expect(response.status == 200)
            #expect(response.body.text == "ok\n")
        }
    }

    @Test func statusOfAnEmptySpace() async throws {
        try await withRelay { relay, client in
            let response = try await rawRequest(client, "GET", "\(relay.url)/v1/spaces/notes/status", token: notesToken)
            #expect(response.status == 200)
            let status = try JSONDecoder().decode(RelayStatusJSON.self, from: Data(response.body))
            #expect(status.space == "notes")
            #expect(status.version.isEmpty)
            #expect(status.changes == 0)
        }
    }

    /// No token or a wrong one: 401; another space's token: 403; for a space that holds data and
    /// for one that has never been used or configured, with the same answers.
    @Test func authentication() async throws {
        try await withRelay { relay, client in
            // Put something in "notes" so it exists.
            let a = try NoteStore.openInMemory()
            try a.createNote(title: "secret")
            let transport = try client.transport(url: relay.url, space: "notes", token: notesToken)
            _ = try await SyncEngine(retry: RetryPolicy(maxAttempts: 1)).sync(a, over: transport)

            let empty = SyncBundle(sender: .random(), senderVersion: VersionVector(), changes: []).encoded()
            var answers: [String: [String: (Int, String)]] = [:]
            for space in ["notes", "team", "nosuchspace"] {
                for (name, authorization) in [("none", nil), ("wrong", "Bearer not-a-token"), ("basic", "Basic dXNlcjpwYXNz"),
                                              ("bearer-empty", "Bearer "), ("notes", "Bearer \(notesToken)"), ("team", "Bearer \(teamToken)"),
                                              ("prefix", "Bearer \(notesToken.dropLast())"), ("lowercase-scheme", "bearer \(notesToken)")] as [(String, String?)] {
                    let status = try await rawRequest(client, "GET", "\(relay.url)/v1/spaces/\(space)/status", authorization: authorization)
                    let sync = try await rawRequest(client, "POST", "\(relay.url)/v1/spaces/\(space)/sync", authorization: authorization, body: empty)
                    #expect(status.status == sync.status, "\(space) \(name)")
                    answers[space, default: [:]][name] = (sync.status, sync.body.text)
                }
            }
            for space in ["notes", "team", "nosuchspace"] {
                let row = answers[space]!
                #expect(row["none"]!.0 == 401)
                #expect(row["wrong"]!.0 == 401)
                #expect(row["basic"]!.0 == 401)
                #expect(row["bearer-empty"]!.0 == 401)
                #expect(row["prefix"]!.0 == 401)
            }
            #expect(answers["notes"]!["notes"]!.0 == 200)
            #expect(answers["notes"]!["lowercase-scheme"]!.0 == 200)
            #expect(answers["notes"]!["team"]!.0 == 403)
            #expect(answers["team"]!["notes"]!.0 == 403)
            #expect(answers["team"]!["team"]!.0 == 200)
            #expect(answers["nosuchspace"]!["notes"]!.0 == 403)
            #expect(answers["nosuchspace"]!["team"]!.0 == 403)
            // A space with data and one without answer refusals identically.
            for name in ["none", "wrong", "team"] {
                #expect(answers["notes"]![name]!.1 == answers["nosuchspace"]![name == "team" ? "notes" : name]!.1)
            }
            // A 401 names the scheme.
            let unauthenticated = try await rawRequest(client, "GET", "\(relay.url)/v1/spaces/notes/status")
            #expect(unauthenticated.headers["www-authenticate"] == "Bearer realm=\"crdt-sync\"")

            // Through the transport: a refusal is .rejected, with the relay's message, and not retried.
            let retries = Counter()
            let engine = SyncEngine(retry: RetryPolicy(maxAttempts: 5, baseDelayMilliseconds: 1), onRetry: { _, _, _ in retries.increment() })
            for (space, token, code) in [("notes", "wrong-token", 401), ("team", notesToken, 403)] {
                let bad = try client.transport(url: relay.url, space: space, token: token)
                do {
                    _ = try await engine.sync(a, over: bad)
                    Issue.record("a bad token was accepted")
                } catch let error as SyncError {
                    #expect(error.code == .rejected)
                    #expect(error.message.contains("\(code)"))
                }
            }
            #expect(retries.value == 0)
        }
    }

    @Test func requestTooLargeGets413() async throws {
        try await withRelay(maxRequestBytes: 2048) { relay, client in
            let a = try NoteStore.openInMemory()
            // Text that does not compress (bundles deflate their bodies), so the request is large.
            var rng = SplitMix64(seed: 413)
            let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .")
            let body = String((0 ..< 8000).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] })
            try a.createNote(title: "big", body: body)
            let bundle = SyncBundle(sender: a.replicaID, senderVersion: try a.versionVector, changes: try a.changes(since: VersionVector()))
            let response = try await rawRequest(client, "POST", "\(relay.url)/v1/spaces/notes/sync", token: notesToken, body: bundle.encoded())
            #expect(response.status == 413)
            #expect(RelayTransport.message(response.body).contains("2048 bytes"))
            // Unauthenticated large bodies are refused as unauthenticated first (the body is not read).
            let anonymous = try await rawRequest(client, "POST", "\(relay.url)/v1/spaces/notes/sync", body: bundle.encoded())
            #expect(anonymous.status == 401)
            // The transport reports it as a refusal, not retried.
            let transport = try client.transport(url: relay.url, space: "notes", token: notesToken)
            await #expect(throws: SyncError.self) { _ = try await SyncEngine().sync(a, over: transport) }
            let status = try await transport.status()
            #expect(status.changes == 0)
        }
    }

    @Test(arguments: [
        ("not a bundle", Array("hello, relay".utf8), "wrong magic"),
        ("empty body", [], "it is empty"),
        ("cut short", Array(SyncBundle(sender: .random(), senderVersion: VersionVector(), changes: []).encoded().dropLast(5)), "checksum"),
        ("damaged", { var bytes = SyncBundle(sender: .random(), senderVersion: VersionVector(), changes: []).encoded(); bytes[30] ^= 0xFF; return bytes }(), "checksum"),
    ] as [(String, [UInt8], String)])
    func malformedBundleGets400(name: String, body: [UInt8], expected: String) async throws {
        try await withRelay { relay, client in
            let response = try await rawRequest(client, "POST", "\(relay.url)/v1/spaces/notes/sync", token: notesToken, body: body)
            #expect(response.status == 400, "\(name)")
            let message = RelayTransport.message(response.body)
            #expect(message.contains("not a valid bundle"), "\(name): \(message)")
            #expect(message.contains(expected), "\(name): \(message)")
        }
    }

    /// A method an endpoint does not take gets 405 with the reason, as HTTP.md says (the router
    /// answered 404 with no body).
    @Test func aWrongMethodGets405() async throws {
        try await withRelay { relay, client in
            for (method, path) in [("GET", "/v1/spaces/notes/sync"), ("DELETE", "/v1/spaces/notes/status"), ("PUT", "/v1/spaces/notes/changes"),
                                   ("POST", "/healthz"), ("OPTIONS", "/v1/spaces/notes/sync")] {
                let response = try await rawRequest(client, method, "\(relay.url)\(path)", token: notesToken)
                #expect(response.status == 405, "\(method) \(path): \(response.status)")
                #expect(response.body.text.contains(method == "POST" ? "use GET" : "is not allowed"), "\(method) \(path): \(response.body.text)")
            }
        }
    }

    @Test func unknownPathGets404() async throws {
        try await withRelay { relay, client in
            let response = try await rawRequest(client, "GET", "\(relay.url)/v1/nothing", token: notesToken)
            #expect(response.status == 404)
        }
    }
}

final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}

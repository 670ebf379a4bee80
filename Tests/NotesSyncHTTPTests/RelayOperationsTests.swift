import Foundation
import Logging
import NotesCRDT
import NotesRelay
import NotesRelayServer
import NotesStore
import NotesSync
@testable import NotesSyncHTTP
import Synchronization
import Testing

/// Running a relay: its metrics, its logs (never a token nor a note's text) and HTTPS.
@Suite(.serialized)
struct RelayOperationsTests {
    let engine = SyncEngine(retry: RetryPolicy(maxAttempts: 1))

    @Test func metricsCountRequestsSyncsAndWhatIsStored() async throws {
        try await withRelay { relay, client in
            let a = try NoteStore.openInMemory(), b = try NoteStore.openInMemory()
            _ = try a.createNote(title: "one", body: "hello")
            _ = try b.createNote(title: "two", body: "world")
            let transport = try client.transport(url: relay.url, space: "notes", token: notesToken)
            for store in [a, b, a] { _ = try await engine.sync(store, over: transport) }
            _ = try await rawRequest(client, "POST", relay.url + "/v1/spaces/notes/sync", token: "wrong-token", body: [1, 2, 3])

            let (status, headers, body) = try await rawRequest(client, "GET", relay.url + "/metrics")
            #expect(status == 200)
            #expect(headers["content-type"]?.hasPrefix("text/plain; version=0.0.4") == true)
            let text = body.text
            func value(_ series: String) -> Double? {
                text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.split(separator: " ").last!) }
            }
            #expect(value(#"crdt_sync_relay_requests_total{method="POST",route="/v1/spaces/{space}/sync",status="200"}"#) == 3)
            #expect(value(#"crdt_sync_relay_requests_total{method="POST",route="/v1/spaces/{space}/sync",status="401"}"#) == 1)
            #expect(value("crdt_sync_relay_sync_duration_seconds_count") == 4)
            #expect(value("crdt_sync_relay_spaces") == 1)
            #expect(value("crdt_sync_relay_stored_changes") == 2)
            #expect((value("crdt_sync_relay_stored_bytes") ?? 0) > 0)
            #expect((value("crdt_sync_relay_request_bytes_total") ?? 0) > 0)
            #expect((value("crdt_sync_relay_response_bytes_total") ?? 0) > 0)
            #expect((value("crdt_sync_relay_open_connections") ?? 0) >= 1)
            // Labels are route patterns: a space's name or a token never shows.
            #expect(!text.contains("notes\""))
            #expect(!text.contains(notesToken))
        }
    }

    @Test func metricsCanRequireAToken() async throws {
        var configuration = RelayServerConfiguration()
        configuration.metricsToken = "scrape-me"
        try await withRelay(server: configuration) { relay, client in
            #expect(try await rawRequest(client, "GET", relay.url + "/metrics").status == 401)
            #expect(try await rawRequest(client, "GET", relay.url + "/metrics", token: "nope").status == 401)
            let allowed = try await rawRequest(client, "GET", relay.url + "/metrics", token: "scrape-me")
            #expect(allowed.status == 200)
            #expect(allowed.body.text.contains("crdt_sync_relay_requests_total"))
        }
    }

    @Test func logsAreStructuredAndHoldNoTokenNorNoteText() async throws {
        let lines = Mutex<[String]>([])
        var logger = Logger(label: "crdt-sync.relay") { label in
            JSONLogHandler(label: label, level: .trace) { line in lines.withLock { $0.append(line) } }
        }
        logger.logLevel = .trace
        let service = RelayService(storage: try SQLiteRelayStorage.inMemory(), tokens: try testTokens())
        let server = RelayServer(service: service, configuration: RelayServerConfiguration(host: "127.0.0.1", port: 0), logger: logger)
        let relay = try await server.start()
        let client = HTTPRelayClient()
        do {
            let a = try NoteStore.openInMemory()
            _ = try a.createNote(title: "Diary entry", body: "the secret text of a note")
            _ = try await engine.sync(a, over: try client.transport(url: relay.url, space: "notes", token: notesToken))
            _ = try await rawRequest(client, "GET", relay.url + "/v1/spaces/notes/status?token=\(notesToken)", token: notesToken)
        }
        try? await client.shutdown()
        await relay.stop()
        let logged = lines.withLock { $0 }
        #expect(logged.count >= 2)
        for line in logged {
            #expect(!line.contains(notesToken), "\(line)")
            #expect(!line.contains("secret text"), "\(line)")
            #expect(!line.contains("Diary"), "\(line)")
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object?["level"] is String && object?["time"] is String && object?["message"] is String, "\(line)")
        }
        let sync = try #require(logged.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .first { $0["path"] as? String == "/v1/spaces/notes/sync" })
        #expect(sync["method"] as? String == "POST")
        #expect(sync["status"] as? String == "200")
        #expect(sync["ms"] is String)
    }

    @Test func httpsWithATrustedCertificateSyncsAndAnUntrustedOneIsRefused() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let cert = folder.appendingPathComponent("cert.pem").path, key = folder.appendingPathComponent("key.pem").path
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        openssl.arguments = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "2",
                             "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
        openssl.standardOutput = FileHandle.nullDevice
        openssl.standardError = FileHandle.nullDevice
        try openssl.run()
        openssl.waitUntilExit()
        try #require(openssl.terminationStatus == 0, "openssl made a certificate")

        let service = RelayService(storage: try SQLiteRelayStorage.inMemory(), tokens: try testTokens())
        let server = RelayServer(service: service, configuration: RelayServerConfiguration(
            host: "127.0.0.1", port: 0, tls: RelayTLSFiles(certificateChain: cert, privateKey: key)), logger: quietLogger)
        let relay = try await server.start()
        let url = "https://127.0.0.1:\(relay.port)"
        let trusting = HTTPRelayClient(trustedCertificatesFile: cert)
        let plain = HTTPRelayClient()
        let outcome: Result<Void, any Error>
        do {
            let a = try NoteStore.openInMemory(), b = try NoteStore.openInMemory()
            _ = try a.createNote(title: "over tls", body: "hello")
            for store in [a, b] { _ = try await engine.sync(store, over: try trusting.transport(url: url, space: "notes", token: notesToken)) }
            #expect(try b.digest() == a.digest())
            await #expect(throws: (any Error).self) {
                _ = try await engine.sync(b, over: try plain.transport(url: url, space: "notes", token: notesToken))
            }
            outcome = .success(())
        } catch {
            outcome = .failure(error)
        }
        try? await trusting.shutdown()
        try? await plain.shutdown()
        await relay.stop()
        try outcome.get()

        // A key that is not a key is named at start.
        let broken = RelayServer(service: service, configuration: RelayServerConfiguration(
            host: "127.0.0.1", port: 0, tls: RelayTLSFiles(certificateChain: cert, privateKey: cert)), logger: quietLogger)
        #expect(throws: RelayTLSError.self) { _ = try broken.application() }
    }
}

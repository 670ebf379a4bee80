import AsyncHTTPClient
import Foundation
import Hummingbird
import Logging
import NotesCRDT
import NotesStore
import NotesSync
import NotesRelay
import NotesRelayServer
@testable import NotesSyncHTTP

let notesToken = "tok-notes-8f3a1c"
let teamToken = "tok-team-27be90"

/// Tokens for two spaces: "notes" and "team".
func testTokens() throws -> RelayTokens {
    try RelayTokens([(space: "notes", token: notesToken), (space: "team", token: teamToken)])
}

let quietLogger: Logger = {
    var logger = Logger(label: "test.relay", factory: { _ in SwiftLogNoOpLogHandler() })
    logger.logLevel = .critical
    return logger
}()

func temporaryFolder() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("crdt-sync-http-tests-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// Runs `body` with a live relay on 127.0.0.1 (a free port) and an HTTP client, stopping both after.
func withRelay<T>(store: SQLiteRelayStorage? = nil, port: Int = 0, maxRequestBytes: Int = 16 << 20,
                  page: RelayPageLimits = RelayPageLimits(), server configuration: RelayServerConfiguration? = nil,
                  _ body: (RunningRelay, HTTPRelayClient) async throws -> T) async throws -> T {
    let storage = try store ?? SQLiteRelayStorage.inMemory()
    let service = RelayService(storage: storage, tokens: try testTokens(), limits: RelayLimits(maxRequestBytes: maxRequestBytes, page: page))
    var serverConfiguration = configuration ?? RelayServerConfiguration()
    serverConfiguration.host = "127.0.0.1"
    serverConfiguration.port = port
    let server = RelayServer(service: service, configuration: serverConfiguration, logger: quietLogger)
    let relay = try await server.start()
    let client = HTTPRelayClient()
    let result: Result<T, any Error>
    do { result = .success(try await body(relay, client)) } catch { result = .failure(error) }
    try? await client.shutdown()
    await relay.stop()
    return try result.get()
}

/// A raw request to the relay: (status, headers, body).
func rawRequest(_ relayClient: HTTPRelayClient, _ method: String, _ url: String, token: String? = nil,
                authorization: String? = nil, body: [UInt8]? = nil) async throws -> (status: Int, headers: [String: String], body: [UInt8]) {
    var request = HTTPClientRequest(url: url)
    request.method = .init(rawValue: method)
    if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
    if let authorization { request.headers.add(name: "Authorization", value: authorization) }
    if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
    let response = try await relayClient.client.execute(request, timeout: .seconds(60))
    let bytes = try await response.body.collect(upTo: 64 << 20)
    var headers: [String: String] = [:]
    for (name, value) in response.headers { headers[name.lowercased()] = value }
    return (Int(response.status.code), headers, Array(buffer: bytes))
}

extension Array where Element == UInt8 {
    var text: String { String(decoding: self, as: UTF8.self) }
}

/// Counts the requests made through it.
final class CountingHTTP: HTTPCalling, @unchecked Sendable {
    let base: any HTTPCalling
    private let lock = NSLock()
    private var requests = 0

    init(base: any HTTPCalling) { self.base = base }

    var count: Int { lock.withLock { requests } }

    func call(_ request: HTTPCallRequest, maxResponseBytes: Int) async throws -> HTTPCallResponse {
        lock.withLock { requests += 1 }
        return try await base.call(request, maxResponseBytes: maxResponseBytes)
    }
}

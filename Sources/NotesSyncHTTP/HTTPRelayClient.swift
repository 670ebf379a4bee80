import AsyncHTTPClient
import NIOSSL
import NIOCore
import NIOHTTP1
import NotesCRDT
import NotesSync

/// Makes the relay client's HTTP requests with AsyncHTTPClient: an app's way to sync with a
/// `crdt-sync serve` relay.
///
/// ```swift
/// let client = HTTPRelayClient()
/// let transport = try client.transport(url: "https://relay.example", space: "alice", token: token)
/// let report = try await SyncEngine().sync(store, over: transport)
/// try await client.shutdown()
/// ```
public final class HTTPRelayClient: HTTPCalling {
    /// The underlying client.
    public let client: HTTPClient
    /// How long one request may take, in seconds.
    public let timeoutSeconds: Int64
    private let ownsClient: Bool

    /// A client that fails fast when the relay is down (so the sync engine's backoff, not the
    /// client's, decides when to try again), with up to `maxConnections` connections per host.
    ///
    /// - Parameter trustedCertificatesFile: a PEM file of certificates to trust besides the
    ///   system's, for a relay whose certificate a private CA signed (or a self-signed one).
    public init(maxConnections: Int = 8, connectTimeoutSeconds: Int64 = 5, timeoutSeconds: Int64 = 30,
                trustedCertificatesFile: String? = nil) {
        var configuration = HTTPClient.Configuration()
        if let trustedCertificatesFile {
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.additionalTrustRoots = [.file(trustedCertificatesFile)]
            configuration.tlsConfiguration = tls
        }
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: maxConnections)
        configuration.connectionPool.retryConnectionEstablishment = false
        // A read that waits longer than a request may take ends it: a relay that stops sending
        // mid-answer is an error, not a sync that never returns.
        configuration.timeout = .init(connect: .seconds(connectTimeoutSeconds), read: .seconds(timeoutSeconds))
        configuration.decompression = .disabled
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        self.timeoutSeconds = timeoutSeconds
        ownsClient = true
    }

    /// Uses an existing AsyncHTTPClient (which the caller shuts down).
    public init(client: HTTPClient, timeoutSeconds: Int64 = 30) {
        self.client = client
        self.timeoutSeconds = timeoutSeconds
        ownsClient = false
    }

    /// A relay transport that makes its requests through this client.
    public func transport(url: String, space: String, token: String) throws -> RelayTransport {
        try RelayTransport(url: url, space: space, token: token, http: self)
    }

    /// Shuts the client down (when this object made it).
    public func shutdown() async throws {
        if ownsClient { try await client.shutdown() }
    }

    /// Sends `request` and returns the answer; no answer, or a body over `maxResponseBytes`, throws
    /// a transient `SyncError`.
    public func call(_ request: HTTPCallRequest, maxResponseBytes: Int) async throws -> HTTPCallResponse {
        var outgoing = HTTPClientRequest(url: request.url)
        outgoing.method = HTTPMethod(rawValue: request.method)
        for (name, value) in request.headers.sorted(by: { $0.key < $1.key }) { outgoing.headers.add(name: name, value: value) }
        if !request.body.isEmpty || request.method == "POST" { outgoing.body = .bytes(ByteBuffer(bytes: request.body)) }
        do {
            let started = NIODeadline.now()
            let response = try await client.execute(outgoing, deadline: started + .seconds(timeoutSeconds))
            let body = try await HTTPRelayClient.collect(response.body, upTo: maxResponseBytes, started: started,
                                                         timeoutSeconds: timeoutSeconds)
            var headers: [String: String] = [:]
            for header in response.headers { headers[header.name.lowercased()] = header.value }
            return HTTPCallResponse(status: Int(response.status.code), headers: headers, body: Array(buffer: body))
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw SyncError(.transient, "cannot reach the relay: \(HTTPRelayClient.describe(error))")
        }
    }

    /// The slowest answer taken: a request gets `timeoutSeconds`, and a second more for every
    /// this many bytes of its body, so a large page over a slow link arrives and a relay that
    /// trickles its answer a byte at a time is cut off.
    static let minimumBytesPerSecond = 64 << 10

    /// The body, read within the time above. The deadline is checked as each part arrives, and a
    /// watchdog ends a read that stalls for good (with a client the caller made, whose reads may
    /// have no timeout of their own) once the largest body would have had its time.
    static func collect(_ body: HTTPClientResponse.Body, upTo maxBytes: Int, started: NIODeadline,
                        timeoutSeconds: Int64, now: @escaping @Sendable () -> NIODeadline = { .now() },
                        sleep: @escaping @Sendable (TimeAmount) async throws -> Void = { try await Task.sleep(nanoseconds: UInt64(max(0, $0.nanoseconds))) })
        async throws -> ByteBuffer {
        let allowance = TimeAmount.seconds(timeoutSeconds)
        let nanosPerByte = 1_000_000_000 / Int64(minimumBytesPerSecond)
        let cap = started + allowance + .nanoseconds(Int64(maxBytes) * nanosPerByte)
        return try await withThrowingTaskGroup(of: ByteBuffer?.self) { group in
            group.addTask {
                var buffer = ByteBuffer()
                for try await part in body {
                    guard part.readableBytes <= maxBytes - buffer.readableBytes else { throw AnswerError.tooLarge(maxBytes) }
                    buffer.writeImmutableBuffer(part)
                    if now() > started + allowance + .nanoseconds(Int64(buffer.readableBytes) * nanosPerByte) {
                        throw AnswerError.tooSlow(buffer.readableBytes)
                    }
                }
                return buffer
            }
            group.addTask {
                try await sleep(cap - now())
                return nil
            }
            defer { group.cancelAll() }
            guard let buffer = try await group.next() ?? nil else { throw AnswerError.tooSlow(nil) }
            return buffer
        }
    }

    /// Why an answer's body was not taken.
    enum AnswerError: Error, CustomStringConvertible {
        case tooLarge(Int)
        case tooSlow(Int?)

        var description: String {
            switch self {
            case .tooLarge(let limit): "the answer is larger than the client accepts (\(limit) bytes)"
            case .tooSlow(let bytes?): "the relay's answer came too slowly (\(bytes) bytes, under \(HTTPRelayClient.minimumBytesPerSecond / 1024) KiB/s after the request's time)"
            case .tooSlow(nil): "the relay's answer stalled"
            }
        }
    }

    /// A short reason for a network error.
    static func describe(_ error: any Error) -> String {
        if let error = error as? AnswerError { return error.description }
        if let error = error as? HTTPClientError {
            switch error {
            case .connectTimeout: return "the connection timed out"
            case .deadlineExceeded, .readTimeout, .writeTimeout: return "the request timed out"
            case .remoteConnectionClosed: return "the relay closed the connection"
            default: return "\(error)"
            }
        }
        let text = String(describing: error)
        if text.contains("Connection refused") { return "connection refused (is the relay running?)" }
        if text.contains("Connection reset") { return "the connection was reset" }
        if text.contains("tooManyBytes") || text.contains("TooManyBytes") { return "the answer is larger than the client accepts" }
        return text
    }
}

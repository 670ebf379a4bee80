import Foundation
import Hummingbird
import Logging
import NotesCRDT
import NotesSync
import ServiceLifecycle

/// How a relay listens and what it accepts.
public struct RelayConfiguration: Sendable {
    /// The address to listen on; loopback unless told otherwise.
    public var host: String
    /// The port; 0 picks a free one (read it back from `RunningRelay.port`).
    public var port: Int
    /// The bearer tokens, per space.
    public var tokens: RelayTokens
    /// Request bodies larger than this get 413.
    public var maxRequestBytes: Int
    /// How large one page of an answer may be.
    public var page: RelayPageLimits

    public init(host: String = "127.0.0.1", port: Int = 8080, tokens: RelayTokens,
                maxRequestBytes: Int = 16 << 20, page: RelayPageLimits = RelayPageLimits()) {
        self.host = host
        self.port = port
        self.tokens = tokens
        self.maxRequestBytes = maxRequestBytes
        self.page = page
    }
}

/// Names shared by the relay and its client.
public enum RelayProtocol {
    /// Response header: "1" when the client lacks more than the page it got (post again with the
    /// vector advanced past the page), "0" otherwise.
    public static let moreHeader = "X-CRDT-More"
    /// Response header: how many changes of the request were new to the relay and stored.
    public static let storedHeader = "X-CRDT-Stored"
    /// The media type of a bundle.
    public static let bundleContentType = "application/vnd.crdt-sync.bundle"
}

/// The JSON of `GET /v1/spaces/{space}/status`.
public struct RelayStatusJSON: Codable, Sendable, Hashable {
    public var space: String
    /// Replica hex id -> highest seq held contiguously.
    public var version: [String: UInt64]
    public var authors: Int
    public var changes: Int
    public var operations: UInt64
    public var bytes: Int

    public init(_ status: RelaySpaceStatus) {
        space = status.space
        version = Dictionary(uniqueKeysWithValues: status.version.entries.map { ($0.key.description, $0.value) })
        authors = status.authors
        changes = status.changes
        operations = status.operations
        bytes = status.bytes
    }

    /// The version vector, parsed back.
    public func versionVector() throws -> VersionVector {
        var vector = VersionVector()
        for (hex, seq) in version {
            guard let replica = ReplicaID(hex: hex) else {
                throw SyncError(.malformed, "the relay's status names a replica \"\(hex)\" that is not a replica id")
            }
            vector[replica] = seq
        }
        return vector
    }
}

/// The sync relay: stores changes per space and answers "here is my version vector and my new
/// changes; give me what I lack", in pages. Endpoints (Docs/HTTP.md):
///
/// - `POST /v1/spaces/{space}/sync`: the body is a bundle (its senderVersion is the client's
///   vector); the answer is a bundle of what the client lacks, with `X-CRDT-More: 1` when there is
///   more than one page;
/// - `GET /v1/spaces/{space}/status`: the space's version vector and counts, as JSON;
/// - `GET /healthz`.
///
/// Every `/v1` request needs `Authorization: Bearer TOKEN`: no token or an unknown one gets 401,
/// a token of another space 403, whether or not the space holds anything.
public struct RelayServer: Sendable {
    public let store: RelayStore
    public let configuration: RelayConfiguration
    public let logger: Logger

    public init(store: RelayStore, configuration: RelayConfiguration, logger: Logger = Logger(label: "crdt-sync.relay")) {
        self.store = store
        self.configuration = configuration
        self.logger = logger
    }

    /// The router, with the access log in front; usable without a socket.
    public func router() -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self)
        router.add(middleware: AccessLogMiddleware(logger: logger))
        router.get("/healthz") { _, _ in
            RelayServer.text(.ok, "ok")
        }
        router.get("/v1/spaces/:space/status") { request, context in
            try await self.status(request, context)
        }
        router.post("/v1/spaces/:space/sync") { request, context in
            try await self.sync(request, context)
        }
        return router
    }

    /// The Hummingbird application; `onRunning` gets the bound port.
    public func application(onRunning: @escaping @Sendable (Int) async -> Void = { _ in })
        -> some ApplicationProtocol {
        Application(
            router: router(),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: nil),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? 0) },
            logger: logger
        )
    }

    /// Starts listening and returns once the socket is bound.
    public func start() async throws -> RunningRelay {
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        let app = application { port in continuation.yield(port) }
        let group = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [], logger: logger))
        let task = Task {
            defer { continuation.finish() }
            try await group.run()
        }
        for await port in stream {
            return RunningRelay(port: port, group: group, task: task)
        }
        // The server stopped before it was running: report why.
        try await task.value
        throw SyncError(.io, "the relay stopped before it was listening")
    }

    // MARK: Handlers

    private func authorize(_ request: Request, _ context: BasicRequestContext) throws -> (space: String, refusal: Response?) {
        let space = try context.parameters.require("space")
        let token = RelayServer.bearerToken(request.headers[.authorization])
        switch configuration.tokens.authorize(token: token, space: space) {
        case .allowed:
            return (space, nil)
        case .unauthenticated:
            var response = RelayServer.text(.unauthorized, token == nil
                ? "missing bearer token (send Authorization: Bearer TOKEN)"
                : "the bearer token is not valid")
            response.headers[.wwwAuthenticate] = "Bearer realm=\"crdt-sync\""
            return (space, response)
        case .forbidden:
            return (space, RelayServer.text(.forbidden, "the bearer token is not valid for this space"))
        }
    }

    func status(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let (space, refusal) = try authorize(request, context)
        if let refusal { return refusal }
        let status: RelaySpaceStatus
        do {
            status = try await store.status(space: space)
        } catch let error as SyncError {
            logger.error("relay store failed: \(error.message)")
            return RelayServer.text(.serviceUnavailable, "the relay could not read its store; try again")
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var data = try encoder.encode(RelayStatusJSON(status))
        data.append(0x0A)
        return Response(status: .ok, headers: [.contentType: "application/json"],
                        body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    func sync(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let (space, refusal) = try authorize(request, context)
        if let refusal { return refusal }
        let limit = configuration.maxRequestBytes
        if let declared = request.headers[.contentLength].flatMap(Int.init), declared > limit {
            return RelayServer.tooLarge(limit)
        }
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: limit)
        } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
            return RelayServer.tooLarge(limit)
        }
        let bundle: SyncBundle
        do {
            bundle = try SyncBundle.decode(Array(buffer: body))
        } catch let error as SyncError {
            return RelayServer.text(.badRequest, "the request body is not a valid bundle: \(error.message)")
        }
        let exchange: RelayExchange
        do {
            exchange = try await store.exchange(space: space, incoming: bundle.changes, clientVersion: bundle.senderVersion,
                                                limits: configuration.page)
        } catch let error as SyncError {
            logger.error("relay store failed: \(error.message)")
            return RelayServer.text(.serviceUnavailable, "the relay could not store the request; try again")
        }
        let reply = SyncBundle(sender: store.relayReplica(for: space), senderVersion: exchange.version, changes: exchange.changes)
        var headers: HTTPFields = [.contentType: RelayProtocol.bundleContentType]
        headers[.init(RelayProtocol.moreHeader)!] = exchange.more ? "1" : "0"
        headers[.init(RelayProtocol.storedHeader)!] = String(exchange.stored)
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: reply.encoded())))
    }

    // MARK: Helpers

    /// The token of an `Authorization: Bearer TOKEN` header (the scheme is case-insensitive).
    static func bearerToken(_ header: String?) -> String? {
        guard let header else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = String(parts[1]).trimmingSpaces
        return token.isEmpty ? nil : token
    }

    static func tooLarge(_ limit: Int) -> Response {
        text(.contentTooLarge, "the request body is larger than this relay accepts (\(limit) bytes); send fewer changes per request")
    }

    /// A JSON error or plain answer: `{"error": "..."}` for errors, the text for 2xx.
    static func text(_ status: HTTPResponse.Status, _ message: String) -> Response {
        if (200 ..< 300).contains(status.code) {
            return Response(status: status, headers: [.contentType: "text/plain; charset=utf-8"],
                            body: .init(byteBuffer: ByteBuffer(string: message + "\n")))
        }
        let data = (try? JSONEncoder().encode(["error": message])) ?? Data()
        return Response(status: status, headers: [.contentType: "application/json"],
                        body: .init(byteBuffer: ByteBuffer(bytes: data + [0x0A])))
    }
}

/// A relay listening on a socket, until `stop()`.
public struct RunningRelay: Sendable {
    /// The port it is bound to.
    public let port: Int
    let group: ServiceGroup
    let task: Task<Void, any Error>

    /// The base URL of the relay (`http://127.0.0.1:PORT`).
    public var url: String { "http://127.0.0.1:\(port)" }

    /// Stops accepting connections, lets requests in progress finish, and waits until the server
    /// has shut down.
    public func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await task.value
    }
}

/// Logs every request: method, path, status and duration. Never headers (the token is in one),
/// never the query string.
struct AccessLogMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        do {
            let response = try await next(request, context)
            log(request, status: response.status.code, since: start)
            return response
        } catch let error as any HTTPResponseError {
            log(request, status: error.status.code, since: start)
            throw error
        } catch {
            log(request, status: 500, since: start)
            throw error
        }
    }

    private func log(_ request: Request, status: Int, since start: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - start
        let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        let level: Logger.Level = status >= 500 ? .error : .info
        logger.log(level: level, "\(request.method) \(request.uri.path) \(status) \(String(format: "%.1f", milliseconds)) ms")
    }
}

import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import Logging
import NIOCore
import NotesRelay
import NotesSync
import ServiceLifecycle
import Synchronization

/// How a relay server listens and what it tolerates from slow or greedy clients.
public struct RelayServerConfiguration: Sendable {
    /// The address to listen on; loopback unless told otherwise.
    public var host: String
    /// The port; 0 picks a free one (read it back from `RunningRelay.port`).
    public var port: Int
    /// A connection that sends no complete request part (its headers, say) for this long is
    /// closed, as is an idle kept-alive connection.
    public var idleTimeoutSeconds: Int64
    /// A request whose body has not arrived whole within this long gets 408.
    public var bodyTimeoutSeconds: Int64
    /// At most this many open connections from one client address; more are closed at once.
    public var maxConnectionsPerAddress: Int
    /// At most this many open connections in all; more wait in the listen backlog.
    public var maxConnections: Int
    /// HTTPS: the certificate chain and private key (PEM files); nil serves plain HTTP.
    public var tls: RelayTLSFiles?
    /// When set, `GET /metrics` requires `Authorization: Bearer` with this token; else it is open.
    public var metricsToken: String?

    /// A configuration; the defaults suit a relay behind a proxy on a small machine.
    public init(host: String = "127.0.0.1", port: Int = 8080, idleTimeoutSeconds: Int64 = 15, bodyTimeoutSeconds: Int64 = 60,
                maxConnectionsPerAddress: Int = 64, maxConnections: Int = 512, tls: RelayTLSFiles? = nil,
                metricsToken: String? = nil) {
        self.tls = tls
        self.metricsToken = metricsToken
        self.host = host
        self.port = port
        self.idleTimeoutSeconds = max(1, idleTimeoutSeconds)
        self.bodyTimeoutSeconds = max(1, bodyTimeoutSeconds)
        self.maxConnectionsPerAddress = max(1, maxConnectionsPerAddress)
        self.maxConnections = max(1, maxConnections)
    }
}

/// The PEM files of a relay's TLS certificate chain and private key.
public struct RelayTLSFiles: Sendable, Hashable {
    public var certificateChain: String
    public var privateKey: String

    public init(certificateChain: String, privateKey: String) {
        self.certificateChain = certificateChain
        self.privateKey = privateKey
    }

    /// The server configuration, or an error that names the file that cannot be used.
    public func configuration() throws -> TLSConfiguration {
        let chain: [NIOSSLCertificate]
        do { chain = try NIOSSLCertificate.fromPEMFile(certificateChain) } catch {
            throw RelayTLSError(message: "\(certificateChain): not a readable PEM certificate chain (\(error))")
        }
        guard !chain.isEmpty else { throw RelayTLSError(message: "\(certificateChain): holds no certificate") }
        let key: NIOSSLPrivateKey
        do { key = try NIOSSLPrivateKey(file: privateKey, format: .pem) } catch {
            throw RelayTLSError(message: "\(privateKey): not a readable PEM private key (\(error))")
        }
        return TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
    }
}

/// A TLS certificate or key that cannot be used.
public struct RelayTLSError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// The sync relay over HTTP (Hummingbird): every request goes to a `RelayService`. Docs/HTTP.md
/// describes the endpoints, limits and timeouts.
public struct RelayServer: Sendable {
    /// The protocol logic and its storage.
    public let service: RelayService
    /// Where it listens and what it tolerates.
    public let configuration: RelayServerConfiguration
    /// Where requests are logged (method, path, status, duration; never a header or a body).
    public let logger: Logger
    let connections = ConnectionCounter()
    /// The figures `GET /metrics` serves.
    public let metrics: RelayMetrics

    /// A server for `service`.
    public init(service: RelayService, configuration: RelayServerConfiguration = RelayServerConfiguration(),
                logger: Logger = Logger(label: "crdt-sync.relay")) {
        self.service = service
        self.configuration = configuration
        self.logger = logger
        self.metrics = RelayMetrics()
    }

    /// The router, with the access log in front; usable without a socket.
    public func router() -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self)
        router.add(middleware: AccessLogMiddleware(logger: logger))
        router.add(middleware: MetricsMiddleware(metrics: metrics))
        let handler: @Sendable (Request, BasicRequestContext) async throws -> Response = { request, _ in
            try await self.respond(request)
        }
        router.get("/healthz", use: handler)
        router.get("/v1/spaces/:space/status", use: handler)
        router.post("/v1/spaces/:space/sync", use: handler)
        // A long poll ends (204) when the server shuts down gracefully, rather than holding the shutdown up.
        router.get("/v1/spaces/:space/changes") { request, _ in
            try await cancelWhenGracefulShutdown { try await self.respond(request) }
        }
        // The other methods reach the service too, which answers 405 with the methods allowed
        // (the router alone answered 404 with no body, where HTTP.md promises 405).
        let endpoints: [(path: RouterPath, method: HTTPRequest.Method)] = [
            ("/healthz", .get), ("/v1/spaces/:space/status", .get), ("/v1/spaces/:space/sync", .post), ("/v1/spaces/:space/changes", .get),
        ]
        for endpoint in endpoints {
            for method: HTTPRequest.Method in [.get, .post, .put, .delete, .patch, .head, .options] where method != endpoint.method {
                router.on(endpoint.path, method: method, use: handler)
            }
        }
        router.get("/metrics") { request, _ -> Response in
            if let token = self.configuration.metricsToken, request.headers[.authorization] != "Bearer \(token)" {
                return Response(status: .unauthorized, headers: [.contentType: "text/plain; charset=utf-8"],
                                body: .init(byteBuffer: ByteBuffer(string: "the metrics need the metrics token\n")))
            }
            self.metrics.openConnections.set(Double(self.connections.total))
            self.metrics.pushWaiters.set(Double(self.service.pushWaiterCount))
            let text = await self.metrics.render(storage: self.service.storage)
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                            body: .init(byteBuffer: ByteBuffer(string: text)))
        }
        return router
    }

    func respond(_ request: Request) async throws -> Response {
        // Two Authorization headers: which one counted depended on their order.
        if request.headers[values: .authorization].count > 1 {
            return RelayServer.response(RelayService.text(400, "the request has more than one Authorization header"))
        }
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.canonicalName] = field.value }
        var query: [String: String] = [:]
        for (name, value) in request.uri.queryParameters where query[String(name)] == nil { query[String(name)] = String(value) }
        var body: [UInt8] = []
        if request.method == .post {
            // Refused whatever the body holds (no or a wrong token): answered before it is read.
            if let answer = await service.answerBeforeBody(RelayRequest(method: "POST", path: request.uri.path, headers: headers, query: query)) {
                return RelayServer.response(answer)
            }
            let limit = service.limits.maxRequestBytes
            if let declared = request.headers[.contentLength].flatMap(UInt64.init), declared > UInt64(limit) {
                return RelayServer.response(await service.handle(RelayRequest(method: "POST", path: request.uri.path, headers: headers)))
            }
            do {
                let buffer = try await RelayServer.withDeadline(seconds: configuration.bodyTimeoutSeconds) {
                    try await request.body.collect(upTo: limit)
                }
                body = Array(buffer: buffer)
            } catch is DeadlineExceeded {
                return RelayServer.response(RelayResponse(status: 408, headers: ["Content-Type": "application/json"],
                                                          body: Array("{\"error\":\"the request body did not arrive in time\"}\n".utf8)))
            } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
                headers["content-length"] = String(limit + 1)
                return RelayServer.response(await service.handle(RelayRequest(method: "POST", path: request.uri.path, headers: headers)))
            } catch {
                // The connection closed (the idle timeout, the client gone) before the body was
                // whole: the client's doing, counted and logged as 408, not as the relay's 500.
                return RelayServer.response(RelayResponse(status: 408, headers: ["Content-Type": "application/json"],
                                                          body: Array("{\"error\":\"the request body ended before it was whole\"}\n".utf8)))
            }
        }
        let answer = await service.handle(RelayRequest(method: request.method.rawValue, path: request.uri.path, headers: headers, body: body,
                                                       query: query))
        return RelayServer.response(answer)
    }

    static func response(_ answer: RelayResponse) -> Response {
        var fields = HTTPFields()
        // The service's header names are constants of this package, all valid field names.
        for (name, value) in answer.headers.sorted(by: { $0.key < $1.key }) { fields[.init(name)!] = value }
        return Response(status: .init(code: answer.status), headers: fields, body: .init(byteBuffer: ByteBuffer(bytes: answer.body)))
    }

    /// The Hummingbird application; `onRunning` gets the bound port.
    ///
    /// - Throws: `RelayTLSError` when the TLS certificate or key cannot be used.
    public func application(onRunning: @escaping @Sendable (Int) async -> Void = { _ in }) throws -> some ApplicationProtocol {
        let counter = connections
        let perAddress = configuration.maxConnectionsPerAddress
        let logger = self.logger
        let http1 = HTTPServerBuilder.http1(configuration: .init(
            additionalChannelHandlers: [PerAddressLimitHandler(counter: counter, limit: perAddress, logger: logger)],
            idleTimeout: .seconds(configuration.idleTimeoutSeconds)))
        let server = try configuration.tls.map { try HTTPServerBuilder.tls(http1, tlsConfiguration: $0.configuration()) } ?? http1
        return Application(
            router: router(),
            server: server,
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: nil,
                                 availableConnectionsDelegate: MaximumAvailableConnections(configuration.maxConnections)),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? 0) },
            logger: logger
        )
    }

    /// Starts listening and returns once the socket is bound.
    public func start() async throws -> RunningRelay {
        RelayServer.raiseOpenFileLimit()
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        let app = try application { port in continuation.yield(port) }
        let group = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [], logger: logger))
        let task = Task {
            defer { continuation.finish() }
            try await group.run()
        }
        for await port in stream {
            return RunningRelay(port: port, group: group, task: task)
        }
        try await task.value
        throw SyncError(.io, "the relay stopped before it was listening")
    }

    /// Raises the soft limit on open files to the hard limit: each connection takes one.
    public static func raiseOpenFileLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }

    struct DeadlineExceeded: Error {}

    static func withDeadline<T: Sendable>(seconds: Int64, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: T.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(nanoseconds: UInt64(seconds) * 1_000_000_000)
                throw DeadlineExceeded()
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
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

/// Open connections per client address.
final class ConnectionCounter: Sendable {
    private let counts = Mutex([String: Int]())

    /// Counts a new connection from `address`; false (not counted) when it already has `limit`.
    func admit(_ address: String, limit: Int) -> Bool {
        counts.withLock { counts in
            let current = counts[address, default: 0]
            guard current < limit else { return false }
            counts[address] = current + 1
            return true
        }
    }

    func release(_ address: String) {
        counts.withLock { counts in
            let current = counts[address, default: 0]
            if current <= 1 { counts[address] = nil } else { counts[address] = current - 1 }
        }
    }

    func count(_ address: String) -> Int { counts.withLock { $0[address, default: 0] } }

    /// Open connections from every address.
    var total: Int { counts.withLock { $0.values.reduce(0, +) } }
}

/// Closes a connection from an address that already has its share open.
final class PerAddressLimitHandler: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
    typealias InboundIn = NIOAny

    let counter: ConnectionCounter
    let limit: Int
    let logger: Logger
    private var counted: String?

    init(counter: ConnectionCounter, limit: Int, logger: Logger) {
        self.counter = counter
        self.limit = limit
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { admit(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        if counted == nil { admit(context) }
        context.fireChannelActive()
    }

    private func admit(_ context: ChannelHandlerContext) {
        let address = context.channel.remoteAddress?.ipAddress ?? "unknown"
        if counter.admit(address, limit: limit) {
            counted = address
        } else {
            logger.warning("closing a connection from \(address): it already has \(limit) open")
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        release()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        release()
    }

    private func release() {
        if let address = counted {
            counter.release(address)
            counted = nil
        }
    }
}

/// Logs every request: method, path, status and duration. Never headers (the token is in one),
/// never the query string, never a body.
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
        logger.log(level: level, "\(request.method) \(request.uri.path) \(status) \(String(format: "%.1f", milliseconds)) ms",
                   metadata: ["method": "\(request.method)", "path": "\(request.uri.path)", "status": "\(status)",
                              "ms": "\(String(format: "%.1f", milliseconds))"])
    }
}

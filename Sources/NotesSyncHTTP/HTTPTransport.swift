import AsyncHTTPClient
import Foundation
import Hummingbird
import NotesCRDT
import NotesSync

/// One answer of the relay to a POST: a page of what the client lacks.
public struct RelayReply: Sendable {
    /// The bundle: the relay's vector for the space as senderVersion, and the page of changes.
    public var bundle: SyncBundle
    /// Whether there is more than this page.
    public var more: Bool
    /// How many changes of the request the relay stored as new.
    public var stored: Int
}

/// The HTTP transport: a `SyncTransport` that talks to a `crdt-sync serve` relay.
///
/// - `remoteVersion` reads the space's vector from `GET /v1/spaces/{space}/status`;
/// - `send` posts the bundle (split into requests of at most `maxChangesPerRequest` changes,
///   each stored by the relay in one transaction) and keeps the relay's answer;
/// - `receive` returns that answer (or posts an empty bundle with the replica's vector), then
///   posts again with the vector advanced past each page for as long as the relay says
///   `X-CRDT-More: 1`.
///
/// Network errors, timeouts and 5xx answers throw `SyncError(.transient, ...)`, which the
/// `SyncEngine` retries with exponential backoff and jitter (a retry is harmless: the relay stores
/// every change once, and applying is idempotent). A 4xx answer throws `SyncError(.rejected, ...)`
/// with the relay's message, and is never retried.
public struct HTTPTransport: SyncTransport {
    /// The relay's base URL, without a trailing slash (`http://127.0.0.1:8080`).
    public let baseURL: String
    /// The space (notebook) on the relay.
    public let space: String
    private let token: String
    private let client: HTTPClient
    /// How long one request may take, in seconds.
    public var timeoutSeconds: Int64 = 30
    /// At most this many changes per POST.
    public var maxChangesPerRequest = 2000
    /// Answers larger than this are refused (a safety net against a confused server).
    public var maxResponseBytes = 256 << 20
    private let lastReply = ReplyCache()
    private let relayVersion = RelayVersionCache()
    private let requests = RequestCounter()

    /// HTTP requests this transport (and its copies) has made, answered or not.
    public var requestCount: Int { requests.value }

    /// - Parameters:
    ///   - url: the relay's base URL (`http://HOST:PORT`, with or without a path prefix).
    ///   - client: the HTTP client; `HTTPTransport.makeClient()` makes one that fails fast when
    ///     the relay is down (shut it down when done).
    public init(url: String, space: String, token: String, client: HTTPClient) throws {
        var base = url
        while base.hasSuffix("/") { base.removeLast() }
        guard let parsed = URL(string: base), let scheme = parsed.scheme?.lowercased(), scheme == "http" || scheme == "https",
              parsed.host != nil else {
            throw SyncError(.rejected, "\(url) is not an http:// or https:// URL")
        }
        guard RelayTokens.isValidSpace(space) else {
            throw SyncError(.rejected, "\"\(space)\" is not a valid space name (1 to 128 of A-Z a-z 0-9 . _ -)")
        }
        guard !token.isEmpty else { throw SyncError(.rejected, "no token given for the relay") }
        baseURL = base
        self.space = space
        self.token = token
        self.client = client
    }

    /// An HTTP client for relays: a refused connection fails at once (so the engine's backoff,
    /// not the client's, decides when to try again), up to `maxConnections` connections per host.
    public static func makeClient(maxConnections: Int = 8, connectTimeoutSeconds: Int64 = 5) -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: maxConnections)
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.timeout = .init(connect: .seconds(connectTimeoutSeconds))
        configuration.decompression = .disabled
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    var spaceURL: String { "\(baseURL)/v1/spaces/\(space)" }

    // MARK: SyncTransport

    /// The relay's vector from its last answer to this replica through this transport, else from
    /// `GET .../status`. A vector from an earlier answer can only be behind the relay's (the relay
    /// never forgets), so at worst a replica sends changes the relay already has, which it skips;
    /// and each answer replaces it, so a relay restored from an older backup is caught up on the
    /// next sync.
    public func remoteVersion(for local: ReplicaID) async throws -> VersionVector {
        if let known = relayVersion.get(local) { return known }
        return try await status().versionVector()
    }

    public func send(_ bundle: SyncBundle) async throws {
        var reply: RelayReply? = nil
        var start = 0
        repeat {
            let end = min(bundle.changes.count, start + max(1, maxChangesPerRequest))
            let piece = SyncBundle(sender: bundle.sender, senderVersion: bundle.senderVersion, changes: Array(bundle.changes[start ..< end]))
            reply = try await exchange(piece)
            start = end
        } while start < bundle.changes.count
        if let reply { lastReply.put(reply, sender: bundle.sender, version: bundle.senderVersion) }
    }

    public func receive(for local: ReplicaID, version: VersionVector) async throws -> (bundles: [ReceivedBundle], skipped: [SkippedInput]) {
        var reply: RelayReply
        if let cached = lastReply.take(sender: local, version: version) {
            reply = cached
        } else {
            reply = try await exchange(SyncBundle(sender: local, senderVersion: version, changes: []))
        }
        var bundles = [ReceivedBundle(bundle: reply.bundle, source: spaceURL)]
        var cursor = version
        while reply.more {
            var advanced = cursor
            for change in reply.bundle.changes where change.endSeq > advanced[change.replica] {
                advanced[change.replica] = change.endSeq
            }
            guard advanced != cursor else {
                throw SyncError(.transient, "\(spaceURL): the relay said there is more but sent nothing new")
            }
            cursor = advanced
            reply = try await exchange(SyncBundle(sender: local, senderVersion: cursor, changes: []))
            bundles.append(ReceivedBundle(bundle: reply.bundle, source: spaceURL))
        }
        return (bundles, [])
    }

    // MARK: Requests

    /// One `POST /v1/spaces/{space}/sync`: stores the bundle's changes and returns one page of
    /// what a replica at its senderVersion lacks.
    public func exchange(_ bundle: SyncBundle) async throws -> RelayReply {
        var request = HTTPClientRequest(url: "\(spaceURL)/sync")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.headers.add(name: "Content-Type", value: RelayProtocol.bundleContentType)
        request.body = .bytes(ByteBuffer(bytes: bundle.encoded()))
        let (head, body) = try await perform(request)
        let reply: SyncBundle
        do {
            reply = try SyncBundle.decode(body)
        } catch let error as SyncError {
            throw SyncError(.transient, "\(spaceURL)/sync: the relay's answer is not a valid bundle (\(error.message))")
        }
        let more = head.headers.first(name: RelayProtocol.moreHeader) == "1"
        let stored = head.headers.first(name: RelayProtocol.storedHeader).flatMap(Int.init) ?? 0
        relayVersion.put(reply.senderVersion, for: bundle.sender)
        return RelayReply(bundle: reply, more: more, stored: stored)
    }

    /// `GET /v1/spaces/{space}/status`.
    public func status() async throws -> RelayStatusJSON {
        var request = HTTPClientRequest(url: "\(spaceURL)/status")
        request.method = .GET
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        let (_, body) = try await perform(request)
        do {
            return try JSONDecoder().decode(RelayStatusJSON.self, from: Data(body))
        } catch {
            throw SyncError(.transient, "\(spaceURL)/status: the relay's answer is not the expected JSON")
        }
    }

    private func perform(_ request: HTTPClientRequest) async throws -> (HTTPClientResponse, [UInt8]) {
        let response: HTTPClientResponse
        let body: ByteBuffer
        requests.increment()
        do {
            response = try await client.execute(request, timeout: .seconds(timeoutSeconds))
            body = try await response.body.collect(upTo: maxResponseBytes)
        } catch let error as SyncError {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw SyncError(.transient, "cannot reach the relay at \(baseURL): \(HTTPTransport.describe(error))")
        }
        let bytes = Array(buffer: body)
        let code = Int(response.status.code)
        switch code {
        case 200 ..< 300:
            return (response, bytes)
        case 408, 429, 500 ..< 600:
            throw SyncError(.transient, "the relay answered \(code) \(response.status.reasonPhrase): \(HTTPTransport.message(bytes))")
        default:
            throw SyncError(.rejected, "the relay refused the request (\(code) \(response.status.reasonPhrase)): \(HTTPTransport.message(bytes))")
        }
    }

    /// The `error` of a JSON error body, else the body as text (shortened).
    static func message(_ bytes: [UInt8]) -> String {
        if let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any], let error = object["error"] as? String {
            return error
        }
        let text = String(decoding: bytes.prefix(300), as: UTF8.self).trimmingSpaces
        return text.isEmpty ? "(no message)" : text
    }

    /// A short reason for a network error.
    static func describe(_ error: any Error) -> String {
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
        return text
    }
}

/// The relay's last answer to a `send`, kept for the `receive` that follows (keyed by the
/// sender and its vector, and taken once).
final class ReplyCache: @unchecked Sendable {
    private let lock = NSLock()
    private var entry: (sender: ReplicaID, version: VersionVector, reply: RelayReply)?

    func put(_ reply: RelayReply, sender: ReplicaID, version: VersionVector) {
        lock.lock(); defer { lock.unlock() }
        entry = (sender, version, reply)
    }

    func take(sender: ReplicaID, version: VersionVector) -> RelayReply? {
        lock.lock(); defer { lock.unlock() }
        guard let current = entry, current.sender == sender, current.version == version else { return nil }
        entry = nil
        return current.reply
    }
}

/// The relay's vector as its last answer gave it, per local replica.
final class RelayVersionCache: @unchecked Sendable {
    private let lock = NSLock()
    private var versions: [ReplicaID: VersionVector] = [:]

    func put(_ version: VersionVector, for replica: ReplicaID) {
        lock.lock(); defer { lock.unlock() }
        versions[replica] = version
    }

    func get(_ replica: ReplicaID) -> VersionVector? {
        lock.lock(); defer { lock.unlock() }
        return versions[replica]
    }
}

final class RequestCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment() { lock.lock(); count += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
}

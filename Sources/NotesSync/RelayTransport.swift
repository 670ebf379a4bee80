import Foundation
import NotesCRDT

/// The relay transport: a `SyncTransport` that talks to a `crdt-sync serve` relay through an
/// `HTTPCalling` (AsyncHTTPClient in an app: see NotesSyncHTTP's `HTTPRelayClient`).
///
/// - `remoteVersion` reads the space's vector from `GET /v1/spaces/{space}/status` (asking for
///   its binary form, an empty bundle);
/// - `send` posts the bundle (in requests of at most `maxChangesPerRequest` changes, each stored
///   by the relay in one transaction); the relay answers each with the first page of what the
///   sender lacks; the last answer's pages are followed (`X-CRDT-More: 1`) and returned, so no
///   separate receive is needed;
/// - `receive` posts an empty bundle with the replica's vector and follows the pages.
///
/// The transport keeps no state between calls. Network failures, timeouts and 408/429/5xx answers
/// throw `SyncError(.transient, ...)`, which `SyncEngine` retries with backoff (a retry is
/// harmless: the relay stores every change once, and applying is idempotent). Another 4xx throws
/// `SyncError(.rejected, ...)` with the relay's message and is not retried.
public struct RelayTransport: SyncTransport {
    /// The relay's base URL, without a trailing slash (`http://127.0.0.1:8080`).
    public let baseURL: String
    /// The space (notebook) on the relay.
    public let space: String
    let token: String
    let http: any HTTPCalling
    /// At most this many changes per POST.
    public var maxChangesPerRequest = 2000
    /// Answers larger than this are refused (a safety net against a confused or hostile server).
    public var maxResponseBytes = SyncBundle.maxBytes
    /// At most this many pages per receive (a relay that keeps saying "more" is cut off).
    public var maxPages = 100_000

    /// - Parameters:
    ///   - url: the relay's base URL (`http://HOST:PORT`, or `https://`, with or without a path prefix).
    ///   - space: the space's name.
    ///   - token: the space's bearer token.
    ///   - http: what makes the requests.
    public init(url: String, space: String, token: String, http: any HTTPCalling) throws {
        var base = url
        while base.hasSuffix("/") { base.removeLast() }
        let lowered = base.lowercased()
        guard lowered.hasPrefix("http://") || lowered.hasPrefix("https://"),
              base.split(separator: "/", omittingEmptySubsequences: true).count >= 2 else {
            throw SyncError(.rejected, "\(url) is not an http:// or https:// URL")
        }
        if let problem = RelayProtocol.portProblem(base) { throw SyncError(.rejected, problem) }
        guard RelayProtocol.isValidSpace(space) else {
            throw SyncError(.rejected, "\"\(space)\" is not a valid space name (1 to 128 of A-Z a-z 0-9 . _ -)")
        }
        guard !token.isEmpty, !token.contains(where: { $0.isWhitespace || $0.isNewline }) else {
            throw SyncError(.rejected, "no valid token given for the relay")
        }
        baseURL = base
        self.space = space
        self.token = token
        self.http = http
    }

    var spaceURL: String { baseURL + "/v1/spaces/" + space }

    /// The relay's space, by its URL: what a replica found there of its own is remembered under it.
    public var checkKey: String? { "relay:" + spaceURL }

    // MARK: SyncTransport

    /// The space's version vector, from `GET .../status` in its binary form (an empty bundle).
    public func remoteVersion(for local: ReplicaID) async throws -> VersionVector {
        let response = try await perform(HTTPCallRequest(method: "GET", url: spaceURL + "/status",
                                                         headers: ["Authorization": "Bearer \(token)", "Accept": RelayProtocol.bundleContentType]))
        do {
            return try SyncBundle.decodeHeader(response.body).senderVersion
        } catch let error as SyncError {
            throw SyncError(.transient, "\(spaceURL)/status: the relay's answer is not a valid bundle (\(error.message))")
        }
    }

    /// Posts the bundle in requests the relay takes, and returns the relay's pages of what the
    /// sender lacks.
    public func send(_ bundle: SyncBundle) async throws -> SendResult {
        var replies: [ReceivedBundle] = []
        let complete = try await send(bundle, each: { replies.append($0) })
        return SendResult(replies: replies, complete: complete)
    }

    /// Posts an empty bundle with the replica's version and returns every page of what it lacks.
    public func receive(for local: ReplicaID, version: VersionVector) async throws -> ReceiveResult {
        var bundles: [ReceivedBundle] = []
        _ = try await receive(for: local, version: version, each: { bundles.append($0) })
        return ReceiveResult(bundles: bundles)
    }

    /// Posts the bundle in requests the relay takes, and hands over the relay's pages of what the
    /// sender lacks one by one, as they arrive.
    public func send(_ bundle: SyncBundle, each: (ReceivedBundle) async throws -> Void) async throws -> Bool {
        // Only the last request's answer is read: the replies before it are pages it also holds.
        var reply: RawReply?
        if bundle.isSealed {
            // Sealed units go as they are, as many to a request as the relay takes.
            for piece in SyncBundle.sealedPieces(sender: bundle.sender, senderVersion: bundle.senderVersion, units: bundle.sealedUnits,
                                                 maxUnits: maxChangesPerRequest) {
                reply = try await fetch(piece)
            }
            try await pages(from: reply!, local: bundle.sender, version: bundle.senderVersion, each: each)
            return true
        }
        // Requests the relay takes: at most `maxChangesPerRequest` changes, and within a bundle's limits.
        for piece in try SyncBundle.pieces(sender: bundle.sender, senderVersion: bundle.senderVersion, changes: bundle.changes,
                                           maxChanges: maxChangesPerRequest) {
            reply = try await fetch(piece)
        }
        try await pages(from: reply!, local: bundle.sender, version: bundle.senderVersion, each: each)
        return true
    }

    /// Posts the changes with `X-CRDT-Again: 1`, in requests the relay takes: it keeps them
    /// beside another branch it may hold at their seqs. The answers' pages are not read (the
    /// round before took them). Sealed units are not sent again: a sealed space's relay cannot
    /// tell branches apart, and forks are not repaired there.
    public func sendAgain(_ bundle: SyncBundle) async throws -> Bool {
        guard !bundle.isSealed, !bundle.changes.isEmpty else { return false }
        for piece in try SyncBundle.pieces(sender: bundle.sender, senderVersion: bundle.senderVersion, changes: bundle.changes,
                                           maxChanges: maxChangesPerRequest) {
            _ = try await fetch(piece, again: true)
        }
        return true
    }

    /// Posts an empty bundle with the replica's version and hands over every page of what it
    /// lacks, one by one, as they arrive.
    public func receive(for local: ReplicaID, version: VersionVector, each: (ReceivedBundle) async throws -> Void) async throws -> [SkippedInput] {
        let first = try await fetch(SyncBundle(sender: local, senderVersion: version, changes: []))
        try await pages(from: first, local: local, version: version, each: each)
        return []
    }

    /// The first reply and every page after it, for a replica at `version`, each handed to `each`
    /// as it arrives. The next page is asked for as soon as the current one's bytes are in (a
    /// record bundle says what it covers in its frames), so that the relay and the network work
    /// while this page is decoded and applied; a page of another format is decoded first. At most
    /// one page is being fetched while one is decoded and handed over.
    func pages(from first: RawReply, local: ReplicaID, version: VersionVector, each: (ReceivedBundle) async throws -> Void) async throws {
        var reply = first
        var cursor = version
        var count = 1
        while reply.more {
            var page: SyncBundle?
            let covered: VersionVector
            if let coverage = try transient({ try SyncBundle.recordCoverage(reply.body) }) {
                covered = coverage
            } else {
                let decoded = try decoded(reply)
                page = decoded
                covered = decoded.coverage
            }
            var advanced = cursor
            advanced.merge(covered)
            guard advanced != cursor else {
                throw SyncError(.transient, "\(spaceURL): the relay said there is more but sent nothing new")
            }
            guard count < maxPages else {
                throw SyncError(.transient, "\(spaceURL): the relay sent more than \(maxPages) pages; the rest waits for the next sync")
            }
            cursor = advanced
            let request = SyncBundle(sender: local, senderVersion: advanced, changes: [])
            async let next = fetch(request)
            try await handOver(reply, decoded: page, framingChecked: true, each)
            reply.body = []  // handed over: let the bytes go while the next page comes
            reply = try await next
            count += 1
        }
        try await handOver(reply, decoded: nil, framingChecked: false, each)
    }

    /// Hands a page to `each`: a record page record by record (its framing was checked whole,
    /// each record is decoded and checked as it goes, so one record is held decoded, not the
    /// page), another page whole.
    private func handOver(_ reply: RawReply, decoded page: SyncBundle?, framingChecked: Bool,
                          _ each: (ReceivedBundle) async throws -> Void) async throws {
        guard page == nil, var records = try transient({ try SyncBundle.RecordReader(reply.body) }) else {
            return try await each(ReceivedBundle(bundle: try page ?? decoded(reply), source: spaceURL))
        }
        if !framingChecked { _ = try transient { try SyncBundle.recordCoverage(reply.body) } }  // whole, before any record is used
        var first = true
        while let changes = try transient({ try records.next() }) {
            try await each(ReceivedBundle(bundle: SyncBundle(sender: records.header.sender, senderVersion: records.header.senderVersion, changes: changes),
                                          source: spaceURL, continuesPage: !first))
            first = false
        }
        if first {
            // A page with no records still says who sent it and what it has.
            try await each(ReceivedBundle(bundle: SyncBundle(sender: records.header.sender, senderVersion: records.header.senderVersion, changes: []),
                                          source: spaceURL))
        }
    }


    // MARK: Requests

    /// One answer of the relay to a POST: a page of what the client lacks.
    public struct RelayReply: Sendable {
        /// The relay's vector for the space as senderVersion, and the page of changes.
        public var bundle: SyncBundle
        /// Whether there is more than this page.
        public var more: Bool
        /// How many changes of the request the relay stored as new.
        public var stored: Int
    }

    /// One `POST /v1/spaces/{space}/sync`: stores the bundle's changes and returns one page of
    /// what a replica at its senderVersion lacks.
    public func exchange(_ bundle: SyncBundle) async throws -> RelayReply {
        let reply = try await fetch(bundle)
        return RelayReply(bundle: try decoded(reply), more: reply.more, stored: reply.stored)
    }

    /// One answer to a POST as it came, not yet decoded.
    struct RawReply: Sendable {
        /// The bundle's bytes.
        var body: [UInt8]
        /// `X-CRDT-More`.
        var more: Bool
        /// `X-CRDT-Stored`.
        var stored: Int
    }

    /// Whether the relay is asked for record bundles (format version 5); false: version 3 only,
    /// as a client before them asked (the simulator runs both kinds).
    package var acceptsRecords = true

    /// One `POST /v1/spaces/{space}/sync`, its answer undecoded.
    func fetch(_ bundle: SyncBundle, again: Bool = false) async throws -> RawReply {
        var headers = ["Authorization": "Bearer \(token)", "Content-Type": RelayProtocol.bundleContentType]
        if again { headers[RelayProtocol.againHeader] = "1" }
        if acceptsRecords { headers["Accept"] = RelayProtocol.bundleContentType + ", " + RelayProtocol.recordsAccept }
        let response = try await perform(HTTPCallRequest(method: "POST", url: spaceURL + "/sync", headers: headers, body: bundle.encoded()))
        return RawReply(body: response.body, more: response.header(RelayProtocol.moreHeader) == "1",
                        stored: response.header(RelayProtocol.storedHeader).flatMap(Int.init) ?? 0)
    }

    /// A reply's bundle; a reply that is not one is a transient failure (damaged on its way).
    func decoded(_ reply: RawReply) throws -> SyncBundle {
        try transient { try SyncBundle.decode(reply.body) }
    }

    /// `body`, with a bundle error turned into a transient failure of the relay's answer.
    private func transient<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as SyncError {
            throw SyncError(.transient, "\(spaceURL)/sync: the relay's answer is not a valid bundle (\(error.message))")
        }
    }

    /// `GET /v1/spaces/{space}/status`.
    public func status() async throws -> RelayStatusJSON {
        let response = try await perform(HTTPCallRequest(method: "GET", url: spaceURL + "/status",
                                                         headers: ["Authorization": "Bearer \(token)"]))
        do {
            return try JSONReading.decode(RelayStatusJSON.self, from: response.body)
        } catch {
            throw SyncError(.transient, "\(spaceURL)/status: the relay's answer is not the expected JSON")
        }
    }

    func perform(_ request: HTTPCallRequest) async throws -> HTTPCallResponse {
        let response: HTTPCallResponse
        do {
            response = try await http.call(request, maxResponseBytes: maxResponseBytes)
        } catch let error as SyncError {
            throw error.code == .transient ? error : SyncError(.transient, "cannot reach the relay at \(baseURL): \(error.message)")
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw SyncError(.transient, "cannot reach the relay at \(baseURL): \(error)")
        }
        switch response.status {
        case 200 ..< 300:
            return response
        case 408, 429, 500 ..< 600:
            throw SyncError(.transient, "the relay answered \(response.status): \(RelayTransport.message(response.body))")
        default:
            throw SyncError(.rejected, "the relay refused the request (\(response.status)): \(RelayTransport.message(response.body))")
        }
    }

    /// The `error` of a JSON error body, else the body as text (shortened).
    /// The text comes from the server: it is cut short and made printable (one line, control
    /// characters escaped), so that an answer cannot move the terminal's cursor or change its
    /// colors; an HTML page (a web server, a proxy's error page) is named as such.
    static func message(_ bytes: [UInt8]) -> String {
        if let object = try? JSONReading.decode([String: String].self, from: bytes), let error = object["error"] {
            return printable(error, limit: 300)
        }
        let text = String(decoding: bytes.prefix(4096), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if text.isEmpty { return "(no message)" }
        if text.hasPrefix("<") {
            var title = ""
            if let open = text.range(of: "<title>", options: .caseInsensitive),
               let close = text.range(of: "</title>", options: .caseInsensitive, range: open.upperBound ..< text.endIndex) {
                title = printable(String(text[open.upperBound ..< close.lowerBound]), limit: 100)
            }
            return "an HTML page\(title.isEmpty ? "" : " (\"\(title)\")"), not a crdt-sync relay's answer: check the URL (a relay is run with `crdt-sync serve`)"
        }
        return printable(text, limit: 300)
    }

    /// `text` on one line, at most `limit` characters, with control characters written as escapes.
    static func printable(_ text: String, limit: Int) -> String {
        var result = ""
        for scalar in text.unicodeScalars.prefix(limit) {
            switch scalar.value {
            case 0x0A, 0x0D, 0x09: result.append(" ")
            case 0 ..< 0x20, 0x7F ..< 0xA0, 0x2028, 0x2029, 0x202A ... 0x202E, 0x2066 ... 0x2069:
                result += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return text.unicodeScalars.count > limit ? result + "…" : result
    }
}

/// JSON decoding of a response body.
enum JSONReading {
    static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try JSONDecoder().decode(type, from: Data(bytes))
    }
}

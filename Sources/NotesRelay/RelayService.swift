import Crypto
import Foundation
import NotesCRDT
import NotesSync
import Synchronization

/// An HTTP request as the relay sees it, whatever server carried it.
public struct RelayRequest: Sendable {
    /// `GET`, `POST`...
    public var method: String
    /// The path, without the query string.
    public var path: String
    /// Header values by lowercased name.
    public var headers: [String: String]
    /// The body (the server stops collecting at `RelayLimits.maxRequestBytes`).
    public var body: [UInt8]
    /// The query string's parameters, percent-decoded (the first of a repeated name).
    public var query: [String: String]

    /// A request; header names are lowercased.
    public init(method: String, path: String, headers: [String: String] = [:], body: [UInt8] = [], query: [String: String] = [:]) {
        self.method = method.uppercased()
        self.path = path
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { a, _ in a })
        self.body = body
        self.query = query
    }
}

/// The relay's answer.
public struct RelayResponse: Sendable {
    /// The status code.
    public var status: Int
    /// Header values by name.
    public var headers: [String: String]
    /// The body.
    public var body: [UInt8]

    /// An answer.
    public init(status: Int, headers: [String: String] = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// What a relay accepts.
public struct RelayLimits: Sendable, Hashable {
    /// Request bodies larger than this get 413.
    public var maxRequestBytes: Int
    /// How large one page of an answer may be.
    public var page: RelayPageLimits
    /// At most this many requests decode (and inflate) bundles at once; the others wait their turn,
    /// so that a handful of large requests cannot take the machine's memory.
    public var maxConcurrentDecodes: Int
    /// How long clients may wait for changes (`GET .../changes`), and how many at once.
    public var push: RelayPushLimits
    /// At most this many authors in one space: every answer carries the space's version vector,
    /// which a reader takes up to 65,536 entries long, and which costs every sync its length.
    public var maxAuthorsPerSpace: Int
    /// The largest record kept (`RelayService.maxRecordBytes`, 9 MiB; lower only to test).
    public var maxRecordBytes: Int

    /// Limits; the defaults suit a relay for a few hundred people.
    public init(maxRequestBytes: Int = 16 << 20, page: RelayPageLimits = RelayPageLimits(), maxConcurrentDecodes: Int = 4,
                push: RelayPushLimits = RelayPushLimits(), maxAuthorsPerSpace: Int = 16_384,
                maxRecordBytes: Int = RelayService.maxRecordBytes) {
        self.maxRecordBytes = min(max(1024, maxRecordBytes), RelayService.maxRecordBytes)
        self.maxRequestBytes = max(1024, maxRequestBytes)
        // A quarter of what a reader takes: uploads that race past the check stay readable.
        self.maxAuthorsPerSpace = min(max(1, maxAuthorsPerSpace), 16_384)
        self.page = page
        self.maxConcurrentDecodes = max(1, maxConcurrentDecodes)
        self.push = push
    }
}

/// The relay's protocol logic, with no HTTP server in it: authorizes a request, checks and stores
/// an upload, and answers with one page of what the client lacks. `RelayServer` (NotesRelayServer)
/// carries it over HTTP; the simulator calls it directly behind its simulated network.
///
/// Endpoints (Docs/HTTP.md):
/// - `POST /v1/spaces/{space}/sync`: the body is a bundle (its senderVersion is the client's
///   vector); the answer is a bundle of what the client lacks, with `X-CRDT-More: 1` when there is
///   more than one page and `X-CRDT-Stored: N` (the changes of the request that were new);
/// - `GET /v1/spaces/{space}/status`: the space's version vector and counts, as JSON;
/// - `GET /v1/spaces/{space}/changes?since=VECTOR&wait=SECONDS`: a long poll, answered (like
///   status) once the space holds changes past `since`, or 204 when `wait` runs out;
/// - `GET /healthz`.
///
/// Every `/v1` request needs `Authorization: Bearer TOKEN`: none or an unknown one gets 401, a
/// token of another space 403. An upload the relay can tell is wrong (it does not decode, it has
/// a gap in an author's seqs, it would leave a gap in what the space holds, it holds changes past
/// its own sender's version) gets 400 with the reason, and nothing of it is stored.
public final class RelayService: Sendable {
    /// Where spaces are kept.
    public let storage: any RelayStorage
    /// Who may use which space.
    public let tokens: RelayTokens
    /// What is accepted.
    public let limits: RelayLimits
    private let decodes: AsyncLimiter
    private let decoded = DecodedChangeCache(capacity: 50_000)
    /// Per space, authors known to be stored (authors are never removed), so that only an upload
    /// that brings a new author reads the space's count.
    private let knownAuthors = Mutex([String: Set<ReplicaID>]())
    let waiters = WaiterCounter()

    /// A relay over `storage`.
    public init(storage: any RelayStorage, tokens: RelayTokens, limits: RelayLimits = RelayLimits()) {
        self.storage = storage
        self.tokens = tokens
        self.limits = limits
        decodes = AsyncLimiter(limit: limits.maxConcurrentDecodes)
    }

    /// The replica identity the relay's answers for `space` come from: stable per storage and
    /// space, so clients record the space on this relay as one peer.
    public func relayReplica(for space: String) -> ReplicaID {
        var input = storage.relayID
        input += Array("crdt-sync relay space\u{0}".utf8)
        input += Array(space.utf8)
        let digest = Array(Crypto.SHA256.hash(data: input))
        return ReplicaID(Identifier128(bytes: digest[0 ..< 16])!)
    }

    /// Answers one request.
    public func handle(_ request: RelayRequest) async -> RelayResponse {
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: true)
        if parts == ["healthz"] {
            return request.method == "GET" ? RelayService.text(200, "ok") : RelayService.text(405, "use GET")
        }
        guard parts.count == 4, parts[0] == "v1", parts[1] == "spaces" else {
            return RelayService.text(404, "no such endpoint: \(request.path)")
        }
        let space = String(parts[2])
        switch (parts[3], request.method) {
        case ("sync", "POST"):
            if let refusal = authorize(request, space: space) { return refusal }
            return await sync(request, space: space)
        case ("status", "GET"):
            if let refusal = authorize(request, space: space) { return refusal }
            return await status(space: space, asBundle: request.headers["accept"]?.contains(RelayProtocol.bundleContentType) == true)
        case ("changes", "GET"):
            if let refusal = authorize(request, space: space) { return refusal }
            return await changes(request, space: space)
        case ("sync", _), ("status", _), ("changes", _):
            return RelayService.text(405, "\(request.method) is not allowed on \(request.path)")
        default:
            return RelayService.text(404, "no such endpoint: \(request.path)")
        }
    }

    /// The answer to a request whose body is not read yet, when nothing in the body could change
    /// it: anything but a sync, and a sync to a bad space name or with no or a wrong token. Nil
    /// when the body is wanted. A server asks this before it reads a body, so that a request
    /// refused whatever it holds costs neither the memory nor the time of its body (60
    /// unauthenticated 16 MiB bodies held 1 GB before their 401s).
    public func answerBeforeBody(_ request: RelayRequest) async -> RelayResponse? {
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: true)
        guard parts.count == 4, parts[0] == "v1", parts[1] == "spaces", parts[3] == "sync", request.method == "POST" else {
            return await handle(request)
        }
        return authorize(request, space: String(parts[2]))
    }

    private func authorize(_ request: RelayRequest, space: String) -> RelayResponse? {
        guard RelayProtocol.isValidSpace(space) else {
            return RelayService.text(404, "\"\(space.prefix(64))\" is not a valid space name")
        }
        let token = RelayService.bearerToken(request.headers["authorization"])
        switch tokens.authorize(token: token, space: space) {
        case .allowed:
            return nil
        case .unauthenticated:
            var response = RelayService.text(401, token == nil
                ? "missing bearer token (send Authorization: Bearer TOKEN)"
                : "the bearer token is not valid")
            response.headers["WWW-Authenticate"] = "Bearer realm=\"crdt-sync\""
            return response
        case .forbidden:
            return RelayService.text(403, "the bearer token is not valid for this space")
        }
    }

    /// The space's status: JSON, or (for a client that accepts bundles) an empty bundle whose
    /// sender version is the space's version vector, binary and checksummed.
    func status(space: String, asBundle: Bool) async -> RelayResponse {
        let status: RelaySpaceStatus
        do {
            status = try await storage.status(space: space)
        } catch {
            return RelayService.text(503, "the relay could not read its store; try again")
        }
        return statusResponse(status, space: space, asBundle: asBundle)
    }

    /// A status as JSON, or as an empty bundle carrying the space's vector.
    func statusResponse(_ status: RelaySpaceStatus, space: String, asBundle: Bool) -> RelayResponse {
        if asBundle {
            let bundle = SyncBundle(sender: relayReplica(for: space), senderVersion: status.version, changes: [])
            return RelayResponse(status: 200, headers: ["Content-Type": RelayProtocol.bundleContentType], body: bundle.encoded())
        }
        let json = RelayStatusJSON(space: space, version: status.version, authors: status.authors, changes: status.changes,
                                   operations: status.operations, bytes: status.bytes)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var data = (try? encoder.encode(json)) ?? Data()
        data.append(0x0A)
        return RelayResponse(status: 200, headers: ["Content-Type": "application/json"], body: [UInt8](data))
    }

    func sync(_ request: RelayRequest, space: String) async -> RelayResponse {
        let limit = limits.maxRequestBytes
        // (Read as UInt64: a length from 2^63 on is no Int, and was waited for.)
        if let declared = request.headers["content-length"].flatMap(UInt64.init), declared > UInt64(limit) { return RelayService.tooLarge(limit) }
        guard request.body.count <= limit else { return RelayService.tooLarge(limit) }
        let bundle: SyncBundle
        let records: [(record: RelayRecord, changes: Int)]
        // A sealed upload's units that the space holds already are skipped unverified (coverage only
        // grows, so the append skips them too): what the space holds, read first.
        var held: VersionVector?
        if request.body.count > SyncBundle.magic.count, request.body[SyncBundle.magic.count] == SyncBundle.sealedFormatVersion {
            held = try? await storage.status(space: space).version
        }
        do {
            let limit = limits.maxRecordBytes
            (bundle, records) = try await decodes.run { [held] in
                let bundle = try SyncBundle.decode(request.body)
                return (bundle, try bundle.isSealed ? RelayService.sealedRecords(of: bundle, held: held ?? VersionVector(), maxRecordBytes: limit)
                    : RelayService.records(of: bundle, maxRecordBytes: limit))
            }
        } catch let error as SyncError {
            return RelayService.text(400, "the request body is not a valid bundle: \(error.message)")
        } catch let error as UploadError {
            return RelayService.text(400, error.message)
        } catch {
            return RelayService.text(400, "the request body is not a valid bundle: \(error)")
        }
        if let refusal = await authorRefusal(space: space, records.map(\.record.author)) { return refusal }
        let stored: Int
        let page: RelayPage
        // The decoded changes of the page's records that the cache held when the page was read
        // (their payloads were not read).
        let hits = ChangeBox()
        // A client that reads record bundles gets the stored encodings as they are: every payload is read.
        let asRecords = RelayProtocol.acceptsRecords(request.headers["accept"]) && !bundle.isSealed
        let again = request.headers[RelayProtocol.againHeader.lowercased()] == "1"
        do {
            let cache = decoded
            let found = hits
            let needsPayload: @Sendable (Int64) -> Bool = { arrival in
                guard !asRecords, let changes = cache.get(arrival) else { return true }
                found.map.withLock { $0[arrival] = changes }
                return false
            }
            if again {
                let kept = try await storage.appendAgain(space: space, records: records.map(\.record))
                stored = kept.reduce(0) { $0 + records[$1].changes }
                page = try await storage.page(space: space, after: bundle.senderVersion, limits: limits.page, needsPayload: needsPayload)
            } else {
                let result = try await storage.appendThenPage(space: space, records: records.map(\.record), after: bundle.senderVersion,
                                                              limits: limits.page, needsPayload: needsPayload)
                stored = result.stored.reduce(0) { $0 + records[$1].changes }
                page = result.page
            }
        } catch let error as RelayStorageError where error.kind == .gap || error.kind == .encryption || error.kind == .malformed {
            return RelayService.text(400, error.message)
        } catch {
            return RelayService.text(503, "the relay could not store the request; try again")
        }
        if page.records.contains(where: \.record.sealed) {
            // Sealed units go back as they came, whole: the relay cannot cut what it cannot read.
            var units: [SealedUnit] = []
            for stored in page.records {
                guard let unit = try? SealedUnit(parsing: stored.record.payload) else {
                    return RelayService.text(503, "the relay's store holds a sealed unit of \(stored.record.author) at \(stored.record.startSeq) that does not parse")
                }
                units.append(unit)
            }
            let reply = SyncBundle(sender: relayReplica(for: space), senderVersion: page.version, sealed: units)
            return RelayResponse(status: 200, headers: [
                "Content-Type": RelayProtocol.bundleContentType,
                RelayProtocol.moreHeader: page.more ? "1" : "0",
                RelayProtocol.storedHeader: String(stored),
            ], body: reply.encoded())
        }
        // A record bundle holds one chain per author: a page with records sent again (another
        // branch at seqs the chain holds) goes as changes.
        if asRecords, !page.records.contains(where: \.record.again) {
            guard let (body, cut) = recordReply(page, space: space, client: bundle.senderVersion) else {
                return RelayService.text(503, "the relay's store holds a change that does not decode")
            }
            return RelayResponse(status: 200, headers: [
                "Content-Type": RelayProtocol.bundleContentType,
                RelayProtocol.moreHeader: page.more || cut ? "1" : "0",
                RelayProtocol.storedHeader: String(stored),
            ], body: body)
        }
        var changes: [Change] = []
        changes.reserveCapacity(page.records.count)
        // Cut past what the client has and what the page already gives: a stored upload that
        // straddled the relay's coverage overlaps the record before it.
        var given = bundle.senderVersion
        var budget = PageBudget()
        var more = page.more
        for stored in page.records {
            guard let record = decodedRecord(stored, hits: hits) else {
                return RelayService.text(503, "the relay's store holds a change of \(stored.record.author) at \(stored.record.startSeq) that does not decode")
            }
            guard budget.take(record.usage) else {
                more = true
                break
            }
            for change in record.changes {
                if stored.record.again {
                    // Beside the chain: cut only to what the client has; the chain's cut goes on.
                    if let part = change.suffix(from: bundle.senderVersion[change.replica] &+ 1) { changes.append(part) }
                    continue
                }
                guard let part = change.suffix(from: given[change.replica] &+ 1) else { continue }
                given[change.replica] = part.endSeq
                changes.append(part)
            }
        }
        let reply = SyncBundle(sender: relayReplica(for: space), senderVersion: page.version, changes: changes)
        return RelayResponse(status: 200, headers: [
            "Content-Type": RelayProtocol.bundleContentType,
            RelayProtocol.moreHeader: more ? "1" : "0",
            RelayProtocol.storedHeader: String(stored),
        ], body: reply.encoded())
    }

    package struct UploadError: Error { package var message: String }

    /// A page record's changes and what they take of a bundle's limits: those `hits` found when
    /// the page was read, else the cache's, else decoded now and kept; nil when they do not decode.
    func decodedRecord(_ stored: RelayStoredRecord, hits: ChangeBox? = nil) -> DecodedRecord? {
        if let hit = hits?.map.withLock({ $0[stored.arrival] }) { return hit }
        if let cached = decoded.get(stored.arrival) { return cached }
        guard let fresh = try? DecodedRecord(decoding: stored.record.payload) else { return nil }
        decoded.put(stored.arrival, fresh, bytes: stored.record.payload.count)
        return fresh
    }

    /// A page as a record bundle (format version 5): each stored record's encoding as it is, but
    /// for a record that starts at or before what the client has or what the page already gives
    /// (an upload that straddled the relay's coverage is stored whole), which is decoded and cut
    /// past that, so that the page's records of one author never overlap.
    /// The page stops before a record that would take its records past what one bundle may hold
    /// together (`PageBudget`; `cut` then says so, and the client asks for more). Nil when a
    /// record does not decode.
    func recordReply(_ page: RelayPage, space: String, client: VersionVector) -> (body: [UInt8], cut: Bool)? {
        var records: [SyncBundle.Record] = []
        records.reserveCapacity(page.records.count)
        var encoder = ChangeCodec.Encoder()
        var given = client
        var budget = PageBudget()
        var cut = false
        for stored in page.records {
            let record = stored.record
            let has = given[record.author]
            if record.endSeq <= has { continue }
            // Decoded once per record (then from the cache), for what it takes of the budget.
            guard let whole = decodedRecord(stored) else { return nil }
            guard budget.take(whole.usage) else {
                cut = true
                break
            }
            given[record.author] = record.endSeq
            if record.startSeq > has {
                records.append(SyncBundle.Record(author: record.author, startSeq: record.startSeq, endSeq: record.endSeq, encoding: record.payload))
                continue
            }
            let part = whole.changes.compactMap { $0.suffix(from: has &+ 1) }
            guard let first = part.first, let last = part.last else { continue }
            records.append(SyncBundle.Record(author: record.author, startSeq: first.startSeq, endSeq: last.endSeq, encoding: encoder.encode(part)))
        }
        return (SyncBundle.encodedRecords(sender: relayReplica(for: space), senderVersion: page.version, records: records), cut)
    }

    /// The records of an upload, after the checks the relay can make without CRDT knowledge: per
    /// author, the changes follow each other without a gap, and none goes past what the sender
    /// says it has. Each author's changes become one record (one row, one encoding), however many
    /// there are.
    static func records(of bundle: SyncBundle, maxRecordBytes: Int = RelayService.maxRecordBytes) throws -> [(record: RelayRecord, changes: Int)] {
        var byAuthor: [ReplicaID: [Change]] = [:]
        for change in bundle.changes { byAuthor[change.replica, default: []].append(change) }
        var records: [(record: RelayRecord, changes: Int)] = []
        records.reserveCapacity(byAuthor.count)
        var encoder = ChangeCodec.Encoder()
        for (author, changes) in byAuthor.sorted(by: { $0.key < $1.key }) {
            let sorted = changes.sorted { ($0.startSeq, $0.endSeq) < ($1.startSeq, $1.endSeq) }
            guard sorted[0].startSeq >= 1 else { throw UploadError(message: "a change of \(author) starts at seq 0") }
            var covered = sorted[0].startSeq - 1
            var run: [Change] = []
            for change in sorted {
                guard change.startSeq - 1 <= covered else {
                    throw UploadError(message: "the changes of \(author) have a gap: seqs \(covered &+ 1)-\(change.startSeq - 1) are missing")
                }
                guard change.endSeq <= bundle.senderVersion[author] else {
                    throw UploadError(message: "a change of \(author) ends at seq \(change.endSeq), past what the sender says it has (\(bundle.senderVersion[author]))")
                }
                guard change.endSeq > covered else { continue }
                run.append(change.startSeq <= covered ? change.suffix(from: covered + 1)! : change)
                covered = change.endSeq
            }
            let payload = encoder.encode(run)
            if let problem = recordSizeProblem(payload.count, of: "the changes of \(author)", limit: maxRecordBytes) { throw UploadError(message: problem) }
            records.append((RelayRecord(author: author, startSeq: run[0].startSeq, endSeq: covered, payload: payload), run.count))
        }
        return records
    }

    /// The records of a sealed upload: one per unit, as it is (the relay holds no key), after the
    /// same checks on the units' headers as on plain changes: per author without a gap, none past
    /// what the sender says it has.
    package static func sealedRecords(of bundle: SyncBundle, held: VersionVector = VersionVector(),
                                      maxRecordBytes: Int = RelayService.maxRecordBytes) throws -> [(record: RelayRecord, changes: Int)] {
        var byAuthor: [ReplicaID: [SealedUnit]] = [:]
        for unit in bundle.sealedUnits { byAuthor[unit.author, default: []].append(unit) }
        var records: [(record: RelayRecord, changes: Int)] = []
        for (author, units) in byAuthor.sorted(by: { $0.key < $1.key }) {
            let sorted = units.sorted { ($0.startSeq, $0.endSeq) < ($1.startSeq, $1.endSeq) }
            var covered = sorted[0].startSeq - 1
            for unit in sorted {
                guard unit.startSeq - 1 <= covered else {
                    throw UploadError(message: "the sealed units of \(author) have a gap: seqs \(covered &+ 1)-\(unit.startSeq - 1) are missing")
                }
                guard unit.endSeq <= bundle.senderVersion[author] else {
                    throw UploadError(message: "a sealed unit of \(author) ends at seq \(unit.endSeq), past what the sender says it has (\(bundle.senderVersion[author]))")
                }
                guard unit.endSeq > covered else { continue }
                if unit.endSeq <= held[author] {
                    covered = unit.endSeq
                    continue
                }
                // Checked without the space key: whole, and signed by the key it names.
                guard unit.hasValidSignature else {
                    throw UploadError(message: "the sealed unit \(unit.label) is not signed by the key it names (altered or forged); nothing was stored")
                }
                if let problem = unit.authorKeyProblem { throw UploadError(message: problem + "; nothing was stored") }
                if let problem = recordSizeProblem(unit.bytes.count, of: "the sealed unit \(unit.label)", limit: maxRecordBytes) { throw UploadError(message: problem) }
                // An id made from its key needs no memory; an older id keeps the first key seen.
                records.append((RelayRecord(author: author, startSeq: unit.startSeq, endSeq: unit.endSeq, payload: unit.bytes, sealed: true,
                                            signingKey: SigningIdentity.isSelfCertified(author) ? nil : unit.publicKey), 1))
                covered = unit.endSeq
            }
        }
        return records
    }

    /// 400 when the upload would bring the space past `maxAuthorsPerSpace` authors (then no
    /// reader could take its answers), else nil.
    private func authorRefusal(space: String, _ authors: [ReplicaID]) async -> RelayResponse? {
        let known = knownAuthors.withLock { $0[space] ?? [] }
        let fresh = Set(authors).subtracting(known)
        guard !fresh.isEmpty else { return nil }
        let status: RelaySpaceStatus
        do { status = try await storage.status(space: space) } catch {
            return RelayService.text(503, "the relay could not read the space; try again")
        }
        let held = Set(status.version.entries.keys)
        knownAuthors.withLock { $0[space, default: []].formUnion(held) }
        let adding = fresh.subtracting(held).count
        guard adding > 0, status.authors + adding > limits.maxAuthorsPerSpace else { return nil }
        return RelayService.text(400, "the space holds changes of \(status.authors) authors, and this upload brings \(adding) more: "
            + "past the \(limits.maxAuthorsPerSpace) a space may hold (every answer carries each author's version); nothing was stored")
    }

    /// The largest record kept: a writer's largest body (`SyncBundle.maxRecordBytes`) and room
    /// for a sealed unit's framing. With the largest version vector beside it, an answer that
    /// carries it stays within the 16 MiB a reader takes; a larger one would stop every sync of
    /// the space for good (the relay cannot cut what it must send whole).
    public static let maxRecordBytes = SyncBundle.maxRecordBytes + (1 << 20)

    static func recordSizeProblem(_ size: Int, of what: String, limit: Int) -> String? {
        guard size > limit else { return nil }
        return "\(what) in this upload encode to \(size) bytes, more than the \(limit) the relay keeps in one record "
            + "(no answer could carry it back); nothing was stored. Send them in smaller bundles, as crdt-sync does"
    }

    // MARK: Helpers

    /// The token of an `Authorization: Bearer TOKEN` header (the scheme is case-insensitive).
    static func bearerToken(_ header: String?) -> String? {
        guard let header else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].trimmingCharacters(in: .whitespaces)
        return token.isEmpty ? nil : token
    }

    static func tooLarge(_ limit: Int) -> RelayResponse {
        text(413, "the request body is larger than this relay accepts (\(limit) bytes); send fewer changes per request")
    }

    /// A JSON error (`{"error": "..."}`) for a failure, plain text for success.
    package static func text(_ status: Int, _ message: String) -> RelayResponse {
        if (200 ..< 300).contains(status) {
            return RelayResponse(status: status, headers: ["Content-Type": "text/plain; charset=utf-8"], body: Array((message + "\n").utf8))
        }
        let data = (try? JSONEncoder().encode(["error": message])) ?? Data()
        return RelayResponse(status: status, headers: ["Content-Type": "application/json"], body: [UInt8](data) + [0x0A])
    }
}

/// Decoded changes by arrival number, shared between a page read and its caller.
final class ChangeBox: Sendable {
    let map = Mutex([Int64: DecodedRecord]())
}

/// A stored record's changes, and what of a bundle's limits they take (`ChangeCodec.Usage`).
struct DecodedRecord: Sendable {
    var changes: [Change]
    var usage: ChangeCodec.Usage

    init(changes: [Change], usage: ChangeCodec.Usage) {
        self.changes = changes
        self.usage = usage
    }

    /// Decodes a stored record's encoding.
    init(decoding payload: [UInt8]) throws {
        var reader = BinaryReader(payload)
        var used = ChangeCodec.Usage()
        changes = try ChangeCodec.decode(from: &reader, limits: .unlimited, used: &used)
        guard reader.isAtEnd else { throw CRDTError(.malformedEncoding, "\(reader.remaining) unexpected bytes after the changes") }
        usage = used
    }
}

/// What a page's records take together of one bundle's limits: a page stops before the record
/// that would take it past them, so that a reader takes every page (each upload was within them
/// alone, but twenty records that each delete 16 M characters made pages no client could read).
struct PageBudget {
    private var used = ChangeCodec.Usage()
    private var records = 0

    /// Counts `usage` in and says true, or says false when it does not fit and the page already
    /// holds a record (the first always goes: it fitted alone when it was uploaded).
    mutating func take(_ usage: ChangeCodec.Usage) -> Bool {
        let limits = ChangeCodec.Limits.bundle
        let (span, overflow) = used.deleteSpan.addingReportingOverflow(usage.deleteSpan)
        let fits = used.changes + usage.changes <= limits.maxChanges && used.dependencies + usage.dependencies <= limits.maxDependencies
            && used.operations + usage.operations <= limits.maxOperations && used.scalars + usage.scalars <= limits.maxScalars
            && !overflow && span <= limits.maxDeleteSpan
        guard fits || records == 0 else { return false }
        used = ChangeCodec.Usage(changes: used.changes + usage.changes, dependencies: used.dependencies + usage.dependencies,
                                 operations: used.operations + usage.operations, scalars: used.scalars + usage.scalars,
                                 deleteSpan: overflow ? .max : span)
        records += 1
        return true
    }
}

/// At most `limit` bodies run at once; the others wait in arrival order.
final class AsyncLimiter: Sendable {
    private struct State {
        var running = 0
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let limit: Int
    private let state = Mutex(State())

    init(limit: Int) { self.limit = limit }

    func run<T: Sendable>(_ body: @Sendable () throws -> T) async throws -> T {
        await acquire()
        defer { release() }
        return try body()
    }

    private func acquire() async {
        let admitted = state.withLock { state -> Bool in
            if state.running < limit {
                state.running += 1
                return true
            }
            return false
        }
        if admitted { return }
        await withCheckedContinuation { continuation in
            let admittedNow = state.withLock { state -> Bool in
                if state.running < limit {
                    state.running += 1
                    return true
                }
                state.waiting.append(continuation)
                return false
            }
            if admittedNow { continuation.resume() }
        }
    }

    private func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiting.isEmpty {
                state.running -= 1
                return nil
            }
            return state.waiting.removeFirst()  // the slot passes to it
        }
        next?.resume()
    }
}

/// Decoded stored changes by arrival number, the most recent `capacity` or so (records never
/// change, so an entry never goes stale): every change is served to every other client of its
/// space, so it is decoded once rather than once per client.
final class DecodedChangeCache: Sendable {
    private struct State {
        var entries: [Int64: (record: DecodedRecord, bytes: Int)] = [:]
        var newest: Int64 = 0
        var bytes = 0
    }

    private let state = Mutex(State())
    let capacity: Int
    /// The most stored bytes (of the encodings) whose decoded changes are kept: a count alone let
    /// 50 records of 33 MB each hold 1.6 GB.
    let byteCapacity: Int

    init(capacity: Int, byteCapacity: Int = 32 << 20) {
        self.capacity = capacity
        self.byteCapacity = byteCapacity
    }

    func get(_ id: Int64) -> DecodedRecord? {
        state.withLock { $0.entries[id]?.record }
    }

    /// Keeps `changes`, decoded from `bytes` stored bytes (a record larger than the whole budget
    /// is not kept).
    func put(_ id: Int64, _ record: DecodedRecord, bytes: Int) {
        guard bytes <= byteCapacity else { return }
        state.withLock { state in
            if let old = state.entries.updateValue((record, bytes), forKey: id) { state.bytes -= old.bytes }
            state.bytes += bytes
            state.newest = max(state.newest, id)
            if state.entries.count > capacity || state.bytes > byteCapacity {
                // Keep the newest half: old records are wanted only by clients that have been away.
                var cutoff = state.newest - Int64(capacity / 2)
                if state.bytes > byteCapacity {
                    // By bytes: the newest records that fit in half the budget.
                    var kept = 0
                    for key in state.entries.keys.sorted(by: >) {
                        kept += state.entries[key]!.bytes
                        if kept > byteCapacity / 2 { cutoff = max(cutoff, key); break }
                    }
                }
                state.entries = state.entries.filter { $0.key > cutoff }
                state.bytes = state.entries.values.reduce(0) { $0 + $1.bytes }
            }
        }
    }

    /// The stored bytes whose decoded changes are kept.
    var keptBytes: Int { state.withLock { $0.bytes } }
}

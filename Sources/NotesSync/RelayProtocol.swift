import Foundation
import NotesCRDT

/// Names and rules shared by the relay (`NotesRelay`) and its client (`RelayTransport`).
/// Docs/HTTP.md describes the protocol.
public enum RelayProtocol {
    /// Response header: "1" when the client lacks more than the page it got (post again with the
    /// vector advanced past the page), "0" otherwise.
    public static let moreHeader = "X-CRDT-More"
    /// Response header: how many changes of the request were new to the relay and stored.
    public static let storedHeader = "X-CRDT-Stored"
    /// Request header on `POST .../sync`: "1" when the upload's changes are a branch the client
    /// holds at seqs the relay may hold another branch of (a copied replica's fork that a re-issue
    /// repaired): the relay stores them even where it holds those seqs (Docs/HTTP.md, "Sending a
    /// branch again").
    public static let againHeader = "X-CRDT-Again"
    /// The media type of a bundle.
    public static let bundleContentType = "application/vnd.crdt-sync.bundle"

    /// The `Accept` value of a client that reads record bundles (format version 5): a relay that
    /// knows them answers a plain space's sync with one; others ignore it and answer version 3.
    public static let recordsAccept = "application/vnd.crdt-sync.bundle;version=5"

    /// Whether an `Accept` header lists `recordsAccept` (spaces around `;` and `,` allowed).
    public static func acceptsRecords(_ accept: String?) -> Bool {
        guard let accept else { return false }
        return accept.split(separator: ",").contains { item in
            item.filter { $0 != " " && $0 != "\t" }.lowercased() == recordsAccept
        }
    }

    /// Whether `space` is a valid space name: 1 to 128 of `A-Z a-z 0-9 . _ -`, not starting with a dot.
    public static func isValidSpace(_ space: String) -> Bool {
        !space.isEmpty && space.utf8.count <= 128 && !space.hasPrefix(".") && space.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == 0x2E || byte == 0x5F || byte == 0x2D
        }
    }

    /// Why a relay's URL cannot be reached, when its port is not one (0 or past 65535: the HTTP
    /// client traps on such a port of an IP address), or nil.
    public static func portProblem(_ url: String) -> String? {
        guard let components = URLComponents(string: url) else { return nil }  // (what else is wrong with it, the caller says)
        if let port = components.port, !(1 ... 65535).contains(port) { return "\(url) names port \(port): a port is 1 to 65535" }
        return nil
    }

    /// The path of a space's sync endpoint.
    public static func syncPath(space: String) -> String { "/v1/spaces/\(space)/sync" }
    /// The path of a space's status endpoint.
    public static func statusPath(space: String) -> String { "/v1/spaces/\(space)/status" }
}

/// The JSON of `GET /v1/spaces/{space}/status`.
public struct RelayStatusJSON: Codable, Sendable, Hashable {
    /// The space.
    public var space: String
    /// Replica hex id -> highest seq held contiguously.
    public var version: [String: UInt64]
    /// Authors with at least one stored change.
    public var authors: Int
    /// Stored changes.
    public var changes: Int
    /// Operations those changes cover (saturating at `UInt64.max`).
    public var operations: UInt64
    /// Bytes of stored change encodings.
    public var bytes: Int

    /// A status.
    public init(space: String, version: VersionVector, authors: Int, changes: Int, operations: UInt64, bytes: Int) {
        self.space = space
        self.version = Dictionary(uniqueKeysWithValues: version.sortedEntries.map { ($0.replica.description, $0.seq) })
        self.authors = authors
        self.changes = changes
        self.operations = operations
        self.bytes = bytes
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

/// One HTTP request, as the relay client makes it.
public struct HTTPCallRequest: Sendable, Hashable {
    /// `GET` or `POST`.
    public var method: String
    /// The whole URL.
    public var url: String
    /// Header names and values.
    public var headers: [String: String]
    /// The body.
    public var body: [UInt8]

    /// A request.
    public init(method: String, url: String, headers: [String: String] = [:], body: [UInt8] = []) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

/// One HTTP answer.
public struct HTTPCallResponse: Sendable, Hashable {
    /// The status code.
    public var status: Int
    /// Header names (lowercased) and values.
    public var headers: [String: String]
    /// The body.
    public var body: [UInt8]

    /// An answer; header names are lowercased.
    public init(status: Int, headers: [String: String] = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { a, _ in a })
        self.body = body
    }

    /// A header's value, by case-insensitive name.
    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}

/// Makes one HTTP request: the relay client's only I/O. `NotesSyncHTTP` implements it with
/// AsyncHTTPClient; the simulator implements it over its simulated network.
///
/// A failure to get any answer (no route, a timeout, a reset) throws; `RelayTransport` treats
/// every thrown error as transient (retried), except cancellation.
public protocol HTTPCalling: Sendable {
    /// Sends `request` and returns the answer (at most `maxResponseBytes` of body).
    func call(_ request: HTTPCallRequest, maxResponseBytes: Int) async throws -> HTTPCallResponse
}

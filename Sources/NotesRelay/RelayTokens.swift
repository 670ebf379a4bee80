import Crypto
import NotesSync

/// The bearer tokens a relay accepts, one or more per space.
///
/// Tokens are kept only as SHA-256 digests and compared in constant time: every request compares
/// its token's digest with every configured digest, without stopping at the first difference, so
/// the time taken says nothing about how much of a token was right, nor which spaces exist.
public struct RelayTokens: Sendable {
    struct Entry: Sendable {
        var space: String
        var digest: [UInt8]
    }

    private var entries: [Entry] = []

    /// What a request may do with a space.
    public enum Decision: Sendable, Equatable {
        /// The token is one of the space's.
        case allowed
        /// No token, or a token that is no space's: 401.
        case unauthenticated
        /// A valid token, but for other spaces: 403.
        case forbidden
    }

    /// No tokens: a relay with none refuses every request.
    public init() {}

    /// Tokens from `(space, token)` pairs.
    public init(_ pairs: [(space: String, token: String)]) throws {
        for pair in pairs { try add(space: pair.space, token: pair.token) }
    }

    /// The spaces that have at least one token, sorted.
    public var spaces: [String] { Array(Set(entries.map(\.space))).sorted() }

    /// Whether no token is configured (such a relay refuses every request).
    public var isEmpty: Bool { entries.isEmpty }

    /// Adds a token for a space (a space may have several, e.g. while a token is rotated).
    public mutating func add(space: String, token: String) throws {
        guard RelayProtocol.isValidSpace(space) else {
            throw SyncError(.rejected, "\"\(space)\" is not a valid space name (1 to 128 of A-Z a-z 0-9 . _ -)")
        }
        guard !token.isEmpty else { throw SyncError(.rejected, "the token for space \(space) is empty") }
        guard !token.contains(where: { $0.isWhitespace }) else {
            throw SyncError(.rejected, "the token for space \(space) contains white space")
        }
        entries.append(Entry(space: space, digest: RelayTokens.digest(token)))
    }

    /// Parses `SPACE=TOKEN` (a command-line argument or a line of a tokens file).
    public mutating func add(assignment: String) throws {
        guard let equals = assignment.firstIndex(of: "=") else {
            throw SyncError(.rejected, "expected SPACE=TOKEN, got a value with no \"=\"")
        }
        try add(space: String(assignment[..<equals]).trimmingSpaces,
                token: String(assignment[assignment.index(after: equals)...]).trimmingSpaces)
    }

    /// Parses a tokens file: one `SPACE=TOKEN` per line; blank lines and lines starting with `#`
    /// are ignored. Errors name the line, never the token.
    public mutating func add(file contents: String, name: String) throws {
        // Any line end: "\r\n" is one Character, so a file saved on Windows was one long line,
        // refused as a token that "contains white space".
        for (index, line) in contents.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let trimmed = String(line).trimmingSpaces
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            do { try add(assignment: trimmed) } catch let error as SyncError {
                throw SyncError(error.code, "\(name):\(index + 1): \(error.message)")
            }
        }
    }

    /// Decides what a request with this bearer token may do with `space`.
    public func authorize(token: String?, space: String) -> Decision {
        guard let token, !token.isEmpty else { return .unauthenticated }
        let digest = RelayTokens.digest(token)
        var matchesAny: UInt8 = 0
        var matchesSpace: UInt8 = 0
        for entry in entries {
            var difference: UInt8 = 0
            for index in 0 ..< digest.count { difference |= digest[index] ^ entry.digest[index] }
            let equal: UInt8 = difference == 0 ? 1 : 0
            matchesAny |= equal
            matchesSpace |= equal & (entry.space == space ? 1 : 0)
        }
        if matchesSpace == 1 { return .allowed }
        return matchesAny == 1 ? .forbidden : .unauthenticated
    }

    static func digest(_ token: String) -> [UInt8] {
        Array(Crypto.SHA256.hash(data: Array(token.utf8)))
    }
}

extension String {
    var trimmingSpaces: String {
        var slice = Substring(self)
        while let first = slice.first, first.isWhitespace { slice.removeFirst() }
        while let last = slice.last, last.isWhitespace { slice.removeLast() }
        return String(slice)
    }
}

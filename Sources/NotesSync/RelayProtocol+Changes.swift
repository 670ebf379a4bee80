import NotesCRDT

extension RelayProtocol {
    /// The path of a space's long-poll endpoint (`GET ...?since=VECTOR&wait=SECONDS`).
    public static func changesPath(space: String) -> String { "/v1/spaces/\(space)/changes" }

    /// How long a client asks the relay to hold a long poll when it does not say (seconds).
    public static let defaultWaitSeconds = 25
    /// The most entries a `since` vector may have (it travels in the URL).
    public static let maxSinceEntries = 1000

    /// A version vector as the `since` parameter of `GET .../changes`: `HEX:SEQ` per replica,
    /// comma-separated, in replica order (URL-safe as it is; empty for an empty vector).
    public static func sinceParameter(_ vector: VersionVector) -> String {
        vector.sortedEntries.filter { $0.seq > 0 }.map { "\($0.replica.description):\($0.seq)" }.joined(separator: ",")
    }

    /// Parses a `since` parameter; a malformed one throws `SyncError(.malformed, reason)`.
    public static func parseSince(_ text: String) throws -> VersionVector {
        var vector = VersionVector()
        guard !text.isEmpty else { return vector }
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count <= maxSinceEntries else {
            throw SyncError(.malformed, "since names \(parts.count) replicas; at most \(maxSinceEntries) are accepted")
        }
        for part in parts {
            let pieces = part.split(separator: ":", omittingEmptySubsequences: false)
            guard pieces.count == 2, let replica = ReplicaID(hex: String(pieces[0]).lowercased()),
                  let seq = UInt64(pieces[1]) else {
                throw SyncError(.malformed, "since must be HEX:SEQ pairs separated by commas (\"\(part.prefix(64))\" is not one)")
            }
            vector[replica] = max(vector[replica], seq)
        }
        return vector
    }
}

import NotesCRDT

/// A transport whose other side can tell when it changes, so that a watcher waits for a push
/// instead of polling: `RelayTransport` (the relay's long poll).
public protocol ChangeWaitingTransport: SyncTransport {
    /// Waits, at most `seconds`, until the other side holds changes past `version`.
    ///
    /// - Returns: the other side's version vector once it holds changes past `version`; nil when
    ///   the wait ran out with nothing new.
    func waitForChanges(after version: VersionVector, seconds: Int) async throws -> VersionVector?
}

extension RelayTransport: ChangeWaitingTransport {
    /// `GET /v1/spaces/{space}/changes?since=VERSION&wait=SECONDS`: the relay answers as soon as
    /// the space holds changes past `version` (at once if it already does), or 204 after `seconds`
    /// (the relay cuts it to its own maximum, 60 s by default). Keep `seconds` below the HTTP
    /// client's request timeout (`HTTPRelayClient`'s is 30 s).
    public func waitForChanges(after version: VersionVector, seconds: Int) async throws -> VersionVector? {
        let url = spaceURL + "/changes?since=" + RelayProtocol.sinceParameter(version) + "&wait=\(max(0, seconds))"
        let response = try await perform(HTTPCallRequest(method: "GET", url: url,
                                                         headers: ["Authorization": "Bearer \(token)", "Accept": RelayProtocol.bundleContentType]))
        if response.status == 204 { return nil }
        do {
            return try SyncBundle.decodeHeader(response.body).senderVersion
        } catch let error as SyncError {
            throw SyncError(.transient, "\(spaceURL)/changes: the relay's answer is not a valid bundle (\(error.message))")
        }
    }
}

import NotesCRDT

/// What a watched replica went through at one wake-up.
public enum SyncWatchEvent: Sendable {
    /// A sync ran to its end.
    case synced(SyncReport)
    /// A sync or a wait failed in a way that may pass (the relay is down, say); the watcher tries
    /// again after `retryInMilliseconds`.
    case failed(SyncError, retryInMilliseconds: UInt64)
}

/// How a watch waits between syncs.
public struct SyncWatchOptions: Sendable {
    /// For a transport that cannot push (a folder): milliseconds between two syncs.
    public var pollMilliseconds: UInt64
    /// For a transport that pushes (a relay): the longest wait for a push, in seconds; local edits
    /// made meanwhile go out when it ends. Keep it below the HTTP client's request timeout.
    public var pushWaitSeconds: Int
    /// The backoff after failures in a row (`maxAttempts` is ignored: a watch never gives up on a
    /// failure that may pass).
    public var backoff: RetryPolicy

    /// Options; the defaults poll a folder every 2 s and hold a relay's long poll for 25 s.
    public init(pollMilliseconds: UInt64 = 2000, pushWaitSeconds: Int = RelayProtocol.defaultWaitSeconds,
                backoff: RetryPolicy = RetryPolicy(baseDelayMilliseconds: 500, maxDelayMilliseconds: 30_000)) {
        self.pollMilliseconds = max(1, pollMilliseconds)
        self.pushWaitSeconds = max(1, pushWaitSeconds)
        self.backoff = backoff
    }
}

extension SyncEngine {
    /// Keeps `replica` in sync over `transport` until the consuming task is cancelled (or the
    /// stream is dropped): syncs once, then waits and syncs again, yielding an event per sync.
    ///
    /// - A transport that pushes (`ChangeWaitingTransport`, a relay) is asked to wait for changes
    ///   past the replica's version; the watcher syncs when it answers, or when the wait ends and
    ///   the replica has local changes since its last sync.
    /// - Any other transport (a folder) is synced every `options.pollMilliseconds`.
    /// - A transient failure (after the engine's own retries) is yielded as `.failed` and tried
    ///   again with backoff; any other error (a refused token, a store error) ends the stream by
    ///   throwing it.
    public func watch(_ replica: any SyncReplica, over transport: any SyncTransport,
                      options: SyncWatchOptions = SyncWatchOptions()) -> AsyncThrowingStream<SyncWatchEvent, any Error> {
        let (stream, continuation) = AsyncThrowingStream<SyncWatchEvent, any Error>.makeStream()
        let engine = self
        let task = Task {
            do {
                try await engine.watchLoop(replica, over: transport, options: options) { continuation.yield($0) }
                continuation.finish()
            } catch {
                continuation.finish(throwing: Task.isCancelled ? nil : error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    private func watchLoop(_ replica: any SyncReplica, over transport: any SyncTransport, options: SyncWatchOptions,
                           yield: (SyncWatchEvent) -> Void) async throws {
        let pushing = transport as? any ChangeWaitingTransport
        var failures = 0
        var due = true
        var lastSynced: VersionVector?
        // A failure that may pass: reported, then slept off with backoff.
        func backOff(_ error: SyncError) async throws {
            failures += 1
            let delay = options.backoff.delay(beforeAttempt: failures + 1, random: random())
            yield(.failed(error, retryInMilliseconds: delay))
            try await sleep(delay)
        }
        while !Task.isCancelled {
            if due {
                do {
                    let report = try await sync(replica, over: transport)
                    lastSynced = try replica.currentVersion()
                    failures = 0
                    due = false
                    yield(.synced(report))
                } catch let error as SyncError where error.code == .transient {
                    if Task.isCancelled { return }
                    try await backOff(error)
                    continue
                }
            }
            guard let pushing else {
                try await sleep(options.pollMilliseconds)
                due = true
                continue
            }
            do {
                let local = try replica.currentVersion()
                if local != lastSynced {
                    due = true  // local edits since the last sync
                    continue
                }
                let changed = try await pushing.waitForChanges(after: local, seconds: options.pushWaitSeconds)
                let now = try replica.currentVersion()
                due = changed != nil || now != lastSynced
            } catch let error as SyncError where error.code == .transient {
                if Task.isCancelled { return }
                try await backOff(error)
                due = true  // what was missed while the relay was unreachable
            }
        }
    }
}

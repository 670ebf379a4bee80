import NotesCRDT

/// How the engine retries a transport that fails in a way that may pass.
public struct RetryPolicy: Sendable {
    /// Attempts in all, the first included.
    public var maxAttempts: Int
    /// The delay before the second attempt; it doubles each time, up to `maxDelay`.
    public var baseDelayMilliseconds: UInt64
    public var maxDelayMilliseconds: UInt64

    public init(maxAttempts: Int = 5, baseDelayMilliseconds: UInt64 = 200, maxDelayMilliseconds: UInt64 = 10_000) {
        self.maxAttempts = maxAttempts
        self.baseDelayMilliseconds = baseDelayMilliseconds
        self.maxDelayMilliseconds = maxDelayMilliseconds
    }

    /// The delay before attempt `attempt` (2, 3, ...): exponential, capped, with full jitter drawn
    /// from `random` (a value in 0..<1), so many clients do not retry in step.
    public func delay(beforeAttempt attempt: Int, random: Double) -> UInt64 {
        let exponent = min(attempt - 2, 30)
        let ceiling = min(maxDelayMilliseconds, baseDelayMilliseconds << UInt64(max(exponent, 0)))
        return UInt64(Double(ceiling) * (0.5 + random / 2))
    }
}

/// What one sync did.
public struct SyncReport: Sendable, Codable, Equatable {
    public var sentChanges = 0
    public var sentOperations: UInt64 = 0
    public var receivedBundles = 0
    public var receivedChanges = 0
    public var applied = 0
    public var duplicates = 0
    public var pending = 0
    /// Inputs that could not be read this time (they are read again next time).
    public var skipped: [String] = []
    /// Transport retries made.
    public var retries = 0
    public var peers: [String] = []

    public init() {}
}

/// Runs the sync protocol between a replica and a transport: learns what the other side has,
/// sends what it lacks, applies what arrives (in one transaction), records what each peer has.
/// Retries transient transport failures with exponential backoff and jitter, a bounded number of
/// times; any other failure is reported at once.
public struct SyncEngine: Sendable {
    public var retry: RetryPolicy
    /// Sleeps for the given milliseconds (a real sleep, or a virtual clock in the simulator).
    public var sleep: @Sendable (UInt64) async throws -> Void
    /// Returns a value in 0..<1 for jitter (seeded in the simulator).
    public var random: @Sendable () -> Double
    /// Told about each retry, so a command can say what it is doing.
    public var onRetry: @Sendable (Int, UInt64, SyncError) -> Void

    public init(retry: RetryPolicy = RetryPolicy(),
                sleep: @escaping @Sendable (UInt64) async throws -> Void = { try await Task.sleep(nanoseconds: $0 * 1_000_000) },
                random: @escaping @Sendable () -> Double = { Double.random(in: 0 ..< 1) },
                onRetry: @escaping @Sendable (Int, UInt64, SyncError) -> Void = { _, _, _ in }) {
        self.retry = retry
        self.sleep = sleep
        self.random = random
        self.onRetry = onRetry
    }

    public func sync(_ replica: any SyncReplica, over transport: any SyncTransport) async throws -> SyncReport {
        var report = SyncReport()
        let local = replica.syncReplicaID
        var machine = SyncStateMachine(localVersion: try replica.syncVersion())
        _ = machine.start()
        let remote = try await withRetry(&report) { try await transport.remoteVersion(for: local) }
        if case .send(let ranges) = machine.peerVersionKnown(remote), !ranges.isEmpty {
            let outgoing = try replica.syncChanges(since: remote)
            let bundle = SyncBundle(sender: local, senderVersion: machine.localVersion, changes: outgoing)
            try await withRetry(&report) { try await transport.send(bundle) }
            report.sentChanges = outgoing.count
            report.sentOperations = bundle.operationCount
        }
        let version = try replica.syncVersion()
        let (received, skipped) = try await withRetry(&report) { try await transport.receive(for: local, version: version) }
        report.skipped = skipped.map { "\($0.source): \($0.reason)" }
        report.receivedBundles = received.filter { !$0.bundle.changes.isEmpty }.count
        if case .apply = machine.received(received.map(\.bundle)) {
            let changes = received.flatMap(\.bundle.changes)
            report.receivedChanges = changes.count
            let outcome = try replica.syncApply(changes)
            report.applied = outcome.applied
            report.duplicates = outcome.duplicates
            report.pending = outcome.pending
        } else {
            report.pending = try replica.syncApply([]).pending
        }
        var peerVersions: [ReplicaID: VersionVector] = [:]
        for item in received where item.bundle.sender != local {
            peerVersions[item.bundle.sender, default: VersionVector()].merge(item.bundle.senderVersion)
        }
        for (peer, version) in peerVersions.sorted(by: { $0.key < $1.key }) {
            try replica.syncRecordPeer(peer, version: version)
            report.peers.append(peer.description)
        }
        return report
    }

    private func withRetry<T>(_ report: inout SyncReport, _ body: () async throws -> T) async throws -> T {
        var attempt = 1
        while true {
            do {
                return try await body()
            } catch let error as SyncError where error.code == .transient && attempt < retry.maxAttempts {
                attempt += 1
                let delay = retry.delay(beforeAttempt: attempt, random: random())
                onRetry(attempt, delay, error)
                report.retries += 1
                try await sleep(delay)
            }
        }
    }
}

import NotesCRDT

/// How the engine retries a transport that fails in a way that may pass.
public struct RetryPolicy: Sendable {
    /// Attempts in all, the first included.
    public var maxAttempts: Int
    /// The delay before the second attempt; it doubles each time, up to `maxDelayMilliseconds`.
    public var baseDelayMilliseconds: UInt64
    /// The longest delay between two attempts.
    public var maxDelayMilliseconds: UInt64

    /// A policy; the defaults suit a person waiting at a command line.
    public init(maxAttempts: Int = 5, baseDelayMilliseconds: UInt64 = 200, maxDelayMilliseconds: UInt64 = 10_000) {
        self.maxAttempts = max(1, maxAttempts)
        self.baseDelayMilliseconds = baseDelayMilliseconds
        self.maxDelayMilliseconds = maxDelayMilliseconds
    }

    /// The delay before attempt `attempt` (2, 3, ...): exponential, capped, with jitter drawn from
    /// `random` (a value in 0..<1), so many clients do not retry in step.
    public func delay(beforeAttempt attempt: Int, random: Double) -> UInt64 {
        let exponent = UInt64(min(max(attempt - 2, 0), 30))
        let (shifted, overflow) = baseDelayMilliseconds.multipliedReportingOverflow(by: 1 << exponent)
        let ceiling = overflow ? maxDelayMilliseconds : min(maxDelayMilliseconds, shifted)
        return UInt64(Double(ceiling) * (0.5 + min(max(random, 0), 1) / 2))
    }
}

/// Performs what a `SyncSession` asks, on a replica and a transport: it only does I/O.
/// Transient transport failures (`SyncError.Code.transient`) are retried with exponential backoff
/// and jitter, a bounded number of times; any other failure ends the sync at once.
public struct SyncEngine: Sendable {
    /// When to retry.
    public var retry: RetryPolicy
    /// Sleeps for the given milliseconds (a real sleep, or a virtual clock in the simulator).
    public var sleep: @Sendable (UInt64) async throws -> Void
    /// Returns a value in 0..<1 for jitter (seeded in the simulator).
    public var random: @Sendable () -> Double
    /// Told about each retry (attempt number, delay, the error), so a command can say what it does.
    public var onRetry: @Sendable (Int, UInt64, SyncError) -> Void
    /// Told how far the receive has come after each batch applied (a progress bar).
    public var onProgress: @Sendable (SyncProgress) -> Void
    /// How a receive is committed: nil (the default) applies everything a send or a receive
    /// brings in one transaction, page by page as it arrives, on a thread of its own; N commits
    /// every N changes or so (`SyncSession.batchSize`), so that an interrupted pull keeps what it
    /// applied and the notes appear as it goes. An encrypted space's receive always commits per
    /// batch (of `SyncSession.defaultBatchSize` units unless N is given).
    public var changesPerTransaction: Int?

    /// An engine; the defaults sleep for real and draw jitter from the system's generator.
    public init(retry: RetryPolicy = RetryPolicy(),
                sleep: @escaping @Sendable (UInt64) async throws -> Void = { try await Task.sleep(nanoseconds: $0 &* 1_000_000) },
                random: @escaping @Sendable () -> Double = { Double.random(in: 0 ..< 1) },
                onRetry: @escaping @Sendable (Int, UInt64, SyncError) -> Void = { _, _, _ in },
                onProgress: @escaping @Sendable (SyncProgress) -> Void = { _ in }) {
        self.retry = retry
        self.sleep = sleep
        self.random = random
        self.onRetry = onRetry
        self.onProgress = onProgress
    }

    /// Runs one sync of `replica` over `transport`.
    ///
    /// What arrives is applied as it arrives, a relay page or a folder file at a time, so that
    /// only a page's changes are held at once; by default all in one transaction (a sync that
    /// fails part way changes nothing), or committed every `changesPerTransaction` changes (it
    /// keeps what it applied, and the next one asks only for the rest). Docs/Sync.md, "How a
    /// receive is applied".
    ///
    /// Before anything is sent, what the other side holds of the replica's own identities past
    /// what it was found to hold as the replica made it is taken back and applied, so that a
    /// copy of the replica's database that wrote the same seqs is found before either side's
    /// version vector hides it, and repaired; a sync that repaired a fork runs one more round,
    /// which sends the re-issue and takes what was refused for it, and so does one that applied
    /// a re-issue withdrawing operations it held, which takes the branch kept there
    /// (Docs/Sync.md, "Checking the other side's copy of our own").
    public func sync(_ replica: any SyncReplica, over transport: any SyncTransport) async throws -> SyncReport {
        let key = transport.checkKey
        var checked = try key.flatMap { try replica.checkedVersion(at: $0) }
        var report = SyncReport()
        // The other side's version, fetched once for the check and the round after it.
        var remote: VersionVector?
        if let key, let known = checked {
            let check = try await checkOwnIdentities(replica, over: transport, checked: known)
            report.add(check.report)
            remote = check.remote
            if let found = check.found, found != known {
                try replica.recordChecked(found, at: key)
                checked = found
            }
        }
        let before = try replica.currentVersion()
        var round = try await run(replica, over: transport, remote: remote)
        try recordSent(round, replica, at: key, checked: &checked)
        // A re-issue applied here withdrew operations the replica held (the version went down):
        // what the other side holds at those seqs, the kept branch, was not asked for yet.
        let after = try replica.currentVersion()
        let withdrew = before.entries.contains { after[$0.key] < $0.value }
        if round.report.forksRepaired > 0 || withdrew {
            report.add(round.report)
            round = try await run(replica, over: transport, remote: nil)
            try recordSent(round, replica, at: key, checked: &checked)
        }
        report.add(round.report)
        if let key, let remote = round.remote ?? remote {
            try await sendKeptBranches(replica, over: transport, at: key, remote: remote)
        }
        return report
    }

    /// Sends again what the replica holds of the branches that stay where a re-issue withdrew
    /// another (`SyncReplica.keptBranches()`), at seqs the other side holds, once per identity
    /// and seq there (recorded under "again " and the check key). A relay keeps one operation
    /// per seq as it first got it: one that took the withdrawn branch (or one copy's head and
    /// the other's tail) served it for good, and a replica that syncs only with it waited for
    /// good for the other branch. A folder's coverage is read from file names, which do not tell
    /// the branches apart either (Docs/Sync.md, "Sending a kept branch again").
    private func sendKeptBranches(_ replica: any SyncReplica, over transport: any SyncTransport, at key: String,
                                  remote: VersionVector) async throws {
        let kept = try replica.keptBranches()
        guard !kept.isEmpty, try (replica as? any SealedSyncReplica)?.isInEncryptedSpace() != true else { return }
        let againKey = "again " + key
        var sent = try replica.checkedVersion(at: againKey) ?? VersionVector()
        let version = try replica.currentVersion()
        var since = version
        var through: [ReplicaID: UInt64] = [:]
        for (id, range) in kept {
            let last = min(range.upperBound, remote[id], version[id])
            let first = max(range.lowerBound, sent[id] &+ 1)
            guard first <= last else { continue }
            since[id] = first - 1
            through[id] = last
        }
        guard !through.isEmpty else { return }
        let changes = try replica.changes(since: since).compactMap { change -> Change? in
            guard let last = through[change.replica], change.startSeq <= last else { return nil }
            return change.endSeq <= last ? change : change.prefix(through: last)
        }
        if !changes.isEmpty {
            _ = try await transport.sendAgain(SyncBundle(sender: replica.replicaID, senderVersion: version, changes: changes))
        }
        for (id, last) in through { sent[id] = last }
        try replica.recordChecked(sent, at: againKey)
    }

    /// What a round sent of the replica's own identity is what the other side holds of it, when
    /// it held nothing unchecked of it as the round began: recorded as checked.
    private func recordSent(_ round: Round, _ replica: any SyncReplica, at key: String?, checked: inout VersionVector?) throws {
        guard let key, let known = checked, let remote = round.remote else { return }
        let own = replica.replicaID
        guard remote[own] <= known[own], round.sent[own] > known[own] else { return }
        var found = known
        found[own] = round.sent[own]
        try replica.recordChecked(found, at: key)
        checked = found
    }

    /// Takes back what the other side holds of the replica's written identities past `checked`
    /// (and whatever else the replica lacks), and applies it.
    ///
    /// - Returns: the report, how far the other side was found to hold the identities as they
    ///   were made (nil when nothing was to check), and what it had.
    private func checkOwnIdentities(_ replica: any SyncReplica, over transport: any SyncTransport,
                                    checked: VersionVector) async throws -> (report: SyncReport, found: VersionVector?, remote: VersionVector) {
        let local = replica.replicaID
        let sealing = replica as? any SealedSyncReplica
        let sealed = try sealing?.isInEncryptedSpace() ?? false
        let inOneTransaction = changesPerTransaction == nil && !sealed
        let version = try replica.currentVersion()
        var session = SyncSession(local: local, version: version, sealed: sealed,
                                  batchSize: inOneTransaction ? 1 : changesPerTransaction ?? SyncSession.defaultBatchSize)
        let remote = try await withRetry(&session) { try await transport.remoteVersion(for: local) }
        var from = version
        var found = checked
        var checking: Set<ReplicaID> = []
        for entry in try replica.writtenIdentities().sortedEntries {
            let there = min(remote[entry.replica], entry.seq)
            guard there > checked[entry.replica] else { continue }
            from[entry.replica] = min(from[entry.replica], checked[entry.replica])
            found[entry.replica] = there
            checking.insert(entry.replica)
        }
        guard !checking.isEmpty else { return (session.progress.report, nil, remote) }
        let outcome = try await perform(try session.startReceiving(from: from, checking: checking), &session, replica, transport, remote: nil)
        return (outcome.report, found, remote)
    }

    /// One round: what the other side lacks is sent, what the replica lacks received.
    private func run(_ replica: any SyncReplica, over transport: any SyncTransport, remote: VersionVector?) async throws -> Round {
        let sealing = replica as? any SealedSyncReplica
        let sealed = try sealing?.isInEncryptedSpace() ?? false
        let inOneTransaction = changesPerTransaction == nil && !sealed
        var session = SyncSession(local: replica.replicaID, version: try replica.currentVersion(), sealed: sealed,
                                  batchSize: inOneTransaction ? 1 : changesPerTransaction ?? SyncSession.defaultBatchSize)
        return try await perform(try session.start(), &session, replica, transport, remote: remote)
    }

    /// What a round did: its report, what the other side had when it began, what was sent.
    private struct Round {
        var report: SyncReport
        var remote: VersionVector?
        var sent = VersionVector()
    }

    /// Performs the session's actions from `first` until it finishes (`known`: what the other
    /// side has, fetched already).
    private func perform(_ first: SyncSession.Action, _ session: inout SyncSession, _ replica: any SyncReplica,
                         _ transport: any SyncTransport, remote known: VersionVector?) async throws -> Round {
        let local = replica.replicaID
        let sealing = replica as? any SealedSyncReplica
        let inOneTransaction = changesPerTransaction == nil && !session.sealed
        var remote: VersionVector?
        var sent = VersionVector()
        var action = first
        while true {
            switch action {
            case .fetchRemoteVersion:
                var version: VersionVector
                if let known { version = known } else { version = try await withRetry(&session) { try await transport.remoteVersion(for: local) } }
                remote = version
                action = try session.remoteVersionReceived(version)
            case .loadChanges(let since):
                action = try session.changesLoaded(try replica.changes(since: since))
            case .send(let bundle):
                let complete = try await streaming(&session, replica, sealing, inOneTransaction: inOneTransaction) { _, each in
                    try await transport.send(bundle, each: each)
                }
                sent = bundle.coverage
                action = try session.sentAll(complete: complete)
            case .receive(let version):
                let skipped = try await streaming(&session, replica, sealing, inOneTransaction: inOneTransaction) { received, each in
                    // A retry asks only for what the session has not received yet.
                    try await transport.receive(for: local, version: received ?? version, each: each)
                }
                action = try session.receivedAll(skipped: skipped)
            case .apply(let changes):
                action = try session.applied(try replica.integrate(changes))
                onProgress(session.progress)
            case .loadSealedUnits(let since):
                action = try session.unitsLoaded(try sealing!.sealedUnits(since: since, checkingTaggedUnits: !transport.checksEachSealedUnit))
            case .applySealed(let units):
                action = try session.applied(try sealing!.integrate(sealed: units))
                onProgress(session.progress)
            case .recordPeers(let peers):
                for peer in peers { try replica.recordPeer(peer.replica, version: peer.version) }
                action = try session.peersRecorded()
            case .finish(let report):
                return Round(report: report, remote: remote, sent: sent)
            }
        }
    }


    private func withRetry<T>(_ session: inout SyncSession, _ body: () async throws -> T) async throws -> T {
        try await withRetries(&session, { _, _ in try await body() }, { _, _ in })
    }
}

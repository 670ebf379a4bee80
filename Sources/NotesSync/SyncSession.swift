import NotesCRDT

/// One sync between a replica and a transport, as a state machine with no I/O, in the manner of
/// swift-nio's protocol state machines and automerge's `sync::State`: each event returns the next
/// action, and `SyncEngine` performs it (on the replica or the transport) and reports the outcome
/// back as the next event.
///
/// A round: learn what the other side has, load and send exactly what it lacks, receive what we
/// lack (unless the send's answer already held it all), applying it as it arrives (`arrived`,
/// `batchApplied`; or gathered and applied in one batch with `received`, `applied`), record what
/// each peer has, finish with a report. Received bundles are checked for what a transport cannot
/// know: changes repeated across bundles are applied once, changes of this replica's own identity
/// that it never made are counted (a copied replica), and each batch goes in canonical causal
/// order; with waiting changes kept until what they depend on comes, the outcome does not depend
/// on the order bundles arrived in nor on how they were cut (Docs/Sync.md).
public struct SyncSession: Sendable {
    /// What to do next.
    public enum Action: Sendable {
        /// Ask the transport what the other side has (`remoteVersionReceived`).
        case fetchRemoteVersion
        /// Ask the replica for the changes a replica at this version lacks (`changesLoaded`).
        case loadChanges(since: VersionVector)
        /// Hand this bundle to the transport (`sent`).
        case send(SyncBundle)
        /// Ask the transport for what a replica at this version lacks (`received`).
        case receive(version: VersionVector)
        /// Apply these changes to the replica in one batch (`applied`; `batchApplied` when
        /// `arrived` handed them out).
        case apply([Change])
        /// In an encrypted space: ask the replica for the sealed units a replica at this version
        /// lacks, sealing its own new changes first (`unitsLoaded`).
        case loadSealedUnits(since: VersionVector)
        /// In an encrypted space: open these units and apply what they hold in one batch
        /// (`applied`; `batchApplied` when `arrived` handed them out).
        case applySealed([SealedUnit])
        /// Record what these peers have (`peersRecorded`).
        case recordPeers([PeerVersion])
        /// Done.
        case finish(SyncReport)
    }

    /// A peer and what it has, as a bundle it wrote said.
    public struct PeerVersion: Sendable, Hashable {
        /// The peer.
        public var replica: ReplicaID
        /// What the peer had applied.
        public var version: VersionVector
    }

    enum State: Sendable, Equatable {
        case idle
        case awaitingRemoteVersion
        case awaitingChanges(remote: VersionVector)
        case awaitingSend
        case awaitingBundles
        case awaitingApply
        case awaitingPeers
        case done
    }

    /// A step taken out of order: a bug in the engine driving the session.
    public struct MisuseError: Error, CustomStringConvertible {
        /// What was done out of order.
        public var description: String
    }

    private(set) var state: State = .idle
    /// This replica's identity.
    public let local: ReplicaID
    /// What this replica had when the session started.
    public let localVersion: VersionVector
    private var report = SyncReport()
    /// Bundles received so far (with the send's replies), when they are applied in one batch.
    private var received: [ReceivedBundle] = []
    /// What each peer that wrote a received bundle has.
    private var peerVersions: [ReplicaID: VersionVector] = [:]
    /// What the other side has, once known.
    private var remote: VersionVector? {
        didSet { expectedOperations = remote?.operationsMissing(from: localVersion) ?? 0 }
    }
    /// What `progress` expects in all, counted once when `remote` is known (it was counted at
    /// every batch: with thousands of authors, a look-up each, for every record of a page).
    private var expectedOperations: UInt64 = 0
    /// The sender and vector `notePeer` merged last.
    private var lastPeerVector: (sender: ReplicaID, version: VersionVector)?
    /// Streaming: per author, the seq ranges received in this session (to take repeats once).
    private var arrivedRanges: [ReplicaID: SeqRanges] = [:]
    /// Streaming: batches applied.
    private var batches = 0
    /// Where a session that only receives asked from (`startReceiving(from:)`): a retry asks
    /// from there on too.
    private var receiveBase: VersionVector?
    /// The identities whose changes a check takes back (`SyncReport.checkedChanges` counts them).
    private var checking: Set<ReplicaID> = []
    /// Streaming: operations (seqs) of the changes received once each.
    private var receivedOperations: UInt64 = 0
    /// Streaming: own-identity changes the replica counted (it then moved to a new identity),
    /// and those that arrived after it moved (another identity's to it by then).
    private var foreignOwnApplied = 0
    private var foreignOwnAfterMove = 0
    /// Streaming: changes (or sealed units) received and not yet handed out, fewer than `batchSize`.
    private var gathered: [Change] = []
    private var gatheredUnits: [SealedUnit] = []
    /// Streaming: hand out a batch once this many changes (or sealed units) are gathered; the
    /// rest goes when the receive ends.
    public let batchSize: Int
    /// The default `batchSize`: about ten relay pages, a few megabytes of changes.
    public static let defaultBatchSize = 10_000
    /// Whether the replica is in an encrypted space: it sends and takes only sealed bundles.
    public let sealed: Bool

    /// A session for `local`, which has applied `version`; `sealed` when it is in an encrypted
    /// space; a streamed receive hands out batches of `batchSize` changes (at least 1).
    public init(local: ReplicaID, version: VersionVector, sealed: Bool = false, batchSize: Int = SyncSession.defaultBatchSize) {
        self.local = local
        self.localVersion = version
        self.sealed = sealed
        self.batchSize = max(1, batchSize)
    }

    /// The first action.
    public mutating func start() throws -> Action {
        try expect(.idle)
        state = .awaitingRemoteVersion
        return .fetchRemoteVersion
    }

    /// The first action of a session that only receives, from `version` on rather than from
    /// what this replica has: what the other side holds of this replica's own written identities
    /// past what it was found to hold as they were made is taken back, with whatever else this
    /// replica lacks, and applied, where a copy's fork of them shows (`SyncEngine`).
    public mutating func startReceiving(from version: VersionVector, checking identities: Set<ReplicaID> = []) throws -> Action {
        try expect(.idle)
        state = .awaitingBundles
        receiveBase = version
        checking = identities
        return .receive(version: version)
    }

    /// The other side has `remote`: load what it lacks, or go straight to receiving.
    public mutating func remoteVersionReceived(_ remote: VersionVector) throws -> Action {
        try expect(.awaitingRemoteVersion)
        self.remote = remote
        if remote.missing(from: localVersion).isEmpty {
            state = .awaitingBundles
            return .receive(version: localVersion)
        }
        state = .awaitingChanges(remote: remote)
        return sealed ? .loadSealedUnits(since: remote) : .loadChanges(since: remote)
    }

    /// The replica handed over the sealed units the other side lacks: send them as they are.
    public mutating func unitsLoaded(_ units: [SealedUnit]) throws -> Action {
        guard case .awaitingChanges = state, sealed else { throw MisuseError(description: "unitsLoaded in state \(state)") }
        guard !units.isEmpty else {
            state = .awaitingBundles
            return .receive(version: localVersion)
        }
        state = .awaitingSend
        report.sentChanges = units.count
        report.sentOperations = UInt64.saturatingSum(units.lazy.map { $0.endSeq - $0.startSeq + 1 })
        return .send(SyncBundle(sender: local, senderVersion: localVersion, sealed: units))
    }

    /// The replica handed over the changes the other side lacks: send them, in canonical causal order.
    public mutating func changesLoaded(_ changes: [Change]) throws -> Action {
        guard case .awaitingChanges(let remote) = state else { throw MisuseError(description: "changesLoaded in state \(state)") }
        // Only what was asked for: each change must end past what the other side has.
        for change in changes where change.endSeq <= remote[change.replica] || localVersion[change.replica] < change.endSeq {
            throw MisuseError(description: "the replica handed over \(change.replica)@\(change.startSeq)-\(change.endSeq), which was not asked for")
        }
        guard !changes.isEmpty else {
            state = .awaitingBundles
            return .receive(version: localVersion)
        }
        state = .awaitingSend
        let bundle = SyncBundle(sender: local, senderVersion: localVersion, changes: CausalOrder.canonical(changes))
        report.sentChanges = changes.count
        report.sentOperations = bundle.operationCount
        return .send(bundle)
    }

    /// The transport took the bundle; `result` may already hold what we lack.
    public mutating func sent(_ result: SendResult) throws -> Action {
        try expect(.awaitingSend)
        received += result.replies
        for item in result.replies { notePeer(item.bundle) }
        if result.complete { return try finishReceiving(skipped: []) }
        state = .awaitingBundles
        return .receive(version: localVersion)
    }

    /// The transport found these bundles.
    public mutating func received(_ result: ReceiveResult) throws -> Action {
        try expect(.awaitingBundles)
        received += result.bundles
        for item in result.bundles { notePeer(item.bundle) }
        return try finishReceiving(skipped: result.skipped)
    }

    private mutating func finishReceiving(skipped: [SkippedInput]) throws -> Action {
        report.skipped = skipped.map { "\($0.source): \($0.reason)" }
        if sealed { return finishReceivingSealed() }
        var seen: Set<Change> = []
        var changes: [Change] = []
        for item in received where item.bundle.isSealed && !item.bundle.sealedUnits.isEmpty {
            // Sealed data is opened only with the space key, which this replica does not have.
            report.skipped.append(Self.sealedRefused(item.source))
        }
        for item in received where !item.bundle.changes.isEmpty {
            report.receivedBundles += 1
            for change in item.bundle.changes {
                if change.replica == local, localVersion[change.replica] < change.endSeq {
                    // Our own identity, operations we never made: another copy of this replica.
                    report.foreignOwnChanges += 1
                }
                if seen.insert(change).inserted { changes.append(change) }
            }
        }
        report.receivedChanges = changes.count
        state = .awaitingApply
        return .apply(CausalOrder.canonical(changes))
    }

    /// In an encrypted space: the sealed units received, once each (by their bytes), in
    /// author and seq order; plaintext changes are refused.
    private mutating func finishReceivingSealed() -> Action {
        var seen: Set<UnitBytes> = []
        var units: [SealedUnit] = []
        for item in received {
            if !item.bundle.changes.isEmpty { report.skipped.append(Self.plaintextRefused(item.source)) }
            guard !item.bundle.sealedUnits.isEmpty else { continue }
            report.receivedBundles += 1
            for unit in item.bundle.sealedUnits where seen.insert(UnitBytes(unit.bytes)).inserted { units.append(unit) }
        }
        report.receivedChanges = units.count
        state = .awaitingApply
        return .applySealed(units.sorted { ($0.author, $0.startSeq, $0.endSeq) < ($1.author, $1.startSeq, $1.endSeq) })
    }

    // Not counted in `rejected` (malformed changes, a full quarantine): nothing is wrong with
    // these, the replica is on the other side of the space's line, and they are refused each time.
    private static func plaintextRefused(_ source: String) -> String {
        "\(source): plaintext bundle refused: this space is end-to-end encrypted (its writer is a replica outside the space; it is refused at every sync)"
    }

    private static func sealedRefused(_ source: String) -> String {
        "\(source): sealed (end-to-end encrypted) bundle refused: this replica is in no encrypted space (join it with `crdt-sync space join`; it is refused at every sync until then)"
    }

    /// The replica applied the batch.
    public mutating func applied(_ outcome: IntegrationReport) throws -> Action {
        try expect(.awaitingApply)
        take(outcome)
        if foreignOwnApplied > 0 { report.foreignOwnChanges = foreignOwnApplied + foreignOwnAfterMove }
        return try recordPeers()
    }

    private mutating func recordPeers() throws -> Action {
        let peers = peerVersions.sorted { $0.key < $1.key }.map { PeerVersion(replica: $0.key, version: $0.value) }
        report.peers = peers.map(\.replica.description)
        state = .awaitingPeers
        if peers.isEmpty { return try peersRecorded() }
        return .recordPeers(peers)
    }

    private mutating func notePeer(_ bundle: SyncBundle) {
        guard bundle.sender != local else { return }
        // A bundle from the other side of the space's line (plaintext in an encrypted space,
        // sealed outside one) is refused whole: its sender is no peer of this replica.
        if sealed ? !bundle.changes.isEmpty : bundle.isSealed { return }
        // Every record of a page carries the page's vector: merged once.
        if lastPeerVector?.sender == bundle.sender, lastPeerVector?.version == bundle.senderVersion { return }
        peerVersions[bundle.sender, default: VersionVector()].merge(bundle.senderVersion)
        lastPeerVector = (bundle.sender, bundle.senderVersion)
    }

    // MARK: Streaming: each bundle applied as it arrives

    /// Streaming: a bundle arrived (one of the send's replies, or of a receive's bundles).
    ///
    /// - Returns: the batch to apply (`.apply` or `.applySealed`, once `batchSize` changes are
    ///   gathered; report what the replica did with `batchApplied`, for each batch or once for
    ///   all applied in one transaction), or nil when there is none yet. Changes repeated across
    ///   bundles are counted once (and handed over again); each batch is in canonical causal order.
    public mutating func arrived(_ item: ReceivedBundle) throws -> Action? {
        guard state == .awaitingSend || state == .awaitingBundles else { throw MisuseError(description: "arrived in state \(state)") }
        notePeer(item.bundle)
        if sealed {
            if !item.bundle.changes.isEmpty { report.skipped.append(Self.plaintextRefused(item.source)) }
            guard !item.bundle.sealedUnits.isEmpty else { return nil }
            report.receivedBundles += 1
            // Repeats are counted once but still handed over: the replica knows a unit by its
            // bytes, and a copy that does not open must not hide one that does.
            for unit in item.bundle.sealedUnits where firstArrival(unit.author, unit.startSeq, unit.endSeq) {
                report.receivedChanges += 1
                if checking.contains(unit.author) { report.checkedChanges += 1 }
            }
            gatheredUnits += item.bundle.sealedUnits
            guard gatheredUnits.count >= batchSize else { return nil }
            return takeGathered()
        }
        if item.bundle.isSealed && !item.bundle.sealedUnits.isEmpty {
            report.skipped.append(Self.sealedRefused(item.source))
        }
        guard !item.bundle.changes.isEmpty else { return nil }
        if !item.continuesPage { report.receivedBundles += 1 }
        for change in item.bundle.changes {
            // Repeats are counted once but still handed over: two copies of one replica's
            // database may have written one seq differently (a relay keeps a branch sent again
            // beside the other), and the branch that comes second must not hide behind the first.
            // The replica takes a true repeat for a duplicate.
            if firstArrival(change.replica, change.startSeq, change.endSeq) {
                report.receivedChanges += 1
                if checking.contains(change.replica) { report.checkedChanges += 1 }
                if change.replica == local, localVersion[change.replica] < change.endSeq {
                    // Our own identity, operations we never made: another copy of this replica.
                    report.foreignOwnChanges += 1
                    // The replica moved to a new identity at the first such batch: the rest are
                    // another's to it, applied as one batch applies them all, and counted here.
                    if foreignOwnApplied > 0 { foreignOwnAfterMove += 1 }
                }
            }
            gathered.append(change)
        }
        guard gathered.count >= batchSize else { return nil }
        return takeGathered()
    }

    /// What was gathered, as a batch in canonical causal order (sealed units by author and seq).
    private mutating func takeGathered() -> Action {
        defer { gathered = []; gatheredUnits = [] }
        if sealed { return .applySealed(gatheredUnits.sorted { ($0.author, $0.startSeq, $0.endSeq) < ($1.author, $1.startSeq, $1.endSeq) }) }
        return .apply(CausalOrder.canonical(gathered))
    }

    /// Whether `author`'s `start ... end` is new to this session (and notes it as received).
    private mutating func firstArrival(_ author: ReplicaID, _ start: UInt64, _ end: UInt64) -> Bool {
        guard arrivedRanges[author, default: SeqRanges()].insert(start, end) else { return false }
        receivedOperations &+= end &- start &+ 1
        return true
    }

    /// Streaming: the replica applied what `arrived` handed out (one batch, or all of them).
    public mutating func batchApplied(_ outcome: IntegrationReport) throws {
        guard state == .awaitingSend || state == .awaitingBundles else { throw MisuseError(description: "batchApplied in state \(state)") }
        batches += 1
        take(outcome)
    }

    /// Counts what an applied batch did in the report.
    private mutating func take(_ outcome: IntegrationReport) {
        report.applied += outcome.applied
        report.duplicates += outcome.duplicates
        report.pending = outcome.pending
        report.quarantined += outcome.quarantined
        report.rejected += outcome.rejected
        report.refused += outcome.refused
        report.forks.appendNew(outcome.forks)
        report.forksRepaired += outcome.forksRepaired
        foreignOwnApplied += outcome.foreignOwnChanges
    }

    /// Streaming: the send and its replies are done; `complete` when they held all we lack.
    public mutating func sentAll(complete: Bool) throws -> Action {
        try expect(.awaitingSend)
        if complete { return try streamEnded() }
        state = .awaitingBundles
        return .receive(version: localVersion)
    }

    /// Streaming: the receive handed over its last bundle; `skipped` could not be read this time.
    public mutating func receivedAll(skipped: [SkippedInput]) throws -> Action {
        try expect(.awaitingBundles)
        report.skipped += skipped.map { "\($0.source): \($0.reason)" }
        return try streamEnded()
    }

    private mutating func streamEnded() throws -> Action {
        if foreignOwnApplied > 0 { report.foreignOwnChanges = foreignOwnApplied + foreignOwnAfterMove }
        // The last batch (`applied`), even empty when none was applied: the report says what still waits.
        if !gathered.isEmpty || !gatheredUnits.isEmpty || batches == 0 {
            state = .awaitingApply
            return takeGathered()
        }
        return try recordPeers()
    }

    /// What this replica had, with what the session received since that follows on from it:
    /// where a retried receive starts.
    public var receivedVersion: VersionVector {
        let base = receiveBase ?? localVersion
        var version = base
        for (author, ranges) in arrivedRanges {
            let end = ranges.contiguousEnd(after: base[author])
            if end > version[author] { version[author] = end }
        }
        return version
    }

    /// How far a receive has come, for a progress display.
    public var progress: SyncProgress {
        SyncProgress(receivedOperations: receivedOperations, expectedOperations: expectedOperations, report: report)
    }


    /// The peers were recorded: the session is over.
    public mutating func peersRecorded() throws -> Action {
        try expect(.awaitingPeers)
        state = .done
        return .finish(report)
    }

    /// Counts a transport retry in the report.
    public mutating func retried() { report.retries += 1 }

    private func expect(_ expected: State) throws {
        guard state == expected else { throw MisuseError(description: "expected state \(expected), in \(state)") }
    }
}

/// How far a sync's receive has come (`SyncEngine.onProgress`).
public struct SyncProgress: Sendable {
    /// Operations (seqs) of the distinct changes received so far.
    public var receivedOperations: UInt64
    /// Operations the other side said it has that this replica lacked at the start (a folder's
    /// or relay's version vector: the total to expect, roughly).
    public var expectedOperations: UInt64
    /// The report so far.
    public var report: SyncReport
}

/// Disjoint seq ranges of one author, sorted: an author's changes arrive in runs, so they stay a
/// few ranges whatever the history's length.
struct SeqRanges: Sendable {
    private var ranges: [ClosedRange<UInt64>] = []

    /// Adds `start ... end`; false when it was covered already.
    mutating func insert(_ start: UInt64, _ end: UInt64) -> Bool {
        let lower = min(start, end)
        let upper = max(start, end)
        // The first range that ends at or past the seq before `lower` (it may touch or cover it).
        var low = 0
        var high = ranges.count
        while low < high {
            let mid = (low + high) / 2
            if ranges[mid].upperBound &+ 1 < lower && ranges[mid].upperBound < .max { low = mid + 1 } else { high = mid }
        }
        if low < ranges.count, ranges[low].lowerBound <= lower, ranges[low].upperBound >= upper { return false }
        var merged = lower ... upper
        var end = low
        while end < ranges.count, ranges[end].lowerBound <= (merged.upperBound == .max ? .max : merged.upperBound + 1) {
            merged = min(merged.lowerBound, ranges[end].lowerBound) ... max(merged.upperBound, ranges[end].upperBound)
            end += 1
        }
        ranges.replaceSubrange(low ..< end, with: [merged])
        return true
    }

    /// The last seq of the run that goes on from `seq` (`seq` itself when none does).
    func contiguousEnd(after seq: UInt64) -> UInt64 {
        guard seq < .max else { return seq }
        for range in ranges where range.contains(seq + 1) { return range.upperBound }
        return seq
    }
}

/// What one sync did.
public struct SyncReport: Sendable, Codable, Equatable {
    /// Changes sent (after the replica cut them to what the other side lacks).
    public var sentChanges = 0
    /// Operations (sequence numbers) those changes cover.
    public var sentOperations: UInt64 = 0
    /// Bundles received that held changes.
    public var receivedBundles = 0
    /// Distinct changes received.
    public var receivedChanges = 0
    /// Changes applied (including waiting ones they released).
    public var applied = 0
    /// Changes this replica already had.
    public var duplicates = 0
    /// Changes waiting for their dependencies after the sync (in the whole replica).
    public var pending = 0
    /// Changes received and kept aside in the quarantine (they refer to something that does not exist).
    public var quarantined = 0
    /// Changes received and refused (malformed, or the quarantine was full).
    public var rejected = 0
    /// Received changes in this replica's own name that it never made (another copy of it).
    public var foreignOwnChanges = 0
    /// Identities this replica wrote as that a copy of its database wrote differently, repaired
    /// (its own branch re-issued as the identity it writes as: `NoteStore.reissues()`).
    public var forksRepaired = 0
    /// Changes of this replica's own written identities taken back from the other side to
    /// compare with what it made (a check, before sending).
    public var checkedChanges = 0
    /// Why received sealed units were refused (forged, altered, sealed under another key), one
    /// line each; empty in a plain space.
    public var refused: [String] = []
    /// Others' identities found writing one seq twice, differently (their changes are counted in
    /// `rejected`), one line each: two copies of one database, or a member that sealed one range
    /// twice. The version held here stays.
    public var forks: [String] = []
    /// Inputs that could not be read this time (they are read again next time).
    public var skipped: [String] = []
    /// Transport retries made.
    public var retries = 0
    /// The peers whose versions were recorded.
    public var peers: [String] = []

    /// An empty report: nothing done yet.
    public init() {}

    /// Adds what a later round of the same sync did (the pending count is the later one's).
    package mutating func add(_ later: SyncReport) {
        sentChanges += later.sentChanges
        sentOperations += later.sentOperations
        receivedBundles += later.receivedBundles
        receivedChanges += later.receivedChanges
        applied += later.applied
        duplicates += later.duplicates
        pending = later.pending
        quarantined += later.quarantined
        rejected += later.rejected
        foreignOwnChanges += later.foreignOwnChanges
        forksRepaired += later.forksRepaired
        checkedChanges += later.checkedChanges
        refused += later.refused
        forks.appendNew(later.forks)
        skipped += later.skipped
        retries += later.retries
        for peer in later.peers where !peers.contains(peer) { peers.append(peer) }
    }
}

/// A canonical causal order of changes: what a session sends and applies.
///
/// The order in which a replica lists its changes is causal but not a function of the set of
/// changes alone (waiting changes are released in the order they arrived). Sorting what crosses
/// a transport makes the outcome, and a simulation seed, independent of arrival order.
///
/// Built from each author's changes in seq order: the author whose change came last goes on while
/// its next change is ready (every operation it depends on is already placed, or not in the set);
/// otherwise the ready change with the earliest first timestamp (then author) goes next. One
/// always is ready in a causal history (a change's author had observed, through its clock, every
/// operation it depends on); without one (a hostile set) the earliest goes, and the receiver's
/// pending set sorts it out. Keeping an author's changes in runs lets a receiver log a batch in a
/// few rows.
package enum CausalOrder {
    /// The changes in canonical causal order.
    ///
    /// - Complexity: O(*n* · *a*) for *n* changes of *a* authors (a handful).
    package static func canonical(_ changes: [Change]) -> [Change] {
        guard changes.count > 1 else { return changes }
        var found: [ReplicaID] = []
        var byAuthor: [[Int]] = []
        for i in changes.indices {
            let replica = changes[i].replica
            if let a = found.firstIndex(of: replica) { byAuthor[a].append(i) } else { found.append(replica); byAuthor.append([i]) }
        }
        let sorted = found.indices.sorted { found[$0] < found[$1] }
        let authors = sorted.map { found[$0] }
        let queues = sorted.map { a in
            byAuthor[a].sorted { (changes[$0].startSeq, changes[$0].endSeq, $0) < (changes[$1].startSeq, changes[$1].endSeq, $1) }
        }
        var next = [Int](repeating: 0, count: authors.count)
        func ready(_ change: Int) -> Bool {
            for dependency in changes[change].dependencies.sortedEntries where dependency.replica != changes[change].replica {
                guard let a = authors.firstIndex(of: dependency.replica), next[a] < queues[a].count else { continue }
                if changes[queues[a][next[a]]].startSeq <= dependency.seq { return false }
            }
            return true
        }
        func head(_ a: Int) -> Int { queues[a][next[a]] }
        var result: [Change] = []
        result.reserveCapacity(changes.count)
        var current: Int?
        while result.count < changes.count {
            if let a = current, next[a] < queues[a].count, ready(head(a)) {
                result.append(changes[head(a)])
                next[a] += 1
                continue
            }
            var best: Int?
            var fallback: Int?
            for a in authors.indices where next[a] < queues[a].count {
                let timestamp = changes[head(a)].timestamp
                if fallback == nil || timestamp < changes[head(fallback!)].timestamp { fallback = a }
                if ready(head(a)), best == nil || timestamp < changes[head(best!)].timestamp { best = a }
            }
            let a = best ?? fallback!
            result.append(changes[head(a)])
            next[a] += 1
            current = a
        }
        return result
    }
}

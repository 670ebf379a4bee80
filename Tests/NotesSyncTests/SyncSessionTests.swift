import NotesCRDT
import NotesSync
import Testing

/// The sync protocol driven by hand, step by step, with no I/O: each event gives the next action.
struct SyncSessionTests {
    static func notebook(_ seed: UInt64) -> Notebook {
        var rng = SplitMix64(seed: seed)
        return Notebook(replicaID: .random(using: &rng), wallClock: FixedWallClock(1_700_000_000_000 + seed))
    }

    @Test func aRoundSendsExactlyWhatThePeerLacksAndAppliesWhatArrives() throws {
        var a = Self.notebook(1)
        var b = Self.notebook(2)
        let (note, _) = a.createNote(title: "shared", body: "hello")
        try b.merge(a)
        _ = try a.insertText(note, at: 5, " world")
        _ = try b.setPinned(note, true)
        var session = SyncSession(local: a.replicaID, version: a.versionVector)
        guard case .fetchRemoteVersion = try session.start() else { Issue.record("expected fetchRemoteVersion"); return }
        guard case .loadChanges(let since) = try session.remoteVersionReceived(b.versionVector) else {
            Issue.record("expected loadChanges"); return
        }
        #expect(since == b.versionVector)
        guard case .send(let bundle) = try session.changesLoaded(a.changes(since: since)) else { Issue.record("expected send"); return }
        #expect(bundle.sender == a.replicaID)
        #expect(bundle.senderVersion == a.versionVector)
        #expect(bundle.changes == a.changes(since: b.versionVector))
        // The peer's answer arrives twice (a transport that delivered it twice): applied once.
        let answer = SyncBundle(sender: b.replicaID, senderVersion: b.versionVector, changes: b.changes(since: a.versionVector))
        guard case .receive(let version) = try session.sent(.nothing) else { Issue.record("expected receive"); return }
        #expect(version == a.versionVector)
        let received = ReceiveResult(bundles: [ReceivedBundle(bundle: answer, source: "x"), ReceivedBundle(bundle: answer, source: "y")])
        guard case .apply(let changes) = try session.received(received) else { Issue.record("expected apply"); return }
        #expect(changes == CausalOrder.canonical(answer.changes))
        let outcome = try a.apply(contentsOf: changes)
        guard case .recordPeers(let peers) = try session.applied(IntegrationReport(applied: outcome.applied, pending: outcome.pending)) else {
            Issue.record("expected recordPeers"); return
        }
        #expect(peers.map(\.replica) == [b.replicaID])
        #expect(peers[0].version == b.versionVector)
        guard case .finish(let report) = try session.peersRecorded() else { Issue.record("expected finish"); return }
        #expect(report.sentChanges == bundle.changes.count)
        #expect(report.receivedChanges == answer.changes.count)
        #expect(report.receivedBundles == 2)
        #expect(report.applied == answer.changes.count)
        try b.merge(a)
        #expect(a.digest() == b.digest())
    }

    @Test func anotherBranchAtSeqsAlreadyReceivedIsHandedOver() throws {
        // Two copies of one replica's database wrote seqs 1-2 differently; a relay serves both
        // (the second sent again): the session must not take the second for a repeat.
        var rng = SplitMix64(seed: 9)
        let forked = ReplicaID.random(using: &rng)
        var one = Notebook(replicaID: forked, wallClock: FixedWallClock(1_700_000_000_000))
        var two = Notebook(replicaID: forked, wallClock: FixedWallClock(1_700_000_000_500))
        _ = one.createNote(title: "one")
        _ = two.createNote(title: "two")
        let first = one.changes(since: VersionVector())
        let second = two.changes(since: VersionVector())
        #expect(first.map(\.endSeq) == second.map(\.endSeq))
        #expect(first != second)
        let local = Self.notebook(10)
        var session = SyncSession(local: local.replicaID, version: local.versionVector)
        _ = try session.startReceiving(from: local.versionVector)
        let relay = ReplicaID.random(using: &rng)
        let received = ReceiveResult(bundles: [
            ReceivedBundle(bundle: SyncBundle(sender: relay, senderVersion: one.versionVector, changes: first), source: "page"),
            ReceivedBundle(bundle: SyncBundle(sender: relay, senderVersion: one.versionVector, changes: second), source: "page"),
        ])
        guard case .apply(let changes) = try session.received(received) else { Issue.record("expected apply"); return }
        #expect(Set(changes) == Set(first + second))
    }

    @Test func nothingToSendGoesStraightToReceiving() throws {
        let a = Self.notebook(3)
        var session = SyncSession(local: a.replicaID, version: a.versionVector)
        _ = try session.start()
        guard case .receive = try session.remoteVersionReceived(VersionVector()) else { Issue.record("expected receive"); return }
    }

    @Test func aCompleteSendSkipsTheReceive() throws {
        var a = Self.notebook(4)
        _ = a.createNote(title: "x")
        var session = SyncSession(local: a.replicaID, version: a.versionVector)
        _ = try session.start()
        _ = try session.remoteVersionReceived(VersionVector())
        _ = try session.changesLoaded(a.changes(since: VersionVector()))
        guard case .apply(let changes) = try session.sent(SendResult(replies: [], complete: true)) else {
            Issue.record("expected apply"); return
        }
        #expect(changes.isEmpty)
    }

    @Test func changesNobodyAskedForAreRefused() throws {
        var a = Self.notebook(5)
        _ = a.createNote(title: "x")
        var session = SyncSession(local: a.replicaID, version: a.versionVector)
        _ = try session.start()
        _ = try session.remoteVersionReceived(a.versionVector.merging(VersionVector()))  // the peer has everything
        var stale = SyncSession(local: a.replicaID, version: VersionVector())
        _ = try stale.start()
        _ = try stale.remoteVersionReceived(VersionVector())
        // A replica that hands over changes past the version the session started from is a bug.
        #expect(throws: SyncSession.MisuseError.self) { _ = try stale.changesLoaded(a.changes(since: VersionVector())) }
    }

    @Test func stepsOutOfOrderAreMisuse() throws {
        var session = SyncSession(local: .random(), version: VersionVector())
        #expect(throws: SyncSession.MisuseError.self) { _ = try session.received(ReceiveResult(bundles: [])) }
        _ = try session.start()
        #expect(throws: SyncSession.MisuseError.self) { _ = try session.start() }
    }

    /// Changes in this replica's own name that it never made come from another copy of it.
    @Test func foreignChangesInOurOwnNameAreCounted() throws {
        var a = Self.notebook(6)
        var copy = a
        _ = a.createNote(title: "original")
        _ = copy.createNote(title: "made by the copy")
        _ = copy.createNote(title: "and more")
        var session = SyncSession(local: a.replicaID, version: a.versionVector)
        _ = try session.start()
        _ = try session.remoteVersionReceived(a.versionVector)
        let bundle = SyncBundle(sender: .random(), senderVersion: copy.versionVector, changes: copy.changes(since: a.versionVector))
        _ = try session.received(ReceiveResult(bundles: [ReceivedBundle(bundle: bundle, source: "x")]))
        _ = try session.applied(IntegrationReport())
        guard case .finish(let report) = try session.peersRecorded() else { Issue.record("expected finish"); return }
        #expect(report.foreignOwnChanges > 0)
    }
}

import NotesCRDT
import Testing

/// Two different changes for the same (replica, seq) are an equivocation: never a duplicate.
struct EquivocationTests {
    @Test func theSameSeqsWrittenTwiceDifferentlyAreRefused() throws {
        var a = Notebook(replicaID: ReplicaID(Identifier128(high: 1, low: 1)), wallClock: FixedWallClock(1_700_000_000_000))
        let (note, _) = a.createNote(title: "t", body: "base")
        // A copy of the replica, writing later as the same identity.
        var copy = try Notebook(snapshot: a.snapshot(), wallClock: FixedWallClock(1_700_000_500_000))
        _ = try a.setTitle(note, "from a")
        _ = try a.setPinned(note, true)
        _ = try copy.setTitle(note, "from the copy")
        var third = Notebook(replicaID: ReplicaID(Identifier128(high: 3, low: 3)), wallClock: FixedWallClock(1_700_000_000_000))
        third.apply(contentsOf: a.changes(since: VersionVector()))
        let forked = try #require(copy.changes(since: VersionVector()).last)
        let seq = try #require(third.forkPoint(of: forked))
        #expect(seq >= forked.startSeq && seq <= forked.endSeq)
        let outcome = third.apply(forked)
        guard case .rejected(let error) = outcome else {
            Issue.record("expected a refusal, got \(outcome)")
            return
        }
        #expect(error.code == .equivocation)
        #expect(third.note(note)?.title == "from a")
        // The genuine changes, however cut, are duplicates.
        for change in a.changes(since: VersionVector()) {
            #expect(third.forkPoint(of: change) == nil)
            #expect(third.apply(change) == .duplicate)
        }
        for cut in 1 ..< a.versionVector[a.replicaID] {
            var partial = VersionVector()
            partial[a.replicaID] = cut
            for change in a.changes(since: partial) { #expect(third.forkPoint(of: change) == nil) }
        }
    }
}

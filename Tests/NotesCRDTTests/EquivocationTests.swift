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

    /// A copy that first sees the other branch at seq *f* (a chimera brought it that seq without
    /// the ones before) knows the branches part no later than its lowest own seq stamped too late
    /// to come before the other's *f*; never inside the prefix the copies share; and no lower
    /// than *f* when its own were stamped first.
    @Test func theForkBoundReachesBackWhereTimestampsProveTheBranchesPart() throws {
        let a = Notebook(replicaID: ReplicaID(Identifier128(high: 1, low: 1)), wallClock: FixedWallClock(1_700_000_000_000))
        var base = a
        let (note, _) = base.createNote(title: "t", body: "base")
        let copied = base.versionVector[base.replicaID]
        var early = try Notebook(snapshot: base.snapshot(), wallClock: FixedWallClock(1_700_000_100_000))
        var late = try Notebook(snapshot: base.snapshot(), wallClock: FixedWallClock(1_700_000_900_000))
        for text in ["p", "q", "r"] { _ = try early.insertText(note, at: 0, text) }
        for text in ["x", "y", "z"] { _ = try late.insertText(note, at: 0, text) }
        var past = VersionVector()
        past[base.replicaID] = copied + 2
        let earlyTail = try #require(early.changes(since: past).first)
        let lateTail = try #require(late.changes(since: past).first)
        #expect(earlyTail.startSeq == copied + 3 && lateTail.startSeq == copied + 3)
        // The later copy's own two before were stamped after the early one's third: they differ.
        #expect(late.forkPoint(of: earlyTail) == copied + 3)
        #expect(late.forkBound(of: earlyTail, at: copied + 3) == copied + 1)
        // The early copy's were stamped first: nothing is proved below the seq that differs.
        #expect(early.forkPoint(of: lateTail) == copied + 3)
        #expect(early.forkBound(of: lateTail, at: copied + 3) == copied + 3)
        // A change that shares the prefix: the bound stops at the fork, not inside the prefix.
        let whole = try #require(early.changes(since: VersionVector()).last)
        if let found = late.forkPoint(of: whole) { #expect(late.forkBound(of: whole, at: found) >= copied + 1) }
    }

    /// What of one copy's branch another holder keeps: the shared prefix and nothing past the
    /// fork, however the holder's log joins the changes.
    @Test func theSeqsHeldAlikeAreThePrefixBothCopiesShare() throws {
        let id = ReplicaID(Identifier128(high: 2, low: 2))
        var base = Notebook(replicaID: id, wallClock: FixedWallClock(1_700_000_000_000))
        let (note, _) = base.createNote(title: "t", body: "base")
        let copied = base.versionVector[id]
        var one = try Notebook(snapshot: base.snapshot(), wallClock: FixedWallClock(1_700_000_100_000))
        var two = try Notebook(snapshot: base.snapshot(), wallClock: FixedWallClock(1_700_000_200_000))
        for text in ["a", "b"] { _ = try one.insertText(note, at: 0, text) }
        for text in ["x", "y", "z"] { _ = try two.insertText(note, at: 0, text) }
        // Another device that holds the second copy's branch (its log joins what follows on).
        var holder = Notebook(replicaID: .random(), wallClock: FixedWallClock(1_700_000_300_000))
        for change in two.changes(since: VersionVector()) { _ = holder.apply(change) }
        func seqs(_ runs: [ClosedRange<UInt64>]) -> Set<UInt64> { Set(runs.flatMap { Array($0) }) }
        #expect(seqs(one.seqsHeldAlike(of: id, in: holder)) == Set(1 ... copied))
        #expect(seqs(two.seqsHeldAlike(of: id, in: holder)) == Set(1 ... copied + 3))
        // Each change of the other copy's past the copy: none of it is the first copy's.
        var past = VersionVector()
        past[id] = copied
        #expect(two.changes(since: past).flatMap(one.seqsHeldAlike(in:)).isEmpty)
        #expect(seqs(one.changes(since: past).flatMap(one.seqsHeldAlike(in:))) == [copied + 1, copied + 2])
    }

    /// Two copies typing on at the end of one text write the same seqs at the same timestamps;
    /// only the content tells the forks apart.
    @Test func forksAtTheSameTimestampAreRefusedByContent() throws {
        var a = Notebook(replicaID: ReplicaID(Identifier128(high: 1, low: 1)), wallClock: FixedWallClock(1_700_000_000_000))
        let (note, _) = a.createNote(title: "t", body: "base")
        var copy = try Notebook(snapshot: a.snapshot(), wallClock: FixedWallClock(1_700_000_000_000))
        let mine = try #require(try a.insertText(note, at: 4, " from a"))
        let theirs = try #require(try copy.insertText(note, at: 4, " from the copy"))
        // The premise: the timestamps say nothing.
        #expect(mine.startSeq == theirs.startSeq && mine.timestamp == theirs.timestamp)
        let title = try #require(try a.setTitle(note, "é composed"))
        let otherTitle = try #require(try copy.setTitle(note, "e\u{301} decomposed"))
        _ = (title, otherTitle)

        var third = Notebook(replicaID: ReplicaID(Identifier128(high: 3, low: 3)), wallClock: FixedWallClock(1_700_000_000_000))
        third.apply(contentsOf: a.changes(since: VersionVector()))
        // " from " is the same six characters after the same one on both: they differ at "a"/"t".
        #expect(third.forkPoint(of: theirs) == theirs.startSeq + 6)
        guard case .rejected(let error) = third.apply(theirs) else {
            Issue.record("a fork at the same timestamps passed")
            return
        }
        #expect(error.code == .equivocation)
        #expect(third.body(of: note)?.string == "base from a")
        // The copy's whole history, however cut, forks at the first seq it wrote differently.
        for change in copy.changes(since: VersionVector()) where change.endSeq >= theirs.startSeq {
            #expect(third.forkPoint(of: change) != nil, "\(change.startSeq)-\(change.endSeq)")
        }
    }

    /// Field writes at one timestamp: equal spellings are duplicates, canonically equivalent but
    /// different strings (é composed, and e with a combining accent) are not.
    @Test func fieldWritesCompareByTheirBytes() throws {
        var a = Notebook(replicaID: ReplicaID(Identifier128(high: 1, low: 1)), wallClock: FixedWallClock(1_700_000_000_000))
        let (note, _) = a.createNote(title: "t", body: "")
        var copy = try Notebook(snapshot: a.snapshot(), wallClock: FixedWallClock(1_700_000_000_000))
        var twin = try Notebook(snapshot: a.snapshot(), wallClock: FixedWallClock(1_700_000_000_000))
        let mine = try #require(try a.setTitle(note, "caf\u{E9}"))
        let theirs = try #require(try copy.setTitle(note, "cafe\u{301}"))
        let same = try #require(try twin.setTitle(note, "caf\u{E9}"))
        #expect(mine.timestamp == theirs.timestamp && mine.startSeq == theirs.startSeq)
        #expect(a.forkPoint(of: theirs) == theirs.startSeq)
        #expect(a.forkPoint(of: same) == nil)
        #expect(a.apply(same) == .duplicate)
    }

    /// Genuine changes, however the log joined them and however a sync cut them, are duplicates:
    /// inserts typed in runs, backspaces and forward deletes (run-length delete runs), a range
    /// delete, fields and tags, over seeds.
    @Test(arguments: [UInt64(1), 2, 3, 4, 5, 6])
    func genuineChangesAreDuplicatesHoweverCut(seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        var a = Notebook(replicaID: ReplicaID(Identifier128(high: 1, low: seed)), wallClock: FixedWallClock(1_700_000_000_000))
        var made: [Change] = []
        let (note, created) = a.createNote(title: "t", body: "hello")
        made.append(created)
        for _ in 0 ..< 120 {
            let length = a.body(of: note)?.count ?? 0
            switch rng.next() % 6 {
            case 0, 1:
                let at = Int(rng.next() % UInt64(length + 1))
                if let change = try a.insertText(note, at: at, String(repeating: "abcé", count: Int(rng.next() % 3) + 1)) { made.append(change) }
            case 2 where length > 0:
                // Backspacing through a few characters, one delete each.
                var at = Int(rng.next() % UInt64(length)) + 1
                for _ in 0 ..< Int(rng.next() % 4) + 1 where at > 0 {
                    if let change = try a.deleteText(note, (at - 1) ..< at) { made.append(change) }
                    at -= 1
                }
            case 3 where length > 1:
                let at = Int(rng.next() % UInt64(length - 1))
                for _ in 0 ..< 3 where at < (a.body(of: note)?.count ?? 0) {
                    if let change = try a.deleteText(note, at ..< at + 1) { made.append(change) }
                }
            case 4 where length > 2:
                if let change = try a.deleteText(note, 0 ..< 2) { made.append(change) }
            default:
                if let change = try a.setTitle(note, "title \(rng.next() % 5)") { made.append(change) }
                if let change = try a.setTag(note, "tag\(rng.next() % 3)", member: rng.next() % 2 == 0) { made.append(change) }
            }
        }
        var third = Notebook(replicaID: ReplicaID(Identifier128(high: 3, low: 3)), wallClock: FixedWallClock(1_700_000_000_000))
        // One change per edit here, joined runs in `a`'s log: the two spellings meet both ways.
        third.apply(contentsOf: made)
        #expect(third.versionVector == a.versionVector)
        let joined = a.changes(since: VersionVector())
        #expect(joined.count < made.count, "the log joined nothing: the test would not compare spellings")
        for cut in 0 ..< a.versionVector[a.replicaID] {
            var partial = VersionVector()
            partial[a.replicaID] = cut
            for change in a.changes(since: partial) {
                #expect(third.forkPoint(of: change) == nil, "cut at \(cut): \(change.startSeq)-\(change.endSeq)")
            }
        }
        for change in made { #expect(a.forkPoint(of: change) == nil) }
    }
}

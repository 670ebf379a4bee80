import NotesCRDT
import Testing

/// Repairing a forked identity: the copy that finds the fork re-issues its branch under its new
/// identity, and every replica ends with both branches' edits, whatever it held and in whatever
/// order things came.
struct ReissueTests {
    static let r = ReplicaID(Identifier128(high: 1, low: 1))
    static let moved = ReplicaID(Identifier128(high: 2, low: 2))
    static let third = ReplicaID(Identifier128(high: 3, low: 3))

    /// Two copies of one replica that both wrote after the copy: `original` keeps writing as `r`;
    /// `copy` (as `r` too) wrote its own branch.
    struct Fork {
        var original: Notebook
        var copy: Notebook
        var note: NoteID
        var common: VersionVector
    }

    static func fork(copyTypes text: String = " (typed on the copy)", originalTypes mine: String = ", then the original",
                     clockOffset: UInt64 = 500_000) throws -> Fork {
        var original = Notebook(replicaID: r, wallClock: FixedWallClock(1_700_000_000_000))
        let (note, _) = original.createNote(title: "shared", body: "base")
        let common = original.versionVector
        var copy = try Notebook(snapshot: original.snapshot(), wallClock: FixedWallClock(1_700_000_000_000 + clockOffset))
        _ = try original.insertText(note, at: 4, mine)
        original.wallClock = FixedWallClock(1_700_000_060_000)  // pinned a minute later
        _ = try original.setPinned(note, true)
        _ = try copy.insertText(note, at: 4, text)
        _ = try copy.setTitle(note, "the copy's title")
        _ = copy.createNote(title: "only on the copy", body: "new")
        _ = try copy.deleteText(note, 0 ..< 1)
        return Fork(original: original, copy: copy, note: note, common: common)
    }

    /// The copy moved to `moved` and re-issued its branch against `theirs` (the other branch's
    /// changes), then applied them.
    static func repair(_ copy: Notebook, against theirs: [Change]) throws -> (Notebook, [Change]) {
        var repaired = try Notebook(snapshot: copy.snapshot(), wallClock: FixedWallClock(1_700_000_900_000), replicaID: moved)
        let forks = theirs.compactMap { repaired.forkPoint(of: $0) }
        let first = try #require(forks.min())
        let reissue = repaired.reissuing(r, from: first, through: repaired.versionVector[r])
        #expect(!reissue.isEmpty)
        for change in reissue {
            guard case .applied = repaired.apply(change) else {
                Issue.record("a re-issue did not apply to its own replica")
                continue
            }
        }
        #expect(repaired.versionVector[r] == first - 1, "the copy's branch left the old identity")
        for change in theirs {
            let outcome = repaired.apply(change)
            if case .rejected(let error) = outcome { Issue.record("after the re-issue the other branch was refused: \(error.message)") }
        }
        return (repaired, reissue)
    }

    @Test func bothCopiesEndWithBothBranches() throws {
        var fork = try Self.fork()
        let theirs = fork.original.changes(since: fork.common)
        var (repaired, reissue) = try Self.repair(fork.copy, against: theirs)
        #expect(repaired.reissues.count == reissue.count)
        fork.original.apply(contentsOf: repaired.changes(since: fork.original.versionVector))
        #expect(fork.original.digest() == repaired.digest())
        let body = try #require(fork.original.body(of: fork.note)?.string)
        #expect(body.contains(", then the original") && body.contains(" (typed on the copy)"), "\(body)")
        #expect(fork.original.allNotes.contains { $0.title == "only on the copy" })
        #expect(fork.original.note(fork.note)?.pinned == true)
        #expect(fork.original.note(fork.note)?.title == "the copy's title")
        // The repaired copy serves nothing of the old identity's forked seqs.
        #expect(repaired.changes(since: fork.original.versionVector).isEmpty)
        repaired.apply(contentsOf: fork.original.changes(since: VersionVector()))
        #expect(repaired.digest() == fork.original.digest())
    }

    /// A third replica that took the copy's branch first (it went round before anyone saw the
    /// fork) drops it when the re-issue comes, and takes the other branch after.
    @Test func aReplicaHoldingTheWithdrawnBranchDropsIt() throws {
        let fork = try Self.fork()
        let theirs = fork.original.changes(since: fork.common)
        let (repaired, _) = try Self.repair(fork.copy, against: theirs)
        for order in 0 ..< 3 {
            var other = Notebook(replicaID: Self.third, wallClock: FixedWallClock(1_700_000_000_000))
            other.apply(contentsOf: fork.copy.changes(since: VersionVector()))
            #expect(other.body(of: fork.note)?.string.contains("typed on the copy") == true)
            switch order {
            case 0:
                other.apply(contentsOf: repaired.changes(since: VersionVector()))
            case 1:
                // The other branch first: a fork here, refused until the re-issue comes.
                other.apply(contentsOf: theirs)
                other.apply(contentsOf: repaired.changes(since: VersionVector()))
                other.apply(contentsOf: theirs)
            default:
                // The original's changes, which fork from what it holds until the re-issue
                // comes, are refused the first time: the next sync brings them again.
                other.apply(contentsOf: repaired.changes(since: VersionVector()).reversed())
                other.apply(contentsOf: fork.copy.changes(since: VersionVector()))
                other.apply(contentsOf: repaired.changes(since: other.versionVector))
            }
            #expect(other.digest() == repaired.digest(), "order \(order)")
            #expect(other.versionVector == repaired.versionVector, "order \(order)")
        }
    }

    /// A re-issue withdraws its branch as soon as a replica sees it, also while it waits for the
    /// re-issuer's earlier changes: a re-issue that waited behind one that needs the other branch
    /// (a repair in two steps) left the withdrawn branch held, and the other branch quarantined
    /// over it, for good (the `forked-replica` simulation, seed 47).
    @Test func aWaitingReissueWithdrawsItsBranchAtOnce() throws {
        let fork = try Self.fork()
        let theirs = fork.original.changes(since: fork.common)
        let (repaired, reissue) = try Self.repair(fork.copy, against: theirs)
        // One re-issuing change per log entry of the branch: the last waits for the others.
        try #require(reissue.count >= 2)
        let last = try #require(reissue.last)
        guard case .reissue(let withdrawn) = last.operations.first else {
            Issue.record("a re-issuing change starts with its re-issue")
            return
        }
        var other = Notebook(replicaID: Self.third, wallClock: FixedWallClock(1_700_000_000_000))
        other.apply(contentsOf: fork.copy.changes(since: VersionVector()))
        #expect(other.allNotes.contains { $0.title == "only on the copy" })
        #expect(other.apply(last) == .pending)
        #expect(other.versionVector[Self.r] == withdrawn.seq - 1, "the seqs it re-issues left the old identity at once")
        #expect(!other.allNotes.contains { $0.title == "only on the copy" }, "the copy's note is re-issued by a change still to come")
        // The rest of the re-issue, and the other branch, bring it to where the re-issuer is.
        other.apply(contentsOf: repaired.changes(since: VersionVector()))
        other.apply(contentsOf: theirs)
        #expect(other.pendingCount == 0)
        #expect(other.digest() == repaired.digest())
        let body = try #require(other.body(of: fork.note)?.string)
        #expect(body.contains(", then the original") && body.contains(" (typed on the copy)"), "\(body)")
        #expect(other.allNotes.contains { $0.title == "only on the copy" })
    }

    /// A merge's sides show after a repair in two steps: the second step's re-issue carries the
    /// context of what it re-issues, older than the first step's, and a side taken from that
    /// context alone covered the first step's re-issue without what it depends on, so
    /// `conflicts(of:)` threw (the `forked-replica` simulation, seed 283).
    @Test func mergesShowAfterARepairInTwoSteps() throws {
        // The original's branch reaches past the copy's title: the first step's re-issue depends
        // on the seq before it, and waits for the branch kept there (the second step withdrew
        // the copy's).
        let fork = try Self.fork(originalTypes: ", then the original, at some length")
        let theirs = fork.original.changes(since: fork.common)
        var repaired = try Notebook(snapshot: fork.copy.snapshot(), wallClock: FixedWallClock(1_700_000_900_000), replicaID: Self.moved)
        let first = try #require(theirs.compactMap { repaired.forkPoint(of: $0) }.min())
        let made = repaired.versionVector[Self.r]
        // The copy's branch: its insert, its title, then its new note and its delete. The first
        // step re-issues from the new note on; the second the insert and the title.
        let tail = first + UInt64(" (typed on the copy)".unicodeScalars.count) + 1
        for (from, through) in [(tail, made), (first, tail - 1)] {
            let reissue = repaired.reissuing(Self.r, from: from, through: through)
            #expect(!reissue.isEmpty)
            for change in reissue { repaired.apply(change) }
        }
        repaired.apply(contentsOf: theirs)
        #expect(repaired.pendingCount == 0)
        // A third replica retitles the note without having seen the copy's title.
        var third = Notebook(replicaID: Self.third, wallClock: FixedWallClock(1_700_000_000_000))
        third.apply(contentsOf: fork.original.changes(since: VersionVector()))
        _ = try third.setTitle(fork.note, "the third's title")
        repaired.apply(contentsOf: third.changes(since: repaired.versionVector))
        third.apply(contentsOf: repaired.changes(since: third.versionVector))
        #expect(repaired.digest() == third.digest())
        for replica in [repaired, third] {
            let shown = try replica.conflicts(of: fork.note)
            #expect(shown.contains { $0.kind == .field(.title) })
            for conflict in shown where conflict.kind == .field(.title) {
                #expect(Set(conflict.sides.map(\.note.title)) == ["the copy's title", "the third's title"])
            }
        }
    }

    /// The old identity's forked changes that come after the re-issue are duplicates.
    @Test func theWithdrawnBranchArrivingLaterIsADuplicate() throws {
        let fork = try Self.fork()
        let theirs = fork.original.changes(since: fork.common)
        let (repaired, _) = try Self.repair(fork.copy, against: theirs)
        var other = Notebook(replicaID: Self.third, wallClock: FixedWallClock(1_700_000_000_000))
        other.apply(contentsOf: repaired.changes(since: VersionVector()))
        let before = other.digest()
        for change in fork.copy.changes(since: fork.common) {
            #expect(other.apply(change) == .duplicate)
            // However cut.
            for seq in change.startSeq ... change.endSeq {
                #expect(other.apply(change.suffix(from: seq)!) == .duplicate)
                #expect(other.apply(change.prefix(through: seq)) == .duplicate)
            }
        }
        #expect(other.digest() == before)
    }

    /// A relay that held the original's seqs and then the copy's tail (a chimera: the copy sent
    /// only what the relay lacked by its version vector) hands both out; the re-issue drops the
    /// copy's tail wherever it was taken.
    @Test func aChimeraOfBothBranchesIsRepaired() throws {
        var fork = try Self.fork(copyTypes: " (the copy typed a good deal more than the original did)")
        let theirs = fork.original.changes(since: fork.common)
        let relayHas = fork.original.versionVector
        #expect(fork.copy.versionVector[Self.r] > relayHas[Self.r])
        let tail = fork.copy.changes(since: relayHas)
        var chimera = Notebook(replicaID: Self.third, wallClock: FixedWallClock(1_700_000_000_000))
        chimera.apply(contentsOf: fork.original.changes(since: VersionVector()))
        // The copy's tail follows operations of the original's branch: applied or quarantined.
        chimera.apply(contentsOf: tail)
        #expect(chimera.versionVector[Self.r] == fork.copy.versionVector[Self.r] || chimera.quarantinedCount > 0)
        let (repaired, _) = try Self.repair(fork.copy, against: theirs)
        chimera.apply(contentsOf: repaired.changes(since: chimera.versionVector))
        fork.original.apply(contentsOf: repaired.changes(since: fork.original.versionVector))
        #expect(chimera.digest() == repaired.digest())
        #expect(fork.original.digest() == repaired.digest())
        #expect(chimera.versionVector[Self.r] == relayHas[Self.r])
        #expect(chimera.quarantinedCount == 0 && chimera.pendingCount == 0)
    }

    /// Two copies that typed the same first characters at the same timestamps wrote the same
    /// operations there: those stay the old identity's, and the fork starts after them.
    @Test func aSharedStartStaysAndTheForkIsRepairedAfterIt() throws {
        var fork = try Self.fork(copyTypes: " from the copy", originalTypes: " from the original")
        let theirs = fork.original.changes(since: fork.common)
        let (repaired, _) = try Self.repair(fork.copy, against: theirs)
        #expect(repaired.versionVector[Self.r] > fork.common[Self.r] + 10, "\" from the \" is shared")
        fork.original.apply(contentsOf: repaired.changes(since: fork.original.versionVector))
        #expect(fork.original.digest() == repaired.digest())
        let body = try #require(repaired.body(of: fork.note)?.string)
        #expect(body.contains(" from the ") && body.contains("copy") && body.contains("original"), "\(body)")
    }

    @Test func reissuesSurviveEncodingAndSnapshots() throws {
        let fork = try Self.fork()
        let (repaired, reissue) = try Self.repair(fork.copy, against: fork.original.changes(since: fork.common))
        let decoded = try ChangeCodec.decode(ChangeCodec.encode(reissue))
        #expect(decoded == reissue)
        for deferring in [false, true] {
            let reopened = try Notebook(snapshot: repaired.snapshot(), deferringLog: deferring)
            #expect(reopened.digest() == repaired.digest())
            #expect(reopened.reissues == repaired.reissues)
        }
    }

    /// A replica that dropped a withdrawn branch (in any order it came) reopens from its snapshot
    /// as it was: the snapshot keeps the re-issues, so its log replays as the rebuild replayed it
    /// (without them, the branch's tail taken out of order replayed differently and the
    /// snapshot's version vector did not match its log).
    @Test func aRebuiltReplicaReopensFromItsSnapshot() throws {
        var fork = try Self.fork(copyTypes: " (the copy typed a good deal more than the original did)")
        let theirs = fork.original.changes(since: fork.common)
        let (repaired, _) = try Self.repair(fork.copy, against: theirs)
        fork.original.apply(contentsOf: repaired.changes(since: fork.original.versionVector))
        for order in 0 ..< 3 {
            var other = Notebook(replicaID: Self.third, wallClock: FixedWallClock(1_700_000_000_000))
            switch order {
            case 0:
                other.apply(contentsOf: fork.copy.changes(since: VersionVector()))
                other.apply(contentsOf: repaired.changes(since: VersionVector()))
            case 1:
                other.apply(contentsOf: fork.original.changes(since: VersionVector()))
                other.apply(contentsOf: fork.copy.changes(since: fork.original.versionVector))
                other.apply(contentsOf: repaired.changes(since: other.versionVector))
            default:
                other.apply(contentsOf: repaired.changes(since: VersionVector()).reversed())
                other.apply(contentsOf: fork.copy.changes(since: VersionVector()))
                other.apply(contentsOf: repaired.changes(since: other.versionVector))
            }
            #expect(other.digest() == repaired.digest(), "order \(order)")
            for deferring in [false, true] {
                var reopened = try Notebook(snapshot: other.snapshot(), wallClock: other.wallClock, deferringLog: deferring)
                reopened.materialize()
                #expect(reopened.logDamage == nil, "order \(order): \(reopened.logDamage?.message ?? "")")
                #expect(reopened.versionVector == other.versionVector, "order \(order)")
                #expect(reopened.digest() == other.digest(), "order \(order)")
                #expect(reopened.reissues == other.reissues, "order \(order)")
                #expect(reopened.pendingCount == other.pendingCount && reopened.quarantinedCount == other.quarantinedCount)
            }
        }
    }

    /// Re-issues from outside are checked like any change: malformed ones are refused, and one
    /// whose operations are not what this replica holds drops nothing.
    @Test func hostileReissuesChangeNothingTheyShouldNot() throws {
        let fork = try Self.fork()
        var held = Notebook(replicaID: Self.third, wallClock: FixedWallClock(1_700_000_000_000))
        held.apply(contentsOf: fork.original.changes(since: VersionVector()))
        let before = held.digest()
        let deps = held.versionVector
        let start = fork.common[Self.r] + 1
        // Past its change's end.
        let short = Change(replica: Self.moved, startSeq: 1, timestamp: Timestamp(rawValue: 5), dependencies: deps,
                           operations: [.reissue(of: OpIDRange(replica: Self.r, seq: start, count: 5)),
                                        .insertText(note: fork.note, origin: nil, text: InsertedText("ab"))])
        guard case .rejected(let e1) = held.apply(short) else { Issue.record("a short re-issue passed"); return }
        #expect(e1.code == .malformedChange)
        // Its own author's seqs.
        let own = Change(replica: Self.r, startSeq: 100, timestamp: Timestamp(rawValue: 5), dependencies: deps,
                         operations: [.reissue(of: OpIDRange(replica: Self.r, seq: 1, count: 1)),
                                      .insertText(note: fork.note, origin: nil, text: InsertedText("a"))])
        guard case .rejected = held.apply(own) else { Issue.record("a re-issue of its own author passed"); return }
        // Seqs at the edge, and past it.
        for (seq, count) in [(Change.maxSeq, 1), (Change.maxSeq, 2), (0, 1), (1, 0)] as [(UInt64, UInt64)] {
            let edge = Change(replica: Self.moved, startSeq: 1, timestamp: Timestamp(rawValue: 5), dependencies: deps,
                              operations: [.reissue(of: OpIDRange(replica: Self.r, seq: seq, count: count)),
                                           .insertText(note: fork.note, origin: nil, text: InsertedText("a"))])
            let outcome = held.apply(edge)
            if seq == Change.maxSeq, count == 1 {
                #expect(outcome == .applied(released: 0))
            } else {
                if case .rejected = outcome {} else { Issue.record("a re-issue of \(count) from \(seq) was taken: \(outcome)") }
                #expect(throws: CRDTError.self) { try ChangeCodec.decode(ChangeCodec.encode([edge])) }
            }
        }
        // A re-issue of the original's seqs that holds other operations than those: nothing dropped.
        var liar = Notebook(replicaID: ReplicaID(Identifier128(high: 9, low: 9)), wallClock: FixedWallClock(1_700_000_000_000))
        liar.apply(contentsOf: held.changes(since: VersionVector()))
        let count = held.versionVector[Self.r] - fork.common[Self.r]
        let lie = Change(replica: liar.replicaID, startSeq: 1, timestamp: Timestamp(rawValue: 1_700_000_000_000 << 16),
                         dependencies: liar.versionVector,
                         operations: [.reissue(of: OpIDRange(replica: Self.r, seq: start, count: count)),
                                      .insertText(note: fork.note, origin: nil, text: InsertedText(Array(String(repeating: "x", count: Int(count)).unicodeScalars)))])
        #expect(held.apply(lie) == .applied(released: 0))
        #expect(held.versionVector[Self.r] == fork.original.versionVector[Self.r], "the original's seqs stay")
        #expect(held.body(of: fork.note)?.string.contains(", then the original") == true)
        _ = before
    }

    /// A re-issuer's withdrawn change whose first operation refers to another re-issue's
    /// operation (an insert after a character that a second fork's repair re-issued) is the
    /// withdrawn branch wherever it is judged: arriving, waiting and released by the other
    /// branch's change, or replayed from a snapshot. Comparing it renamed back every re-issuer's
    /// seqs in the re-issue, not only the ones its own re-issue renamed, so it was not known
    /// whole; its tail was taken on top of the other branch and the snapshot's log replayed
    /// without it (`forked-replica`: "the snapshot's log does not match its version vector").
    @Test func aWithdrawnChangeAfterAnotherReissuedOperationIsKnownInEveryState() throws {
        let p = ReplicaID(Identifier128(high: 4, low: 4)), q = ReplicaID(Identifier128(high: 5, low: 5))
        let x = ReplicaID(Identifier128(high: 6, low: 6)), xMoved = ReplicaID(Identifier128(high: 7, low: 7))
        // A first fork, of `p`, repaired by its copy as `q`: "B" is `q`'s operation, re-issued.
        var pOriginal = Notebook(replicaID: p, wallClock: FixedWallClock(1_700_000_000_000))
        let (note, _) = pOriginal.createNote(title: "shared", body: "base")
        let pCommon = pOriginal.versionVector
        var pCopy = try Notebook(snapshot: pOriginal.snapshot(), wallClock: FixedWallClock(1_700_000_500_000))
        _ = try pOriginal.insertText(note, at: 4, "A")
        _ = try pCopy.insertText(note, at: 4, "B")
        var qRepaired = try Notebook(snapshot: pCopy.snapshot(), wallClock: FixedWallClock(1_700_000_900_000), replicaID: q)
        let pTheirs = pOriginal.changes(since: pCommon)
        let pFirst = try #require(pTheirs.compactMap { qRepaired.forkPoint(of: $0) }.min())
        qRepaired.apply(contentsOf: qRepaired.reissuing(p, from: pFirst, through: qRepaired.versionVector[p]))
        qRepaired.apply(contentsOf: pTheirs)
        let world = qRepaired.changes(since: VersionVector())
        // A second fork, of `x`, which knows all that: both branches write x@1...
        var xOriginal = Notebook(replicaID: x, wallClock: FixedWallClock(1_700_001_000_000))
        xOriginal.apply(contentsOf: world)
        var xCopy = try Notebook(snapshot: xOriginal.snapshot(), wallClock: FixedWallClock(1_700_001_500_000))
        _ = try xOriginal.insertText(note, at: 0, "12345")  // x@1-5, one change
        _ = try xCopy.insertText(note, at: 0, "abc")  // x@1-3
        xCopy.wallClock = FixedWallClock(1_700_002_500_000)
        let body = try #require(xCopy.body(of: note)?.string)
        let at = body.distance(from: body.startIndex, to: try #require(body.firstIndex(of: "B"))) + 1
        _ = try xCopy.insertText(note, at: at, "xyz")  // x@4-6, after `q`'s re-issued "B"
        var through3 = xCopy.versionVector
        through3[x] = 3
        let withdrawn = try #require(xCopy.changes(since: through3).first { $0.replica == x })
        #expect(withdrawn.startSeq == 4)
        var before = xOriginal.versionVector
        before[x] = 0
        let otherBranch = xOriginal.changes(since: before).filter { $0.replica == x }
        // The copy repairs its branch as `xMoved`.
        var xRepaired = try Notebook(snapshot: xCopy.snapshot(), wallClock: FixedWallClock(1_700_003_000_000), replicaID: xMoved)
        let xFirst = try #require(otherBranch.compactMap { xRepaired.forkPoint(of: $0) }.min())
        let reissue = xRepaired.reissuing(x, from: xFirst, through: xRepaired.versionVector[x])
        xRepaired.apply(contentsOf: reissue)
        xRepaired.apply(contentsOf: otherBranch)
        #expect(xRepaired.versionVector[x] == 5)
        for order in 0 ..< 3 {
            var other = Notebook(replicaID: Self.third, wallClock: FixedWallClock(1_700_000_000_000))
            other.apply(contentsOf: world)
            switch order {
            case 0:
                // The re-issue first: the withdrawn change is a duplicate, or waits and is
                // released by the other branch.
                other.apply(contentsOf: reissue)
                other.apply(withdrawn)
                other.apply(contentsOf: otherBranch)
            case 1:
                // The withdrawn change waits through the re-issue's rebuild.
                other.apply(withdrawn)
                other.apply(contentsOf: reissue)
                other.apply(contentsOf: otherBranch)
            default:
                // Released by the other branch before the re-issue comes.
                other.apply(withdrawn)
                other.apply(contentsOf: otherBranch)
                other.apply(contentsOf: reissue)
            }
            #expect(other.versionVector[x] == 5, "order \(order): the withdrawn tail is not kept")
            #expect(other.digest() == xRepaired.digest(), "order \(order)")
            #expect(other.pendingCount == 0 && other.quarantinedCount == 0, "order \(order)")
            for deferring in [false, true] {
                var reopened = try Notebook(snapshot: other.snapshot(), wallClock: other.wallClock, deferringLog: deferring)
                reopened.materialize()
                #expect(reopened.logDamage == nil, "order \(order): \(reopened.logDamage?.message ?? "")")
                #expect(reopened.versionVector == other.versionVector, "order \(order), deferring \(deferring)")
                #expect(reopened.digest() == other.digest(), "order \(order), deferring \(deferring)")
            }
        }
    }
}

/// What re-issues cost a replica that holds what they withdraw: the log is replayed once per
/// batch, however many re-issues the batch holds, and a batch crafted to call for more replays
/// (re-issues between changes of the withdrawn identity) makes a bounded number of them.
struct ReissueCostTests {
    /// A copy's branch of many log entries (a minute between edits, so none join).
    static func manyEntryFork(entries: Int) throws -> (original: Notebook, copy: Notebook, note: NoteID) {
        var original = Notebook(replicaID: ReissueTests.r, wallClock: FixedWallClock(1_700_000_000_000))
        let (note, _) = original.createNote(title: "shared", body: "base")
        var copy = try Notebook(snapshot: original.snapshot(), wallClock: FixedWallClock(1_700_000_000_000))
        _ = try original.setTitle(note, "the original's")
        for i in 0 ..< entries {
            copy.wallClock = FixedWallClock(1_700_000_000_000 + UInt64(i + 1) * 60_000)
            _ = try copy.insertText(note, at: 0, "\(i) ")
        }
        return (original, copy, note)
    }

    @Test func aBatchOfReissuesReplaysTheLogOnce() throws {
        let fork = try Self.manyEntryFork(entries: 40)
        let (repaired, reissue) = try ReissueTests.repair(fork.copy, against: fork.original.changes(since: VersionVector()))
        #expect(reissue.count >= 40)
        var holder = Notebook(replicaID: ReissueTests.third, wallClock: FixedWallClock(1_700_000_000_000))
        holder.apply(contentsOf: fork.copy.changes(since: VersionVector()))
        let before = holder.rebuilds
        holder.apply(contentsOf: reissue)
        #expect(holder.rebuilds == before + 1)
        holder.apply(contentsOf: repaired.changes(since: holder.versionVector))
        #expect(holder.digest() == repaired.digest())
    }

    @Test func craftedBatchesMakeABoundedNumberOfReplays() throws {
        let fork = try Self.manyEntryFork(entries: 30)
        let (repaired, reissue) = try ReissueTests.repair(fork.copy, against: fork.original.changes(since: VersionVector()))
        let branch = fork.copy.changes(since: VersionVector())
        var holder = Notebook(replicaID: ReissueTests.third, wallClock: FixedWallClock(1_700_000_000_000))
        holder.apply(contentsOf: branch)
        // Each re-issue followed by a change of the identity it withdraws from: each change asks
        // for the replay the re-issue before it called for.
        var crafted: [Change] = []
        for piece in reissue { crafted.append(piece); crafted += branch }
        let before = holder.rebuilds
        let outcome = holder.apply(contentsOf: crafted)
        #expect(holder.rebuilds - before <= Notebook.maxRebuildsPerBatch + 1)
        #expect(outcome.rejected > 0, "past the bound, changes of the withdrawn identity wait for the next batch")
        // What was refused comes again: the replicas end equal.
        holder.apply(contentsOf: repaired.changes(since: VersionVector()))
        holder.apply(contentsOf: repaired.changes(since: VersionVector()))
        #expect(holder.digest() == repaired.digest())
    }
}

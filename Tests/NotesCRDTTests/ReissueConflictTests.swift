@testable import NotesCRDT
import Testing

/// Visible merges across a fork repair: two copies of one identity (`x`) edit a note
/// concurrently with other replicas, one copy re-issues its branch as `y`, and the changes, the
/// withdrawn branch and the re-issue reach every replica in random orders (the withdrawn branch
/// before the re-issue, the re-issue first, both branches). Every replica must end with the same
/// conflict points, not only the same text and version vector (the simulator's
/// `forked-replica.json` found replicas that differed in them).
struct ReissueConflictTests {
    static let x = replica(10)
    static let y = replica(15)  // the copy's fresh identity
    static let z = replica(5)   // a third device that edits
    static let r = replica(20)  // a fourth device that only relays
    static let note = noteID(1)

    /// One randomized run: what every replica that keeps going ends with.
    struct Run {
        var rng: SplitMix64
        /// Each device's wall clock (its own: two copies that write one seq at one timestamp are
        /// a case of their own for the fork check, not what this test is about).
        var times: [ReplicaID: UInt64] = [
            ReissueConflictTests.x: baseTime, ReissueConflictTests.z: baseTime + 1_000_000,
            ReissueConflictTests.y: baseTime + 2_000_000, ReissueConflictTests.r: baseTime + 3_000_000,
        ]
        var copyTime = baseTime + 500_000
        /// Every change ever made or re-issued, with the withdrawn branch (as a relay would
        /// still hand them out).
        var pool: [Change] = []
        var log: [String] = []
        /// The copy's operations as x past the note's creation (seq: timestamp): its branch.
        var branch: [UInt64: Timestamp] = [:]
        /// Known limits of the fork repair this run ran into (its result is then not held
        /// against the test): see `check(seed:)`.
        var limits: [String] = []

        init(seed: UInt64) {
            rng = SplitMix64(seed: seed)
        }

        /// The next wall-clock time of `nb` (the copy, while it writes as x, has its own).
        mutating func tick(_ nb: Notebook, isCopy: Bool = false) -> UInt64 {
            let step = UInt64(rng.int(0 ... 3))
            if isCopy {
                copyTime += step
                return copyTime
            }
            times[nb.replicaID, default: baseTime] += step
            return times[nb.replicaID]!
        }

        /// A random edit of the shared note by `nb` (one that changes something).
        mutating func edit(_ nb: inout Notebook, _ name: String) throws {
            // A replica whose own change waits (it was made on top of the withdrawn branch, and a
            // rebuild took it out until the other branch's seqs come) would make its seqs again:
            // a known limit of the repair ("Copied replicas", Limits), not what this test is about.
            guard !nb.pendingChanges.contains(where: { $0.replica == nb.replicaID }) else { return }
            if name != "copy", name != "x", !branch.isEmpty, holdsBranch(nb) { limits.append("\(name) edited on top of the withdrawn branch") }
            let before = nb.versionVector[nb.replicaID]
            while nb.versionVector[nb.replicaID] == before { try editOnce(&nb, name) }
        }

        mutating func editOnce(_ nb: inout Notebook, _ name: String) throws {
            nb.setWallTime(tick(nb, isCopy: name == "copy"))
            let id = ReissueConflictTests.note
            let length = nb.body(of: id)?.count ?? 0
            var made: Change?
            switch rng.int(0 ..< 10) {
            case 0 ..< 4:
                let at = rng.int(0 ... length)
                made = try nb.insertText(id, at: at, rng.pick(["a", "bc", "def", "gh"]))
                log.append("\(name) inserts at \(at)")
            case 4 ..< 6 where length > 0:
                let start = rng.int(0 ..< length)
                made = try nb.deleteText(id, start ..< min(length, start + rng.int(1 ... 3)))
                log.append("\(name) deletes at \(start)")
            case 6 ..< 8:
                let title = "\(name) \(rng.int(0 ..< 3))"
                made = try nb.setTitle(id, title)
                log.append("\(name) titles \(title)")
            case 8:
                made = try nb.setPinned(id, rng.chance(0.5))
                log.append("\(name) pins")
            default:
                made = try nb.setState(id, rng.pick([.active, .trashed]))
                log.append("\(name) sets the state")
            }
            if let made { pool.append(made) }
        }

        /// What `nb` may be sent: a store takes no changes in its own name (it made them, or they
        /// are a copy's and it moves to a fresh identity: "Copied replicas", at sync), so the
        /// original never sees the copy's branch as its own.
        static func sendable(_ changes: some Sequence<Change>, to nb: Notebook) -> [Change] {
            changes.filter { $0.replica != nb.replicaID }
        }

        /// `to` applies what `from` has, in a random order (single changes or one batch).
        mutating func deliver(_ from: Notebook, to nb: inout Notebook) {
            var changes = Self.sendable(from.changes(since: nb.versionVector), to: nb)
            if rng.chance(0.5) { changes.shuffle(using: &rng) }
            if rng.chance(0.5) {
                nb.apply(contentsOf: changes)
            } else {
                for change in changes { nb.apply(change) }
            }
        }

        /// Notes the copy's branch as it is now.
        mutating func noteBranch(_ copy: Notebook, after common: UInt64) {
            for change in copy.allChanges where change.replica == ReissueConflictTests.x && change.endSeq > common {
                for seq in max(change.startSeq, common + 1) ... change.endSeq { branch[seq] = change.timestamp(ofSeq: seq) }
            }
        }

        /// Whether `nb` holds operations of the copy's branch (by seq and timestamp).
        func holdsBranch(_ nb: Notebook) -> Bool {
            nb.allChanges.contains { change in
                change.replica == ReissueConflictTests.x
                    && (change.startSeq ... change.endSeq).contains { branch[$0] == change.timestamp(ofSeq: $0) }
            }
        }

        /// Every change of the pool, in a random order, in random batches.
        mutating func flood(_ nb: inout Notebook) {
            var changes = Self.sendable(pool, to: nb)
            changes.shuffle(using: &rng)
            while !changes.isEmpty {
                let n = rng.int(1 ... changes.count)
                let batch = changes.prefix(n)
                changes.removeFirst(n)
                if rng.chance(0.5) {
                    nb.apply(contentsOf: batch)
                } else {
                    for change in batch { nb.apply(change) }
                }
            }
        }

        mutating func run() throws -> [Notebook] {
            var original = makeNotebook(10)  // x, keeps the identity
            let (_, created) = original.createNote(id: ReissueConflictTests.note, title: "title", body: "the quick brown fox jumps")
            var copy = original  // a copied database: writes as x too, until it re-issues as y
            var third = makeNotebook(5)
            var relay = makeNotebook(20)
            third.apply(created)
            relay.apply(created)
            pool = [created]
            // Concurrent edits on both copies of x and on z.
            for _ in 0 ..< rng.int(1 ... 3) { try edit(&original, "x") }
            for _ in 0 ..< rng.int(1 ... 3) { try edit(&copy, "copy") }
            noteBranch(copy, after: created.endSeq)
            for _ in 0 ..< rng.int(0 ... 3) { try edit(&third, "z") }
            // Some of it goes round before anyone sees the fork.
            if rng.chance(0.5) { deliver(copy, to: &third); log.append("z takes the copy's branch") }
            if rng.chance(0.4) { deliver(original, to: &third); log.append("z takes the original's branch") }
            if rng.chance(0.5) { deliver(third, to: &copy); log.append("the copy takes z") }
            if rng.chance(0.5) { deliver(third, to: &original); log.append("x takes z") }
            if rng.chance(0.5) { deliver(rng.chance(0.5) ? copy : original, to: &relay); log.append("the relay takes a branch") }
            if rng.chance(0.5) {
                try edit(&copy, "copy")
                noteBranch(copy, after: created.endSeq)
            }
            if rng.chance(0.5) { try edit(&original, "x") }
            if rng.chance(0.5) { try edit(&third, "z") }

            // The copy meets the original's branch, finds the fork and re-issues its own as y.
            let theirs = original.changes(since: VersionVector())
            let forks = theirs.compactMap { copy.forkPoint(of: $0) }
            let first = try #require(forks.min(), "the copies forked")
            if let kept = theirs.first(where: { $0.startSeq <= first && first <= $0.endSeq }), kept.timestamp(ofSeq: first) == branch[first] {
                limits.append("both copies wrote seq \(first) at one timestamp")
            }
            var repaired = copy.replayed(as: ReissueConflictTests.y)
            repaired.setWallTime(tick(repaired))
            repaired.beginBatch()
            let reissue = repaired.reissuing(ReissueConflictTests.x, from: first, through: copy.versionVector[ReissueConflictTests.x])
            try #require(!reissue.isEmpty)
            for change in reissue {
                guard case .applied = repaired.apply(change) else {
                    Issue.record("a re-issue did not apply to its own replica")
                    continue
                }
            }
            for change in theirs { repaired.apply(change) }
            repaired.endBatch()
            pool += reissue
            log.append("the copy re-issues \(first)...\(copy.versionVector[ReissueConflictTests.x]) as y")

            // Then everything goes round, in random orders, with more concurrent edits.
            var replicas = [original, repaired, third, relay]
            let names = ["x", "y", "z", "r"]
            for _ in 0 ..< rng.int(2 ... 6) {
                let i = rng.int(0 ..< replicas.count)
                switch rng.int(0 ..< 4) {
                case 0 where i != 3:
                    try edit(&replicas[i], names[i])
                case 1:
                    flood(&replicas[i])
                    log.append("\(names[i]) takes everything")
                default:
                    let j = rng.int(0 ..< replicas.count)
                    guard i != j else { continue }
                    // Now and then the withdrawn branch comes along (a relay still has it).
                    if rng.chance(0.3) { deliver(copy, to: &replicas[i]); log.append("\(names[i]) takes the withdrawn branch") }
                    deliver(replicas[j], to: &replicas[i])
                    log.append("\(names[i]) takes \(names[j])")
                }
            }
            for _ in 0 ..< 3 {
                for i in replicas.indices {
                    flood(&replicas[i])
                    for j in replicas.indices where j != i { deliver(replicas[j], to: &replicas[i]) }
                }
            }
            return replicas
        }
    }

    /// The points of the shared note, for messages.
    static func points(_ nb: Notebook) -> String {
        (nb.notes[note]?.conflicts ?? []).sorted().map { "\($0.kind) \($0.first.replica.raw.low):\($0.first.seq)/\($0.second.replica.raw.low):\($0.second.seq)" }
            .joined(separator: ", ")
    }

    /// Checks that every replica ends equal, conflict points included; false (with issues
    /// recorded) when not.
    @discardableResult
    static func check(seed: UInt64) throws -> Bool {
        var run = Run(seed: seed)
        let replicas = try run.run()
        // The conflict points are held to the rule whenever the replicas converged otherwise.
        func seen(_ nb: Notebook) -> Note? {
            var seen = nb.note(note)
            seen?.hasConflicts = false
            return seen
        }
        let converged = replicas.allSatisfy { $0.versionVector == replicas[0].versionVector && seen($0) == seen(replicas[0]) }
        if !run.limits.isEmpty, !converged {
            // Known limits of the fork repair, apart from the conflict points ("Copied
            // replicas", Limits): a replica that edited on top of the withdrawn branch can lose
            // its own change there (quarantined against the other branch) or write its seqs
            // again; two copies that wrote the fork's first seq at one timestamp can leave the
            // withdrawn branch's tail joined to the other's in a log, where no re-issue finds it.
            withKnownIssue("\(run.limits.joined(separator: "; ")) (seed \(seed))", isIntermittent: true) {
                _ = try compare(seed: seed, replicas, run.log)
            }
            return true
        }
        // After an edit on top of the withdrawn branch, that edit's context names the other
        // branch's seqs without what they depend on: the sides of a merge (`conflicts(of:)`,
        // versions replayed) may not be a causal cut, so only the points are compared then.
        return try compare(seed: seed, replicas, run.log, sides: run.limits.isEmpty)
    }

    static func compare(seed: UInt64, _ replicas: [Notebook], _ log: [String], sides: Bool = true) throws -> Bool {
        let names = ["x", "y", "z", "r"]
        let reference = replicas[1]  // the re-issuer
        var equal = true
        for (nb, name) in zip(replicas, names) {
            let context = "seed \(seed), \(name) against y: \(log.joined(separator: "; "))"
            // (What waits may differ: a replica that took the withdrawn branch's tail keeps it
            // waiting for seqs that never come.)
            guard nb.versionVector == reference.versionVector else {
                Issue.record("\(context): the replicas did not converge (\(nb.versionVector) against \(reference.versionVector))")
                return false
            }
            let (mine, theirs) = sides ? (try nb.conflicts(of: note), try reference.conflicts(of: note)) : ([], [])
            if nb.digest() != reference.digest() || points(nb) != points(reference) || mine != theirs {
                Issue.record("\(context): the points differ: [\(points(nb))] against [\(points(reference))]")
                equal = false
            }
        }
        // The rule: the merges are those of the operations that stay (the withdrawn branch takes
        // no part; its re-issue does, with the re-issue's context), as the brute force finds them.
        if equal, sides {
            let expected = MergeOracle(reference.allChanges).conflicts(of: note)
            let found = Set(try reference.conflicts(of: note).map { conflict in
                "\(conflict.kind) " + conflict.sides.map { String($0.replica.raw.low) }.joined(separator: "/")
            })
            if found != expected {
                Issue.record("seed \(seed): the merges are \(found.sorted()), the rule says \(expected.sorted()): \(log.joined(separator: "; "))")
                equal = false
            }
        }
        return equal
    }

    /// The simulator's case, by hand: the copy took a third device's concurrent title before it
    /// found the fork, so its re-issued title (its own change now) follows that one in its log.
    /// It is a merge on every replica, the re-issuer included.
    @Test func theReissuerFindsTheMergesOfItsOwnReissue() throws {
        var original = makeNotebook(10)
        let (id, created) = original.createNote(id: Self.note, title: "title", body: "milk, eggs")
        var copy = original
        copy.setWallTime(baseTime + 500_000)
        var third = makeNotebook(5, at: baseTime + 1_000_000)
        third.apply(created)
        try original.setPinned(id, true)
        try copy.setTitle(id, "the copy's")
        try third.setTitle(id, "the third's")
        copy.apply(contentsOf: third.changes(since: copy.versionVector))
        third.apply(contentsOf: original.changes(since: third.versionVector))
        let theirs = original.changes(since: VersionVector())
        let first = try #require(theirs.compactMap { copy.forkPoint(of: $0) }.min())
        var repaired = copy.replayed(as: Self.y)
        repaired.beginBatch()
        let reissue = repaired.reissuing(Self.x, from: first, through: copy.versionVector[Self.x])
        for change in reissue { #expect(repaired.apply(change) == .applied(released: 0)) }
        for change in theirs { repaired.apply(change) }
        repaired.endBatch()
        third.apply(contentsOf: repaired.changes(since: third.versionVector))
        original.apply(contentsOf: repaired.changes(since: original.versionVector).filter { $0.replica != Self.x })
        for nb in [original, repaired, third] {
            #expect(nb.versionVector == repaired.versionVector)
            #expect(try nb.conflicts(of: id).map(\.kind) == [.field(.title)])
            #expect(try nb.conflicts(of: id).first?.sides.map(\.replica) == [Self.z, Self.y])
            #expect(nb.digest() == third.digest())
        }
    }

    /// Many seeds, each a different script and delivery order.
    @Test(arguments: 0 ..< 8)
    func everyReplicaEndsWithTheSamePoints(block: UInt64) throws {
        var failures = 0
        for seed in block * 150 ..< (block + 1) * 150 where !(try Self.check(seed: seed)) {
            failures += 1
            if failures >= 3 { return }  // enough to read
        }
    }
}

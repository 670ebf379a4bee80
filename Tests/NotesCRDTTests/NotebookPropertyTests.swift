import NotesCRDT
import PropertyBased
import Testing

/// The CRDT laws over random edit scripts on 2 to 5 replicas. Each case is driven by one seed (the
/// printed input), so a failure replays with `Simulation(seed:replicaCount:)` and the step count.
/// Shrinking is off: a smaller seed is not a simpler script, and re-running whole scripts is slow.
struct NotebookPropertyTests {
    static let seeds = Gen.uint64()
    static let replicaCounts = Gen.int(in: 2 ... 5)
    static let stepCounts = Gen.int(in: 20 ... 150)

    /// Every delivery order, with duplicates and overlapping (coalesced, cut) copies, gives the same
    /// state as applying the changes in the order they were made: the visible state, deletes
    /// against edits and unresolved merges included (the digest covers them), also when one
    /// replica's clock is ten years ahead (a third of the seeds).
    @Test(.shrinking(false)) func everyDeliveryOrderConverges() async {
        await propertyCheck(count: 40, input: Self.seeds, Self.replicaCounts, Self.stepCounts) { seed, replicaCount, steps in
            await reportingErrors("seed \(seed), replicaCount \(replicaCount), steps \(steps)") {
                var sim = Simulation(seed: seed, replicaCount: replicaCount, farFuture: seed % 3 == 0)
                sim.syncWithChangesAsMade = true  // coalesced logs have their own property below
                try sim.run(steps: steps)
                let reference = try replay(sim.made)
                #expect(reference.pendingCount == 0)
                var rng = SplitMix64(seed: seed ^ 0xD1CE)
                for attempt in 0 ..< 3 {
                    var deliveries = sim.made
                    // Duplicates, and cut copies (which overlap the originals).
                    for _ in 0 ..< rng.int(0 ... max(1, deliveries.count / 3)) {
                        let change = rng.pick(sim.made)
                        let cut = change.startSeq + UInt64(rng.int(0 ..< Int(change.seqCount)))
                        deliveries.append(attempt == 0 ? change : change.suffix(from: cut)!)
                    }
                    deliveries.shuffle(using: &rng)
                    var fresh = makeNotebook(100 + UInt64(attempt))
                    for change in deliveries {
                        let outcome = fresh.apply(change)
                        if case .pending = outcome { #expect(fresh.pendingCount > 0) }
                    }
                    #expect(fresh.pendingCount == 0, "seed \(seed)")
                    #expect(fresh.versionVector == reference.versionVector, "seed \(seed)")
                    #expect(fresh.digest() == reference.digest(), "seed \(seed)")
                    #expect(fresh.bodies == reference.bodies, "seed \(seed)")
                    #expect(fresh.allNotes.map(\.title) == reference.allNotes.map(\.title), "seed \(seed)")
                    for id in fresh.noteIDs { #expect(fresh.body(of: id)!.invariantViolation() == nil) }
                }
                // The replicas themselves converge once they have synced with each other.
                try sim.syncAll()
                for nb in sim.replicas {
                    #expect(nb.pendingCount == 0, "seed \(seed)")
                    #expect(nb.digest() == reference.digest(), "seed \(seed)")
                    #expect(nb.bodies == reference.bodies, "seed \(seed)")
                    // Not only the same strings: the same characters, keys and origins, tombstones
                    // included (a local edit applied differently from its change would show here).
                    for id in nb.noteIDs {
                        let difference = nb.body(of: id)!.structureDifference(from: reference.body(of: id)!)
                        #expect(difference == nil, "seed \(seed), note \(id)")
                    }
                }
            }
        }
    }

    /// The coalesced log of a replica (`allChanges`, and `changes(since:)` cut at any vector),
    /// delivered in any order with duplicates, converges to the same state as the changes as made.
    @Test(.shrinking(false)) func coalescedLogsInAnyOrderConverge() async {
        await propertyCheck(count: 30, input: Self.seeds, Self.replicaCounts, Self.stepCounts) { seed, replicaCount, steps in
            await reportingErrors("seed \(seed), replicaCount \(replicaCount), steps \(steps)") {
                var sim = Simulation(seed: seed, replicaCount: replicaCount)
                sim.syncWithChangesAsMade = true
                try sim.run(steps: steps)
                try sim.syncAll()
                let reference = try replay(sim.made)
                var rng = SplitMix64(seed: seed ^ 0xC0A1)
                let source = rng.pick(sim.replicas)
                // Pieces of the log as a peer at a random earlier vector would be sent them.
                var deliveries = source.allChanges
                for _ in 0 ..< 3 {
                    let prefix = Array(sim.made.prefix(rng.int(0 ... sim.made.count)))
                    let peer = try replay(prefix, as: 300)
                    deliveries += source.changes(since: peer.versionVector)
                }
                deliveries.shuffle(using: &rng)
                var fresh = makeNotebook(200)
                for change in deliveries { fresh.apply(change) }
                #expect(fresh.pendingCount == 0)
                #expect(fresh.versionVector == reference.versionVector)
                #expect(fresh.digest() == reference.digest())
                #expect(fresh.bodies == reference.bodies)
            }
        }
    }

    /// `changes(since:)` is the log in the order applied, each change cut where the vector's
    /// knowledge of its author ends and dropped when the vector has all of it (written out plainly
    /// here), and a replica at that vector applies it without waiting.
    @Test(.shrinking(false)) func changesSinceAVectorAreTheLogCutAtIt() async {
        await propertyCheck(count: 30, input: Self.seeds, Self.replicaCounts, Self.stepCounts) { seed, replicaCount, steps in
            await reportingErrors("seed \(seed), replicaCount \(replicaCount), steps \(steps)") {
                var sim = Simulation(seed: seed, replicaCount: replicaCount)
                try sim.run(steps: steps)
                var rng = SplitMix64(seed: seed ^ 0x5EED)
                let source = rng.pick(sim.replicas)
                for _ in 0 ..< 4 {
                    let peer = try replay(Array(sim.made.prefix(rng.int(0 ... sim.made.count))), as: 300)
                    let have = peer.versionVector
                    let expected = source.allChanges.compactMap { $0.suffix(from: have[$0.replica] + 1) }
                    let sent = source.changes(since: have)
                    #expect(sent == expected)
                    var caughtUp = peer
                    for change in sent where caughtUp.versionVector[change.replica] < change.endSeq {
                        #expect(caughtUp.apply(change) != .pending)
                    }
                    #expect(caughtUp.pendingCount == 0)
                }
            }
        }
    }

    /// merge(_:)/merging(_:) is commutative, associative and idempotent.
    @Test(.shrinking(false)) func mergeIsCommutativeAssociativeAndIdempotent() async {
        await propertyCheck(count: 30, input: Self.seeds, Self.stepCounts) { seed, steps in
            await reportingErrors("seed \(seed), steps \(steps)") {
                var sim = Simulation(seed: seed, replicaCount: 3, farFuture: seed % 2 == 0)
                sim.syncWithChangesAsMade = true
                try sim.run(steps: steps)
                let (a, b, c) = (sim.replicas[0], sim.replicas[1], sim.replicas[2])
                let ab = try a.merging(b)
                #expect(ab.digest() == (try b.merging(a)).digest(), "seed \(seed)")
                #expect(ab.versionVector == (try b.merging(a)).versionVector, "seed \(seed)")
                #expect((try ab.merging(c)).digest() == (try a.merging(b.merging(c))).digest(), "seed \(seed)")
                #expect((try a.merging(a)).digest() == a.digest(), "seed \(seed)")
                #expect((try a.merging(a)).versionVector == a.versionVector, "seed \(seed)")
                #expect((try ab.merging(b)).digest() == ab.digest(), "seed \(seed)")
                #expect(a.versionVector.merging(b.versionVector).isCovered(by: ab.versionVector))
                var inPlace = a
                try inPlace.merge(b)
                #expect(inPlace.digest() == ab.digest())
            }
        }
    }

    /// changes(since:) sends exactly what the other side lacks: nothing it has, all it lacks.
    @Test(.shrinking(false)) func changesSinceIsExact() async {
        await propertyCheck(count: 20, input: Self.seeds, Self.replicaCounts, Self.stepCounts) { seed, replicaCount, steps in
            await reportingErrors("seed \(seed), replicaCount \(replicaCount), steps \(steps)") {
                var sim = Simulation(seed: seed, replicaCount: replicaCount, outOfOrderDeliveries: false)
                sim.syncWithChangesAsMade = true
                try sim.run(steps: steps)
                for i in sim.replicas.indices {
                    for j in sim.replicas.indices where i != j {
                        let (x, y) = (sim.replicas[i], sim.replicas[j])
                        let sent = y.changes(since: x.versionVector)
                        // Nothing already covered; the seq ranges are exactly the missing ones.
                        var covered: [ReplicaID: UInt64] = [:]
                        for change in sent {
                            #expect(change.startSeq == max(covered[change.replica] ?? 0, x.versionVector[change.replica]) + 1, "seed \(seed)")
                            covered[change.replica] = change.endSeq
                        }
                        let missing = x.versionVector.missing(from: y.versionVector)
                        #expect(missing.map { $0.endSeq - 1 } == missing.map { covered[$0.replica] ?? 0 }, "seed \(seed)")
                        var updated = x
                        let result = updated.apply(contentsOf: sent)
                        #expect(result.duplicates == 0, "seed \(seed)")
                        #expect(updated.pendingCount == 0, "seed \(seed)")
                        #expect(updated.versionVector == x.versionVector.merging(y.versionVector), "seed \(seed)")
                    }
                }
            }
        }
    }

    /// Replicas that each type a word, one scalar at a time, at the same offset never interleave
    /// the words, whatever their clocks, and every scalar (emoji, combining marks, CJK) survives.
    @Test(.shrinking(false)) func concurrentRunsNeverInterleave() async {
        await propertyCheck(count: 40, input: Self.seeds, Self.replicaCounts) { seed, replicaCount in
            await reportingErrors("seed \(seed), replicaCount \(replicaCount)") {
                var rng = SplitMix64(seed: seed)
                var origin = makeNotebook(50)
                let base = randomText(rng.int(0 ... 12), using: &rng)
                let (id, created) = origin.createNote(id: noteID(1), body: base)
                let offset = rng.int(0 ... scalars(base).count)
                var replicas: [Notebook] = []
                var words: [[Unicode.Scalar]] = []
                for r in 0 ..< replicaCount {
                    var nb = makeNotebook(UInt64(r) + 1, at: baseTime + UInt64(rng.int(0 ... 20)))
                    nb.apply(created)
                    // Distinct words: each starts with its own marker scalar.
                    let word = [Unicode.Scalar(UInt8(ascii: "A") + UInt8(r))] + scalars(randomText(rng.int(1 ... 6), using: &rng))
                    var wall = baseTime + UInt64(rng.int(0 ... 20))
                    for (i, s) in word.enumerated() {
                        wall = rng.chance(0.2) ? wall - UInt64(rng.int(0 ... 5)) : wall + UInt64(rng.int(0 ... 2))
                        nb.setWallTime(wall)
                        try nb.insertText(id, at: offset + i, String(String.UnicodeScalarView([s])))
                    }
                    replicas.append(nb)
                    words.append(word)
                }
                let all = replicas.flatMap(\.allChanges) + [created]
                var results: [[Unicode.Scalar]] = []
                for r in replicas.indices {
                    var order = all
                    order.shuffle(using: &rng)
                    replicas[r].apply(contentsOf: order)
                    results.append(replicas[r].scalars(of: id))
                }
                #expect(Set(results.map { $0.map(\.value) }).count == 1, "seed \(seed)")
                let merged = results[0]
                let baseScalars = scalars(base)
                #expect(merged.count == baseScalars.count + words.reduce(0) { $0 + $1.count })
                #expect(Array(merged[..<offset]) == Array(baseScalars[..<offset]), "seed \(seed)")
                // The words sit at the offset, one after another, each contiguous, in some order.
                var at = offset
                var remaining = words
                while !remaining.isEmpty {
                    guard let k = remaining.firstIndex(where: { merged.count >= at + $0.count && Array(merged[at ..< at + $0.count]) == $0 }) else {
                        Issue.record("seed \(seed): the words interleave in \(merged)")
                        return
                    }
                    at += remaining[k].count
                    remaining.remove(at: k)
                }
                #expect(Array(merged[at...]) == Array(baseScalars[offset...]), "seed \(seed)")
            }
        }
    }

    /// A snapshot restores a replica with the same digest, version vector and text.
    @Test(.shrinking(false)) func snapshotRoundTrip() async {
        await propertyCheck(count: 10, input: Self.seeds, Self.replicaCounts, Self.stepCounts) { seed, replicaCount, steps in
            await reportingErrors("seed \(seed), replicaCount \(replicaCount), steps \(steps)") {
                var sim = Simulation(seed: seed, replicaCount: replicaCount)
                sim.syncWithChangesAsMade = true
                try sim.run(steps: steps)
                for nb in sim.replicas {
                    let restored = try Notebook(snapshot: nb.snapshot(), wallClock: nb.wallClock)
                    #expect(restored.digest() == nb.digest(), "seed \(seed)")
                    #expect(restored.versionVector == nb.versionVector, "seed \(seed)")
                    #expect(restored.bodies == nb.bodies, "seed \(seed)")
                    #expect(restored.pendingCount == nb.pendingCount, "seed \(seed)")
                }
            }
        }
    }

    /// A malformed change (an insert after an unknown origin) throws and leaves the state alone,
    /// whatever state the replica is in.
    @Test(.shrinking(false)) func malformedChangesChangeNothing() async {
        await propertyCheck(count: 15, input: Self.seeds, Self.stepCounts) { seed, steps in
            await reportingErrors("seed \(seed), steps \(steps)") {
                var sim = Simulation(seed: seed, replicaCount: 2)
                sim.syncWithChangesAsMade = true
                try sim.run(steps: steps)
                var nb = sim.replicas[0]
                guard let note = nb.noteIDs.first else { return }
                let digest = nb.digest()
                let version = nb.versionVector
                let unknown = OpID(replica: replica(77), seq: 1 + UInt64(seed % 100))
                let bad = Change(replica: replica(66), startSeq: 1, timestamp: Timestamp(milliseconds: baseTime), dependencies: version,
                                 operations: [
                                     .setNoteField(note: note, field: .title, value: .string("must not appear")),
                                     .insertText(note: note, origin: unknown, text: InsertedText("x")),
                                 ])
                #expect(nb.apply(bad).quarantineReason?.code == .unknownReference, "seed \(seed)")
                #expect(nb.digest() == digest, "seed \(seed)")
                #expect(nb.versionVector == version, "seed \(seed)")
            }
        }
    }

    /// The rules of Docs/Architecture.md hold on every replica, checked against `MergeOracle`'s
    /// brute force over every operation made:
    /// - a write that saw an earlier write of the same register beats it, even when that write came
    ///   from a clock ten years ahead;
    /// - a note is restored (in the trash) exactly when its winning state write is a delete and
    ///   some edit of it is not in that delete's causal context;
    /// - a note is marked exactly when two concurrent operations of different replicas touch the
    ///   same region or field and no single resolve saw both, with the same kinds and replicas;
    /// - no replica but the fast one has its clock dragged into the future.
    @Test(.shrinking(false)) func deletesAgainstEditsClocksAheadAndMergesFollowTheirDefinitions() async {
        await propertyCheck(count: 40, input: Self.seeds, Self.replicaCounts, Self.stepCounts) { seed, replicaCount, steps in
            await reportingErrors("seed \(seed), replicaCount \(replicaCount), steps \(steps)") {
                var sim = Simulation(seed: seed, replicaCount: replicaCount, farFuture: seed % 2 == 0)
                try sim.run(steps: steps)
                #expect(MergeOracle.laterWritesWin(sim.made) == [], "seed \(seed)")
                func check(_ nb: Notebook, _ label: String) throws {
                    for id in nb.noteIDs {
                        // What this replica has applied of the note, as the oracle sees it.
                        let seen = MergeOracle(sim.made.compactMap { change in
                            nb.versionVector[change.replica] >= change.endSeq ? change : nil
                        })
                        let note = try #require(nb.note(id))
                        let restored = seen.isRestored(id)
                        #expect(note.restoredByConcurrentEdit == restored, "seed \(seed) \(label) note \(id)")
                        if restored { #expect(note.state == .trashed, "seed \(seed) \(label) note \(id)") }
                        let expected = seen.conflicts(of: id)
                        #expect(note.hasConflicts == !expected.isEmpty, "seed \(seed) \(label) note \(id)")
                        let found = Set(try nb.conflicts(of: id).map { conflict in
                            "\(conflict.kind) " + conflict.sides.map { String($0.replica.raw.low) }.joined(separator: "/")
                        })
                        #expect(found == expected, "seed \(seed) \(label) note \(id)")
                    }
                }
                for (i, nb) in sim.replicas.enumerated() where nb.pendingCount == 0 { try check(nb, "replica \(i)") }
                try sim.syncAll()
                for (i, nb) in sim.replicas.enumerated() {
                    try check(nb, "synced replica \(i)")
                    if i > 0 { #expect(nb.clock.last.milliseconds < baseTime + tenYears / 2, "seed \(seed): replica \(i)'s clock was dragged") }
                }
                #expect(Set(sim.replicas.map { $0.digest() }).count == 1, "seed \(seed)")
                // What `conflicts(of:)` shows is the same everywhere, however each log joined its changes.
                for id in sim.replicas[0].conflictedNoteIDs {
                    let shown = try sim.replicas.map { try $0.conflicts(of: id) }
                    #expect(shown.allSatisfy { $0 == shown[0] }, "seed \(seed) note \(id)")
                }
            }
        }
    }

    /// The guard against swift-property-based swallowing thrown errors works.
    @Test func aThrowingPropertyBodyIsReported() async {
        await withKnownIssue {
            await propertyCheck(count: 1, input: Self.seeds) { seed in
                await reportingErrors("seed \(seed)") { throw CRDTError(.notFound, "thrown on purpose") }
            }
        }
    }
}

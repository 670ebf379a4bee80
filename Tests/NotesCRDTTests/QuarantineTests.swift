import NotesCRDT
import Testing

/// A change that is ready but refers to something that does not exist is kept aside with its
/// reason; its author's later changes wait behind it; everyone else's flow; a valid change for
/// the same seqs takes its place.
struct QuarantineTests {
    static let (x, y, z) = (replica(10), replica(11), replica(12))
    static let note = noteID(1)
    static let time = Timestamp(milliseconds: baseTime)

    /// A change of `author` from `start` that sets the title.
    static func title(_ author: ReplicaID, _ start: UInt64, _ text: String, after deps: VersionVector = VersionVector()) -> Change {
        Change(replica: author, startSeq: start, timestamp: time.advanced(by: start), dependencies: deps,
               operations: [.setNoteField(note: note, field: .title, value: .string(text))])
    }

    /// A change of `author` from `start` that deletes characters nobody inserted.
    static func forged(_ author: ReplicaID, _ start: UInt64) -> Change {
        Change(replica: author, startSeq: start, timestamp: time.advanced(by: start), dependencies: VersionVector(),
               operations: [.deleteText(note: note, targets: [OpIDRange(replica: replica(99), seq: 1, count: 5)])])
    }

    @Test func aPoisonedChangeStopsOnlyItsAuthor() throws {
        var nb = makeNotebook(1)
        let poisoned = Self.forged(Self.x, 1)
        let later = Self.title(Self.x, 2, "x later")
        let fromY = Self.title(Self.y, 1, "y")
        let fromZ = Self.title(Self.z, 1, "z", after: VersionVector([Self.y: 1]))
        let result = nb.apply(contentsOf: [fromY, poisoned, later, fromZ])
        #expect(result.applied == 2)
        #expect(result.quarantined == 1)
        #expect(result.pending == 1)
        #expect(nb.versionVector == VersionVector([Self.y: 1, Self.z: 1]))
        #expect(nb.note(Self.note)?.title == "z")
        #expect(nb.pendingChanges == [later])
        let entry = try #require(nb.quarantinedChanges.first)
        #expect(nb.quarantinedCount == 1)
        #expect(entry.change == poisoned)
        #expect(entry.reason.code == .unknownReference)
        #expect(entry.reason.message.contains("names characters that do not exist"))
        // A change from anyone that depends on the poisoned seqs waits too.
        let dependsOnX = Self.title(Self.z, 2, "z after x", after: VersionVector([Self.x: 1, Self.y: 1]))
        #expect(nb.apply(dependsOnX) == .pending)
        // The same poisoned change again: still one in the quarantine, and no work to know it.
        #expect(nb.apply(poisoned).quarantineReason == entry.reason)
        #expect(nb.quarantinedCount == 1)
        // The real change for seq 1 arrives: applied, the poisoned one leaves, the waiting ones follow.
        let real = Self.title(Self.x, 1, "x")
        #expect(nb.apply(real) == .applied(released: 2))
        #expect(nb.quarantinedCount == 0)
        #expect(nb.pendingCount == 0)
        #expect(nb.versionVector == VersionVector([Self.x: 2, Self.y: 1, Self.z: 2]))
        #expect(nb.note(Self.note)?.title == "z after x")
    }

    /// A change released from the pending set that refers to nothing goes to the quarantine (it
    /// was dropped before, and its author's later changes then waited for ever with no reason shown).
    @Test func aReleasedChangeThatDoesNotApplyIsQuarantinedNotDropped() {
        var nb = makeNotebook(1)
        let waiting = Self.forged(Self.x, 2)
        #expect(nb.apply(waiting) == .pending)
        #expect(nb.apply(Self.title(Self.x, 1, "x")) == .applied(released: 0))
        #expect(nb.pendingCount == 0)
        #expect(nb.quarantinedChanges.map(\.change) == [waiting])
        #expect(nb.versionVector[Self.x] == 1)
    }

    /// A valid change that takes part of a quarantined change's seqs: the rest of it is tried
    /// again (here it refers to nothing either, and stays, cut to the seqs not taken).
    @Test func aValidChangeOverPartOfAQuarantinedOne() {
        var nb = makeNotebook(1)
        let two = Change(replica: Self.x, startSeq: 1, timestamp: Self.time, dependencies: VersionVector(), operations: [
            .setNoteField(note: Self.note, field: .title, value: .string("forged")),
            .deleteText(note: Self.note, targets: [OpIDRange(replica: replica(99), seq: 1, count: 1)]),
        ])
        #expect(nb.apply(two).quarantineReason != nil)
        #expect(nb.note(Self.note) == nil)
        #expect(nb.apply(Self.title(Self.x, 1, "real")) == .applied(released: 0))
        #expect(nb.quarantinedChanges.map(\.change) == [two.suffix(from: 2)!])
        #expect(nb.note(Self.note)?.title == "real")
        // When the rest is valid, it is applied.
        var other = makeNotebook(2)
        let titleThenBad = Change(replica: Self.x, startSeq: 1, timestamp: Self.time, dependencies: VersionVector(), operations: [
            .deleteText(note: Self.note, targets: [OpIDRange(replica: replica(99), seq: 1, count: 1)]),
            .setNoteField(note: Self.note, field: .pinned, value: .bool(true)),
        ])
        #expect(other.apply(titleThenBad).quarantineReason != nil)
        #expect(other.apply(Self.title(Self.x, 1, "real")) == .applied(released: 1))
        #expect(other.quarantinedCount == 0)
        #expect(other.note(Self.note)?.pinned == true)
        #expect(other.versionVector[Self.x] == 2)
    }

    /// Replicas that got the same changes in any order quarantine the same ones and agree.
    @Test func theQuarantineConvergesInAnyOrder() {
        let changes = [Self.title(Self.y, 1, "y"), Self.forged(Self.x, 1), Self.title(Self.x, 2, "x2"),
                       Self.title(Self.z, 1, "z", after: VersionVector([Self.y: 1])), Self.forged(Self.y, 2)]
        var rng = SplitMix64(seed: 17)
        var reference: Notebook?
        for _ in 0 ..< 20 {
            var nb = makeNotebook(1)
            nb.apply(contentsOf: changes.shuffled(using: &rng))
            if let reference {
                #expect(nb.digest() == reference.digest())
                #expect(nb.versionVector == reference.versionVector)
                #expect(Set(nb.quarantinedChanges.map(\.change)) == Set(reference.quarantinedChanges.map(\.change)))
                #expect(Set(nb.pendingChanges) == Set(reference.pendingChanges))
            } else {
                reference = nb
            }
        }
        #expect(reference?.quarantinedCount == 2)
    }

    /// Merging takes the other's valid changes (a real change takes a forged one's seqs), and
    /// throws when a change of the other does not apply here: the two hold different versions
    /// of the same seqs.
    @Test func mergeTakesValidChangesAndThrowsOnDisagreement() throws {
        var a = makeNotebook(1)
        a.apply(Self.forged(Self.x, 1))
        var b = makeNotebook(2)
        b.apply(Self.title(Self.x, 1, "real"))
        b.apply(Self.title(Self.y, 1, "y"))
        try a.merge(b)
        #expect(a.quarantinedCount == 0)
        #expect(a.digest() == b.digest())
        // c and d hold different changes for x's seqs 1-2; d's seq 3 deletes a character of its own version.
        var c = makeNotebook(3)
        c.apply(Change(replica: Self.x, startSeq: 1, timestamp: Self.time, dependencies: VersionVector(), operations: [
            .setNoteField(note: Self.note, field: .title, value: .string("c")),
            .setNoteField(note: Self.note, field: .pinned, value: .bool(true)),
        ]))
        var d = makeNotebook(4)
        d.apply(Change(replica: Self.x, startSeq: 1, timestamp: Self.time, dependencies: VersionVector(), operations: [
            .insertText(note: Self.note, origin: nil, text: InsertedText("cd")),
        ]))
        d.apply(Change(replica: Self.x, startSeq: 3, timestamp: Self.time.advanced(by: 3), dependencies: VersionVector(), operations: [
            .deleteText(note: Self.note, targets: [OpIDRange(replica: Self.x, seq: 1, count: 1)]),
        ]))
        #expect(d.note(Self.note)?.body == "d")
        let error = #expect(throws: CRDTError.self) { try c.merge(d) }
        #expect(error?.code == .unknownReference)
        #expect(c.quarantinedCount == 1)
        #expect(c.versionVector[Self.x] == 2)
    }

    /// The quarantine is not in a snapshot: what was applied is, and the stored changes a
    /// replica's log holds must all apply (`applyStored` throws on one that does not).
    @Test func snapshotsAndStoredChanges() throws {
        var nb = makeNotebook(1)
        nb.apply(Self.title(Self.y, 1, "y"))
        nb.apply(Self.forged(Self.x, 1))
        let restored = try Notebook(snapshot: nb.snapshot(), wallClock: FixedWallClock(baseTime))
        #expect(restored.digest() == nb.digest())
        #expect(restored.quarantinedCount == 0)
        var fresh = makeNotebook(2)
        #expect(throws: CRDTError.self) { try fresh.applyStored(contentsOf: [Self.forged(Self.x, 1)]) }
    }

    /// The quarantine keeps 16 changes of one replica: more are refused, not kept, and a valid
    /// change still takes the seqs and empties it. (Every advance of a replica tries its
    /// quarantined changes again: without a bound, each could cost as much as all it forged.)
    @Test func theQuarantineHoldsSixteenChangesOfAReplica() {
        var nb = makeNotebook(1)
        var outcomes: [Notebook.ApplyOutcome] = []
        for k in 0 ..< 20 as Range<UInt64> {
            outcomes.append(nb.apply(Change(replica: Self.x, startSeq: 1, timestamp: Self.time.advanced(by: k), dependencies: VersionVector(),
                                            operations: [.deleteText(note: Self.note, targets: [OpIDRange(replica: replica(99), seq: 1, count: 1)])])))
        }
        #expect(outcomes.prefix(16).allSatisfy { $0.quarantineReason != nil })
        #expect(outcomes.suffix(4).allSatisfy { $0.rejectionReason?.message.contains("the quarantine is full") == true })
        #expect(nb.quarantinedCount == 16)
        // Another replica still has room.
        #expect(nb.apply(Self.forged(Self.y, 1)).quarantineReason != nil)
        #expect(nb.apply(Self.title(Self.x, 1, "real")) == .applied(released: 0))
        #expect(nb.quarantinedChanges.map(\.change.replica) == [Self.y])
    }
}

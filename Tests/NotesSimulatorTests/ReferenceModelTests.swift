import NotesCRDT
@testable import NotesSimulator
import Testing

/// The reference model's comparison (`ReferenceModel.differences`), with the body verdicts it
/// keeps from one device to the next.
struct ReferenceModelTests {
    /// Two replicas typing into one note, synced both ways.
    static func replicas() throws -> (a: Notebook, b: Notebook, note: NoteID) {
        var rng = SplitMix64(seed: 3)
        var a = Notebook(replicaID: ReplicaID.random(using: &rng), wallClock: FixedWallClock(1_700_000_000_000))
        var b = Notebook(replicaID: ReplicaID.random(using: &rng), wallClock: FixedWallClock(1_700_000_000_500))
        let note = a.createNote(id: NoteID.random(using: &rng), title: "t", body: "hello world").id
        b.apply(contentsOf: a.changes(since: b.versionVector))
        try a.insertText(note, at: 5, ", dear")
        try b.deleteText(note, 0 ..< 1)
        a.apply(contentsOf: b.changes(since: a.versionVector))
        b.apply(contentsOf: a.changes(since: b.versionVector))
        return (a, b, note)
    }

    @Test func aBodyLikeOneComparedBeforeGetsTheSameVerdictAndAnotherGetsItsOwn() throws {
        let (a, b, note) = try Self.replicas()
        var model = ReferenceModel()
        for change in a.changes(since: VersionVector()) { model.record(change) }
        let expected = model.expected()
        var verdicts = ReferenceModel.BodyVerdicts()
        #expect(ReferenceModel.differences(a, expected, device: "a", verdicts: &verdicts) == [])
        #expect(ReferenceModel.differences(b, expected, device: "b", verdicts: &verdicts) == [])

        // A device that also typed something nobody recorded: its body is not the one compared
        // before, and the extra characters are named however many bodies were compared.
        var c = b
        try c.insertText(note, at: 0, "X")
        let lines = ReferenceModel.differences(c, expected, device: "c", verdicts: &verdicts)
        #expect(lines.count == 1)
        #expect(lines.first?.contains("visible that should not be") == true)
        #expect(ReferenceModel.differences(c, expected, device: "c", verdicts: &verdicts) == lines)
        #expect(ReferenceModel.differences(c, expected, device: "c") == lines)

        // A device that lost a recorded character.
        var d = b
        try d.deleteText(note, 2 ..< 3)
        let lost = ReferenceModel.differences(d, expected, device: "d", verdicts: &verdicts)
        #expect(lost.count == 1)
        #expect(ReferenceModel.differences(a, expected, device: "a", verdicts: &verdicts) == [])
    }

    /// Two databases that write as one identity (a copy that kept it) hand out the same seqs for
    /// different operations: the model keeps each one's changes on its own branch, sees the seqs
    /// they wrote differently as contested, and once one re-issues its own branch (the store's
    /// repair, done here as the store does it) takes that branch back and records the re-issue.
    /// A device that ends with the other branch and the re-issue matches; one that kept the
    /// withdrawn branch instead of the re-issue does not.
    @Test func twoBranchesOfOneIdentityAreKeptApartUntilOneIsWithdrawn() throws {
        var rng = SplitMix64(seed: 9)
        let identity = ReplicaID.random(using: &rng)
        var original = Notebook(replicaID: identity, wallClock: FixedWallClock(1_700_000_000_000))
        let note = original.createNote(id: NoteID.random(using: &rng), title: "t", body: "hello").id
        var model = ReferenceModel()
        for change in original.changes(since: VersionVector()) { model.record(change) }
        let base = original.versionVector
        var copy = original
        try original.insertText(note, at: 5, " world")
        try copy.insertText(note, at: 0, "Oh, ")
        let mine = original.changes(since: base)
        let theirs = copy.changes(since: base)
        for change in mine { model.record(change, branch: 0) }
        for change in theirs { model.record(change, branch: 1) }
        let first = base[identity] + 1
        #expect(model.contestedSeqs(of: identity, branch: 1).first?.lowerBound == first)
        #expect(model.contestedSeqs(of: identity, branch: 0).first?.lowerBound == first)

        // The copy finds the original's operations at its seqs: it moves, re-issues its own
        // branch as its new identity and takes the original's.
        let fresh = ReplicaID.random(using: &rng)
        var repaired = copy.replayed(as: fresh)
        let reissue = repaired.reissuing(identity, from: first, through: copy.versionVector[identity])
        #expect(!reissue.isEmpty)
        repaired.apply(contentsOf: reissue)
        repaired.apply(contentsOf: mine)
        model.withdraw(identity, branch: 1, from: first)
        for change in reissue { model.record(change, branch: 1) }
        #expect(model.contestedSeqs(of: identity, branch: 1).isEmpty)
        #expect(model.records(mine[0], at: first))
        #expect(!model.records(theirs[0], at: first), "the withdrawn operation is no longer recorded")

        // The original takes the re-issue: both edits, the same state.
        original.apply(contentsOf: reissue)
        let expected = model.expected()
        #expect(ReferenceModel.differences(original, expected, device: "original") == [])
        #expect(ReferenceModel.differences(repaired, expected, device: "copy") == [])
        #expect(original.body(of: note)?.string == "Oh, hello world")
        #expect(repaired.digest() == original.digest())

        // A device that kept the copy's branch under the old identity, without the re-issue: the
        // re-issued characters are missing (and the old identity's seqs spell other text).
        var stale = Notebook(replicaID: ReplicaID.random(using: &rng))
        stale.apply(contentsOf: copy.changes(since: VersionVector()))
        let lines = ReferenceModel.differences(stale, expected, device: "stale")
        #expect(lines.contains { $0.contains("typed characters are missing") }, "\(lines)")
    }

    /// A branch forgotten (its device replaced) leaves the other branch of the identity alone.
    @Test func forgettingOneBranchKeepsTheOther() throws {
        var rng = SplitMix64(seed: 11)
        let identity = ReplicaID.random(using: &rng)
        var a = Notebook(replicaID: identity, wallClock: FixedWallClock(1_700_000_000_000))
        let note = a.createNote(id: NoteID.random(using: &rng), title: "t", body: "x").id
        var model = ReferenceModel()
        for change in a.changes(since: VersionVector()) { model.record(change) }
        let base = a.versionVector
        var b = a
        try a.insertText(note, at: 1, "A")
        try b.insertText(note, at: 1, "B")
        for change in a.changes(since: base) { model.record(change, branch: 0) }
        for change in b.changes(since: base) { model.record(change, branch: 1) }
        model.forget(replica: identity, branch: 1, keeping: base[identity] > 0 ? [1 ... base[identity]] : [])
        #expect(model.forgottenOperations == 1)
        #expect(ReferenceModel.differences(a, model.expected(), device: "a") == [])
    }

    /// A device's later seqs that left it, after earlier ones it never passed on (then replaced):
    /// they wait for good everywhere, so the reference forgets them too (`Simulation` does, for
    /// each change that waits at the end only on forgotten operations).
    @Test func changesWaitingOnForgottenSeqsAreForgottenToo() throws {
        var rng = SplitMix64(seed: 12)
        let writer = ReplicaID.random(using: &rng)
        var device = Notebook(replicaID: writer, wallClock: FixedWallClock(1_700_000_000_000))
        let note = device.createNote(id: NoteID.random(using: &rng), title: "t", body: "x").id
        var model = ReferenceModel()
        let start = device.changes(since: VersionVector())
        for change in start { model.record(change) }
        let base = device.versionVector
        try device.insertText(note, at: 1, "lost")
        let unsent = device.versionVector
        try device.insertText(note, at: 5, "left")
        for change in device.changes(since: base) { model.record(change) }
        let left = try #require(device.changes(since: unsent).first)
        // Another device has what the writer passed on: the start, and the later seqs, waiting.
        var other = Notebook(replicaID: ReplicaID.random(using: &rng), wallClock: FixedWallClock(1_700_000_100_000))
        other.apply(contentsOf: start + [left])
        #expect(other.pendingChanges == [left])

        #expect(!model.forgot(writer, base[writer] + 1), "nothing is forgotten before the device goes")
        model.forget(replica: writer, keeping: [1 ... base[writer], unsent[writer] + 1 ... device.versionVector[writer]])
        #expect(model.forgot(writer, base[writer] + 1))
        #expect(!model.forgot(writer, unsent[writer] + 1), "the later seqs left the device")
        #expect(!ReferenceModel.differences(other, model.expected(), device: "other").isEmpty, "the later characters are expected")
        model.forgetWaiting(left)
        #expect(model.forgot(writer, unsent[writer] + 1))
        #expect(ReferenceModel.differences(other, model.expected(), device: "other") == [])
    }
}

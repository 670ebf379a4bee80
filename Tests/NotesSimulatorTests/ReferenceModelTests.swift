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
}

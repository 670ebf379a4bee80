import NotesCRDT
import Testing

/// `JoinedSeqs` answers what checking a change against each joined change with
/// `Change.agrees(with:)` answers, for pieces of either branch of a fork, however cut.
struct JoinedSeqsTests {
    /// One branch's random edits: typing, deletes, fields and tags, each its own change.
    static func edit(_ notebook: inout Notebook, _ note: NoteID, steps: Int, using rng: inout SplitMix64) throws -> [Change] {
        var changes: [Change] = []
        for _ in 0 ..< steps {
            let length = notebook.scalars(of: note).count
            let change: Change?
            switch rng.int(0 ..< 10) {
            case 0 ..< 5: change = try notebook.insertText(note, at: rng.int(0 ... length), randomText(rng.int(1 ... 6), using: &rng))
            case 5 ..< 7 where length > 0:
                let start = rng.int(0 ..< length)
                change = try notebook.deleteText(note, start ..< min(length, start + rng.int(1 ... 4)))
            case 7: change = try notebook.setTitle(note, randomText(rng.int(0 ... 3), using: &rng))
            default: change = try notebook.insertText(note, at: length, "z")
            }
            if let change { changes.append(change) }
        }
        return changes
    }

    /// A random piece of a change: a suffix, a prefix, or both cuts.
    static func piece(_ change: Change, using rng: inout SplitMix64) -> Change {
        let from = UInt64(rng.int(Int(change.startSeq) ... Int(change.endSeq)))
        let cut = change.suffix(from: rng.chance(0.5) ? from : change.startSeq)!
        return cut.prefix(through: UInt64(rng.int(Int(cut.startSeq) ... Int(cut.endSeq))))
    }

    @Test(arguments: [UInt64(1), 2, 3, 4, 5, 6, 7, 8])
    func agreesAsEachJoinedChangeDoes(seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        var original = makeNotebook(1)
        let (note, _) = original.createNote(title: "t", body: "base text")
        let shared = try Self.edit(&original, note, steps: rng.int(0 ... 3), using: &rng)
        var copy = try Notebook(snapshot: original.snapshot(), wallClock: FixedWallClock(baseTime + UInt64(rng.int(0 ... 2))))
        let mine = try Self.edit(&original, note, steps: 30, using: &rng)
        let theirs = try Self.edit(&copy, note, steps: 30, using: &rng)

        // The joined run: one branch's whole history, fed as overlapping pieces in seq order.
        let history = original.changes(since: VersionVector()).filter { $0.replica == replica(1) }
        var joined = JoinedSeqs(author: replica(1), first: history[0].startSeq)
        for change in history {
            let piece = Self.piece(change, using: &rng)
            if rng.chance(0.3), piece.startSeq <= joined.last + 1 { joined.append(piece) }
            joined.append(change)
        }
        #expect(joined.last == history.last?.endSeq)
        var disagreements = 0
        for change in (shared + mine + theirs).flatMap({ [$0, Self.piece($0, using: &rng)] }) {
            let expected = history.allSatisfy { $0.agrees(with: change) }
            #expect(joined.agrees(with: change) == expected, "\(change.startSeq)-\(change.endSeq)")
            if !expected { disagreements += 1 }
        }
        #expect(disagreements > 0, "the premise: the copy's branch forks")
        var other = makeNotebook(2)
        let (_, elsewhere) = other.createNote(title: "another author", body: "")
        #expect(joined.agrees(with: elsewhere), "another author's change shares no seq")
    }
}

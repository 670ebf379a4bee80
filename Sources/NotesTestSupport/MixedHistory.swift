import NotesCRDT

/// Three authors editing shared notes and merging now and then, so that changes depend on other
/// authors': what tests of receiving, paging and applying in any order feed a replica.
public enum MixedHistory {
    /// The edit that a step of the third kind makes on a note.
    public enum ThirdEdit: Sendable {
        /// Pins or unpins it.
        case pin
        /// Deletes its first character (when it has one).
        case deleteFirst
    }

    /// Every change as made, each author's in seq order, from `seed`.
    public static func threeAuthors(seed: UInt64, steps: Int, thirdEdit: ThirdEdit) throws -> [Change] {
        var rng = SplitMix64(seed: seed)
        var authors = (0 ..< 3).map { i in Notebook(replicaID: .random(using: &rng), wallClock: FixedWallClock(1_700_000_000_000 + UInt64(i))) }
        var made: [Change] = []
        for step in 0 ..< steps {
            let a = Int(rng.next() % 3)
            let notes = authors[a].noteIDs
            let note = notes.isEmpty ? nil : notes[Int(rng.next() % UInt64(notes.count))]
            switch (rng.next() % 5, note) {
            case (0, let note?):
                made += [try authors[a].setTitle(note, "title \(step)")].compactMap { $0 }
            case (1, let note?):
                made += [try authors[a].insertText(note, at: 0, "w\(step) ")].compactMap { $0 }
            case (2, let note?):
                switch thirdEdit {
                case .pin: made += [try authors[a].setPinned(note, rng.next() % 2 == 0)].compactMap { $0 }
                case .deleteFirst: made += [(try? authors[a].deleteText(note, 0 ..< 1)) ?? nil].compactMap { $0 }
                }
            case (3, _):
                try authors[a].merge(authors[Int(rng.next() % 3)])
            default:
                made.append(authors[a].createNote(title: "note \(step)", body: "body of \(step)").change)
            }
        }
        return made
    }
}

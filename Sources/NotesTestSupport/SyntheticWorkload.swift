import NotesCRDT

/// Deterministic synthetic edits, for benchmarks and crash tests: the same seed always gives the
/// same changes, so a test can rebuild in-process what a killed subprocess was applying.
public enum SyntheticWorkload {
    /// The seeded generator the workload draws from.
    public typealias Generator = SplitMix64

    static let words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
                        "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
                        "sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu",
                        "meeting", "groceries", "garden", "invoice", "travel", "recipe", "book", "idea"]

    /// A replica made from `seed` that writes `notes` notes, then edits them at random (typing a
    /// word somewhere, deleting a few characters, retitling, pinning) until its changes cover
    /// `operations` sequence numbers in all.
    ///
    /// - Returns: the author's notebook and its changes, in order (one change per edit).
    public static func notebook(seed: UInt64, notes noteCount: Int, operations: Int,
                                startMilliseconds: UInt64 = 1_700_000_000_000) -> (notebook: Notebook, changes: [Change]) {
        var random = Generator(seed: seed)
        var notebook = Notebook(replicaID: ReplicaID(Identifier128(high: seed, low: 0x5EED)),
                                wallClock: FixedWallClock(startMilliseconds))
        var changes: [Change] = []
        var ids: [NoteID] = []
        var lengths: [Int] = []
        var total: UInt64 = 0
        func word() -> String { words[Int(random.next() % UInt64(words.count))] }
        for index in 0 ..< max(1, noteCount) {
            let id = NoteID(Identifier128(using: &random))
            let tags = index % 7 == 0 ? ["work"] : index % 11 == 0 ? ["home", "ideas"] : []
            let made = notebook.createNote(id: id, title: "\(word()) \(word()) \(index)", body: "", tags: tags)
            changes.append(made.change)
            total += made.change.seqCount
            ids.append(id)
            lengths.append(0)
        }
        while total < UInt64(operations) {
            let pick = Int(random.next() % UInt64(ids.count))
            let id = ids[pick]
            let roll = random.next() % 100
            var made: [Change] = []
            if roll < 80 || lengths[pick] < 10 {
                let offset = lengths[pick] == 0 ? 0 : Int(random.next() % UInt64(lengths[pick] + 1))
                let text = word() + " "
                if let change = try? notebook.insertText(id, at: offset, text) { made.append(change) }
                lengths[pick] += text.unicodeScalars.count
            } else if roll < 92 {
                let count = 1 + Int(random.next() % 4)
                let offset = Int(random.next() % UInt64(lengths[pick] - count))
                if let change = try? notebook.deleteText(id, offset ..< offset + count) { made.append(change) }
                lengths[pick] -= count
            } else if roll < 97 {
                if let change = try? notebook.setTitle(id, "\(word()) \(word())") { made.append(change) }
            } else {
                if let change = try? notebook.setPinned(id, random.next() % 2 == 0) { made.append(change) }
            }
            for change in made { total += change.seqCount }
            changes.append(contentsOf: made)
        }
        return (notebook, changes)
    }
}

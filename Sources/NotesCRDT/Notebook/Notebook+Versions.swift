// A note as it was at a version: its operations in the log replayed, the later ones left out.

extension Notebook {
    /// The note as it was at `version`: every operation on it that `version` covers, replayed from
    /// the log in the order applied here, and nothing else. Nil when the note did not exist then.
    ///
    /// `version` must be a causal cut (what some replica had applied at some moment: a version
    /// vector, a change's context): an operation it covers must have its dependencies covered too.
    /// The body, the fields, the state (deletes against edits included) are as they were; the
    /// conflict mark is not replayed (`Note.hasConflicts` is false).
    ///
    /// - Throws: `.outOfBounds` when `version` covers an operation on the note without what it
    ///   depends on.
    /// - Complexity: O(size of the log).
    public func note(_ id: NoteID, at version: VersionVector) throws -> Note? {
        if deferred != nil { return try materialized.note(id, at: version) }
        guard notes[id] != nil else { return nil }
        var record = NoteRecord()
        var text = RGAText()
        var exists = false
        for change in history where change.startSeq <= version[change.replica] {
            guard change.operations.contains(where: { $0.note == id }) else { continue }
            let cut = change.prefix(through: version[change.replica])
            guard cut.operations.contains(where: { $0.note == id }) else { continue }
            guard cut.dependencies.isCovered(by: version) else {
                throw CRDTError(.outOfBounds, "the version \(version) covers operations of \(change.replica) on note \(id) but not what they depend on \(cut.dependencies)")
            }
            exists = true
            Notebook.applyOperations(of: cut, on: id, to: &record, text: &text)
        }
        guard exists else { return nil }
        record.body = text
        return makeNote(id, record)
    }
}

extension Change {
    /// The part of the change up to sequence number `seq` (itself when it ends there or before): an
    /// insert or a run of deletes that straddles `seq` is cut, keeping the first operations.
    func prefix(through seq: UInt64) -> Change {
        guard seq < endSeq else { return self }
        precondition(seq >= startSeq, "a prefix of a change must keep something")
        var ops: [Operation] = []
        var at = startSeq
        for op in operations {
            if at > seq { break }
            let count = op.seqCount
            if at + count - 1 <= seq {
                ops.append(op)
            } else {
                let keep = Int(seq - at + 1)
                switch op {
                case .insertText(let note, let origin, let text):
                    ops.append(.insertText(note: note, origin: origin, text: InsertedText(text[..<keep])))
                case .deleteEach(let note, let runs):
                    // The first `keep` deletes, each of one target.
                    let targets = runs.flatMap(\.targets).prefix(keep)
                    for target in targets { ops.append(.deleteText(note: note, targets: [target])) }
                default:
                    preconditionFailure("only an insert or a run of deletes spans several seqs")
                }
            }
            at += count
        }
        return Change(replica: replica, startSeq: startSeq, timestamp: timestamp, dependencies: dependencies, operations: ops)
    }
}

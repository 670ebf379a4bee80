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

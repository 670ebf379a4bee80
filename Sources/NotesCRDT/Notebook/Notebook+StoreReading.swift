// Small read helpers the store (NotesStore) needs on its per-keystroke path.

extension Notebook {
    /// The note with this identity with an empty `body`, or nil: every field without the O(*n*)
    /// cost of building the body's text (read it from `body(of:)` when needed).
    public func noteFields(_ id: NoteID) -> Note? {
        guard var record = notes[id] else { return nil }
        record.body = RGAText()
        return makeNote(id, record)
    }
}

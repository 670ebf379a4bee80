// Small read helpers the store (NotesStore) needs on its per-keystroke path.

extension Notebook {
    /// The note with this identity with an empty `body`, or nil: every field without the O(*n*)
    /// cost of building the body's text (read it from `body(of:)` when needed).
    public func noteFields(_ id: NoteID) -> Note? {
        guard let record = notes[id] else { return nil }
        return makeNote(id, record, withBody: false)
    }

    /// The timestamp of the winning write of a note's field, or nil when it was never written.
    public func fieldTimestamp(_ id: NoteID, _ field: NoteField) -> Timestamp? {
        notes[id]?.fields[field]?.timestamp
    }
}

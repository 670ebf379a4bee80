extension Notebook {
    /// The register of one field of a note (its winning write), or nil when nothing wrote it.
    public func register(of note: NoteID, _ field: NoteField) -> LWWRegister<FieldValue>? {
        notes[note]?.fields[field]
    }

    /// The register of one field of a tag, by the tag's key, or nil when nothing wrote it.
    public func register(ofTag key: String, _ field: TagField) -> LWWRegister<FieldValue>? {
        tagRecords[key]?[field]
    }
}

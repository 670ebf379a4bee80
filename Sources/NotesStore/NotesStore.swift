import NotesCRDT
/// Placeholder until the store lands.
public enum NotesStoreModule {}

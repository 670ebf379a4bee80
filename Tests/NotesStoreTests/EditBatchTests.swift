import NotesCRDT
import NotesStore
import Testing

/// Several edits of a note in one transaction: all of them, or none when one does not fit, with
/// every offset and count checked at the edges of `Int` without overflow.
struct EditBatchTests {
    static func store(body: String = "hello") throws -> (NoteStore, NoteID) {
        let store = try NoteStore.openInMemory()
        return (store, try store.createNote(title: "T", body: body))
    }

    @Test func editsAreMadeTogetherInOrder() throws {
        let (store, id) = try Self.store()
        let before = try store.versionVector[store.replicaID]
        try store.edit(id, [.title("New"), .append(" world"), .insert(">", at: 0), .delete(at: 1, count: 5), .pinned(true),
                            .tag("Work", member: true), .color("red")])
        let note = try #require(try store.note(id))
        #expect(note.title == "New")
        #expect(note.body == "> world")
        #expect(note.pinned && note.tags == ["Work"] && note.color == "red")
        #expect(try store.versionVector[store.replicaID] > before)
        // Offsets refer to the body as the edits before leave it.
        try store.edit(id, [.body("abc"), .insert("d", at: 3), .delete(at: 3, count: 1), .append("!")])
        #expect(try store.note(id)?.body == "abc!")
    }

    /// The edge values of an offset or a count, on a body of 6 (after the append before it):
    /// errors that say why, and nothing changed (not even the title asked for first).
    @Test(arguments: [
        NoteEdit.insert("x", at: 7), .insert("x", at: -1), .insert("x", at: .max), .insert("x", at: .min),
        .delete(at: 0, count: 7), .delete(at: 6, count: 1), .delete(at: 1, count: .max), .delete(at: .max, count: 1),
        .delete(at: .max, count: .max), .delete(at: -1, count: 1), .delete(at: 0, count: -1), .delete(at: 0, count: .min),
        .delete(at: .min, count: .max), .tag("  ", member: true),
    ])
    func anEditThatDoesNotFitChangesNothing(_ bad: NoteEdit) throws {
        let (store, id) = try Self.store()
        let digest = try store.digest()
        let version = try store.versionVector
        let error = #expect(throws: StoreError.self) { try store.edit(id, [.title("lost"), .append("!"), bad]) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.message.contains("edit 3 of 3") == true, "\(String(describing: error))")
        #expect(error?.message.contains("nothing was changed") == true)
        #expect(try store.digest() == digest)
        #expect(try store.versionVector == version)
        #expect(try store.note(id)?.title == "T")
        // Alone, on the body of 5, it does not fit either.
        #expect(throws: StoreError.self) { try store.edit(id, [.append("!"), bad]) }
    }

    /// Offsets and counts at the edges that fit: 0, the body's length, all of it.
    @Test func editsAtTheEdgesThatFit() throws {
        let (store, id) = try Self.store()
        try store.edit(id, [.insert("<", at: 0), .insert(">", at: 6), .delete(at: 7, count: 0), .delete(at: 0, count: 0)])
        #expect(try store.note(id)?.body == "<hello>")
        try store.edit(id, [.delete(at: 0, count: 7)])
        #expect(try store.note(id)?.body == "")
        try store.edit(id, [.insert("a", at: 0)])
        #expect(try store.note(id)?.body == "a")
        try store.deleteText(id, at: 1, count: 0)
        #expect(throws: StoreError.self) { try store.deleteText(id, at: Int.max, count: 1) }
        #expect(throws: StoreError.self) { try store.deleteText(id, at: 1, count: Int.max) }
        #expect(throws: StoreError.self) { try store.insertText(id, at: Int.max, "x") }
    }

    @Test func aMissingOrDeletedNoteIsNotFound() throws {
        let (store, id) = try Self.store()
        let error = #expect(throws: StoreError.self) { try store.edit(NoteID(Identifier128(high: 1, low: 1)), [.title("x")]) }
        #expect(error?.code == .notFound)
        try store.setState(id, .deleted)
        #expect(throws: StoreError.self) { try store.edit(id, [.title("x")]) }
        try store.edit(id, [])  // nothing asked: nothing done, no error
    }
}

extension NoteEdit: CustomTestStringConvertible {
    public var testDescription: String { "\(self)" }
}

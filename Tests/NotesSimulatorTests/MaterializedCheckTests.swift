import NotesCRDT
@testable import NotesSimulator
import NotesStore
import Testing

/// The safety check's comparison of a materialized row with the CRDT (`Simulation.difference`):
/// a row read back from a store passes, and a row one thing off is named by what is off.
struct MaterializedCheckTests {
    @Test func aRowOneThingOffIsNamed() throws {
        let store = try NoteStore.openInMemory()
        let id = try store.createNote(title: "Trip", body: "café 日本 🙂 and more", tags: ["home"])
        try store.insertText(id, at: 4, "!")
        let notebook = try store.notebook
        let fields = try #require(notebook.noteFields(id))
        let body = try #require(notebook.body(of: id))
        let row = try #require(try store.note(id))
        #expect(row.body == "café! 日本 🙂 and more")
        #expect(Simulation.difference(row, fields, body) == nil)

        func off(_ change: (inout StoredNote) -> Void) -> String? {
            var changed = row
            change(&changed)
            return Simulation.difference(changed, fields, body)
        }
        #expect(off { $0.body = "cafe\u{301}! 日本 🙂 and more" } == "body")  // equal as Strings, other scalars
        #expect(off { $0.body = "café! 日本 🙂 and mor" } == "body")
        #expect(off { $0.body = nil } == nil)  // a row listed without its body: the body is not compared
        #expect(off { $0.bodyLength += 1 } == "body length")
        #expect(off { $0.title = "Tr1p" } == "title")
        #expect(off { $0.pinned.toggle() } == "pinned flag")
        #expect(off { $0.tags = [] } == "tag list")
        #expect(off { $0.updatedAt -= 1 } == "update time")
    }
}

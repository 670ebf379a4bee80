import Foundation
import NotesCRDT
import NotesStore
import Testing

/// Saving an editor's text as a diff on the note's current state; Markdown files; tags and trash.
struct EditedTextTests {
    @Test func anEditorSaveKeepsAnEditSyncedInWhileTheEditorWasOpen() throws {
        let here = try NoteStore.openInMemory()
        let there = try NoteStore.openInMemory()
        let id = try here.createNote(title: "Plan", body: "one\ntwo\nthree\n")
        _ = try there.apply(try here.changes(since: VersionVector()))
        let original = NoteText(title: "Plan", body: "one\ntwo\nthree\n")
        // Another device changes the last line while the editor is open here.
        try there.replaceBody(id, with: "one\ntwo\nthree and more\n")
        _ = try here.apply(try there.changes(since: try here.versionVector))
        let result = try here.applyEditedText(id, original: original, edited: NoteText(title: "Plan B", body: "ONE\ntwo\nthree\n"))
        #expect(result.titleChanged && result.bodySplices == 1)
        #expect(try here.note(id)?.body == "ONE\ntwo\nthree and more\n")
        #expect(try here.note(id)?.title == "Plan B")
        // Saving the same text again records nothing.
        let before = try here.versionVector
        #expect(try !here.applyEditedText(id, original: original, edited: original).changed)
        #expect(try here.versionVector == before)
    }

    @Test func theEditorFileReadsBackAsItWasWritten() {
        for text in [NoteText(title: "T", body: ""), NoteText(title: "T", body: "x\n\n"), NoteText(title: "", body: "\nbody"),
                     NoteText(title: "中文 👩‍💻", body: "e\u{301}\n")] {
            #expect(NoteText(editorFile: text.editorFile) == text)
        }
        // A title's line break cannot split the file's first line.
        #expect(NoteText(editorFile: NoteText(title: "a\nb", body: "c").editorFile) == NoteText(title: "a b", body: "c"))
    }

    @Test func readingBackWhatWasWrittenKeepsAMultiLineTitleAndReadsCRLF() {
        let multi = NoteText(title: "a\nb", body: "c")
        #expect(NoteText(editorFile: "a b\n\nd\n", writtenFrom: multi) == NoteText(title: "a\nb", body: "d"))
        #expect(NoteText(editorFile: "a c\n\nc\n", writtenFrom: multi) == NoteText(title: "a c", body: "c"))
        let plain = NoteText(title: "T", body: "b")
        #expect(NoteText(editorFile: "Win\r\n\r\nx\r\ny\r\n", writtenFrom: plain) == NoteText(title: "Win", body: "x\ny"))
        // A body that had CRLF already keeps it: the editor did not bring it.
        let windows = NoteText(title: "T", body: "x\r\ny")
        #expect(NoteText(editorFile: windows.editorFile, writtenFrom: windows) == windows)
    }

    @Test func aDeletedNoteCannotBeTrashedAndTagNamesAreTrimmed() throws {
        let store = try NoteStore.openInMemory()
        let id = try store.createNote(title: "x", tags: [" home "])
        #expect(try store.note(id)?.tags == ["home"])
        #expect(try !store.renameTag("HOME", to: "home ").changed)
        try store.setState(id, .deleted)
        let before = try store.versionVector
        #expect(throws: StoreError.self) { try store.setState(id, .trashed) }
        #expect(try store.versionVector == before)
        #expect(try store.setState(id, .active))
    }

    @Test func aMarkdownFileReadsBackAsTheNote() throws {
        let store = try NoteStore.openInMemory()
        let id = try store.createNote(title: "Quote \" and: colon", body: "---\nnot front matter\n", tags: ["b", "A"])
        try store.setColor(id, "yellow")
        let note = try #require(try store.note(id))
        let parsed = try MarkdownNotes.parse(MarkdownNotes.render(note), fileName: "x.md")
        #expect(parsed == MarkdownNote(id: id, title: note.title, body: note.body!, tags: note.tags, pinned: false,
                                       archived: false, color: .some("yellow"), state: .active))
        #expect(throws: StoreError.self) { try MarkdownNotes.parse("---\nid: 12\n---\n", fileName: "bad.md") }
        #expect(throws: StoreError.self) { try MarkdownNotes.parse("---\ntitle: \"x\"\n", fileName: "open.md") }
        #expect(try MarkdownNotes.parse("# Heading\n\ntext", fileName: "f.md") == MarkdownNote(title: "Heading", body: "text"))
        #expect(try MarkdownNotes.parse("plain", fileName: "name.md") == MarkdownNote(title: "name", body: "plain"))
    }

    @Test func renamingATagMovesItsNotesAndEmptyingTheTrashDeletesTrashedNotes() throws {
        let store = try NoteStore.openInMemory()
        let a = try store.createNote(title: "a", tags: ["old", "keep"])
        let b = try store.createNote(title: "b", tags: ["Old"])
        _ = try store.createNote(title: "c", tags: ["new"])
        #expect(try store.renameTag("old", to: "new").notes == 2)
        #expect(try store.tagCounts() == [TagCount(name: "keep", notes: 1), TagCount(name: "new", notes: 3)])
        #expect(throws: StoreError.self) { try store.renameTag("old", to: "x") }
        try store.setState(a, .trashed)
        try store.setState(b, .trashed)
        #expect(try store.emptyTrash() == 2)
        #expect(try store.list(.trashed).isEmpty)
        #expect(try store.list(.deleted).count == 2)
        #expect(try store.emptyTrash() == 0)
    }
}

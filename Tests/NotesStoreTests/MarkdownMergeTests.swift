import Foundation
import NotesCRDT
import NotesStore
import Testing

/// Importing Markdown files takes what a person changed in them since the export, not the older
/// values of everything else: another device's edits that arrived meanwhile stay.
struct MarkdownMergeTests {
    /// Two replicas, a note on both, and `here` exported to a fresh folder.
    static func exported() throws -> (here: NoteStore, there: NoteStore, id: NoteID, folder: String, file: String) {
        let here = try NoteStore.openInMemory()
        let there = try NoteStore.openInMemory()
        let id = try here.createNote(title: "Plan", body: "step 1\nstep 2\n")
        _ = try here.setTag(id, "home", member: true)
        _ = try there.apply(try here.changes(since: VersionVector()))
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("md-merge-\(UUID().uuidString)").path
        _ = try here.exportMarkdown(to: folder)
        let file = try #require(try FileManager.default.contentsOfDirectory(atPath: folder).first { $0.hasSuffix(".md") })
        return (here, there, id, folder, folder + "/" + file)
    }

    static func sync(_ from: NoteStore, into to: NoteStore) throws {
        _ = try to.apply(try from.changes(since: try to.versionVector))
    }

    static func body(_ store: NoteStore, _ id: NoteID) throws -> String {
        try #require(try store.notes([id]).first??.body)
    }

    /// Another device's title, text and pin arrive after the export: importing the untouched
    /// folder records nothing and undoes none of them (it set every field back to the file's).
    @Test func anUntouchedFileChangesNothing() throws {
        let (here, there, id, folder, _) = try Self.exported()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        _ = try there.setTitle(id, "Plan v2")
        _ = try there.appendText(id, "step 3 (from there)\n")
        _ = try there.setPinned(id, true)
        try Self.sync(there, into: here)
        let before = try here.versionVector
        let result = try here.importMarkdown(from: folder)
        #expect(result.created == 0 && result.updated == 0 && result.unchanged == 1)
        #expect(try here.versionVector == before, "nothing recorded")
        let note = try #require(try here.note(id))
        #expect(note.title == "Plan v2" && note.pinned)
        #expect(try Self.body(here, id) == "step 1\nstep 2\nstep 3 (from there)\n")
    }

    /// The file's own changes (title, a line, a tag added, one taken out) are applied on top of
    /// what arrived meanwhile (a line elsewhere, a pin, a tag): both stay, on both devices.
    @Test func aChangedFileTakesOnlyWhatChangedInIt() throws {
        let (here, there, id, folder, file) = try Self.exported()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        _ = try there.appendText(id, "step 3 (from there)\n")
        _ = try there.setPinned(id, true)
        _ = try there.setTag(id, "work", member: true)
        try Self.sync(there, into: here)
        var text = try String(contentsOfFile: file, encoding: .utf8)
        text = text.replacingOccurrences(of: "title: \"Plan\"", with: "title: \"Plan, edited\"")
        text = text.replacingOccurrences(of: "step 1\n", with: "step 1 (edited in the file)\n")
        text = text.replacingOccurrences(of: "[\"home\"]", with: "[\"errands\"]")
        #expect(text.contains("Plan, edited") && text.contains("errands"), "the premise: the file's format")
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        let result = try here.importMarkdown(from: folder)
        #expect(result.updated == 1)
        try Self.sync(here, into: there)
        for store in [here, there] {
            let note = try #require(try store.note(id))
            #expect(note.title == "Plan, edited")
            #expect(note.pinned, "the pin that arrived after the export stays")
            #expect(Set(note.tags) == ["errands", "work"])
            #expect(try Self.body(store, id) == "step 1 (edited in the file)\nstep 2\nstep 3 (from there)\n")
        }
        // The imported file is the base now: importing it again records nothing.
        let before = try here.versionVector
        #expect(try here.importMarkdown(from: folder).unchanged == 1)
        #expect(try here.versionVector == before)
    }

    /// A replica that lacks the note (the folder carried to a device the note has not reached)
    /// makes it from the file, although the file is as the export left it.
    @Test func anUntouchedFileOfANoteThisReplicaLacksMakesIt() throws {
        let (_, _, id, folder, _) = try Self.exported()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let elsewhere = try NoteStore.openInMemory()
        #expect(try elsewhere.importMarkdown(from: folder).created == 1)
        #expect(try elsewhere.note(id)?.title == "Plan")
        #expect(try Self.body(elsewhere, id) == "step 1\nstep 2\n")
    }

    /// Without the export's bases (a folder exported by an older build, or its bases removed),
    /// a file sets what it gives, as before.
    @Test func withoutABaseTheFileIsTaken() throws {
        let (here, there, id, folder, _) = try Self.exported()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        _ = try there.setPinned(id, true)
        try Self.sync(there, into: here)
        try FileManager.default.removeItem(atPath: folder + "/" + MarkdownNotes.basesName)
        #expect(try here.importMarkdown(from: folder).updated == 1)
        #expect(try here.note(id)?.pinned == false)
    }
}

import Foundation
import NotesCRDT
@testable import NotesStore
import Testing

/// A note's text may hold U+0000 (typed, pasted, or from any device): every read of the stored
/// rows gives it whole. GRDB reads TEXT through `String(cString:)`, which stopped at the NUL, so
/// `show`, `list` and the Markdown export cut the note there, and importing that export again
/// deleted the rest on every device.
struct NulTextTests {
    static let body = "abc\u{0}def\u{0}"
    static let title = "ti\u{0}tle"
    static let tag = "x\u{0}y"

    @Test func everyReadGivesTheWholeText() throws {
        let store = try NoteStore.openInMemory()
        let id = try store.createNote(title: Self.title, body: Self.body, tags: [Self.tag])
        _ = try store.setColor(id, "re\u{0}d")
        let one = try #require(try store.note(id))
        #expect(one.title == Self.title && one.body == Self.body && one.tags == [Self.tag] && one.color == "re\u{0}d")
        #expect(one.preview.hasPrefix("abc\u{0}def"))
        let listed = try #require(try store.list(includeBody: true).first)
        #expect(listed.title == Self.title && listed.body == Self.body && listed.tags == [Self.tag] && listed.color == "re\u{0}d")
        #expect(try store.list(tag: Self.tag).map(\.id) == [id])
        let hit = try #require(try store.search("def").first)
        #expect(hit.note.title == Self.title && hit.note.tags == [Self.tag])
        #expect(hit.snippet.contains("[def]"))  // (FTS5's snippet leaves the NUL out: a snippet is not the text)
        _ = try store.setState(id, .deleted)
        let deleted = try #require(try store.list(.deleted).first)
        #expect(deleted.title == Self.title && deleted.preview.hasPrefix("abc\u{0}def"))
    }

    @Test func aMarkdownRoundTripRecordsNothing() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("nul-md-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try NoteStore.openInMemory()
        let id = try store.createNote(title: Self.title, body: Self.body, tags: [Self.tag])
        let digest = try store.digest()
        _ = try store.exportMarkdown(to: folder)
        let result = try store.importMarkdown(from: folder)
        #expect(result.created == 0 && result.updated == 0 && result.unchanged == 1)
        #expect(try store.digest() == digest)
        #expect(try store.note(id)?.body == Self.body)
    }
}

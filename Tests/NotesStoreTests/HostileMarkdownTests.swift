import Foundation
import NotesCRDT
@testable import NotesStore
import Testing

/// A Markdown file given to `crdt-sync import-md` is input from outside: whatever it holds, it is
/// read or refused with an error naming the file and line, never a trap; and a file written with
/// Windows line endings reads as the same note as with Unix ones.
struct HostileMarkdownTests {
    /// Pieces a hostile file is made of: line ends alone and in pairs, marks that join the
    /// character before them, a byte order mark, the front matter's own syntax.
    static let pieces = ["\r", "\n", "\r\n", "---", "---\r\n", "---\n", ":", "\u{301}", "\u{FEFF}", "\"", "[", "]", "é", "# ", " ", "\t", "- ",
                         "id: ", "title: ", "tags: ", "pinned: true", "state: trashed", "color: null", "\u{0}", "😀", "'", "''"]

    /// A file with front matter, its lines ended by `newline`.
    static func file(_ rng: inout SplitMix64, newline: String) -> String {
        var lines = ["---"]
        lines.append("id: \(NoteID(Identifier128(high: rng.next(), low: rng.next())))")
        if rng.next() % 4 != 0 { lines.append("title: \(MarkdownNotes.quoted("t\(rng.next() % 100) \u{301}é"))") }
        if rng.next() % 2 == 0 { lines.append("tags: [\"home\", \"w\(rng.next() % 9)\"]") }
        if rng.next() % 2 == 0 { lines.append("pinned: \(rng.next() % 2 == 0)") }
        if rng.next() % 3 == 0 { lines.append("created: 2024-01-01") }
        lines.append("---")
        // The body keeps its own line ends (a note's text is not rewritten).
        return lines.joined(separator: newline) + newline + "body line\none\r\ntwo"
    }

    @Test func windowsLineEndsReadAsTheSameNote() throws {
        var rng = SplitMix64(seed: 1125)
        for _ in 0 ..< 200 {
            var copy = rng
            let unix = try MarkdownNotes.parse(Self.file(&rng, newline: "\n"), fileName: "n.md")
            let windows = try MarkdownNotes.parse(Self.file(&copy, newline: "\r\n"), fileName: "n.md")
            #expect(windows == unix)
            #expect(unix.body == "body line\none\r\ntwo")
        }
        // A heading as the title, either way.
        #expect(try MarkdownNotes.parse("# Heading\r\n\r\ntext\r\n", fileName: "f.md") == MarkdownNote(title: "Heading", body: "text\r\n"))
        #expect(try MarkdownNotes.parse("# Heading\n\ntext\n", fileName: "f.md") == MarkdownNote(title: "Heading", body: "text\n"))
    }

    /// Front matter opened with a Windows line end and nothing after it: an error naming the file
    /// (it trapped: "\r\n" is one Character, and the reader skipped five).
    @Test func anOpeningWithNothingAfterItIsRefused() throws {
        for text in ["---\r\n", "---\n", "---\r\nid: 1", "---\r\n\r"] {
            #expect(throws: StoreError.self, "\(text.debugDescription)") { _ = try MarkdownNotes.parse(text, fileName: "short.md") }
        }
        // Closed at once: an empty note named after its file.
        #expect(try MarkdownNotes.parse("---\r\n---", fileName: "short.md") == MarkdownNote(title: "short", body: ""))
        #expect(try MarkdownNotes.parse("---\r\n---\r\nx", fileName: "short.md") == MarkdownNote(title: "short", body: "x"))
        #expect(try MarkdownNotes.parse("# ", fileName: "short.md") == MarkdownNote(title: "", body: ""))
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func hostileFilesAreReadOrRefusedByLine(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        var read = 0
        var refused = 0
        for _ in 0 ..< 400 {
            var text = Array(Self.file(&rng, newline: rng.next() % 2 == 0 ? "\n" : "\r\n").unicodeScalars).map(String.init)
            for _ in 0 ..< 1 + rng.next() % 4 {
                let at = Int(rng.next() % UInt64(text.count + 1))
                switch rng.next() % 3 {
                case 0: text.insert(Self.pieces[Int(rng.next() % UInt64(Self.pieces.count))], at: at)
                case 1: if at < text.count { text.remove(at: at) }
                default: text = Array(text.prefix(at))
                }
            }
            do {
                _ = try MarkdownNotes.parse(text.joined(), fileName: "hostile.md")
                read += 1
            } catch let error as StoreError {
                #expect(error.message.hasPrefix("hostile.md: line"), "\(error.message)")
                refused += 1
            } catch {
                Issue.record("\(error)")
            }
        }
        #expect(read > 50 && refused > 50, "read \(read), refused \(refused)")
    }
}

/// What a folder given to `import --markdown` may hold besides files: each is refused by name,
/// at once, with nothing imported.
struct HostileMarkdownFolderTests {
    /// A file larger than a note may hold is refused from its size, unread.
    @Test func aHugeFileIsRefusedUnread() throws {
        let folder = TemporaryFolder()
        FileManager.default.createFile(atPath: folder.file("a.md"), contents: Data(repeating: 0x61, count: MarkdownNotes.maxFileBytes + 1))
        let store = try NoteStore.openInMemory()
        #expect { _ = try store.importMarkdown(from: folder.path) } throws: { "\($0)".contains("a.md: \(MarkdownNotes.maxFileBytes + 1) bytes, more than a note may hold") }
        #expect(try store.list().isEmpty)
    }

    /// A link named `.md` is not followed, whatever it names: a link to `/etc/passwd` or a key
    /// in a shared or cloned folder became a note that synced to every device (and a link to a
    /// huge file passed the size check with its own size). A subfolder named `.md` is skipped,
    /// as every subfolder is (it stopped the whole import).
    @Test func aLinkIsRefusedAndASubfolderSkipped() throws {
        let folder = TemporaryFolder()
        let notes = folder.file("notes")
        try FileManager.default.createDirectory(atPath: notes + "/sub.md", withIntermediateDirectories: true)
        try Data("kept".utf8).write(to: URL(fileURLWithPath: notes + "/a.md"))
        let store = try NoteStore.openInMemory()
        #expect(try store.importMarkdown(from: notes).created == 1)
        let secret = folder.file("secret.txt")
        try Data("private".utf8).write(to: URL(fileURLWithPath: secret))
        try FileManager.default.createSymbolicLink(atPath: notes + "/b.md", withDestinationPath: secret)
        #expect { _ = try store.importMarkdown(from: notes) } throws: { "\($0)".contains("b.md: a symbolic link, which import does not follow") }
        #expect(try store.list(includeBody: true).map(\.body) == ["kept"])
    }

    /// A FIFO named `.md` (the import waited for a writer forever) and a link to `/dev/zero`
    /// (read until memory ran out) are not regular files.
    @Test func aFIFOOrADeviceIsNotRead() throws {
        let folder = TemporaryFolder()
        #expect(mkfifo(folder.file("a.md"), 0o644) == 0)
        let store = try NoteStore.openInMemory()
        #expect { _ = try store.importMarkdown(from: folder.path) } throws: { "\($0)".contains("a.md: not a regular file") }
        try FileManager.default.removeItem(atPath: folder.file("a.md"))
        try FileManager.default.createSymbolicLink(atPath: folder.file("b.md"), withDestinationPath: "/dev/zero")
        #expect { _ = try store.importMarkdown(from: folder.path) } throws: { "\($0)".contains("b.md: a symbolic link") }
        // An export reads the same way: a FIFO in the manifest's place is no manifest, and one
        // the manifest names as an earlier export's file is not that file.
        try FileManager.default.removeItem(atPath: folder.file("b.md"))
        #expect(mkfifo(folder.file(MarkdownNotes.manifestName), 0o644) == 0)
        _ = try store.createNote(title: "one", body: "text")
        #expect(try store.exportMarkdown(to: folder.path).written == 1)
        #expect(mkfifo(folder.file("old.md"), 0o644) == 0)
        try Data(#"{"files": {"old.md": "00"}}"#.utf8).write(to: URL(fileURLWithPath: folder.file(MarkdownNotes.manifestName)))
        #expect(try store.exportMarkdown(to: folder.path).removed == 0)
    }
}

import Foundation
import Testing

/// Issue 23's notes tool through the binary: `edit` in an editor, bodies from files and stdin,
/// Markdown export and import, tags and the trash, help.
@Suite(.serialized)
struct NotesToolTests {
    /// Runs with `input` on stdin.
    static func run(_ arguments: [String], db: String, stdin input: Data) throws -> CLI.Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CLI.binary)
        process.arguments = arguments + ["--db", db]
        let inPipe = Pipe(), out = Pipe(), err = Pipe()
        process.standardInput = inPipe
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Written from another thread: a 200 KB body is more than a pipe holds.
        let writer = Thread { inPipe.fileHandleForWriting.write(input); try? inPipe.fileHandleForWriting.close() }
        writer.start()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return CLI.Result(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                          stderr: String(decoding: stderr, as: UTF8.self))
    }

    /// The digest and how many operations the replica holds: both unchanged means nothing was recorded.
    static func fingerprint(_ db: String) throws -> String {
        let status = try #require(try CLI.json(["status"], db: db) as? [String: Any])
        let vector = try #require(status["versionVector"] as? [String: Int])
        return "\(status["digest"] ?? "") \(vector.values.reduce(0, +))"
    }

    static func show(_ id: String, _ db: String) throws -> [String: Any] {
        try #require(try CLI.json(["show", String(id.prefix(8))], db: db) as? [String: Any])
    }

    static func script(_ path: String, _ text: String) throws {
        try ("#!/bin/sh\n" + text).write(toFile: path, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path)
    }

    @Test func anEditorSaveIsDiffedOntoAConcurrentEditThatArrivedMeanwhile() throws {
        let scratch = Scratch()
        let a = scratch.db, b = scratch.path + "/b.db"
        try CLI.ok(["init"], db: a)
        try CLI.ok(["init"], db: b)
        let id = try CLI.ok(["new", "--title", "Plan", "--body", "line one\nline two\nline three\n"], db: a)
        try CLI.ok(["export", "--out", scratch.path + "/a.crdtb"], db: a)
        try CLI.ok(["import", scratch.path + "/a.crdtb"], db: b)
        try CLI.ok(["edit", String(id.prefix(8)), "--body", "line one\nline two\nline three, from B\n"], db: b)
        try CLI.ok(["export", "--out", scratch.path + "/b.crdtb"], db: b)
        // The editor: B's edit arrives (a sync) while it is open, then the person changes the title and line one.
        let editor = scratch.path + "/editor.sh"
        try Self.script(editor, """
            "\(CLI.binary)" import "\(scratch.path)/b.crdtb" --db "\(a)" >/dev/null || exit 9
            head -1 "$1" | grep -qx 'Plan' || exit 8
            sed -i -e '1s/.*/Plan B/' -e 's/^line one$/LINE ONE/' "$1"
            """)
        let result = try CLI.run(["edit", String(id.prefix(8))], db: a, environment: ["VISUAL": "", "EDITOR": "sh " + editor])
        #expect(result.status == 0, "\(result.stderr)")
        let note = try Self.show(id, a)
        #expect(note["title"] as? String == "Plan B")
        #expect(note["body"] as? String == "LINE ONE\nline two\nline three, from B\n")
        // Merged back into B, both replicas read the same.
        try CLI.ok(["export", "--out", scratch.path + "/a2.crdtb"], db: a)
        try CLI.ok(["import", scratch.path + "/a2.crdtb"], db: b)
        #expect(try CLI.ok(["digest"], db: a) == CLI.ok(["digest"], db: b))
    }

    @Test func anEditorThatFailsOrChangesNothingRecordsNothing() throws {
        let scratch = Scratch()
        let db = scratch.db
        try CLI.ok(["init"], db: db)
        let id = String(try CLI.ok(["new", "--title", "T", "--body", "b"], db: db).prefix(8))
        let before = try Self.fingerprint(db)
        let unchanged = try CLI.run(["edit", id], db: db, environment: ["VISUAL": "true"])
        #expect(unchanged.status == 0)
        #expect(unchanged.stdout.contains("not changed"))
        // $VISUAL comes before $EDITOR; a failing editor is an error and nothing is saved.
        let editor = scratch.path + "/rewrite.sh"
        try Self.script(editor, "printf 'New\\n\\nnew body\\n' > \"$1\"\nexit 3\n")
        let failed = try CLI.run(["edit", id], db: db, environment: ["VISUAL": editor, "EDITOR": "true"])
        #expect(failed.status != 0)
        #expect(failed.stderr.contains("exited with status 3"))
        #expect(try Self.fingerprint(db) == before)
        // The same editor that exits 0 saves.
        try Self.script(editor, "printf 'New\\n\\nnew body\\n' > \"$1\"\n")
        #expect(try CLI.run(["edit", id], db: db, environment: ["VISUAL": editor]).status == 0)
        #expect(try Self.show(id, db)["body"] as? String == "new body")
    }

    @Test func bodiesComeFromStdinAndFiles() throws {
        let scratch = Scratch()
        let db = scratch.db
        try CLI.ok(["init"], db: db)
        let large = String((0 ..< 6000).map { "line \($0) with some text, é 中 😀\n".prefix(40) }.joined())
        #expect(large.utf8.count >= 200_000)
        let file = scratch.path + "/body.txt"
        try large.write(toFile: file, atomically: true, encoding: .utf8)
        let fromFile = try CLI.ok(["new", "--title", "file", "--body-file", file], db: db)
        #expect(try Self.show(fromFile, db)["body"] as? String == large)
        let piped = try Self.run(["new", "--title", "stdin", "--body", "-"], db: db, stdin: Data(large.utf8))
        #expect(piped.status == 0, "\(piped.stderr)")
        #expect(try Self.show(piped.stdout.trimmingCharacters(in: .newlines), db)["body"] as? String == large)
        // edit takes them too: a lone "-" as a body comes from a file.
        try "-".write(toFile: scratch.path + "/dash.txt", atomically: true, encoding: .utf8)
        try CLI.ok(["edit", String(fromFile.prefix(8)), "--body-file", scratch.path + "/dash.txt"], db: db)
        #expect(try Self.show(fromFile, db)["body"] as? String == "-")
        let edited = try Self.run(["edit", String(fromFile.prefix(8)), "--body", "-"], db: db, stdin: Data("from stdin".utf8))
        #expect(edited.status == 0)
        #expect(try Self.show(fromFile, db)["body"] as? String == "from stdin")
        // A missing file: exit 2, nothing stored.
        let before = try Self.fingerprint(db)
        let missing = try CLI.run(["new", "--title", "x", "--body-file", scratch.path + "/nope.txt"], db: db)
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("nope.txt"))
        #expect(try CLI.run(["edit", String(fromFile.prefix(8)), "--body-file", scratch.path + "/nope.txt"], db: db).status == 2)
        #expect(try Self.fingerprint(db) == before)
    }

    @Test func aMarkdownRoundTripRecordsNothingAndAnEditedFileIsDiffedIn() throws {
        let scratch = Scratch()
        let db = scratch.db
        let folder = scratch.path + "/md"
        try CLI.ok(["init"], db: db)
        let plain = try CLI.ok(["new", "--title", "Groceries: \"weekly\"", "--body", "milk\neggs\n", "--tag", "Home", "--tag", "to do"], db: db)
        let other = try CLI.ok(["new", "--title", "中文 😀 / notes", "--body=---\nnot front matter\n# not a title"], db: db)
        let empty = try CLI.ok(["new", "--title", ""], db: db)
        try CLI.ok(["pin", String(plain.prefix(8))], db: db)
        try CLI.ok(["color", String(other.prefix(8)), "yellow"], db: db)
        try CLI.ok(["archive", String(other.prefix(8))], db: db)
        try CLI.ok(["trash", String(empty.prefix(8))], db: db)
        let exported = try #require(try CLI.json(["export", "--markdown", folder], db: db) as? [String: Any])
        #expect(exported["written"] as? Int == 3)
        let names = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".md") }.sorted()
        #expect(names == ["groceries-weekly-\(plain.prefix(8)).md", "notes-\(other.prefix(8)).md", "untitled-\(empty.prefix(8)).md"])
        let text = try String(contentsOfFile: folder + "/" + names[0], encoding: .utf8)
        #expect(text.hasPrefix("---\nid: \(plain)\ntitle: \"Groceries: \\\"weekly\\\"\"\ntags: [\"Home\", \"to do\"]\npinned: true\n"))
        #expect(text.hasSuffix("---\nmilk\neggs\n"))

        let before = try Self.fingerprint(db)
        let imported = try #require(try CLI.json(["import", "--markdown", folder], db: db) as? [String: Any])
        #expect(imported["created"] as? Int == 0 && imported["updated"] as? Int == 0 && imported["unchanged"] as? Int == 3)
        #expect(try Self.fingerprint(db) == before)

        // A changed line and an unpin come back as an edit of that note alone.
        let path = folder + "/" + names[0]
        try text.replacingOccurrences(of: "pinned: true", with: "pinned: false").replacingOccurrences(of: "eggs", with: "eggs\nbread")
            .write(toFile: path, atomically: true, encoding: .utf8)
        let second = try #require(try CLI.json(["import", "--markdown", folder], db: db) as? [String: Any])
        #expect(second["updated"] as? Int == 1 && second["unchanged"] as? Int == 2)
        let note = try Self.show(plain, db)
        #expect(note["body"] as? String == "milk\neggs\nbread\n")
        #expect(note["pinned"] as? Bool == false)
        // A renamed note's file is replaced by one under its new name (once an export wrote it
        // again: a file changed by hand since the export is never removed).
        try CLI.ok(["export", "--markdown", folder], db: db)
        try CLI.ok(["edit", String(plain.prefix(8)), "--title", "Shopping"], db: db)
        try CLI.ok(["export", "--markdown", folder], db: db)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.contains(plain.prefix(8)) } == ["shopping-\(plain.prefix(8)).md"])
    }

    @Test func foreignMarkdownFilesBecomeNewNotesAndAMalformedOneStopsTheImport() throws {
        let scratch = Scratch()
        let db = scratch.db
        let folder = scratch.path + "/vault"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try CLI.ok(["init"], db: db)
        try "# Trip ideas\n\n- Lisbon\n- Kyoto\n".write(toFile: folder + "/trip.md", atomically: true, encoding: .utf8)
        try "just text".write(toFile: folder + "/Reading list.md", atomically: true, encoding: .utf8)
        try "---\naliases:\n  - x\ntags: [books]\n---\nbody".write(toFile: folder + "/obsidian.md", atomically: true, encoding: .utf8)
        try "---\ntitle: broken\npinned: maybe\n---\n".write(toFile: folder + "/zz-broken.md", atomically: true, encoding: .utf8)
        let before = try Self.fingerprint(db)
        let refused = try CLI.run(["import", "--markdown", folder], db: db)
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("zz-broken.md: line 3") && refused.stderr.contains("pinned"))
        #expect(try Self.fingerprint(db) == before)
        #expect(try CLI.ok(["list"], db: db).isEmpty)

        try FileManager.default.removeItem(atPath: folder + "/zz-broken.md")
        let imported = try #require(try CLI.json(["import", "--markdown", folder], db: db) as? [String: Any])
        #expect(imported["created"] as? Int == 3)
        let notes = try #require(try CLI.json(["list"], db: db) as? [[String: Any]])
        let byTitle = Dictionary(uniqueKeysWithValues: notes.map { ($0["title"] as! String, $0) })
        #expect(byTitle["Trip ideas"]?["body"] as? String == "- Lisbon\n- Kyoto\n")
        #expect(byTitle["Reading list"]?["body"] as? String == "just text")
        #expect(byTitle["obsidian"]?["tags"] as? [String] == ["books"])
    }

    @Test func aMarkdownFileLargerThanANoteMayHoldIsRefusedUnread() throws {
        let scratch = Scratch()
        let folder = scratch.path + "/vault"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try CLI.ok(["init"], db: scratch.db)
        try "# Fine\n\nsmall".write(toFile: folder + "/fine.md", atomically: true, encoding: .utf8)
        // Sparse: 17 MiB on paper, nothing on disk.
        try #require(FileManager.default.createFile(atPath: folder + "/huge.md", contents: nil))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: folder + "/huge.md"))
        try handle.truncate(atOffset: 17 << 20)
        try handle.close()
        let before = try Self.fingerprint(scratch.db)
        let refused = try CLI.run(["import", "--markdown", folder], db: scratch.db)
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("huge.md: 17825792 bytes, more than a note may hold"), "\(refused.stderr)")
        #expect(try Self.fingerprint(scratch.db) == before)
    }

    @Test func tagsAreCountedAndRenamedBesideTaggingANote() throws {
        let scratch = Scratch()
        let db = scratch.db
        try CLI.ok(["init"], db: db)
        let a = String(try CLI.ok(["new", "--title", "a", "--tag", "work"], db: db).prefix(8))
        let b = String(try CLI.ok(["new", "--title", "b", "--tag", "Work", "--tag", "later"], db: db).prefix(8))
        // `tag ID NAME` as before.
        try CLI.ok(["tag", a, "later"], db: db)
        #expect(try CLI.ok(["tags"], db: db) == "#later  2 notes\n#work  2 notes")
        try CLI.ok(["trash", b], db: db)
        let counted = try #require(try CLI.json(["tags"], db: db) as? [[String: Any]])
        #expect(counted.map { "\($0["name"] as? String ?? "?") \($0["notes"] as? Int ?? -1)" } == ["later 1", "work 1"])
        // Renaming onto an existing tag merges (the trashed note moves too).
        try CLI.ok(["tag", "rename", "work", "Later"], db: db)
        #expect(try Self.show(a, db)["tags"] as? [String] == ["later"])
        #expect(try Self.show(b, db)["tags"] as? [String] == ["later"])
        let missing = try CLI.run(["tag", "rename", "work", "x"], db: db)
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("no tag work"))
    }

    @Test func emptyingTheTrashDeletesWhatIsInIt() throws {
        let scratch = Scratch()
        let db = scratch.db
        try CLI.ok(["init"], db: db)
        let kept = try CLI.ok(["new", "--title", "kept"], db: db)
        for title in ["x", "y"] { try CLI.ok(["trash", String(try CLI.ok(["new", "--title", title], db: db).prefix(8))], db: db) }
        #expect(try CLI.json(["trash", "empty"], db: db) as? [String: Int] == ["deleted": 2])
        #expect(try CLI.ok(["list", "--trashed"], db: db).isEmpty)
        #expect(try (CLI.json(["list", "--deleted"], db: db) as? [Any])?.count == 2)
        #expect(try CLI.ok(["list"], db: db).contains(kept.prefix(8)))
        #expect(try CLI.ok(["trash", "empty"], db: db).contains("nothing changed"))
    }

    @Test func helpMentionsShellCompletions() throws {
        let help = try CLI.run(["--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("--generate-completion-script"))
        let script = try CLI.run(["--generate-completion-script", "bash"])
        #expect(script.status == 0 && script.stdout.contains("tags"))
    }
}

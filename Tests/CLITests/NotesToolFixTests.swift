import Foundation
import Testing

/// Regressions from a QA pass over the notes tool: Markdown export and import, the trash, the
/// editor's read-back, tag names, and output to a closed pipe.
@Suite(.serialized)
struct NotesToolFixTests {
    static func fingerprint(_ db: String) throws -> String { try NotesToolTests.fingerprint(db) }
    static func show(_ id: String, _ db: String) throws -> [String: Any] { try NotesToolTests.show(id, db) }

    /// `edit ID` with `editor` (a shell script body) as $VISUAL, temporary files under `tmp`.
    static func editWith(_ script: String, _ id: String, db: String, scratch: Scratch, tmp: String? = nil) throws -> CLI.Result {
        let editor = scratch.path + "/editor-\(UUID().uuidString).sh"
        try NotesToolTests.script(editor, script)
        var environment = ["VISUAL": editor]
        if let tmp { environment["TMPDIR"] = tmp }
        return try CLI.run(["edit", String(id.prefix(8))], db: db, environment: environment)
    }

    @Test func anExportRemovesOnlyItsOwnUnchangedFiles() throws {
        let scratch = Scratch()
        let db = scratch.db, folder = scratch.path + "/md"
        try CLI.ok(["init"], db: db)
        let id = try CLI.ok(["new", "--title", "Plan", "--body", "one\n"], db: db)
        let other = try CLI.ok(["new", "--title", "Other", "--body", "x\n"], db: db)
        try CLI.ok(["export", "--markdown", folder], db: db)
        let exported = folder + "/plan-\(id.prefix(8)).md"
        let text = try String(contentsOfFile: exported, encoding: .utf8)
        // A person's variant of an exported file: same id, another name.
        let variant = text.replacingOccurrences(of: "title: \"Plan\"", with: "title: \"Plan v2\"") + "more\n"
        try variant.write(toFile: folder + "/variant.md", atomically: true, encoding: .utf8)
        let again = try CLI.ok(["export", "--markdown", folder], db: db)
        #expect(!again.contains("removed"))
        #expect(try String(contentsOfFile: folder + "/variant.md", encoding: .utf8) == variant)
        // An exported file changed since is kept when its note is renamed; an unchanged one goes.
        let otherFile = folder + "/other-\(other.prefix(8)).md"
        try (String(contentsOfFile: otherFile, encoding: .utf8) + "typed here\n").write(toFile: otherFile, atomically: true, encoding: .utf8)
        try CLI.ok(["edit", String(id.prefix(8)), "--title", "Renamed"], db: db)
        try CLI.ok(["edit", String(other.prefix(8)), "--title", "Other renamed"], db: db)
        let renamed = try #require(try CLI.json(["export", "--markdown", folder], db: db) as? [String: Any])
        #expect(renamed["removed"] as? Int == 1)
        let names = Set(try FileManager.default.contentsOfDirectory(atPath: folder))
        #expect(!names.contains("plan-\(id.prefix(8)).md"))
        #expect(names.isSuperset(of: ["variant.md", "other-\(other.prefix(8)).md", "renamed-\(id.prefix(8)).md",
                                      "other-renamed-\(other.prefix(8)).md"]))
    }

    @Test func aDeletedNoteCannotBeTrashed() throws {
        let scratch = Scratch()
        let db = scratch.db
        try CLI.ok(["init"], db: db)
        let x = String(try CLI.ok(["new", "--title", "x"], db: db).prefix(8))
        let y = String(try CLI.ok(["new", "--title", "y"], db: db).prefix(8))
        try CLI.ok(["delete", x], db: db)
        try CLI.ok(["trash", y], db: db)
        try CLI.ok(["trash", "empty"], db: db)
        let before = try Self.fingerprint(db)
        for arguments in [["trash", x], ["trash", "note", y]] {
            let refused = try CLI.run(arguments, db: db)
            #expect(refused.status == 2 && refused.stderr.contains("is deleted"), "\(arguments): \(refused.stderr)")
        }
        #expect(try Self.fingerprint(db) == before)
        #expect(try CLI.ok(["list", "--trashed"], db: db).isEmpty)
        try CLI.ok(["restore", x], db: db)
        #expect(try Self.show(x, db)["state"] as? String == "active")
    }

    @Test func anEditThatCannotBeReadBackIsKept() throws {
        let scratch = Scratch()
        let db = scratch.db, tmp = scratch.path + "/tmp"
        try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: true)
        try CLI.ok(["init"], db: db)
        let id = try CLI.ok(["new", "--title", "T", "--body", "b"], db: db)
        let before = try Self.fingerprint(db)
        let result = try Self.editWith("printf 't\\n\\n\\377\\376\\n' > \"$1\"\n", id, db: db, scratch: scratch, tmp: tmp)
        #expect(result.status != 0)
        let line = try #require(result.stderr.split(separator: "\n").first { $0.contains("kept in ") })
        let path = String(line[line.range(of: "kept in ")!.upperBound...])
        #expect(FileManager.default.contents(atPath: path) == Data([0x74, 0x0A, 0x0A, 0xFF, 0xFE, 0x0A]))
        #expect(try Self.fingerprint(db) == before)
    }

    @Test func theEditorReadsCRLFAndKeepsAMultiLineTitle() throws {
        let scratch = Scratch()
        let db = scratch.db
        try CLI.ok(["init"], db: db)
        let id = try CLI.ok(["new", "--title", "T", "--body", "b"], db: db)
        #expect(try Self.editWith("printf 'Win title\\r\\n\\r\\nbody\\r\\nmore\\r\\n' > \"$1\"\n", id, db: db, scratch: scratch).status == 0)
        var note = try Self.show(id, db)
        #expect(note["title"] as? String == "Win title")
        #expect(note["body"] as? String == "body\nmore")
        let multi = try CLI.ok(["new", "--title", "multi\nline", "--body", "b"], db: db)
        #expect(try Self.editWith("sed -i 's/^b$/c/' \"$1\"\n", multi, db: db, scratch: scratch).status == 0)
        note = try Self.show(multi, db)
        #expect(note["title"] as? String == "multi\nline")
        #expect(note["body"] as? String == "c")
    }

    @Test func anEmptiedFileOrAnUnchangedOneRecordsNothing() throws {
        let scratch = Scratch()
        let db = scratch.db
        try CLI.ok(["init"], db: db)
        let id = try CLI.ok(["new", "--title", "T", "--body", "b"], db: db)
        let before = try Self.fingerprint(db)
        let emptied = try Self.editWith(": > \"$1\"\n", id, db: db, scratch: scratch)
        #expect(emptied.status == 1 && emptied.stderr.contains("the file is empty; nothing recorded"))
        #expect(!emptied.stderr.contains("kept in"))
        let unchanged = try Self.editWith("true\n", id, db: db, scratch: scratch)
        #expect(unchanged.status == 0 && unchanged.stdout.contains("not changed") && unchanged.stderr.isEmpty)
        #expect(try Self.fingerprint(db) == before)
        #expect(try Self.show(id, db)["title"] as? String == "T")
    }

    @Test func aMarkdownImportChecksTagNamesAndLeavesAMissingTitleAlone() throws {
        let scratch = Scratch()
        let db = scratch.db, folder = scratch.path + "/in"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try CLI.ok(["init"], db: db)
        let id = try CLI.ok(["new", "--title", "Keep", "--body", "a\n"], db: db)
        try "---\ntitle: \"r\"\ntags: [\"crdt-sync.device.x\"]\n---\n".write(toFile: folder + "/reserved.md", atomically: true, encoding: .utf8)
        let before = try Self.fingerprint(db)
        let refused = try CLI.run(["import", "--markdown", folder], db: db)
        #expect(refused.status == 2 && refused.stderr.contains("reserved.md") && refused.stderr.contains("reserved"))
        #expect(try Self.fingerprint(db) == before)
        try FileManager.default.removeItem(atPath: folder + "/reserved.md")
        try "---\nid: \(id)\n---\nb\n".write(toFile: folder + "/x.md", atomically: true, encoding: .utf8)
        try CLI.ok(["import", "--markdown", folder], db: db)
        let note = try Self.show(id, db)
        #expect(note["title"] as? String == "Keep")
        #expect(note["body"] as? String == "b\n")
    }

    @Test func tagNamesAreTrimmedAndARenameToTheSameNameChangesNothing() throws {
        let scratch = Scratch()
        let db = scratch.db
        try CLI.ok(["init"], db: db)
        let a = String(try CLI.ok(["new", "--title", "a", "--tag", "  spaced  ", "--tag", "WORK"], db: db).prefix(8))
        try CLI.ok(["tag", a, " more "], db: db)
        #expect(Set(try Self.show(a, db)["tags"] as? [String] ?? []) == ["more", "spaced", "WORK"])
        let before = try Self.fingerprint(db)
        let same = try CLI.run(["tag", "rename", "work", "WORK"], db: db)
        #expect(same.status == 0 && same.stdout.contains("nothing changed") && !same.stdout.contains("renamed"))
        #expect(try Self.fingerprint(db) == before)
        #expect(try CLI.ok(["tag", "rename", "wOrK", " job "], db: db) == "renamed #WORK to #job on 1 note")
    }

    @Test func aBodyFileThatIsAFolderAndTheRemoteExampleArePlain() throws {
        let scratch = Scratch()
        let db = scratch.db
        try CLI.ok(["init"], db: db)
        let folder = try CLI.run(["new", "--title", "x", "--body-file", scratch.path], db: db)
        #expect(folder.status == 2 && folder.stderr.contains("is a directory"))
        let help = try CLI.run(["remote", "add", "--help"])
        // Pasted as shown: a line ending in "\" goes on with the next.
        let joined = help.stdout.replacingOccurrences(of: "\\\n", with: " ")
            .split(separator: "\n").map { $0.split(separator: " ").joined(separator: " ") }
        #expect(joined.contains("crdt-sync remote add home --url https://relay.example.net --space notes --token-file ~/relay-token"),
                "\(help.stdout)")
    }

    @Test func outputToAClosedPipeEndsQuietly() throws {
        let scratch = Scratch()
        let db = scratch.db
        try CLI.ok(["init"], db: db)
        try CLI.ok(["new", "--title", "x", "--body", String(repeating: "long line\n", count: 2000)], db: db)
        for arguments in [["list", "--json"], ["list"], ["status", "--json"]] {
            var ends: [Int32] = [0, 0]
            #expect(pipe(&ends) == 0)
            close(ends[0])  // no reader at all: the first write fails
            let process = Process()
            process.executableURL = URL(fileURLWithPath: CLI.binary)
            process.arguments = arguments + ["--db", db]
            process.standardOutput = FileHandle(fileDescriptor: ends[1], closeOnDealloc: true)
            let err = Pipe()
            process.standardError = err
            try process.run()
            let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationReason == .exit && process.terminationStatus == 0, "\(arguments): \(stderr)")
            #expect(!stderr.contains("Fatal error"))
        }
    }
}

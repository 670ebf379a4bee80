import Foundation
import Testing

/// What a person types that the commands read narrowly: each is refused with a message that
/// says what to give, or does what it says.
struct CLIInputTests {
    @Test func editsThatChangeNothingSaySoAndInputIsReadAsGiven() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("cli-input-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let db = folder.appendingPathComponent("a.db").path
        _ = try CLI.ok(["init"], db: db)
        let id = try CLI.ok(["new", "--title", "t", "--body", "hi"], db: db)
        let digest = try CLI.ok(["digest"], db: db)
        // An edit that leaves the note as it reads records nothing and says so.
        for edit in [["--append", ""], ["--title", "t"], ["--body", "hi"], ["--insert", "", "--at", "0"]] {
            #expect(try CLI.ok(["edit", id] + edit, db: db) == "note \(id.prefix(8)) already reads so; nothing changed")
        }
        #expect(try CLI.ok(["digest"], db: db) == digest)
        // A negative offset is refused as negative (it read as a missing value).
        let negative = try CLI.run(["edit", id, "--insert", "x", "--at", "-1"], db: db)
        #expect(negative.status == 64 && negative.stderr.contains("--at must be 0 or more"), "\(negative.stderr)")
        // Every numeric option takes a negative value as its value and names what is wrong (it
        // read as a missing value, or as another option).
        for (args, message) in [(["search", "t", "--limit", "-5"], "--limit must be 1 to 10000, not -5"),
                                (["search", "t", "--limit", "0"], "--limit must be 1 to 10000, not 0"),
                                (["simulate", "partition", "--runs", "-2"], "--runs must be at least 1"),
                                (["simulate", "partition", "--jobs", "-1"], "--jobs must be at least 1"),
                                (["serve", "--port", "-1", "--store", folder.path + "/r.sqlite", "--token", "s=tokentokentoken"],
                                 "--port must be between 0 and 65535"),
                                (["serve", "--page-changes", "-3", "--store", folder.path + "/r.sqlite", "--token", "s=tokentokentoken"],
                                 "must be positive")] {
            let refused = try CLI.run(args, db: db)
            #expect(refused.status == 64 && refused.stderr.contains(message), "\(args): \(refused.stderr)")
        }
        let dashed = try CLI.run(["search", "--db", db, "--", "-draft"])
        #expect(dashed.status == 0 && dashed.stdout.isEmpty, "\(dashed.stderr)")
        // An empty colour name is refused (it cleared the colour).
        _ = try CLI.ok(["color", id, "yellow"], db: db)
        let empty = try CLI.run(["color", id, " "], db: db)
        #expect(empty.status == 64 && empty.stderr.contains("the color name is empty"), "\(empty.stderr)")
        #expect(try CLI.ok(["show", id, "--json"], db: db).contains("\"color\" : \"yellow\""))
        // An empty file given to import is named as empty.
        let file = folder.appendingPathComponent("empty.bundle").path
        FileManager.default.createFile(atPath: file, contents: Data())
        let imported = try CLI.run(["import", file], db: db)
        #expect(imported.status == 1 && imported.stderr.contains("not a crdt-sync bundle (it is empty)"), "\(imported.stderr)")
        // A FIFO given as --body-file is read as a pipe is.
        let fifo = folder.appendingPathComponent("body").path
        #expect(mkfifo(fifo, 0o644) == 0)
        let writer = Thread { try? Data("from a pipe".utf8).write(to: URL(fileURLWithPath: fifo)) }
        writer.start()
        _ = try CLI.ok(["edit", id, "--body-file", fifo], db: db)
        #expect(try CLI.ok(["show", id, "--json"], db: db).contains("\"body\" : \"from a pipe\""))
    }

    /// A tokens file that gives no token, is not UTF-8, is a folder or a FIFO is refused by name
    /// before the relay starts (it started serving nothing, turned bad bytes into another token,
    /// called a folder "no such file", and waited on a FIFO for good).
    @Test func aTokensFileThatGivesNoUsableTokenIsRefused() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("cli-tokens-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let comments = folder.appendingPathComponent("comments").path
        try Data("# no tokens yet\n\n".utf8).write(to: URL(fileURLWithPath: comments))
        let latin1 = folder.appendingPathComponent("latin1").path
        try Data("notes=t\u{00}oken".utf8.map { $0 == 0 ? 0xE9 : $0 }).write(to: URL(fileURLWithPath: latin1))
        let fifo = folder.appendingPathComponent("fifo").path
        #expect(mkfifo(fifo, 0o644) == 0)
        for (file, message) in [(comments, "no tokens"), (latin1, "not UTF-8"), (folder.path, "not a regular file"), (fifo, "not a regular file")] {
            let refused = try CLI.run(["serve", "--port", "0", "--store", folder.path + "/r.sqlite", "--tokens-file", file])
            #expect(refused.status != 0 && refused.stderr.contains(message), "\(file): \(refused.stderr)")
        }
    }

    /// A body limit past the largest bundle only let bodies that must be refused be read whole.
    @Test func aBodyLimitPastTheLargestBundleIsRefused() throws {
        let refused = try CLI.run(["serve", "--port", "0", "--store", FileManager.default.temporaryDirectory.path + "/never-\(UUID().uuidString).sqlite", "--token", "notes=secret", "--max-body-bytes", "99999999999"])
        #expect(refused.status != 0 && refused.stderr.contains("--max-body-bytes must be at most 16777216"), "\(refused.stderr)")
    }
}

import Foundation
import NotesCRDT
import NotesStore
import Testing

/// Runs the built `crdt-sync` binary as a person would.
enum CLI {
    /// The binary: next to the test bundle in the build products folder (a plain `swift test`
    /// builds every product), or under `.build*` found from this file's path.
    static let binary: String = {
        var candidates: [String] = []
        if let override = ProcessInfo.processInfo.environment["CRDT_SYNC_BINARY"] { candidates.append(override) }
        var url = Bundle.main.bundleURL
        for _ in 0 ..< 4 {
            candidates.append(url.appendingPathComponent("crdt-sync").path)
            url.deleteLastPathComponent()
        }
        for argument in CommandLine.arguments where argument.contains("/") {
            var dir = URL(fileURLWithPath: argument).deletingLastPathComponent()
            for _ in 0 ..< 4 {
                candidates.append(dir.appendingPathComponent("crdt-sync").path)
                dir.deleteLastPathComponent()
            }
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        for scratch in [".build", ".build-store"] {
            candidates.append(root.appendingPathComponent("\(scratch)/debug/crdt-sync").path)
        }
        return candidates.first { path in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && !isDirectory.boolValue
                && FileManager.default.isExecutableFile(atPath: path)
        } ?? "crdt-sync"
    }()

    /// The benchmarks and stress tools' binary, built beside `crdt-sync`.
    static var benchBinary: String {
        URL(fileURLWithPath: binary).deletingLastPathComponent().appendingPathComponent("crdt-sync-bench").path
    }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static func run(_ arguments: [String], db: String? = nil, environment: [String: String] = [:],
                    directory: String? = nil) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        process.arguments = arguments + (db.map { ["--db", $0] } ?? [])
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "CRDT_SYNC_DB")
        // The copies of the seq marks go to a folder of the tests', not the user's state folder.
        env["XDG_STATE_HOME"] = FileManager.default.temporaryDirectory.appendingPathComponent("crdt-sync-cli-tests-state").path
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                      stderr: String(decoding: stderr, as: UTF8.self))
    }

    /// Runs and expects success; returns stdout without the final newline.
    @discardableResult
    static func ok(_ arguments: [String], db: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let result = try run(arguments, db: db)
        #expect(result.status == 0, "crdt-sync \(arguments.joined(separator: " ")): \(result.stderr)", sourceLocation: sourceLocation)
        return result.stdout.trimmingCharacters(in: .newlines)
    }

    static func json(_ arguments: [String], db: String) throws -> Any {
        let output = try ok(arguments + ["--json"], db: db)
        return try JSONSerialization.jsonObject(with: Data(output.utf8))
    }
}

final class Scratch: @unchecked Sendable {
    let path: String
    init() {
        path = NSTemporaryDirectory() + "crdt-sync-cli-" + UUID().uuidString
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
    var db: String { path + "/notes.db" }
}

@Suite(.serialized)
struct CLITests {
    @Test func initIsIdempotent() throws {
        let scratch = Scratch()
        let id = try CLI.ok(["init"], db: scratch.db)
        #expect(id.count == 32)
        let again = try CLI.ok(["init"], db: scratch.db)
        #expect(again.contains("already a replica"))
        #expect(again.contains(id))
    }

    @Test func theDatabaseComesFromTheEnvironment() throws {
        let scratch = Scratch()
        let viaEnv = try CLI.run(["init"], environment: ["CRDT_SYNC_DB": scratch.path + "/env.db"])
        #expect(viaEnv.status == 0)
        #expect(FileManager.default.fileExists(atPath: scratch.path + "/env.db"))
        let viaXDG = try CLI.run(["init"], environment: ["XDG_DATA_HOME": scratch.path + "/xdg"])
        #expect(viaXDG.status == 0)
        #expect(FileManager.default.fileExists(atPath: scratch.path + "/xdg/crdt-sync/notes.db"))
    }

    @Test func noteLifecycleThroughTheCommandLine() throws {
        let scratch = Scratch()
        let db = scratch.db
        try CLI.ok(["init"], db: db)
        let id = try CLI.ok(["new", "--title", "Groceries", "--body", "milk and eggs", "--tag", "Home"], db: db)
        #expect(id.count == 32)
        let other = try CLI.ok(["new", "--title", "Meeting"], db: db)
        let short = String(id.prefix(8))
        try CLI.ok(["edit", short, "--append", ", bread"], db: db)
        try CLI.ok(["edit", short, "--insert", "fresh ", "--at", "0"], db: db)
        try CLI.ok(["edit", short, "--delete", "6", "--at", "0"], db: db)
        try CLI.ok(["edit", short, "--title", "Shopping", "--body", "milk and two eggs, bread"], db: db)
        try CLI.ok(["pin", short], db: db)
        try CLI.ok(["tag", short, "Work"], db: db)
        try CLI.ok(["untag", short, "home"], db: db)
        try CLI.ok(["color", short, "yellow"], db: db)

        let note = try #require(try CLI.json(["show", short], db: db) as? [String: Any])
        #expect(note["id"] as? String == id)
        #expect(note["title"] as? String == "Shopping")
        #expect(note["body"] as? String == "milk and two eggs, bread")
        #expect(note["pinned"] as? Bool == true)
        #expect(note["archived"] as? Bool == false)
        #expect(note["color"] as? String == "yellow")
        #expect(note["state"] as? String == "active")
        #expect(note["tags"] as? [String] == ["Work"])
        #expect(note["createdAt"] is String)
        #expect(note["updatedAt"] is String)

        let listed = try #require(try CLI.json(["list"], db: db) as? [[String: Any]])
        #expect(listed.map { $0["id"] as? String } == [id, other])
        #expect(try CLI.ok(["list"], db: db).contains("Shopping"))
        #expect((try CLI.json(["list", "--tag", "work"], db: db) as? [Any])?.count == 1)

        let hits = try #require(try CLI.json(["search", "egg*"], db: db) as? [[String: Any]])
        #expect(hits.map { $0["id"] as? String } == [id])
        #expect((hits.first?["snippet"] as? String)?.contains("[eggs]") == true)

        try CLI.ok(["archive", short], db: db)
        #expect((try CLI.json(["list"], db: db) as? [Any])?.count == 1)
        #expect((try CLI.json(["list", "--archived"], db: db) as? [Any])?.count == 1)
        try CLI.ok(["unarchive", short], db: db)
        try CLI.ok(["trash", short], db: db)
        #expect((try CLI.json(["list", "--trashed"], db: db) as? [Any])?.count == 1)
        try CLI.ok(["restore", short], db: db)
        #expect((try CLI.json(["list", "--all"], db: db) as? [Any])?.count == 2)
        try CLI.ok(["delete", String(other.prefix(6))], db: db)
        #expect((try CLI.json(["list", "--all"], db: db) as? [Any])?.count == 1)

        let log = try #require(try CLI.json(["log", short], db: db) as? [[String: Any]])
        #expect(log.count >= 5)
        #expect(try CLI.ok(["log"], db: db).contains("pinned"))

        let status = try #require(try CLI.json(["status"], db: db) as? [String: Any])
        #expect((status["replica"] as? String)?.count == 32)
        #expect(status["notes"] as? Int == 1)
        #expect(status["pendingChanges"] as? Int == 0)
        #expect(status["versionVector"] is [String: Any])
        let digest = try CLI.ok(["digest"], db: db)
        #expect(status["digest"] as? String == digest)
        #expect(digest.count == 64)
    }

    @Test func errorsAreClearAndExitNonZero() throws {
        let scratch = Scratch()
        let db = scratch.db
        let missing = try CLI.run(["list"], db: db)
        #expect(missing.status == 3)
        #expect(missing.stderr.contains("crdt-sync init"))
        #expect(!FileManager.default.fileExists(atPath: db))

        try CLI.ok(["init"], db: db)
        _ = try CLI.ok(["new", "--title", "a", "--body", "abc"], db: db)
        let unknown = try CLI.run(["show", "ffffffff"], db: db)
        #expect(unknown.status == 2)
        #expect(unknown.stderr.contains("no note"))
        let notHex = try CLI.run(["show", "xyz"], db: db)
        #expect(notHex.status != 0)
        let badOffset = try CLI.run(["edit", "0", "--insert", "x", "--at", "99"], db: db)
        #expect(badOffset.status != 0)
        let usage = try CLI.run(["edit", "0", "--insert", "x"], db: db)
        #expect(usage.status != 0)
        #expect(usage.stderr.contains("--at"))
        let emptySearch = try CLI.run(["search", "*"], db: db)
        #expect(emptySearch.status == 1)

        let text = scratch.path + "/notes.txt"
        try Data("hello, not a database".utf8).write(to: URL(fileURLWithPath: text))
        let notReplica = try CLI.run(["list"], db: text)
        #expect(notReplica.status == 3)
        #expect(notReplica.stderr.contains("not a crdt-sync replica"))
        #expect(FileManager.default.contents(atPath: text) == Data("hello, not a database".utf8))
    }

    @Test func ambiguousPrefixesAreRefused() throws {
        let scratch = Scratch()
        let db = scratch.db
        try CLI.ok(["init"], db: db)
        var ids: [String] = []
        for i in 0 ..< 40 { ids.append(try CLI.ok(["new", "--title", "n\(i)"], db: db)) }
        // With 40 ids, some first hex digit is shared by two of them.
        let shared = Dictionary(grouping: ids, by: { $0.prefix(1) }).first { $0.value.count > 1 }!.key
        let result = try CLI.run(["show", String(shared)], db: db)
        #expect(result.status == 2)
        #expect(result.stderr.contains("more than one note"))
    }

    @Test func helpExplainsTheCommands() throws {
        let help = try CLI.run(["--help"])
        for command in ["init", "new", "edit", "pin", "archive", "trash", "restore", "delete", "tag", "color", "show", "list", "search", "log", "status", "digest"] {
            #expect(help.stdout.contains(command))
        }
        #expect(!help.stdout.contains("store-stress"))
        let edit = try CLI.run(["edit", "--help"])
        #expect(edit.stdout.contains("minimal splice"))
    }

    @Test func traceReplayRepeatsTheMergeWarm() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cli-trace-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let trace = dir.appendingPathComponent("small.json").path
        try Data(#"{"endContent":"hello","txns":[{"patches":[[0,0,"help"],[3,1,"lo"]]}]}"#.utf8).write(to: URL(fileURLWithPath: trace))

        let result = try CLI.run(["trace", "replay", trace, "--repeat", "4", "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let json = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any] ?? [:]
        #expect(json["repeats"] as? Int == 4)
        #expect((json["mergeWarmMs"] as? [Double])?.count == 4)
        #expect(json["mergeColdMs"] is Double)
        #expect(json["localReplayColdMs"] is Double)
        #expect(json["matches"] as? Bool == true)

        let text = try CLI.run(["trace", "replay", trace, "--repeat", "2"])
        #expect(text.stdout.contains("median of 2 warm"))
        #expect(text.stdout.contains("cold"))

        let zero = try CLI.run(["trace", "replay", trace, "--repeat", "0"])
        #expect(zero.status != 0)
        #expect(zero.stderr.contains("--repeat must be from 1 to 100000"))
        let endless = try CLI.run(["trace", "replay", trace, "--repeat", "\(Int.max)"])
        #expect(endless.status == 64 && endless.stderr.contains("--repeat must be from 1 to 100000"))
        let folder = try CLI.run(["trace", "replay", FileManager.default.temporaryDirectory.path])
        #expect(folder.status == 1 && folder.stderr.hasPrefix("crdt-sync: error: ") && folder.stderr.contains("is a directory"), "\(folder.stderr)")
        let help = try CLI.run(["trace", "replay", "--help"])
        #expect(help.stdout.contains("--repeat <N>"))
    }
}

/// `--json` dates are worked out by hand (a formatter per date was most of `list --json`'s time):
/// they must be what ISO8601DateFormatter writes, across leap days, year ends and centuries.
struct JSONDateTests {
    @Test(arguments: ["1970-03-01T00:00:00.000Z", "2000-02-29T12:34:56.789Z", "2024-12-31T23:59:58.000Z",
                      "2100-03-01T00:00:00.000Z", "9999-12-30T23:00:00.000Z"])
    func datesAreWhatAnISO8601FormatterWrites(target: String) throws {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let wanted = formatter.date(from: target)!
        let skew = Int64((wanted.timeIntervalSince1970 - Date().timeIntervalSince1970) * 1000)
        let scratch = Scratch()
        let db = scratch.db
        let env = ["CRDT_SYNC_CLOCK_SKEW_MS": String(skew)]
        #expect(try CLI.run(["init"], db: db, environment: env).status == 0)
        #expect(try CLI.run(["new", "--title", "t"], db: db, environment: env).status == 0)
        let listed = try CLI.run(["list", "--json"], db: db, environment: env)
        let notes = try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as! [[String: Any]]
        let written = try #require(notes.first?["createdAt"] as? String)
        let date = try #require(formatter.date(from: written), "\(written) is not an ISO 8601 date")
        #expect(formatter.string(from: date) == written)
        #expect(abs(date.timeIntervalSince(wanted)) < 30, "\(written) for \(target)")
    }
}

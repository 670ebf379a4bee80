import Foundation
import Testing

/// Runs the built `crdt-sync` as a user would, for the exchange commands.
struct SyncCLI {
    let folder: URL

    init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("crdt-sync-cli-sync-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    static let binary: URL = {
        // The test bundle sits in the build products folder, beside the crdt-sync executable.
        var url = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        while url.path != "/" {
            let candidate = url.deletingLastPathComponent().appendingPathComponent("crdt-sync")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            url = url.deletingLastPathComponent()
        }
        return URL(fileURLWithPath: "crdt-sync")
    }()

    struct Result {
        var status: Int32
        var out: String
        var err: String
    }

    @discardableResult
    func run(_ arguments: [String]) throws -> Result {
        let process = Process()
        process.executableURL = SyncCLI.binary
        process.arguments = arguments
        process.currentDirectoryURL = folder
        var environment = ProcessInfo.processInfo.environment
        environment["CRDT_SYNC_DB"] = nil
        process.environment = environment
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(status: process.terminationStatus, out: String(decoding: outData, as: UTF8.self),
                      err: String(decoding: errData, as: UTF8.self))
    }

    /// Runs a command that must succeed and returns its trimmed output.
    func ok(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let result = try run(arguments)
        #expect(result.status == 0, "crdt-sync \(arguments.joined(separator: " ")) failed: \(result.err)", sourceLocation: sourceLocation)
        return result.out.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func db(_ name: String) -> String { folder.appendingPathComponent("\(name).db").path }

    func digest(_ name: String) throws -> String { try ok(["digest", "--db", db(name)]) }

    func noteJSON(_ name: String, _ id: String) throws -> [String: Any] {
        let text = try ok(["show", "--db", db(name), id, "--json"])
        return try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] ?? [:]
    }
}

struct SyncCommandTests {
    /// Three replicas on separate databases edit one note concurrently, then converge through a
    /// shared folder; every edit survives by the CRDT rules.
    @Test func threeReplicasConvergeThroughAFolder() throws {
        let cli = try SyncCLI()
        defer { try? FileManager.default.removeItem(at: cli.folder) }
        let shared = cli.folder.appendingPathComponent("shared").path
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
        for name in ["a", "b", "c"] { _ = try cli.ok(["init", "--db", cli.db(name)]) }
        let id = try cli.ok(["new", "--db", cli.db("a"), "--title", "Trip", "--body", "pack bags"])
        for name in ["a", "b", "c"] { _ = try cli.ok(["sync", "--db", cli.db(name), "--dir", shared]) }
        // Apart: same place (start of the body) on a and b, a rename, a pin, a tag, trash then restore.
        _ = try cli.ok(["edit", "--db", cli.db("a"), id, "--insert", "A: ", "--at", "0"])
        _ = try cli.ok(["edit", "--db", cli.db("b"), id, "--insert", "B: ", "--at", "0"])
        _ = try cli.ok(["edit", "--db", cli.db("c"), id, "--append", " and go"])
        _ = try cli.ok(["edit", "--db", cli.db("a"), id, "--title", "Trip to the sea"])
        _ = try cli.ok(["pin", "--db", cli.db("b"), id])
        _ = try cli.ok(["tag", "--db", cli.db("c"), id, "holiday"])
        _ = try cli.ok(["trash", "--db", cli.db("b"), id])
        _ = try cli.ok(["restore", "--db", cli.db("b"), id])
        for name in ["c", "b", "a", "c", "b"] { _ = try cli.ok(["sync", "--db", cli.db(name), "--dir", shared]) }
        let digests = try ["a", "b", "c"].map { try cli.digest($0) }
        #expect(Set(digests).count == 1, "digests differ: \(digests)")
        let note = try cli.noteJSON("a", id)
        #expect(note["title"] as? String == "Trip to the sea")
        #expect(note["pinned"] as? Bool == true)
        #expect(note["state"] as? String == "active")
        #expect(note["tags"] as? [String] == ["holiday"])
        let body = note["body"] as? String ?? ""
        #expect(body.contains("A: ") && body.contains("B: ") && body.hasSuffix("pack bags and go"), "body: \(body)")
    }

    /// Exported files applied in any order, twice, and a bundle before the one it depends on.
    @Test func exportedBundlesConvergeInAnyOrderWithDuplicates() throws {
        let cli = try SyncCLI()
        defer { try? FileManager.default.removeItem(at: cli.folder) }
        for name in ["a", "b"] { _ = try cli.ok(["init", "--db", cli.db(name)]) }
        let id = try cli.ok(["new", "--db", cli.db("a"), "--title", "Log", "--body", "day 1"])
        let first = cli.folder.appendingPathComponent("first.bundle").path
        _ = try cli.ok(["export", "--db", cli.db("a"), "--out", first])
        _ = try cli.ok(["edit", "--db", cli.db("a"), id, "--append", ", day 2"])
        // b does not know a yet, so export everything a has beyond the first bundle by version.
        _ = try cli.ok(["import", "--db", cli.db("b"), first])
        let aID = try cli.ok(["status", "--db", cli.db("a"), "--json"])
        let replicaA = ((try JSONSerialization.jsonObject(with: Data(aID.utf8))) as? [String: Any])?["replica"] as? String ?? ""
        let bStatus = try cli.ok(["status", "--db", cli.db("b"), "--json"])
        let replicaB = ((try JSONSerialization.jsonObject(with: Data(bStatus.utf8))) as? [String: Any])?["replica"] as? String ?? ""
        // a learns what b has by importing a bundle from b.
        let fromB = cli.folder.appendingPathComponent("fromB.bundle").path
        _ = try cli.ok(["export", "--db", cli.db("b"), "--out", fromB])
        _ = try cli.ok(["import", "--db", cli.db("a"), fromB])
        let second = cli.folder.appendingPathComponent("second.bundle").path
        _ = try cli.ok(["export", "--db", cli.db("a"), "--out", second, "--for", String(replicaB.prefix(8))])
        _ = try cli.ok(["edit", "--db", cli.db("a"), id, "--append", ", day 3"])
        let third = cli.folder.appendingPathComponent("third.bundle").path
        _ = try cli.ok(["export", "--db", cli.db("a"), "--out", third, "--for", String(replicaB.prefix(8))])
        #expect(!replicaA.isEmpty)

        // A fresh replica c gets the newest bundle first: it waits for what it depends on.
        _ = try cli.ok(["init", "--db", cli.db("c")])
        let waiting = try cli.ok(["import", "--db", cli.db("c"), third, "--json"])
        let waitingReport = try JSONSerialization.jsonObject(with: Data(waiting.utf8)) as? [String: Any] ?? [:]
        #expect((waitingReport["pending"] as? Int ?? 0) > 0)
        _ = try cli.ok(["import", "--db", cli.db("c"), second, first, third, first])
        let again = try cli.ok(["import", "--db", cli.db("c"), first, second, third, "--json"])
        let againReport = try JSONSerialization.jsonObject(with: Data(again.utf8)) as? [String: Any] ?? [:]
        #expect(againReport["applied"] as? Int == 0)
        _ = try cli.ok(["import", "--db", cli.db("b"), third, second])
        #expect(try cli.digest("c") == cli.digest("a"))
        #expect(try cli.digest("b") == cli.digest("a"))
        #expect(try cli.noteJSON("c", id)["body"] as? String == "day 1, day 2, day 3")
    }

    /// `export --out` at a FIFO, a device or a folder is refused and leaves it as it was (the
    /// rename put a regular file in place of `/dev/null` when run as root); a symbolic link is
    /// written through to its file, as a shell's `>` would.
    @Test func exportRefusesWhatIsNotAFileAndWritesThroughALink() throws {
        let cli = try SyncCLI()
        defer { try? FileManager.default.removeItem(at: cli.folder) }
        _ = try cli.ok(["init", "--db", cli.db("a")])
        _ = try cli.ok(["new", "--db", cli.db("a"), "--title", "t"])
        let fifo = cli.folder.appendingPathComponent("fifo").path
        #expect(mkfifo(fifo, 0o644) == 0)
        let folder = cli.folder.appendingPathComponent("sub").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        for (path, kind) in [(fifo, "a FIFO"), (folder, "a folder"), ("/dev/null", "a device")] {
            let result = try cli.run(["export", "--db", cli.db("a"), "--out", path])
            #expect(result.status != 0 && result.err.contains("is \(kind), left as it is"), "\(path): \(result.err)")
        }
        var info = stat()
        #expect(lstat(fifo, &info) == 0 && info.st_mode & S_IFMT == S_IFIFO)
        #expect(lstat("/dev/null", &info) == 0 && info.st_mode & S_IFMT == S_IFCHR)
        let target = cli.folder.appendingPathComponent("target.bundle").path
        try Data("old".utf8).write(to: URL(fileURLWithPath: target))
        let link = cli.folder.appendingPathComponent("link.bundle").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        _ = try cli.ok(["export", "--db", cli.db("a"), "--out", link])
        #expect(lstat(link, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK)
        _ = try cli.ok(["init", "--db", cli.db("b")])
        _ = try cli.ok(["import", "--db", cli.db("b"), target])
        #expect(try cli.digest("a") == cli.digest("b"))
    }

    /// A damaged bundle is named, exits non-zero, and leaves the database exactly as it was.
    @Test(arguments: ["flip", "truncate", "magic", "version", "empty"])
    func badBundleLeavesTheDatabaseUnchanged(damage: String) throws {
        let cli = try SyncCLI()
        defer { try? FileManager.default.removeItem(at: cli.folder) }
        for name in ["a", "b"] { _ = try cli.ok(["init", "--db", cli.db(name)]) }
        _ = try cli.ok(["new", "--db", cli.db("a"), "--title", "Secret", "--body", "x"])
        _ = try cli.ok(["new", "--db", cli.db("b"), "--title", "Mine", "--body", "y"])
        let file = cli.folder.appendingPathComponent("a.bundle")
        _ = try cli.ok(["export", "--db", cli.db("a"), "--out", file.path])
        var bytes = [UInt8](try Data(contentsOf: file))
        switch damage {
        case "flip": bytes[bytes.count / 2] ^= 0x01
        case "truncate": bytes = Array(bytes.prefix(bytes.count - 10))
        case "magic": bytes[0] = 0
        case "version": bytes[8] = 200
        default: bytes = []
        }
        try Data(bytes).write(to: file)
        let before = try cli.digest("b")
        let dbBytes = try Data(contentsOf: URL(fileURLWithPath: cli.db("b")))
        let result = try cli.run(["import", "--db", cli.db("b"), file.path])
        #expect(result.status != 0)
        #expect(result.err.contains("a.bundle"), "error does not name the file: \(result.err)")
        #expect(try cli.digest("b") == before)
        _ = dbBytes
    }

    /// `--commit-every N` commits a long receive as it goes; what it ends with is what one
    /// transaction ends with, and a count below 1 is a usage error that touches nothing.
    @Test func commitEveryEndsWhereOneTransactionEnds() throws {
        let cli = try SyncCLI()
        defer { try? FileManager.default.removeItem(at: cli.folder) }
        let shared = cli.folder.appendingPathComponent("shared").path
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
        for name in ["a", "b", "c"] { _ = try cli.ok(["init", "--db", cli.db(name)]) }
        // Several files in the folder, each of one sync's changes.
        for round in 0 ..< 4 {
            for index in 0 ..< 5 {
                let id = try cli.ok(["new", "--db", cli.db("a"), "--title", "note \(round)-\(index)", "--body", "body \(round)"])
                _ = try cli.ok(["edit", "--db", cli.db("a"), id, "--append", " more"])
            }
            _ = try cli.ok(["sync", "--db", cli.db("a"), "--dir", shared])
        }
        let refused = try cli.run(["sync", "--db", cli.db("b"), "--dir", shared, "--commit-every", "0"])
        #expect(refused.status == 64 || refused.status == 2, "status \(refused.status)")
        #expect(refused.err.contains("--commit-every must be at least 1"))
        #expect(try cli.ok(["list", "--db", cli.db("b")]).isEmpty)

        _ = try cli.ok(["sync", "--db", cli.db("b"), "--dir", shared, "--commit-every", "1"])
        _ = try cli.ok(["sync", "--db", cli.db("c"), "--dir", shared])
        #expect(try cli.digest("b") == cli.digest("a"))
        #expect(try cli.digest("c") == cli.digest("a"))
        #expect(try cli.ok(["list", "--db", cli.db("b")]).split(separator: "\n").count == 20)
    }

    @Test func syncIntoAMissingFolderIsAClearError() throws {
        let cli = try SyncCLI()
        defer { try? FileManager.default.removeItem(at: cli.folder) }
        _ = try cli.ok(["init", "--db", cli.db("a")])
        let result = try cli.run(["sync", "--db", cli.db("a"), "--dir", cli.folder.appendingPathComponent("nope").path])
        #expect(result.status != 0)
        #expect(result.err.contains("no such folder"))
    }
}

import Foundation
import Testing

/// `crdt-sync remote` and `crdt-sync sync` with remembered remotes, run as a person would.
@Suite(.serialized)
struct RemoteCommandTests {
    @Test func foldersRememberedByNameSyncWithNoFlags() throws {
        let scratch = Scratch()
        let shared = scratch.path + "/shared"
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
        let a = scratch.path + "/a.db", b = scratch.path + "/b.db"
        try CLI.ok(["init"], db: a)
        try CLI.ok(["init"], db: b)
        // A relative folder is kept as an absolute path: `sync` works from any directory later.
        let added = try CLI.run(["remote", "add", "usb", "--dir", "shared", "--db", a], directory: scratch.path)
        #expect(added.status == 0, "\(added.stderr)")
        try CLI.ok(["remote", "add", "usb", "--dir", shared], db: b)
        let listed = try #require(try CLI.json(["remote", "list"], db: a) as? [[String: Any]])
        #expect(listed.count == 1)
        #expect(listed.first?["name"] as? String == "usb")
        #expect(listed.first?["folder"] as? String == shared)
        #expect(listed.first?["lastSyncAt"] == nil)

        let id = try CLI.ok(["new", "--title", "from a", "--body", "hello"], db: a)
        let line = try CLI.ok(["sync"], db: a)
        #expect(line.hasPrefix("usb: sent 1 change(s)"), "\(line)")
        #expect(try CLI.ok(["sync", "usb"], db: b).contains("1 applied"))
        #expect(try CLI.ok(["show", id], db: b).contains("hello"))
        try CLI.ok(["edit", id, "--append", " from b"], db: b)
        try CLI.ok(["sync"], db: b)
        try CLI.ok(["sync"], db: a)
        #expect(try CLI.ok(["digest"], db: a) == CLI.ok(["digest"], db: b))
        let after = try #require(try CLI.json(["remote", "list"], db: a) as? [[String: Any]])
        #expect(after.first?["lastSyncAt"] is String)
        #expect(after.first?["lastFailed"] as? Bool == false)
        // Text shows the last sync in local time like `list` and `show` (UTC with --utc); --json stays UTC.
        let utc = try #require(after.first?["lastSyncAt"] as? String)
        #expect(utc.hasSuffix("Z"))
        let tokyo = try CLI.run(["remote", "list"], db: a, environment: ["TZ": "Asia/Tokyo"])
        #expect(tokyo.stdout.contains("\tlast sync ") && tokyo.stdout.contains("+09:00: "), "\(tokyo.stdout)")
        #expect(!tokyo.stdout.contains(utc))
        #expect(try CLI.run(["remote", "list", "--utc"], db: a, environment: ["TZ": "Asia/Tokyo"]).stdout.contains("\tlast sync \(utc): "))
        #expect((after.first?["lastResult"] as? String)?.contains("1 applied") == true)
        #expect(try CLI.ok(["remote"], db: a).contains("usb\tfolder\t\(shared)\tlast sync "))
    }

    @Test func aFailingRemoteIsReportedAndTheOthersStillSync() throws {
        let scratch = Scratch()
        let good = scratch.path + "/good", gone = scratch.path + "/gone"
        for folder in [good, gone] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        try CLI.ok(["init"], db: scratch.db)
        try CLI.ok(["remote", "add", "a-gone", "--dir", gone], db: scratch.db)
        try CLI.ok(["remote", "add", "b-good", "--dir", good], db: scratch.db)
        try FileManager.default.removeItem(atPath: gone)
        try CLI.ok(["new", "--title", "t"], db: scratch.db)

        let result = try CLI.run(["sync"], db: scratch.db)
        #expect(result.status == 1)
        #expect(result.stderr.contains("a-gone:"), "\(result.stderr)")
        #expect(result.stdout.contains("b-good: sent 1 change(s)"), "\(result.stdout)")
        let json = try CLI.run(["sync", "--json"], db: scratch.db)
        let outcomes = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        #expect(outcomes.map { $0["remote"] as? String } == ["a-gone", "b-good"])
        #expect(outcomes.map { $0["ok"] as? Bool } == [false, true])
        #expect(outcomes.first?["error"] is String)
        #expect(try CLI.ok(["remote", "list"], db: scratch.db).contains("a-gone\tfolder\t\(gone)\tlast sync "))
        #expect(try CLI.ok(["remote", "list"], db: scratch.db).contains(" FAILED: "))
    }

    @Test func mistakesAreClearAndChangeNothing() throws {
        let scratch = Scratch()
        try CLI.ok(["init"], db: scratch.db)
        let none = try CLI.run(["sync"], db: scratch.db)
        #expect(none.status == 1)
        #expect(none.stderr.contains("no remotes to sync with"))
        let missing = try CLI.run(["remote", "add", "x", "--dir", scratch.path + "/nope"], db: scratch.db)
        #expect(missing.status != 0)
        #expect(missing.stderr.contains("is not a folder"))
        let badName = try CLI.run(["remote", "add", "no spaces", "--dir", scratch.path], db: scratch.db)
        #expect(badName.status != 0)
        #expect(badName.stderr.contains("cannot name a remote"))
        #expect(try CLI.json(["remote", "list"], db: scratch.db) as? [Any] != nil)
        #expect((try CLI.json(["remote", "list"], db: scratch.db) as? [Any])?.isEmpty == true)

        try CLI.ok(["remote", "add", "usb", "--dir", scratch.path], db: scratch.db)
        let twice = try CLI.run(["remote", "add", "usb", "--dir", scratch.path], db: scratch.db)
        #expect(twice.status != 0)
        #expect(twice.stderr.contains("exists already"))
        let unknown = try CLI.run(["sync", "laptop"], db: scratch.db)
        #expect(unknown.status == 2)
        #expect(unknown.stderr.contains("no remote is named 'laptop' (remotes: usb)"))
        let both = try CLI.run(["sync", "usb", "--dir", scratch.path], db: scratch.db)
        #expect(both.status != 0)
        #expect(both.stderr.contains("not both"))
        // A relay remote needs a token, and none comes from the command line or a terminal here.
        let noToken = try CLI.run(["remote", "add", "home", "--url", "http://127.0.0.1:9", "--space", "s"], db: scratch.db,
                                  environment: ["CRDT_SYNC_TOKEN": ""])
        #expect(noToken.status != 0)
        #expect(noToken.stderr.contains("no token"))
        let badURL = try CLI.run(["remote", "add", "home", "--url", "ftp://x", "--space", "s"], db: scratch.db,
                                 environment: ["CRDT_SYNC_TOKEN": "t"])
        #expect(badURL.stderr.contains("is not an http:// or https:// URL"))
        // A port past 65535 (the HTTP client trapped on it, ending every sync after it) and a
        // space the relay refuses are named when the remote is added; `sync --url` names the port too.
        let badPort = try CLI.run(["remote", "add", "home", "--url", "http://127.0.0.1:99999", "--space", "s"], db: scratch.db,
                                  environment: ["CRDT_SYNC_TOKEN": "t"])
        #expect(badPort.status == 1 && badPort.stderr.contains("names port 99999: a port is 1 to 65535"), "\(badPort.stderr)")
        let badSpace = try CLI.run(["remote", "add", "home", "--url", "http://127.0.0.1:9", "--space", "../x"], db: scratch.db,
                                   environment: ["CRDT_SYNC_TOKEN": "t"])
        #expect(badSpace.status == 1 && badSpace.stderr.contains("is not a valid space name"), "\(badSpace.stderr)")
        let syncPort = try CLI.run(["sync", "--url", "http://127.0.0.1:99999", "--space", "s", "--attempts", "1"], db: scratch.db,
                                   environment: ["CRDT_SYNC_TOKEN": "t"])
        #expect(syncPort.status == 1 && syncPort.stderr.contains("a port is 1 to 65535"), "\(syncPort.stderr)")
        #expect((try CLI.json(["remote", "list"], db: scratch.db) as? [[String: Any]])?.map { $0["name"] as? String } == ["usb"])
        try CLI.ok(["remote", "remove", "usb"], db: scratch.db)
        #expect(try CLI.run(["remote", "remove", "usb"], db: scratch.db).status == 2)
    }

    @Test func aRelayRemoteKeepsItsTokenOutOfSightAndSyncs() throws {
        let scratch = Scratch()
        let relay = try RelayProcess(store: scratch.path + "/relay.sqlite", token: "notes=s3cret-token")
        defer { relay.stop() }
        let tokenFile = scratch.path + "/token"
        try "s3cret-token\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let a = scratch.path + "/a.db", b = scratch.path + "/b.db"
        try CLI.ok(["init"], db: a)
        try CLI.ok(["init"], db: b)
        try CLI.ok(["remote", "add", "home", "--url", relay.url, "--space", "notes", "--token-file", tokenFile], db: a)
        // The token may come from the environment too.
        let fromEnvironment = try CLI.run(["remote", "add", "home", "--url", relay.url, "--space", "notes"], db: b,
                                          environment: ["CRDT_SYNC_TOKEN": "s3cret-token"])
        #expect(fromEnvironment.status == 0, "\(fromEnvironment.stderr)")

        // Kept in the database, which only its owner may read now; never printed.
        let mode = try FileManager.default.attributesOfItem(atPath: a)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let listed = try CLI.ok(["remote", "list", "--json"], db: a)
        #expect(!listed.contains("s3cret"))
        #expect(listed.contains("\"hasToken\" : true"))

        let id = try CLI.ok(["new", "--title", "via relay", "--body", "hello"], db: a)
        #expect(try CLI.ok(["sync", "home"], db: a).contains("home: sent 1 change(s)"))
        #expect(try CLI.ok(["sync"], db: b).contains("1 applied"))
        #expect(try CLI.ok(["show", id], db: b).contains("hello"))
        #expect(try CLI.ok(["digest"], db: a) == CLI.ok(["digest"], db: b))

        // A rotated token: the old one is refused, the new one set without the command line.
        try "wrong-token\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        try CLI.ok(["remote", "set-token", "home", "--token-file", tokenFile], db: a)
        let refused = try CLI.run(["sync"], db: a)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("home:"))
    }
}

/// `crdt-sync serve` on a free loopback port, as a child process.
final class RelayProcess: @unchecked Sendable {
    let process = Process()
    let url: String

    convenience init(store: String, token: String) throws {
        try self.init(arguments: ["--store", store, "--token", token])
    }

    /// `serve` on a free loopback port with these further arguments.
    init(arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: CLI.binary)
        process.arguments = ["serve", "--port", "0", "--host", "127.0.0.1"] + arguments
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        // The relay says where it listens on stderr ("relay listening on http://127.0.0.1:PORT, ...").
        var seen = Data()
        let deadline = Date().addingTimeInterval(60)
        var found: String?
        while found == nil, Date() < deadline {
            let chunk = err.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen.append(chunk)
            let text = String(decoding: seen, as: UTF8.self)
            if let range = text.range(of: #"http://127\.0\.0\.1:[0-9]+"#, options: .regularExpression) { found = String(text[range]) }
        }
        guard let found else {
            process.terminate()
            throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "the relay did not start: \(String(decoding: seen, as: UTF8.self))"])
        }
        url = found
        // Keep draining stderr so that the relay never blocks on a full pipe.
        err.fileHandleForReading.readabilityHandler = { handle in _ = handle.availableData }
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}

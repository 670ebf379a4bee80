import Foundation
import Testing

/// `crdt-sync sync --watch` as a long-running process: a line per sync, stopped by a signal.
@Suite(.serialized)
struct SyncWatchTests {
    @Test func watchingAFolderPrintsALinePerSyncAndStopsOnSIGTERM() throws {
        let scratch = Scratch()
        let folder = scratch.path + "/shared"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let a = scratch.path + "/a.db", b = scratch.path + "/b.db"
        try CLI.ok(["init"], db: a)
        try CLI.ok(["init"], db: b)
        let misuse = try CLI.run(["sync", "--dir", folder, "--interval", "1"], db: b)
        #expect(misuse.status == 64)  // a usage error, as for every option check
        #expect(misuse.stderr.contains("--interval goes with --watch"))

        let watcher = try WatchProcess(["sync", "--watch", "--dir", folder, "--interval", "0.1", "--db", b])
        defer { watcher.stopIfRunning() }
        let first = try watcher.waitForLine { $0.contains("received 0 change(s)") }
        #expect(first.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"#, options: .regularExpression) != nil)
        let id = try CLI.ok(["new", "--title", "watched", "--body", "from a"], db: a)
        try CLI.ok(["sync", "--dir", folder], db: a)
        _ = try watcher.waitForLine { $0.contains("1 applied") }
        #expect(try CLI.ok(["show", id], db: b).contains("from a"))
        #expect(watcher.terminate(signal: SIGTERM) == 0)
    }

    @Test func watchingARelayGetsAPushAndStopsOnSIGINT() throws {
        let scratch = Scratch()
        let relay = try RelayProcess(store: scratch.path + "/relay.sqlite", token: "notes=s3cret-token")
        defer { relay.stop() }
        let a = scratch.path + "/a.db", b = scratch.path + "/b.db"
        try CLI.ok(["init"], db: a)
        try CLI.ok(["init"], db: b)
        let environment = ["CRDT_SYNC_TOKEN": "s3cret-token"]
        let watcher = try WatchProcess(["sync", "--watch", "--json", "--url", relay.url, "--space", "notes", "--db", b], environment: environment)
        defer { watcher.stopIfRunning() }
        _ = try watcher.waitForLine { $0.contains("\"report\"") }
        let id = try CLI.ok(["new", "--title", "pushed", "--body", "through the relay"], db: a)
        let sent = try CLI.run(["sync", "--url", relay.url, "--space", "notes"], db: a, environment: environment)
        #expect(sent.status == 0, "\(sent.stderr)")
        let line = try watcher.waitForLine { $0.contains("\"applied\":1") }
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        #expect((object?["report"] as? [String: Any])?["receivedChanges"] as? Int == 1)
        #expect(object?["time"] is String)
        #expect(try CLI.ok(["show", id], db: b).contains("through the relay"))
        #expect(watcher.terminate(signal: SIGINT) == 0)
    }
}

/// A `crdt-sync` process whose stdout is read line by line while it runs.
final class WatchProcess: @unchecked Sendable {
    let process = Process()
    private let lock = NSLock()
    private var buffer = ""
    private var lines: [String] = []
    private var consumed = 0

    init(_ arguments: [String], environment: [String: String] = [:]) throws {
        process.executableURL = URL(fileURLWithPath: CLI.binary)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "CRDT_SYNC_DB")
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        out.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self, !data.isEmpty else { return }
            self.lock.withLock {
                self.buffer += String(decoding: data, as: UTF8.self)
                while let newline = self.buffer.firstIndex(of: "\n") {
                    self.lines.append(String(self.buffer[..<newline]))
                    self.buffer.removeSubrange(...newline)
                }
            }
        }
        try process.run()
    }

    /// The next line (after those already returned) that matches; fails after a minute without one.
    func waitForLine(_ matches: (String) -> Bool) throws -> String {
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            let found: String? = lock.withLock {
                while consumed < lines.count {
                    let line = lines[consumed]
                    consumed += 1
                    if matches(line) { return line }
                }
                return nil
            }
            if let found { return found }
            guard process.isRunning else { break }
            Thread.sleep(forTimeInterval: 0.02)
        }
        let seen = lock.withLock { lines.joined(separator: "\n") }
        throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "no matching line from crdt-sync; it printed:\n\(seen)"])
    }

    /// Sends `signal` and returns the exit status.
    func terminate(signal: Int32) -> Int32 {
        kill(process.processIdentifier, signal)
        process.waitUntilExit()
        return process.terminationStatus
    }

    func stopIfRunning() {
        if process.isRunning { process.terminate(); process.waitUntilExit() }
    }
}

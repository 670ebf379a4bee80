import Foundation
import Testing

/// End-to-end encryption through the built `crdt-sync`: spaces, sealed sync through a relay and a
/// folder, and what a relay and a folder hold.
@Suite(.serialized)
struct EncryptedSpaceTests {
    /// A `crdt-sync serve` child process on a free port.
    final class Relay {
        let process = Process()
        let port: Int
        let store: String

        init(store: String, token: String) throws {
            self.store = store
            process.executableURL = URL(fileURLWithPath: CLI.binary)
            process.arguments = ["serve", "--port", "0", "--store", store, "--token", "notes=\(token)", "--log-level", "notice"]
            let err = Pipe()
            process.standardError = err
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            // The relay says where it listens on stderr; read until that line.
            var seen = ""
            var found: Int?
            while found == nil {
                let data = err.fileHandleForReading.availableData
                if data.isEmpty { break }
                seen += String(decoding: data, as: UTF8.self)
                if let range = seen.range(of: "listening on http://127.0.0.1:") {
                    found = Int(seen[range.upperBound...].prefix { $0.isNumber })
                }
            }
            guard let found else {
                process.terminate()
                throw NSError(domain: "relay", code: 1, userInfo: [NSLocalizedDescriptionKey: "the relay did not start: \(seen)"])
            }
            port = found
        }

        func stop() {
            process.terminate()
            process.waitUntilExit()
        }
    }

    func write(_ text: String, to path: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }

    /// Every file under `folder` (recursively), and the files at `paths` that exist.
    func files(under folder: String) -> [String] {
        guard let walker = FileManager.default.enumerator(atPath: folder) else { return [] }
        return walker.compactMap { $0 as? String }.map { folder + "/" + $0 }.filter {
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: $0, isDirectory: &isDirectory) && !isDirectory.boolValue
        }
    }

    /// The secrets of `texts` that occur in the bytes of any of `paths`.
    func leaks(of texts: [String], in paths: [String]) throws -> [String] {
        var found: [String] = []
        for path in paths {
            let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            for text in texts where bytes.range(of: Data(text.utf8)) != nil { found.append("\(text) in \(path)") }
        }
        return found
    }

    /// Three replicas sync with encryption on, two through a relay and two through a folder (b is
    /// in both), until they converge; then neither the relay's database nor any file of the folder
    /// holds the text of any note, while the replicas' own databases do.
    @Test func threeReplicasThroughARelayAndAFolderLeaveNoPlaintext() throws {
        let scratch = Scratch()
        let dir = scratch.path
        let shared = dir + "/shared"
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
        let passphraseFile = dir + "/passphrase"
        try write("correct horse battery staple\n", to: passphraseFile)
        let relay = try Relay(store: dir + "/relay/relay.sqlite", token: "tok-e2e")
        defer { relay.stop() }
        let db = ["a", "b", "c"].map { dir + "/\($0).db" }
        for path in db { try CLI.ok(["init"], db: path) }
        let created = try CLI.json(["space", "create", "--passphrase-file", passphraseFile], db: db[0]) as? [String: Any] ?? [:]
        let descriptor = try #require(created["descriptor"] as? String)
        for path in db[1...] { try CLI.ok(["space", "join", "--descriptor", descriptor, "--passphrase-file", passphraseFile], db: path) }

        var secrets: [String] = []
        var ids: [String] = []
        for (index, path) in db.enumerated() {
            let title = "title-secret-\(index)-\(UUID().uuidString.prefix(8))"
            let body = "body words only devices may read \(index) \(UUID().uuidString.prefix(8))"
            secrets += [title, body]
            ids.append(try CLI.ok(["new", "--title", title, "--body", body], db: path))
        }
        let relayArgs = ["sync", "--url", "http://127.0.0.1:\(relay.port)", "--space", "notes", "--token", "tok-e2e"]
        func viaRelay(_ path: String) throws { try CLI.ok(relayArgs, db: path) }
        func viaFolder(_ path: String) throws { try CLI.ok(["sync", "--dir", shared], db: path) }
        try viaRelay(db[0]); try viaRelay(db[1]); try viaFolder(db[1]); try viaFolder(db[2])
        // Edits after the first round, so that units of several ranges per author travel.
        let more = "appended secret \(UUID().uuidString.prefix(8))"
        secrets.append(more)
        try CLI.ok(["edit", ids[2], "--append", " " + more], db: db[2])
        try viaFolder(db[2]); try viaFolder(db[1]); try viaRelay(db[1]); try viaRelay(db[0])
        let digests = try db.map { try CLI.ok(["digest"], db: $0) }
        #expect(Set(digests).count == 1, "digests differ: \(digests)")
        let listed = try CLI.ok(["list"], db: db[0])
        for title in secrets where title.hasPrefix("title-") { #expect(listed.contains(title), "a has no \(title): \(listed)") }
        relay.stop()

        let relayFiles = files(under: dir + "/relay")
        let folderFiles = files(under: shared)
        #expect(relayFiles.contains { $0.hasSuffix("relay.sqlite") })
        #expect(folderFiles.count >= 3, "folder: \(folderFiles)")
        #expect(try leaks(of: secrets, in: relayFiles + folderFiles) == [])
        // The scan finds text where it is: in a replica's own database.
        #expect(try leaks(of: secrets, in: [db[0]] + files(under: dir).filter { $0.hasPrefix(db[0]) }).count >= secrets.count)
    }

    /// A wrong passphrase is refused at join, with nothing changed; a device with another key
    /// applies nothing from the space and says why; plaintext and sealed bundles are refused where
    /// they do not belong.
    @Test func wrongKeysAndPlaintextAreRefusedClearly() throws {
        let scratch = Scratch()
        let dir = scratch.path
        let shared = dir + "/shared"
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
        try write("the right passphrase", to: dir + "/right")
        try write("a wrong passphrase", to: dir + "/wrong")
        let a = dir + "/a.db", b = dir + "/b.db", other = dir + "/other.db", plain = dir + "/plain.db"
        for path in [a, b, other, plain] { try CLI.ok(["init"], db: path) }
        let created = try CLI.json(["space", "create", "--passphrase-file", dir + "/right"], db: a) as? [String: Any] ?? [:]
        let descriptor = try #require(created["descriptor"] as? String)

        let wrong = try CLI.run(["space", "join", "--descriptor", descriptor, "--passphrase-file", dir + "/wrong"], db: b)
        #expect(wrong.status == 2)
        #expect(wrong.stderr.contains("this space is encrypted with a different key"), "\(wrong.stderr)")
        let unchanged = try CLI.json(["space", "show"], db: b) as? [String: Any] ?? [:]
        #expect(unchanged["encrypted"] as? Bool == false)
        let noSecret = try CLI.run(["space", "join", "--descriptor", descriptor], db: b)
        #expect(noSecret.status == 2 && noSecret.stderr.contains("no passphrase given"), "\(noSecret.stderr)")

        _ = try CLI.ok(["new", "--title", "sealed note"], db: a)
        try CLI.ok(["sync", "--dir", shared], db: a)
        // Another space's key: the sync applies nothing and names the problem.
        let code = try CLI.json(["space", "create", "--recovery-code"], db: other) as? [String: Any] ?? [:]
        #expect((code["recoveryCode"] as? String)?.count == 65)
        let before = try CLI.ok(["digest"], db: other)
        // (A copy of the folder, so that its own files do not reach the others.)
        let copy = dir + "/copy"
        try FileManager.default.copyItem(atPath: shared, toPath: copy)
        let refused = try CLI.run(["sync", "--dir", copy], db: other)
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("this space is encrypted with a different key"), "\(refused.stderr)")
        #expect(try CLI.ok(["digest"], db: other) == before)

        // A plain replica cannot import a sealed export, and an encrypted one refuses plaintext.
        try CLI.ok(["export", "--out", dir + "/sealed.crdtb"], db: a)
        let sealedIntoPlain = try CLI.run(["import", dir + "/sealed.crdtb"], db: plain)
        #expect(sealedIntoPlain.status == 2 && sealedIntoPlain.stderr.contains("this replica is in no encrypted space"), "\(sealedIntoPlain.stderr)")
        _ = try CLI.ok(["new", "--title", "plain note"], db: plain)
        try CLI.ok(["export", "--out", dir + "/plain.crdtb"], db: plain)
        let plainIntoSealed = try CLI.run(["import", dir + "/plain.crdtb"], db: a)
        #expect(plainIntoSealed.status == 2 && plainIntoSealed.stderr.contains("plaintext bundle refused"), "\(plainIntoSealed.stderr)")
        // Through a folder: the plain writer's files are refused, the rest applies.
        try CLI.ok(["sync", "--dir", shared], db: plain)
        let digestBefore = try CLI.ok(["digest"], db: a)
        let mixed = try CLI.ok(["sync", "--dir", shared], db: a)
        #expect(mixed.contains("plaintext bundle refused"), "\(mixed)")
        // Named for what it is, not as malformed, and not promised to work next time.
        #expect(!mixed.contains("malformed") && !mixed.contains("will retry"), "\(mixed)")
        #expect(try CLI.ok(["digest"], db: a) == digestBefore)
        // Neither side takes the other for a peer: nothing of it was applied.
        let plainID = try #require((try CLI.json(["status"], db: plain) as? [String: Any])?["replica"] as? String)
        let sealedID = try #require((try CLI.json(["status"], db: a) as? [String: Any])?["replica"] as? String)
        let plainSide = try CLI.json(["sync", "--dir", shared], db: plain) as? [String: Any] ?? [:]
        #expect((plainSide["skipped"] as? [String] ?? []).contains { $0.contains("bundle refused") }, "\(plainSide)")
        #expect(!(plainSide["peers"] as? [String] ?? []).contains(sealedID), "\(plainSide)")
        let sealedSide = try CLI.json(["sync", "--dir", shared], db: a) as? [String: Any] ?? [:]
        #expect(sealedSide["rejected"] as? Int == 0, "\(sealedSide)")
        #expect(!(sealedSide["peers"] as? [String] ?? []).contains(plainID), "\(sealedSide)")
        #expect(!(try CLI.ok(["status"], db: a)).contains(plainID))
        // A file sealed under another key, imported beside one of the space's own: the whole
        // import is refused, naming the file, and nothing (not even a peer) is recorded.
        _ = try CLI.ok(["new", "--title", "elsewhere"], db: other)
        try CLI.ok(["export", "--out", dir + "/other.crdtb"], db: other)
        try CLI.ok(["export", "--out", dir + "/own.crdtb"], db: a)
        let otherID = try #require((try CLI.json(["status"], db: other) as? [String: Any])?["replica"] as? String)
        let beforeMixed = try CLI.ok(["digest"], db: a)
        let mixedImport = try CLI.run(["import", dir + "/own.crdtb", dir + "/other.crdtb"], db: a)
        #expect(mixedImport.status == 2, "\(mixedImport.stdout)")
        #expect(mixedImport.stderr.contains("other.crdtb: this space is encrypted with a different key"), "\(mixedImport.stderr)")
        #expect(try CLI.ok(["digest"], db: a) == beforeMixed)
        #expect(!(try CLI.ok(["status"], db: a)).contains(otherID))
        // The right recovery-code-less join, then a sync, brings the sealed note.
        try CLI.ok(["space", "join", "--descriptor", descriptor, "--passphrase-file", dir + "/right"], db: b)
        try CLI.ok(["sync", "--dir", shared], db: b)
        #expect(try CLI.ok(["list"], db: b).contains("sealed note"))
    }
}

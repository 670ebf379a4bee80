import Foundation
import NotesCRDT
import NotesStore
import NotesSync
import Testing

func temporaryFolder() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("crdt-sync-tests-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

struct FolderTransportTests {
    let engine = SyncEngine(retry: RetryPolicy(maxAttempts: 1))

    @Test func threeReplicasConvergeThroughAFolder() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let transport = FolderTransport(folder: folder.path)
        let a = try NoteStore.openInMemory()
        let b = try NoteStore.openInMemory()
        let c = try NoteStore.openInMemory()
        let id = try a.createNote(title: "Plan", body: "one two three")
        _ = try await engine.sync(a, over: transport)
        _ = try await engine.sync(b, over: transport)
        _ = try await engine.sync(c, over: transport)
        #expect(try b.digest() == a.digest())
        // Concurrent edits while apart: same place, different places, rename, pin, tag, trash+restore.
        try a.insertText(id, at: 4, "AAA ")
        try b.insertText(id, at: 4, "BBB ")
        try c.appendText(id, " four")
        try a.setTitle(id, "Plan v2")
        try b.setPinned(id, true)
        try c.setTag(id, "work", member: true)
        try a.setState(id, .trashed)
        try a.setState(id, .active)
        for store in [a, b, c, a, b, c] { _ = try await engine.sync(store, over: transport) }
        let digests = try [a, b, c].map { try $0.digest() }
        #expect(Set(digests).count == 1)
        let note = try #require(try a.notebook.note(id))
        #expect(note.title == "Plan v2")
        #expect(note.pinned)
        #expect(note.tags == ["work"])
        #expect(note.state == .active)
        #expect(note.body.contains("AAA "))
        #expect(note.body.contains("BBB "))
        #expect(note.body.hasSuffix(" four"))
        // Each writer only wrote in its own subfolder.
        let writers = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        #expect(Set(writers) == Set([a, b, c].map(\.replicaID.description)))
        // Peers were recorded from what they wrote.
        #expect(try a.peers().count == 2)
    }

    /// Things that are not files, put in the folder under a bundle file's name (a FIFO, which
    /// would block a plain open forever; a link to an endless device; a folder), are skipped and
    /// reported, and the real files around them are still applied.
    @Test func entriesThatAreNotFilesAreSkippedWithoutBlocking() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let transport = FolderTransport(folder: folder.path)
        let a = try NoteStore.openInMemory()
        let b = try NoteStore.openInMemory()
        _ = try a.createNote(title: "real", body: "still arrives")
        _ = try await engine.sync(a, over: transport)
        let forger = ReplicaID.random()
        let sub = folder.appendingPathComponent(forger.description).path
        try FileManager.default.createDirectory(atPath: sub, withIntermediateDirectories: true)
        #expect(mkfifo(sub + "/\(forger).1-5.crdtb", 0o644) == 0)
        try FileManager.default.createSymbolicLink(atPath: sub + "/\(forger).6-9.crdtb", withDestinationPath: "/dev/zero")
        try FileManager.default.createDirectory(atPath: sub + "/\(forger).10-12.crdtb", withIntermediateDirectories: true)
        let report = try await engine.sync(b, over: transport)
        #expect(try b.digest() == a.digest())
        #expect(report.skipped.count >= 2, "the FIFO and the link are reported: \(report.skipped)")
        #expect(report.skipped.allSatisfy { "\($0)".contains("not a regular file") || "\($0)".contains(forger.description) })
        #expect(try b.versionVector[forger] == 0)
    }

    /// Anyone who can write the shared folder can put a folder at a replica's next file name, a
    /// file in place of its subfolder, or a link there to somewhere else. Each is moved aside,
    /// kept, and the replica's syncs go on; nothing is written through the link.
    @Test func entriesInAWritersWayAreMovedAside() async throws {
        let folder = try temporaryFolder()
        let outside = try temporaryFolder()
        defer { for url in [folder, outside] { try? FileManager.default.removeItem(at: url) } }
        let files = FileManager.default
        let transport = FolderTransport(folder: folder.path)
        let (a, b, c, d) = try (NoteStore.openInMemory(), NoteStore.openInMemory(), NoteStore.openInMemory(), NoteStore.openInMemory())
        _ = try a.createNote(title: "first", body: "one")
        _ = try await engine.sync(a, over: transport)
        // A folder, holding a file, at the name of a's next file.
        let before = try a.versionVector[a.replicaID]
        _ = try a.createNote(title: "second", body: "two")
        let next = FolderTransport.fileName(author: a.replicaID, first: before + 1, last: try a.versionVector[a.replicaID])
        let aSub = folder.appendingPathComponent(a.replicaID.description)
        try files.createDirectory(at: aSub.appendingPathComponent(next), withIntermediateDirectories: true)
        try Data("keep me".utf8).write(to: aSub.appendingPathComponent(next).appendingPathComponent("inside"))
        // A file where c's subfolder goes, and a link where d's goes.
        try Data("not a folder".utf8).write(to: folder.appendingPathComponent(c.replicaID.description))
        try files.createSymbolicLink(atPath: folder.appendingPathComponent(d.replicaID.description).path, withDestinationPath: outside.path)
        _ = try c.createNote(title: "from c", body: "three")
        _ = try d.createNote(title: "from d", body: "four")
        for store in [a, c, d, b] { _ = try await engine.sync(store, over: transport) }
        #expect(try b.list().map(\.title).sorted() == ["first", "from c", "from d", "second"])
        for store in [a, c, d] { _ = try await engine.sync(store, over: transport) }
        #expect(Set(try [a, b, c, d].map { try $0.digest() }).count == 1)
        #expect(try files.contentsOfDirectory(atPath: outside.path).isEmpty, "nothing is written through the link")
        // What was in the way is kept under a hidden name beside it.
        let keptInA = try files.contentsOfDirectory(atPath: aSub.path).filter { $0.hasPrefix(".\(next).in-the-way-") }
        #expect(keptInA.count == 1)
        if let kept = keptInA.first {
            #expect(try String(contentsOf: aSub.appendingPathComponent(kept).appendingPathComponent("inside"), encoding: .utf8) == "keep me")
        }
        let top = try files.contentsOfDirectory(atPath: folder.path)
        #expect(top.contains { $0.hasPrefix(".\(c.replicaID).in-the-way-") })
        #expect(top.contains { $0.hasPrefix(".\(d.replicaID).in-the-way-") })
    }

    @Test func partialFileIsSkippedAndTakenLater() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let transport = FolderTransport(folder: folder.path)
        let a = try NoteStore.openInMemory()
        let b = try NoteStore.openInMemory()
        _ = try a.createNote(title: "Hello", body: String(repeating: "x", count: 500))
        _ = try await engine.sync(a, over: transport)
        // Simulate a copy in progress: cut a's file short.
        let sub = folder.appendingPathComponent(a.replicaID.description)
        let name = try #require(try FileManager.default.contentsOfDirectory(atPath: sub.path).first)
        let file = sub.appendingPathComponent(name)
        let full = try Data(contentsOf: file)
        try full.prefix(full.count / 2).write(to: file)
        let before = try b.digest()
        let first = try await engine.sync(b, over: transport)
        #expect(first.skipped.count == 1)
        #expect(first.applied == 0)
        #expect(try b.digest() == before)
        // The copy completes.
        try full.write(to: file)
        let second = try await engine.sync(b, over: transport)
        #expect(second.skipped.isEmpty)
        #expect(try b.digest() == a.digest())
    }

    @Test func aDamagedFileIsWrittenAgainByItsWriter() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let transport = FolderTransport(folder: folder.path)
        let a = try NoteStore.openInMemory()
        let b = try NoteStore.openInMemory()
        _ = try a.createNote(title: "Kept", body: "every edit survives")
        _ = try await engine.sync(a, over: transport)
        // Something damages a's file for good (not a copy in progress: it will not complete).
        let sub = folder.appendingPathComponent(a.replicaID.description)
        let name = try #require(try FileManager.default.contentsOfDirectory(atPath: sub.path).first)
        var bytes = [UInt8](try Data(contentsOf: sub.appendingPathComponent(name)))
        bytes[bytes.count / 2] ^= 0xFF
        try Data(bytes).write(to: sub.appendingPathComponent(name))
        let blocked = try await engine.sync(b, over: transport)
        #expect(blocked.skipped.count == 1)
        #expect(blocked.skipped.first?.contains("checksum") == true)
        // a's next sync finds its own file damaged and writes the range again.
        _ = try await engine.sync(a, over: transport)
        let healed = try await engine.sync(b, over: transport)
        #expect(healed.skipped.isEmpty)
        #expect(try b.digest() == a.digest())
    }

    @Test func syncingTwiceChangesNothingAndDuplicatesAreHarmless() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let transport = FolderTransport(folder: folder.path)
        let a = try NoteStore.openInMemory()
        let b = try NoteStore.openInMemory()
        _ = try a.createNote(title: "Once", body: "body")
        _ = try await engine.sync(a, over: transport)
        _ = try await engine.sync(b, over: transport)
        let digest = try b.digest()
        let again = try await engine.sync(b, over: transport)
        #expect(again.applied == 0)
        #expect(try b.digest() == digest)
        // A duplicate copy of a's file made by a sync tool under b's folder name changes nothing.
        let report = try b.apply(a.changes(since: VersionVector()))
        #expect(report.applied == 0)
        #expect(try b.digest() == digest)
    }

    @Test func compactionNeverShowsAGap() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let transport = FolderTransport(folder: folder.path)
        let a = try NoteStore.openInMemory()
        let id = try a.createNote(title: "Many", body: "")
        for i in 0 ..< 40 {
            try a.appendText(id, "\(i) ")
            _ = try await engine.sync(a, over: transport)
        }
        let sub = folder.appendingPathComponent(a.replicaID.description)
        #expect(try FileManager.default.contentsOfDirectory(atPath: sub.path).count >= 40)
        let removed = try transport.compact(writer: a.replicaID, threshold: 8)
        #expect(removed >= 39)
        #expect(try FileManager.default.contentsOfDirectory(atPath: sub.path).count == 1)
        let b = try NoteStore.openInMemory()
        _ = try await engine.sync(b, over: transport)
        #expect(try b.digest() == a.digest())
    }

    @Test func bundleArrivingBeforeItsDependencyIsHeldThenApplied() throws {
        let a = try NoteStore.openInMemory()
        let b = try NoteStore.openInMemory()
        let id = try a.createNote(title: "First", body: "abc")
        let first = try a.changes(since: VersionVector())
        let version = try a.versionVector
        try a.insertText(id, at: 3, "def")
        let second = try a.changes(since: version)
        let held = try b.apply(second)
        #expect(held.pending == second.count)
        #expect(try b.notebook.note(id) == nil)
        let released = try b.apply(first)
        #expect(released.pending == 0)
        #expect(try b.digest() == a.digest())
    }

    @Test func fuzzedBundlesNeverPartiallyApply() throws {
        let (_, source) = try sampleNotebooks()
        let valid = SyncBundle(sender: source.replicaID, senderVersion: source.versionVector,
                               changes: source.changes(since: VersionVector())).encoded()
        let store = try NoteStore.openInMemory()
        let before = try store.digest()
        var rng = SeededRNG(state: 99)
        var decodedButRejected = 0
        for _ in 0 ..< 2_000 {
            var content = Array(valid.dropLast(32))
            let i = Int.random(in: 9 ..< content.count, using: &rng)
            content[i] = UInt8.random(in: 0 ... 255, using: &rng)
            guard let bundle = try? SyncBundle.decode(content + SHA256.digest(content)) else { continue }
            let probe = try NoteStore.openInMemory()
            do {
                try probe.apply(bundle.changes)
            } catch {
                decodedButRejected += 1
                #expect(try probe.digest() == before, "a rejected batch left part of itself behind")
            }
        }
        #expect(try store.digest() == before)
        _ = decodedButRejected
    }
}

import BundleFuzz
import Foundation
import NotesCRDT
import NotesStore
import Testing

/// What an attacker hands the command line: hostile bundle files, offsets at the edges of Int, a
/// peer vector that does not add up. Every one ends in exit 1 with a message that names the file
/// and the problem, and the replica as it was; none in a signal.
@Suite(.serialized)
struct HostileInputTests {
    static let author = ReplicaID(Identifier128(high: 0xA11, low: 1))
    static let note = NoteID(Identifier128(high: 0xB11, low: 1))

    /// One change by `author`, as a bundle.
    static func bundle(start: UInt64 = 1, _ records: [RawRecord], configure: (inout RawChangeEncoding, inout RawBundle) -> Void = { _, _ in }) -> [UInt8] {
        var e = RawChangeEncoding()
        e.replicas = [author]
        e.notes = [note]
        e.headers = [RawHeader(author: 0, startSeq: start, timestamp: 1_700_000_000_000 << 16, operationCount: UInt64(records.count))]
        e.records = records
        var b = RawBundle()
        b.sender = author
        configure(&e, &b)
        b.body = e.bytes()
        return b.bytes()
    }

    static let insert: RawRecord = .insert(note: 0, mode: 0, origin: nil, length: 1, text: [0x61])

    /// (file name, bytes, words the error must hold)
    static var hostileFiles: [(String, [UInt8], String)] {
        let maxRun = DeleteRun.maxLength
        return [
            ("insert-at-max.crdtb", bundle(start: .max, [insert]), "outside 1 ... 2^53 - 1"),
            ("run.crdtb", bundle([.run(note: 0, shape: (maxRun - 2) << 1 | 1, mode: 0, first: RawReference(replica: 0, delta: 0))]),
             "more than 16777216 characters"),
            ("inflate-4g.crdtb", bundle([insert]) { _, b in
                b.compressed = true
                b.declaredLength = 1 << 32
            }, "more than the 33554432 a reader takes"),
            ("vector.crdtb", bundle([insert]) { _, b in
                b.vector = [(ReplicaID(Identifier128(high: 0, low: 1)), .max), (ReplicaID(Identifier128(high: 0, low: 2)), 1 << 63)]
            }, "past 2^53 - 1"),
            ("many-changes.crdtb", bundle([insert]) { e, _ in e.headerCount = 1 << 17 }, "the change count"),
            ("empty.crdtb", [], "not a crdt-sync bundle"),
            ("garbage.crdtb", Array("hello, this is not a bundle".utf8), "not a crdt-sync bundle"),
            ("damaged.crdtb", { var bytes = bundle([insert]); bytes[40] ^= 1; return bytes }(), "checksum mismatch"),
            ("version-9.crdtb", bundle([insert]) { _, b in b.version = 9 }, "format version 9"),
        ]
    }

    @Test func hostileFilesAreRefusedByNameAndChangeNothing() throws {
        let cli = try SyncCLI()
        let db = cli.db("a")
        try cli.ok(["init", "--db", db])
        try cli.ok(["new", "--title", "kept", "--body", "text", "--db", db])
        let digest = try cli.digest("a")
        for (name, bytes, words) in Self.hostileFiles {
            let path = cli.folder.appendingPathComponent(name).path
            FileManager.default.createFile(atPath: path, contents: Data(bytes))
            let result = try cli.run(["import", path, "--db", db])
            #expect(result.status == 1, "\(name): \(result.err)")
            #expect(result.err.contains("\(path): "), "\(name): \(result.err)")
            #expect(result.err.contains(words), "\(name): \(result.err)")
            #expect(try cli.digest("a") == digest, "\(name)")
            // With a good file beside it: nothing of either is applied.
            let good = cli.folder.appendingPathComponent("good.crdtb").path
            FileManager.default.createFile(atPath: good, contents: Data(Self.bundle([Self.insert])))
            #expect(try cli.run(["import", good, path, "--db", db]).status == 1)
            #expect(try cli.digest("a") == digest, "\(name) beside a good file")
        }
        // A file larger than a bundle may be (sparse: nothing on disk), a folder, a missing file.
        let large = cli.folder.appendingPathComponent("large.crdtb")
        FileManager.default.createFile(atPath: large.path, contents: nil)
        let handle = try FileHandle(forWritingTo: large)
        try handle.truncate(atOffset: 3 << 30)
        try handle.close()
        for (path, words) in [(large.path, "larger than a bundle may be"), (cli.folder.path, "is a folder, not a bundle file"),
                              (cli.folder.appendingPathComponent("none.crdtb").path, "cannot be read")] {
            let result = try cli.run(["import", path, "--db", db])
            #expect(result.status == 1, "\(path): \(result.err)")
            #expect(result.err.contains(path) && result.err.contains(words), "\(result.err)")
        }
        #expect(try cli.digest("a") == digest)
    }

    /// A bundle that decodes but holds a change that deletes characters nobody inserted: the rest
    /// is imported, the change is quarantined, and `status` (and `status --json`) show it.
    @Test func aPoisonedChangeIsQuarantinedAndShown() throws {
        let cli = try SyncCLI()
        let db = cli.db("q")
        try cli.ok(["init", "--db", db])
        let other = ReplicaID(Identifier128(high: 0xA11, low: 2))
        let bytes = Self.bundle([.setNoteField(note: 0, field: [0], value: [4, 2, 0x68, 0x69])]) { e, _ in
            e.replicas.append(other)
            e.headers.append(RawHeader(author: 1, startSeq: 1, timestamp: 1_700_000_000_000 << 16, operationCount: 1))
            e.records.append(.deleteExplicit(note: 0, targets: [RawTarget(RawReference(replica: 0, delta: -40), count: 2)], targetCount: nil))
        }
        let path = cli.folder.appendingPathComponent("poisoned.crdtb").path
        FileManager.default.createFile(atPath: path, contents: Data(bytes))
        let imported = try cli.ok(["import", path, "--db", db])
        #expect(imported.contains("1 change(s) applied"))
        #expect(imported.contains("1 quarantined"))
        // The import closes the database cleanly before it exits (its notebook is left to the
        // exit): the WAL is checkpointed into the file and gone.
        #expect(!FileManager.default.fileExists(atPath: db + "-wal"))
        let status = try cli.ok(["status", "--db", db])
        #expect(status.contains("quarantined:     1 change(s)"), "\(status)")
        #expect(status.contains("\(other)  seq 1, received "), "\(status)")
        #expect(status.contains("names characters that do not exist"), "\(status)")
        let json = try JSONSerialization.jsonObject(with: Data(try cli.ok(["status", "--json", "--db", db]).utf8)) as? [String: Any]
        let entries = try #require(json?["quarantinedChanges"] as? [[String: Any]])
        #expect(entries.count == 1)
        #expect(entries.first?["replica"] as? String == other.description)
        #expect(entries.first?["startSeq"] as? Int == 1)
        #expect(entries.first?["endSeq"] as? Int == 1)
        #expect(entries.first?["code"] as? String == "unknownReference")
        #expect((entries.first?["receivedAt"] as? String)?.hasSuffix("Z") == true)
        // Importing it again quarantines nothing more.
        #expect(try cli.ok(["import", path, "--db", db]).contains("quarantined") == false)
        #expect(try cli.ok(["status", "--db", db]).contains("quarantined:     1 change(s)"))
    }

    /// Offsets and counts at the edges of Int: exit 1, a message, nothing changed; one command
    /// is one transaction (a title with an offset that does not fit is not kept).
    @Test func editOffsetsAtTheEdges() throws {
        let cli = try SyncCLI()
        let db = cli.db("e")
        try cli.ok(["init", "--db", db])
        let id = try cli.ok(["new", "--title", "T", "--body", "hello", "--db", db])
        let digest = try cli.digest("e")
        let max = String(Int.max)
        for arguments in [["--delete", "1", "--at", max], ["--insert", "x", "--at", max], ["--delete", max, "--at", "1"],
                          ["--delete", max, "--at", max], ["--delete", "6", "--at", "0"], ["--insert", "x", "--at", "6"],
                          ["--title", "lost", "--insert", "x", "--at", "999"], ["--title", "lost", "--delete", "1", "--at", "5"]] {
            let result = try cli.run(["edit", id] + arguments + ["--db", db])
            #expect(result.status == 1, "\(arguments): \(result.err)")
            #expect(result.err.contains("the body has 5"), "\(arguments): \(result.err)")
            #expect(try cli.digest("e") == digest, "\(arguments)")
        }
        for arguments in [["--delete=-1", "--at", "0"], ["--insert", "x", "--at=-1"], ["--insert", "x", "--at=\(Int.min)"],
                          ["--delete", "1", "--at", "9223372036854775808"]] {
            let result = try cli.run(["edit", id] + arguments + ["--db", db])
            #expect(result.status == 64, "\(arguments): \(result.err)")
        }
        #expect(try cli.digest("e") == digest)
        // At the edges that fit: the title and the body change together.
        try cli.ok(["edit", id, "--title", "New", "--insert", "!", "--at", "5", "--db", db])
        try cli.ok(["edit", id, "--title", "Newer", "--delete", "6", "--at", "0", "--db", db])
        let shown = try cli.ok(["show", id, "--json", "--db", db])
        #expect(shown.contains("\"title\" : \"Newer\"") && shown.contains("\"body\" : \"\""), "\(shown)")
    }

    /// A peer's vector stored with entries that do not add up in 64 bits (heard before bundles
    /// were checked): `status` says so instead of crashing at every run.
    @Test func statusWithAPeerVectorThatDoesNotAddUp() throws {
        let cli = try SyncCLI()
        let db = cli.db("p")
        try cli.ok(["init", "--db", db])
        let store = try NoteStore.open(path: db, create: false)
        let peer = ReplicaID(Identifier128(high: 0xEE, low: 1))
        try store.recordPeer(peer, versionVector: VersionVector([ReplicaID(Identifier128(high: 0, low: 1)): .max,
                                                                 ReplicaID(Identifier128(high: 0, low: 2)): 1 << 63]))
        try store.close()
        let status = try cli.ok(["status", "--db", db])
        #expect(status.contains("has more than 2^64 - 1 operations"), "\(status)")
        _ = try cli.ok(["status", "--json", "--db", db])
    }
}

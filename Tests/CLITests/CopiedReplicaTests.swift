import GRDB
import Foundation
import Testing

/// Issue 18, situation 1, as a person runs it: a second laptop set up by copying the database.
struct CopiedReplicaTests {
    /// The copy takes a fresh replica id before it writes: both appends and the note made only on
    /// the copy reach both sides, the digests agree, and `status` says what happened.
    @Test func aCopiedDatabaseSyncsWithItsOriginalWithoutLosingAnEdit() throws {
        let scratch = Scratch()
        let l1 = scratch.path + "/L1.db"
        let l2 = scratch.path + "/L2.db"
        let folder = scratch.path + "/folder"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try CLI.ok(["init"], db: l1)
        let note = try CLI.ok(["new", "--title", "shared", "--body", "base"], db: l1)
        try FileManager.default.copyItem(atPath: l1, toPath: l2)
        try CLI.ok(["edit", note, "--append", " from L1"], db: l1)
        try CLI.ok(["edit", note, "--append", " from L2"], db: l2)
        try CLI.ok(["new", "--title", "only on L2"], db: l2)
        for db in [l1, l2, l1] { try CLI.ok(["sync", "--dir", folder], db: db) }

        let digests = try [l1, l2].map { db -> String in
            let json = try CLI.ok(["status", "--json"], db: db)
            let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
            return try #require(object?["digest"] as? String)
        }
        #expect(digests[0] == digests[1])
        for db in [l1, l2] {
            let body = try CLI.ok(["show", note], db: db)
            #expect(body.contains(" from L1") && body.contains(" from L2") && body.contains("base"))
            #expect(try CLI.ok(["list"], db: db).contains("only on L2"))
        }
        // The original keeps its id; the copy names the one it left and why.
        let original = try CLI.ok(["status"], db: l1)
        #expect(!original.contains("was "))
        let copy = try CLI.ok(["status"], db: l2)
        #expect(copy.contains("is a copy"))
        let json = try CLI.ok(["status", "--json"], db: l2)
        let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        let moves = try #require(object?["previousIdentities"] as? [[String: Any]])
        #expect(moves.count == 1)
        #expect(moves.first?["new"] as? String == object?["replica"] as? String)
        // Opening the copy again does not move it again.
        try CLI.ok(["list"], db: l2)
        let again = try JSONSerialization.jsonObject(with: Data(try CLI.ok(["status", "--json"], db: l2).utf8)) as? [String: Any]
        #expect((again?["previousIdentities"] as? [[String: Any]])?.count == 1)
    }
}

/// Issue 18, situation 1, repair: two databases that already diverged as one identity (copied
/// with a build before the checks: that build recorded no file identity, so nothing at open
/// tells the copy) converge after one sync each, keeping both copies' edits, through a folder and
/// through a relay; `status` says what happened.
struct DivergedCopiesTests {
    /// L1 and a copy L2 that both wrote as one identity, as an earlier build left them.
    static func diverged(in scratch: Scratch) throws -> (l1: String, l2: String, note: String) {
        let l1 = scratch.path + "/L1.db"
        let l2 = scratch.path + "/L2.db"
        try CLI.ok(["init"], db: l1)
        let note = try CLI.ok(["new", "--title", "shared", "--body", "base"], db: l1)
        // What an earlier build's file held: no file identity recorded, no seq mark beside it.
        let queue = try DatabaseQueue(path: l1)
        try queue.write { try $0.execute(sql: "UPDATE replica SET file_identity = NULL") }
        try queue.close()
        try? FileManager.default.removeItem(atPath: l1 + "-seqmark")
        try FileManager.default.copyItem(atPath: l1, toPath: l2)
        try CLI.ok(["edit", note, "--append", " (edited on L1)"], db: l1)
        try CLI.ok(["edit", note, "--append", " [typed on L2]"], db: l2)
        try CLI.ok(["new", "--title", "only on L2"], db: l2)
        let ids = try [l1, l2].map { db -> String in
            let object = try JSONSerialization.jsonObject(with: Data(try CLI.ok(["status", "--json"], db: db).utf8)) as? [String: Any]
            return try #require(object?["replica"] as? String)
        }
        #expect(ids[0] == ids[1], "the premise: both write as one identity")
        return (l1, l2, note)
    }

    static func expectRepaired(_ l1: String, _ l2: String, note: String) throws {
        let digests = try [l1, l2].map { try CLI.ok(["digest"], db: $0) }
        #expect(digests[0] == digests[1])
        for db in [l1, l2] {
            let shown = try CLI.ok(["show", note], db: db)
            #expect(shown.contains("(edited on L1)") && shown.contains("[typed on L2]"), "\(shown)")
            #expect(try CLI.ok(["list"], db: db).contains("only on L2"))
        }
        let status = try CLI.ok(["status"], db: l2)
        #expect(status.contains("re-issued here"), "\(status)")
        let object = try JSONSerialization.jsonObject(with: Data(try CLI.ok(["status", "--json"], db: l2).utf8)) as? [String: Any]
        let reissues = try #require(object?["reissues"] as? [[String: Any]])
        #expect(reissues.contains { $0["own"] as? Bool == true })
        #expect(try CLI.ok(["status"], db: l1).contains("re-issues:"))
    }

    /// A backup of the whole data folder (the database and the seq mark beside it) copied back
    /// over it in place, after edits were synced: the copy of the mark that the command keeps in
    /// its state folder sees the restore at open, so the next edit is made as a fresh identity
    /// and nothing is lost (the edit after the restore vanished before, on every device).
    @Test func aDataFolderRestoredInPlaceIsSeen() throws {
        let scratch = Scratch()
        let data = scratch.path + "/data"
        let backup = scratch.path + "/backup"
        let folder = scratch.path + "/folder"
        for path in [data, backup, folder] { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
        let a = data + "/a.db"
        let b = scratch.path + "/b.db"
        try CLI.ok(["init"], db: a)
        try CLI.ok(["init"], db: b)
        let note = try CLI.ok(["new", "--title", "day one", "--body", "base"], db: a)
        try CLI.ok(["sync", "--dir", folder], db: a)
        let names = try FileManager.default.contentsOfDirectory(atPath: data).filter { !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") }
        for name in names { try FileManager.default.copyItem(atPath: data + "/" + name, toPath: backup + "/" + name) }
        try CLI.ok(["edit", note, "--append", " synced before the restore"], db: a)
        try CLI.ok(["sync", "--dir", folder], db: a)
        // Restored in place, as `cp backup/* data/` does: the same inodes.
        for name in names {
            let handle = try #require(FileHandle(forWritingAtPath: data + "/" + name))
            try handle.truncate(atOffset: 0)
            try handle.write(contentsOf: try Data(contentsOf: URL(fileURLWithPath: backup + "/" + name)))
            try handle.close()
        }
        try CLI.ok(["edit", note, "--append", " typed after the restore"], db: a)
        #expect(try CLI.ok(["status"], db: a).contains("went back"))
        for db in [a, b, a, b] { try CLI.ok(["sync", "--dir", folder], db: db) }
        for db in [a, b] {
            let body = try CLI.ok(["show", note], db: db)
            #expect(body.contains(" synced before the restore") && body.contains(" typed after the restore"), "\(body)")
        }
        let digests = try [a, b].map { try CLI.ok(["digest"], db: $0) }
        #expect(digests[0] == digests[1])
    }

    @Test func throughAFolder() throws {
        let scratch = Scratch()
        let (l1, l2, note) = try Self.diverged(in: scratch)
        let folder = scratch.path + "/folder"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try CLI.ok(["sync", "--dir", folder], db: l1)
        let second = try CLI.ok(["sync", "--dir", folder], db: l2)
        #expect(second.contains("repaired"), "\(second)")
        try CLI.ok(["sync", "--dir", folder], db: l1)
        try Self.expectRepaired(l1, l2, note: note)
    }

    @Test func throughARelay() throws {
        let scratch = Scratch()
        let relay = try RelayProcess(store: scratch.path + "/relay.sqlite", token: "notes=s3cret-token")
        defer { relay.stop() }
        let (l1, l2, note) = try Self.diverged(in: scratch)
        let tokenFile = scratch.path + "/token"
        try "s3cret-token\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        for db in [l1, l2] {
            try CLI.ok(["remote", "add", "home", "--url", relay.url, "--space", "notes", "--token-file", tokenFile], db: db)
        }
        try CLI.ok(["sync"], db: l1)
        let second = try CLI.ok(["sync", "--json"], db: l2)
        #expect(second.contains("\"forksRepaired\" : 1") || second.contains("\"forksRepaired\":1"), "\(second)")
        try CLI.ok(["sync"], db: l1)
        try Self.expectRepaired(l1, l2, note: note)
        // A device that joins later gets the same, no copy's tail on the other's seqs.
        let l3 = scratch.path + "/L3.db"
        try CLI.ok(["init"], db: l3)
        try CLI.ok(["remote", "add", "home", "--url", relay.url, "--space", "notes", "--token-file", tokenFile], db: l3)
        try CLI.ok(["sync"], db: l3)
        #expect(try CLI.ok(["digest"], db: l3) == CLI.ok(["digest"], db: l1))
    }
}

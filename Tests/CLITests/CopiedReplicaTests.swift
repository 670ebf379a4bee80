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

import Foundation
import Testing

/// The two-laptop story of issue 23, end to end through the binary: notes from another app come
/// in as Markdown on one laptop, both laptops edit them apart in `$EDITOR`, sync through a
/// remembered remote, and an older version is found in the history and restored.
@Suite(.serialized)
struct TwoLaptopsTests {
    @Test func markdownInEditorsApartRemoteSyncHistoryAndRestore() throws {
        let scratch = Scratch()
        let work = scratch.path + "/work.db", home = scratch.path + "/home.db"
        let usb = scratch.path + "/usb", inbox = scratch.path + "/from-another-app"
        for folder in [usb, inbox] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        try CLI.ok(["init", "--name", "work laptop"], db: work)
        try CLI.ok(["init", "--name", "home laptop"], db: home)

        // Notes written by another app: plain Markdown files, no front matter.
        try "# Groceries\n\nmilk\neggs\n".write(toFile: inbox + "/Groceries.md", atomically: true, encoding: .utf8)
        try "# Trip\n\nBook the train.\n東京で会議。\n".write(toFile: inbox + "/trip.md", atomically: true, encoding: .utf8)
        let imported = try #require(try CLI.json(["import", "--markdown", inbox], db: work) as? [String: Any])
        #expect(imported["created"] as? Int == 2)
        let notes = try #require(try CLI.json(["list"], db: work) as? [[String: Any]])
        let groceries = try #require(notes.first { $0["title"] as? String == "Groceries" }?["id"] as? String)
        let original = try #require(try CLI.json(["show", groceries], db: work) as? [String: Any])["body"] as? String
        #expect(original?.contains("milk\neggs") == true)

        // Both laptops remember the USB folder by name and sync with no flags.
        try CLI.ok(["remote", "add", "usb", "--dir", usb], db: work)
        try CLI.ok(["remote", "add", "usb", "--dir", usb], db: home)
        try CLI.ok(["sync"], db: work)
        #expect(try CLI.ok(["sync"], db: home).contains("usb: "))
        #expect(try CLI.ok(["search", "会議"], db: home).contains("Trip"))

        // Apart: each laptop edits the same note in its editor (scripted), a different line each.
        let appendBread = scratch.path + "/append-bread.sh", addApples = scratch.path + "/add-apples.sh"
        try NotesToolTests.script(appendBread, "sed -i 's/^eggs$/eggs\\nbread/' \"$1\"\n")
        try NotesToolTests.script(addApples, "sed -i 's/^milk$/apples\\nmilk/' \"$1\"\n")
        let edited1 = try CLI.run(["edit", groceries], db: work, environment: ["EDITOR": appendBread, "VISUAL": ""])
        #expect(edited1.status == 0, "\(edited1.stderr)")
        let edited2 = try CLI.run(["edit", groceries], db: home, environment: ["EDITOR": addApples, "VISUAL": ""])
        #expect(edited2.status == 0, "\(edited2.stderr)")

        try CLI.ok(["sync"], db: work)
        try CLI.ok(["sync"], db: home)
        try CLI.ok(["sync"], db: work)
        #expect(try CLI.ok(["digest"], db: work) == CLI.ok(["digest"], db: home))
        let merged = try #require(try CLI.json(["show", groceries], db: home) as? [String: Any])["body"] as? String
        #expect(merged == "apples\nmilk\neggs\nbread\n", "both laptops' lines are kept: \(merged ?? "nil")")

        // The history names both laptops; the first version is the imported text.
        let versions = try #require(try CLI.json(["history", groceries], db: home) as? [[String: Any]])
        let devices = Set(versions.compactMap { $0["device"] as? String })
        #expect(devices == ["work laptop", "home laptop"])
        let oldest = try #require(versions.last?["version"] as? String)
        let then = try #require(try CLI.json(["show", groceries, "--at", oldest], db: home) as? [String: Any])
        #expect(then["body"] as? String == original)
        #expect(try CLI.ok(["history", groceries], db: work).contains("home laptop"))

        // Restoring the older version on one laptop is a new edit that reaches the other.
        try CLI.ok(["restore", groceries, "--to", oldest], db: home)
        try CLI.ok(["sync"], db: home)
        try CLI.ok(["sync"], db: work)
        let restored = try #require(try CLI.json(["show", groceries], db: work) as? [String: Any])
        #expect(restored["body"] as? String == original)
        #expect(try CLI.ok(["digest"], db: work) == CLI.ok(["digest"], db: home))

        // And the notes go back out as Markdown that comes in again unchanged.
        let out = scratch.path + "/out"
        try CLI.ok(["export", "--markdown", out], db: work)
        let again = try #require(try CLI.json(["import", "--markdown", out], db: home) as? [String: Any])
        #expect(again["created"] as? Int == 0)
        #expect(again["updated"] as? Int == 0)
        #expect(try CLI.ok(["digest"], db: work) == CLI.ok(["digest"], db: home))
    }
}

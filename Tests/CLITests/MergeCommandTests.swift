import Foundation
import Testing

/// Issue 18's situations, run with the built `crdt-sync` exactly as the issue's commands show,
/// through a shared folder: a delete against an edit, a clock ten years ahead, merges a person can
/// see; and commands that change nothing, and text that must not act on the terminal.
@Suite(.serialized)
struct MergeCommandTests {
    /// A folder with replica databases and a shared sync folder.
    final class Devices: @unchecked Sendable {
        let scratch = Scratch()
        var shared: String { scratch.path + "/shared" }

        init(_ names: [String]) throws {
            try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
            for name in names { try ok(["init"], name) }
        }

        func db(_ name: String) -> String { scratch.path + "/\(name).db" }

        /// Runs a command on a device's database; it must succeed. Returns stdout, trimmed.
        @discardableResult
        func ok(_ arguments: [String], _ name: String, skew: Int64? = nil, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
            let result = try run(arguments, name, skew: skew)
            #expect(result.status == 0, "crdt-sync \(arguments.joined(separator: " ")) on \(name): \(result.stderr)", sourceLocation: sourceLocation)
            return result.stdout.trimmingCharacters(in: .newlines)
        }

        func run(_ arguments: [String], _ name: String, skew: Int64? = nil) throws -> CLI.Result {
            try CLI.run(arguments, db: db(name), environment: skew.map { ["CRDT_SYNC_CLOCK_SKEW_MS": String($0)] } ?? [:])
        }

        /// Syncs the devices through the shared folder, in this order.
        func sync(_ names: String...) throws {
            for name in names { try ok(["sync", "--dir", shared], name) }
        }

        func json(_ arguments: [String], _ name: String) throws -> Any {
            try JSONSerialization.jsonObject(with: Data(try ok(arguments + ["--json"], name).utf8))
        }

        func digest(_ name: String) throws -> String { try ok(["digest"], name) }
    }

    static let tenYearsMS: Int64 = 10 * 365 * 86_400_000

    // MARK: Part 2: delete against a concurrent edit

    /// A deletes the note; B, not having seen the delete, appends to it; after the exchange the
    /// note is in the trash on both sides (restored by the edit, marked for review), with the
    /// delete and the edit in its log; `show`, `log` and `restore` find it by prefix, and a note
    /// deleted for good is listed by `list --deleted` and can still be restored.
    @Test func aDeleteAgainstAConcurrentEditKeepsTheNote() throws {
        let devices = try Devices(["A", "B"])
        let id = try devices.ok(["new", "--title", "shared", "--body", "base"], "A")
        let short = String(id.prefix(4))
        try devices.sync("A", "B")
        try devices.ok(["delete", short], "A")
        try devices.ok(["edit", short, "--append", " from B"], "B")
        try devices.sync("A", "B", "A")
        #expect(try devices.digest("A") == devices.digest("B"))
        for name in ["A", "B"] {
            #expect(try devices.ok(["list"], name).isEmpty)
            let trashed = try devices.ok(["list", "--trashed"], name)
            #expect(trashed.hasPrefix(String(id.prefix(8))) && trashed.contains("(restored)") && trashed.contains("[merged]"), "\(trashed)")
            let note = try #require(try devices.json(["show", short], name) as? [String: Any])
            #expect(note["body"] as? String == "base from B")
            #expect(note["state"] as? String == "trashed")
            #expect(note["restoredByConcurrentEdit"] as? Bool == true)
            let log = try devices.ok(["log", short], name)
            #expect(log.contains("note \(id.prefix(8)): deleted"))
            #expect(log.contains("note \(id.prefix(8)): inserted 7 characters"))
            #expect(try devices.ok(["conflicts"], name).contains("deleted while edited"))
        }
        let conflict = try devices.ok(["show", short, "--conflict"], "A")
        #expect(conflict.contains("while") && conflict.contains("base[ from B]"), "\(conflict)")

        // Deleted again, now that A has seen the edit: deleted for good, and still findable.
        try devices.ok(["delete", short], "A")
        try devices.sync("A", "B")
        #expect(try devices.digest("A") == devices.digest("B"))
        for name in ["A", "B"] {
            #expect(try devices.ok(["list", "--trashed"], name).isEmpty)
            #expect(try devices.ok(["list", "--deleted"], name).hasPrefix(String(id.prefix(8))))
            #expect(try devices.ok(["show", short], name).contains("state:   deleted"))
            #expect(try devices.ok(["log", short], name).contains("deleted"))
        }
        let edit = try devices.run(["edit", short, "--append", "!"], "B")
        #expect(edit.status == 2 && edit.stderr.contains("is deleted"))
        try devices.ok(["restore", short], "B")
        try devices.sync("B", "A")
        for name in ["A", "B"] {
            #expect(try devices.ok(["list"], name).hasPrefix(String(id.prefix(8))))
            #expect((try devices.json(["show", short], name) as? [String: Any])?["body"] as? String == "base from B")
        }
        #expect(try devices.digest("A") == devices.digest("B"))
    }

    // MARK: Part 3: a clock ten years ahead

    /// A replica whose clock is ten years fast edits a title; every later title edit elsewhere
    /// wins (it was made after seeing that one), on every replica, and the note does not stay on
    /// top of `list`.
    @Test func titleEditsAfterOneFromTenYearsAheadWin() throws {
        let devices = try Devices(["fast", "L1", "L2"])
        let id = try devices.ok(["new", "--title", "plan", "--body", "x"], "L1")
        try devices.sync("L1", "fast", "L2")
        try devices.ok(["edit", id, "--title", "from 2036"], "fast", skew: Self.tenYearsMS)
        try devices.sync("fast", "L1", "L2")
        #expect((try devices.json(["show", id], "L1") as? [String: Any])?["title"] as? String == "from 2036")
        try devices.ok(["edit", id, "--title", "later, from L1"], "L1")
        try devices.sync("L1", "fast", "L2")
        for name in ["fast", "L1", "L2"] {
            #expect((try devices.json(["show", id], name) as? [String: Any])?["title"] as? String == "later, from L1")
        }
        try devices.ok(["edit", id, "--title", "later still, from L2"], "L2")
        // The fast device, its clock corrected, edits too: after seeing L2's title, it wins.
        try devices.sync("L2", "fast")
        try devices.ok(["edit", id, "--title", "last, from the corrected device"], "fast")
        try devices.sync("fast", "L1", "L2")
        var digests: Set<String> = []
        for name in ["fast", "L1", "L2"] {
            #expect((try devices.json(["show", id], name) as? [String: Any])?["title"] as? String == "last, from the corrected device")
            digests.insert(try devices.digest(name))
        }
        #expect(digests.count == 1)
        // A note made later here lists above the note the fast device touched.
        let newer = try devices.ok(["new", "--title", "newer"], "L1")
        #expect(try devices.ok(["list"], "L1").hasPrefix(String(newer.prefix(8))))
        #expect(try devices.ok(["show", id], "L1").contains("by a device whose clock was ahead"))
    }

    // MARK: Part 4: merges a person can see

    /// Both laptops changed "eggs", one to "butter", one to "cheese": the body keeps both, the
    /// note is listed by `conflicts`, `show --conflict` shows each side and the merged result,
    /// `resolve` on one clears it everywhere, also on a device that gets the old edits later.
    @Test func eggsToButterAndCheeseIsListedShownAndResolved() throws {
        let devices = try Devices(["L1", "L2", "L3"])
        let id = try devices.ok(["new", "--title", "shopping", "--body", "milk, eggs, bread"], "L1")
        try devices.sync("L1", "L2")
        try devices.ok(["edit", id, "--body", "milk, butter, bread"], "L1")
        try devices.ok(["edit", id, "--body", "milk, cheese, bread"], "L2")
        try devices.ok(["edit", id, "--title", "shopping (L1)"], "L1")
        try devices.ok(["edit", id, "--title", "shopping (L2)"], "L2")
        try devices.sync("L1", "L2", "L1")
        #expect(try devices.digest("L1") == devices.digest("L2"))
        let body = try #require((try devices.json(["show", id], "L1") as? [String: Any])?["body"] as? String)
        #expect(body == "milk, cheesebutter, bread" || body == "milk, buttercheese, bread")
        for name in ["L1", "L2"] {
            let listed = try devices.ok(["conflicts"], name)
            #expect(listed.hasPrefix(String(id.prefix(8))) && listed.contains("body") && listed.contains("title"), "\(listed)")
            let entries = try #require(try devices.json(["conflicts"], name) as? [[String: Any]])
            #expect(entries.map { $0["id"] as? String } == [id])
            #expect(try devices.ok(["list"], name).contains("[merged]"))
            let shown = try devices.ok(["show", id, "--conflict"], name)
            #expect(shown.contains("[butter]") && shown.contains("[cheese]"), "\(shown)")
            #expect(shown.contains("merged:   milk, [" + body.dropFirst(6).dropLast(7) + "], bread"), "\(shown)")
            #expect(shown.contains("\"shopping (L1)\"") && shown.contains("\"shopping (L2)\""))
            let json = try #require(try devices.json(["show", id, "--conflict"], name) as? [[String: Any]])
            #expect(Set(json.compactMap { $0["kind"] as? String }) == ["body", "field"])
        }
        try devices.ok(["resolve", String(id.prefix(6))], "L2")
        #expect(try devices.ok(["resolve", id], "L2").contains("nothing changed"))
        try devices.sync("L2", "L1", "L3")
        for name in ["L1", "L2", "L3"] {
            #expect(try devices.ok(["conflicts"], name).isEmpty, "\(name)")
            #expect(try devices.ok(["show", id, "--conflict"], name).contains("no merges"))
        }
        #expect(Set(try ["L1", "L2", "L3"].map { try devices.digest($0) }).count == 1)
    }

    // MARK: Also

    /// Commands that change nothing record nothing and say so.
    @Test func commandsThatChangeNothingRecordNothing() throws {
        let devices = try Devices(["A"])
        let id = try devices.ok(["new", "--title", "same", "--tag", "work"], "A")
        try devices.ok(["pin", id], "A")
        let entries = try #require(try devices.json(["log"], "A") as? [Any]).count
        #expect(try devices.ok(["pin", id], "A") == "note \(id.prefix(8)) is already pinned; nothing changed")
        #expect(try devices.ok(["untag", id, "home"], "A") == "note \(id.prefix(8)) is not in tag home; nothing changed")
        #expect(try devices.ok(["tag", id, "Work"], "A") == "note \(id.prefix(8)) is already in tag Work; nothing changed")
        #expect(try devices.ok(["restore", id], "A").contains("is already active"))
        #expect(try devices.ok(["color", id, "none"], "A").contains("has no color"))
        try devices.ok(["edit", id, "--title", "same"], "A")
        #expect(try #require(try devices.json(["log"], "A") as? [Any]).count == entries)
        try devices.ok(["trash", id], "A")
        #expect(try devices.ok(["trash", id], "A").contains("already in the trash"))
        try devices.ok(["delete", id], "A")
        #expect(try devices.ok(["delete", id], "A").contains("already deleted"))
        #expect(try #require(try devices.json(["log"], "A") as? [Any]).count == entries + 2)
    }

    /// Control characters in titles, bodies and tags from other devices are escaped in text
    /// output; a newline in a title does not break `list`; --json has the text exactly.
    @Test func textFromOtherDevicesCannotActOnTheTerminal() throws {
        let devices = try Devices(["A", "B"])
        let title = "evil\u{1B}[2J\u{1B}]0;owned\u{07}\nsecond line\u{202E}"
        let body = "line one\n\u{1B}[31mred\rover\tok"
        let id = try devices.ok(["new", "--title", title, "--body", body, "--tag", "t\u{1B}x"], "A")
        try devices.sync("A", "B")
        let list = try devices.ok(["list"], "B")
        #expect(list.split(separator: "\n").count == 1)
        #expect(!list.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x202E })
        #expect(list.contains("evil\\u{1B}[2J\\u{1B}]0;owned\\u{7}\\nsecond line\\u{202E}"), "\(list)")
        #expect(list.contains("#t\\u{1B}x"))
        let shown = try devices.ok(["show", id], "B")
        #expect(!shown.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x0D || $0.value == 0x07 })
        #expect(shown.contains("line one\n\\u{1B}[31mred\\rover\tok"), "body lines and tabs stay: \(shown)")
        let search = try devices.ok(["search", "owned"], "B")
        #expect(!search.unicodeScalars.contains { $0.value == 0x1B })
        let log = try devices.ok(["log", id], "B")
        #expect(!log.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 })
        // An error quoting what was given (or came from elsewhere) is escaped the same way.
        let miss = try devices.run(["show", "ab\u{1B}[2J"], "B")
        #expect(miss.status != 0 && miss.stderr.contains("ab\\u{1B}[2J") && !miss.stderr.contains("\u{1B}"), "\(miss.stderr)")
        let json = try #require(try devices.json(["show", id], "B") as? [String: Any])
        #expect(json["title"] as? String == title)
        #expect(json["body"] as? String == body)
    }
}

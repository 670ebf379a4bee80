import Foundation
import Testing

/// `history`, `show --at`, `restore --to`, `undo`, device names and local time, through the built binary.
@Suite(.serialized)
struct HistoryCommandTests {
    func versions(_ id: String, db: String) throws -> [[String: Any]] {
        try #require(try CLI.json(["history", id], db: db) as? [[String: Any]])
    }

    @Test func historyShowAtAndRestoreTo() throws {
        let scratch = Scratch()
        let db = scratch.db
        try CLI.ok(["init"], db: db)
        let id = try CLI.ok(["new", "--title", "Draft", "--body", "first line"], db: db)
        try CLI.ok(["edit", id, "--title", "Final"], db: db)
        try CLI.ok(["edit", id, "--append", " more"], db: db)

        let text = try CLI.ok(["history", String(id.prefix(8))], db: db)
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.count == 6, "\(text)")
        #expect(lines[1].contains("+5 chars: \" more\""))
        #expect(lines[3].contains("title \"Draft\" → \"Final\""))
        #expect(lines[5].contains("created"))
        #expect(lines[0].contains("(this device)"))

        let listed = try versions(id, db: db)
        #expect(listed.count == 3)
        let oldest = try #require(listed.last)
        let label = try #require(oldest["version"] as? String)
        let atLabel = try CLI.ok(["show", id, "--at", label], db: db)
        #expect(atLabel.contains("title:   Draft"))
        #expect(atLabel.hasSuffix("first line"))
        let time = try #require(oldest["timestamp"] as? String)
        #expect(try CLI.ok(["show", id, "--at", time], db: db) == atLabel.replacingOccurrences(of: "as of:   \(label)", with: "as of:   \(time)"))
        let json = try #require(try CLI.json(["show", id, "--at", label], db: db) as? [String: Any])
        #expect(json["title"] as? String == "Draft")
        #expect(json["body"] as? String == "first line")

        try CLI.ok(["restore", id, "--to", label], db: db)
        let now = try CLI.ok(["show", id], db: db)
        #expect(now.contains("title:   Draft"))
        #expect(now.hasSuffix("first line"))
        #expect(try versions(id, db: db).count > 3)
        #expect(try CLI.ok(["restore", id, "--to", label], db: db).contains("nothing changed"))

        // Bad input: a clear error, and nothing changes.
        let digest = try CLI.ok(["digest"], db: db)
        let bad = try CLI.run(["show", id, "--at", "yesterday"], db: db)
        #expect(bad.status != 0 && bad.stderr.contains("not a version"))
        let badTime = try CLI.run(["restore", id, "--to", "2026-13-45T99:00"], db: db)
        #expect(badTime.status != 0 && badTime.stderr.contains("not a time"))
        let before = try CLI.run(["restore", id, "--to", "2001-01-01T00:00Z"], db: db)
        #expect(before.status == 2 && before.stderr.contains("did not exist"))
        let unknown = try CLI.run(["restore", id, "--to", "\(label.prefix(8))-9999"], db: db)
        #expect(unknown.status == 2 && unknown.stderr.contains("no version"))
        #expect(try CLI.ok(["digest"], db: db) == digest)
    }

    @Test func undoRevertsThisDevicesEditsOneAtATime() throws {
        let scratch = Scratch()
        let db = scratch.db
        try CLI.ok(["init"], db: db)
        let id = try CLI.ok(["new", "--title", "Note", "--body", "hello"], db: db)
        let other = try CLI.ok(["new", "--title", "Other"], db: db)
        try CLI.ok(["edit", id, "--append", " world"], db: db)
        try CLI.ok(["pin", other], db: db)

        #expect(try CLI.ok(["undo", id], db: db).contains("undid"))
        #expect(try CLI.ok(["show", id], db: db).hasSuffix("hello"))
        #expect(try CLI.ok(["show", other], db: db).contains("pinned"))
        try CLI.ok(["undo"], db: db)  // the pin
        #expect(try !CLI.ok(["show", other], db: db).contains("pinned"))
        try CLI.ok(["undo"], db: db)  // the creation of `other`
        try CLI.ok(["undo"], db: db)  // the creation of `id`
        #expect(try CLI.ok(["list"], db: db).isEmpty)
        let nothing = try CLI.run(["undo"], db: db)
        #expect(nothing.status == 0 && nothing.stdout.contains("nothing to undo"))
    }

    @Test func undoSaysWhatItDidAndWhyNothingChanged() throws {
        let scratch = Scratch()
        let a = scratch.path + "/a.db", b = scratch.path + "/b.db"
        let shared = scratch.path + "/shared"
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
        try CLI.ok(["init"], db: a)
        try CLI.ok(["init"], db: b)
        func exchange() throws {
            for db in [a, b, a] { try CLI.ok(["sync", "--dir", shared], db: db) }
        }
        let id = try CLI.ok(["new", "--title", "T", "--body", "hello"], db: a)
        let other = try CLI.ok(["new", "--title", "O"], db: a)
        try CLI.ok(["tag", id, "work"], db: a)
        try CLI.ok(["tag", other, "work"], db: a)
        // One command that touched two notes: "notes", both named.
        try CLI.ok(["tag", "rename", "work", "home"], db: a)
        let renamed = try CLI.ok(["undo"], db: a)
        #expect(renamed.hasPrefix("undid the edit of notes "), "\(renamed)")
        #expect(renamed.contains(String(id.prefix(8))) && renamed.contains(String(other.prefix(8))))

        // A title another device wrote later: nothing to undo, and it does not claim to have undone it.
        try CLI.ok(["edit", id, "--title", "mine"], db: a)
        try exchange()
        try CLI.ok(["edit", id, "--title", "theirs"], db: b)
        try exchange()
        let replaced = try CLI.run(["undo"], db: a)
        #expect(replaced.status == 0)
        #expect(replaced.stdout.hasPrefix("nothing to undo in the edit of note \(id.prefix(8)) "), "\(replaced.stdout)")
        #expect(replaced.stdout.contains("later edits had already replaced it") && !replaced.stdout.contains("deleted"))
        #expect(try CLI.ok(["show", id], db: a).contains("title:   theirs"))

        // A note another device deleted since: that is the reason given, and it stays deleted.
        try CLI.ok(["edit", other, "--append", "x"], db: a)
        try exchange()
        try CLI.ok(["trash", other], db: b)
        try CLI.ok(["trash", "empty"], db: b)
        try exchange()
        let digest = try CLI.ok(["digest"], db: a)
        let deleted = try CLI.run(["undo"], db: a)
        #expect(deleted.status == 0)
        #expect(deleted.stdout.hasPrefix("nothing to undo in the edit of note \(other.prefix(8)) (seq "), "\(deleted.stdout)")
        #expect(deleted.stdout.contains("): note \(other.prefix(8)) was deleted on another device since"), "\(deleted.stdout)")
        #expect(!deleted.stdout.contains("later edits"))
        #expect(try CLI.ok(["digest"], db: a) == digest)
    }

    @Test func historyShowsTextInDocumentOrder() throws {
        let scratch = Scratch()
        let a = scratch.path + "/a.db", b = scratch.path + "/b.db"
        let shared = scratch.path + "/shared"
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
        try CLI.ok(["init"], db: a)
        try CLI.ok(["init"], db: b)
        let id = try CLI.ok(["new", "--title", "T", "--body", "aaa bbb ccc"], db: a)
        try CLI.ok(["sync", "--dir", shared], db: a)
        try CLI.ok(["sync", "--dir", shared], db: b)
        try CLI.ok(["edit", id, "--insert", "XX", "--at", "4"], db: b)
        try CLI.ok(["edit", id, "--delete", "8", "--at", "0"], db: a)
        for db in [b, a] { try CLI.ok(["sync", "--dir", shared], db: db) }
        try CLI.ok(["undo"], db: a)
        #expect(try CLI.ok(["show", id], db: a).hasSuffix("aaa XXbbb ccc"))
        let history = try CLI.ok(["history", id], db: a)
        #expect(history.split(separator: "\n")[1].hasSuffix("+8 chars: \"aaa \"…\"bbb \""), "\(history)")
    }

    @Test func deviceNamesShowOnTheOtherDeviceAfterSync() throws {
        let scratch = Scratch()
        let laptop = scratch.path + "/laptop.db"
        let phone = scratch.path + "/phone.db"
        let shared = scratch.path + "/shared"
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
        try CLI.ok(["init", "--name", "laptop"], db: laptop)
        try CLI.ok(["init"], db: phone)
        #expect(try CLI.ok(["init", "--name", "phone"], db: phone).contains("now named phone"))
        let id = try CLI.ok(["new", "--title", "From the laptop", "--body", "x"], db: laptop)
        try CLI.ok(["sync", "--dir", shared], db: laptop)
        try CLI.ok(["sync", "--dir", shared], db: phone)
        try CLI.ok(["edit", id, "--append", "y"], db: phone)
        try CLI.ok(["sync", "--dir", shared], db: phone)
        try CLI.ok(["sync", "--dir", shared], db: laptop)

        let status = try CLI.ok(["status"], db: phone)
        #expect(status.contains("laptop"), "\(status)")
        #expect(try CLI.ok(["log", id], db: phone).contains("laptop"))
        let history = try CLI.ok(["history", id], db: phone)
        #expect(history.contains("laptop") && history.contains("phone (this device)"), "\(history)")
        #expect(try CLI.ok(["history", id], db: laptop).contains("phone"))
        let json = try #require(try CLI.json(["status"], db: laptop) as? [String: Any])
        #expect((json["deviceNames"] as? [String: String])?.values.sorted() == ["laptop", "phone"])
        let bad = try CLI.run(["device-name", "   "], db: laptop)
        #expect(bad.status != 0 && bad.stderr.contains("device name"))
    }

    @Test func textDatesAreLocalUnlessUTC() throws {
        let scratch = Scratch()
        let db = scratch.db
        try CLI.ok(["init"], db: db)
        let id = try CLI.ok(["new", "--title", "t"], db: db)
        let tokyo = ["TZ": "Asia/Tokyo"]
        let json = try #require(try JSONSerialization.jsonObject(with: Data(CLI.run(["show", id, "--json"], db: db, environment: tokyo).stdout.utf8)) as? [String: Any])
        let utc = try #require(json["createdAt"] as? String)
        #expect(utc.hasSuffix("Z"))
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let date = try #require(formatter.date(from: utc))
        let local = DateFormatter()
        local.locale = Locale(identifier: "en_US_POSIX")
        local.timeZone = TimeZone(identifier: "Asia/Tokyo")
        local.dateFormat = "yyyy-MM-dd'T'HH:mm:ss.SSS"
        let wanted = local.string(from: date) + "+09:00"

        let shown = try CLI.run(["show", id], db: db, environment: tokyo)
        #expect(shown.stdout.contains("created: \(wanted)"), "\(shown.stdout)")
        let shownUTC = try CLI.run(["show", id, "--utc"], db: db, environment: tokyo)
        #expect(shownUTC.stdout.contains("created: \(utc)"))
        #expect(try CLI.run(["history", id], db: db, environment: tokyo).stdout.hasPrefix(String(wanted.prefix(16))))
        #expect(try CLI.run(["history", id, "--utc"], db: db, environment: tokyo).stdout.hasPrefix(String(utc.prefix(16))))
        // A time without an offset is local: the creation is in the minute it names in Tokyo, before it at +14:00.
        let minute = String(wanted.prefix(16))
        #expect(try CLI.run(["show", id, "--at", minute], db: db, environment: tokyo).stdout.contains("title:   t"))
        #expect(try CLI.run(["show", id, "--at", minute], db: db, environment: ["TZ": "Pacific/Kiritimati"]).status == 2)
    }
}

import Foundation
import GRDB
import NotesCRDT
@testable import NotesStore
import Testing

/// An edit of one note runs on that note's stored state when the whole replica is not loaded
/// (issue 20): it must make exactly the changes, rows and state the whole replica would.
struct OneNoteEditTests {
    static let clock = FixedWallClock(1_700_000_000_000)
    static let local = ReplicaID(Identifier128(high: 0x1111, low: 1))
    static let remote = ReplicaID(Identifier128(high: 0x2222, low: 2))

    /// A replica with notes, tags, deleted and trashed notes, and a concurrent remote edit (so
    /// conflicts and the delete rule have state to keep).
    static func seededDatabase(_ rng: inout SplitMix64) throws -> (InMemoryDatabase, [NoteID]) {
        let database = try InMemoryDatabase(label: "replica")
        let store = try NoteStore.open(database, options: StoreOptions(wallClock: clock), replicaID: local)
        var notes: [NoteID] = []
        for index in 0 ..< 5 {
            notes.append(try store.createNote(title: "note \(index)", body: String(repeating: "abc ", count: 3 + index),
                                              tags: index % 2 == 0 ? ["work"] : ["home", "Work"], id: NoteID.random(using: &rng)))
        }
        // A body past the length whose digest is worked out at every write.
        notes.append(try store.createNote(title: "long", body: String(repeating: "long text ", count: 2000), id: NoteID.random(using: &rng)))
        var other = Notebook(replicaID: remote, wallClock: clock)
        other.apply(contentsOf: try store.changes(since: VersionVector()))
        _ = try other.insertText(notes[0], at: 2, "REMOTE")
        _ = try other.setTitle(notes[1], "remote title")
        _ = try other.setPinned(notes[2], true)
        try store.appendText(notes[0], " local")
        try store.setTitle(notes[1], "local title")
        try store.setState(notes[3], .deleted)
        try store.setState(notes[4], .trashed)
        _ = try store.apply(other.changes(since: VersionVector()))
        try store.close()
        return (database, notes)
    }

    enum Step { case append(String), insert(Int, String), delete(Int, Int), title(String), pin(Bool), color(String?),
                    tag(String, Bool), state(NoteLifecycle), batch([NoteEdit]), create(NoteID, String, [String]) }

    static func randomStep(_ rng: inout SplitMix64, notes: [NoteID]) -> Step {
        let words = ["x", "hello", "é", "😀", "line\n", "  "]
        let word = words[Int(rng.next() % UInt64(words.count))]
        switch rng.next() % 11 {
        case 0: return .append(word)
        case 1: return .insert(Int(rng.next() % 30), word)
        case 2: return .delete(Int(rng.next() % 20), Int(rng.next() % 6))
        case 3: return .title("title \(rng.next() % 100)")
        case 4: return .pin(rng.next() % 2 == 0)
        case 5: return .color(rng.next() % 3 == 0 ? nil : "blue")
        case 6: return .tag(["work", "Home", "new \(rng.next() % 3)"][Int(rng.next() % 3)], rng.next() % 3 != 0)
        case 7: return .state([.active, .trashed, .deleted][Int(rng.next() % 3)])
        case 8: return .batch([.append(word), .title("batched \(rng.next() % 10)"), .pinned(true)])
        case 9: return .create(NoteID.random(using: &rng), "created", rng.next() % 2 == 0 ? ["work"] : ["fresh \(rng.next() % 4)"])
        default: return .insert(0, word)
        }
    }

    /// Runs a step; what it returned (or the error code) so both sides can be compared.
    static func run(_ step: Step, on note: NoteID, _ store: NoteStore) -> String {
        do {
            switch step {
            case .append(let text): return "\(try store.appendText(note, text))"
            case .insert(let at, let text): return "\(try store.insertText(note, at: at, text))"
            case .delete(let at, let count): return "\(try store.deleteText(note, at: at, count: count))"
            case .title(let title): return "\(try store.setTitle(note, title))"
            case .pin(let pinned): return "\(try store.setPinned(note, pinned))"
            case .color(let color): return "\(try store.setColor(note, color))"
            case .tag(let name, let member): return "\(try store.setTag(note, name, member: member))"
            case .state(let state): return "\(try store.setState(note, state))"
            case .batch(let edits): try store.edit(note, edits); return "batch"
            case .create(let id, let title, let tags): return "\(try store.createNote(title: title, body: "new body", tags: tags, id: id))"
            }
        } catch let error as StoreError {
            return "error \(error.code)"
        } catch {
            return "error \(error)"
        }
    }

    static func rows(_ database: InMemoryDatabase, _ sql: String) throws -> [[String]] {
        let queue = try DatabaseQueue(path: database.uri)
        return try queue.read { db in
            try Row.fetchAll(db, sql: sql).map { row in row.databaseValues.map { String.fromDatabaseValue($0) ?? "\($0)" } }
        }
    }

    @Test(arguments: 0 ..< 8 as Range<UInt64>)
    func oneNoteEditsMakeWhatTheWholeReplicaMakes(seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        let (base, seeded) = try Self.seededDatabase(&rng)
        var notes = seeded
        // Same label: the same file as far as the replica can tell, so neither copy moves identity.
        let wholeDatabase = try InMemoryDatabase(copying: base, label: "replica")
        let oneDatabase = try InMemoryDatabase(copying: base, label: "replica")
        let whole = try NoteStore.open(wholeDatabase, options: StoreOptions(wallClock: Self.clock))
        _ = try whole.notebook  // loaded: its edits run on the whole replica
        var one = try NoteStore.open(oneDatabase, options: StoreOptions(wallClock: Self.clock))
        var oneNoteEdits = 0
        for step in 0 ..< 60 {
            let note = notes[Int(rng.next() % UInt64(notes.count))]
            let action = Self.randomStep(&rng, notes: notes)
            let expected = Self.run(action, on: note, whole)
            let before = one.oneNoteEditCount
            let got = Self.run(action, on: note, one)
            #expect(got == expected, "step \(step): \(action)")
            oneNoteEdits += one.oneNoteEditCount - before
            if case .create(let id, _, _) = action, !expected.hasPrefix("error") { notes.append(id) }
            // A new process, every few steps and whenever this one loaded the whole replica
            // (after an edit whose note had no stored state), as every command does.
            if step % 9 == 8 || one.loaded != nil {
                try one.close()
                one = try NoteStore.open(oneDatabase, options: StoreOptions(wallClock: Self.clock))
            }
        }
        #expect(oneNoteEdits >= 30, "\(oneNoteEdits) of 60 edits ran on one note's state")
        let log = "SELECT replica, start_seq, end_seq, timestamp, local, payload FROM changes ORDER BY row"
        #expect(try Self.rows(oneDatabase, log) == Self.rows(wholeDatabase, log))
        for table in ["notes", "deleted_notes", "note_tags", "note_text"] {
            let sql = "SELECT * FROM \(table) ORDER BY 1, 2"
            let query = table == "note_text" ? "SELECT note, ord, title, body FROM note_text ORDER BY 1, 2" : sql
            #expect(try Self.rows(oneDatabase, query) == Self.rows(wholeDatabase, query), "table \(table)")
        }
        // A reader that loads nothing: the digest and status from what the writes stored.
        try one.close()
        let reader = try NoteStore.open(oneDatabase, options: StoreOptions(wallClock: Self.clock))
        let status = try reader.status()
        #expect(reader.loaded == nil, "the status loaded the replica")
        #expect(status.digest == (try whole.digest()))
        #expect(status.versionVector == (try whole.notebook.versionVector))
        #expect(status.pendingChanges == (try whole.notebook.pendingCount))
        #expect(status.notes == (try whole.status().notes))
        one = try NoteStore.open(oneDatabase, options: StoreOptions(wallClock: Self.clock))
        #expect(try one.digest() == whole.digest())
        #expect(try one.notebook.versionVector == whole.notebook.versionVector)
        // Every stored note state is what the whole replica holds for the note.
        let wholeNotebook = try one.notebook
        for row in try Self.rows(oneDatabase, "SELECT note FROM note_state") {
            let id = NoteID(hex: row[0])!
            let stored = try Self.rows(oneDatabase, "SELECT hex(payload) FROM note_state WHERE note = '\(row[0])'")[0][0]
            let bytes = stride(from: 0, to: stored.count, by: 2).map { UInt8(stored.dropFirst($0).prefix(2), radix: 16)! }
            #expect(wholeNotebook.noteStateDifference(id, bytes) == nil, "note \(id)")
        }
    }

    /// A damaged stored state costs a load of the whole replica, never a wrong edit.
    @Test func aDamagedNoteStateIsWrittenAgainFromTheWholeReplica() throws {
        var rng = SplitMix64(seed: 99)
        let (database, notes) = try Self.seededDatabase(&rng)
        var store = try NoteStore.open(database, options: StoreOptions(wallClock: Self.clock))
        try store.appendText(notes[0], "!")  // records every note's state
        #expect(try Self.rows(database, "SELECT count(*) FROM note_state")[0][0] == "6")
        try store.close()
        let queue = try DatabaseQueue(path: database.uri)
        try queue.write { try $0.execute(sql: "UPDATE note_state SET payload = x'0102030405060708090a' WHERE note = ?", arguments: [notes[1].description]) }
        store = try NoteStore.open(database, options: StoreOptions(wallClock: Self.clock))
        let before = store.oneNoteEditCount
        try store.appendText(notes[1], " more")
        #expect(store.oneNoteEditCount == before)  // it needed the whole replica
        #expect(try store.note(notes[1])?.body?.hasSuffix(" more") == true)
        try store.close()
        store = try NoteStore.open(database, options: StoreOptions(wallClock: Self.clock))
        try store.appendText(notes[1], " again")
        #expect(store.oneNoteEditCount == 1)
        #expect(try store.note(notes[1])?.body?.hasSuffix(" more again") == true)
        #expect(try store.notebook.note(notes[1])?.body == store.note(notes[1])?.body ?? nil)
    }

    /// Another process's edit on the whole replica drops the note's state: the one-note path
    /// never edits from a state behind the log.
    @Test func anEditElsewhereDropsTheStoredState() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("one-note-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("replica.db").path
        let app = try NoteStore.open(path: path, options: StoreOptions(wallClock: Self.clock))
        let note = try app.createNote(title: "t", body: "hello")
        let command = try NoteStore.open(path: path, options: StoreOptions(wallClock: Self.clock))
        try command.appendText(note, " one")  // records the states (the whole replica is loaded once)
        try command.close()
        var cli = try NoteStore.open(path: path, options: StoreOptions(wallClock: Self.clock))
        try cli.appendText(note, " two")
        #expect(cli.oneNoteEditCount == 1)
        try cli.close()
        try app.appendText(note, " three")  // the app's whole replica catches up, then edits
        cli = try NoteStore.open(path: path, options: StoreOptions(wallClock: Self.clock))
        try cli.appendText(note, " four")
        #expect(cli.oneNoteEditCount == 0)  // the state was dropped: rebuilt from the whole replica
        try cli.close()
        cli = try NoteStore.open(path: path, options: StoreOptions(wallClock: Self.clock))
        try cli.appendText(note, " five")
        #expect(cli.oneNoteEditCount == 1)
        #expect(try cli.note(note)?.body ?? nil == "hello one two three four five")
        try app.refresh()
        #expect(try app.notebook.note(note)?.body == "hello one two three four five")
        #expect(try app.digest() == cli.digest())
    }

    /// Typing into notes through one store keeps its partial replica between edits, writes the
    /// states it kept back when it closes, and makes what the whole replica makes.
    @Test(arguments: [StoreOptions.Access.shared, .exclusive])
    func typingKeepsThePartialReplicaAndWritesItsStatesAtClose(access: StoreOptions.Access) throws {
        var rng = SplitMix64(seed: 5)
        let (base, notes) = try Self.seededDatabase(&rng)
        let options = StoreOptions(wallClock: Self.clock, access: access)
        let wholeDatabase = try InMemoryDatabase(copying: base, label: "replica")
        let oneDatabase = try InMemoryDatabase(copying: base, label: "replica")
        let whole = try NoteStore.open(wholeDatabase, options: options)
        _ = try whole.notebook
        var one = try NoteStore.open(oneDatabase, options: options)
        try one.appendText(notes[0], "")  // no states yet: the whole replica, once, and every state written
        #expect(one.oneNoteEditCount == 0)
        try one.close()
        one = try NoteStore.open(oneDatabase, options: options)
        for index in 0 ..< 300 {
            let note = notes[[0, 1, 2][index % 97 == 0 ? 1 : (index / 100)]]
            let offset = Int(rng.next() % 5)
            #expect(Self.run(.insert(offset, "k"), on: note, whole) == Self.run(.insert(offset, "k"), on: note, one))
        }
        #expect(one.oneNoteEditCount == 300)
        #expect(one.loaded == nil)
        try one.close()
        let log = "SELECT replica, start_seq, end_seq, timestamp, local, payload FROM changes ORDER BY row"
        #expect(try Self.rows(oneDatabase, log) == Self.rows(wholeDatabase, log))
        let wholeNotebook = try whole.notebook
        let states = try Self.rows(oneDatabase, "SELECT note, hex(payload) FROM note_state ORDER BY note")
        #expect(states.count == 6)
        for row in states {
            let bytes = stride(from: 0, to: row[1].count, by: 2).map { UInt8(row[1].dropFirst($0).prefix(2), radix: 16)! }
            #expect(wholeNotebook.noteStateDifference(NoteID(hex: row[0])!, bytes) == nil, "note \(row[0])")
        }
        one = try NoteStore.open(oneDatabase, options: options)
        try one.appendText(notes[2], "!")
        try whole.appendText(notes[2], "!")
        #expect(one.oneNoteEditCount == 1)
        #expect(try one.digest() == whole.digest())
    }

    final class MovableClock: WallClock, @unchecked Sendable {
        var now: UInt64 = 1_700_000_000_000
        func milliseconds() -> UInt64 { now }
    }

    /// After a change from a clock years ahead, the wall clock moves on: an edit of one note
    /// stamps what the whole replica (which observes every change again when it loads) stamps.
    @Test func theClockIsTheWholeReplicasAfterAFarFutureChange() throws {
        let clock = MovableClock()
        let database = try InMemoryDatabase(label: "replica")
        var store = try NoteStore.open(database, options: StoreOptions(wallClock: clock), replicaID: Self.local)
        let note = try store.createNote(title: "t", id: NoteID(Identifier128(high: 1, low: 1)))
        var fast = Notebook(replicaID: Self.remote, wallClock: FixedWallClock(clock.now + 10 * 365 * 86_400_000))
        fast.apply(contentsOf: try store.changes(since: VersionVector()))
        _ = try fast.setTitle(note, "from the future")
        _ = try store.apply(fast.changes(since: try store.versionVector))
        try store.appendText(note, "x")  // every state stored
        try store.close()
        clock.now += 30_000
        let copy = try InMemoryDatabase(copying: database, label: "replica")
        store = try NoteStore.open(database, options: StoreOptions(wallClock: clock))
        let whole = try NoteStore.open(copy, options: StoreOptions(wallClock: clock))
        _ = try whole.notebook
        let id = NoteID(Identifier128(high: 2, low: 2))
        try store.createNote(title: "new", id: id)
        try whole.createNote(title: "new", id: id)
        #expect(store.oneNoteEditCount == 1)
        #expect(try store.note(id)?.updatedAt == whole.note(id)?.updatedAt)
        #expect(try store.changes(since: VersionVector()) == whole.changes(since: VersionVector()))
    }
}

import Foundation
import GRDB
import NotesCRDT
@testable import NotesStore
import NotesSync
import Testing

/// A replica file given as `--db` is input from outside too: a snapshot row or a log row that
/// does not decode, values of another SQL type than the schema's (SQLite keeps what it is given),
/// pages damaged on disk. Opening and reading it ends in its content or in an error that names
/// the problem, never a trap; and what was refused is left as it was.
struct DamagedReplicaTests {
    static let clock = FixedWallClock(1_700_000_000_000)

    /// The damage of case `kind`: SQL run on the replica, or bytes changed in the file.
    enum Damage: Sendable {
        case sql(String)
        case bytes(@Sendable (inout [UInt8], inout SplitMix64) -> Void)
    }

    static let damages: [(String, Damage)] = [
        ("snapshot payload of random bytes", .sql("UPDATE snapshot SET payload = randomblob(200)")),
        ("snapshot payload cut", .sql("UPDATE snapshot SET payload = substr(payload, 1, length(payload) / 2)")),
        ("snapshot payload empty", .sql("UPDATE snapshot SET payload = x''")),
        ("snapshot payload an integer", .sql("UPDATE snapshot SET payload = 42")),
        ("snapshot payload text", .sql("UPDATE snapshot SET payload = 'not a snapshot'")),
        ("snapshot row past the log", .sql("UPDATE snapshot SET through_row = 9223372036854775807")),
        ("snapshot row negative", .sql("UPDATE snapshot SET through_row = -9223372036854775808")),
        ("snapshot row text", .sql("UPDATE snapshot SET through_row = 'abc'")),
        ("snapshot row a real", .sql("UPDATE snapshot SET through_row = 1e300")),
        ("log row of random bytes", .sql("UPDATE changes SET payload = randomblob(50) WHERE row = (SELECT max(row) FROM changes)")),
        ("log row an integer", .sql("UPDATE changes SET payload = 7 WHERE row = (SELECT max(row) FROM changes)")),
        ("log row cut", .sql("UPDATE changes SET payload = substr(payload, 1, 5) WHERE row = (SELECT max(row) FROM changes)")),
        ("replica id of the wrong length", .sql("UPDATE replica SET replica_id = x'0102'")),
        ("replica id an integer", .sql("UPDATE replica SET replica_id = 5")),
        ("revision text", .sql("UPDATE replica SET revision = 'x'")),
        ("no replica row", .sql("DELETE FROM replica")),
        ("no snapshot table", .sql("DROP TABLE snapshot")),
        ("a page damaged", .bytes { bytes, rng in
            let page = 4096
            let pages = bytes.count / page
            guard pages > 1 else { return }
            let start = page * (1 + Int(rng.next() % UInt64(pages - 1)))
            for i in 0 ..< 64 { bytes[start + (i * 37) % page] ^= UInt8(truncatingIfNeeded: rng.next() | 1) }
        }),
        ("the file cut", .bytes { bytes, rng in
            bytes = Array(bytes.prefix(4096 * (1 + Int(rng.next() % UInt64(max(1, bytes.count / 4096))))))
        }),
        ("the header damaged", .bytes { bytes, rng in bytes[16 + Int(rng.next() % 84)] ^= 0xFF }),
    ]

    /// A replica with a snapshot and log rows after it, closed (its WAL folded into the file).
    static func makeReplica(_ path: String) throws {
        let store = try NoteStore.open(path: path, options: StoreOptions(wallClock: clock, snapshotInterval: 8))
        var ids: [NoteID] = []
        for i in 0 ..< 6 { ids.append(try store.createNote(title: "note \(i)", body: "body \(i)")) }
        for i in 0 ..< 20 { try store.appendText(ids[i % ids.count], " more \(i)") }
        try store.close()
    }

    func bytes(_ path: String) -> [UInt8] { [UInt8](FileManager.default.contents(atPath: path) ?? Data()) }

    @Test func damagedReplicasAreReadOrRefusedWithAMessage() throws {
        let folder = TemporaryFolder()
        var rng = SplitMix64(seed: 1125)
        var refused = 0
        for (index, (name, damage)) in Self.damages.enumerated() {
            for round in 0 ..< 2 {
                let path = folder.file("damaged-\(index)-\(round).db")
                // Made in place, not copied: a copy is given a new identity at its first open, which writes.
                try Self.makeReplica(path)
                switch damage {
                case .sql(let sql):
                    let queue = try DatabaseQueue(path: path)
                    try queue.writeWithoutTransaction { try $0.execute(sql: sql) }
                    try queue.close()
                case .bytes(let change):
                    var content = bytes(path)
                    change(&content, &rng)
                    try Data(content).write(to: URL(fileURLWithPath: path))
                }
                let before = bytes(path)
                var failure: (any Error)?
                do {
                    let store = try NoteStore.open(path: path, options: StoreOptions(wallClock: Self.clock))
                    do {
                        _ = try store.digest()
                        _ = try store.list(includeBody: true)
                        _ = try store.status()
                    } catch {
                        failure = error
                    }
                    try? store.close()
                } catch {
                    failure = error
                }
                guard let failure else { continue }
                refused += 1
                let message = String(describing: failure)
                #expect(!message.isEmpty, "\(name)")
                #expect(failure is StoreError, "\(name): \(type(of: failure)): \(message)")
                let unchanged = bytes(path) == before
                #expect(unchanged, "\(name): a refused replica was changed (\(message))")
            }
        }
        #expect(refused > 10)
    }

    /// A snapshot row that claims more of the log than it holds, or a log row moved before it,
    /// left the log's tail out of every load unnoticed: the notes lost it, and a sync, an export
    /// and the digest went on without it. Both are refused as damage, and the file left as it was.
    @Test(arguments: ["UPDATE snapshot SET through_row = 9223372036854775807",
                      "UPDATE snapshot SET through_row = through_row + 1000",
                      "UPDATE changes SET row = -1 WHERE row = (SELECT min(row) FROM changes)"])
    func aLogThatDoesNotFollowItsSnapshotIsRefused(damage: String) throws {
        let folder = TemporaryFolder()
        let path = folder.file("log.db")
        try Self.makeReplica(path)
        let queue = try DatabaseQueue(path: path)
        try queue.writeWithoutTransaction { try $0.execute(sql: damage) }
        try queue.close()
        let before = bytes(path)
        #expect { _ = try NoteStore.open(path: path, options: StoreOptions(wallClock: Self.clock)) } throws: { error in
            (error as? StoreError)?.code == .corrupt && "\(error)".contains("snapshot")
        }
        #expect(bytes(path) == before)
    }

    /// A revision or snapshot generation at the top of its type (written by hand) stopped every
    /// write with an overflow trap; they are counters that only say "changed", and wrap.
    @Test func countersAtTheirLimitDoNotStopWrites() throws {
        let folder = TemporaryFolder()
        let path = folder.file("counters.db")
        try Self.makeReplica(path)
        let queue = try DatabaseQueue(path: path)
        try queue.writeWithoutTransaction {
            try $0.execute(sql: "UPDATE replica SET revision = 9223372036854775807, snapshot_generation = 9223372036854775807")
        }
        try queue.close()
        let store = try NoteStore.open(path: path, options: StoreOptions(wallClock: Self.clock, snapshotInterval: 2))
        for i in 0 ..< 4 { _ = try store.createNote(title: "after \(i)", body: "b") }
        #expect(try store.list().count == 10)
        try store.close()
    }

    /// Every column of every table, one at a time, given a value of another type than the
    /// schema's (text, a negative integer, a blob): SQLite keeps it, and GRDB's row subscript
    /// traps on it. Each read a command runs ends in its content or in a `StoreError`.
    @Test func everyColumnOfAnotherTypeIsReadOrRefused() throws {
        let folder = TemporaryFolder()
        let base = folder.file("base.db")
        var ids: [NoteID] = []
        do {
            let store = try NoteStore.open(path: base, options: StoreOptions(wallClock: Self.clock, snapshotInterval: 8))
            for i in 0 ..< 4 { ids.append(try store.createNote(title: "note \(i)", body: "body \(i)", tags: ["t\(i % 2)"])) }
            _ = try store.appendText(ids[0], " more")
            _ = try store.setState(ids[1], .trashed)
            _ = try store.setState(ids[2], .deleted)
            try store.addRemote("usb", target: .folder(path: folder.path), token: nil)
            try store.addRemote("home", target: .relay(url: "https://relay.example", space: "notes"), token: "secret")
            try store.recordRemoteSync("usb", result: "sent 1", failed: false)
            try store.recordPeer(ReplicaID.random(), versionVector: store.versionVector)
            _ = try store.setDeviceName("laptop")
            try store.enterSpace(key: SpaceKey.random(), origin: "recovery code")
            _ = try store.sealedUnits(since: VersionVector())
            try store.close()
        }
        let pristine = try Data(contentsOf: URL(fileURLWithPath: base))
        var columns: [(table: String, column: String)] = []
        do {
            let queue = try DatabaseQueue(path: base)
            try queue.read { db in
                for table in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE 'note_fts%' ORDER BY name") {
                    for column in try Row.fetchAll(db, sql: "PRAGMA table_info(\(table))") { columns.append((table, try column.decode(forColumn: "name"))) }
                }
            }
            try queue.close()
        }
        #expect(columns.count > 60)
        // One file, written over in place: the same inode, so the store keeps its identity.
        let path = folder.file("damaged.db")
        try #require(FileManager.default.createFile(atPath: path, contents: pristine))
        var failures: [String: Int] = [:]
        var cases = 0
        for (table, column) in columns {
            for value in ["'zz'", "-1", "x'ff00'"] {
                for suffix in ["-wal", "-shm", "-seqmark"] { try? FileManager.default.removeItem(atPath: path + suffix) }
                let handle = try #require(FileHandle(forWritingAtPath: path))
                try handle.truncate(atOffset: 0)
                try handle.write(contentsOf: pristine)
                try handle.close()
                let queue = try DatabaseQueue(path: path)
                // A value the schema refuses outright (a primary key made equal twice) is not a case.
                var damaged = true
                do {
                    try queue.writeWithoutTransaction { db in
                        try db.execute(sql: "PRAGMA ignore_check_constraints = 1")
                        try db.execute(sql: "UPDATE \(table) SET \(column) = \(value)")
                    }
                } catch { damaged = false }
                try queue.close()
                guard damaged else { continue }
                cases += 1
                do {
                    let store = try NoteStore.open(path: path, options: StoreOptions(wallClock: Self.clock))
                    defer { try? store.close() }
                    let reads: [() throws -> Void] = [
                        { _ = try store.list(.all, includeBody: true) }, { _ = try store.list(.deleted) },
                        { _ = try store.status() }, { _ = try store.digest() }, { _ = try store.search("body") },
                        { _ = try store.remotes() }, { _ = try store.token(forRemote: "home") }, { _ = try store.peers() },
                        { _ = try store.identityChanges() }, { _ = try store.deviceNames() }, { _ = try store.versions(of: ids[0]) },
                        { _ = try store.deletedNote(ids[2]) }, { _ = try store.conflictedNotes() }, { _ = try store.quarantinedChanges() },
                        { _ = try store.space() }, { _ = try store.refusedUnits() }, { _ = try store.changes(since: VersionVector()) },
                        { _ = try store.sealedUnits(since: VersionVector()) }, { _ = try store.tagCounts() }, { _ = try store.storedNoteStates() },
                    ]
                    for read in reads {
                        do { try read() } catch {
                            #expect(error is StoreError || error is SyncError, "\(table).\(column) = \(value): \(type(of: error)): \(error)")
                            failures["\(table).\(column)", default: 0] += 1
                        }
                    }
                } catch {
                    #expect(error is StoreError, "\(table).\(column) = \(value), at open: \(type(of: error)): \(error)")
                    failures["\(table).\(column)", default: 0] += 1
                }
            }
        }
        // Not every value is wrong for every column (a title may be 'zz'), but many are refused.
        #expect(cases > 150)
        #expect(failures.count > 20)
    }

    /// An undo stack whose seq range ends before it starts (made by hand: each value is of the
    /// right type) is a `.corrupt` error for `undo`, not a trap on making the range.
    @Test func aReversedUndoRangeIsRefused() throws {
        let folder = TemporaryFolder()
        let path = folder.file("undo.db")
        let store = try NoteStore.open(path: path, options: StoreOptions(wallClock: Self.clock))
        let id = try store.createNote(title: "t", body: "body")
        _ = try store.appendText(id, " more")
        try store.close()
        let queue = try DatabaseQueue(path: path)
        try queue.write { try $0.execute(sql: "UPDATE undo_stack SET start_seq = end_seq + 5") }
        try queue.close()
        let reopened = try NoteStore.open(path: path, options: StoreOptions(wallClock: Self.clock))
        defer { try? reopened.close() }
        let error = #expect(throws: StoreError.self) { _ = try reopened.undo() }
        #expect(error?.code == .corrupt, "\(String(describing: error))")
        #expect(try reopened.note(id)?.body == "body more")
    }
}

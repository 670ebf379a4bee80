import Foundation
import GRDB
import NotesCRDT
@testable import NotesStore
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
}

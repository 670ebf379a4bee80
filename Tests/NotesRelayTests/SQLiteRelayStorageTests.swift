import Foundation
import GRDB
import NotesCRDT
@testable import NotesRelay
import NotesStore
import NotesSync
import Testing

func temporaryFolder() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("crdt-sync-relay-tests-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// The records of a replica's changes, as the relay service makes them.
func records(_ changes: [Change]) -> [RelayRecord] {
    changes.map { RelayRecord(author: $0.replica, startSeq: $0.startSeq, endSeq: $0.endSeq, payload: ChangeCodec.encode([$0])) }
}

/// The rules every relay storage keeps, against each backend (SQLite in memory and in a file;
/// PostgreSQL when configured); then what is SQLite's own.
struct SQLiteRelayStorageTests {
    @Test(arguments: RelayBackend.available)
    func storesEachRecordOnceAndRefusesGaps(_ backend: RelayBackend) async throws {
        try await backend.with { storage in
            let name = backend.rawValue
            let s = uniqueSpace()
            var a = Notebook(replicaID: .random(), wallClock: FixedWallClock(1_700_000_000_000))
            let (id, created) = a.createNote(title: "t", body: "0123456789")
            let all = [created, try #require(try a.insertText(id, at: 10, "abcdef")), try #require(try a.setPinned(id, true))]
            #expect(try await storage.append(space: s, records: records(Array(all.prefix(1)))) == [0], "\(name)")
            #expect(try await storage.append(space: s, records: records(all)) == Array(1 ..< all.count), "\(name)")
            #expect(try await storage.append(space: s, records: records(all)).isEmpty, "\(name)")
            let status = try await storage.status(space: s)
            #expect(status.changes == all.count, "\(name)")
            #expect(status.version == a.versionVector, "\(name)")
            #expect(status.operations == a.versionVector[a.replicaID], "\(name)")
            // A record that would leave a gap refuses the whole append, and nothing of it is stored.
            var b = Notebook(replicaID: .random(), wallClock: FixedWallClock(1_700_000_000_000))
            let (bid, _) = b.createNote(title: "b")
            let gap = records([try #require(try b.setPinned(bid, true))])
            await #expect(throws: RelayStorageError.self, "\(name)") {
                _ = try await storage.append(space: s, records: records(Array(all.prefix(0))) + gap)
            }
            #expect(try await storage.status(space: s).version[b.replicaID] == 0, "\(name)")
            // Spaces are separate.
            #expect(try await storage.status(space: uniqueSpace("other")).changes == 0, "\(name)")
        }
    }

    @Test(arguments: RelayBackend.available)
    func pagesAreCausalPrefixesInArrivalOrder(_ backend: RelayBackend) async throws {
        try await backend.with { storage in
            let name = backend.rawValue
            let s = uniqueSpace()
            // Three authors, interleaved arrivals.
            let stores = try (0 ..< 3).map { _ in try NoteStore.openInMemory() }
            var arrivals: [Change] = []
            for round in 0 ..< 4 {
                for store in stores {
                    let before = try store.versionVector
                    _ = try store.createNote(title: "round \(round)")
                    let new = try store.changes(since: before)
                    arrivals += new
                    _ = try await storage.append(space: s, records: records(new))
                }
            }
            var cursor = VersionVector()
            var seen: [RelayRecord] = []
            var pages = 0
            while true {
                let page = try await storage.page(space: s, after: cursor, limits: RelayPageLimits(maxChanges: 5))
                pages += 1
                for stored in page.records {
                    #expect(stored.record.startSeq == cursor[stored.record.author] + 1, "\(name): each author's part is contiguous")
                    cursor[stored.record.author] = stored.record.endSeq
                    seen.append(stored.record)
                }
                #expect(zip(page.records, page.records.dropFirst()).allSatisfy { $0.arrival < $1.arrival }, "\(name)")
                if !page.more { break }
                #expect(!page.records.isEmpty, "\(name)")
            }
            #expect(pages == 3, "\(name)")  // 12 records, 5 per page
            #expect(seen.map(\.startSeq) == arrivals.map(\.startSeq), "\(name)")
            #expect(seen.map(\.author) == arrivals.map(\.replica), "\(name)")
        }
    }

    /// Two copies of one replica's database that wrote the same seqs differently.
    static func forkedChanges() throws -> (first: [Change], second: [Change]) {
        let forked = ReplicaID.random()
        var one = Notebook(replicaID: forked, wallClock: FixedWallClock(1_700_000_000_000))
        var two = Notebook(replicaID: forked, wallClock: FixedWallClock(1_700_000_000_500))
        let (a, _) = one.createNote(title: "one", body: "copy one")
        _ = try one.setPinned(a, true)
        let (b, _) = two.createNote(title: "two", body: "copy two")
        _ = try two.setPinned(b, true)
        let first = one.changes(since: VersionVector())
        let second = two.changes(since: VersionVector())
        #expect(first.map(\.endSeq) == second.map(\.endSeq) && first != second, "the premise: one identity's seqs, written twice")
        return (first, second)
    }

    @Test(arguments: RelayBackend.available)
    func aBranchSentAgainIsKeptBesideTheChainOnce(_ backend: RelayBackend) async throws {
        try await backend.with { storage in
            let name = backend.rawValue
            let s = uniqueSpace()
            let (first, second) = try Self.forkedChanges()
            let author = first[0].replica
            #expect(try await storage.append(space: s, records: records(first)) == Array(first.indices), "\(name)")
            // A plain append of the other branch is a repeat: nothing is stored.
            #expect(try await storage.append(space: s, records: records(second)).isEmpty, "\(name)")
            // Sent again, it is kept beside the chain, once.
            #expect(try await storage.appendAgain(space: s, records: records(second)) == Array(second.indices), "\(name)")
            #expect(try await storage.appendAgain(space: s, records: records(second)).isEmpty, "\(name)")
            // The chain's own records sent again are already there: nothing is stored.
            #expect(try await storage.appendAgain(space: s, records: records(first)).isEmpty, "\(name)")
            let status = try await storage.status(space: s)
            #expect(status.version[author] == first.last!.endSeq, "\(name)")
            #expect(status.changes == first.count + second.count, "\(name)")
            #expect(status.bytes == (records(first) + records(second)).reduce(0) { $0 + $1.payload.count }, "\(name)")
            // A client that lacks the seqs gets both branches, the second marked as sent again,
            // each author's records in seq order (the chain's and those sent again merged).
            let page = try await storage.page(space: s, after: VersionVector(), limits: RelayPageLimits())
            #expect(page.records.filter { !$0.record.again }.map(\.record.payload) == records(first).map(\.payload), "\(name)")
            #expect(page.records.filter(\.record.again).map(\.record.payload) == records(second).map(\.payload), "\(name)")
            #expect(page.records.map(\.record.payload) == zip(records(first), records(second)).flatMap { [$0.payload, $1.payload] }, "\(name)")
            #expect(!page.more, "\(name)")
            // One that holds them gets neither.
            var holds = VersionVector()
            holds[author] = first.last!.endSeq
            #expect(try await storage.page(space: s, after: holds, limits: RelayPageLimits()).records.isEmpty, "\(name)")
            // Past the chain, a record sent again is an append like any other.
            var three = Notebook(replicaID: author, wallClock: FixedWallClock(1_700_000_009_000))
            _ = try three.apply(contentsOf: first)
            _ = three.createNote(title: "three")
            let tail = three.changes(since: holds)
            #expect(try await storage.appendAgain(space: s, records: records(tail)) == Array(tail.indices), "\(name)")
            #expect(try await storage.status(space: s).version[author] == tail.last!.endSeq, "\(name)")
            let after = try await storage.page(space: s, after: holds, limits: RelayPageLimits())
            #expect(after.records.map(\.record.payload) == records(tail).map(\.payload) && after.records.allSatisfy { !$0.record.again }, "\(name)")
        }
    }

    /// A relay file as schema v3 made it, holding `records` of `author` in space "s".
    static func writeVersion3Store(at path: String, author: ReplicaID, records: [RelayRecord]) throws {
        let queue = try DatabaseQueue(path: path)
        try SQLiteRelayStorage.migrator.migrate(queue, upTo: "v3-e2e-sealed-records")
        try queue.write { db in
            try db.execute(sql: "PRAGMA application_id = \(SQLiteRelayStorage.applicationID)")
            try db.execute(sql: "INSERT INTO relay_meta(key, value) VALUES ('relay_id', ?)", arguments: [Data(repeating: 7, count: 16)])
            for record in records {
                try db.execute(sql: "INSERT INTO relay_change(space, author, startSeq, endSeq, payload) VALUES ('s', ?, ?, ?, ?)",
                               arguments: [Data(author.raw.bytes), Int64(record.startSeq), Int64(record.endSeq), Data(record.payload)])
            }
            try db.execute(sql: "INSERT INTO relay_author(space, author, seq, changes, bytes) VALUES ('s', ?, ?, ?, ?)",
                           arguments: [Data(author.raw.bytes), Int64(records.last!.endSeq), records.count, records.reduce(0) { $0 + $1.payload.count }])
        }
    }

    /// A relay file from before records sent again (schema v3) opens with its records as they were.
    @Test func aStoreFromBeforeRecordsSentAgainKeepsItsRecords() async throws {
        let path = try temporaryFolder().appendingPathComponent("v3.sqlite").path
        let (first, second) = try Self.forkedChanges()
        let author = first[0].replica
        try Self.writeVersion3Store(at: path, author: author, records: records(first))
        let storage = try SQLiteRelayStorage(path: path)
        #expect(storage.relayID == [UInt8](repeating: 7, count: 16))
        #expect(try await storage.status(space: "s").version[author] == first.last!.endSeq)
        let page = try await storage.page(space: "s", after: VersionVector(), limits: RelayPageLimits())
        #expect(page.records.map(\.record.payload) == records(first).map(\.payload))
        #expect(page.records.allSatisfy { !$0.record.again })
        #expect(try await storage.appendAgain(space: "s", records: records(second)) == Array(second.indices))
    }

    @Test func refusesAFileThatIsNotARelayStore() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("replica.db").path
        _ = try NoteStore.open(path: path)
        #expect(throws: RelayStorageError.self) { _ = try SQLiteRelayStorage(path: path) }
    }

    @Test func relayIdentityIsStablePerFile() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("r.sqlite").path
        let first = try SQLiteRelayStorage(path: path)
        let again = try SQLiteRelayStorage(path: path)
        #expect(first.relayID == again.relayID)
        #expect(try SQLiteRelayStorage.inMemory().relayID != first.relayID)
        #expect(try SQLiteRelayStorage.inMemory(relayID: Array(repeating: 7, count: 16)).relayID == Array(repeating: 7, count: 16))
    }

    /// A relay store altered outside the relay (every column of every table, one at a time, given
    /// text, -1 and a blob) answers with its content or a `RelayStorageError`, never a trap: GRDB's
    /// row subscript stops the process on a value of another type than asked for.
    @Test func everyColumnOfAnotherTypeIsReadOrRefused() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let base = folder.appendingPathComponent("base.db").path
        var a = Notebook(replicaID: .random(), wallClock: FixedWallClock(1_700_000_000_000))
        let (id, created) = a.createNote(title: "t", body: "0123456789")
        let later = try #require(try a.setPinned(id, true))
        do {
            let storage = try SQLiteRelayStorage(path: base)
            _ = try await storage.append(space: "s", records: records([created]))
        }
        let pristine = try Data(contentsOf: URL(fileURLWithPath: base))
        let reader = try DatabaseQueue(path: base)
        let columns = try await reader.read { db in
            var columns: [(table: String, column: String)] = []
            for table in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name") {
                for column in try Row.fetchAll(db, sql: "PRAGMA table_info(\(table))") { columns.append((table, try column.decode(forColumn: "name"))) }
            }
            return columns
        }
        try reader.close()
        #expect(columns.count > 8)
        var cases = 0
        var refused = 0
        for (index, (table, column)) in columns.enumerated() {
            for (round, value) in ["'zz'", "-1", "x'ff00'"].enumerated() {
                let path = folder.appendingPathComponent("damaged-\(index)-\(round).db").path
                FileManager.default.createFile(atPath: path, contents: pristine)
                let queue = try DatabaseQueue(path: path)
                var damaged = true
                do {
                    try await queue.writeWithoutTransaction { db in try db.execute(sql: "UPDATE \(table) SET \(column) = \(value)") }
                } catch { damaged = false }
                try queue.close()
                guard damaged else { continue }
                cases += 1
                let storage: SQLiteRelayStorage
                do { storage = try SQLiteRelayStorage(path: path) } catch {
                    #expect(error is RelayStorageError, "\(table).\(column) = \(value), at open: \(error)")
                    refused += 1
                    continue
                }
                let calls: [@Sendable () async throws -> Void] = [
                    { _ = try await storage.status(space: "s") },
                    { _ = try await storage.page(space: "s", after: VersionVector(), limits: RelayPageLimits()) },
                    { _ = try await storage.totals() },
                    { _ = try await storage.append(space: "s", records: records([created, later])) },
                ]
                for call in calls {
                    do { try await call() } catch {
                        #expect(error is RelayStorageError, "\(table).\(column) = \(value): \(type(of: error)): \(error)")
                        refused += 1
                    }
                }
            }
        }
        #expect(cases > 20)
        #expect(refused > 5)
    }
}

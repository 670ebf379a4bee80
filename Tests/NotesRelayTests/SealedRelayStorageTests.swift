import Foundation
import NotesCRDT
@testable import NotesRelay
import NotesSync
import Testing

/// What every relay storage keeps for end-to-end encrypted spaces, against each backend (SQLite
/// in memory and in a file; PostgreSQL when configured): a space's first record fixes its kind,
/// sealed units come back as they were stored, and an author's first signing key is its only one.
struct SealedRelayStorageTests {
    /// A sealed record of `author`'s seqs `start...end` (the storage never reads a sealed payload).
    static func sealed(_ author: ReplicaID, _ start: UInt64, _ end: UInt64, key: [UInt8]? = nil) -> RelayRecord {
        RelayRecord(author: author, startSeq: start, endSeq: end, payload: [0xC5, UInt8(start & 0xFF), UInt8(end & 0xFF)] + Array(repeating: 7, count: 40),
                    sealed: true, signingKey: key)
    }

    /// A new author's first change, as a plain record.
    static func plainRecords() -> [RelayRecord] {
        var notebook = Notebook(replicaID: .random(), wallClock: FixedWallClock(1_700_000_000_000))
        return records([notebook.createNote(title: "p").1])
    }

    static func key(_ byte: UInt8) -> [UInt8] { Array(repeating: byte, count: 32) }

    /// Every record of the space, through pages.
    static func all(_ storage: any RelayStorage, _ space: String) async throws -> [RelayRecord] {
        var cursor = VersionVector()
        var found: [RelayRecord] = []
        while true {
            let page = try await storage.page(space: space, after: cursor, limits: RelayPageLimits(maxChanges: 2))
            for stored in page.records {
                found.append(stored.record)
                cursor[stored.record.author] = stored.record.endSeq
            }
            if !page.more { return found }
        }
    }

    @Test(arguments: RelayBackend.available)
    func aSealedSpaceServesItsUnitsIntactAndRefusesPlaintext(_ backend: RelayBackend) async throws {
        try await backend.with { storage in
            let name = backend.rawValue
            let space = uniqueSpace("sealed")
            let a = ReplicaID.random(), b = ReplicaID.random()
            let units = [Self.sealed(a, 1, 3), Self.sealed(b, 1, 1), Self.sealed(a, 4, 4)]
            #expect(try await storage.append(space: space, records: units) == [0, 1, 2], "\(name)")
            let served = try await Self.all(storage, space)
            // As stored: the payload byte for byte, the sealed flag; signing keys are not served.
            #expect(served.map { RelayRecord(author: $0.author, startSeq: $0.startSeq, endSeq: $0.endSeq, payload: $0.payload, sealed: $0.sealed) }
                == units, "\(name)")
            // Plaintext into the sealed space: refused whole, nothing stored.
            let plain = Self.plainRecords()
            await #expect(throws: RelayStorageError.self, "\(name)") {
                _ = try await storage.append(space: space, records: [Self.sealed(b, 2, 2)] + plain)
            }.map { error in
                #expect(error.kind == .encryption && error.message.contains("end-to-end encrypted"), "\(name): \(error.message)")
            }
            let status = try await storage.status(space: space)
            #expect(status.changes == 3 && status.version[b] == 1, "\(name)")
        }
    }

    @Test(arguments: RelayBackend.available)
    func aPlainSpaceRefusesSealedUnits(_ backend: RelayBackend) async throws {
        try await backend.with { storage in
            let name = backend.rawValue
            let space = uniqueSpace("plain")
            var notebook = Notebook(replicaID: .random(), wallClock: FixedWallClock(1_700_000_000_000))
            let (id, created) = notebook.createNote(title: "t")
            #expect(try await storage.append(space: space, records: records([created])) == [0], "\(name)")
            let next = records([try #require(try notebook.setPinned(id, true))])
            await #expect(throws: RelayStorageError.self, "\(name)") {
                _ = try await storage.append(space: space, records: next + [Self.sealed(.random(), 1, 1)])
            }.map { error in
                #expect(error.kind == .encryption && error.message.contains("not encrypted"), "\(name): \(error.message)")
            }
            #expect(try await storage.status(space: space).changes == 1, "\(name)")
            #expect(try await storage.append(space: space, records: next) == [0], "\(name)")
        }
    }

    /// A refused first append fixes nothing: the space's kind is decided by the first append that stores.
    @Test(arguments: RelayBackend.available)
    func aRefusedFirstAppendLeavesTheKindOpen(_ backend: RelayBackend) async throws {
        try await backend.with { storage in
            let name = backend.rawValue
            let space = uniqueSpace("open")
            let author = ReplicaID.random()
            // Sealed first, then a gap: refused, so the space is not sealed for it.
            await #expect(throws: RelayStorageError.self, "\(name)") {
                _ = try await storage.append(space: space, records: [Self.sealed(author, 2, 2)])
            }
            let stored = try await storage.append(space: space, records: Self.plainRecords())
            #expect(stored == [0], "\(name)")
        }
    }

    @Test(arguments: RelayBackend.available)
    func aUnitSignedWithAnotherKeyThanTheFirstIsRefused(_ backend: RelayBackend) async throws {
        try await backend.with { storage in
            let name = backend.rawValue
            let space = uniqueSpace("keys")
            let a = ReplicaID.random(), b = ReplicaID.random()
            #expect(try await storage.append(space: space, records: [Self.sealed(a, 1, 1, key: Self.key(1))]) == [0], "\(name)")
            // b's first unit (its key is new) and a unit of a under another key: refused whole.
            await #expect(throws: RelayStorageError.self, "\(name)") {
                _ = try await storage.append(space: space, records: [Self.sealed(b, 1, 1, key: Self.key(3)), Self.sealed(a, 2, 2, key: Self.key(2))])
            }.map { error in
                #expect(error.kind == .encryption && error.message.contains("another key"), "\(name): \(error.message)")
            }
            let status = try await storage.status(space: space)
            #expect(status.changes == 1 && status.version[b] == 0, "\(name)")
            // Even a repeat under another key is refused; under the first key, a's next unit is taken.
            await #expect(throws: RelayStorageError.self, "\(name)") {
                _ = try await storage.append(space: space, records: [Self.sealed(a, 1, 1, key: Self.key(2))])
            }
            #expect(try await storage.append(space: space, records: [Self.sealed(a, 1, 1, key: Self.key(1)), Self.sealed(a, 2, 2, key: Self.key(1))]) == [1],
                    "\(name)")
            // b's key was not kept by the refused append: a first unit of b under key 4 is taken.
            #expect(try await storage.append(space: space, records: [Self.sealed(b, 1, 1, key: Self.key(4))]) == [0], "\(name)")
            await #expect(throws: RelayStorageError.self, "\(name)") {
                _ = try await storage.append(space: space, records: [Self.sealed(b, 2, 2, key: Self.key(3))])
            }
        }
    }
}

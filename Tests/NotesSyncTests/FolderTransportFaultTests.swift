import NotesCRDT
import NotesStore
@testable import NotesSync
import Testing

/// The folder transport over an in-memory file system that does what real shared folders do.
struct FolderTransportFaultTests {
    let engine = SyncEngine(retry: RetryPolicy(maxAttempts: 1))

    func folder() throws -> (InMemoryFileSystem, FolderTransport) {
        let fileSystem = InMemoryFileSystem(clock: { 1_700_000_000_000 })
        try fileSystem.createDirectory("/shared")
        return (fileSystem, FolderTransport(folder: "/shared", fileSystem: fileSystem, maxFileBytes: 64 << 10))
    }

    /// The files a writer has in the folder.
    func files(of writer: ReplicaID, in fileSystem: InMemoryFileSystem) -> [String] {
        fileSystem.allFiles.filter { $0.hasPrefix("/shared/\(writer)/") }
    }

    /// A writer that stopped for good leaves a file that rots: the replica that holds its changes
    /// writes them again under its own subfolder, so a newcomer still gets them.
    @Test func aDeadWritersRottenFileIsRepublishedByWhoeverHoldsItsChanges() async throws {
        let (fileSystem, transport) = try folder()
        let dead = try NoteStore.openInMemory()
        let holder = try NoteStore.openInMemory()
        let newcomer = try NoteStore.openInMemory()
        _ = try dead.createNote(title: "from the dead writer", body: "last words")
        _ = try await engine.sync(dead, over: transport)
        _ = try await engine.sync(holder, over: transport)
        #expect(try holder.digest() == dead.digest())
        // The dead writer's only file rots.
        let path = try #require(files(of: dead.replicaID, in: fileSystem).first)
        var bytes = try #require(fileSystem.storedBytes(path))
        bytes[bytes.count / 2] ^= 0x40
        try fileSystem.write(bytes, to: path, modified: 1_700_000_000_000)
        let first = try await engine.sync(newcomer, over: transport)
        #expect(first.skipped.count == 1)
        // The holder notices and writes the dead writer's changes itself: at once with a transport
        // made for the sync (as the command line does); a long-lived transport trusts a file it
        // found good for a few rounds, then reads it whole again.
        var republished = 0
        for _ in 0 ..< VerdictCache.reverifyAfter {
            republished += try await engine.sync(holder, over: transport).sentChanges
            if republished > 0 { break }
        }
        #expect(republished > 0)
        #expect(files(of: holder.replicaID, in: fileSystem).contains { $0.contains("/\(dead.replicaID).") })
        _ = try await engine.sync(newcomer, over: transport)
        #expect(try newcomer.digest() == dead.digest())
    }

    /// A file whose name lies about its range (or its author) is skipped and reported, and never
    /// counts as holding anything: the changes it claims are still written by who has them.
    @Test(arguments: ["range", "author", "garbage", "oversized"])
    func aFileWhoseNameLiesIsNeverTrusted(lie: String) async throws {
        let (fileSystem, transport) = try folder()
        let a = try NoteStore.openInMemory()
        let b = try NoteStore.openInMemory()
        let forger = ReplicaID.random()
        _ = try a.createNote(title: "a's note", body: "real text")
        let changes = try a.changes(since: VersionVector())
        let last = changes.map(\.endSeq).max()!
        try fileSystem.createDirectory("/shared/\(forger)")
        let name: String
        var bytes = SyncBundle(sender: forger, senderVersion: try a.versionVector, changes: changes).encoded()
        switch lie {
        case "range": name = FolderTransport.fileName(author: a.replicaID, first: 1, last: last + 500)
        case "author": name = FolderTransport.fileName(author: b.replicaID, first: 1, last: last)
        case "garbage":
            name = FolderTransport.fileName(author: a.replicaID, first: 1, last: 1_000_000)
            bytes = Array(repeating: 0x42, count: 300)
        default:
            name = FolderTransport.fileName(author: a.replicaID, first: 1, last: 1_000_000)
            bytes = Array(repeating: 0, count: (64 << 10) + 1)
        }
        try fileSystem.write(bytes, to: "/shared/\(forger)/\(name)", modified: 1)
        // a must still write its changes: the forged file is not counted for it.
        let sent = try await engine.sync(a, over: transport)
        #expect(sent.sentChanges > 0, "\(lie)")
        let received = try await engine.sync(b, over: transport)
        #expect(received.skipped.contains { $0.contains(forger.description) }, "\(lie): \(received.skipped)")
        #expect(try b.digest() == a.digest(), "\(lie)")
        #expect(try b.pendingChanges.isEmpty, "\(lie)")
    }

    /// A reader that sees half a file skips it, then reads it whole once the copy is complete; a
    /// file that vanishes between the listing and the read is skipped, not fatal.
    @Test func halfAFileAndAVanishingFileAreSkippedForNow() async throws {
        let (fileSystem, transport) = try folder()
        let a = try NoteStore.openInMemory()
        let b = try NoteStore.openInMemory()
        let id = try a.createNote(title: "t", body: String(repeating: "x", count: 400))
        _ = try await engine.sync(a, over: transport)
        let path = try #require(files(of: a.replicaID, in: fileSystem).first)
        fileSystem.injectFault(.truncated(40), at: path)
        let half = try await engine.sync(b, over: transport)
        #expect(half.skipped.count == 1)
        #expect(half.applied == 0)
        fileSystem.injectFault(.vanishesOnRead, at: path)
        #expect(try await engine.sync(b, over: transport).skipped.count == 1)
        fileSystem.injectFault(nil, at: path)
        _ = try await engine.sync(b, over: transport)
        #expect(try b.note(id)?.body == String(repeating: "x", count: 400))
    }

    /// A replica's own file that no longer reads is removed and written again at its next sync.
    @Test func aDamagedOwnFileIsRewritten() async throws {
        let (fileSystem, transport) = try folder()
        let a = try NoteStore.openInMemory()
        _ = try a.createNote(title: "mine")
        _ = try await engine.sync(a, over: transport)
        let path = try #require(files(of: a.replicaID, in: fileSystem).first)
        let good = try #require(fileSystem.storedBytes(path))
        var bad = good
        bad[10] ^= 1
        try fileSystem.write(bad, to: path, modified: 5)
        let again = try await engine.sync(a, over: transport)
        #expect(again.sentChanges > 0)
        #expect(fileSystem.storedBytes(path) == good)
    }

    @Test func coverageNeverOverflows() {
        let author = ReplicaID.random()
        let version = FolderTransport.contiguousCoverage([
            (author, 1, UInt64.max), (author, 5, 6), (author, UInt64.max, UInt64.max),
        ])
        #expect(version[author] == UInt64.max)
        let gap = FolderTransport.contiguousCoverage([(author, 1, 4), (author, 6, 9)])
        #expect(gap[author] == 4)
    }
}

extension FolderTransportFaultTests {
    @Test func aTransportMadeForTheSyncNoticesRotAtOnce() async throws {
        let (fileSystem, _) = try folder()
        func fresh() -> FolderTransport { FolderTransport(folder: "/shared", fileSystem: fileSystem) }
        let dead = try NoteStore.openInMemory()
        let holder = try NoteStore.openInMemory()
        _ = try dead.createNote(title: "t", body: "b")
        _ = try await engine.sync(dead, over: fresh())
        _ = try await engine.sync(holder, over: fresh())
        let path = try #require(files(of: dead.replicaID, in: fileSystem).first)
        fileSystem.injectFault(.damaged(offset: 20, mask: 4), at: path)
        #expect(try await engine.sync(holder, over: fresh()).sentChanges > 0)
    }
}

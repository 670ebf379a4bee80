import Foundation
import NotesCRDT
import NotesStore
import NotesSync
import Testing

/// A shared folder and two copies of one database that both wrote as one identity (a fork): both
/// write into one subfolder, and the folder's coverage is read from file names, which cannot
/// tell the branches apart (issue 18).
struct FolderForkTests {
    let engine = SyncEngine(retry: RetryPolicy(maxAttempts: 1))

    /// Two stores with one identity, `base` written before the copy; the copy cannot be told
    /// from the original (the same label, as a copy made by an older build).
    static func copies() throws -> (first: NoteStore, second: NoteStore, note: NoteID, base: VersionVector) {
        let database = try InMemoryDatabase(label: "notes.db")
        let original = try NoteStore.open(database, options: StoreOptions(wallClock: FixedWallClock(1_700_000_000_000)))
        let note = try original.createNote(title: "shared", body: "base")
        let base = try original.versionVector
        try original.close()
        let copy = try InMemoryDatabase(copying: database, label: "notes.db")
        let first = try NoteStore.open(database, options: StoreOptions(wallClock: FixedWallClock(1_700_000_100_000)))
        let second = try NoteStore.open(copy, options: StoreOptions(wallClock: FixedWallClock(1_700_000_200_000)))
        #expect(first.replicaID == second.replicaID, "the premise: a copy that kept the identity")
        return (first, second, note, base)
    }

    /// Every change in the folder's files.
    static func filed(_ folder: URL) throws -> [Change] {
        var changes: [Change] = []
        for sub in try FileManager.default.contentsOfDirectory(atPath: folder.path) {
            let subfolder = folder.appendingPathComponent(sub)
            for name in try FileManager.default.contentsOfDirectory(atPath: subfolder.path) {
                let bytes = try [UInt8](Data(contentsOf: subfolder.appendingPathComponent(name)))
                changes += try SyncBundle.decode(bytes).changes
            }
        }
        return changes
    }

    /// Whether the files hold `change`'s every seq as it is.
    static func holds(_ files: [Change], _ change: Change) -> Bool {
        var next = change.startSeq
        for file in files.filter({ $0.replica == change.replica }).sorted(by: { $0.startSeq < $1.startSeq })
        where file.startSeq <= next && file.endSeq >= next && file.agrees(with: change) {
            next = file.endSeq + 1
            if next > change.endSeq { return true }
        }
        return false
    }

    /// A third replica that meets both branches of a fork keeps the one it has and says so: the
    /// other is refused, counted, and named in a `forks` line (it was counted as refused with no
    /// word of why). Once the copy that holds it repairs the fork, the same replica converges.
    @Test func aThirdReplicaNamesTheForkItMeets() async throws {
        let (one, two) = (try temporaryFolder(), try temporaryFolder())
        defer { for url in [one, two] { try? FileManager.default.removeItem(at: url) } }
        let (first, second, note, _) = try Self.copies()
        let third = try NoteStore.openInMemory()
        // No common first letter (the copies' equal operations at equal seqs are one operation),
        // and the second longer: a reader takes from a folder only seqs past what it holds.
        _ = try first.appendText(note, "ALPHA")
        _ = try second.appendText(note, "omega omega")
        _ = try await engine.sync(first, over: FolderTransport(folder: one.path))
        _ = try await engine.sync(second, over: FolderTransport(folder: two.path))
        let quiet = try await engine.sync(third, over: FolderTransport(folder: one.path))
        #expect(quiet.forks.isEmpty && quiet.rejected == 0)
        let report = try await engine.sync(third, over: FolderTransport(folder: two.path))
        #expect(report.rejected > 0)
        #expect(report.forks.count == 1)
        #expect(report.forks.first?.contains(first.replicaID.description) == true)
        #expect(report.forks.first?.contains("twice") == true)
        // The repair: the second copy meets the first's branch and re-issues its own.
        _ = try await engine.sync(second, over: FolderTransport(folder: one.path))
        for store in [third, first, second, third, first] {
            _ = try await engine.sync(store, over: FolderTransport(folder: one.path))
        }
        #expect(Set(try [first, second, third].map { try $0.digest() }).count == 1)
        let body = try #require(try third.notes([note]).first??.body)
        #expect(body.contains("ALPHA") && body.contains("omega omega"))
    }

    /// Compacting a subfolder that holds both branches at one seq keeps each branch's operations
    /// in some file: joined, one branch's file would be removed for the other's.
    @Test func compactionKeepsBothBranchesAtASeq() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let transport = FolderTransport(folder: folder.path)
        let (first, second, note, base) = try Self.copies()
        _ = try await engine.sync(first, over: transport)
        // The first branch: two edits, one file; the second: one edit at the first's first seq.
        try first.appendText(note, " one")
        try first.appendText(note, " two")
        try second.appendText(note, " other")
        let firstBranch = try first.changes(since: base)
        let secondBranch = try second.changes(since: base)
        let id = first.replicaID
        _ = try await transport.send(SyncBundle(sender: id, senderVersion: try first.versionVector, changes: firstBranch))
        _ = try await transport.send(SyncBundle(sender: id, senderVersion: try second.versionVector, changes: secondBranch))
        #expect(firstBranch.first?.startSeq == secondBranch.first?.startSeq, "the premise: both branches wrote one seq")

        _ = try transport.compact(writer: id, threshold: 1)
        let files = try Self.filed(folder)
        for change in firstBranch + secondBranch {
            #expect(Self.holds(files, change), "\(change.replica):\(change.startSeq)-\(change.endSeq) left the folder")
        }
    }

    /// The copy that keeps the identity goes on writing at seqs the withdrawn branch's file
    /// names already cover: its sync writes them as files anyway, and a newcomer gets them.
    @Test func aKeptBranchAtSeqsTheFileNamesCoverIsWritten() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let transport = FolderTransport(folder: folder.path)
        let (keeper, other, note, _) = try Self.copies()
        try keeper.appendText(note, "+kept")
        _ = try await engine.sync(keeper, over: transport)
        // The other copy wrote further before it knew (from another first character: the same
        // one typed after the same character is one operation, with one identity and timestamp);
        // a sync tool carried its file into the folder.
        for word in [" a", " longer branch", " that the other copy", " wrote before it knew"] { try other.appendText(note, word) }
        let old = other.replicaID
        let version = try other.versionVector
        _ = try await transport.send(SyncBundle(sender: old, senderVersion: version, changes: try other.changes(since: VersionVector())))
        // It finds the fork and re-issues its branch under a new identity.
        _ = try await engine.sync(other, over: transport)
        #expect(other.replicaID != old)
        // The keeper takes the re-issue (from a relay, before it reads the folder again) and goes
        // on typing at the seqs the other's file names cover.
        _ = try keeper.apply(other.changes(since: VersionVector()))
        _ = try await engine.sync(keeper, over: transport)
        #expect(keeper.replicaID == old)
        for word in [" more", " then"] { try keeper.appendText(note, word) }
        let written = try keeper.versionVector[old]
        #expect(written <= version[old], "the premise: the names cover the keeper's new seqs")
        _ = try await engine.sync(keeper, over: transport)

        let newcomer = try NoteStore.openInMemory()
        for store in [newcomer, other, newcomer, keeper, other] { _ = try await engine.sync(store, over: transport) }
        #expect(try newcomer.versionVector[old] == written)
        #expect(try newcomer.pendingChanges.isEmpty)
        #expect(try newcomer.digest() == keeper.digest())
        #expect(try other.digest() == keeper.digest())
        let body = try #require(try newcomer.note(note)?.body)
        #expect(body.contains("+kept") && body.contains(" more then") && body.contains(" wrote before it knew"), "\(body.debugDescription)")
    }
}

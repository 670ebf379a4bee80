import Foundation
import GRDB
import NotesCRDT
@testable import NotesStore
import NotesSync
import Testing

/// A store that finds it is a copy moves to a fresh identity before it writes (issue 18, part 1).
struct CopiedReplicaStoreTests {
    /// An in-memory copy under another label is a copied file: it takes a new id, keeps every
    /// note, and its new writes do not reuse the original's seqs.
    @Test func aCopyMovesToAFreshIdentityAndKeepsEverything() throws {
        let clock = FixedWallClock(1_700_000_000_000)
        let database = try InMemoryDatabase()
        let original = try NoteStore.open(database, options: StoreOptions(wallClock: clock))
        let note = try original.createNote(title: "shared", body: "base")
        let copyDatabase = try InMemoryDatabase(copying: database, label: "the copy")
        let copy = try NoteStore.open(copyDatabase, options: StoreOptions(wallClock: clock))
        #expect(copy.replicaID != original.replicaID)
        #expect(try copy.note(note)?.body == "base")
        let moves = try copy.identityChanges()
        #expect(moves.map(\.retired) == [original.replicaID])
        #expect(moves.map(\.new) == [copy.replicaID])
        #expect(try original.identityChanges().isEmpty)

        try original.appendText(note, " one")
        try copy.appendText(note, " two")
        let fromOriginal = try original.changes(since: try copy.versionVector)
        let fromCopy = try copy.changes(since: try original.versionVector)
        #expect(fromCopy.allSatisfy { $0.replica == copy.replicaID })
        let a = try original.apply(fromCopy)
        let b = try copy.apply(fromOriginal)
        #expect(a.rejected == 0 && b.rejected == 0)
        #expect(try original.digest() == copy.digest())
        let body = try #require(try original.note(note)?.body)
        #expect(body.contains(" one") && body.contains(" two"))

        // Closed and opened again on the same database, it stays who it became.
        let id = copy.replicaID
        try copy.close()
        let reopened = try NoteStore.open(copyDatabase, options: StoreOptions(wallClock: clock))
        #expect(reopened.replicaID == id)
        #expect(try reopened.identityChanges().count == 1)
        #expect(try reopened.digest() == original.digest())
    }

    /// A file copied with `cp` is a copy; the same file opened again is not.
    @Test func aCopiedFileIsToldFromTheSameFileOpenedAgain() throws {
        let folder = TemporaryFolder()
        let first = try NoteStore.open(path: folder.file("a.db"))
        let id = first.replicaID
        _ = try first.createNote(title: "x")
        try first.close()
        let again = try NoteStore.open(path: folder.file("a.db"))
        #expect(again.replicaID == id)
        try again.close()
        try FileManager.default.copyItem(atPath: folder.file("a.db"), toPath: folder.file("b.db"))
        let copy = try NoteStore.open(path: folder.file("b.db"))
        #expect(copy.replicaID != id)
        #expect(try copy.identityChanges().first?.retired == id)
        // Moved to the new id even when the snapshot was made as the old one.
        try copy.compact()
        _ = try copy.createNote(title: "y")
        #expect(try copy.versionVector[copy.replicaID] >= 1)
    }

    /// Changes in a store's own name that it never made (a copy that was not caught at open, as
    /// a cloned disk keeps the inode) fork from what it wrote: it moves to a fresh id before it
    /// writes again, re-issues what it made from the fork on as that id, and takes the copy's
    /// branch, so both are kept (issue 18, repair).
    @Test func changesInItsOwnNameThatItNeverMadeMoveItToAFreshIdentity() throws {
        let database = try InMemoryDatabase()
        let a = try NoteStore.open(database, options: StoreOptions(wallClock: FixedWallClock(1_700_000_000_000)))
        let note = try a.createNote(title: "t", body: "base")
        // The undetected twin: a notebook with the same identity and history, writing on its own.
        var twin = try Notebook(snapshot: try a.notebook.snapshot(), wallClock: FixedWallClock(1_700_000_100_000))
        _ = try twin.insertText(note, at: twin.body(of: note)!.count, " twin")
        try a.appendText(note, " mine")
        let old = a.replicaID
        let made = try a.versionVector[old]
        // The twin's seq 2 against ours: an equivocation; past it, seqs we never made.
        _ = try twin.insertText(note, at: twin.body(of: note)!.count, " more")
        let report = try a.apply(twin.changes(since: VersionVector()))
        #expect(report.foreignOwnChanges >= 1)
        #expect(report.forksRepaired == 1)
        // A sync is told too.
        #expect(IntegrationReport(report).foreignOwnChanges == report.foreignOwnChanges)
        #expect(IntegrationReport(report).forksRepaired == 1)
        #expect(a.replicaID != old)
        #expect(try a.identityChanges().map(\.retired) == [old])
        // Both branches: its own re-issued, the twin's under the old identity.
        let body = try #require(try a.note(note)?.body)
        #expect(body.contains("mine") && body.contains("twin") && body.contains("more"), "\(body)")
        #expect(try a.versionVector[old] == twin.versionVector[old])
        let reissued = try a.versionVector[a.replicaID]
        #expect(reissued > 0 && reissued <= made + 2)
        // Its next write is under the new id.
        try a.appendText(note, "!")
        #expect(try a.versionVector[a.replicaID] == reissued + 1)
        #expect(try a.note(note)?.body?.hasSuffix("!") == true)
        var check = twin
        check.apply(contentsOf: try a.changes(since: twin.versionVector))
        #expect(check.digest() == (try a.digest()))
    }

    /// A copy that went on from where the store stopped (no fork: the store made nothing past
    /// the copy point) is taken in the same sync: the store moves to a fresh identity first in
    /// effect, and the copy's operations, and a third replica's change made on them, are applied
    /// as another's. Before, they were refused and only a second sync brought them.
    @Test func aCopysOperationsPastWhatTheStoreMadeAreTakenInTheSameSync() throws {
        let database = try InMemoryDatabase()
        let a = try NoteStore.open(database, options: StoreOptions(wallClock: FixedWallClock(1_700_000_000_000)))
        let note = try a.createNote(title: "t", body: "base")
        let old = a.replicaID
        let made = try a.versionVector[old]
        var twin = try Notebook(snapshot: try a.notebook.snapshot(), wallClock: FixedWallClock(1_700_000_100_000))
        _ = try twin.insertText(note, at: twin.body(of: note)!.count, " twin")
        _ = try twin.setTitle(note, "by the twin")
        var third = Notebook(replicaID: ReplicaID(Identifier128(high: 0xBEEF, low: 2)), wallClock: FixedWallClock(1_700_000_200_000))
        third.apply(contentsOf: twin.changes(since: VersionVector()))
        _ = try third.insertText(note, at: 0, ">")
        let report = try a.apply(twin.changes(since: try a.versionVector) + third.changes(since: twin.versionVector))
        #expect(report.rejected == 0 && report.pending == 0 && report.forksRepaired == 0)
        #expect(report.foreignOwnChanges >= 1)
        #expect(a.replicaID != old)
        #expect(try a.identityChanges().map(\.retired) == [old])
        #expect(try a.read("former") { try a.formerIdentities($0) } == [old: made])
        #expect(try a.digest() == third.digest())
        #expect(try a.note(note)?.body == ">base twin")
        // Its next write is under the new identity, after what the copy made.
        try a.appendText(note, "!")
        #expect(try a.versionVector[a.replicaID] == 1)
        #expect(try a.versionVector[old] == twin.versionVector[old])
        // Opened again, it holds the same.
        try a.close()
        let reopened = try NoteStore.open(database, options: StoreOptions(wallClock: FixedWallClock(1_700_000_300_000)))
        #expect(try reopened.note(note)?.body == ">base twin!")
        #expect(try reopened.note(note)?.title == "by the twin")
    }

    /// Two undetected copies that both find the other in the same millisecond (same history, same
    /// clock, same reason) move to different identities: the move mixes in the store's own random
    /// bits. Before, both drew the same fresh id and forked again at once.
    @Test func twoCopiesThatMoveInTheSameMillisecondDrawDifferentIdentities() throws {
        let clock = FixedWallClock(1_700_000_000_000)
        let database = try InMemoryDatabase()
        let a = try NoteStore.open(database, options: StoreOptions(wallClock: clock))
        let note = try a.createNote(title: "t", body: "base")
        // The same label: nothing at open tells the copy (a cloned disk).
        let b = try NoteStore.open(try InMemoryDatabase(copying: database, label: database.label), options: StoreOptions(wallClock: clock))
        #expect(b.replicaID == a.replicaID)
        // Two more, whose random bits are the same: a seeded source replays the same move.
        let seeded = { @Sendable in UInt64(42) }
        let c = try NoteStore.open(try InMemoryDatabase(copying: database, label: database.label), options: StoreOptions(wallClock: clock, entropy: seeded))
        let d = try NoteStore.open(try InMemoryDatabase(copying: database, label: database.label), options: StoreOptions(wallClock: clock, entropy: seeded))
        var twin = try Notebook(snapshot: try a.notebook.snapshot(), wallClock: FixedWallClock(1_700_000_100_000))
        _ = try twin.insertText(note, at: 0, "x")
        let past = twin.changes(since: try a.versionVector)
        _ = try a.apply(past)
        _ = try b.apply(past)
        #expect(a.replicaID != twin.replicaID && b.replicaID != twin.replicaID)
        #expect(a.replicaID != b.replicaID)
        _ = try c.apply(past)
        _ = try d.apply(past)
        #expect(c.replicaID == d.replicaID && c.replicaID != twin.replicaID)
    }

    /// A copy caught at open made none of the seqs of the identity it left: when that identity
    /// forks (its original and an undetected twin both write), the copy is a third replica to it
    /// and re-issues nothing; a copy that did withdrew the original's branch, and the original's
    /// later edits on it waited or landed on the other branch.
    @Test func aCopyCaughtAtOpenDoesNotRepairForksOfTheIdentityItLeft() throws {
        let clock = FixedWallClock(1_700_000_000_000)
        let database = try InMemoryDatabase()
        let original = try NoteStore.open(database, options: StoreOptions(wallClock: clock))
        let note = try original.createNote(title: "t", body: "base")
        let old = original.replicaID
        let copy = try NoteStore.open(try InMemoryDatabase(copying: database, label: "the copy"), options: StoreOptions(wallClock: clock))
        #expect(copy.replicaID != old)
        #expect(try copy.read("former") { try copy.formerIdentities($0) } == [old: 0])
        var twin = try Notebook(snapshot: try original.notebook.snapshot(), wallClock: FixedWallClock(1_700_000_100_000))
        _ = try twin.insertText(note, at: 0, "twin ")
        let since = try copy.versionVector
        try original.appendText(note, " original")
        _ = try copy.apply(original.changes(since: since))
        let report = try copy.apply(twin.changes(since: since))
        #expect(report.forksRepaired == 0)
        #expect(try copy.reissues().isEmpty)
        #expect(try copy.identityChanges().count == 1)
        #expect(try copy.note(note)?.body == "base original")
    }
}

/// Changes of others that claim to have seen seqs in the store's name that it never made.
struct SeenUnmadeSeqsTests {
    /// A delete made "after seeing" the store's next seq (a copy of the store wrote it) waits for
    /// that seq. Before, the store kept its identity: its own next edit was that seq, and at the
    /// next open the waiting delete was released and stood against the edit it never saw, so the
    /// note and the edit were gone. Now the store moves to a fresh identity when the delete
    /// arrives: its edit is another identity's, and the delete keeps waiting for the copy's seq.
    /// (A sync of the copy's seq brings the delete back; it then stands against what the copy saw.)
    @Test func aChangeThatSawSeqsTheStoreNeverMadeMovesItAndCannotDeleteItsNextEdit() throws {
        let clock = FixedWallClock(1_700_000_000_000)
        let database = try InMemoryDatabase()
        let store = try NoteStore.open(database, options: StoreOptions(wallClock: clock))
        let note = try store.createNote(title: "t", body: "base")
        let old = store.replicaID
        let made = try store.versionVector[old]
        var other = Notebook(replicaID: ReplicaID(Identifier128(high: 0xFEED, low: 1)), wallClock: FixedWallClock(1_700_000_000_500))
        other.apply(contentsOf: try store.changes(since: VersionVector()))
        let delete = try #require(try other.setState(note, .deleted))
        var claimed = delete.dependencies
        claimed[old] = made + 1
        let crafted = Change(replica: delete.replica, startSeq: delete.startSeq, timestamp: delete.timestamp, dependencies: claimed,
                             operations: delete.operations)
        let report = try store.apply([crafted])
        #expect(report.pending == 1 && report.rejected == 0)
        #expect(report.foreignOwnChanges == 1)
        #expect(store.replicaID != old)
        #expect(try store.identityChanges().last?.reason.contains("made after seeing such seqs") == true)
        _ = try store.setTitle(note, "mine")  // one seq: the one the delete claims to have seen
        try store.close()
        let reopened = try NoteStore.open(database, options: StoreOptions(wallClock: clock))
        // (Before, the replayed notebook said deleted while the stored row still said active.)
        let kept = try #require(try reopened.notebook.note(note))
        #expect(kept.title == "mine" && kept.state == .active)
        #expect(try reopened.note(note)?.state == .active)
        #expect(try reopened.versionVector[old] == made)
        #expect(try reopened.status().pendingChanges == 1)
    }
}

import Foundation
import GRDB
import NotesCRDT
@testable import NotesStore
import Testing

/// Two copies of one database that both wrote as one identity (a copy no check caught, or made
/// with a build before the checks) converge once they meet, each keeping the other's edits
/// (issue 18, part 1: repair).
struct ForkRepairStoreTests {
    /// Two databases with one identity that both wrote: `second` is a copy `first` cannot tell
    /// from itself (the same label stands for the same file identity, and no seq mark).
    struct Copies {
        var first: NoteStore
        var second: NoteStore
        var firstDatabase: InMemoryDatabase
        var secondDatabase: InMemoryDatabase
        var note: NoteID
        var onlyOnSecond: NoteID
    }

    static func diverged(clock: any WallClock = FixedWallClock(1_700_000_000_000)) throws -> Copies {
        let firstDatabase = try InMemoryDatabase(label: "notes.db")
        let first = try NoteStore.open(firstDatabase, options: StoreOptions(wallClock: clock))
        let note = try first.createNote(title: "shared", body: "base")
        try first.close()
        let secondDatabase = try InMemoryDatabase(copying: firstDatabase, label: "notes.db")
        let a = try NoteStore.open(firstDatabase, options: StoreOptions(wallClock: FixedWallClock(1_700_000_100_000)))
        let b = try NoteStore.open(secondDatabase, options: StoreOptions(wallClock: FixedWallClock(1_700_000_200_000)))
        #expect(a.replicaID == b.replicaID, "the premise: a copy that kept the identity")
        _ = try a.appendText(note, " (edited on L1)")
        _ = try b.appendText(note, " [typed on L2]")
        let only = try b.createNote(title: "only on L2", body: "new")
        return Copies(first: a, second: b, firstDatabase: firstDatabase, secondDatabase: secondDatabase, note: note, onlyOnSecond: only)
    }

    /// What a shared folder does: each reads everything the other wrote.
    static func exchange(_ from: NoteStore, into to: NoteStore) throws -> ApplyReport {
        try to.apply(from.changes(since: VersionVector()))
    }

    @Test func copiesThatBothWroteConvergeWithBothEdits() throws {
        let copies = try Self.diverged()
        let old = copies.first.replicaID
        let first = try Self.exchange(copies.first, into: copies.second)
        #expect(first.forksRepaired == 1)
        #expect(copies.second.replicaID != old, "the copy that found the fork writes as a new identity")
        let second = try Self.exchange(copies.second, into: copies.first)
        #expect(second.rejected == 0)
        _ = try Self.exchange(copies.first, into: copies.second)
        #expect(try copies.first.digest() == copies.second.digest())
        let body = try #require(try copies.first.note(copies.note)?.body)
        #expect(body.contains("(edited on L1)") && body.contains("[typed on L2]"), "\(body)")
        #expect(try copies.first.note(copies.onlyOnSecond)?.title == "only on L2")
        // Each says what happened.
        let reissues = try copies.second.reissues()
        #expect(reissues.count >= 1 && reissues.allSatisfy { $0.own && $0.replica == old && $0.by == copies.second.replicaID })
        #expect(try copies.first.reissues().allSatisfy { !$0.own && $0.replica == old })
        #expect(try copies.second.identityChanges().last?.reason.contains("re-issued") == true)
        // Both hold the branch that stays over the re-issued seqs: what a sync sends a relay again.
        let start = try #require(reissues.map(\.startSeq).min())
        let end = try #require(reissues.map { $0.startSeq + $0.count - 1 }.max())
        let held = try copies.first.versionVector[old]
        #expect(try copies.first.keptBranches() == [old: start ... min(end, held)])
        #expect(try copies.second.keptBranches() == copies.first.keptBranches())
    }

    /// What the repair wrote is what the database holds: opened again, the same notes, digest and log.
    @Test func theRepairIsDurable() throws {
        let copies = try Self.diverged()
        _ = try Self.exchange(copies.first, into: copies.second)
        let id = copies.second.replicaID
        let digest = try copies.second.digest()
        let changes = try copies.second.changes(since: VersionVector())
        let listed = try copies.second.list().map(\.title).sorted()
        try copies.second.close()
        let reopened = try NoteStore.open(copies.secondDatabase, options: StoreOptions(wallClock: FixedWallClock(1_700_000_300_000)))
        #expect(reopened.replicaID == id)
        #expect(try reopened.digest() == digest)
        #expect(try reopened.changes(since: VersionVector()) == changes)
        #expect(try reopened.list().map(\.title).sorted() == listed)
        #expect(try reopened.search("typed").count == 1)
        // It writes on as its new identity.
        _ = try reopened.appendText(copies.note, "!")
        #expect(try reopened.changes(since: try copies.first.versionVector).allSatisfy { $0.replica == id })
    }

    /// A copy that moved to a fresh identity when a sync brought the other copy's operations past
    /// what it made (no fork seen yet), and later meets the other's operations at seqs it made:
    /// the fork is of an identity it left, and it re-issues what it made there as the identity it
    /// has, without moving again.
    @Test func aForkOfAnIdentityItLeftIsRepairedWithoutMovingAgain() throws {
        let copies = try Self.diverged()
        let old = copies.second.replicaID
        // The first copy goes on past what the second made.
        let made = try copies.second.versionVector[old]
        while try copies.first.versionVector[old] <= made { _ = try copies.first.appendText(copies.note, " more") }
        var past = VersionVector()
        past[old] = made
        let moving = try copies.second.apply(copies.first.changes(since: past))
        #expect(moving.forksRepaired == 0 && moving.foreignOwnChanges >= 1)
        #expect(copies.second.replicaID != old)
        #expect(try copies.second.read("former") { try copies.second.formerIdentities($0) } == [old: made])
        let current = copies.second.replicaID
        let report = try Self.exchange(copies.first, into: copies.second)
        #expect(report.forksRepaired == 1)
        #expect(copies.second.replicaID == current)
        _ = try Self.exchange(copies.second, into: copies.first)
        _ = try Self.exchange(copies.first, into: copies.second)
        #expect(try copies.first.digest() == copies.second.digest())
        let body = try #require(try copies.second.note(copies.note)?.body)
        #expect(body.contains("(edited on L1)") && body.contains("[typed on L2]") && body.contains(" more"), "\(body)")
    }

    /// A copy caught at open (a `cp` of a database whose identity had already forked) made none
    /// of its seqs: it re-issues nothing; the copies that wrote them repair the fork, and it
    /// converges with them.
    @Test func aCopyCaughtAtOpenLeavesTheForkToTheCopiesThatWroteIt() throws {
        let copies = try Self.diverged()
        let old = copies.second.replicaID
        let third = try NoteStore.open(try InMemoryDatabase(copying: copies.secondDatabase, label: "moved.db"),
                                       options: StoreOptions(wallClock: FixedWallClock(1_700_000_400_000)))
        #expect(third.replicaID != old)
        let report = try Self.exchange(copies.first, into: third)
        #expect(report.forksRepaired == 0)
        #expect(try third.reissues().isEmpty)
        // The copies that wrote the seqs meet and repair; then everyone converges.
        _ = try Self.exchange(copies.first, into: copies.second)
        for _ in 0 ..< 2 {
            for (from, to) in [(copies.second, copies.first), (copies.first, third), (third, copies.second), (copies.second, third)] {
                _ = try Self.exchange(from, into: to)
            }
        }
        #expect(try copies.first.digest() == copies.second.digest())
        #expect(try third.digest() == copies.first.digest())
        let body = try #require(try third.note(copies.note)?.body)
        #expect(body.contains("(edited on L1)") && body.contains("[typed on L2]"), "\(body)")
    }

    /// A third store that took the copy's branch before the repair drops it when the re-issue
    /// comes, and ends with the others.
    @Test func aThirdStoreThatHeldTheCopysBranchConverges() throws {
        let copies = try Self.diverged()
        let third = try NoteStore.openInMemory(options: StoreOptions(wallClock: FixedWallClock(1_700_000_000_000)))
        _ = try Self.exchange(copies.second, into: third)
        #expect(try third.note(copies.onlyOnSecond) != nil)
        _ = try Self.exchange(copies.first, into: copies.second)
        _ = try Self.exchange(copies.second, into: third)
        _ = try Self.exchange(copies.first, into: third)
        _ = try Self.exchange(copies.second, into: copies.first)
        #expect(try third.digest() == copies.second.digest())
        #expect(try third.digest() == copies.first.digest())
        #expect(try third.status().pendingChanges == 0 && third.quarantinedChanges().isEmpty)
    }

    /// A copy that first sees only the other copy's tail re-issues its own seqs from there, takes
    /// the tail, and later meets the other's earlier seqs: the second repair re-issues only what it
    /// made and has not re-issued yet. Taking the seqs of the first repair again re-issued the
    /// other copy's operations as its own, and everyone holding them dropped them (the
    /// `forked-replica` simulation, seed 47).
    @Test func aRepairInTwoStepsReissuesOnlyWhatTheCopyMade() throws {
        let copies = try Self.diverged()
        let old = copies.first.replicaID
        let firstMade = try copies.first.versionVector[old]
        // The first copy goes on past its first edit, over seqs the second wrote too.
        while try copies.first.versionVector[old] < copies.second.versionVector[old] {
            _ = try copies.first.appendText(copies.note, " and more on L1")
        }
        let made = try copies.first.versionVector[old]
        // Its timestamps are older than the second's, so its earlier seqs cannot be shown forked
        // by timestamps alone: the tail shows only the fork from there.
        var since = VersionVector()
        since[old] = firstMade
        let tail = try copies.second.changes(since: since)
        let step1 = try copies.first.apply(tail)
        #expect(step1.forksRepaired == 1)
        let afterStep1 = try copies.first.reissues().filter(\.own)
        #expect(afterStep1.allSatisfy { $0.startSeq > firstMade }, "the tail shows the fork only from past the first edit")
        let step2 = try Self.exchange(copies.second, into: copies.first)
        #expect(step2.forksRepaired == 1)
        // Every seq the first copy made is re-issued exactly once, and nothing else.
        var reissued: [UInt64] = []
        for record in try copies.first.reissues() where record.own {
            #expect(record.replica == old)
            reissued += Array(record.startSeq ..< record.startSeq + record.count)
        }
        let base = try #require(reissued.min())
        #expect(reissued.sorted() == Array(base ... made), "re-issued \(reissued.sorted()), made \(base) ... \(made)")
        for _ in 0 ..< 2 {
            _ = try Self.exchange(copies.first, into: copies.second)
            _ = try Self.exchange(copies.second, into: copies.first)
        }
        #expect(try copies.first.digest() == copies.second.digest())
        for store in [copies.first, copies.second] {
            // The second copy's operations at the seqs the first step re-issued stay its own.
            let body = try #require(try store.note(copies.note)?.body)
            #expect(body.contains("[typed on L2]"), "\(body)")
            #expect(try store.note(copies.onlyOnSecond)?.title == "only on L2")
        }
        // The first step's re-issue names the first copy's earlier characters, which the second
        // step withdrew: it is quarantined, and that copy's later changes wait behind it
        // (Docs/Architecture.md, "Copied replicas", Limits).
        withKnownIssue("a repair in two steps: the first step's re-issue names characters the second withdrew") {
            for store in [copies.first, copies.second] {
                let body = try #require(try store.note(copies.note)?.body)
                #expect(body.contains("(edited on L1)") && body.contains(" and more on L1"), "\(body)")
                #expect(try store.status().pendingChanges == 0 && store.quarantinedChanges().isEmpty)
            }
        }
    }
}

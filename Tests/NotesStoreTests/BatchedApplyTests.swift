import Foundation
import NotesCRDT
import NotesTestSupport
@testable import NotesStore
import Testing

/// `NoteStore.apply(batches:)`, the path a bootstrap takes: the history handed over piece by
/// piece must end exactly where applying it at once ends, and a failure part way leaves nothing.
struct BatchedApplyTests {
    /// A source replica with random edits of several notes (so that most batches touch notes
    /// that earlier ones touched too), and its history in causal order.
    static func history(seed: UInt64) throws -> (source: NoteStore, changes: [Change]) {
        let source = try NoteStore.openInMemory()
        var rng = SplitMix64(seed: seed)
        var changes: [Change] = []
        var version = VersionVector()
        for _ in 0 ..< 120 {
            try MaterializationTests.randomEdit(source, &rng, renamingTags: true)
            // Taken edit by edit: the log joins a replica's run of changes into one.
            changes += try source.changes(since: version)
            version = try source.versionVector
        }
        return (source, changes)
    }

    /// Cuts `changes` into pieces of `size`, last to first within the history when `reversed`.
    static func batches(_ changes: [Change], size: Int, reversed: Bool) -> [[Change]] {
        let pieces = stride(from: 0, to: changes.count, by: size).map { Array(changes[$0 ..< min($0 + size, changes.count)]) }
        return reversed ? pieces.reversed() : pieces
    }

    @Test(arguments: [1, 3, 17], [false, true])
    func batchesEndWhereOneApplyEnds(_ size: Int, _ reversed: Bool) throws {
        for seed: UInt64 in 0 ..< 4 {
            let (source, changes) = try Self.history(seed: seed)
            let whole = try NoteStore.openInMemory()
            try whole.apply(changes)

            let batched = try NoteStore.openInMemory()
            var pieces = Self.batches(changes, size: size, reversed: reversed)[...]
            var seen: [ApplyReport] = []
            let report = try batched.apply(batches: { pieces.popFirst() }, progress: { seen.append($0) })

            #expect(report.applied == changes.count, "seed \(seed)")
            #expect(report.pending == 0)
            #expect(seen.count == Self.batches(changes, size: size, reversed: reversed).count)
            #expect(seen.map(\.applied) == seen.map(\.applied).sorted(), "progress only grows")
            #expect(try batched.digest() == source.digest(), "seed \(seed)")
            #expect(try batched.versionVector == whole.versionVector)
            #expect(try MaterializationTests.tables(batched) == MaterializationTests.tables(whole), "seed \(seed)")
            try MaterializationTests.checkIndex(batched)
            // The log holds the same history: a third replica fed from it ends the same.
            let third = try NoteStore.openInMemory()
            try third.apply(try batched.changes(since: VersionVector()))
            #expect(try third.digest() == source.digest())
        }
    }

    /// A batch source that fails after handing over some batches (a file that changed on disk
    /// between the check and the apply) rolls the whole run back.
    @Test func aFailingBatchSourceLeavesNothing() throws {
        struct Damaged: Error {}
        let (_, changes) = try Self.history(seed: 9)
        let store = try NoteStore.openInMemory()
        let first = try store.createNote(title: "kept", body: "before the import")
        let digest = try store.digest()
        let version = try store.versionVector
        var pieces = Self.batches(changes, size: 10, reversed: false)[...]
        var handed = 0
        #expect(throws: (any Error).self) {
            try store.apply(batches: {
                handed += 1
                if handed == 3 { throw Damaged() }
                return pieces.popFirst()
            })
        }
        #expect(try store.digest() == digest)
        #expect(try store.versionVector == version)
        #expect(try store.list(.all).map(\.id) == [first])
        // And the store still applies the same history afterwards.
        #expect(try store.apply(changes).applied == changes.count)
    }
}

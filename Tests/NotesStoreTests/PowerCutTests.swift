import Foundation
import NotesCRDT
import NotesTestSupport
@testable import NotesStore
import Testing

/// `NoteStore.cutPower(afterCommits:)`, which the simulator's `crashesAtCommit` uses: a commit
/// that fails leaves the store as it was, in memory and on disk, and a restart reads the same.
struct PowerCutTests {
    @Test func aReceiveCutAtItsCommitLeavesNoTrace() throws {
        for seed: UInt64 in 0 ..< 3 {
            let (_, changes) = try BatchedApplyTests.history(seed: seed)
            let half = changes.count / 2
            let database = try InMemoryDatabase()
            let store = try NoteStore.open(database)
            try store.apply(Array(changes[..<half]))
            let version = try store.versionVector
            let digest = try store.notebook.digest()

            let cut = store.cutPower(afterCommits: 0)
            #expect(throws: StoreError.self) { try store.apply(Array(changes[half...])) }
            #expect(cut.happened)
            store.restorePower(cut)
            #expect(try store.versionVector == version, "seed \(seed): memory kept what was never committed")
            #expect(try store.notebook.digest() == digest)

            try store.close()
            let restarted = try NoteStore.open(database)
            #expect(try restarted.versionVector == version)
            #expect(try restarted.notebook.digest() == digest)
            try restarted.apply(Array(changes[half...]))
            let whole = try NoteStore.openInMemory()
            try whole.apply(changes)
            #expect(try restarted.notebook.digest() == whole.notebook.digest())
        }
    }

    @Test func anEditCutAtItsCommitIsNotThereAfterARestart() throws {
        let database = try InMemoryDatabase()
        let store = try NoteStore.open(database)
        let note = try store.createNote(title: "cut", body: "before")
        let cut = store.cutPower(afterCommits: 0)
        #expect(throws: StoreError.self) { try store.appendText(note, " lost") }
        // Dead: nothing commits until the power comes back, whatever the call.
        #expect(throws: StoreError.self) { try store.setTitle(note, "also lost") }
        store.restorePower(cut)
        #expect(try store.note(note)?.body == "before")
        try store.close()

        let restarted = try NoteStore.open(database)
        #expect(try restarted.note(note)?.body == "before")
        #expect(try restarted.note(note)?.title == "cut")
        #expect(try restarted.appendText(note, " after"))
        #expect(try restarted.note(note)?.body == "before after")
    }

    @Test func theCommitsBeforeTheCutGoThrough() throws {
        let database = try InMemoryDatabase()
        let store = try NoteStore.open(database)
        let note = try store.createNote(title: "t", body: "")
        let cut = store.cutPower(afterCommits: 2)
        try store.appendText(note, "a")
        try store.appendText(note, "b")
        #expect(throws: StoreError.self) { try store.appendText(note, "c") }
        store.restorePower(cut)
        try store.close()
        #expect(try NoteStore.open(database).note(note)?.body == "ab")
    }
}

import NotesCRDT
@testable import NotesSimulator
import NotesStore
import Testing

/// The checks added after planting bugs in the shipped code (Scripts/mutants.sh): each passes on
/// what a store really gives and fails on a broken state.
struct SafetyCheckTests {
    /// Two different states of a note must not share a digest: the ledger accepts a note's states
    /// as it changes, and names the field when one digest comes back for another state.
    @Test func aDigestThatStandsForTwoStatesIsCaught() throws {
        let store = try NoteStore.openInMemory()
        let id = try store.createNote(title: "Trip", body: "café 日本", tags: ["home"])
        var ledger = Simulation.DigestLedger()
        var notebook = try store.notebook
        #expect(ledger.record(notebook, id) == nil)
        #expect(ledger.record(notebook, id) == nil)  // the same state again
        let unpinned = try #require(notebook.noteDigest(id))
        let unpinnedState = try #require(Simulation.NoteFingerprint(notebook, id))
        _ = try store.setPinned(id, true)
        notebook = try store.notebook
        #expect(ledger.record(notebook, id) == nil)  // a new state, a new digest
        _ = try store.setTag(id, "home", member: false)
        notebook = try store.notebook
        #expect(ledger.record(notebook, id) == nil)

        // A digest that left out the pinned flag would give the pinned state the unpinned digest.
        var pinnedState = try #require(Simulation.NoteFingerprint(notebook, id))
        pinnedState.tagKeys = unpinnedState.tagKeys
        let problem = try #require(ledger.record(digest: unpinned, pinnedState))
        #expect(problem.contains("pinned"))
    }

    /// The tag rows must list exactly the CRDT's notes in each tag; one the store forgot to remove
    /// from a tag is named.
    @Test func aTagRowLeftBehindIsCaught() throws {
        let store = try NoteStore.openInMemory()
        let a = try store.createNote(title: "A", tags: ["home", "work"])
        let b = try store.createNote(title: "B", tags: ["work"])
        _ = try store.setTag(a, "work", member: false)
        _ = try store.setState(b, .trashed)
        let notebook = try store.notebook
        #expect(try Simulation.tagRowDifferences(store, notebook).isEmpty)
        let byTag = Simulation.notesByTag(notebook)
        #expect(byTag[Notebook.tagKey("work")] == [b])
        #expect(byTag[Notebook.tagKey("home")] == [a])

        // The CRDT as it would be had the removal not reached the rows: they now miss a note.
        let other = try NoteStore.openInMemory()
        _ = try other.createNote(title: "C", tags: ["work"])
        let problems = try Simulation.tagRowDifferences(store, try other.notebook)
        #expect(problems.contains { $0.hasPrefix("tag work:") })
    }

    /// A relay sync that succeeded leaves the device with all the relay held when it began.
    @Test func aSyncThatLeftSomethingBehindIsCaught() {
        let a = ReplicaID.random()
        let b = ReplicaID.random()
        let held = VersionVector([a: 5, b: 2])
        #expect(Simulation.syncShortfall(relayHeld: held, device: VersionVector([a: 5, b: 3])) == nil)
        #expect(Simulation.syncShortfall(relayHeld: held, device: VersionVector([a: 4, b: 9])) != nil)
    }

    /// The scenarios pass the added checks with the shipped code (a quick sample; CI runs 200
    /// seeds of each).
    @Test(arguments: ["relay-pages.json", "crash-reinstall.json", "encrypted-space.json"])
    func theShippedCodePassesTheAddedChecks(_ file: String) async throws {
        let results = try await Simulator.runMany(try SimulatorTestSupport.scenario(file), seed: 1, runs: 3)
        let failure = results.first { $0.failed }
        #expect(failure == nil, "\(failure?.problems.prefix(3) ?? [])")
    }
}

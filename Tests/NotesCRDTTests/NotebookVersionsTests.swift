import NotesCRDT
import Testing

/// `Notebook.note(_:at:)`: a note as it was at a version, replayed from the log.
struct NotebookVersionsTests {
    /// At every version a replica went through, the replay gives the note exactly as the replica
    /// showed it then (fields, body, state), on the replica itself and on one that got the same
    /// changes in another order.
    @Test func theNoteAtEachVersionIsTheNoteAsItWasThen() throws {
        for seed in 0 ..< 12 as Range<UInt64> {
            var sim = Simulation(seed: seed, replicaCount: 3, farFuture: seed % 2 == 0)
            var seen: [(version: VersionVector, notes: [NoteID: Note])] = []
            for _ in 0 ..< 80 {
                try sim.step()
                let nb = sim.replicas[0]
                guard nb.pendingCount == 0 else { continue }
                var notes: [NoteID: Note] = [:]
                for id in nb.noteIDs { notes[id] = nb.note(id)! }
                seen.append((nb.versionVector, notes))
            }
            try sim.syncAll()
            let now = sim.replicas[0]
            let other = sim.replicas[2]
            for (version, notes) in seen {
                for id in now.noteIDs {
                    var expected = notes[id]
                    expected?.hasConflicts = false  // not replayed
                    let replayed = try now.note(id, at: version)
                    let elsewhere = try other.note(id, at: version)
                    #expect(replayed == expected, "seed \(seed) note \(id) at \(version)")
                    #expect(elsewhere == expected, "seed \(seed) note \(id) at \(version), from another log")
                }
            }
        }
    }

    /// A version that ends in the middle of an insert (or of a run of deletes) cuts it there.
    @Test func aVersionCanEndInsideAnOperation() throws {
        var a = makeNotebook(1)
        let (id, _) = a.createNote(id: noteID(1), body: "")
        let typed = try #require(try a.insertText(id, at: 0, "hello"))
        var version = a.versionVector
        version[replica(1)] = typed.startSeq + 1  // "he"
        #expect(try a.note(id, at: version)?.body == "he")
        try a.editBody(id) { body in
            for _ in 0 ..< 4 { try body.delete(body.count - 1 ..< body.count) }  // backspace to "h"
        }
        #expect(a.note(id)?.body == "h")
        version = a.versionVector
        version[replica(1)] -= 2  // the last two backspaces left out
        #expect(try a.note(id, at: version)?.body == "hel")
        #expect(try a.note(id, at: VersionVector()) == nil, "before it was created")
    }

    /// A version that covers an operation without what it depends on is refused, not guessed at.
    @Test func aVersionThatIsNotACausalCutIsRefused() throws {
        var a = makeNotebook(1)
        let (id, created) = a.createNote(id: noteID(1), body: "abc")
        var b = makeNotebook(2)
        try b.apply(created)
        try b.insertText(id, at: 3, "d")
        try a.apply(contentsOf: b.changes(since: a.versionVector))
        let version = VersionVector([replica(2): b.versionVector[replica(2)]])  // b's insert without a's note
        #expect(throws: CRDTError.self) { try a.note(id, at: version) }
    }
}

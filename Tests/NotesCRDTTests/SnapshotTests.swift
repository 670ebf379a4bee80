@testable import NotesCRDT
import Testing

/// Snapshots (version 4): the state is stored beside the log, so a replica can be opened with its log
/// deferred and show its notes at once; it decodes the log at its first change.
struct SnapshotTests {
    /// Replicas that have edited, merged, and (some of them) hold changes that wait.
    static func replicas() throws -> [Notebook] {
        var sim = Simulation(seed: 77, replicaCount: 3)
        sim.syncWithChangesAsMade = true
        try sim.run(steps: 120)
        return sim.replicas
    }

    @Test func aDeferredReplicaReadsLikeTheOriginal() throws {
        for original in try Self.replicas() {
            let lazy = try Notebook(snapshot: original.snapshot(), wallClock: original.wallClock, deferringLog: true)
            #expect(lazy.isLogDeferred)
            #expect(lazy.replicaID == original.replicaID)
            #expect(lazy.versionVector == original.versionVector)
            #expect(lazy.clock == original.clock)
            #expect(lazy.noteIDs == original.noteIDs)
            #expect(lazy.allNotes == original.allNotes)
            #expect(lazy.tags == original.tags)
            for id in original.noteIDs { #expect(lazy.note(id) == original.note(id)) }
            #expect(lazy.digest() == original.digest())
            #expect(lazy.historyCount == original.historyCount)
            #expect(lazy.pendingCount == original.pendingCount)
            // What needs the log is worked out on a copy, and the replica stays deferred.
            #expect(lazy.changes(since: VersionVector()) == original.changes(since: VersionVector()))
            #expect(lazy.pendingChanges == original.pendingChanges)
            #expect(lazy.snapshot() == original.snapshot())
            for id in original.noteIDs {
                let body = try #require(lazy.body(of: id))
                let expected = try #require(original.body(of: id))
                #expect(body.string == expected.string)
                if body.count > 0 { #expect(body.identities(of: 0 ..< body.count) == expected.identities(of: 0 ..< expected.count)) }
            }
            #expect(lazy.isLogDeferred)
        }
    }

    @Test func aDeferredReplicaGoesOnLikeTheOriginal() throws {
        for original in try Self.replicas() {
            guard let id = original.noteIDs.first else { continue }
            var eager = try Notebook(snapshot: original.snapshot(), wallClock: original.wallClock)
            var lazy = try Notebook(snapshot: original.snapshot(), wallClock: original.wallClock, deferringLog: true)
            #expect(!eager.isLogDeferred)
            let a = try eager.insertText(id, at: 0, "more ")
            let b = try lazy.insertText(id, at: 0, "more ")
            #expect(a == b)
            #expect(!lazy.isLogDeferred)
            #expect(lazy.digest() == eager.digest())
            #expect(lazy.allChanges == eager.allChanges)
            #expect(lazy.snapshot() == eager.snapshot())

            // Applying a change, or a note made from nothing, also decodes the log first.
            var other = makeNotebook(9)
            try other.merge(original)
            let change = try #require(try other.setTitle(id, "from 9"))
            var lazy2 = try Notebook(snapshot: original.snapshot(), wallClock: original.wallClock, deferringLog: true)
            var eager2 = try Notebook(snapshot: original.snapshot(), wallClock: original.wallClock)
            _ = eager2.apply(change)
            _ = lazy2.apply(change)
            #expect(lazy2.digest() == eager2.digest())
            var lazy3 = try Notebook(snapshot: original.snapshot(), wallClock: original.wallClock, deferringLog: true)
            lazy3.createNote(id: noteID(500), title: "new")
            #expect(!lazy3.isLogDeferred && lazy3.noteCount == original.noteCount + 1)
        }
    }

    @Test func everyDamagedByteIsCaught() throws {
        var nb = makeNotebook(1)
        let id = nb.createNote(id: noteID(1), title: "t", body: "hello").id
        try nb.insertText(id, at: 5, " world")
        try nb.setTag(id, "Work", member: true)
        let bytes = nb.snapshot()
        for i in bytes.indices {
            var damaged = bytes
            damaged[i] ^= 0x20
            for deferring in [false, true] {
                #expect(throws: CRDTError.self, "byte \(i)") { try Notebook(snapshot: damaged, deferringLog: deferring) }
            }
        }
    }

    /// Snapshots written before the state was stored in them (version 1) still open.
    @Test func versionOneSnapshotsStillOpen() throws {
        for original in try Self.replicas() {
            var writer = Self.header(version: 1, of: original)
            ChangeCodec.encode(original.allChanges, into: &writer)
            ChangeCodec.encode(original.pendingChanges, into: &writer)
            for deferring in [false, true] {
                let restored = try Notebook(snapshot: writer.bytes, wallClock: original.wallClock, deferringLog: deferring)
                #expect(!restored.isLogDeferred, "a version 1 snapshot has no state to show without its log")
                #expect(restored.digest() == original.digest())
                #expect(restored.versionVector == original.versionVector)
                #expect(restored.pendingCount == original.pendingCount)
            }
        }
    }

    /// Snapshots written before the delete and conflict rules (version 2) still open: their log is
    /// replayed (opening them deferred too), which works out what those rules keep per note.
    @Test func versionTwoSnapshotsStillOpenAndReplay() throws {
        for original in try Self.replicas() + [try Self.replicaWithMergesAndADeleteAgainstAnEdit()] {
            var writer = Self.header(version: 2, of: original)
            writer.versionVector(original.versionVector)
            writer.varint(UInt64(original.historyCount))
            writer.varint(UInt64(original.pendingCount))
            writer.varint(0)  // no notes in the state part: a version 2 snapshot is not shown from it
            writer.varint(0)
            let log = ChangeCodec.encode(original.allChanges)
            writer.varint(UInt64(log.count))
            writer.raw(log)
            let waiting = ChangeCodec.encode(original.pendingChanges)
            writer.varint(UInt64(waiting.count))
            writer.raw(waiting)
            let checksum = Notebook.checksum(writer.bytes[...])
            for shift in stride(from: 0, to: 64, by: 8) { writer.byte(UInt8(truncatingIfNeeded: checksum >> UInt64(shift))) }
            for deferring in [false, true] {
                let restored = try Notebook(snapshot: writer.bytes, wallClock: original.wallClock, deferringLog: deferring)
                #expect(!restored.isLogDeferred)
                #expect(restored.digest() == original.digest())
                #expect(restored.allNotes == original.allNotes)
            }
        }
    }

    /// Snapshots written before they kept the re-issues (version 3) still open, eagerly and
    /// deferred: the same bytes without the last section.
    @Test func versionThreeSnapshotsStillOpen() throws {
        for original in try Self.replicas() + [try Self.replicaWithMergesAndADeleteAgainstAnEdit()] {
            var bytes = Array(original.snapshot().dropLast(8))
            let empty = ChangeCodec.encode([Change]())
            var length = BinaryWriter()
            length.varint(UInt64(empty.count))
            #expect(Array(bytes.suffix(length.bytes.count + empty.count)) == length.bytes + empty)
            bytes.removeLast(length.bytes.count + empty.count)
            bytes[8] = 3
            let checksum = Notebook.checksum(bytes[...])
            for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: checksum >> UInt64(shift))) }
            for deferring in [false, true] {
                var restored = try Notebook(snapshot: bytes, wallClock: original.wallClock, deferringLog: deferring)
                #expect(restored.digest() == original.digest())
                restored.materialize()
                #expect(restored.logDamage == nil)
                #expect(restored.versionVector == original.versionVector)
                #expect(restored.allNotes == original.allNotes)
            }
        }
    }

    /// A replica opened with its log deferred shows deletes against edits and merges as the
    /// original does, before the log is decoded.
    @Test func aDeferredReplicaShowsRestoredNotesAndMerges() throws {
        let original = try Self.replicaWithMergesAndADeleteAgainstAnEdit()
        #expect(original.conflictedNoteIDs.count == 2)
        #expect(original.allNotes.contains { $0.restoredByConcurrentEdit })
        let lazy = try Notebook(snapshot: original.snapshot(), wallClock: original.wallClock, deferringLog: true)
        #expect(lazy.isLogDeferred)
        #expect(lazy.allNotes == original.allNotes)
        #expect(lazy.conflictedNoteIDs == original.conflictedNoteIDs)
        #expect(lazy.digest() == original.digest())
        for id in original.conflictedNoteIDs { #expect(try lazy.conflicts(of: id) == original.conflicts(of: id)) }
    }

    /// The start of a snapshot of an older version, made by hand: magic, version, identity, clock.
    static func header(version: UInt8, of original: Notebook) -> BinaryWriter {
        var writer = BinaryWriter()
        writer.raw(Array("CRDTSNAP".utf8))
        writer.byte(version)
        writer.raw(original.replicaID.raw.bytes)
        writer.varint(original.clock.last.rawValue)
        writer.varint(original.clock.maxForwardDrift)
        return writer
    }

    /// Two replicas that renamed one note concurrently, and deleted and edited another.
    static func replicaWithMergesAndADeleteAgainstAnEdit() throws -> Notebook {
        var a = makeNotebook(1)
        let first = a.createNote(id: noteID(1), title: "one", body: "text").id
        let second = a.createNote(id: noteID(2), title: "two").id
        var b = makeNotebook(2, at: baseTime + 5)
        try b.apply(contentsOf: a.allChanges)
        try a.setTitle(first, "one from a")
        try b.setTitle(first, "one from b")
        try a.setState(second, .deleted)
        try b.insertText(second, at: 0, "still wanted")
        try a.apply(contentsOf: b.changes(since: a.versionVector))
        return a
    }
}

/// The log stops joining a replica's run of changes at `Notebook.maxJoinedOperations` (one
/// array per entry, so that a bootstrap's history never doubles one huge array): the entries
/// that follow hold the same history.
struct LongRunTests {
    @Test func aRunLongerThanOneEntryIsKeptWhole() throws {
        var source = Notebook(replicaID: ReplicaID(Identifier128(high: 1, low: 2)), wallClock: FixedWallClock(1_700_000_000_000))
        let a = source.createNote(title: "a").id
        let b = source.createNote(title: "b").id
        // Alternating notes: no insert continues the one before, so each is an operation.
        for i in 0 ..< Notebook.maxJoinedOperations + 100 {
            _ = try source.insertText(i % 2 == 0 ? a : b, at: 0, "x")
        }
        #expect(source.historyCount >= 2, "the run spans more than one log entry")
        let all = source.changes(since: VersionVector())
        #expect(all.reduce(0) { $0 + $1.seqCount } == source.versionVector.totalOperations)
        var copy = Notebook(replicaID: ReplicaID(Identifier128(high: 3, low: 4)))
        #expect(copy.apply(contentsOf: all).applied == all.count)
        #expect(copy.digest() == source.digest())
        let restored = try Notebook(snapshot: source.snapshot(), wallClock: source.wallClock)
        #expect(restored.changes(since: VersionVector()) == all)
        #expect(restored.digest() == source.digest())
        // A peer part way through the run gets exactly the rest.
        var half = VersionVector()
        half[source.replicaID] = source.versionVector[source.replicaID] / 2
        #expect(source.changes(since: half).reduce(0) { $0 + $1.seqCount } == source.versionVector[source.replicaID] - half[source.replicaID])
    }
}

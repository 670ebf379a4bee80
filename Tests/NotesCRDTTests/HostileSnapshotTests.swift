@testable import NotesCRDT
import Testing

/// Snapshots crafted with a valid checksum: opening one (deferred or not) gives an error or a
/// replica, never a trap; a deferred log that does not replay is reported (`logDamage`).
struct HostileSnapshotTests {
    /// A replica with its own edits, another replica's merged in, and a change that waits.
    static func original() throws -> Notebook {
        var a = makeNotebook(1)
        let id = a.createNote(id: noteID(1), title: "one", body: "hello").id
        try a.insertText(id, at: 5, " world")
        try a.setTag(id, "Work", member: true)
        var b = makeNotebook(2, at: baseTime + 3)
        try b.merge(a)
        _ = a.apply(try #require(try b.insertText(id, at: 0, ">> ")))
        var c = makeNotebook(3, at: baseTime + 4)
        try c.merge(b)
        _ = try c.setTitle(id, "from c")
        _ = a.apply(try #require(try c.insertText(id, at: 0, "!")))  // waits for the title
        _ = try a.insertText(id, at: 0, "a: ")
        return a
    }

    /// `original`'s snapshot with its log and waiting changes replaced by these bytes, checksummed.
    static func splice(_ original: Notebook, log: [UInt8], waiting: [UInt8]) -> [UInt8] {
        let bytes = original.snapshot()
        let oldLog = ChangeCodec.encode(original.history)
        let oldWaiting = ChangeCodec.encode(original.pending.all)
        func length(_ n: Int) -> Int { var w = BinaryWriter(); w.varint(UInt64(n)); return w.bytes.count }
        // (Format 4 ends with the changes that hold the re-issues, kept as they are.)
        let reissues = ChangeCodec.encode(original.reissueTable.sources)
        let tail = length(oldLog.count) + oldLog.count + length(oldWaiting.count) + oldWaiting.count
            + length(reissues.count) + reissues.count + 8
        var writer = BinaryWriter()
        writer.raw(Array(bytes[..<(bytes.count - tail)]))
        writer.varint(UInt64(log.count))
        writer.raw(log)
        writer.varint(UInt64(waiting.count))
        writer.raw(waiting)
        writer.varint(UInt64(reissues.count))
        writer.raw(reissues)
        return checksummed(writer.bytes)
    }

    static func checksummed(_ body: [UInt8]) -> [UInt8] {
        var bytes = body
        let checksum = Notebook.checksum(bytes[...])
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: checksum >> UInt64(shift))) }
        return bytes
    }

    @Test func theSpliceOfTheSameLogIsTheSnapshot() throws {
        let original = try Self.original()
        #expect(original.pendingCount == 1)
        let same = Self.splice(original, log: ChangeCodec.encode(original.history), waiting: ChangeCodec.encode(original.pending.all))
        #expect(same == original.snapshot())
    }

    /// A log that does not decode: `materialize()` trapped ("passed its checksum"); now the
    /// replica keeps going, says why, and does not reuse its own seqs.
    @Test func aLogThatDoesNotDecodeIsReportedNotTrapped() throws {
        let original = try Self.original()
        let bytes = Self.splice(original, log: [0xFF, 0xFF, 0xFF], waiting: [])
        #expect(throws: CRDTError.self) { try Notebook(snapshot: bytes, wallClock: original.wallClock) }
        var lazy = try Notebook(snapshot: bytes, wallClock: original.wallClock, deferringLog: true)
        #expect(lazy.digest() == original.digest(), "the state part is shown until the log is needed")
        lazy.materialize()
        let damage = try #require(lazy.logDamage)
        #expect(damage.message.contains("does not replay"))
        #expect(!lazy.isLogDeferred)
        // Its own seqs 1 ... n are in the vector but in no log: it writes as another identity.
        #expect(lazy.replicaID != original.replicaID)
        #expect(lazy.replicaID == Notebook.salvagedIdentity(of: original.replicaID, log: [0xFF, 0xFF, 0xFF]))
        let made = lazy.createNote(id: noteID(9), title: "after").change
        #expect(made.replica == lazy.replicaID && made.startSeq == 1)
    }

    /// A log that stops before the last change this replica made: its vector says more.
    @Test func aLogShortOfItsOwnSeqsMovesToAFreshIdentity() throws {
        let original = try Self.original()
        let log = ChangeCodec.encode(Array(original.history.dropLast()))
        let bytes = Self.splice(original, log: log, waiting: ChangeCodec.encode(original.pending.all))
        #expect(throws: CRDTError.self) { try Notebook(snapshot: bytes, wallClock: original.wallClock) }
        var lazy = try Notebook(snapshot: bytes, wallClock: original.wallClock, deferringLog: true)
        _ = try lazy.insertText(noteID(1), at: 0, "x")  // the first change materializes
        #expect(lazy.logDamage?.message.contains("lacks operations") == true)
        #expect(lazy.replicaID != original.replicaID)
        // What replayed is kept: the other replica's operations and our own up to the cut.
        var expected = original.versionVector
        expected[original.replicaID] = original.history.dropLast().filter { $0.replica == original.replicaID }.map(\.endSeq).max() ?? 0
        expected[lazy.replicaID] = 1
        #expect(lazy.versionVector == expected)
    }

    /// A log change that refers to characters no one made (quarantined in `apply`): the store's
    /// replay throws on it; here it is quarantined and the rest kept.
    @Test func aLogChangeThatDoesNotApplyIsQuarantined() throws {
        let original = try Self.original()
        let stranger = replica(77)
        let bad = Change(replica: stranger, startSeq: 1, timestamp: Timestamp(rawValue: 5), dependencies: VersionVector(),
                         operations: [.insertText(note: noteID(1), origin: OpID(replica: stranger, seq: 900), text: ["z"])])
        let log = ChangeCodec.encode(original.history + [bad])
        let bytes = Self.splice(original, log: log, waiting: ChangeCodec.encode(original.pending.all))
        #expect(throws: CRDTError.self) { try Notebook(snapshot: bytes, wallClock: original.wallClock) }
        let lazy = try Notebook(snapshot: bytes, wallClock: original.wallClock, deferringLog: true)
        // A copy materializes for readers: no trap there either.
        #expect(lazy.changes(since: VersionVector()) == original.changes(since: VersionVector()))
        var opened = lazy
        opened.materialize()
        #expect(opened.logDamage != nil)
        #expect(opened.replicaID == original.replicaID, "its own seqs all replayed: no reason to move")
        #expect(opened.digest() == original.digest())
        #expect(opened.quarantinedCount == 1)
        #expect(opened.versionVector == original.versionVector)
    }

    /// Seeded mutations of valid snapshots, checksum made valid again: opened eagerly each gives
    /// a `CRDTError` or a replica; opened deferred, the same bytes give an error, or a replica
    /// that materializes without trapping, with `logDamage` exactly when the eager open refused
    /// them over the log, and otherwise the eager replica's state and log.
    @Test(arguments: 0 ..< 4)
    func mutatedSnapshotsOpenOrAreRefused(slice: UInt64) throws {
        var originals = [try Self.original()]
        var sim = Simulation(seed: 31 + slice, replicaCount: 3)
        sim.syncWithChangesAsMade = true
        try sim.run(steps: 60)
        originals += sim.replicas
        var rng = SplitMix64(seed: 0x5AA9 &+ slice)
        var counts = (refused: 0, opened: 0, damaged: 0)
        for round in 0 ..< 300 {
            let original = originals[round % originals.count]
            let bytes = Self.mutate(original, &rng)
            let eager: Notebook?
            do { eager = try Notebook(snapshot: bytes, wallClock: original.wallClock) } catch is CRDTError { eager = nil }
            let lazyOpened: Notebook?
            do {
                lazyOpened = try Notebook(snapshot: bytes, wallClock: original.wallClock, deferringLog: true)
            } catch is CRDTError {
                #expect(eager == nil, "round \(round): the deferred open refused what the eager one opened")
                counts.refused += 1
                continue
            }
            var lazy = try #require(lazyOpened)
            lazy.materialize()
            if let eager {
                counts.opened += 1
                #expect(lazy.logDamage == nil, "round \(round): \(lazy.logDamage?.message ?? "")")
                #expect(lazy.replicaID == eager.replicaID && lazy.versionVector == eager.versionVector)
                #expect(lazy.digest() == eager.digest() && lazy.allChanges == eager.allChanges)
                // What opened says what it is: its snapshot opens to the same replica.
                let again = try Notebook(snapshot: eager.snapshot(), wallClock: original.wallClock)
                #expect(again.digest() == eager.digest() && again.versionVector == eager.versionVector)
            } else {
                counts.damaged += 1
                #expect(lazy.logDamage != nil, "round \(round): the eager open refused a log the deferred one replayed")
                #expect(!lazy.isLogDeferred)
                // It keeps working: a local edit and a snapshot that opens eagerly.
                lazy.createNote(id: noteID(1_000 + UInt64(round)), title: "after")
                #expect(try Notebook(snapshot: lazy.snapshot(), wallClock: original.wallClock).digest() == lazy.digest())
            }
        }
        #expect(counts.opened > 10 && counts.damaged > 10 && counts.refused > 10, "\(counts)")
    }

    /// One or two mutations of `original`'s snapshot: a byte of the log or the state changed, a log
    /// change dropped, repeated or swapped, another replica's log, a cut, bytes inserted.
    static func mutate(_ original: Notebook, _ rng: inout SplitMix64) -> [UInt8] {
        var log = original.history
        var waiting = original.pending.all
        switch rng.next() % 8 {
        case 0 where !log.isEmpty: log.remove(at: Int(rng.next() % UInt64(log.count)))
        case 1 where !log.isEmpty: log.append(log[Int(rng.next() % UInt64(log.count))])
        case 2 where log.count > 1: log.swapAt(Int(rng.next() % UInt64(log.count)), Int(rng.next() % UInt64(log.count)))
        case 3: waiting += log.suffix(2)
        case 4: log = Array(log.prefix(Int(rng.next() % UInt64(log.count + 1))))
        default: break
        }
        var encodedLog = ChangeCodec.encode(log)
        if rng.next() % 3 == 0, !encodedLog.isEmpty {
            encodedLog[Int(rng.next() % UInt64(encodedLog.count))] ^= UInt8(truncatingIfNeeded: 1 << (rng.next() % 8))
        }
        var bytes = Array(splice(original, log: encodedLog, waiting: ChangeCodec.encode(waiting)).dropLast(8))
        switch rng.next() % 6 {
        case 0:  // a byte of the header, vector or state
            let at = 9 + Int(rng.next() % UInt64(max(1, bytes.count - 9)))
            bytes[at] = UInt8(truncatingIfNeeded: rng.next())
        case 1: bytes = Array(bytes.prefix(9 + Int(rng.next() % UInt64(max(1, bytes.count - 9)))))
        case 2: bytes.insert(UInt8(truncatingIfNeeded: rng.next()), at: 9 + Int(rng.next() % UInt64(max(1, bytes.count - 9))))
        default: break
        }
        return checksummed(bytes)
    }

    /// A note state whose runs claim more text than an arena can hold is refused, not trapped on
    /// (a run keeps its text's offset in 32 bits).
    @Test func aNoteStateLongerThanAnArenaHoldsIsRefused() throws {
        var notebook = makeNotebook(1)
        let id = notebook.createNote(id: noteID(1), title: "t", body: "").id
        let empty = try #require(notebook.encodedNoteState(id))
        // An empty body ends the state: no agents, no runs, an empty string, then the checksum.
        #expect(Array(empty[(empty.count - 11) ..< (empty.count - 8)]) == [0, 0, 0])
        var writer = BinaryWriter()
        writer.raw(Array(empty[..<(empty.count - 11)]))
        writer.varint(1)
        writer.raw(Array(repeating: 7, count: 16))
        writer.varint(4)
        // Four runs of 2^31 - 1 characters: the fourth starts past 2^32.
        for seq in [1, 1 << 31, 1 << 32, 3 << 31] as [UInt64] {
            for value in [0, seq, seq, 0, 0, UInt64(Int32.max)] as [UInt64] { writer.varint(value) }
            writer.byte(0)
        }
        writer.string("")
        #expect(throws: CRDTError.self) { try Notebook.decodeNoteState(HostileSnapshotTests.checksummed(writer.bytes)) }
    }

    @Test func aTextRunTakesFortyBytes() {
        #expect(MemoryLayout<RGATree.Run>.stride == 40)
    }
}

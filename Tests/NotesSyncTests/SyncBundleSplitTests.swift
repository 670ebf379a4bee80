import NotesCRDT
import NotesSync
import Synchronization
import Testing

/// A wall clock 10 ms further on at each reading: every write is its own change (the log joins
/// only changes whose timestamps follow each other).
final class SteppingClock: WallClock {
    private let now = Mutex<UInt64>(1_700_000_000_000)
    func milliseconds() -> UInt64 { now.withLock { $0 += 10; return $0 } }
}

/// Writers never write a bundle that readers refuse: a history past the limits goes in pieces.
struct SyncBundleSplitTests {
    /// A log joins an author's consecutive changes into one: a change past a bundle's operation
    /// limit is cut between its operations, and the pieces rebuild the same replica.
    @Test func aChangeTooLargeForABundleIsCutBetweenItsOperations() throws {
        var a = Notebook(replicaID: ReplicaID(Identifier128(high: 9, low: 9)), wallClock: FixedWallClock(1_700_000_000_000))
        let (note, _) = a.createNote(title: "t")
        let count = SyncBundle.changeLimits.maxOperations + 1000
        let ops = (0 ..< count).map { Operation.setNoteField(note: note, field: .pinned, value: .bool($0 % 2 == 0)) }
        let big = Change(replica: a.replicaID, startSeq: a.versionVector[a.replicaID] + 1,
                         timestamp: Timestamp(rawValue: a.clock.last.rawValue + 1), dependencies: VersionVector(), operations: ops)
        #expect(a.apply(big) == .applied(released: 0))
        let changes = a.changes(since: VersionVector())
        #expect(changes.map(\.operations.count).max()! > SyncBundle.changeLimits.maxOperations)
        let pieces = try SyncBundle.pieces(sender: a.replicaID, senderVersion: a.versionVector, changes: changes)
        #expect(pieces.count >= 2)
        var b = Notebook(replicaID: ReplicaID(Identifier128(high: 10, low: 10)), wallClock: FixedWallClock(1_700_000_000_000))
        for piece in pieces { b.apply(contentsOf: try SyncBundle.decode(piece.encoded()).changes) }
        #expect(b.versionVector == a.versionVector)
        #expect(b.digest() == a.digest())
    }

    /// One insert past what a bundle may hold (a note typed or pasted past four million
    /// characters: the log joins typing into one insert) is cut at its seqs. It was refused, and
    /// from then on every full export and every sync to a new folder failed, on every replica
    /// that held it.
    @Test func anInsertTooLargeForABundleIsCutAtItsSeqs() throws {
        var a = Notebook(replicaID: ReplicaID(Identifier128(high: 11, low: 11)), wallClock: FixedWallClock(1_700_000_000_000))
        let body = String(repeating: "ab\u{0}", count: SyncBundle.changeLimits.maxScalars / 3 + 1000)
        let (note, _) = a.createNote(title: "big", body: body)
        let changes = a.changes(since: VersionVector())
        let whole = SyncBundle(sender: a.replicaID, senderVersion: a.versionVector, changes: changes)
        #expect(throws: SyncError.self) { _ = try SyncBundle.decode(whole.encoded()) }
        let pieces = try SyncBundle.pieces(sender: a.replicaID, senderVersion: a.versionVector, changes: changes)
        #expect(pieces.count >= 2)
        var b = Notebook(replicaID: ReplicaID(Identifier128(high: 12, low: 12)), wallClock: FixedWallClock(1_700_000_000_000))
        for piece in pieces { b.apply(contentsOf: try SyncBundle.decode(piece.encoded()).changes) }
        #expect(b.versionVector == a.versionVector)
        #expect(b.body(of: note)?.string == body)
        #expect(b.digest() == a.digest())
    }

    @Test func aHistoryPastTheChangeLimitIsWrittenInPiecesThatEachDecode() throws {
        var a = Notebook(replicaID: ReplicaID(Identifier128(high: 7, low: 7)), wallClock: SteppingClock())
        let (note, _) = a.createNote(title: "t")
        let wanted = SyncBundle.changeLimits.maxChanges + 100
        var made = 1
        var pinned = false
        while made < wanted {
            pinned.toggle()
            if try a.setPinned(note, pinned) != nil { made += 1 }
        }
        let changes = a.changes(since: VersionVector())
        #expect(changes.count >= wanted)
        // One bundle of it all is refused by readers.
        let whole = SyncBundle(sender: a.replicaID, senderVersion: a.versionVector, changes: changes)
        #expect(throws: SyncError.self) { _ = try SyncBundle.decode(whole.encoded()) }

        let pieces = try SyncBundle.pieces(sender: a.replicaID, senderVersion: a.versionVector, changes: changes)
        #expect(pieces.count >= 2)
        #expect(pieces.flatMap(\.changes) == changes)
        var b = Notebook(replicaID: ReplicaID(Identifier128(high: 8, low: 8)), wallClock: FixedWallClock(1_700_000_000_000))
        for piece in pieces {
            let read = try SyncBundle.decode(piece.encoded())
            #expect(read.changes.count <= SyncBundle.changeLimits.maxChanges)
            b.apply(contentsOf: read.changes)
        }
        #expect(b.digest() == a.digest())
    }

    /// Small histories stay one bundle, and nothing is one empty bundle.
    @Test func aSmallHistoryIsOneBundle() throws {
        var a = Notebook(replicaID: ReplicaID(Identifier128(high: 7, low: 7)), wallClock: FixedWallClock(1_700_000_000_000))
        _ = a.createNote(title: "t", body: "hello")
        let changes = a.changes(since: VersionVector())
        #expect(try SyncBundle.pieces(sender: a.replicaID, senderVersion: a.versionVector, changes: changes).count == 1)
        #expect(try SyncBundle.pieces(sender: a.replicaID, senderVersion: a.versionVector, changes: []).map(\.changes.count) == [0])
        // A smaller cap per piece (the relay's per-request one) is kept.
        let split = try SyncBundle.pieces(sender: a.replicaID, senderVersion: a.versionVector, changes: changes + changes, maxChanges: 1)
        #expect(split.count == changes.count * 2)
    }
}

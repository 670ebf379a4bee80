import NotesCRDT
import Synchronization
import Testing

/// A clock 10 ms further on at each reading, so that every write is its own change.
private final class SteppingClock: WallClock {
    private let now = Mutex<UInt64>(1_700_000_000_000)
    func milliseconds() -> UInt64 { now.withLock { $0 += 10; return $0 } }
}

/// Changes whose dependencies never come cannot pile up without bound.
struct PendingLimitTests {
    @Test func pastTheLimitAWaitingChangeIsRefusedAndComesAgainLater() throws {
        var a = Notebook(replicaID: ReplicaID(Identifier128(high: 1, low: 1)), wallClock: SteppingClock())
        let (note, _) = a.createNote(title: "t")
        var pinned = false
        while a.historyCount < Notebook.maxPending + 2 {
            pinned.toggle()
            _ = try a.setPinned(note, pinned)
        }
        let changes = a.changes(since: VersionVector())
        #expect(changes.count == Notebook.maxPending + 2)
        var b = Notebook(replicaID: ReplicaID(Identifier128(high: 2, low: 2)), wallClock: SteppingClock())
        // Without the first, every other change waits, up to the limit; the one past it is refused.
        let result = b.apply(contentsOf: changes.dropFirst())
        #expect(result.pending == Notebook.maxPending)
        #expect(result.rejected == 1)
        #expect(b.pendingCount == Notebook.maxPending)
        // The first releases the waiting ones; the refused one applies when it comes again.
        b.apply(contentsOf: changes.prefix(1))
        #expect(b.pendingCount == 0)
        b.apply(contentsOf: a.changes(since: b.versionVector))
        #expect(b.digest() == a.digest())
    }
}

import GRDB

/// A power cut at a commit, for the simulator: the first `after` commits of the store's
/// connection go through, the next one and every one after it fail (SQLite rolls each back), as
/// if the process died right before that commit reached the disk.
///
/// A store call that commits more than once is then judged at every point between its commits:
/// what a restart finds must be consistent, and every write acknowledged before must be there.
package final class CommitCut: TransactionObserver, @unchecked Sendable {
    // Only touched on the store's connection, under its queue.
    private var remaining: Int
    /// Whether a commit was cut.
    package private(set) var happened = false
    /// Whether the cut may still come: the simulator's own reads after the call it cuts (some
    /// of which catch up an index, a write) are not the device's.
    package var armed = true

    init(after commits: Int) { remaining = max(0, commits) }

    package func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { false }
    package func databaseDidChange(with event: DatabaseEvent) {}
    package func databaseWillCommit() throws {
        if happened || (armed && remaining == 0) {
            happened = true
            throw StoreError(.database, "the power was cut at this commit (simulated)")
        }
        if armed { remaining -= 1 }
    }
    package func databaseDidCommit(_ db: Database) {}
    package func databaseDidRollback(_ db: Database) {}
}

extension NoteStore {
    /// Lets `commits` more commits of this store through, then cuts every later one (`CommitCut`).
    package func cutPower(afterCommits commits: Int) -> CommitCut {
        let cut = CommitCut(after: commits)
        queue.add(transactionObserver: cut, extent: .observerLifetime)
        return cut
    }

    /// Takes a cut away: the store commits again.
    package func restorePower(_ cut: CommitCut) {
        queue.remove(transactionObserver: cut)
    }
}

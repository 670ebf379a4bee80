import Foundation
import GRDB
import Synchronization

/// A replica database that lives in memory, for as long as this object does.
///
/// Stores opened on it (`NoteStore.open(_:options:replicaID:)`) share it like processes sharing
/// a file: one closed and opened again reads back what was committed, and nothing else. The
/// simulator gives each device one, so that a crash and restart take the same path as an app's.
public final class InMemoryDatabase: Sendable {
    /// A name unique in this process.
    public let name: String
    /// What stands for the file's identity (its device and inode): a store opened on a database
    /// whose label is not the one its replica identity was given on moves to a fresh identity,
    /// as one opened on a copied file does. The name, unless given.
    public let label: String
    /// Keeps the shared in-memory database alive between the stores opened on it.
    private let holder: DatabaseQueue
    /// What stands for the seq mark file beside a database file (`SeqMark`): a copy does not
    /// take it, a restore over this database keeps it.
    let seqMark = Mutex<SeqMark?>(nil)

    /// A new, empty replica database.
    public init(label: String? = nil) throws {
        name = "crdt-sync-\(UUID().uuidString)"
        self.label = label ?? name
        var configuration = Configuration()
        configuration.label = "InMemoryDatabase"
        configuration.prepareDatabase { db in UnsegmentedScriptTokenizer.register(db) }
        holder = try DatabaseQueue(path: InMemoryDatabase.uri(name), configuration: configuration)
        // The pages of an empty migrated database, copied in: opening a store then finds the
        // migrations done (it still runs the migrator, as for a file).
        try NoteStore.emptyDatabase.get().backup(to: holder)
    }

    /// A copy of what `other` holds now (what a file copy of a database does), under `label`.
    public init(copying other: InMemoryDatabase, label: String) throws {
        name = "crdt-sync-\(UUID().uuidString)"
        self.label = label
        var configuration = Configuration()
        configuration.label = "InMemoryDatabase"
        configuration.prepareDatabase { db in UnsegmentedScriptTokenizer.register(db) }
        holder = try DatabaseQueue(path: InMemoryDatabase.uri(name), configuration: configuration)
        try other.holder.backup(to: holder)
    }

    /// Puts what `backup` holds in place of what this database holds, keeping its label and
    /// seq mark: a backup restored over the file itself (`cp backup.db notes.db`). Close the
    /// stores opened on it first.
    public func restore(from backup: InMemoryDatabase) throws {
        try backup.holder.backup(to: holder)
    }

    /// The SQLite URI of the database.
    var uri: String { InMemoryDatabase.uri(name) }

    static func uri(_ name: String) -> String { "file:\(name)?mode=memory&cache=shared" }
}

import Foundation
import GRDB

/// A replica database that lives in memory, for as long as this object does.
///
/// Stores opened on it (`NoteStore.open(_:options:replicaID:)`) share it like processes sharing
/// a file: one closed and opened again reads back what was committed, and nothing else. The
/// simulator gives each device one, so that a crash and restart take the same path as an app's.
public final class InMemoryDatabase: Sendable {
    /// A name unique in this process.
    public let name: String
    /// Keeps the shared in-memory database alive between the stores opened on it.
    private let holder: DatabaseQueue

    /// A new, empty replica database.
    public init() throws {
        name = "crdt-sync-\(UUID().uuidString)"
        var configuration = Configuration()
        configuration.label = "InMemoryDatabase"
        holder = try DatabaseQueue(path: InMemoryDatabase.uri(name), configuration: configuration)
        // The pages of an empty migrated database, copied in: opening a store then finds the
        // migrations done (it still runs the migrator, as for a file).
        try NoteStore.emptyDatabase.get().backup(to: holder)
    }

    /// The SQLite URI of the database.
    var uri: String { InMemoryDatabase.uri(name) }

    static func uri(_ name: String) -> String { "file:\(name)?mode=memory&cache=shared" }
}

import Foundation
import NotesCRDT
import NotesRelay
import NotesRelayPostgres
import Testing

/// The storage backends the relay tests run against: SQLite always; PostgreSQL when
/// `$CRDT_SYNC_TEST_POSTGRES` holds a database URL (`Scripts/with-postgres.sh` sets it).
enum RelayBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqliteMemory = "SQLite in memory"
    case sqliteFile = "SQLite file"
    case postgres = "PostgreSQL"

    var testDescription: String { rawValue }

    static var postgresURL: String? {
        ProcessInfo.processInfo.environment["CRDT_SYNC_TEST_POSTGRES"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The backends this run has (the PostgreSQL suite's skip note says how to add it).
    static var available: [RelayBackend] { postgresURL == nil ? [.sqliteMemory, .sqliteFile] : allCases }

    static let postgresNote: Comment = "set CRDT_SYNC_TEST_POSTGRES to a PostgreSQL URL (Scripts/with-postgres.sh does) to test the PostgreSQL backend"

    /// A fresh storage (PostgreSQL: a new instance over the shared test database; tests use spaces of their own).
    func make() async throws -> any RelayStorage {
        switch self {
        case .sqliteMemory: return try SQLiteRelayStorage.inMemory()
        case .sqliteFile: return try SQLiteRelayStorage(path: try temporaryFolder().appendingPathComponent("r.sqlite").path)
        case .postgres: return try await PostgresRelayStorage.connect(try PostgresLocation(url: Self.postgresURL ?? ""), maxConnections: 4)
        }
    }

    /// Runs `body` with a fresh storage, closing a PostgreSQL one afterwards.
    func with<T>(_ body: (any RelayStorage) async throws -> T) async throws -> T {
        let storage = try await make()
        do {
            let result = try await body(storage)
            await (storage as? PostgresRelayStorage)?.close()
            return result
        } catch {
            await (storage as? PostgresRelayStorage)?.close()
            throw error
        }
    }
}

/// A space name no other test (nor an earlier run over the same database) uses.
func uniqueSpace(_ prefix: String = "s") -> String { "\(prefix)-\(UUID().uuidString.lowercased())" }

extension RelayStorage {
    /// A page with every payload.
    func page(space: String, after clientVersion: VersionVector, limits: RelayPageLimits) async throws -> RelayPage {
        try await page(space: space, after: clientVersion, limits: limits, needsPayload: { _ in true })
    }
}

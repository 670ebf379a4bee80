import ArgumentParser
import Foundation
import NotesCRDT
import NotesStore

/// `--db PATH`, shared by every command that works on a replica.
struct ReplicaOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "The replica database.",
        discussion: "Default: $CRDT_SYNC_DB, else $XDG_DATA_HOME/crdt-sync/notes.db, else ~/.local/share/crdt-sync/notes.db.",
        valueName: "PATH"))
    var db: String?

    /// The database path: --db, $CRDT_SYNC_DB, then the XDG data directory.
    var path: String {
        if let db, !db.isEmpty { return db }
        let environment = ProcessInfo.processInfo.environment
        if let fromEnvironment = environment["CRDT_SYNC_DB"], !fromEnvironment.isEmpty { return fromEnvironment }
        if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") {
            return data + "/crdt-sync/notes.db"
        }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return home + "/.local/share/crdt-sync/notes.db"
    }

    /// Opens the existing replica (a missing one is an error that says to run `init`).
    func open(create: Bool = false) throws -> NoteStore {
        try NoteStore.open(path: path, create: create)
    }
}

/// Runs a command body, turning store errors into a message on stderr and an exit code.
///
/// Exit codes: 1 for a failed operation or bad input, 2 for a note that is not found or an
/// ambiguous id prefix, 3 for a database that is missing, not a replica, newer, read-only or busy.
func runReporting(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let error as StoreError {
        printError(error.description)
        switch error.code {
        case .notFound, .ambiguous: throw ExitCode(2)
        case .noReplica, .notAReplica, .newerSchema, .readOnly, .cannotOpen, .busy, .corrupt: throw ExitCode(3)
        default: throw ExitCode(1)
        }
    } catch let error as NoteCommandError {
        printError(error.message)
        throw ExitCode(1)
    }
}

/// A user error found by the command line itself.
struct NoteCommandError: Error {
    var message: String
    init(_ message: String) { self.message = message }
}

func printError(_ message: String) {
    FileHandle.standardError.write(Data("crdt-sync: error: \(message)\n".utf8))
}

/// Writes a value as pretty JSON (sorted keys) to stdout.
func printJSON(_ value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    let data = try encoder.encode(value)
    FileHandle.standardOutput.write(data)
    FileHandle.standardOutput.write(Data("\n".utf8))
}

/// Milliseconds since the epoch as ISO 8601 with milliseconds, in UTC.
func isoDate(_ milliseconds: UInt64) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    formatter.timeZone = TimeZone(identifier: "UTC")
    return formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
}

/// A note in JSON.
struct NoteJSON: Encodable {
    var note: StoredNote
    var snippet: String?
    var rank: Double?

    enum Keys: String, CodingKey {
        case id, title, body, preview, pinned, archived, color, state, tags, createdAt, updatedAt, bodyLength, snippet, rank
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(note.id.description, forKey: .id)
        try container.encode(note.title, forKey: .title)
        try container.encode(note.body ?? note.preview, forKey: .body)
        try container.encode(note.pinned, forKey: .pinned)
        try container.encode(note.archived, forKey: .archived)
        try container.encode(note.color, forKey: .color)
        try container.encode(note.state.rawValue, forKey: .state)
        try container.encode(note.tags, forKey: .tags)
        try container.encode(isoDate(note.createdAt), forKey: .createdAt)
        try container.encode(isoDate(note.updatedAt), forKey: .updatedAt)
        try container.encode(note.bodyLength, forKey: .bodyLength)
        if let snippet { try container.encode(snippet, forKey: .snippet) }
        if let rank { try container.encode(rank, forKey: .rank) }
    }
}

extension VersionVector {
    /// Replica hex -> seq, for JSON.
    var jsonObject: [String: UInt64] {
        Dictionary(uniqueKeysWithValues: entries.map { ($0.key.description, $0.value) })
    }
}

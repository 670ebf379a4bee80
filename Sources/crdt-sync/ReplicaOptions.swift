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

    @Flag(help: "Print dates in UTC rather than local time ($TZ). --json is always UTC.")
    var utc = false

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
        showsUTC = utc
        var options = StoreOptions(wallClock: try ReplicaOptions.wallClock())
        options.seqMarkCopies = ReplicaOptions.seqMarkCopies
        return try NoteStore.open(path: path, options: options, create: create)
    }

    /// Where the command keeps a copy of each database's seq mark, outside the database's folder
    /// (`$XDG_STATE_HOME/crdt-sync/seqmarks`, else `~/.local/state/crdt-sync/seqmarks`): a backup
    /// of that folder restored over it is then seen at open (Docs/Architecture.md, "Copied replicas").
    static var seqMarkCopies: String {
        let environment = ProcessInfo.processInfo.environment
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") { return state + "/crdt-sync/seqmarks" }
        return (environment["HOME"] ?? NSHomeDirectory()) + "/.local/state/crdt-sync/seqmarks"
    }

    /// The system clock, moved by `$CRDT_SYNC_CLOCK_SKEW_MS` milliseconds (signed) when that is
    /// set: to try out, and to test, a device whose clock is wrong (Docs/CLI.md).
    static func wallClock() throws -> any WallClock {
        guard let text = ProcessInfo.processInfo.environment["CRDT_SYNC_CLOCK_SKEW_MS"], !text.isEmpty else {
            return SystemWallClock()
        }
        guard let skew = Int64(text) else {
            throw NoteCommandError("CRDT_SYNC_CLOCK_SKEW_MS must be a whole number of milliseconds (it is '\(text)')")
        }
        return SkewedWallClock(skew: skew)
    }
}

/// The system clock moved by a fixed number of milliseconds.
struct SkewedWallClock: WallClock {
    var skew: Int64
    func milliseconds() -> UInt64 {
        let now = Int64(clamping: SystemWallClock().milliseconds())
        let (sum, overflow) = now.addingReportingOverflow(skew)
        return overflow ? (skew > 0 ? UInt64(Int64.max) : 0) : UInt64(max(0, sum))
    }
}

/// Text from other devices, made safe to print on a terminal.
enum TerminalText {
    /// `text` with every character that could act on a terminal written as an escape: the C0
    /// controls (`\n`, `\t`, `\r`, else `\u{1B}`...), DEL and the C1 controls, the line and
    /// paragraph separators and the bidirectional formatting characters (which reorder what
    /// follows them on screen). With `keepingLines`, newlines and tabs stay (a body's lines).
    /// A backslash itself is left as it is: `--json` has the exact text.
    static func escaped(_ text: String, keepingLines: Bool = false) -> String {
        guard text.unicodeScalars.contains(where: { needsEscape($0, keepingLines: keepingLines) }) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            guard needsEscape(scalar, keepingLines: keepingLines) else {
                out.append(scalar)
                continue
            }
            let escape: String
            switch scalar {
            case "\n": escape = "\\n"
            case "\t": escape = "\\t"
            case "\r": escape = "\\r"
            default: escape = "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            }
            out.append(contentsOf: escape.unicodeScalars)
        }
        return String(out)
    }

    static func needsEscape(_ scalar: Unicode.Scalar, keepingLines: Bool) -> Bool {
        switch scalar.value {
        case 0x0A, 0x09: return !keepingLines
        case 0x00 ... 0x1F, 0x7F ... 0x9F: return true
        case 0x2028, 0x2029, 0x061C, 0x200E, 0x200F, 0x202A ... 0x202E, 0x2066 ... 0x2069: return true
        default: return false
        }
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

/// A message may quote what came from elsewhere (a relay's answer, a file's name, a note's
/// title), so it is escaped as text from other devices is.
func printError(_ message: String) {
    writeStandardError(Data("crdt-sync: error: \(TerminalText.escaped(message, keepingLines: true))\n".utf8))
}

/// Writes a value as pretty JSON (sorted keys) to stdout.
func printJSON(_ value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    let data = try encoder.encode(value)
    writeStandardOutput(data)
    writeStandardOutput(Data("\n".utf8))
}

/// Milliseconds since the epoch as ISO 8601 with milliseconds, in UTC.
func isoDate(_ milliseconds: UInt64) -> String {
    // Worked out by hand up to year 9999: a formatter per date cost most of `list --json`'s time
    // (each builds an ICU formatter on Linux).
    if milliseconds <= 253_402_300_799_999 {
        let days = Int64(milliseconds / 86_400_000)
        let inDay = Int64(milliseconds % 86_400_000)
        // Days since 1970-01-01 to a civil date (H. Hinnant's days_from_civil, inverted).
        let z = days + 719_468
        let era = z / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func pad(_ value: Int64, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(inDay / 3_600_000, 2)):\(pad(inDay / 60_000 % 60, 2)):"
            + "\(pad(inDay / 1000 % 60, 2)).\(pad(inDay % 1000, 3))Z"
    }
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
        case hasConflicts, restoredByConcurrentEdit, changedHereAt, deletedAt
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
        try container.encode(note.hasConflicts, forKey: .hasConflicts)
        try container.encode(note.restoredByConcurrentEdit, forKey: .restoredByConcurrentEdit)
        if note.changedHereAt > 0 { try container.encode(isoDate(note.changedHereAt), forKey: .changedHereAt) }
        if let deletedAt = note.deletedAt { try container.encode(isoDate(deletedAt), forKey: .deletedAt) }
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

import ArgumentParser
import Foundation
import NotesCRDT
import NotesStore

// History, a note at a version, restoring one, undo and device names (issue 23): they parse,
// call NotesStore, and print. Docs/CLI.md ("History, versions and undo") is the guide.

struct HistoryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history", abstract: "List a note's versions, newest first: when, which device, what changed.",
        discussion: """
        Each version is labelled REPLICA-SEQ (the author's id prefix and the sequence number of its \
        last operation on the note), the same on every device. `show ID --at VERSION` prints the \
        note as the author had it then, `restore ID --to VERSION` brings that back. Times are \
        local (TZ) unless --utc; --json has them in UTC.
        """)
    @OptionGroup var replica: ReplicaOptions
    @Argument(help: "The note's id, or a unique prefix of it (deleted notes too).") var id: String
    @Flag(help: "Print JSON (newest first).") var json = false

    struct VersionJSON: Encodable {
        var version: String
        var replica: String
        var device: String?
        var local: Bool
        var timestamp: String
        var summary: String
    }

    func run() throws {
        try runReporting {
            let store = try replica.open()
            let note = try store.resolveNote(id)
            let versions = try store.versions(of: note).reversed()
            let names = try store.deviceNames()
            let me = store.replicaID
            if json {
                return try printJSON(versions.map {
                    VersionJSON(version: $0.label, replica: $0.replica.description, device: names[$0.replica], local: $0.replica == me,
                                timestamp: isoDate($0.timestamp.milliseconds), summary: summary($0.edits))
                })
            }
            var out = ""
            for version in versions {
                let device = deviceLabel(version.replica, names, me)
                out += "\(shownDate(version.timestamp.milliseconds))  \(version.label)  \(device)\n"
                out += "    \(TerminalText.escaped(summary(version.edits)))\n"
            }
            writeStandardOutput(Data(out.utf8))
        }
    }
}

/// A device as text shows it: its name when known, else its id's first 8 hex digits; "(this device)" for ours.
func deviceLabel(_ replica: ReplicaID, _ names: [ReplicaID: String], _ me: ReplicaID) -> String {
    (names[replica].map { TerminalText.escaped($0) } ?? String(replica.description.prefix(8))) + (replica == me ? " (this device)" : "")
}

/// What a version did, on one line: `title "X" → "Y"; +16 −3 chars: "…"`.
func summary(_ edits: [NoteRevision.Edit]) -> String {
    func quote(_ text: String) -> String {
        let scalars = text.unicodeScalars
        let short = scalars.count > 40 ? String(String.UnicodeScalarView(scalars.prefix(40))) + "…" : text
        return "\"" + short.replacingOccurrences(of: "\n", with: "⏎") + "\""
    }
    // Separate pieces of text in document order, "…" between them, about 40 characters in all.
    func quoteAll(_ pieces: [String]) -> String {
        var budget = 40
        var shown: [String] = []
        for piece in pieces {
            guard budget > 0 else { return shown.joined(separator: "…") + "…" }
            let scalars = piece.unicodeScalars
            shown.append(scalars.count > budget ? quote(String(String.UnicodeScalarView(scalars.prefix(budget))) + "…") : quote(piece))
            budget -= scalars.count
        }
        return shown.joined(separator: "…")
    }
    var parts: [String] = []
    let isCreation = edits.contains(.created)
    var inserted: (count: Int, pieces: [String])?
    var deleted: (count: Int, pieces: [String])?
    for edit in edits {
        switch edit {
        case .created: parts.insert("created", at: 0)
        case .inserted(let count, let pieces): inserted = (count, pieces)
        case .deleted(let count, let pieces): deleted = (count, pieces)
        case .field(let field, let from, let to):
            switch field {
            case .title where isCreation: parts.append("title \(quote(to.stringValue ?? ""))")
            case .title: parts.append("title \(quote(from.stringValue ?? "")) → \(quote(to.stringValue ?? ""))")
            case .pinned: parts.append(to.boolValue == true ? "pinned" : "unpinned")
            case .archived: parts.append(to.boolValue == true ? "archived" : "unarchived")
            case .color: parts.append(to.stringValue.map { "color \($0)" } ?? "color cleared")
            case .state:
                let state = to.stringValue ?? ""
                if !isCreation { parts.append(state == "active" ? "restored" : state) }
            case .tag(let key): parts.append(to.boolValue == true ? "tagged \(key)" : "untagged \(key)")
            case .createdAt: break
            case .extra(let key) where key.hasPrefix(Notebook.reservedExtraPrefix): parts.append("merges reviewed")
            case .extra(let key): parts.append("\(key) = \(to)")
            }
        }
    }
    if inserted != nil || deleted != nil {
        var text = [inserted.map { "+\($0.count)" }, deleted.map { "−\($0.count)" }].compactMap { $0 }.joined(separator: " ") + " chars"
        if let inserted { text += ": " + quoteAll(inserted.pieces) } else if let deleted { text += ": deleted " + quoteAll(deleted.pieces) }
        parts.append(text)
    }
    return parts.isEmpty ? "(no visible change)" : parts.joined(separator: "; ")
}

/// `--at` / `--to`: an ISO 8601 time (local when it has no offset) or a version label.
func notePoint(_ text: String, _ store: NoteStore) throws -> NotePoint {
    if let milliseconds = parseISOTime(text) { return .time(milliseconds: milliseconds) }
    if text.first?.isNumber == true, text.count >= 10, text.dropFirst(4).first == "-" {
        throw StoreError(.invalidArgument, "'\(text)' is not a time crdt-sync reads (use e.g. 2026-11-24T10:00, 2026-11-24T10:00:00Z or 2026-11-24T10:00:00+09:00)")
    }
    return try store.resolveVersion(text)
}

/// Milliseconds since the epoch of `YYYY-MM-DD[THH:MM[:SS[.fff]]][Z|±HH:MM]`, the latest moment it
/// names (a minute: its last millisecond), in local time when it has no offset; nil when it is not one.
func parseISOTime(_ text: String) -> UInt64? {
    let pattern = #"^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?)?(Z|[+-]\d{2}:?\d{2})?$"#
    guard let regex = try? NSRegularExpression(pattern: pattern),
          let match = regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) else { return nil }
    func group(_ i: Int) -> String? {
        guard let range = Range(match.range(at: i), in: text) else { return nil }
        return String(text[range])
    }
    var components = DateComponents()
    components.year = Int(group(1)!)
    components.month = Int(group(2)!)
    components.day = Int(group(3)!)
    components.hour = group(4).flatMap(Int.init) ?? 0
    components.minute = group(5).flatMap(Int.init) ?? 0
    components.second = group(6).flatMap(Int.init) ?? 0
    guard let month = components.month, (1 ... 12).contains(month), let day = components.day, (1 ... 31).contains(day),
          components.hour! < 24, components.minute! < 60, components.second! < 60 else { return nil }
    var calendar = Calendar(identifier: .gregorian)
    if let zone = group(8) {
        if zone == "Z" {
            calendar.timeZone = TimeZone(identifier: "UTC")!
        } else {
            let digits = zone.dropFirst().filter(\.isNumber)
            let seconds = (Int(digits.prefix(2))! * 60 + Int(digits.suffix(2))!) * 60
            calendar.timeZone = TimeZone(secondsFromGMT: zone.first == "-" ? -seconds : seconds)!
        }
    } else {
        calendar.timeZone = TimeZone.current
    }
    // Calendar rolls 2026-02-30 over to March: a date that does not come back the same is no date.
    guard let date = calendar.date(from: components), calendar.component(.day, from: date) == day else { return nil }
    // Before 1970 there was no note: the first moment will do.
    var milliseconds = UInt64(max(0, date.timeIntervalSince1970.rounded())) * 1000
    // The whole unit the text names: 10:00 is every moment up to 10:00:59.999.
    if let fraction = group(7) {
        milliseconds += UInt64(fraction.padding(toLength: 3, withPad: "0", startingAt: 0))!
    } else if group(6) != nil {
        milliseconds += 999
    } else if group(4) != nil {
        milliseconds += 59_999
    } else {
        milliseconds += 86_399_999
    }
    return milliseconds
}

extension ShowNote {
    func validate() throws {
        if at != nil, conflict { throw ValidationError("--at does not go with --conflict") }
    }

    /// `show ID --at TIME|VERSION`: the note as it was then.
    func showAt(_ point: String, _ store: NoteStore, _ id: NoteID) throws {
        guard let note = try store.note(id, at: notePoint(point, store)) else {
            throw StoreError(.notFound, "note \(id.description.prefix(8)) did not exist yet at \(point)")
        }
        if json { return try printJSON(NoteJSON(note: StoredNote(note))) }
        var flags = [note.state.rawValue]
        if note.archived { flags.append("archived") }
        if note.pinned { flags.append("pinned") }
        print("id:      \(note.id)")
        print("as of:   \(point)")
        print("title:   \(TerminalText.escaped(note.title))")
        print("state:   \(flags.joined(separator: ", "))")
        if let color = note.color { print("color:   \(TerminalText.escaped(color))") }
        if !note.tags.isEmpty { print("tags:    \(note.tags.map { TerminalText.escaped($0) }.joined(separator: ", "))") }
        print("created: \(shownDate(note.createdAt))")
        print("updated: \(shownDate(note.updatedAt))")
        if !note.body.isEmpty {
            print("")
            print(TerminalText.escaped(note.body, keepingLines: true))
        }
    }
}

extension RestoreNote {
    func run() throws {
        try runReporting {
            let store = try replica.open()
            let note = try store.resolveNote(id)
            if let to {
                if try !store.restore(note, to: notePoint(to, store)) {
                    print("note \(note.description.prefix(8)) already reads as it did at \(to); nothing changed")
                }
                return
            }
            if try !apply(store, note) {
                print("note \(note.description.prefix(8)) \(try alreadyState(store, note)); nothing changed")
            }
        }
    }
}

struct UndoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "undo", abstract: "Revert this device's last edit (of one note, with ID), as new operations.",
        discussion: """
        Undo is a stack of this device's edits (one per command): `undo` reverts the latest one not \
        undone yet, a second `undo` the one before. An undo is itself not on the stack (there is no \
        redo). Fields go back to the value they had before the edit unless a later write replaced \
        them; inserted text that is still there is deleted; deleted text is inserted again where it \
        was; a created note is deleted. Edits from other devices are kept. The undo syncs like any edit.
        """)
    @OptionGroup var replica: ReplicaOptions
    @Argument(help: "Undo the last edit of this note (id or unique prefix) instead of the last edit of all.") var id: String?

    func run() throws {
        try runReporting {
            let store = try replica.open()
            let note = try id.map { try store.resolveNote($0) }
            guard let result = try store.undo(note) else {
                print(note.map { "nothing to undo: this device has no edit of note \($0.description.prefix(8)) left to undo" }
                    ?? "nothing to undo: this device has no edit left to undo")
                return
            }
            func named(_ ids: [NoteID]) -> String {
                (ids.count == 1 ? "note " : "notes ") + ids.map { String($0.description.prefix(8)) }.joined(separator: ", ")
            }
            let seqs = result.seqs.count == 1 ? "seq \(result.seqs.lowerBound)" : "seqs \(result.seqs.lowerBound)-\(result.seqs.upperBound)"
            let deleted = result.deletedElsewhere
            let gone = deleted.isEmpty ? "" : "\(named(deleted)) \(deleted.count == 1 ? "was" : "were") deleted on another device since"
            if result.changed {
                print("undid the edit of \(named(result.notes)) (\(seqs))" + (gone.isEmpty ? "" : "; \(gone) and stays deleted"))
            } else if deleted.count == result.notes.count {
                print("nothing to undo in the edit of \(named(result.notes)) (\(seqs)): \(gone)")
            } else {
                print("nothing to undo in the edit of \(named(result.notes)) (\(seqs)): later edits had already replaced it" + (gone.isEmpty ? "" : "; \(gone)"))
            }
        }
    }
}

struct DeviceNameCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device-name", abstract: "Print or set this device's name, shown on every device it syncs with.",
        discussion: "Without NAME, lists the device names this replica knows. `init --name` sets it too.")
    @OptionGroup var replica: ReplicaOptions
    @Argument(help: "The new name (1 to 64 characters).") var name: String?

    func run() throws {
        try runReporting {
            let store = try replica.open()
            if let name {
                if try !store.setDeviceName(name) { print("this device is already named \(TerminalText.escaped(name)); nothing changed") }
                return
            }
            let names = try store.deviceNames()
            if names.isEmpty { print("no device has a name yet (`crdt-sync device-name NAME`)") }
            for (replica, name) in names.sorted(by: { $0.key < $1.key }) {
                print("\(replica)  \(TerminalText.escaped(name))\(replica == store.replicaID ? "  (this device)" : "")")
            }
        }
    }
}

// MARK: Local time

/// Whether text output shows dates in UTC (`--utc`) rather than local time; set once when the command is parsed.
nonisolated(unsafe) var showsUTC = false

/// A date for text output: ISO 8601 in the local time zone (`TZ`) with its offset, or UTC (`Z`)
/// under `--utc` or when local time is UTC. `--json` keeps `isoDate` (UTC).
func shownDate(_ milliseconds: UInt64) -> String {
    let offset = showsUTC ? 0 : LocalOffset.seconds(at: milliseconds)
    guard offset != 0 else { return isoDate(milliseconds) }
    let shifted = offset > 0 ? milliseconds &+ UInt64(offset) * 1000 : milliseconds &- min(milliseconds, UInt64(-offset) * 1000)
    let magnitude = abs(offset) / 60
    let sign = offset > 0 ? "+" : "-"
    let hours = magnitude / 60 < 10 ? "0\(magnitude / 60)" : "\(magnitude / 60)"
    let minutes = magnitude % 60 < 10 ? "0\(magnitude % 60)" : "\(magnitude % 60)"
    return String(isoDate(shifted).dropLast()) + sign + hours + ":" + minutes
}

/// The local time zone's offset, asked of Foundation once per quarter hour of dates shown (zones
/// change offset on a quarter hour), so a long list costs a dictionary lookup per date.
enum LocalOffset {
    nonisolated(unsafe) static var byQuarter: [UInt64: Int] = [:]
    nonisolated(unsafe) static var zone: TimeZone?

    static func seconds(at milliseconds: UInt64) -> Int {
        let quarter = milliseconds / 900_000
        if let known = byQuarter[quarter] { return known }
        if zone == nil { zone = TimeZone.current }
        let seconds = zone!.secondsFromGMT(for: Date(timeIntervalSince1970: Double(quarter * 900)))
        byQuarter[quarter] = seconds
        return seconds
    }
}

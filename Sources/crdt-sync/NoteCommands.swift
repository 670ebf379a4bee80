import ArgumentParser
import Foundation
import NotesCRDT
import NotesStore

// The note commands of `crdt-sync`: they parse, call NotesStore, and print. Docs/CLI.md is the guide.

struct InitReplica: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Create the replica database and print its replica id.",
        discussion: "Running it again on an existing replica changes nothing and says so (but --name renames the device).")

    @OptionGroup var replica: ReplicaOptions
    @Option(help: "This device's name, shown on every device it syncs with (`device-name` changes it later).") var name: String?

    func run() throws {
        try runReporting {
            let store = try replica.open(create: true)
            let renamed = try name.map { try store.setDeviceName($0) } ?? false
            if store.wasCreated {
                print(store.replicaID)
            } else if renamed {
                print("\(replica.path) is already a replica (\(store.replicaID)); this device is now named \(TerminalText.escaped(name!))")
            } else {
                print("\(replica.path) is already a replica (\(store.replicaID)); nothing changed")
            }
        }
    }
}

struct NewNote: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "new",
        abstract: "Create a note and print its id.")

    @OptionGroup var replica: ReplicaOptions
    @Option(help: "The title.") var title: String
    @Option(help: "The body text (- reads it from stdin).") var body: String = ""
    @Option(name: .customLong("body-file"), help: ArgumentHelp("Read the body from a file.", valueName: "FILE")) var bodyFile: String?
    @Option(name: .customLong("tag"), help: ArgumentHelp("A tag to put the note in (repeat for several).", valueName: "NAME"))
    var tags: [String] = []

    func validate() throws {
        if bodyFile != nil, body != "" { throw ValidationError("use only one of --body, --body-file") }
    }

    func run() throws {
        let text = try bodyInput(body: body, bodyFile: bodyFile) ?? ""
        try runReporting {
            let store = try replica.open()
            print(try store.createNote(title: title, body: text, tags: tags))
        }
    }
}

struct EditNote: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "edit",
        abstract: "Change a note's title or body (with no option: in $VISUAL or $EDITOR).",
        discussion: """
        With no option, opens the note in $VISUAL, else $EDITOR, else vi: the title on the first \
        line, an empty line, then the body. What you change is saved when the editor exits 0, as \
        the few inserts and deletes you made, on the note as it is then (an edit synced in \
        meanwhile stays). --body - reads the body from stdin, --body-file F from a file. \
        Offsets and counts are in Unicode scalars. --body replaces the whole text by the minimal splice \
        (the common prefix and suffix are kept), so concurrent edits elsewhere in the note survive. \
        Use one of --body, --append, --insert S --at N, --delete N --at N, with --title or alone. \
        Everything a command asks for is saved in one transaction: when an offset or a count does \
        not fit the body, the command fails and nothing changes (not even the title).
        """)

    @OptionGroup var replica: ReplicaOptions
    @Argument(help: "The note's id, or a unique prefix of it.") var id: String
    @Option(help: "A new title.") var title: String?
    @Option(help: "The new body text (- reads it from stdin).") var body: String?
    @Option(name: .customLong("body-file"), help: ArgumentHelp("Read the new body from a file.", valueName: "FILE")) var bodyFile: String?
    @Option(help: ArgumentHelp("Text to add at the end of the body.", valueName: "TEXT")) var append: String?
    @Option(help: ArgumentHelp("Text to insert at --at.", valueName: "TEXT")) var insert: String?
    // (Taken whatever follows, so that `--at -1` is refused as negative, not as a missing value.)
    @Option(parsing: .unconditional, help: ArgumentHelp("How many scalars to delete from --at.", valueName: "N")) var delete: Int?
    @Option(parsing: .unconditional, help: ArgumentHelp("The offset for --insert or --delete.", valueName: "N")) var at: Int?

    func validate() throws {
        let bodyEdits = [body != nil, bodyFile != nil, append != nil, insert != nil, delete != nil].filter { $0 }.count
        if bodyEdits > 1 { throw ValidationError("use only one of --body, --body-file, --append, --insert, --delete") }
        if (insert != nil || delete != nil), at == nil { throw ValidationError("--insert and --delete need --at N") }
        if at != nil, insert == nil, delete == nil { throw ValidationError("--at goes with --insert or --delete") }
        if let at, at < 0 { throw ValidationError("--at must be 0 or more") }
        if let delete, delete < 0 { throw ValidationError("--delete must be 0 or more") }
    }

    /// The edits the options ask for, in the order they are made (`body`: --body or --body-file, read).
    func edits(body: String?) -> [NoteEdit] {
        var edits: [NoteEdit] = []
        if let title { edits.append(.title(title)) }
        if let body { edits.append(.body(body)) }
        if let append { edits.append(.append(append)) }
        if let insert, let at { edits.append(.insert(insert, at: at)) }
        if let delete, let at { edits.append(.delete(at: at, count: delete)) }
        return edits
    }

    func run() throws {
        let text = try bodyInput(body: body, bodyFile: bodyFile)
        let edits = edits(body: text)
        try runReporting {
            if edits.isEmpty { return try editInEditor(replica, id) }
            let store = try replica.open()
            let note = try store.resolveNote(id)
            // One transaction: the title and the body change together, or (an offset past the
            // end) neither does.
            let before = try store.versionVector[store.replicaID]
            try store.edit(note, edits)
            if try store.versionVector[store.replicaID] == before {
                print("note \(note.description.prefix(8)) already reads so; nothing changed")
            }
        }
    }
}

/// The shape of the one-note commands that flip a field.
protocol NoteFlagCommand: ParsableCommand {
    var replica: ReplicaOptions { get }
    var id: String { get }
    /// Makes the change; returns false when the note already was as asked (nothing recorded).
    func apply(_ store: NoteStore, _ note: NoteID) throws -> Bool
    /// What the note already is when nothing changed: "pinned", "in the trash".
    func alreadyState(_ store: NoteStore, _ note: NoteID) throws -> String
}

extension NoteFlagCommand {
    func run() throws {
        try runReporting {
            let store = try replica.open()
            let note = try store.resolveNote(id)
            if try !apply(store, note) {
                print("note \(note.description.prefix(8)) \(try alreadyState(store, note)); nothing changed")
            }
        }
    }
}

struct PinNote: NoteFlagCommand {
    static let configuration = CommandConfiguration(commandName: "pin", abstract: "Pin a note (pinned notes list first).")
    @OptionGroup var replica: ReplicaOptions
    @Argument(help: "The note's id, or a unique prefix of it.") var id: String
    func apply(_ store: NoteStore, _ note: NoteID) throws -> Bool { try store.setPinned(note, true) }
    func alreadyState(_ store: NoteStore, _ note: NoteID) throws -> String { "is already pinned" }
}

struct UnpinNote: NoteFlagCommand {
    static let configuration = CommandConfiguration(commandName: "unpin", abstract: "Unpin a note.")
    @OptionGroup var replica: ReplicaOptions
    @Argument(help: "The note's id, or a unique prefix of it.") var id: String
    func apply(_ store: NoteStore, _ note: NoteID) throws -> Bool { try store.setPinned(note, false) }
    func alreadyState(_ store: NoteStore, _ note: NoteID) throws -> String { "is not pinned" }
}

struct ArchiveNote: NoteFlagCommand {
    static let configuration = CommandConfiguration(commandName: "archive", abstract: "Archive a note (hidden from `list`, shown by `list --archived`).")
    @OptionGroup var replica: ReplicaOptions
    @Argument(help: "The note's id, or a unique prefix of it.") var id: String
    func apply(_ store: NoteStore, _ note: NoteID) throws -> Bool { try store.setArchived(note, true) }
    func alreadyState(_ store: NoteStore, _ note: NoteID) throws -> String { "is already archived" }
}

struct UnarchiveNote: NoteFlagCommand {
    static let configuration = CommandConfiguration(commandName: "unarchive", abstract: "Bring an archived note back to the main list.")
    @OptionGroup var replica: ReplicaOptions
    @Argument(help: "The note's id, or a unique prefix of it.") var id: String
    func apply(_ store: NoteStore, _ note: NoteID) throws -> Bool { try store.setArchived(note, false) }
    func alreadyState(_ store: NoteStore, _ note: NoteID) throws -> String { "is not archived" }
}

/// How a note's state reads in "note 1a2b3c4d is ...; nothing changed".
func stateWords(_ store: NoteStore, _ note: NoteID) throws -> String {
    if try store.isDeleted(note) { return "is already deleted" }
    switch try store.note(note)?.state {
    case .trashed?: return "is already in the trash"
    default: return "is already active (not in the trash)"
    }
}

struct TrashNote: NoteFlagCommand {
    static let configuration = CommandConfiguration(commandName: "note", abstract: "Move a note to the trash (`restore` brings it back).")
    @OptionGroup var replica: ReplicaOptions
    @Argument(help: "The note's id, or a unique prefix of it.") var id: String
    func apply(_ store: NoteStore, _ note: NoteID) throws -> Bool { try store.setState(note, .trashed) }
    func alreadyState(_ store: NoteStore, _ note: NoteID) throws -> String { try stateWords(store, note) }
}

struct RestoreNote: NoteFlagCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore", abstract: "Take a note out of the trash, or bring a deleted note back.",
        discussion: "A deleted note is kept as a tombstone (`list --deleted` shows them), so it can always be restored, with its body and fields.")
    @OptionGroup var replica: ReplicaOptions
    @Argument(help: "The note's id, or a unique prefix of it (deleted notes too).") var id: String
    @Option(help: ArgumentHelp("Make the note as it was at a time or version again, as new edits (see `history`).", valueName: "TIME|VERSION"))
    var to: String?
    func apply(_ store: NoteStore, _ note: NoteID) throws -> Bool { try store.setState(note, .active) }
    func alreadyState(_ store: NoteStore, _ note: NoteID) throws -> String { try stateWords(store, note) }
}

struct DeleteNote: NoteFlagCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete", abstract: "Delete a note, on every replica it syncs to.",
        discussion: """
        The note disappears from every list and from search; `list --deleted` still shows it and \
        `restore` brings it back. If another device edits the note without having seen the delete, \
        the note comes back there and here, in the trash, marked as restored by that edit.
        """)
    @OptionGroup var replica: ReplicaOptions
    @Argument(help: "The note's id, or a unique prefix of it.") var id: String
    func apply(_ store: NoteStore, _ note: NoteID) throws -> Bool { try store.setState(note, .deleted) }
    func alreadyState(_ store: NoteStore, _ note: NoteID) throws -> String { try stateWords(store, note) }
}

struct TagNote: NoteFlagCommand {
    static let configuration = CommandConfiguration(commandName: "note", abstract: "Put a note in a tag (tags are matched without regard to case).")
    @OptionGroup var replica: ReplicaOptions
    @Argument(help: "The note's id, or a unique prefix of it.") var id: String
    @Argument(help: "The tag's name.") var name: String
    func apply(_ store: NoteStore, _ note: NoteID) throws -> Bool { try store.setTag(note, name, member: true) }
    func alreadyState(_ store: NoteStore, _ note: NoteID) throws -> String { "is already in tag \(TerminalText.escaped(name))" }
}

struct UntagNote: NoteFlagCommand {
    static let configuration = CommandConfiguration(commandName: "untag", abstract: "Take a note out of a tag.")
    @OptionGroup var replica: ReplicaOptions
    @Argument(help: "The note's id, or a unique prefix of it.") var id: String
    @Argument(help: "The tag's name.") var name: String
    func apply(_ store: NoteStore, _ note: NoteID) throws -> Bool { try store.setTag(note, name, member: false) }
    func alreadyState(_ store: NoteStore, _ note: NoteID) throws -> String { "is not in tag \(TerminalText.escaped(name))" }
}

struct ColorNote: NoteFlagCommand {
    static let configuration = CommandConfiguration(commandName: "color", abstract: "Set a note's color (`none` clears it).")
    @OptionGroup var replica: ReplicaOptions
    @Argument(help: "The note's id, or a unique prefix of it.") var id: String
    @Argument(help: "A color name, e.g. yellow, or none.") var color: String
    func validate() throws {
        // (An empty name cleared the color, where the help says `none` does: a typo's guess.)
        if color.trimmingCharacters(in: .whitespaces).isEmpty { throw ValidationError("the color name is empty: give a name, or none to clear the color") }
    }
    var chosen: String? {
        let trimmed = color.trimmingCharacters(in: .whitespaces)
        return trimmed.isEmpty || trimmed.lowercased() == "none" ? nil : trimmed
    }
    func apply(_ store: NoteStore, _ note: NoteID) throws -> Bool { try store.setColor(note, chosen) }
    func alreadyState(_ store: NoteStore, _ note: NoteID) throws -> String {
        chosen.map { "is already \(TerminalText.escaped($0))" } ?? "has no color"
    }
}

// MARK: Reading

struct ShowNote: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show", abstract: "Print a note: its fields, then its body.",
        discussion: """
        Deleted notes are shown too. With --conflict, prints the merges of concurrent edits that \
        nobody has reviewed yet: for each, the region (or field) both devices changed, as each \
        device had it and as merged. Text from other devices is printed with control characters \
        escaped (\\u{1B}...); --json has it exactly.
        """)
    @OptionGroup var replica: ReplicaOptions
    @Argument(help: "The note's id, or a unique prefix of it (deleted notes too).") var id: String
    @Flag(help: "Show the merges of concurrent edits to review: each side's version and the merged result.") var conflict = false
    @Option(help: ArgumentHelp("Show the note as it was at a time (ISO 8601, local unless it has an offset) or a version (`history`).", valueName: "TIME|VERSION"))
    var at: String?
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        try runReporting {
            let store = try replica.open()
            let noteID = try store.resolveNote(id)
            if conflict { return try showConflicts(store, noteID) }
            if let at { return try showAt(at, store, noteID) }
            guard let note = try store.note(noteID) ?? store.deletedNote(noteID) else { throw StoreError(.notFound, "there is no note \(noteID)") }
            if json { return try printJSON(NoteJSON(note: note)) }
            let short = note.id.description.prefix(8)
            var flags = [note.state.rawValue]
            if note.archived { flags.append("archived") }
            if note.pinned { flags.append("pinned") }
            print("id:      \(note.id)")
            print("title:   \(TerminalText.escaped(note.title))")
            print("state:   \(flags.joined(separator: ", "))")
            if note.restoredByConcurrentEdit {
                print("         (it was deleted while another device edited it without having seen the delete:")
                print("         kept in the trash; `crdt-sync restore \(short)` or `crdt-sync delete \(short)`)")
            }
            if let deletedAt = note.deletedAt { print("deleted: \(shownDate(deletedAt)) (`crdt-sync restore \(short)` brings it back)") }
            if let color = note.color { print("color:   \(TerminalText.escaped(color))") }
            if !note.tags.isEmpty { print("tags:    \(note.tags.map { TerminalText.escaped($0) }.joined(separator: ", "))") }
            print("created: \(shownDate(note.createdAt))")
            var updated = "updated: \(shownDate(note.effectiveUpdatedAt))"
            if note.updatedAt > note.effectiveUpdatedAt {
                updated += " (stamped \(shownDate(note.updatedAt)) by a device whose clock was ahead)"
            }
            print(updated)
            if note.hasConflicts {
                print("merged:  concurrent edits from different devices were merged: `crdt-sync show \(short) --conflict`")
                print("         shows them, `crdt-sync resolve \(short)` marks them reviewed")
            }
            if let body = note.body, !body.isEmpty {
                print("")
                print(TerminalText.escaped(body, keepingLines: true))
            }
        }
    }

    /// `show --conflict`: every unresolved merge, each side's version and the merged result.
    func showConflicts(_ store: NoteStore, _ id: NoteID) throws {
        let conflicts = try store.conflicts(of: id)
        if json { return try printJSON(conflicts.map(ConflictJSON.init)) }
        let short = id.description.prefix(8)
        guard let note = try store.note(id) ?? store.deletedNote(id), !conflicts.isEmpty else {
            print("note \(short) has no merges of concurrent edits to review")
            return
        }
        let count = conflicts.count == 1 ? "1 merge" : "\(conflicts.count) merges"
        var out = "note \(short) \"\(TerminalText.escaped(note.title))\": \(count) of concurrent edits to review\n"
        for conflict in conflicts {
            let devices = conflict.sides.map { String($0.replica.description.prefix(8)) }
            func named(_ side: NoteConflict.Side) -> String {
                String(side.replica.description.prefix(8)) + (side.replica == store.replicaID ? " (this device)" : "")
            }
            switch conflict.kind {
            case .body: out += "\nthe body, changed on \(named(conflict.sides[0])) and \(named(conflict.sides[1])):\n"
            case .field(let field):
                out += "\nthe \(TerminalText.escaped(field.name)), changed on \(named(conflict.sides[0])) and \(named(conflict.sides[1])):\n"
            case .deletedWhileEdited:
                let deleter = conflict.sides.first { $0.note.state == .deleted } ?? conflict.sides[0]
                let editor = conflict.sides.first { $0 != deleter } ?? conflict.sides[1]
                out += "\ndeleted on \(named(deleter)) while \(named(editor)) edited it (kept, in the trash):\n"
            }
            let labels = devices.map { "  \($0): " } + ["  merged:   "]
            let versions = conflict.sides.map(\.note) + [conflict.merged]
            switch conflict.kind {
            case .field(let field):
                for (label, version) in zip(labels, versions) { out += label + ConflictJSON.value(of: field, in: version) + "\n" }
            case .body, .deletedWhileEdited:
                if conflict.kind == .deletedWhileEdited {
                    for (label, version) in zip(labels, versions) {
                        out += label + "state " + ConflictJSON.value(of: .state, in: version) + "\n"
                    }
                }
                let region = DifferingRegion(versions.map(\.body), context: 24)
                for (label, part) in zip(labels, region.parts) {
                    out += label + (region.isCutBefore ? "…" : "") + TerminalText.escaped(region.before)
                        + "[" + TerminalText.escaped(part) + "]" + TerminalText.escaped(region.after) + (region.isCutAfter ? "…" : "") + "\n"
                }
            }
        }
        out += "\n`crdt-sync resolve \(short)` marks them reviewed on every device.\n"
        writeStandardOutput(Data(out.utf8))
    }
}

/// A merge of concurrent edits in JSON.
struct ConflictJSON: Encodable {
    struct Side: Encodable {
        var replica: String?
        var version: [String: UInt64]
        var note: NoteJSON
    }

    var kind: String
    var field: String?
    var sides: [Side]
    var merged: Side

    init(_ conflict: NoteConflict) {
        switch conflict.kind {
        case .body: kind = "body"
        case .deletedWhileEdited: kind = "deletedWhileEdited"
        case .field(let field):
            kind = "field"
            self.field = field.name
        }
        sides = conflict.sides.map { Side(replica: $0.replica.description, version: $0.version.jsonObject, note: NoteJSON(note: StoredNote($0.note))) }
        merged = Side(replica: nil, version: conflict.mergedVersion.jsonObject, note: NoteJSON(note: StoredNote(conflict.merged)))
    }

    /// A field's value as a person reads it, escaped for the terminal.
    static func value(of field: NoteField, in note: Note) -> String {
        switch field {
        case .title: return "\"" + TerminalText.escaped(note.title) + "\""
        case .pinned: return note.pinned ? "pinned" : "not pinned"
        case .archived: return note.archived ? "archived" : "not archived"
        case .color: return note.color.map { TerminalText.escaped($0) } ?? "no color"
        case .state: return note.state.rawValue + (note.restoredByConcurrentEdit ? " (restored by the concurrent edit)" : "")
        case .createdAt: return shownDate(note.createdAt)
        case .tag(let key):
            return note.tags.contains { Notebook.tagKey($0) == key } ? "in the tag" : "not in the tag"
        case .extra(let key): return TerminalText.escaped(note.extras[key]?.description ?? "null")
        }
    }
}

struct ListNotes: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List notes: pinned first, then the most recently changed.",
        discussion: """
        Without a flag, lists the notes that are neither archived nor trashed. Each line: short id, \
        * when pinned, title, #tags, then [merged] for a note with merges of concurrent edits to \
        review (`show ID --conflict`) and (restored) for a note a concurrent edit brought back \
        from a delete. A note changed by a device whose clock was ahead sorts by when this device \
        saw the change. --deleted lists deleted notes, most recently deleted first.
        """)
    @OptionGroup var replica: ReplicaOptions
    @Flag(help: "List archived notes.") var archived = false
    @Flag(help: "List notes in the trash.") var trashed = false
    @Flag(help: "List every note that is not deleted.") var all = false
    @Flag(help: "List deleted notes (`show` and `restore` work on them).") var deleted = false
    @Option(help: ArgumentHelp("Only notes in this tag.", valueName: "NAME")) var tag: String?
    @Flag(help: "Print JSON (an array of notes, with their bodies).") var json = false

    func validate() throws {
        if [archived, trashed, all, deleted].filter({ $0 }).count > 1 {
            throw ValidationError("use only one of --archived, --trashed, --all, --deleted")
        }
        if deleted, tag != nil { throw ValidationError("--tag does not go with --deleted") }
    }

    func run() throws {
        try runReporting {
            let store = try replica.open()
            let scope: ListScope = archived ? .archived : trashed ? .trashed : all ? .all : deleted ? .deleted : .active
            let notes = try store.list(scope, tag: tag, includeBody: json)
            if json { return try printJSON(notes.map { NoteJSON(note: $0) }) }
            var out = ""
            for note in notes {
                out += String(note.id.description.prefix(8)) + (note.pinned ? " * " : "   ")
                out += note.title.isEmpty ? "(untitled)" : TerminalText.escaped(note.title)
                if scope == .all, note.state != .active || note.archived { out += "  (" + (note.state == .trashed ? "trashed" : "archived") + ")" }
                if !note.tags.isEmpty { out += "  " + note.tags.map { "#" + TerminalText.escaped($0) }.joined(separator: " ") }
                if let deletedAt = note.deletedAt { out += "  (deleted \(shownDate(deletedAt)))" }
                if note.restoredByConcurrentEdit { out += "  (restored)" }
                if note.hasConflicts { out += "  [merged]" }
                out += "\n"
            }
            writeStandardOutput(Data(out.utf8))
        }
    }
}

struct SearchNotes: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "search", abstract: "Full-text search over titles and bodies, best matches first.",
        discussion: """
        Every word must occur (in the title or the body). A word ending in * matches as a prefix \
        (gro* finds groceries); "quoted words" match as a phrase. Case and accents are ignored. \
        Trashed notes are not searched. A query that begins with a dash goes after `--` \
        (`crdt-sync search -- -draft`).
        """)
    @OptionGroup var replica: ReplicaOptions
    @Argument(help: "What to look for.") var query: String
    @Option(parsing: .unconditional, help: "At most this many results (1 to 10000).") var limit = 20
    @Flag(help: "Print JSON (notes with a snippet and a rank; lower ranks are better).") var json = false

    func validate() throws {
        guard (1 ... 10_000).contains(limit) else { throw ValidationError("--limit must be 1 to 10000, not \(limit)") }
    }

    func run() throws {
        try runReporting {
            let store = try replica.open()
            let hits = try store.search(query, limit: limit)
            if json {
                return try printJSON(try hits.map { hit in
                    NoteJSON(note: try store.note(hit.note.id) ?? hit.note, snippet: hit.snippet, rank: hit.rank)
                })
            }
            for hit in hits {
                print(String(hit.note.id.description.prefix(8)) + "  " + (hit.note.title.isEmpty ? "(untitled)" : TerminalText.escaped(hit.note.title)))
                let snippet = TerminalText.escaped(hit.snippet.replacingOccurrences(of: "\n", with: " "))
                if !snippet.isEmpty { print("          " + snippet) }
            }
        }
    }
}

struct LogCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log", abstract: "Show the history of changes: who, when, what (of one note, or all).")
    @OptionGroup var replica: ReplicaOptions
    @Argument(help: "A note's id or unique prefix (deleted notes too); all changes when omitted.") var id: String?
    @Flag(help: "Print JSON.") var json = false

    struct EntryJSON: Encodable {
        var replica: String
        var local: Bool
        var startSeq: UInt64
        var endSeq: UInt64
        var timestamp: String
        var notes: [String]
        var operations: [String]
    }

    func run() throws {
        try runReporting {
            let store = try replica.open()
            let note = try id.map { try store.resolveNote($0) }
            let entries = try store.history(of: note)
            let names = json ? [:] : try store.deviceNames()
            if json {
                return try printJSON(entries.map {
                    EntryJSON(replica: $0.replica.description, local: $0.isLocal, startSeq: $0.startSeq, endSeq: $0.endSeq,
                              timestamp: isoDate($0.timestamp.milliseconds), notes: $0.notes.map(\.description), operations: $0.summary)
                })
            }
            var out = ""
            for entry in entries.reversed() {
                let seqs = entry.startSeq == entry.endSeq ? "\(entry.startSeq)" : "\(entry.startSeq)-\(entry.endSeq)"
                out += "\(shownDate(entry.timestamp.milliseconds))  \(names[entry.replica].map { TerminalText.escaped($0) } ?? String(entry.replica.description.prefix(8)))\(entry.isLocal ? " (this replica)" : "")  seq \(seqs)\n"
                for line in entry.summary { out += "    \(TerminalText.escaped(line))\n" }
            }
            writeStandardOutput(Data(out.utf8))
        }
    }
}

struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Show the replica: id, version vector, notes, pending and quarantined changes, peers.",
        discussion: """
        A quarantined change came from elsewhere with everything it depends on, but refers to \
        something that does not exist (forged or damaged): it is kept aside with the reason, its \
        author's later changes wait behind it, and everyone else's changes keep flowing. It leaves \
        the quarantine when a valid change for the same seqs arrives.

        Under the replica id are the ids it wrote as before, and why it left each: a database \
        file that is a copy of another (cp, a restored backup) takes a fresh id when it is first \
        opened, and so does one that receives changes in its own name that it never made, so the \
        two copies never hand out the same sequence numbers. Everything written before stays.

        Re-issues repair two copies that both wrote as one identity (copied with a build before \
        these checks, or a cloned disk): the copy that finds the fork makes what it wrote from \
        there again as the identity it writes as now, and every replica drops those operations \
        under the old identity and keeps the other copy's there, so both copies' edits stay. \
        `status` lists the re-issues this replica made and those it applied.
        """)
    @OptionGroup var replica: ReplicaOptions
    @Flag(help: "Print JSON.") var json = false

    struct PeerJSON: Encodable {
        var replica: String
        var versionVector: [String: UInt64]
        var lastSeen: String
        /// Operations this replica has that the peer lacks, as last heard from it.
        var lacks: UInt64
    }

    struct QuarantinedJSON: Encodable {
        var replica: String
        var startSeq: UInt64
        var endSeq: UInt64
        var code: String
        var reason: String
        var receivedAt: String
    }

    struct IdentityJSON: Encodable {
        var retired: String
        var new: String
        var at: String
        var reason: String
    }

    struct ReissueJSON: Encodable {
        var replica: String
        var startSeq: UInt64
        var endSeq: UInt64
        var reissuedAs: String
        var firstSeq: UInt64
        /// Whether this replica re-issued them (its own branch), or applied another's re-issue.
        var own: Bool
        var appliedAt: String
    }

    struct StatusJSON: Encodable {
        var replica: String
        var previousIdentities: [IdentityJSON]
        var reissues: [ReissueJSON]
        var path: String?
        var versionVector: [String: UInt64]
        var notes: Int
        var pendingChanges: Int
        var quarantinedChanges: [QuarantinedJSON]
        var logRows: Int
        var peers: [PeerJSON]
        var digest: String
        var deviceNames: [String: String]
    }

    func run() throws {
        try runReporting {
            let store = try replica.open()
            let status = try store.status()
            let quarantined = try store.quarantinedChanges()
            let moves = try store.identityChanges()
            let reissues = try store.reissues()
            let names = try store.deviceNames()
            if json {
                return try printJSON(StatusJSON(
                    replica: status.replica.description,
                    previousIdentities: moves.map { IdentityJSON(retired: $0.retired.description, new: $0.new.description, at: isoDate($0.at), reason: $0.reason) },
                    reissues: reissues.map {
                        ReissueJSON(replica: $0.replica.description, startSeq: $0.startSeq, endSeq: $0.startSeq + $0.count - 1,
                                    reissuedAs: $0.by.description, firstSeq: $0.firstSeq, own: $0.own, appliedAt: isoDate($0.appliedAt))
                    },
                    path: status.path, versionVector: status.versionVector.jsonObject,
                    notes: status.notes, pendingChanges: status.pendingChanges,
                    quarantinedChanges: quarantined.map {
                        QuarantinedJSON(replica: $0.replica.description, startSeq: $0.startSeq, endSeq: $0.endSeq, code: $0.code,
                                        reason: $0.reason, receivedAt: isoDate($0.receivedAt))
                    },
                    logRows: status.logRows,
                    peers: status.peers.map { PeerJSON(replica: $0.replica.description, versionVector: $0.versionVector.jsonObject,
                                                        lastSeen: isoDate($0.lastSeen), lacks: lacking(status.versionVector, $0.versionVector)) },
                    digest: status.digest, deviceNames: Dictionary(uniqueKeysWithValues: names.map { ($0.key.description, $0.value) })))
            }
            print("replica:         \(status.replica)\(names[status.replica].map { "  (\(TerminalText.escaped($0)))" } ?? "")")
            for move in moves {
                print("    was \(move.retired) until \(shownDate(move.at)): \(move.reason)")
            }
            if !reissues.isEmpty {
                print("re-issues:       two copies of one database wrote the same seqs; one copy's are held again as its new identity's")
                for entry in reissues.prefix(20) {
                    let seqs = entry.count == 1 ? "seq \(entry.startSeq)" : "seqs \(entry.startSeq)-\(entry.startSeq + entry.count - 1)"
                    print("    \(entry.own ? "re-issued here" : "applied"), \(shownDate(entry.appliedAt)): \(entry.replica) \(seqs) as \(entry.by) from seq \(entry.firstSeq)")
                }
                if reissues.count > 20 { print("    ... and \(reissues.count - 20) more (`status --json` lists them all)") }
            }
            print("database:        \(status.path ?? "(in memory)")")
            print("notes:           \(status.notes)")
            print("pending changes: \(status.pendingChanges)")
            print("quarantined:     \(quarantined.isEmpty ? "none" : "\(quarantined.count) change(s)")")
            for entry in quarantined.prefix(20) {
                let seqs = entry.startSeq == entry.endSeq ? "seq \(entry.startSeq)" : "seqs \(entry.startSeq)-\(entry.endSeq)"
                print("    \(entry.replica)  \(seqs), received \(shownDate(entry.receivedAt)): \(entry.reason)")
            }
            if quarantined.count > 20 { print("    ... and \(quarantined.count - 20) more (`status --json` lists them all)") }
            print("version vector:  \(status.versionVector.isEmpty ? "(empty)" : "")")
            for entry in status.versionVector.sortedEntries {
                print("    \(entry.replica)  \(entry.seq)\(names[entry.replica].map { "  \(TerminalText.escaped($0))" } ?? "")\(entry.replica == status.replica ? "  (this replica)" : "")")
            }
            print("peers:           \(status.peers.isEmpty ? "(none yet)" : "")")
            for peer in status.peers {
                let lacks = lacking(status.versionVector, peer.versionVector)
                print("    \(peer.replica)\(names[peer.replica].map { " (\(TerminalText.escaped($0)))" } ?? "")  last seen \(shownDate(peer.lastSeen)), has \(count(peer.versionVector.totalOperations)) operations, lacks \(count(lacks)) of ours")
            }
            print("log rows:        \(status.logRows) after the snapshot")
            print("digest:          \(status.digest)")
        }
    }

    /// A count that may be `UInt64.max` (what a peer said it has does not fit): said so.
    private func count(_ value: UInt64) -> String { value == .max ? "more than 2^64 - 1" : "\(value)" }
}

/// How many operations `ours` covers that `theirs` does not (`UInt64.max` when that does not
/// fit: a vector heard from a peer may hold anything).
func lacking(_ ours: VersionVector, _ theirs: VersionVector) -> UInt64 {
    ours.operationsMissing(from: theirs)
}

struct DigestCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "digest", abstract: "Print the digest of the visible state (equal on replicas that have converged).")
    @OptionGroup var replica: ReplicaOptions

    func run() throws {
        try runReporting {
            print(try replica.open().digest())
        }
    }
}

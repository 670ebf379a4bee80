import ArgumentParser
import Foundation
import NotesCRDT
import NotesStore

// Merges a person can see: the notes where concurrent edits from different devices met, and
// marking them reviewed. Docs/CLI.md is the guide; `show ID --conflict` shows one.

struct ConflictsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conflicts",
        abstract: "List the notes where concurrent edits from different devices were merged, to review.",
        discussion: """
        A note is listed when a sync merged edits that two devices made without seeing each other \\
        in the same region of its body (inserts at the same place, an insert into text the other \\
        deleted, deletes of the same characters), in the same field (to different values), or a \\
        delete against an edit. Nothing was lost: `show ID --conflict` shows each side and the \\
        merged result; `resolve ID` marks the note reviewed on every device.
        """)
    @OptionGroup var replica: ReplicaOptions
    @Flag(help: "Print JSON (an array of notes, each with the kinds of merge to review).") var json = false

    struct Entry: Encodable {
        var id: String
        var title: String
        var state: String
        var kinds: [String]
        var devices: [String]
    }

    func run() throws {
        try runReporting {
            let store = try replica.open()
            let entries = try store.conflictedNotes().map { note in
                let conflicts = try store.conflicts(of: note.id)
                var kinds: [String] = []
                for conflict in conflicts where !kinds.contains(conflict.kind.description) { kinds.append(conflict.kind.description) }
                let devices = Set(conflicts.flatMap { $0.sides.map(\.replica.description) }).sorted()
                return Entry(id: note.id.description, title: note.title, state: note.state.rawValue, kinds: kinds, devices: devices)
            }
            if json { return try printJSON(entries) }
            var out = ""
            for entry in entries {
                out += String(entry.id.prefix(8)) + "  " + (entry.title.isEmpty ? "(untitled)" : TerminalText.escaped(entry.title))
                out += "  (" + entry.kinds.map { TerminalText.escaped($0) }.joined(separator: "; ") + ")"
                if entry.state != NoteLifecycle.active.rawValue { out += "  [\(entry.state)]" }
                out += "\n"
            }
            writeStandardOutput(Data(out.utf8))
        }
    }
}

struct ResolveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resolve",
        abstract: "Mark a note's merges of concurrent edits as reviewed, on every device.",
        discussion: """
        Clears the mark that `conflicts` lists. The mark is replicated: once this syncs, the note is \\
        unmarked everywhere, and merges of edits this device had seen never mark it again; an edit \\
        it had not seen yet can. Change the text or field first if the merge is not what you want.
        """)
    @OptionGroup var replica: ReplicaOptions
    @Argument(help: "The note's id, or a unique prefix of it.") var id: String

    func run() throws {
        try runReporting {
            let store = try replica.open()
            let note = try store.resolveNote(id)
            if try !store.resolveConflicts(note) {
                print("note \(note.description.prefix(8)) has no merges of concurrent edits to review; nothing changed")
            }
        }
    }
}

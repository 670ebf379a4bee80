import ArgumentParser
import Foundation
import NotesCRDT
import NotesStore

// `tags`, `tag rename OLD NEW` and `trash empty`. `tag ID NAME` and `trash ID` stay as they were:
// they are the default subcommands of `tag` and `trash` (a note id is hex, never "rename" or "empty").

struct TagGroup: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tag", abstract: "Put a note in a tag (`tag ID NAME`), or rename a tag (`tag rename OLD NEW`).",
        subcommands: [TagNote.self, RenameTag.self], defaultSubcommand: TagNote.self)
}

struct TrashGroup: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trash", abstract: "Move a note to the trash (`trash ID`), or delete every trashed note (`trash empty`).",
        subcommands: [TrashNote.self, EmptyTrash.self], defaultSubcommand: TrashNote.self)
}

struct ListTags: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tags", abstract: "List the tags with how many notes are in each (trashed notes not counted).")
    @OptionGroup var replica: ReplicaOptions
    @Flag(help: "Print JSON (an array of {name, notes}).") var json = false

    struct TagJSON: Encodable {
        var name: String
        var notes: Int
    }

    func run() throws {
        try runReporting {
            let tags = try replica.open().tagCounts()
            if json { return try printJSON(tags.map { TagJSON(name: $0.name, notes: $0.notes) }) }
            var out = ""
            for tag in tags { out += "#\(TerminalText.escaped(tag.name))  \(tag.notes) note\(tag.notes == 1 ? "" : "s")\n" }
            writeStandardOutput(Data(out.utf8))
        }
    }
}

struct RenameTag: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rename", abstract: "Rename a tag on every note in it (joining NEW when it exists).",
        discussion: """
        Each note in OLD is taken out of it and put in NEW, in one transaction; these are ordinary \
        tag changes, so a note put in OLD on another device meanwhile stays in OLD there and here.
        """)
    @OptionGroup var replica: ReplicaOptions
    @Argument(help: "The tag's current name.") var old: String
    @Argument(help: "Its new name.") var new: String
    @Flag(help: "Print JSON ({notes: N}).") var json = false

    func run() throws {
        try runReporting {
            let result = try replica.open().renameTag(old, to: new)
            if json { return try printJSON(["notes": result.changed ? result.notes : 0]) }
            guard result.changed else { return print("the tag is already named #\(TerminalText.escaped(result.oldName)); nothing changed") }
            let moved = result.notes
            print("renamed #\(TerminalText.escaped(result.oldName)) to #\(TerminalText.escaped(result.newName)) on \(moved) note\(moved == 1 ? "" : "s")")
        }
    }
}

struct EmptyTrash: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "empty", abstract: "Delete every note in the trash (`list --deleted` and `restore` still reach them).")
    @OptionGroup var replica: ReplicaOptions
    @Flag(help: "Print JSON ({deleted: N}).") var json = false

    func run() throws {
        try runReporting {
            let deleted = try replica.open().emptyTrash()
            if json { return try printJSON(["deleted": deleted]) }
            print(deleted == 0 ? "the trash is empty; nothing changed" : "deleted \(deleted) note\(deleted == 1 ? "" : "s") from the trash")
        }
    }
}

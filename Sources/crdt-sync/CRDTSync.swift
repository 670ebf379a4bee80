import ArgumentParser
import Foundation
import NotesStore

@main
struct CRDTSync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "crdt-sync",
        abstract: "Keep notes on several devices, offline, and merge them without losing an edit.",
        discussion: """
        Notes are CRDTs: every field is a last-writer-wins register and the body is an RGA sequence, \
        so concurrent edits on different devices always merge. Every command that works on a replica \
        takes --db PATH (default: $CRDT_SYNC_DB, else $XDG_DATA_HOME/crdt-sync/notes.db or \
        ~/.local/share/crdt-sync/notes.db).

        Shell completions: `crdt-sync --generate-completion-script bash` (or zsh, fish) prints a \
        script to install (Docs/CLI.md).
        """,
        version: "0.1.0",
        subcommands: [
            InitReplica.self,
            NewNote.self,
            EditNote.self,
            PinNote.self,
            UnpinNote.self,
            ArchiveNote.self,
            UnarchiveNote.self,
            TrashGroup.self,
            RestoreNote.self,
            DeleteNote.self,
            TagGroup.self,
            ListTags.self,
            UntagNote.self,
            ColorNote.self,
            ShowNote.self,
            ListNotes.self,
            SearchNotes.self,
            LogCommand.self,
            HistoryCommand.self,
            UndoCommand.self,
            DeviceNameCommand.self,
            ConflictsCommand.self,
            ResolveCommand.self,
            StatusCommand.self,
            DigestCommand.self,
            ExportBundle.self,
            ImportBundles.self,
            SyncCommand.self,
            RemoteCommand.self,
            ServeCommand.self,
            Demo.self,
            TraceCommand.self,
            SimulateCommand.self,
            SpaceCommand.self,
        ]
    )

    static func main() async {
        // A closed pipe (`| head`) makes a write fail with EPIPE (see writeStandardOutput) instead of killing the process mid-write.
        signal(SIGPIPE, SIG_IGN)
        // One short-lived client whose threads hand data to each other: one allocator arena (the relay keeps glibc's default).
        if CommandLine.arguments.dropFirst().first != "serve" { AllocatorArenas.useOne() }
        await main(nil)
    }
}

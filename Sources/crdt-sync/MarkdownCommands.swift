import ArgumentParser
import Foundation
import NotesStore

// `export --markdown DIR` and `import --markdown DIR`: the files' format is NotesStore's `MarkdownNotes`.

func exportMarkdown(_ replica: ReplicaOptions, to folder: String, json: Bool) throws {
    try runReporting {
        let result = try replica.open().exportMarkdown(to: folder)
        if json {
            struct Out: Encodable { var folder: String; var written: Int; var removed: Int }
            return try printJSON(Out(folder: folder, written: result.written, removed: result.removed))
        }
        print("wrote \(result.written) note(s) to \(folder)" + (result.removed > 0 ? " (removed \(result.removed) file(s) of renamed notes)" : ""))
    }
}

func importMarkdown(_ replica: ReplicaOptions, from folder: String, json: Bool) throws {
    try runReporting {
        let result: MarkdownImportResult
        do {
            result = try replica.open().importMarkdown(from: folder)
        } catch let error as StoreError where error.code == .invalidArgument {
            // A malformed file is bad input: exit 2, as a usage error.
            printError(error.description)
            throw ExitCode(2)
        }
        if json {
            struct Out: Encodable { var created: Int; var updated: Int; var unchanged: Int }
            return try printJSON(Out(created: result.created, updated: result.updated, unchanged: result.unchanged))
        }
        print("imported \(folder): \(result.created) created, \(result.updated) updated, \(result.unchanged) unchanged")
    }
}

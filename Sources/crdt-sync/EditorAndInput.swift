import ArgumentParser
import Foundation
import NotesCRDT
import NotesStore

// `edit ID` in $VISUAL/$EDITOR, and bodies read from a file or stdin (`--body-file F`, `--body -`).

/// The body `--body` and `--body-file` give: `--body -` reads stdin (a body that is a lone "-"
/// comes from a file: `--body-file`). Reads before the replica opens, so a missing file stores
/// nothing; prints the error and exits 2 when the file cannot be read.
func bodyInput(body: String?, bodyFile: String?) throws -> String? {
    if let bodyFile {
        var isFolder: ObjCBool = false
        let exists = FileManager.default.fileExists(atPath: bodyFile, isDirectory: &isFolder)
        // Through a handle, so that a pipe (`--body-file <(cmd)`) reads as a file does.
        guard !isFolder.boolValue, let handle = FileHandle(forReadingAtPath: bodyFile) else {
            let why = isFolder.boolValue ? "is a directory" : exists ? "not readable" : "no such file"
            printError("cannot read --body-file \(bodyFile): \(why); nothing changed")
            throw ExitCode(2)
        }
        defer { try? handle.close() }
        var data = Data()
        do {
            while data.count <= maxBodyFileBytes, let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty { data.append(chunk) }
        } catch {
            // (Not taken as the end: a body cut short by a read error would be stored as the body.)
            printError("cannot read --body-file \(bodyFile): \(error.localizedDescription); nothing changed")
            throw ExitCode(2)
        }
        guard data.count <= maxBodyFileBytes else {
            printError("--body-file \(bodyFile) holds more than \(maxBodyFileBytes) bytes, more than a body may take at once; nothing changed")
            throw ExitCode(2)
        }
        return try decodedUTF8(data, from: bodyFile)
    }
    if body == "-" {
        return try decodedUTF8(FileHandle.standardInput.readDataToEndOfFile(), from: "stdin")
    }
    return body
}

/// The most `--body-file` reads (as a trace file may be): `/dev/zero` would otherwise fill memory.
let maxBodyFileBytes = 256 << 20

private func decodedUTF8(_ data: Data, from source: String) throws -> String {
    guard let text = String(data: data, encoding: .utf8) else {
        printError("\(source) is not UTF-8 text; nothing changed")
        throw ExitCode(2)
    }
    return text
}

/// Opens a note in the user's editor and saves what they changed as the minimal edit on the
/// note's current state (`NoteStore.applyEditedText`). The replica is closed while the editor
/// runs, so other commands (a sync) can write meanwhile.
func editInEditor(_ replica: ReplicaOptions, _ idPrefix: String) throws {
    var store: NoteStore? = try replica.open()
    let note = try store!.resolveNote(idPrefix)
    guard let stored = try store!.note(note) else {
        throw StoreError(.notFound, "note \(note) is deleted (`crdt-sync restore \(note.description.prefix(8))` brings it back)")
    }
    try store!.close()
    store = nil
    let original = NoteText(title: stored.title, body: stored.body ?? "")

    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("crdt-sync-edit-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true,
                                            attributes: [.posixPermissions: 0o700])
    let file = folder.appendingPathComponent("note-\(note.description.prefix(8)).md")
    var keepFile = false
    defer { if !keepFile { try? FileManager.default.removeItem(at: folder) } }
    try Data(original.editorFile.utf8).write(to: file)

    let environment = ProcessInfo.processInfo.environment
    let editor = [environment["VISUAL"], environment["EDITOR"]].compactMap { $0 }.first { !$0.trimmingCharacters(in: .whitespaces).isEmpty } ?? "vi"
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    // Through the shell, so that EDITOR may carry arguments ("code -w"); the path is "$1", never parsed.
    process.arguments = ["-c", editor + " \"$1\"", "sh", file.path]
    do {
        try process.run()
    } catch {
        throw NoteCommandError("cannot start the editor (\(editor)): \(error.localizedDescription)")
    }
    process.waitUntilExit()
    var emptied = false
    do {
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            throw NoteCommandError("the editor (\(editor)) exited with status \(process.terminationStatus); nothing changed")
        }
        // Checked before it is read: an editor (or a mistake) that saved a huge file filled memory.
        let size = (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int) ?? 0
        guard size <= maxBodyFileBytes else {
            throw NoteCommandError("the saved file holds \(size) bytes, more than the \(maxBodyFileBytes) a body may take at once; nothing changed")
        }
        guard let data = FileManager.default.contents(atPath: file.path), let text = String(data: data, encoding: .utf8) else {
            throw NoteCommandError("cannot read back \(file.path) (missing, or not UTF-8); nothing changed")
        }
        let edited = NoteText(editorFile: text, writtenFrom: original)
        if edited == original {
            print("the note was not changed in the editor; nothing recorded")
            return
        }
        // As `git commit` does with an empty message: an emptied file is taken as giving up, not as "wipe the note".
        if text.unicodeScalars.allSatisfy(\.properties.isWhitespace) {
            emptied = true
            throw NoteCommandError("the file is empty; nothing recorded")
        }
        store = try replica.open()
        let result = try store!.applyEditedText(note, original: original, edited: edited)
        if !result.changed {
            print("nothing to record (the note already reads as saved)")
        }
    } catch {
        // What the person typed is not lost: the file stays, and the message says where.
        keepFile = !emptied && FileManager.default.fileExists(atPath: file.path)
        if keepFile { printError("your edit is kept in \(file.path)") }
        throw error
    }
}

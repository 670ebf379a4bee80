import Foundation
import NotesCRDT
import NotesSync

/// A note as a Markdown file: front matter between `---` lines (one `key: value` a line, strings
/// and lists in JSON syntax, which YAML reads too), then the body exactly as stored.
///
///     ---
///     id: 5f0c…
///     title: "Groceries"
///     tags: ["home"]
///     pinned: false
///     archived: false
///     color: null
///     state: active
///     created: 2025-01-02T03:04:05.678Z
///     updated: 2025-01-02T03:04:05.678Z
///     ---
///     milk, eggs
///
/// The title is the `title:` field (not a `# heading`: a body may begin with its own heading, and a
/// title may hold anything). A file from elsewhere, without front matter (or without `title:`),
/// takes its title from a first line `# heading` (left out of the body, with one empty line after
/// it), else from the file's name; but a file with an `id` and no `title:` leaves the title alone. `created` and `updated` are written for people and other
/// apps; an import ignores them.
public struct MarkdownNote: Hashable, Sendable {
    /// The note's identity (nil: a file from elsewhere, imported as a new note).
    public var id: NoteID?
    /// The title: the `title:` field, else a first `# heading`, else the file's name.
    public var title: String
    /// The body: everything after the front matter, exactly.
    public var body: String
    /// Each field is nil when the file does not give it (an import leaves it as it is).
    public var tags: [String]?
    /// Whether the note is pinned.
    public var pinned: Bool?
    /// Whether the note is archived.
    public var archived: Bool?
    /// `.some(nil)`: `color: null`, no color.
    public var color: String??
    /// `.active` or `.trashed`.
    public var state: NoteLifecycle?
    /// False for a file with front matter and an `id` but no `title:`: an import leaves that
    /// note's title as it is (`title` is then the file's name, for a note this replica lacks).
    public var givesTitle: Bool = true

    public init(id: NoteID? = nil, title: String, body: String, tags: [String]? = nil, pinned: Bool? = nil,
                archived: Bool? = nil, color: String?? = nil, state: NoteLifecycle? = nil) {
        self.id = id
        self.title = title
        self.body = body
        self.tags = tags
        self.pinned = pinned
        self.archived = archived
        self.color = color
        self.state = state
    }
}

/// Writing and reading notes as Markdown files (`MarkdownNote`).
public enum MarkdownNotes {
    /// The file in an export's folder that lists what the export wrote (`exportMarkdown`).
    public static let manifestName = ".crdt-sync-export.json"
    /// The subfolder of an export's folder that keeps each note's file as the export (or the
    /// last import) left it, `ID.md`: the base an import compares a file with, so that it takes
    /// only what a person changed in the file, not the older values of everything else.
    public static let basesName = ".crdt-sync-export"
    /// The largest file `importMarkdown` reads (a bundle's largest size: a larger note could not sync).
    public static let maxFileBytes = 16 << 20

    /// The file's text for a stored note (read with its body).
    public static func render(_ note: StoredNote) -> String {
        var out = "---\n"
        out += "id: \(note.id)\n"
        out += "title: \(quoted(note.title))\n"
        out += "tags: [\(note.tags.map(quoted).joined(separator: ", "))]\n"
        out += "pinned: \(note.pinned)\n"
        out += "archived: \(note.archived)\n"
        out += "color: \(note.color.map(quoted) ?? "null")\n"
        out += "state: \(note.state.rawValue)\n"
        out += "created: \(isoDate(note.createdAt))\n"
        out += "updated: \(isoDate(note.updatedAt))\n"
        out += "---\n"
        return out + (note.body ?? "")
    }

    /// A safe, unique file name: the title as a slug (ASCII letters and digits, `-`), then the
    /// first 8 hex digits of the id (all 32 when `long`).
    public static func fileName(for note: StoredNote, long: Bool = false) -> String {
        var slug = ""
        for scalar in note.title.lowercased().unicodeScalars {
            if scalar.isASCII, CharacterSet.alphanumerics.contains(scalar) {
                slug.unicodeScalars.append(scalar)
            } else if !slug.isEmpty, !slug.hasSuffix("-") {
                slug += "-"
            }
            if slug.count >= 48 { break }
        }
        while slug.hasSuffix("-") { slug.removeLast() }
        if slug.isEmpty { slug = "untitled" }
        let id = note.id.description
        return slug + "-" + (long ? id : String(id.prefix(8))) + ".md"
    }

    /// Reads a file's text.
    ///
    /// - Throws: `StoreError` `.invalidArgument` naming `fileName` and the line, for front matter
    ///   that is not closed, a line that is not `key: value`, or a value that does not fit its key.
    public static func parse(_ text: String, fileName: String) throws -> MarkdownNote {
        func failure(_ line: Int, _ message: String) -> StoreError {
            StoreError(.invalidArgument, "\(fileName): line \(line): \(message)")
        }
        let fallbackTitle = (fileName as NSString).deletingPathExtension
        // Lines are found in the UTF-8 bytes: as Characters, "\r\n" is one, which a search for "\n" misses.
        let utf8 = Array(text.utf8)
        let opening = utf8.starts(with: "---\n".utf8) ? 4 : utf8.starts(with: "---\r\n".utf8) ? 5 : 0
        guard opening > 0 else { return foreign(text, fallbackTitle: fallbackTitle) }
        // Front matter: the lines up to the next "---" line.
        var lines: [String] = []
        var cursor = opening
        var bodyStart: Int?
        while cursor < utf8.count {
            let (line, next) = Self.line(utf8, from: cursor)
            cursor = next
            if line == "---" {
                bodyStart = cursor
                break
            }
            lines.append(line)
        }
        guard let bodyStart else { throw failure(1, "the front matter opened by --- is never closed by a --- line") }
        var note = MarkdownNote(title: "", body: String(decoding: utf8[bodyStart...], as: UTF8.self))
        var hasTitle = false
        var inUnknown = false
        for (index, line) in lines.enumerated() {
            let number = index + 2
            if line.trimmingCharacters(in: .whitespaces).isEmpty || line.hasPrefix("#") { continue }
            // Another app's block values (indented, or "- item") belong to a key this one does not know.
            if line.first == " " || line.first == "\t" || line.hasPrefix("- ") {
                if inUnknown { continue }
                throw failure(number, "expected key: value")
            }
            guard let colon = line.firstIndex(of: ":") else { throw failure(number, "expected key: value, found '\(line)'") }
            let key = line[..<colon].trimmingCharacters(in: .whitespaces)
            let raw = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            inUnknown = false
            switch key {
            case "id":
                guard let id = NoteID(hex: raw), raw.count == 32 else { throw failure(number, "id must be 32 hex digits, found '\(raw)'") }
                note.id = id
            case "title":
                guard let title = try string(raw) else { throw failure(number, "title must be a string, found '\(raw)'") }
                note.title = title
                hasTitle = true
            case "tags":
                guard let tags = list(raw) else { throw failure(number, "tags must be a list like [\"home\", \"work\"], found '\(raw)'") }
                if tags.contains(where: { Notebook.tagKey($0).isEmpty }) { throw failure(number, "a tag name cannot be empty") }
                note.tags = tags
            case "pinned", "archived":
                guard raw == "true" || raw == "false" else { throw failure(number, "\(key) must be true or false, found '\(raw)'") }
                if key == "pinned" { note.pinned = raw == "true" } else { note.archived = raw == "true" }
            case "color":
                if raw == "null" || raw == "~" || raw.isEmpty {
                    note.color = .some(nil)
                } else {
                    guard let color = try string(raw) else { throw failure(number, "color must be a string or null, found '\(raw)'") }
                    note.color = .some(color)
                }
            case "state":
                guard let state = NoteLifecycle(rawValue: raw), state != .deleted else {
                    throw failure(number, "state must be active or trashed, found '\(raw)'")
                }
                note.state = state
            default:
                inUnknown = true  // created, updated, and other apps' keys
            }
        }
        if !hasTitle, note.id != nil {
            // Set only what the file gives: the body stays whole, the title as it is.
            note.title = fallbackTitle
            note.givesTitle = false
        } else if !hasTitle {
            let titled = foreign(note.body, fallbackTitle: fallbackTitle)
            note.title = titled.title
            note.body = titled.body
        }
        return note
    }

    /// A file without front matter: the title from a first `# heading`, else the file's name.
    static func foreign(_ text: String, fallbackTitle: String) -> MarkdownNote {
        let utf8 = Array(text.utf8)
        guard utf8.starts(with: "# ".utf8) else { return MarkdownNote(title: fallbackTitle, body: text) }
        let (heading, next) = line(utf8, from: 2)
        var rest = next
        // One blank line after the heading goes with it.
        if utf8[rest...].starts(with: "\n".utf8) { rest += 1 } else if utf8[rest...].starts(with: "\r\n".utf8) { rest += 2 }
        return MarkdownNote(title: heading.trimmingCharacters(in: .whitespaces), body: String(decoding: utf8[rest...], as: UTF8.self))
    }

    /// The line of `utf8` that starts at `start` (without its "\n" or "\r\n"), and where the next one starts.
    static func line(_ utf8: [UInt8], from start: Int) -> (line: String, next: Int) {
        let end = utf8[start...].firstIndex(of: UInt8(ascii: "\n")) ?? utf8.count
        let lineEnd = end > start && utf8[end - 1] == UInt8(ascii: "\r") ? end - 1 : end
        return (String(decoding: utf8[start ..< lineEnd], as: UTF8.self), end < utf8.count ? end + 1 : end)
    }

    /// A string in JSON syntax, JSON-escaped (YAML reads it the same).
    static func quoted(_ value: String) -> String {
        let data = try! JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self)
    }

    /// A quoted (JSON) or plain string value; nil when it is a list or an object.
    static func string(_ raw: String) throws -> String? {
        if raw.hasPrefix("\"") {
            return (try? JSONSerialization.jsonObject(with: Data(raw.utf8), options: .fragmentsAllowed)) as? String
        }
        if raw.hasPrefix("'"), raw.hasSuffix("'"), raw.count >= 2 {
            return String(raw.dropFirst().dropLast()).replacingOccurrences(of: "''", with: "'")
        }
        if raw.hasPrefix("[") || raw.hasPrefix("{") { return nil }
        return raw
    }

    /// A list in JSON syntax, or YAML's flow list of plain words (`[home, work]`).
    static func list(_ raw: String) -> [String]? {
        if let strings = (try? JSONSerialization.jsonObject(with: Data(raw.utf8))) as? [String] { return strings }
        guard raw.hasPrefix("["), raw.hasSuffix("]"), !raw.contains("\"") else { return nil }
        let inner = raw.dropFirst().dropLast().trimmingCharacters(in: .whitespaces)
        if inner.isEmpty { return [] }
        return inner.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
    }

    static func isoDate(_ milliseconds: UInt64) -> String {
        Date(timeIntervalSince1970: Double(milliseconds) / 1000)
            .formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: TimeZone(identifier: "UTC")!))
    }
}

/// What `exportMarkdown` did.
public struct MarkdownExportResult: Hashable, Sendable {
    /// Files written (one per note).
    public var written: Int
    /// Files of an earlier export of the same notes under another name (a changed title), removed.
    public var removed: Int
}

/// What an export wrote into its folder (`MarkdownNotes.manifestName`): each file's name and the
/// SHA-256 of its content, so that a later export removes only its own files, unchanged since.
struct MarkdownExportManifest: Codable {
    var version = 1
    /// File name -> lowercase hex SHA-256 of what the export wrote.
    var files: [String: String]

    /// The folder's manifest; empty when there is none or it cannot be read (then nothing is removed).
    static func read(_ folder: String) -> MarkdownExportManifest {
        // Read as a note file is (a FIFO or a link to /dev/zero in its place hung or filled memory).
        guard let bytes = try? LocalFileSystem().read(folder + "/" + MarkdownNotes.manifestName, limit: MarkdownNotes.maxFileBytes),
              let manifest = try? JSONDecoder().decode(MarkdownExportManifest.self, from: Data(bytes)) else {
            return MarkdownExportManifest(files: [:])
        }
        return manifest
    }
}

/// What `importMarkdown` did.
public struct MarkdownImportResult: Hashable, Sendable {
    /// Files that became new notes.
    public var created: Int
    /// Files whose note changed.
    public var updated: Int
    /// Files whose note already read as the file does (nothing recorded).
    public var unchanged: Int
}

extension NoteStore {
    /// Writes every note that is not deleted into `folder` (created if needed) as one Markdown
    /// file each (`MarkdownNotes`), each through a temporary file renamed into place. A file an
    /// earlier export wrote for the same note under another name (its title changed) is removed,
    /// but only while its content is exactly what that export wrote: the folder's manifest
    /// (`MarkdownNotes.manifestName`, replaced atomically) lists each written file's SHA-256.
    /// Other files, and exported files since changed, are never removed.
    public func exportMarkdown(to folder: String) throws -> MarkdownExportResult {
        let files = FileManager.default
        do {
            try files.createDirectory(atPath: folder, withIntermediateDirectories: true)
        } catch {
            throw StoreError(.invalidArgument, "cannot create the folder \(folder): \(error.localizedDescription)")
        }
        let notes = try list(.all, includeBody: true)
        var names: [NoteID: String] = [:]
        var taken: Set<String> = []
        for note in notes {
            var name = MarkdownNotes.fileName(for: note)
            if taken.contains(name) { name = MarkdownNotes.fileName(for: note, long: true) }
            taken.insert(name)
            names[note.id] = name
        }
        // Earlier exports of these notes under other names, found before writing: only files the
        // manifest lists, still exactly as written (a file a person wrote or changed stays).
        let previous = MarkdownExportManifest.read(folder)
        var manifest = MarkdownExportManifest(files: [:])
        var stale: [String] = []
        for (existing, hash) in previous.files.sorted(by: { $0.key < $1.key }) where !taken.contains(existing) {
            // (Read as an imported file is: the manifest may name a FIFO, which hung the export.)
            guard !existing.contains("/"), let bytes = try? LocalFileSystem().read(folder + "/" + existing, limit: MarkdownNotes.maxFileBytes),
                  case let data = Data(bytes), SHA256.hex(data) == hash else { continue }
            if let text = String(data: data, encoding: .utf8), let parsed = try? MarkdownNotes.parse(text, fileName: existing),
               let id = parsed.id, names[id] != nil {
                stale.append(existing)
            } else {
                manifest.files[existing] = hash  // still the export's own, of a note not exported now
            }
        }
        func writeAtomically(_ data: Data, _ name: String) throws {
            let path = folder + "/" + name
            let temporary = folder + "/.\(name).\(UUID().uuidString).tmp"
            do {
                try data.write(to: URL(fileURLWithPath: temporary))
                guard rename(temporary, path) == 0 else { throw CocoaError(.fileWriteUnknown) }
            } catch {
                try? files.removeItem(atPath: temporary)
                throw StoreError(.invalidArgument, "cannot write \(path): \(error.localizedDescription)")
            }
        }
        for note in notes {
            let data = Data(MarkdownNotes.render(note).utf8)
            try writeAtomically(data, names[note.id]!)
            manifest.files[names[note.id]!] = SHA256.hex(data)
        }
        try MarkdownBases(folder: folder).replace(with: notes.map { ($0.id, Data(MarkdownNotes.render($0).utf8)) }, keepingOthers: false)
        // Written before the stale files go: a failure then leaves files the next export still knows.
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        var listed = manifest
        for name in stale { listed.files[name] = previous.files[name] }
        try writeAtomically(try encoder.encode(listed), MarkdownNotes.manifestName)
        for name in stale { try? files.removeItem(atPath: folder + "/" + name) }
        if !stale.isEmpty { try writeAtomically(try encoder.encode(manifest), MarkdownNotes.manifestName) }
        return MarkdownExportResult(written: notes.count, removed: stale.count)
    }

    /// Creates or updates notes from the `.md` files of `folder` (not its subfolders). A file
    /// with an `id` updates that note (created with that id when this replica does not have it):
    /// each field it gives is set only if it differs, and the body takes the minimal splices
    /// (`TextDiff`), so importing what was just exported records nothing. A file without an id
    /// is a new note.
    ///
    /// Every file is read and checked first; then all of them are applied in one transaction.
    ///
    /// - Throws: `.invalidArgument` naming the file for malformed front matter, a file that is not
    ///   UTF-8, or two files with the same id; `.notFound` for an id of a deleted note. Nothing
    ///   is imported then.
    public func importMarkdown(from folder: String) throws -> MarkdownImportResult {
        let files = FileManager.default
        var isFolder: ObjCBool = false
        guard files.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue else {
            throw StoreError(.invalidArgument, "\(folder) is not a folder")
        }
        let names = try files.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".md") && !$0.hasPrefix(".") }.sorted()
        var parsed: [MarkdownNote] = []
        var seen: [NoteID: String] = [:]
        let bases = MarkdownBases(folder: folder)
        var baseOf: [NoteID: MarkdownNote] = [:]
        var read: [(NoteID, Data)] = []
        var unchanged = 0
        for name in names {
            var info = stat()
            if lstat(folder + "/" + name, &info) == 0 {
                // Subfolders are not read, whatever their names end in.
                if info.st_mode & S_IFMT == S_IFDIR { continue }
                // A link is not followed: it may name any file of this machine (a key, /etc/passwd),
                // which would then sync to every device, from a folder shared or cloned from elsewhere.
                if info.st_mode & S_IFMT == S_IFLNK {
                    throw StoreError(.invalidArgument, "\(name): a symbolic link, which import does not follow (it may name any file on this machine); nothing was imported")
                }
            }
            // A regular file within the limit, opened without blocking and read no further: a FIFO
            // hung the import, and a link to /dev/zero (its own size tiny) filled memory.
            let data: [UInt8]
            do {
                data = try LocalFileSystem().read(folder + "/" + name, limit: MarkdownNotes.maxFileBytes)
            } catch let error as SyncError where error.code == .tooLarge {
                let size = (try? files.attributesOfItem(atPath: (folder + "/" + name as NSString).resolvingSymlinksInPath))?[.size] as? Int
                throw StoreError(.invalidArgument, "\(name): \(size.map { "\($0) bytes, " } ?? "")more than a note may hold (\(MarkdownNotes.maxFileBytes)); nothing was imported")
            } catch let error as SyncError where error.message.hasSuffix("not a regular file") {
                throw StoreError(.invalidArgument, "\(name): not a regular file; nothing was imported")
            } catch {
                throw StoreError(.invalidArgument, "\(name): cannot be read; nothing was imported")
            }
            guard let text = String(data: Data(data), encoding: .utf8) else {
                throw StoreError(.invalidArgument, "\(name): not UTF-8 text; nothing was imported")
            }
            var note: MarkdownNote
            do {
                note = try MarkdownNotes.parse(text, fileName: name)
            } catch let error as StoreError {
                throw StoreError(error.code, error.message + "; nothing was imported")
            }
            for tag in note.tags ?? [] {
                do {
                    try Self.checkTagName(tag)
                } catch let error as StoreError {
                    throw StoreError(error.code, "\(name): \(error.message); nothing was imported")
                }
            }
            if let id = note.id {
                if let other = seen[id] { throw StoreError(.invalidArgument, "\(name) and \(other) both have id \(id); nothing was imported") }
                seen[id] = name
                if try self.note(id) == nil, try deletedNote(id) != nil {
                    throw StoreError(.notFound, "\(name): note \(id) is deleted (`crdt-sync restore \(id.description.prefix(8))` brings it back); nothing was imported")
                }
                // A file as the export (or the last import) left it changes nothing: the note
                // may have changed since, on this device or another, and is newer than the file.
                // (A note this replica lacks is made from the file, base or not.)
                if try self.note(id) != nil, let base = bases.read(id) {
                    if base == Data(data) { unchanged += 1; continue }
                    if let text = String(data: base, encoding: .utf8), let old = try? MarkdownNotes.parse(text, fileName: name), old.id == id {
                        baseOf[id] = old
                    }
                }
                read.append((id, Data(data)))
            }
            parsed.append(note)
        }
        guard !parsed.isEmpty else { return MarkdownImportResult(created: 0, updated: 0, unchanged: unchanged) }
        let result = try edit { notebook in
            var result = MarkdownImportResult(created: 0, updated: 0, unchanged: unchanged)
            for file in parsed {
                let before = notebook.versionVector[notebook.replicaID]
                let id: NoteID
                if let known = file.id, notebook.note(known) != nil {
                    id = known
                    try Self.apply(file, since: baseOf[id], to: id, in: &notebook)
                    if notebook.versionVector[notebook.replicaID] == before { result.unchanged += 1 } else { result.updated += 1 }
                } else {
                    id = notebook.createNote(id: file.id ?? .random(), title: file.title, body: file.body, tags: file.tags ?? []).id
                    try Self.apply(file, since: nil, to: id, in: &notebook)
                    result.created += 1
                }
            }
            return result
        }
        // The files are the bases of the next import now. After the commit: a crash before this
        // applies the same changes again at the next import, rather than losing them.
        try? bases.replace(with: read, keepingOthers: true)
        return result
    }

    /// Sets what a file gives that differs from the note (each setter records nothing when
    /// equal). With the file's `base` (as the export or the last import left it), only what the
    /// file changed since is set, and the body takes the file's splices rebased onto the note's
    /// body: what changed in the note meanwhile, here or on another device, stays.
    static func apply(_ file: MarkdownNote, since base: MarkdownNote?, to id: NoteID, in notebook: inout Notebook) throws {
        func changed<T: Equatable>(_ value: T?, _ old: T?) -> T? {
            guard let value else { return nil }
            return base == nil || value != old ? value : nil
        }
        if file.givesTitle, base == nil || !(base!.givesTitle && base!.title == file.title) { _ = try notebook.setTitle(id, file.title) }
        if let tags = file.tags {
            let wanted = Set(tags.map(Notebook.tagKey))
            if let base {
                // Only the tags the file added or took out since its base.
                let had = Set((base.tags ?? []).map(Notebook.tagKey))
                for name in notebook.note(id)?.tags ?? [] where had.contains(Notebook.tagKey(name)) && !wanted.contains(Notebook.tagKey(name)) {
                    _ = try notebook.setTag(id, name, member: false)
                }
                for name in tags where !had.contains(Notebook.tagKey(name)) { _ = try notebook.setTag(id, NoteStore.trimmedTagName(name), member: true) }
            } else {
                for name in notebook.note(id)?.tags ?? [] where !wanted.contains(Notebook.tagKey(name)) {
                    _ = try notebook.setTag(id, name, member: false)
                }
                for name in tags { _ = try notebook.setTag(id, NoteStore.trimmedTagName(name), member: true) }
            }
        }
        if let pinned = changed(file.pinned, base?.pinned) { _ = try notebook.setPinned(id, pinned) }
        if let archived = changed(file.archived, base?.archived) { _ = try notebook.setArchived(id, archived) }
        if let color = file.color, base == nil || base!.color != .some(color) { _ = try notebook.setColor(id, color) }
        if let state = changed(file.state, base?.state) { _ = try notebook.setState(id, state) }
        let current = Array(notebook.body(of: id)?.string.unicodeScalars ?? "".unicodeScalars)
        let original = base.map { Array($0.body.unicodeScalars) } ?? current
        let wanted = Array(file.body.unicodeScalars)
        let splices = TextDiff.rebase(original: original, edited: wanted, current: current)
        if !splices.isEmpty { try notebook.applySplices(id, splices) }
    }
}

/// The bases of an export's folder (`MarkdownNotes.basesName`): each note's file as the export or
/// the last import left it. A base that cannot be read is no base (the import then sets what the
/// file gives, as without one); they are written only into a real subfolder, never through a link.
struct MarkdownBases {
    let folder: String

    var path: String { folder + "/" + MarkdownNotes.basesName }

    /// The base of note `id`, if there is one.
    func read(_ id: NoteID) -> Data? {
        (try? LocalFileSystem().read(path + "/\(id).md", limit: MarkdownNotes.maxFileBytes)).map { Data($0) }
    }

    /// Writes these bases, each atomically; without `keepingOthers`, removes the bases of other
    /// notes (an export: notes deleted since are not in it).
    func replace(with files: [(NoteID, Data)], keepingOthers: Bool) throws {
        var info = stat()
        if lstat(path, &info) != 0 {
            guard mkdir(path, 0o755) == 0 else { return }
        } else if info.st_mode & S_IFMT != S_IFDIR {
            return  // not a folder (a link put there, say): no bases, nothing written through it
        }
        // Renamed into place, not synced: a base lost with a crash only makes the next import
        // take its file as it is (an fsync per note made an export of 10,000 notes crawl).
        for (id, data) in files {
            try data.write(to: URL(fileURLWithPath: path + "/\(id).md"), options: .atomic)
        }
        guard !keepingOthers else { return }
        let kept = Set(files.map { "\($0.0).md" })
        for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] where name.hasSuffix(".md") && !kept.contains(name) {
            try? FileManager.default.removeItem(atPath: path + "/" + name)
        }
    }
}

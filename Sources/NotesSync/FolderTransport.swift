import Foundation
import NotesCRDT

/// The file transport: a shared folder (a USB stick, a Syncthing or cloud-drive folder).
///
/// Layout: `FOLDER/<writer>/<author>.<first>-<last>.crdtb`, where `<writer>` is the replica that
/// wrote the file and `<author>`, `<first>`, `<last>` name the author and the seq range of the
/// changes inside (a writer also passes on other authors' changes that the folder lacks). Every
/// file is a bundle, written once: to a temporary name, fsynced, then renamed into place. A replica
/// writes only in its own subfolder, never edits or deletes another's file, and reads everyone
/// else's. A file that does not decode (still being copied in, cut short) is skipped and read on a
/// later run; one of a replica's own files that no longer decodes is removed and written again at
/// its next sync. `compact` replaces a writer's many small files with one larger one, renaming the new
/// file in before deleting the old ones, so a reader never sees a gap.
public struct FolderTransport: SyncTransport {
    public let folder: URL
    public static let fileExtension = "crdtb"

    public init(folder: URL) { self.folder = folder }

    /// One file's name, parsed.
    struct Entry {
        var writer: ReplicaID
        var author: ReplicaID
        var first: UInt64
        var last: UInt64
        var url: URL
    }

    /// The name of a file holding `author`'s changes with seqs `first ... last`.
    public static func fileName(author: ReplicaID, first: UInt64, last: UInt64) -> String {
        "\(author).\(first)-\(last).\(fileExtension)"
    }

    static func parse(name: String) -> (author: ReplicaID, first: UInt64, last: UInt64)? {
        let parts = name.split(separator: ".")
        guard parts.count == 3, parts[2] == fileExtension, let author = ReplicaID(hex: parts[0]) else { return nil }
        let range = parts[1].split(separator: "-")
        guard range.count == 2, let first = UInt64(range[0]), let last = UInt64(range[1]), first >= 1, first <= last else { return nil }
        return (author, first, last)
    }

    func entries() throws -> [Entry] {
        let fm = FileManager.default
        var isDirectory: ObjCBool = false
        guard fm.fileExists(atPath: folder.path, isDirectory: &isDirectory) else {
            throw SyncError(.io, "\(folder.path): no such folder")
        }
        guard isDirectory.boolValue else { throw SyncError(.io, "\(folder.path) is a file, not a folder") }
        var result: [Entry] = []
        let writers = (try? fm.contentsOfDirectory(atPath: folder.path)) ?? []
        for writerName in writers {
            guard let writer = ReplicaID(hex: writerName) else { continue }
            let sub = folder.appendingPathComponent(writerName)
            for name in (try? fm.contentsOfDirectory(atPath: sub.path)) ?? [] {
                guard let parsed = FolderTransport.parse(name: name) else { continue }
                result.append(Entry(writer: writer, author: parsed.author, first: parsed.first, last: parsed.last,
                                    url: sub.appendingPathComponent(name)))
            }
        }
        return result
    }

    /// Per author, the operations that the folder holds contiguously from seq 1.
    ///
    /// This replica's own files are read and checked: one that no longer decodes (a sync tool or a
    /// disk broke it after it was written whole) is removed, so its range counts as missing and this
    /// sync writes it again. Otherwise a damaged file would block its range for every reader for good.
    public func remoteVersion(for local: ReplicaID) async throws -> VersionVector {
        var ranges: [(author: ReplicaID, first: UInt64, last: UInt64)] = []
        for entry in try entries() {
            if entry.writer == local, case .failure = read(entry) {
                try? FileManager.default.removeItem(at: entry.url)
                continue
            }
            ranges.append((entry.author, entry.first, entry.last))
        }
        return FolderTransport.contiguousCoverage(ranges)
    }

    /// Per author, how far files holding these seq ranges cover the author's operations without a
    /// gap from seq 1 (what a folder holding them can be said to have).
    public static func contiguousCoverage(_ files: [(author: ReplicaID, first: UInt64, last: UInt64)]) -> VersionVector {
        var byAuthor: [ReplicaID: [(first: UInt64, last: UInt64)]] = [:]
        for file in files { byAuthor[file.author, default: []].append((file.first, file.last)) }
        var version = VersionVector()
        for (author, ranges) in byAuthor {
            var covered: UInt64 = 0
            for range in ranges.sorted(by: { $0.first < $1.first }) {
                if range.first > covered + 1 { break }
                covered = max(covered, range.last)
            }
            version[author] = covered
        }
        return version
    }

    /// Writes one file per author, in the sender's own subfolder.
    public func send(_ bundle: SyncBundle) async throws {
        let sub = folder.appendingPathComponent(bundle.sender.description)
        do {
            try FileManager.default.createDirectory(at: sub, withIntermediateDirectories: true)
        } catch {
            throw SyncError(.io, "\(sub.path): cannot create the folder (\(error.localizedDescription))")
        }
        var byAuthor: [ReplicaID: [Change]] = [:]
        var order: [ReplicaID] = []
        for change in bundle.changes {
            if byAuthor[change.replica] == nil { order.append(change.replica) }
            byAuthor[change.replica, default: []].append(change)
        }
        for author in order {
            let changes = byAuthor[author]!
            let first = changes.map(\.startSeq).min()!
            let last = changes.map(\.endSeq).max()!
            let piece = SyncBundle(sender: bundle.sender, senderVersion: bundle.senderVersion, changes: changes)
            try AtomicFile.write(piece.encoded(), to: sub.appendingPathComponent(FolderTransport.fileName(author: author, first: first, last: last)))
        }
    }

    public func receive(for local: ReplicaID, version: VersionVector) async throws -> (bundles: [ReceivedBundle], skipped: [SkippedInput]) {
        var bundles: [ReceivedBundle] = []
        var skipped: [SkippedInput] = []
        var newestRead: [ReplicaID: Bool] = [:]
        let all = try entries().filter { $0.writer != local }
        // Read what we lack, oldest ranges first.
        for entry in all.sorted(by: { ($0.author, $0.first) < ($1.author, $1.first) }) where entry.last > version[entry.author] {
            switch read(entry) {
            case .success(let bundle):
                bundles.append(ReceivedBundle(bundle: bundle, source: entry.url.path))
                newestRead[entry.writer] = true
            case .failure(let error):
                skipped.append(SkippedInput(source: entry.url.path, reason: error.message))
            }
        }
        // For writers we read nothing from, read the newest file's header to learn what they have.
        let byWriter = Dictionary(grouping: all, by: \.writer)
        for (writer, files) in byWriter where newestRead[writer] == nil {
            guard let newest = files.max(by: { modificationDate($0.url) < modificationDate($1.url) }) else { continue }
            if case .success(let header) = read(newest, SyncBundle.decodeHeader) {
                bundles.append(ReceivedBundle(bundle: SyncBundle(sender: header.sender, senderVersion: header.senderVersion, changes: []),
                                              source: newest.url.path))
            }
        }
        return (bundles, skipped)
    }

    private func modificationDate(_ url: URL) -> Date {
        ((try? FileManager.default.attributesOfItem(atPath: url.path))?[.modificationDate] as? Date) ?? .distantPast
    }

    private func read(_ entry: Entry) -> Result<SyncBundle, SyncError> {
        read(entry, SyncBundle.decode)
    }

    /// Reads a file with `decode` (the whole bundle, or its header), and checks that the writer it
    /// names is the one whose folder it sits in.
    private func read<T: BundleReading>(_ entry: Entry, _ decode: ([UInt8]) throws -> T) -> Result<T, SyncError> {
        guard let data = FileManager.default.contents(atPath: entry.url.path) else {
            return .failure(SyncError(.io, "cannot be read (it may have just been replaced)"))
        }
        do {
            let bundle = try decode([UInt8](data))
            guard bundle.sender == entry.writer else {
                return .failure(SyncError(.malformed, "written by \(bundle.sender), but it sits in \(entry.writer)'s folder"))
            }
            return .success(bundle)
        } catch let error as SyncError {
            return .failure(error)
        } catch {
            return .failure(SyncError(.malformed, "\(error)"))
        }
    }

    /// Replaces this writer's files of each author by one file, when it has more than `threshold`.
    ///
    /// - Returns: how many files were removed.
    @discardableResult
    public func compact(writer: ReplicaID, threshold: Int = 32) throws -> Int {
        let mine = try entries().filter { $0.writer == writer }
        var removed = 0
        for (author, files) in Dictionary(grouping: mine, by: \.author) where files.count > threshold {
            var changes: [Change] = []
            var senderVersion = VersionVector()
            for file in files.sorted(by: { $0.first < $1.first }) {
                guard case .success(let bundle) = read(file) else { continue }
                changes.append(contentsOf: bundle.changes)
                senderVersion.merge(bundle.senderVersion)
            }
            guard !changes.isEmpty else { continue }
            let first = changes.map(\.startSeq).min()!
            let last = changes.map(\.endSeq).max()!
            let target = folder.appendingPathComponent(writer.description)
                .appendingPathComponent(FolderTransport.fileName(author: author, first: first, last: last))
            try AtomicFile.write(SyncBundle(sender: writer, senderVersion: senderVersion, changes: changes).encoded(), to: target)
            for file in files where file.url.lastPathComponent != target.lastPathComponent {
                try? FileManager.default.removeItem(at: file.url)
                removed += 1
            }
        }
        return removed
    }
}

/// Writes a file so that a crash at any instant leaves either the old state or the whole new file:
/// a temporary file in the same folder, fsync, rename, fsync of the folder.
public enum AtomicFile {
    public static func write(_ bytes: [UInt8], to url: URL) throws {
        let folder = url.deletingLastPathComponent()
        let temp = folder.appendingPathComponent(".\(url.lastPathComponent).tmp-\(UInt32.random(in: 0 ... .max))")
        let fd = open(temp.path, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        guard fd >= 0 else { throw SyncError(.io, "\(temp.path): cannot create (\(String(cString: strerror(errno))))") }
        var written = 0
        let ok = bytes.withUnsafeBytes { raw -> Bool in
            while written < raw.count {
                let n = Foundation.write(fd, raw.baseAddress! + written, raw.count - written)
                if n <= 0 { return false }
                written += n
            }
            return fsync(fd) == 0
        }
        close(fd)
        guard ok else {
            unlink(temp.path)
            throw SyncError(.io, "\(url.path): cannot write (\(String(cString: strerror(errno))))")
        }
        guard rename(temp.path, url.path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temp.path)
            throw SyncError(.io, "\(url.path): cannot rename into place (\(reason))")
        }
        let dir = open(folder.path, O_RDONLY)
        if dir >= 0 { fsync(dir); close(dir) }
    }
}

/// What a folder read hands out, a whole bundle or its header: both name their writer.
protocol BundleReading { var sender: ReplicaID { get } }
extension SyncBundle: BundleReading {}
extension SyncBundle.Header: BundleReading {}

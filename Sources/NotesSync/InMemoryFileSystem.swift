import NotesCRDT
import Synchronization

/// A file system in memory: a folder tree of byte arrays with modification times from a clock
/// you give. Tests and the simulator run the shipped `FolderTransport` over it.
///
/// Besides plain files it can make a file look the way real shared folders sometimes show one:
/// cut short while a sync tool is still copying it, with damaged bytes, or gone between the
/// listing and the read (`injectFault(_:at:)`). Thread-safe.
public final class InMemoryFileSystem: FileSystem, Sendable {
    /// What a reader may see of a file instead of its bytes.
    public enum Fault: Sendable, Hashable {
        /// Only the first `count` bytes are there yet (a copy in progress).
        case truncated(Int)
        /// The byte at `offset` (modulo the size) reads as itself XOR `mask` (a damaged copy).
        case damaged(offset: Int, mask: UInt8)
        /// Listed, but gone when read (deleted in between).
        case vanishesOnRead
    }

    struct Entry {
        var bytes: [UInt8]
        var modified: UInt64
        var fault: Fault?
    }

    /// Per directory (normalized path), its files by name; the directory set holds every directory.
    struct Tree {
        var files: [String: [String: Entry]] = ["/": [:]]
        var directories: Set<String> = ["/"]
    }

    private let tree = Mutex(Tree())
    private let clock: @Sendable () -> UInt64

    /// An empty file system whose modification times come from `clock` (milliseconds).
    public init(clock: @escaping @Sendable () -> UInt64 = { 0 }) {
        self.clock = clock
    }

    /// `path` made absolute, without `.`, empty components or a trailing `/` (unchanged, and not
    /// copied, when it already is).
    static func normalize(_ path: String) -> String {
        if isNormal(path) { return path }
        var parts: [Substring] = []
        for part in path.split(separator: "/") where part != "." && !part.isEmpty { parts.append(part) }
        return "/" + parts.joined(separator: "/")
    }

    /// Whether a path is absolute with no empty or `.` component and no trailing `/`: one pass
    /// over its bytes (every call of the file system takes a path).
    static func isNormal(_ path: String) -> Bool {
        var utf8 = path
        return utf8.withUTF8 { bytes in
            guard let first = bytes.first, first == UInt8(ascii: "/") else { return false }
            if bytes.count == 1 { return true }
            var componentStart = 1
            for index in 1 ... bytes.count {
                guard index == bytes.count || bytes[index] == UInt8(ascii: "/") else { continue }
                let length = index - componentStart
                if length == 0 || (length == 1 && bytes[componentStart] == UInt8(ascii: ".")) { return false }
                componentStart = index + 1
            }
            return true
        }
    }

    /// A normalized path's directory and name.
    static func split(_ path: String) -> (directory: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return ("/", path) }
        let directory = slash == path.startIndex ? "/" : String(path[..<slash])
        return (directory, String(path[path.index(after: slash)...]))
    }

    static func parent(_ path: String) -> String { split(path).directory }

    /// The names in a directory, sorted; nil when there is no directory at `path`.
    public func contentsOfDirectory(_ path: String) throws -> [String]? {
        let directory = InMemoryFileSystem.normalize(path)
        return tree.withLock { tree -> [String]? in
            guard tree.directories.contains(directory) else { return nil }
            var names = Array(tree.files[directory, default: [:]].keys)
            let prefix = directory == "/" ? "/" : directory + "/"
            for key in tree.directories where key.count > prefix.count && key.hasPrefix(prefix) {
                let rest = key.dropFirst(prefix.count)
                if !rest.contains("/") { names.append(String(rest)) }
            }
            return names.sorted()
        }
    }

    /// The entries of a directory with their attributes, sorted by name; nil when there is no
    /// directory at `path`.
    public func listing(_ path: String) throws -> [(name: String, attributes: FileAttributes)]? {
        let directory = InMemoryFileSystem.normalize(path)
        return tree.withLock { tree -> [(name: String, attributes: FileAttributes)]? in
            guard tree.directories.contains(directory) else { return nil }
            var result: [(name: String, attributes: FileAttributes)] = []
            for (name, entry) in tree.files[directory, default: [:]] {
                result.append((name, FileAttributes(size: InMemoryFileSystem.visible(entry)?.count ?? entry.bytes.count,
                                                    modifiedMilliseconds: entry.modified)))
            }
            let prefix = directory == "/" ? "/" : directory + "/"
            for key in tree.directories where key.count > prefix.count && key.hasPrefix(prefix) {
                let rest = key.dropFirst(prefix.count)
                if !rest.contains("/") { result.append((String(rest), FileAttributes(size: 0, modifiedMilliseconds: 0, isDirectory: true))) }
            }
            return result.sorted { $0.name < $1.name }
        }
    }

    /// A file's or directory's attributes, or nil when nothing is at `path`.
    public func attributes(_ path: String) throws -> FileAttributes? {
        let key = InMemoryFileSystem.normalize(path)
        let (directory, name) = InMemoryFileSystem.split(key)
        return tree.withLock { tree -> FileAttributes? in
            if let entry = tree.files[directory]?[name] {
                return FileAttributes(size: InMemoryFileSystem.visible(entry)?.count ?? entry.bytes.count, modifiedMilliseconds: entry.modified)
            }
            return tree.directories.contains(key) ? FileAttributes(size: 0, modifiedMilliseconds: 0, isDirectory: true) : nil
        }
    }

    /// A file's bytes, as its fault (if any) shows them; a file larger than `limit` bytes is refused.
    public func read(_ path: String, limit: Int) throws -> [UInt8] {
        let (directory, name) = InMemoryFileSystem.split(InMemoryFileSystem.normalize(path))
        let bytes: [UInt8]? = tree.withLock { tree in
            guard let entry = tree.files[directory]?[name] else { return nil }
            return InMemoryFileSystem.visible(entry)
        }
        guard let bytes else { throw SyncError(.io, "\(path): cannot be read (no such file)") }
        guard bytes.count <= limit else {
            throw SyncError(.tooLarge, "\(path): \(bytes.count) bytes is larger than the \(limit)-byte limit for a bundle file; it was not read")
        }
        return bytes
    }

    /// What a reader sees of a file: its bytes through its fault, nil when it vanished.
    static func visible(_ entry: Entry) -> [UInt8]? {
        switch entry.fault {
        case nil: return entry.bytes
        case .truncated(let count): return Array(entry.bytes.prefix(max(0, count)))
        case .damaged(let offset, let mask):
            guard !entry.bytes.isEmpty else { return entry.bytes }
            var bytes = entry.bytes
            bytes[((offset % bytes.count) + bytes.count) % bytes.count] ^= mask == 0 ? 1 : mask
            return bytes
        case .vanishesOnRead: return nil
        }
    }

    /// Writes a file at once, modified at the clock's current time.
    public func writeAtomically(_ bytes: [UInt8], to path: String) throws {
        try write(bytes, to: path, modified: clock())
    }

    /// Writes a file with a given modification time (a sync tool's copy keeps the original's).
    public func write(_ bytes: [UInt8], to path: String, modified: UInt64, fault: Fault? = nil) throws {
        let key = InMemoryFileSystem.normalize(path)
        let (directory, name) = InMemoryFileSystem.split(key)
        try tree.withLock { tree in
            guard tree.directories.contains(directory) else { throw SyncError(.io, "\(path): no such folder") }
            guard !tree.directories.contains(key) else { throw SyncError(.io, "\(path) is a folder") }
            tree.files[directory, default: [:]][name] = Entry(bytes: bytes, modified: modified, fault: fault)
        }
    }

    /// Removes a file (nothing happens when there is none).
    public func remove(_ path: String) throws {
        let (directory, name) = InMemoryFileSystem.split(InMemoryFileSystem.normalize(path))
        _ = tree.withLock { $0.files[directory]?.removeValue(forKey: name) }
    }

    /// Creates a directory and the directories above it that are missing.
    public func createDirectory(_ path: String) throws {
        let key = InMemoryFileSystem.normalize(path)
        try tree.withLock { tree in
            var current = ""
            for part in key.split(separator: "/") {
                let parent = current.isEmpty ? "/" : current
                guard tree.files[parent]?[String(part)] == nil else { throw SyncError(.io, "\(current)/\(part) is a file, not a folder") }
                current += "/" + part
                tree.directories.insert(current)
            }
        }
    }

    /// Makes readers see `fault` instead of the file at `path` (nil: its true bytes again).
    public func injectFault(_ fault: Fault?, at path: String) {
        let (directory, name) = InMemoryFileSystem.split(InMemoryFileSystem.normalize(path))
        tree.withLock { tree in tree.files[directory]?[name]?.fault = fault }
    }

    /// The fault readers see at `path`, if any.
    public func fault(at path: String) -> Fault? {
        let (directory, name) = InMemoryFileSystem.split(InMemoryFileSystem.normalize(path))
        return tree.withLock { $0.files[directory]?[name]?.fault }
    }

    /// The true bytes of the file at `path` (whatever a reader would see), or nil.
    public func storedBytes(_ path: String) -> [UInt8]? {
        let (directory, name) = InMemoryFileSystem.split(InMemoryFileSystem.normalize(path))
        return tree.withLock { $0.files[directory]?[name]?.bytes }
    }

    /// Every file's path, sorted.
    public var allFiles: [String] {
        tree.withLock { tree in
            tree.files.flatMap { directory, files in files.keys.map { directory == "/" ? "/" + $0 : directory + "/" + $0 } }.sorted()
        }
    }
}

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

    struct Tree {
        var files: [String: Entry] = [:]
        var directories: Set<String> = ["", "/"]
    }

    private let tree = Mutex(Tree())
    private let clock: @Sendable () -> UInt64

    /// An empty file system whose modification times come from `clock` (milliseconds).
    public init(clock: @escaping @Sendable () -> UInt64 = { 0 }) {
        self.clock = clock
    }

    static func normalize(_ path: String) -> String {
        var parts: [Substring] = []
        for part in path.split(separator: "/") where part != "." && !part.isEmpty { parts.append(part) }
        return "/" + parts.joined(separator: "/")
    }

    static func parent(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }

    public func contentsOfDirectory(_ path: String) throws -> [String]? {
        let directory = InMemoryFileSystem.normalize(path)
        return tree.withLock { tree -> [String]? in
            guard tree.directories.contains(directory) else { return nil }
            let prefix = directory == "/" ? "/" : directory + "/"
            var names: Set<String> = []
            for key in tree.files.keys where key.hasPrefix(prefix) {
                let rest = key.dropFirst(prefix.count)
                if !rest.contains("/") { names.insert(String(rest)) }
            }
            for key in tree.directories where key.hasPrefix(prefix) && key.count > prefix.count {
                let rest = key.dropFirst(prefix.count)
                if !rest.contains("/") { names.insert(String(rest)) }
            }
            return names.sorted()
        }
    }

    public func attributes(_ path: String) throws -> FileAttributes? {
        let key = InMemoryFileSystem.normalize(path)
        return tree.withLock { tree -> FileAttributes? in
            if let entry = tree.files[key] {
                return FileAttributes(size: InMemoryFileSystem.visible(entry)?.count ?? entry.bytes.count, modifiedMilliseconds: entry.modified)
            }
            return tree.directories.contains(key) ? FileAttributes(size: 0, modifiedMilliseconds: 0, isDirectory: true) : nil
        }
    }

    public func read(_ path: String, limit: Int) throws -> [UInt8] {
        let key = InMemoryFileSystem.normalize(path)
        let bytes: [UInt8]? = tree.withLock { tree in
            guard let entry = tree.files[key] else { return nil }
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

    public func writeAtomically(_ bytes: [UInt8], to path: String) throws {
        try write(bytes, to: path, modified: clock())
    }

    /// Writes a file with a given modification time (a sync tool's copy keeps the original's).
    public func write(_ bytes: [UInt8], to path: String, modified: UInt64, fault: Fault? = nil) throws {
        let key = InMemoryFileSystem.normalize(path)
        let parent = InMemoryFileSystem.parent(key)
        try tree.withLock { tree in
            guard tree.directories.contains(parent) else { throw SyncError(.io, "\(path): no such folder") }
            guard !tree.directories.contains(key) else { throw SyncError(.io, "\(path) is a folder") }
            tree.files[key] = Entry(bytes: bytes, modified: modified, fault: fault)
        }
    }

    public func remove(_ path: String) throws {
        let key = InMemoryFileSystem.normalize(path)
        _ = tree.withLock { $0.files.removeValue(forKey: key) }
    }

    public func createDirectory(_ path: String) throws {
        let key = InMemoryFileSystem.normalize(path)
        try tree.withLock { tree in
            var current = ""
            for part in key.split(separator: "/") {
                current += "/" + part
                guard tree.files[current] == nil else { throw SyncError(.io, "\(current) is a file, not a folder") }
                tree.directories.insert(current)
            }
        }
    }

    /// Makes readers see `fault` instead of the file at `path` (nil: its true bytes again).
    public func injectFault(_ fault: Fault?, at path: String) {
        let key = InMemoryFileSystem.normalize(path)
        tree.withLock { tree in tree.files[key]?.fault = fault }
    }

    /// The fault readers see at `path`, if any.
    public func fault(at path: String) -> Fault? {
        let key = InMemoryFileSystem.normalize(path)
        return tree.withLock { $0.files[key]?.fault }
    }

    /// The true bytes of the file at `path` (whatever a reader would see), or nil.
    public func storedBytes(_ path: String) -> [UInt8]? {
        let key = InMemoryFileSystem.normalize(path)
        return tree.withLock { $0.files[key]?.bytes }
    }

    /// Every file's path, sorted.
    public var allFiles: [String] {
        tree.withLock { $0.files.keys.sorted() }
    }
}

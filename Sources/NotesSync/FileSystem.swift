#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A file's size and when it was last written.
public struct FileAttributes: Sendable, Hashable {
    /// Bytes.
    public var size: Int
    /// Milliseconds since the Unix epoch.
    public var modifiedMilliseconds: UInt64
    /// Whether it is a directory.
    public var isDirectory: Bool

    /// Attributes of a file or directory.
    public init(size: Int, modifiedMilliseconds: UInt64, isDirectory: Bool = false) {
        self.size = size
        self.modifiedMilliseconds = modifiedMilliseconds
        self.isDirectory = isDirectory
    }
}

/// The file operations the folder transport needs, so that it runs unchanged over the real file
/// system (`LocalFileSystem`) and over an in-memory one (`InMemoryFileSystem`, which tests and the
/// simulator use to do what real shared folders do: late, partial, damaged and vanishing copies).
///
/// Paths are `/`-separated strings. Every method throws `SyncError` (code `.io`) on failure.
public protocol FileSystem: Sendable {
    /// The names in a directory (no `.` or `..`), or nil when there is no directory at `path`.
    func contentsOfDirectory(_ path: String) throws -> [String]?
    /// A file's attributes, or nil when nothing is at `path`.
    func attributes(_ path: String) throws -> FileAttributes?
    /// A file's bytes; a file larger than `limit` bytes is refused (`SyncError` code `.tooLarge`)
    /// without being read.
    func read(_ path: String, limit: Int) throws -> [UInt8]
    /// Writes a file so that a reader sees either what was there before or the whole new file
    /// (a temporary file, fsync, rename, fsync of the directory).
    func writeAtomically(_ bytes: [UInt8], to path: String) throws
    /// Removes a file (nothing happens when there is none).
    func remove(_ path: String) throws
    /// Creates a directory and the directories above it that are missing.
    func createDirectory(_ path: String) throws
    /// The entries of a directory with their attributes, or nil when there is no directory at
    /// `path` (an entry that vanishes while it is listed is left out).
    func listing(_ path: String) throws -> [(name: String, attributes: FileAttributes)]?
}

extension FileSystem {
    /// The entries of a directory with their attributes, from `contentsOfDirectory(_:)` and
    /// `attributes(_:)`; nil when there is no directory at `path`.
    public func listing(_ path: String) throws -> [(name: String, attributes: FileAttributes)]? {
        guard let names = try contentsOfDirectory(path) else { return nil }
        return names.compactMap { name in
            (try? attributes(FileSystemPaths.join(path, name))).flatMap { $0 }.map { (name, $0) }
        }
    }
}

/// The machine's own file system, through POSIX calls.
public struct LocalFileSystem: FileSystem {
    /// The local file system.
    public init() {}

    /// The names in a directory (no `.` or `..`), sorted; nil when there is no directory at `path`.
    public func contentsOfDirectory(_ path: String) throws -> [String]? {
        guard let directory = opendir(path) else {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            throw LocalFileSystem.failure(path, "cannot list the folder")
        }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafePointer(to: entry.pointee.d_name) { pointer in
                pointer.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
            }
            if name != ".", name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    /// A file's or directory's attributes, or nil when nothing is at `path`.
    public func attributes(_ path: String) throws -> FileAttributes? {
        var info = stat()
        guard stat(path, &info) == 0 else {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            throw LocalFileSystem.failure(path, "cannot read its attributes")
        }
        #if canImport(Darwin)
        let modified = info.st_mtimespec
        #else
        let modified = info.st_mtim
        #endif
        let milliseconds = UInt64(max(0, modified.tv_sec)) &* 1000 &+ UInt64(max(0, modified.tv_nsec / 1_000_000))
        return FileAttributes(size: Int(info.st_size), modifiedMilliseconds: milliseconds,
                              isDirectory: (info.st_mode & S_IFMT) == S_IFDIR)
    }

    /// A file's bytes; a file larger than `limit` bytes is refused without being read.
    public func read(_ path: String, limit: Int) throws -> [UInt8] {
        // Non-blocking: opening a FIFO put in the folder would otherwise wait for a writer forever
        // (it is then refused below as not a regular file; regular files ignore the flag).
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw LocalFileSystem.failure(path, "cannot be read") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw LocalFileSystem.failure(path, "cannot be read") }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw SyncError(.io, "\(path): not a regular file") }
        guard info.st_size <= limit else {
            throw SyncError(.tooLarge, "\(path): \(info.st_size) bytes is larger than the \(limit)-byte limit for a bundle file; it was not read")
        }
        // Read at most limit + 1 bytes: a file that grows while it is read is still bounded.
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var filled = 0
        while true {
            if filled == bytes.count {
                guard bytes.count <= limit else { break }
                bytes.append(contentsOf: repeatElement(0, count: min(64 << 10, limit + 1 - bytes.count)))
            }
            let n = bytes.withUnsafeMutableBytes { systemRead(fd, $0.baseAddress! + filled, $0.count - filled) }
            if n < 0 {
                if errno == EINTR { continue }
                throw LocalFileSystem.failure(path, "cannot be read")
            }
            if n == 0 { break }
            filled += n
        }
        guard filled <= limit else {
            throw SyncError(.tooLarge, "\(path): larger than the \(limit)-byte limit for a bundle file; it was not read")
        }
        bytes.removeLast(bytes.count - filled)
        return bytes
    }

    /// Writes a file through a temporary file, fsync, rename and an fsync of the directory, so
    /// that a reader sees either the old file or the whole new one.
    public func writeAtomically(_ bytes: [UInt8], to path: String) throws {
        let slash = path.lastIndex(of: "/")
        let folder = slash.map { String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        let temporary = FileSystemPaths.join(folder, ".\(name).tmp-\(UInt32.random(in: 0 ... .max))")
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        guard fd >= 0 else { throw LocalFileSystem.failure(temporary, "cannot create") }
        var written = 0
        let ok = bytes.withUnsafeBytes { raw -> Bool in
            while written < raw.count {
                let n = write(fd, raw.baseAddress! + written, raw.count - written)
                if n < 0, errno == EINTR { continue }
                if n <= 0 { return false }
                written += n
            }
            return fsync(fd) == 0
        }
        let writeError = errno
        close(fd)
        guard ok else {
            unlink(temporary)
            throw SyncError(.io, "\(path): cannot write (\(String(cString: strerror(writeError))))")
        }
        // A folder put at the file's name (by anyone who can write the shared folder) would stop
        // every later sync of this replica: it is moved aside, whole, and the file written.
        var renamed = rename(temporary, path) == 0
        if !renamed, errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST, (try? LocalFileSystem.moveAside(path)) != nil {
            renamed = rename(temporary, path) == 0
        }
        guard renamed else {
            let failure = LocalFileSystem.failure(path, "cannot rename into place")
            unlink(temporary)
            throw failure
        }
        let directory = open(folder, O_RDONLY)
        if directory >= 0 {
            fsync(directory)
            close(directory)
        }
    }

    /// Removes a file (nothing happens when there is none).
    public func remove(_ path: String) throws {
        guard unlink(path) == 0 || errno == ENOENT else { throw LocalFileSystem.failure(path, "cannot remove") }
    }

    /// Creates a directory and the directories above it that are missing. Whatever else is at
    /// `path` itself (a file, a symbolic link, a FIFO) is moved aside, whole, to
    /// `.NAME.in-the-way-N` beside it, and the directory created: the folder transport writes a
    /// replica's files in its own subfolder, and an entry put in its place by anyone who can
    /// write the shared folder would stop every sync of that replica, or (a link) have its files
    /// written wherever the link points. The directories above `path` may be links.
    public func createDirectory(_ path: String) throws {
        var prefix = path.hasPrefix("/") ? "/" : ""
        for component in path.split(separator: "/") {
            prefix += component
            if mkdir(prefix, 0o755) != 0, errno != EEXIST {
                throw LocalFileSystem.failure(prefix, "cannot create the folder")
            }
            prefix += "/"
        }
        var info = stat()
        guard lstat(path, &info) == 0 else { throw LocalFileSystem.failure(path, "cannot create the folder") }
        guard (info.st_mode & S_IFMT) != S_IFDIR else { return }
        try LocalFileSystem.moveAside(path)
        guard mkdir(path, 0o755) == 0 else { throw LocalFileSystem.failure(path, "cannot create the folder") }
    }

    /// Renames what is at `path` to a hidden name beside it that no reader of the folder takes
    /// for a bundle file or a writer's subfolder.
    static func moveAside(_ path: String) throws {
        let slash = path.lastIndex(of: "/")
        let folder = slash.map { String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        let aside = FileSystemPaths.join(folder, ".\(name).in-the-way-\(UInt32.random(in: 0 ... .max))")
        guard rename(path, aside) == 0 else { throw LocalFileSystem.failure(path, "is in the way and cannot be moved aside") }
    }

    static func failure(_ path: String, _ what: String) -> SyncError {
        SyncError(.io, "\(path): \(what) (\(String(cString: strerror(errno))))")
    }
}

/// POSIX `read`, by a name that does not clash with `FileSystem.read`.
private func systemRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
    read(fd, buffer, count)
}

/// Joining paths.
enum FileSystemPaths {
    /// `path` and `name` joined by a `/`.
    static func join(_ path: String, _ name: String) -> String {
        path.hasSuffix("/") ? path + name : path + "/" + name
    }
}

/// Writes a file of the machine's file system atomically (see `FileSystem.writeAtomically`).
package enum AtomicFile {
    /// Writes `bytes` to `path`: a temporary file, fsync, rename, fsync of the folder. A path
    /// that names something other than a regular file is refused: the rename would put a file in
    /// place of a device (`/dev/null`, run as root), a FIFO or a folder. A symbolic link is
    /// written through, to the regular file it names, as a shell's `>` would.
    package static func write(_ bytes: [UInt8], toPath path: String) throws {
        try LocalFileSystem().writeAtomically(bytes, to: try writablePath(path))
    }

    /// The path to rename the written file to: `path`, or where its symbolic links lead.
    package static func writablePath(_ path: String) throws -> String {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            if errno == ENOENT { return path }
            throw LocalFileSystem.failure(path, "cannot read what is there")
        }
        var target = path
        if info.st_mode & S_IFMT == S_IFLNK {
            guard stat(path, &info) == 0, let resolved = realpath(path, nil) else {
                throw SyncError(.io, "\(path) is a symbolic link to nothing that can be written; give the path of a file")
            }
            target = String(cString: resolved)
            free(resolved)
        }
        let kind: String? = switch info.st_mode & S_IFMT {
        case S_IFREG: nil
        case S_IFDIR: "a folder"
        case S_IFCHR, S_IFBLK: "a device"
        case S_IFIFO: "a FIFO"
        case S_IFSOCK: "a socket"
        default: "not a regular file"
        }
        if let kind {
            throw SyncError(.io, "\(path) is \(kind), left as it is: give the path of a file to write")
        }
        return target
    }
}

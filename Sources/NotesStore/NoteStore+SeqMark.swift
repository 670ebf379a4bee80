import Foundation
import GRDB
import NotesCRDT


/// How far a database's identity has handed out seqs, kept in a small file beside it
/// (`<database>-seqmark`): what a database restored from a backup over itself cannot take back.
///
/// Copying the file over itself (`cp backup.db notes.db`, `cat backup.db > notes.db`) keeps its
/// inode, so the file-identity check at open cannot see it. The database then holds fewer seqs
/// than its identity already handed out, maybe sent; its next edits would repeat those seqs with
/// other operations, and every replica that has the first ones would refuse them for good. The
/// mark outlives the restore: a database whose identity's seqs stop below the mark (or whose
/// identity is not the one the mark names, nor one it moved away from) moves to a fresh identity
/// at open, before it writes, as a copy does.
///
/// The mark is written at open and when changes are read to be sent (`changes(since:)`), through a
/// temporary file renamed into place, without an fsync: a mark that lags (a crash) can only miss
/// a restore, and one that runs ahead only costs a fresh identity. A restore of the database and
/// its mark together is not seen, unless a copy of the mark is kept elsewhere too
/// (`StoreOptions.seqMarkCopies`): the copy outlives a restore of the database's folder.
struct SeqMark: Equatable, Sendable {
    var replica: ReplicaID
    var seq: UInt64

    /// Where a database's mark is kept: in a file beside it, or, for a database in memory, with
    /// the object that stands for the file (which a restore over it keeps, as a file keeps its
    /// neighbour).
    enum Place {
        /// Beside the file, and at `copy` (in the folder of copies, `copyPath`) when there is one.
        case beside(String, copy: String?)
        case memory(InMemoryDatabase)

        func read() -> SeqMark? {
            switch self {
            case .beside(let path, let copy):
                let beside = SeqMark.read(file: path + SeqMark.suffix)
                guard let copy = copy.flatMap(SeqMark.read(file:)) else { return beside }
                guard let beside else { return copy }
                // The copy outlives a restore of the file's folder, which brings an older mark back.
                return beside.replica == copy.replica && beside.seq > copy.seq ? beside : copy
            case .memory(let database): return database.seqMark.withLock { $0 }
            }
        }

        func write(_ mark: SeqMark) {
            switch self {
            case .beside(let path, let copy):
                mark.write(file: path + SeqMark.suffix)
                // The folder of copies is made only when the first write into it fails.
                if let copy, !mark.write(file: copy) {
                    try? FileManager.default.createDirectory(atPath: (copy as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                    mark.write(file: copy)
                }
            case .memory(let database): database.seqMark.withLock { $0 = mark }
            }
        }
    }

    /// The copy of a database's mark in the folder of copies: named by the SHA-256 of the
    /// file's resolved path (nil when it cannot be resolved).
    static func copyPath(of database: String, in folder: String) -> String? {
        guard let resolved = realpath(database, nil) else { return nil }
        defer { free(resolved) }
        return folder + "/" + SHA256.hex(SHA256.digest(Array(String(cString: resolved).utf8))) + suffix
    }

    static let suffix = "-seqmark"
    static let header = "crdt-sync seqmark 1"

    /// The mark beside `database`, or nil when there is none or it cannot be read (a mark that
    /// cannot be trusted is no mark: it can only be rewritten).
    static func read(file: String) -> SeqMark? {
        let fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size <= 256 else { return nil }
        var bytes = [UInt8](repeating: 0, count: 257)
        let count = bytes.withUnsafeMutableBytes { posixRead(fd, $0.baseAddress!, $0.count) }
        guard count > 0, count <= 256, let text = String(bytes: bytes[..<count], encoding: .utf8) else { return nil }
        let lines = text.split(separator: "\n")
        guard lines.count == 2, lines[0] == header else { return nil }
        let fields = lines[1].split(separator: " ")
        guard fields.count == 2, let replica = ReplicaID(hex: String(fields[0])), let seq = UInt64(fields[1]),
              seq <= Change.maxSeq else { return nil }
        return SeqMark(replica: replica, seq: seq)
    }

    /// Writes the mark to `path`; false when it could not be (a read-only folder, say).
    @discardableResult
    func write(file path: String) -> Bool {
        // A fresh random name, never through a link: anyone who can write the folder could put
        // a link at a name known in advance, and have a file of the user's overwritten.
        let temporary = path + ".\(UInt64.random(in: 0 ... .max)).tmp"
        let bytes = Array("\(SeqMark.header)\n\(replica) \(seq)\n".utf8)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return false }
        let written = bytes.withUnsafeBytes { posixWrite(fd, $0.baseAddress!, $0.count) }
        close(fd)
        guard written == bytes.count, rename(temporary, path) == 0 else {
            unlink(temporary)
            return false
        }
        return true
    }
}

extension NoteStore {
    /// The highest seq of `replica` the database holds: from the replica-wide state the last
    /// write kept, else (a database not written since that was kept) from the log.
    static func heldSeq(of replica: ReplicaID, _ db: Database, options: StoreOptions) throws -> UInt64 {
        if let row = try Row.fetchOne(db, sql: "SELECT replica_state, tag_state FROM replica WHERE id = 1"),
           let state = try row.stored("replica_state", as: Data?.self), let tags = try row.stored("tag_state", as: Data?.self),
           let partial = try? Notebook(partialReplica: replica, wallClock: options.wallClock, replicaState: [UInt8](state),
                                       tags: [UInt8](tags), notes: []) {
            return partial.versionVector[replica]
        }
        let logged = try Int64.fetchOne(db, sql: "SELECT max(end_seq) FROM changes WHERE replica = ?", arguments: [Data(replica.raw.bytes)]) ?? 0
        return UInt64(max(0, logged))
    }

    /// At open, in the opening transaction: moves the replica to a fresh identity when the
    /// database went back behind its mark (see `SeqMark`). Returns the identity to write as and
    /// the mark to leave.
    static func checkSeqMark(_ mark: SeqMark?, replica: ReplicaID, _ db: Database, options: StoreOptions) throws -> (ReplicaID, SeqMark) {
        let held = try heldSeq(of: replica, db, options: options)
        guard let mark else { return (replica, SeqMark(replica: replica, seq: held)) }
        let reason: String?
        if mark.replica == replica {
            reason = mark.seq > held
                ? "the database went back: its identity had reached seq \(mark.seq), the file holds \(held) (restored from a backup over itself?)"
                : nil
        } else {
            let retired = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM replica_history WHERE retired_id = ?)",
                                            arguments: [Data(mark.replica.raw.bytes)]) ?? false
            reason = retired ? nil
                : "the database went back: this file last held identity \(mark.replica), which it does not know (restored from a backup over itself?)"
        }
        guard let reason else { return (replica, SeqMark(replica: replica, seq: max(held, mark.replica == replica ? mark.seq : 0))) }
        // Nothing else writes as the identity it leaves (the file's own past did): no fork of it to repair.
        let fresh = try retire(replica, db, options: options, salt: "seqmark \(mark.replica) \(mark.seq)", reason: reason, madeThrough: 0)
        return (fresh, SeqMark(replica: fresh, seq: 0))
    }

    /// Raises the mark to `seq` of this replica's identity when it is below (changes up to it are
    /// about to leave this database).
    func raiseSeqMark(to seq: UInt64) {
        guard let place = seqMarkPlace, seq > 0 else { return }
        let replica = replicaID
        let mark = seqMark.withLock { mark -> SeqMark? in
            if let current = mark, current.replica == replica, current.seq >= seq { return nil }
            mark = SeqMark(replica: replica, seq: seq)
            return mark
        }
        if let mark { place.write(mark) }
    }
}

/// POSIX `read` and `write`, by names that do not clash with the methods of `SeqMark` and `NoteStore`.
private func posixRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int { read(fd, buffer, count) }
private func posixWrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int { write(fd, buffer, count) }

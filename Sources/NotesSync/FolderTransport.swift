import NotesCRDT
import Synchronization

/// The file transport: a shared folder (a USB stick, a Syncthing or cloud-drive folder), over a
/// `FileSystem` (the real one by default).
///
/// Layout: `FOLDER/<writer>/<author>.<first>-<last>.crdtb`, where `<writer>` is the replica that
/// wrote the file and `<author>`, `<first>`, `<last>` name the author and the seq range of the
/// changes inside. Every file is a bundle, written once (to a temporary name, fsynced, renamed
/// into place). A replica writes only in its own subfolder and reads everyone else's.
///
/// What the folder has is computed from the files that are actually readable and hold what their
/// names say, never from names alone: a damaged file, or one whose name lies, is skipped and
/// reported, and whoever holds the changes it should have held writes them again under its own
/// subfolder (a replica passes on every change the folder lacks, whoever made it), so a writer
/// that stopped for good with a damaged file stalls nobody. One of a replica's own files that no
/// longer reads is removed and written again at its next sync. `compact` replaces a writer's many
/// small files with one larger one, renaming the new file in before deleting the old ones.
public struct FolderTransport: SyncTransport {
    /// The shared folder's path.
    public let folder: String
    /// Where the files are.
    public let fileSystem: any FileSystem
    /// The largest file read; a larger one is skipped and reported, never read.
    public var maxFileBytes: Int
    /// Verdicts on files already checked, by path, size and modification time (a file is written
    /// once, so a verdict holds until it changes).
    private let verdicts = VerdictCache()
    /// In an encrypted space: what makes a sealed unit untrusted (a forged introduction or
    /// signature, a second key for a known author; `NoteStore.sealedUnitCheck()`), so that a file
    /// holding one is skipped and counts for nothing, and its author's real unit is written again.
    public var sealedUnitCheck: (@Sendable (SealedUnit) -> SyncError?)?

    /// Readers check each file's units and skip a bad file alone (`read`).
    public var checksEachSealedUnit: Bool { true }

    /// The extension of a bundle file.
    public static let fileExtension = "crdtb"
    /// The default for `maxFileBytes`: the largest bundle a reader takes (larger files are skipped unread).
    public static let defaultMaxFileBytes = SyncBundle.maxBytes

    /// A transport over `folder` in `fileSystem`.
    /// The folder, by its path: what a replica found there of its own is remembered under it.
    public var checkKey: String? { "folder:" + folder }

    public init(folder: String, fileSystem: any FileSystem = LocalFileSystem(), maxFileBytes: Int = FolderTransport.defaultMaxFileBytes) {
        self.folder = folder
        self.fileSystem = fileSystem
        self.maxFileBytes = maxFileBytes
    }

    /// One file's name, parsed.
    struct Entry: Sendable {
        var writer: ReplicaID
        var author: ReplicaID
        var first: UInt64
        var last: UInt64
        var path: String
        var attributes: FileAttributes
    }

    /// The name of a file holding `author`'s changes with seqs `first ... last`.
    public static func fileName(author: ReplicaID, first: UInt64, last: UInt64) -> String {
        "\(author).\(first)-\(last).\(fileExtension)"
    }

    /// A file name's author and range, or nil when it is not a bundle file's name.
    static func parse(name: String) -> (author: ReplicaID, first: UInt64, last: UInt64)? {
        // `<32 hex digits>.<first>-<last>.crdtb`, read in place (every file of a folder, every sync).
        var name = name
        return name.withUTF8 { utf8 in parse(utf8: utf8) }
    }

    static func parse(utf8: UnsafeBufferPointer<UInt8>) -> (author: ReplicaID, first: UInt64, last: UInt64)? {
        guard utf8.count >= 32 + 1 + 3 + 6, utf8[32] == UInt8(ascii: "."),
              utf8[(utf8.count - 6)...].elementsEqual(".crdtb".utf8) else { return nil }
        guard let raw = Identifier128(hexUTF8: UnsafeBufferPointer(rebasing: utf8[..<32])) else { return nil }
        let author = ReplicaID(raw)
        let utf8 = utf8[..<(utf8.count - 6)]
        func number(_ digits: Slice<UnsafeBufferPointer<UInt8>>) -> UInt64? {
            guard !digits.isEmpty, digits.count <= 20 else { return nil }
            var value: UInt64 = 0
            for digit in digits {
                guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") else { return nil }
                let (times, overflow1) = value.multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = times.addingReportingOverflow(UInt64(digit - UInt8(ascii: "0")))
                guard !overflow1, !overflow2 else { return nil }
                value = sum
            }
            return value
        }
        let range = utf8[33...]
        guard let dash = range.firstIndex(of: UInt8(ascii: "-")), let first = number(range[..<dash]),
              let last = number(range[(dash + 1)...]), first >= 1, first <= last else { return nil }
        return (author, first, last)
    }

    /// The bundle files in the folder (of one writer, when given).
    func entries(of only: ReplicaID? = nil) throws -> [Entry] {
        guard let attributes = try fileSystem.attributes(folder) else { throw SyncError(.io, "\(folder): no such folder") }
        guard attributes.isDirectory else { throw SyncError(.io, "\(folder) is a file, not a folder") }
        verdicts.nextRound()
        var result: [Entry] = []
        for writerName in try only.map({ [$0.description] }) ?? fileSystem.contentsOfDirectory(folder) ?? [] {
            guard let writer = ReplicaID(hex: writerName) else { continue }
            let sub = FileSystemPaths.join(folder, writerName)
            for (name, attributes) in (try? fileSystem.listing(sub)) ?? [] where !attributes.isDirectory {
                guard let parsed = FolderTransport.parse(name: name) else { continue }
                result.append(Entry(writer: writer, author: parsed.author, first: parsed.first, last: parsed.last,
                                    path: FileSystemPaths.join(sub, name), attributes: attributes))
            }
        }
        return result
    }

    /// Per author, the operations that the folder's readable, truthful files hold without a gap
    /// from seq 1.
    public func remoteVersion(for local: ReplicaID) async throws -> VersionVector {
        var ranges: [(author: ReplicaID, first: UInt64, last: UInt64)] = []
        for entry in try entries() {
            switch verify(entry) {
            case .success:
                ranges.append((entry.author, entry.first, entry.last))
            case .failure:
                // Ours and broken: removed, so that this sync writes it again.
                if entry.writer == local { try? fileSystem.remove(entry.path) }
            }
        }
        return FolderTransport.contiguousCoverage(ranges)
    }

    /// Per author, how far files holding these seq ranges cover the author's operations without a
    /// gap from seq 1.
    package static func contiguousCoverage(_ files: [(author: ReplicaID, first: UInt64, last: UInt64)]) -> VersionVector {
        var byAuthor: [ReplicaID: [(first: UInt64, last: UInt64)]] = [:]
        for file in files where file.first >= 1 && file.first <= file.last {
            byAuthor[file.author, default: []].append((file.first, file.last))
        }
        var version = VersionVector()
        for (author, ranges) in byAuthor {
            var covered: UInt64 = 0
            for range in ranges.sorted(by: { $0.first < $1.first }) {
                // `first - 1` cannot underflow (first >= 1); `covered + 1` could overflow.
                if range.first - 1 > covered { break }
                covered = max(covered, range.last)
            }
            version[author] = covered
        }
        return version
    }

    /// Writes the kept branch as files, as `send(_:)` does: the folder's coverage is read from
    /// file names, which cannot tell two copies' files of one identity apart, so a replica took
    /// seqs it holds of the branch that stays (or made after them) for written already.
    public func sendAgain(_ bundle: SyncBundle) async throws -> Bool {
        _ = try await send(bundle)
        return true
    }

    /// Writes one file per author, in the sender's own subfolder.
    public func send(_ bundle: SyncBundle) async throws -> SendResult {
        let sub = FileSystemPaths.join(folder, bundle.sender.description)
        try fileSystem.createDirectory(sub)
        if bundle.isSealed {
            // One file per sealed unit, as its author sealed it (a unit cannot be cut or joined).
            var encoder = ChangeCodec.Encoder()
            for unit in bundle.sealedUnits {
                let path = FileSystemPaths.join(sub, FolderTransport.fileName(author: unit.author, first: unit.startSeq, last: unit.endSeq))
                let file = SyncBundle(sender: bundle.sender, senderVersion: bundle.senderVersion, sealed: [unit])
                try fileSystem.writeAtomically(file.encoded(using: &encoder), to: path)
            }
            return .nothing
        }
        var byAuthor: [ReplicaID: [Change]] = [:]
        var order: [ReplicaID] = []
        for change in bundle.changes {
            if byAuthor[change.replica] == nil { order.append(change.replica) }
            byAuthor[change.replica, default: []].append(change)
        }
        var encoder = ChangeCodec.Encoder()
        for author in order {
            // As many files as it takes for each to be one that readers take.
            for piece in try SyncBundle.pieces(sender: bundle.sender, senderVersion: bundle.senderVersion, changes: byAuthor[author]!) {
                let first = piece.changes.map(\.startSeq).min()!
                let last = piece.changes.map(\.endSeq).max()!
                let path = FileSystemPaths.join(sub, FolderTransport.fileName(author: author, first: first, last: last))
                try fileSystem.writeAtomically(piece.encoded(using: &encoder), to: path)
            }
        }
        return .nothing
    }

    /// The files holding what a replica at `version` lacks, and the newest file's header of every
    /// other writer (what that writer has, to record it as a peer).
    public func receive(for local: ReplicaID, version: VersionVector) async throws -> ReceiveResult {
        var bundles: [ReceivedBundle] = []
        let skipped = try await receive(for: local, version: version, each: { bundles.append($0) })
        return ReceiveResult(bundles: bundles, skipped: skipped)
    }

    /// `receive(for:version:)`, handing each file's bundle to `each` as soon as it is read (only
    /// one file's changes are held at a time).
    public func receive(for local: ReplicaID, version: VersionVector, each: (ReceivedBundle) async throws -> Void) async throws -> [SkippedInput] {
        var skipped: [SkippedInput] = []
        var readFrom: Set<ReplicaID> = []
        // Our own subfolder too: what it holds past `version` was written by a copy of this
        // replica's database (or is what a check takes back, `SyncEngine`).
        let all = try entries()
        for entry in all.sorted(by: { ($0.author, $0.first, $0.path) < ($1.author, $1.first, $1.path) })
        where entry.last > version[entry.author] {
            switch read(entry) {
            case .success(let bundle):
                try await each(ReceivedBundle(bundle: bundle, source: entry.path))
                readFrom.insert(entry.writer)
            case .failure(let error):
                skipped.append(SkippedInput(source: entry.path, reason: error.message + "; read again at the next sync"))
            }
        }
        // For writers nothing was read from, the newest file's header says what they have.
        for (writer, files) in Dictionary(grouping: all, by: \.writer).sorted(by: { $0.key < $1.key })
        where writer != local && !readFrom.contains(writer) {
            guard let newest = files.max(by: { ($0.attributes.modifiedMilliseconds, $0.path) < ($1.attributes.modifiedMilliseconds, $1.path) }),
                  case .success(let header) = readHeader(newest) else { continue }
            try await each(ReceivedBundle(bundle: SyncBundle(sender: header.sender, senderVersion: header.senderVersion, changes: []),
                                          source: newest.path))
        }
        return skipped
    }

    // MARK: Reading and checking

    /// A file's bundle, checked whole: it decodes, its writer is the one whose subfolder it is in,
    /// and its changes are exactly the author and seq range its name says.
    func read(_ entry: Entry) -> Result<SyncBundle, SyncError> {
        do {
            let bytes = try fileSystem.read(entry.path, limit: maxFileBytes)
            let bundle = try SyncBundle.decode(bytes)
            if let problem = FolderTransport.mismatch(entry, bundle) { return .failure(SyncError(.malformed, problem)) }
            if let check = sealedUnitCheck {
                for unit in bundle.sealedUnits { if let problem = check(unit) { return .failure(problem) } }
            }
            verdicts.recordGood(entry, checksum: Array(bytes.suffix(SyncBundle.checksumLength)))
            return .success(bundle)
        } catch let error as SyncError {
            return .failure(error)
        } catch {
            return .failure(SyncError(.io, "\(error)"))
        }
    }

    /// Whether a file holds what its name says.
    ///
    /// A file found good is trusted while its size and time stay the same, but only for a few
    /// syncs of this transport (`reverifyAfter`): a copy can rot without changing its size or time,
    /// and a replica that holds a rotten file's changes must notice, to write them again. A
    /// transport made for one sync (the command line's) checks every file.
    func verify(_ entry: Entry) -> Result<Void, SyncError> {
        switch verdicts.verdict(entry) {
        case .good:
            return .success(())
        case .check(let checksum):
            // Read again: the same bytes (the checksum covers all of them) need not be decoded.
            if let bytes = try? fileSystem.read(entry.path, limit: maxFileBytes), let header = try? SyncBundle.decodeHeader(bytes),
               header.sender == entry.writer, bytes.suffix(SyncBundle.checksumLength).elementsEqual(checksum) {
                verdicts.recordGood(entry, checksum: checksum)
                return .success(())
            }
            return read(entry).map { _ in () }
        case .unknown:
            return read(entry).map { _ in () }
        }
    }

    func readHeader(_ entry: Entry) -> Result<SyncBundle.Header, SyncError> {
        do {
            let header = try SyncBundle.decodeHeader(try fileSystem.read(entry.path, limit: maxFileBytes))
            guard header.sender == entry.writer else {
                return .failure(SyncError(.malformed, "written by \(header.sender), but it sits in \(entry.writer)'s folder"))
            }
            return .success(header)
        } catch let error as SyncError {
            return .failure(error)
        } catch {
            return .failure(SyncError(.io, "\(error)"))
        }
    }

    /// What is wrong with a file whose bundle does not match its place and name, or nil.
    static func mismatch(_ entry: Entry, _ bundle: SyncBundle) -> String? {
        if bundle.sender != entry.writer {
            return "written by \(bundle.sender), but it sits in \(entry.writer)'s folder"
        }
        if bundle.isSealed {
            let ranges = bundle.sealedUnits.map { (author: $0.author, first: $0.startSeq, last: $0.endSeq) }
            if let other = ranges.first(where: { $0.author != entry.author }) {
                return "its name says it holds changes of \(entry.author), but it holds changes of \(other.author)"
            }
            var covered = entry.first - 1
            for range in ranges.sorted(by: { $0.first < $1.first }) where range.first - 1 <= covered {
                covered = max(covered, range.last)
            }
            guard ranges.map(\.first).min() == entry.first, ranges.map(\.last).max() == entry.last, covered == entry.last else {
                return "its name says seqs \(entry.first)-\(entry.last), but its sealed units cover other seqs; it is not trusted"
            }
            return nil
        }
        var first = UInt64.max
        var last: UInt64 = 0
        for change in bundle.changes {
            guard change.replica == entry.author else {
                return "its name says it holds changes of \(entry.author), but it holds changes of \(change.replica)"
            }
            first = min(first, change.startSeq)
            last = max(last, change.endSeq)
        }
        guard !bundle.changes.isEmpty, first == entry.first, last == entry.last else {
            let holds = bundle.changes.isEmpty ? "no changes" : "seqs \(first)-\(last)"
            return "its name says seqs \(entry.first)-\(entry.last), but it holds \(holds); it is not trusted"
        }
        // The changes must cover the range without a gap (a reader counts on the whole range).
        var covered = first - 1
        for change in bundle.changes.sorted(by: { $0.startSeq < $1.startSeq }) {
            if change.startSeq - 1 > covered { return "it has a gap after seq \(covered) in the range its name says" }
            covered = max(covered, change.endSeq)
        }
        return nil
    }

    // MARK: Compaction

    /// Replaces this writer's files of each author by one file, when it has more than `threshold`.
    ///
    /// - Returns: how many files were removed.
    @discardableResult
    public func compact(writer: ReplicaID, threshold: Int = 32) throws -> Int {
        let mine = try entries(of: writer)
        var removed = 0
        var encoder = ChangeCodec.Encoder()
        for (author, files) in Dictionary(grouping: mine, by: \.author).sorted(by: { $0.key < $1.key }) where files.count > threshold {
            var changes: [Change] = []
            var units: [SealedUnit] = []
            var senderVersion = VersionVector()
            var used: [Entry] = []
            var held: [String: [Change]] = [:]
            for file in files.sorted(by: { ($0.first, $0.path) < ($1.first, $1.path) }) {
                guard case .success(let bundle) = read(file) else { continue }
                units.append(contentsOf: bundle.sealedUnits)
                changes.append(contentsOf: bundle.changes)
                held[file.path] = bundle.changes
                senderVersion.merge(bundle.senderVersion)
                used.append(file)
            }
            if !units.isEmpty {
                removed += try compactSealed(writer: writer, author: author, units: units, senderVersion: senderVersion, used: used, encoder: &encoder)
                continue
            }
            guard !changes.isEmpty else { continue }
            // One file must hold a gap-free range: stop at the first gap.
            changes.sort { ($0.startSeq, $0.endSeq) < ($1.startSeq, $1.endSeq) }
            var contiguous: [Change] = []
            var joined = JoinedSeqs(author: author, first: changes[0].startSeq)
            for change in changes {
                if change.startSeq - 1 > joined.last { break }
                // Two files at one seq that differ are both branches of a copied identity: joined,
                // the file would keep one and the other's file would be removed.
                if !joined.agrees(with: change) { break }
                if change.endSeq > joined.last {
                    contiguous.append(change.startSeq <= joined.last ? change.suffix(from: joined.last + 1)! : change)
                    joined.append(change)
                }
            }
            let first = joined.first, covered = joined.last
            let target = FileSystemPaths.join(FileSystemPaths.join(folder, writer.description),
                                              FolderTransport.fileName(author: author, first: first, last: covered))
            try fileSystem.writeAtomically(SyncBundle(sender: writer, senderVersion: senderVersion, changes: contiguous).encoded(using: &encoder),
                                           to: target)
            // Only files whose every change the new file holds as they are.
            for file in used where file.path != target && file.first >= first && file.last <= covered
                && (held[file.path] ?? []).allSatisfy(joined.agrees(with:)) {
                try? fileSystem.remove(file.path)
                removed += 1
            }
        }
        return removed
    }

    /// Joins a writer's files of sealed units of one author into one file: the units as they
    /// are (they cannot be cut), up to the first gap.
    private func compactSealed(writer: ReplicaID, author: ReplicaID, units: [SealedUnit], senderVersion: VersionVector,
                               used: [Entry], encoder: inout ChangeCodec.Encoder) throws -> Int {
        var contiguous: [SealedUnit] = []
        var seen: Set<UnitBytes> = []
        var covered: UInt64 = 0
        for unit in units.sorted(by: { ($0.startSeq, $0.endSeq) < ($1.startSeq, $1.endSeq) }) where seen.insert(UnitBytes(unit.bytes)).inserted {
            if !contiguous.isEmpty, unit.startSeq - 1 > covered { break }
            if contiguous.isEmpty || unit.endSeq > covered {
                contiguous.append(unit)
                covered = unit.endSeq
            }
        }
        guard let first = contiguous.first?.startSeq, contiguous.count > 1 else { return 0 }
        let target = FileSystemPaths.join(FileSystemPaths.join(folder, writer.description),
                                          FolderTransport.fileName(author: author, first: first, last: covered))
        try fileSystem.writeAtomically(SyncBundle(sender: writer, senderVersion: senderVersion, sealed: contiguous).encoded(using: &encoder), to: target)
        var removed = 0
        for file in used where file.path != target && file.first >= first && file.last <= covered {
            try? fileSystem.remove(file.path)
            removed += 1
        }
        return removed
    }
}

/// The files found good (by path, size and time), their checksum, and in which round of this
/// transport (a listing of the folder) each was last checked.
final class VerdictCache: Sendable {
    struct Key: Hashable {
        var path: String
        var size: Int
        var modified: UInt64

        init(_ entry: FolderTransport.Entry) {
            path = entry.path
            size = entry.attributes.size
            modified = entry.attributes.modifiedMilliseconds
        }
    }

    /// A good verdict is trusted for this many rounds, then the file's checksum is checked again.
    static let reverifyAfter = 8

    enum Verdict {
        /// Found good recently.
        case good
        /// Found good with this checksum, longer ago: read it and compare.
        case check([UInt8])
        /// Never found good.
        case unknown
    }

    private struct State {
        var round = 0
        var good: [Key: (round: Int, checksum: [UInt8])] = [:]
    }

    private let state = Mutex(State())

    func nextRound() { state.withLock { $0.round += 1 } }

    func verdict(_ entry: FolderTransport.Entry) -> Verdict {
        state.withLock { state in
            guard let known = state.good[Key(entry)] else { return .unknown }
            return state.round - known.round < VerdictCache.reverifyAfter ? .good : .check(known.checksum)
        }
    }

    func recordGood(_ entry: FolderTransport.Entry, checksum: [UInt8]) {
        state.withLock { state in
            if state.good.count > 100_000 { state.good.removeAll() }
            state.good[Key(entry)] = (state.round, checksum)
        }
    }
}

import BundleFuzz
import Foundation
import NotesCRDT
import NotesStore
import NotesSync
import Testing

/// The bundle reader against what an attacker sends: the crashes the issue found, a bundle or a
/// body past the limits, bundles that fill each limit, and a file too large to read.
struct SyncBundleLimitsTests {
    static let author = ReplicaID(Identifier128(high: 0xA11, low: 1))
    static let note = NoteID(Identifier128(high: 0xB11, low: 1))

    static func oneInsert(at seq: UInt64) -> RawBundle {
        var e = RawChangeEncoding()
        e.replicas = [author]
        e.notes = [note]
        e.headers = [RawHeader(author: 0, startSeq: seq, timestamp: 1, operationCount: 1)]
        e.records = [.insert(note: 0, mode: 0, origin: nil, length: 1, text: [0x61])]
        var b = RawBundle()
        b.body = e.bytes()
        return b
    }

    /// The inputs that crashed the reader (SIGILL on an overflow) are errors that say what is wrong.
    @Test func theCrashesOfTheIssueAreErrors() throws {
        // An insert whose id is at seq 2^64 - 1 (the predictor's `seq + count - 1`).
        expectError(Self.oneInsert(at: .max).bytes(), .malformed, "outside 1 ... 2^53 - 1")
        expectError(Self.oneInsert(at: Change.maxSeq + 1).bytes(), .malformed, "outside 1 ... 2^53 - 1")
        #expect(try SyncBundle.decode(Self.oneInsert(at: Change.maxSeq).bytes()).changes.first?.endSeq == Change.maxSeq)
        // A declared inflate length of 2^32 or more (`uInt(length + 1)`), backed by enough data
        // for DEFLATE's 1032:1 check: refused before inflating, as past the largest body.
        for declared in [UInt64(1) << 32 - 1, 1 << 32, .max] {
            var bomb = Self.oneInsert(at: 1)
            bomb.compressed = true
            bomb.declaredLength = declared
            expectError(bomb.bytes(), .tooLarge, "more than the \(SyncBundle.maxBodyBytes) a reader takes")
        }
        // A sender's vector holding 2^64 - 1 and 2^63 (stored, it crashed `status` for good).
        var vector = Self.oneInsert(at: 1)
        vector.vector = [(ReplicaID(Identifier128(high: 0, low: 1)), .max), (ReplicaID(Identifier128(high: 0, low: 2)), 1 << 63)]
        expectError(vector.bytes(), .malformed, "past 2^53 - 1")
        vector.vector = [(ReplicaID(Identifier128(high: 0, low: 1)), Change.maxSeq), (ReplicaID(Identifier128(high: 0, low: 2)), Change.maxSeq)]
        #expect(try SyncBundle.decode(vector.bytes()).senderVersion.totalOperations == 2 * Change.maxSeq)
    }

    /// A body of the largest length is inflated and read (here a change followed by padding,
    /// which the change decoder then refuses); one byte more is refused before inflating.
    @Test func theLargestBody() throws {
        let valid = Self.oneInsert(at: 1).body
        var bundle = RawBundle()
        bundle.compressed = true
        bundle.body = valid + Array(repeating: 0, count: SyncBundle.maxBodyBytes - valid.count)
        expectError(bundle.bytes(), .malformed, "\(SyncBundle.maxBodyBytes - valid.count) unexpected bytes after the changes")
        bundle.body.append(0)
        expectError(bundle.bytes(), .tooLarge, "declares \(SyncBundle.maxBodyBytes + 1) bytes once inflated")
        // Uncompressed, a body is at most what the bundle holds.
        bundle.compressed = false
        expectError(bundle.bytes(), .tooLarge, "a reader takes")
    }

    /// A bundle larger than a reader takes is refused before its checksum is computed.
    @Test func theLargestBundle() throws {
        var bundle = RawBundle()
        bundle.body = Array(repeating: 0, count: SyncBundle.maxBytes)
        let bytes = bundle.bytes()
        #expect(bytes.count > SyncBundle.maxBytes)
        expectError(bytes, .tooLarge, "more than the \(SyncBundle.maxBytes) a reader takes")
    }

    /// A bundle that fills each limit (at 1/64 of it, quick in a debug build) is read,
    /// applied to a store without it throwing, and the notebook and the store agree.
    @Test(arguments: MaximalBundle.allCases)
    func bundlesThatFillALimitApply(_ kind: MaximalBundle) throws {
        let bundle = try SyncBundle.decode(kind.bundle(scale: 1.0 / 64).bytes())
        let store = try NoteStore.openInMemory()
        let report = try store.apply(bundle.changes)
        var notebook = Notebook(replicaID: ReplicaID(Identifier128(high: 5, low: 5)), wallClock: FixedWallClock(1))
        let result = notebook.apply(contentsOf: bundle.changes)
        #expect(try store.digest() == notebook.digest())
        #expect(report.quarantined == result.quarantined && report.rejected == result.rejected)
        #expect(report.applied == result.applied && report.pending == result.pending)
        #expect(try store.quarantinedChanges().count == notebook.quarantinedCount)
        // Only a bundle of changes that do not apply leaves any refused (the quarantine is full).
        #expect(report.rejected == 0 || kind == .quarantined)
    }

    /// A file larger than a bundle may be is refused without being read whole; a missing one says so.
    @Test func readingFiles() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("limits-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let large = folder.appendingPathComponent("large.crdtb")
        FileManager.default.createFile(atPath: large.path, contents: nil)
        let handle = try FileHandle(forWritingTo: large)
        try handle.truncate(atOffset: 3 << 30)  // sparse: 3 GiB on paper, nothing on disk
        try handle.close()
        let error = #expect(throws: SyncError.self) { try SyncBundle.readFile(at: large) }
        #expect(error?.code == .tooLarge)
        #expect(error?.message.contains("\(3 << 30) bytes") == true, "\(String(describing: error))")
        let exact = folder.appendingPathComponent("exact.crdtb")
        try Data(count: SyncBundle.maxBytes).write(to: exact)
        #expect(try SyncBundle.readFile(at: exact).count == SyncBundle.maxBytes)
        let missing = #expect(throws: SyncError.self) { try SyncBundle.readFile(at: folder.appendingPathComponent("none")) }
        #expect(missing?.code == .io)
        #expect(missing?.at("none").message.hasPrefix("none: ") == true)
        let isFolder = #expect(throws: SyncError.self) { try SyncBundle.readFile(at: folder) }
        #expect(isFolder?.message.contains("is a folder") == true, "\(String(describing: isFolder))")
        // A device with no end is read no further than the limit, and said to be larger (not "0 bytes").
        let endless = #expect(throws: SyncError.self) { try SyncBundle.readFile(at: URL(fileURLWithPath: "/dev/zero")) }
        #expect(endless?.code == .tooLarge)
        #expect(endless?.message.contains("more than \(SyncBundle.maxBytes) bytes") == true, "\(String(describing: endless))")
    }
}

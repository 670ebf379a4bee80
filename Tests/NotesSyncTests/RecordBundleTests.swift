import BundleFuzz
import Foundation
import NotesCRDT
@testable import NotesSync
import Testing

/// Record bundles (format version 5): what a relay serves its stored encodings in. They decode to
/// exactly the changes their records hold, say what they cover without decoding, and a crafted one
/// is refused whole with an error that names the problem.
struct RecordBundleTests {
    static let sender = ReplicaID(Identifier128(high: 0x5E, low: 1))

    /// One author's changes, each its own: a note, then edits.
    static func authorChanges(seed: UInt64, count: Int) throws -> [Change] {
        var rng = SeededRNG(state: seed)
        var book = Notebook(replicaID: .random(using: &rng), wallClock: FixedWallClock(1_700_000_000_000))
        let (id, first) = book.createNote(id: .random(using: &rng), title: "note \(seed)", body: "body")
        var made = [first]
        for i in 1 ..< count {
            if let change = i % 3 == 0 ? try book.setTitle(id, "title \(i)") : try book.insertText(id, at: 0, "w\(i) ") { made.append(change) }
        }
        return made
    }

    static func record(_ changes: ArraySlice<Change>) -> SyncBundle.Record {
        SyncBundle.Record(author: changes.first!.replica, startSeq: changes.first!.startSeq, endSeq: changes.last!.endSeq,
                          encoding: ChangeCodec.encode(Array(changes)))
    }

    /// A version 5 bundle around `body`, with a valid checksum (so a case reaches its body).
    static func bundle(body: [UInt8]) -> [UInt8] {
        var writer = BinaryWriter()
        writer.raw(SyncBundle.magic)
        writer.byte(SyncBundle.recordsFormatVersion)
        writer.byte(0)
        writer.raw(sender.raw.bytes)
        writer.varint(0)
        writer.varint(UInt64(body.count))
        writer.raw(body)
        var bytes = writer.bytes
        bytes.append(contentsOf: SyncBundle.checksum(bytes[...]))
        return bytes
    }

    /// The body of `encodedRecords`, to be cut or altered.
    static func body(_ records: [SyncBundle.Record]) -> [UInt8] {
        let bytes = SyncBundle.encodedRecords(sender: sender, senderVersion: VersionVector(), records: records)
        var reader = BinaryReader(bytes, range: SyncBundle.fixedHeaderLength ..< bytes.count - SyncBundle.checksumLength)
        _ = try! reader.versionVector()
        let length = try! reader.count(max: reader.remaining, "body")
        return Array(try! reader.raw(length))
    }

    /// Expects both reads (the frames alone, and the whole) to refuse `bytes` as `code`, naming `words`.
    func expectRefused(_ bytes: [UInt8], _ code: SyncError.Code, _ words: String, framesToo: Bool = true,
                       sourceLocation: SourceLocation = #_sourceLocation) {
        expectError(bytes, code, words, sourceLocation: sourceLocation)
        if framesToo {
            #expect(sourceLocation: sourceLocation) { _ = try SyncBundle.recordCoverage(bytes) } throws: { error in
                (error as? SyncError).map { $0.code == code && $0.message.contains(words) } ?? false
            }
        }
    }

    @Test(arguments: [UInt64(1), 2, 3])
    func recordsDecodeToTheirChangesAndTellWhatTheyCover(seed: UInt64) throws {
        let a = try Self.authorChanges(seed: seed, count: 40)
        let b = try Self.authorChanges(seed: seed &+ 100, count: 25)
        // Interleaved as a relay's arrival order keeps them, each author's in seq order.
        let records = [Self.record(a[0 ..< 7]), Self.record(b[0 ..< 25]), Self.record(a[7 ..< 8]), Self.record(a[8 ..< 40])]
        var vector = VersionVector()
        vector[a[0].replica] = 99
        let bytes = SyncBundle.encodedRecords(sender: Self.sender, senderVersion: vector, records: records)
        #expect(bytes[SyncBundle.magic.count] == 5)
        let decoded = try SyncBundle.decode(bytes)
        #expect(decoded.sender == Self.sender)
        #expect(decoded.senderVersion == vector)
        #expect(decoded.changes == Array(a[0 ..< 7]) + b + Array(a[7...]))
        var covered = VersionVector()
        covered[a[0].replica] = a.last!.endSeq
        covered[b[0].replica] = b.last!.endSeq
        #expect(try SyncBundle.recordCoverage(bytes) == covered)
        #expect(try SyncBundle.decodeHeader(bytes).formatVersion == 5)
        // Other versions have no frames to read.
        #expect(try SyncBundle.recordCoverage(decoded.encoded()) == nil)
        // An empty page is a bundle too.
        let empty = SyncBundle.encodedRecords(sender: Self.sender, senderVersion: vector, records: [])
        #expect(try SyncBundle.decode(empty).changes.isEmpty)
        #expect(try SyncBundle.recordCoverage(empty) == VersionVector())
    }

    /// Read record by record, a page gives the same changes; a record that lies is refused when
    /// it is reached, and a page of another version has no reader.
    @Test func recordByRecord() throws {
        let a = try Self.authorChanges(seed: 14, count: 30)
        let b = try Self.authorChanges(seed: 15, count: 12)
        let records = [Self.record(a[0 ..< 10]), Self.record(b[...]), Self.record(a[10...])]
        let bytes = SyncBundle.encodedRecords(sender: Self.sender, senderVersion: VersionVector(), records: records)
        var reader = try #require(try SyncBundle.RecordReader(bytes))
        var read: [[Change]] = []
        while let changes = try reader.next() { read.append(changes) }
        #expect(read == [Array(a[0 ..< 10]), b, Array(a[10...])])
        #expect(reader.header.sender == Self.sender)
        #expect(try reader.next() == nil)
        var lying = records
        lying[1].author = a[0].replica
        lying[1].startSeq = a[9].endSeq + 1
        var refused = try #require(try SyncBundle.RecordReader(SyncBundle.encodedRecords(sender: Self.sender, senderVersion: VersionVector(), records: lying)))
        #expect(try refused.next() == Array(a[0 ..< 10]))
        #expect { _ = try refused.next() } throws: { ($0 as? SyncError)?.message.contains("holds a change of") == true }
        #expect(try SyncBundle.RecordReader(try SyncBundle.decode(bytes).encoded()) == nil)
    }

    @Test func aCutRecordStartsPastTheFirstSeq() throws {
        let a = try Self.authorChanges(seed: 9, count: 12)
        let tail = a[5...].map { $0 }
        let bytes = SyncBundle.encodedRecords(sender: Self.sender, senderVersion: VersionVector(), records: [Self.record(tail[...])])
        #expect(try SyncBundle.decode(bytes).changes == tail)
    }

    @Test func damagedAndCutBundlesAreRefused() throws {
        let a = try Self.authorChanges(seed: 4, count: 10)
        let whole = SyncBundle.encodedRecords(sender: Self.sender, senderVersion: VersionVector(), records: [Self.record(a[...])])
        expectRefused(Array(whole.dropLast()), .checksumMismatch, "checksum")
        let body = Self.body([Self.record(a[...])])
        // Cut inside the record's encoding, inside its frame, and before its count.
        for cut in [body.count - 1, body.count / 2, 10, 3, 1] {
            let bytes = Self.bundle(body: Array(body.prefix(cut)))
            #expect(throws: SyncError.self) { _ = try SyncBundle.decode(bytes) }
        }
        expectRefused(Self.bundle(body: Array(body.prefix(10))), .malformed, "malformed bundle")
        // Bytes after the last record.
        expectRefused(Self.bundle(body: body + [0]), .malformed, "unexpected bytes after the records")
    }

    @Test func countsAndLengthsThatLieAreRefused() throws {
        let a = try Self.authorChanges(seed: 5, count: 10)
        let body = Self.body([Self.record(a[...])])
        // The record count says 2 (and then 300,000: more than the body could hold) but one follows.
        expectRefused(Self.bundle(body: [2] + body.dropFirst()), .malformed, "malformed bundle")
        var huge = BinaryWriter()
        huge.varint(300_000)
        expectRefused(Self.bundle(body: huge.bytes + body.dropFirst()), .malformed, "the record count")
        var overlong = BinaryWriter()
        overlong.varint(UInt64.max)
        expectRefused(Self.bundle(body: overlong.bytes + body.dropFirst()), .malformed, "the record count")
        // The encoding length says more than there is, and less (the rest is then a second record that is not one).
        let frame = 1 + 16 + 1 + 1  // count, author, first and last seq (one byte each here)
        let length = Int(body[frame]) | Int(body[frame + 1] & 0x7F) << 7
        var longer = body
        longer[frame] = UInt8(truncatingIfNeeded: (length + 1) | 0x80)
        longer[frame + 1] = UInt8((length + 1) >> 7)
        #expect(body[frame] & 0x80 != 0 && body[frame + 1] & 0x80 == 0)
        expectRefused(Self.bundle(body: longer), .malformed, "length")
        var shorter = body
        shorter[frame] = UInt8(truncatingIfNeeded: (length - 1) | 0x80)
        shorter[frame + 1] = UInt8((length - 1) >> 7)
        expectRefused(Self.bundle(body: shorter), .malformed, "malformed bundle", framesToo: false)
    }

    @Test func overlappingAndGappedRecordsAreRefused() throws {
        let a = try Self.authorChanges(seed: 6, count: 20)
        let first = Self.record(a[0 ..< 8])
        let overlapping = Self.record(a[5 ..< 20])
        let gapped = Self.record(a[10 ..< 20])
        let again = Self.record(a[0 ..< 8])
        for (records, words) in [([first, overlapping], "overlaps the one before it"), ([first, gapped], "leaving a gap"),
                                 ([first, again], "overlaps the one before it")] {
            expectRefused(SyncBundle.encodedRecords(sender: Self.sender, senderVersion: VersionVector(), records: records), .malformed, words)
        }
    }

    @Test func aRecordWhoseFrameLiesAboutItsChangesIsRefused() throws {
        let a = try Self.authorChanges(seed: 7, count: 10)
        let b = try Self.authorChanges(seed: 8, count: 10)
        let honest = Self.record(a[...])
        func lying(_ change: (inout SyncBundle.Record) -> Void) -> [UInt8] {
            var record = honest
            change(&record)
            return SyncBundle.encodedRecords(sender: Self.sender, senderVersion: VersionVector(), records: [record])
        }
        // The frames alone read fine: only decoding the changes tells; the whole bundle is refused.
        for (bytes, words) in [
            (lying { $0.author = b[0].replica }, "holds a change of"),
            (lying { $0.endSeq += 1 }, "its changes end at seq"),
            (lying { $0.endSeq -= 1 }, "holds a change up to seq"),
            (lying { $0.startSeq += 1 }, "where \(a[0].startSeq + 1) was due"),
            (lying { $0.encoding = ChangeCodec.encode(Array(a[0 ..< 9]) + [b[0]]) }, "holds a change of"),
            (lying { $0.encoding = ChangeCodec.encode([]) }, "its changes end at seq 0"),
        ] {
            #expect(try SyncBundle.recordCoverage(bytes) != nil)
            expectError(bytes, .malformed, words)
        }
        // Ranges that are not ranges, in the frames.
        for (start, end) in [(UInt64(0), UInt64(5)), (5, 4), (1, Change.maxSeq + 1), (Change.maxSeq + 1, Change.maxSeq + 1), (UInt64.max, UInt64.max)] {
            expectRefused(lying { $0.startSeq = start; $0.endSeq = end }, .malformed, "not a range within 1 ... 2^53 - 1")
        }
        // The last seq a record may reach is fine in its frame (its changes then do not match).
        expectError(lying { $0.endSeq = Change.maxSeq }, .malformed, "its changes end at seq")
    }

    /// The records together stay within one bundle's limits: each is decoded with what the ones
    /// before it left, so many records cannot hold many times what one bundle may.
    @Test func theLimitsHoldForTheRecordsTogether() throws {
        var book = Notebook(replicaID: ReplicaID(Identifier128(high: 0xB16, low: 1)), wallClock: FixedWallClock(1_700_000_000_000))
        let text = String(repeating: "a", count: 2_500_000)
        let (_, big) = book.createNote(id: NoteID(Identifier128(high: 0xB16, low: 2)), title: "", body: text)
        let one = Self.record([big][...])
        let single = SyncBundle.encodedRecords(sender: Self.sender, senderVersion: VersionVector(), records: [one])
        #expect(try SyncBundle.decode(single).changes == [big])
        // The same encoding framed as the next seqs: refused as too large before its frame is checked against it.
        var second = one
        second.startSeq = one.endSeq + 1
        second.endSeq = one.endSeq + 1
        let twice = SyncBundle.encodedRecords(sender: Self.sender, senderVersion: VersionVector(), records: [one, second])
        expectError(twice, .tooLarge, "record 2 of 2 passes what the bundle's records may hold together")
    }

    /// The fuzzer's histories that a version 3 reader accepts, sent as records (each author's
    /// first gap-free run, cut into two records), decode to the same changes; the same records with
    /// one frame altered (another author, a seq off by one, a record twice) are refused.
    @Test func fuzzedHistoriesAsRecords() throws {
        let driver = FuzzDriver()
        var accepted = 0
        var refused = 0
        for index in 0 ..< 1500 as Range<UInt64> {
            let seed = FuzzDriver.caseSeed(20_261_125, index)
            guard let bundle = try? SyncBundle.decode(driver.bytes(caseSeed: seed)), !bundle.changes.isEmpty else { continue }
            var byAuthor: [ReplicaID: [Change]] = [:]
            for change in bundle.changes { byAuthor[change.replica, default: []].append(change) }
            var records: [SyncBundle.Record] = []
            var expected: [Change] = []
            for (_, changes) in byAuthor.sorted(by: { $0.key < $1.key }) {
                let sorted = changes.sorted { $0.startSeq < $1.startSeq }
                var run = [sorted[0]]
                for change in sorted.dropFirst() where change.startSeq == run.last!.endSeq + 1 { run.append(change) }
                let cut = (run.count + 1) / 2
                for part in [run[..<cut], run[cut...]] where !part.isEmpty { records.append(Self.record(part)) }
                expected += run
            }
            let honest = SyncBundle.encodedRecords(sender: bundle.sender, senderVersion: bundle.senderVersion, records: records)
            let decoded = try SyncBundle.decode(honest)
            #expect(decoded.changes == expected, "case \(seed)")
            accepted += 1
            var rng = SplitMix64(seed: seed)
            let i = Int(rng.next() % UInt64(records.count))
            let stranger = ReplicaID(Identifier128(high: rng.next() | 1, low: rng.next()))
            var lies: [[SyncBundle.Record]] = []
            for alter in 0 ..< 4 {
                var altered = records
                switch alter {
                case 0: altered[i].author = stranger
                case 1: altered[i].startSeq += 1
                case 2: altered[i].endSeq += 1
                default: altered.insert(altered[i], at: i + 1)
                }
                lies.append(altered)
            }
            for altered in lies {
                let bytes = SyncBundle.encodedRecords(sender: bundle.sender, senderVersion: bundle.senderVersion, records: altered)
                #expect(throws: SyncError.self, "case \(seed)") { _ = try SyncBundle.decode(bytes) }
                refused += 1
            }
        }
        #expect(accepted > 300)
        #expect(refused > 1000)
    }
}

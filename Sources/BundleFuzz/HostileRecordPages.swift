import NotesCRDT
import NotesSync

/// One record of a version 5 body, every field as written.
public struct RawRecordFrame: Sendable, Hashable {
    public var author: ReplicaID
    public var startSeq: UInt64
    public var endSeq: UInt64
    /// The encoding length written (nil: the true one).
    public var length: UInt64?
    public var encoding: [UInt8]

    public init(author: ReplicaID, startSeq: UInt64, endSeq: UInt64, length: UInt64? = nil, encoding: [UInt8]) {
        self.author = author
        self.startSeq = startSeq
        self.endSeq = endSeq
        self.length = length
        self.encoding = encoding
    }
}

/// A version 5 body (record count, records) as its parts, written by `bytes()`.
public struct RawRecordBody: Sendable, Hashable {
    public var records: [RawRecordFrame] = []
    /// The record count written (nil: their number).
    public var count: UInt64?
    /// Bytes after the last record.
    public var trailing: [UInt8] = []
    public var width: VarintWidth = .shortest

    public init() {}

    /// The body's bytes, and the offset of every field boundary in them (where a cut is most telling).
    public func bytesAndBoundaries() -> (bytes: [UInt8], boundaries: [Int]) {
        var w = RawWriter()
        w.width = width
        var boundaries = [0]
        w.varint(count ?? UInt64(records.count))
        boundaries.append(w.bytes.count)
        for record in records {
            w.raw(record.author.raw.bytes)
            boundaries.append(w.bytes.count)
            w.varint(record.startSeq)
            boundaries.append(w.bytes.count)
            w.varint(record.endSeq)
            boundaries.append(w.bytes.count)
            w.varint(record.length ?? UInt64(record.encoding.count))
            boundaries.append(w.bytes.count)
            w.raw(record.encoding)
            boundaries.append(w.bytes.count)
        }
        w.raw(trailing)
        return (w.bytes, boundaries)
    }

    public func bytes() -> [UInt8] { bytesAndBoundaries().bytes }
}

/// A fuzz case that is a record page (format version 5): its bundle, and the changes it must
/// decode to when nothing in it was made hostile.
public struct RecordPageCase: Sendable {
    public var bundle: RawBundle
    /// Cut the bundle's bytes (checksum and all) to this many: a transfer that stopped.
    public var cutBytes: Int?
    /// The changes of a page left valid, in record order (nil: a hostile page, which may decode or not).
    public var expected: [Change]?

    public func bytes() -> [UInt8] {
        let bytes = bundle.bytes()
        guard let cutBytes else { return bytes }
        return Array(bytes.prefix(cutBytes))
    }
}

/// Makes record pages (format version 5, what a relay serves) the way an attacker would: a
/// plausible history from `HostileBundles`, cut into records by author as a relay stores them,
/// then frames pushed to the edges of their types (seqs 0, 2^53 - 1, 2^53, 2^64 - 1), records
/// that overlap, leave gaps, repeat or claim another author, counts and lengths that lie, bodies
/// cut at every field boundary, encodings with hostile values inside, compression bombs and pages
/// of thousands of records; framed with a valid checksum unless the case is a cut transfer.
///
/// One seed gives one page, on every machine.
public struct HostileRecordPages: Sendable {
    let values = HostileBundles()

    public init() {}

    /// The fewest bytes a record takes (`SyncBundle.minimumRecordBytes`): the most records a body's size backs.
    static let minimumRecordBytes = 22

    /// Seqs where a frame's range is most likely to be mishandled.
    static let seqEdges: [UInt64] = [0, 1, 2, Change.maxSeq - 1, Change.maxSeq, Change.maxSeq + 1, 1 << 63, .max - 1, .max]

    /// The page for `seed`.
    public func page(seed: UInt64) -> RecordPageCase {
        var rng = SplitMix64(seed: seed)
        var model = HostileBundles.Model(rng: &rng)
        let encoding = model.history(&rng)
        var bundle = RawBundle()
        bundle.version = SyncBundle.recordsFormatVersion
        bundle.sender = ReplicaID(Identifier128(high: 0x5E1A, low: 1))
        bundle.vector = model.vector(of: encoding)
        var body = RawRecordBody()
        var expected: [Change]?
        if let changes = try? ChangeCodec.decode(encoding.bytes(), limits: SyncBundle.changeLimits), !changes.isEmpty {
            body.records = Self.records(of: changes, &rng)
            expected = changes
            // In record order: a relay keeps arrival order across authors, seq order within one.
            expected = body.records.flatMap { try! ChangeCodec.decode($0.encoding) }
        } else {
            // (A model history always decodes; kept so that a change there cannot end the run.)
            body.records = [RawRecordFrame(author: encoding.replicas.first ?? bundle.sender, startSeq: 1,
                                           endSeq: max(1, encoding.headers.first?.operationCount ?? 1), encoding: encoding.bytes())]
        }
        var cutBody: Int?
        var cutBytes: Int?
        let mutations = rng.below(10) < 2 ? 0 : 1 + rng.below(3)
        for _ in 0 ..< mutations {
            mutate(&body, &bundle, encoding, &cutBody, &cutBytes, &rng)
        }
        if mutations > 0 { expected = nil }
        let (bytes, boundaries) = body.bytesAndBoundaries()
        if let cut = cutBody {
            // At a field boundary, or one byte either side of it.
            let at = boundaries[cut % boundaries.count] + [0, 0, -1, 1][rng.below(4)]
            bundle.body = Array(bytes.prefix(max(0, at)))
        } else if bundle.body.isEmpty {
            bundle.body = bytes
        }
        if mutations == 0, rng.below(4) == 0 { bundle.compressed = true }
        var page = RecordPageCase(bundle: bundle, cutBytes: nil, expected: expected)
        if let cutBytes { page.cutBytes = cutBytes % max(1, bundle.bytes().count) }
        return page
    }

    /// The changes as a relay stores them: a record per run of one author's changes (sometimes
    /// split further), in the order they came.
    static func records(of changes: [Change], _ rng: inout SplitMix64) -> [RawRecordFrame] {
        var records: [RawRecordFrame] = []
        var run: [Change] = []
        func flush() {
            guard let first = run.first, let last = run.last else { return }
            records.append(RawRecordFrame(author: first.replica, startSeq: first.startSeq, endSeq: last.endSeq, encoding: ChangeCodec.encode(run)))
            run = []
        }
        for change in changes {
            if let last = run.last, last.replica != change.replica || last.endSeq &+ 1 != change.startSeq || rng.below(3) == 0 { flush() }
            run.append(change)
        }
        flush()
        return records
    }

    /// A seq near `value` or at an edge of a frame's range.
    static func seqEdge(_ rng: inout SplitMix64, near value: UInt64) -> UInt64 {
        HostileBundles.edge(&rng, near: value, edges: seqEdges)
    }

    /// One hostile change to the page.
    func mutate(_ body: inout RawRecordBody, _ bundle: inout RawBundle, _ history: RawChangeEncoding,
                _ cutBody: inout Int?, _ cutBytes: inout Int?, _ rng: inout SplitMix64) {
        let r = body.records
        switch rng.below(20) {
        case 0 where !r.isEmpty:
            // A frame's seq at an edge of its type.
            let i = rng.below(r.count)
            if rng.below(2) == 0 {
                body.records[i].startSeq = Self.seqEdge(&rng, near: r[i].startSeq)
            } else {
                body.records[i].endSeq = Self.seqEdge(&rng, near: r[i].endSeq)
            }
        case 1 where !r.isEmpty:
            // The whole range moved to the top of what seqs may be, or past it.
            let i = rng.below(r.count)
            let span = r[i].endSeq &- r[i].startSeq
            let end = [Change.maxSeq, Change.maxSeq + 1, UInt64.max][rng.below(3)]
            body.records[i].startSeq = end &- span
            body.records[i].endSeq = end
        case 2 where !r.isEmpty:
            // Another author's frame around these changes.
            let i = rng.below(r.count)
            body.records[i].author = rng.below(2) == 0 && !history.replicas.isEmpty
                ? history.replicas[rng.below(history.replicas.count)] : ReplicaID(Identifier128(high: rng.next(), low: rng.next()))
        case 3 where !r.isEmpty:
            // A record twice: an overlap (or, not adjacent, an author's seqs going back).
            let i = rng.below(r.count)
            body.records.insert(r[i], at: rng.below(2) == 0 ? i + 1 : rng.below(r.count + 1))
        case 4 where r.count > 1:
            // A record left out: a gap when its author has one after it.
            body.records.remove(at: rng.below(r.count))
        case 5 where r.count > 1:
            body.records.swapAt(rng.below(r.count), rng.below(r.count))
        case 6 where !r.isEmpty:
            // An encoding length that lies.
            let i = rng.below(r.count)
            let length = UInt64(r[i].encoding.count)
            let lengths: [UInt64] = [length + 1, length &- 1, 0, 1, UInt64(Int.max), UInt64(Int.max) + 1, .max, 1 << 24]
            body.records[i].length = lengths[rng.below(lengths.count)]
        case 7:
            // A record count that lies, up to the largest a varint holds.
            let counts: [UInt64] = [UInt64(r.count) + 1, UInt64(r.count) &- 1, 0, 1 << 15, (1 << 15) + 1, 1 << 53, UInt64(Int.max), .max]
            body.count = counts[rng.below(counts.count)]
        case 8:
            // The body cut at a field boundary (the checksum still valid): which one is chosen when written.
            cutBody = rng.below(1 << 16)
        case 9:
            // The transfer stopped: the bundle cut anywhere, its checksum with it.
            cutBytes = rng.below(1 << 30)
        case 10:
            body.trailing = Array(repeating: UInt8(truncatingIfNeeded: rng.next()), count: 1 + rng.below(23))
        case 11 ... 12 where !r.isEmpty:
            // Hostile values inside one record's encoding, its frame as it was.
            let i = rng.below(r.count)
            var encoding = history
            var ignored = RawBundle()
            for _ in 0 ..< 1 + rng.below(2) { values.mutate(&encoding, &ignored, &rng) }
            body.records[i].encoding = encoding.bytes()
        case 13:
            // A compressed body whose declared length lies or sits at the limit.
            bundle.compressed = true
            let length = UInt64(body.bytes().count)
            let lengths: [UInt64] = [length + 1, length &- 1, 0, UInt64(SyncBundle.maxBodyBytes), UInt64(SyncBundle.maxBodyBytes) + 1, .max]
            bundle.declaredLength = lengths[rng.below(lengths.count)]
        case 14:
            // A compression bomb: a short compressed body that inflates to megabytes of zeros (records
            // of zeros, or a count that claims them), or declares past the limit, or holds another compressed page.
            bundle.compressed = true
            switch rng.below(3) {
            case 0:
                // Not the full 32 MiB (`MaximalBundles` has that): making and inflating it takes seconds in a debug build.
                let size = rng.below(4) == 0 ? 4 << 20 : 1 << 20
                var w = RawWriter()
                w.varint([0, 1, 1 << 15, UInt64(size / Self.minimumRecordBytes)][rng.below(4)])
                bundle.body = w.bytes + Array(repeating: 0, count: size - w.bytes.count)
                bundle.declaredLength = rng.below(4) == 0 ? UInt64(SyncBundle.maxBodyBytes) + 1 : nil
            case 1:
                // A record whose encoding is itself a compressed page of zeros.
                var inner = RawBundle()
                inner.version = SyncBundle.recordsFormatVersion
                inner.compressed = true
                inner.body = Array(repeating: 0, count: 1 << 20)
                if !r.isEmpty { body.records[rng.below(r.count)].encoding = inner.bytes() }
            default:
                // The body is a whole compressed page (a page inside a page).
                var inner = bundle
                inner.compressed = true
                inner.body = body.bytes()
                bundle.body = inner.bytes()
            }
        case 15:
            // Many records: a few thousand one-change records, or a count past the limit with the
            // bytes to back it (so that the count reaches the limit check, not the size check).
            many(&body, &rng)
        case 16:
            // The wrong version or flags around a record body, or a record header around a version 3 body.
            switch rng.below(4) {
            case 0: bundle.version = [1, 2, 3, 4, 6, 0xFF][rng.below(6)]
            case 1: bundle.flags = [2, 3, 0x80, 0xFF][rng.below(4)]
            case 2: bundle.body = history.bytes()
            default: bundle.bodyLength = HostileBundles.edge(&rng, near: UInt64(body.bytes().count))
            }
        case 17:
            body.width = .padded([2, 10, 11][rng.below(3)])
            bundle.width = rng.below(2) == 0 ? body.width : .shortest
        case 18 where !r.isEmpty:
            // A record whose changes stop short of its frame, or pass it: one change more or less.
            let i = rng.below(r.count)
            if let changes = try? ChangeCodec.decode(r[i].encoding), changes.count > 1 {
                body.records[i].encoding = ChangeCodec.encode(Array(rng.below(2) == 0 ? changes.dropLast() : changes.dropFirst()))
            } else {
                body.records[i].endSeq = r[i].endSeq &+ 1
            }
        default:
            // The sender's vector at an edge, or the sender is one of the authors.
            if rng.below(2) == 0, !bundle.vector.isEmpty {
                let i = rng.below(bundle.vector.count)
                bundle.vector[i].1 = Self.seqEdge(&rng, near: bundle.vector[i].1)
            } else {
                bundle.sender = r.first?.author ?? bundle.sender
            }
        }
    }

    /// Hundreds to a thousand records of one author, one short change each; records that pass a bundle's
    /// limits only together; or a record count past the limit.
    func many(_ body: inout RawRecordBody, _ rng: inout SplitMix64) {
        let limit = SyncBundle.changeLimits.maxChanges
        let author = ReplicaID(Identifier128(high: 0xA000, low: 0xF00D))
        let note = NoteID(Identifier128(high: 0xB000, low: 1))
        switch rng.below(4) {
        case 2:
            // Each record within the limits alone, not together: the delete span (three runs of
            // 2^23 + 7 deletes). (Two records of 20,000 changes, one of them left out by another
            // mutation, took seconds to apply in a debug build; RecordBundleTests has the change limit.)
            let byChanges = false
            var records: [RawRecordFrame] = []
            var seq: UInt64 = 1
            for _ in 0 ..< (byChanges ? 2 : 3) {
                var e = RawChangeEncoding()
                e.replicas = [author]
                e.notes = [note]
                let first = seq
                if byChanges {
                    for _ in 0 ..< 20_000 {
                        e.headers.append(RawHeader(author: 0, startSeq: seq, timestamp: (1_700_000_000_000 + seq) << 16, operationCount: 1))
                        e.records.append(.insert(note: 0, mode: 0, origin: nil, length: 1, text: [0x62]))
                        seq += 1
                    }
                } else {
                    let n: UInt64 = (1 << 23) + 7
                    e.headers = [RawHeader(author: 0, startSeq: seq, timestamp: (1_700_000_000_000 + seq) << 16, operationCount: 1)]
                    e.records = [.run(note: 0, shape: (n - 2) << 1 | 1, mode: 0, first: RawReference(replica: 0, delta: 1))]
                    seq += n
                }
                records.append(RawRecordFrame(author: author, startSeq: first, endSeq: seq - 1, encoding: e.bytes()))
            }
            body.records = records
            body.count = nil
        case 0, 1:
            // (Applying a page of 2,000 to a store took seconds in a debug build on a busy machine.)
            let n = [300, 1200][rng.below(2)]
            var records: [RawRecordFrame] = []
            for k in 0 ..< n {
                var e = RawChangeEncoding()
                e.replicas = [author]
                e.notes = [note]
                let seq = UInt64(k) + 1
                e.headers = [RawHeader(author: 0, startSeq: seq, timestamp: (1_700_000_000_000 + seq) << 16, operationCount: 1)]
                e.records = [.insert(note: 0, mode: 0, origin: nil, length: 1, text: [0x61 + UInt8(k % 26)])]
                records.append(RawRecordFrame(author: author, startSeq: seq, endSeq: seq, encoding: e.bytes()))
            }
            body.records = records
            body.count = nil
        default:
            let count = [limit, limit + 1][rng.below(2)]
            body.count = UInt64(count)
            body.records = []
            body.trailing = Array(repeating: 0, count: count * Self.minimumRecordBytes)
        }
    }
}

import NotesCRDT

/// Record bundles (format version 5): the body is a list of records, each one author's changes
/// over a gap-free range of seqs as one change encoding of its own, framed by its author and range.
/// A relay stores one encoding per author per upload, so it can serve them as they are, without
/// decoding and encoding them again; and a reader learns what a page covers from the frames alone,
/// without decoding the changes (`recordCoverage`). Docs/BundleFormat.md has the bytes.
extension SyncBundle {
    /// The version of a record bundle.
    public static let recordsFormatVersion: UInt8 = 5
    /// A record's frame takes at least this many bytes (author, two seqs, a length), its encoding 3.
    static let minimumRecordBytes = 16 + 3 + 3

    /// One author's changes over `startSeq ... endSeq`, as a change encoding (`ChangeCodec`) that
    /// holds exactly those changes, in seq order.
    public struct Record: Sendable, Hashable {
        /// The changes' author.
        public var author: ReplicaID
        /// The first seq covered.
        public var startSeq: UInt64
        /// The last seq covered.
        public var endSeq: UInt64
        /// The change encoding.
        public var encoding: [UInt8]

        /// A record.
        public init(author: ReplicaID, startSeq: UInt64, endSeq: UInt64, encoding: [UInt8]) {
            self.author = author
            self.startSeq = startSeq
            self.endSeq = endSeq
            self.encoding = encoding
        }
    }

    /// The bytes of a record bundle (format version 5, not compressed) from `sender`, which had
    /// applied `senderVersion`, carrying `records` in order (each author's in seq order, gap-free).
    public static func encodedRecords(sender: ReplicaID, senderVersion: VersionVector, records: [Record]) -> [UInt8] {
        var body = BinaryWriter(capacity: records.reduce(16) { $0 + $1.encoding.count + 40 })
        body.varint(UInt64(records.count))
        for record in records {
            body.raw(record.author.raw.bytes)
            body.varint(record.startSeq)
            body.varint(record.endSeq)
            body.varint(UInt64(record.encoding.count))
            body.raw(record.encoding)
        }
        var writer = BinaryWriter(capacity: body.bytes.count + 64 + 24 * senderVersion.entries.count)
        writer.raw(magic)
        writer.byte(recordsFormatVersion)
        writer.byte(0)
        writer.raw(sender.raw.bytes)
        writer.versionVector(senderVersion)
        writer.varint(UInt64(body.bytes.count))
        writer.raw(body.bytes)
        var bytes = writer.bytes
        bytes.append(contentsOf: checksum(bytes[...]))
        return bytes
    }

    /// For a record bundle, per author the last seq its records cover, read from the frames after
    /// every check of the bundle's framing (checksum, lengths, the records' order), without decoding
    /// the changes: what a client needs to ask for the next page. Nil for a bundle of another version.
    public static func recordCoverage(_ bytes: [UInt8]) throws -> VersionVector? {
        var (header, flags, body) = try checkedParts(bytes)
        guard header.formatVersion == recordsFormatVersion else { return nil }
        do {
            var reader = flags & deflatedFlag != 0 ? BinaryReader(try inflate(&body)) : body
            let count = try recordCount(&reader)
            var covered: [ReplicaID: UInt64] = [:]
            for index in 0 ..< count {
                let frame = try recordFrame(&reader, index: index, covered: &covered)
                _ = try reader.reader(over: frame.length)
            }
            guard reader.isAtEnd else { throw CRDTError(.malformedEncoding, "\(reader.remaining) unexpected bytes after the records") }
            var vector = VersionVector()
            for (author, seq) in covered { vector[author] = seq }
            return vector
        } catch let error as CRDTError {
            throw SyncError(.malformed, "malformed bundle: \(error.message)")
        }
    }

    /// The changes of a record bundle's body, every record checked against its frame, all of them
    /// within one bundle's limits together.
    static func recordChanges(_ reader: inout BinaryReader) throws -> [Change] {
        let count = try recordCount(&reader)
        var budget = changeLimits
        var covered: [ReplicaID: UInt64] = [:]
        var changes: [Change] = []
        for index in 0 ..< count {
            changes.append(contentsOf: try nextRecord(&reader, index: index, count: count, budget: &budget, covered: &covered))
        }
        guard reader.isAtEnd else { throw CRDTError(.malformedEncoding, "\(reader.remaining) unexpected bytes after the records") }
        return changes
    }

    /// A record bundle read record by record, each checked against its frame as it is decoded,
    /// the bundle's limits kept across them: what a client holds decoded is one record, not a page.
    /// The bundle's framing should be checked whole first (`recordCoverage`), so that a damaged
    /// page is refused before any of it is used.
    public struct RecordReader {
        /// The bundle's header.
        public let header: Header
        private var reader: BinaryReader
        private let count: Int
        private var index = 0
        private var budget = SyncBundle.changeLimits
        private var covered: [ReplicaID: UInt64] = [:]

        /// A reader of `bytes` (after the checks of `decodeHeader`), or nil for a bundle of another version.
        public init?(_ bytes: [UInt8]) throws {
            var (header, flags, body) = try SyncBundle.checkedParts(bytes)
            guard header.formatVersion == SyncBundle.recordsFormatVersion else { return nil }
            self.header = header
            (reader, count) = try SyncBundle.mappingErrors {
                var reader = flags & SyncBundle.deflatedFlag != 0 ? BinaryReader(try SyncBundle.inflate(&body)) : body
                let count = try SyncBundle.recordCount(&reader)
                return (reader, count)  // the reader past the count
            }
        }

        /// The next record's changes; nil after the last (when nothing follows it).
        public mutating func next() throws -> [Change]? {
            try SyncBundle.mappingErrors {
                guard index < count else {
                    guard reader.isAtEnd else { throw CRDTError(.malformedEncoding, "\(reader.remaining) unexpected bytes after the records") }
                    return nil
                }
                let changes = try SyncBundle.nextRecord(&reader, index: index, count: count, budget: &budget, covered: &covered)
                index += 1
                return changes
            }
        }
    }

    /// `body`, with the codec's errors as `decode` reports them.
    static func mappingErrors<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as CRDTError {
            throw SyncError(error.code == .limitExceeded ? .tooLarge : .malformed,
                            error.code == .limitExceeded ? "bundle too large: \(error.message)" : "malformed bundle: \(error.message)")
        }
    }

    /// One record: its frame, then its changes, checked against the frame and within `budget`.
    private static func nextRecord(_ reader: inout BinaryReader, index: Int, count: Int, budget: inout ChangeCodec.Limits,
                                   covered: inout [ReplicaID: UInt64]) throws -> [Change] {
        let frame = try recordFrame(&reader, index: index, covered: &covered)
        var encoding = try reader.reader(over: frame.length)
        var used = ChangeCodec.Usage()
        let decoded: [Change]
        do {
            decoded = try ChangeCodec.decode(from: &encoding, limits: budget, used: &used)
        } catch let error as CRDTError where error.code == .limitExceeded {
            throw CRDTError(.limitExceeded, "record \(index + 1) of \(count) passes what the bundle's records may hold together: \(error.message)")
        }
        guard encoding.isAtEnd else {
            throw CRDTError(.malformedEncoding, "record \(index + 1): \(encoding.remaining) unexpected bytes after its changes")
        }
        budget = budget.remaining(after: used)
        // The frame is what a reader trusts for the cursor: the changes must be exactly it.
        var next = frame.startSeq
        for change in decoded {
            guard change.replica == frame.author else {
                throw CRDTError(.malformedEncoding, "record \(index + 1) is framed as \(frame.author)'s but holds a change of \(change.replica)")
            }
            guard change.startSeq == next else {
                throw CRDTError(.malformedEncoding, "record \(index + 1) of \(frame.author) is framed as seqs \(frame.startSeq)-\(frame.endSeq) but holds a change at seq \(change.startSeq) where \(next) was due")
            }
            guard change.endSeq <= frame.endSeq else {
                throw CRDTError(.malformedEncoding, "record \(index + 1) of \(frame.author) is framed as seqs \(frame.startSeq)-\(frame.endSeq) but holds a change up to seq \(change.endSeq)")
            }
            next = change.endSeq + 1
        }
        guard next == frame.endSeq + 1 else {
            throw CRDTError(.malformedEncoding, "record \(index + 1) of \(frame.author) is framed as seqs \(frame.startSeq)-\(frame.endSeq) but its changes end at seq \(next - 1)")
        }
        return decoded
    }

    /// The record count: every record takes some bytes and holds at least one change.
    private static func recordCount(_ reader: inout BinaryReader) throws -> Int {
        let count = try reader.count(max: reader.remaining / minimumRecordBytes, "the record count")
        guard count <= changeLimits.maxChanges else {
            throw CRDTError(.limitExceeded, "more than \(changeLimits.maxChanges) records (\(count))")
        }
        return count
    }

    /// One record's frame, checked: seqs in 1 ... 2^53 - 1 in order, and each author's records
    /// following each other without a gap or an overlap (`covered` holds each author's last seq).
    private static func recordFrame(_ reader: inout BinaryReader, index: Int, covered: inout [ReplicaID: UInt64])
        throws -> (author: ReplicaID, startSeq: UInt64, endSeq: UInt64, length: Int) {
        let author = ReplicaID(Identifier128(bytes: try reader.raw(16))!)
        let startSeq = try reader.varint()
        let endSeq = try reader.varint()
        guard startSeq >= 1, startSeq <= endSeq, endSeq <= Change.maxSeq else {
            throw CRDTError(.malformedEncoding, "record \(index + 1) of \(author) is framed as seqs \(startSeq)-\(endSeq), not a range within 1 ... 2^53 - 1")
        }
        if let last = covered[author] {
            guard startSeq > last else {
                throw CRDTError(.malformedEncoding, "record \(index + 1) of \(author) at seqs \(startSeq)-\(endSeq) overlaps the one before it (up to \(last))")
            }
            guard startSeq == last + 1 else {
                throw CRDTError(.malformedEncoding, "record \(index + 1) of \(author) starts at seq \(startSeq), leaving a gap after the one before it (up to \(last))")
            }
        }
        covered[author] = endSeq
        let length = try reader.count(max: reader.remaining, "record \(index + 1)'s length")
        return (author, startSeq, endSeq, length)
    }
}

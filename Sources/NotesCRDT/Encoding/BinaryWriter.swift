/// Appends bytes: LEB128 varints, fixed-width integers, length-prefixed strings.
public struct BinaryWriter: Sendable {
    /// The bytes written so far.
    public private(set) var bytes: [UInt8] = []

    /// An empty writer.
    public init() {}

    /// An empty writer with room for `capacity` bytes.
    public init(capacity: Int) { bytes.reserveCapacity(capacity) }

    /// Appends an unsigned LEB128 varint.
    ///
    /// One append of the whole varint (a byte at a time would check the array's uniqueness and
    /// capacity for each).
    public mutating func varint(_ value: UInt64) {
        if value < 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value))
            return
        }
        var buffer: (UInt64, UInt64) = (0, 0)  // room for the longest varint, 10 bytes
        withUnsafeMutableBytes(of: &buffer) { raw in
            var v = value
            var count = 0
            while v >= 0x80 {
                raw[count] = UInt8(truncatingIfNeeded: v) | 0x80
                v >>= 7
                count += 1
            }
            raw[count] = UInt8(truncatingIfNeeded: v)
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[..<(count + 1)]))
        }
    }

    /// Appends a zigzag-encoded signed varint.
    public mutating func signedVarint(_ value: Int64) {
        varint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    /// Appends one byte.
    public mutating func byte(_ value: UInt8) { bytes.append(value) }

    /// Appends raw bytes.
    public mutating func raw(_ data: some Sequence<UInt8>) { bytes.append(contentsOf: data) }

    /// Empties the writer, keeping its storage.
    public mutating func removeAll() { bytes.removeAll(keepingCapacity: true) }

    /// Appends a 32-bit big-endian integer.
    public mutating func uint32(_ value: UInt32) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    /// Appends a 64-bit big-endian integer.
    public mutating func uint64(_ value: UInt64) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    /// Appends the UTF-8 encoding of `scalars` (no length).
    mutating func utf8(_ text: InsertedText) {
        text.appendUTF8(to: &bytes)
    }

    /// Appends a varint byte length, then the UTF-8 bytes.
    public mutating func string(_ value: String) {
        varint(UInt64(value.utf8.count))
        bytes.append(contentsOf: value.utf8)
    }
}

/// Reads what `BinaryWriter` wrote, checking every length against what is left.
public struct BinaryReader: Sendable {
    private let bytes: [UInt8]
    /// Where the bytes this reader may read end (a part of a larger array is read in place).
    private let end: Int
    /// The read position.
    public private(set) var offset: Int

    /// A reader over `bytes`, from `offset`.
    public init(_ bytes: [UInt8], offset: Int = 0) {
        self.bytes = bytes
        self.end = bytes.count
        self.offset = min(max(offset, 0), bytes.count)
    }

    /// A reader over `bytes[range]`, without copying them.
    public init(_ bytes: [UInt8], range: Range<Int>) {
        precondition(range.lowerBound >= 0 && range.upperBound <= bytes.count, "a reader's range is outside its bytes")
        self.bytes = bytes
        self.end = range.upperBound
        self.offset = range.lowerBound
    }

    /// Bytes left to read.
    public var remaining: Int { end - offset }

    /// The bytes not read yet.
    public var rest: ArraySlice<UInt8> { bytes[offset ..< end] }

    /// Whether everything has been read.
    public var isAtEnd: Bool { offset >= end }

    /// A reader over the next `n` bytes (which this one skips), sharing the storage: a column of
    /// the change encoding is read in place rather than copied.
    public mutating func reader(over n: Int) throws -> BinaryReader {
        guard n >= 0, n <= remaining else { throw truncated("\(n) bytes") }
        defer { offset += n }
        return BinaryReader(bytes, range: offset ..< offset + n)
    }

    private func truncated(_ what: String) -> CRDTError {
        CRDTError(.malformedEncoding, "truncated data: \(what) at byte \(offset)")
    }

    /// Reads an unsigned LEB128 varint.
    @inline(__always)  // the one-byte case inline: decoding reads several varints per operation
    public mutating func varint() throws -> UInt64 {
        // One byte, the usual case (counts, indexes, small differences), without the loop.
        if offset < end {
            let byte = bytes[offset]
            if byte < 0x80 {
                offset += 1
                return UInt64(byte)
            }
        }
        return try longVarint()
    }

    /// `varint()` past its first byte's fast path.
    @inline(never)
    private mutating func longVarint() throws -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard offset < end else { throw truncated("a varint") }
            let byte = bytes[offset]
            offset += 1
            if shift == 63, byte > 1 { throw CRDTError(.malformedEncoding, "a varint overflows 64 bits at byte \(offset - 1)") }
            result |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return result }
            shift += 7
            if shift > 63 { throw CRDTError(.malformedEncoding, "a varint is too long at byte \(offset - 1)") }
        }
    }

    /// Reads a varint that must fit in `limit` (a count or index).
    @inline(__always)
    public mutating func count(max limit: Int, _ what: @autoclosure () -> String) throws -> Int {
        let value = try varint()
        guard value <= UInt64(limit) else { throw tooLarge(value, limit, what()) }
        return Int(value)
    }

    private func tooLarge(_ value: UInt64, _ limit: Int, _ what: String) -> CRDTError {
        CRDTError(.malformedEncoding, "\(what) is \(value), more than the \(limit) possible at byte \(offset)")
    }

    /// Reads a zigzag-encoded signed varint.
    @inline(__always)  // as `varint()`: a delete's or an insert's explicit target reads one
    public mutating func signedVarint() throws -> Int64 {
        let raw = try varint()
        return Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1)
    }

    /// Reads one byte.
    public mutating func byte() throws -> UInt8 {
        guard offset < end else { throw truncated("a byte") }
        defer { offset += 1 }
        return bytes[offset]
    }

    /// Reads `n` raw bytes.
    public mutating func raw(_ n: Int) throws -> ArraySlice<UInt8> {
        guard n >= 0, n <= remaining else { throw truncated("\(n) bytes") }
        defer { offset += n }
        return bytes[offset ..< offset + n]
    }

    /// Reads a 32-bit big-endian integer.
    public mutating func uint32() throws -> UInt32 {
        try raw(4).reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// Reads a 64-bit big-endian integer.
    public mutating func uint64() throws -> UInt64 {
        try raw(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// Reads a length-prefixed UTF-8 string; invalid UTF-8 is an error.
    public mutating func string() throws -> String {
        let n = try count(max: remaining, "a string length")
        let data = try raw(n)
        guard let s = String(validating: data, as: UTF8.self) else {
            throw CRDTError(.malformedEncoding, "a string is not valid UTF-8 at byte \(offset - n)")
        }
        return s
    }
}

extension BinaryWriter {
    /// Appends a version vector: a varint count, then per entry (sorted by replica) 16 bytes and a
    /// varint seq. Bundles, snapshots and the store's peer table all write it this way.
    public mutating func versionVector(_ vector: VersionVector) {
        let entries = vector.sortedEntries
        varint(UInt64(entries.count))
        for (replica, seq) in entries {
            raw(replica.raw.bytes)
            varint(seq)
        }
    }
}

extension BinaryReader {
    /// Reads what `BinaryWriter.versionVector(_:)` wrote, checking the count against the bytes
    /// left (and `maxEntries`), that the entries come in increasing order of replica (as they are
    /// written: so that reading them is linear), and that no seq passes `maxSeq`.
    public mutating func versionVector(maxEntries: Int = .max, maxSeq: UInt64 = .max) throws -> VersionVector {
        let count = try self.count(max: min(remaining / 17, maxEntries), "the version vector's length")
        var vector = VersionVector()
        for _ in 0 ..< count {
            let replica = ReplicaID(Identifier128(bytes: try raw(16))!)
            let seq = try varint()
            guard seq <= maxSeq else {
                throw CRDTError(.malformedEncoding, "a version vector holds seq \(seq) of \(replica), past \(maxSeq == Change.maxSeq ? "2^53 - 1" : "\(maxSeq)"), at byte \(offset)")
            }
            guard vector.appendSorted(replica, seq) else {
                throw CRDTError(.malformedEncoding, "a version vector's entries are not in increasing order of replica at byte \(offset)")
            }
        }
        return vector
    }
}

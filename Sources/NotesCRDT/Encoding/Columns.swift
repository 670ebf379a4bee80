/// A column of 2-bit values, four to a byte, first value in the low bits.
struct TwoBitColumn {
    private(set) var bytes: [UInt8] = []
    private var count = 0

    mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        count = 0
    }

    mutating func append(_ value: UInt8) {
        if count % 4 == 0 { bytes.append(0) }
        bytes[bytes.count - 1] |= (value & 3) << UInt8(2 * (count % 4))
        count += 1
    }
}

struct TwoBitReader {
    /// The column's bytes, read in place.
    private let bytes: ArraySlice<UInt8>
    /// The next byte to load.
    private var position: Int
    /// The values of the byte loaded last that are not read yet, the next in the low bits.
    private var current: UInt8 = 0
    private var left = 0

    init(_ reader: BinaryReader) {
        bytes = reader.rest
        position = bytes.startIndex
    }

    /// One byte loaded per four values (an index divided and a byte loaded per value cost
    /// several times more, for every operation decoded).
    @inline(__always)
    mutating func next() throws -> UInt8 {
        if left == 0 {
            guard position < bytes.endIndex else { throw CRDTError(.malformedEncoding, "a 2-bit column ends early") }
            current = bytes[position]
            position += 1
            left = 4
        }
        let value = current & 3
        current >>= 2
        left -= 1
        return value
    }
}

/// A column of unsigned values as (run length, value) pairs of varints.
struct RunLengthColumn {
    private var writer = BinaryWriter()
    private var current: UInt64 = 0
    private var run: UInt64 = 0

    mutating func append(_ value: UInt64) {
        if run > 0, value == current { run += 1; return }
        flush()
        current = value
        run = 1
    }

    /// Writes the run in progress (the last one: nothing is appended after a flush).
    mutating func flush() {
        guard run > 0 else { return }
        writer.varint(run)
        writer.varint(current)
        run = 0
    }

    /// The bytes written, after `flush()`.
    var flushedBytes: [UInt8] { writer.bytes }

    mutating func removeAll() {
        writer.removeAll()
        current = 0
        run = 0
    }
}

struct RunLengthReader {
    private var reader: BinaryReader
    private var current: UInt64 = 0
    private var left: UInt64 = 0

    init(_ reader: BinaryReader) { self.reader = reader }

    @inline(__always)  // one call per operation decoded, for a value that is usually the run's
    mutating func next() throws -> UInt64 {
        if left == 0 {
            left = try reader.varint()
            current = try reader.varint()
            guard left > 0 else { throw CRDTError(.malformedEncoding, "a run of length zero") }
        }
        left -= 1
        return current
    }
}

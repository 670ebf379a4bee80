import CZlib

/// Raw DEFLATE (RFC 1951) through the system's zlib: the compression of bundle bodies.
///
/// Raw, without a zlib or gzip wrapper, because the container around it (a bundle) already
/// carries the uncompressed length and a SHA-256 of its bytes.
public enum Deflate {
    /// An error inflating: the data is corrupt, truncated, or does not inflate to the length the
    /// container declared.
    public struct Failure: Error, Hashable, Sendable, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    /// Compresses `input` at zlib's `level` (9, its best compression, unless told otherwise).
    public static func compress(_ input: [UInt8], level: Int32 = 9) -> [UInt8] {
        var stream = z_stream()
        // Raw deflate (negative window bits), with the window and the memory level sized to the
        // input (`parameters(forLength:)`): up to a 32 KiB window and memory level 9.
        let (windowBits, memoryLevel) = parameters(forLength: input.count)
        guard deflateInit2_(&stream, level, Z_DEFLATED, -windowBits, memoryLevel, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
                            Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            preconditionFailure("zlib could not start a deflate stream")
        }
        defer { deflateEnd(&stream) }
        let bound = Int(deflateBound(&stream, uLong(input.count)))
        var output = [UInt8](repeating: 0, count: bound)
        var input = input
        let produced: Int = input.withUnsafeMutableBufferPointer { inBuffer in
            output.withUnsafeMutableBufferPointer { outBuffer in
                stream.next_in = inBuffer.baseAddress
                stream.avail_in = uInt(inBuffer.count)
                stream.next_out = outBuffer.baseAddress
                stream.avail_out = uInt(outBuffer.count)
                let status = deflate(&stream, Z_FINISH)
                precondition(status == Z_STREAM_END, "deflate into a buffer of deflateBound bytes did not finish (\(status))")
                return outBuffer.count - Int(stream.avail_out)
            }
        }
        output.removeSubrange(produced...)
        return output
    }

    /// The window bits and memory level `compress` uses for an input of `length` bytes: the
    /// smallest window that still reaches back over the whole input (zlib matches at most the
    /// window less 262 bytes back), and the memory level whose hash table has at least twice as
    /// many heads as the input has bytes and whose symbol buffer holds the whole input (so the
    /// input is one block, as with level 9); at most 15 and 9, zlib's largest.
    ///
    /// zlib allocates and clears the window (twice its size), the hash heads and the chain links
    /// on every stream, about 400 KiB with the largest settings: for a bundle body of a few
    /// kilobytes that setup cost as much as compressing it. Sized this way, every body of a
    /// simulation run compressed to the same bytes as with the largest settings (measured:
    /// 248 bodies of 500 bytes to 25 KiB), in half the time.
    static func parameters(forLength length: Int) -> (windowBits: Int32, memoryLevel: Int32) {
        var windowBits: Int32 = 9
        while windowBits < 15, (1 << windowBits) - 262 < length { windowBits += 1 }
        // The hash has memoryLevel + 7 bits; the symbol buffer 1 << (memoryLevel + 6) entries.
        var memoryLevel: Int32 = 1
        while memoryLevel < 9, (1 << (memoryLevel + 6)) <= length + 1 { memoryLevel += 1 }
        return (windowBits, memoryLevel)
    }

    /// Inflates `input`, which must hold exactly one raw deflate stream that inflates to exactly
    /// `length` bytes (so a damaged or hostile input cannot make it allocate more than that).
    public static func decompress(_ input: some Collection<UInt8>, length: Int) throws -> [UInt8] {
        var stream = z_stream()
        guard inflateInit2_(&stream, -15, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw Failure(message: "zlib could not start an inflate stream")
        }
        defer { inflateEnd(&stream) }
        // Inflated straight into the result's storage (no zero fill, no copy of the input), with
        // one byte of slack so that a stream that would inflate to more than `length` is caught.
        var status: Int32 = Z_OK
        var leftover = 0
        let output = [UInt8](unsafeUninitializedCapacity: length + 1) { out, initialized in
            func run(_ source: UnsafeBufferPointer<UInt8>) {
                stream.next_in = UnsafeMutablePointer(mutating: source.baseAddress)
                stream.avail_in = uInt(source.count)
                stream.next_out = out.baseAddress
                stream.avail_out = uInt(length + 1)
                status = inflate(&stream, Z_FINISH)
                leftover = Int(stream.avail_in)
            }
            if input.withContiguousStorageIfAvailable(run) == nil { Array(input).withUnsafeBufferPointer(run) }
            initialized = length + 1 - Int(stream.avail_out)
        }
        let produced = output.count
        switch status {
        case Z_STREAM_END:
            guard produced == length else {
                throw Failure(message: "the compressed data inflates to \(produced) bytes, not the \(length) declared")
            }
            guard leftover == 0 else { throw Failure(message: "\(leftover) bytes follow the compressed data") }
        case Z_BUF_ERROR where produced > length:
            throw Failure(message: "the compressed data inflates to more than the \(length) bytes declared")
        case Z_BUF_ERROR:
            throw Failure(message: "the compressed data is truncated")
        default:
            throw Failure(message: "the compressed data is corrupt (zlib status \(status))")
        }
        return output
    }
}

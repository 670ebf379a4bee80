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

    /// Compresses `input` at zlib's best compression.
    public static func compress(_ input: [UInt8], level: Int32 = 9) -> [UInt8] {
        var stream = z_stream()
        // -15: raw deflate with a 32 KiB window; memory level 9 for the best ratio.
        guard deflateInit2_(&stream, level, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
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

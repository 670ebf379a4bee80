import CZlib

/// Raw DEFLATE (RFC 1951) through the system's zlib: the compression of bundle bodies.
///
/// Raw, without a zlib or gzip wrapper, because the container around it (a bundle) already
/// carries the uncompressed length and a SHA-256 of its bytes.
public enum Deflate {
    /// An error inflating: the data is corrupt, truncated, or does not inflate to the length the
    /// container declared.
    public struct Failure: Error, Hashable, Sendable, CustomStringConvertible {
        /// What is wrong with the data.
        public var message: String
        /// The message.
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
    /// kilobytes that setup costs as much as compressing it. Sized this way, a body compresses to
    /// the same bytes as with the largest settings, without that setup.
    static func parameters(forLength length: Int) -> (windowBits: Int32, memoryLevel: Int32) {
        var windowBits: Int32 = 9
        while windowBits < 15, (1 << windowBits) - 262 < length { windowBits += 1 }
        // The hash has memoryLevel + 7 bits; the symbol buffer 1 << (memoryLevel + 6) entries.
        var memoryLevel: Int32 = 1
        while memoryLevel < 9, (1 << (memoryLevel + 6)) <= length + 1 { memoryLevel += 1 }
        return (windowBits, memoryLevel)
    }

    /// Inflates `input`, which must hold exactly one raw deflate stream that inflates to exactly
    /// `length` bytes.
    ///
    /// zlib writes straight into the result, which grows as the stream really inflates (first to
    /// what the input could plausibly give, then doubling), so memory follows what the stream
    /// inflates to, never what `length` claims: a stream that would pass `length` is stopped (and
    /// refused) at the first byte past it. Inputs and outputs of any size go through zlib's
    /// 32-bit counters in slices.
    ///
    /// - Complexity: O(input + `length`) time; O(`length`) memory at most.
    public static func decompress(_ input: some Collection<UInt8>, length: Int) throws -> [UInt8] {
        guard length >= 0 else { throw Failure(message: "a negative length (\(length)) was declared for the compressed data") }
        if let result = try input.withContiguousStorageIfAvailable({ try inflate($0, length: length) }) { return result }
        return try Array(input).withUnsafeBufferPointer { try inflate($0, length: length) }
    }

    /// How much zlib is handed at a time (its counters are 32 bits).
    static let inputSlice = 1 << 30
    /// The least the result grows by at a time.
    static let outputStep = 1 << 16

    private static func inflate(_ input: UnsafeBufferPointer<UInt8>, length: Int) throws -> [UInt8] {
        var stream = z_stream()
        guard inflateInit2_(&stream, -15, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw Failure(message: "zlib could not start an inflate stream")
        }
        defer { inflateEnd(&stream) }
        // Inflated in place (a step buffer copied into the result cost a copy of every byte).
        // One byte of room past `length`, so a stream that passes it is seen to.
        var output: [UInt8] = []
        var written = 0
        var room = min(length, max(outputStep, input.count &* 4)) + 1
        var consumed = 0
        var status: Int32 = Z_OK
        while true {
            if stream.avail_in == 0, consumed < input.count {
                let slice = min(input.count - consumed, inputSlice)
                stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress! + consumed)
                stream.avail_in = uInt(slice)
                consumed += slice
            }
            if written == output.count {
                // At most one byte past `length` (written this way, `length + 1` cannot overflow).
                let step = min(room, inputSlice)
                let target = written + (length - written < step ? length - written + 1 : step)
                output.reserveCapacity(target)
                output.append(contentsOf: repeatElement(0, count: target - written))
                room = max(outputStep, written)  // the next growth doubles the result
            }
            status = output.withUnsafeMutableBufferPointer { buffer in
                stream.next_out = buffer.baseAddress! + written
                stream.avail_out = uInt(buffer.count - written)
                let status = zlibInflate(&stream, Z_NO_FLUSH)
                written = buffer.count - Int(stream.avail_out)
                return status
            }
            guard written <= length else {
                throw Failure(message: "the compressed data inflates to more than the \(length) bytes declared")
            }
            switch status {
            case Z_OK:
                continue
            case Z_STREAM_END:
                break
            case Z_BUF_ERROR where stream.avail_in == 0 && consumed == input.count:
                throw Failure(message: "the compressed data is truncated")
            case Z_BUF_ERROR:
                continue
            default:
                throw Failure(message: "the compressed data is corrupt (zlib status \(status))")
            }
            break
        }
        output.removeSubrange(written...)
        guard written == length else {
            throw Failure(message: "the compressed data inflates to \(written) bytes, not the \(length) declared")
        }
        let leftover = Int(stream.avail_in) + (input.count - consumed)
        guard leftover == 0 else { throw Failure(message: "\(leftover) bytes follow the compressed data") }
        return output
    }
}

/// zlib's `inflate`, named apart from `Deflate.inflate`.
private func zlibInflate(_ stream: UnsafeMutablePointer<z_stream>, _ flush: Int32) -> Int32 {
    inflate(stream, flush)
}

import CZlib

/// Gzip decompression through the system's zlib.
enum Gzip {
    /// Whether `bytes` start with the gzip magic number.
    static func isGzip(_ bytes: [UInt8]) -> Bool {
        bytes.count >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b
    }

    /// Inflates gzip data; throws on corrupt or truncated input, and when it would pass `limit` bytes (a gzip bomb).
    static func decompress(_ input: [UInt8], limit: Int = .max) throws -> [UInt8] {
        var stream = z_stream()
        // 15 window bits + 32: detect gzip or zlib headers automatically.
        guard inflateInit2_(&stream, 15 + 32, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw TraceError("zlib could not start")
        }
        defer { inflateEnd(&stream) }
        var output = [UInt8]()
        output.reserveCapacity(min(input.count, limit / 4) * 4)
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        var input = input
        var overLimit = false
        let status: Int32 = input.withUnsafeMutableBufferPointer { inBuffer in
            stream.next_in = inBuffer.baseAddress
            stream.avail_in = uInt(inBuffer.count)
            var result: Int32 = Z_OK
            repeat {
                result = chunk.withUnsafeMutableBufferPointer { outBuffer in
                    stream.next_out = outBuffer.baseAddress
                    stream.avail_out = uInt(outBuffer.count)
                    return inflate(&stream, Z_NO_FLUSH)
                }
                let produced = chunk.count - Int(stream.avail_out)
                guard produced <= limit - output.count else {
                    overLimit = true
                    return Z_DATA_ERROR
                }
                output.append(contentsOf: chunk[0 ..< produced])
                if result == Z_BUF_ERROR && stream.avail_in == 0 { return Z_BUF_ERROR }
            } while result == Z_OK
            return result
        }
        guard status == Z_STREAM_END else {
            if overLimit { throw TraceError("the gzip data inflates to more than the \(limit) bytes a trace may be") }
            throw TraceError(status == Z_BUF_ERROR ? "the gzip data is truncated" : "the gzip data is corrupt (zlib status \(status))")
        }
        return output
    }
}

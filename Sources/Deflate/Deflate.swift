import CZlib
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Raw DEFLATE (RFC 1951) through the system's zlib: the compression of bundle bodies. (Inflating
/// goes through libdeflate instead where the system has it: see `LibDeflate`.)
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
    /// A stream that inflates as declared, no more than `LibDeflate.maxRatio` times its size, is
    /// inflated by libdeflate where the system has it; anything else by zlib, as follows.
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
        if let inflater = LibDeflate.shared, length <= LibDeflate.maxRatio &* input.count,
           let result = input.withContiguousStorageIfAvailable({ inflater.inflate($0, length: length) }) ?? nil {
            return result
        }
        return try decompressWithZlib(input, length: length)
    }

    /// `decompress(_:length:)` through zlib alone: what it falls back to, and what its errors
    /// come from.
    package static func decompressWithZlib(_ input: some Collection<UInt8>, length: Int) throws -> [UInt8] {
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

/// libdeflate's one-shot decompressor, loaded at run time where the system has the library (it
/// inflates bundle bodies about 2.5 times as fast as zlib's streaming `inflate`); nil elsewhere.
///
/// Used only for a stream that inflates as declared: anything else (corrupt, truncated, too long
/// or too short, bytes after it) is inflated again by zlib, whose errors are the ones reported.
package struct LibDeflate: @unchecked Sendable {
    typealias Allocate = @convention(c) () -> OpaquePointer?
    typealias Inflate = @convention(c) (OpaquePointer?, UnsafeRawPointer?, Int, UnsafeMutableRawPointer?, Int,
                                        UnsafeMutablePointer<Int>?, UnsafeMutablePointer<Int>?) -> Int32
    typealias Free = @convention(c) (OpaquePointer?) -> Void

    let allocate: Allocate
    let inflateEx: Inflate
    let free: Free

    /// The declared length it is trusted with, per input byte: it writes into a buffer of the
    /// declared length, allocated first, so a larger claim (a bomb, or a lie) goes to zlib, whose
    /// result grows only as the stream really inflates. Bundle bodies inflate 2-5 times.
    static let maxRatio = 8

    package static let shared: LibDeflate? = {
        #if canImport(Glibc)
        guard let handle = dlopen("libdeflate.so.0", RTLD_NOW | RTLD_LOCAL),
              let allocate = dlsym(handle, "libdeflate_alloc_decompressor"),
              let inflateEx = dlsym(handle, "libdeflate_deflate_decompress_ex"),
              let free = dlsym(handle, "libdeflate_free_decompressor") else { return nil }
        return LibDeflate(allocate: unsafeBitCast(allocate, to: Allocate.self),
                          inflateEx: unsafeBitCast(inflateEx, to: Inflate.self), free: unsafeBitCast(free, to: Free.self))
        #else
        return nil
        #endif
    }()

    /// The `length` bytes `input` inflates to, when it is one raw deflate stream of exactly that
    /// length and nothing follows it; nil otherwise.
    package func inflate(_ input: UnsafeBufferPointer<UInt8>, length: Int) -> [UInt8]? {
        guard let decompressor = allocate() else { return nil }
        defer { free(decompressor) }
        var succeeded = false
        // Written in place, never cleared first: on success every byte is the stream's.
        let output = [UInt8](unsafeUninitializedCapacity: length) { buffer, count in
            var consumed = 0
            var produced = 0
            // 0: LIBDEFLATE_SUCCESS.
            succeeded = inflateEx(decompressor, input.baseAddress, input.count, buffer.baseAddress, length, &consumed, &produced) == 0
                && consumed == input.count && produced == length
            count = succeeded ? length : 0
        }
        return succeeded ? output : nil
    }
}

/// zlib's `inflate`, named apart from `Deflate.inflate`.
private func zlibInflate(_ stream: UnsafeMutablePointer<z_stream>, _ flush: Int32) -> Int32 {
    inflate(stream, flush)
}

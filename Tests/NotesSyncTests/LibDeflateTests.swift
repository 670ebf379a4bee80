import Deflate
import Testing

/// libdeflate, where the system has it, inflates exactly what zlib does and takes nothing zlib
/// would refuse: anything but one stream of exactly the declared length goes back to zlib.
@Suite(.enabled(if: LibDeflate.shared != nil, "libdeflate.so.0 is not on this system"))
struct LibDeflateTests {
    static let text = Array((0 ..< 200_000).map { UInt8(truncatingIfNeeded: $0 * 7 % 251 + $0 / 1000) })

    @Test func inflatesWhatZlibInflates() throws {
        let inflater = try #require(LibDeflate.shared)
        for length in [1, 2, 1000, 65_536, 200_000] {
            let input = Array(Self.text.prefix(length))
            for level: Int32 in [1, 9] {
                let compressed = Deflate.compress(input, level: level)
                let fast = compressed.withUnsafeBufferPointer { inflater.inflate($0, length: length) }
                #expect(fast == input, "length \(length), level \(level)")
                #expect(try Deflate.decompressWithZlib(compressed, length: length) == input)
                #expect(try Deflate.decompress(compressed, length: length) == input)
            }
        }
    }

    @Test func leavesEveryDamagedStreamToZlib() throws {
        let inflater = try #require(LibDeflate.shared)
        let compressed = Deflate.compress(Self.text, level: 9)
        func fast(_ bytes: [UInt8], _ length: Int) -> [UInt8]? {
            bytes.withUnsafeBufferPointer { inflater.inflate($0, length: length) }
        }
        #expect(fast(compressed, Self.text.count) == Self.text)
        #expect(fast(Array(compressed.dropLast(10)), Self.text.count) == nil)  // truncated
        #expect(fast(compressed + [1, 2, 3], Self.text.count) == nil)  // bytes after the stream
        #expect(fast(compressed, Self.text.count - 1) == nil)  // inflates to more than declared
        #expect(fast(compressed, Self.text.count + 1) == nil)  // to less
        var corrupt = compressed
        corrupt[corrupt.count / 2] ^= 0xFF
        if let inflated = fast(corrupt, Self.text.count) {
            #expect(inflated != Self.text)  // a flipped byte may still inflate, never to the same bytes
        }
        // The errors are zlib's, as before.
        let trailing = #expect(throws: Deflate.Failure.self) { try Deflate.decompress(compressed + [1, 2, 3], length: Self.text.count) }
        #expect(trailing?.message.contains("3 bytes follow") == true)
        let longer = #expect(throws: Deflate.Failure.self) { try Deflate.decompress(compressed, length: Self.text.count + 1) }
        #expect(longer?.message.contains("inflates to \(Self.text.count) bytes, not the \(Self.text.count + 1) declared") == true)
    }
}

import Deflate
import Testing

/// Inflating against a declared length: streamed, never allocating what the length claims, and
/// refusing a stream that would pass it, at the edges of the length's type.
struct DeflateTests {
    static let text = Array((0 ..< 200_000).map { UInt8(truncatingIfNeeded: $0 * 7 % 251) })

    @Test func roundTripAtEveryLengthEdge() throws {
        for length in [0, 1, 2, 65_535, 65_536, 65_537, 200_000] {
            let input = Array(Self.text.prefix(length))
            #expect(try Deflate.decompress(Deflate.compress(input, level: 1), length: length) == input)
        }
    }

    /// A declared length that does not fit zlib's 32-bit counters (the crash: `uInt(length + 1)`)
    /// or an Int at all is just a length the data does not reach.
    @Test(arguments: [Int(1) << 32 - 1, 1 << 32, 1 << 32 + 1, Int.max - 1, Int.max])
    func hugeDeclaredLengthsAreRefusedNotTrusted(_ length: Int) throws {
        let compressed = Deflate.compress(Array(Self.text.prefix(1000)), level: 1)
        let error = #expect(throws: Deflate.Failure.self) { try Deflate.decompress(compressed, length: length) }
        #expect(error?.message.contains("inflates to 1000 bytes, not the \(length) declared") == true, "\(String(describing: error))")
    }

    @Test func negativeAndShortLengths() throws {
        let compressed = Deflate.compress(Array(Self.text.prefix(1000)), level: 1)
        #expect(throws: Deflate.Failure.self) { try Deflate.decompress(compressed, length: -1) }
        #expect(throws: Deflate.Failure.self) { try Deflate.decompress(compressed, length: Int.min) }
        let short = #expect(throws: Deflate.Failure.self) { try Deflate.decompress(compressed, length: 999) }
        #expect(short?.message.contains("more than the 999 bytes declared") == true)
        let none = #expect(throws: Deflate.Failure.self) { try Deflate.decompress(compressed, length: 0) }
        #expect(none?.message.contains("more than the 0 bytes declared") == true)
    }

    /// A bomb (64 MiB of zeros in 64 KiB) declared as 1 MiB stops at the declared length, having
    /// inflated at most one step past it.
    @Test func aBombStopsAtTheDeclaredLength() throws {
        let bomb = Deflate.compress(Array(repeating: 0, count: 64 << 20), level: 9)
        #expect(bomb.count < 100_000)
        let error = #expect(throws: Deflate.Failure.self) { try Deflate.decompress(bomb, length: 1 << 20) }
        #expect(error?.message.contains("more than the 1048576 bytes declared") == true)
    }

    @Test func damagedStreams() throws {
        let compressed = Deflate.compress(Self.text, level: 9)
        let truncated = #expect(throws: Deflate.Failure.self) { try Deflate.decompress(compressed.dropLast(10), length: Self.text.count) }
        #expect(truncated?.message.contains("truncated") == true)
        let trailing = #expect(throws: Deflate.Failure.self) { try Deflate.decompress(compressed + [1, 2, 3], length: Self.text.count) }
        #expect(trailing?.message.contains("3 bytes follow") == true)
        #expect(throws: Deflate.Failure.self) { try Deflate.decompress([0xFF, 0xFF, 0xFF], length: 10) }
        #expect(throws: Deflate.Failure.self) { try Deflate.decompress([], length: 10) }
        // Not contiguous: read the same way.
        #expect(try Deflate.decompress(compressed.lazy.map { $0 }, length: Self.text.count) == Self.text)
    }
}

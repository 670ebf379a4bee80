import NotesCRDT
@testable import NotesSimulator
import Testing

/// The trace hash is defined as it always was (the hex of the SHA-256 of the SHA-256 of the
/// entries' bytes, by NotesCRDT's portable SHA-256), whatever computes it, so the hashes recorded
/// for every seed stay valid.
struct TraceTests {
    @Test func theHashIsTheDoubleSHA256OfTheEntriesBytes() {
        var trace = Trace()
        var expected: [UInt8] = []
        func le(_ value: UInt64) { for i in 0 ..< 8 { expected.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) } }
        for i in 0 ..< 2000 {  // past the 4 KiB the trace hashes at a time
            let values: [Int64] = [Int64(i), -Int64(i), Int64(i) * 7, .min]
            trace.add(UInt64(i) * 3, i % 5 - 1, .sync, values[0], values[1], values[2], values[3])
            le(UInt64(i) * 3)
            expected.append(UInt8(truncatingIfNeeded: i % 5 - 1))
            expected.append(Trace.Kind.sync.rawValue)
            for value in values { le(UInt64(bitPattern: value)) }
        }
        trace.addDigest(0, "abc")
        expected.append(0)
        expected += Array("abc".utf8)
        #expect(trace.hash() == SHA256.hex(SHA256.digest(expected)))
        #expect(trace.hash() == trace.hash())
    }
}

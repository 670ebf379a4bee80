import NotesCRDT
import PropertyBased
import Testing

struct BinaryWriterTests {
    static let knownVarints: [(UInt64, [UInt8])] = [
        (0, [0x00]),
        (1, [0x01]),
        (127, [0x7F]),
        (128, [0x80, 0x01]),
        (300, [0xAC, 0x02]),
        (16_383, [0xFF, 0x7F]),
        (16_384, [0x80, 0x80, 0x01]),
        (UInt64.max, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]),
    ]

    @Test(arguments: knownVarints)
    func varintEncoding(_ value: UInt64, _ bytes: [UInt8]) throws {
        var writer = BinaryWriter()
        writer.varint(value)
        #expect(writer.bytes == bytes)
        var reader = BinaryReader(bytes)
        #expect(try reader.varint() == value)
        #expect(reader.isAtEnd)
    }

    @Test func varintRoundTrip() async throws {
        await propertyCheck(count: 300, input: Gen.uint64().array(of: 0 ... 20), Gen.int64().array(of: 0 ... 20)) { unsigned, signed in
            await reportingErrors("unsigned \(unsigned), signed \(signed)") {
                var writer = BinaryWriter()
                for v in unsigned { writer.varint(v) }
                for v in signed { writer.signedVarint(v) }
                var reader = BinaryReader(writer.bytes)
                for v in unsigned {
                    let read = try reader.varint()
                    #expect(read == v)
                }
                for v in signed {
                    let read = try reader.signedVarint()
                    #expect(read == v)
                }
                #expect(reader.isAtEnd)
            }
        }
    }

    @Test func extremesRoundTrip() throws {
        var writer = BinaryWriter()
        writer.varint(.max)
        writer.signedVarint(.min)
        writer.signedVarint(.max)
        writer.signedVarint(-1)
        writer.uint32(.max)
        writer.uint64(0x0102_0304_0506_0708)
        writer.string("héllo 日本 😀")
        writer.byte(0xEE)
        writer.raw([1, 2, 3])
        #expect(Array(writer.bytes[writer.bytes.count - 4 ..< writer.bytes.count]) == [0xEE, 1, 2, 3])
        var reader = BinaryReader(writer.bytes)
        #expect(try reader.varint() == .max)
        #expect(try reader.signedVarint() == .min)
        #expect(try reader.signedVarint() == .max)
        #expect(try reader.signedVarint() == -1)
        #expect(try reader.uint32() == .max)
        #expect(try reader.uint64() == 0x0102_0304_0506_0708)
        #expect(try reader.string() == "héllo 日本 😀")
        #expect(try reader.byte() == 0xEE)
        #expect(Array(try reader.raw(3)) == [1, 2, 3])
        #expect(reader.remaining == 0)
    }

    @Test func smallSignedValuesAreShort() {
        var writer = BinaryWriter()
        writer.signedVarint(-1)
        writer.signedVarint(1)
        #expect(writer.bytes == [0x01, 0x02])
    }

    /// Every proper prefix of an encoding is truncated and must throw, never crash.
    @Test func truncatedInputThrows() {
        var writer = BinaryWriter()
        writer.varint(.max)
        let varintBytes = writer.bytes
        for n in 0 ..< varintBytes.count {
            var reader = BinaryReader(Array(varintBytes.prefix(n)))
            #expect(throws: CRDTError.self) { try reader.varint() }
        }
        var r = BinaryReader([])
        #expect(throws: CRDTError.self) { try r.byte() }
        #expect(throws: CRDTError.self) { try r.uint32() }
        r = BinaryReader([1, 2, 3, 4, 5, 6, 7])
        #expect(throws: CRDTError.self) { try r.uint64() }
        r = BinaryReader([1, 2])
        #expect(throws: CRDTError.self) { try r.raw(3) }
        #expect(throws: CRDTError.self) { try r.raw(-1) }
        // A string whose length runs past the end.
        r = BinaryReader([5, 0x61, 0x62])
        #expect(throws: CRDTError.self) { try r.string() }
    }

    @Test func overlongAndOverflowingVarintsThrow() {
        // 2^64 does not fit.
        var reader = BinaryReader([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02])
        #expect(throws: CRDTError.self) { try reader.varint() }
        // Eleven bytes is too long whatever they hold.
        reader = BinaryReader([UInt8](repeating: 0x80, count: 10) + [0x00])
        #expect(throws: CRDTError.self) { try reader.varint() }
    }

    @Test func invalidUTF8StringThrows() {
        var reader = BinaryReader([2, 0xC3, 0x28])
        let error = #expect(throws: CRDTError.self) { try reader.string() }
        #expect(error?.code == .malformedEncoding)
    }

    @Test func countRejectsValuesAboveTheLimit() throws {
        var reader = BinaryReader([10, 3])
        #expect(throws: CRDTError.self) { try reader.count(max: 9, "a count") }
        #expect(try reader.count(max: 3, "a count") == 3)
    }
}

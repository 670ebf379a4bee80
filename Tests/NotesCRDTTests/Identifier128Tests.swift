import NotesCRDT
import PropertyBased
import Testing

struct Identifier128Tests {
    @Test func hexIsThirtyTwoLowercaseDigitsMostSignificantFirst() {
        let id = Identifier128(high: 0x0123_4567_89AB_CDEF, low: 0xFEDC_BA98_7654_3210)
        #expect(id.hex == "0123456789abcdeffedcba9876543210")
        #expect(id.bytes == [0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF, 0xFE, 0xDC, 0xBA, 0x98, 0x76, 0x54, 0x32, 0x10])
        #expect(Identifier128(high: 0, low: 1).hex == "00000000000000000000000000000001")
    }

    @Test func parsesUppercaseAndMixedCaseHex() {
        let lower = Identifier128(hex: "0123456789abcdeffedcba9876543210")
        #expect(lower == Identifier128(high: 0x0123_4567_89AB_CDEF, low: 0xFEDC_BA98_7654_3210))
        #expect(Identifier128(hex: "0123456789ABCDEFfedcba9876543210") == lower)
    }

    @Test(arguments: [
        "",
        "0123456789abcdeffedcba987654321",  // 31 digits
        "0123456789abcdeffedcba98765432100",  // 33 digits
        "0123456789abcdefgedcba9876543210",  // g
        "0123456789abcdef fedcba987654321",  // space
        "0x23456789abcdeffedcba9876543210",
        "0123456789abcdeffedcba987654321é",  // 32 characters but 33 bytes
        "-123456789abcdeffedcba9876543210",
    ])
    func rejectsInvalidHex(_ text: String) {
        #expect(Identifier128(hex: text) == nil)
        #expect(ReplicaID(hex: text) == nil)
        #expect(NoteID(hex: text) == nil)
    }

    @Test func rejectsWrongByteCounts() {
        #expect(Identifier128(bytes: [UInt8](repeating: 1, count: 15)) == nil)
        #expect(Identifier128(bytes: [UInt8](repeating: 1, count: 17)) == nil)
        #expect(Identifier128(bytes: [UInt8]()) == nil)
    }

    @Test func hexAndBytesRoundTrip() async {
        await propertyCheck(count: 200, input: Gen.uint64(), Gen.uint64()) { high, low in
            let id = Identifier128(high: high, low: low)
            #expect(Identifier128(hex: id.hex) == id)
            #expect(Identifier128(hex: id.hex.uppercased()) == id)
            #expect(Identifier128(bytes: id.bytes) == id)
            #expect(id.bytes.count == 16)
            #expect(ReplicaID(hex: ReplicaID(id).description) == ReplicaID(id))
            #expect(NoteID(hex: NoteID(id).description) == NoteID(id))
        }
    }

    @Test func orderIsHighThenLow() {
        #expect(Identifier128(high: 0, low: .max) < Identifier128(high: 1, low: 0))
        #expect(Identifier128(high: 1, low: 1) < Identifier128(high: 1, low: 2))
        #expect(!(Identifier128(high: 1, low: 2) < Identifier128(high: 1, low: 2)))
        #expect(replica(1) < replica(2))
    }

    @Test func seededRandomIdentifiersRepeat() {
        var a = SplitMix64(seed: 7)
        var b = SplitMix64(seed: 7)
        #expect(ReplicaID.random(using: &a) == ReplicaID.random(using: &b))
        #expect(NoteID.random(using: &a) == NoteID.random(using: &b))
        #expect(ReplicaID.random() != ReplicaID.random())
    }

    @Test func opIDOrdersByReplicaThenSeq() {
        #expect(OpID(replica: replica(1), seq: 9) < OpID(replica: replica(2), seq: 1))
        #expect(OpID(replica: replica(1), seq: 1) < OpID(replica: replica(1), seq: 2))
        #expect(OpIDRange(replica: replica(1), seq: 5, count: 3).endSeq == 8)
    }

    /// Identities hash with a keyed multiply-fold instead of SipHash. Identities chosen to share one
    /// half (as a careless or hostile peer could make them) still spread over a table's buckets.
    @Test func identitiesThatShareAHalfSpreadOverBuckets() {
        let seeds = [0, 1, Int.min, 0x1234_5678_9ABC_DEF0]
        let families: [[Identifier128]] = [
            (0 ..< 4096).map { Identifier128(high: 0, low: UInt64($0)) },
            (0 ..< 4096).map { Identifier128(high: UInt64($0), low: 0) },
            (0 ..< 4096).map { Identifier128(high: 0xD6E8_FEB8_6659_FD93, low: UInt64($0) << 32) },
        ]
        for seed in seeds {
            for family in families {
                // The low 12 bits pick one of 4,096 buckets: random placement fills about 63% of them.
                let buckets = Set(family.map { $0._rawHashValue(seed: seed) & 4095 })
                #expect(buckets.count > 2400, "seed \(seed): \(buckets.count) of 4096 buckets used")
            }
        }
        // Equal identities hash equally, through every wrapper.
        let id = Identifier128(high: 42, low: 7)
        #expect(id.hashValue == Identifier128(high: 42, low: 7).hashValue)
        #expect(NoteID(id).hashValue == NoteID(Identifier128(high: 42, low: 7)).hashValue)
        #expect(Set(families[0].map(ReplicaID.init)).count == 4096)
    }
}

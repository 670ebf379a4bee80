import NotesCRDT
import PropertyBased
import Testing

struct LWWRegisterTests {
    @Test func laterTimestampWins() {
        var r = LWWRegister(value: "a", timestamp: Timestamp(milliseconds: 10), writer: OpID(replica: replica(9), seq: 1))
        let tookB = r.set("b", timestamp: Timestamp(milliseconds: 11), writer: OpID(replica: replica(1), seq: 1))
        #expect(tookB)
        #expect(r.value == "b")
        let tookC = r.set("c", timestamp: Timestamp(milliseconds: 10), writer: OpID(replica: replica(9), seq: 2))
        #expect(!tookC)
        #expect(r.value == "b")
        #expect(r.timestamp == Timestamp(milliseconds: 11))
        #expect(r.writer == OpID(replica: replica(1), seq: 1))
    }

    @Test func tiesAreBrokenByTheGreaterReplica() {
        let t = Timestamp(milliseconds: 10)
        let low = LWWRegister(value: "low", timestamp: t, writer: OpID(replica: replica(1), seq: 5))
        let high = LWWRegister(value: "high", timestamp: t, writer: OpID(replica: replica(2), seq: 1))
        #expect(low.merging(high).value == "high")
        #expect(high.merging(low).value == "high")
        #expect(low.isSuperseded(by: t, writer: OpID(replica: replica(2), seq: 1)))
        #expect(!high.isSuperseded(by: t, writer: OpID(replica: replica(1), seq: 99)))
        // The same write again does not supersede itself.
        #expect(!high.isSuperseded(by: t, writer: OpID(replica: replica(2), seq: 1)))
    }

    static let registers = zip(Gen.uint64(in: 0 ... 3), Gen.uint64(in: 1 ... 3), Gen.uint64(in: 1 ... 3)).map { (t: UInt64, r: UInt64, s: UInt64) in
        // The value is a function of the write's identity, as it is in a real log.
        LWWRegister(value: "\(t)-\(r)-\(s)", timestamp: Timestamp(milliseconds: t), writer: OpID(replica: replica(r), seq: s))
    }

    @Test func mergeIsCommutativeAssociativeAndIdempotent() async {
        await propertyCheck(count: 300, input: Self.registers, Self.registers, Self.registers) { x, y, z in
            #expect(x.merging(y) == y.merging(x))
            #expect(x.merging(y).merging(z) == x.merging(y.merging(z)))
            #expect(x.merging(x) == x)
            #expect(x.merging(y).merging(y) == x.merging(y))
            // The winner is the greatest (timestamp, replica, seq).
            let xWins = (x.timestamp, x.writer.replica, x.writer.seq) >= (y.timestamp, y.writer.replica, y.writer.seq)
            #expect(x.merging(y) == (xWins ? x : y))
        }
    }
}

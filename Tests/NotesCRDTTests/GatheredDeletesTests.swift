@testable import NotesCRDT
import Testing

/// Gathered deletes (`GatheredDeletes`): each operation taken holds its runs at their length.
struct GatheredDeletesTests {
    static let note = NoteID(Identifier128(high: 0xABCD, low: 1))
    static let replica = ReplicaID(Identifier128(high: 0xEF, low: 2))

    /// Gathers deletes of every other seq from `from` on (none join into a run with another).
    static func gather(_ count: Int, from: UInt64, into gathered: inout GatheredDeletes) {
        for i in 0 ..< count {
            gathered.add(OpIDRange(replica: replica, seq: from + UInt64(2 * i), count: 1), in: note)
        }
    }

    @Test func takenRunsDoNotKeepTheGatheringsCapacity() throws {
        var gathered = GatheredDeletes()
        Self.gather(500, from: 1, into: &gathered)
        guard case .deleteEach(_, let large)? = gathered.take() else { Issue.record("not a deleteEach"); return }
        #expect(large.count == 500)
        Self.gather(2, from: 5000, into: &gathered)
        guard case .deleteEach(_, let small)? = gathered.take() else { Issue.record("not a deleteEach"); return }
        #expect(small.count == 2)
        // A history decodes thousands of such operations, each kept in the log: sharing the
        // gathering's buffer gave each one the capacity of the largest gathered before it.
        #expect(small.capacity < 16, "a small operation holds \(small.capacity) runs of room")
        #expect(large.capacity < 600)
        #expect(large.map(\.range.seq) == (0 ..< 500).map { 1 + 2 * UInt64($0) })
    }
}

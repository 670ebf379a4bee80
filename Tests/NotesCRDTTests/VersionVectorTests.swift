import NotesCRDT
import PropertyBased
import Testing

struct VersionVectorTests {
    let a = replica(1), b = replica(2), c = replica(3)

    @Test func absentEntriesAreZeroAndZeroEntriesAreDropped() {
        var vv = VersionVector([a: 3, b: 0])
        #expect(vv[a] == 3)
        #expect(vv[b] == 0)
        #expect(vv.entries.count == 1)
        vv[a] = 0
        #expect(vv.isEmpty)
        #expect(vv == VersionVector())
    }

    @Test func containsCoversUpToTheEntry() {
        let vv = VersionVector([a: 3])
        #expect(vv.contains(OpID(replica: a, seq: 1)))
        #expect(vv.contains(OpID(replica: a, seq: 3)))
        #expect(!vv.contains(OpID(replica: a, seq: 4)))
        #expect(!vv.contains(OpID(replica: b, seq: 1)))
        #expect(VersionVector([a: 3, b: 4]).totalOperations == 7)
    }

    @Test func compare() {
        let base = VersionVector([a: 2, b: 1])
        #expect(base.compare(base) == .equal)
        #expect(base.compare(VersionVector([a: 2, b: 2])) == .before)
        #expect(base.compare(VersionVector([a: 2, b: 1, c: 1])) == .before)
        #expect(base.compare(VersionVector([a: 2])) == .after)
        #expect(base.compare(VersionVector([a: 3, b: 0])) == .concurrent)
        #expect(VersionVector().compare(VersionVector()) == .equal)
        #expect(VersionVector().compare(base) == .before)
        #expect(base.isCovered(by: VersionVector([a: 2, b: 5])))
        #expect(!base.isCovered(by: VersionVector([a: 5])))
    }

    @Test func mergeIsTheEntrywiseMaximum() {
        let x = VersionVector([a: 5, b: 1])
        let y = VersionVector([b: 4, c: 2])
        let merged = x.merging(y)
        #expect(merged == VersionVector([a: 5, b: 4, c: 2]))
        var z = x
        z.merge(y)
        #expect(z == merged)
    }

    @Test func missingListsExactlyWhatTheOtherSideHas() {
        let mine = VersionVector([a: 5, b: 2])
        let theirs = VersionVector([a: 3, b: 6, c: 2])
        #expect(mine.missing(from: theirs) == [
            OpIDRange(replica: b, seq: 3, count: 4),
            OpIDRange(replica: c, seq: 1, count: 2),
        ])
        #expect(theirs.missing(from: mine) == [OpIDRange(replica: a, seq: 4, count: 2)])
        #expect(mine.missing(from: mine).isEmpty)
        #expect(VersionVector().missing(from: VersionVector()).isEmpty)
    }

    /// Random vectors over four replicas.
    static let vectors = Gen.uint64(in: 0 ... 6).array(of: 4).map { seqs in
        VersionVector(Dictionary(uniqueKeysWithValues: seqs.enumerated().map { (replica(UInt64($0.offset + 1)), $0.element) }))
    }

    @Test func lawsOfMergeAndCompare() async {
        await propertyCheck(count: 200, input: Self.vectors, Self.vectors, Self.vectors) { x, y, z in
            #expect(x.merging(y) == y.merging(x))
            #expect(x.merging(y).merging(z) == x.merging(y.merging(z)))
            #expect(x.merging(x) == x)
            #expect(x.isCovered(by: x.merging(y)))
            // Filling in what is missing gives the merge.
            var filled = x
            for range in x.missing(from: y) {
                #expect(range.seq == x[range.replica] + 1)
                filled[range.replica] = range.endSeq - 1
            }
            #expect(filled == x.merging(y))
            // compare agrees with isCovered.
            switch x.compare(y) {
            case .equal: #expect(x == y)
            case .before: #expect(x.isCovered(by: y) && x != y)
            case .after: #expect(y.isCovered(by: x) && x != y)
            case .concurrent: #expect(!x.isCovered(by: y) && !y.isCovered(by: x))
            }
        }
    }
}

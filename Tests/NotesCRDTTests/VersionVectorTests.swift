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

    /// Past eight entries a merge walks both vectors at once: the same entry-wise maximum as a
    /// dictionary gives, whichever side is larger and however they overlap.
    @Test func aMergeOfLargeVectorsIsTheEntrywiseMaximum() {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        let pool = (0 ..< 60).map { ReplicaID(Identifier128(high: next(), low: UInt64($0))) }
        for _ in 0 ..< 200 {
            var left: [ReplicaID: UInt64] = [:]
            var right: [ReplicaID: UInt64] = [:]
            for replica in pool {
                if next() % 3 == 0 { left[replica] = next() % 5 }
                if next() % 2 == 0 { right[replica] = next() % 5 }
            }
            var merged = VersionVector(left)
            merged.merge(VersionVector(right))
            let expected = left.merging(right, uniquingKeysWith: max)
            #expect(merged == VersionVector(expected))
            #expect(merged.entries == expected.filter { $0.value > 0 })
        }
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

    /// Sums over entries heard from elsewhere saturate instead of trapping: `status` read a
    /// stored vector of 2^64 - 1 and 2^63 and crashed at every run.
    @Test func sumsAtTheEdgesSaturate() {
        let (a, b, c) = (replica(1), replica(2), replica(3))
        #expect(VersionVector().totalOperations == 0)
        #expect(VersionVector([a: 1]).totalOperations == 1)
        #expect(VersionVector([a: .max - 1]).totalOperations == UInt64.max - 1)
        #expect(VersionVector([a: .max]).totalOperations == .max)
        #expect(VersionVector([a: Change.maxSeq, b: Change.maxSeq]).totalOperations == 2 * Change.maxSeq)
        #expect(VersionVector([a: .max, b: 1 << 63]).totalOperations == .max)
        #expect(VersionVector([a: .max, b: .max, c: .max]).totalOperations == .max)
        #expect(VersionVector([a: .max - 1, b: 1]).totalOperations == .max)
        // What one vector has that another lacks.
        #expect(VersionVector([a: 5]).operationsMissing(from: VersionVector([a: 3])) == 2)
        #expect(VersionVector([a: 3]).operationsMissing(from: VersionVector([a: 5])) == 0)
        #expect(VersionVector([a: .max, b: .max]).operationsMissing(from: VersionVector()) == .max)
        #expect(VersionVector([a: .max, b: .max]).operationsMissing(from: VersionVector([a: .max - 1, b: .max])) == 1)
        #expect(VersionVector([a: .max]).operationsMissing(from: VersionVector([a: 0])) == .max)
    }

    /// The reader takes entries in increasing order of replica only (so that reading is linear),
    /// and no seq past what it is told.
    @Test func readingAVectorChecksOrderAndSeqs() throws {
        func bytes(_ entries: [(UInt64, UInt64)]) -> [UInt8] {
            var writer = BinaryWriter()
            writer.varint(UInt64(entries.count))
            for (r, seq) in entries {
                writer.raw(replica(r).raw.bytes)
                writer.varint(seq)
            }
            return writer.bytes
        }
        func read(_ entries: [(UInt64, UInt64)], maxSeq: UInt64 = .max) throws -> VersionVector {
            var reader = BinaryReader(bytes(entries))
            return try reader.versionVector(maxSeq: maxSeq)
        }
        #expect(try read([(1, 5), (2, .max)]) == VersionVector([replica(1): 5, replica(2): .max]))
        #expect(try read([(1, 0), (2, 1)]) == VersionVector([replica(2): 1]))
        #expect(try read([(1, Change.maxSeq)], maxSeq: Change.maxSeq)[replica(1)] == Change.maxSeq)
        #expect(throws: CRDTError.self) { try read([(1, Change.maxSeq + 1)], maxSeq: Change.maxSeq) }
        #expect(throws: CRDTError.self) { try read([(2, 1), (1, 1)]) }
        #expect(throws: CRDTError.self) { try read([(1, 1), (1, 2)]) }
        var tooMany = BinaryReader(bytes([(1, 1), (2, 1), (3, 1)]))
        #expect(throws: CRDTError.self) { try tooMany.versionVector(maxEntries: 2) }
        var lying = BinaryReader([0xFF, 0xFF, 0xFF, 0xFF, 0x0F])
        #expect(throws: CRDTError.self) { try lying.versionVector() }
    }
}

import BundleFuzz
import NotesCRDT
import Testing

/// The decoder at the edges of every value it reads: sequence numbers, counts, lengths, runs,
/// dependencies, timestamps, varint widths, and the per-bundle limits (`ChangeCodec.Limits`).
/// Each class is tried at 0, 1, max - 1, max, max + 1 and the top of its 64-bit type.
struct ChangeCodecLimitsTests {
    static let a = ReplicaID(Identifier128(high: 0, low: 1))
    static let b = ReplicaID(Identifier128(high: 0, low: 2))
    static let n = NoteID(Identifier128(high: 0xABCD, low: 1))
    static let maxSeq = Change.maxSeq
    static let time = Timestamp(milliseconds: 1_700_000_000_000).rawValue

    /// One change by `a` from `start` of `records`.
    static func encoding(start: UInt64, timestamp: UInt64 = time, dependencies: [RawDependency] = [],
                         _ records: [RawRecord]) -> RawChangeEncoding {
        var e = RawChangeEncoding()
        e.replicas = [a, b]
        e.notes = [n]
        e.headers = [RawHeader(author: 0, startSeq: start, timestamp: timestamp, dependencies: dependencies,
                               operationCount: UInt64(records.count))]
        e.records = records
        return e
    }

    static func insert(_ count: Int, origin: RawReference? = nil) -> RawRecord {
        .insert(note: 0, mode: origin == nil ? 0 : 1, origin: origin, length: UInt64(count), text: Array(repeating: 0x61, count: count))
    }

    static func decode(_ e: RawChangeEncoding, limits: ChangeCodec.Limits = .unlimited) throws -> [Change] {
        try ChangeCodec.decode(e.bytes(), limits: limits)
    }

    /// Expects a decoding error of `code` whose message contains `words`.
    static func expectError(_ e: RawChangeEncoding, limits: ChangeCodec.Limits = .unlimited, code: CRDTError.Code = .malformedEncoding,
                            _ words: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let error = #expect(throws: CRDTError.self, sourceLocation: sourceLocation) { try decode(e, limits: limits) }
        #expect(error?.code == code, "\(String(describing: error))", sourceLocation: sourceLocation)
        #expect(error?.message.contains(words) == true, "\(String(describing: error))", sourceLocation: sourceLocation)
    }

    // MARK: Sequence numbers

    /// An insert's seqs end at most at 2^53 - 1: the predictor's `seq + count - 1` that crashed
    /// at 2^64 - 1 is never reached with a seq past it.
    @Test func anInsertsSeqsAtTheEdges() throws {
        Self.expectError(Self.encoding(start: 0, [Self.insert(1)]), "outside 1 ... 2^53 - 1")
        #expect(try Self.decode(Self.encoding(start: 1, [Self.insert(1)]))[0].endSeq == 1)
        #expect(try Self.decode(Self.encoding(start: Self.maxSeq - 1, [Self.insert(2)]))[0].endSeq == Self.maxSeq)
        #expect(try Self.decode(Self.encoding(start: Self.maxSeq, [Self.insert(1)]))[0].endSeq == Self.maxSeq)
        Self.expectError(Self.encoding(start: Self.maxSeq, [Self.insert(2)]), "passes seq 2^53 - 1")
        Self.expectError(Self.encoding(start: Self.maxSeq + 1, [Self.insert(1)]), "outside 1 ... 2^53 - 1")
        Self.expectError(Self.encoding(start: .max - 1, [Self.insert(1)]), "outside 1 ... 2^53 - 1")
        Self.expectError(Self.encoding(start: .max, [Self.insert(1)]), "outside 1 ... 2^53 - 1")
        // An operation after the last seq.
        Self.expectError(Self.encoding(start: Self.maxSeq, [Self.insert(1), .setTagField(tag: [0x74], field: 0, value: [0])]),
                         "passes seq 2^53 - 1")
    }

    /// An origin or a delete target written as `opSeq - seq` may wrap to any seq: those outside
    /// 1 ... 2^53 - 1 are refused.
    @Test(arguments: [(Int64(1), true), (Int64(0), true), (Int64(10), true), (Int64(11), false), (Int64(-1), true),
                      (.max, false), (.min, false), (-Int64(Change.maxSeq) + 10, false), (-Int64(Change.maxSeq) + 11, true)])
    func referencesAtTheEdges(delta: Int64, accepted: Bool) throws {
        // From seq 11 (so a delta of 10 names seq 1, and -(2^53 - 1) + 11 names 2^53 - 1; 0 names
        // the operation itself, which only applying can tell is not there).
        let origin = Self.encoding(start: 11, [Self.insert(1, origin: RawReference(replica: 1, delta: delta))])
        let target = Self.encoding(start: 11, [.deleteExplicit(note: 0, targets: [RawTarget(RawReference(replica: 1, delta: delta), count: 1)], targetCount: nil)])
        let run = Self.encoding(start: 11, [.run(note: 0, shape: 1, mode: 0, first: RawReference(replica: 1, delta: delta))])
        for e in [origin, target] {
            if accepted { #expect(throws: Never.self) { try Self.decode(e) } } else { Self.expectError(e, "outside 1 ... 2^53 - 1") }
        }
        // A forward run of 2 from the same seq also needs the seq after it.
        let firstSeq = UInt64(bitPattern: 11 &- delta)
        if accepted, firstSeq + 1 <= Self.maxSeq {
            #expect(throws: Never.self) { try Self.decode(run) }
        } else {
            #expect(throws: CRDTError.self) { try Self.decode(run) }
        }
    }

    /// A delete target's count: at least 1, and its range within 1 ... 2^53 - 1; two of the
    /// largest in one change add up without overflow.
    @Test func deleteCountsAtTheEdges() throws {
        func delete(_ counts: [UInt64], from seq: UInt64 = 1) -> RawChangeEncoding {
            Self.encoding(start: 1, [.deleteExplicit(note: 0, targets: counts.map { RawTarget(RawReference(replica: 1, delta: 1 - Int64(bitPattern: seq)), count: $0) },
                                                     targetCount: nil)])
        }
        Self.expectError(delete([0]), "is empty or passes 2^53 - 1")
        #expect(try Self.decode(delete([1]))[0].operations == [.deleteText(note: Self.n, targets: [OpIDRange(replica: Self.b, seq: 1, count: 1)])])
        #expect(throws: Never.self) { try Self.decode(delete([Self.maxSeq - 1])) }
        #expect(throws: Never.self) { try Self.decode(delete([Self.maxSeq])) }
        Self.expectError(delete([Self.maxSeq + 1]), "is empty or passes 2^53 - 1")
        Self.expectError(delete([.max]), "is empty or passes 2^53 - 1")
        Self.expectError(delete([2], from: Self.maxSeq), "is empty or passes 2^53 - 1")
        #expect(throws: Never.self) { try Self.decode(delete([1], from: Self.maxSeq)) }
        // The sum of two maxes: fine without a limit, over the bundle's span limit with one.
        #expect(try Self.decode(delete([Self.maxSeq, Self.maxSeq]))[0].operations.count == 1)
        Self.expectError(delete([Self.maxSeq, Self.maxSeq]), limits: .bundle, code: .limitExceeded, "more than 16777216 characters")
    }

    /// Runs of deletes: 2 to 2^31 - 1 deletes, never past seq 1 or 2^53 - 1, decoded as one
    /// range whatever their length (one step per delete took minutes at 2^31 - 1).
    @Test func runsAtTheEdges() throws {
        func run(_ count: UInt64, forward: Bool, from seq: UInt64) -> RawChangeEncoding {
            Self.encoding(start: 1, [.run(note: 0, shape: (count &- 2) << 1 | (forward ? 1 : 0), mode: 0,
                                          first: RawReference(replica: 1, delta: 1 - Int64(bitPattern: seq)))])
        }
        let longest = DeleteRun.maxLength
        #expect(longest == 1 << 31 - 1)
        let two = try Self.decode(run(2, forward: false, from: 2))[0]
        #expect(two.operations == [.deleteEach(note: Self.n, runs: [DeleteRun(range: OpIDRange(replica: Self.b, seq: 1, count: 2), order: .backward)])])
        for forward in [false, true] {
            let from = forward ? 1 : longest
            let change = try Self.decode(run(longest, forward: forward, from: from))[0]
            #expect(change.seqCount == longest)
            #expect(change.operations == [.deleteEach(note: Self.n, runs: [DeleteRun(range: OpIDRange(replica: Self.b, seq: 1, count: longest),
                                                                                      order: forward ? .forward : .backward)])])
            Self.expectError(run(longest + 1, forward: forward, from: forward ? 1 : longest + 1), "longer than a run can be")
            Self.expectError(run(.max, forward: forward, from: 1), "longer than a run can be")
        }
        // Backwards from seq n reaches seq 1; from n - 1 it would pass it.
        #expect(throws: Never.self) { try Self.decode(run(5, forward: false, from: 5)) }
        Self.expectError(run(5, forward: false, from: 4), "goes outside 1 ... 2^53 - 1")
        // Forwards to 2^53 - 1 exactly, and one past.
        #expect(throws: Never.self) { try Self.decode(run(5, forward: true, from: Self.maxSeq - 4)) }
        Self.expectError(run(5, forward: true, from: Self.maxSeq - 3), "goes outside 1 ... 2^53 - 1")
        // A run's deletes are the change's seqs: a long one at the end of the seqs passes 2^53 - 1.
        func late(_ start: UInt64) -> RawChangeEncoding {
            // Backwards from seq `longest` of the other replica.
            Self.encoding(start: start, [.run(note: 0, shape: (longest - 2) << 1, mode: 0,
                                              first: RawReference(replica: 1, delta: Int64(bitPattern: start &- longest)))])
        }
        Self.expectError(late(Self.maxSeq - longest + 2), "passes seq 2^53 - 1")
        #expect(try Self.decode(late(Self.maxSeq - longest + 1))[0].endSeq == Self.maxSeq)
    }

    // MARK: Dependencies and timestamps

    @Test func dependenciesAtTheEdges() throws {
        let set: RawRecord = .setTagField(tag: [0x74], field: 0, value: [0])
        for seq in [0, 1, Self.maxSeq - 1, Self.maxSeq] {
            let change = try Self.decode(Self.encoding(start: 1, dependencies: [RawDependency(replica: 1, seq: seq)], [set]))[0]
            #expect(change.dependencies[Self.b] == seq)
        }
        for seq in [Self.maxSeq + 1, 1 << 63, .max] {
            Self.expectError(Self.encoding(start: 1, dependencies: [RawDependency(replica: 1, seq: seq)], [set]), "past 2^53 - 1")
        }
        // Out of order (by replica) or repeated: refused, so that building the vector is linear.
        var e = Self.encoding(start: 1, [set])
        e.replicas = [Self.a, Self.b, ReplicaID(Identifier128(high: 0, low: 3))]
        e.headers[0].dependencies = [RawDependency(replica: 2, seq: 1), RawDependency(replica: 1, seq: 1)]
        Self.expectError(e, "not in increasing order")
        e.headers[0].dependencies = [RawDependency(replica: 1, seq: 1), RawDependency(replica: 1, seq: 2)]
        Self.expectError(e, "not in increasing order")
        e.headers[0].dependencies = [RawDependency(replica: 1, seq: 1), RawDependency(replica: 2, seq: 2)]
        #expect(try Self.decode(e)[0].dependencies.count == 2)
        // A count larger than the replica table.
        e.headers[0].dependencyCount = 4
        Self.expectError(e, "a dependency count")
    }

    /// The timestamps of a change's operations run from its timestamp, one per seq: they must
    /// not pass 2^64 - 1.
    @Test func timestampsAtTheEdges() throws {
        #expect(try Self.decode(Self.encoding(start: 1, timestamp: 0, [Self.insert(3)]))[0].timestamp == .zero)
        #expect(try Self.decode(Self.encoding(start: 1, timestamp: .max, [Self.insert(1)]))[0].timestamp.rawValue == .max)
        #expect(try Self.decode(Self.encoding(start: 1, timestamp: .max - 2, [Self.insert(3)]))[0].timestamp.rawValue == .max - 2)
        Self.expectError(Self.encoding(start: 1, timestamp: .max - 1, [Self.insert(3)]), "pass 2^64 - 1")
        Self.expectError(Self.encoding(start: 1, timestamp: .max, [Self.insert(2)]), "pass 2^64 - 1")
    }

    // MARK: Counts and lengths

    /// Counts that lie (more than the bytes hold) and varints padded to their longest form.
    @Test func countsAndVarintWidths() throws {
        var e = Self.encoding(start: 1, [Self.insert(2)])
        e.width = .padded(10)
        #expect(try Self.decode(e)[0].seqCount == 2)  // 10 bytes is a valid (if wasteful) varint
        e.width = .padded(11)
        Self.expectError(e, "a varint overflows 64 bits")
        for field in 0 ..< 3 {
            var lying = Self.encoding(start: 1, [Self.insert(2)])
            switch field {
            case 0: lying.replicaCount = .max
            case 1: lying.noteCount = 1 << 32
            default: lying.headerCount = 1 << 40
            }
            #expect(throws: CRDTError.self) { try Self.decode(lying) }
        }
        var ops = Self.encoding(start: 1, [Self.insert(2)])
        ops.headers[0].operationCount = .max
        Self.expectError(ops, "an operation count")
        ops.headers[0].operationCount = 0
        Self.expectError(ops, "has no operations")
        var length = Self.encoding(start: 1, [.insert(note: 0, mode: 0, origin: nil, length: .max, text: [0x61])])
        Self.expectError(length, "an insert's length")
        length.records = [.insert(note: 0, mode: 0, origin: nil, length: 0, text: [])]
        Self.expectError(length, "an insert of no characters")
        var notes = Self.encoding(start: 1, [Self.insert(1)])
        notes.noteRuns = [(.max, 0)]
        #expect(throws: Never.self) { try Self.decode(notes) }  // a run longer than the operations is not read past them
        notes.noteRuns = [(0, 0)]
        Self.expectError(notes, "a run of length zero")
        notes.noteRuns = [(1, .max)]
        Self.expectError(notes, "out of range")
    }

    /// Each limit at its value is taken, one more is refused as `.limitExceeded`.
    @Test func eachLimitIsExact() throws {
        let one = ChangeCodec.Limits(maxReplicas: 2, maxNotes: 1, maxChanges: 2, maxDependencies: 1, maxOperations: 3,
                                     maxScalars: 4, maxDeleteSpan: 5)
        func limits(_ change: (inout ChangeCodec.Limits) -> Void) -> ChangeCodec.Limits {
            var l = one
            change(&l)
            return l
        }
        let set: RawRecord = .setTagField(tag: [0x74], field: 0, value: [0])
        // Two changes (one dependency), three records and one more delete target (4 "operations"),
        // four characters, and deletes that name five.
        var e = Self.encoding(start: 1, dependencies: [RawDependency(replica: 1, seq: 1)], [Self.insert(4), set])
        e.headers.append(RawHeader(author: 0, startSeq: 6, timestamp: Self.time + 6, operationCount: 1))
        e.records.append(.deleteExplicit(note: 0, targets: [RawTarget(RawReference(replica: 0, delta: 5), count: 4),
                                                            RawTarget(RawReference(replica: 0, delta: 5), count: 1)], targetCount: nil))
        #expect(throws: Never.self) { try Self.decode(e, limits: limits { $0.maxOperations = 4 }) }
        Self.expectError(e, limits: limits { $0.maxOperations = 3 }, code: .limitExceeded, "operations and delete targets")
        Self.expectError(e, limits: limits { $0.maxOperations = 4; $0.maxReplicas = 1 }, code: .limitExceeded, "more than 1 replicas")
        Self.expectError(e, limits: limits { $0.maxOperations = 4; $0.maxNotes = 0 }, code: .limitExceeded, "more than 0 notes")
        Self.expectError(e, limits: limits { $0.maxOperations = 4; $0.maxChanges = 1 }, code: .limitExceeded, "more than 1 changes")
        Self.expectError(e, limits: limits { $0.maxOperations = 4; $0.maxDependencies = 0 }, code: .limitExceeded, "dependencies")
        Self.expectError(e, limits: limits { $0.maxOperations = 2 }, code: .limitExceeded, "more than 2 operations")
        Self.expectError(e, limits: limits { $0.maxOperations = 4; $0.maxScalars = 3 }, code: .limitExceeded, "more than 3 characters")
        Self.expectError(e, limits: limits { $0.maxOperations = 4; $0.maxDeleteSpan = 4 }, code: .limitExceeded, "more than 4 characters")
    }

    /// The limits of a bundle, as Docs/BundleFormat.md gives them.
    @Test func theBundleLimits() {
        let limits = ChangeCodec.Limits.bundle
        #expect(limits.maxReplicas == 65_536)
        #expect(limits.maxNotes == 65_536)
        #expect(limits.maxChanges == 32_768)
        #expect(limits.maxDependencies == 1_048_576)
        #expect(limits.maxOperations == 262_144)
        #expect(limits.maxScalars == 4_194_304)
        #expect(limits.maxDeleteSpan == 16_777_216)
        #expect(Change.maxSeq == 9_007_199_254_740_991)
    }
}

import NotesCRDT
import Testing

/// `Operation.deleteEach`: consecutive deletes of one target each, held as one value of runs.
struct DeleteRunTests {
    static let a = replica(1)
    static let n = noteID(1)

    static func target(_ seq: UInt64, _ count: UInt64 = 1) -> OpIDRange { OpIDRange(replica: a, seq: seq, count: count) }

    /// A change that types "abcdef" (seqs 1-6), then backspaces f, e, d and deletes "ab" as one range.
    static func typedThenDeleted(splitDeletes: Bool) -> Change {
        var ops: [Operation] = [.insertText(note: n, origin: nil, text: InsertedText("abcdef"))]
        let deletes = [target(6), target(5), target(4), target(1, 2)]
        if splitDeletes {
            ops += deletes.map { .deleteText(note: n, targets: [$0]) }
        } else {
            ops.append(.deleteEach(note: n, runs: [
                DeleteRun(range: target(4, 3), order: .backward),  // f, e, d
                DeleteRun(target(1, 2)),  // "ab" at once
            ]))
        }
        return Change(replica: a, startSeq: 1, timestamp: Timestamp(milliseconds: baseTime), dependencies: VersionVector(), operations: ops)
    }

    @Test func consecutiveSingleDeletesJoinAndKeepOneSeqEach() {
        let split = Self.typedThenDeleted(splitDeletes: true)
        let joined = Self.typedThenDeleted(splitDeletes: false)
        #expect(split == joined, "a change joins its deletes, so both spellings are one value")
        #expect(split.operations.count == 2)
        #expect(split.seqCount == 10, "six characters and four deletes")
        guard case .deleteEach(_, let runs) = split.operations[1] else {
            Issue.record("expected a deleteEach, got \(split.operations[1])")
            return
        }
        #expect(runs.count == 2, "the three backspaces are one run")
        #expect(runs.flatMap(\.targets) == [Self.target(6), Self.target(5), Self.target(4), Self.target(1, 2)])
    }

    @Test func aDeleteOfSeveralRangesStaysOneOperation() {
        let change = Change(replica: Self.a, startSeq: 1, timestamp: .zero, dependencies: VersionVector(), operations: [
            .insertText(note: Self.n, origin: nil, text: InsertedText("abcdef")),
            .deleteText(note: Self.n, targets: [Self.target(6)]),
            .deleteText(note: Self.n, targets: [Self.target(1), Self.target(3)]),  // one delete, one seq
            .deleteText(note: Self.n, targets: [Self.target(2)]),
            .deleteText(note: noteID(2), targets: [Self.target(4)]),  // another note: not joined
        ])
        #expect(change.operations.count == 5)
        #expect(change.seqCount == 10)
    }

    /// The header fields of the first change of an encoding with one replica and one note, up to
    /// its record count.
    static func recordCount(_ bytes: [UInt8]) throws -> UInt64 {
        var reader = BinaryReader(bytes)
        _ = try reader.count(max: 1, "replicas"); _ = try reader.raw(16)
        _ = try reader.count(max: 1, "notes"); _ = try reader.raw(16)
        _ = try reader.count(max: 1, "changes")
        _ = try reader.varint(); _ = try reader.varint(); _ = try reader.varint(); _ = try reader.varint()
        return try reader.varint()
    }

    @Test func aRunOfDeletesIsOneRecordOnTheWire() throws {
        let joined = Self.typedThenDeleted(splitDeletes: false)
        let bytes = ChangeCodec.encode([joined])
        let decoded = try ChangeCodec.decode(bytes)
        #expect(decoded == [joined])
        #expect(ChangeCodec.encode(decoded) == bytes)
        #expect(try Self.recordCount(bytes) == 3, "the insert, the run of three backspaces, the delete of \"ab\"")
    }

    /// Format 2 (before runs) wrote each delete as its own record; those bytes, in op logs,
    /// snapshots and version 2 bundles, still decode to the same change.
    @Test func theFormatTwoEncodingStillDecodes() throws {
        let joined = Self.typedThenDeleted(splitDeletes: false)
        let v2 = handMadeEncoding(timestamp: joined.timestamp.rawValue, records: 5, columns: [  // the insert and four deletes
            [0b10_10_10_01, 0b10],  // kinds: insert, delete, delete, delete, delete
            [5, 0],  // notes: five times note 0
            [0],  // insert modes: at the start
            [0b00_10_10_01],  // delete modes: the last inserted (f), before the last deleted (e, d), explicit
            [6],  // lengths
            [1, 0, 18, 2],  // explicit: one target, replica 0, seq 10 - 1 zigzagged, count 2
            Array("abcdef".utf8),
        ])
        #expect(try ChangeCodec.decode(v2) == [joined])
        #expect(try Self.recordCount(v2) == 5)
    }

    /// Runs written by hand in another spelling (two runs that one backspace run makes, a
    /// "deleteEach" of one delete) are joined when the change is made: the same value as the
    /// deletes one by one, and what the decoder gives back.
    @Test func handMadeRunsAreJoinedLikeTheirDeletes() throws {
        let typed: Operation = .insertText(note: Self.n, origin: nil, text: InsertedText("abcdef"))
        func change(_ deletes: [Operation]) -> Change {
            Change(replica: Self.a, startSeq: 1, timestamp: .zero, dependencies: VersionVector(), operations: [typed] + deletes)
        }
        let cases: [([DeleteRun], [Operation])] = [
            ([DeleteRun(Self.target(6)), DeleteRun(Self.target(5)), DeleteRun(range: Self.target(3, 2), order: .backward)],
             [.deleteEach(note: Self.n, runs: [DeleteRun(range: Self.target(3, 4), order: .backward)])]),
            ([DeleteRun(Self.target(2))], [.deleteText(note: Self.n, targets: [Self.target(2)])]),
            ([DeleteRun(range: Self.target(1, 2), order: .forward), DeleteRun(range: Self.target(3, 2), order: .forward)],
             [.deleteEach(note: Self.n, runs: [DeleteRun(range: Self.target(1, 4), order: .forward)])]),
        ]
        for (handMade, expected) in cases {
            let made = change([.deleteEach(note: Self.n, runs: handMade)])
            #expect(made == change(expected), "\(handMade)")
            #expect(made == change(handMade.flatMap(\.targets).map { .deleteText(note: Self.n, targets: [$0]) }))
            #expect(try ChangeCodec.decode(ChangeCodec.encode([made])) == [made])
        }
    }

    /// A run joins to the runs before it exactly as its deletes would one by one (the decoder
    /// gathers run records so): random runs of two replicas over a few seqs, so that many touch.
    @Test func appendingARunIsAppendingItsDeletes() {
        for seed in 0 as UInt64 ..< 2_000 {
            var rng = SplitMix64(seed: seed)
            var oneByOne: [DeleteRun] = []
            var bulk: [DeleteRun] = []
            for _ in 0 ..< rng.int(1 ... 6) {
                let range = OpIDRange(replica: replica(UInt64(rng.int(1 ... 2))), seq: UInt64(rng.int(1 ... 20)), count: UInt64(rng.int(1 ... 5)))
                let run = DeleteRun(range: range, order: [.whole, .backward, .forward][rng.int(0 ... 2)])
                for target in run.targets { oneByOne.appendDelete(target) }
                bulk.appendDeletes(of: run)
            }
            #expect(bulk == oneByOne, "seed \(seed)")
        }
    }

    /// Deletes gathered by the decoder on one note, then another, then in the next change (the
    /// decoder keeps one array of runs for them all), between inserts and deletes of several
    /// ranges, decode to the changes that were encoded, and encode to the same bytes again.
    @Test func gatheredDeletesRoundTripAcrossNotesAndChanges() throws {
        let notes = [Self.n, noteID(2)]
        for seed in 0 as UInt64 ..< 300 {
            var rng = SplitMix64(seed: seed)
            var changes: [Change] = []
            var start: UInt64 = 1
            for c in 0 ..< rng.int(1 ... 4) {
                let author = replica(UInt64(1 + c % 2))
                var ops: [Operation] = [.insertText(note: notes[rng.int(0 ... 1)], origin: nil, text: InsertedText("abcdefgh"))]
                for _ in 0 ..< rng.int(1 ... 30) {
                    let note = notes[rng.int(0 ... 9) == 0 ? 1 : 0]
                    let r = replica(UInt64(rng.int(1 ... 2)))
                    let seq = UInt64(rng.int(1 ... 40))
                    switch rng.int(0 ... 9) {
                    case 0:
                        ops.append(.insertText(note: note, origin: OpID(replica: r, seq: seq), text: InsertedText("xy")))
                    case 1:
                        ops.append(.deleteText(note: note, targets: [OpIDRange(replica: r, seq: seq, count: 2), OpIDRange(replica: r, seq: seq + 5, count: 1)]))
                    case 2, 3:
                        let run = DeleteRun(range: OpIDRange(replica: r, seq: seq, count: UInt64(rng.int(2 ... 6))),
                                            order: rng.int(0 ... 1) == 0 ? .backward : .forward)
                        ops.append(.deleteEach(note: note, runs: [run]))
                    default:
                        // Mostly the next character down or up, so that deletes join into runs.
                        let near = rng.int(0 ... 2)
                        let last = ops.last.flatMap { op -> OpIDRange? in
                            if case .deleteText(_, let targets) = op { return targets.last }
                            if case .deleteEach(_, let runs) = op, let run = runs.last { return run.target(run.operationCount - 1) }
                            return nil
                        }
                        let target = if let last, near > 0, last.seq > 1 {
                            OpIDRange(replica: last.replica, seq: near == 1 ? last.seq - 1 : last.seq + 1, count: 1)
                        } else {
                            OpIDRange(replica: r, seq: seq, count: UInt64(rng.int(1 ... 2)))
                        }
                        ops.append(.deleteText(note: note, targets: [target]))
                    }
                }
                let change = Change(replica: author, startSeq: start, timestamp: Timestamp(milliseconds: baseTime), dependencies: VersionVector(), operations: ops)
                start = change.endSeq + 1
                changes.append(change)
            }
            let bytes = ChangeCodec.encode(changes)
            let decoded = try ChangeCodec.decode(bytes)
            #expect(decoded == changes, "seed \(seed)")
            #expect(ChangeCodec.encode(decoded) == bytes, "seed \(seed)")
        }
    }

    /// Runs backwards and forwards, over text of this replica and of another, round-trip and apply.
    @Test func runRecordsRoundTripAndApply() throws {
        var nb = makeNotebook(1)
        let id = nb.createNote(title: "t", body: "").id
        try nb.insertText(id, at: 0, "hello world, again")
        var other = makeNotebook(2)
        try other.merge(nb)
        try other.editBody(id) { body in
            try body.insert("XYZW", at: 5)
            for _ in 0 ..< 3 { try body.delete(body.count - 1 ..< body.count) }  // backspace "ain"
            for _ in 0 ..< 3 { try body.delete(0 ..< 1) }  // delete key: "hel"
            for _ in 0 ..< 2 { try body.delete(3 ..< 4) }  // delete key over this batch's own insert: "YZ"
        }
        let changes = other.changes(since: VersionVector())
        let bytes = ChangeCodec.encode(changes)
        let decoded = try ChangeCodec.decode(bytes)
        #expect(decoded == changes)
        #expect(ChangeCodec.encode(decoded) == bytes)
        var fresh = makeNotebook(3)
        fresh.apply(contentsOf: decoded)
        #expect(fresh.note(id)?.body == other.note(id)?.body)
        #expect(fresh.note(id)?.body == "loXW world, ag")
    }

    /// An insert of "abc" (seqs 1-3) and a run record (explicit column `run`, after its target
    /// count 0) whose first delete is of the last inserted character.
    static func encodingWithRun(_ run: [UInt8]) -> [UInt8] {
        handMadeEncoding(records: 2, columns: [[0b10_01], [2, 0], [0], [0b01_00], [3], [0] + run, Array("abc".utf8)])
    }

    @Test func runRecordsOfImpossibleShapeAreRejected() throws {
        // Backspacing twice from "c" is fine: a run of 2 deletes (shape 0).
        let fine = try ChangeCodec.decode(Self.encodingWithRun([0]))
        #expect(fine.first?.operations.last == .deleteEach(note: Self.n, runs: [DeleteRun(range: Self.target(2, 2), order: .backward)]))
        for (run, message) in [
            ([4] as [UInt8], "goes outside 1 ... 2^53 - 1"),  // 4 backspaces from seq 3
            ([0xFE, 0xFF, 0xFF, 0xFF, 0x0F], "longer than a run can be"),
        ] {
            let error = #expect(throws: CRDTError.self) { try ChangeCodec.decode(Self.encodingWithRun(run)) }
            #expect(error?.code == .malformedEncoding)
            #expect(error?.message.contains(message) == true, "\(String(describing: error))")
        }
    }

    @Test func aCutInsideTheRunKeepsItsSeqs() throws {
        let change = Self.typedThenDeleted(splitDeletes: false)
        // seqs: 1-6 insert, 7 del f, 8 del e, 9 del d, 10 del ab.
        let fromEight = try #require(change.suffix(from: 8))
        #expect(fromEight.startSeq == 8)
        #expect(fromEight.operations == [.deleteEach(note: Self.n, runs: [DeleteRun(range: Self.target(4, 2), order: .backward),
                                                                           DeleteRun(Self.target(1, 2))])])
        let fromNine = try #require(change.suffix(from: 9))
        #expect(fromNine.operations == [.deleteEach(note: Self.n, runs: [DeleteRun(Self.target(4)), DeleteRun(Self.target(1, 2))])],
                "a run cut down to one character is a whole run")
        let last = try #require(change.suffix(from: 10))
        #expect(last.operations == [.deleteText(note: Self.n, targets: [Self.target(1, 2)])], "a run of one is a plain delete")
        // A replica that had the change up to seq 7 and receives the rest ends in the same state.
        var whole = makeNotebook(9)
        whole.apply(change)
        var parts = makeNotebook(9)
        try parts.apply(Change(replica: Self.a, startSeq: 1, timestamp: change.timestamp, dependencies: VersionVector(), operations: [
            .insertText(note: Self.n, origin: nil, text: InsertedText("abcdef")),
            .deleteText(note: Self.n, targets: [Self.target(6)]),
        ]))
        parts.apply(fromEight)
        #expect(parts.note(Self.n)?.body == "c")
        #expect(parts.digest() == whole.digest())
        #expect(parts.body(of: Self.n)!.structureDifference(from: whole.body(of: Self.n)!) == nil)
    }

    @Test func aRunThatNamesAMissingCharacterIsRejectedWhole() throws {
        var nb = makeNotebook(9)
        let bad = Change(replica: Self.a, startSeq: 1, timestamp: .zero, dependencies: VersionVector(), operations: [
            .insertText(note: Self.n, origin: nil, text: InsertedText("abc")),
            .deleteEach(note: Self.n, runs: [DeleteRun(Self.target(3)), DeleteRun(Self.target(40))]),
        ])
        #expect(nb.apply(bad).quarantineReason?.code == .unknownReference)
        #expect(nb.versionVector == VersionVector())
        #expect(nb.noteCount == 0)
    }

    @Test func runsFollowBackspaceAndTheDeleteKey() {
        var runs: [DeleteRun] = []
        for seq in stride(from: 9 as UInt64, through: 5, by: -1) { runs.appendDelete(Self.target(seq)) }  // backspace
        for seq in 20 as UInt64 ..< 23 { runs.appendDelete(Self.target(seq)) }  // delete key
        runs.appendDelete(Self.target(30, 4))  // a selection
        runs.appendDelete(Self.target(29))  // not joined to a selection
        runs.appendDelete(OpIDRange(replica: replica(2), seq: 28, count: 1))  // another replica
        #expect(runs == [
            DeleteRun(range: Self.target(5, 5), order: .backward),
            DeleteRun(range: Self.target(20, 3), order: .forward),
            DeleteRun(Self.target(30, 4)),
            DeleteRun(Self.target(29)),
            DeleteRun(OpIDRange(replica: replica(2), seq: 28, count: 1)),
        ])
        #expect(runs.map(\.operationCount) == [5, 3, 1, 1, 1])
        #expect(runs[0].targets.map(\.seq) == [9, 8, 7, 6, 5])
        #expect(runs[1].targets.map(\.seq) == [20, 21, 22])
    }

    /// A run of the longest length joins in a few steps, not one per delete, and a sequence of
    /// deletes longer than a run can be continues in a new run.
    @Test func theLongestRunsJoinInOneStep() {
        let longest = DeleteRun.maxLength
        var runs: [DeleteRun] = []
        runs.appendDeletes(of: DeleteRun(range: OpIDRange(replica: Self.a, seq: 1, count: longest), order: .forward))
        #expect(runs == [DeleteRun(range: OpIDRange(replica: Self.a, seq: 1, count: longest), order: .forward)])
        #expect(runs.operationCount == longest)
        // Three more deletes going on: the run is full, so they make a run of their own.
        runs.appendDeletes(of: DeleteRun(range: OpIDRange(replica: Self.a, seq: longest + 1, count: 3), order: .forward))
        #expect(runs == [DeleteRun(range: OpIDRange(replica: Self.a, seq: 1, count: longest), order: .forward),
                         DeleteRun(range: OpIDRange(replica: Self.a, seq: longest + 1, count: 3), order: .forward)])
        // Backwards: a run one short of full takes one delete, then a new run takes the rest.
        var back = [DeleteRun(range: OpIDRange(replica: Self.a, seq: 100, count: longest - 1), order: .backward)]
        back.appendDeletes(of: DeleteRun(range: OpIDRange(replica: Self.a, seq: 97, count: 3), order: .backward))
        #expect(back == [DeleteRun(range: OpIDRange(replica: Self.a, seq: 99, count: longest), order: .backward),
                         DeleteRun(range: OpIDRange(replica: Self.a, seq: 97, count: 2), order: .backward)])
        #expect(back.operationCount == longest + 2)
        // The same deletes one by one give the same runs (checked on a short run past a nearly full one).
        var oneByOne = [DeleteRun(range: OpIDRange(replica: Self.a, seq: 100, count: longest - 1), order: .backward)]
        for seq in [99, 98, 97] as [UInt64] { oneByOne.appendDelete(OpIDRange(replica: Self.a, seq: seq, count: 1)) }
        #expect(oneByOne == back)
    }

    /// Runs made by hand with counts at the top of the type: the change is malformed, and
    /// nothing traps while it is made (joined runs do arithmetic on their ranges).
    @Test func runsOfImpossibleLengthMakeAMalformedChange() {
        let huge = DeleteRun(range: OpIDRange(replica: Self.a, seq: .max - 1, count: .max), order: .backward)
        let change = Change(replica: Self.a, startSeq: 1, timestamp: .zero, dependencies: VersionVector(),
                            operations: [.deleteEach(note: Self.n, runs: [huge, huge]), .deleteEach(note: Self.n, runs: [huge])])
        #expect(change.seqCount == .max)
        var nb = makeNotebook(9)
        #expect(nb.apply(change).rejectionReason?.code == .malformedChange)
        #expect([huge, huge].operationCount == .max)
        #expect(nb.versionVector.isEmpty)
    }
}

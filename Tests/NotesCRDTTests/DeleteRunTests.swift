import NotesCRDT
import Testing

/// `Operation.deleteEach`: consecutive deletes of one target each, held as one value of runs.
struct DeleteRunTests {
    static let a = replica(1)
    static let n = noteID(1)

    static func target(_ seq: UInt64, _ count: UInt64 = 1) -> OpIDRange { OpIDRange(replica: a, seq: seq, count: count) }

    /// A change that types "abcdef" (seqs 1-6), then backspaces f, e, d and deletes "ab" as one range.
    static func typedThenDeleted(splitDeletes: Bool) -> Change {
        var ops: [Operation] = [.insertText(note: n, origin: nil, text: scalars("abcdef"))]
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
            .insertText(note: Self.n, origin: nil, text: scalars("abcdef")),
            .deleteText(note: Self.n, targets: [Self.target(6)]),
            .deleteText(note: Self.n, targets: [Self.target(1), Self.target(3)]),  // one delete, one seq
            .deleteText(note: Self.n, targets: [Self.target(2)]),
            .deleteText(note: noteID(2), targets: [Self.target(4)]),  // another note: not joined
        ])
        #expect(change.operations.count == 5)
        #expect(change.seqCount == 10)
    }

    @Test func theEncodingIsTheSameAsForSeparateDeletes() throws {
        let joined = Self.typedThenDeleted(splitDeletes: false)
        let bytes = ChangeCodec.encode([joined])
        // What an encoder that wrote the deletes one by one (format 2 as it was) produced: the
        // header counts 5 wire operations, and it decodes to the joined change.
        let decoded = try ChangeCodec.decode(bytes)
        #expect(decoded == [joined])
        #expect(ChangeCodec.encode(decoded) == bytes)
        var reader = BinaryReader(bytes)
        _ = try reader.count(max: 1, "replicas"); _ = try reader.raw(16)
        _ = try reader.count(max: 1, "notes"); _ = try reader.raw(16)
        _ = try reader.count(max: 1, "changes")
        _ = try reader.varint(); _ = try reader.varint(); _ = try reader.varint(); _ = try reader.varint()
        #expect(try reader.varint() == 5, "one insert and four deletes on the wire")
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
        try whole.apply(change)
        var parts = makeNotebook(9)
        try parts.apply(Change(replica: Self.a, startSeq: 1, timestamp: change.timestamp, dependencies: VersionVector(), operations: [
            .insertText(note: Self.n, origin: nil, text: scalars("abcdef")),
            .deleteText(note: Self.n, targets: [Self.target(6)]),
        ]))
        try parts.apply(fromEight)
        #expect(parts.note(Self.n)?.body == "c")
        #expect(parts.digest() == whole.digest())
        #expect(parts.body(of: Self.n)!.structureDifference(from: whole.body(of: Self.n)!) == nil)
    }

    @Test func aRunThatNamesAMissingCharacterIsRejectedWhole() throws {
        var nb = makeNotebook(9)
        let bad = Change(replica: Self.a, startSeq: 1, timestamp: .zero, dependencies: VersionVector(), operations: [
            .insertText(note: Self.n, origin: nil, text: scalars("abc")),
            .deleteEach(note: Self.n, runs: [DeleteRun(Self.target(3)), DeleteRun(Self.target(40))]),
        ])
        #expect(throws: CRDTError.self) { try nb.apply(bad) }
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
}

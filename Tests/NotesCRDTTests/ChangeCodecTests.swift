import NotesCRDT
import PropertyBased
import Testing

struct ChangeCodecTests {
    static let a = replica(1), b = replica(2), c = replica(3)
    static let n1 = noteID(1), n2 = noteID(2)

    /// Changes that use every operation kind, every field and every value kind.
    static let sample: [Change] = [
        Change(replica: a, startSeq: 1, timestamp: Timestamp(milliseconds: baseTime), dependencies: VersionVector(), operations: [
            .setNoteField(note: n1, field: .title, value: .string("Grocery list 🛒")),
            .setNoteField(note: n1, field: .pinned, value: .bool(true)),
            .setNoteField(note: n1, field: .archived, value: .bool(false)),
            .setNoteField(note: n1, field: .color, value: .null),
            .setNoteField(note: n1, field: .state, value: .string("active")),
            .setNoteField(note: n1, field: .createdAt, value: .int(-42)),
            .setNoteField(note: n1, field: .tag("work"), value: .bool(true)),
            .setNoteField(note: n1, field: .extra("priority"), value: .int(.max)),
            .insertText(note: n1, origin: nil, text: InsertedText("e\u{301}日本😀👍\u{1F3FD}")),
            .setTagField(tag: "work", field: .name, value: .string("Work")),
            .setTagField(tag: "work", field: .color, value: .string("red")),
        ]),
        Change(replica: b, startSeq: 7, timestamp: Timestamp(milliseconds: baseTime + 5, counter: 9),
               dependencies: VersionVector([a: 16, c: 2]), operations: [
            .insertText(note: n1, origin: OpID(replica: a, seq: 10), text: InsertedText("xyz")),
            .deleteText(note: n1, targets: [OpIDRange(replica: a, seq: 9, count: 2), OpIDRange(replica: b, seq: 7, count: 1)]),
            .setNoteField(note: n2, field: .extra(""), value: .int(.min)),
        ]),
        Change(replica: c, startSeq: UInt64(1) << 40, timestamp: Timestamp(rawValue: .max - 10),
               dependencies: VersionVector([b: Change.maxSeq]), operations: [
            .setTagField(tag: "", field: .name, value: .null),
        ]),
    ]

    @Test func roundTripOfEveryOperationKind() throws {
        let bytes = ChangeCodec.encode(Self.sample)
        let decoded = try ChangeCodec.decode(bytes)
        #expect(decoded == Self.sample)
        #expect(ChangeCodec.encode(decoded) == bytes)
    }

    @Test func roundTripOfNothing() throws {
        #expect(try ChangeCodec.decode(ChangeCodec.encode([])) == [])
    }

    @Test func dependenciesNeverNameTheAuthor() {
        let change = Change(replica: Self.a, startSeq: 3, timestamp: .zero, dependencies: VersionVector([Self.a: 2, Self.b: 1]),
                            operations: [.setTagField(tag: "t", field: .name, value: .null)])
        #expect(change.dependencies == VersionVector([Self.b: 1]))
        #expect(change.context == VersionVector([Self.a: 2, Self.b: 1]))
    }

    @Test(.shrinking(false)) func roundTripOfRandomNotebookHistories() async throws {
        await propertyCheck(count: 15, input: Gen.uint64(), Gen.int(in: 2 ... 4)) { seed, replicaCount in
            await reportingErrors("seed \(seed), replicaCount \(replicaCount)") {
                var sim = Simulation(seed: seed, replicaCount: replicaCount)
                sim.syncWithChangesAsMade = true
                try sim.run(steps: 40)
                let decoded = try ChangeCodec.decode(ChangeCodec.encode(sim.made))
                #expect(decoded == sim.made)
                for nb in sim.replicas {
                    #expect(try ChangeCodec.decode(ChangeCodec.encode(nb.allChanges)) == nb.allChanges)
                }
            }
        }
    }

    /// An encoder kept from one encoding to the next (as a store keeps one for its log rows)
    /// writes exactly what a fresh one writes, whatever it encoded before: large tables (past
    /// the 16 keys searched linearly), long columns, predictions, then small ones.
    @Test(.shrinking(false)) func aReusedEncoderWritesWhatAFreshOneWrites() async throws {
        let manyNotes = Change(replica: Self.a, startSeq: 1, timestamp: Timestamp(milliseconds: baseTime), dependencies: VersionVector(),
                               operations: (100 ... 140).map { .setNoteField(note: noteID(UInt64($0)), field: .pinned, value: .bool(true)) })
        let oneOfThem = Change(replica: Self.b, startSeq: 1, timestamp: Timestamp(milliseconds: baseTime), dependencies: VersionVector(),
                               operations: [.setNoteField(note: noteID(120), field: .pinned, value: .bool(false))])
        var encoder = ChangeCodec.Encoder()
        for input in [[manyNotes], [oneOfThem], Self.sample, [Self.sample[1]], [], [manyNotes], [Self.sample[2]], [oneOfThem]] {
            #expect(encoder.encode(input) == ChangeCodec.encode(input))
        }
        await propertyCheck(count: 10, input: Gen.uint64()) { seed in
            await reportingErrors("seed \(seed)") {
                var sim = Simulation(seed: seed, replicaCount: 3)
                sim.syncWithChangesAsMade = true
                try sim.run(steps: 60)
                var rng = SplitMix64(seed: seed)
                for _ in 0 ..< 20 {
                    let start = rng.int(0 ... sim.made.count)
                    let slice = Array(sim.made[start ..< min(sim.made.count, start + rng.int(0 ... 12))])
                    let bytes = encoder.encode(slice)
                    #expect(bytes == ChangeCodec.encode(slice))
                    #expect(try ChangeCodec.decode(bytes) == slice)
                }
            }
        }
    }

    /// A bundle may hold overlapping pieces of one replica's log (a change and a cut copy of it, as
    /// a relay that resends does), so one replica's inserts are not in seq order. Encoder and decoder
    /// must still make the same predictions: a flaky-relay simulation found a bundle that did not
    /// decode ("an insert refers to a delete that is not there") when a lookup cache made them differ.
    @Test(.shrinking(false)) func roundTripOfOverlappingPiecesOfLogs() async throws {
        await propertyCheck(count: 40, input: Gen.uint64(), Gen.int(in: 2 ... 4)) { seed, replicaCount in
            await reportingErrors("seed \(seed), replicaCount \(replicaCount)") {
                var sim = Simulation(seed: seed, replicaCount: replicaCount)
                try sim.run(steps: 80)
                try sim.syncAll()
                var rng = SplitMix64(seed: seed ^ 0x0B0E)
                var pieces = rng.pick(sim.replicas).allChanges
                for _ in 0 ..< 6 {
                    let change = rng.pick(pieces)
                    let cut = change.startSeq + UInt64(rng.int(0 ..< Int(change.seqCount)))
                    pieces.insert(change.suffix(from: cut)!, at: rng.int(0 ... pieces.count))
                }
                let decoded = try ChangeCodec.decode(ChangeCodec.encode(pieces))
                #expect(decoded == pieces)
            }
        }
    }

    @Test func everyTruncationIsRejectedWithAnError() {
        let bytes = ChangeCodec.encode(Self.sample)
        for n in 0 ..< bytes.count {
            #expect(throws: CRDTError.self, "prefix of \(n) bytes") { try ChangeCodec.decode(Array(bytes.prefix(n))) }
        }
        // Trailing bytes are rejected too.
        let error = #expect(throws: CRDTError.self) { try ChangeCodec.decode(bytes + [0]) }
        #expect(error?.code == .malformedEncoding)
    }

    @Test(arguments: [
        [UInt8](),
        [0xFF],
        [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF],
        [0x01] + [UInt8](repeating: 0, count: 16) + [0x00, 0x01, 0x05, 0x01],  // a change with a bad author index
        [0x00, 0x00, 0x01, 0x00],  // a change but no replica table
        [0x01] + [UInt8](repeating: 7, count: 16) + [0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00],  // names a note, none in table
        [0x01] + [UInt8](repeating: 7, count: 16) + [0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00],  // a change with no operations
        [0x01] + [UInt8](repeating: 7, count: 16) + [0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x00, 0x00, 0x00],  // starts at seq 0
        [0x01] + [UInt8](repeating: 7, count: 16) + [0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x01, 0x09],  // unknown op kind
    ])
    func garbageIsRejectedWithAnError(_ bytes: [UInt8]) {
        let error = #expect(throws: CRDTError.self) { try ChangeCodec.decode(bytes) }
        #expect(error?.code == .malformedEncoding)
    }

    /// Flipped, inserted and removed bytes either decode to something or throw a CRDTError; they never
    /// crash. Whatever decodes is applied to a notebook, which must throw or apply, never crash.
    @Test func mutatedEncodingsNeverCrash() async throws {
        var sim = Simulation(seed: 42, replicaCount: 3)
        sim.syncWithChangesAsMade = true
        try sim.run(steps: 60)
        let valid = ChangeCodec.encode(Array(sim.made.prefix(12)))
        await propertyCheck(count: 300, input: Gen.uint64()) { seed in
            await reportingErrors("seed \(seed)") {
                var rng = SplitMix64(seed: seed)
                var bytes = valid
                for _ in 0 ..< rng.int(1 ... 4) {
                    switch rng.int(0 ..< 4) {
                    case 0: bytes[rng.int(0 ..< bytes.count)] = UInt8.random(in: 0 ... 255, using: &rng)
                    case 1: bytes[rng.int(0 ..< bytes.count)] ^= 1 << UInt8(rng.int(0 ..< 8))
                    case 2: bytes.insert(UInt8.random(in: 0 ... 255, using: &rng), at: rng.int(0 ... bytes.count))
                    default: if bytes.count > 1 { bytes.remove(at: rng.int(0 ..< bytes.count)) }
                    }
                }
                let decoded: [Change]
                do {
                    decoded = try ChangeCodec.decode(bytes)
                } catch is CRDTError {
                    return
                } catch {
                    Issue.record("decode threw a non-CRDTError: \(error)")
                    return
                }
                var nb = makeNotebook(100)
                for change in decoded {
                    nb.apply(change)
                }
                for id in nb.noteIDs { #expect(nb.body(of: id)!.invariantViolation() == nil) }
            }
        }
    }

    /// An encoding of one change that inserts `count` scalars whose UTF-8 is `text`.
    static func insertEncoding(count: UInt64, text: [UInt8]) -> [UInt8] {
        var lengths = BinaryWriter()
        lengths.varint(count)
        return handMadeEncoding(records: 1, columns: [[0b01], [1, 0], [0], [], lengths.bytes, [], text])
    }

    /// The text column is decoded insert by insert, eight ASCII bytes at a time where it can:
    /// every length of UTF-8 sequence, at the edges of its range and of the eight-byte steps,
    /// gives the scalars Swift's own decoding gives.
    @Test func insertedTextDecodesLikeSwift() throws {
        let edges = "\u{7F}\u{80}\u{7FF}\u{800}\u{D7FF}\u{E000}\u{FFFD}\u{FFFF}\u{10000}\u{10FFFF}"
        for text in [edges, "plain ascii, longer than eight bytes", "1234567" + edges + "abcdefgh", "é" + String(repeating: "x", count: 17) + "😀"] {
            let scalars = Array(text.unicodeScalars)
            let decoded = try ChangeCodec.decode(Self.insertEncoding(count: UInt64(scalars.count), text: Array(text.utf8)))
            #expect(decoded.first?.operations == [.insertText(note: Self.n1, origin: nil, text: InsertedText(scalars))], "\(text)")
        }
    }

    @Test(arguments: [
        [0x80],  // a continuation byte first
        [0xC0, 0x80],  // an overlong NUL
        [0xC1, 0xBF],  // an overlong
        [0xE0, 0x9F, 0xBF],  // an overlong three-byte form
        [0xED, 0xA0, 0x80],  // a surrogate (U+D800)
        [0xF0, 0x8F, 0xBF, 0xBF],  // an overlong four-byte form
        [0xF4, 0x90, 0x80, 0x80],  // past U+10FFFF
        [0xF5, 0x80, 0x80, 0x80],  // no such lead byte
        [0xE2, 0x28, 0xA1],  // a bad continuation
        [0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0xFF, 0x61],  // a bad byte inside the first eight
    ] as [[UInt8]])
    func invalidUTF8IsRejected(_ text: [UInt8]) {
        let error = #expect(throws: CRDTError.self) { try ChangeCodec.decode(Self.insertEncoding(count: 1, text: text)) }
        #expect(error?.code == .malformedEncoding)
        let withCount = #expect(throws: CRDTError.self) {
            try ChangeCodec.decode(Self.insertEncoding(count: UInt64(text.count), text: text))
        }
        #expect(withCount?.message == "inserted text is not valid UTF-8", "\(text)")
    }

    @Test func anInsertLongerThanTheTextIsRejected() {
        for (count, text) in [(2, [0x61]), (1, [0xE2, 0x82]), (9, Array("abcdefgh".utf8))] as [(UInt64, [UInt8])] {
            let error = #expect(throws: CRDTError.self) { try ChangeCodec.decode(Self.insertEncoding(count: count, text: text)) }
            #expect(error?.code == .malformedEncoding, "\(text)")
        }
        let leftover = #expect(throws: CRDTError.self) { try ChangeCodec.decode(Self.insertEncoding(count: 1, text: [0x61, 0x62])) }
        #expect(leftover?.message == "text left over after the last insert")
    }

    @Test func randomBytesNeverCrash() async {
        await propertyCheck(count: 500, input: Gen.uint8().array(of: 0 ... 80)) { bytes in
            await reportingErrors("bytes \(bytes)") {
                do { _ = try ChangeCodec.decode(bytes) } catch is CRDTError {} catch {
                    Issue.record("decode threw a non-CRDTError: \(error)")
                }
            }
        }
    }
}

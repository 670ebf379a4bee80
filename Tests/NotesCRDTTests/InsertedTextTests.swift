import NotesCRDT
import Testing

/// `InsertedText`: an insert's scalars as a view of a buffer other inserts may share.
struct InsertedTextTests {
    static let a = replica(1), b = replica(2)
    static let n = noteID(1)

    @Test func isACollectionOfScalarsEqualByContent() {
        let text = InsertedText("añ😀")
        #expect(Array(text) == Array("añ😀".unicodeScalars))
        #expect(text.count == 3 && text.indices == 0 ..< 3)
        #expect(text[2] == "😀")
        #expect(text == ["a", "ñ", "😀"])
        #expect(text == InsertedText(Array("añ😀".unicodeScalars)))
        #expect(text != InsertedText("añ"))
        #expect(text != InsertedText("añx"))
        #expect(InsertedText() == [] && InsertedText().isEmpty)
        // Equal views of different buffers hash alike; a view of part of a buffer equals its copy.
        let part = InsertedText(InsertedText("xañ😀y")[1 ..< 4])
        #expect(part == text)
        #expect(part.hashValue == text.hashValue)
        #expect(Set([part, text, InsertedText("añ")]).count == 2)
        #expect(part.startIndex == 0 && part[0] == "a")
    }

    /// Appending never changes another value, whatever it shares: a copy, a part of the same
    /// buffer, or a view whose end the append starts at.
    @Test func appendingLeavesEveryOtherValueAsItWas() {
        var first = InsertedText("abc")
        let copy = first
        first.append(contentsOf: InsertedText("de"))
        #expect(first == InsertedText("abcde"))
        #expect(copy == InsertedText("abc"))

        let whole = InsertedText("0123456789")
        var head = InsertedText(whole[0 ..< 4])
        head.append(contentsOf: "x".unicodeScalars)
        #expect(head == InsertedText("0123x"))
        #expect(whole == InsertedText("0123456789"))

        // Two views of one buffer, the second right after the first: widening the first is free and
        // leaves the second alone.
        var left = InsertedText(whole[2 ..< 5])
        let right = InsertedText(whole[5 ..< 8])
        left.append(contentsOf: right)
        #expect(left == InsertedText("234567") && left.sharesBuffer(with: whole))
        #expect(right == InsertedText("567"))

        // Grown one scalar at a time (as typing grows a run), in place once it holds its buffer alone.
        var typed = InsertedText()
        for scalar in "typing along".unicodeScalars { typed.append(scalar) }
        let before = typed
        typed.append(contentsOf: Array(" more".unicodeScalars))
        #expect(typed == InsertedText("typing along more"))
        #expect(before == InsertedText("typing along"))
    }

    /// A decoded change's inserts are views of one buffer, and a decoded insert that continues
    /// the one before it is joined by widening its view.
    @Test func decodedInsertsShareOneBuffer() throws {
        let typed = Change(replica: Self.a, startSeq: 1, timestamp: Timestamp(rawValue: 100), dependencies: VersionVector(), operations: [
            .insertText(note: Self.n, origin: nil, text: InsertedText("hello")),
            .deleteText(note: Self.n, targets: [OpIDRange(replica: Self.a, seq: 1, count: 1)]),
            .insertText(note: Self.n, origin: OpID(replica: Self.a, seq: 5), text: InsertedText(" wörld")),
        ])
        let other = Change(replica: Self.b, startSeq: 1, timestamp: Timestamp(rawValue: 200),
                           dependencies: VersionVector([Self.a: 12]), operations: [
            .insertText(note: Self.n, origin: OpID(replica: Self.a, seq: 12), text: InsertedText("!")),
        ])
        let decoded = try ChangeCodec.decode(ChangeCodec.encode([typed, other]))
        #expect(decoded == [typed, other])
        guard case .insertText(_, _, let first) = decoded[0].operations[0],
              case .insertText(_, _, let second) = decoded[0].operations[2],
              case .insertText(_, _, let third) = decoded[1].operations[0] else {
            Issue.record("not inserts: \(decoded)")
            return
        }
        #expect(first.sharesBuffer(with: second) && first.sharesBuffer(with: third))
        #expect(!first.sharesBuffer(with: InsertedText("hello")))

        // Two decoded inserts, the second right after the first (origin mode 3, after the last
        // insert): joined into one insert, as a change joins them when they are made.
        let continued = try ChangeCodec.decode(handMadeEncoding(records: 2, columns: [[0b0101], [2, 0], [0b1100], [], [2, 3], [], Array("abcde".utf8)]))
        #expect(continued.first?.operations == [.insertText(note: noteID(1), origin: nil, text: InsertedText("abcde"))])

        // Joined as a change is made, the texts of the joined inserts stay as they were.
        let ab = InsertedText("ab")
        let joined = Change(replica: Self.a, startSeq: 1, timestamp: Timestamp(rawValue: 100), dependencies: VersionVector(), operations: [
            .insertText(note: Self.n, origin: nil, text: ab),
            .insertText(note: Self.n, origin: OpID(replica: Self.a, seq: 2), text: InsertedText("c")),
        ])
        #expect(joined.operations == [.insertText(note: Self.n, origin: nil, text: InsertedText("abc"))])
        #expect(ab == InsertedText("ab"))
        #expect(try ChangeCodec.decode(ChangeCodec.encode([joined])) == [joined])
    }

    /// A notebook merges decoded inserts into the same text as the inserts it was given.
    @Test func aMergedDecodedHistoryReadsAsTheOriginal() throws {
        var writer = makeNotebook(1)
        let (id, _) = writer.createNote(title: "t", body: "")
        // One batch of a few hundred edits (merged in the list form), then a few small ones.
        try writer.editBody(id) { editor in
            for i in 0 ..< 300 {
                try editor.insert("word\(i) ", at: editor.count)
                if i % 7 == 0 { try editor.delete(0 ..< 2) }
                if i % 11 == 0 { try editor.insert("é😀", at: editor.count / 2) }
            }
        }
        for i in 0 ..< 5 {
            try writer.editBody(id) { editor in try editor.insert("tail\(i)", at: i) }
        }
        let history = try ChangeCodec.decode(ChangeCodec.encode(writer.changes(since: VersionVector())))
        var reader = makeNotebook(2)
        #expect(reader.apply(contentsOf: history).applied == history.count)
        #expect(reader.note(id)?.body == writer.note(id)?.body)
        #expect(reader.note(id)?.body.isEmpty == false)
    }

    /// ASCII with a few other scalars (accents, an emoji, a combining mark, the last byte value
    /// ASCII lacks) is stored a byte a scalar with the others apart, and reads as the scalars given:
    /// at every position, in parts that start or end at an other scalar, hashed and compared alike
    /// with the same scalars stored four bytes each.
    @Test func compactTextReadsAsItsScalarsAcrossOtherScalars() {
        let source = String(repeating: "ab", count: 20) + "é" + "x\u{0301}" + String(repeating: "cd", count: 9) + "😀ÿ\u{7F}" + "z"
        let scalars = Array(source.unicodeScalars)
        let text = InsertedText(source)
        #expect(text.isCompact)
        #expect(Array(text) == scalars)
        for i in scalars.indices { #expect(text[i] == scalars[i], "at \(i)") }
        // Every part that starts or ends at, before or after an other scalar.
        let others = scalars.indices.filter { scalars[$0].value >= 0x80 }
        #expect(others.count == 4)
        for edge in others {
            for (from, to) in [(edge, scalars.count), (0, edge), (0, edge + 1), (edge, edge + 1), (edge - 1, edge + 2), (edge + 1, scalars.count)] {
                let part = InsertedText(text[from ..< to])
                #expect(Array(part) == Array(scalars[from ..< to]), "\(from) ..< \(to)")
                // Copied into another buffer (the other scalars' places move with it).
                var copied = InsertedText("q")
                copied.append(contentsOf: part)
                #expect(Array(copied) == ["q"] + Array(scalars[from ..< to]), "\(from) ..< \(to)")
                #expect(copied.isCompact)
            }
        }
        // Against the same scalars in a wide buffer (many other scalars make one wide first).
        let wideSource = String(repeating: "ж", count: 40) + source
        let wide = InsertedText(InsertedText(wideSource)[40...])
        #expect(!wide.isCompact)
        #expect(wide == text && wide.hashValue == text.hashValue)
        #expect(wide.description == text.description)
        #expect(text.withUnsafeBufferPointer { Array($0) } == scalars)
    }

    /// Text that is mostly other scalars goes wide once they pass one in eight (a byte and a
    /// table entry each would take more than four bytes), and stays right as it does.
    @Test func manyOtherScalarsMakeTheTextWide() {
        var typed = InsertedText()
        var expected: [Unicode.Scalar] = []
        for i in 0 ..< 200 {
            let scalar: Unicode.Scalar = i % 3 == 0 ? "д" : "a"
            typed.append(scalar)
            expected.append(scalar)
            #expect(typed.last == scalar)
        }
        #expect(!typed.isCompact)
        #expect(Array(typed) == expected)
        var mostlyASCII = InsertedText()
        for i in 0 ..< 200 { mostlyASCII.append(i % 50 == 0 ? "ü" : "u") }
        #expect(mostlyASCII.isCompact && mostlyASCII.filter { $0 == "ü" }.count == 4)
    }

    /// The decoder stores a body's text a byte a scalar, and the inserts after those that were
    /// one in eight or more other scalars in a wide buffer; either way it decodes and encodes
    /// again the same.
    @Test func decodedTextGoesWideAfterMostlyOtherScalars() throws {
        for (body, compact) in [("plain ascii text with an é and a 😀 and \u{301} inside it", true),
                                ("кириллица и немного ascii", false)] {
            let change = Change(replica: Self.a, startSeq: 1, timestamp: Timestamp(rawValue: 100), dependencies: VersionVector(), operations: [
                .insertText(note: Self.n, origin: nil, text: InsertedText(body)),
                .insertText(note: Self.n, origin: OpID(replica: Self.a, seq: 3), text: InsertedText("ä b")),
            ])
            let encoded = ChangeCodec.encode([change])
            let decoded = try ChangeCodec.decode(encoded)
            #expect(decoded == [change])
            #expect(ChangeCodec.encode(decoded) == encoded)
            guard case .insertText(_, _, let first) = decoded[0].operations[0],
                  case .insertText(_, _, let second) = decoded[0].operations[1] else {
                Issue.record("not inserts: \(decoded)")
                continue
            }
            #expect(first.isCompact, "\(body)")
            #expect(second.isCompact == compact, "\(body)")
            #expect(String(String.UnicodeScalarView(first)) == body)
            #expect(String(String.UnicodeScalarView(second)) == "ä b")
        }
    }

    /// A merged text whose arena is compact reads, and finds offsets, the same on both sides of
    /// an other scalar.
    @Test func aMergedTextFindsOffsetsAcrossOtherScalars() throws {
        var writer = makeNotebook(1)
        let (id, _) = writer.createNote(title: "t", body: "")
        try writer.editBody(id) { editor in
            for i in 0 ..< 200 {
                try editor.insert(i % 17 == 0 ? "ö\u{308}😀" : "w\(i) ", at: editor.count)
                if i % 13 == 0 { try editor.delete(editor.count / 3 ..< editor.count / 3 + 2) }
            }
        }
        let history = try ChangeCodec.decode(ChangeCodec.encode(writer.changes(since: VersionVector())))
        var reader = makeNotebook(2)
        #expect(reader.apply(contentsOf: history).applied == history.count)
        let written = try #require(writer.body(of: id))
        let read = try #require(reader.body(of: id))
        #expect(read.string == written.string && read.spells(written.string))
        #expect(read.utf8 == Array(written.string.utf8))
        let scalars = Array(written.string.unicodeScalars)
        for (i, scalar) in scalars.enumerated() where scalar.value >= 0x80 {
            for at in [i - 1, i, i + 1] where at >= 0 && at < scalars.count {
                #expect(read.identity(at: at) == written.identity(at: at))
                #expect(read.position(of: read.identity(at: at)) == at)
            }
        }
        // Typing on into the merged text (its arena copied, other scalars and all).
        try reader.editBody(id) { editor in try editor.insert("ñ!", at: 5) }
        let edited = try #require(reader.body(of: id))
        #expect(Array(edited.string.unicodeScalars) == Array(scalars[..<5]) + ["ñ", "!"] + Array(scalars[5...]))
    }
}

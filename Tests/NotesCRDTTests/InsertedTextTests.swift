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
}

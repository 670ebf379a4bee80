import NotesCRDT
import Testing

@Suite struct TextDiffTests {
    /// Pieces random texts are made of: ASCII, line breaks, emoji (with a skin tone, a ZWJ
    /// sequence), CJK, and a letter with a combining accent (two scalars).
    static let pieces = ["a", "b", "c", " ", "\n", "\n", "é", "e\u{301}", "😀", "👍🏽", "👩‍💻", "中", "文", "字", "x"]

    static func randomText(_ rng: inout SplitMix64, maxPieces: Int) -> [Unicode.Scalar] {
        let count = Int.random(in: 0 ... maxPieces, using: &rng)
        return (0 ..< count).flatMap { _ in Array(pieces.randomElement(using: &rng)!.unicodeScalars) }
    }

    /// `text` with a few random inserts, deletes and replacements.
    static func mutated(_ text: [Unicode.Scalar], _ rng: inout SplitMix64) -> [Unicode.Scalar] {
        var out = text
        for _ in 0 ..< Int.random(in: 1 ... 4, using: &rng) {
            let at = Int.random(in: 0 ... out.count, using: &rng)
            let length = Int.random(in: 0 ... min(5, out.count - at), using: &rng)
            out.replaceSubrange(at ..< at + length, with: randomText(&rng, maxPieces: 4))
        }
        return out
    }

    /// Makes splices in the order given, each offset on the text as the ones before left it.
    static func applyInOrder(_ splices: [TextSplice], to text: [Unicode.Scalar]) -> [Unicode.Scalar] {
        var out = text
        for splice in splices { out.replaceSubrange(splice.offset ..< splice.offset + splice.deleteCount, with: splice.insert) }
        return out
    }

    @Test func applyingTheDiffToTheOriginalGivesTheEditedText() {
        var rng = SplitMix64(seed: 23)
        for round in 0 ..< 1500 {
            let old = Self.randomText(&rng, maxPieces: 60)
            // Mostly small edits (as in an editor); every fifth, an unrelated text.
            let new = round % 5 == 0 ? Self.randomText(&rng, maxPieces: 60) : Self.mutated(old, &rng)
            let splices = TextDiff.splices(from: old, to: new)
            #expect(TextDiff.apply(splices, to: old) == new, "round \(round)")
            // Increasing, apart (not adjacent, not overlapping), each one doing something.
            for (a, b) in zip(splices, splices.dropFirst()) { #expect(a.offset + a.deleteCount < b.offset) }
            #expect(splices.allSatisfy { $0.deleteCount > 0 || !$0.insert.isEmpty })
            if old == new { #expect(splices.isEmpty) }
            // Rebased onto the unchanged original, it is the same edit.
            #expect(Self.applyInOrder(TextDiff.rebase(original: old, edited: new, current: old), to: old) == new, "round \(round)")
        }
    }

    @Test func twoEditsFarApartAreTwoSplicesOfWhatChanged() {
        let old = "first line\nsecond line\nthird line\nfourth line\n"
        let new = "first LINE\nsecond line\nthird line\nfourth line, longer\n"
        let splices = TextDiff.splices(from: old, to: new)
        #expect(splices.count == 2)
        #expect(splices.map(\.deleteCount) == [4, 0])
        #expect(splices.map { String(String.UnicodeScalarView($0.insert)) } == ["LINE", ", longer"])
    }

    @Test func aVeryDifferentTextStillDiffsCorrectly() {
        var rng = SplitMix64(seed: 7)
        let old = (0 ..< 5000).map { _ in Unicode.Scalar(UInt8.random(in: 97 ... 122, using: &rng)) }
        let new = (0 ..< 5000).map { _ in Unicode.Scalar(UInt8.random(in: 97 ... 122, using: &rng)) }
        #expect(TextDiff.apply(TextDiff.splices(from: old, to: new), to: old) == new)
    }

    @Test func anEditMovedOntoAConcurrentEditElsewhereKeepsBoth() {
        var rng = SplitMix64(seed: 42)
        let marker = Array("\n#\n".unicodeScalars)
        for round in 0 ..< 800 {
            let first = Self.randomText(&rng, maxPieces: 30)
            let second = Self.randomText(&rng, maxPieces: 30)
            let original = first + marker + second
            let mine = Self.mutated(first, &rng)
            let theirs = Self.mutated(second, &rng)
            let rebased = TextDiff.rebase(original: original, edited: mine + marker + second, current: first + marker + theirs)
            #expect(Self.applyInOrder(rebased, to: first + marker + theirs) == mine + marker + theirs, "round \(round)")
        }
    }

    @Test func textInsertedConcurrentlyIntoADeletedRangeStays() {
        let original = Array("keep DROP THIS keep".unicodeScalars)
        let edited = Array("keep  keep".unicodeScalars)
        let current = Array("keep DROP new THIS keep".unicodeScalars)
        let result = Self.applyInOrder(TextDiff.rebase(original: original, edited: edited, current: current), to: current)
        #expect(String(String.UnicodeScalarView(result)) == "keep new  keep")
    }

    @Test func aScalarBothDeletedIsDeletedOnce() {
        let original = Array("abcdef".unicodeScalars)
        let result = Self.applyInOrder(TextDiff.rebase(original: original, edited: Array("abef".unicodeScalars),
                                                       current: Array("abdef".unicodeScalars)), to: Array("abdef".unicodeScalars))
        #expect(String(String.UnicodeScalarView(result)) == "abef")
    }
}

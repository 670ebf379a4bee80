import GRDB
#if canImport(GRDBSQLite)
import GRDBSQLite
#endif

/// The full-text tokenizer of `note_fts`: SQLite's `unicode61` (diacritics removed), with every
/// character of a script written without spaces between words (Chinese, Japanese, Korean, Thai,
/// Lao, Khmer, Myanmar) made a token of its own.
///
/// `unicode61` keeps a run of such characters as one token, so "東京で会議" is one word and
/// `search 東京` finds it only as a prefix. With one token per character, a quoted query term is
/// a phrase of its characters, which matches wherever those characters stand side by side: a
/// substring, found through the index, and ranked by bm25 like any term. Tokens of other scripts
/// are passed through as `unicode61` made them, so Latin text is indexed, ranked and searched
/// as before.
///
/// It is registered on every connection a store opens (`register(_:)`); a tool that opens the
/// database without it can read every table but `note_fts` (SQLite says "no such tokenizer").
package final class UnsegmentedScriptTokenizer: FTS5CustomTokenizer {
    package static let name = "crdtsync_unsegmented"

    private let wrapped: any FTS5Tokenizer

    package init(db: Database, arguments: [String]) throws {
        wrapped = try db.makeTokenizer(.unicode61(diacritics: .remove))
    }

    /// Makes the tokenizer known to a connection (before anything reads or writes `note_fts`).
    package static func register(_ db: Database) {
        db.add(tokenizer: UnsegmentedScriptTokenizer.self)
    }

    /// Whether a scalar belongs to a script written without spaces between words.
    static func isUnsegmented(_ value: UInt32) -> Bool {
        switch value {
        case 0x0E00...0x0EFF,           // Thai, Lao
             0x1000...0x109F,           // Myanmar
             0x1100...0x11FF,           // Hangul Jamo
             0x1780...0x17FF,           // Khmer
             0x3040...0x30FF,           // Hiragana, Katakana
             0x3130...0x318F,           // Hangul compatibility Jamo
             0x31F0...0x31FF,           // Katakana phonetic extensions
             0x3400...0x4DBF,           // CJK extension A
             0x4E00...0x9FFF,           // CJK unified ideographs
             0xA960...0xA97F,           // Hangul Jamo extended A
             0xAC00...0xD7FF,           // Hangul syllables, Jamo extended B
             0xF900...0xFAFF,           // CJK compatibility ideographs
             0xFF66...0xFF9F,           // halfwidth Katakana
             0x20000...0x3FFFF:         // CJK extensions B and later
            return true
        default:
            return false
        }
    }

    private struct Context {
        let context: UnsafeMutableRawPointer?
        let callback: FTS5TokenCallback
        let text: UnsafePointer<CChar>?
        let textLength: CInt
    }

    package func tokenize(context: UnsafeMutableRawPointer?, tokenization: FTS5Tokenization, pText: UnsafePointer<CChar>?,
                  nText: CInt, tokenCallback: @escaping FTS5TokenCallback) -> CInt {
        var outer = Context(context: context, callback: tokenCallback, text: pText, textLength: nText)
        return withUnsafeMutablePointer(to: &outer) { pointer in
            wrapped.tokenize(context: pointer, tokenization: tokenization, pText: pText, nText: nText) { raw, flags, token, length, start, end in
                let outer = raw!.assumingMemoryBound(to: Context.self).pointee
                guard let token, length > 0 else { return outer.callback(outer.context, flags, token, length, start, end) }
                return UnsegmentedScriptTokenizer.split(token, length, flags: flags, start: start, end: end, outer)
            }
        }
    }

    /// Passes a `unicode61` token on whole, or, when it holds characters of unsegmented scripts,
    /// as runs of other characters and single characters of those scripts.
    private static func split(_ token: UnsafePointer<CChar>, _ length: CInt, flags: CInt, start: CInt, end: CInt,
                              _ outer: Context) -> CInt {
        let bytes = UnsafeRawPointer(token).assumingMemoryBound(to: UInt8.self)
        let count = Int(length)
        // Unsegmented scripts all lie at or above U+0E00, whose UTF-8 starts with a byte of 0xE0 or more.
        var index = 0
        while index < count, bytes[index] < 0xE0 { index += 1 }
        if index == count { return outer.callback(outer.context, flags, token, length, start, end) }

        // Where each character of the token stands in the text, when the token is the text's
        // characters one for one (case folding and diacritics can change that; then every piece
        // points at the whole token).
        let original = scalarOffsets(outer.text, from: Int(start), to: Int(end))
        let pieces = scalarOffsets(token, from: 0, to: count)
        let mapsOneToOne = original.count == pieces.count

        var runStart = 0
        var runScalar = 0
        var scalar = 0
        var position = 0
        func emit(_ from: Int, _ to: Int, _ firstScalar: Int, _ lastScalar: Int) -> CInt {
            let pieceStart = mapsOneToOne ? CInt(original[firstScalar]) : start
            let pieceEnd = mapsOneToOne ? CInt(lastScalar + 1 < original.count ? original[lastScalar + 1] : Int(end)) : end
            return outer.callback(outer.context, flags, token + from, CInt(to - from), pieceStart, pieceEnd)
        }
        while position < count {
            let (value, width) = decode(bytes, at: position, count: count)
            if isUnsegmented(value) {
                if position > runStart {
                    let code = emit(runStart, position, runScalar, scalar - 1)
                    if code != SQLITE_OK { return code }
                }
                let code = emit(position, position + width, scalar, scalar)
                if code != SQLITE_OK { return code }
                runStart = position + width
                runScalar = scalar + 1
            }
            position += width
            scalar += 1
        }
        if count > runStart { return emit(runStart, count, runScalar, scalar - 1) }
        return SQLITE_OK
    }

    /// The byte offset of every scalar in `text[from..<to]` (relative to `text`), plus nothing
    /// else; empty when there is no text.
    private static func scalarOffsets(_ text: UnsafePointer<CChar>?, from: Int, to: Int) -> [Int] {
        guard let text, to > from else { return [] }
        let bytes = UnsafeRawPointer(text).assumingMemoryBound(to: UInt8.self)
        var offsets: [Int] = []
        var position = from
        while position < to {
            offsets.append(position)
            position += decode(bytes, at: position, count: to).width
        }
        return offsets
    }

    /// The scalar at `position` and its length in bytes; a malformed sequence counts as one byte.
    private static func decode(_ bytes: UnsafePointer<UInt8>, at position: Int, count: Int) -> (value: UInt32, width: Int) {
        let lead = bytes[position]
        let width: Int
        var value: UInt32
        switch lead {
        case 0..<0x80: return (UInt32(lead), 1)
        case 0xC0..<0xE0: width = 2; value = UInt32(lead & 0x1F)
        case 0xE0..<0xF0: width = 3; value = UInt32(lead & 0x0F)
        case 0xF0..<0xF8: width = 4; value = UInt32(lead & 0x07)
        default: return (UInt32(lead), 1)
        }
        guard position + width <= count else { return (UInt32(lead), 1) }
        for offset in 1..<width {
            let next = bytes[position + offset]
            guard next & 0xC0 == 0x80 else { return (UInt32(lead), 1) }
            value = value << 6 | UInt32(next & 0x3F)
        }
        return (value, width)
    }
}

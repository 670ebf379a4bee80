/// Cuts a note's body into chunks at content-defined boundaries, for the full-text index.
///
/// A boundary is chosen by a gear rolling hash over the last 64 UTF-8 bytes, and moved
/// forward to just after the next whitespace so a word is never split between two chunks. Because
/// a boundary depends only on the text near it, an edit changes the chunk it falls in (and rarely a
/// neighbour): a keystroke in a 100,000-character note re-indexes about a kilobyte, not the note.
enum TextChunker {
    /// No boundary is looked for before this many bytes.
    static let minimumLength = 512
    /// A boundary is forced after this many bytes (at whitespace if there is some).
    static let maximumLength = 4096
    /// A boundary candidate is a position whose hash has these bits clear (about 1 in 1,024).
    static let mask: UInt64 = (1 << 10) - 1

    static let gear: [UInt64] = {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        return (0 ..< 256).map { _ in
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }()

    /// The chunks of `text`, in order; their concatenation is `text`. Empty text has no chunk.
    ///
    /// Works on the UTF-8 bytes (lengths are in bytes); cuts only after ASCII whitespace, or, for a
    /// run of `maximumLength` bytes without any, at a scalar boundary.
    ///
    /// - Complexity: O(*n*).
    static func chunks(_ text: String) -> [String] {
        var text = text
        return text.withUTF8 { bytes in
            var start = 0
            return ends(of: bytes).map { end in
                defer { start = end }
                return String(decoding: UnsafeBufferPointer(rebasing: bytes[start ..< end]), as: UTF8.self)
            }
        }
    }

    /// Where the chunks of `bytes` end, in order (the last end is `bytes.count`): the cuts of
    /// `chunks`, without making the chunks into strings.
    ///
    /// (A body is always cut whole, not from a cut left by an earlier version of it: a chunk that
    /// reaches `maximumLength` without a cut is cut back at its last whitespace, so that cut
    /// depends on up to `maximumLength` bytes after it, and restarting there could cut
    /// differently.)
    static func ends(of bytes: UnsafeBufferPointer<UInt8>) -> [Int] {
        gear.withUnsafeBufferPointer { gear in
            var result: [Int] = []
            var start = 0
            var hash: UInt64 = 0
            var wantCut = false
            var lastSpace = -1
            var index = 0
            let count = bytes.count
            while index < count {
                let byte = bytes[index]
                index += 1
                hash = (hash << 1) &+ gear[Int(byte)]
                let length = index - start
                let isSpace = byte == 0x20 || (byte >= 0x09 && byte <= 0x0D)
                if isSpace { lastSpace = index }
                if length >= minimumLength, hash & mask == 0 { wantCut = true }
                var cut = -1
                if wantCut, isSpace {
                    cut = index
                } else if length >= maximumLength {
                    if lastSpace > start {
                        cut = lastSpace
                    } else if index < count, bytes[index] & 0xC0 != 0x80 {
                        cut = index
                    }
                }
                if cut > start {
                    result.append(cut)
                    start = cut
                    wantCut = false
                    lastSpace = -1
                }
            }
            if start < count { result.append(count) }
            return result
        }
    }
}

extension RGAText {
    /// The Unicode-scalar offset of a UTF-16 offset (as editors on Apple platforms and the web count).
    /// An offset inside a surrogate pair rounds down to the pair's start; past the end clamps to the end.
    ///
    /// - Complexity: O(*n*).
    public func scalarOffset(utf16Offset: Int) -> Int {
        TextOffsets.scalarOffset(utf16Offset: utf16Offset, in: string)
    }

    /// The UTF-16 offset of a Unicode-scalar offset.
    ///
    /// - Complexity: O(*n*).
    public func utf16Offset(scalarOffset: Int) -> Int {
        TextOffsets.utf16Offset(scalarOffset: scalarOffset, in: string)
    }

    /// The Unicode-scalar offset of a `Character` (grapheme cluster) offset.
    ///
    /// - Complexity: O(*n*).
    public func scalarOffset(characterOffset: Int) -> Int {
        TextOffsets.scalarOffset(characterOffset: characterOffset, in: string)
    }

    /// The `Character` offset of a Unicode-scalar offset; an offset inside a cluster rounds down.
    ///
    /// - Complexity: O(*n*).
    public func characterOffset(scalarOffset: Int) -> Int {
        TextOffsets.characterOffset(scalarOffset: scalarOffset, in: string)
    }
}

/// Conversions between the three ways of counting positions in a string.
public enum TextOffsets {
    /// The scalar offset of a UTF-16 offset in `text`.
    public static func scalarOffset(utf16Offset: Int, in text: String) -> Int {
        var units = 0
        var scalars = 0
        for scalar in text.unicodeScalars {
            let width = scalar.utf16.count
            if units + width > utf16Offset { return scalars }
            units += width
            scalars += 1
        }
        return scalars
    }

    /// The UTF-16 offset of a scalar offset in `text`.
    public static func utf16Offset(scalarOffset: Int, in text: String) -> Int {
        var units = 0
        for (i, scalar) in text.unicodeScalars.enumerated() {
            if i >= scalarOffset { break }
            units += scalar.utf16.count
        }
        return units
    }

    /// The scalar offset of a Character offset in `text`.
    public static func scalarOffset(characterOffset: Int, in text: String) -> Int {
        var scalars = 0
        for (i, character) in text.enumerated() {
            if i >= characterOffset { break }
            scalars += character.unicodeScalars.count
        }
        return scalars
    }

    /// The Character offset of a scalar offset in `text` (rounding down inside a cluster).
    public static func characterOffset(scalarOffset: Int, in text: String) -> Int {
        var scalars = 0
        var characters = 0
        for character in text {
            let width = character.unicodeScalars.count
            if scalars + width > scalarOffset { return characters }
            scalars += width
            characters += 1
        }
        return characters
    }
}

/// A diff of two texts as several splices, and the rebasing of such a diff onto a text that
/// changed meanwhile: what turns "the user saved this file" into the few inserts and deletes the
/// user made, so that an edit arriving from another device while the file was open survives.
///
/// Offsets are in Unicode scalars (as everywhere in the notebook). Pure functions: no I/O.
public enum TextDiff {
    /// The splices that turn `old` into `new`, in increasing offset order, each offset relative
    /// to `old` (they do not overlap and are not adjacent).
    ///
    /// Lines are compared first (Myers' algorithm over whole lines), then the scalars of each
    /// run of changed lines, so that two edits in distant places are two splices and an edit
    /// inside a line deletes and inserts only what changed. When the texts differ too much for
    /// an exact diff to be cheap (more than `maxEditDistance` lines or scalars in one region),
    /// that region becomes one splice: still correct, less minimal.
    ///
    /// - Complexity: O((*n* + *m*) *D*) in the lengths and the edit distance, bounded by `maxEditDistance`.
    public static func splices(from old: [Unicode.Scalar], to new: [Unicode.Scalar]) -> [TextSplice] {
        let oldLines = lineRanges(old)
        let newLines = lineRanges(new)
        // Lines as small integers: equal lines, equal numbers.
        var numbers: [ArraySlice<Unicode.Scalar>: Int] = [:]
        func number(_ slice: ArraySlice<Unicode.Scalar>) -> Int {
            if let existing = numbers[slice] { return existing }
            let next = numbers.count
            numbers[slice] = next
            return next
        }
        let a = oldLines.map { number(old[$0]) }
        let b = newLines.map { number(new[$0]) }
        var result: [TextSplice] = []
        for hunk in hunks(a, b) {
            let oldStart = hunk.old.lowerBound < oldLines.count ? oldLines[hunk.old.lowerBound].lowerBound : old.count
            let oldEnd = hunk.old.isEmpty ? oldStart : oldLines[hunk.old.upperBound - 1].upperBound
            let newStart = hunk.new.lowerBound < newLines.count ? newLines[hunk.new.lowerBound].lowerBound : new.count
            let newEnd = hunk.new.isEmpty ? newStart : newLines[hunk.new.upperBound - 1].upperBound
            let oldPart = Array(old[oldStart ..< oldEnd])
            let newPart = Array(new[newStart ..< newEnd])
            for inner in hunks(oldPart, newPart) {
                result.append(TextSplice(offset: oldStart + inner.old.lowerBound, deleteCount: inner.old.count,
                                         insert: Array(newPart[inner.new])))
            }
        }
        return merged(result)
    }

    /// `splices(from:to:)` of two strings' scalars.
    public static func splices(from old: String, to new: String) -> [TextSplice] {
        splices(from: Array(old.unicodeScalars), to: Array(new.unicodeScalars))
    }

    /// Applies splices (offsets relative to `text`, increasing, not overlapping) to `text`.
    public static func apply(_ splices: [TextSplice], to text: [Unicode.Scalar]) -> [Unicode.Scalar] {
        var out: [Unicode.Scalar] = []
        out.reserveCapacity(text.count)
        var position = 0
        for splice in splices {
            out.append(contentsOf: text[position ..< splice.offset])
            out.append(contentsOf: splice.insert)
            position = splice.offset + splice.deleteCount
        }
        out.append(contentsOf: text[position...])
        return out
    }

    /// The edit that turns `original` into `edited`, moved onto `current` (a later version of
    /// `original`, changed by someone else meanwhile): the splices to make on `current`, in
    /// decreasing offset order (each offset stays valid after the ones before it are made).
    ///
    /// What `current` changed is kept: a scalar both deleted is deleted once; text inserted into
    /// a range the edit deletes stays; an insert goes right after the original scalar it followed
    /// (the nearest one still in `current`), as the RGA places concurrent typing. When `current`
    /// is `original`, the result turns it into `edited` exactly.
    public static func rebase(original: [Unicode.Scalar], edited: [Unicode.Scalar],
                              current: [Unicode.Scalar]) -> [TextSplice] {
        let mine = splices(from: original, to: edited)
        if mine.isEmpty { return [] }
        // Where each scalar of the original is in `current` (nil: deleted there).
        var position = [Int?](repeating: nil, count: original.count)
        var o = 0
        var c = 0
        for theirs in (original == current ? [] : splices(from: original, to: current)) {
            while o < theirs.offset { position[o] = c; o += 1; c += 1 }
            o += theirs.deleteCount
            c += theirs.insert.count
        }
        while o < original.count { position[o] = c; o += 1; c += 1 }

        var result: [TextSplice] = []
        for splice in mine {
            // Right after the nearest original scalar before the splice that `current` still has.
            var before = splice.offset - 1
            while before >= 0, position[before] == nil { before -= 1 }
            let insertAt = before >= 0 ? position[before]! + 1 : 0
            // The original scalars the edit deletes that `current` still has, as runs.
            var runs: [Range<Int>] = []
            for index in splice.offset ..< splice.offset + splice.deleteCount {
                guard let at = position[index] else { continue }
                if let last = runs.last, last.upperBound == at {
                    runs[runs.count - 1] = last.lowerBound ..< at + 1
                } else {
                    runs.append(at ..< at + 1)
                }
            }
            var parts = runs.map { TextSplice(offset: $0.lowerBound, deleteCount: $0.count, insert: []) }
            if !splice.insert.isEmpty {
                // Joined to the first run when it starts where the insert goes: one replace.
                if let first = parts.first, first.offset == insertAt {
                    parts[0].insert = splice.insert
                } else {
                    parts.insert(TextSplice(offset: insertAt, deleteCount: 0, insert: splice.insert), at: 0)
                }
            }
            result.append(contentsOf: parts)
        }
        // Later offsets first; at one offset, the insert after the delete that starts there
        // (both are in one splice then) — a stable sort keeps the order built above otherwise.
        return result.enumerated().sorted { l, r in
            l.element.offset != r.element.offset ? l.element.offset > r.element.offset : l.offset > r.offset
        }.map(\.element)
    }

    /// The most lines (or scalars) one region may differ by before it is taken as one splice.
    public static let maxEditDistance = 2000

    // MARK: Internals

    /// Each line's range, its newline included (the last line may have none).
    static func lineRanges(_ text: [Unicode.Scalar]) -> [Range<Int>] {
        var ranges: [Range<Int>] = []
        var start = 0
        for (index, scalar) in text.enumerated() where scalar == "\n" {
            ranges.append(start ..< index + 1)
            start = index + 1
        }
        if start < text.count { ranges.append(start ..< text.count) }
        return ranges
    }

    /// Splices next to each other joined into one.
    static func merged(_ splices: [TextSplice]) -> [TextSplice] {
        var out: [TextSplice] = []
        for splice in splices where splice.deleteCount > 0 || !splice.insert.isEmpty {
            if let last = out.last, last.offset + last.deleteCount == splice.offset {
                out[out.count - 1].deleteCount += splice.deleteCount
                out[out.count - 1].insert += splice.insert
            } else {
                out.append(splice)
            }
        }
        return out
    }

    /// The changed regions between `a` and `b` (pairs of ranges, increasing), by Myers' O(ND)
    /// algorithm after the common prefix and suffix are set aside.
    static func hunks<T: Equatable>(_ a: [T], _ b: [T]) -> [(old: Range<Int>, new: Range<Int>)] {
        var prefix = 0
        let limit = min(a.count, b.count)
        while prefix < limit, a[prefix] == b[prefix] { prefix += 1 }
        var suffix = 0
        while suffix < limit - prefix, a[a.count - 1 - suffix] == b[b.count - 1 - suffix] { suffix += 1 }
        let n = a.count - prefix - suffix
        let m = b.count - prefix - suffix
        if n == 0, m == 0 { return [] }
        let whole = [(old: prefix ..< prefix + n, new: prefix ..< prefix + m)]
        if n == 0 || m == 0 { return whole }
        // Forward Myers with the V array of every step kept, to walk back the path.
        let maxD = min(n + m, maxEditDistance)
        let offset = maxD + 1
        var v = [Int](repeating: 0, count: 2 * maxD + 3)
        var trace: [[Int]] = []
        var found = -1
        search: for d in 0 ... maxD {
            trace.append(Array(v[offset - d - 1 ... offset + d + 1]))
            for k in stride(from: -d, through: d, by: 2) {
                var x: Int
                if k == -d || (k != d && v[offset + k - 1] < v[offset + k + 1]) {
                    x = v[offset + k + 1]
                } else {
                    x = v[offset + k - 1] + 1
                }
                var y = x - k
                while x < n, y < m, a[prefix + x] == b[prefix + y] { x += 1; y += 1 }
                v[offset + k] = x
                if x >= n, y >= m { found = d; break search }
            }
        }
        guard found >= 0 else { return whole }  // too different: one region
        // Walk back: each step is one deleted or inserted element, then a diagonal of equal ones.
        var edits: [(x: Int, y: Int, delete: Bool)] = []
        var x = n
        var y = m
        for d in stride(from: found, to: 0, by: -1) {
            let saved = trace[d]  // V before step d, indices -d-1 ... d+1
            func at(_ k: Int) -> Int { saved[k + d + 1] }
            let k = x - y
            let previousK = (k == -d || (k != d && at(k - 1) < at(k + 1))) ? k + 1 : k - 1
            let previousX = at(previousK)
            let previousY = previousX - previousK
            // The diagonal back to the point right after the step (x - y stays k).
            while x > previousX, y > previousY { x -= 1; y -= 1 }
            if previousK < k {
                edits.append((previousX, previousY, true))  // deleted a[previousX]
            } else {
                edits.append((previousX, previousY, false))  // inserted b[previousY]
            }
            x = previousX
            y = previousY
        }
        // Group consecutive edits into regions.
        var result: [(old: Range<Int>, new: Range<Int>)] = []
        for edit in edits.reversed() {
            let oldRange = edit.delete ? edit.x ..< edit.x + 1 : edit.x ..< edit.x
            let newRange = edit.delete ? edit.y ..< edit.y : edit.y ..< edit.y + 1
            if let last = result.last, last.old.upperBound == prefix + oldRange.lowerBound, last.new.upperBound == prefix + newRange.lowerBound {
                result[result.count - 1] = (last.old.lowerBound ..< prefix + oldRange.upperBound, last.new.lowerBound ..< prefix + newRange.upperBound)
            } else {
                result.append((prefix + oldRange.lowerBound ..< prefix + oldRange.upperBound, prefix + newRange.lowerBound ..< prefix + newRange.upperBound))
            }
        }
        return result
    }
}

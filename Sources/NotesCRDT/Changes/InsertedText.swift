/// The characters of an insert (`Operation.insertText`): a view of Unicode scalars held in a
/// buffer that other inserts may share (a byte a scalar when they are mostly ASCII: see
/// `ScalarBuffer`).
///
/// A decoder holds all the text it decodes in one buffer and gives each insert a view into it, so
/// merging a history does not allocate, fill and free an array per insert. A view is immutable
/// where other views can see it: appending writes past its end only into a buffer no other value
/// holds, and otherwise copies.
///
/// Indices are zero-based `Int`s; equality and hashing are by content, as for an array.
public struct InsertedText: RandomAccessCollection, Hashable, Sendable, ExpressibleByArrayLiteral,
                            CustomStringConvertible, CustomDebugStringConvertible {
    public typealias Element = Unicode.Scalar
    public typealias Index = Int
    public typealias Indices = Range<Int>

    /// The buffer holding the scalars (shared; safe to send: see `ScalarBuffer`).
    nonisolated(unsafe) private(set) var buffer: ScalarBuffer
    // 32 bits each, so the view is 16 bytes: `Operation.insertText` is then the largest case by
    // 7 bytes, not 15 (a buffer holds at most `ScalarBuffer.maxCount` scalars).
    private var first: UInt32
    private var length: UInt32

    /// Where the view starts in `buffer`.
    private(set) var start: Int {
        get { Int(first) }
        set { first = UInt32(newValue) }
    }

    /// The number of scalars.
    public private(set) var count: Int {
        get { Int(length) }
        set { length = UInt32(newValue) }
    }

    /// No scalars.
    public init() {
        buffer = ScalarBuffer.empty
        first = 0
        length = 0
    }

    /// A view of `count` scalars of `buffer` from `start` (which the caller has written).
    init(buffer: ScalarBuffer, start: Int, count: Int) {
        precondition(start >= 0 && count >= 0 && count <= buffer.written - start, "a view outside its buffer")
        self.buffer = buffer
        first = UInt32(start)
        length = UInt32(count)
    }

    /// The view `text` names (retaining its buffer).
    init(_ text: UnretainedText) {
        self.init(buffer: text.buffer.takeUnretainedValue(), start: text.start, count: text.count)
    }

    /// Appends `more`, widening the view when it continues it in the same buffer (no retain), else copied.
    mutating func append(contentsOf more: UnretainedText) {
        if more.buffer.toOpaque() == Unmanaged.passUnretained(buffer).toOpaque(), start + count == more.start {
            count += more.count
            return
        }
        append(contentsOf: InsertedText(more))
    }

    /// The scalars of `scalars`, copied.
    public init(_ scalars: some Sequence<Unicode.Scalar>) {
        self.init()
        append(contentsOf: scalars)
    }

    /// The scalars of a string.
    public init(_ string: String) {
        self.init(string.unicodeScalars)
    }

    /// The scalars of another view's part, sharing its buffer (no copy).
    public init(_ slice: Slice<InsertedText>) {
        self.init(buffer: slice.base.buffer, start: slice.base.start + slice.startIndex, count: slice.count)
    }

    public init(arrayLiteral elements: Unicode.Scalar...) {
        self.init(elements)
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { count }
    public var isEmpty: Bool { count == 0 }

    public subscript(position: Int) -> Unicode.Scalar {
        precondition(UInt(bitPattern: position) < UInt(bitPattern: count), "index \(position) out of range 0 ..< \(count)")
        return buffer.scalar(at: start + position)
    }

    /// Whether the two values view one buffer (what tests of the decoder ask).
    package func sharesBuffer(with other: InsertedText) -> Bool { buffer === other.buffer }

    /// Whether the scalars are stored a byte each (see `ScalarBuffer`; what tests ask).
    package var isCompact: Bool { !buffer.isWide }

    /// Calls `body` with the scalars in place, or, when they are stored a byte each, widened into
    /// a temporary buffer.
    public func withUnsafeBufferPointer<R>(_ body: (UnsafeBufferPointer<Unicode.Scalar>) throws -> R) rethrows -> R {
        try withScalars(in: 0 ..< count, body)
    }

    /// Calls `body` with the scalars of `range` (positions in this view): in place when the buffer
    /// is wide, else widened into a temporary buffer.
    func withScalars<R>(in range: Range<Int>, _ body: (UnsafeBufferPointer<Unicode.Scalar>) throws -> R) rethrows -> R {
        precondition(range.lowerBound >= 0 && range.upperBound <= count, "a range outside the view")
        let from = start + range.lowerBound
        if buffer.isWide {
            return try withExtendedLifetime(buffer) { try body(UnsafeBufferPointer(start: buffer.wideElements + from, count: range.count)) }
        }
        return try withUnsafeTemporaryAllocation(of: Unicode.Scalar.self, capacity: range.count) { wide in
            buffer.widen(from: from, count: range.count, into: wide.baseAddress!)
            return try body(UnsafeBufferPointer(wide))
        }
    }

    /// Appends the scalars' UTF-8 to `out`: a compact buffer's bytes between its escapes as they
    /// are (they are the UTF-8), the escaped scalars encoded.
    func appendUTF8(to out: inout [UInt8]) {
        guard !buffer.isWide else {
            return withUnsafeBufferPointer { scalars in
                for scalar in scalars {
                    if scalar.value < 0x80 { out.append(UInt8(truncatingIfNeeded: scalar.value)) } else { UTF8.encode(scalar) { out.append($0) } }
                }
            }
        }
        let bytes = buffer.bytes
        let end = start + count
        var from = start
        buffer.withUnsafeMutablePointerToHeader { header in
            header.pointee.wide.withUnsafeBufferPointer { table in
                var k = table.isEmpty ? 0 : ScalarBuffer.slot(of: start, in: table)
                while k < table.count, Int(table[k] >> 32) < end {
                    let position = Int(table[k] >> 32)
                    out.append(contentsOf: UnsafeBufferPointer(start: bytes + from, count: position - from))
                    UTF8.encode(Unicode.Scalar(UInt32(truncatingIfNeeded: table[k]))!) { out.append($0) }
                    from = position + 1
                    k += 1
                }
            }
        }
        out.append(contentsOf: UnsafeBufferPointer(start: bytes + from, count: end - from))
    }

    /// Writes the UTF-8 of the scalars in `range` of a compact view to `out`, and returns how many
    /// bytes that took: the bytes between escapes as they are, the escaped scalars encoded.
    @inline(__always)
    func writeCompactUTF8(in range: Range<Int>, to out: UnsafeMutablePointer<UInt8>) -> Int {
        let bytes = buffer.bytes
        let end = start + range.upperBound
        var from = start + range.lowerBound
        var at = 0
        buffer.withUnsafeMutablePointerToHeader { header in
            header.pointee.wide.withUnsafeBufferPointer { table in
                guard !table.isEmpty else { return }
                var k = ScalarBuffer.slot(of: from, in: table)
                while k < table.count, Int(table[k] >> 32) < end {
                    let position = Int(table[k] >> 32)
                    (out + at).update(from: bytes + from, count: position - from)
                    at += position - from
                    UTF8.encode(Unicode.Scalar(UInt32(truncatingIfNeeded: table[k]))!) { out[at] = $0; at += 1 }
                    from = position + 1
                    k += 1
                }
            }
        }
        (out + at).update(from: bytes + from, count: end - from)
        return at + end - from
    }

    /// Only a wide buffer's scalars are in place (a compact one's would need a copy).
    public func withContiguousStorageIfAvailable<R>(_ body: (UnsafeBufferPointer<Unicode.Scalar>) throws -> R) rethrows -> R? {
        guard buffer.isWide else { return nil }
        return try withUnsafeBufferPointer(body)
    }

    public static func == (a: InsertedText, b: InsertedText) -> Bool {
        guard a.count == b.count else { return false }
        if a.buffer === b.buffer, a.start == b.start { return true }
        return a.withUnsafeBufferPointer { x in
            b.withUnsafeBufferPointer { y in
                for i in 0 ..< x.count where x[i] != y[i] { return false }
                return true
            }
        }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(count)
        // The scalars' 32-bit values whatever the storage, so equal texts hash alike.
        withUnsafeBufferPointer { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    public var description: String {
        var string = ""
        string.unicodeScalars.append(contentsOf: self)
        return string.debugDescription
    }

    public var debugDescription: String { description }

    /// Appends the scalars of `more`: by widening the view when `more` follows it in the same
    /// buffer (as consecutive decoded inserts do), in place when no other value holds the buffer
    /// and the view ends where its writes end, by copying otherwise.
    public mutating func append(contentsOf more: InsertedText) {
        if more.buffer === buffer, start + count == more.start {
            count += more.count
            return
        }
        guard !more.isEmpty else { return }
        if !more.buffer.isWide {
            // Byte for byte, with the wide scalars' entries moved over (no widening).
            reserve(more.count)
            let at = start + count
            buffer.copyCompact(from: more.buffer, at: more.start, count: more.count, to: at)
            buffer.written += more.count
            count += more.count
            settle()
            return
        }
        more.withUnsafeBufferPointer { append($0) }
    }

    /// Appends scalars, copied.
    public mutating func append(contentsOf more: some Sequence<Unicode.Scalar>) {
        if let view = more as? InsertedText { return append(contentsOf: view) }
        if more.withContiguousStorageIfAvailable({ append($0) }) != nil { return }
        // Room for what the sequence promises at once (a string's scalars: all of them).
        var iterator = more.makeIterator()
        let promised = more.underestimatedCount
        if promised > 0 {
            reserve(promised)
            let at = start + count
            for i in 0 ..< promised { buffer.set(iterator.next()!, at: at + i) }
            buffer.written = at + promised
            count += promised
            settle()
        }
        while let scalar = iterator.next() { append(scalar) }
    }

    /// Appends a string's scalars in one pass: room for its UTF-8 length first (at least as many
    /// as it has scalars, and known without walking it), then each scalar written in place.
    mutating func append(scalarsOf string: String) {
        let most = string.utf8.count
        guard most > 0 else { return }
        reserve(most)
        var at = start + count
        for scalar in string.unicodeScalars {
            buffer.set(scalar, at: at)
            at += 1
        }
        buffer.written = at
        count = at - start
        settle()
    }

    /// Appends one scalar.
    public mutating func append(_ scalar: Unicode.Scalar) {
        reserve(1)
        let at = start + count
        buffer.set(scalar, at: at)
        buffer.written = at + 1
        count += 1
        if scalar.value >= 0x80 { settle() }
    }

    private mutating func append(_ more: UnsafeBufferPointer<Unicode.Scalar>) {
        guard !more.isEmpty else { return }
        reserve(more.count)
        let at = start + count
        if buffer.isWide {
            (buffer.wideElements + at).initialize(from: more.baseAddress!, count: more.count)
        } else {
            for i in 0 ..< more.count { buffer.set(more[i], at: at + i) }
        }
        buffer.written += more.count
        count += more.count
        settle()
    }

    /// Makes room for `capacity` scalars in all, in a buffer only this value holds, with nothing
    /// written after the view (a text's arena, before a large change is integrated).
    mutating func reserveCapacity(_ capacity: Int) {
        if capacity > count { reserve(capacity - count) }
    }

    /// Makes room for `extra` more scalars after the view, in a buffer only this value holds, that
    /// has nothing written after the view (copying the view into a new buffer, grown geometrically,
    /// otherwise).
    @inline(__always)
    private mutating func reserve(_ extra: Int) {
        let end = start + count
        if isKnownUniquelyReferenced(&buffer), buffer.written == end, buffer.room - end >= extra { return }
        grow(extra)
    }

    @inline(never)
    private mutating func grow(_ extra: Int) {
        let needed = count + extra
        precondition(extra <= ScalarBuffer.maxCount - count, "an insert of more than \(ScalarBuffer.maxCount) scalars")
        let wide = buffer.isWide && count > 0
        let fresh = ScalarBuffer.make(capacity: Swift.min(Swift.max(needed, 2 * count), ScalarBuffer.maxCount), wide: wide)
        copy(into: fresh)
    }

    /// Copies the view into `fresh` (empty) and views it there.
    private mutating func copy(into fresh: ScalarBuffer) {
        if fresh.isWide {
            buffer.widen(from: start, count: count, into: fresh.wideElements)
        } else {
            fresh.copyCompact(from: buffer, at: start, count: count, to: 0)
        }
        fresh.written = count
        buffer = fresh
        start = 0
    }

    /// After wide scalars were written into a compact buffer: moves the view to a wide one when
    /// they are too many for the byte form to pay (see `ScalarBuffer.prefersWide`).
    @inline(__always)
    private mutating func settle() {
        guard !buffer.isWide, ScalarBuffer.prefersWide(count: buffer.written, wideScalars: buffer.wideTotal) else { return }
        let fresh = ScalarBuffer.make(capacity: Swift.max(buffer.room, count), wide: true)
        copy(into: fresh)
    }
}

/// The storage of `InsertedText`s: scalars, the first `written` of them set (and never written
/// again, except past the end by the only value holding the buffer).
///
/// Compact (a byte per scalar) or wide (four). In a compact buffer a byte below 0x80 is the
/// scalar; `ScalarBuffer.escape` stands for a scalar past U+007F, kept in the header's table of
/// positions and values (sorted by position, as scalars are only ever written at the end). Most
/// text (code, English prose) is ASCII with a few other scalars: a byte a scalar takes a quarter
/// of the memory a merge writes for the text, and fresh memory is what a cold merge pays for.
/// Text with many scalars past U+007F (more than one in eight) is kept wide.
///
/// Safe to share between threads, though `ManagedBuffer` cannot say so: a scalar any view can see
/// is never written again; one is written only past every view's end, through a buffer uniquely
/// referenced (or by a decoder that has not yet handed its views out). The table likewise only
/// grows at its end, under the same rule.
final class ScalarBuffer: ManagedBuffer<ScalarBuffer.Header, UInt8> {
    struct Header {
        /// How many scalars are written, from the start.
        var count: Int
        /// How many fit.
        var capacity: Int
        /// Bytes a scalar: 1 (compact) or 4 (wide). (An `Int`, not a `Bool`: the header's size
        /// stays a multiple of 8, so a wide buffer's scalars are aligned.)
        var width: Int
        /// A compact buffer's scalars past U+007F: position << 32 | value, by position.
        var wide: [UInt64]
    }

    /// The byte that stands for a scalar past U+007F in a compact buffer.
    static let escape: UInt8 = 0xFF

    /// The most scalars a buffer holds (views count them in 32 bits).
    static let maxCount = Int(UInt32.max)

    /// Whether scalars of which `wideScalars` of `count` are past U+007F are better kept wide: past
    /// one in eight the compact form saves less than half the room (a table entry is 8 bytes) and
    /// every eighth read is a search of the table.
    @inline(__always)
    static func prefersWide(count: Int, wideScalars: Int) -> Bool {
        wideScalars > 16 && wideScalars * 8 > count
    }

    /// How many scalars are written. Through the header's pointer: the `header` property is a
    /// class's stored property, whose writes check exclusivity at run time (a `swift_beginAccess`
    /// per typed character).
    var written: Int {
        @inline(__always) get { withUnsafeMutablePointerToHeader { $0.pointee.count } }
        @inline(__always) set { withUnsafeMutablePointerToHeader { $0.pointee.count = newValue } }
    }

    /// How many scalars fit (through the header's pointer, as `written`).
    var room: Int {
        @inline(__always) get { withUnsafeMutablePointerToHeader { $0.pointee.capacity } }
    }

    /// Whether the scalars take four bytes each.
    var isWide: Bool {
        @inline(__always) get { withUnsafeMutablePointerToHeader { $0.pointee.width == 4 } }
    }

    /// How many scalars past U+007F a compact buffer holds.
    var wideTotal: Int {
        @inline(__always) get { withUnsafeMutablePointerToHeader { $0.pointee.wide.count } }
    }

    /// A wide buffer's scalars.
    var wideElements: UnsafeMutablePointer<Unicode.Scalar> {
        @inline(__always) get {
            withUnsafeMutablePointerToElements { UnsafeMutableRawPointer($0).assumingMemoryBound(to: Unicode.Scalar.self) }
        }
    }

    /// A compact buffer's bytes.
    var bytes: UnsafeMutablePointer<UInt8> {
        @inline(__always) get { withUnsafeMutablePointerToElements { $0 } }
    }

    /// The scalar at `position` (written).
    @inline(__always)
    func scalar(at position: Int) -> Unicode.Scalar {
        withUnsafeMutablePointerToHeader { header in
            if header.pointee.width == 4 { return wideElements[position] }
            let byte = bytes[position]
            if byte != ScalarBuffer.escape { return Unicode.Scalar(byte) }
            return header.pointee.wide.withUnsafeBufferPointer { table in
                Unicode.Scalar(UInt32(truncatingIfNeeded: table[ScalarBuffer.slot(of: position, in: table)]))!
            }
        }
    }

    /// Writes `scalar` at `position` (past every view's end; its table entry appended).
    @inline(__always)
    func set(_ scalar: Unicode.Scalar, at position: Int) {
        withUnsafeMutablePointerToHeader { header in
            if header.pointee.width == 4 {
                (wideElements + position).initialize(to: scalar)
            } else if scalar.value < 0x80 {
                bytes[position] = UInt8(truncatingIfNeeded: scalar.value)
            } else {
                bytes[position] = ScalarBuffer.escape
                header.pointee.wide.append(UInt64(position) << 32 | UInt64(scalar.value))
            }
        }
    }

    /// The first table entry at or past `position`.
    @inline(__always)
    static func slot(of position: Int, in table: UnsafeBufferPointer<UInt64>) -> Int {
        let key = UInt64(position) << 32
        var low = 0
        var high = table.count
        while low < high {
            let mid = (low + high) / 2
            if table[mid] < key { low = mid + 1 } else { high = mid }
        }
        return low
    }

    /// How many of the `count` scalars from `from` are past U+007F (0 in a wide buffer: it keeps no table).
    func wideCount(from: Int, count: Int) -> Int {
        withUnsafeMutablePointerToHeader { header in
            header.pointee.wide.withUnsafeBufferPointer { table in
                table.isEmpty ? 0 : ScalarBuffer.slot(of: from + count, in: table) - ScalarBuffer.slot(of: from, in: table)
            }
        }
    }

    /// Writes the `count` scalars from `from` four bytes each into `out`.
    func widen(from: Int, count: Int, into out: UnsafeMutablePointer<Unicode.Scalar>) {
        guard count > 0 else { return }
        if isWide {
            out.initialize(from: wideElements + from, count: count)
            return
        }
        let source = bytes + from
        var i = 0
        // Sixteen at a time in vector registers (escapes included: they are put right below).
        while i + 16 <= count {
            let chunk = UnsafeRawPointer(source + i).loadUnaligned(as: SIMD16<UInt8>.self)
            UnsafeMutableRawPointer(out + i).storeBytes(of: SIMD16<UInt32>(truncatingIfNeeded: chunk), as: SIMD16<UInt32>.self)
            i += 16
        }
        while i < count {
            (out + i).initialize(to: Unicode.Scalar(source[i]))
            i += 1
        }
        withUnsafeMutablePointerToHeader { header in
            header.pointee.wide.withUnsafeBufferPointer { table in
                var k = ScalarBuffer.slot(of: from, in: table)
                while k < table.count, Int(table[k] >> 32) < from + count {
                    out[Int(table[k] >> 32) - from] = Unicode.Scalar(UInt32(truncatingIfNeeded: table[k]))!
                    k += 1
                }
            }
        }
    }

    /// Copies `count` scalars of the compact buffer `source` from `at` to `to` in this one (compact,
    /// written up to `to`), with their table entries.
    func copyCompact(from source: ScalarBuffer, at: Int, count: Int, to: Int) {
        guard count > 0 else { return }
        if isWide {
            source.widen(from: at, count: count, into: wideElements + to)
            return
        }
        (bytes + to).initialize(from: source.bytes + at, count: count)
        let entries: [UInt64] = source.withUnsafeMutablePointerToHeader { header in
            header.pointee.wide.withUnsafeBufferPointer { table in
                var k = ScalarBuffer.slot(of: at, in: table)
                var moved: [UInt64] = []
                while k < table.count, Int(table[k] >> 32) < at + count {
                    moved.append(UInt64(Int(table[k] >> 32) - at + to) << 32 | table[k] & 0xFFFF_FFFF)
                    k += 1
                }
                return moved
            }
        }
        if !entries.isEmpty { withUnsafeMutablePointerToHeader { $0.pointee.wide.append(contentsOf: entries) } }
    }

    /// A compact buffer of no scalars, shared by every empty view.
    nonisolated(unsafe) static let empty = make(capacity: 0)

    /// A buffer with room for `capacity` scalars (none written), compact unless `wide`.
    static func make(capacity: Int, wide: Bool = false) -> ScalarBuffer {
        precondition(capacity >= 0 && capacity <= maxCount, "a buffer of \(capacity) scalars")
        let width = wide ? 4 : 1
        // All the room the allocator gave, as an array takes it: a run typed a scalar at a time
        // then grows in fewer, larger steps (each step is a block freed, and the heap fragments).
        let made = ScalarBuffer.create(minimumCapacity: capacity * width) {
            Header(count: 0, capacity: Swift.min($0.capacity / width, maxCount), width: width, wide: [])
        }
        let buffer = unsafeDowncast(made, to: ScalarBuffer.self)
        if wide {
            buffer.withUnsafeMutablePointerToElements { elements in
                precondition(Int(bitPattern: elements) % 4 == 0, "a wide buffer's scalars misaligned")
                _ = UnsafeMutableRawPointer(elements).bindMemory(to: Unicode.Scalar.self, capacity: buffer.room)
            }
        }
        return buffer
    }
}

/// An insert's text read from its operation without retaining its buffer (an atomic increment
/// and decrement per applied insert): valid only while the operation that holds it is.
struct UnretainedText {
    let buffer: Unmanaged<ScalarBuffer>
    let start: Int
    let count: Int

    init(buffer: Unmanaged<ScalarBuffer>, start: Int, count: Int) {
        self.buffer = buffer
        self.start = start
        self.count = count
    }

    /// The view of `text`, which the caller keeps alive while this is used.
    init(_ text: InsertedText) {
        self.init(buffer: .passUnretained(text.buffer), start: text.start, count: text.count)
    }
}

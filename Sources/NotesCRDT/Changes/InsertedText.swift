/// The characters of an insert (`Operation.insertText`): a view of Unicode scalars held in a
/// buffer that other inserts may share.
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
        return buffer.withUnsafeMutablePointerToElements { $0[start + position] }
    }

    /// Whether the two values view one buffer (what tests of the decoder ask).
    package func sharesBuffer(with other: InsertedText) -> Bool { buffer === other.buffer }

    /// Calls `body` with the scalars in place.
    public func withUnsafeBufferPointer<R>(_ body: (UnsafeBufferPointer<Unicode.Scalar>) throws -> R) rethrows -> R {
        try buffer.withUnsafeMutablePointerToElements { elements in
            try body(UnsafeBufferPointer(start: elements + start, count: count))
        }
    }

    public func withContiguousStorageIfAvailable<R>(_ body: (UnsafeBufferPointer<Unicode.Scalar>) throws -> R) rethrows -> R? {
        try withUnsafeBufferPointer(body)
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
        more.withUnsafeBufferPointer { append($0) }
    }

    /// Appends scalars, copied.
    public mutating func append(contentsOf more: some Sequence<Unicode.Scalar>) {
        if more.withContiguousStorageIfAvailable({ append($0) }) != nil { return }
        // Room for what the sequence promises at once (a string's scalars: all of them).
        var iterator = more.makeIterator()
        let promised = more.underestimatedCount
        if promised > 0 {
            reserve(promised)
            let at = start + count
            buffer.withUnsafeMutablePointerToElements { elements in
                for i in 0 ..< promised { (elements + at + i).initialize(to: iterator.next()!) }
            }
            buffer.written += promised
            count += promised
        }
        while let scalar = iterator.next() { append(scalar) }
    }

    /// Appends a string's scalars in one pass: room for its UTF-8 length first (at least as many
    /// as it has scalars, and known without walking it), then each scalar written in place.
    mutating func append(scalarsOf string: String) {
        let most = string.utf8.count
        guard most > 0 else { return }
        reserve(most)
        let at = start + count
        var written = 0
        buffer.withUnsafeMutablePointerToElements { elements in
            for scalar in string.unicodeScalars {
                (elements + at + written).initialize(to: scalar)
                written += 1
            }
        }
        buffer.written += written
        count += written
    }

    /// Appends one scalar.
    public mutating func append(_ scalar: Unicode.Scalar) {
        reserve(1)
        let at = start + count
        buffer.withUnsafeMutablePointerToElements { ($0 + at).initialize(to: scalar) }
        buffer.written += 1
        count += 1
    }

    private mutating func append(_ more: UnsafeBufferPointer<Unicode.Scalar>) {
        guard !more.isEmpty else { return }
        reserve(more.count)
        let at = start + count
        buffer.withUnsafeMutablePointerToElements { ($0 + at).initialize(from: more.baseAddress!, count: more.count) }
        buffer.written += more.count
        count += more.count
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
        let fresh = ScalarBuffer.make(capacity: Swift.min(Swift.max(needed, 2 * count), ScalarBuffer.maxCount))
        withUnsafeBufferPointer { old in
            fresh.withUnsafeMutablePointerToElements { $0.initialize(from: old.baseAddress!, count: old.count) }
        }
        fresh.written = count
        buffer = fresh
        start = 0
    }
}

/// The storage of `InsertedText`s: scalars, the first `written` of them set (and never written
/// again, except past the end by the only value holding the buffer).
///
/// Safe to share between threads, though `ManagedBuffer` cannot say so: a scalar any view can see
/// is never written again; one is written only past every view's end, through a buffer uniquely
/// referenced (or by a decoder that has not yet handed its views out).
final class ScalarBuffer: ManagedBuffer<ScalarBuffer.Header, Unicode.Scalar> {
    struct Header {
        /// How many scalars are written, from the start.
        var count: Int
        /// How many fit.
        var capacity: Int
    }

    /// The most scalars a buffer holds (views count them in 32 bits).
    static let maxCount = Int(UInt32.max)

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

    /// A buffer of no scalars, shared by every empty view.
    nonisolated(unsafe) static let empty = make(capacity: 0)

    /// A buffer with room for `capacity` scalars (none written).
    static func make(capacity: Int) -> ScalarBuffer {
        precondition(capacity >= 0 && capacity <= maxCount, "a buffer of \(capacity) scalars")
        // All the room the allocator gave, as an array takes it: a run typed a scalar at a time
        // then grows in fewer, larger steps (each step is a block freed, and the heap fragments).
        let made = ScalarBuffer.create(minimumCapacity: capacity) { Header(count: 0, capacity: Swift.min($0.capacity, maxCount)) }
        return unsafeDowncast(made, to: ScalarBuffer.self)
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

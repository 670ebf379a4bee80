/// The body of a note: an RGA sequence of Unicode scalars.
///
/// Each character has an identity `(replica, seq)`, the identity of the character it was inserted
/// after (its origin), a key (its timestamp), and a deleted flag. A new character goes right after
/// its origin, after skipping the items that sort before it (greater key first, ties broken by the
/// greater replica ID). Characters typed one after another are held as one run.
///
/// A value type with copy-on-write storage. Edits go through `Notebook`, which assigns identities
/// and timestamps; this type exposes reading, and the primitive integration the notebook uses.
public struct RGAText: @unchecked Sendable {  // a value with copy-on-write storage: the box is written only when uniquely referenced
    /// The tree, in a box so that copying a text (handing out a body, copying a note record) is
    /// one reference count, not one per array of the tree; the box is copied on write. A
    /// `ManagedBuffer` header, because its address is stable: reads borrow the tree through it
    /// (a stored property of a class would be copied out, array by array, on every read).
    final class Box: ManagedBuffer<RGATree, UInt8> {
        static func make(_ tree: RGATree) -> Box {
            unsafeDowncast(Box.create(minimumCapacity: 0) { _ in tree }, to: Box.self)
        }

        var treePointer: UnsafeMutablePointer<RGATree> { withUnsafeMutablePointerToHeader { $0 } }
    }

    var box: Box
    /// Set only in a replica opened from a snapshot with its log deferred: the visible text and
    /// its length, before any tree is built. Such a text is read through `string` and `count`
    /// only; the notebook replaces it with a real one before anything else can reach it.
    var deferredText: (string: String, count: Int)?

    /// The tree, borrowed for reading or uniquely owned for writing (never copied on access).
    var tree: RGATree {
        _read {
            assert(deferredText == nil, "the tree of a text whose log is deferred")
            yield box.treePointer.pointee
        }
        _modify {
            if !isKnownUniquelyReferenced(&box) { box = Box.make(box.header) }
            yield &box.treePointer.pointee
        }
    }

    /// An empty text.
    public init() { box = Box.make(RGATree()) }

    /// A text over a tree built elsewhere (a decoded note state).
    init(tree: RGATree) { box = Box.make(tree) }

    /// An empty text shared by every user, to hold a record's place while its text is edited
    /// elsewhere (never written: a write would copy it first).
    static let placeholder = RGAText()

    /// A text known only by its visible content (see `deferredText`).
    init(deferredText: String, count: Int) {
        self.init()
        self.deferredText = (deferredText, count)
    }

    /// The number of visible Unicode scalars.
    ///
    /// - Complexity: O(1).
    public var count: Int { deferredText?.count ?? tree.visibleCount }

    /// Whether no scalar is visible.
    public var isEmpty: Bool { count == 0 }

    /// The visible text.
    ///
    /// - Complexity: O(*n*).
    public var string: String { deferredText?.string ?? tree.string }

    /// The visible text as UTF-8 bytes, without making them a `String` (which checks every byte
    /// again).
    ///
    /// - Complexity: O(*n*).
    public var utf8: [UInt8] {
        if let deferredText { return Array(deferredText.string.utf8) }
        return tree.utf8
    }

    /// Whether the visible text is `string` scalar for scalar, without building the text.
    /// (Stricter than `text.string == string`, which compares canonical equivalence: "é" as one
    /// scalar or as "e" and a combining accent are equal strings, but not the same text.)
    ///
    /// - Complexity: O(*n*), with no allocation.
    public func spells(_ string: String) -> Bool {
        if let deferredText { return deferredText.string.unicodeScalars.elementsEqual(string.unicodeScalars) }
        return tree.spells(string)
    }

    /// The number of characters ever inserted, tombstones included.
    public var totalCharacters: Int { tree.totalCharacters }

    /// The number of runs that hold the characters (a measure of fragmentation).
    public var runCount: Int { tree.leaves.reduce(0) { $0 + $1.runs.count } }


    /// What a local insert at `position` needs to know: the origin, the origin's key, and the key
    /// of the origin's first existing child (a new local character must sort before it).
    struct InsertContext {
        var origin: OpID?
        var originKey: UInt64?
        var firstChildKey: UInt64?
        /// Where the origin is in the tree (valid until the text changes).
        var originPosition: RGATree.Position?
        var originAgent: Int32 = -1
    }

    func insertContext(at position: Int) -> InsertContext {
        if position == 0 {
            guard let first = tree.firstItem(fromRun: 0, in: 0) else { return InsertContext() }
            let childKey = tree.isChild(first, ofAgent: -1, seq: 0) ? tree.key(at: first) : nil
            return InsertContext(origin: nil, originKey: nil, firstChildKey: childKey)
        }
        let at = tree.findVisible(position - 1)
        let run = tree.leaves[Int(at.leaf)].runs[at.run]
        let originSeq = run.seq + UInt64(at.offset)
        var childKey: UInt64? = nil
        if let next = tree.next(after: at), tree.isChild(next, ofAgent: run.agent, seq: originSeq) {
            childKey = tree.key(at: next)
        }
        return InsertContext(origin: OpID(replica: tree.agents[Int(run.agent)], seq: originSeq),
                             originKey: run.key + UInt64(at.offset), firstChildKey: childKey,
                             originPosition: at, originAgent: run.agent)
    }

    /// Inserts new characters where `context` (just computed, the text unchanged since) says:
    /// exactly what `integrate(id:origin:key:scalars:)` does with its origin, without looking the
    /// origin up again.
    mutating func integrate(id: OpID, context: InsertContext, key: UInt64, scalars: some Collection<Unicode.Scalar>) {
        let agent = tree.agent(for: id.replica)
        tree.integrate(agent: agent, seq: id.seq, key: key, originAgent: context.originAgent,
                       originSeq: context.origin?.seq ?? 0, originPosition: context.originPosition, scalars: scalars)
    }

    /// Whether the character with this identity is in the text (visible or deleted).
    ///
    /// - Complexity: O(log *n*).
    public func contains(_ id: OpID) -> Bool {
        guard let agent = tree.existingAgent(id.replica) else { return false }
        return tree.find(agent: agent, seq: id.seq) != nil
    }

    /// The seq just past the run that holds the character `id`, or nil when it is not in the text.
    ///
    /// - Complexity: O(log *n*).
    func runEnd(containing id: OpID) -> UInt64? {
        guard let agent = tree.existingAgent(id.replica), let at = tree.find(agent: agent, seq: id.seq) else { return nil }
        let run = tree.leaves[Int(at.leaf)].runs[at.run]
        return run.seq + UInt64(run.length)
    }

    /// Inserts characters whose first identity is `id` after `origin` (nil: the document start).
    /// The origin must be in the text.
    mutating func integrate(id: OpID, origin: OpID?, key: UInt64, scalars: some Collection<Unicode.Scalar>) {
        let agent = tree.agent(for: id.replica)
        var originAgent: Int32 = -1
        var originSeq: UInt64 = 0
        if let origin {
            originAgent = tree.agent(for: origin.replica)
            originSeq = origin.seq
        }
        tree.integrate(agent: agent, seq: id.seq, key: key, originAgent: originAgent, originSeq: originSeq, scalars: scalars)
    }

    /// Makes room for `characters` more inserted characters whose identities span `seqSpan`
    /// sequence numbers of one replica, so a large change grows the arrays once instead of
    /// doubling them (each doubling of a large array copies it into freshly faulted pages).
    mutating func reserve(characters: Int, seqSpan: UInt64) {
        guard characters > 1024 else { return }
        tree.reserve(characters: characters, seqSpan: seqSpan)
    }

    /// Marks the characters of `range` deleted (all must be in the text).
    ///
    /// - Returns: how many of them were visible.
    @discardableResult
    mutating func delete(_ range: OpIDRange) -> Int {
        guard range.count > 0 else { return 0 }
        let agent = tree.agent(for: range.replica)
        return tree.delete(agent: agent, seq: range.seq, count: range.count)
    }

    /// The identities of the visible characters in `range`.
    ///
    /// - Complexity: O(log *n* + runs in the range).
    public func identities(of range: Range<Int>) -> [OpIDRange] {
        let ranges = tree.visibleRanges(start: range.lowerBound, count: range.count)
        var result: [OpIDRange] = []
        result.reserveCapacity(ranges.count)
        for r in ranges { result.append(OpIDRange(replica: tree.agents[Int(r.agent)], seq: r.seq, count: r.count)) }
        return result
    }

    /// Deletes the visible characters in `range` and returns their identities.
    ///
    /// - Complexity: O(log *n* + runs in the range).
    mutating func deleteVisible(_ range: Range<Int>) -> [OpIDRange] {
        tree.deleteVisible(start: range.lowerBound, count: range.count)
    }

    /// The identity of the visible character at `position`.
    ///
    /// - Complexity: O(log *n*).
    public func identity(at position: Int) -> OpID {
        let at = tree.findVisible(position)
        let run = tree.leaves[Int(at.leaf)].runs[at.run]
        return OpID(replica: tree.agents[Int(run.agent)], seq: run.seq + UInt64(at.offset))
    }

    /// The visible position of the character with this identity, or nil when it is deleted or absent.
    ///
    /// - Complexity: O(log *n*).
    public func position(of id: OpID) -> Int? {
        guard let agent = tree.existingAgent(id.replica), let at = tree.find(agent: agent, seq: id.seq) else { return nil }
        let runs = tree.leaves[Int(at.leaf)].runs
        if runs[at.run].deleted { return nil }
        var position = tree.visibleIndexOfLeafStart(at.leaf)
        for run in runs[..<at.run] where !run.deleted { position += Int(run.length) }
        return position + at.offset
    }
}

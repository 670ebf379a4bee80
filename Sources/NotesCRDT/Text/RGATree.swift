/// The storage behind `RGAText`: an order-statistic B+-tree of runs with visible counts, an arena of
/// inserted scalars kept apart from the CRDT metadata, and an index from operation ID to leaf.
///
/// Nodes live in two arrays and refer to each other by index, so there is no reference counting on
/// the hot path. RGA never removes an item (deletes leave tombstones), so nodes only ever split.
///
/// A value type: every part is an array, so a copy shares storage until one side writes (and, unlike
/// a class, its stored properties need no dynamic exclusivity checks on every access).
struct RGATree: Sendable {
    /// A run of consecutive characters: inserted by one replica with consecutive sequence numbers
    /// and consecutive keys, each after the previous, all deleted or all visible.
    ///
    /// 40 bytes, not 48: the arena offset in 32 bits (the arena holds at most
    /// `ScalarBuffer.maxCount` scalars) and the tombstone in the length's sign bit (a length is
    /// positive). Every run is written once by a merge's list form and once more into a leaf, and
    /// the fresh pages they take are much of what a first merge costs (Docs/Performance.md).
    struct Run {
        var seq: UInt64
        var key: UInt64
        var originSeq: UInt64
        /// Where its scalars start in the arena.
        private var contentStart: UInt32
        var agent: Int32
        var originAgent: Int32  // -1: the start of the document
        /// The length in the low 31 bits, the tombstone in the top one.
        private var lengthAndDeleted: UInt32

        init(seq: UInt64, key: UInt64, originSeq: UInt64, content: Int, agent: Int32, originAgent: Int32,
             length: Int32, deleted: Bool) {
            precondition(length >= 0, "a run of negative length")
            self.seq = seq
            self.key = key
            self.originSeq = originSeq
            self.contentStart = UInt32(content)  // traps past the arena's bound, as an index would
            self.agent = agent
            self.originAgent = originAgent
            self.lengthAndDeleted = UInt32(bitPattern: length) | (deleted ? 1 << 31 : 0)
        }

        /// Where its scalars start in the arena.
        var content: Int {
            @inline(__always) get { Int(contentStart) }
            @inline(__always) set { contentStart = UInt32(newValue) }
        }

        var length: Int32 {
            @inline(__always) get { Int32(bitPattern: lengthAndDeleted & 0x7FFF_FFFF) }
            @inline(__always) set {
                // (Lengths are positive: a split's parts, a run's characters.)
                lengthAndDeleted = lengthAndDeleted & 0x8000_0000 | UInt32(bitPattern: newValue) & 0x7FFF_FFFF
            }
        }

        var deleted: Bool {
            @inline(__always) get { lengthAndDeleted & 0x8000_0000 != 0 }
            @inline(__always) set { lengthAndDeleted = lengthAndDeleted & 0x7FFF_FFFF | (newValue ? 0x8000_0000 : 0) }
        }

        /// The run cut before `offset` (0 < offset < length): its first characters, and the rest,
        /// whose first character now has the last of the first part as its origin.
        @inline(__always)  // a call returned both runs through memory (a split is a few stores)
        func split(at offset: Int) -> (head: Run, tail: Run) {
            var head = self
            var tail = self
            head.length = Int32(offset)
            tail.seq += UInt64(offset)
            tail.key += UInt64(offset)
            tail.content += offset
            tail.length -= Int32(offset)
            tail.originAgent = agent
            tail.originSeq = tail.seq - 1
            return (head, tail)
        }
    }

    struct Leaf {
        var runs: [Run] = []
        var visible: Int = 0
        var parent: Int32 = -1
        var next: Int32 = -1
    }

    struct Inner {
        var children: [Int32] = []
        var visible: Int = 0
        var parent: Int32 = -1
        var leafChildren: Bool
    }

    /// The ID index maps every inserted character `(agent, seq)` to the leaf that holds it: a
    /// direct map in pages of `pageSize` sequence numbers, allocated only for the pages an agent
    /// inserted into this text. Lookup is O(log pages) with a shortcut for the last page used;
    /// moving runs to a new leaf costs one write per character moved.
    struct PageEntry {
        var page: UInt64
        var start: Int32
    }

    struct Position {
        var leaf: Int32
        var run: Int
        var offset: Int
    }

    static let leafCapacity = 64
    static let innerCapacity = 32

    var agents: [ReplicaID] = []
    /// Agent numbers by replica, kept once there are more than 8 agents (a scan finds fewer).
    var agentIndex: [ReplicaID: Int32] = [:]
    /// The inserted scalars, in the order inserted. A view like an insert's text: a text built
    /// from a decoded history in the list form is a view of the decoder's buffer, which the log's
    /// inserts share, and it is copied only when the text is next written to.
    var arena = InsertedText()
    var leaves: [Leaf] = [Leaf()]
    var inners: [Inner] = []
    var root: Int32 = 0
    var rootIsLeaf = true
    /// Per agent, its pages of the ID index sorted by page number.
    var pageTables: [[PageEntry]] = []
    /// The pages' contents: leaf numbers; -1 where no character of this text has that identity;
    /// -2 - *r* for a character of the list form's run *r* (see `RGABulkList`), whose leaf is
    /// `leafOfRun[r]`.
    var leafMap: [Int32] = []
    /// The leaf of each run of the list form that built the tree, for the entries that name one:
    /// the list form leaves each character's entry as it was written, so that building the tree
    /// does not rewrite the whole index. (A leaf split writes the leaf of the characters it moves;
    /// nothing else moves a character to another leaf.)
    var leafOfRun: [Int32] = []
    /// How much of `leafMap` the pages take; past it, empty pages made ahead (all -1).
    var leafMapUsed = 0
    var totalCharacters = 0

    /// Pages of 32 identities (128 bytes): small, because a note edited now and then over a long
    /// life touches a new page at every session (its replica's seqs interleave with other notes'),
    /// and large enough that a typed run fills a page or two.
    static let pageShift: UInt64 = 5
    static let pageSize = 1 << 5

    init() {}

    /// Makes room in the arena and the ID index for `characters` more characters whose identities
    /// span `seqSpan` sequence numbers of one replica.
    mutating func reserve(characters: Int, seqSpan: UInt64) {
        // (Not into an empty arena: the list form may take the decoded text as it is.)
        if !arena.isEmpty { arena.reserveCapacity(arena.count + characters) }
        let pages = Int(min(seqSpan, UInt64(Int32.max)) >> RGATree.pageShift) + 2
        leafMap.reserveCapacity(leafMap.count + pages * RGATree.pageSize)
    }

    /// Appends inserted scalars to the arena: copied in bulk when they lie in one buffer (a
    /// decoded insert's view), which the generic append would read one checked index at a time.
    @inline(__always)
    mutating func appendToArena(_ scalars: some Collection<Unicode.Scalar>) {
        // A view that continues the arena's in its buffer (a decoded insert after the one before
        // it) only widens it.
        if let view = scalars as? InsertedText { return arena.append(contentsOf: view) }
        if scalars.count == 1, let only = scalars.first { return arena.append(only) }  // a keystroke: no copy call
        if scalars.withContiguousStorageIfAvailable({ arena.append(contentsOf: $0) }) == nil {
            arena.append(contentsOf: scalars)
        }
    }

    var visibleCount: Int { rootIsLeaf ? leaves[Int(root)].visible : inners[Int(root)].visible }

    // MARK: Agents

    /// The index of a known replica, or nil. A linear scan for the usual few replicas (no hashing).
    @inline(__always)
    func existingAgent(_ replica: ReplicaID) -> Int32? {
        if agents.count <= 8 {
            for i in agents.indices where agents[i] == replica { return Int32(i) }
            return nil
        }
        return agentIndex[replica]
    }

    mutating func agent(for replica: ReplicaID) -> Int32 {
        if let existing = existingAgent(replica) { return existing }
        let new = Int32(agents.count)
        agents.append(replica)
        // The table serves only past 8 agents: most notes have one or two, and an empty
        // dictionary per note cost a notebook of 80,000 notes about 16 MB.
        if agents.count == 9 {
            for (i, agent) in agents.enumerated() { agentIndex[agent] = Int32(i) }
        } else if agents.count > 9 {
            agentIndex[replica] = new
        }
        pageTables.append([])
        return new
    }

    /// Whether the item `(keyA, agentA)` sorts before `(keyB, agentB)` among siblings:
    /// greater key first, ties broken by the greater replica ID.
    @inline(__always)
    func precedes(_ keyA: UInt64, _ agentA: Int32, _ keyB: UInt64, _ agentB: Int32) -> Bool {
        if keyA != keyB { return keyA > keyB }
        return agents[Int(agentA)] > agents[Int(agentB)]
    }

    // MARK: Lookup

    /// Where the page of `page` is in the agent's page table, or where it would go.
    ///
    /// - Parameter hint: a slot to try first (the page after the one a caller found last).
    @inline(__always)
    func pageSlot(agent: Int32, page: UInt64, hint: Int = -1) -> (index: Int, found: Bool) {
        pageTables[Int(agent)].withUnsafeBufferPointer { table in
            if let last = table.last {
                if last.page == page { return (table.count - 1, true) }
                if last.page < page { return (table.count, false) }
            }
            if hint >= 0, hint < table.count, table[hint].page == page { return (hint, true) }
            var low = 0
            var high = table.count
            // Interpolate, then gallop from the guess to bracket the page: the pages a replica's
            // typing fills are spread roughly evenly over its seqs (the gaps are its deletes and
            // its edits of other notes), so the guess is near, and the search stays in a few
            // cache lines instead of halving the whole table.
            if let first = table.first, let last = table.last, page > first.page, page < last.page {
                // In floating point: a 128-bit division was a visible part of every lookup, and
                // the guess need not be exact (it is clamped, then searched from).
                let fraction = Double(page - first.page) / Double(last.page - first.page)
                let guess = min(max(Int(fraction * Double(table.count - 1)), 0), table.count - 1)
                var step = 1
                if table[guess].page < page {
                    low = guess + 1
                    while guess + step < table.count {
                        if table[guess + step].page >= page { high = guess + step; break }
                        low = guess + step + 1
                        step *= 2
                    }
                } else {
                    high = guess
                    while guess - step >= 0 {
                        if table[guess - step].page < page { low = guess - step + 1; break }
                        high = guess - step
                        step *= 2
                    }
                }
            }
            while low < high {
                let mid = (low + high) / 2
                if table[mid].page < page { low = mid + 1 } else { high = mid }
            }
            return (low, low < table.count && table[low].page == page)
        }
    }

    /// The leaf that holds the character `(agent, seq)`, from the ID index.
    ///
    /// - Complexity: O(log *p*), *p* the number of index pages of that agent.
    func leafHolding(agent: Int32, seq: UInt64) -> Int32? {
        let (slot, found) = pageSlot(agent: agent, page: seq >> RGATree.pageShift)
        guard found else { return nil }
        let entry = leafMap[Int(pageTables[Int(agent)][slot].start) + Int(seq & UInt64(RGATree.pageSize - 1))]
        if entry >= 0 { return entry }
        return entry == -1 ? nil : leafOfRun[Int(-2 - entry)]
    }

    /// The position of the character `(agent, seq)`, or nil when it is not in the text.
    ///
    /// - Complexity: O(log *n*) plus a scan of one leaf.
    func find(agent: Int32, seq: UInt64) -> Position? {
        guard let leaf = leafHolding(agent: agent, seq: seq) else { return nil }
        return leaves[Int(leaf)].runs.withUnsafeBufferPointer { runs in
            for i in runs.indices where runs[i].agent == agent && seq >= runs[i].seq && seq < runs[i].seq + UInt64(runs[i].length) {
                return Position(leaf: leaf, run: i, offset: Int(seq - runs[i].seq))
            }
            return nil
        }
    }

    /// The position of the visible character at `visibleIndex` (which must be in range).
    ///
    /// - Complexity: O(log *n*).
    func findVisible(_ visibleIndex: Int) -> Position {
        var remaining = visibleIndex
        var node = root
        var isLeaf = rootIsLeaf
        // Indexes into the node arrays, not copies of nodes: a copy would retain their arrays.
        while !isLeaf {
            let leafChildren = inners[Int(node)].leafChildren
            let childCount = inners[Int(node)].children.count
            var chosen = inners[Int(node)].children[childCount - 1]
            for i in 0 ..< childCount {
                let child = inners[Int(node)].children[i]
                let count = leafChildren ? leaves[Int(child)].visible : inners[Int(child)].visible
                if remaining < count { chosen = child; break }
                remaining -= count
            }
            node = chosen
            isLeaf = leafChildren
        }
        for i in 0 ..< leaves[Int(node)].runs.count where !leaves[Int(node)].runs[i].deleted {
            let length = Int(leaves[Int(node)].runs[i].length)
            if remaining < length { return Position(leaf: node, run: i, offset: remaining) }
            remaining -= length
        }
        preconditionFailure("visible index out of range")
    }

    /// The visible index of the first character of the given leaf.
    func visibleIndexOfLeafStart(_ leaf: Int32) -> Int {
        var total = 0
        var child = leaf
        var parent = leaves[Int(leaf)].parent
        var childIsLeaf = true
        while parent >= 0 {
            let inner = inners[Int(parent)]
            for sibling in inner.children {
                if sibling == child { break }
                total += childIsLeaf ? leaves[Int(sibling)].visible : inners[Int(sibling)].visible
            }
            child = parent
            childIsLeaf = false
            parent = inner.parent
        }
        return total
    }

    /// The item that follows `position` in document order (tombstones included), if any.
    func next(after position: Position) -> Position? {
        let run = leaves[Int(position.leaf)].runs[position.run]
        if position.offset + 1 < Int(run.length) {
            return Position(leaf: position.leaf, run: position.run, offset: position.offset + 1)
        }
        return firstItem(fromRun: position.run + 1, in: position.leaf)
    }

    func firstItem(fromRun run: Int, in leaf: Int32) -> Position? {
        var leaf = leaf
        var run = run
        while true {
            if run < leaves[Int(leaf)].runs.count { return Position(leaf: leaf, run: run, offset: 0) }
            let next = leaves[Int(leaf)].next
            if next < 0 { return nil }
            leaf = next
            run = 0
        }
    }

    func key(at position: Position) -> UInt64 {
        leaves[Int(position.leaf)].runs[position.run].key + UInt64(position.offset)
    }

    /// Whether the item at `position` has `(originAgent, originSeq)` as its origin.
    func isChild(_ position: Position, ofAgent originAgent: Int32, seq originSeq: UInt64) -> Bool {
        let run = leaves[Int(position.leaf)].runs[position.run]
        if position.offset > 0 { return run.agent == originAgent && run.seq + UInt64(position.offset) - 1 == originSeq }
        return run.originAgent == originAgent && run.originSeq == originSeq
    }

    // MARK: Integration

    /// Places a run of new characters after their origin, by the RGA rule: skip the items that
    /// sort before it (greater key first), stop at the first that does not.
    ///
    /// The origin must exist (checked by the caller). Extends the previous run in place when the
    /// new characters continue it.
    ///
    /// - Complexity: O(log *n*) plus the concurrent items skipped.
    /// - Parameter originPosition: where the origin is, when the caller knows (a local insert
    ///   found it by visible offset); otherwise it is looked up by identity.
    mutating func integrate(agent: Int32, seq: UInt64, key: UInt64, originAgent: Int32, originSeq: UInt64,
                            originPosition: Position? = nil, scalars: some Collection<Unicode.Scalar>) {
        let length = scalars.count
        guard length > 0 else { return }
        var leaf: Int32
        var run: Int
        var offset: Int
        if originAgent < 0 {
            leaf = 0; run = 0; offset = 0
        } else {
            let origin = originPosition ?? find(agent: originAgent, seq: originSeq)!
            leaf = origin.leaf
            if origin.offset + 1 < Int(leaves[Int(leaf)].runs[origin.run].length) {
                run = origin.run; offset = origin.offset + 1
            } else {
                run = origin.run + 1; offset = 0
            }
        }
        // Scan past the items that sort before the new run.
        while true {
            if run == leaves[Int(leaf)].runs.count {
                let nextLeaf = leaves[Int(leaf)].next
                guard nextLeaf >= 0, let first = leaves[Int(nextLeaf)].runs.first,
                      precedes(first.key, first.agent, key, agent) else { break }
                leaf = nextLeaf; run = 0; offset = 0
                continue
            }
            let item = leaves[Int(leaf)].runs[run]
            if precedes(item.key + UInt64(offset), item.agent, key, agent) {
                run += 1; offset = 0
            } else {
                break
            }
        }
        var insertAt = run
        if offset > 0 {
            splitRun(leaf: leaf, run: run, at: offset)
            insertAt = run + 1
        }
        let contentStart = arena.count
        appendToArena(scalars)
        totalCharacters += length
        var extended = false
        if insertAt > 0 {
            let prev = leaves[Int(leaf)].runs[insertAt - 1]
            let prevLength = UInt64(prev.length)
            if prev.agent == agent, !prev.deleted, prev.seq + prevLength == seq, prev.key + prevLength == key,
               prev.content + Int(prev.length) == contentStart,
               originAgent == agent, originSeq == seq - 1, Int(prev.length) + length < Int(Int32.max) {
                leaves[Int(leaf)].runs[insertAt - 1].length += Int32(length)
                extended = true
            }
        }
        if !extended {
            let new = Run(seq: seq, key: key, originSeq: originSeq, content: contentStart, agent: agent,
                          originAgent: originAgent, length: Int32(length), deleted: false)
            leaves[Int(leaf)].runs.insert(new, at: insertAt)
        }
        assignIndex(agent: agent, from: seq, to: seq + UInt64(length), leaf: leaf)
        addVisible(length, toLeaf: leaf)
        if leaves[Int(leaf)].runs.count > RGATree.leafCapacity { splitLeaf(leaf) }
    }

    /// Marks `count` characters of one agent, from `seq` on, as deleted. All must exist.
    ///
    /// - Returns: how many were visible before.
    @discardableResult
    mutating func delete(agent: Int32, seq: UInt64, count: UInt64) -> Int {
        var seq = seq
        var remaining = count
        var removed = 0
        while remaining > 0 {
            let position = find(agent: agent, seq: seq)!
            let leaf = position.leaf
            let run = leaves[Int(leaf)].runs[position.run]
            let take = min(UInt64(Int(run.length) - position.offset), remaining)
            if !run.deleted {
                var target = position.run
                if position.offset > 0 {
                    splitRun(leaf: leaf, run: target, at: position.offset)
                    target += 1
                }
                if take < UInt64(leaves[Int(leaf)].runs[target].length) {
                    splitRun(leaf: leaf, run: target, at: Int(take))
                }
                leaves[Int(leaf)].runs[target].deleted = true
                addVisible(-Int(take), toLeaf: leaf)
                removed += Int(take)
                if leaves[Int(leaf)].runs.count > RGATree.leafCapacity { splitLeaf(leaf) }
            }
            seq += take
            remaining -= take
        }
        return removed
    }

    /// Deletes the visible characters in `start ..< start + count` and returns their identities.
    /// (One method of the tree, so the caller's access to it is one in-place modification.)
    mutating func deleteVisible(start: Int, count: Int) -> [OpIDRange] {
        let ranges = visibleRanges(start: start, count: count)
        var result: [OpIDRange] = []
        result.reserveCapacity(ranges.count)
        for r in ranges {
            result.append(OpIDRange(replica: agents[Int(r.agent)], seq: r.seq, count: r.count))
            delete(agent: r.agent, seq: r.seq, count: r.count)
        }
        return result
    }

    /// The identities of the visible characters in `start ..< start + count`, as ranges.
    func visibleRanges(start: Int, count: Int) -> [(agent: Int32, seq: UInt64, count: UInt64)] {
        guard count > 0 else { return [] }
        var result: [(agent: Int32, seq: UInt64, count: UInt64)] = []
        let position = findVisible(start)
        var remaining = count
        var leaf = position.leaf
        var run = position.run
        var offset = position.offset
        while remaining > 0 {
            if run == leaves[Int(leaf)].runs.count {
                leaf = leaves[Int(leaf)].next
                run = 0
                offset = 0
                precondition(leaf >= 0, "range past the end of the text")
                continue
            }
            let item = leaves[Int(leaf)].runs[run]
            if !item.deleted {
                let take = min(Int(item.length) - offset, remaining)
                let seq = item.seq + UInt64(offset)
                if let last = result.last, last.agent == item.agent, last.seq + last.count == seq {
                    result[result.count - 1].count += UInt64(take)
                } else {
                    result.append((item.agent, seq, UInt64(take)))
                }
                remaining -= take
            }
            run += 1
            offset = 0
        }
        return result
    }

    // MARK: Reading

    /// Whether the visible text is `string` scalar for scalar: its UTF-8 compared with the
    /// scalars' as they are walked, without building the text.
    func spells(_ string: String) -> Bool {
        var string = string
        return string.withUTF8 { bytes in
            var at = 0
            var same = true
            forEachVisibleBuffer { scalars in
                guard same else { return }
                same = {
                    for scalar in scalars {
                        let value = scalar.value
                        // The scalar's UTF-8 (at most four bytes), written out as the string stores it.
                        let length = value < 0x80 ? 1 : value < 0x800 ? 2 : value < 0x10000 ? 3 : 4
                        guard at + length <= bytes.count else { return false }
                        switch length {
                        case 1:
                            guard bytes[at] == UInt8(truncatingIfNeeded: value) else { return false }
                        case 2:
                            guard bytes[at] == UInt8(truncatingIfNeeded: 0xC0 | value >> 6),
                                  bytes[at + 1] == UInt8(truncatingIfNeeded: 0x80 | value & 0x3F) else { return false }
                        case 3:
                            guard bytes[at] == UInt8(truncatingIfNeeded: 0xE0 | value >> 12),
                                  bytes[at + 1] == UInt8(truncatingIfNeeded: 0x80 | value >> 6 & 0x3F),
                                  bytes[at + 2] == UInt8(truncatingIfNeeded: 0x80 | value & 0x3F) else { return false }
                        default:
                            guard bytes[at] == UInt8(truncatingIfNeeded: 0xF0 | value >> 18),
                                  bytes[at + 1] == UInt8(truncatingIfNeeded: 0x80 | value >> 12 & 0x3F),
                                  bytes[at + 2] == UInt8(truncatingIfNeeded: 0x80 | value >> 6 & 0x3F),
                                  bytes[at + 3] == UInt8(truncatingIfNeeded: 0x80 | value & 0x3F) else { return false }
                        }
                        at += length
                    }
                    return true
                }()
            }
            return same && at == bytes.count
        }
    }

    /// The visible text's UTF-8 bytes: `string` without making them a string (which checks them
    /// all again).
    var utf8: [UInt8] {
        [UInt8](unsafeUninitializedCapacity: utf8Count) { buffer, initialized in initialized = writeUTF8(into: buffer) }
    }

    /// The visible text, written as UTF-8 straight into the string's storage: one pass to size it,
    /// one to write it (no scalar-by-scalar appends to a `String.UnicodeScalarView`, and no
    /// intermediate byte array).
    var string: String {
        let length = utf8Count
        guard length > 0 else { return "" }
        return String(unsafeUninitializedCapacity: length) { writeUTF8(into: $0) }
    }

    /// Calls `body` with each visible run's place in the arena, in document order: each leaf's
    /// runs are read through one buffer, not retained as slices run by run.
    @inline(__always)
    func forEachVisibleRange(_ body: (Range<Int>) -> Void) {
        leaves.withUnsafeBufferPointer { leaves in
            var leaf: Int32 = 0
            while leaf >= 0 {
                leaves[Int(leaf)].runs.withUnsafeBufferPointer { runs in
                    for run in runs where !run.deleted { body(run.content ..< run.content + Int(run.length)) }
                }
                leaf = leaves[Int(leaf)].next
            }
        }
    }

    /// Calls `body` with each visible run's scalars, in document order (in place, or widened
    /// when the arena is compact).
    func forEachVisibleBuffer(_ body: (UnsafeBufferPointer<Unicode.Scalar>) -> Void) {
        forEachVisibleRange { arena.withScalars(in: $0, body) }
    }

    /// The length of the visible text's UTF-8, or with a compact arena at most that.
    private var utf8Count: Int {
        // A compact arena's at most, without a pass over the runs: a byte a scalar, four for each
        // escaped one in its buffer (counted exactly when that would be more than twice the text).
        if arena.isCompact, 3 * arena.buffer.wideTotal <= visibleCount { return visibleCount + 3 * arena.buffer.wideTotal }
        var length = 0
        forEachVisibleBuffer { scalars in
            // Eight ASCII scalars (the usual) at a time, then branch-free: the bytes past the first of each.
            let ascii = RGATree.asciiPrefix(scalars)
            var extra = 0
            for scalar in scalars[ascii...] {
                let value = scalar.value
                extra &+= (value >= 0x80 ? 1 : 0) &+ (value >= 0x800 ? 1 : 0) &+ (value >= 0x10000 ? 1 : 0)
            }
            length &+= scalars.count &+ extra
        }
        return length
    }

    /// Writes the visible text's UTF-8 into `buffer` (of at least `utf8Count` bytes).
    ///
    /// - Returns: the number of bytes written.
    private func writeUTF8(into buffer: UnsafeMutableBufferPointer<UInt8>) -> Int {
        var at = 0
        let out = buffer.baseAddress!
        if arena.isCompact {
            // The bytes are the UTF-8 but for the escaped scalars.
            forEachVisibleRange { at += arena.writeCompactUTF8(in: $0, to: out + at) }
            return at
        }
        forEachVisibleBuffer { scalars in
            // Eight ASCII scalars at a time, narrowed in vector registers, then one by one.
            var ascii = 0
            if let base = scalars.baseAddress {
                let source = UnsafeRawPointer(base)
                while ascii + 8 <= scalars.count, RGATree.isASCII8(source + 4 * ascii) {
                    let wide = source.loadUnaligned(fromByteOffset: 4 * ascii, as: SIMD8<UInt32>.self)
                    UnsafeMutableRawPointer(out + at).storeBytes(of: SIMD8<UInt8>(truncatingIfNeeded: wide), as: SIMD8<UInt8>.self)
                    at += 8
                    ascii += 8
                }
            }
            for scalar in scalars[ascii...] {
                let value = scalar.value
                if value < 0x80 {
                    out[at] = UInt8(truncatingIfNeeded: value)
                    at += 1
                } else {
                    UTF8.encode(scalar) { out[at] = $0; at += 1 }
                }
            }
        }
        return at
    }

    /// How many of the first scalars, a multiple of eight, are below U+0080 (read eight at a time).
    @inline(__always)
    private static func asciiPrefix(_ scalars: UnsafeBufferPointer<Unicode.Scalar>) -> Int {
        guard let base = scalars.baseAddress else { return 0 }
        var k = 0
        while k + 8 <= scalars.count, isASCII8(UnsafeRawPointer(base) + 4 * k) { k += 8 }
        return k
    }

    /// Whether the eight scalars at `raw` are below U+0080 (tested as four words).
    @inline(__always)
    private static func isASCII8(_ raw: UnsafeRawPointer) -> Bool {
        let a = raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self) | raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
        let b = raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self) | raw.loadUnaligned(fromByteOffset: 24, as: UInt64.self)
        return (a | b) & 0xFFFF_FF80_FFFF_FF80 == 0
    }

    /// Every run in document order, tombstones included.
    func allRuns() -> [Run] {
        var result: [Run] = []
        var leaf: Int32 = 0
        while leaf >= 0 {
            result.append(contentsOf: leaves[Int(leaf)].runs)
            leaf = leaves[Int(leaf)].next
        }
        return result
    }

    // MARK: Tree maintenance

    private mutating func splitRun(leaf: Int32, run: Int, at offset: Int) {
        let (head, tail) = leaves[Int(leaf)].runs[run].split(at: offset)
        leaves[Int(leaf)].runs[run] = head
        leaves[Int(leaf)].runs.insert(tail, at: run + 1)
    }

    private mutating func addVisible(_ delta: Int, toLeaf leaf: Int32) {
        leaves[Int(leaf)].visible += delta
        var parent = leaves[Int(leaf)].parent
        while parent >= 0 {
            inners[Int(parent)].visible += delta
            parent = inners[Int(parent)].parent
        }
    }

    /// Records in the ID index that sequence numbers `from ..< to` of `agent` live in `leaf`.
    ///
    /// - Complexity: O(`to - from`) plus a page lookup per page touched.
    ///
    /// - Returns: the slot of the last page written (a hint for the caller's next run).
    @discardableResult
    mutating func assignIndex(agent: Int32, from: UInt64, to: UInt64, leaf: Int32, hint: Int = -1) -> Int {
        var seq = from
        var hint = hint
        while seq < to {
            let page = seq >> RGATree.pageShift
            let (slot, found) = pageSlot(agent: agent, page: page, hint: hint)
            if !found { addPage(agent: agent, page: page, at: slot) }
            let base = Int(pageTables[Int(agent)][slot].start)
            let pageEnd = (page + 1) << RGATree.pageShift
            let end = min(to, pageEnd)
            let lo = base + Int(seq & UInt64(RGATree.pageSize - 1))
            let hi = lo + Int(end - seq)
            leafMap.withUnsafeMutableBufferPointer { buffer in
                for i in lo ..< hi { buffer[i] = leaf }
            }
            seq = end
            hint = end < to ? slot + 1 : slot
        }
        return hint
    }

    /// Allocates the ID index page `page` of `agent`, empty, at `slot` of its page table, and
    /// returns where its entries start in `leafMap`.
    @discardableResult
    mutating func addPage(agent: Int32, page: UInt64, at slot: Int) -> Int32 {
        if leafMapUsed == leafMap.count {
            // Empty pages made a few at once (up to an eighth more than there are, at most 128):
            // making them one at a time cost more than filling the page's characters.
            let pages = min(max(leafMap.count >> (RGATree.pageShift + 3), 1), 128)
            leafMap.append(contentsOf: repeatElement(-1, count: pages << RGATree.pageShift))
        }
        let start = Int32(leafMapUsed)
        leafMapUsed += RGATree.pageSize
        // New pages mostly come last (seqs grow): an append, not the general insertion.
        if slot == pageTables[Int(agent)].count {
            pageTables[Int(agent)].append(PageEntry(page: page, start: start))
        } else {
            pageTables[Int(agent)].insert(PageEntry(page: page, start: start), at: slot)
        }
        return start
    }

    /// Allocates, empty, the ID index pages `first ... last` of `agent` that come after its last
    /// page (the pages of a large batch's new characters, made at once instead of one by one).
    ///
    /// - Returns: the first page made and where it starts in `leafMap` (the others follow it
    ///   there, in order), or nil when none was made.
    @discardableResult
    mutating func addPages(agent: Int32, from first: UInt64, through last: UInt64) -> (page: UInt64, start: Int)? {
        var first = first
        if let end = pageTables[Int(agent)].last?.page { first = max(first, end + 1) }
        guard first <= last else { return nil }
        let count = Int(last - first + 1)
        let used = leafMapUsed + count << RGATree.pageShift
        precondition(used <= Int(Int32.max), "an ID index past 2^31 entries")
        if used > leafMap.count { leafMap.append(contentsOf: repeatElement(-1, count: used - leafMap.count)) }
        let start = leafMapUsed
        // Filled in a buffer, then appended in one copy (an append each checks the table's uniqueness).
        let pages = [PageEntry](unsafeUninitializedCapacity: count) { buffer, initialized in
            for k in 0 ..< count {
                (buffer.baseAddress! + k).initialize(to: PageEntry(page: first + UInt64(k), start: Int32(truncatingIfNeeded: start + k << RGATree.pageShift)))
            }
            initialized = count
        }
        if pageTables[Int(agent)].isEmpty {
            pageTables[Int(agent)] = pages  // (appending copied them an element at a time)
        } else {
            pageTables[Int(agent)].append(contentsOf: pages)
        }
        leafMapUsed = used
        return (first, start)
    }

    private mutating func recountLeaf(_ leaf: Int32) {
        var total = 0
        for run in leaves[Int(leaf)].runs where !run.deleted { total += Int(run.length) }
        leaves[Int(leaf)].visible = total
    }

    private mutating func recountInner(_ node: Int32) {
        let inner = inners[Int(node)]
        var total = 0
        for child in inner.children {
            total += inner.leafChildren ? leaves[Int(child)].visible : inners[Int(child)].visible
        }
        inners[Int(node)].visible = total
    }

    private mutating func splitLeaf(_ leaf: Int32) {
        // No local copy of the runs array: it would make the removal below copy it.
        let mid = leaves[Int(leaf)].runs.count / 2
        let newLeaf = Int32(leaves.count)
        var sibling = Leaf()
        sibling.runs = Array(leaves[Int(leaf)].runs[mid...])
        sibling.next = leaves[Int(leaf)].next
        sibling.parent = leaves[Int(leaf)].parent
        leaves.append(sibling)
        leaves[Int(leaf)].runs.removeSubrange(mid...)
        leaves[Int(leaf)].next = newLeaf
        recountLeaf(leaf)
        recountLeaf(newLeaf)
        // Runs next to each other are mostly next to each other in seq too: each run's page is
        // tried at the slot where the previous run ended before searching.
        var hint = -1
        var hintAgent: Int32 = -1
        for i in 0 ..< leaves[Int(newLeaf)].runs.count {
            let run = leaves[Int(newLeaf)].runs[i]
            hint = assignIndex(agent: run.agent, from: run.seq, to: run.seq + UInt64(run.length), leaf: newLeaf,
                               hint: run.agent == hintAgent ? hint : -1)
            hintAgent = run.agent
        }
        insertChild(newLeaf, after: leaf, isLeaf: true)
    }

    private mutating func insertChild(_ child: Int32, after existing: Int32, isLeaf: Bool) {
        let parent = isLeaf ? leaves[Int(existing)].parent : inners[Int(existing)].parent
        if parent < 0 {
            let newRoot = Int32(inners.count)
            var node = Inner(leafChildren: isLeaf)
            node.children = [existing, child]
            inners.append(node)
            setParent(existing, isLeaf: isLeaf, to: newRoot)
            setParent(child, isLeaf: isLeaf, to: newRoot)
            recountInner(newRoot)
            root = newRoot
            rootIsLeaf = false
            return
        }
        let at = inners[Int(parent)].children.firstIndex(of: existing)!
        inners[Int(parent)].children.insert(child, at: at + 1)
        setParent(child, isLeaf: isLeaf, to: parent)
        if inners[Int(parent)].children.count > RGATree.innerCapacity { splitInner(parent) }
    }

    private mutating func setParent(_ node: Int32, isLeaf: Bool, to parent: Int32) {
        if isLeaf { leaves[Int(node)].parent = parent } else { inners[Int(node)].parent = parent }
    }

    private mutating func splitInner(_ node: Int32) {
        let mid = inners[Int(node)].children.count / 2
        let leafChildren = inners[Int(node)].leafChildren
        let newNode = Int32(inners.count)
        var sibling = Inner(leafChildren: leafChildren)
        sibling.children = Array(inners[Int(node)].children[mid...])
        sibling.parent = inners[Int(node)].parent
        inners.append(sibling)
        inners[Int(node)].children.removeSubrange(mid...)
        for child in inners[Int(newNode)].children { setParent(child, isLeaf: leafChildren, to: newNode) }
        recountInner(node)
        recountInner(newNode)
        insertChild(newNode, after: node, isLeaf: false)
    }
}

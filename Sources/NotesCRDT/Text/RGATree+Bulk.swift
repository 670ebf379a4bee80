/// A text taken apart into a doubly linked list of runs, for integrating a large batch of remote
/// operations at once (a whole history arriving at a fresh replica, a replica replaying its log).
///
/// In the tree every insert pays for the order-statistic bookkeeping (visible counts up to the
/// root, leaf splits and the ID index rewrites they cause) and every delete splits runs inside a
/// leaf array. In the list an insert or a split is a few index writes, and the tree is built once
/// at the end, leaf by leaf. The integration rule is the tree's, step for step (RGA: skip the
/// items that sort before the new run, from just after its origin), so both give the same
/// characters, keys, origins and tombstones; only where runs are cut may differ.
///
/// The ID index (`tree.pageTables` / `tree.leafMap`) maps a character to a run here (entry
/// -2 - *r* for run *r*), and the rebuilt tree resolves such an entry through the leaf of that run
/// (`RGATree.leafOfRun`). Each entry is written once, when its character is inserted, and names
/// the insert's first piece; a split of a run makes a new piece without writing any entry, and a
/// lookup walks from the first piece to the one that holds the character. An insert cut into more
/// than `maxPieces` pieces has its entries pointed at its pieces (one write per character, once),
/// and from then on each split points the entries of its shorter part at it, so a lookup is never
/// more than `maxPieces` steps and the rewrites stay O(*n* log *n*) in all. Building the tree then
/// writes only the entries of pieces that end up in another leaf than their insert's first piece.
struct RGABulkList {
    /// The agents, the arena and the ID index of the text; its nodes are rebuilt by `finish()`.
    fileprivate var tree: RGATree
    private var runs: [RGATree.Run] = []
    /// Per run, the runs after and before it in document order (-1: none), in one array: two
    /// arrays cost more uniqueness and bounds checks (about 2% more instructions in a merge).
    private var links: [Link] = []

    struct Link {
        var next: Int32
        var previous: Int32
        /// The run's insert's next piece in seq order (-1: none), while the insert's entries name
        /// its first piece.
        var nextPiece: Int32
        /// The first piece of the run's insert, while the insert's entries name it; -1 when the
        /// entries of the run's characters name the run itself.
        var firstPiece: Int32
        /// In a first piece: how many pieces its insert has.
        var pieces: Int32
    }

    /// The most pieces an insert is cut into before its entries are pointed at each piece: the
    /// longest walk a lookup takes.
    static let maxPieces: Int32 = 8
    private var head: Int32 = -1
    /// Whether the batch's references are checked as it is integrated (see
    /// `RGAText.withCheckedBulkList`), instead of by `Notebook.validate` before.
    let checksReferences: Bool
    /// The first reference found to a character the text does not hold (when checking); nothing
    /// more is integrated after it.
    private(set) var missing: MissingReference?
    /// Recent ID index pages, (agent, page) → where the page starts in `tree.leafMap`: edits
    /// come back to the characters just typed or deleted, and a page, once made, stays where it is
    /// in `leafMap`, so most lookups skip the search of the agent's page table.
    private var pageCache = [CachedPage](repeating: CachedPage(agent: -1, start: 0, slot: 0, page: 0), count: RGABulkList.pageCacheSize)

    struct CachedPage {
        var agent: Int32
        var start: Int32
        /// Where the page was in its agent's table (pages made later may have moved it).
        var slot: Int32
        var page: UInt64
    }

    static let pageCacheSize = 64

    enum MissingReference: Equatable {
        case origin(OpID)
        case deleted(OpIDRange)
    }

    /// Takes the tree apart: its runs in document order, the ID index pointing at them.
    init(_ tree: consuming RGATree, checkingReferences: Bool = false) {
        self.tree = tree
        self.checksReferences = checkingReferences
        var leaf: Int32 = 0
        while leaf >= 0 {
            for run in self.tree.leaves[Int(leaf)].runs { link(run, after: runs.isEmpty ? -1 : Int32(runs.count - 1), firstPiece: -1) }
            leaf = self.tree.leaves[Int(leaf)].next
        }
        for index in runs.indices { pointIndex(at: Int32(index)) }
        self.tree.leaves = []
        self.tree.inners = []
        self.tree.leafOfRun = []
    }

    /// Points the ID index entries of every character of run `index` at it.
    private mutating func pointIndex(at index: Int32) {
        let run = runs[Int(index)]
        assignIndex(agent: run.agent, from: run.seq, to: run.seq + UInt64(run.length), run: index)
    }

    /// Where the ID index page `page` of `agent` starts in `tree.leafMap`; nil when the agent has
    /// no such page (and `creating` is false: then it is made).
    @inline(__always)
    private mutating func pageStart(agent: Int32, page: UInt64, creating: Bool) -> Int32? {
        let slot = Int((page ^ UInt64(truncatingIfNeeded: agent) &* 0x9E37_79B9) & UInt64(RGABulkList.pageCacheSize - 1))
        let cached = pageCache[slot]
        if cached.page == page, cached.agent == agent {
            lastSearched = (agent, page, Int(cached.slot))
            return cached.start
        }
        // New characters come in seq order: their page is often the one after the page searched
        // for last, at the next slot of the table (no search).
        if agent == lastSearched.agent, page == lastSearched.page &+ 1 {
            let next = lastSearched.slot + 1
            let found: Int32? = tree.pageTables[Int(agent)].withUnsafeBufferPointer { table in
                next < table.count && table[next].page == page ? table[next].start : nil
            }
            if let found {
                lastSearched = (agent, page, next)
                pageCache[slot] = CachedPage(agent: agent, start: found, slot: Int32(truncatingIfNeeded: next), page: page)
                return found
            }
        }
        let (index, found) = tree.pageSlot(agent: agent, page: page)
        let start: Int32
        if found {
            start = tree.pageTables[Int(agent)][index].start
        } else {
            guard creating else { return nil }
            start = tree.addPage(agent: agent, page: page, at: index)
        }
        pageCache[slot] = CachedPage(agent: agent, start: start, slot: Int32(truncatingIfNeeded: index), page: page)
        lastSearched = (agent, page, index)
        return start
    }

    /// The page looked up last, and its slot in its agent's table (when it moved since, a check
    /// of the slot fails and the table is searched).
    private var lastSearched: (agent: Int32, page: UInt64, slot: Int) = (-1, 0, 0)

    /// The replica whose agent was asked for last, and its agent (-1: none yet).
    fileprivate var lastAgent: (replica: ReplicaID, agent: Int32) = (ReplicaID(Identifier128(high: 0, low: 0)), -1)

    /// The pages made at once for the batch (`reserve`): `agent`'s seqs `from ..< end` have their
    /// entries in `leafMap` from `start` on, in order, so an entry there is found without a page
    /// lookup (agent -1: none).
    private var batchPages: (agent: Int32, from: UInt64, end: UInt64, start: Int) = (-1, 0, 0, 0)

    /// Where the entry of `agent`'s `seq` is in `leafMap` when it is in the batch's pages.
    @inline(__always)
    private func batchEntry(agent: Int32, seq: UInt64) -> Int? {
        guard agent == batchPages.agent, seq >= batchPages.from, seq < batchPages.end else { return nil }
        return batchPages.start + Int(seq - batchPages.from)
    }

    /// Points the ID index entries of `agent`'s seqs `from ..< to` at run `run`.
    private mutating func assignIndex(agent: Int32, from: UInt64, to: UInt64, run: Int32) {
        let run = -2 - run
        if from < to, let lo = batchEntry(agent: agent, seq: from), to <= batchPages.end {
            // In the batch's pages: one fill, no page lookup.
            let count = Int(to - from)
            tree.leafMap.withUnsafeMutableBufferPointer { map in
                precondition(lo + count <= map.count, "the batch's pages")
                // Through the pointer (checked above): a slice's update was not vectorized.
                (map.baseAddress! + lo).update(repeating: run, count: count)
            }
            return
        }
        var seq = from
        while seq < to {
            let page = seq >> RGATree.pageShift
            let base = Int(pageStart(agent: agent, page: page, creating: true)!)
            var end = min(to, (page + 1) << RGATree.pageShift)
            let lo = base + Int(seq & UInt64(RGATree.pageSize - 1))
            var hi = lo + Int(end - seq)
            // The pages after it that lie right after it in `leafMap` (made together) are filled in
            // the same pass, without looking each up.
            if end < to, lastSearched.agent == agent, lastSearched.page == page {
                var slot = lastSearched.slot
                tree.pageTables[Int(agent)].withUnsafeBufferPointer { table in
                    while end < to, slot + 1 < table.count, table[slot + 1].page == end >> RGATree.pageShift,
                          Int(table[slot + 1].start) == hi {
                        slot += 1
                        let next = min(to, end + UInt64(RGATree.pageSize))
                        hi += Int(next - end)
                        end = next
                    }
                }
                lastSearched = (agent, (end - 1) >> RGATree.pageShift, slot)
            }
            tree.leafMap.withUnsafeMutableBufferPointer { map in
                for i in lo ..< hi { map[i] = run }
            }
            seq = end
        }
    }

    /// Appends `run` to the list after `after` (-1: at the head) and returns its index.
    ///
    /// - Parameter firstPiece: the first piece of the run's insert when its entries name that
    ///   (the run's own index, to come, when it is the first: `newInsert`); -1 when they name the run.
    @discardableResult
    private mutating func link(_ run: RGATree.Run, after: Int32, firstPiece: Int32, nextPiece: Int32 = -1) -> Int32 {
        let index = Int32(runs.count)
        runs.append(run)
        let following = after < 0 ? head : links[Int(after)].next
        links.append(Link(next: following, previous: after, nextPiece: nextPiece,
                          firstPiece: firstPiece == RGABulkList.newInsert ? index : firstPiece, pieces: 1))
        if after < 0 { head = index } else { links[Int(after)].next = index }
        if following >= 0 { links[Int(following)].previous = index }
        return index
    }

    /// `link`'s `firstPiece` for the first piece of an insert.
    private static let newInsert: Int32 = -2

    /// The run holding `(agent, seq)` and the offset in it, or nil when the text does not hold it.
    private mutating func find(agent: Int32, seq: UInt64) -> (run: Int32, offset: Int)? {
        let entry: Int32
        if let at = batchEntry(agent: agent, seq: seq) {
            entry = tree.leafMap[at]
        } else {
            guard let start = pageStart(agent: agent, page: seq >> RGATree.pageShift, creating: false) else { return nil }
            entry = tree.leafMap[Int(start) + Int(seq & UInt64(RGATree.pageSize - 1))]
        }
        guard entry <= -2 else { return nil }
        var index = -2 - entry
        // An insert's first piece: on to the piece that holds the seq (at most `maxPieces` steps).
        if links[Int(index)].firstPiece >= 0 {
            while seq - runs[Int(index)].seq >= UInt64(runs[Int(index)].length) {
                index = links[Int(index)].nextPiece
                guard index >= 0 else { return nil }
            }
        }
        return (index, Int(seq - runs[Int(index)].seq))
    }

    /// Cuts run `index` before `offset` (0 < offset < length) into two runs, and returns both.
    ///
    /// A piece of an insert whose entries name its first piece keeps its index for its first part
    /// (so the first piece stays first), and no entry is written. Otherwise the shorter part gets
    /// the new index and its entries are pointed at it, so the rewrites are O(*n* log *n*) in all.
    private mutating func split(_ index: Int32, at offset: Int) -> (head: Int32, tail: Int32) {
        let (first, second) = runs[Int(index)].split(at: offset)
        let firstPiece = links[Int(index)].firstPiece
        if firstPiece >= 0 {
            runs[Int(index)] = first
            let new = link(second, after: index, firstPiece: firstPiece, nextPiece: links[Int(index)].nextPiece)
            links[Int(index)].nextPiece = new
            links[Int(firstPiece)].pieces += 1
            if links[Int(firstPiece)].pieces > RGABulkList.maxPieces { pointPieces(from: firstPiece) }
            return (index, new)
        }
        if first.length <= second.length {
            runs[Int(index)] = second
            let new = link(first, after: links[Int(index)].previous, firstPiece: -1)
            pointIndex(at: new)
            return (new, index)
        }
        runs[Int(index)] = first
        let new = link(second, after: index, firstPiece: -1)
        pointIndex(at: new)
        return (index, new)
    }

    /// Points the entries of every piece of the insert whose first piece is `first` at that piece.
    private mutating func pointPieces(from first: Int32) {
        var piece = first
        while piece >= 0 {
            let next = links[Int(piece)].nextPiece
            links[Int(piece)].firstPiece = -1
            links[Int(piece)].nextPiece = -1
            if piece != first { pointIndex(at: piece) }
            piece = next
        }
    }

    /// `RGATree.integrate` on the list: places new characters after their origin, skipping the
    /// items that sort before them. False (and nothing changed) when the origin is not there.
    mutating func integrate(agent: Int32, seq: UInt64, key: UInt64, originAgent: Int32, originSeq: UInt64,
                            scalars: UnretainedText) -> Bool {
        let length = scalars.count
        guard length > 0 else { return true }
        // The run the new characters would follow, and the candidate item after it.
        var before: Int32 = -1
        var candidate = head
        var offset = 0
        if originAgent >= 0 {
            guard let origin = find(agent: originAgent, seq: originSeq) else { return false }
            if origin.offset + 1 < Int(runs[Int(origin.run)].length) {
                candidate = origin.run
                offset = origin.offset + 1
            } else {
                before = origin.run
                candidate = links[Int(origin.run)].next
            }
        }
        while candidate >= 0 {
            let item = runs[Int(candidate)]
            guard tree.precedes(item.key + UInt64(offset), item.agent, key, agent) else { break }
            before = candidate
            candidate = links[Int(candidate)].next
            offset = 0
        }
        if offset > 0 { before = split(candidate, at: offset).head }
        let contentStart = tree.arena.count
        if contentStart == 0 {
            tree.arena = InsertedText(scalars)  // the decoded text as it is: the next inserts continue it in its buffer
        } else {
            tree.arena.append(contentsOf: scalars)
        }
        tree.totalCharacters += length
        if before >= 0 {
            let prev = runs[Int(before)]
            let prevLength = UInt64(prev.length)
            if prev.agent == agent, !prev.deleted, prev.seq + prevLength == seq, prev.key + prevLength == key,
               prev.content + Int(prev.length) == contentStart, links[Int(before)].nextPiece < 0,
               originAgent == agent, originSeq == seq - 1, Int(prev.length) + length < Int(Int32.max) {
                // The new characters continue the run (the last piece of its insert: no other
                // has later seqs), and their entries name what the run's characters' do.
                runs[Int(before)].length += Int32(length)
                let firstPiece = links[Int(before)].firstPiece
                assignIndex(agent: agent, from: seq, to: seq + UInt64(length), run: firstPiece >= 0 ? firstPiece : before)
                return true
            }
        }
        let new = link(RGATree.Run(seq: seq, key: key, originSeq: originSeq, content: contentStart, agent: agent,
                                   originAgent: originAgent, length: Int32(length), deleted: false), after: before,
                       firstPiece: RGABulkList.newInsert)
        assignIndex(agent: agent, from: seq, to: seq + UInt64(length), run: new)
        return true
    }

    /// Marks `count` characters of one agent, from `seq` on, as deleted. False when one is not
    /// there (those before it are marked).
    mutating func delete(agent: Int32, seq: UInt64, count: UInt64) -> Bool {
        var seq = seq
        var remaining = count
        while remaining > 0 {
            guard let found = find(agent: agent, seq: seq) else { return false }
            var index = found.run
            let offset = found.offset
            let take = min(UInt64(Int(runs[Int(index)].length) - offset), remaining)
            if !runs[Int(index)].deleted {
                if offset > 0 { index = split(index, at: offset).tail }
                if take < UInt64(runs[Int(index)].length) { index = split(index, at: Int(take)).head }
                runs[Int(index)].deleted = true
            }
            seq += take
            remaining -= take
        }
        return true
    }


    /// Makes room for `characters` more characters that `replica` inserts with seqs among the
    /// `seqSpan` from `firstSeq` on (see `RGAText.reserve`). When they fill most of those seqs
    /// (at most half are other operations), their ID index pages are made at once: one at a time,
    /// each page cost about five instructions per character it would hold.
    mutating func reserve(characters: Int, replica: ReplicaID, seqs firstSeq: UInt64, span seqSpan: UInt64) {
        tree.reserve(characters: characters, seqSpan: seqSpan)
        runs.reserveCapacity(runs.count + characters / 8)
        links.reserveCapacity(runs.count + characters / 8)
        guard characters > 0, seqSpan > 0, seqSpan <= 2 * UInt64(characters) + UInt64(RGATree.pageSize) else { return }
        let agent = tree.agent(for: replica)
        let last = (firstSeq + seqSpan - 1) >> RGATree.pageShift  // (a checked change's seqs are at most 2^53 - 1)
        if let (first, start) = tree.addPages(agent: agent, from: firstSeq >> RGATree.pageShift, through: last) {
            batchPages = (agent, first << RGATree.pageShift, (last + 1) << RGATree.pageShift, start)
        }
    }

    /// The tree again: the runs in document order packed into leaves three quarters full, the
    /// inner levels over them, and the ID index pointing at the leaves.
    mutating func finish() -> RGATree {
        // Taken out, not copied: a copy shared the ID index with `self`, and rewriting it below
        // copied all of it first.
        var tree = RGATree()
        swap(&tree, &self.tree)
        let perLeaf = RGATree.leafCapacity * 3 / 4
        let perInner = RGATree.innerCapacity * 3 / 4
        tree.leaves = []
        tree.leaves.reserveCapacity(runs.count / perLeaf + 1)
        // The leaf each run goes to, by run index: the ID index is then rewritten in one pass in
        // its own order, instead of run by run in document order (a page lookup per run).
        var leafOfRun = [Int32](repeating: -1, count: runs.count)
        var index = head
        repeat {
            // A leaf's runs written in place as its array is made (n < perLeaf, its capacity):
            // appended one at a time, each append checked the array's uniqueness and capacity.
            let number = Int32(tree.leaves.count)
            var leaf = RGATree.Leaf()
            leaf.runs = [RGATree.Run](unsafeUninitializedCapacity: perLeaf) { buffer, initialized in
                var n = 0
                while n < perLeaf, index >= 0 {
                    let run = runs[Int(index)]
                    if !run.deleted { leaf.visible += Int(run.length) }
                    buffer.initializeElement(at: n, to: run)
                    leafOfRun[Int(index)] = number
                    index = links[Int(index)].next
                    n += 1
                }
                initialized = n
            }
            if number > 0 { tree.leaves[Int(number) - 1].next = number }
            tree.leaves.append(leaf)
        } while index >= 0
        // Entries name runs, resolved through `leafOfRun`; only the pieces of an insert that are in
        // another leaf than its first piece (whose leaf its entries give) get theirs written.
        for index in runs.indices where links[index].firstPiece == Int32(index) {
            let leaf = leafOfRun[index]
            var piece = links[index].nextPiece
            while piece >= 0 {
                let pieceLeaf = leafOfRun[Int(piece)]
                if pieceLeaf != leaf {
                    let run = runs[Int(piece)]
                    tree.assignIndex(agent: run.agent, from: run.seq, to: run.seq + UInt64(run.length), leaf: pieceLeaf)
                }
                piece = links[Int(piece)].nextPiece
            }
        }
        tree.leafOfRun = leafOfRun
        // The inner levels, bottom up.
        tree.inners = []
        var level = Array(0 ..< Int32(tree.leaves.count))
        var leafChildren = true
        while level.count > 1 {
            var upper: [Int32] = []
            upper.reserveCapacity(level.count / perInner + 1)
            var start = 0
            while start < level.count {
                // Spread the last two nodes' children evenly, so neither is nearly empty.
                var end = min(start + perInner, level.count)
                if level.count - end > 0, level.count - end < perInner / 2 { end = start + (level.count - start + 1) / 2 }
                let number = Int32(tree.inners.count)
                var node = RGATree.Inner(leafChildren: leafChildren)
                node.children = Array(level[start ..< end])
                for child in node.children {
                    if leafChildren {
                        tree.leaves[Int(child)].parent = number
                        node.visible += tree.leaves[Int(child)].visible
                    } else {
                        tree.inners[Int(child)].parent = number
                        node.visible += tree.inners[Int(child)].visible
                    }
                }
                tree.inners.append(node)
                upper.append(number)
                start = end
            }
            level = upper
            leafChildren = false
        }
        tree.root = level[0]
        tree.rootIsLeaf = leafChildren
        return tree
    }
}

/// What `Notebook` integrates remote operations into: the text itself, or its list form for a
/// large batch.
protocol TextIntegration {
    /// Whether references are checked as they are integrated (deletes are then integrated at
    /// once, not gathered: a character must be there when its delete comes).
    var checksReferences: Bool { get }
    /// Inserts characters whose first identity is `id` after `origin` (which exists); `text` is
    /// held by the caller for the call.
    mutating func place(id: OpID, origin: OpID?, key: UInt64, text: UnretainedText)
    /// Marks the characters of `range` (which all exist) deleted.
    mutating func tombstone(_ range: OpIDRange)
}

extension TextIntegration {
    /// `place(id:origin:key:text:)` with a view held for the call.
    mutating func place(id: OpID, origin: OpID?, key: UInt64, scalars: InsertedText) {
        withExtendedLifetime(scalars) { place(id: id, origin: origin, key: key, text: UnretainedText(scalars)) }
    }
}

extension RGAText: TextIntegration {
    var checksReferences: Bool { false }

    mutating func place(id: OpID, origin: OpID?, key: UInt64, text: UnretainedText) {
        integrate(id: id, origin: origin, key: key, scalars: InsertedText(text))
    }

    mutating func tombstone(_ range: OpIDRange) { delete(range) }

    /// Runs `body` on the text taken apart into its list form, then rebuilds the tree.
    mutating func withBulkList(_ body: (inout RGABulkList) -> Void) {
        assert(deferredText == nil, "the tree of a text whose log is deferred")
        if !isKnownUniquelyReferenced(&box) { box = Box.make(box.header) }
        var taken = RGATree()
        swap(&taken, &box.treePointer.pointee)
        var list = RGABulkList(consume taken)
        body(&list)
        box.treePointer.pointee = list.finish()
    }

    /// Runs `body` on a copy of the text in list form that checks every reference as it is
    /// integrated, and takes the result only when all were there: otherwise returns the first
    /// missing one, and the text is as it was. (A copy: nothing of the text is written until
    /// the end; the list copies what it changes, nothing for a new note.)
    mutating func withCheckedBulkList(_ body: (inout RGABulkList) -> Void) -> RGABulkList.MissingReference? {
        assert(deferredText == nil, "the tree of a text whose log is deferred")
        var list = RGABulkList(box.treePointer.pointee, checkingReferences: true)
        body(&list)
        if let missing = list.missing { return missing }
        if !isKnownUniquelyReferenced(&box) { box = Box.make(RGATree()) }
        box.treePointer.pointee = list.finish()
        return nil
    }
}

extension RGABulkList: TextIntegration {
    /// The agent of `replica` when the text has one: the replica asked last first (a batch's
    /// inserts are all its author's, and its origins and deletes mostly name them).
    @inline(__always)
    private mutating func knownAgent(_ replica: ReplicaID) -> Int32? {
        if lastAgent.agent >= 0, lastAgent.replica == replica { return lastAgent.agent }
        guard let agent = tree.existingAgent(replica) else { return nil }
        lastAgent = (replica, agent)
        return agent
    }

    mutating func place(id: OpID, origin: OpID?, key: UInt64, text scalars: UnretainedText) {
        guard missing == nil else { return }
        var originAgent: Int32 = -1
        if let origin {
            guard let known = knownAgent(origin.replica) else { return miss(.origin(origin)) }
            originAgent = known
        }
        let agent = knownAgent(id.replica) ?? tree.agent(for: id.replica)
        if !integrate(agent: agent, seq: id.seq, key: key, originAgent: originAgent, originSeq: origin?.seq ?? 0, scalars: scalars) {
            miss(.origin(origin!))
        }
    }

    mutating func tombstone(_ range: OpIDRange) {
        guard missing == nil, range.count > 0 else { return }
        guard let agent = knownAgent(range.replica), delete(agent: agent, seq: range.seq, count: range.count) else {
            return miss(.deleted(range))
        }
    }

    private mutating func miss(_ reference: MissingReference) {
        precondition(checksReferences, "a reference to a character that is not there, in a batch validated before")
        missing = reference
    }
}

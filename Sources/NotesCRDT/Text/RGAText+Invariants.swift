extension RGAText {
    /// Checks the tree's structural invariants (counts, parent links, leaf chain, ID index) and
    /// returns a description of the first violation, or nil. Used by tests after every edit.
    ///
    /// - Complexity: O(*n* log *n*).
    public func invariantViolation() -> String? {
        let tree = self.tree
        // Leaf chain covers every leaf exactly once.
        var seen = Set<Int32>()
        var leaf: Int32 = 0
        var visible = 0
        while leaf >= 0 {
            if !seen.insert(leaf).inserted { return "leaf chain loops at \(leaf)" }
            var count = 0
            for run in tree.leaves[Int(leaf)].runs {
                if run.length <= 0 { return "empty run in leaf \(leaf)" }
                if !run.deleted { count += Int(run.length) }
                // The ID index finds every character of the run.
                for offset in [0, Int(run.length) - 1] {
                    guard let found = tree.find(agent: run.agent, seq: run.seq + UInt64(offset)),
                          found.leaf == leaf else { return "ID index misses \(run.agent)@\(run.seq + UInt64(offset))" }
                }
            }
            if count != tree.leaves[Int(leaf)].visible { return "leaf \(leaf) counts \(tree.leaves[Int(leaf)].visible), holds \(count)" }
            visible += count
            leaf = tree.leaves[Int(leaf)].next
        }
        if seen.count != tree.leaves.count { return "leaf chain reaches \(seen.count) of \(tree.leaves.count) leaves" }
        if visible != count { return "root counts \(count), leaves hold \(visible)" }
        for (i, inner) in tree.inners.enumerated() {
            var sum = 0
            for child in inner.children {
                let parent = inner.leafChildren ? tree.leaves[Int(child)].parent : tree.inners[Int(child)].parent
                if parent != Int32(i) { return "child \(child) of inner \(i) points to parent \(parent)" }
                sum += inner.leafChildren ? tree.leaves[Int(child)].visible : tree.inners[Int(child)].visible
            }
            if sum != inner.visible { return "inner \(i) counts \(inner.visible), children hold \(sum)" }
            if inner.children.count > RGATree.innerCapacity { return "inner \(i) overfull" }
        }
        return nil
    }
}

extension RGAText {
    /// Compares every character of two texts, in document order, tombstones included: its
    /// identity, its key, its origin, whether it is deleted. Returns the first difference, or nil
    /// when the texts are the same CRDT state (not just the same visible string). Used by tests to
    /// check that a replica's text equals the text rebuilt from its log.
    ///
    /// - Complexity: O(*n*).
    public func structureDifference(from other: RGAText) -> String? {
        let mine = characters()
        let theirs = other.characters()
        for (index, (a, b)) in zip(mine, theirs).enumerated() where a != b {
            return "character \(index): \(a) here, \(b) there"
        }
        if mine.count != theirs.count { return "\(mine.count) characters here, \(theirs.count) there" }
        return nil
    }

    struct CharacterState: Equatable, CustomStringConvertible {
        var id: OpID
        var key: UInt64
        var origin: OpID?
        var deleted: Bool
        var scalar: Unicode.Scalar
        var description: String { "\(id) key \(key) after \(origin.map(String.init(describing:)) ?? "start")\(deleted ? " deleted" : "") '\(scalar)'" }
    }

    func characters() -> [CharacterState] {
        let tree = self.tree
        var result: [CharacterState] = []
        var leaf: Int32 = 0
        while leaf >= 0 {
            for run in tree.leaves[Int(leaf)].runs {
                let replica = tree.agents[Int(run.agent)]
                for i in 0 ..< Int(run.length) {
                    let origin: OpID? = i > 0 ? OpID(replica: replica, seq: run.seq + UInt64(i) - 1)
                        : run.originAgent < 0 ? nil : OpID(replica: tree.agents[Int(run.originAgent)], seq: run.originSeq)
                    result.append(CharacterState(id: OpID(replica: replica, seq: run.seq + UInt64(i)), key: run.key + UInt64(i),
                                                 origin: origin, deleted: run.deleted, scalar: tree.arena[run.content + i]))
                }
            }
            leaf = tree.leaves[Int(leaf)].next
        }
        return result
    }
}

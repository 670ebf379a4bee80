// Undo and restore as new operations: what changes sync like any edit, so nothing is rewritten.

extension Notebook {
    /// Makes, as new local changes, the inverse of this replica's own operations `seqs`: each
    /// field they wrote goes back to the value it had before them, unless a later write (from any
    /// device) has replaced it since; the characters they inserted that are still there are
    /// deleted; the characters they deleted are inserted again, as new text, where they were. A
    /// note they created is deleted. Edits from other devices, concurrent or later, are kept.
    /// Writes to tag entities (a tag's name or color) are not reverted.
    ///
    /// - Returns: the changes made (none when nothing was left to revert).
    /// - Throws: `.notFound` when the log does not hold those operations.
    @discardableResult
    public mutating func revert(_ seqs: ClosedRange<UInt64>) throws -> [Change] {
        materialize()
        guard let first = loggedChange(replicaID, seqs.lowerBound), loggedChange(replicaID, seqs.upperBound) != nil else {
            throw CRDTError(.notFound, "the log does not hold operations \(seqs) of this replica")
        }
        var before = first.dependencies
        before[replicaID] = seqs.lowerBound - 1
        // The operations, each with its first seq, cut to the range.
        var operations: [(op: Operation, seq: UInt64)] = []
        for index in historyIndex[replicaID] ?? [] {
            let change = history[index]
            guard change.endSeq >= seqs.lowerBound, change.startSeq <= seqs.upperBound,
                  let cut = change.suffix(from: seqs.lowerBound)?.prefix(through: seqs.upperBound) else { continue }
            var seq = cut.startSeq
            for op in cut.operations {
                operations.append((op, seq))
                seq += op.seqCount
            }
        }
        var order: [NoteID] = []
        for (op, _) in operations { if let note = op.note, !order.contains(note) { order.append(note) } }
        var changes: [Change] = []
        for note in order {
            changes += try revert(operations.filter { $0.op.note == note }, of: note, before: before)
        }
        return changes
    }

    private mutating func revert(_ operations: [(op: Operation, seq: UInt64)], of note: NoteID, before: VersionVector) throws -> [Change] {
        var changes: [Change] = []
        let old = try self.note(note, at: before)
        var lastWrite: [NoteField: UInt64] = [:]
        var inserted: [OpID] = []
        var deleted: [OpID] = []
        for (op, seq) in operations {
            switch op {
            case .setNoteField(_, let field, _): lastWrite[field] = seq
            case .insertText(_, _, let text):
                for k in 0 ..< UInt64(text.count) { inserted.append(OpID(replica: replicaID, seq: seq + k)) }
            case .deleteText(_, let targets):
                for t in targets { for k in 0 ..< t.count { deleted.append(OpID(replica: t.replica, seq: t.seq + k)) } }
            case .deleteEach(_, let runs):
                for r in runs { for k in 0 ..< r.range.count { deleted.append(OpID(replica: r.range.replica, seq: r.range.seq + k)) } }
            case .setTagField, .reissue: break
            }
        }
        // A note made by these operations: undone by deleting it.
        guard let old, lastWrite[.createdAt] == nil else {
            if let change = try setState(note, .deleted) { changes.append(change) }
            return changes
        }
        // A note deleted since (and not by these operations) stays deleted: reverting an edit of it would bring it back.
        if notes[note]!.state == .deleted, lastWrite[.state] == nil { return changes }
        for (field, seq) in lastWrite.sorted(by: { $0.key < $1.key }) {
            // Only while our write still wins: a later write from anywhere is kept.
            guard notes[note]?.fields[field]?.writer == OpID(replica: replicaID, seq: seq) else { continue }
            if let change = try restoreField(field, of: note, to: old) { changes.append(change) }
        }
        // The inserted characters still there go, then the deleted ones come back where they were.
        let text = notes[note]!.body
        let visible = text.placements(of: inserted).filter(\.visible).map(\.offset)
        if !visible.isEmpty {
            changes += try editBody(note) { editor in
                for range in Notebook.ranges(of: visible).reversed() { try editor.delete(range) }
            }
        }
        let insertedSet = Set(inserted)
        let gone = notes[note]!.body.placements(of: deleted.filter { !insertedSet.contains($0) }).filter { !$0.visible }
        if !gone.isEmpty {
            var groups: [(offset: Int, text: [Unicode.Scalar])] = []
            for place in gone {
                if groups.last?.offset == place.offset { groups[groups.count - 1].text.append(place.scalar) } else { groups.append((place.offset, [place.scalar])) }
            }
            changes += try editBody(note) { editor in
                for group in groups.reversed() { try editor.insert(String(String.UnicodeScalarView(group.text)), at: group.offset) }
            }
        }
        return changes
    }

    /// Sets `field` of `note` to what it reads in `target`; nil when it already does (or the field
    /// is reserved, or is the creation time, which is never rewritten).
    mutating func restoreField(_ field: NoteField, of note: NoteID, to target: Note) throws -> Change? {
        switch field {
        case .title: return try setTitle(note, target.title)
        case .pinned: return try setPinned(note, target.pinned)
        case .archived: return try setArchived(note, target.archived)
        case .color: return try setColor(note, target.color)
        case .state: return try setState(note, target.state)
        case .createdAt: return nil
        case .tag(let key):
            return try setField(note, field, .bool(target.tags.contains { Notebook.tagKey($0) == key }))
        case .extra(let key):
            if key.hasPrefix(Notebook.reservedExtraPrefix) { return nil }
            return try setField(note, field, target.extras[key] ?? .null)
        }
    }

    /// Makes `note` read as `target` again, as new local changes: each field that differs is
    /// written, and the body is changed by the minimal splice (common prefix and suffix kept), so
    /// edits elsewhere in it stay as they are.
    ///
    /// - Returns: the changes made (none when the note already reads as `target`).
    @discardableResult
    public mutating func restore(_ note: NoteID, to target: Note) throws -> [Change] {
        materialize()
        guard let record = notes[note] else { throw CRDTError(.notFound, "no note \(note)") }
        var changes: [Change] = []
        var fields: [NoteField] = [.title, .pinned, .archived, .color]
        var tagKeys = Set(target.tags.map(Notebook.tagKey))
        for field in record.fields.keys { if case .tag(let key) = field { tagKeys.insert(key) } }
        fields += tagKeys.sorted().map(NoteField.tag)
        var extraKeys = Set(target.extras.keys)
        for field in record.fields.keys { if case .extra(let key) = field { extraKeys.insert(key) } }
        fields += extraKeys.sorted().map(NoteField.extra)
        // The state first (the other writes are then made on a note that is not deleted), or
        // last when it goes back to deleted (an edit after a delete would bring the note back).
        let deleting = target.state == .deleted
        if !deleting, let change = try restoreField(.state, of: note, to: target) { changes.append(change) }
        for field in fields {
            if let change = try restoreField(field, of: note, to: target) { changes.append(change) }
        }
        changes += try replaceBody(note, with: target.body)
        if deleting, let change = try restoreField(.state, of: note, to: target) { changes.append(change) }
        return changes
    }

    /// The notes this replica's own operations `seqs` touched, in the order of the operations
    /// (empty when the log does not hold them).
    public func notes(touchedByOwn seqs: ClosedRange<UInt64>) -> [NoteID] {
        if deferred != nil { return materialized.notes(touchedByOwn: seqs) }
        var result: [NoteID] = []
        for index in historyIndex[replicaID] ?? [] {
            let change = history[index]
            guard change.endSeq >= seqs.lowerBound, change.startSeq <= seqs.upperBound,
                  let cut = change.suffix(from: seqs.lowerBound)?.prefix(through: seqs.upperBound) else { continue }
            for op in cut.operations { if let note = op.note, !result.contains(note) { result.append(note) } }
        }
        return result
    }

    /// Whether `note` is deleted by a delete another replica wrote (which `revert(_:)` leaves alone).
    package func isDeletedByAnotherReplica(_ note: NoteID) -> Bool {
        if deferred != nil { return materialized.isDeletedByAnotherReplica(note) }
        guard let record = notes[note], record.state == .deleted else { return false }
        return record.fields[.state].map { $0.writer.replica != replicaID } ?? false
    }

    /// Sorted offsets as maximal ranges of consecutive ones.
    static func ranges(of offsets: [Int]) -> [Range<Int>] {
        var result: [Range<Int>] = []
        for offset in offsets.sorted() {
            if let last = result.last, last.upperBound == offset { result[result.count - 1] = last.lowerBound ..< offset + 1 } else { result.append(offset ..< offset + 1) }
        }
        return result
    }
}

extension RGAText {
    /// `placement(of:)` of each of `ids` that is in the text, in document order.
    ///
    /// - Complexity: O(k log *n* + leaves).
    package func placements(of ids: [OpID]) -> [(offset: Int, scalar: Unicode.Scalar, visible: Bool)] {
        guard !ids.isEmpty else { return [] }
        var rank: [Int32: Int] = [:]
        var leaf: Int32 = 0
        while leaf >= 0 {
            rank[leaf] = rank.count
            leaf = tree.leaves[Int(leaf)].next
        }
        var found: [(order: (Int, Int, Int), place: (offset: Int, scalar: Unicode.Scalar, visible: Bool))] = []
        for id in ids {
            guard let agent = tree.existingAgent(id.replica), let at = tree.find(agent: agent, seq: id.seq),
                  let place = placement(of: id) else { continue }
            found.append(((rank[at.leaf] ?? 0, at.run, at.offset), place))
        }
        found.sort { $0.order < $1.order }
        return found.map(\.place)
    }
}

// A note's versions (one per logged change that touched it), the causal cut each stands for, and
// the inverse of a replica's own operations (undo).

/// One version of a note: what a logged change did to it.
///
/// A version is named by its author and the last sequence number of its operations on the note,
/// which every replica that has the change gives it alike (`label`). The note "as of" a version is
/// the note as its author had it right after those operations (`context`): the same on every device.
public struct NoteRevision: Hashable, Sendable {
    /// What a version did to the note.
    public enum Edit: Hashable, Sendable {
        /// The note was created.
        case created
        /// A field was written: its value before (as replayed in log order here; `.null` when unset)
        /// and the value written.
        case field(NoteField, from: FieldValue, to: FieldValue)
        /// Characters were inserted into the body: the text, in document order, as one piece per
        /// stretch of adjacent characters.
        case inserted(count: Int, pieces: [String])
        /// Characters were deleted from the body: the text they spelled, in document order, as one
        /// piece per stretch of adjacent characters.
        case deleted(count: Int, pieces: [String])
    }

    /// The replica that made the change.
    public var replica: ReplicaID
    /// The last sequence number of the change's operations on the note.
    public var seq: UInt64
    /// The timestamp of that operation.
    public var timestamp: Timestamp
    /// The causal cut this version stands for: the change's dependencies, and its author up to `seq`.
    public var context: VersionVector
    /// What it did, in the order of its operations (inserts and deletes added up).
    public var edits: [Edit]

    /// The stable name of the version: the author's first 8 hex digits, a dash, and `seq`.
    public var label: String { NoteRevision.label(replica, seq) }

    /// The stable name of the operation `(replica, seq)`.
    public static func label(_ replica: ReplicaID, _ seq: UInt64) -> String {
        "\(replica.description.prefix(8))-\(seq)"
    }
}

/// One edit this replica made (one command or library call), as a store's undo stack records it:
/// its sequence numbers and the wall-clock time it was made. The log does not always keep that
/// time: an insert that continues this replica's last insert takes the timestamps right after it
/// (so that the text stays one run), and carries that earlier edit's time.
public struct OwnEdit: Hashable, Sendable {
    /// The edit's sequence numbers.
    public var seqs: ClosedRange<UInt64>
    /// When it was made (wall clock), or nil when not known.
    public var time: Timestamp?

    public init(seqs: ClosedRange<UInt64>, time: Timestamp?) {
        self.seqs = seqs
        self.time = time
    }
}

extension Notebook {
    /// The note's versions, oldest first: one per logged change with operations on it, in the order
    /// applied here. Empty for an unknown note.
    ///
    /// The log joins consecutive changes of one replica; `ownEdits` (this replica's edits, as a
    /// store records them) cuts its own changes back into one version per edit, each at the time
    /// it was made. Another replica's joined changes stay one version, at the time the log has.
    ///
    /// - Complexity: O(size of the log) plus the note's body operations; one note is replayed.
    public func revisions(of id: NoteID, ownEdits: [OwnEdit] = []) -> [NoteRevision] {
        if deferred != nil { return materialized.revisions(of: id, ownEdits: ownEdits) }
        guard notes[id] != nil else { return [] }
        return Notebook.revisions(of: id, in: history, replicaID: replicaID, ownEdits: ownEdits)
    }

    /// `revisions(of:ownEdits:)` read from a log (`allChanges`, or `storedLog`'s) of the replica
    /// `replicaID`, without the replica.
    package static func revisions(of id: NoteID, in history: [Change], replicaID: ReplicaID,
                                  ownEdits: [OwnEdit] = []) -> [NoteRevision] {
        var record = NoteRecord()
        var text = RGAText()
        var result: [NoteRevision] = []
        let own = Notebook.sorted(ownEdits)
        let ends = own.map(\.seqs.upperBound)
        for logged in history where logged.operations.contains(where: { $0.note == id }) {
            for change in Notebook.pieces(of: logged, endingAt: logged.replica == replicaID ? ends : [])
            where change.operations.contains(where: { $0.note == id }) {
                var edits: [NoteRevision.Edit] = []
                var inserted: [OpID] = []
                var deleted: [OpID] = []
                var lastSeq = change.startSeq
                var seq = change.startSeq
                // Before the change is applied: the values it overwrites and the text it deletes.
                for op in change.operations {
                    defer { seq += op.seqCount }
                    guard op.note == id else { continue }
                    lastSeq = seq + op.seqCount - 1
                    switch op {
                    case .setNoteField(_, let field, let value):
                        edits.append(field == .createdAt ? .created : .field(field, from: record.value(field), to: value))
                    case .insertText(_, _, let scalars):
                        for k in 0 ..< UInt64(scalars.count) { inserted.append(OpID(replica: change.replica, seq: seq + k)) }
                    case .deleteText(_, let targets):
                        for target in targets { deleted += target.ids }
                    case .deleteEach(_, let runs):
                        for run in runs { deleted += run.range.ids }
                    case .setTagField, .reissue:
                        break
                    }
                }
                Notebook.applyOperations(of: change, on: id, to: &record, text: &text)
                // After the change: the characters in document order (a later insert can sit before an earlier one).
                if !inserted.isEmpty { edits.append(.inserted(count: inserted.count, pieces: text.pieces(of: inserted))) }
                if !deleted.isEmpty { edits.append(.deleted(count: deleted.count, pieces: text.pieces(of: deleted))) }
                var context = change.dependencies
                context[change.replica] = lastSeq
                result.append(NoteRevision(replica: change.replica, seq: lastSeq,
                                           timestamp: time(of: change, lastSeq, own, replicaID: replicaID),
                                           context: context, edits: edits))
            }
        }
        return result
    }

    /// When operation `seq` of `change` was made: its timestamp, or for this replica's own edits
    /// the time the edit was made when that is later (the log carries an earlier one for an
    /// insert that continued the previous one).
    func time(of change: Change, _ seq: UInt64, _ own: [OwnEdit]) -> Timestamp {
        Notebook.time(of: change, seq, own, replicaID: replicaID)
    }

    static func time(of change: Change, _ seq: UInt64, _ own: [OwnEdit], replicaID: ReplicaID) -> Timestamp {
        let stamped = change.timestamp(ofSeq: seq)
        guard change.replica == replicaID, let made = Notebook.edit(holding: seq, in: own)?.time else { return stamped }
        return max(stamped, made)
    }

    /// `edits` by increasing seqs.
    static func sorted(_ edits: [OwnEdit]) -> [OwnEdit] {
        edits.sorted { $0.seqs.lowerBound < $1.seqs.lowerBound }
    }

    /// The edit of `edits` (sorted, disjoint) that holds `seq`, or nil.
    static func edit(holding seq: UInt64, in edits: [OwnEdit]) -> OwnEdit? {
        let index = firstEdit(endingAtOrAfter: seq, in: edits)
        guard index < edits.count, edits[index].seqs.contains(seq) else { return nil }
        return edits[index]
    }

    /// The index of the first of `edits` (sorted, disjoint) that ends at or after `seq`.
    static func firstEdit(endingAtOrAfter seq: UInt64, in edits: [OwnEdit]) -> Int {
        var low = 0
        var high = edits.count
        while low < high {
            let mid = (low + high) / 2
            if edits[mid].seqs.upperBound < seq { low = mid + 1 } else { high = mid }
        }
        return low
    }

    /// `change` cut after each of `ends` (sorted) that falls inside it (before its last seq).
    static func pieces(of change: Change, endingAt ends: [UInt64]) -> [Change] {
        var low = 0
        var high = ends.count
        while low < high {
            let mid = (low + high) / 2
            if ends[mid] < change.startSeq { low = mid + 1 } else { high = mid }
        }
        var cuts: [UInt64] = []
        while low < ends.count, ends[low] < change.endSeq {
            cuts.append(ends[low])
            low += 1
        }
        guard !cuts.isEmpty else { return [change] }
        var pieces: [Change] = []
        var from = change.startSeq
        for end in cuts {
            if let piece = change.suffix(from: from)?.prefix(through: end), !piece.operations.isEmpty { pieces.append(piece) }
            from = end + 1
        }
        if let rest = change.suffix(from: from) { pieces.append(rest) }
        return pieces
    }

    /// The causal cut "as of" operation `(replica, seq)`, rounded up to the end of the edit that
    /// holds it (a version is a whole edit, never half of one): what its author had applied when
    /// it made that edit, and the edit. This replica's edits are `ownEdits` (as a store records
    /// them); another replica's are the log entries that hold them (the log joins consecutive
    /// ones). Nil when the log does not hold that operation.
    public func context(ofOperation replica: ReplicaID, seq: UInt64, ownEdits: [OwnEdit] = []) -> VersionVector? {
        if deferred != nil { return materialized.context(ofOperation: replica, seq: seq, ownEdits: ownEdits) }
        guard let holding = loggedChange(replica, seq) else { return nil }
        var end = holding.endSeq
        if replica == replicaID {
            let own = Notebook.sorted(ownEdits)
            let index = Notebook.firstEdit(endingAtOrAfter: seq, in: own)
            if index < own.count, own[index].seqs.contains(seq) {
                end = own[index].seqs.upperBound
            } else if index < own.count, own[index].seqs.lowerBound - 1 < end {
                end = own[index].seqs.lowerBound - 1  // not a recorded edit: up to the next one
            }
        }
        guard let change = loggedChange(replica, end) else { return nil }
        var context = change.dependencies
        context[replica] = end
        return context
    }

    /// The latest causal cut whose operations all have timestamps at or before `timestamp`: the log
    /// walked in applied (causal) order, a change kept (up to its last operation stamped in time)
    /// only when everything it depends on is. A clock that went backwards can leave out a later
    /// operation stamped earlier; a cut never holds an operation without its dependencies.
    ///
    /// This replica's edits (`ownEdits`, as a store records them) are kept whole or not at all, at
    /// the time each was made (see `OwnEdit`).
    public func context(atTime timestamp: Timestamp, ownEdits: [OwnEdit] = []) -> VersionVector {
        if deferred != nil { return materialized.context(atTime: timestamp, ownEdits: ownEdits) }
        let own = Notebook.sorted(ownEdits)
        let ends = own.map(\.seqs.upperBound)
        var cut = VersionVector()
        for logged in history where logged.timestamp <= timestamp {
            guard cut[logged.replica] == logged.startSeq - 1, logged.dependencies.isCovered(by: cut) else { continue }
            for change in Notebook.pieces(of: logged, endingAt: logged.replica == replicaID ? ends : []) {
                let last: UInt64
                if change.replica == replicaID, Notebook.edit(holding: change.endSeq, in: own) != nil {
                    last = time(of: change, change.endSeq, own) <= timestamp ? change.endSeq : change.startSeq - 1
                } else if change.timestamp <= timestamp {
                    let span = timestamp.rawValue - change.timestamp.rawValue  // an operation per tick: no overflow below
                    last = span >= change.endSeq - change.startSeq ? change.endSeq : change.startSeq + span
                } else {
                    last = change.startSeq - 1
                }
                cut[change.replica] = last
                if last < change.endSeq { break }
            }
        }
        return cut
    }

    /// The logged change that holds `(replica, seq)`, or nil.
    func loggedChange(_ replica: ReplicaID, _ seq: UInt64) -> Change? {
        guard let indexes = historyIndex[replica] else { return nil }
        let low = firstLogEntry(in: indexes, endingAtOrAfter: seq)
        guard low < indexes.count, history[indexes[low]].startSeq <= seq else { return nil }
        return history[indexes[low]]
    }

    /// The position in `indexes` (one replica's log entries, in seq order, as `historyIndex`
    /// holds them) of the first entry that ends at or after `seq`; `indexes.count` when none does.
    func firstLogEntry(in indexes: [Int], endingAtOrAfter seq: UInt64) -> Int {
        var low = 0
        var high = indexes.count
        while low < high {
            let mid = (low + high) / 2
            if history[indexes[mid]].endSeq < seq { low = mid + 1 } else { high = mid }
        }
        return low
    }
}

extension OpIDRange {
    /// Each identity in the range.
    var ids: [OpID] { (seq ..< seq + count).map { OpID(replica: replica, seq: $0) } }
}

extension RGAText {
    /// The text of `ids` that are in the text, in document order, one piece per stretch of
    /// characters with nothing visible between them but one another: visible ones at consecutive
    /// offsets, deleted ones at the same offset (where text inserted in their place would go).
    func pieces(of ids: [OpID]) -> [String] {
        var pieces: [(visible: Bool, end: Int, scalars: [Unicode.Scalar])] = []
        for place in placements(of: ids) {
            if let last = pieces.last, last.visible == place.visible, place.offset == (place.visible ? last.end + 1 : last.end) {
                pieces[pieces.count - 1].end = place.offset
                pieces[pieces.count - 1].scalars.append(place.scalar)
            } else {
                pieces.append((place.visible, place.offset, [place.scalar]))
            }
        }
        return pieces.map { String(String.UnicodeScalarView($0.scalars)) }
    }

    /// Where the character `id` sits: its scalar, whether it is visible, and the visible offset it
    /// is at (for a deleted one, the offset text inserted in its place would get). Nil when absent.
    ///
    /// - Complexity: O(log *n*) plus a scan of one leaf.
    package func placement(of id: OpID) -> (offset: Int, scalar: Unicode.Scalar, visible: Bool)? {
        guard let agent = tree.existingAgent(id.replica), let at = tree.find(agent: agent, seq: id.seq) else { return nil }
        let runs = tree.leaves[Int(at.leaf)].runs
        var offset = tree.visibleIndexOfLeafStart(at.leaf)
        for run in runs[..<at.run] where !run.deleted { offset += Int(run.length) }
        let run = runs[at.run]
        if !run.deleted { offset += at.offset }
        return (offset, tree.arena[run.content + at.offset], !run.deleted)
    }
}

// Merges a person can see: concurrent edits from different devices to the same region of a body
// or the same field mark the note until a device resolves them (Docs/Architecture.md, "Visible
// merges").

/// One merge of concurrent edits that a person may want to review, as `Notebook.conflicts(of:)`
/// reports it: what kind of region the two devices both changed, each side's version of the note,
/// and the merged result.
public struct NoteConflict: Hashable, Sendable {
    /// What the two devices both changed.
    public enum Kind: Hashable, Sendable, CustomStringConvertible {
        /// The same region of the body: inserts at the same place, an insert after a character
        /// the other side deleted, or deletes of the same characters.
        case body
        /// The same field, to different values.
        case field(NoteField)
        /// One side deleted the note while the other edited it without having seen the delete.
        case deletedWhileEdited

        /// `body`, the field's name, or `deletedWhileEdited`.
        public var description: String {
            switch self {
            case .body: "body"
            case .field(let field): field.name
            case .deletedWhileEdited: "deleted while edited"
            }
        }
    }

    /// One device's side of the merge.
    public struct Side: Hashable, Sendable {
        /// The device (replica) that made this side's edits.
        public var replica: ReplicaID
        /// The note's history up to and including this side's last edit in the merge: what its
        /// device had when it made that edit.
        public var version: VersionVector
        /// The note as of `version`.
        public var note: Note
    }

    /// What the two sides both changed.
    public var kind: Kind
    /// The two sides, ordered by replica.
    public var sides: [Side]
    /// Both sides' histories joined: the merge as it was first made.
    public var mergedVersion: VersionVector
    /// The note as of `mergedVersion`.
    public var merged: Note
}

/// A pair of concurrent operations (by their identities) from two replicas that touch the same
/// region or field of one note: a conflict until a resolve whose context holds both.
///
/// Operations are named per sequence number (the first character of an insert, the one delete of
/// a `deleteEach` that names the shared character), so the same pair is found whatever shape the
/// changes had when they arrived (joined, or cut by `Change.suffix(from:)`).
struct ConflictPoint: Hashable, Sendable, Comparable {
    var kind: NoteConflict.Kind
    /// The operation of the smaller replica, then the other.
    var first: OpID
    var second: OpID

    init(_ kind: NoteConflict.Kind, _ a: OpID, _ b: OpID) {
        self.kind = kind
        (first, second) = a.replica < b.replica ? (a, b) : (b, a)
    }

    /// Whether every resolve that covers `other` covers this one: the same kind and replicas, and
    /// neither operation later.
    func isDominated(by other: ConflictPoint) -> Bool {
        kind == other.kind && first.replica == other.first.replica && second.replica == other.second.replica
            && first.seq <= other.first.seq && second.seq <= other.second.seq
    }

    static func < (lhs: ConflictPoint, rhs: ConflictPoint) -> Bool {
        if lhs.kind != rhs.kind { return lhs.kind.order < rhs.kind.order }
        if lhs.first != rhs.first { return lhs.first < rhs.first }
        return lhs.second < rhs.second
    }
}

extension NoteConflict.Kind {
    /// A total order, for canonical encodings.
    var order: (UInt8, UInt8, String) {
        switch self {
        case .body: (0, 0, "")
        case .deletedWhileEdited: (1, 0, "")
        case .field(let field): (2, field.code, field.key)
        }
    }
}

extension NoteField {
    /// The reserved field whose writes resolve a note's conflicts (`Notebook.resolveConflicts(_:)`):
    /// an app-defined field under a reserved key, so the change format needs nothing new.
    public static let resolution = NoteField.extra(Notebook.reservedExtraPrefix + "resolved")

    /// Whether this is an app-defined field under a key crdt-sync keeps for itself.
    public var isReserved: Bool {
        if case .extra(let key) = self { return key.hasPrefix(Notebook.reservedExtraPrefix) }
        return false
    }

    /// A name for people: "title", "tag work", "extra x".
    public var name: String {
        switch self {
        case .title: "title"
        case .pinned: "pinned"
        case .archived: "archived"
        case .color: "color"
        case .state: "state"
        case .createdAt: "createdAt"
        case .tag(let key): "tag \(key)"
        case .extra(let key): "extra \(key)"
        }
    }
}

extension NoteLifecycle {
    /// The value a delete writes to the state field.
    static let deletedValue = FieldValue.string(NoteLifecycle.deleted.rawValue)
}

extension VersionVector {
    /// Raises `replica`'s entry to `seq` when it is below.
    mutating func raise(_ replica: ReplicaID, to seq: UInt64) {
        if seq > self[replica] { self[replica] = seq }
    }
}

extension Change {
    /// The causal context of the operation with sequence number `seq`: the dependencies and the
    /// author's operations before it (what its author had applied when it made it).
    ///
    /// - Complexity: O(entries of `dependencies`).
    public func context(ofSeq seq: UInt64) -> VersionVector {
        var vector = dependencies
        vector[replica] = seq - 1
        return vector
    }

    /// Whether the operation `id` is in the causal context of this change's operation `seq`.
    func sees(_ id: OpID, fromSeq seq: UInt64) -> Bool {
        id.replica == replica ? id.seq < seq : id.seq <= dependencies[id.replica]
    }
}

extension NoteRecord {
    /// Adds a conflict point, keeping only the maximal ones (a resolve that covers a point covers
    /// every point it dominates, so the others change nothing).
    mutating func addConflict(_ point: ConflictPoint) {
        if conflicts.count >= Notebook.maxConflictPoints { return }
        if conflicts.contains(where: { point.isDominated(by: $0) }) { return }
        conflicts.removeAll { $0.isDominated(by: point) }
        conflicts.append(point)
    }

    /// A resolve (the reserved field written by `change` at `seq`) takes away every conflict point
    /// whose two operations its author had seen.
    ///
    /// A point it does not cover can only arrive later if one of its operations was not in the
    /// resolve's past, so it stays: conflicts do not depend on the order changes arrive in.
    mutating func resolveConflicts(seenBy change: Change, atSeq seq: UInt64) {
        conflicts.removeAll { change.sees($0.first, fromSeq: seq) && change.sees($0.second, fromSeq: seq) }
    }
}

/// A place in one replica's log: the change (by its place in the replica's list of log
/// positions), the operation in it, and that operation's first seq.
///
/// The conflict check reads a replica's operations from just past what an incoming change's
/// author had seen of them. The log joins consecutive changes, so one entry can hold thousands of
/// operations, and finding that place from the entry's start at every incoming change was most of
/// the check's cost on a concurrent editing trace. What a replica has seen of another only grows,
/// so the place for the next change from the same author is at or after the last one: the check
/// keeps it per (log's replica, author) and walks on from there. Entries only grow at their end
/// and the log only grows, so a kept place stays valid.
struct LogCursor: Sendable {
    struct Key: Hashable, Sendable {
        var log: ReplicaID
        var author: ReplicaID
    }

    var entry: Int
    var operation: Int
    var seq: UInt64
}

/// The operations on one note that are concurrent with a change being applied, by what they
/// touch: only the kinds that the change's own operations can meet are gathered.
struct ConcurrentOperations: Sendable {
    /// Which kinds can meet the change: body operations meet body operations and deletes of the
    /// note; field writes meet writes of the same field; a delete of the note meets every edit.
    struct Wanted {
        var body = false
        var writes = false
        var edits = false
        var stateDeletes = false

        mutating func add(_ op: Operation) {
            switch op {
            case .insertText, .deleteText, .deleteEach:
                body = true
                stateDeletes = true
            case .setNoteField(_, let field, let value):
                guard !field.isReserved else { return }
                writes = true
                if field != .state { stateDeletes = true } else if value == NoteLifecycle.deletedValue { edits = true }
            case .setTagField, .reissue:
                break
            }
        }
    }

    var inserts: [(origin: OpID?, id: OpID)] = []
    var deletes: [(range: OpIDRange, id: OpID)] = []
    var writes: [(field: NoteField, value: FieldValue, id: OpID)] = []
    var stateDeletes: [OpID] = []
    /// The last edit (body operation or field write other than the state) of each replica.
    var lastEdits: [OpID] = []

    /// Empties the lists, keeping their storage (the ones already empty are not touched).
    mutating func removeAll() {
        if !inserts.isEmpty { inserts.removeAll(keepingCapacity: true) }
        if !deletes.isEmpty { deletes.removeAll(keepingCapacity: true) }
        if !writes.isEmpty { writes.removeAll(keepingCapacity: true) }
        if !stateDeletes.isEmpty { stateDeletes.removeAll(keepingCapacity: true) }
        if !lastEdits.isEmpty { lastEdits.removeAll(keepingCapacity: true) }
    }

    /// How many operations were gathered.
    var gathered: Int { inserts.count + deletes.count + writes.count + stateDeletes.count }

    mutating func edited(_ id: OpID) {
        if let i = lastEdits.firstIndex(where: { $0.replica == id.replica }) {
            if id.seq > lastEdits[i].seq { lastEdits[i] = id }
        } else {
            lastEdits.append(id)
        }
    }
}

extension Notebook {
    /// The prefix of app-defined field keys that crdt-sync keeps for itself (`setExtra` refuses them).
    public static let reservedExtraPrefix = "crdt-sync."

    /// Finds the conflicts that a change (any replica's, this one's included) makes with what was
    /// applied before it.
    ///
    /// Everything applied before a change is either in its causal context or concurrent with it
    /// (causal delivery), and of every concurrent pair the later one applied finds the earlier, so
    /// every pair is found exactly once whatever the order. A note with nothing concurrent costs a
    /// look at its `touched` vector.
    ///
    /// - Complexity: O(operations of the change) when nothing is concurrent; otherwise, per note,
    ///   O(concurrent operations on it × the change's operations on it).
    mutating func recordConflicts(of change: Change) {
        // Nothing at all is concurrent when its author had seen everything applied here from the
        // others (a linear history, a peer that was up to date): one look at the version vector.
        guard versionVector.storage.contains(where: { $0.replica != change.replica && $0.seq > change.dependencies[$0.replica] }) else {
            return
        }
        var lastNote: NoteID? = nil
        // The notes looked at: a change usually touches one (no array then), a few beyond that
        // (a list), many (a set).
        var firstNote: NoteID? = nil
        var looked: [NoteID] = []
        var lookedSet: Set<NoteID> = []
        for op in change.operations {
            guard let note = op.note, note != lastNote else { continue }
            lastNote = note
            if firstNote == nil {
                firstNote = note
            } else if note == firstNote {
                continue
            } else if looked.count < 32 {
                if looked.contains(note) { continue }
                looked.append(note)
            } else if !lookedSet.insert(note).inserted || looked.contains(note) {
                continue
            }
            // Through the table's index, in place: a read through `notes[note]` copies the record.
            guard let index = notes.index(forKey: note),
                  notes.values[index].rules.storage.touched.storage.contains(where: {
                      $0.replica != change.replica && $0.seq > change.dependencies[$0.replica]
                  }) else { continue }
            let touched = notes.values[index].rules.storage.touched
            let listed = notes.values[index].rules.storage.logEntries
            // What the change does to the note says which concurrent operations can meet it
            // (read in place: a copy of an operation retains its arrays).
            var wanted = ConcurrentOperations.Wanted()
            change.operations.withUnsafeBufferPointer { ops in
                for k in ops.indices where ops[k].note == note { wanted.add(ops[k]) }
            }
            // In the notebook's scratch lists, emptied but not freed: the check runs for every
            // change that has anything concurrent, and allocating its lists was a good part of it.
            var concurrent = ConcurrentOperations()
            swap(&concurrent, &conflictScratch)
            concurrent.removeAll()
            concurrentOperations(on: note, touched: touched, listed: listed, with: change, wanted: wanted, into: &concurrent)
            var points: [ConflictPoint] = []
            var seq = change.startSeq
            // Bounded work for a hostile batch (thousands of authors on one note): see `maxConflictPoints`.
            let cost = max(1, concurrent.gathered)
            var budget = Notebook.maxConflictComparisons
            change.operations.withUnsafeBufferPointer { ops in
                for k in ops.indices {
                    defer { seq += ops[k].seqCount }
                    guard ops[k].note == note else { continue }
                    guard budget > 0, points.count < Notebook.maxConflictPoints else { break }
                    budget -= cost
                    Notebook.conflicts(of: ops[k], at: seq, by: change.replica, with: concurrent, into: &points)
                }
            }
            swap(&concurrent, &conflictScratch)
            for point in points { notes.values[index].addConflict(point) }
        }
    }

    /// Records, in each note the change touches, that the replica's last log entry (where `record`
    /// just put the change) holds operations on it.
    ///
    /// - Complexity: O(operations of the change), one note lookup per run of operations on one note.
    mutating func recordLogEntry(of change: Change) {
        guard let entry = historyIndex[change.replica].map({ Int32($0.count - 1) }) else { return }
        var lastNote: NoteID? = nil
        change.operations.withUnsafeBufferPointer { ops in
            for k in ops.indices {
                guard let note = ops[k].note, note != lastNote else { continue }
                lastNote = note
                // Typing goes on in one note, joined into one entry: recorded already.
                if let last = lastLogEntry, last.replica == change.replica, last.entry == entry, last.note == note { continue }
                lastLogEntry = (change.replica, entry, note)
                guard let index = notes.index(forKey: note) else { continue }
                // In place, through the table's index (a read through `notes[note]` copies the record).
                if let i = notes.values[index].logEntries.firstIndex(where: { $0.replica == change.replica }) {
                    if notes.values[index].logEntries[i].entries.last != entry { notes.values[index].logEntries[i].entries.append(entry) }
                } else {
                    notes.values[index].logEntries.append((change.replica, [entry]))
                }
            }
        }
    }

    /// The place in `replica`'s log of its first operation that ends at or after `from`, for
    /// changes of `author` (walking on from the last place found, or searching the log).
    /// The conflict check's bounds, which only a hostile or enormous batch reaches (thousands of
    /// authors editing one note concurrently): at most this many conflict points per note, this
    /// many concurrent operations gathered per change and note, and this many comparisons of the
    /// change's operations with them. The note is marked all the same; past a bound, which points
    /// it lists may depend on the order changes arrived in. Without them, such a bundle's work
    /// would have no bound (Docs/Architecture.md, "Merges a person can see").
    static let maxConflictPoints = 256
    static let maxConcurrentGathered = 4096
    static let maxConflictComparisons = 1 << 20
    /// At most this many replicas' concurrent operations are gathered per change and note (a
    /// handful edit one note at once; a much larger bound makes a bundle from many authors slow to import).
    static let maxConcurrentAuthors = 64

    /// At most this many kept cursors (pairs of log replica and author); past it they are dropped.
    static let maxLogCursors = 4096

    private mutating func logCursor(_ replica: ReplicaID, from: UInt64, for author: ReplicaID) -> LogCursor? {
        guard let indexes = historyIndex[replica] else { return nil }
        let key = LogCursor.Key(log: replica, author: author)
        var cursor: LogCursor
        if let kept = logCursors[key], kept.seq <= from {
            cursor = kept
        } else {
            let low = firstLogEntry(in: indexes, endingAtOrAfter: from)
            guard low < indexes.count else { return nil }
            cursor = LogCursor(entry: low, operation: 0, seq: history[indexes[low]].startSeq)
        }
        // On to the operation that holds `from` (in place: a copy of an operation retains its arrays).
        var found = false
        while cursor.entry < indexes.count, !found {
            history[indexes[cursor.entry]].operations.withUnsafeBufferPointer { ops in
                while cursor.operation < ops.count {
                    let end = cursor.seq + ops[cursor.operation].seqCount
                    if end > from {
                        found = true
                        return
                    }
                    cursor.seq = end
                    cursor.operation += 1
                }
            }
            if found { break }
            cursor.entry += 1
            cursor.operation = 0
            if cursor.entry < indexes.count { cursor.seq = history[indexes[cursor.entry]].startSeq }
        }
        guard found else { return nil }
        if logCursors.count >= Notebook.maxLogCursors, logCursors[key] == nil { logCursors.removeAll(keepingCapacity: true) }
        logCursors[key] = cursor
        return cursor
    }

    /// The operations on `note` that are not in `change`'s causal context (all of them applied
    /// before it, so concurrent with it), read from the log.
    private mutating func concurrentOperations(on note: NoteID, touched: VersionVector, listed entriesByReplica: [(replica: ReplicaID, entries: [Int32])],
                                               with change: Change, wanted: ConcurrentOperations.Wanted,
                                               into result: inout ConcurrentOperations) {
        // By the note's log entries (a lookup in `touched` each): looking each toucher up in the
        // entries instead made a bundle from thousands of authors cubic.
        var visited = 0
        for (replica, listed) in entriesByReplica where replica != change.replica {
            if result.gathered >= Notebook.maxConcurrentGathered { return }
            let touchedSeq = touched[replica]
            let from = change.dependencies[replica] + 1
            guard touchedSeq >= from else { continue }
            visited += 1
            if visited > Notebook.maxConcurrentAuthors { return }
            guard let start = logCursor(replica, from: from, for: change.replica),
                  let indexes = historyIndex[replica] else { continue }
            let entry = (replica: replica, seq: touchedSeq)
            // Only the log entries that hold operations on the note, from the one that holds `from`.
            var low = 0
            var high = listed.count
            while low < high {
                let mid = (low + high) / 2
                if Int(listed[mid]) < start.entry { low = mid + 1 } else { high = mid }
            }
            for listedEntry in listed[low...] {
                if result.gathered >= Notebook.maxConcurrentGathered { return }
                let position = indexes[Int(listedEntry)]
                if history[position].startSeq > entry.seq { break }
                let replica = history[position].replica
                let atStart = Int(listedEntry) == start.entry
                var seq = atStart ? start.seq : history[position].startSeq
                // In place: a copy of the change, or of each operation, retains their arrays.
                history[position].operations.withUnsafeBufferPointer { ops in
                for k in (atStart ? start.operation : 0) ..< ops.count {
                    let count = ops[k].seqCount
                    defer { seq += count }
                    if seq > entry.seq { break }
                    guard seq + count > from, ops[k].note == note else { continue }
                    switch ops[k] {
                    case .insertText(_, let origin, _):
                        // Only the first character from `from` on can share its place with the
                        // change: the others follow characters it cannot have seen. (In an insert
                        // the log joined, that character follows the one before `from`.)
                        if wanted.body {
                            if seq >= from {
                                result.inserts.append((origin, OpID(replica: replica, seq: seq)))
                            } else {
                                result.inserts.append((OpID(replica: replica, seq: from - 1), OpID(replica: replica, seq: from)))
                            }
                        }
                        if wanted.edits { result.edited(OpID(replica: replica, seq: min(seq + count - 1, entry.seq))) }
                    case .deleteText(_, let targets):
                        if wanted.body { for target in targets { result.deletes.append((target, OpID(replica: replica, seq: seq))) } }
                        if wanted.edits { result.edited(OpID(replica: replica, seq: seq)) }
                    case .deleteEach(_, let runs):
                        if wanted.body {
                            var at = seq
                            for run in runs {
                                for target in run.targets {
                                    if at >= from, at <= entry.seq { result.deletes.append((target, OpID(replica: replica, seq: at))) }
                                    at += 1
                                }
                            }
                        }
                        if wanted.edits { result.edited(OpID(replica: replica, seq: min(seq + count - 1, entry.seq))) }
                    case .setNoteField(_, let field, let value):
                        if field.isReserved { continue }
                        let id = OpID(replica: replica, seq: seq)
                        if wanted.writes { result.writes.append((field, value, id)) }
                        if field == .state {
                            if wanted.stateDeletes, value == NoteLifecycle.deletedValue { result.stateDeletes.append(id) }
                        } else if wanted.edits {
                            result.edited(id)
                        }
                    case .setTagField, .reissue:
                        break
                    }
                }
                }
            }
        }
    }

    /// The conflict points one operation (at `seq`, by `replica`) makes with the concurrent ones.
    private static func conflicts(of op: Operation, at seq: UInt64, by replica: ReplicaID,
                                  with concurrent: ConcurrentOperations, into points: inout [ConflictPoint]) {
        func bodyConflicts(touching target: OpIDRange, _ id: OpID) {
            for insert in concurrent.inserts {
                if let origin = insert.origin, origin.replica == target.replica, origin.seq >= target.seq, origin.seq < target.endSeq {
                    points.append(ConflictPoint(.body, insert.id, id))
                }
            }
            for delete in concurrent.deletes where delete.range.replica == target.replica
                && delete.range.seq < target.endSeq && target.seq < delete.range.endSeq {
                points.append(ConflictPoint(.body, delete.id, id))
            }
        }
        func editConflicts(_ id: OpID) {
            for delete in concurrent.stateDeletes { points.append(ConflictPoint(.deletedWhileEdited, delete, id)) }
        }
        switch op {
        case .insertText(_, let origin, _):
            let id = OpID(replica: replica, seq: seq)
            let end = seq + op.seqCount  // past the last character
            for insert in concurrent.inserts {
                if insert.origin == origin {
                    points.append(ConflictPoint(.body, insert.id, id))
                } else if let shared = insert.origin, shared.replica == replica, shared.seq >= seq, shared.seq + 1 < end {
                    // The log joined inserts that another replica saw only the start of: the
                    // character after the last one it saw shares its place with its insert.
                    points.append(ConflictPoint(.body, insert.id, OpID(replica: replica, seq: shared.seq + 1)))
                }
            }
            for delete in concurrent.deletes {
                if let origin, delete.range.replica == origin.replica, origin.seq >= delete.range.seq, origin.seq < delete.range.endSeq {
                    points.append(ConflictPoint(.body, delete.id, id))
                }
                // Likewise, a character of a joined insert that follows one the other replica deleted.
                if delete.range.replica == replica, delete.range.seq + 1 < end, seq < delete.range.endSeq {
                    let last = min(end - 1, delete.range.endSeq)  // the last character whose origin it deleted
                    if last > max(seq, delete.range.seq) { points.append(ConflictPoint(.body, delete.id, OpID(replica: replica, seq: last))) }
                }
            }
            editConflicts(OpID(replica: replica, seq: end - 1))
        case .deleteText(_, let targets):
            let id = OpID(replica: replica, seq: seq)
            for target in targets { bodyConflicts(touching: target, id) }
            editConflicts(id)
        case .deleteEach(_, let runs):
            var at = seq
            for run in runs {
                for target in run.targets {
                    bodyConflicts(touching: target, OpID(replica: replica, seq: at))
                    at += 1
                }
            }
            editConflicts(OpID(replica: replica, seq: at - 1))
        case .setNoteField(_, let field, let value):
            if case .extra(let key) = field, key.hasPrefix(Notebook.reservedExtraPrefix) { return }
            let id = OpID(replica: replica, seq: seq)
            for write in concurrent.writes where write.field == field && write.value != value {
                points.append(ConflictPoint(.field(field), write.id, id))
            }
            if field == .state {
                if value == NoteLifecycle.deletedValue {
                    for edit in concurrent.lastEdits { points.append(ConflictPoint(.deletedWhileEdited, id, edit)) }
                }
            } else {
                editConflicts(id)
            }
        case .setTagField, .reissue:
            break
        }
    }

    // MARK: Public API

    /// The notes marked as merged with concurrent edits (`Note.hasConflicts`), sorted by identity,
    /// deleted ones included.
    ///
    /// - Complexity: O(*n* log *n*) in the number of notes.
    public var conflictedNoteIDs: [NoteID] {
        notes.keys.filter { !notes[$0]!.conflicts.isEmpty }.sorted()
    }

    /// The merges of concurrent edits on a note that no device has resolved: per kind of region
    /// and pair of devices, each side's version of the note and the merged result (each a replay
    /// of the note's log, `note(_:at:)`). Empty when the note is not marked.
    ///
    /// - Complexity: O(size of the log) per merge reported.
    public func conflicts(of note: NoteID) throws -> [NoteConflict] {
        if deferred != nil { return try materialized.conflicts(of: note) }
        guard let record = notes[note] else { throw CRDTError(.notFound, "no note \(note)") }
        // One merge per kind and pair of replicas: the latest operation of each side.
        var groups: [ConflictPoint] = []
        for point in record.conflicts.sorted() {
            if let i = groups.firstIndex(where: { $0.kind == point.kind && $0.first.replica == point.first.replica && $0.second.replica == point.second.replica }) {
                groups[i].first.seq = max(groups[i].first.seq, point.first.seq)
                groups[i].second.seq = max(groups[i].second.seq, point.second.seq)
            } else {
                groups.append(point)
            }
        }
        return try groups.map { group in
            let versions = [sideVersion(group.first, against: group.second, on: note),
                            sideVersion(group.second, against: group.first, on: note)]
            let merged = versions[0].merging(versions[1])  // (two causal cuts joined are one)
            let sides = try zip([group.first, group.second], versions).map { id, version in
                NoteConflict.Side(replica: id.replica, version: version, note: try self.note(note, at: version)!)
            }
            return NoteConflict(kind: group.kind, sides: sides, mergedVersion: merged, merged: try self.note(note, at: merged)!)
        }
    }

    /// One side of a merge, as a version: what the replica of `id` had after its last operation on
    /// `note` made without having seen `other` (so the whole of its edit, and what it did beside
    /// it, not just the character that met the other side). Depends only on the operations'
    /// contexts, not on how the log joined them.
    func sideVersion(_ id: OpID, against other: OpID, on note: NoteID) -> VersionVector {
        var last = id.seq
        if let indexes = historyIndex[id.replica] {
            for position in indexes {
                let change = history[position]
                guard change.endSeq >= id.seq else { continue }
                if change.dependencies[other.replica] >= other.seq { break }
                var seq = change.startSeq
                for op in change.operations {
                    if op.note == note { last = max(last, seq + op.seqCount - 1) }
                    seq += op.seqCount
                }
            }
        }
        return inclusiveContext(of: OpID(replica: id.replica, seq: last))
    }

    /// The causal context of the operation `id`, with the operation itself.
    func inclusiveContext(of id: OpID) -> VersionVector {
        var vector = VersionVector()
        vector[id.replica] = id.seq
        return causalCut(holding: vector)
    }

    /// The smallest causal cut that holds `version`: what the changes it covers depend on, added
    /// until nothing is missing. A re-issuing change carries the context of what it re-issues,
    /// which may lack what its author's earlier changes depend on (after a repair in two steps),
    /// and a change made on a withdrawn branch names that branch's context: taken alone, a
    /// context covered changes without what they depend on, and showing the merge threw.
    ///
    /// - Complexity: O(log entries walked × their dependencies): each entry is taken once, since
    ///   the cut only grows and an entry walked again adds nothing (a crafted history of many
    ///   re-issuing changes cannot make it quadratic).
    func causalCut(holding version: VersionVector) -> VersionVector {
        var cut = version
        var walked: Set<Int> = []
        var grown = cut.storage.map(\.replica)
        while let replica = grown.popLast() {
            guard let indexes = historyIndex[replica], !indexes.isEmpty else { continue }
            let seq = cut[replica]
            // Back to (and with) the first change made on top of everything before it; an entry
            // walked before was walked with a lower seq, which went at least as far back.
            var index = min(firstLogEntry(in: indexes, endingAtOrAfter: seq), indexes.count - 1)
            while index >= 0, walked.insert(indexes[index]).inserted {
                let change = history[indexes[index]]
                for dependency in change.dependencies.storage where cut[dependency.replica] < dependency.seq {
                    cut[dependency.replica] = dependency.seq
                    grown.append(dependency.replica)
                }
                guard change.containsReissue || change.startSeq > seq else { break }
                index -= 1
            }
        }
        return cut
    }

    /// Marks a note's merges as reviewed, on every replica the change reaches: every conflict
    /// whose edits this replica has seen is resolved (concurrent edits it has not seen yet will
    /// mark the note again when they arrive).
    ///
    /// - Returns: the change, or nil when the note has nothing to resolve (nothing is recorded).
    /// - Throws: `.notFound` for an unknown note.
    /// - Complexity: O(conflicts of the note).
    @discardableResult
    public mutating func resolveConflicts(_ note: NoteID) throws -> Change? {
        materialize()
        guard let record = notes[note] else { throw CRDTError(.notFound, "no note \(note)") }
        guard !record.conflicts.isEmpty else { return nil }
        return commitLocal([.setNoteField(note: note, field: .resolution, value: .bool(true))])
    }
}

/// Where several versions of a text differ, with some of what they share on either side: the
/// region `crdt-sync show --conflict` prints for each side of a merge and the merged result.
public struct DifferingRegion: Hashable, Sendable {
    /// Up to `context` Unicode scalars that every version has just before the region.
    public var before: String
    /// Each version's own text in the region, in the order given.
    public var parts: [String]
    /// Up to `context` Unicode scalars that every version has just after the region.
    public var after: String
    /// Whether the versions share more text before `before`.
    public var isCutBefore: Bool
    /// Whether the versions share more text after `after`.
    public var isCutAfter: Bool

    /// The region where `texts` differ: everything between their longest common prefix and
    /// their longest common suffix (in Unicode scalars, the two never overlapping).
    ///
    /// - Complexity: O(total length of the texts).
    public init(_ texts: [String], context: Int = 20) {
        let scalars = texts.map { Array($0.unicodeScalars) }
        let shortest = scalars.map(\.count).min() ?? 0
        var prefix = 0
        while prefix < shortest, scalars.allSatisfy({ $0[prefix] == scalars[0][prefix] }) { prefix += 1 }
        var suffix = 0
        while suffix < shortest - prefix,
              scalars.allSatisfy({ $0[$0.count - 1 - suffix] == scalars[0][scalars[0].count - 1 - suffix] }) {
            suffix += 1
        }
        func string(_ slice: ArraySlice<Unicode.Scalar>) -> String {
            var view = String.UnicodeScalarView()
            view.append(contentsOf: slice)
            return String(view)
        }
        let first = scalars.first ?? []
        let context = max(0, context)
        before = string(first[max(0, prefix - context) ..< prefix])
        after = string(first[(first.count - suffix) ..< (first.count - suffix + min(context, suffix))])
        isCutBefore = prefix > context
        isCutAfter = suffix > context
        parts = scalars.map { string($0[prefix ..< ($0.count - suffix)]) }
    }
}

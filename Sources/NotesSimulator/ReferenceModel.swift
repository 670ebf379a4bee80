import NotesCRDT

/// An independent model of what every device must end with, written plainly from the definitions
/// rather than with the code under test: it reads the operations of every change a device made,
/// never merges anything with `Notebook`, `LWWRegister` or `RGAText`.
///
/// - A field (of a note or a tag) is worth the value of the write with the greatest
///   `(timestamp, replica, seq)`.
/// - A note's visible body characters are every inserted `(replica, seq)` that no recorded delete
///   names.
///
/// Changes made by a device that was reinstalled before they left it are taken out with
/// `forget(replica:keeping:)`: those edits are legitimately gone, and exactly those.
struct ReferenceModel {
    struct Write {
        var timestamp: Timestamp
        var replica: ReplicaID
        var seq: UInt64
        var value: FieldValue
        /// What its author had applied from the other replicas when it wrote (its own earlier
        /// operations, `1 ..< seq`, are implied).
        var dependencies = VersionVector()

        /// Whether the operation `(replica, seq)` is in this write's causal context.
        func saw(_ replica: ReplicaID, _ seq: UInt64) -> Bool {
            replica == self.replica ? seq < self.seq : seq <= dependencies[replica]
        }

        /// Whether this write beats `other` under last-writer-wins.
        func beats(_ other: Write) -> Bool {
            if timestamp != other.timestamp { return timestamp > other.timestamp }
            if replica != other.replica { return replica > other.replica }
            return seq > other.seq
        }
    }

    struct FieldKey: Hashable {
        var note: NoteID
        var field: NoteField
    }

    struct TagKey: Hashable {
        var tag: String
        var field: TagField
    }

    /// Who wrote a recorded change: its replica identity, and which of the databases that wrote
    /// as it (a branch: 0 unless a copy kept the identity, `faults.forks`). Two databases that
    /// write as one identity hand out the same seqs for different operations; their changes are
    /// kept apart until one of them re-issues its own (`withdraw`).
    struct Author: Hashable {
        var replica: ReplicaID
        var branch: Int
    }

    /// Every change recorded, by author and branch.
    private(set) var changes: [Author: [Change]] = [:]
    /// Operations of forgotten replicas that survive: per author and branch, the seqs kept.
    private var kept: [Author: [ClosedRange<UInt64>]] = [:]

    var changeCount: Int { changes.values.reduce(0) { $0 + $1.count } }

    /// Records a change a device made (on branch `branch` of its identity).
    mutating func record(_ change: Change, branch: Int = 0) {
        changes[Author(replica: change.replica, branch: branch), default: []].append(change)
    }

    /// Takes out the operations of `replica` recorded on `branch` from seq `first` on: a copy of
    /// its database wrote those seqs too, and the device re-issued its own as the identity it
    /// writes as (recorded apart), so the seqs hold the copy's operations.
    mutating func withdraw(_ replica: ReplicaID, branch: Int = 0, from first: UInt64) {
        let author = Author(replica: replica, branch: branch)
        changes[author] = changes[author]?.compactMap { change in
            change.startSeq >= first ? nil : change.endSeq >= first ? change.prefix(through: first - 1) : change
        }
    }

    /// Forgets every operation of `replica` (on `branch`) whose seq is not in `ranges` (a device
    /// reinstalled from nothing: what it had not passed on anywhere is gone).
    mutating func forget(replica: ReplicaID, branch: Int = 0, keeping ranges: [ClosedRange<UInt64>]) {
        kept[Author(replica: replica, branch: branch)] = ranges
    }

    /// Whether some branch of `replica` recorded `seq` and every one that did forgot it (its
    /// device was replaced or died before passing it on).
    func forgot(_ replica: ReplicaID, _ seq: UInt64) -> Bool {
        var recorded = false
        for (author, list) in changes where author.replica == replica && list.contains(where: { $0.startSeq <= seq && seq <= $0.endSeq }) {
            if survives(author, seq) { return false }
            recorded = true
        }
        return recorded
    }

    /// Forgets the operations `change` holds, on every branch that recorded them: it waits for
    /// good on forgotten operations (an author's seqs apply in order, so a device's later seqs
    /// that left it are gone with the earlier ones that did not).
    mutating func forgetWaiting(_ change: Change) {
        for (author, list) in changes where author.replica == change.replica
            && list.contains(where: { $0.startSeq <= change.startSeq && change.startSeq <= $0.endSeq && Self.sameOperation($0, change, at: change.startSeq) }) {
            var ranges: [ClosedRange<UInt64>] = []
            for range in kept[author] ?? [1 ... UInt64.max] {
                if range.lowerBound < change.startSeq { ranges.append(range.lowerBound ... min(range.upperBound, change.startSeq - 1)) }
                if range.upperBound > change.endSeq { ranges.append(max(range.lowerBound, change.endSeq + 1) ... range.upperBound) }
            }
            kept[author] = ranges
        }
    }

    /// The seqs of `replica` that `branch` recorded and another branch recorded too, with other
    /// operations: a fork not repaired yet (empty when there is none).
    func contestedSeqs(of replica: ReplicaID, branch: Int) -> [ClosedRange<UInt64>] {
        guard let mine = changes[Author(replica: replica, branch: branch)], !mine.isEmpty else { return [] }
        var result: [ClosedRange<UInt64>] = []
        for (author, theirs) in changes where author.replica == replica && author.branch != branch {
            for a in mine {
                for b in theirs where a.startSeq <= b.endSeq && b.startSeq <= a.endSeq {
                    let low = max(a.startSeq, b.startSeq), high = min(a.endSeq, b.endSeq)
                    for seq in low ... high where !ReferenceModel.sameOperation(a, b, at: seq) {
                        if let last = result.last, last.upperBound + 1 == seq { result[result.count - 1] = last.lowerBound ... seq } else { result.append(seq ... seq) }
                    }
                }
            }
        }
        return result
    }

    /// Whether some branch of the change's author records the operation the change holds at
    /// `seq` (not withdrawn).
    func records(_ change: Change, at seq: UInt64) -> Bool {
        for (author, list) in changes where author.replica == change.replica {
            for recorded in list where recorded.startSeq <= seq && seq <= recorded.endSeq {
                if ReferenceModel.sameOperation(recorded, change, at: seq) { return true }
            }
        }
        return false
    }

    /// Whether two changes of one replica hold the same operation at `seq` (the same timestamp,
    /// the same operation cut to that seq).
    static func sameOperation(_ a: Change, _ b: Change, at seq: UInt64) -> Bool {
        guard a.timestamp(ofSeq: seq) == b.timestamp(ofSeq: seq),
              let x = a.suffix(from: seq)?.prefix(through: seq), let y = b.suffix(from: seq)?.prefix(through: seq) else { return false }
        return x.operations == y.operations
    }

    /// How many recorded operations were forgotten.
    var forgottenOperations: Int {
        var count = 0
        for (author, list) in changes {
            guard kept[author] != nil else { continue }
            for change in list {
                for seq in change.startSeq ... change.endSeq where !survives(author, seq) { count += 1 }
            }
        }
        return count
    }

    private func survives(_ author: Author, _ seq: UInt64) -> Bool {
        guard let ranges = kept[author] else { return true }
        return ranges.contains { $0.contains(seq) }
    }

    /// What every device must show.
    struct Expected {
        var fields: [FieldKey: Write] = [:]
        var tagFields: [TagKey: Write] = [:]
        /// Per note, every inserted character still alive, with its scalar.
        var visible: [NoteID: [OpID: Unicode.Scalar]] = [:]
        var notes: Set<NoteID> = []
        var tags: Set<String> = []
        /// Per note, the keys of the tags whose membership field's winning write is `true`.
        var memberships: [NoteID: [String]] = [:]
        /// Per note and replica, the highest seq of an edit (a body operation, or a write of a
        /// field other than the state and reserved ones): a winning delete that did not see one
        /// leaves the note in the trash.
        var edits: [NoteID: [ReplicaID: UInt64]] = [:]
        /// Per note, the fields two replicas wrote to different values without either having
        /// seen the other's write, unless a resolve of the note (`NoteField.resolution`) saw
        /// both: the merges a person is shown (`Notebook.conflicts(of:)`).
        var fieldConflicts: [NoteID: Set<NoteField>] = [:]

        /// The state a reader sees: a delete that some edit did not see leaves the note trashed.
        func state(of note: NoteID) -> NoteLifecycle {
            guard let write = fields[FieldKey(note: note, field: .state)] else { return .active }
            let written = write.value.stringValue.flatMap(NoteLifecycle.init(rawValue:)) ?? .active
            guard written == .deleted else { return written }
            let unseen = (edits[note] ?? [:]).contains { replica, seq in !write.saw(replica, seq) }
            return unseen ? .trashed : .deleted
        }
    }

    /// Works out the expected state from the recorded operations.
    func expected() -> Expected {
        var result = Expected()
        var inserted: [NoteID: [OpID: Unicode.Scalar]] = [:]
        var deleted: [NoteID: Set<OpID>] = [:]
        var writes: [FieldKey: [Write]] = [:]
        var resolves: [NoteID: [Write]] = [:]
        for (author, list) in changes {
            let replica = author.replica
            for change in list {
                var seq = change.startSeq
                for op in change.operations {
                    defer { seq += op.seqCount }
                    switch op {
                    case .setNoteField(let note, let field, let value):
                        guard survives(author, seq) else { continue }
                        result.notes.insert(note)
                        if field != .state, !field.isReserved { result.edits[note, default: [:]][replica] = max(result.edits[note]?[replica] ?? 0, seq) }
                        let write = Write(timestamp: change.timestamp(ofSeq: seq), replica: replica, seq: seq, value: value,
                                          dependencies: change.dependencies)
                        let key = FieldKey(note: note, field: field)
                        if !field.isReserved { writes[key, default: []].append(write) }
                        if field == .resolution { resolves[note, default: []].append(write) }
                        if let current = result.fields[key], !write.beats(current) { continue }
                        result.fields[key] = write
                    case .setTagField(let tag, let field, let value):
                        guard survives(author, seq) else { continue }
                        result.tags.insert(tag)
                        let write = Write(timestamp: change.timestamp(ofSeq: seq), replica: replica, seq: seq, value: value)
                        let key = TagKey(tag: tag, field: field)
                        if let current = result.tagFields[key], !write.beats(current) { continue }
                        result.tagFields[key] = write
                    case .insertText(let note, _, let text):
                        for (i, scalar) in text.enumerated() where survives(author, seq + UInt64(i)) {
                            result.notes.insert(note)
                            inserted[note, default: [:]][OpID(replica: replica, seq: seq + UInt64(i))] = scalar
                            result.edits[note, default: [:]][replica] = max(result.edits[note]?[replica] ?? 0, seq + UInt64(i))
                        }
                    case .deleteText(let note, let targets):
                        guard survives(author, seq) else { continue }
                        result.notes.insert(note)
                        result.edits[note, default: [:]][replica] = max(result.edits[note]?[replica] ?? 0, seq)
                        for target in targets {
                            for s in target.seq ..< target.seq + target.count {
                                deleted[note, default: []].insert(OpID(replica: target.replica, seq: s))
                            }
                        }
                    case .deleteEach(let note, let runs):  // one delete per target, each with its own seq
                        for (i, target) in runs.flatMap(\.targets).enumerated() where survives(author, seq + UInt64(i)) {
                            result.notes.insert(note)
                            result.edits[note, default: [:]][replica] = max(result.edits[note]?[replica] ?? 0, seq + UInt64(i))
                            for s in target.seq ..< target.seq + target.count {
                                deleted[note, default: []].insert(OpID(replica: target.replica, seq: s))
                            }
                        }
                    case .reissue:
                        continue
                    }
                }
            }
        }
        for (key, list) in writes where list.count > 1 {
            pairs: for i in list.indices {
                for j in list.indices where j > i {
                    let (a, b) = (list[i], list[j])
                    if a.replica != b.replica, a.value != b.value, !a.saw(b.replica, b.seq), !b.saw(a.replica, a.seq),
                       !(resolves[key.note] ?? []).contains(where: { $0.saw(a.replica, a.seq) && $0.saw(b.replica, b.seq) }) {
                        result.fieldConflicts[key.note, default: []].insert(key.field)
                        break pairs
                    }
                }
            }
        }
        for (note, chars) in inserted {
            let gone = deleted[note] ?? []
            result.visible[note] = chars.filter { !gone.contains($0.key) }
        }
        for (key, write) in result.fields {
            if case .tag(let tag) = key.field, write.value == .bool(true) { result.memberships[key.note, default: []].append(tag) }
        }
        return result
    }

    /// The verdicts on the bodies `differences` compared, by note: the body's identities and text
    /// with what was found. A body's verdict depends only on those and the expected characters,
    /// so a device whose body of a note is the same as one compared before (devices that
    /// converged) gets the same verdict without the character-by-character comparison again.
    struct BodyVerdicts {
        fileprivate var byNote: [NoteID: (identities: [OpIDRange], text: String, lines: [String])] = [:]
    }

    /// Compares one device's CRDT state with the expected state.
    ///
    /// - Returns: one line per difference (empty when the device lost nothing and invented nothing).
    static func differences(_ notebook: Notebook, _ expected: Expected, device: String, limit: Int = 20) -> [String] {
        var verdicts = BodyVerdicts()
        return differences(notebook, expected, device: device, limit: limit, verdicts: &verdicts)
    }

    /// `differences`, reusing the body verdicts of notes already compared (for other devices
    /// against the same expected state) when a body is the same.
    static func differences(_ notebook: Notebook, _ expected: Expected, device: String, limit: Int = 20,
                            verdicts: inout BodyVerdicts) -> [String] {
        var problems: [String] = []
        func report(_ line: String) { if problems.count < limit { problems.append("\(device): \(line)") } else if problems.count == limit { problems.append("\(device): ...") } }
        let noteIDs = Set(notebook.noteIDs)
        for id in expected.notes.subtracting(noteIDs).sorted() { report("note \(id) is missing") }
        for id in noteIDs.subtracting(expected.notes).sorted() { report("note \(id) exists but no recorded edit made it") }
        func value(_ note: NoteID, _ field: NoteField) -> FieldValue? { expected.fields[FieldKey(note: note, field: field)]?.value }
        func tagName(_ key: String) -> String {
            expected.tagFields[TagKey(tag: key, field: .name)]?.value.stringValue ?? key
        }
        for id in expected.notes.intersection(noteIDs).sorted() {
            guard let note = notebook.noteFields(id) else { continue }  // the body is checked below
            let title = value(id, .title)?.stringValue ?? ""
            if note.title != title { report("note \(id): title is \"\(note.title)\", expected \"\(title)\"") }
            let pinned = value(id, .pinned)?.boolValue ?? false
            if note.pinned != pinned { report("note \(id): pinned is \(note.pinned), expected \(pinned)") }
            let archived = value(id, .archived)?.boolValue ?? false
            if note.archived != archived { report("note \(id): archived is \(note.archived), expected \(archived)") }
            let color = value(id, .color)?.stringValue
            if note.color != color { report("note \(id): color is \(note.color ?? "nil"), expected \(color ?? "nil")") }
            let state = expected.state(of: id)
            if note.state != state { report("note \(id): state is \(note.state), expected \(state)") }
            let created = UInt64(max(0, value(id, .createdAt)?.intValue ?? 0))
            if note.createdAt != created { report("note \(id): createdAt is \(note.createdAt), expected \(created)") }
            let tags = (expected.memberships[id] ?? []).map(tagName).sorted()
            if note.tags != tags { report("note \(id): tags are \(note.tags), expected \(tags)") }
            let merged = expected.fieldConflicts[id] ?? []
            if note.hasConflicts || !merged.isEmpty {
                do {
                    let marked = Set(try notebook.conflicts(of: id).compactMap { conflict -> NoteField? in
                        if case .field(let field) = conflict.kind { return field } else { return nil }
                    })
                    if marked != merged {
                        report("note \(id): the fields marked as merged are \(marked.map(\.name).sorted()), expected \(merged.map(\.name).sorted())")
                    }
                } catch {
                    // (`conflicts(of:)` is what `crdt-sync conflicts` and `show --conflict` print.)
                    report("note \(id): its merges cannot be shown: \(error)")
                }
            }

            // The body: the same characters, and the text they spell.
            let body = notebook.body(of: id) ?? RGAText()
            let identities = body.identities(of: 0 ..< body.count)
            let string = body.string
            if let known = verdicts.byNote[id], known.identities == identities, known.text.utf8.elementsEqual(string.utf8) {
                for line in known.lines { report(line) }
                continue
            }
            var lines: [String] = []
            let chars = expected.visible[id] ?? [:]
            // One pass over the device's characters, in its order: each is looked up once in the
            // expected ones (its scalar spells the text) and counted once if it is one of them.
            var seen = Set<OpID>(minimumCapacity: body.count)
            var found = 0
            var extra = 0
            var firstExtra: OpID?
            var text = String.UnicodeScalarView()
            for range in identities {
                for s in range.seq ..< range.seq + range.count {
                    let opID = OpID(replica: range.replica, seq: s)
                    let isNew = seen.insert(opID).inserted
                    if let scalar = chars[opID] {
                        text.append(scalar)
                        if isNew { found += 1 }
                    } else {
                        extra += 1
                        if firstExtra == nil { firstExtra = opID }
                    }
                }
            }
            if found < chars.count {
                let missing = chars.keys.filter { !seen.contains($0) }
                lines.append("note \(id): \(missing.count) typed characters are missing (first \(missing.min()!))")
            }
            if let firstExtra { lines.append("note \(id): \(extra) characters are visible that should not be (first \(firstExtra))") }
            if found == chars.count, extra == 0 {
                if !String(text).unicodeScalars.elementsEqual(string.unicodeScalars) {
                    lines.append("note \(id): the body text does not spell its characters")
                }
            }
            verdicts.byNote[id] = (identities, string, lines)
            for line in lines { report(line) }
        }
        // Tags.
        let tagKeys = Set(notebook.tags.map(\.key))
        if tagKeys != expected.tags { report("tags are \(tagKeys.sorted()), expected \(expected.tags.sorted())") }
        for tag in notebook.tags where expected.tags.contains(tag.key) {
            if tag.name != tagName(tag.key) { report("tag \(tag.key): name is \(tag.name), expected \(tagName(tag.key))") }
        }
        return problems
    }
}

import NotesCRDT
import NotesStore

/// Checks of the edits beyond typing and field writes (undo, tag renames, emptying the trash,
/// resolving merges, saving an editor opened before the note changed): each compares the
/// notebook before and after the edit with what the edit promises.
extension Simulation {
    /// A body's characters, in document order, with their identities.
    static func characters(_ body: RGAText?) -> [(id: OpID, scalar: Unicode.Scalar)] {
        guard let body else { return [] }
        var ids: [OpID] = []
        ids.reserveCapacity(body.count)
        for range in body.identities(of: 0 ..< body.count) {
            for seq in range.seq ..< range.seq + range.count { ids.append(OpID(replica: range.replica, seq: seq)) }
        }
        return zip(ids, body.string.unicodeScalars).map { (id: $0, scalar: $1) }
    }

    /// `undo()` reverts the device's latest edit that is not undone yet (`expected`, as the
    /// simulator followed its edits), and only when there is one.
    static func undoTargetProblem(_ result: UndoResult?, expected: ClosedRange<UInt64>?) -> String? {
        guard result?.seqs != expected else { return nil }
        return "undo reverted \(result.map { "seqs \($0.seqs)" } ?? "nothing"), not the device's latest edit (\(expected.map { "seqs \($0)" } ?? "none"))"
    }

    /// An undo of `replica`'s seqs `result.seqs` takes back exactly what they did and nothing of
    /// anyone else's: in each note they touched, a character another edit typed stays and one
    /// they typed goes; a field another write holds keeps its value and one they wrote is written
    /// back; a note they created is deleted. A note deleted after the undo keeps what it had.
    static func undoEffectProblem(_ result: UndoResult, replica: ReplicaID, before: Notebook, after: Notebook) -> String? {
        func undone(_ id: OpID?) -> Bool { id.map { $0.replica == replica && result.seqs.contains($0.seq) } ?? false }
        for note in result.notes {
            guard let old = before.noteFields(note) else { continue }
            let new = after.noteFields(note)
            let deleted = new?.state == .deleted
            if undone(before.register(of: note, .createdAt)?.writer) {
                if !deleted { return "undoing the edit that created note \(note) left it \(new?.state.rawValue ?? "missing")" }
                continue
            }
            let visible = Set(characters(after.body(of: note)).map(\.id))
            for (id, _) in characters(before.body(of: note)) {
                if undone(id) {
                    if !deleted, visible.contains(id) { return "undo left character \(id) that the undone edit typed in note \(note)" }
                } else if !visible.contains(id) {
                    return "undo removed character \(id) of note \(note), which the undone edit did not type"
                }
            }
            var fields: [NoteField] = [.title, .pinned, .archived, .color, .state]
            fields += Set((old.tags + (new?.tags ?? [])).map(Notebook.tagKey)).sorted().map(NoteField.tag)
            for field in fields {
                let was = before.register(of: note, field)
                let now = after.register(of: note, field)
                if undone(was?.writer) {
                    if !deleted, undone(now?.writer) { return "undo left the \(field) of note \(note) as the undone edit wrote it" }
                } else if was?.value != now?.value {
                    return "undo changed the \(field) of note \(note) (\(was.map { "\($0.value)" } ?? "unset") to \(now.map { "\($0.value)" } ?? "unset")), which the undone edit did not write"
                }
            }
        }
        return nil
    }

    /// Renaming tag `old` to `new` moves every note that was in `old` (deleted ones aside) to
    /// `new` and changes no other note's tags; a rename that only changes letter case renames.
    static func tagRenameProblem(from old: String, to new: String, before: Notebook, after: Notebook) -> String? {
        let oldKey = Notebook.tagKey(old)
        let newKey = Notebook.tagKey(new)
        if oldKey == newKey {
            let name = after.tags.first { $0.key == newKey }?.name
            return name == new ? nil : "renaming tag \(old) to \(new) left it named \(name ?? "nothing")"
        }
        for note in before.allNotes where note.state != .deleted {
            let was = Set(note.tags.map(Notebook.tagKey))
            let now = Set((after.noteFields(note.id)?.tags ?? []).map(Notebook.tagKey))
            if was.contains(oldKey) {
                if now.contains(oldKey) || !now.contains(newKey) {
                    return "renaming tag \(old) to \(new) did not move note \(note.id) (its tags are now \(now.sorted()))"
                }
            } else if now != was {
                return "renaming tag \(old) to \(new) changed the tags of note \(note.id), which was not in it (\(was.sorted()) to \(now.sorted()))"
            }
        }
        return nil
    }

    /// Emptying the trash deletes every trashed note, says how many, and moves no other note.
    static func emptyTrashProblem(count: Int, before: Notebook, after: Notebook) -> String? {
        var trashed = 0
        for note in before.allNotes {
            let now = after.noteFields(note.id)?.state
            if note.state == .trashed {
                trashed += 1
                if now != .deleted { return "emptying the trash left trashed note \(note.id) \(now?.rawValue ?? "missing")" }
            } else if now != note.state {
                return "emptying the trash moved note \(note.id) from \(note.state.rawValue) to \(now?.rawValue ?? "missing")"
            }
        }
        return count == trashed ? nil : "emptying the trash reported \(count) notes deleted, not \(trashed)"
    }

    /// Right after its merges are resolved, a note shows none.
    static func unresolvedProblem(_ note: NoteID, after: Notebook) -> String? {
        let left = (try? after.conflicts(of: note)) ?? []
        guard after.noteFields(note)?.hasConflicts == true || !left.isEmpty else { return nil }
        return "note \(note) is still marked as merged (\(left.count) merges) right after its merges were resolved"
    }

    /// A text saved from an editor given `original`, onto a body that became `current` meanwhile
    /// (`TextDiff.rebase`), must be exactly this: what the person deleted of the original goes,
    /// what they typed is there, right after the original character it followed (the nearest
    /// one `current` still has), and every other character of `current` stays (text typed into
    /// a range the person deleted too). Which of `current`'s characters are the original's is
    /// what the text diff pairs (`TextDiff.splices`, which the plain `editText` check covers):
    /// where a run of equal characters lets it pair one that is not the same identity, a
    /// concurrent character may stand in for an original one of the same text. `isNew` tells
    /// the characters the save typed. Nil when the save is right.
    static func rebasedSaveProblem(original: [(id: OpID, scalar: Unicode.Scalar)], edited: [Unicode.Scalar],
                                   current: [(id: OpID, scalar: Unicode.Scalar)], after: [(id: OpID, scalar: Unicode.Scalar)],
                                   isNew: (OpID) -> Bool) -> String? {
        let o = original.map(\.scalar)
        let c = current.map(\.scalar)
        // Where each original character is in `current` (nil: deleted there), as the diff pairs them.
        var position = [Int?](repeating: nil, count: o.count)
        var oi = 0
        var ci = 0
        for theirs in (o == c ? [] : TextDiff.splices(from: o, to: c)) {
            while oi < theirs.offset { position[oi] = ci; oi += 1; ci += 1 }
            oi += theirs.deleteCount
            ci += theirs.insert.count
        }
        while oi < o.count { position[oi] = ci; oi += 1; ci += 1 }

        var deleted = Set<Int>()  // indexes into `current`
        var inserts: [Int: [Unicode.Scalar]] = [:]
        for splice in TextDiff.splices(from: o, to: edited).sorted(by: { $0.offset < $1.offset }) {
            for i in splice.offset ..< splice.offset + splice.deleteCount { if let at = position[i] { deleted.insert(at) } }
            var anchor = splice.offset - 1
            while anchor >= 0, position[anchor] == nil { anchor -= 1 }
            inserts[anchor >= 0 ? position[anchor]! + 1 : 0, default: []] += splice.insert
        }
        var expected: [(id: OpID?, scalar: Unicode.Scalar)] = []
        for i in 0 ... current.count {
            for scalar in inserts[i] ?? [] { expected.append((nil, scalar)) }
            if i < current.count, !deleted.contains(i) { expected.append((current[i].id, current[i].scalar)) }
        }
        let got = after.map { (id: isNew($0.id) ? nil : Optional($0.id), scalar: $0.scalar) }
        if got.count == expected.count, !zip(got, expected).contains(where: { $0.id != $1.id || $0.scalar != $1.scalar }) { return nil }
        let originalIDs = Set(original.map(\.id))
        let visible = Set(after.map(\.id))
        if let lost = current.enumerated().first(where: { !deleted.contains($0.offset) && !originalIDs.contains($0.element.id) && !visible.contains($0.element.id) }) {
            return "character \(lost.element.id), typed elsewhere while the editor was open, is gone"
        }
        func text(_ scalars: [Unicode.Scalar]) -> String { String(String.UnicodeScalarView(scalars)) }
        return "it reads \"\(text(after.map(\.scalar)))\", expected \"\(text(expected.map(\.scalar)))\""
    }
}

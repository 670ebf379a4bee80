import NotesCRDT
import NotesStore

/// Checks that compare what a store says with what it must say, found missing by planting bugs
/// in the shipped code (Scripts/mutants.sh, Docs/Simulation.md "Planted bugs").
extension Simulation {
    /// What a note's digest stands for: the visible state it must tell apart from every other
    /// (`Notebook.noteDigest`). Fields a digest need not cover (the update time, tag names) are
    /// left out; tags are by key.
    struct NoteFingerprint: Equatable {
        var id: NoteID
        var title: String
        var pinned: Bool
        var archived: Bool
        var color: String?
        var state: NoteLifecycle
        var tagKeys: [String]
        var createdAt: UInt64
        var restored: Bool
        var body: String

        init?(_ notebook: Notebook, _ id: NoteID) {
            guard let note = notebook.noteFields(id) else { return nil }
            self.id = id
            title = note.title
            pinned = note.pinned
            archived = note.archived
            color = note.color
            state = note.state
            tagKeys = note.tags.map(Notebook.tagKey).sorted()
            createdAt = note.createdAt
            restored = note.restoredByConcurrentEdit
            body = notebook.body(of: id)?.string ?? ""
        }
    }

    /// Every note digest a run has seen, with the visible state it was the digest of: two states
    /// that differ must never share a digest, or devices that differ would look converged (and a
    /// reader of the stored digests would miss a change).
    struct DigestLedger {
        private var seen: [[UInt8]: NoteFingerprint] = [:]

        /// Records the note's digest and state; a problem when the digest stood for another state.
        mutating func record(digest: [UInt8], _ state: NoteFingerprint) -> String? {
            if let earlier = seen[digest] {
                // A note's digest does not cover its id: two notes in the same state share one.
                guard let what = NoteFingerprint.difference(earlier, state) else { return nil }
                return "note \(state.id): two different states have the same digest \(digest.prefix(6).map { String($0, radix: 16) }.joined()) (\(what))"
            }
            seen[digest] = state
            return nil
        }

        mutating func record(_ notebook: Notebook, _ id: NoteID) -> String? {
            guard let digest = notebook.noteDigest(id), let state = NoteFingerprint(notebook, id) else { return nil }
            return record(digest: digest, state)
        }
    }

    /// The notes the CRDT has in each tag (by key), the deleted ones left out: what `list(tag:)`
    /// must give.
    static func notesByTag(_ notebook: Notebook) -> [String: Set<NoteID>] {
        var byTag: [String: Set<NoteID>] = [:]
        for key in notebook.tags.map(\.key) { byTag[key] = [] }
        for id in notebook.noteIDs {
            guard let note = notebook.noteFields(id), note.state != .deleted else { continue }
            for name in note.tags { byTag[Notebook.tagKey(name), default: []].insert(id) }
        }
        return byTag
    }

    /// The tags whose stored rows (`list(.all, tag:)`) do not hold exactly the CRDT's notes.
    static func tagRowDifferences(_ store: NoteStore, _ notebook: Notebook) throws -> [String] {
        var problems: [String] = []
        let expected = notesByTag(notebook)
        for key in Set(expected.keys).union(Words.tags.map(Notebook.tagKey)).sorted() {
            let listed = Set(try store.list(.all, tag: key).map(\.id))
            let want = expected[key] ?? []
            if listed != want {
                problems.append("tag \(key): list(tag:) gives \(listed.subtracting(want).count) note(s) not in it and misses \(want.subtracting(listed).count)")
            }
        }
        return problems
    }

    /// The deleted notes a reader lists (`list(.deleted)`, the tombstone rows) must be the CRDT's
    /// deleted notes: a note that came back keeps no tombstone, a deleted one has one.
    static func tombstoneDifference(_ store: NoteStore, _ notebook: Notebook) throws -> String? {
        let listed = Set(try store.list(.deleted).map(\.id))
        let deleted = Set(notebook.noteIDs.filter { notebook.noteFields($0)?.state == .deleted })
        guard listed != deleted else { return nil }
        return "the deleted notes list \(listed.subtracting(deleted).count) note(s) that are not deleted and misses \(deleted.subtracting(listed).count)"
    }

    /// The first change a step applied before what it depends on: `changes` are the step's new
    /// changes in the order applied (`changes(since: before)` gives the log's order), and each must
    /// follow its author's last seq and depend only on what was there before it. Nil when none.
    static func causalProblem(_ changes: [Change], after before: VersionVector) -> String? {
        var have = before
        for change in changes {
            if change.startSeq != have[change.replica] + 1 {
                return "a change of \(change.replica) at seqs \(change.startSeq)-\(change.endSeq) was applied after seq \(have[change.replica]) of its author"
            }
            if !change.dependencies.isCovered(by: have) {
                return "a change of \(change.replica) at seqs \(change.startSeq)-\(change.endSeq) was applied before what it depends on (\(change.dependencies); there was \(have))"
            }
            have[change.replica] = change.endSeq
        }
        return nil
    }

    /// A clock that applying received changes moved past the device's wall clock plus the drift
    /// bound (`HybridLogicalClock.observe` clamps a timestamp from a clock set years ahead): nil
    /// when it stayed within, or did not move.
    static func clockDragged(from before: Timestamp, to clock: HybridLogicalClock, wallMilliseconds wall: UInt64) -> String? {
        let bound = Timestamp(milliseconds: wall &+ clock.maxForwardDrift, counter: .max)
        guard clock.last > before, clock.last > bound else { return nil }
        return "receiving moved the clock to \(clock.last), past the wall clock (\(wall) ms) plus \(clock.maxForwardDrift) ms"
    }

    /// A clock that applying received changes left behind them: a hybrid logical clock moves to
    /// every timestamp it receives (up to the wall clock plus the drift bound, `observe`), so that
    /// the next local write is stamped after what it has seen. `changes` are those the sync
    /// applied, `wall` the wall clock when it began (the bound was at least that). Nil when it moved.
    static func clockBehind(_ changes: [Change], clock: HybridLogicalClock, wallMilliseconds wall: UInt64) -> String? {
        guard let latest = changes.map({ $0.timestamp(ofSeq: $0.endSeq) }).max() else { return nil }
        let want = min(latest, Timestamp(milliseconds: wall &+ clock.maxForwardDrift, counter: .max))
        guard clock.last < want else { return nil }
        return "after receiving a change stamped \(latest), the clock is at \(clock.last), behind it"
    }

    /// A local write stamped at or before what the clock had already issued or seen
    /// (`HybridLogicalClock.tick`: every timestamp it issues is past its last). The exception is a
    /// clock more than twice the drift bound ahead of the wall clock, which comes back to it
    /// (`clockBefore` past that: nil). Nil when the write came after.
    static func stampedBeforeClock(_ stamp: Timestamp, clockBefore: Timestamp, wallMilliseconds wall: UInt64, maxForwardDrift: UInt64) -> String? {
        guard stamp <= clockBefore, clockBefore <= Timestamp(milliseconds: wall &+ 2 &* maxForwardDrift, counter: .max) else { return nil }
        return "a write was stamped \(stamp), not after \(clockBefore), the clock's last timestamp before it"
    }

    /// A write the clock stamps while the clock runs more than twice the drift bound ahead of the
    /// wall clock (its own wall clock was ahead and was corrected) comes back to the wall clock:
    /// it is stamped no later than the wall clock, or than just past the value it replaces (a
    /// write still beats what it replaces, `Notebook.commitLocal`). Nil when it came back, or the
    /// clock was not that far ahead.
    static func stampedFarAhead(_ stamp: Timestamp, clockBefore: Timestamp, replaced: Timestamp?, wallMilliseconds wall: UInt64,
                                maxForwardDrift: UInt64) -> String? {
        let ceiling = Timestamp(milliseconds: wall &+ 2 &* maxForwardDrift, counter: .max)
        guard clockBefore > ceiling, stamp > ceiling else { return nil }
        if let replaced, stamp.milliseconds <= replaced.milliseconds &+ 1 { return nil }
        return "a write was stamped \(stamp) while the clock (\(clockBefore)) ran more than twice the drift bound ahead of the wall clock (\(wall) ms): it did not come back"
    }

    /// A peer's record that went back: what a store records of a peer is merged with what it knew
    /// (`recordPeer`), and a peer never loses what it has, so a record only grows (a folder's
    /// older files carry older versions of their writer). Nil when every record covers the one before.
    static func peerRecordShrank(from before: [ReplicaID: VersionVector], to peers: [PeerState]) -> String? {
        for peer in peers {
            guard let earlier = before[peer.replica], !earlier.isCovered(by: peer.versionVector) else { continue }
            return "its record of peer \(peer.replica) went back from \(earlier) to \(peer.versionVector)"
        }
        return nil
    }

    /// A sync with a relay that succeeded must leave the device with everything the relay held
    /// when it began (every page of it applied): nil when it does.
    ///
    /// Seqs a re-issue the device holds covers (`withdrawn`) are not owed: a relay keeps what a
    /// copy of a database wrote before it re-issued them (it never learns of re-issues), and the
    /// device takes those operations for duplicates of the re-issue.
    static func syncShortfall(relayHeld: VersionVector, device: VersionVector, withdrawn: [OpIDRange] = []) -> String? {
        for entry in relayHeld.sortedEntries where entry.seq > device[entry.replica] {
            if !covers(withdrawn, entry.replica, from: device[entry.replica] + 1, through: entry.seq) {
                return "the relay held \(relayHeld) when it began, the device has \(device)"
            }
        }
        return nil
    }

    /// Whether `ranges` hold every seq of `replica` from `first` through `last`.
    static func covers(_ ranges: [OpIDRange], _ replica: ReplicaID, from first: UInt64, through last: UInt64) -> Bool {
        var next = first
        for range in ranges.filter({ $0.replica == replica && $0.count > 0 }).sorted(by: { $0.seq < $1.seq }) {
            if range.seq > next { break }
            next = max(next, range.seq + range.count)
            if next > last { return true }
        }
        return next > last
    }

    /// A change that waited before a step and neither was applied nor waits (or is quarantined)
    /// after it, unless a re-issue the notebook holds covers its seqs (a withdrawn branch's change
    /// is dropped as a duplicate, rightly), or each of its seqs not applied is held or so covered:
    /// nil when there is none. A store that lost a waiting change (a rebuild that forgot them)
    /// gets it again only if a peer sends it again.
    static func droppedWaitingChange(before: Set<Change>, _ notebook: Notebook) -> String? {
        guard !before.isEmpty else { return nil }
        let held = notebook.pendingChanges + notebook.quarantinedChanges.map(\.change)
        let withdrawn = notebook.reissues.map(\.original)
        for change in before.sorted(by: { ($0.replica, $0.startSeq) < ($1.replica, $1.startSeq) }) {
            let applied = notebook.versionVector[change.replica]
            if applied >= change.endSeq { continue }
            // What is not applied of it must still be held, or withdrawn, seq by seq: a rebuild
            // may cut it where a re-issue covers it and keep the rest waiting.
            let rest = max(change.startSeq, applied + 1)
            let kept = held.filter { $0.replica == change.replica }.map(\.idRange) + withdrawn
            if covers(kept, change.replica, from: rest, through: change.endSeq) { continue }
            return "a change of \(change.replica) at seqs \(change.startSeq)-\(change.endSeq) waited, and is now neither applied (through \(applied)) nor waiting"
        }
        return nil
    }

    /// What differs between the waiting changes a store holds and those a restart loads from its
    /// database: nil when they are the same.
    static func waitingDifference(stored: Set<Change>, held: Set<Change>) -> String? {
        guard stored != held else { return nil }
        let missing = held.subtracting(stored).count, extra = stored.subtracting(held).count
        return "\(held.count) changes wait, but a restart would find \(stored.count) (\(missing) of them missing, \(extra) not waiting any more)"
    }
}

extension Simulation.NoteFingerprint {
    /// The first field in which two states differ (not the note's id), or nil for the same state.
    static func difference(_ a: Self, _ b: Self) -> String? {
        if a.title != b.title { return "title" }
        if a.pinned != b.pinned { return "pinned" }
        if a.archived != b.archived { return "archived" }
        if a.color != b.color { return "color" }
        if a.state != b.state { return "state" }
        if a.tagKeys != b.tagKeys { return "tags" }
        if a.createdAt != b.createdAt { return "creation time" }
        if a.restored != b.restored { return "restored" }
        if a.body != b.body { return "body" }
        return nil
    }
}

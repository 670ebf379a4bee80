import NotesCRDT
@testable import NotesSimulator
import NotesStore
import NotesSync
import Testing

/// The checks added after planting bugs in the shipped code (Scripts/mutants.sh): each passes on
/// what a store really gives and fails on a broken state.
struct SafetyCheckTests {
    /// Two different states of a note must not share a digest: the ledger accepts a note's states
    /// as it changes, and names the field when one digest comes back for another state.
    @Test func aDigestThatStandsForTwoStatesIsCaught() throws {
        let store = try NoteStore.openInMemory()
        let id = try store.createNote(title: "Trip", body: "café 日本", tags: ["home"])
        var ledger = Simulation.DigestLedger()
        var notebook = try store.notebook
        var problems: [String?] = []
        problems.append(ledger.record(notebook, id))
        problems.append(ledger.record(notebook, id))  // the same state again
        let unpinned = try #require(notebook.noteDigest(id))
        let unpinnedState = try #require(Simulation.NoteFingerprint(notebook, id))
        _ = try store.setPinned(id, true)
        notebook = try store.notebook
        problems.append(ledger.record(notebook, id))  // a new state, a new digest
        _ = try store.setTag(id, "home", member: false)
        notebook = try store.notebook
        problems.append(ledger.record(notebook, id))
        #expect(problems.allSatisfy { $0 == nil }, "\(problems)")

        // A digest that left out the pinned flag would give the pinned state the unpinned digest.
        var pinnedState = try #require(Simulation.NoteFingerprint(notebook, id))
        pinnedState.tagKeys = unpinnedState.tagKeys
        let problem = ledger.record(digest: unpinned, pinnedState)
        #expect(problem?.contains("pinned") == true, "\(problem ?? "none")")
    }

    /// A note's digest does not cover its id: two notes in the same state (two deleted notes, two
    /// empty ones) share it, which is no problem (shared-folder seed 64, partition seed 193).
    @Test func twoNotesInTheSameStateMayShareADigest() throws {
        let store = try NoteStore.openInMemory(options: StoreOptions(wallClock: FixedWallClock(1_700_000_000_000)))
        let a = try store.createNote(title: "", body: "", id: NoteID(Identifier128(high: 1, low: 1)))
        let b = try store.createNote(title: "", body: "", id: NoteID(Identifier128(high: 2, low: 2)))
        let notebook = try store.notebook
        #expect(notebook.noteDigest(a) == notebook.noteDigest(b), "the premise: one digest for both")
        var ledger = Simulation.DigestLedger()
        #expect(ledger.record(notebook, a) == nil)
        #expect(ledger.record(notebook, b) == nil)
        var other = try #require(Simulation.NoteFingerprint(notebook, b))
        other.title = "different"
        let digest = try #require(notebook.noteDigest(a))
        #expect(ledger.record(digest: digest, other)?.contains("title") == true)
    }

    /// The tag rows must list exactly the CRDT's notes in each tag; one the store forgot to remove
    /// from a tag is named.
    @Test func aTagRowLeftBehindIsCaught() throws {
        let store = try NoteStore.openInMemory()
        let a = try store.createNote(title: "A", tags: ["home", "work"])
        let b = try store.createNote(title: "B", tags: ["work"])
        _ = try store.setTag(a, "work", member: false)
        _ = try store.setState(b, .trashed)
        let notebook = try store.notebook
        #expect(try Simulation.tagRowDifferences(store, notebook).isEmpty)
        let byTag = Simulation.notesByTag(notebook)
        #expect(byTag[Notebook.tagKey("work")] == [b])
        #expect(byTag[Notebook.tagKey("home")] == [a])

        // The CRDT as it would be had the removal not reached the rows: they now miss a note.
        let other = try NoteStore.openInMemory()
        _ = try other.createNote(title: "C", tags: ["work"])
        let problems = try Simulation.tagRowDifferences(store, try other.notebook)
        #expect(problems.contains { $0.hasPrefix("tag work:") })
    }

    /// The changes a step applied must come after what they depend on: the log's order passes,
    /// the same changes with a dependent one first do not.
    @Test func aChangeAppliedBeforeItsDependencyIsCaught() throws {
        var first = Notebook(replicaID: ReplicaID.random())
        let note = first.createNote(title: "Trip", body: "café").id
        var second = Notebook(replicaID: ReplicaID.random())
        second.apply(contentsOf: first.changes(since: VersionVector()))
        _ = try second.insertText(note, at: 4, " 日本")
        let inOrder = second.changes(since: VersionVector())
        #expect(inOrder.count == 2)
        #expect(Simulation.causalProblem(inOrder, after: VersionVector()) == nil)
        let problem = Simulation.causalProblem(Array(inOrder.reversed()), after: VersionVector())
        #expect(problem?.contains("before what it depends on") == true, "\(problem ?? "none")")
        // A change that does not follow its author's last seq.
        #expect(Simulation.causalProblem([inOrder[0]], after: VersionVector([inOrder[0].replica: 1])) != nil)
    }

    /// Receiving may move the clock up to the wall clock plus the drift bound, not further.
    @Test func aClockDraggedAheadIsCaught() {
        let wall: UInt64 = 1_700_000_000_000
        let before = Timestamp(milliseconds: wall)
        let within = HybridLogicalClock(last: Timestamp(milliseconds: wall + 30_000))
        let dragged = HybridLogicalClock(last: Timestamp(milliseconds: wall + 86_400_000))
        #expect(Simulation.clockDragged(from: before, to: within, wallMilliseconds: wall) == nil)
        #expect(Simulation.clockDragged(from: before, to: dragged, wallMilliseconds: wall) != nil)
        // Already that far ahead before (a local write jumped there): not the receive's doing.
        #expect(Simulation.clockDragged(from: dragged.last, to: dragged, wallMilliseconds: wall) == nil)
    }

    /// Receiving moves the clock to what it received (up to the drift bound): a clock left behind
    /// a received change is caught, one at it or past it is not, and a far-future stamp only
    /// needs the bound.
    @Test func aClockLeftBehindWhatItReceivedIsCaught() {
        let wall: UInt64 = 1_700_000_000_000
        var other = Notebook(replicaID: ReplicaID.random(), wallClock: FixedWallClock(wall + 5_000))
        _ = other.createNote(title: "Trip", body: "café")
        let received = other.changes(since: VersionVector())
        let latest = received.map { $0.timestamp(ofSeq: $0.endSeq) }.max()!
        #expect(Simulation.clockBehind(received, clock: HybridLogicalClock(last: latest), wallMilliseconds: wall) == nil)
        #expect(Simulation.clockBehind(received, clock: HybridLogicalClock(last: latest.advanced(by: 7)), wallMilliseconds: wall) == nil)
        #expect(Simulation.clockBehind(received, clock: HybridLogicalClock(last: Timestamp(milliseconds: wall)), wallMilliseconds: wall) != nil)
        #expect(Simulation.clockBehind([], clock: HybridLogicalClock(), wallMilliseconds: wall) == nil)
        // Stamped a day ahead: the clock need only reach the wall clock plus the drift bound.
        var ahead = Notebook(replicaID: ReplicaID.random(), wallClock: FixedWallClock(wall + 86_400_000))
        _ = ahead.createNote(title: "Later")
        let bounded = HybridLogicalClock(last: Timestamp(milliseconds: wall + HybridLogicalClock.defaultMaxForwardDrift, counter: .max))
        #expect(Simulation.clockBehind(ahead.changes(since: VersionVector()), clock: bounded, wallMilliseconds: wall) == nil)
    }

    /// A store's report of a batch must say what the CRDT did with it: the real report of a batch
    /// holding new changes and repeated ones passes, one that counts a duplicate as applied does not.
    @Test func anIntegrationReportThatMiscountsIsCaught() throws {
        var other = Notebook(replicaID: ReplicaID.random())
        let note = other.createNote(title: "Trip", body: "café").id
        let first = other.changes(since: VersionVector())
        _ = try other.setTitle(note, "Trip to Kyoto")
        let store = try NoteStore.openInMemory()
        _ = try store.integrate(first)
        let before = try store.notebook
        // The old changes again, the new one, and the new one twice.
        let batch = first + other.changes(since: before.versionVector) + other.changes(since: before.versionVector)
        let report = try store.integrate(batch)
        let after = try store.versionVector
        #expect(report.applied == 1 && report.duplicates == first.count + 1, "the premise: \(report)")
        #expect(Simulation.integrationMiscount(report, of: batch, before: before, after: after) == nil)
        var miscounted = report
        miscounted.applied += miscounted.duplicates
        miscounted.duplicates = 0
        #expect(Simulation.integrationMiscount(miscounted, of: batch, before: before, after: after) != nil)
        // Why the log cannot give the count: two changes of one author that follow each other are
        // applied as two and may be logged as one entry (`Notebook.record` joins them when their
        // timestamps follow too, which the wall clock between the two writes decides).
        let logged = try store.notebook.versionVector
        let pin = try #require(try other.setPinned(note, true))
        let color = try #require(try other.setColor(note, "blue"))
        let both = try store.integrate([pin, color])
        let entries = try store.changes(since: logged)
        #expect(both.applied == 2 && entries.count <= 2, "\(both), \(entries.count) log entries")
        // A store whose version ended elsewhere (another process wrote meanwhile) cannot be judged.
        #expect(Simulation.integrationMiscount(miscounted, of: batch, before: before, after: VersionVector()) == nil)
    }

    /// A write the clock stamps comes after everything the clock issued or saw: a store's next
    /// write passes, one stamped at the clock's last timestamp is caught, and a clock set far
    /// ahead (which comes back to the wall clock) is let be.
    @Test func aWriteStampedAtTheClocksLastTimestampIsCaught() throws {
        let wall: UInt64 = 1_700_000_000_000
        let store = try NoteStore.openInMemory(options: StoreOptions(wallClock: FixedWallClock(wall)))
        let note = try store.createNote(title: "Trip")
        let clock = try store.notebook.clock
        let version = try store.versionVector
        _ = try store.setPinned(note, true)
        let pin = try #require(try store.changes(since: version).first)
        #expect(pin.timestamp > clock.last, "the premise: the wall clock stood still, the clock moved on")
        #expect(Simulation.stampedBeforeClock(pin.timestamp, clockBefore: clock.last, wallMilliseconds: wall, maxForwardDrift: clock.maxForwardDrift) == nil)
        #expect(Simulation.stampedBeforeClock(clock.last, clockBefore: clock.last, wallMilliseconds: wall, maxForwardDrift: clock.maxForwardDrift) != nil)
        let yearAhead = Timestamp(milliseconds: wall + 365 * 86_400_000)
        #expect(Simulation.stampedBeforeClock(Timestamp(milliseconds: wall), clockBefore: yearAhead, wallMilliseconds: wall, maxForwardDrift: clock.maxForwardDrift) == nil)
    }

    /// What a store records of a peer only grows: an older version heard later leaves the record
    /// as it was, and a record below the one seen before is caught.
    @Test func aPeerRecordThatWentBackIsCaught() throws {
        let store = try NoteStore.openInMemory()
        let peer = ReplicaID.random()
        let author = ReplicaID.random()
        try store.recordPeer(peer, versionVector: VersionVector([author: 5]))
        let first = try store.peers()
        #expect(Simulation.peerRecordShrank(from: [:], to: first) == nil)
        let seen = Dictionary(first.map { ($0.replica, $0.versionVector) }, uniquingKeysWith: { $1 })
        try store.recordPeer(peer, versionVector: VersionVector([author: 3]))  // an older file's header
        let second = try store.peers()
        #expect(second.first?.versionVector == VersionVector([author: 5]), "the premise: \(second)")
        #expect(Simulation.peerRecordShrank(from: seen, to: second) == nil)
        #expect(Simulation.peerRecordShrank(from: [peer: VersionVector([author: 7])], to: second) != nil)
    }

    /// A relay sync that succeeded leaves the device with all the relay held when it began.
    @Test func aSyncThatLeftSomethingBehindIsCaught() {
        let a = ReplicaID.random()
        let b = ReplicaID.random()
        let held = VersionVector([a: 5, b: 2])
        #expect(Simulation.syncShortfall(relayHeld: held, device: VersionVector([a: 5, b: 3])) == nil)
        #expect(Simulation.syncShortfall(relayHeld: held, device: VersionVector([a: 4, b: 9])) != nil)
        // Seqs the device holds a re-issue of are not owed (the relay keeps a withdrawn branch),
        // but only those.
        #expect(Simulation.syncShortfall(relayHeld: held, device: VersionVector([a: 3, b: 2]),
                                         withdrawn: [OpIDRange(replica: a, seq: 4, count: 1), OpIDRange(replica: a, seq: 5, count: 3)]) == nil)
        #expect(Simulation.syncShortfall(relayHeld: held, device: VersionVector([a: 3, b: 2]),
                                         withdrawn: [OpIDRange(replica: a, seq: 5, count: 1)]) != nil)
        #expect(Simulation.syncShortfall(relayHeld: held, device: VersionVector([a: 3, b: 2]),
                                         withdrawn: [OpIDRange(replica: b, seq: 4, count: 2)]) != nil)
    }

    /// A folder's coverage is read from what its files hold: from seq 1 up to the first gap,
    /// whatever the files' names or order, and a file that does not decode (damaged) holds nothing.
    @Test func aFolderThatLacksWhatItsDevicesHaveIsCaught() throws {
        var notebook = Notebook(replicaID: ReplicaID.random())
        let (note, created) = notebook.createNote(title: "t", body: "")
        var changes = [created]
        for word in ["one ", "two ", "three "] { changes.append(try #require(try notebook.insertText(note, at: 0, word))) }
        let id = notebook.replicaID
        let files = changes.map { SyncBundle(sender: id, senderVersion: notebook.versionVector, changes: [$0]).encoded() }
        let all = notebook.versionVector[id]
        #expect(Simulation.coverage(ofFiles: files)[id] == all)
        #expect(Simulation.coverage(ofFiles: files.reversed())[id] == all)
        // The second file gone: the folder holds only the first change, though later files are there.
        #expect(Simulation.coverage(ofFiles: [files[0], files[2], files[3]])[id] == changes[0].endSeq)
        var damaged = files[1]
        damaged[damaged.count / 2] ^= 0x5A
        #expect(Simulation.coverage(ofFiles: [files[0], damaged, files[2], files[3]])[id] == changes[0].endSeq)
        #expect(Simulation.coverage(ofFiles: [files[1], files[2]])[id] == 0, "nothing from seq 1")
    }

    /// A change that waited must, after a step, be applied or still wait: one that a rebuild
    /// forgot is caught, one applied is not.
    @Test func aWaitingChangeDroppedIsCaught() throws {
        var a = Notebook(replicaID: ReplicaID.random())
        var b = Notebook(replicaID: ReplicaID.random())
        let note = a.createNote(title: "Trip", body: "café").id
        let first = a.changes(since: VersionVector())
        let version = a.versionVector
        _ = try a.insertText(note, at: 4, "!")
        let second = a.changes(since: version)
        b.apply(contentsOf: second)  // waits for the note
        let waiting = Set(b.pendingChanges)
        #expect(waiting.count == 1, "the premise")
        #expect(Simulation.droppedWaitingChange(before: waiting, b) == nil)
        let forgot = Notebook(replicaID: b.replicaID)
        #expect(Simulation.droppedWaitingChange(before: waiting, forgot) != nil)
        b.apply(contentsOf: first)
        #expect(b.pendingChanges.isEmpty && Simulation.droppedWaitingChange(before: waiting, b) == nil)
    }

    /// What is not applied of a change that waited may be held and withdrawn in pieces (a
    /// rebuild cut where a re-issue covers it, the rest waiting), but every seq of it must be.
    @Test func aWaitingChangeMayBeHeldAndWithdrawnInPieces() {
        let x = ReplicaID(Identifier128(high: 7, low: 7))
        let y = ReplicaID(Identifier128(high: 8, low: 8))
        let withdrawn = [OpIDRange(replica: x, seq: 77, count: 2)]
        let quarantined = OpIDRange(replica: x, seq: 79, count: 2)
        #expect(Simulation.covers(withdrawn + [quarantined], x, from: 77, through: 80))
        #expect(!Simulation.covers(withdrawn, x, from: 77, through: 80))
        #expect(!Simulation.covers([quarantined], x, from: 77, through: 80))
        // A gap between the pieces, or pieces of another replica, are not enough.
        #expect(!Simulation.covers([OpIDRange(replica: x, seq: 77, count: 1), quarantined], x, from: 77, through: 80))
        #expect(!Simulation.covers(withdrawn + [OpIDRange(replica: y, seq: 79, count: 2)], x, from: 77, through: 80))
    }

    /// A restart loads the waiting changes the store holds: after a batch that releases one
    /// change and queues another (the count stays, the set does not), a second store opened on
    /// the database finds the one that waits now; a table that still held the other is caught.
    @Test func aWaitingChangeTheTableMissedIsCaught() throws {
        var a = Notebook(replicaID: ReplicaID.random())
        var b = Notebook(replicaID: ReplicaID.random())
        let note = a.createNote(title: "Trip", body: "café").id
        let a1 = a.changes(since: VersionVector())
        b.apply(contentsOf: a1)
        var version = a.versionVector
        _ = try a.setTitle(note, "Trip to Kyoto")
        version = a.versionVector  // a2 never reaches the store
        _ = try a.setColor(note, "red")
        let a3 = a.changes(since: version)
        version = b.versionVector
        _ = try b.setPinned(note, true)
        let b1 = b.changes(since: version)
        version = b.versionVector
        _ = try b.setColor(note, "blue")
        let b2 = b.changes(since: version)
        let database = try InMemoryDatabase()
        let store = try NoteStore.open(database)
        defer { try? store.close() }
        _ = try store.integrate(a1)
        _ = try store.integrate(b2)  // waits for b1
        let waitingBefore = Set(try store.pendingChanges)
        _ = try store.integrate(batch: b1 + a3)  // releases b2, queues a3 (it waits for a2)
        let waiting = Set(try store.pendingChanges)
        #expect(waitingBefore == Set(b2) && waiting == Set(a3), "the premise: \(waitingBefore.count) waited, then \(waiting.count)")
        let reader = try NoteStore.open(database)
        defer { try? reader.close() }
        #expect(Simulation.waitingDifference(stored: Set(try reader.pendingChanges), held: waiting) == nil)
        // A table left as it was before the batch (as many waiting, other ones).
        #expect(Simulation.waitingDifference(stored: waitingBefore, held: waiting) != nil)
    }

    /// A clone of a disk keeps the file identity, so it writes as its device: typing on at the end
    /// of the same run, both take the same seqs at the same timestamps, and only the characters
    /// differ. The device's store must see the clone's change as a fork, move to a fresh identity,
    /// re-issue its own word there and take the clone's (the simulator's `clones` fault checks
    /// this in a run).
    @Test func aCloneThatTypesOnIsRefusedAsAFork() throws {
        let options = StoreOptions(wallClock: FixedWallClock(1_700_000_000_000))
        let database = try InMemoryDatabase()
        let store = try NoteStore.open(database, options: options)
        let note = try store.createNote(title: "Trip", body: "")
        try store.insertText(note, at: 0, "café")
        let me = store.replicaID
        let version = try store.versionVector
        let clone = try NoteStore.open(try InMemoryDatabase(copying: database, label: database.label), options: options)
        defer { try? clone.close() }
        #expect(clone.replicaID == me, "the premise: nothing at open tells a clone that kept the file identity")
        try clone.insertText(note, at: 4, " bar")
        try store.insertText(note, at: 4, " baz")
        let forked = try clone.changes(since: version)
        let own = try store.changes(since: version)
        #expect(forked.count == 1 && own.count == 1 && forked[0].startSeq == own[0].startSeq && forked[0].timestamp == own[0].timestamp,
                "the premise: the same seqs at the same timestamps")
        let report = try store.integrate(forked)
        #expect(store.replicaID != me, "a fork only the characters tell apart was taken in: \(report)")
        #expect(report.forksRepaired == 1)
        let body = try #require(try store.notebook.body(of: note)?.string)
        #expect(body.hasPrefix("café ba") && body.count == 9 && body.contains("z") && body.contains("r"), "\(body)")  // " ba" is the same three operations on both
    }

    /// A materialized row must carry the CRDT's conflict mark and restored flag: a note deleted on
    /// one replica while edited on another comes back, restored and marked, and a row that says
    /// otherwise is caught.
    @Test func aRowWithoutTheRestoredFlagIsCaught() throws {
        let store = try NoteStore.openInMemory()
        let note = try store.createNote(title: "Trip", body: "café")
        var other = Notebook(replicaID: ReplicaID.random())
        other.apply(contentsOf: try store.changes(since: VersionVector()))
        let version = try store.versionVector
        _ = try store.setState(note, .deleted)
        _ = try other.insertText(note, at: 4, "!")
        _ = try store.integrate(other.changes(since: version))
        let notebook = try store.notebook
        let fields = try #require(notebook.noteFields(note))
        let row = try #require(try store.note(note))
        #expect(fields.restoredByConcurrentEdit && fields.hasConflicts && fields.state == .trashed, "the premise: \(fields)")
        let body = try #require(notebook.body(of: note))
        #expect(Simulation.difference(row, fields, body) == nil)
        var wrong = row
        wrong.restoredByConcurrentEdit = false
        #expect(Simulation.difference(wrong, fields, body) == "restored flag")
        wrong = row
        wrong.hasConflicts = false
        #expect(Simulation.difference(wrong, fields, body) == "conflict mark")
        // And a note that came back has no tombstone; one that is deleted has one.
        #expect(try Simulation.tombstoneDifference(store, notebook) == nil)
        let gone = try store.createNote(title: "Old")
        _ = try store.setState(gone, .deleted)
        #expect(try Simulation.tombstoneDifference(store, try store.notebook) == nil)
        #expect(try Simulation.tombstoneDifference(store, notebook) != nil, "a tombstone of a note the CRDT does not hold as deleted")
    }

    /// Two replicas that write one field to different values, neither having seen the other's
    /// write, mark the note as merged on that field; the model expects exactly that, and a mark
    /// the model does not expect is caught.
    @Test func aFieldMergeTheNotebookDidNotMarkIsCaught() throws {
        var (a, b, note, start) = try Self.concurrentTitles()
        _ = try b.setPinned(note, true)
        _ = try a.setPinned(note, true)  // the same value: no merge to review
        a.apply(contentsOf: b.changes(since: start))
        var model = ReferenceModel()
        for change in a.changes(since: VersionVector()) { model.record(change) }
        var expected = model.expected()
        #expect(expected.fieldConflicts[note] == [.title], "\(expected.fieldConflicts)")
        #expect(ReferenceModel.differences(a, expected, device: "a").isEmpty, "\(ReferenceModel.differences(a, expected, device: "a"))")
        expected.fieldConflicts[note] = [.title, .pinned]
        #expect(ReferenceModel.differences(a, expected, device: "a").contains { $0.contains("marked as merged") })
    }

    /// A write the clock stamps while the clock runs far ahead of the wall clock comes back to
    /// it, unless it must beat a value stamped far ahead.
    @Test func aWriteThatStaysFarAheadIsCaught() {
        let wall: UInt64 = 1_700_000_000_000
        let drift = HybridLogicalClock.defaultMaxForwardDrift
        let hoursAhead = Timestamp(milliseconds: wall + 5 * 3_600_000)
        var clock = HybridLogicalClock(last: hoursAhead)
        let stamp = clock.tick(wallMilliseconds: wall)
        #expect(Simulation.stampedFarAhead(stamp, clockBefore: hoursAhead, replaced: nil, wallMilliseconds: wall, maxForwardDrift: drift) == nil,
                "the shipped clock comes back: \(stamp)")
        let stayed = hoursAhead.advanced(by: 1)
        #expect(Simulation.stampedFarAhead(stayed, clockBefore: hoursAhead, replaced: nil, wallMilliseconds: wall, maxForwardDrift: drift) != nil)
        #expect(Simulation.stampedFarAhead(stayed, clockBefore: hoursAhead, replaced: hoursAhead, wallMilliseconds: wall, maxForwardDrift: drift) == nil)
        let minuteAhead = Timestamp(milliseconds: wall + drift)
        #expect(Simulation.stampedFarAhead(minuteAhead.advanced(by: 1), clockBefore: minuteAhead, replaced: nil, wallMilliseconds: wall, maxForwardDrift: drift) == nil)
    }

    /// A device and a second replica that writes to the device's note concurrently: what the
    /// edit checks below start from.
    private func storeWithAConcurrentWriter() throws -> (store: NoteStore, other: Notebook, note: NoteID) {
        let store = try NoteStore.openInMemory()
        let note = try store.createNote(title: "Trip", body: "hello world", tags: ["work"])
        var other = Notebook(replicaID: ReplicaID.random())
        other.apply(contentsOf: try store.changes(since: VersionVector()))
        return (store, other, note)
    }

    /// Undo reverts the device's latest edit and nothing another device wrote: a wrong range, a
    /// field or a character of the other device's taken back, or the edit left in place, is caught.
    @Test func anUndoOfTheWrongEditOrOfAnotherDevicesIsCaught() throws {
        let (store, start, note) = try storeWithAConcurrentWriter()
        var other = start
        let first = try store.versionVector[store.replicaID]
        _ = try store.setPinned(note, true)
        _ = try store.setTitle(note, "Mine")
        let mine = first + 2 ... first + 2
        let seen = other.versionVector
        _ = try other.setColor(note, "red")
        _ = try other.insertText(note, at: 0, "new ")
        _ = try store.apply(other.changes(since: seen))
        let before = try store.notebook
        let result = try #require(try store.undo())
        let after = try store.notebook
        #expect(Simulation.undoTargetProblem(result, expected: mine) == nil)
        #expect(Simulation.undoTargetProblem(result, expected: first + 1 ... first + 1) != nil, "the edit before the latest")
        #expect(Simulation.undoTargetProblem(nil, expected: mine) != nil, "nothing undone")
        let me = store.replicaID
        #expect(Simulation.undoEffectProblem(result, replica: me, before: before, after: after) == nil)
        #expect(after.noteFields(note)?.title == "Trip")

        var colorBack = after
        _ = try colorBack.setColor(note, nil)
        #expect(Simulation.undoEffectProblem(result, replica: me, before: before, after: colorBack)?.contains("color") == true)
        var typingGone = after
        _ = try typingGone.deleteText(note, 0 ..< 4)
        #expect(Simulation.undoEffectProblem(result, replica: me, before: before, after: typingGone)?.contains("did not type") == true)
        #expect(Simulation.undoEffectProblem(result, replica: me, before: before, after: before)?.contains("title") == true, "nothing reverted")
    }

    /// Renaming a tag moves every note in it; one left behind, or another note's tags changed, is caught.
    @Test func aTagRenameThatLeavesANoteBehindIsCaught() throws {
        let store = try NoteStore.openInMemory()
        let a = try store.createNote(title: "A", tags: ["work"])
        let b = try store.createNote(title: "B", tags: ["work", "home"])
        let c = try store.createNote(title: "C", tags: ["home"])
        _ = try store.setState(b, .trashed)
        let before = try store.notebook
        _ = try store.renameTag("work", to: "desk")
        let after = try store.notebook
        #expect(Simulation.tagRenameProblem(from: "work", to: "desk", before: before, after: after) == nil)
        var leftBehind = after
        _ = try leftBehind.setTag(b, "work", member: true)
        #expect(Simulation.tagRenameProblem(from: "work", to: "desk", before: before, after: leftBehind)?.contains("\(b)") == true)
        var notMoved = after
        _ = try notMoved.setTag(a, "desk", member: false)
        #expect(Simulation.tagRenameProblem(from: "work", to: "desk", before: before, after: notMoved) != nil)
        var otherChanged = after
        _ = try otherChanged.setTag(c, "desk", member: true)
        #expect(Simulation.tagRenameProblem(from: "work", to: "desk", before: before, after: otherChanged)?.contains("not in it") == true)
    }

    /// Emptying the trash deletes the trashed notes and only them, and says how many.
    @Test func emptyingTheTrashOfAnActiveNoteIsCaught() throws {
        let store = try NoteStore.openInMemory()
        let a = try store.createNote(title: "A")
        let b = try store.createNote(title: "B")
        _ = try store.setState(a, .trashed)
        let before = try store.notebook
        let count = try store.emptyTrash()
        let after = try store.notebook
        #expect(Simulation.emptyTrashProblem(count: count, before: before, after: after) == nil)
        #expect(Simulation.emptyTrashProblem(count: 2, before: before, after: after) != nil, "a count of notes it did not delete")
        var activeGone = after
        _ = try activeGone.setState(b, .deleted)
        #expect(Simulation.emptyTrashProblem(count: count, before: before, after: activeGone)?.contains("\(b)") == true)
        #expect(Simulation.emptyTrashProblem(count: count, before: before, after: before)?.contains("left") == true)
    }

    /// A resolve clears the mark at once; the model expects it cleared wherever the resolve
    /// arrives, and marked again by a write the resolve did not see.
    @Test func aResolveThatDoesNotClearTheMarkEverywhereIsCaught() throws {
        var (a, b, note, start) = try Self.concurrentTitles()
        b.apply(contentsOf: a.changes(since: start))
        a.apply(contentsOf: b.changes(since: start))
        #expect(Simulation.unresolvedProblem(note, after: a) != nil, "the premise: marked")
        let aBefore = a.versionVector
        _ = try a.resolveConflicts(note)
        #expect(Simulation.unresolvedProblem(note, after: a) == nil)
        let unresolved = b  // a device the resolve never reached
        b.apply(contentsOf: a.changes(since: aBefore))
        var model = ReferenceModel()
        for change in b.changes(since: VersionVector()) { model.record(change) }
        let expected = model.expected()
        #expect(expected.fieldConflicts[note] == nil, "\(expected.fieldConflicts)")
        #expect(ReferenceModel.differences(b, expected, device: "b").isEmpty, "\(ReferenceModel.differences(b, expected, device: "b"))")
        #expect(ReferenceModel.differences(unresolved, expected, device: "stale").contains { $0.contains("marked as merged") })

        // Two writes made after the resolve, neither seeing the other, mark the note again.
        let (aSeen, bSeen) = (a.versionVector, b.versionVector)
        _ = try a.setTitle(note, "Trip to Nara")
        _ = try b.setTitle(note, "Trip to Kobe")
        b.apply(contentsOf: a.changes(since: aSeen))
        a.apply(contentsOf: b.changes(since: bSeen))
        var again = ReferenceModel()
        for change in b.changes(since: VersionVector()) { again.record(change) }
        let marked = again.expected()
        #expect(marked.fieldConflicts[note] == [.title], "\(marked.fieldConflicts)")
        #expect(ReferenceModel.differences(b, marked, device: "b").isEmpty, "\(ReferenceModel.differences(b, marked, device: "b"))")
    }

    /// A text saved from an editor opened before another device typed in the note keeps that
    /// typing and has the person's; a save that lost it, or put the person's words elsewhere, is caught.
    @Test func aRebasedSaveThatLosesConcurrentTypingIsCaught() throws {
        let (store, start, note) = try storeWithAConcurrentWriter()
        var other = start
        let original = Simulation.characters(try store.notebook.body(of: note))
        let seen = other.versionVector
        _ = try other.insertText(note, at: 11, " again")  // "hello world again"
        _ = try store.apply(other.changes(since: seen))
        let current = Simulation.characters(try store.notebook.body(of: note))
        let before = try store.versionVector[store.replicaID]
        let edited = Array("bye world".unicodeScalars)  // "hello" deleted, "bye" typed
        _ = try store.applyEditedText(note, original: NoteText(title: "Trip", body: "hello world"),
                                      edited: NoteText(title: "Trip", body: String(String.UnicodeScalarView(edited))))
        let after = Simulation.characters(try store.notebook.body(of: note))
        let me = store.replicaID
        func isNew(_ id: OpID) -> Bool { id.replica == me && id.seq > before }
        #expect(String(String.UnicodeScalarView(after.map(\.scalar))) == "bye world again")
        #expect(Simulation.rebasedSaveProblem(original: original, edited: edited, current: current, after: after, isNew: isNew) == nil)
        let lost = after.filter { $0.id.replica != other.replicaID }
        let problem = Simulation.rebasedSaveProblem(original: original, edited: edited, current: current, after: lost, isNew: isNew)
        #expect(problem?.contains("typed elsewhere") == true, "\(problem ?? "none")")
        let moved = Array(after[9...]) + Array(after[0 ..< 9])  // " againbye world"
        #expect(Simulation.rebasedSaveProblem(original: original, edited: edited, current: current, after: moved, isNew: isNew) != nil)
    }

    /// The scenarios pass the added checks with the shipped code (a quick sample; CI runs 200
    /// seeds of each).
    @Test(arguments: ["relay-pages.json", "crash-reinstall.json", "encrypted-space.json"])
    func theShippedCodePassesTheAddedChecks(_ file: String) async throws {
        let results = try await Simulator.runMany(try SimulatorTestSupport.scenario(file), seed: 1, runs: 3)
        let failure = results.first { $0.failed }
        #expect(failure == nil, "\(failure?.problems.prefix(3) ?? [])")
    }

    /// Two replicas of one note that each set its title, neither having seen the other's write
    /// (`start`: the version both had before).
    static func concurrentTitles() throws -> (a: Notebook, b: Notebook, note: NoteID, start: VersionVector) {
        var a = Notebook(replicaID: ReplicaID.random())
        let note = a.createNote(title: "Trip", body: "café").id
        var b = Notebook(replicaID: ReplicaID.random())
        b.apply(contentsOf: a.changes(since: VersionVector()))
        let start = a.versionVector
        _ = try a.setTitle(note, "Trip to Kyoto")
        _ = try b.setTitle(note, "Trip to Osaka")
        return (a, b, note, start)
    }
}

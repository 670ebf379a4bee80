import Foundation
import NotesCRDT
import NotesStore
import NotesRelay
import NotesSync

/// One simulated device: a real replica in a real store, on its own in-memory database (its
/// "disk": the store is closed and opened again on it when the device restarts).
final class SimDevice {
    let index: Int
    var database: InMemoryDatabase
    var store: NoteStore
    /// The shipped transports, one per hub, made at the device's first sync there (a restart
    /// makes them again, with nothing remembered).
    var transports: [Int: any SyncTransport] = [:]
    /// The version vector after the last step, to check that it only grows.
    var lastVersion = VersionVector()
    /// How many times it was reinstalled.
    var incarnation = 0
    /// The seq of the last operation it made (its next change must follow it: no gap, no reuse).
    /// Timestamps need not increase: a write jumps above a far-ahead value it replaces while the
    /// clock stays put (`Notebook.commitLocal`), and "a field written holds the write" checks that.
    var lastOwnSeq: UInt64?
    /// The store's materialized notes (`list(.all)`, without bodies) as last read; nil when
    /// unknown. See `Simulation.currentNotes(_:)`.
    var notes: NoteList?
    /// A copy of its database taken by a `backup` event, with its identity and how far that
    /// identity's seqs went in it; dropped when the database is replaced.
    var backup: (database: InMemoryDatabase, replica: ReplicaID, held: UInt64)?
    /// What its store recorded of each peer after its last sync (`peers()`): a record only grows.
    var peerRecords: [ReplicaID: VersionVector] = [:]
    /// Identities its store moved away from while it ran (a fork refused at a sync): what it
    /// wrote as them is forgotten with it when it is replaced.
    var retired: [ReplicaID] = []
    /// The device's edits as its store's undo stack must hold them (see `UndoLog`).
    var undoLog = UndoLog()
    /// A note open in an editor since an `editLater` event, saved at the device's next one.
    var editor: OpenEditor?
    /// Which database of its identity it is, for the reference model (`ReferenceModel.Author`):
    /// 0, or a number of its own when its database is a copy that kept another device's identity
    /// (`faults.forks`). Its edits, under every identity it writes as, are recorded on it.
    var branch = 0
    /// How many re-issues of its own its store had recorded (`reissues()`, `own`) when the
    /// simulator last looked: more afterwards is a fork it repaired.
    var ownReissues = 0

    init(index: Int, database: InMemoryDatabase, store: NoteStore) {
        self.index = index
        self.database = database
        self.store = store
    }

    var replicaID: ReplicaID { store.replicaID }
}

/// A device's own edits as its store's undo stack holds them: the seq ranges of `replica`, one per
/// editing call, oldest first, the undone ones taken out. A store's stack is per identity, so a new
/// identity starts empty; after a restore put back an older stack, it is not known.
struct UndoLog {
    var replica: ReplicaID?
    var edits: [ClosedRange<UInt64>] = []
    var known = true

    /// What `undo()` must revert on a store of identity `current`: (whether that is known, the seqs).
    func expected(_ current: ReplicaID) -> (known: Bool, seqs: ClosedRange<UInt64>?) {
        replica == current ? (known, edits.last) : (true, nil)
    }

    /// An editing call of `current` that made these seqs.
    mutating func push(_ seqs: ClosedRange<UInt64>, by current: ReplicaID) {
        if replica != current { self = UndoLog(replica: current) }
        edits.append(seqs)
    }

    /// The store re-issued its own edits of `old` as `new`'s: each edit inside one re-issued
    /// range follows it to its new seqs, the rest stay `old`'s (no longer undoable).
    mutating func follow(_ reissues: [ReissueRecord], from old: ReplicaID, to new: ReplicaID) {
        guard replica == old else { return }
        var moved: [ClosedRange<UInt64>] = []
        for edit in edits {
            guard let piece = reissues.first(where: { $0.replica == old && $0.by == new && edit.lowerBound >= $0.startSeq
                                                         && edit.upperBound <= $0.startSeq + $0.count - 1 }) else { continue }
            let shift = piece.firstSeq &- piece.startSeq
            moved.append(edit.lowerBound &+ shift ... edit.upperBound &+ shift)
        }
        self = UndoLog(replica: new, edits: moved, known: known)
    }
}

/// A note as an editor was given it: the text with its characters' identities, and what the
/// person made of it (saved later, after syncs).
struct OpenEditor {
    var note: NoteID
    var original: NoteText
    var characters: [(id: OpID, scalar: Unicode.Scalar)]
    var edited: NoteText
}

/// A device's materialized notes (rows without bodies), sorted by identity, as `list(.all)`
/// sorted by identity gives them; kept up to date one note at a time from the rows the checks read.
struct NoteList {
    private(set) var sorted: [StoredNote]

    init(_ notes: [StoredNote]) {
        sorted = notes.sorted { $0.id < $1.id }
    }

    /// Where the note with this identity is, or would go.
    private func position(of id: NoteID) -> Int {
        var low = 0
        var high = sorted.count
        while low < high {
            let middle = (low + high) / 2
            if sorted[middle].id < id { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// Sets the row of a note (nil: it has none).
    mutating func set(_ id: NoteID, _ row: StoredNote?) {
        let i = position(of: id)
        let present = i < sorted.count && sorted[i].id == id
        switch (row, present) {
        case (let row?, true): sorted[i] = row
        case (let row?, false): sorted.insert(row, at: i)
        case (nil, true): sorted.remove(at: i)
        case (nil, false): break
        }
    }
}

/// Counters of what happened in a run.
public struct RunStats: Codable, Sendable, Hashable {
    /// Local edits made.
    public var edits = 0
    /// Edits skipped because the device had no suitable note.
    public var skippedEdits = 0
    /// Sync attempts, the final healing's included.
    public var syncs = 0
    /// Syncs that failed (a transient error, a crash in the middle, a refused request).
    public var failedSyncs = 0
    /// Transport calls the sync engine retried.
    public var retries = 0
    /// Relay requests and answers the network lost.
    public var lost = 0
    /// Relay requests delivered twice.
    public var duplicated = 0
    /// Reordered relay requests; the simulator reorders by delaying, counted in `delayed`, so this
    /// stays 0.
    public var reordered = 0
    /// Relay requests and answers that came too late (a late request still reaches the relay).
    public var delayed = 0
    /// Bundles the simulator damaged: relay requests and answers, folder copies.
    public var corruptInjected = 0
    /// Damaged bundles that were refused, as they must be.
    public var corruptRejected = 0
    /// Folder files that did not decode (cut short or damaged) and were left for a later sync.
    public var skippedFiles = 0
    /// Crashes and restarts (some in the middle of a sync).
    public var crashes = 0
    /// Crashes at a commit (`crashAtCommit` events whose cut came before the call's last commit).
    public var commitsCut = 0
    /// Reinstalls from nothing.
    public var reinstalls = 0
    /// Devices whose database was replaced by a copy of another's.
    public var copies = 0
    /// Editor saves (`editLater`) whose note had changed since the editor opened: the edit was
    /// rebased onto the note as it had become.
    public var rebasedSaves = 0
    /// Clones of a device's disk that typed on beside it, and how many of their forks only the
    /// typed characters tell apart (the same seqs at the same timestamps).
    public var clones = 0
    /// Forks of an identity a device wrote as (a clone's, or a copy's that kept the identity)
    /// repaired by re-issuing the device's own branch, and how many operations were re-issued.
    public var forksRepaired = 0
    public var reissuedOperations = 0
    /// Databases copied onto another device keeping their identity (`faults.forks`), and how many
    /// of those forks both copies repaired (each re-issued its own branch).
    public var forks = 0
    public var forksRepairedTwice = 0
    /// Reinstalls, copies, restores, deaths and forks not made because the device was in a fork
    /// not repaired yet (the reference could not tell which of two operations at a seq it lost).
    public var replacementsSkipped = 0
    /// Edits not made because the device held operations of a fork that a re-issue could still
    /// take back (`Simulation.mayEditBesideForks`).
    public var editsHeldBackByForks = 0
    public var characterForks = 0
    /// Syncs after which other changes waited than before (a restart's pending table is then
    /// checked), and those after which as many waited as before.
    public var waitingChanged = 0
    public var waitingSwapped = 0
    /// Out-of-order deliveries of a peer's changes.
    public var outOfOrder = 0
    /// Backups of a device's database copied back over it.
    public var restores = 0
    /// Clock jumps.
    public var clockJumps = 0
    /// Partitions begun, scheduled and random.
    public var partitions = 0
    /// Operations gone for good because they never left a device that was reinstalled, replaced by
    /// a copy or died (the reference model forgets them too).
    public var forgottenOperations = 0
    /// Edits made through a second store on a device's database (another process).
    public var otherProcessEdits = 0
    /// Devices that stopped for good.
    public var deaths = 0
    /// Forged files put in shared folders.
    public var forgeries = 0
    /// Hostile requests sent to relays.
    public var intrusions = 0
    /// Changes a member device forged in another's name (encrypted scenarios), and how many
    /// times a hub or a device refused one.
    public var memberForgeries = 0
    /// Refusals of forged units: relay uploads refused, units refused by devices, folder files skipped.
    public var forgeryRefusals = 0
    /// Sync rounds of the final healing, up to the one that changed nothing (in a summary: the most
    /// of any run).
    public var healRounds = 0
}

/// What one run found.
public struct RunResult: Codable, Sendable {
    /// The scenario's name.
    public var scenario: String
    /// The run's seed.
    public var seed: UInt64
    /// The schedule's events that ran (all of them, or the subset asked for).
    public var events: Int
    /// How long the run lasted in simulated time, in milliseconds.
    public var simulatedMilliseconds: UInt64
    /// Every device ended with the same digest.
    public var converged: Bool
    /// Devices whose digest differs from device 0's at the end.
    public var divergentDevices: Int
    /// Differences from the reference model (an edit lost, or a character or value that should not be there).
    public var lostEdits: Int
    /// Changes still waiting for their dependencies at the end, over all devices.
    public var stuckPending: Int
    /// Safety checks that failed during the run.
    public var safetyViolations: [String]
    /// What went wrong, one line each (capped).
    public var problems: [String]
    /// SHA-256 of the whole trace.
    public var traceHash: String
    /// When (ms since the start) the devices last changed state before the end: when they converged.
    public var convergedAtMilliseconds: UInt64?
    /// CPU seconds spent in the sync engine (not in the checks around it): what a sync costs.
    public var syncSeconds: Double = 0
    /// Counters of what happened.
    public var stats: RunStats

    /// Whether the run failed a check: the devices diverged, an edit was lost, changes were left
    /// waiting, or a safety check failed.
    public var failed: Bool { !converged || lostEdits > 0 || stuckPending > 0 || !safetyViolations.isEmpty }
}

/// One run of a scenario with one seed: the devices, the hubs, the virtual clock, the schedule,
/// the checks and the trace. Everything runs on one task, one step at a time, so a seed (and the
/// subset of events, when shrinking) determines the run exactly.
public final class Simulation: @unchecked Sendable {
    /// The scenario being run.
    public let scenario: Scenario
    /// The seed that determines the run.
    public let seed: UInt64
    let schedule: [SimEvent]
    let clocks: ClockState
    /// Per device, what its stores draw a fresh identity from (the device's, whatever database it holds).
    let entropies: [SimEntropy]
    var devices: [SimDevice] = []
    var relays: [Int: SimRelayHub] = [:]
    /// The space key of an encrypted scenario.
    var spaceKey: SpaceKey?
    /// CPU nanoseconds of the process spent in `SyncEngine.sync` (the simulator's own checks
    /// excluded; exact with one run at a time).
    var syncNanoseconds: UInt64 = 0
    /// The bytes of every unit a member forged (the world knows; no device does).
    var forgedUnits: Set<[UInt8]> = []
    /// Steps that read touched notes, counted to check the search index at every fourth.
    var searchChecks = 0
    var folders: [Int: SimFolderHub] = [:]
    var links: [[LinkState]]
    /// The randomness of the event being run (network faults, jitter, choices).
    var eventRandom = SimRandom(seed: 0)
    /// Off during the final healing, so that the end state is reached in bounded time.
    var faultsOn = true
    /// Compare the note list kept from the checks with `list(.all)` before every edit (tests).
    package var verifyNoteLists = false
    var stats = RunStats()
    var reference = ReferenceModel()
    var violations: [String] = []
    /// Every note digest seen, with the state it stood for (`DigestLedger`).
    var digestLedger = DigestLedger()
    /// What has happened so far, step by step.
    public internal(set) var trace = Trace()
    /// Requests to relays in flight (delayed), delivered at their time.
    private var inFlight: [(deliverAt: UInt64, order: Int, device: Int, hub: Int, request: RelayRequest, damaged: Bool)] = []
    private var inFlightOrder = 0
    /// Per device in the middle of a power cut at a commit: the cut (`crashAtCommit`). Once it has
    /// cut a commit, the device is dead until it restarts: it neither commits nor does I/O.
    var cuts: [Int: CommitCut] = [:]
    /// Per device in the middle of a crash: how many more writes (to a folder) or requests (to a
    /// relay) it makes before it stops.
    private var stopAfter: [Int: Int] = [:]
    /// Whether the sync under way had a request damaged in transit (the relay then refuses it).
    private var damagedRequestThisSync = false
    /// Devices that stopped for good.
    private(set) var dead: Set<Int> = []
    /// The forks the `fork` fault made, and the next branch number it gives a copy.
    var forkRecords: [ForkRecord] = []
    var nextBranch = 1

    /// The devices still running.
    var liveDevices: [SimDevice] { devices.filter { !dead.contains($0.index) } }
    private var lastStateChange: UInt64 = 0
    /// How many times anything changed state (a round of healing that changes nothing ends it;
    /// a time would not do: a round can change state at the very time the one before did).
    private var stateChanges = 0

    /// Prepares a run: devices (with identities from the seed), hubs, and the schedule.
    public init(scenario: Scenario, seed: UInt64) throws {
        try scenario.validate()
        SQLiteTuning.prepare()
        self.scenario = scenario
        self.seed = seed
        schedule = ScheduleGenerator.events(for: scenario, seed: seed)
        clocks = ClockState(devices: scenario.devices)
        entropies = (0 ..< scenario.devices).map { SimEntropy(SimRandom(seed: seed, salt: 1000 &+ UInt64($0))) }
        links = Array(repeating: Array(repeating: LinkState(), count: scenario.hubs.count), count: scenario.devices)
        var setup = SimRandom(seed: seed, salt: 2)
        let clockState = clocks
        for (i, hub) in scenario.hubs.enumerated() {
            switch hub.kind {
            case .relay: relays[i] = try SimRelayHub(relayID: ReplicaID.random(using: &setup).raw.bytes, pageSize: scenario.sync.pageSize)
            case .folder: folders[i] = try SimFolderHub(members: scenario.members(ofHub: i), clock: { clockState.now })
            }
        }
        for d in 0 ..< scenario.devices {
            if let fixed = scenario.clocks.skewSeconds, d < fixed.count {
                clocks.skews[d] = Int64(fixed[d] * 1000)
            } else if scenario.clocks.maxSkewSeconds > 0 {
                let skew = Int64(setup.milliseconds(upTo: scenario.clocks.maxSkewSeconds))
                clocks.skews[d] = setup.chance(0.5) ? -skew : skew
            }
            let database = try InMemoryDatabase()
            let store = try NoteStore.open(database, options: storeOptions(d), replicaID: ReplicaID.random(using: &setup))
            devices.append(SimDevice(index: d, database: database, store: store))
        }
        if scenario.encrypted {
            // A generator of its own, so that plain scenarios draw exactly what they drew before.
            var keys = SimRandom(seed: seed, salt: 22)
            let key = SpaceKey(bytes: (0 ..< 32).map { _ in UInt8(truncatingIfNeeded: keys.next()) })!
            spaceKey = key
            // Before any edit, so that every device writes as an id made from its signing key.
            for device in devices {
                try device.store.enterSpace(key: key, origin: "simulation", signingSeed: (0 ..< 4).flatMap { _ in withUnsafeBytes(of: keys.next()) { Array($0) } })
            }
            try introduceDevices()
        }
        // Device 0 starts with some notes, which every device has before the clock starts.
        let first = devices[0].store
        for n in 0 ..< scenario.workload.initialNotes {
            var text = ""
            while text.unicodeScalars.count < scenario.workload.initialBodyLength {
                text += Words.all[setup.below(Words.all.count)]
            }
            let before = try first.versionVector
            try first.createNote(title: "Note \(n + 1)", body: text, id: NoteID.random(using: &setup))
            // Each note is an edit on device 0's undo stack.
            devices[0].undoLog.push(before[first.replicaID] + 1 ... (try first.versionVector[first.replicaID]), by: first.replicaID)
        }
        let initial = try first.changes(since: VersionVector())
        for change in initial { reference.record(change) }
        if spaceKey != nil {
            // As sealed units, so that every device holds them to pass on (device 0 may be gone).
            let units = try first.sealedUnits(since: VersionVector())
            for device in devices.dropFirst() { _ = try device.store.integrate(sealed: units) }
        } else {
            for device in devices.dropFirst() { try device.store.apply(initial) }
        }
        for device in devices { device.lastVersion = try device.store.versionVector }
    }

    /// The options of device `d`'s store: the command line's, with the device's clock.
    func storeOptions(_ d: Int) -> StoreOptions {
        // A device whose database no other process opens owns it outright, as an app may; with
        // edits from another process (`workload.otherProcess`) it must look for their writes.
        let entropy = entropies[d]
        return StoreOptions(wallClock: DeviceClock(clocks: clocks, device: d), snapshotInterval: scenario.sync.snapshotInterval,
                            access: scenario.workload.otherProcess > 0 ? .shared : .exclusive, entropy: { entropy.next() })
    }

    /// The hub's index.
    func hubIndex(_ hub: SimFolderHub) -> Int {
        folders.first { $0.value === hub }!.key
    }

    /// With `SIM_DEBUG` set in the environment, every sync's report and every relay exchange is
    /// printed (for a person replaying a failing seed).
    static let printsSteps = ProcessInfo.processInfo.environment["SIM_DEBUG"] != nil

    /// The number of events in the full schedule.
    public var scheduleCount: Int { schedule.count }

    /// The full schedule.
    public var events: [SimEvent] { schedule }

    // MARK: Running

    /// Runs the schedule (or only the events at `only`, indexes into it), heals, lets sync run
    /// until nothing changes, then checks.
    public func run(only: Set<Int>? = nil) async -> RunResult {
        var executed = 0
        for (i, event) in schedule.enumerated() {
            if let only, !only.contains(i) { continue }
            executed += 1
            clocks.now = max(clocks.now, ClockState.epoch + event.time)
            await deliverDue()
            eventRandom = SimRandom(seed: seed ^ event.payload, salt: UInt64(i) &+ 3)
            await step(event, index: i)
        }
        await heal()
        await checkHubsAndPeers()
        let result = finish(events: executed)
        // The transports refer back to the run: let it go.
        for device in devices { device.transports = [:] }
        return result
    }

    func step(_ event: SimEvent, index: Int) async {
        let d = event.device
        if d >= 0, dead.contains(d) { return }
        switch event.kind {
        case .edit:
            edit(d, event.edit ?? .type, payload: event.payload)
        case .sync:
            for hub in hubs(of: d, event.hub) { await sync(d, hub: hub, crash: false) }
        case .partition, .heal:
            let cut = event.kind == .partition
            for hub in hubs(of: d, event.hub) { setLink(d, hub: hub, direction: event.direction ?? .both, cut: cut) }
            if cut { stats.partitions += 1 }
            trace.add(elapsed, d, cut ? .partition : .heal, Int64(event.hub), Int64(Trace.code(event.direction ?? .both)))
        case .crash:
            crash(d)
        case .crashAtCommit:
            await crashAtCommit(d, hub: event.hub, edit: event.edit, payload: event.payload)
        case .crashDuringSync:
            if let hub = hubs(of: d, event.hub).first { await sync(d, hub: hub, crash: true) }
            crash(d)
        case .reinstall:
            guard !inUnrepairedFork(d) else { return skipReplacement(d) }
            await reinstall(d)
        case .copy:
            guard !inUnrepairedFork(d) else { return skipReplacement(d) }
            let others = devices.indices.filter { $0 != d }
            if !others.isEmpty { await copyReplica(d, from: others[Int(event.payload % UInt64(others.count))]) }
        case .clone:
            cloneTypesOn(d, payload: event.payload)
        case .outOfOrder:
            deliverOutOfOrder(d, payload: event.payload)
        case .fork:
            let others = devices.indices.filter { $0 != d }
            if !others.isEmpty { await forkReplica(d, from: others[Int(event.payload % UInt64(others.count))]) }
        case .backup:
            takeBackup(d)
        case .restore:
            guard !inUnrepairedFork(d) else { return skipReplacement(d) }
            // Half the time the backup is of a moment ago, one write back: the smallest loss a
            // restore makes, which the seq mark must still see.
            var choice = SimRandom(seed: event.payload, salt: 5)
            if choice.chance(0.5) {
                takeBackup(d)
                writeOnce(d)
            }
            await restoreBackup(d)
        case .reinstallDuringSync:
            if let hub = hubs(of: d, event.hub).first { await sync(d, hub: hub, crash: true) }
            guard !inUnrepairedFork(d) else { return skipReplacement(d) }
            await reinstall(d)
        case .death:
            guard !inUnrepairedFork(d) else { return skipReplacement(d) }
            await die(d)
        case .forgery:
            forge(hub: event.hub, payload: event.payload)
        case .intrusion:
            await intrude(hub: event.hub, payload: event.payload)
        case .memberForgery:
            await forgeAsMember(d, payload: event.payload)
        case .clockJump:
            clocks.skews[d] &+= event.amount
            stats.clockJumps += 1
            trace.add(elapsed, d, .clockJump, event.amount)
        }
    }

    var elapsed: UInt64 { clocks.elapsed }

    func hubs(of device: Int, _ hub: Int) -> [Int] {
        hub >= 0 ? [hub] : ScheduleGenerator.hubIndexes(of: device, in: scenario)
    }

    func violation(_ message: String) {
        if violations.count < 50 { violations.append("t=\(elapsed)ms: \(message)") }
        trace.add(elapsed, -1, .violation, Int64(violations.count))
    }

    // MARK: Edits

    func edit(_ d: Int, _ kind: EditKind, payload: UInt64) {
        let device = devices[d]
        do {
            // Not on top of a branch of a forked identity that may still be withdrawn.
            guard try mayEditBesideForks(d) else {
                stats.editsHeldBackByForks += 1
                trace.add(elapsed, d, .editSkipped, Int64(Trace.code(kind)), -1)
                return
            }
            let before = try device.store.versionVector
            let notebookBefore = try device.store.notebook
            let clockBefore = notebookBefore.clock.last
            var rng = SimRandom(seed: payload)
            let notes = try currentNotes(device)
            var touched: NoteID?
            /// What the edit meant, checked once it is made (see `checkIntent`).
            var intent: Intent?
            func pick(_ candidates: [StoredNote]) -> StoredNote? {
                candidates.isEmpty ? nil : candidates[rng.below(candidates.count)]
            }
            func place(_ length: Int) -> Int { min(length, Int(rng.unit() * Double(length + 1))) }
            /// What a person does to a note's text in an editor: one to four words typed or runs
            /// deleted, sometimes a new title.
            func editorBurst(_ original: NoteText) -> NoteText {
                var body = Array(original.body.unicodeScalars)
                for _ in 0 ..< 1 + rng.below(4) {
                    if body.isEmpty || rng.chance(0.6) {
                        body.insert(contentsOf: Words.all[own.below(Words.all.count)].unicodeScalars, at: place(body.count))
                    } else {
                        let offset = min(body.count - 1, place(body.count - 1))
                        body.removeSubrange(offset ..< offset + 1 + rng.below(min(8, body.count - offset)))
                    }
                }
                let title = own.chance(0.15) ? "\(Words.titles[own.below(Words.titles.count)]) \(own.below(100))" : original.title
                return NoteText(title: title, body: String(String.UnicodeScalarView(body)))
            }
            // What the kinds beyond the default mix did, checked once made.
            var alsoTouched: [NoteID] = []
            var typingCalls = 1
            var undone: (result: UndoResult, replica: ReplicaID)?
            var renamed: (old: String, new: String)?
            var emptied: Int?
            var resolvedNote: NoteID?
            var savedLate: (editor: OpenEditor, current: [(id: OpID, scalar: Unicode.Scalar)], title: String)?
            // Choices the devices of a burst must not share (identities, values) mix in the device.
            var own = SimRandom(seed: payload, salt: UInt64(d) &+ 1 &+ UInt64(device.incarnation) << 8)
            // Some edits come from another process on the device (a command line run while the
            // app is open): a second store on the same database, which the app's store must
            // catch up with before its next write.
            let store: NoteStore
            let other: NoteStore?
            if scenario.workload.otherProcess > 0, own.chance(scenario.workload.otherProcess) {
                other = try NoteStore.open(device.database, options: storeOptions(d))
                store = other!
            } else {
                other = nil
                store = device.store
            }
            defer { try? other?.close() }
            var effective = kind
            if notes.isEmpty, kind != .create { effective = .create }
            switch effective {
            case .type, .append:
                guard let note = pick(notes) else { break }
                let word = Words.all[own.below(Words.all.count)]
                let offset = effective == .append ? note.bodyLength : place(note.bodyLength)
                // Another process may type on (up to three words in a row, one edit each): its
                // one-note edits then keep the note's state between writes of it.
                let words = other != nil ? 1 + own.below(3) : 1
                typingCalls = words
                let count = word.unicodeScalars.count
                for i in 0 ..< words {
                    if effective == .append {
                        try store.appendText(note.id, word)
                    } else {
                        try store.insertText(note.id, at: offset + i * count, word)
                    }
                }
                touched = note.id
                intent = .typed(note.id, at: offset, count: words * count, firstSeq: before[device.replicaID] + 1,
                                lengthBefore: note.bodyLength)
            case .deleteRange:
                guard let note = pick(notes.filter { $0.bodyLength > 0 }) else { break }
                let offset = min(note.bodyLength - 1, place(note.bodyLength - 1))
                let count = 1 + rng.below(min(12, note.bodyLength - offset))
                try store.deleteText(note.id, at: offset, count: count)
                touched = note.id
                intent = .deleted(note.id, count: count, lengthBefore: note.bodyLength)
            case .rename:
                guard let note = pick(notes) else { break }
                let title = "\(Words.titles[own.below(Words.titles.count)]) \(own.below(100))"
                try store.setTitle(note.id, title)
                touched = note.id
                intent = .wrote(note.id, .title, .string(title))
            case .pin:
                guard let note = pick(notes) else { break }
                let pinned = own.chance(0.5)
                try store.setPinned(note.id, pinned)
                touched = note.id
                intent = .wrote(note.id, .pinned, .bool(pinned))
            case .tag:
                guard let note = pick(notes) else { break }
                let name = Words.tags[rng.below(Words.tags.count)]
                let member = own.chance(0.6)
                try store.setTag(note.id, name, member: member)
                touched = note.id
                intent = .wrote(note.id, .tag(Notebook.tagKey(name)), .bool(member))
            case .trash:
                guard let note = pick(notes.filter { $0.state == .active }) else { break }
                try store.setState(note.id, .trashed)
                touched = note.id
                intent = .wrote(note.id, .state, .string(NoteLifecycle.trashed.rawValue))
            case .restore:
                guard let note = pick(notes.filter { $0.state == .trashed }) else { break }
                try store.setState(note.id, .active)
                touched = note.id
                intent = .wrote(note.id, .state, .string(NoteLifecycle.active.rawValue))
            case .delete:
                guard notes.count > 1, let note = pick(notes) else { break }
                try store.setState(note.id, .deleted)
                touched = note.id
                intent = .wrote(note.id, .state, .string(NoteLifecycle.deleted.rawValue))
            case .editText:
                // What `crdt-sync edit` saves: the note's text as read, changed in an editor by a
                // burst of typing and deleting, saved as splices on the current body.
                guard let note = pick(notes), let stored = try store.note(note.id) else { break }
                let original = NoteText(title: stored.title, body: stored.body ?? "")
                let edited = editorBurst(original)
                try store.applyEditedText(note.id, original: original, edited: edited)
                touched = note.id
                intent = .saved(note.id, edited)
            case .create:
                let id = NoteID.random(using: &own)
                let tags = own.chance(0.3) ? [Words.tags[own.below(Words.tags.count)]] : []
                try store.createNote(title: "\(Words.titles[own.below(Words.titles.count)])", body: Words.all[own.below(Words.all.count)],
                                     tags: tags, id: id)
                touched = id
            case .archive:
                guard let note = pick(notes) else { break }
                let archived = own.chance(0.5)
                try store.setArchived(note.id, archived)
                touched = note.id
                intent = .wrote(note.id, .archived, .bool(archived))
            case .color:
                guard let note = pick(notes) else { break }
                let color = own.chance(0.25) ? nil : Words.colors[own.below(Words.colors.count)]
                try store.setColor(note.id, color)
                touched = note.id
                intent = .wrote(note.id, .color, color.map(FieldValue.string) ?? .null)
            case .undelete:
                // `allNotes` leaves deleted notes out.
                let deleted = notebookBefore.noteIDs.filter { notebookBefore.noteFields($0)?.state == .deleted }.sorted()
                guard !deleted.isEmpty else { break }
                let id = deleted[rng.below(deleted.count)]
                try store.setState(id, .active)
                touched = id
                intent = .wrote(id, .state, .string(NoteLifecycle.active.rawValue))
            case .renameTag:
                let names = Set(notes.flatMap(\.tags)).sorted()
                guard !names.isEmpty else { break }
                let old = names[rng.below(names.count)]
                // Into another tag (joined when it exists), or the same one in capitals (a new name only).
                let new = own.chance(0.2) ? old.uppercased() : Words.tags[own.below(Words.tags.count)]
                let result = try store.renameTag(old, to: new)
                let members = notebookBefore.allNotes.filter { $0.state != .deleted && $0.tags.contains { Notebook.tagKey($0) == Notebook.tagKey(old) } }
                if result.notes != members.count {
                    violation("device \(d): renaming tag \(old) reported \(result.notes) notes in it, the notebook had \(members.count)")
                }
                touched = members.first?.id
                alsoTouched = members.map(\.id)
                renamed = (old, new)
            case .undo:
                let replica = device.replicaID
                let expected = device.undoLog.expected(replica)
                let result = try store.undo()
                if expected.known, let problem = Self.undoTargetProblem(result, expected: expected.seqs) {
                    violation("device \(d): \(problem)")
                }
                guard let result else { break }
                if device.undoLog.replica == replica { device.undoLog.edits.removeAll { $0 == result.seqs } }
                undone = (result, replica)
                touched = result.notes.first
                alsoTouched = result.notes
            case .resolve:
                guard let note = pick(notes.filter(\.hasConflicts)) else { break }
                try store.resolveConflicts(note.id)
                touched = note.id
                resolvedNote = note.id
            case .replaceBody:
                // A paste over part of the body, the whole text saved.
                guard let note = pick(notes), let stored = try store.note(note.id) else { break }
                var body = Array((stored.body ?? "").unicodeScalars)
                let offset = place(body.count)
                body.replaceSubrange(offset ..< offset + rng.below(min(9, body.count - offset + 1)),
                                     with: Words.all[own.below(Words.all.count)].unicodeScalars)
                let text = String(String.UnicodeScalarView(body))
                try store.replaceBody(note.id, with: text)
                touched = note.id
                intent = .saved(note.id, NoteText(title: stored.title, body: text))
            case .emptyTrash:
                let trashed = notebookBefore.allNotes.filter { $0.state == .trashed }.map(\.id)
                let count = try store.emptyTrash()
                touched = trashed.first
                alsoTouched = trashed
                emptied = count
            case .editLater:
                if let editor = device.editor {
                    // Saved after whatever reached the note meanwhile (unless it was deleted for good).
                    device.editor = nil
                    guard let fields = notebookBefore.noteFields(editor.note), fields.state != .deleted else { break }
                    let current = Self.characters(notebookBefore.body(of: editor.note))
                    try store.applyEditedText(editor.note, original: editor.original, edited: editor.edited)
                    touched = editor.note
                    savedLate = (editor, current, fields.title)
                } else {
                    guard let note = pick(notes), let fields = notebookBefore.noteFields(note.id) else { break }
                    let characters = Self.characters(notebookBefore.body(of: note.id))
                    let original = NoteText(title: fields.title, body: String(String.UnicodeScalarView(characters.map(\.scalar))))
                    device.editor = OpenEditor(note: note.id, original: original, characters: characters, edited: editorBurst(original))
                }
            }
            // What follows is the simulator's checks, not the device's work (`crashAtCommit`).
            cuts[d]?.armed = false
            guard let note = touched else {
                stats.skippedEdits += 1
                trace.add(elapsed, d, .editSkipped, Int64(Trace.code(kind)))
                return
            }
            if let other {
                stats.otherProcessEdits += 1
                try? other.close()
                // The app hears that its database changed (a file watcher, a notification).
                try device.store.refresh()
            }
            let produced = try device.store.changes(since: before)
            // A write the clock stamped (not typing, which may continue a run at the timestamp after
            // the character it follows) comes after all the app's clock had issued or seen.
            if other == nil, ![.type, .append, .deleteRange, .editText, .editLater, .replaceBody, .undo].contains(effective),
               let first = produced.first(where: { $0.replica == device.replicaID }),
               let problem = Self.stampedBeforeClock(first.timestamp, clockBefore: clockBefore, wallMilliseconds: clocks.reading(for: d),
                                                     maxForwardDrift: try device.store.notebook.clock.maxForwardDrift) {
                violation("device \(d): \(problem)")
            }
            // And one made while the clock ran far ahead comes back to the wall clock.
            if other == nil, effective == .create || intent.map({ if case .wrote = $0 { true } else { false } }) == true,
               let first = produced.first(where: { $0.replica == device.replicaID }) {
                var replaced: Timestamp?
                if case .wrote(let note, let field, _) = intent { replaced = notebookBefore.register(of: note, field)?.timestamp }
                if let problem = Self.stampedFarAhead(first.timestamp, clockBefore: clockBefore, replaced: replaced,
                                                      wallMilliseconds: clocks.reading(for: d), maxForwardDrift: notebookBefore.clock.maxForwardDrift) {
                    violation("device \(d): \(problem)")
                }
            }
            recordOwn(produced, of: device)
            if effective != .undo { try pushUndo(device, from: before, calls: typingCalls) }
            stats.edits += 1
            let after = try device.store.versionVector
            trace.add(elapsed, d, .edit, Int64(Trace.code(effective)), Int64(after[device.replicaID]), Int64(produced.count))
            noteStateChange()
            if let intent { try checkIntent(intent, device, produced: produced) }
            if undone != nil || renamed != nil || emptied != nil || resolvedNote != nil || savedLate != nil {
                let notebook = try device.store.notebook
                var problems: [String?] = []
                if let undone { problems.append(Self.undoEffectProblem(undone.result, replica: undone.replica, before: notebookBefore, after: notebook)) }
                if let renamed { problems.append(Self.tagRenameProblem(from: renamed.old, to: renamed.new, before: notebookBefore, after: notebook)) }
                if let emptied { problems.append(Self.emptyTrashProblem(count: emptied, before: notebookBefore, after: notebook)) }
                if let resolvedNote { problems.append(Self.unresolvedProblem(resolvedNote, after: notebook)) }
                if let savedLate {
                    let me = device.replicaID
                    let made = before[me] + 1 ... max(before[me] + 1, after[me])
                    let editor = savedLate.editor
                    if let problem = Self.rebasedSaveProblem(original: editor.characters, edited: Array(editor.edited.body.unicodeScalars),
                                                             current: savedLate.current, after: Self.characters(notebook.body(of: editor.note)),
                                                             isNew: { $0.replica == me && made.contains($0.seq) }) {
                        problems.append("note \(editor.note) saved from an editor opened before it changed: \(problem)")
                    } else if savedLate.current.map(\.id) != editor.characters.map(\.id) {
                        stats.rebasedSaves += 1
                    }
                    let title = editor.edited.title != editor.original.title ? editor.edited.title : savedLate.title
                    if let now = notebook.noteFields(editor.note)?.title, now != title {
                        problems.append("note \(editor.note) saved from an editor has the title \"\(now)\", not \"\(title)\"")
                    }
                }
                for case let problem? in problems { violation("device \(d): \(problem)") }
            }
            // Tagging with a tag the device did not know names the tag, and that re-materializes
            // every note in it: check those too.
            try checkAfterStep(device, notes: [note] + alsoTouched.filter { $0 != note }, tagsNamed: Self.tagsNamed(produced))
        } catch where cuts[d]?.happened == true {
            // The power went in the middle: the edit was not acknowledged (`crashAtCommit`).
            device.notes = nil
        } catch {
            device.notes = nil
            violation("device \(d): a \(kind.rawValue) edit failed: \(error)")
        }
    }

    /// What a local edit meant to do.
    enum Intent {
        /// `count` scalars typed at this offset of a body that had `lengthBefore` scalars, taking
        /// the device's seqs from `firstSeq` on.
        case typed(NoteID, at: Int, count: Int, firstSeq: UInt64, lengthBefore: Int)
        /// `count` scalars deleted from a body that had `lengthBefore`.
        case deleted(NoteID, count: Int, lengthBefore: Int)
        /// This value written to this field.
        case wrote(NoteID, NoteField, FieldValue)
        /// This text saved from an editor that was given the note's text as it was.
        case saved(NoteID, NoteText)
    }

    /// Checks that a local edit did what the person meant, on the device, at once: typed text
    /// lands where it was typed; a delete removes that many characters; a field written holds the
    /// written value. The last is what "last writer wins" must mean for a person: a write made
    /// after seeing another write always beats it, whatever the clocks say (a clock that is
    /// behind, or a write stamped by a clock years ahead that the device has seen).
    func checkIntent(_ intent: Intent, _ device: SimDevice, produced: [Change]) throws {
        let notebook = try device.store.notebook
        switch intent {
        case .typed(let note, let offset, let count, let firstSeq, let lengthBefore):
            guard let body = notebook.body(of: note) else { return violation("device \(device.index): note \(note) vanished after typing in it") }
            if body.count != lengthBefore + count {
                violation("device \(device.index): typing \(count) characters made the body \(body.count) long, not \(lengthBefore + count)")
            } else if body.identities(of: offset ..< offset + count) != [OpIDRange(replica: device.replicaID, seq: firstSeq, count: UInt64(count))] {
                violation("device \(device.index): the \(count) characters typed at \(offset) of note \(note) are not there")
            }
        case .deleted(let note, let count, let lengthBefore):
            let length = notebook.body(of: note)?.count ?? -1
            if length != lengthBefore - count {
                violation("device \(device.index): deleting \(count) of \(lengthBefore) characters left \(length)")
            }
        case .saved(let note, let text):
            // The editor was given the current text, so the note now reads as saved.
            let body = notebook.body(of: note)?.string
            let title = notebook.noteFields(note)?.title
            if body != text.body || title != text.title {
                violation("device \(device.index): note \(note) saved from an editor reads \"\(title ?? "nil")\" / \"\(body ?? "nil")\", not \"\(text.title)\" / \"\(text.body)\"")
            }
        case .wrote(let note, let field, let value):
            guard produced.contains(where: { $0.replica == device.replicaID }) else { return }  // it changed nothing
            guard let register = notebook.register(of: note, field) else {
                return violation("device \(device.index): the \(field) of note \(note) was written but holds nothing")
            }
            if register.writer.replica != device.replicaID || register.value != value {
                violation("device \(device.index): the \(field) of note \(note) written just now holds another write (\(register.value) at \(register.timestamp) by \(register.writer.replica)): a write made after seeing another lost to it")
            }
        }
    }

    // MARK: Sync

    /// The shipped transport device `d` uses for `hub` (made at its first sync there).
    func transport(_ d: Int, hub: Int) throws -> any SyncTransport {
        if let existing = devices[d].transports[hub] { return existing }
        let made: any SyncTransport
        if folders[hub] != nil {
            let fileSystem = ObservedFileSystem(base: folders[hub]!.fileSystems[d]!, world: self, device: d, hub: hub)
            made = FolderTransport(folder: SimFolderHub.root, fileSystem: fileSystem, maxFileBytes: SimFolderHub.maxFileBytes)
        } else {
            var relay = try RelayTransport(url: "http://\(scenario.hubs[hub].name).relay", space: SimRelayHub.space,
                                           token: SimRelayHub.token, http: SimulatedHTTP(world: self, device: d, hub: hub))
            relay.maxChangesPerRequest = max(1, scenario.sync.pageSize)
            // Odd devices ask for version 3 pages, as clients from before record pages do: a
            // relay serves both kinds, and both must bring the same.
            relay.acceptsRecords = d % 2 == 0
            made = relay
        }
        devices[d].transports[hub] = made
        return made
    }

    /// One sync of device `d` with `hub` through the shipped engine and transport. With `crash`,
    /// the device stops after a few of its writes or requests (perhaps none), and restarts.
    func sync(_ d: Int, hub: Int, crash: Bool) async {
        let device = devices[d]
        let identity = device.replicaID
        let engine = SyncEngine(
            retry: RetryPolicy(maxAttempts: scenario.sync.maxAttempts, baseDelayMilliseconds: 200, maxDelayMilliseconds: 5_000),
            sleep: { [self] milliseconds in self.clocks.now += milliseconds },
            random: { [self] in self.eventRandom.unit() })
        stats.syncs += 1
        damagedRequestThisSync = false
        if crash { stopAfter[d] = eventRandom.below(4) }
        defer { stopAfter[d] = nil }
        let before: VersionVector
        let waitingBefore: Set<Change>
        let reissuesBefore: Int
        do {
            before = try device.store.versionVector
            waitingBefore = Set(try device.store.pendingChanges)
            reissuesBefore = try device.store.notebook.reissues.count
        } catch {
            violation("device \(d): cannot read the version vector: \(error)")
            return
        }
        // What the relay holds as the sync begins: a sync that succeeds must bring all of it.
        var relayHeld: VersionVector?
        if let relay = relays[hub] { relayHeld = try? await relay.storage.status(space: SimRelayHub.space).version }
        let clockBefore = try? device.store.notebook.clock.last
        let wallBefore = clocks.reading(for: d)
        do {
            var transport = try transport(d, hub: hub)
            if spaceKey != nil, var folder = transport as? FolderTransport {
                // What the device knows of the members now (a new one is learnt at every sync).
                folder.sealedUnitCheck = try device.store.sealedUnitCheck()
                transport = folder
            }
            let started = SealingTime.cpuNanoseconds()
            let outcome: Result<SyncReport, any Error>
            let audited = AuditedReplica(device.store)
            do { outcome = .success(try await engine.sync(audited, over: transport)) } catch { outcome = .failure(error) }
            cuts[d]?.armed = false
            syncNanoseconds += SealingTime.cpuNanoseconds() &- started &- audited.auditNanoseconds
            // What the batches that were committed reported, whether or not the sync went on to fail.
            for problem in audited.problems { violation("device \(d): \(problem)") }
            let report = try outcome.get()
            // Only what a member forged may be refused (by a device, or a folder file skipped for it).
            stats.forgeryRefusals += report.refused.count + report.skipped.filter { $0.contains("forged: ") }.count
            if let stray = report.refused.first(where: { !$0.hasPrefix("forged: ") }) {
                violation("device \(d): refused a sealed unit that no forger made: \(stray)")
            }
            // As `crdt-sync sync --dir` does, with a small threshold so that runs compact often.
            if let folder = transport as? FolderTransport {
                try folder.compact(writer: device.replicaID, threshold: scenario.folder.compactThreshold)
            }
            stats.retries += report.retries
            stats.skippedFiles += report.skipped.count
            if report.quarantined > 0 {
                // Only a change made on top of a forked identity's operations may refer to an
                // operation this device holds differently (the other branch's): it waits there
                // until the re-issue comes (checked empty at the end).
                let unexplained = try device.store.notebook.quarantinedChanges.filter { !madeOnAForkedIdentity($0.change) }
                if !unexplained.isEmpty { violation("device \(d): \(unexplained.count) change(s) quarantined in a run with no hostile peer (\(unexplained[0].reason.message))") }
            }
            if let relayHeld {
                let notebook = try device.store.notebook
                // Not owed either: a forked identity's seqs it holds quarantined, or waiting behind
                // those (the relay's are another branch's than those before them here).
                let quarantined = (notebook.quarantinedChanges.map(\.change) + notebook.pendingChanges).filter(madeOnAForkedIdentity)
                    .map { OpIDRange(replica: $0.replica, seq: $0.startSeq, count: $0.endSeq - $0.startSeq + 1) }
                let otherBranch = try await otherBranchAtRelay(hub, relayHeld: relayHeld, device: notebook)
                if let shortfall = Self.syncShortfall(relayHeld: relayHeld, device: notebook.versionVector,
                                                      withdrawn: notebook.reissues.map(\.original) + quarantined + otherBranch) {
                    violation("device \(d): a sync over \(scenario.hubs[hub].name) succeeded but did not bring everything: \(shortfall)")
                }
            }
            trace.add(elapsed, d, .sync, Int64(hub), Int64(report.sentChanges), Int64(report.applied), Int64(report.pending))
            if Simulation.printsSteps {
                print("t=\(elapsed) d\(d) hub\(hub) \(report) vv=\((try? device.store.versionVector).map { "\($0)" } ?? "?")")
                if report.quarantined > 0, let held = try? device.store.quarantinedChanges() {
                    for entry in held { print("  quarantined \(entry.replica):\(entry.startSeq)-\(entry.endSeq): \(entry.reason)") }
                }
            }
        } catch where error is DeviceStopped || cuts[d]?.happened == true {
            if Simulation.printsSteps { print("t=\(elapsed) d\(d) hub\(hub) STOPPED") }
            stats.failedSyncs += 1
            trace.add(elapsed, d, .syncFailed, Int64(hub), -2)
        } catch let error as SyncError {
            stats.failedSyncs += 1
            if Simulation.printsSteps {
                print("t=\(elapsed) d\(d) hub\(hub) FAILED \(error) vv=\((try? device.store.versionVector).map { "\($0)" } ?? "?")")
            }
            trace.add(elapsed, d, .syncFailed, Int64(hub), Int64(Trace.code(error.code)))
            let expected = error.code == .transient || (error.code == .rejected && damagedRequestThisSync)
            if !expected {
                violation("device \(d): sync over \(scenario.hubs[hub].name) failed unexpectedly: \(error)")
            }
        } catch {
            stats.failedSyncs += 1
            trace.add(elapsed, d, .syncFailed, Int64(hub), -1)
            violation("device \(d): sync over \(scenario.hubs[hub].name) failed: \(error)")
        }
        if cuts[d]?.happened == true {
            // Dead until it restarts (`crashAtCommit`), which judges what it committed; a repair
            // committed before the cut stays, and the reference follows it.
            do { _ = try followIdentity(device, before: identity) } catch { violation("device \(d): \(error)") }
            return
        }
        do {
            // A fork of an identity it wrote as, found and repaired (committed even when the sync
            // then failed): the reference follows the re-issue.
            try followIdentity(device, before: identity)
            let notebook = try device.store.notebook
            // The changes the sync applied, in the order applied: each after what it depends on.
            let changes = notebook.versionVector != before ? notebook.changes(since: before) : []
            if Simulation.printsSteps, ProcessInfo.processInfo.environment["SIM_DEBUG_CHANGES"] != nil {
                print("  applied: \(changes.map { "\($0.replica.description.prefix(8)):\($0.startSeq)-\($0.endSeq)@\($0.timestamp(ofSeq: $0.startSeq))" })")
                for change in notebook.pendingChanges {
                    let missing = change.dependencies.sortedEntries.filter { $0.seq > notebook.versionVector[$0.replica] }
                    print("  waiting \(change.replica.description.prefix(8)):\(change.startSeq)-\(change.endSeq) on \(missing.map { "\($0.replica.description.prefix(8)):\($0.seq)" }) ops \(change.operations.prefix(3))")
                }
            }
            if let problem = Self.causalProblem(changes, after: before) { violation("device \(d): \(problem)") }
            if let clockBefore, let problem = Self.clockDragged(from: clockBefore, to: notebook.clock, wallMilliseconds: clocks.reading(for: d)) {
                violation("device \(d): \(problem)")
            }
            if let problem = Self.clockBehind(changes, clock: notebook.clock, wallMilliseconds: wallBefore) { violation("device \(d): \(problem)") }
            // Which changes wait changed: a restart must find the same ones (what a reader opening
            // the database loads), or a change that came stays lost or one applied comes back.
            try checkWaitingStored(device, before: waitingBefore, now: Set(notebook.pendingChanges))
            // And none that waited was dropped: each is applied, still waits, or is a withdrawn branch's.
            if let problem = Self.droppedWaitingChange(before: waitingBefore, notebook) { violation("device \(d): \(problem)") }
            let peers = try device.store.peers()
            if let problem = Self.peerRecordShrank(from: device.peerRecords, to: peers) { violation("device \(d): \(problem)") }
            device.peerRecords = Dictionary(peers.map { ($0.replica, $0.versionVector) }, uniquingKeysWith: { $1 })
            // (A re-issue can withdraw seqs that the branch kept fills again in the same sync: the
            // version then ends where it began.)
            let withdrew = Self.mayHaveWithdrawn(notebook, since: before, reissuesBefore: reissuesBefore)
            if notebook.versionVector != before {
                noteStateChange()
                var touched: Set<NoteID> = []
                for change in changes {
                    for op in change.operations {
                        if let note = op.note { touched.insert(note) }
                    }
                }
                try checkAfterStep(device, notes: touched.sorted(), tagsNamed: Self.tagsNamed(changes), all: withdrew)
            } else {
                try checkAfterStep(device, notes: [], all: withdrew)
            }
        } catch {
            device.notes = nil
            violation("device \(d): cannot check the store after a sync: \(error)")
        }
    }

    /// Called before each write or request a device makes: a device in the middle of a crash
    /// stops when its count runs out.
    func beforeDeviceIO(_ d: Int) throws {
        if cuts[d]?.happened == true { throw DeviceStopped() }
        guard let remaining = stopAfter[d] else { return }
        if remaining == 0 { throw DeviceStopped() }
        stopAfter[d] = remaining - 1
    }

    /// A device read a copy that is cut short or damaged: the bundle format must refuse it.
    func readDamagedCopy(_ bytes: [UInt8], path: String, device d: Int) {
        if (try? SyncBundle.decode(bytes)) != nil {
            violation("device \(d): a damaged copy of \(path) decodes as a bundle")
        } else {
            stats.corruptRejected += 1
        }
    }

    /// Something moved in a shared folder.
    func noteFolderActivity() { noteStateChange() }

    // MARK: The network to relays

    /// One HTTP request from device `d` to relay `hub`, through the simulated network: the request
    /// may be lost, damaged, delayed (it arrives later; the device times out now) or delivered
    /// twice; the answer may be lost, late or damaged; a partition cuts one direction or both.
    func relayCall(_ request: HTTPCallRequest, device d: Int, hub: Int) async throws -> HTTPCallResponse {
        try beforeDeviceIO(d)
        let network = scenario.network
        guard links[d][hub].outboundUp else { throw SyncError(.transient, "no route to the relay") }
        if faultsOn, eventRandom.chance(network.loss) {
            stats.lost += 1
            throw SyncError(.transient, "the request was lost")
        }
        var relayRequest = RelayRequest(method: request.method, path: Self.path(of: request.url), headers: request.headers, body: request.body)
        var damaged = false
        if faultsOn, !relayRequest.body.isEmpty, eventRandom.chance(network.corrupt) {
            Network.corrupt(&relayRequest.body, &eventRandom)
            stats.corruptInjected += 1
            damaged = true
            damagedRequestThisSync = true
        }
        if faultsOn, eventRandom.chance(network.delay) || eventRandom.chance(network.reorder / 4) {
            stats.delayed += 1
            inFlight.append((clocks.now + 1 + eventRandom.milliseconds(upTo: network.maxDelaySeconds), inFlightOrder, d, hub, relayRequest, damaged))
            inFlightOrder += 1
            throw SyncError(.transient, "the request timed out (it is still on its way)")
        }
        let response = await deliver(relayRequest, damaged: damaged, from: d, to: hub)
        if faultsOn, eventRandom.chance(network.duplicate) {
            stats.duplicated += 1
            _ = await deliver(relayRequest, damaged: damaged, from: d, to: hub)
        }
        guard links[d][hub].inboundUp else { throw SyncError(.transient, "the response never came back") }
        if faultsOn, eventRandom.chance(network.loss) {
            stats.lost += 1
            throw SyncError(.transient, "the response was lost")
        }
        if faultsOn, eventRandom.chance(network.delay) {
            stats.delayed += 1
            throw SyncError(.transient, "the response came too late")
        }
        var body = response.body
        if faultsOn, response.headers["Content-Type"] == RelayProtocol.bundleContentType, eventRandom.chance(network.corrupt) {
            Network.corrupt(&body, &eventRandom)
            stats.corruptInjected += 1
            if (try? SyncBundle.decode(body)) != nil {
                violation("device \(d): a relay answer damaged in transit decodes as a bundle")
            } else {
                stats.corruptRejected += 1
            }
        }
        return HTTPCallResponse(status: response.status, headers: response.headers, body: body)
    }

    /// The path of a URL (`http://host/v1/...` -> `/v1/...`).
    static func path(of url: String) -> String {
        guard let scheme = url.range(of: "://") else { return url }
        let rest = url[scheme.upperBound...]
        guard let slash = rest.firstIndex(of: "/") else { return "/" }
        return String(rest[slash...])
    }

    /// The relay answers a request; its answer to an intact or a damaged upload is checked.
    private func deliver(_ request: RelayRequest, damaged: Bool, from d: Int, to hub: Int) async -> RelayResponse {
        let relay = relays[hub]!
        let response = await relay.service.handle(request)
        if Simulation.printsSteps {
            let sent = (try? SyncBundle.decode(request.body)).map { "\($0.changes.map { "\($0.replica.raw.hex.prefix(8)):\($0.startSeq)-\($0.endSeq)" }) v=\($0.senderVersion)" } ?? ""
            let got = (try? SyncBundle.decode(response.body)).map { "\($0.changes.map { "\($0.replica.raw.hex.prefix(8)):\($0.startSeq)-\($0.endSeq)" }) v=\($0.senderVersion)" } ?? ""
            print("  relay \(request.method) \(request.path)\(request.headers[RelayProtocol.againHeader.lowercased()] == "1" ? " AGAIN" : "") from d\(d): \(sent) -> \(response.status) \(response.headers) \(got)")
        }
        if request.method == "POST" {
            if damaged, response.status == 200 {
                violation("relay: a damaged upload from device \(d) was accepted")
            } else if damaged {
                stats.corruptRejected += 1
            } else if response.status != 200 {
                violation("relay: an intact request from device \(d) was refused (\(response.status)): \(String(decoding: response.body, as: UTF8.self))")
            }
            if response.status == 200, (response.headers[RelayProtocol.storedHeader] ?? "0") != "0" {
                noteStateChange()
                trace.add(elapsed, d, .relayStored, Int64(hub), Int64(response.headers[RelayProtocol.storedHeader].flatMap(Int.init) ?? 0))
            }
        }
        return response
    }

    /// Delivers the delayed requests and the folder copies whose time has come.
    func deliverDue(all: Bool = false) async {
        if !inFlight.isEmpty {
            let due = inFlight.filter { all || $0.deliverAt <= clocks.now }.sorted { ($0.deliverAt, $0.order) < ($1.deliverAt, $1.order) }
            if !due.isEmpty {
                inFlight.removeAll { all || $0.deliverAt <= clocks.now }
                for item in due { _ = await deliver(item.request, damaged: item.damaged, from: item.device, to: item.hub) }
            }
        }
        for (hub, folder) in folders.sorted(by: { $0.key < $1.key }) {
            if folder.deliverDue(now: clocks.now, canReceive: { self.links[$0][hub].inboundUp }, all: all) { noteStateChange() }
        }
    }

    // MARK: Partitions

    func setLink(_ d: Int, hub: Int, direction: Scenario.Direction, cut: Bool) {
        var link = links[d][hub]
        let wasOutboundUp = link.outboundUp
        let delta = cut ? 1 : -1
        if direction != .inbound { link.outboundCuts = max(0, link.outboundCuts + delta) }
        if direction != .outbound { link.inboundCuts = max(0, link.inboundCuts + delta) }
        links[d][hub] = link
        // Files written while cut off now travel.
        if !wasOutboundUp, link.outboundUp, let folder = folders[hub] { folder.flush(device: d, world: self) }
    }

    // MARK: Crashes and reinstalls

    /// The device crashes and restarts: its store is closed and opened again on its database, and
    /// everything it had committed must still be there.
    func crash(_ d: Int) {
        let device = devices[d]
        stats.crashes += 1
        do {
            let before = try device.store.notebook
            try? device.store.close()
            device.store = try NoteStore.open(device.database, options: storeOptions(d))
            device.transports = [:]
            device.notes = nil
            let after = try device.store.notebook
            if after.replicaID != before.replicaID || after.versionVector != before.versionVector || after.digest() != before.digest() {
                violation("device \(d): after a restart the store differs from before the crash")
            }
            if Set(after.pendingChanges) != Set(before.pendingChanges) {
                violation("device \(d): after a restart \(after.pendingCount) changes wait, not the \(before.pendingCount) that waited before")
            }
            try checkAfterStep(device, notes: [], all: true)
        } catch {
            violation("device \(d): restart failed: \(error)")
        }
        trace.add(elapsed, d, .crash)
    }

    /// The power goes at one of the first few commits (perhaps the first) of a sync or an edit;
    /// the device restarts. What the restart finds must be what was committed before the cut,
    /// consistent (the restart's checks), and equal to what the store held in memory after the
    /// failed commit (a failed transaction leaves no trace in memory either).
    func crashAtCommit(_ d: Int, hub: Int, edit kind: EditKind?, payload: UInt64) async {
        var choice = SimRandom(seed: payload, salt: 11)
        let store = devices[d].store
        let cut = store.cutPower(afterCommits: choice.below(4))
        cuts[d] = cut
        if let kind {
            edit(d, kind, payload: payload)
        } else if let hub = hubs(of: d, hub).first {
            await sync(d, hub: hub, crash: false)
        }
        cuts[d] = nil
        store.restorePower(cut)
        if cut.happened {
            stats.commitsCut += 1
            crash(d)
        }
    }

    /// The device is wiped and set up again from nothing: a new empty store with a new replica
    /// id, and an empty copy of each shared folder. Its edits that never left it are gone; the
    /// reference forgets exactly those.
    func reinstall(_ d: Int) async {
        stats.reinstalls += 1
        await replaceStore(of: d) { device in
            let id = ReplicaID.random(using: &eventRandom)
            device.database = try InMemoryDatabase()
            let store = try NoteStore.open(device.database, options: storeOptions(d), replicaID: id)
            // Set up again, it joins the space again (a new signing key, introduced by its first units).
            if let spaceKey {
                try store.enterSpace(key: spaceKey, origin: "simulation",
                                     signingSeed: (0 ..< 4).flatMap { _ in withUnsafeBytes(of: eventRandom.next()) { Array($0) } })
            }
            return store
        }
        if spaceKey != nil { try? introduceDevices() }
        trace.add(elapsed, d, .reinstall, Int64(stats.forgottenOperations))
    }

    /// The device's database is replaced by a copy of another device's (the most natural way to
    /// set up a second laptop, or a backup restored from another machine): what the device had
    /// made and never passed on is gone, and the copy must move to a fresh replica identity
    /// before it writes, or two devices hand out the same seqs.
    func copyReplica(_ d: Int, from source: Int) async {
        stats.copies += 1
        if Simulation.printsSteps { print("t=\(elapsed) COPY d\(source) over d\(d)") }
        let before = devices[source].replicaID
        await replaceStore(of: d) { device in
            device.database = try InMemoryDatabase(copying: devices[source].database, label: "device \(d) copy \(device.incarnation)")
            let store = try NoteStore.open(device.database, options: storeOptions(d))
            if store.replicaID == before { violation("device \(d): a copy of device \(source)'s database kept its replica id \(before)") }
            return store
        }
        if spaceKey != nil { try? introduceDevices() }
        trace.add(elapsed, d, .copy, Int64(source))
    }

    /// A cloned disk: a copy of the device's database that keeps its file identity (without a seq
    /// mark), which no check at open can see. The device types a word, then it and the clone each
    /// type another right after it: the same seqs at the same timestamps (typing that continues a
    /// run takes the timestamp after the character it follows), other characters. The clone's
    /// change reaches the device (and nothing else: the clone is thrown away); the store must
    /// refuse it as a fork and move to a fresh identity, never take it for a duplicate.
    func cloneTypesOn(_ d: Int, payload: UInt64) {
        guard spaceKey == nil else { return }
        let device = devices[d]
        var rng = SimRandom(seed: payload)
        do {
            guard try mayEditBesideForks(d) else {
                stats.editsHeldBackByForks += 1
                return
            }
            let notes = try currentNotes(device)
            guard !notes.isEmpty else { return }
            let note = notes[rng.below(notes.count)]
            let first = Words.all[rng.below(Words.all.count)]
            let offset = min(note.bodyLength, rng.below(note.bodyLength + 1))
            try typeOn(device, note: note.id, at: offset, first, lengthBefore: note.bodyLength)
            let me = device.replicaID
            let copy = try InMemoryDatabase(copying: device.database, label: device.database.label)
            let clone = try NoteStore.open(copy, options: storeOptions(d))
            defer { try? clone.close() }
            guard clone.replicaID == me else { return violation("device \(d): a clone that kept the file identity moved to a new replica id at open") }
            // The device's word and the clone's differ, the clone's no longer (seqs past the
            // device's own are refused for that alone, before any comparison).
            let mine = Words.all[rng.below(Words.all.count)]
            let candidates = Words.all.filter { $0 != mine && $0.unicodeScalars.count <= mine.unicodeScalars.count }
            guard !candidates.isEmpty else { return }
            let theirs = candidates[rng.below(candidates.count)]
            let end = offset + first.unicodeScalars.count
            let version = try clone.versionVector
            try clone.insertText(note.id, at: end, theirs)
            let forked = try clone.changes(since: version)
            try typeOn(device, note: note.id, at: end, mine, lengthBefore: note.bodyLength + first.unicodeScalars.count)
            let own = try device.store.changes(since: version)
            if forked.first?.timestamp == own.first(where: { $0.replica == me })?.timestamp { stats.characterForks += 1 }
            stats.clones += 1
            let report = try AuditedReplica(device.store).integrate(forked)
            if device.store.replicaID == me {
                violation("device \(d): a change in its own name that a clone wrote differently at the same seqs (\"\(theirs)\" for \"\(mine)\") was taken in (\(report.applied) applied, \(report.duplicates) duplicate): the fork went unseen")
            } else if report.forksRepaired != 1 {
                violation("device \(d): a clone's fork of its identity was seen but not repaired (\(report))")
            } else {
                // Repaired: the clone's word is an edit that stays, under the old identity; the
                // device's own from the fork on are its new identity's (the re-issue).
                let reissued = try followIdentity(device, before: me)
                guard reissued.contains(where: { $0.replica == me }) else { return violation("device \(d): a repaired fork left no re-issue record") }
                for change in forked { reference.record(change, branch: device.branch) }
            }
            noteStateChange()
            try checkAfterStep(device, notes: [note.id], all: report.forksRepaired > 0)
        } catch {
            device.notes = nil
            violation("device \(d): typing on beside a clone failed: \(error)")
        }
        trace.add(elapsed, d, .clone, Int64(stats.characterForks))
    }

    /// When which changes wait changed, a store opened on the device's database (what a restart
    /// loads from the pending table) must find exactly the ones the store holds.
    func checkWaitingStored(_ device: SimDevice, before: Set<Change>, now waiting: Set<Change>) throws {
        guard waiting != before else { return }
        stats.waitingChanged += 1
        if waiting.count == before.count { stats.waitingSwapped += 1 }
        let reader = try NoteStore.open(device.database, options: storeOptions(device.index))
        defer { try? reader.close() }
        if let problem = Self.waitingDifference(stored: Set(try reader.pendingChanges), held: waiting) { violation("device \(device.index): \(problem)") }
    }

    /// The changes a peer has and the device lacks reach it in a shuffled order, one to three at a
    /// time, through the store's batch path (as a folder's files arriving in any order do): some
    /// wait, a later batch releases them and queues others. Everything has arrived at the end.
    func deliverOutOfOrder(_ d: Int, payload: UInt64) {
        guard spaceKey == nil else { return }
        let device = devices[d]
        var rng = SimRandom(seed: payload)
        let peers = liveDevices.filter { $0.index != d }
        guard !peers.isEmpty else { return }
        let peer = peers[rng.below(peers.count)]
        let identity = device.replicaID
        do {
            let before = try device.store.versionVector
            let reissuesBefore = try device.store.notebook.reissues.count
            var changes = try peer.store.changes(since: before).filter { $0.replica != device.replicaID }
            guard changes.count > 1 else { return }
            for i in stride(from: changes.count - 1, to: 0, by: -1) { changes.swapAt(i, rng.below(i + 1)) }
            let audited = AuditedReplica(device.store)
            var next = 0
            while next < changes.count {
                let batch = Array(changes[next ..< min(next + 1 + rng.below(3), changes.count)])
                next += batch.count
                let waitingBefore = Set(try device.store.pendingChanges)
                _ = try audited.integrate(batch: batch)
                try checkWaitingStored(device, before: waitingBefore, now: Set(try device.store.pendingChanges))
                if let problem = Self.droppedWaitingChange(before: waitingBefore, try device.store.notebook) { violation("device \(d): \(problem)") }
            }
            try audited.integrationFinished()
            for problem in audited.problems { violation("device \(d): \(problem)") }
            try followIdentity(device, before: identity)
            stats.outOfOrder += 1
            let notebook = try device.store.notebook
            let applied = notebook.changes(since: before)
            trace.add(elapsed, d, .outOfOrder, Int64(peer.index), Int64(changes.count), Int64(notebook.pendingCount))
            noteStateChange()
            let touched = Set(applied.flatMap { $0.operations.compactMap(\.note) })
            try checkAfterStep(device, notes: touched.sorted(), tagsNamed: Self.tagsNamed(applied),
                               all: Self.mayHaveWithdrawn(notebook, since: before, reissuesBefore: reissuesBefore))
        } catch {
            device.notes = nil
            violation("device \(d): changes delivered out of order failed: \(error)")
        }
    }

    /// One write of one operation (a note's pin flipped), recorded and checked as an edit is.
    private func writeOnce(_ d: Int) {
        let device = devices[d]
        do {
            guard try mayEditBesideForks(d) else {
                stats.editsHeldBackByForks += 1
                return
            }
            guard let note = try currentNotes(device).first else { return }
            let before = try device.store.versionVector
            try device.store.setPinned(note.id, !note.pinned)
            let produced = try device.store.changes(since: before)
            for change in produced where change.replica == device.replicaID {
                device.lastOwnSeq = change.endSeq
                reference.record(change, branch: device.branch)
            }
            try pushUndo(device, from: before)
            stats.edits += 1
            trace.add(elapsed, d, .edit, Int64(Trace.code(EditKind.pin)), Int64(try device.store.versionVector[device.replicaID]), Int64(produced.count))
            noteStateChange()
            try checkIntent(.wrote(note.id, .pinned, .bool(!note.pinned)), device, produced: produced)
            try checkAfterStep(device, notes: [note.id])
        } catch {
            device.notes = nil
            violation("device \(d): a pin before a restore failed: \(error)")
        }
    }

    /// Follows the store's undo stack: each editing call that wrote something is one entry (a
    /// second process typing `calls` words made one per word, each as long).
    private func pushUndo(_ device: SimDevice, from before: VersionVector, calls: Int = 1) throws {
        let me = device.replicaID
        let first = before[me] + 1
        let last = try device.store.versionVector[me]
        guard last >= first else { return }
        let each = (last - first + 1) / UInt64(max(1, calls))
        guard calls > 1, each * UInt64(calls) == last - first + 1 else { return device.undoLog.push(first ... last, by: me) }
        for i in 0 ..< UInt64(calls) { device.undoLog.push(first + i * each ... first + (i + 1) * each - 1, by: me) }
    }

    /// Records a device's own new changes in the reference, each of which must start right after
    /// the device's last seq.
    private func recordOwn(_ produced: [Change], of device: SimDevice) {
        for change in produced where change.replica == device.replicaID {
            if let last = device.lastOwnSeq, change.startSeq != last &+ 1 {
                violation("device \(device.index): a new change starts at seq \(change.startSeq), not right after its last one (\(last))")
            }
            device.lastOwnSeq = change.endSeq
            reference.record(change, branch: device.branch)
        }
    }

    /// Types a word at a place through the device's store, checked as a typing edit is.
    private func typeOn(_ device: SimDevice, note: NoteID, at offset: Int, _ word: String, lengthBefore: Int) throws {
        let before = try device.store.versionVector
        try device.store.insertText(note, at: offset, word)
        let produced = try device.store.changes(since: before)
        recordOwn(produced, of: device)
        try pushUndo(device, from: before)
        stats.edits += 1
        trace.add(elapsed, device.index, .edit, Int64(Trace.code(EditKind.type)), Int64(try device.store.versionVector[device.replicaID]), Int64(produced.count))
        noteStateChange()
        try checkIntent(.typed(note, at: offset, count: word.unicodeScalars.count, firstSeq: before[device.replicaID] + 1, lengthBefore: lengthBefore),
                        device, produced: produced)
        try checkAfterStep(device, notes: [note])
    }

    /// A backup of the device's database: a byte copy under the same label (the file's identity
    /// is the same when it is copied back over it).
    func takeBackup(_ d: Int) {
        let device = devices[d]
        do {
            let replica = device.replicaID
            device.backup = (try InMemoryDatabase(copying: device.database, label: device.database.label), replica,
                             try device.store.versionVector[replica])
        } catch {
            violation("device \(d): taking a backup of its database failed: \(error)")
        }
    }

    /// The device's backup is copied back over its database. What it made since and never passed
    /// on is gone; the database holds its identity's seqs up to the backup, and if that identity
    /// went further anywhere it must move to a fresh id, or its next edits repeat those seqs.
    func restoreBackup(_ d: Int) async {
        let device = devices[d]
        guard let backup = device.backup, backup.replica == device.replicaID else { return }
        stats.restores += 1
        let before = device.replicaID
        let heldNow = (try? device.store.versionVector[before]) ?? 0
        // A backup of everything the identity made goes on as it: nothing to forget.
        await replaceStore(of: d, alsoKeeping: heldNow > backup.held ? (backup.held > 0 ? [1 ... backup.held] : []) : nil) { device in
            try device.database.restore(from: backup.database)  // the store was closed first
            let store = try NoteStore.open(device.database, options: storeOptions(d))
            if store.replicaID == before, heldNow > backup.held {
                violation("device \(d): restored from a backup over itself (its identity's seqs went to \(heldNow), the backup holds \(backup.held)), it kept replica id \(before)")
            }
            return store
        }
        trace.add(elapsed, d, .restore, Int64(backup.held), Int64(heldNow))
    }

    /// The seqs of `replica` that exist beyond its device: applied or waiting in `holders`' stores,
    /// at the relays, or in `carried` bundle bytes (in flight, in folders).
    private func seqsHeld(of replica: ReplicaID, by holders: [SimDevice], carried: [[UInt8]],
                          alike owner: Notebook? = nil) async throws -> [ClosedRange<UInt64>] {
        // Up to what the owner holds, a seq counts only where the same operation is held: after a
        // fork a relay or a device may hold the other branch's at the seq (the owner's never left).
        let owned = owner?.versionVector[replica] ?? 0
        var kept: [ClosedRange<UInt64>] = []
        func add(_ range: ClosedRange<UInt64>) {
            guard range.upperBound > owned else { return }
            kept.append(max(range.lowerBound, owned + 1) ... range.upperBound)
        }
        func add(_ change: Change) {
            add(change.startSeq ... change.endSeq)
            if let owner { kept += owner.seqsHeldAlike(in: change) }
        }
        for other in holders {
            let notebook = try other.store.notebook
            if notebook.versionVector[replica] > 0 { add(1 ... notebook.versionVector[replica]) }
            for change in notebook.pendingChanges where change.replica == replica { add(change.startSeq ... change.endSeq) }
            if let owner { kept += owner.seqsHeldAlike(of: replica, in: notebook) }
        }
        for (_, relay) in relays.sorted(by: { $0.key < $1.key }) {
            let status = try await relay.storage.status(space: SimRelayHub.space)
            guard status.version[replica] > 0 else { continue }
            add(1 ... status.version[replica])
            guard owner != nil, owned > 0 else { continue }
            // What the relay holds of the replica's seqs the owner has, its chain's and those sent again.
            var others = status.version
            others[replica] = 0
            while true {
                let page = try await relay.storage.page(space: SimRelayHub.space, after: others, limits: RelayPageLimits(maxChanges: 10_000, maxBytes: .max),
                                                        needsPayload: { _ in true })
                for stored in page.records where stored.record.author == replica {
                    // A sealed unit holds what its header says (an encrypted space's relay forks nothing).
                    if stored.record.sealed { kept.append(stored.record.startSeq ... stored.record.endSeq) }
                    for change in stored.record.sealed ? [] : (try? ChangeCodec.decode(stored.record.payload)) ?? [] { add(change) }
                    others[replica] = max(others[replica], stored.record.endSeq)
                }
                if !page.more || page.records.isEmpty || others[replica] >= status.version[replica] { break }
            }
        }
        for bytes in carried {
            guard let bundle = try? SyncBundle.decode(bytes) else { continue }
            for change in bundle.changes where change.replica == replica { add(change) }
            // A sealed unit holds what its header says, unless a member forged it.
            for unit in bundle.sealedUnits where unit.author == replica && !forgedUnits.contains(unit.bytes) {
                kept.append(unit.startSeq ... unit.endSeq)
            }
        }
        return kept
    }

    /// Where the relay's records of an identity go on from seqs the device holds other operations
    /// at (a fork not yet repaired: the device took the other branch there), the seqs from there
    /// to what the relay holds: the device cannot take them until one branch is re-issued.
    private func otherBranchAtRelay(_ hub: Int, relayHeld: VersionVector, device notebook: Notebook) async throws -> [OpIDRange] {
        guard let relay = relays[hub] else { return [] }
        var ranges: [OpIDRange] = []
        for entry in relayHeld.sortedEntries where entry.seq > notebook.versionVector[entry.replica] {
            let held = notebook.versionVector[entry.replica]
            guard held > 0 else { continue }
            var after = relayHeld
            after[entry.replica] = held
            let page = try await relay.storage.page(space: SimRelayHub.space, after: after, limits: RelayPageLimits(maxChanges: 10_000, maxBytes: .max),
                                                    needsPayload: { _ in true })
            let diverges = page.records.contains { stored in
                guard stored.record.author == entry.replica, !stored.record.sealed, stored.record.startSeq <= held else { return false }
                return ((try? ChangeCodec.decode(stored.record.payload)) ?? []).contains { change in
                    guard change.startSeq <= held else { return false }
                    let alike = notebook.seqsHeldAlike(in: change)
                    return Self.covers(alike.map { OpIDRange(replica: change.replica, seq: $0.lowerBound, count: UInt64($0.count)) },
                                       change.replica, from: change.startSeq, through: min(change.endSeq, held)) == false
                }
            }
            if diverges { ranges.append(OpIDRange(replica: entry.replica, seq: held + 1, count: entry.seq - held)) }
        }
        return ranges
    }

    /// Tells the reference that `replica`'s operations outside `kept` are legitimately gone.
    private func forget(_ replica: ReplicaID, branch: Int, keeping kept: [ClosedRange<UInt64>]) {
        let forgottenBefore = reference.forgottenOperations
        reference.forget(replica: replica, branch: branch, keeping: kept)
        stats.forgottenOperations += reference.forgottenOperations - forgottenBefore
    }

    /// Forgets what the device made that never left it, then puts the store `open` makes in
    /// place of its own (its folder views and transports start over).
    /// - Parameter alsoKeeping: seqs of the old identity the new store holds itself; nil when the
    ///   store goes on as the same identity with everything it made (nothing is forgotten).
    /// - Parameter branch: which database of its identity the new store is (0 unless it is a
    ///   copy that kept another device's identity).
    func replaceStore(of d: Int, alsoKeeping: [ClosedRange<UInt64>]? = [], branch: Int = 0, _ open: (SimDevice) throws -> NoteStore) async {
        let device = devices[d]
        let old = device.replicaID
        do {
            var carried: [[UInt8]] = inFlight.map(\.request.body)
            for folder in folders.values { carried += folder.everyBundleBytes(excluding: d) }
            let kept = try await seqsHeld(of: old, by: devices.filter { $0.index != d }, carried: carried, alike: try device.store.notebook)
            if let alsoKeeping {
                forget(old, branch: device.branch, keeping: kept + alsoKeeping)
                // What it wrote as identities it moved away from at a sync went nowhere else either.
                for retired in device.retired {
                    forget(retired, branch: device.branch, keeping: try await seqsHeld(of: retired, by: devices.filter { $0.index != d }, carried: carried))
                }
            }
            device.retired = []
            device.backup = nil
            device.incarnation += 1
            try? device.store.close()
            device.store = try open(device)
            device.transports = [:]
            let clockState = clocks
            for folder in folders.values where folder.fileSystems[d] != nil {
                try folder.reset(device: d, clock: { clockState.now }, world: self)
            }
            device.lastVersion = VersionVector()
            device.lastOwnSeq = nil
            device.notes = nil
            device.peerRecords = [:]
            // A store under an identity no device had starts with an empty undo stack; one that kept
            // an identity (a restore over itself, a copy before it moves on) has a stack not followed.
            let fresh = device.replicaID != old && !devices.contains { $0 !== device && $0.replicaID == device.replicaID }
            device.undoLog = UndoLog(replica: device.replicaID, known: fresh)
            device.editor = nil
            device.branch = branch
            device.ownReissues = try device.store.reissues().filter(\.own).count
            noteStateChange()
        } catch {
            violation("device \(d): replacing its database failed: \(error)")
        }
    }

    /// The device stops for good: it never syncs again, what it kept for a folder while cut off
    /// is gone, and every file it wrote in a shared folder rots. Its edits survive where they
    /// already reached another device or a relay (or are on their way to one); the reference
    /// forgets the rest.
    func die(_ d: Int) async {
        let device = devices[d]
        let replica = device.replicaID
        var kept: [ClosedRange<UInt64>] = []
        do {
            kept = try await seqsHeld(of: replica, by: liveDevices.filter { $0.index != d }, carried: inFlight.map(\.request.body), alike: try device.store.notebook)
        } catch {
            violation("device \(d): cannot account for its edits at its death: \(error)")
        }
        forget(replica, branch: device.branch, keeping: kept)
        for retired in device.retired {
            forget(retired, branch: device.branch, keeping: (try? await seqsHeld(of: retired, by: liveDevices.filter { $0.index != d }, carried: inFlight.map(\.request.body))) ?? [])
        }
        dead.insert(d)
        stats.deaths += 1
        for folder in folders.values where folder.members.contains(d) {
            folder.dropUnsent(device: d)
            for writer in [replica] + device.retired { folder.rot(writer: writer, world: self) }
        }
        noteStateChange()
        trace.add(elapsed, d, .death, Int64(stats.forgottenOperations))
    }

    // MARK: Hostile participants

    /// A file from a forger appears in a shared folder: one whose name lies about what it holds,
    /// holds one author's changes under another's name, is garbage, or is larger than a reader
    /// accepts. Every device must skip it and none may count it as holding anything.
    func forge(hub: Int, payload: UInt64) {
        guard let folder = folders[hub] else { return }
        var rng = SimRandom(seed: payload)
        let forger = ReplicaID.random(using: &rng)
        let genuine = folder.cloudFiles.compactMap { item -> SyncBundle? in try? SyncBundle.decode(item.bytes) }
            .filter { !$0.changes.isEmpty }
        let authors = liveDevices.map(\.replicaID)
        let kind = rng.below(4)
        var name: String
        var bytes: [UInt8]
        switch (kind, genuine.isEmpty) {
        case (0, false), (1, false):
            // A real bundle's changes, signed by the forger: under a name that claims more than it
            // holds (0), or another author's name (1).
            let source = genuine[rng.below(genuine.count)]
            let author = source.changes[0].replica
            let changes = source.changes.filter { $0.replica == author }
            let first = changes.map(\.startSeq).min()!
            let last = changes.map(\.endSeq).max()!
            bytes = SyncBundle(sender: forger, senderVersion: source.senderVersion, changes: changes).encoded()
            if kind == 0 {
                name = FolderTransport.fileName(author: author, first: first, last: last + 1 + UInt64(rng.below(1000)))
            } else {
                let other = authors.filter { $0 != author }
                name = FolderTransport.fileName(author: other.isEmpty ? ReplicaID.random(using: &rng) : other[rng.below(other.count)],
                                                first: first, last: last)
            }
        case (3, _):
            // Larger than a reader accepts: never read, never trusted.
            bytes = [UInt8](repeating: 0x41, count: SimFolderHub.maxFileBytes + 1 + rng.below(1024))
            name = FolderTransport.fileName(author: authors.isEmpty ? forger : authors[rng.below(authors.count)], first: 1, last: 1_000_000)
        default:
            // Garbage under a name that claims a device's first million operations.
            bytes = (0 ..< (16 + rng.below(2000))).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            name = FolderTransport.fileName(author: authors.isEmpty ? forger : authors[rng.below(authors.count)], first: 1, last: 1_000_000)
        }
        folder.publishForeign("\(SimFolderHub.root)/\(forger)/\(name)", bytes, world: self)
        stats.forgeries += 1
        trace.add(elapsed, -1, .forgery, Int64(hub), Int64(kind))
    }

    /// Every device learns every other's signing key, as devices that join a space compare keys
    /// (at the start, and when one is set up again): trust on first use is then never first met
    /// with a forgery (Docs/Security.md says what happens when it is).
    func introduceDevices() throws {
        for device in devices {
            for other in devices where other !== device {
                guard let sealer = try other.store.spaceSealer() else { continue }
                try device.store.pinMember(other.replicaID, publicKey: sealer.signer.publicKey)
            }
        }
    }

    /// A member device (it holds the space key) forges: it seals a change in another device's
    /// name (the next seq of that device, a title no device writes) with its own signing key, or
    /// with the victim's public keys in the header and no tag, and hands it to each hub it is
    /// attached to, a relay upload and a file in its folder. The relay must refuse the upload
    /// (another key for a known author, or a signature that does not verify); readers must skip the file; no
    /// device may apply the change, which the end-of-run check would see as an edit nobody made.
    func forgeAsMember(_ d: Int, payload: UInt64) async {
        guard spaceKey != nil, let sealer = try? devices[d].store.spaceSealer() else { return }
        var rng = SimRandom(seed: payload)
        let victims = devices.indices.filter { $0 != d }
        guard !victims.isEmpty else { return }
        let victim = devices[victims[rng.below(victims.count)]]
        guard let version = try? victim.store.versionVector, let note = try? victim.store.notebook.noteIDs.first else { return }
        let change = Change(replica: victim.replicaID, startSeq: version[victim.replicaID] + 1, timestamp: Timestamp(milliseconds: clocks.now),
                            dependencies: VersionVector(), operations: [.setNoteField(note: note, field: .title, value: .string("forged by a member"))])
        var encoder = ChangeCodec.Encoder()
        // Half seal with the forger's own key (its id check refuses them), half name the victim's
        // public keys and carry no tag, so that only the signature refuses them.
        let unit: SealedUnit
        if rng.below(2) == 0, let victimSealer = try? victim.store.spaceSealer(),
           let claimed = try? sealer.forge(author: victim.replicaID, changes: [change], claimingKey: victimSealer.signer.publicKey,
                                           agreementKey: victimSealer.agreementPublicKey, encoder: &encoder) {
            unit = claimed
        } else {
            guard let own = try? sealer.seal(author: victim.replicaID, changes: [change], encoder: &encoder) else { return }
            unit = own
        }
        var claimed = version
        claimed[victim.replicaID] = change.endSeq
        let bundle = SyncBundle(sender: devices[d].replicaID, senderVersion: claimed, sealed: [unit])
        stats.memberForgeries += 1
        forgedUnits.insert(unit.bytes)
        for hub in ScheduleGenerator.hubIndexes(of: d, in: scenario) {
            if let relay = relays[hub] {
                let response = await relay.service.handle(RelayRequest(method: "POST", path: RelayProtocol.syncPath(space: SimRelayHub.space),
                                                                       headers: ["Authorization": "Bearer \(SimRelayHub.token)"], body: bundle.encoded()))
                // Refused, or skipped unread when the relay holds those seqs already; never stored.
                if response.status == 400 {
                    stats.forgeryRefusals += 1
                } else if response.status != 200 || response.headers[RelayProtocol.storedHeader] != "0" {
                    violation("relay \(scenario.hubs[hub].name): a unit forged by device \(d) in \(victim.replicaID)'s name got \(response.status), stored \(response.headers[RelayProtocol.storedHeader] ?? "?")")
                }
            } else if let folder = folders[hub] {
                // In the folder the forger says what it really has (what a peer records of it).
                let name = FolderTransport.fileName(author: victim.replicaID, first: change.startSeq, last: change.endSeq)
                let honest = (try? devices[d].store.versionVector) ?? VersionVector()
                folder.publishForeign("\(SimFolderHub.root)/\(devices[d].replicaID)/\(name)",
                                      SyncBundle(sender: devices[d].replicaID, senderVersion: honest, sealed: [unit]).encoded(), world: self)
            }
        }
        trace.add(elapsed, d, .forgery, -1, 10)
    }

    /// A hostile request reaches a relay: without a token, with a wrong one or another space's,
    /// with a body that is not a bundle, is damaged or too large, or holds changes the relay can
    /// tell are wrong. The relay must answer with the status the protocol gives for each, and
    /// store nothing.
    func intrude(hub: Int, payload: UInt64) async {
        guard let relay = relays[hub] else { return }
        var rng = SimRandom(seed: payload)
        let before = try? await relay.storage.status(space: SimRelayHub.space).version
        let author = ReplicaID.random(using: &rng)
        let note = NoteID.random(using: &rng)
        func change(startSeq: UInt64) -> Change {
            Change(replica: author, startSeq: startSeq, timestamp: Timestamp(milliseconds: clocks.now), dependencies: VersionVector(),
                   operations: [.setNoteField(note: note, field: .title, value: .string("intruder"))])
        }
        var version = VersionVector()
        version[author] = 9
        let valid = SyncBundle(sender: author, senderVersion: version, changes: [change(startSeq: 9)]).encoded()
        let kind = rng.below(9)
        var headers = ["Authorization": "Bearer \(SimRelayHub.token)"]
        var body = valid
        var method = "POST"
        var path = RelayProtocol.syncPath(space: SimRelayHub.space)
        let expected: Int
        switch kind {
        case 0: headers = [:]; expected = 401
        case 1: headers["Authorization"] = "Bearer not-\(SimRelayHub.token)"; expected = 401
        case 2: headers["Authorization"] = "Bearer \(SimRelayHub.otherToken)"; expected = 403
        case 3: body = Array("GET / HTTP/1.1".utf8); expected = 400
        case 4: body[body.count / 2] ^= 0x21; expected = 400
        case 5: body = [UInt8](repeating: 0, count: SimRelayHub.maxRequestBytes + 1); expected = 413
        case 6:
            // A change past what its own sender says it has.
            var short = VersionVector()
            short[author] = 3
            body = SyncBundle(sender: author, senderVersion: short, changes: [change(startSeq: 9)]).encoded()
            expected = 400
        case 7:
            // Well formed and authorized, but seqs 1-8 of its author are nowhere: storing it
            // would leave a gap that no client ever fills (each uploads only past the relay's vector).
            expected = 400
        default:
            // A status request for another space with this space's token.
            method = "GET"
            path = RelayProtocol.statusPath(space: SimRelayHub.otherSpace)
            body = []
            expected = 403
        }
        let response = await relay.service.handle(RelayRequest(method: method, path: path, headers: headers, body: body))
        stats.intrusions += 1
        if response.status != expected {
            violation("relay \(scenario.hubs[hub].name): a hostile request (kind \(kind)) got \(response.status), not \(expected)")
        }
        let after = try? await relay.storage.status(space: SimRelayHub.space).version
        if before != after { violation("relay \(scenario.hubs[hub].name): a hostile request (kind \(kind)) changed what the space holds") }
        trace.add(elapsed, -1, .intrusion, Int64(hub), Int64(kind), Int64(response.status))
    }

    // MARK: Checks

    private func noteStateChange() {
        lastStateChange = elapsed
        stateChanges += 1
    }

    /// Safety after a step: the version vector only grew, and the materialized rows of the notes
    /// the step touched, and of every note in a tag it named (every note when `all`), equal the
    /// CRDT state.
    ///
    /// Why those notes are enough: a store re-materializes, in the transaction of an edit or a
    /// batch, exactly the notes its changes name and every note of a tag they rename; no other row
    /// moves. The step's changes are `changes(since:)` the version vector before it, so every note
    /// a step could have re-materialized is compared: the notes they name, and the notes the CRDT
    /// has in each tag they name (`tagsNamed`, by its key). A note a store re-materialized outside
    /// those would have to be one it wrongly holds in the tag, which the comparison at the end
    /// finds (its tag list). Crashes and the end compare every note (`all`).
    ///
    /// The rows read here also bring the device's note list (`SimDevice.notes`) up to date.
    func checkAfterStep(_ device: SimDevice, notes touched: [NoteID], tagsNamed: Set<String> = [], all: Bool = false) throws {
        let notebook = try device.store.notebook
        let version = notebook.versionVector
        if !device.lastVersion.isCovered(by: version) {
            // Only where a re-issue took seqs back (two copies wrote them: one copy's went to its new identity).
            // Or where what went back waits again, on operations a re-issue took out of the state
            // it was built on (the rebuild after a re-issue replays it; it is applied when the
            // branch that stays brings those seqs, and waits at the end otherwise).
            let reissues = notebook.reissues
            let waiting = reissues.isEmpty ? [] : (notebook.pendingChanges + notebook.quarantinedChanges.map(\.change)).map(\.idRange)
            for entry in device.lastVersion.sortedEntries where version[entry.replica] < entry.seq {
                let next = version[entry.replica] + 1
                if !reissues.contains(where: { $0.original.replica == entry.replica && $0.original.seq <= next && next < $0.original.seq + $0.original.count })
                    && !Self.covers(waiting, entry.replica, from: next, through: entry.seq) {
                    violation("device \(device.index): the version vector went back from \(device.lastVersion) to \(version)")
                    break
                }
            }
        }
        device.lastVersion = version
        var notes = touched
        if !tagsNamed.isEmpty {
            // The notes in those tags, by the tags' names as the CRDT gives them in a note's tags.
            let names = Set(notebook.tags.filter { tagsNamed.contains($0.key) }.map(\.name))
            let already = Set(touched)
            for id in notebook.noteIDs where !already.contains(id) {
                if let fields = notebook.noteFields(id), fields.tags.contains(where: names.contains) { notes.append(id) }
            }
        }
        if all {
            try compareAll(device, notebook)
        } else if !notes.isEmpty {
            // The rows of every touched note, read in one transaction.
            let stored: [StoredNote?]
            do {
                stored = try device.store.notes(notes)
            } catch {
                device.notes = nil
                throw error
            }
            for (id, row) in zip(notes, stored) { compare(device, notebook, id, row) }
            // A person searches now and then (every fourth such step: the check re-reads all text):
            // the index is brought up to date here, so the next writes must record what they make
            // stale (at the end of a run alone, every row was still recorded as new).
            searchChecks &+= 1
            if searchChecks % 4 == 0 {
                for problem in try device.store.searchIndexProblems() { violation("device \(device.index): \(problem)") }
            }
        }
    }

    /// Whether a step may have taken operations out of the device's state (a re-issue it applied
    /// withdrew a branch it held, and the store rebuilt): the changes since the version before
    /// name only what was added, so the notes whose text went back are found by comparing all.
    static func mayHaveWithdrawn(_ notebook: Notebook, since before: VersionVector, reissuesBefore: Int) -> Bool {
        notebook.reissues.count != reissuesBefore || !before.isCovered(by: notebook.versionVector)
    }

    /// The keys of the tags whose name changes write (a store re-materializes every note in them).
    static func tagsNamed(_ changes: [Change]) -> Set<String> {
        var keys: Set<String> = []
        for change in changes {
            for op in change.operations {
                if case .setTagField(let key, .name, _) = op { keys.insert(key) }
            }
        }
        return keys
    }

    /// The device's materialized notes, sorted by identity: what `store.list(.all)` returns.
    ///
    /// Read with `list(.all)` when unknown, then kept up to date from the rows the safety check
    /// reads after every step (the rows of every note the step could have changed; see
    /// `checkAfterStep`), instead of listing every note again before every edit; it stays sorted
    /// as it is updated (`NoteList`), rather than being sorted again before every edit. A step whose
    /// check did not run to the end (an error) forgets the list. With `verifyNoteLists` on (tests),
    /// every use is compared with a fresh `list(.all)`.
    func currentNotes(_ device: SimDevice) throws -> [StoredNote] {
        if let sorted = device.notes?.sorted {
            if verifyNoteLists {
                let listed = try device.store.list(.all).sorted { $0.id < $1.id }
                if listed != sorted {
                    violation("device \(device.index): the note list kept from the checks differs from list(.all)")
                    return listed
                }
            }
            return sorted
        }
        let listed = NoteList(try device.store.list(.all))
        device.notes = listed
        return listed.sorted
    }

    /// The materialized row of one note (`stored`, as `note(_:)` reads it) against the CRDT.
    func compare(_ device: SimDevice, _ notebook: Notebook, _ id: NoteID, _ stored: StoredNote?) {
        if var row = stored {
            row.body = nil  // as list(.all) has it
            device.notes?.set(id, row)
        } else {
            device.notes?.set(id, nil)
        }
        if let problem = digestLedger.record(notebook, id) { violation("device \(device.index): \(problem)") }
        guard let note = notebook.noteFields(id), note.state != .deleted else {
            if stored != nil { violation("device \(device.index): note \(id) is deleted (or unknown) but still has a row") }
            return
        }
        guard let stored else {
            violation("device \(device.index): note \(id) has no materialized row")
            return
        }
        if let difference = Self.difference(stored, note, notebook.body(of: id) ?? RGAText()) {
            violation("device \(device.index): note \(id): the materialized \(difference) differs from the CRDT")
        }
    }

    func compareAll(_ device: SimDevice, _ notebook: Notebook) throws {
        device.notes = nil
        let rows = try device.store.list(.all, includeBody: true)
        device.notes = NoteList(rows.map { row in
            var row = row
            row.body = nil
            return row
        })
        let notes = notebook.noteIDs.compactMap { notebook.noteFields($0) }.filter { $0.state != .deleted }
        let byID = Dictionary(rows.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        if rows.count != notes.count {
            violation("device \(device.index): \(rows.count) materialized notes, \(notes.count) in the CRDT")
        }
        for note in notes {
            if let problem = digestLedger.record(notebook, note.id) { violation("device \(device.index): \(problem)") }
            guard let stored = byID[note.id] else {
                violation("device \(device.index): note \(note.id) has no materialized row")
                continue
            }
            if let difference = Self.difference(stored, note, notebook.body(of: note.id) ?? RGAText()) {
                violation("device \(device.index): note \(note.id): the materialized \(difference) differs from the CRDT")
            }
        }
        for problem in try Self.tagRowDifferences(device.store, notebook) { violation("device \(device.index): \(problem)") }
        if let problem = try Self.tombstoneDifference(device.store, notebook) { violation("device \(device.index): \(problem)") }
        // What search finds: the index brought up to date holds each stored note's title and body.
        for problem in try device.store.searchIndexProblems() { violation("device \(device.index): \(problem)") }
        // What another process reads without loading the replica: the digest and version vector
        // the writes stored, and each note's stored state.
        let reader = try NoteStore.open(device.database, options: storeOptions(device.index))
        defer { try? reader.close() }
        let status = try reader.status()
        if status.digest != notebook.digest() {
            violation("device \(device.index): the stored digest \(status.digest.prefix(12)) differs from the CRDT's \(notebook.digest().prefix(12))")
        }
        if status.versionVector != notebook.versionVector {
            violation("device \(device.index): the stored version vector \(status.versionVector) differs from the CRDT's \(notebook.versionVector)")
        }
        for (id, state) in try reader.storedNoteStates() {
            if let difference = notebook.noteStateDifference(id, state) {
                violation("device \(device.index): the stored state of note \(id) differs from the CRDT's: \(difference)")
            }
        }
    }

    /// What differs between a materialized row and the CRDT's note (its fields, `note.body`
    /// unused) and body: nil when nothing does. The body is compared scalar for scalar, without
    /// building the CRDT's text.
    static func difference(_ stored: StoredNote, _ note: Note, _ body: RGAText) -> String? {
        if stored.title != note.title { return "title" }
        if let text = stored.body, !body.spells(text) { return "body" }
        if stored.bodyLength != body.count { return "body length" }
        if stored.pinned != note.pinned { return "pinned flag" }
        if stored.archived != note.archived { return "archived flag" }
        if stored.color != note.color { return "color" }
        if stored.state != note.state { return "state" }
        if stored.tags != note.tags { return "tag list" }
        if stored.createdAt != note.createdAt { return "creation time" }
        if stored.updatedAt != note.updatedAt { return "update time" }
        if stored.hasConflicts != note.hasConflicts { return "conflict mark" }
        if stored.restoredByConcurrentEdit != note.restoredByConcurrentEdit { return "restored flag" }
        return nil
    }

    // MARK: Healing and the end

    /// Heals every partition, stops the faults, delivers what is in flight, lets every copy of
    /// every file arrive, then syncs every device with every hub, round after round, until a
    /// round changes nothing.
    func heal() async {
        faultsOn = false
        for d in 0 ..< scenario.devices where !dead.contains(d) {
            for hub in 0 ..< scenario.hubs.count {
                while !links[d][hub].outboundUp || !links[d][hub].inboundUp {
                    setLink(d, hub: hub, direction: .both, cut: false)
                }
            }
        }
        await deliverDue(all: true)
        settleFolders()
        await deliverDue(all: true)
        trace.add(elapsed, -1, .healAll)
        let maxRounds = 8 + 2 * scenario.devices
        for round in 0 ..< maxRounds {
            stats.healRounds = round + 1
            clocks.now += 1000
            settleFolders()
            await deliverDue(all: true)
            let changesBefore = stateChanges
            for d in 0 ..< scenario.devices where !dead.contains(d) {
                for hub in ScheduleGenerator.hubIndexes(of: d, in: scenario) {
                    eventRandom = SimRandom(seed: seed, salt: 1_000_000 &+ UInt64(round * 1000 + d * 10 + hub))
                    await sync(d, hub: hub, crash: false)
                }
            }
            if stateChanges == changesBefore { break }
        }
    }

    /// Moves the clock past the moment every copy of every file has arrived whole.
    private func settleFolders() {
        var settle = clocks.now
        for folder in folders.values { settle = max(settle, folder.settleTime(after: clocks.now)) }
        clocks.now = settle
    }

    /// After healing: every relay holds everything its devices have (they sent it all), and what
    /// each device recorded about its peers is no more than those peers have.
    func checkHubsAndPeers() async {
        var known: [ReplicaID: VersionVector] = [:]
        for device in liveDevices { known[device.replicaID] = try? device.store.versionVector }
        for (hub, relay) in relays.sorted(by: { $0.key < $1.key }) {
            var union = VersionVector()
            for member in scenario.members(ofHub: hub) where !dead.contains(member) {
                union.merge(known[devices[member].replicaID] ?? VersionVector())
            }
            guard let held = try? await relay.storage.status(space: SimRelayHub.space).version else {
                violation("relay \(scenario.hubs[hub].name): cannot read its status")
                continue
            }
            // Past what the devices have, a relay may hold only seqs that every device holds a
            // re-issue of (what a copy wrote before it re-issued it: the relay never learns).
            var beyond = false
            for entry in held.sortedEntries where entry.seq > union[entry.replica] {
                if !withdrawnEverywhere(entry.replica, from: union[entry.replica] + 1, through: entry.seq) { beyond = true }
            }
            if !union.isCovered(by: held) || (dead.isEmpty && beyond) {
                violation("relay \(scenario.hubs[hub].name) holds \(held), but its devices have \(union)")
            }
            // How it holds it: a record stored twice in the chain, or counts that drifted from
            // the records, leave the versions above as they should be.
            do {
                for problem in try await relay.storage.chainProblems(space: SimRelayHub.space).prefix(3) {
                    violation("relay \(scenario.hubs[hub].name): \(problem)")
                }
            } catch {
                violation("relay \(scenario.hubs[hub].name): cannot read its records: \(error)")
            }
            known[relay.service.relayReplica(for: SimRelayHub.space)] = held
        }
        // Every folder's files hold what its devices have, judged from the files' contents (the
        // cloud's copies, which every device's copy now equals), not from their names as the
        // shipped reader judges them: a writer that takes a range for written when it is not
        // never writes it, and a device that syncs only with the folder waits for it for good.
        for (hub, folder) in folders.sorted(by: { $0.key < $1.key }) {
            var union = VersionVector()
            for member in scenario.members(ofHub: hub) where !dead.contains(member) {
                union.merge(known[devices[member].replicaID] ?? VersionVector())
            }
            let held = Self.coverage(ofFiles: folder.cloudFiles.map(\.bytes))
            let short = union.sortedEntries.filter { $0.seq > held[$0.replica]
                && !withdrawnEverywhere($0.replica, from: held[$0.replica] + 1, through: $0.seq) }
            if !short.isEmpty {
                let lacks = short.map { "\($0.replica):\(held[$0.replica] + 1)-\($0.seq)" }.joined(separator: ", ")
                violation("folder \(scenario.hubs[hub].name)'s files lack \(lacks), which its devices have")
            }
        }
        // What a peer re-issued or dropped as re-issued (its version went back there) may stay in
        // a record of it: what it holds again under other identities.
        var withdrawnBy: [ReplicaID: [OpIDRange]] = [:]
        for device in liveDevices { withdrawnBy[device.replicaID] = (try? device.store.notebook.reissues.map(\.original)) ?? [] }
        for device in liveDevices {
            guard let peers = try? device.store.peers() else { continue }
            for peer in peers {
                guard let actual = known[peer.replica] else { continue }
                if !peer.versionVector.sortedEntries.allSatisfy({ $0.seq <= actual[$0.replica]
                        || Self.covers(withdrawnBy[peer.replica] ?? [], $0.replica, from: actual[$0.replica] + 1, through: $0.seq) }) {
                    violation("device \(device.index) recorded that peer \(peer.replica) has \(peer.versionVector), more than its \(actual)")
                }
            }
        }
    }

    /// Per author, how far bundle files that decode cover its seqs from 1 without a gap, by the
    /// changes and sealed units they hold. (Worked out here, not by `FolderTransport.contiguousCoverage`,
    /// which a bug in the reader would bend the same way as what it checks.)
    static func coverage(ofFiles files: [[UInt8]]) -> VersionVector {
        var ranges: [ReplicaID: [(first: UInt64, last: UInt64)]] = [:]
        for bytes in files {
            guard let bundle = try? SyncBundle.decode(bytes) else { continue }
            for change in bundle.changes { ranges[change.replica, default: []].append((change.startSeq, change.endSeq)) }
            for unit in bundle.sealedUnits { ranges[unit.author, default: []].append((unit.startSeq, unit.endSeq)) }
        }
        var version = VersionVector()
        for (author, list) in ranges {
            var covered: UInt64 = 0
            for range in list.sorted(by: { $0.first < $1.first }) {
                if range.first - 1 > covered { break }
                covered = max(covered, range.last)
            }
            version[author] = covered
        }
        return version
    }

    /// Whether every live device holds a re-issue of `replica`'s seqs `first ... last`.
    func withdrawnEverywhere(_ replica: ReplicaID, from first: UInt64, through last: UInt64) -> Bool {
        liveDevices.allSatisfy { device in
            guard let reissues = try? device.store.notebook.reissues else { return false }
            return Self.covers(reissues.map(\.original), replica, from: first, through: last)
        }
    }

    /// The changes that wait at the end on operations the reference forgot (a device replaced
    /// before it passed them on, whose later seqs did leave it): they never apply anywhere, so the
    /// reference forgets them too, and what waits on them, until nothing more does. A change that
    /// waits on anything the reference still expects is left to the checks.
    private func forgetChangesWaitingOnForgotten() -> Set<Change> {
        var forgotten: Set<Change> = []
        var more = true
        while more {
            more = false
            for device in liveDevices {
                guard let notebook = try? device.store.notebook else { continue }
                let have = notebook.versionVector
                for change in notebook.pendingChanges where !forgotten.contains(change) {
                    // The first seq it lacks of each identity: an author's seqs apply in order.
                    var lacks: [(ReplicaID, UInt64)] = []
                    if change.startSeq > have[change.replica] + 1 { lacks.append((change.replica, have[change.replica] + 1)) }
                    for entry in change.dependencies.sortedEntries where entry.seq > have[entry.replica] { lacks.append((entry.replica, have[entry.replica] + 1)) }
                    guard !lacks.isEmpty, lacks.allSatisfy({ reference.forgot($0.0, $0.1) }) else { continue }
                    let before = reference.forgottenOperations
                    reference.forgetWaiting(change)
                    stats.forgottenOperations += reference.forgottenOperations - before
                    forgotten.insert(change)
                    more = true
                }
            }
        }
        return forgotten
    }

    func finish(events executed: Int) -> RunResult {
        var problems: [String] = []
        var digests: [String] = []
        var pending = 0
        var lost = 0
        let waitingForGood = forgetChangesWaitingOnForgotten()
        let expected = reference.expected()
        var verdicts = ReferenceModel.BodyVerdicts()
        for device in liveDevices {
            do {
                let notebook = try device.store.notebook
                digests.append(notebook.digest())
                let waiting = notebook.pendingChanges.filter { !waitingForGood.contains($0) }.count
                pending += waiting
                if waiting > 0 {
                    problems.append("device \(device.index): \(waiting) changes still wait for their dependencies")
                }
                // A change quarantined on a fork's account leaves once the re-issue it waits for comes.
                if notebook.quarantinedCount > 0 {
                    pending += notebook.quarantinedCount
                    problems.append("device \(device.index): \(notebook.quarantinedCount) changes are still quarantined (first \(notebook.quarantinedChanges[0].change.replica):\(notebook.quarantinedChanges[0].change.startSeq): \(notebook.quarantinedChanges[0].reason.message))")
                }
                let differences = ReferenceModel.differences(notebook, expected, device: "device \(device.index)", verdicts: &verdicts)
                lost += differences.count
                problems += differences.prefix(10)
                try compareAll(device, notebook)
            } catch {
                digests.append("unreadable")
                violation("device \(device.index): cannot read the final state: \(error)")
            }
        }
        let divergent = digests.filter { $0 != digests[0] }.count
        if divergent > 0 {
            problems.insert("the devices did not converge: \(Set(digests).count) different digests", at: 0)
        }
        for (i, digest) in digests.enumerated() { trace.addDigest(i, digest) }
        problems = violations + problems
        return RunResult(
            scenario: scenario.name, seed: seed, events: executed, simulatedMilliseconds: elapsed,
            converged: divergent == 0, divergentDevices: divergent, lostEdits: lost, stuckPending: pending,
            safetyViolations: violations, problems: Array(problems.prefix(40)), traceHash: trace.hash(),
            convergedAtMilliseconds: divergent == 0 ? lastStateChange : nil, syncSeconds: Double(syncNanoseconds) / 1e9, stats: stats)
    }
}

/// Words people type, titles they give, tags they use.
enum Words {
    static let all = ["lorem ", "ipsum ", "dolor ", "sit ", "amet ", "café ", "naïve ", "über ", "日本 ", "🙂 ",
                      "notes ", "merge ", "offline ", "phone ", "laptop ", "sync ", "the ", "a ", "and ", "of "]
    static let titles = ["Groceries", "Meeting", "Ideas", "Trip", "Recipe", "Draft", "Todo", "Journal"]
    static let tags = ["work", "home", "Ideas", "urgent", "later"]
    static let colors = ["red", "yellow", "green", "blue"]
}

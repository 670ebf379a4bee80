import Foundation

/// A simulation scenario: the devices, how they are connected, what people do on them and what
/// goes wrong. Read from a JSON file in `Simulations/` (the format is documented in
/// `Simulations/README.md`); every field but `name` has a default, so a scenario states only what
/// it is about.
public struct Scenario: Codable, Sendable, Hashable {
    /// A place devices sync through.
    public struct Hub: Codable, Sendable, Hashable {
        /// How a hub carries changes: `relay` (the shipped relay, over a simulated network) or
        /// `folder` (a shared folder that a sync tool copies between devices).
        public enum Kind: String, Codable, Sendable { case relay, folder }
        /// The hub's name, as partitions name it.
        public var name: String
        /// Whether the hub is a relay or a shared folder.
        public var kind: Kind
        /// The devices attached (indexes); nil means every device.
        public var devices: [Int]?

        /// A hub named `name` of kind `kind`, attached to `devices` (nil: every device).
        public init(name: String, kind: Kind, devices: [Int]? = nil) {
            self.name = name
            self.kind = kind
            self.devices = devices
        }
    }

    /// What people do, and how often each kind of edit happens (relative weights).
    public struct Workload: Codable, Sendable, Hashable {
        /// Local edits per device over the whole scenario.
        public var editsPerDevice: Int = 50
        /// Notes device 0 creates (and every device receives) before the clock starts.
        public var initialNotes: Int = 3
        /// Characters each initial note's body starts with.
        public var initialBodyLength: Int = 40
        /// The probability that an edit is a burst: several devices make the same kind of edit on
        /// the same note, at the same place, in the same millisecond.
        public var burst: Double = 0.1
        /// How many devices take part in a burst (at most the number of devices).
        public var burstSize: Int = 2
        /// Relative weights of the kinds of edit.
        public var mix: [String: Double] = Workload.defaultMix
        /// The probability that an edit is made by another process on the device (a second store
        /// on the same database, as a command line run while the app is open).
        public var otherProcess: Double = 0

        /// The default weights of the kinds of edit, keyed by `EditKind` raw value.
        public static let defaultMix: [String: Double] = [
            "type": 40, "append": 15, "deleteRange": 12, "rename": 8, "pin": 5, "tag": 5,
            "trash": 3, "restore": 3, "delete": 1, "create": 3, "editText": 6,
        ]

        /// The default workload.
        public init() {}
    }

    /// How often devices sync.
    public struct Sync: Codable, Sendable, Hashable {
        /// Sync attempts per device and hub over the whole scenario (at random times).
        public var syncsPerDevice: Int = 40
        /// The probability that a device syncs right after one of its edits.
        public var afterEdit: Double = 0.1
        /// Attempts per transport call (RetryPolicy.maxAttempts); retries sleep on the virtual clock.
        public var maxAttempts: Int = 3
        /// The most changes a relay answers with in one response.
        public var pageSize: Int = 400
        /// Each store refreshes its snapshot after this many logged changes (the command line's
        /// 4096 by default; a few dozen makes a run fold its log and read a snapshot back often).
        public var snapshotInterval: Int = 4096

        /// The default sync settings.
        public init() {}
    }

    /// Faults of the simulated network between devices and relays (probabilities per message).
    public struct Network: Codable, Sendable, Hashable {
        /// The probability that a request or an answer is lost.
        public var loss: Double = 0
        /// The probability that a request reaches the relay twice.
        public var duplicate: Double = 0
        /// How often requests arrive out of order: a quarter of this is the probability that a
        /// request is held back and arrives later.
        public var reorder: Double = 0
        /// The probability that a request or an answer is late (the device gives up on it; a late
        /// request still reaches the relay).
        public var delay: Double = 0
        /// The longest a late request takes to arrive, in seconds.
        public var maxDelaySeconds: Double = 30
        /// The probability that a request or an answer arrives with damaged bytes.
        public var corrupt: Double = 0

        /// A network without faults.
        public init() {}
    }

    /// How a shared folder's files reach the other devices (a sync tool, a cloud drive).
    public struct Folder: Codable, Sendable, Hashable {
        /// Every copy takes up to this long to appear.
        public var propagationSeconds: Double = 5
        /// The probability that a copy is late, and by how much at most.
        public var late: Double = 0
        /// The most a late copy is late by, in seconds.
        public var maxLateSeconds: Double = 600
        /// The probability that a copy first appears cut short (still being copied), and for how long.
        public var partial: Double = 0
        /// The longest a cut-short or damaged copy stays before the whole copy arrives, in seconds.
        public var partialSeconds: Double = 60
        /// The probability that a copy first appears with damaged bytes (fixed by a later re-copy).
        public var corrupt: Double = 0
        /// The probability that a file is delivered twice (a sync tool that copies it again).
        public var twice: Double = 0
        /// A device compacts its files of an author when it has more than this many (the command
        /// line's 32 by default).
        public var compactThreshold: Int = 32

        /// The default folder settings, without faults.
        public init() {}
    }

    /// Per-device clock skew and jumps.
    public struct Clocks: Codable, Sendable, Hashable {
        /// Fixed skews per device, in seconds (missing devices: random within `maxSkewSeconds`).
        public var skewSeconds: [Double]?
        /// Random skews are drawn from -max...max.
        public var maxSkewSeconds: Double = 0
        /// Scheduled jumps.
        public var jumps: [ClockJump] = []
        /// Random jumps, each by up to `maxJumpSeconds` either way.
        public var randomJumps: Int = 0
        /// The largest random jump, in seconds, either way.
        public var maxJumpSeconds: Double = 0

        /// Exact clocks: no skew, no jumps.
        public init() {}
    }

    /// A device's clock is set forward (positive) or back (negative).
    public struct ClockJump: Codable, Sendable, Hashable {
        /// The device whose clock jumps.
        public var device: Int
        /// When it jumps, in seconds from the start.
        public var atSeconds: Double
        /// How far it jumps, in seconds: positive forward, negative back.
        public var bySeconds: Double
    }

    /// A scheduled partition: `devices` cannot reach `hub` (or any hub when nil) from `startSeconds`
    /// to `endSeconds`. `direction` is `both`, `outbound` (what they send is lost) or `inbound`
    /// (what they should receive is lost).
    public struct Partition: Codable, Sendable, Hashable {
        /// The devices cut off.
        public var devices: [Int]
        /// The name of the hub they cannot reach; nil for every hub.
        public var hub: String?
        /// When the partition begins, in seconds from the start.
        public var startSeconds: Double
        /// When it heals, in seconds from the start.
        public var endSeconds: Double
        /// Which way it cuts (both ways unless said).
        public var direction: Direction = .both
    }

    /// Which way a partition cuts: `both`, `outbound` (what the devices send is lost) or `inbound`
    /// (what they should receive is lost).
    public enum Direction: String, Codable, Sendable, Hashable { case both, outbound, inbound }

    /// Crashes, reinstalls and random partitions.
    public struct Faults: Codable, Sendable, Hashable {
        /// Random crashes (a third of them in the middle of a sync).
        public var crashes: Int = 0
        /// Random power cuts at a commit: in the middle of a sync or of an edit, the device's
        /// store lets its first few commits (perhaps none) through and dies at the next, and the
        /// device restarts. Every store call that commits more than once is judged between them.
        public var crashesAtCommit: Int = 0
        /// Random reinstalls from nothing (a new empty store and replica id).
        public var reinstalls: Int = 0
        /// Scheduled reinstalls: device and time.
        public var reinstallAt: [DeviceTime] = []
        /// Scheduled crashes.
        public var crashAt: [DeviceTime] = []
        /// Random reinstalls in the middle of a sync (after some of its writes or requests: an
        /// upload half done when the device is wiped).
        public var reinstallsDuringSync: Int = 0
        /// Random copies: a device's database is replaced by a copy of another device's (a second
        /// laptop set up by copying the file, a backup from another machine). The copy must take
        /// a fresh replica id before it writes.
        public var copies: Int = 0
        /// Random clones: a device's disk is cloned with its file identity (which no check at open
        /// can see), the device and the clone type on at the end of the run the device just typed
        /// (the same seqs and timestamps, other characters), and the clone's change reaches the
        /// device, which must refuse it as a fork and move to a fresh identity. The clone is then
        /// thrown away.
        public var clones: Int = 0
        /// Random forks: a device's database is copied onto another device keeping its file
        /// identity (a copy an older build made, or one no check at open can see), so both write
        /// as one replica identity; both go on editing and syncing through their hubs, so each
        /// branch reaches relays, folders and other devices before anyone sees the fork. The
        /// copy that finds the other's operations at its seqs must re-issue its own branch; every
        /// edit of both copies must survive.
        public var forks: Int = 0
        /// With forks: devices edit even while they hold operations of a fork that a re-issue may
        /// still take back (off by default: such edits wait for good, see `mayEditBesideForks`).
        public var editOnUnsettledForks = false
        /// Random out-of-order deliveries: a peer's changes that a device lacks reach it shuffled,
        /// one to three at a time (as a folder's files arrive in any order), so that some wait and
        /// a later batch releases some and queues others; what a restart would load of the waiting
        /// changes is checked after every batch that changed them.
        public var outOfOrder: Int = 0
        /// Random restores: a backup of a device's database, taken at one time, is later copied
        /// over the database itself (`cp backup.db notes.db`: the same file, so the file identity
        /// cannot tell). What the device made in between and never passed on is gone; the
        /// restored database must move to a fresh replica id before it reuses seqs that left it.
        public var restores: Int = 0
        /// Devices that stop for good at a time: they never sync again, and every file they wrote
        /// in a shared folder is then damaged everywhere (bit rot in the cloud copy). Whoever holds
        /// their changes must pass them on.
        public var deaths: [DeviceTime] = []
        /// Forged files that appear in each shared folder, from a writer that is no device: names
        /// that lie about what they hold, changes of one author under another's name, garbage,
        /// files larger than a reader accepts. Readers skip them; nobody trusts them.
        public var forgeries: Int = 0
        /// Hostile requests to each relay: no token, a wrong token, another space's token, bodies
        /// that are not bundles, damaged, too large, or with gaps. The relay refuses each with the
        /// status the protocol says, and stores nothing.
        public var intrusions: Int = 0
        /// In an encrypted scenario: times a member device (it holds the space key) seals a change
        /// in another device's name with its own signing key and hands it to every hub it is
        /// attached to (a relay upload, a file in its folder). Relays and readers must refuse it:
        /// no device may apply it.
        public var memberForgeries: Int = 0
        /// Random partitions of one device from one hub.
        public var randomPartitions: Int = 0
        /// The longest a random partition lasts, in seconds.
        public var maxPartitionSeconds: Double = 3600
        /// The probability that a random partition is one-way.
        public var oneWay: Double = 0.3

        /// No faults.
        public init() {}
    }

    /// A device and a time, for faults scheduled on one device.
    public struct DeviceTime: Codable, Sendable, Hashable {
        /// The device.
        public var device: Int
        /// When, in seconds from the start.
        public var atSeconds: Double
    }

    /// The scenario's name (the one required field), shown in summaries and reports.
    public var name: String
    /// What the scenario is about, shown in reports.
    public var description: String = ""
    /// How many devices (1 to 64).
    public var devices: Int = 3
    /// How long the run lasts in simulated seconds; events are spread over it.
    public var durationSeconds: Double = 3600
    /// The places devices sync through; by default one relay that every device uses.
    public var hubs: [Hub] = [Hub(name: "relay", kind: .relay)]
    /// What people do on the devices.
    public var workload = Workload()
    /// How often devices sync.
    public var sync = Sync()
    /// Faults of the network between devices and relays.
    public var network = Network()
    /// How shared folders' files reach the other devices.
    public var folder = Folder()
    /// Clock skews and jumps.
    public var clocks = Clocks()
    /// Scheduled partitions.
    public var partitions: [Partition] = []
    /// Crashes, reinstalls, copies, deaths, forgeries, intrusions and random partitions.
    public var faults = Faults()
    /// Whether every device is in one end-to-end encrypted space (a key from the seed; the devices
    /// of the start introduced to each other, as devices that joined together): every bundle is
    /// sealed and signed, relays and folders hold only ciphertext.
    public var encrypted = false

    /// A scenario named `name`, with every other field at its default.
    public init(name: String) { self.name = name }

    /// Reads a scenario file.
    public static func load(path: String) throws -> Scenario {
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue {
            throw SimulationError("\(path) is a folder, not a scenario file")
        }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw SimulationError("cannot read the scenario file \(path)")
        }
        defer { try? handle.close() }
        // Read at most one byte past the limit: a pipe or /dev/zero ends here, not in memory.
        let data: Data
        do { data = try handle.read(upToCount: maxFileBytes + 1) ?? Data() } catch {
            throw SimulationError("cannot read the scenario file \(path): \(error.localizedDescription)")
        }
        guard data.count <= maxFileBytes else {
            throw SimulationError("\(path) is larger than \(maxFileBytes / 1_048_576) MiB: not a scenario file (the ones in Simulations/ are a few KB)")
        }
        return try decode(data, source: path)
    }

    /// The largest scenario file read: a scenario is a few kilobytes of settings.
    package static let maxFileBytes = 1 << 20

    /// Decodes a scenario from JSON and checks it.
    public static func decode(_ data: Data, source: String = "scenario") throws -> Scenario {
        let scenario: Scenario
        do {
            scenario = try JSONDecoder().decode(Scenario.self, from: data)
        } catch let error as DecodingError {
            throw SimulationError("\(source): not a valid scenario (\(describe(error)))")
        }
        try scenario.validate()
        return scenario
    }

    /// Checks that the scenario makes sense: known hubs and devices, and a hub graph that
    /// connects every device (otherwise the devices can never converge).
    public func validate() throws {
        guard devices >= 1, devices <= 64 else { throw SimulationError("\(name): devices must be 1...64") }
        guard !hubs.isEmpty else { throw SimulationError("\(name): at least one hub is needed") }
        try checkRanges()
        guard durationSeconds > 0 else { throw SimulationError("\(name): durationSeconds must be positive") }
        guard workload.editsPerDevice >= 0, sync.syncsPerDevice >= 0, sync.maxAttempts >= 1, sync.pageSize >= 1 else {
            throw SimulationError("\(name): counts must not be negative (maxAttempts and pageSize at least 1)")
        }
        guard faults.clones >= 0, faults.outOfOrder >= 0, faults.forks >= 0 else {
            throw SimulationError("\(name): faults.clones, faults.forks and faults.outOfOrder must not be negative")
        }
        if faults.forks > 0, devices < 2 { throw SimulationError("\(name): faults.forks needs at least 2 devices") }
        var hubNames: Set<String> = []
        for hub in hubs where !hubNames.insert(hub.name).inserted {
            throw SimulationError("\(name): two hubs are named \(hub.name); partitions name hubs, so each name must be one hub's")
        }
        for hub in hubs {
            for d in hub.devices ?? [] where d < 0 || d >= devices {
                throw SimulationError("\(name): hub \(hub.name) names device \(d), but there are \(devices)")
            }
        }
        for key in workload.mix.keys where EditKind(rawValue: key) == nil {
            throw SimulationError("\(name): unknown edit kind \"\(key)\" in workload.mix (known: \(EditKind.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        for p in partitions {
            if let hub = p.hub, !hubs.contains(where: { $0.name == hub }) {
                throw SimulationError("\(name): a partition names hub \(hub), which does not exist")
            }
            for d in p.devices where d < 0 || d >= devices { throw SimulationError("\(name): a partition names device \(d)") }
        }
        for item in faults.reinstallAt + faults.crashAt + faults.deaths where item.device < 0 || item.device >= devices {
            throw SimulationError("\(name): a fault names device \(item.device)")
        }
        for jump in clocks.jumps where jump.device < 0 || jump.device >= devices {
            throw SimulationError("\(name): a clock jump names device \(jump.device)")
        }
        if faults.memberForgeries > 0, !encrypted || devices < 2 {
            throw SimulationError("\(name): faults.memberForgeries needs \"encrypted\": true and at least 2 devices")
        }
        // Devices joined through shared hubs must form one component.
        var reached: Set<Int> = [0]
        var changed = true
        while changed {
            changed = false
            for hub in hubs {
                let members = Set(hub.devices ?? Array(0 ..< devices))
                if !members.isDisjoint(with: reached), !members.isSubset(of: reached) {
                    reached.formUnion(members)
                    changed = true
                }
            }
        }
        guard reached.count == devices else {
            throw SimulationError("\(name): the hubs do not connect every device, so they could never converge")
        }
    }

    /// Every number within what a run can do in bounded time and memory: a time past what a
    /// millisecond clock holds trapped, and a count of a billion ran for hours.
    func checkRanges() throws {
        func check(_ what: String, _ value: Double, _ range: ClosedRange<Double>) throws {
            guard value.isFinite, range.contains(value) else {
                throw SimulationError("\(name): \(what) is \(value), not within \(range.lowerBound) ... \(range.upperBound)")
            }
        }
        func check(_ what: String, _ value: Int, _ range: ClosedRange<Int>) throws {
            guard range.contains(value) else { throw SimulationError("\(name): \(what) is \(value), not within \(range.lowerBound) ... \(range.upperBound)") }
        }
        let tenYears = 10 * 365 * 86_400.0
        try check("durationSeconds", durationSeconds, 0 ... tenYears)
        for (what, value) in [("network.maxDelaySeconds", network.maxDelaySeconds), ("folder.propagationSeconds", folder.propagationSeconds),
                              ("folder.maxLateSeconds", folder.maxLateSeconds), ("folder.partialSeconds", folder.partialSeconds),
                              ("clocks.maxSkewSeconds", clocks.maxSkewSeconds), ("clocks.maxJumpSeconds", clocks.maxJumpSeconds),
                              ("faults.maxPartitionSeconds", faults.maxPartitionSeconds)] {
            try check(what, value, 0 ... tenYears)
        }
        for value in clocks.skewSeconds ?? [] { try check("clocks.skewSeconds", value, -tenYears ... tenYears) }
        for jump in clocks.jumps {
            try check("a clock jump's atSeconds", jump.atSeconds, 0 ... tenYears)
            try check("a clock jump's bySeconds", jump.bySeconds, -tenYears ... tenYears)
        }
        for p in partitions {
            try check("a partition's startSeconds", p.startSeconds, 0 ... tenYears)
            try check("a partition's endSeconds", p.endSeconds, p.startSeconds ... tenYears)
        }
        for item in faults.reinstallAt + faults.crashAt + faults.deaths { try check("a fault's atSeconds", item.atSeconds, 0 ... tenYears) }
        for (what, value) in [("workload.burst", workload.burst), ("workload.otherProcess", workload.otherProcess), ("sync.afterEdit", sync.afterEdit),
                              ("network.loss", network.loss), ("network.duplicate", network.duplicate), ("network.reorder", network.reorder),
                              ("network.delay", network.delay), ("network.corrupt", network.corrupt), ("folder.late", folder.late),
                              ("folder.partial", folder.partial), ("folder.corrupt", folder.corrupt), ("folder.twice", folder.twice),
                              ("faults.oneWay", faults.oneWay)] {
            try check(what + " (a probability)", value, 0 ... 1)
        }
        for (kind, weight) in workload.mix { try check("workload.mix.\(kind)", weight, 0 ... 1_000_000) }
        for (what, value, most) in [("workload.editsPerDevice", workload.editsPerDevice, 100_000), ("workload.initialNotes", workload.initialNotes, 10_000),
                                    ("workload.initialBodyLength", workload.initialBodyLength, 1_000_000), ("workload.burstSize", workload.burstSize, 1_000),
                                    ("sync.syncsPerDevice", sync.syncsPerDevice, 100_000), ("sync.maxAttempts", sync.maxAttempts, 100),
                                    ("sync.pageSize", sync.pageSize, 100_000), ("sync.snapshotInterval", sync.snapshotInterval, 10_000_000),
                                    ("folder.compactThreshold", folder.compactThreshold, 100_000), ("clocks.randomJumps", clocks.randomJumps, 10_000),
                                    ("faults.crashes", faults.crashes, 10_000), ("faults.crashesAtCommit", faults.crashesAtCommit, 10_000), ("faults.reinstalls", faults.reinstalls, 10_000),
                                    ("faults.reinstallsDuringSync", faults.reinstallsDuringSync, 10_000), ("faults.copies", faults.copies, 10_000),
                                    ("faults.clones", faults.clones, 10_000), ("faults.forks", faults.forks, 10_000),
                                    ("faults.outOfOrder", faults.outOfOrder, 10_000), ("faults.restores", faults.restores, 10_000),
                                    ("faults.forgeries", faults.forgeries, 10_000), ("faults.intrusions", faults.intrusions, 10_000),
                                    ("faults.memberForgeries", faults.memberForgeries, 10_000), ("faults.randomPartitions", faults.randomPartitions, 10_000)] {
            try check(what, value, 0 ... most)
        }
    }

    /// The devices attached to hub `index`.
    func members(ofHub index: Int) -> [Int] { hubs[index].devices ?? Array(0 ..< devices) }

    private static func describe(_ error: DecodingError) -> String {
        switch error {
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .keyNotFound(_, let context), .dataCorrupted(let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return path.isEmpty ? context.debugDescription : "\(path): \(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }
}

/// The kinds of local edit the workload makes.
public enum EditKind: String, Codable, Sendable, CaseIterable {
    /// Type a word at a place in a note's body.
    case type
    /// Type a word at the end of a note's body.
    case append
    /// Delete a range of a note's body.
    case deleteRange
    /// Rename a note.
    case rename
    /// Pin or unpin a note.
    case pin
    /// Add a note to a tag or remove it.
    case tag
    /// Move a note to the trash.
    case trash
    /// Restore a trashed note.
    case restore
    /// Delete a note for good.
    case delete
    /// Create a note.
    case create
    /// Save a burst of typing and deleting (and sometimes a new title) made in an editor, as
    /// `crdt-sync edit` does (`NoteStore.applyEditedText`).
    case editText
    // The kinds below are in no default mix (old scenario files keep their trace hashes).
    /// Archive or unarchive a note (`NoteStore.setArchived`).
    case archive
    /// Set or clear a note's colour (`NoteStore.setColor`).
    case color
    /// Bring a note deleted for good back (`NoteStore.setState(_:.active)` on a deleted note).
    case undelete
    /// Rename a tag that notes are in (`NoteStore.renameTag`).
    case renameTag
    /// Undo the device's latest edit (`NoteStore.undo`).
    case undo
    /// Mark a note's merges as reviewed (`NoteStore.resolveConflicts`).
    case resolve
    /// Paste a word over part of a note's body, saved whole (`NoteStore.replaceBody`).
    case replaceBody
    /// Empty the trash (`NoteStore.emptyTrash`).
    case emptyTrash
    /// Open a note in an editor, the first time; the next time, save it with the text it was
    /// given then (`applyEditedText` rebasing onto whatever synced or was typed meanwhile).
    case editLater
}

/// A problem with a scenario or a replay request.
public struct SimulationError: Error, CustomStringConvertible, Sendable {
    /// What is wrong.
    public var message: String
    /// An error that says `message`.
    public init(_ message: String) { self.message = message }
    /// The message.
    public var description: String { message }
}

// Decoding with defaults: every field but `name` may be left out.
extension Scenario {
    enum CodingKeys: String, CodingKey, CaseIterable {
        case name, description, devices, durationSeconds, hubs, workload, sync, network, folder, clocks, partitions, faults, encrypted
    }

    /// Decodes a scenario, taking the default for every field left out (only `name` is required).
    public init(from decoder: any Decoder) throws {
        try decoder.refuseUnknownKeys(CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(name: try c.decode(String.self, forKey: .name))
        description = try c.decodeIfPresent(String.self, forKey: .description) ?? description
        devices = try c.decodeWholeIfPresent(forKey: .devices) ?? devices
        durationSeconds = try c.decodeIfPresent(Double.self, forKey: .durationSeconds) ?? durationSeconds
        hubs = try c.decodeIfPresent([Hub].self, forKey: .hubs) ?? hubs
        workload = try c.decodeIfPresent(Workload.self, forKey: .workload) ?? workload
        sync = try c.decodeIfPresent(Sync.self, forKey: .sync) ?? sync
        network = try c.decodeIfPresent(Network.self, forKey: .network) ?? network
        encrypted = try c.decodeIfPresent(Bool.self, forKey: .encrypted) ?? encrypted
        folder = try c.decodeIfPresent(Folder.self, forKey: .folder) ?? folder
        clocks = try c.decodeIfPresent(Clocks.self, forKey: .clocks) ?? clocks
        partitions = try c.decodeIfPresent([Partition].self, forKey: .partitions) ?? partitions
        faults = try c.decodeIfPresent(Faults.self, forKey: .faults) ?? faults
    }
}

extension Scenario.Workload {
    enum CodingKeys: String, CodingKey, CaseIterable { case editsPerDevice, initialNotes, initialBodyLength, burst, burstSize, mix, otherProcess }
    /// Decodes a workload, taking the default for every field left out.
    public init(from decoder: any Decoder) throws {
        self.init()
        try decoder.refuseUnknownKeys(CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        editsPerDevice = try c.decodeWholeIfPresent(forKey: .editsPerDevice) ?? editsPerDevice
        initialNotes = try c.decodeWholeIfPresent(forKey: .initialNotes) ?? initialNotes
        initialBodyLength = try c.decodeWholeIfPresent(forKey: .initialBodyLength) ?? initialBodyLength
        burst = try c.decodeIfPresent(Double.self, forKey: .burst) ?? burst
        burstSize = try c.decodeWholeIfPresent(forKey: .burstSize) ?? burstSize
        mix = try c.decodeIfPresent([String: Double].self, forKey: .mix) ?? mix
        otherProcess = try c.decodeIfPresent(Double.self, forKey: .otherProcess) ?? otherProcess
    }
}

extension Scenario.Sync {
    enum CodingKeys: String, CodingKey, CaseIterable { case syncsPerDevice, afterEdit, maxAttempts, pageSize, snapshotInterval }
    /// Decodes sync settings, taking the default for every field left out.
    public init(from decoder: any Decoder) throws {
        self.init()
        try decoder.refuseUnknownKeys(CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        syncsPerDevice = try c.decodeWholeIfPresent(forKey: .syncsPerDevice) ?? syncsPerDevice
        afterEdit = try c.decodeIfPresent(Double.self, forKey: .afterEdit) ?? afterEdit
        maxAttempts = try c.decodeWholeIfPresent(forKey: .maxAttempts) ?? maxAttempts
        pageSize = try c.decodeWholeIfPresent(forKey: .pageSize) ?? pageSize
        snapshotInterval = try c.decodeWholeIfPresent(forKey: .snapshotInterval) ?? snapshotInterval
    }
}

extension Scenario.Network {
    enum CodingKeys: String, CodingKey, CaseIterable { case loss, duplicate, reorder, delay, maxDelaySeconds, corrupt }
    /// Decodes network faults, taking the default (none) for every field left out.
    public init(from decoder: any Decoder) throws {
        self.init()
        try decoder.refuseUnknownKeys(CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        loss = try c.decodeIfPresent(Double.self, forKey: .loss) ?? loss
        duplicate = try c.decodeIfPresent(Double.self, forKey: .duplicate) ?? duplicate
        reorder = try c.decodeIfPresent(Double.self, forKey: .reorder) ?? reorder
        delay = try c.decodeIfPresent(Double.self, forKey: .delay) ?? delay
        maxDelaySeconds = try c.decodeIfPresent(Double.self, forKey: .maxDelaySeconds) ?? maxDelaySeconds
        corrupt = try c.decodeIfPresent(Double.self, forKey: .corrupt) ?? corrupt
    }
}

extension Scenario.Folder {
    enum CodingKeys: String, CodingKey, CaseIterable { case propagationSeconds, late, maxLateSeconds, partial, partialSeconds, corrupt, twice, compactThreshold }
    /// Decodes folder settings, taking the default for every field left out.
    public init(from decoder: any Decoder) throws {
        self.init()
        try decoder.refuseUnknownKeys(CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        propagationSeconds = try c.decodeIfPresent(Double.self, forKey: .propagationSeconds) ?? propagationSeconds
        late = try c.decodeIfPresent(Double.self, forKey: .late) ?? late
        maxLateSeconds = try c.decodeIfPresent(Double.self, forKey: .maxLateSeconds) ?? maxLateSeconds
        partial = try c.decodeIfPresent(Double.self, forKey: .partial) ?? partial
        partialSeconds = try c.decodeIfPresent(Double.self, forKey: .partialSeconds) ?? partialSeconds
        corrupt = try c.decodeIfPresent(Double.self, forKey: .corrupt) ?? corrupt
        twice = try c.decodeIfPresent(Double.self, forKey: .twice) ?? twice
        compactThreshold = try c.decodeWholeIfPresent(forKey: .compactThreshold) ?? compactThreshold
    }
}

extension Scenario.Clocks {
    enum CodingKeys: String, CodingKey, CaseIterable { case skewSeconds, maxSkewSeconds, jumps, randomJumps, maxJumpSeconds }
    /// Decodes clock settings, taking the default for every field left out.
    public init(from decoder: any Decoder) throws {
        self.init()
        try decoder.refuseUnknownKeys(CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        skewSeconds = try c.decodeIfPresent([Double].self, forKey: .skewSeconds)
        maxSkewSeconds = try c.decodeIfPresent(Double.self, forKey: .maxSkewSeconds) ?? maxSkewSeconds
        jumps = try c.decodeIfPresent([Scenario.ClockJump].self, forKey: .jumps) ?? jumps
        randomJumps = try c.decodeWholeIfPresent(forKey: .randomJumps) ?? randomJumps
        maxJumpSeconds = try c.decodeIfPresent(Double.self, forKey: .maxJumpSeconds) ?? maxJumpSeconds
    }
}

extension Scenario.Partition {
    enum CodingKeys: String, CodingKey, CaseIterable { case devices, hub, startSeconds, endSeconds, direction }
    /// Decodes a partition; `hub` and `direction` may be left out (every hub, both ways).
    public init(from decoder: any Decoder) throws {
        try decoder.refuseUnknownKeys(CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        devices = try c.decodeWholes(forKey: .devices)
        hub = try c.decodeIfPresent(String.self, forKey: .hub)
        startSeconds = try c.decode(Double.self, forKey: .startSeconds)
        endSeconds = try c.decode(Double.self, forKey: .endSeconds)
        direction = try c.decodeIfPresent(Scenario.Direction.self, forKey: .direction) ?? .both
    }
}

extension Scenario.Faults {
    enum CodingKeys: String, CodingKey, CaseIterable {
        case crashes, crashesAtCommit, reinstalls, reinstallAt, crashAt, reinstallsDuringSync, copies, clones, forks, editOnUnsettledForks, outOfOrder, restores, deaths, forgeries, intrusions, memberForgeries
        case randomPartitions, maxPartitionSeconds, oneWay
    }
    /// Decodes faults, taking the default (none) for every field left out.
    public init(from decoder: any Decoder) throws {
        self.init()
        try decoder.refuseUnknownKeys(CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        crashes = try c.decodeWholeIfPresent(forKey: .crashes) ?? crashes
        crashesAtCommit = try c.decodeWholeIfPresent(forKey: .crashesAtCommit) ?? crashesAtCommit
        reinstalls = try c.decodeWholeIfPresent(forKey: .reinstalls) ?? reinstalls
        reinstallAt = try c.decodeIfPresent([Scenario.DeviceTime].self, forKey: .reinstallAt) ?? reinstallAt
        crashAt = try c.decodeIfPresent([Scenario.DeviceTime].self, forKey: .crashAt) ?? crashAt
        reinstallsDuringSync = try c.decodeWholeIfPresent(forKey: .reinstallsDuringSync) ?? reinstallsDuringSync
        copies = try c.decodeWholeIfPresent(forKey: .copies) ?? copies
        clones = try c.decodeWholeIfPresent(forKey: .clones) ?? clones
        forks = try c.decodeWholeIfPresent(forKey: .forks) ?? forks
        editOnUnsettledForks = try c.decodeIfPresent(Bool.self, forKey: .editOnUnsettledForks) ?? editOnUnsettledForks
        outOfOrder = try c.decodeWholeIfPresent(forKey: .outOfOrder) ?? outOfOrder
        restores = try c.decodeWholeIfPresent(forKey: .restores) ?? restores
        deaths = try c.decodeIfPresent([Scenario.DeviceTime].self, forKey: .deaths) ?? deaths
        forgeries = try c.decodeWholeIfPresent(forKey: .forgeries) ?? forgeries
        intrusions = try c.decodeWholeIfPresent(forKey: .intrusions) ?? intrusions
        memberForgeries = try c.decodeWholeIfPresent(forKey: .memberForgeries) ?? memberForgeries
        randomPartitions = try c.decodeWholeIfPresent(forKey: .randomPartitions) ?? randomPartitions
        maxPartitionSeconds = try c.decodeIfPresent(Double.self, forKey: .maxPartitionSeconds) ?? maxPartitionSeconds
        oneWay = try c.decodeIfPresent(Double.self, forKey: .oneWay) ?? oneWay
    }
}

extension Scenario.Hub {
    enum CodingKeys: String, CodingKey, CaseIterable { case name, kind, devices }
    /// Decodes a hub; `devices` may be left out (every device).
    public init(from decoder: any Decoder) throws {
        try decoder.refuseUnknownKeys(CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        kind = try c.decode(Kind.self, forKey: .kind)
        devices = c.contains(.devices) ? try c.decodeWholes(forKey: .devices) : nil
    }
}

extension Scenario.ClockJump {
    enum CodingKeys: String, CodingKey, CaseIterable { case device, atSeconds, bySeconds }
    /// Decodes a clock jump (every field required).
    public init(from decoder: any Decoder) throws {
        try decoder.refuseUnknownKeys(CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        device = try c.decodeWhole(forKey: .device)
        atSeconds = try c.decode(Double.self, forKey: .atSeconds)
        bySeconds = try c.decode(Double.self, forKey: .bySeconds)
    }
}

extension Scenario.DeviceTime {
    enum CodingKeys: String, CodingKey, CaseIterable { case device, atSeconds }
    /// Decodes a device and a time (both required).
    public init(from decoder: any Decoder) throws {
        try decoder.refuseUnknownKeys(CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        device = try c.decodeWhole(forKey: .device)
        atSeconds = try c.decode(Double.self, forKey: .atSeconds)
    }
}

/// Any key of a JSON object, to list the ones a scenario does not know.
private struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

extension Decoder {
    /// Refuses a key that `K` does not name: a misspelt setting would otherwise take its default
    /// silently, and the run would test something other than what the file says.
    func refuseUnknownKeys<K: CodingKey & CaseIterable>(_ keys: K.Type) throws {
        let known = K.allCases.map(\.stringValue)
        let container = try self.container(keyedBy: AnyKey.self)
        for key in container.allKeys.sorted(by: { $0.stringValue < $1.stringValue }) where !known.contains(key.stringValue) {
            throw DecodingError.dataCorrupted(.init(
                codingPath: codingPath + [key],
                debugDescription: "unknown key (known here: \(known.joined(separator: ", ")))"))
        }
    }
}

extension KeyedDecodingContainer {
    /// A whole number, read as JSON writes it: `3.5` or `1e300` is named as not a count, where
    /// Foundation's decoder calls the whole file "not valid JSON".
    func decodeWholeIfPresent(forKey key: Key) throws -> Int? {
        guard let value = try decodeIfPresent(Double.self, forKey: key) else { return nil }
        return try Self.whole(value, codingPath: codingPath + [key])
    }

    /// A whole number that must be there.
    func decodeWhole(forKey key: Key) throws -> Int {
        guard let value = try decodeWholeIfPresent(forKey: key) else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "\"\(key.stringValue)\" is required here"))
        }
        return value
    }

    /// A list of whole numbers.
    func decodeWholes(forKey key: Key) throws -> [Int] {
        try decode([Double].self, forKey: key).map { try Self.whole($0, codingPath: codingPath + [key]) }
    }

    private static func whole(_ value: Double, codingPath: [any CodingKey]) throws -> Int {
        // 2^53: past it a Double no longer holds every whole number, and no count here comes near.
        guard value.rounded() == value, abs(value) <= 9_007_199_254_740_992 else {
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "\(value) is not a whole number"))
        }
        return Int(value)
    }
}

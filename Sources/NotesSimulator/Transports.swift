import NotesCRDT
import NotesRelay
import NotesSync

/// The simulated network between a device and a relay, as the shipped relay client
/// (`RelayTransport`) sees it: an `HTTPCalling` whose requests go to the hub's shipped
/// `RelayService` through the simulated network (see `Simulation.relayCall`).
struct SimulatedHTTP: HTTPCalling {
    let world: Simulation
    let device: Int
    let hub: Int

    func call(_ request: HTTPCallRequest, maxResponseBytes: Int) async throws -> HTTPCallResponse {
        try await world.relayCall(request, device: device, hub: hub)
    }
}

/// A relay hub: the shipped relay logic over the shipped SQLite storage, in memory.
final class SimRelayHub: @unchecked Sendable {
    let service: RelayService
    let storage: SQLiteRelayStorage
    /// The space every device of the run syncs.
    static let space = "sim"
    static let token = "sim-token"

    /// Another space on the same relay, and its token (what an intruder may hold).
    static let otherSpace = "other"
    static let otherToken = "other-token"
    /// Requests larger than this are refused (small, so that an intruder's oversized body is cheap).
    static let maxRequestBytes = 1 << 20

    init(relayID: [UInt8], pageSize: Int) throws {
        storage = try SQLiteRelayStorage.inMemory(relayID: relayID)
        service = RelayService(storage: storage,
                               tokens: try RelayTokens([(space: SimRelayHub.space, token: SimRelayHub.token),
                                                        (space: SimRelayHub.otherSpace, token: SimRelayHub.otherToken)]),
                               limits: RelayLimits(maxRequestBytes: SimRelayHub.maxRequestBytes, page: RelayPageLimits(maxChanges: pageSize)))
    }
}

/// The device crashed (or was wiped) in the middle of an operation: nothing after it happens.
struct DeviceStopped: Error {}

/// A device's file system for a shared folder: the device's own copy of the folder, whose
/// writes and removals the folder's sync tool (`SimFolderHub`) hears about and carries to the
/// other devices. The shipped `FolderTransport` runs over it.
struct ObservedFileSystem: FileSystem {
    let base: InMemoryFileSystem
    let world: Simulation
    let device: Int
    let hub: Int

    func contentsOfDirectory(_ path: String) throws -> [String]? { try base.contentsOfDirectory(path) }
    func listing(_ path: String) throws -> [(name: String, attributes: FileAttributes)]? { try base.listing(path) }
    func attributes(_ path: String) throws -> FileAttributes? { try base.attributes(path) }
    func read(_ path: String, limit: Int) throws -> [UInt8] {
        let bytes = try base.read(path, limit: limit)
        if let fault = base.fault(at: path), fault != .vanishesOnRead { world.readDamagedCopy(bytes, path: path, device: device) }
        return bytes
    }
    func createDirectory(_ path: String) throws { try base.createDirectory(path) }

    func writeAtomically(_ bytes: [UInt8], to path: String) throws {
        try world.beforeDeviceIO(device)
        try base.writeAtomically(bytes, to: path)
        world.folders[hub]!.written(path, by: device, world: world)
    }

    func remove(_ path: String) throws {
        try world.beforeDeviceIO(device)
        try base.remove(path)
        world.folders[hub]!.removed(path, by: device, world: world)
    }
}

/// A shared folder kept in step by a sync tool (Syncthing, a cloud drive): every member device
/// has its own copy of the folder (an `InMemoryFileSystem`); what one writes or removes reaches
/// the others later, each copy after its own delay (late, sometimes), perhaps first cut short or
/// damaged (fixed by a later copy), perhaps delivered twice. A device cut off from the tool keeps
/// its new files until it is back; one that cannot receive gets them when it can. The tool's
/// "cloud" holds every file that left its device, so a reinstalled device gets them all again.
final class SimFolderHub: @unchecked Sendable {
    /// The folder's path on every device.
    static let root = "/shared"
    /// The largest file a device reads from the folder (small, so that a forger's oversized file
    /// is cheap to make).
    static let maxFileBytes = 1 << 20

    struct File: Hashable {
        var bytes: [UInt8]
        var modified: UInt64
    }

    /// One thing the tool will do on a device: write a copy (with a fault) or remove a file.
    struct Delivery {
        var at: UInt64
        var order: Int
        var device: Int
        var path: String
        var file: File?
        var fault: InMemoryFileSystem.Fault?
    }

    let members: [Int]
    private(set) var fileSystems: [Int: InMemoryFileSystem] = [:]
    /// What left its device: by path.
    private(set) var cloud: [String: File] = [:]
    /// Per device, what it wrote (or removed) while it could not reach the tool: path -> file (nil: removed).
    private var unsent: [Int: [String: File?]] = [:]
    private(set) var deliveries: [Delivery] = []
    private var order = 0
    /// Per device and path, the time of the last thing scheduled, so that copies land in order.
    private var lastScheduled: [String: UInt64] = [:]

    init(members: [Int], clock: @escaping @Sendable () -> UInt64) throws {
        self.members = members
        for member in members { fileSystems[member] = try SimFolderHub.makeFileSystem(clock: clock) }
    }

    static func makeFileSystem(clock: @escaping @Sendable () -> UInt64) throws -> InMemoryFileSystem {
        let fileSystem = InMemoryFileSystem(clock: clock)
        try fileSystem.createDirectory(root)
        return fileSystem
    }

    /// A device's fresh, empty copy of the folder (it was reinstalled): everything in the cloud
    /// comes down again, and what it had not sent is gone.
    func reset(device: Int, clock: @escaping @Sendable () -> UInt64, world: Simulation) throws {
        fileSystems[device] = try SimFolderHub.makeFileSystem(clock: clock)
        unsent[device] = nil
        deliveries.removeAll { $0.device == device }
        for key in lastScheduled.keys where key.hasPrefix("\(device)|") { lastScheduled[key] = nil }
        for (path, file) in cloud.sorted(by: { $0.key < $1.key }) { schedule(file, path: path, to: device, world: world, faults: false) }
    }

    func written(_ path: String, by device: Int, world: Simulation) {
        guard let bytes = fileSystems[device]?.storedBytes(path) else { return }
        let file = File(bytes: bytes, modified: world.clocks.now)
        if world.links[device][world.hubIndex(self)].outboundUp {
            publish(path, file, from: device, world: world)
        } else {
            unsent[device, default: [:]][path] = .some(file)
        }
    }

    func removed(_ path: String, by device: Int, world: Simulation) {
        if world.links[device][world.hubIndex(self)].outboundUp {
            publish(path, nil, from: device, world: world)
        } else {
            unsent[device, default: [:]][path] = .some(nil)
        }
    }

    /// A file from a writer that is no device: the tool carries it to every member like any other.
    func publishForeign(_ path: String, _ bytes: [UInt8], world: Simulation) {
        let file = File(bytes: bytes, modified: world.clocks.now)
        cloud[path] = file
        for member in members { schedule(file, path: path, to: member, world: world, faults: false) }
        world.noteFolderActivity()
    }

    /// Every file under `writer`'s subfolder is damaged everywhere: in the cloud, on every
    /// device, and on its way (bit rot in the cloud copy that the tool then spreads).
    func rot(writer: ReplicaID, world: Simulation) {
        let prefix = "\(SimFolderHub.root)/\(writer)/"
        func damage(_ bytes: [UInt8]) -> [UInt8] {
            var damaged = bytes
            if !damaged.isEmpty { damaged[damaged.count / 2] ^= 0x5A }
            return damaged
        }
        for (path, file) in cloud where path.hasPrefix(prefix) { cloud[path] = File(bytes: damage(file.bytes), modified: file.modified) }
        for (_, fileSystem) in fileSystems.sorted(by: { $0.key < $1.key }) {
            for path in fileSystem.allFiles where path.hasPrefix(prefix) {
                guard let bytes = fileSystem.storedBytes(path) else { continue }
                try? fileSystem.write(damage(bytes), to: path, modified: (try? fileSystem.attributes(path))??.modifiedMilliseconds ?? 0)
            }
        }
        for i in deliveries.indices where deliveries[i].path.hasPrefix(prefix) {
            if let file = deliveries[i].file { deliveries[i].file = File(bytes: damage(file.bytes), modified: file.modified) }
        }
        world.noteFolderActivity()
    }

    /// Forgets what a device kept while cut off (it is gone for good).
    func dropUnsent(device: Int) { unsent[device] = nil }

    /// A device can reach the tool again: what it kept goes out.
    func flush(device: Int, world: Simulation) {
        guard let pending = unsent.removeValue(forKey: device) else { return }
        for (path, file) in pending.sorted(by: { $0.key < $1.key }) { publish(path, file, from: device, world: world) }
    }

    private func publish(_ path: String, _ file: File?, from device: Int, world: Simulation) {
        if let file { cloud[path] = file } else { cloud[path] = nil }
        for member in members where member != device {
            if let file {
                schedule(file, path: path, to: member, world: world, faults: true)
            } else {
                let at = next(member, path, world.clocks.now + world.eventRandom.milliseconds(upTo: world.scenario.folder.propagationSeconds))
                add(Delivery(at: at, order: 0, device: member, path: path, file: nil, fault: nil))
            }
        }
        world.noteFolderActivity()
    }

    /// Schedules a copy of `file` onto `member`, with the scenario's faults.
    private func schedule(_ file: File, path: String, to member: Int, world: Simulation, faults: Bool) {
        let settings = world.scenario.folder
        let random = { (p: Double) in faults && world.faultsOn && world.eventRandom.chance(p) }
        var visible = world.clocks.now + world.eventRandom.milliseconds(upTo: settings.propagationSeconds)
        if random(settings.late) { visible += world.eventRandom.milliseconds(upTo: settings.maxLateSeconds) }
        visible = next(member, path, visible)
        if random(settings.partial) {
            let cut = world.eventRandom.below(max(1, file.bytes.count))
            add(Delivery(at: visible, order: 0, device: member, path: path, file: file, fault: .truncated(cut)))
            visible = next(member, path, visible + 1 + world.eventRandom.milliseconds(upTo: settings.partialSeconds))
        } else if random(settings.corrupt) {
            world.stats.corruptInjected += 1
            let fault = InMemoryFileSystem.Fault.damaged(offset: world.eventRandom.below(max(1, file.bytes.count)),
                                                        mask: UInt8(1 + world.eventRandom.below(255)))
            add(Delivery(at: visible, order: 0, device: member, path: path, file: file, fault: fault))
            visible = next(member, path, visible + 1 + world.eventRandom.milliseconds(upTo: settings.partialSeconds))
        }
        add(Delivery(at: visible, order: 0, device: member, path: path, file: file, fault: nil))
        if random(settings.twice) {
            add(Delivery(at: next(member, path, visible + 1 + world.eventRandom.milliseconds(upTo: settings.propagationSeconds)),
                         order: 0, device: member, path: path, file: file, fault: nil))
        }
    }

    private func next(_ member: Int, _ path: String, _ at: UInt64) -> UInt64 {
        let key = "\(member)|\(path)"
        let time = max(at, (lastScheduled[key] ?? 0) + 1)
        lastScheduled[key] = time
        return time
    }

    private func add(_ delivery: Delivery) {
        var delivery = delivery
        delivery.order = order
        order += 1
        deliveries.append(delivery)
    }

    /// Carries out what is due by `now` on the devices that can receive (all when `all`).
    /// - Returns: whether anything changed on a device.
    @discardableResult
    func deliverDue(now: UInt64, canReceive: (Int) -> Bool, all: Bool = false) -> Bool {
        let due = deliveries.filter { (all || $0.at <= now) && canReceive($0.device) }
        guard !due.isEmpty else { return false }
        let taken = Set(due.map(\.order))
        deliveries.removeAll { taken.contains($0.order) }
        for delivery in due.sorted(by: { ($0.at, $0.order) < ($1.at, $1.order) }) {
            guard let fileSystem = fileSystems[delivery.device] else { continue }
            if let file = delivery.file {
                try? fileSystem.createDirectory(InMemoryFileSystemPaths.parent(delivery.path))
                try? fileSystem.write(file.bytes, to: delivery.path, modified: file.modified, fault: delivery.fault)
            } else {
                try? fileSystem.remove(delivery.path)
            }
        }
        return true
    }

    /// The latest time anything is scheduled (or `now`).
    func settleTime(after now: UInt64) -> UInt64 {
        deliveries.map(\.at).max().map { max($0, now) } ?? now
    }

    /// Every intact file the cloud holds, by path.
    var cloudFiles: [(path: String, bytes: [UInt8])] {
        cloud.sorted { $0.key < $1.key }.map { ($0.key, $0.value.bytes) }
    }

    /// Every bundle the folder holds anywhere (the cloud, every device's copy, copies on their
    /// way, what devices kept while cut off), except on `excluded`.
    func everyBundleBytes(excluding excluded: Int) -> [[UInt8]] {
        var result: [[UInt8]] = cloud.values.map(\.bytes)
        for (device, fileSystem) in fileSystems where device != excluded {
            for path in fileSystem.allFiles { if let bytes = fileSystem.storedBytes(path) { result.append(bytes) } }
        }
        for delivery in deliveries { if let file = delivery.file { result.append(file.bytes) } }
        for (device, pending) in unsent where device != excluded {
            for file in pending.values { if let file { result.append(file.bytes) } }
        }
        return result
    }
}

enum InMemoryFileSystemPaths {
    static func parent(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }
}

enum Network {
    /// Damages a byte so that a bundle's checksum no longer matches.
    static func corrupt(_ bytes: inout [UInt8], _ rng: inout SimRandom) {
        guard !bytes.isEmpty else { return }
        let i = rng.below(bytes.count)
        bytes[i] ^= UInt8(1 + rng.below(255))
    }
}

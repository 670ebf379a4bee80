import NotesCRDT

/// The simulator's one source of randomness: SplitMix64, seeded. Every random choice of a run
/// (device and note identities, the schedule, network faults, retry jitter) comes from generators
/// derived from the run's seed, so a seed replays a run exactly.
public struct SimRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator whose stream is determined by `seed`.
    public init(seed: UInt64) { state = seed }

    /// A generator for a sub-stream: same seed and salt, same stream; different salts, unrelated ones.
    public init(seed: UInt64, salt: UInt64) {
        var mixer = SimRandom(seed: seed ^ (salt &* 0xD1B5_4A32_D192_ED03))
        state = mixer.next()
    }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1330_11EB
        return z ^ (z >> 31)
    }

    /// True with probability `p`.
    mutating func chance(_ p: Double) -> Bool {
        p > 0 && Double(next() >> 11) * 0x1p-53 < p
    }

    /// A value in 0..<1.
    mutating func unit() -> Double { Double(next() >> 11) * 0x1p-53 }

    /// A value in 0..<n (n > 0).
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(max(n, 1))) }

    /// Milliseconds in 0...seconds.
    mutating func milliseconds(upTo seconds: Double) -> UInt64 {
        let limit = UInt64(max(0, seconds * 1000))
        return limit == 0 ? 0 : next() % (limit + 1)
    }
}

/// One pre-generated event of a run. The schedule is a list of these, made from the seed before
/// the run starts; a run executes a schedule (or, when shrinking, a subset of it), so every event
/// carries the random payload it needs and does not depend on the events before it being there.
public struct SimEvent: Codable, Hashable, Sendable {
    /// What an event does: an edit, a sync, a partition or its heal, a crash (perhaps in the middle
    /// of a sync), a reinstall (perhaps in the middle of a sync), a clock jump, a death, a forgery
    /// in a folder, an intrusion at a relay, or a copy of another device's database.
    public enum Kind: String, Codable, Sendable {
        case edit, sync, partition, heal, crash, crashDuringSync, reinstall, reinstallDuringSync, clockJump, death, forgery, intrusion, copy
        /// A backup of the device's database is taken; a later `restore` copies it back over it.
        case backup, restore
        /// A member device forges a sealed change in another device's name (encrypted scenarios).
        case memberForgery
        /// The device's disk is cloned (the file identity kept), and both type on one run.
        case clone
        /// A peer's changes reach the device in a shuffled order, a few at a time.
        case outOfOrder
        /// The database of another device (picked by the payload) is copied onto the device
        /// keeping its file identity: both write as one replica identity from then on.
        case fork
        /// The power goes at one of the first commits of a sync (`edit` nil) or of an edit (`edit`),
        /// and the device restarts.
        case crashAtCommit
    }

    /// Milliseconds since the start of the run.
    public var time: UInt64
    /// What the event does.
    public var kind: Kind
    /// The device it happens to, or -1 for forgeries and intrusions (which come from no device).
    public var device: Int
    /// The hub (index), or -1 for every hub the device is attached to.
    public var hub: Int
    /// For edits.
    public var edit: EditKind?
    /// For partitions and heals.
    public var direction: Scenario.Direction?
    /// For clock jumps: milliseconds (negative: back).
    public var amount: Int64
    /// The event's own randomness: which note, which place, which word, which faults.
    public var payload: UInt64

    init(time: UInt64, kind: Kind, device: Int, hub: Int = -1, edit: EditKind? = nil,
         direction: Scenario.Direction? = nil, amount: Int64 = 0, payload: UInt64) {
        self.time = time
        self.kind = kind
        self.device = device
        self.hub = hub
        self.edit = edit
        self.direction = direction
        self.amount = amount
        self.payload = payload
    }
}

/// Makes the schedule of a run from its seed.
public enum ScheduleGenerator {
    /// The schedule of events for `scenario` and `seed`, in time order (ties keep generation order).
    public static func events(for scenario: Scenario, seed: UInt64) -> [SimEvent] {
        var rng = SimRandom(seed: seed, salt: 1)
        let duration = UInt64(scenario.durationSeconds * 1000)
        var events: [SimEvent] = []
        func at() -> UInt64 { duration == 0 ? 0 : rng.next() % duration }
        // Coarse times (whole seconds) so that independent events also share milliseconds now and then.
        func coarse() -> UInt64 { at() / 1000 * 1000 }

        let kinds = EditKind.allCases.filter { (scenario.workload.mix[$0.rawValue] ?? 0) > 0 }
        let weights = kinds.map { scenario.workload.mix[$0.rawValue] ?? 0 }
        let total = weights.reduce(0, +)
        func pickKind() -> EditKind {
            var x = rng.unit() * total
            for (kind, weight) in zip(kinds, weights) {
                if x < weight { return kind }
                x -= weight
            }
            return kinds.last ?? .type
        }

        // Edits; some come as bursts on several devices at the same millisecond.
        let devices = scenario.devices
        if !kinds.isEmpty {
            var remaining = Array(repeating: scenario.workload.editsPerDevice, count: devices)
            var device = 0
            while remaining.contains(where: { $0 > 0 }) {
                while remaining[device] == 0 { device = (device + 1) % devices }
                let time = rng.chance(0.3) ? coarse() : at()
                let kind = pickKind()
                let payload = rng.next()
                var group = [device]
                if devices > 1, rng.chance(scenario.workload.burst) {
                    let size = min(max(2, scenario.workload.burstSize), devices)
                    var others = (0 ..< devices).filter { $0 != device && remaining[$0] > 0 }
                    while group.count < size, !others.isEmpty {
                        group.append(others.remove(at: rng.below(others.count)))
                    }
                }
                for member in group {
                    remaining[member] -= 1
                    events.append(SimEvent(time: time, kind: .edit, device: member, edit: kind, payload: payload))
                    if rng.chance(scenario.sync.afterEdit) {
                        let hubs = hubIndexes(of: member, in: scenario)
                        events.append(SimEvent(time: time + 1 + rng.milliseconds(upTo: 2), kind: .sync, device: member,
                                               hub: hubs[rng.below(hubs.count)], payload: rng.next()))
                    }
                }
                device = (device + 1) % devices
            }
        }

        // Periodic syncs.
        for device in 0 ..< devices {
            for hub in hubIndexes(of: device, in: scenario) {
                for _ in 0 ..< scenario.sync.syncsPerDevice {
                    events.append(SimEvent(time: at(), kind: .sync, device: device, hub: hub, payload: rng.next()))
                }
            }
        }

        // Scheduled partitions.
        for partition in scenario.partitions {
            let hub = partition.hub.flatMap { name in scenario.hubs.firstIndex { $0.name == name } } ?? -1
            let start = UInt64(max(0, partition.startSeconds) * 1000)
            let end = UInt64(max(partition.startSeconds, partition.endSeconds) * 1000)
            for device in partition.devices {
                events.append(SimEvent(time: start, kind: .partition, device: device, hub: hub, direction: partition.direction, payload: 0))
                events.append(SimEvent(time: end, kind: .heal, device: device, hub: hub, direction: partition.direction, payload: 0))
            }
        }
        // Random partitions.
        for _ in 0 ..< scenario.faults.randomPartitions {
            let device = rng.below(devices)
            let hubs = hubIndexes(of: device, in: scenario)
            let hub = hubs[rng.below(hubs.count)]
            let direction: Scenario.Direction = rng.chance(scenario.faults.oneWay) ? (rng.chance(0.5) ? .outbound : .inbound) : .both
            let start = at()
            let end = start + rng.milliseconds(upTo: scenario.faults.maxPartitionSeconds)
            events.append(SimEvent(time: start, kind: .partition, device: device, hub: hub, direction: direction, payload: 0))
            events.append(SimEvent(time: end, kind: .heal, device: device, hub: hub, direction: direction, payload: 0))
        }

        // Clocks.
        for jump in scenario.clocks.jumps {
            events.append(SimEvent(time: UInt64(max(0, jump.atSeconds) * 1000), kind: .clockJump, device: jump.device,
                                   amount: Int64(jump.bySeconds * 1000), payload: 0))
        }
        for _ in 0 ..< scenario.clocks.randomJumps {
            let by = Int64(rng.milliseconds(upTo: scenario.clocks.maxJumpSeconds))
            events.append(SimEvent(time: at(), kind: .clockJump, device: rng.below(devices),
                                   amount: rng.chance(0.5) ? -by : by, payload: 0))
        }

        // Crashes and reinstalls.
        for item in scenario.faults.crashAt {
            events.append(SimEvent(time: UInt64(max(0, item.atSeconds) * 1000), kind: .crash, device: item.device, payload: rng.next()))
        }
        for _ in 0 ..< scenario.faults.crashes {
            let device = rng.below(devices)
            let hubs = hubIndexes(of: device, in: scenario)
            let kind: SimEvent.Kind = rng.chance(1.0 / 3) ? .crashDuringSync : .crash
            events.append(SimEvent(time: at(), kind: kind, device: device, hub: hubs[rng.below(hubs.count)], payload: rng.next()))
        }
        for _ in 0 ..< scenario.faults.crashesAtCommit {
            let device = rng.below(devices)
            let hubs = hubIndexes(of: device, in: scenario)
            let edit: EditKind? = kinds.isEmpty || rng.chance(0.5) ? nil : pickKind()
            events.append(SimEvent(time: at(), kind: .crashAtCommit, device: device, hub: hubs[rng.below(hubs.count)], edit: edit, payload: rng.next()))
        }
        for item in scenario.faults.reinstallAt {
            events.append(SimEvent(time: UInt64(max(0, item.atSeconds) * 1000), kind: .reinstall, device: item.device, payload: rng.next()))
        }
        for _ in 0 ..< scenario.faults.reinstalls {
            events.append(SimEvent(time: at(), kind: .reinstall, device: rng.below(devices), payload: rng.next()))
        }
        for _ in 0 ..< scenario.faults.reinstallsDuringSync {
            let device = rng.below(devices)
            let hubs = hubIndexes(of: device, in: scenario)
            events.append(SimEvent(time: at(), kind: .reinstallDuringSync, device: device, hub: hubs[rng.below(hubs.count)], payload: rng.next()))
        }
        for _ in 0 ..< scenario.faults.copies {
            events.append(SimEvent(time: at(), kind: .copy, device: rng.below(devices), payload: rng.next()))
        }
        for _ in 0 ..< scenario.faults.restores {
            let device = rng.below(devices)
            let (first, second) = (at(), at())
            events.append(SimEvent(time: min(first, second), kind: .backup, device: device, payload: rng.next()))
            events.append(SimEvent(time: max(first, second), kind: .restore, device: device, payload: rng.next()))
        }
        for item in scenario.faults.deaths {
            events.append(SimEvent(time: UInt64(max(0, item.atSeconds) * 1000), kind: .death, device: item.device, payload: rng.next()))
        }
        for (hub, description) in scenario.hubs.enumerated() {
            let count = description.kind == .folder ? scenario.faults.forgeries : scenario.faults.intrusions
            for _ in 0 ..< count {
                events.append(SimEvent(time: at(), kind: description.kind == .folder ? .forgery : .intrusion, device: -1, hub: hub,
                                       payload: rng.next()))
            }
        }

        for _ in 0 ..< scenario.faults.memberForgeries {
            events.append(SimEvent(time: at(), kind: .memberForgery, device: rng.below(devices), payload: rng.next()))
        }

        // Last, so that the schedules of scenarios without clones stay as they were.
        for _ in 0 ..< scenario.faults.clones {
            events.append(SimEvent(time: at(), kind: .clone, device: rng.below(devices), payload: rng.next()))
        }

        for _ in 0 ..< scenario.faults.outOfOrder {
            events.append(SimEvent(time: at(), kind: .outOfOrder, device: rng.below(devices), payload: rng.next()))
        }

        // Last, so that the schedules of scenarios without forks stay as they were.
        for _ in 0 ..< scenario.faults.forks {
            events.append(SimEvent(time: at(), kind: .fork, device: rng.below(devices), payload: rng.next()))
        }

        // Stable sort by time: events at the same millisecond keep their generation order.
        return events.enumerated().sorted { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }.map(\.element)
    }

    /// The hubs device `device` is attached to.
    static func hubIndexes(of device: Int, in scenario: Scenario) -> [Int] {
        scenario.hubs.indices.filter { scenario.members(ofHub: $0).contains(device) }
    }
}

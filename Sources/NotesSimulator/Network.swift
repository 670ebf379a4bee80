import Foundation
import NotesCRDT
import NotesSync

/// The virtual clock of a run and every device's skew from it. Nothing in a run reads the real
/// clock: stores get a `DeviceClock`, the sync engine's sleeps advance `now`.
final class ClockState: @unchecked Sendable {
    /// The run starts at this wall-clock time (2024-01-01), so timestamps look like real ones.
    static let epoch: UInt64 = 1_704_067_200_000
    /// Virtual wall-clock milliseconds.
    var now: UInt64 = ClockState.epoch
    /// Per device: how far its clock is off (milliseconds, either way).
    var skews: [Int64]

    init(devices: Int) { skews = Array(repeating: 0, count: devices) }

    /// Milliseconds since the start of the run.
    var elapsed: UInt64 { now - ClockState.epoch }

    func reading(for device: Int) -> UInt64 {
        let value = Int64(bitPattern: now) &+ skews[device]
        return UInt64(max(0, value))
    }
}

/// The wall clock a simulated device's store reads: virtual time plus the device's skew.
struct DeviceClock: WallClock {
    let clocks: ClockState
    let device: Int
    func milliseconds() -> UInt64 { clocks.reading(for: device) }
}

/// A device's random bits for its stores (`StoreOptions.entropy`), from the run's seed.
final class SimEntropy: @unchecked Sendable {
    private let lock = NSLock()
    private var random: SimRandom

    init(_ random: SimRandom) { self.random = random }

    func next() -> UInt64 { lock.withLock { random.next() } }
}

/// Whether a device can reach a hub: counts of the partitions that cut each direction.
struct LinkState {
    var outboundCuts = 0
    var inboundCuts = 0
    var outboundUp: Bool { outboundCuts == 0 }
    var inboundUp: Bool { inboundCuts == 0 }
}

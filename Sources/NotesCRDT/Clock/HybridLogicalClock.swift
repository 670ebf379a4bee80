/// A hybrid logical clock timestamp: 48 bits of wall-clock milliseconds, then 16 bits of counter.
///
/// Compared as one 64-bit number. The counter may carry into the millisecond bits when more than
/// 65,535 operations are stamped within one millisecond; order is all that matters.
public struct Timestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The packed 64-bit value.
    public var rawValue: UInt64

    /// Wraps a packed value.
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// A timestamp at the start of the given wall-clock millisecond.
    public init(milliseconds: UInt64, counter: UInt16 = 0) {
        self.rawValue = milliseconds << 16 | UInt64(counter)
    }

    /// The wall-clock milliseconds part.
    public var milliseconds: UInt64 { rawValue >> 16 }

    /// The counter part.
    public var counter: UInt16 { UInt16(truncatingIfNeeded: rawValue) }

    /// The timestamp `n` steps later.
    public func advanced(by n: UInt64) -> Timestamp { Timestamp(rawValue: rawValue &+ n) }

    /// The earliest timestamp: zero milliseconds, counter zero.
    public static let zero = Timestamp(rawValue: 0)

    /// Whether `lhs` comes before `rhs`.
    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The milliseconds and the counter, as `milliseconds.counter`.
    public var description: String { "\(milliseconds).\(counter)" }
}

/// Where a replica reads wall-clock time from. The core never reads the system clock itself:
/// a simulator passes a virtual clock, an app passes `SystemWallClock`.
public protocol WallClock: Sendable {
    /// Milliseconds since the Unix epoch.
    func milliseconds() -> UInt64
}

/// A wall clock that always reads the same value; for tests and deterministic replays.
public struct FixedWallClock: WallClock {
    /// The value it reads.
    public var value: UInt64
    /// Creates a clock that always reads `value` milliseconds.
    public init(_ value: UInt64) { self.value = value }
    /// The fixed value.
    public func milliseconds() -> UInt64 { value }
}

/// A hybrid logical clock (Kulkarni et al.): increasing on one replica, raised above every
/// timestamp received (the Lamport rule), and close to wall-clock time when clocks are sane.
///
/// Received timestamps move the clock no more than `maxForwardDrift` milliseconds ahead of the
/// wall clock (a peer whose clock is set to next year does not drag ours, and every write we make
/// afterwards, with it), and a clock found more than twice that ahead (our own wall clock was
/// ahead and has been corrected) ticks from the wall clock again. So timestamps increase on a
/// replica except across such a correction; the notebook keeps every write above the one it
/// replaces by itself (Docs/Architecture.md).
public struct HybridLogicalClock: Sendable, Equatable {
    /// The last timestamp issued or observed.
    public private(set) var last: Timestamp
    /// How far ahead of local wall time a received timestamp may move the clock, in milliseconds.
    public var maxForwardDrift: UInt64

    /// The default bound on forward drift: one minute.
    public static let defaultMaxForwardDrift: UInt64 = 60_000

    /// Creates a clock that has issued nothing yet (or resumes from `last`).
    public init(last: Timestamp = .zero, maxForwardDrift: UInt64 = HybridLogicalClock.defaultMaxForwardDrift) {
        self.last = last
        self.maxForwardDrift = maxForwardDrift
    }

    /// Issues `count` consecutive timestamps and returns the first one.
    ///
    /// - Complexity: O(1).
    public mutating func tick(wallMilliseconds: UInt64, count: UInt64 = 1) -> Timestamp {
        let physical = Timestamp(milliseconds: wallMilliseconds)
        // A clock more than twice `maxForwardDrift` ahead of the wall clock (ours was set years
        // ahead, then corrected: received timestamps raise it only to one bound) comes back to it
        // rather than stamping years ahead until then. Writes still beat what they replace: a
        // local write jumps past a register's or a character's key when it must
        // (`Notebook.commitLocal`, `commitInsert`).
        let ceiling = Timestamp(milliseconds: wallMilliseconds &+ 2 &* maxForwardDrift, counter: .max)
        let first = last > ceiling ? physical : max(physical, last.advanced(by: 1))
        last = first.advanced(by: max(count, 1) - 1)
        return first
    }

    /// Records that a timestamp was issued elsewhere on this replica (a run continuation that took
    /// the timestamp after its origin), so later ticks stay above it.
    public mutating func witnessLocal(_ timestamp: Timestamp) {
        if timestamp > last { last = timestamp }
    }

    /// Takes a received timestamp into account: the clock moves to it, but never past
    /// `wallMilliseconds + maxForwardDrift`.
    ///
    /// - Returns: `true` when the remote timestamp was beyond the bound and was clamped.
    @discardableResult
    public mutating func observe(_ remote: Timestamp, wallMilliseconds: UInt64) -> Bool {
        let ceiling = Timestamp(milliseconds: wallMilliseconds &+ maxForwardDrift, counter: .max)
        let clamped = remote > ceiling
        let target = clamped ? ceiling : remote
        if target > last { last = target }
        return clamped
    }
}

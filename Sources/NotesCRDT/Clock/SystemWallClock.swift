#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The system's real-time clock. The only place the core reads time from the outside world; pass a
/// different `WallClock` for deterministic runs.
public struct SystemWallClock: WallClock {
    /// Creates the system clock.
    public init() {}
    /// The current real time in milliseconds since the Unix epoch.
    public func milliseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt64(ts.tv_sec) * 1000 + UInt64(ts.tv_nsec) / 1_000_000
    }
}

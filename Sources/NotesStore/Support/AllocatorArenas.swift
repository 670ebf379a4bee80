#if canImport(Glibc)
import Glibc
#endif

/// The C allocator's arenas, for a process that syncs (Linux with glibc; elsewhere nothing).
public enum AllocatorArenas {
    /// Makes every thread allocate from one arena (`mallopt(M_ARENA_MAX, 1)`); call it at the
    /// start of a process, before it starts threads.
    ///
    /// glibc gives each thread that allocates while another holds the lock an arena of its own, and
    /// memory freed into an arena serves only the threads of that arena. A pull decodes pages on
    /// the concurrency pool's threads and applies them on a thread of its own, so the decoders'
    /// freed pages could not be reused by the replica as it grew: 216 MiB of peak RSS for the
    /// 80,000-note bootstrap against 199 MiB in one arena, for the same time (Docs/Performance.md).
    /// A server with many busy threads (`crdt-sync serve`) is better off with glibc's default.
    ///
    /// - Returns: whether the setting was taken (false where there is no glibc `mallopt`).
    @discardableResult
    public static func useOne() -> Bool {
        #if canImport(Glibc)
        // mallopt is not in Swift's Glibc module: looked up by name (RTLD_DEFAULT is glibc's null handle).
        typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") else { return false }
        let arenaMax: Int32 = -8  // M_ARENA_MAX in malloc.h
        return unsafeBitCast(symbol, to: Mallopt.self)(arenaMax, 1) == 1
        #else
        return false
        #endif
    }
}

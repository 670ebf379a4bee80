#if canImport(Glibc)
import Glibc
#endif

/// Process-wide SQLite settings for running many in-memory stores on several threads at once.
///
/// SQLite keeps memory statistics (`sqlite3_memory_used`, `sqlite3_status`) by default, and every
/// `sqlite3_malloc` and `sqlite3_free` of every connection then takes one process-wide mutex, on
/// which simulations running on several threads queue. Nothing in this
/// project reads those statistics (nor does GRDB), so the simulator turns them off:
/// `sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0)`. SQLite's results are the same either way.
///
/// `sqlite3_config` must run before SQLite initializes (the first connection opened in the
/// process); later it returns `SQLITE_MISUSE` and changes nothing, which is harmless: the runs are
/// the same, only slower in parallel. It is C-variadic, which Swift cannot call directly; it is
/// called through a pointer of the non-variadic type with the same integer arguments, which the
/// Linux calling conventions (x86-64 System V, AArch64) pass identically. Elsewhere this does
/// nothing.
enum SQLiteTuning {
    /// `SQLITE_CONFIG_MEMSTATUS` from sqlite3.h.
    private static let configMemoryStatus: Int32 = 9

    /// Whether the statistics were turned off (false: SQLite was already initialized, or not Linux).
    static let memoryStatisticsOff: Bool = {
        #if os(Linux)
        guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "sqlite3_config") else { return false }
        typealias Config = @convention(c) (Int32, Int32) -> Int32
        let config = unsafeBitCast(symbol, to: Config.self)
        return config(configMemoryStatus, 0) == 0  // SQLITE_OK
        #else
        return false
        #endif
    }()

    /// Applies the settings once, before the first store of the process is opened.
    static func prepare() { _ = memoryStatisticsOff }
}

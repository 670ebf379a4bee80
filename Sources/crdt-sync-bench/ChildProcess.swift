import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A program run as a child process, timed from just before it is spawned to the moment it is
/// reaped, with its own resource usage (`wait4`), which `Process` does not give.
///
/// On Linux the child's `ru_maxrss` is never below the spawning process's own peak: posix_spawn
/// starts the child in the parent's memory (vfork), and exec records that memory's high-water
/// mark in the child's before replacing it. So whatever spawns the commands must stay small:
/// `scale` spawns them through `ScaleLauncher`, started before it has done anything.
struct ChildRun: Sendable, Codable {
    /// Wall time from spawn to reap, in nanoseconds.
    var nanoseconds: UInt64
    /// The child's peak resident set size, in bytes (`ru_maxrss`; never below the parent's, above).
    var peakRSSBytes: Int
    /// The exit code, or 128 + the signal that ended it.
    var status: Int32

    var milliseconds: Double { Double(nanoseconds) / 1e6 }
    var peakRSSMegabytes: Double { Double(peakRSSBytes) / 1_048_576 }
}

/// A child process still running (a relay), to be stopped and reaped.
struct RunningChild: Sendable, Codable {
    var pid: pid_t
    var started: UInt64
}

/// Why a child could not be run, or what it said when it failed.
struct ChildProcessError: Error, CustomStringConvertible {
    var description: String
}

enum ChildProcess {
    /// Where a child's standard output or error goes.
    enum Sink: Codable {
        case discard
        case file(String)
        /// This process's own.
        case inherit
        /// A descriptor of this process (a pipe's end).
        case descriptor(Int32)
    }

    /// This process's own peak resident set size, in megabytes.
    static func ownPeakRSSMegabytes() -> Double {
        var usage = rusage()
        #if os(Linux)
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_maxrss) / 1024
        #else
        getrusage(RUSAGE_SELF, &usage)
        return Double(usage.ru_maxrss) / 1_048_576
        #endif
    }

    /// Monotonic time in nanoseconds.
    static func now() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }

    /// Starts `executable` with `arguments` and returns without waiting.
    static func spawn(_ executable: String, _ arguments: [String], stdin: Int32? = nil, stdout: Sink = .discard, stderr: Sink = .discard,
                      environment extra: [String: String] = [:]) throws -> RunningChild {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let stdin {
            posix_spawn_file_actions_adddup2(&actions, stdin, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        for (descriptor, sink) in [(Int32(1), stdout), (Int32(2), stderr)] {
            switch sink {
            case .discard: posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", O_WRONLY, 0)
            case .file(let path): posix_spawn_file_actions_addopen(&actions, descriptor, path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            case .inherit: break
            case .descriptor(let source): posix_spawn_file_actions_adddup2(&actions, source, descriptor)
            }
        }
        var environment = ProcessInfo.processInfo.environment
        for (key, value) in extra { environment[key] = value }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let started = now()
        let result = posix_spawn(&pid, executable, &actions, nil, argv, envp)
        guard result == 0 else {
            throw ChildProcessError(description: "cannot run \(executable): \(String(cString: strerror(result)))")
        }
        return RunningChild(pid: pid, started: started)
    }

    /// Waits for `child` to end and returns its time, peak memory and exit status.
    static func wait(_ child: RunningChild) throws -> ChildRun {
        try reap(child, options: 0)!
    }

    /// The child's figures if it has ended, else nil (it is still running).
    static func poll(_ child: RunningChild) throws -> ChildRun? {
        try reap(child, options: WNOHANG)
    }

    private static func reap(_ child: RunningChild, options: Int32) throws -> ChildRun? {
        var status: Int32 = 0
        var usage = rusage()
        while true {
            let reaped = wait4(child.pid, &status, options, &usage)
            if reaped == child.pid { break }
            if reaped == 0 { return nil }
            guard errno == EINTR else { throw ChildProcessError(description: "wait4: \(String(cString: strerror(errno)))") }
        }
        let elapsed = now() - child.started
        // The encoding of <sys/wait.h>: the low 7 bits are the signal, the next byte the exit code.
        let signal = status & 0x7F
        let code = signal == 0 ? (status >> 8) & 0xFF : 128 + signal
        #if os(Linux)
        let rss = Int(usage.ru_maxrss) * 1024  // kilobytes on Linux
        #else
        let rss = Int(usage.ru_maxrss)  // bytes on macOS
        #endif
        return ChildRun(nanoseconds: elapsed, peakRSSBytes: rss, status: code)
    }

    /// Runs `executable` to the end.
    static func run(_ executable: String, _ arguments: [String], stdout: Sink = .discard, stderr: Sink = .discard,
                    environment: [String: String] = [:]) throws -> ChildRun {
        try wait(spawn(executable, arguments, stdout: stdout, stderr: stderr, environment: environment))
    }
}

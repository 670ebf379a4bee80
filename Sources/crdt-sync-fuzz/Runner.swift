import BundleFuzz
import Foundation

/// The parent of a fuzz run: hands out ranges of cases to worker processes, reads what each
/// says of every case, and survives the ones that crash or hang.
final class Runner: @unchecked Sendable {
    let command: FuzzCommand
    let lock = NSLock()
    var nextCase: UInt64 = 0
    var done: UInt64 = 0
    var accepted: UInt64 = 0
    var acceptedWithQuarantine: UInt64 = 0
    /// Record pages (format version 5) among the cases: accepted, and refused.
    var recordPages: (accepted: UInt64, rejected: UInt64) = (0, 0)
    /// Sealed bundles (format version 4): decoded and refused, and their units opened and refused by the store.
    var sealed: (accepted: UInt64, rejected: UInt64, opened: UInt64, refused: UInt64) = (0, 0, 0, 0)
    /// Cases in the receiving store's own name: decoded, refused, and those that moved the store.
    var ownIdentity: (accepted: UInt64, rejected: UInt64, moved: UInt64, refusedChanges: UInt64) = (0, 0, 0, 0)
    /// Cases that re-issue operations: applied, refused, those that withdrew operations from
    /// the store, and the model's replays of the log in all (and the most in one case).
    var reissue: (accepted: UInt64, rejected: UInt64, withdrew: UInt64, rebuilds: UInt64, mostRebuilds: UInt64) = (0, 0, 0, 0, 0)
    /// Per known fault of the code under test (`FuzzDriver.knownIssues`), the cases that met it
    /// and the seed of one.
    var knownIssues = Array(repeating: (count: UInt64(0), seed: UInt64(0), index: UInt64(0)), count: FuzzDriver.knownIssues.count)
    var rejected: [String: UInt64] = [:]
    var crashes: [(index: UInt64, seed: UInt64, how: String)] = []
    var hangs: [(index: UInt64, seed: UInt64)] = []
    var failures: [String] = []
    var slowest: (milliseconds: Double, seed: UInt64) = (0, 0)
    var peakWorkerKilobytes = 0

    init(command: FuzzCommand) { self.command = command }

    /// The next range of cases to run, or nil when all are handed out.
    func take() -> Range<UInt64>? {
        lock.lock(); defer { lock.unlock() }
        guard nextCase < command.cases else { return nil }
        let end = nextCase + min(command.chunk, command.cases - nextCase)
        defer { nextCase = end }
        return nextCase ..< end
    }

    func run() throws {
        let workers = command.workers ?? ProcessInfo.processInfo.activeProcessorCount
        let started = Date()
        FileHandle.standardError.write(Data("crdt-sync-fuzz: \(command.cases) cases from seed \(command.seed), \(workers) workers, \(command.timeout) s of CPU time per case\n".utf8))
        let group = DispatchGroup()
        for _ in 0 ..< workers {
            group.enter()
            Thread.detachNewThread { [self] in
                while let range = take() { runRange(range) }
                group.leave()
            }
        }
        while group.wait(timeout: .now() + 15) == .timedOut {
            lock.lock()
            let line = "  \(done) of \(command.cases) cases, \(crashes.count) crashes, \(hangs.count) hangs, \(failures.count) failures, \(Int(Date().timeIntervalSince(started))) s\n"
            lock.unlock()
            FileHandle.standardError.write(Data(line.utf8))
        }
        printSummary(seconds: Date().timeIntervalSince(started))
        if !crashes.isEmpty || !hangs.isEmpty || !failures.isEmpty { throw ExitCodeError() }
    }

    struct ExitCodeError: Error, CustomStringConvertible {
        var description: String { "crashes, hangs or failures (above)" }
    }

    /// Runs `range` in workers until every case in it is accounted for: a worker that dies or
    /// hangs is replaced by one that starts after the case it was on.
    func runRange(_ range: Range<UInt64>) {
        var start = range.lowerBound
        while start < range.upperBound {
            start = runWorker(start ..< range.upperBound)
        }
    }

    /// One worker process on `range`; returns where the next one must start.
    func runWorker(_ range: Range<UInt64>) -> UInt64 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0].hasPrefix("/")
            ? CommandLine.arguments[0] : FileManager.default.currentDirectoryPath + "/" + CommandLine.arguments[0])
        if let resolved = Bundle.main.executableURL { process.executableURL = resolved }
        process.arguments = ["--worker", "--seed", "\(command.seed)", "--from", "\(range.lowerBound)", "--to", "\(range.upperBound)"]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            FileHandle.standardError.write(Data("crdt-sync-fuzz: cannot start a worker: \(error)\n".utf8))
            exit(2)
        }
        let fd = pipe.fileHandleForReading.fileDescriptor
        var buffer: [UInt8] = []
        var current: UInt64?  // the case started and not finished
        var next = range.lowerBound
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        // A case hangs when it spends the timeout in CPU time, or six times it in wall time
        // (blocked): wall time alone counted a worker starved by other load as hanging.
        let pollMilliseconds = Int32(min(max(command.timeout * 1000 / 4, 1), 1000))
        let clock = CaseClock(pid: process.processIdentifier)
        while true {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, pollMilliseconds)
            if ready == 0 {
                guard clock.overLimit(cpu: command.timeout, wall: command.timeout * 6) else { continue }
                // The case it is on hangs.
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                let index = current ?? next
                record { $0.hangs.append((index, FuzzDriver.caseSeed(self.command.seed, index))); $0.done += 1 }
                return index + 1
            }
            if ready < 0 { if errno == EINTR { continue } else { break } }
            let count = read(fd, &chunk, chunk.count)
            if count <= 0 { break }
            clock.restart()
            buffer.append(contentsOf: chunk[0 ..< count])
            while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[0 ..< newline], as: UTF8.self)
                buffer.removeSubrange(0 ... newline)
                let fields = line.split(separator: " ", maxSplits: 2).map(String.init)
                guard let tag = fields.first else { continue }
                if tag == "M" {
                    let kilobytes = Int(fields.count > 1 ? fields[1] : "0") ?? 0
                    record { $0.peakWorkerKilobytes = max($0.peakWorkerKilobytes, kilobytes) }
                    continue
                }
                guard fields.count >= 2, let index = UInt64(fields[1]) else { continue }
                if tag == "S" {
                    current = index
                    continue
                }
                current = nil
                next = index + 1
                let rest = fields.count > 2 ? fields[2] : ""
                let milliseconds = Double(rest.split(separator: " ").last ?? "0") ?? 0
                let caseSeed = FuzzDriver.caseSeed(command.seed, index)
                record { runner in
                    runner.done += 1
                    if FuzzDriver.isRecordPage(caseSeed), tag == "A" || tag == "R" {
                        if tag == "A" { runner.recordPages.accepted += 1 } else { runner.recordPages.rejected += 1 }
                    }
                    if FuzzDriver.isSealed(caseSeed), tag == "R" { runner.sealed.rejected += 1 }
                    if FuzzDriver.isOwnIdentity(caseSeed), tag == "R" { runner.ownIdentity.rejected += 1 }
                    if FuzzDriver.isReissue(caseSeed), tag == "R" { runner.reissue.rejected += 1 }
                    switch tag {
                    case "U":
                        runner.accepted += 1
                        let counts = rest.split(separator: " ").map { UInt64($0) ?? 0 }
                        if counts.count >= 3 {
                            if counts[0] > 0 { runner.acceptedWithQuarantine += 1 }
                            runner.sealed.accepted += 1
                            runner.sealed.opened += counts[1]
                            runner.sealed.refused += counts[2]
                        }
                    case "O":
                        runner.accepted += 1
                        let counts = rest.split(separator: " ").map { UInt64($0) ?? 0 }
                        runner.ownIdentity.accepted += 1
                        if counts.count >= 2 {
                            runner.ownIdentity.refusedChanges += counts[0]
                            runner.ownIdentity.moved += counts[1]
                        }
                    case "K":
                        if let known = Int(rest.split(separator: " ").first ?? ""), runner.knownIssues.indices.contains(known) {
                            if runner.knownIssues[known].count == 0 { runner.knownIssues[known].seed = caseSeed; runner.knownIssues[known].index = index }
                            runner.knownIssues[known].count += 1
                        }
                    case "E":
                        runner.accepted += 1
                        let counts = rest.split(separator: " ").map { UInt64($0) ?? 0 }
                        runner.reissue.accepted += 1
                        if counts.count >= 2 {
                            runner.reissue.rebuilds += counts[0]
                            runner.reissue.mostRebuilds = max(runner.reissue.mostRebuilds, counts[0])
                            runner.reissue.withdrew += counts[1]
                        }
                    case "A":
                        runner.accepted += 1
                        if rest.split(separator: " ").first.map({ $0 != "0" }) == true { runner.acceptedWithQuarantine += 1 }
                    case "R":
                        runner.rejected[String(rest.split(separator: " ").first ?? "?"), default: 0] += 1
                    default:
                        runner.failures.append("case \(index): \(rest)")
                    }
                    if milliseconds > runner.slowest.milliseconds { runner.slowest = (milliseconds, caseSeed) }
                }
            }
        }
        process.waitUntilExit()
        if let index = current {
            // The worker died inside a case.
            let how = process.terminationReason == .uncaughtSignal ? "signal \(process.terminationStatus)" : "exit \(process.terminationStatus)"
            record { $0.crashes.append((index, FuzzDriver.caseSeed(self.command.seed, index), how)); $0.done += 1 }
            return index + 1
        }
        if next < range.upperBound {
            // It ended between cases without finishing: count the next one as the crash.
            record { $0.crashes.append((next, FuzzDriver.caseSeed(self.command.seed, next), "ended early")); $0.done += 1 }
            return next + 1
        }
        return range.upperBound
    }

    func record(_ body: (Runner) -> Void) {
        lock.lock(); defer { lock.unlock() }
        body(self)
    }

    func printSummary(seconds: Double) {
        let rejectedTotal = rejected.values.reduce(0, +)
        var out = "crdt-sync-fuzz: \(done) cases from seed \(command.seed) in \(String(format: "%.0f", seconds)) s (\(String(format: "%.0f", Double(done) / max(seconds, 0.001))) cases/s)\n"
        out += "  crashes:  \(crashes.count)\n"
        out += "  hangs:    \(hangs.count) (over \(command.timeout) s of CPU time, or \(command.timeout * 6) s of wall time)\n"
        out += "  failures: \(failures.count) (a store that threw, digests that differ, no round trip)\n"
        out += "  rejected: \(rejectedTotal) (" + rejected.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + ")\n"
        out += "  accepted: \(accepted) (\(acceptedWithQuarantine) of them with a quarantined change)\n"
        out += "  record pages (version 5): \(recordPages.accepted) accepted, \(recordPages.rejected) rejected\n"
        out += "  sealed bundles (version 4): \(sealed.accepted) accepted, \(sealed.rejected) rejected; of their units, \(sealed.opened) opened and \(sealed.refused) refused by the store\n"
        out += "  in the store's own name: \(ownIdentity.accepted) accepted, \(ownIdentity.rejected) rejected; \(ownIdentity.moved) moved the store to a fresh identity (\(ownIdentity.refusedChanges) changes in all that showed another copy of it)\n"
        out += "  re-issues: \(reissue.accepted) accepted, \(reissue.rejected) rejected; \(reissue.withdrew) withdrew operations from the store; the model replayed its log \(reissue.rebuilds) times (at most \(reissue.mostRebuilds) in one case)\n"
        for (known, met) in knownIssues.enumerated() where met.count > 0 {
            let replay = FuzzDriver.knownIssues[known].declared ? "--case \(met.seed)"
                : "--worker --seed \(command.seed) --from \(met.index / command.chunk * command.chunk) --to \(met.index + 1): an earlier case on the store broke it"
            out += "  known issue, \(FuzzDriver.knownIssues[known].name): \(met.count) cases (replay with \(replay))\n"
        }
        out += "  slowest case: \(String(format: "%.1f", slowest.milliseconds)) ms (seed \(slowest.seed)); peak RSS of a worker: \(peakWorkerKilobytes / 1024) MiB\n"
        for crash in crashes.prefix(20) { out += "  crash: case \(crash.index), \(crash.how): replay with --case \(crash.seed)\n" }
        for hang in hangs.prefix(20) { out += "  hang: case \(hang.index): replay with --case \(hang.seed)\n" }
        for failure in failures.prefix(20) { out += "  failure: \(failure)\n" }
        print(out, terminator: "")
    }
}

/// The time a worker has spent since it last said something: CPU time from `/proc` (where
/// there is none, the wall time stands for it) and wall time.
final class CaseClock {
    let pid: Int32
    var cpuAtStart: Double?
    var wallAtStart = Date()

    init(pid: Int32) {
        self.pid = pid
        restart()
    }

    func restart() {
        cpuAtStart = CaseClock.cpuSeconds(pid)
        wallAtStart = Date()
    }

    func overLimit(cpu limit: Double, wall wallLimit: Double) -> Bool {
        let wall = Date().timeIntervalSince(wallAtStart)
        guard let start = cpuAtStart, let now = CaseClock.cpuSeconds(pid) else { return wall > limit }
        return now - start > limit || wall > wallLimit
    }

    /// User plus system CPU seconds of a process (fields 14 and 15 of `/proc/PID/stat`, after
    /// the command name, which may hold spaces and parentheses).
    static func cpuSeconds(_ pid: Int32) -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // fields[0] is the state (field 3), so field n is fields[n - 3].
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        return ticks > 0 ? (user + system) / ticks : nil
    }
}

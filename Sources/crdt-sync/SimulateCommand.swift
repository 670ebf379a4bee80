import ArgumentParser
import Foundation
import NotesSimulator
import NotesSync

/// `crdt-sync simulate SCENARIO`: runs a scenario of partitioned devices over many seeds.
struct SimulateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Run a deterministic simulation of devices that edit offline and sync through faults.",
        discussion: """
        Runs seeds N to N+K-1 of a scenario (a JSON file; see Simulations/README.md). Every device is a \
        real replica with a real store, driven by the real sync engine over a simulated shared folder or \
        relay. A seed replays a run exactly. A failing run is shrunk to a small list of events and \
        printed with the command that replays it. Exits with status 1 when any run fails a check.
        """)

    @Argument(help: ArgumentHelp(
        "The path of a scenario file, or the bare name of one in the checkout's Simulations/ folder.",
        discussion: """
        A path (`Simulations/partition.json`, `./my-scenario.json`) is read as it is. A bare name \
        (`partition`, `partition.json`) is looked up as Simulations/NAME.json in the current folder and \
        every folder above it, so it works from anywhere inside the checkout; when nothing is found, \
        the error lists where it looked.
        """,
        valueName: "SCENARIO"))
    var scenario: String

    @Option(name: .long, parsing: .unconditional, help: "The first seed.")
    var seed: UInt64 = 1

    @Option(name: .long, parsing: .unconditional, help: "How many seeds to run.")
    var runs: Int = 1

    @Option(name: .long, help: ArgumentHelp("Run only these events of the seed's schedule (comma-separated indexes, as a failure prints).", valueName: "I,J,..."))
    var events: String?

    @Option(name: .long, parsing: .unconditional, help: "Runs at a time (default: the number of cores).")
    var jobs: Int?

    @Flag(name: .long, help: "Print the summary as JSON.")
    var json = false

    @Option(name: .long, help: ArgumentHelp("Write an HTML report of the first failing run (else of the first run).", valueName: "FILE"))
    var report: String?

    @Flag(name: .long, help: "Do not shrink a failing run.")
    var noShrink = false

    /// The most runs one command makes.
    static let maxRuns = 1_000_000

    func validate() throws {
        guard runs >= 1 else { throw ValidationError("--runs must be at least 1") }
        // Each run keeps a result until the summary: a bound keeps that within memory.
        guard runs <= SimulateCommand.maxRuns else { throw ValidationError("--runs must be at most \(SimulateCommand.maxRuns)") }
        // Seeds seed ... seed + runs - 1 must all be 64-bit values.
        guard UInt64(runs - 1) <= UInt64.max - seed else {
            throw ValidationError("--seed \(seed) with --runs \(runs) passes the largest seed (\(UInt64.max))")
        }
        if let jobs, jobs < 1 { throw ValidationError("--jobs must be at least 1") }
        if events != nil, runs != 1 { throw ValidationError("--events replays one seed: use it with --runs 1") }
    }

    func run() async throws {
        let path: String
        switch SimulateCommand.resolve(scenario, from: FileManager.default.currentDirectoryPath) {
        case .success(let found): path = found
        case .failure(let error):
            printError(error.message)
            throw ExitCode(1)
        }
        let loaded: Scenario
        do {
            loaded = try Scenario.load(path: path)
        } catch {
            printError("\(error)")
            throw ExitCode(1)
        }
        var only: Set<Int>?
        if let events {
            // An empty, negative or unscheduled index ran nothing and passed: a mistyped replay.
            let parts = events.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            let indexes = parts.compactMap { Int($0) }.filter { $0 >= 0 }
            guard indexes.count == parts.count else { throw ValidationError("--events takes comma-separated event numbers (0 or more)") }
            let scheduled = try Simulation(scenario: loaded, seed: seed).events.count
            if let past = indexes.first(where: { $0 >= scheduled }) {
                printError("--events names event \(past), but seed \(seed)'s schedule has \(scheduled) events (0 ... \(scheduled - 1))")
                throw ExitCode(1)
            }
            only = Set(indexes)
        }
        if let report {
            // Checked before the runs, not after them.
            do { _ = try AtomicFile.writablePath(report) } catch let error as SyncError {
                printError("cannot write the report: \(error.message)")
                throw ExitCode(1)
            }
        }

        let started = Date()
        let progress = ProgressBar(total: runs)
        let results: [RunResult]
        if let only {
            results = [try await Simulator.run(loaded, seed: seed, only: only)]
        } else {
            results = try await Simulator.runMany(loaded, seed: seed, runs: runs,
                                                  parallelism: jobs ?? ProcessInfo.processInfo.activeProcessorCount) { done in
                progress.update(done)
            }
        }
        progress.finish()
        let wall = Date().timeIntervalSince(started)
        // Read before any shrinking runs more: what the runs spent sealing and opening.
        let sealingSeconds = Double(SealingTime.nanoseconds) / 1e9
        if ProcessInfo.processInfo.environment["CRDT_SYNC_SEALING_BREAKDOWN"] != nil {
            FileHandle.standardError.write(Data("sealing \(Double(SealingTime.sealing.load(ordering: .relaxed)) / 1e9) s, verifying \(Double(SealingTime.verifying.load(ordering: .relaxed)) / 1e9) s, decrypting \(Double(SealingTime.decrypting.load(ordering: .relaxed)) / 1e9) s; \(SealingTime.signatureChecks.load(ordering: .relaxed)) signatures checked, \(SealingTime.tagChecks.load(ordering: .relaxed)) units taken on their tag\n".utf8))
        }

        var failures: [Simulator.Failure] = []
        for result in results where result.failed {
            guard failures.count < 20 else { break }
            var shrunk: [Int]?
            if failures.isEmpty, !noShrink, only == nil {
                shrunk = try await Simulator.shrink(loaded, seed: result.seed)
            }
            let schedule = try shrunk.map { indexes in
                let all = try Simulation(scenario: loaded, seed: result.seed).events
                return indexes.map { all[$0] }
            }
            failures.append(Simulator.Failure(
                seed: result.seed, problems: result.problems, shrunkEvents: shrunk, shrunkSchedule: schedule,
                replay: Simulator.replayCommand(scenarioPath: path, seed: result.seed, events: shrunk ?? only.map { $0.sorted() })))
        }
        var summary = Simulator.summarize(loaded, seed: seed, results: results, wallSeconds: wall, failures: failures)
        summary.sealingSeconds = sealingSeconds

        if let report {
            let chosen = results.first(where: \.failed) ?? results[0]
            let (result, trace) = try await Simulator.runTraced(loaded, seed: chosen.seed, only: only)
            let page = HTMLReport.render(scenario: loaded, result: result, trace: trace, summary: summary)
            do {
                // (As `export --out`: a device, FIFO or folder is refused, a link written through.)
                try AtomicFile.write(Array(page.utf8), toPath: report)
            } catch let error as SyncError {
                printError("cannot write the report: \(error.message)")
                throw ExitCode(1)
            }
        }

        if json {
            try printJSON(summary)
        } else {
            printHuman(summary)
        }
        if summary.failed > 0 { throw ExitCode(1) }
    }

    struct NotFound: Error { var message: String }

    /// The scenario file `argument` names: a path that exists as it is; else, for a bare name,
    /// `Simulations/NAME.json` in `directory` or the nearest folder above it that has one.
    static func resolve(_ argument: String, from directory: String) -> Result<String, NotFound> {
        let fileManager = FileManager.default
        if fileManager.fileExists(atPath: argument) { return .success(argument) }
        guard !argument.contains("/") else {
            return .failure(NotFound(message: "\(argument): no such scenario file"))
        }
        let file = argument.hasSuffix(".json") ? argument : "\(argument).json"
        var looked: [String] = []
        var folder = URL(fileURLWithPath: directory).standardizedFileURL
        while true {
            let candidate = folder.appendingPathComponent("Simulations").appendingPathComponent(file).path
            if fileManager.fileExists(atPath: candidate) { return .success(candidate) }
            looked.append(candidate)
            let parent = folder.deletingLastPathComponent()
            if parent.path == folder.path { break }
            folder = parent
        }
        return .failure(NotFound(message: "no scenario named \"\(argument)\": it is not a file here, and none of these exists:\n"
            + looked.map { "  \($0)" }.joined(separator: "\n")
            + "\n(give the scenario file's path, or run from inside the crdt-sync checkout)"))
    }

    func printHuman(_ s: Simulator.Summary) {
        let seeds = s.runs == 1 ? "seed \(s.seed)" : "seeds \(s.seed)...\(s.seed + UInt64(s.runs) - 1)"
        print("\(s.scenario): \(s.runs) run\(s.runs == 1 ? "" : "s") (\(seeds)): \(s.runs - s.failed) passed, \(s.failed) failed")
        print("  converged \(s.converged), divergent \(s.divergent), lost edits \(s.lostEdits), stuck pending \(s.stuckPending), unsafe runs \(s.unsafe)")
        let rate = s.runsPerSecond
        let speed = s.simulatedSecondsPerWallSecond
        print("  \(s.events) events, \(String(format: "%.0f", s.simulatedSeconds)) simulated seconds in \(String(format: "%.2f", s.wallSeconds)) s "
            + "(\(String(format: "%.1f", rate)) runs/s, \(String(format: "%.0f", speed)) simulated s per wall s)")
        let t = s.stats
        print("  \(t.edits) edits, \(t.syncs) syncs (\(t.failedSyncs) failed), \(t.crashes) crashes (\(t.commitsCut) at a commit), \(t.reinstalls) reinstalls, \(t.copies) copies, \(t.restores) restores, "
            + "\(t.corruptInjected) damaged bundles (\(t.corruptRejected) rejected)")
        if t.clones > 0 { print("  \(t.clones) clones typed on beside their device (\(t.characterForks) forks that only the characters tell apart; \(t.forksRepaired) repaired, both words kept)") }
        if s.sealingSeconds > 0 {
            print("  \(String(format: "%.3f", s.syncSeconds)) s in syncs, \(String(format: "%.3f", s.sealingSeconds)) s of it sealing and opening (\(String(format: "%.1f", 100 * s.sealingSeconds / max(s.syncSeconds, 1e-9)))%)")
        }
        print("  trace hash \(s.traceHash)")
        for failure in s.failures {
            print("FAILED seed \(failure.seed):")
            for problem in failure.problems.prefix(8) { print("  - \(problem)") }
            if let events = failure.shrunkSchedule {
                print("  shrunk to \(events.count) events:")
                for (index, event) in zip(failure.shrunkEvents ?? [], events) {
                    var line = "    #\(index) t=\(event.time)ms \(event.kind.rawValue) device \(event.device)"
                    if let edit = event.edit { line += " \(edit.rawValue)" }
                    if event.hub >= 0 { line += " hub \(event.hub)" }
                    if let direction = event.direction { line += " \(direction.rawValue)" }
                    if event.amount != 0 { line += " by \(event.amount)ms" }
                    print(line)
                }
            }
            print("  replay: \(failure.replay)")
        }
    }
}

/// A progress bar on stderr, drawn only when stderr is a terminal.
final class ProgressBar: @unchecked Sendable {
    private let total: Int
    private let enabled: Bool
    private let lock = NSLock()
    private var last = -1

    init(total: Int) {
        self.total = total
        enabled = total > 1 && isatty(STDERR_FILENO) == 1
    }

    func update(_ done: Int) {
        guard enabled else { return }
        lock.lock(); defer { lock.unlock() }
        let width = 40
        let filled = width * done / max(total, 1)
        guard filled != last || done == total else { return }
        last = filled
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        writeStandardError(Data("\r[\(bar)] \(done)/\(total)".utf8))
    }

    func finish() {
        guard enabled else { return }
        writeStandardError(Data("\r\u{1B}[K".utf8))
    }
}

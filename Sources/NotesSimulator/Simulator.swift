import Foundation
import NotesCRDT

/// Runs a scenario over many seeds, shrinks a failure, and sums up.
public enum Simulator {
    /// The summary of runs of one scenario over seeds `seed ..< seed + runs`.
    public struct Summary: Codable, Sendable {
        /// The scenario's name.
        public var scenario: String
        /// The first seed.
        public var seed: UInt64
        /// How many runs (one per seed).
        public var runs: Int
        /// Runs in which every device ended with the same digest.
        public var converged: Int
        /// Runs in which they did not.
        public var divergent: Int
        /// Differences from the reference model, over all runs.
        public var lostEdits: Int
        /// Changes left waiting for dependencies at the end, over all runs.
        public var stuckPending: Int
        /// Runs with a failed safety check.
        public var unsafe: Int
        /// Runs that failed any check.
        public var failed: Int
        /// Events run, over all runs.
        public var events: Int
        /// Simulated time, over all runs.
        public var simulatedSeconds: Double
        /// Real time the runs took, in seconds.
        public var wallSeconds: Double
        /// Runs per wall-clock second.
        public var runsPerSecond: Double
        /// Simulated seconds per wall-clock second, over all runs.
        public var simulatedSecondsPerWallSecond: Double
        /// SHA-256 of the runs' trace hashes in seed order (the trace hash itself for one run).
        public var traceHash: String
        /// The runs' counters added up (heal rounds: the most of any run).
        public var stats: RunStats
        /// The failing runs (at most 20), first to last.
        public var failures: [Failure]
        /// CPU seconds spent in the sync engine over all runs (exact with `--jobs 1`).
        public var syncSeconds: Double = 0
        /// Of those, in sealing and opening units (this process, all runs; exact with `--jobs 1`).
        public var sealingSeconds: Double = 0
    }

    /// A failing run, with its shrunk reproduction.
    public struct Failure: Codable, Sendable {
        /// The seed of the failing run.
        public var seed: UInt64
        /// What went wrong, one line each.
        public var problems: [String]
        /// The indexes (into the seed's schedule) of a smaller set of events that still fails.
        public var shrunkEvents: [Int]?
        /// Those events.
        public var shrunkSchedule: [SimEvent]?
        /// The command that replays the failure.
        public var replay: String

        /// A failing run with its shrunk reproduction and the command that replays it.
        public init(seed: UInt64, problems: [String], shrunkEvents: [Int]?, shrunkSchedule: [SimEvent]?, replay: String) {
            self.seed = seed
            self.problems = problems
            self.shrunkEvents = shrunkEvents
            self.shrunkSchedule = shrunkSchedule
            self.replay = replay
        }
    }

    /// Runs one seed (or a subset of its schedule).
    public static func run(_ scenario: Scenario, seed: UInt64, only: Set<Int>? = nil) async throws -> RunResult {
        let simulation = try Simulation(scenario: scenario, seed: seed)
        return await simulation.run(only: only)
    }

    /// Runs one seed and keeps its trace (for a report).
    public static func runTraced(_ scenario: Scenario, seed: UInt64, only: Set<Int>? = nil) async throws -> (RunResult, Trace) {
        let simulation = try Simulation(scenario: scenario, seed: seed)
        let result = await simulation.run(only: only)
        return (result, simulation.trace)
    }

    /// Runs seeds `seed ..< seed + runs`, `parallelism` at a time; `progress` is told after each run.
    public static func runMany(_ scenario: Scenario, seed: UInt64, runs: Int,
                               parallelism: Int = ProcessInfo.processInfo.activeProcessorCount,
                               progress: @escaping @Sendable (Int) -> Void = { _ in }) async throws -> [RunResult] {
        try scenario.validate()
        var results = [RunResult?](repeating: nil, count: runs)
        try await withThrowingTaskGroup(of: (Int, RunResult).self) { group in
            var next = 0
            var done = 0
            func launch() {
                let i = next
                next += 1
                group.addTask { (i, try await run(scenario, seed: seed &+ UInt64(i))) }
            }
            while next < min(runs, max(1, parallelism)) { launch() }
            while let (i, result) = try await group.next() {
                results[i] = result
                done += 1
                progress(done)
                if next < runs { launch() }
            }
        }
        return results.map { $0! }
    }

    /// Sums up runs (in seed order).
    public static func summarize(_ scenario: Scenario, seed: UInt64, results: [RunResult], wallSeconds: Double,
                                 failures: [Failure]) -> Summary {
        var stats = RunStats()
        for r in results {
            let s = r.stats
            stats.edits += s.edits; stats.skippedEdits += s.skippedEdits; stats.syncs += s.syncs
            stats.failedSyncs += s.failedSyncs; stats.retries += s.retries; stats.lost += s.lost
            stats.duplicated += s.duplicated; stats.reordered += s.reordered; stats.delayed += s.delayed
            stats.corruptInjected += s.corruptInjected; stats.corruptRejected += s.corruptRejected
            stats.crashes += s.crashes; stats.commitsCut += s.commitsCut; stats.reinstalls += s.reinstalls; stats.copies += s.copies; stats.rebasedSaves += s.rebasedSaves; stats.clones += s.clones; stats.forksRepaired += s.forksRepaired; stats.reissuedOperations += s.reissuedOperations; stats.forks += s.forks; stats.forksRepairedTwice += s.forksRepairedTwice; stats.replacementsSkipped += s.replacementsSkipped; stats.editsHeldBackByForks += s.editsHeldBackByForks; stats.characterForks += s.characterForks; stats.waitingChanged += s.waitingChanged; stats.waitingSwapped += s.waitingSwapped; stats.outOfOrder += s.outOfOrder; stats.restores += s.restores; stats.clockJumps += s.clockJumps
            stats.partitions += s.partitions; stats.forgottenOperations += s.forgottenOperations
            stats.healRounds = max(stats.healRounds, s.healRounds)
            stats.forgeries += s.forgeries; stats.intrusions += s.intrusions
            stats.memberForgeries += s.memberForgeries; stats.forgeryRefusals += s.forgeryRefusals
        }
        let simulated = Double(results.reduce(0) { $0 + $1.simulatedMilliseconds }) / 1000
        let hash = results.count == 1 ? results[0].traceHash : SHA256.hex(Array(results.map(\.traceHash).joined().utf8))
        return Summary(
            scenario: scenario.name, seed: seed, runs: results.count,
            converged: results.filter(\.converged).count, divergent: results.filter { !$0.converged }.count,
            lostEdits: results.reduce(0) { $0 + $1.lostEdits }, stuckPending: results.reduce(0) { $0 + $1.stuckPending },
            unsafe: results.filter { !$0.safetyViolations.isEmpty }.count, failed: results.filter(\.failed).count,
            events: results.reduce(0) { $0 + $1.events },
            simulatedSeconds: simulated, wallSeconds: wallSeconds,
            runsPerSecond: wallSeconds > 0 ? Double(results.count) / wallSeconds : 0,
            simulatedSecondsPerWallSecond: wallSeconds > 0 ? simulated / wallSeconds : 0,
            traceHash: hash, stats: stats, failures: failures, syncSeconds: results.reduce(0) { $0 + $1.syncSeconds })
    }

    /// Shrinks a failing run by delta debugging over its schedule: the smallest subset of events
    /// found (1-minimal: removing any one event makes it pass) that still fails a check.
    ///
    /// - Parameter budget: the most runs to spend.
    /// - Returns: indexes into the schedule, ascending; nil when the full run does not fail.
    public static func shrink(_ scenario: Scenario, seed: UInt64, budget: Int = 3000,
                              fails: (@Sendable (RunResult) -> Bool)? = nil) async throws -> [Int]? {
        let failing: @Sendable (RunResult) -> Bool = fails ?? { $0.failed }
        let count = try Simulation(scenario: scenario, seed: seed).scheduleCount
        var spent = 0
        func test(_ subset: [Int]) async throws -> Bool {
            spent += 1
            return failing(try await run(scenario, seed: seed, only: Set(subset)))
        }
        var current = Array(0 ..< count)
        guard try await test(current) else { return nil }
        var granularity = 2
        while current.count >= 2, spent < budget {
            let chunk = Int((Double(current.count) / Double(granularity)).rounded(.up))
            let pieces = stride(from: 0, to: current.count, by: chunk).map { Array(current[$0 ..< min($0 + chunk, current.count)]) }
            var reduced = false
            // Try each complement (removing one piece); then each piece alone.
            for i in pieces.indices where spent < budget {
                let complement = pieces.enumerated().filter { $0.offset != i }.flatMap(\.element)
                if try await test(complement) {
                    current = complement
                    granularity = max(granularity - 1, 2)
                    reduced = true
                    break
                }
            }
            if !reduced {
                for piece in pieces where spent < budget && piece.count < current.count {
                    if try await test(piece) {
                        current = piece
                        granularity = 2
                        reduced = true
                        break
                    }
                }
            }
            if !reduced {
                if granularity >= current.count { break }
                granularity = min(current.count, granularity * 2)
            }
        }
        // One at a time, to be sure no single event can go.
        var i = 0
        while i < current.count, spent < budget, current.count > 1 {
            var candidate = current
            candidate.remove(at: i)
            if try await test(candidate) { current = candidate } else { i += 1 }
        }
        return current
    }

    /// The command that replays a seed (or a subset of its schedule).
    public static func replayCommand(scenarioPath: String, seed: UInt64, events: [Int]?) -> String {
        var command = "crdt-sync simulate \(scenarioPath) --seed \(seed) --runs 1"
        if let events { command += " --events \(events.map(String.init).joined(separator: ","))" }
        return command
    }
}

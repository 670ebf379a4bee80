import ArgumentParser
import EditingTraces
import Foundation

struct TraceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trace",
        abstract: "Work with recorded editing traces (the standard text-CRDT workload).",
        subcommands: [Replay.self]
    )

    struct Replay: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Replay an editing trace and check the result against its endContent.",
            discussion: """
            Reads a trace in the editing-traces format (gzipped or plain JSON, sequential or \
            concurrent), replays every patch as local edits through the public API (one replica per \
            agent for a concurrent trace, one more for each branch of an agent that edits two at once), then decodes the whole history as one encoded batch into a \
            fresh replica. Exits non-zero when the final text differs from endContent.

            Timing: the first local replay and the first merge of the process are cold (reported \
            apart, as 'cold'); then each is done --repeat more times in the same, now warm process, \
            each on fresh replicas, and 'local replay' and 'merge' are the medians of those. JSON \
            keys: localReplayMs and mergeMs (warm medians), localReplayColdMs and mergeColdMs, \
            mergeColdFaults (minor page faults of the cold merge, where counted), mergeWarmMs (every \
            warm merge), repeats.
            """
        )

        @Argument(help: "The trace file (.json or .json.gz).")
        var file: String

        @Option(name: .customLong("repeat"), parsing: .unconditional, help: ArgumentHelp(
            "Warm local replays and merges after the first, cold ones; the medians are reported.",
            valueName: "N"))
        var repeats = 1

        @Flag(help: "Print one JSON object instead of text.")
        var json = false

        func validate() throws {
            // (Bounded: a count past it is a typo, which would run for days.)
            guard (1 ... 100_000).contains(repeats) else { throw ValidationError("--repeat must be from 1 to 100000 (got \(repeats))") }
        }

        func run() async throws {
            let result: TraceReplayResult
            do {
                result = try TraceReplayer(EditingTrace.load(path: file)).run(repeats: repeats)
            } catch let error as TraceError {
                printError(error.message)
                throw ExitCode(1)
            }
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                print(String(decoding: try encoder.encode(result), as: UTF8.self))
            } else {
                print("trace        \(result.trace) (\(result.kind), \(result.transactions) transactions, \(result.patches) patches)")
                print("matches      \(result.matches ? "yes" : "NO")\(result.firstDifference.map { ", first difference at scalar \($0)" } ?? "")")
                print("length       \(result.length) scalars (expected \(result.expectedLength))")
                print("local replay \(String(format: "%.1f", result.localReplayMs)) ms (median of \(result.repeats) warm; cold \(String(format: "%.1f", result.localReplayColdMs)) ms)")
                print("merge        \(String(format: "%.2f", result.mergeMs)) ms (inflate + decode + apply to a fresh replica; median of \(result.repeats) warm; cold \(String(format: "%.2f", result.mergeColdMs)) ms\(result.mergeColdFaults.map { ", \($0) page faults" } ?? ""))")
                print("encoded      \(result.encodedBytes) bytes in \(result.changes) changes; body held in \(result.runs) runs")
                print("load         \(String(format: "%.2f", result.loadMs)) ms from a \(result.snapshotBytes)-byte snapshot")
                print("memory       \(String(format: "%.1f", result.peakMemoryMB)) MB resident growth across the replay")
            }
            if !result.matches { throw ExitCode(1) }
        }
    }
}

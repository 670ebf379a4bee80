import ArgumentParser
import Foundation

/// The team's measuring and stress tools: not shipped with `crdt-sync`, built from this package
/// (`swift run -c release crdt-sync-bench --help`). Figures go to Docs/Performance.md.
@main
struct CRDTSyncBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "crdt-sync-bench",
        abstract: "Benchmarks and stress tools for crdt-sync (build with -c release for figures).",
        subcommands: [StoreStress.self, StoreBench.self, RelayBenchCommand.self, ScaleCommand.self,
                      ScaleBuild.self, ScaleInProcess.self, ScaleState.self, ScaleLauncher.self, SearchIndexBench.self, PushLatencyCommand.self]
    )
}

/// Runs a body, printing an error and exiting with status 1 when it throws.
func runReporting(_ body: () throws -> Void) throws {
    do { try body() } catch {
        FileHandle.standardError.write(Data("crdt-sync-bench: error: \(error)\n".utf8))
        throw ExitCode(1)
    }
}

/// `runReporting` for async bodies.
func runReportingAsync(_ body: () async throws -> Void) async throws {
    do { try await body() } catch {
        FileHandle.standardError.write(Data("crdt-sync-bench: error: \(error)\n".utf8))
        throw ExitCode(1)
    }
}

/// Writes a value as pretty JSON (sorted keys) to stdout.
func printJSON(_ value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    FileHandle.standardOutput.write(try encoder.encode(value) + Data("\n".utf8))
}

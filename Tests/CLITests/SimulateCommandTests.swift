import Foundation
import Testing

/// `crdt-sync simulate` finds a scenario by its bare name from anywhere inside the checkout.
struct SimulateCommandTests {
    /// The checkout's root (this file is Tests/CLITests/SimulateCommandTests.swift).
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test(arguments: ["", "Docs", "Tests/CLITests", "Sources/NotesCRDT/Text"])
    func aBareNameIsFoundFromAnyFolderOfTheCheckout(folder: String) throws {
        let directory = folder.isEmpty ? SimulateCommandTests.root.path : SimulateCommandTests.root.appendingPathComponent(folder).path
        let result = try CLI.run(["simulate", "partition", "--runs", "1", "--json"], directory: directory)
        #expect(result.status == 0, "\(result.stderr)")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(summary["runs"] as? Int == 1)
        #expect(summary["failed"] as? Int == 0)
    }

    @Test func anUnknownNameSaysWhereItLooked() throws {
        let scratch = Scratch()
        let result = try CLI.run(["simulate", "no-such-scenario"], directory: scratch.path)
        #expect(result.status == 1)
        #expect(result.stderr.contains("no scenario named \"no-such-scenario\""))
        #expect(result.stderr.contains("Simulations/no-such-scenario.json"))
        #expect(result.stderr.contains(scratch.path))
    }

    @Test func aMissingPathIsNamed() throws {
        let result = try CLI.run(["simulate", "nowhere/partition.json"], directory: SimulateCommandTests.root.path)
        #expect(result.status == 1)
        #expect(result.stderr.contains("nowhere/partition.json: no such scenario file"))
    }

    /// A report path that is not a file is refused before the runs (it was renamed over, a
    /// device included), and `--events` that name nothing the schedule holds are refused (the
    /// run made no edit and passed).
    @Test func aBadReportPathOrEventListIsRefusedFirst() throws {
        let scratch = Scratch()
        let fifo = scratch.path + "/report.html"
        #expect(mkfifo(fifo, 0o644) == 0)
        let report = try CLI.run(["simulate", "partition", "--report", fifo], directory: SimulateCommandTests.root.path)
        #expect(report.status == 1 && report.stderr.contains("is a FIFO, left as it is"), "\(report.stderr)")
        var info = stat()
        #expect(lstat(fifo, &info) == 0 && info.st_mode & S_IFMT == S_IFIFO)
        for events in ["-1", "1,,2", "x"] {
            let result = try CLI.run(["simulate", "partition", "--events=\(events)"], directory: SimulateCommandTests.root.path)
            #expect(result.status == 64 && result.stderr.contains("--events takes comma-separated event numbers"), "\(events): \(result.stderr)")
        }
        let past = try CLI.run(["simulate", "partition", "--events", "999999999"], directory: SimulateCommandTests.root.path)
        #expect(past.status == 1 && past.stderr.contains("--events names event 999999999, but seed 1's schedule has"), "\(past.stderr)")
    }

    @Test func helpSaysAScenarioIsAPath() throws {
        let result = try CLI.run(["simulate", "--help"])
        #expect(result.status == 0)
        #expect(result.stdout.contains("The path of a scenario file"))
    }
}

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

    @Test func helpSaysAScenarioIsAPath() throws {
        let result = try CLI.run(["simulate", "--help"])
        #expect(result.status == 0)
        #expect(result.stdout.contains("The path of a scenario file"))
    }
}

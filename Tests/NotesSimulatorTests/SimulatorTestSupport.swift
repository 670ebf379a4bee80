import Foundation
import NotesSimulator

/// Where the scenario files live, and how many seeds the scenario tests run.
enum SimulatorTestSupport {
    /// `Simulations/` at the top of the repository.
    static let simulationsFolder: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0 ..< 3 { url.deleteLastPathComponent() }
        return url.appendingPathComponent("Simulations").path
    }()

    /// Every scenario file, by name, but the benchmark-sized ones (`bench-*.json`).
    static let scenarioFiles: [String] = {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: simulationsFolder)) ?? []
        return names.filter { $0.hasSuffix(".json") && !$0.hasPrefix("bench-") }.sorted()
    }()

    static func scenario(_ file: String) throws -> Scenario {
        try Scenario.load(path: simulationsFolder + "/" + file)
    }

    /// Seeds per scenario: $SIM_SEEDS, else 20, so that a plain debug `swift test` stays quick.
    /// CI runs the simulation tests again in a release build with SIM_SEEDS=200 (see .ci/run).
    static var seeds: Int {
        ProcessInfo.processInfo.environment["SIM_SEEDS"].flatMap(Int.init) ?? 20
    }

    /// A small scenario in which devices often write the same field in the same millisecond with
    /// the same clock: equal timestamps, so the replica must break the tie.
    static var ties: Scenario {
        var s = Scenario(name: "ties")
        s.description = "Three devices with exact clocks rename and pin the same note in the same millisecond."
        s.devices = 3
        s.durationSeconds = 600
        s.hubs = [.init(name: "relay", kind: .relay)]
        s.workload.editsPerDevice = 20
        s.workload.initialNotes = 1
        s.workload.burst = 0.5
        s.workload.burstSize = 2
        s.workload.mix = ["rename": 10, "pin": 5, "type": 5]
        s.sync.syncsPerDevice = 4
        s.sync.afterEdit = 0.1
        return s
    }
}

import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One figure of `scale`: a median of timed runs (or one measured value), with its target.
struct Figure: Codable {
    var group: String
    var name: String
    /// What was run, for the reader (placeholders for the ids and paths).
    var command: String
    /// "ms" or "MB".
    var unit: String
    var median: Double
    var min: Double
    var max: Double
    var samples: Int
    /// The most the figure may be (same unit), when the issue sets one.
    var target: Double?
    var met: Bool?
    /// For a command run as a child: the largest peak RSS of its timed runs.
    var peakRSSMegabytes: Double?

    init(group: String, name: String, command: String, unit: String, median: Double, min: Double, max: Double, count: Int,
         target: Double?, peakRSSMegabytes: Double? = nil) {
        self.group = group
        self.name = name
        self.command = command
        self.unit = unit
        self.median = median
        self.min = min
        self.max = max
        self.samples = count
        self.target = target
        self.met = target.map { median <= $0 }
        self.peakRSSMegabytes = peakRSSMegabytes
    }

    /// The median of `samples` (the mean of the middle two for an even count).
    init(group: String, name: String, command: String, unit: String, samples: [Double], target: Double?,
         peakRSSMegabytes: Double? = nil) {
        let sorted = samples.sorted()
        let middle = sorted.count / 2
        let median = sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
        self.init(group: group, name: name, command: command, unit: unit, median: median, min: sorted.first!, max: sorted.last!,
                  count: sorted.count, target: target, peakRSSMegabytes: peakRSSMegabytes)
    }
}

/// Everything `scale` measured, as a table or as JSON.
struct ScaleReport: Encodable {
    struct Parameters: Encodable {
        var notes: Int
        var operations: Int
        var seed: UInt64
        var runs: Int
        var bundleNotes: Int
        var bootstrapRuns: Int
        var keystrokes: Int
        var groups: [String]
        var workdir: String
        var changes: Int?
        var databaseMegabytes: Double?
        var bundleChanges: Int?
        var bundleMegabytes: Double?
    }

    struct Conditions: Encodable {
        var date: String
        var cores: Int
        var loadAverage: [Double]
        var crdtSync: String
        var benchBuild: String
        /// The peak RSS of the process that spawned the commands (`scale-launcher`): on Linux a
        /// child's peak RSS is never reported below it (see `ChildRun`), so a figure at or under
        /// it is that floor, not the child's own.
        var spawnerPeakRSSMegabytes: Double = 0

        static func current(binary: String) -> Conditions {
            var load = [Double](repeating: 0, count: 3)
            _ = getloadavg(&load, 3)
            return Conditions(date: ISO8601DateFormatter().string(from: Date()), cores: ProcessInfo.processInfo.activeProcessorCount,
                              loadAverage: load.map { ($0 * 100).rounded() / 100 }, crdtSync: binary,
                              benchBuild: ScaleCLI.benchIsDebugBuild ? "debug" : "release")
        }
    }

    var parameters: Parameters
    var conditions: Conditions
    var figures: [Figure] = []

    /// The figures as a plain-text table, a section per group, the targets beside them.
    func table() -> String {
        var out = "crdt-sync-bench scale: \(parameters.notes) notes, \(parameters.operations) operations"
        if let changes = parameters.changes { out += " (\(changes) changes" + (parameters.databaseMegabytes.map { String(format: ", %.1f MB database", $0) } ?? "") + ")" }
        out += ", seed \(parameters.seed)\n"
        out += "\(conditions.date), \(conditions.cores) cores, load average \(conditions.loadAverage.map { String(format: "%.2f", $0) }.joined(separator: " ")) at start"
        out += conditions.benchBuild == "debug" ? ", DEBUG BUILD of the bench\n" : "\n"
        out += "crdt-sync: \(conditions.crdtSync)\n"
        out += "A child's peak RSS is never reported below its spawner's, "
            + String(format: "%.1f MB (Linux, posix_spawn): \"<= N MB\" is such a floor, not the child's figure.\n", conditions.spawnerPeakRSSMegabytes)
        let sections: [(String, String)] = [
            ("cli", "The crdt-sync process, spawn to exit, warm page cache: median of \(parameters.runs) runs (range); peak RSS, largest of the runs"),
            ("inprocess", "In process (NoteStore): medians, keystrokes over \(parameters.keystrokes) inserts"),
            ("bootstrap", "A new device from a bundle of \(parameters.bundleNotes) notes"
                + (parameters.bundleChanges.map { " (\($0) change\($0 == 1 ? "" : "s")" + (parameters.bundleMegabytes.map { String(format: ", %.1f MB", $0) } ?? "") + ")" } ?? "")
                + ": median of \(parameters.bootstrapRuns) runs; peak RSS, largest of the runs"),
        ]
        for (group, title) in sections {
            let rows = figures.filter { $0.group == group }
            guard !rows.isEmpty else { continue }
            out += "\n" + title + "\n"
            var lines: [[String]] = [["", "median", "range", "peak RSS", "target", ""]]
            for figure in rows {
                let range = figure.samples > 1 ? ScaleReport.number(figure.min) + "-" + ScaleReport.number(figure.max) : ""
                lines.append([
                    figure.name,
                    ScaleReport.number(figure.median) + " " + figure.unit,
                    range,
                    figure.peakRSSMegabytes.map {
                        // At or under the floor, the child's own peak is not known: at most this.
                        $0 <= conditions.spawnerPeakRSSMegabytes + 0.05 ? String(format: "<= %.1f MB", $0) : String(format: "%.1f MB", $0)
                    } ?? "",
                    figure.target.map { "<= " + ScaleReport.number($0) + " " + figure.unit } ?? "-",
                    figure.met.map { $0 ? "met" : "NOT MET" } ?? "",
                ])
            }
            let widths = (0 ..< lines[0].count).map { column in lines.map { $0[column].count }.max()! }
            for line in lines {
                let cells = line.enumerated().map { column, cell in
                    let pad = String(repeating: " ", count: widths[column] - cell.count)
                    return column == 0 || column == line.count - 1 ? cell + pad : pad + cell
                }
                var row = "  " + cells.joined(separator: "  ")
                while row.last == " " { row.removeLast() }
                out += row + "\n"
            }
        }
        return out
    }

    /// Three significant figures or so: 0.412, 12.3, 1234.
    static func number(_ value: Double) -> String {
        switch value {
        case ..<1: return String(format: "%.3f", value)
        case ..<10: return String(format: "%.2f", value)
        case ..<100: return String(format: "%.1f", value)
        default: return String(format: "%.0f", value)
        }
    }
}

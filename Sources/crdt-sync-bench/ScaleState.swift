import ArgumentParser
import Deflate
import Foundation
import NotesCRDT
import NotesSync

/// `crdt-sync-bench scale-state`: what sending a new device a compacted state, instead of every
/// historical operation, would save (issue 20). Run by `scale`'s bootstrap group in its own
/// process, on the bootstrap's bundle files; prints the figures as JSON.
///
/// Both ways are measured in memory, so that the store's part (writing 80,000 notes, the same
/// either way) does not hide the difference: the history's changes decoded and applied to a new
/// notebook, against the snapshot of the notebook they make, opened as a new device would.
struct ScaleState: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scale-state", abstract: "A compacted state against the history, for a new device (run by `scale`).",
        shouldDisplay: false)

    @Option var runs = 3
    @Argument var files: [String]

    func run() throws {
        try runReporting { try printJSON(try measure()) }
    }

    func progress(_ message: String) {
        FileHandle.standardError.write(Data("scale: \(message)\n".utf8))
    }

    func measure() throws -> [Figure] {
        let bundles = try files.map { path -> [UInt8] in
            guard let data = FileManager.default.contents(atPath: path) else { throw ValidationError("cannot read \(path)") }
            return [UInt8](data)
        }
        let bundleBytes = bundles.reduce(0) { $0 + $1.count }
        let device = ReplicaID(Identifier128(bytes: Array(repeating: 0x5A, count: 16))!)

        // The history, as the import takes it: every file decoded, every change applied.
        var source: Notebook?
        var historyTimes: [Double] = []
        for run in 0 ... runs {
            let start = ChildProcess.now()
            var notebook = Notebook(replicaID: device)
            for bytes in bundles { notebook.apply(contentsOf: try SyncBundle.decode(bytes).changes) }
            let elapsed = Double(ChildProcess.now() - start) / 1e6
            if run > 0 { historyTimes.append(elapsed) }
            if source == nil { source = notebook }
        }
        let state = source!.snapshot()
        let logBytes = ChangeCodec.encode(source!.allChanges).count
        let deflated = Deflate.compress(state, level: 6).count

        // The state, as a new device would open it: at once (the log left encoded), and with the
        // log replayed, which is what checking the state against the history costs.
        func open(deferring: Bool) throws -> [Double] {
            var times: [Double] = []
            for run in 0 ... runs {
                let start = ChildProcess.now()
                let opened = try Notebook(snapshot: state, deferringLog: deferring, replicaID: device)
                let elapsed = Double(ChildProcess.now() - start) / 1e6
                guard opened.noteCount == source!.noteCount else { throw ValidationError("the snapshot opened with another note count") }
                if run > 0 { times.append(elapsed) }
            }
            return times
        }
        let deferredTimes = try open(deferring: true)
        let replayedTimes = try open(deferring: false)

        func timed(_ name: String, _ command: String, _ samples: [Double]) -> Figure {
            let sorted = samples.sorted()
            return Figure(group: "bootstrap", name: name, command: command, unit: "ms", median: sorted[sorted.count / 2],
                          min: sorted.first!, max: sorted.last!, count: sorted.count, target: nil)
        }
        func size(_ name: String, _ command: String, _ bytes: Int) -> Figure {
            let megabytes = Double(bytes) / 1_048_576
            return Figure(group: "bootstrap", name: name, command: command, unit: "MB", median: megabytes, min: megabytes,
                          max: megabytes, count: 1, target: nil)
        }
        let figures = [
            timed("state: apply the history", "SyncBundle.decode + Notebook.apply, in memory", historyTimes),
            timed("state: open a snapshot", "Notebook(snapshot:deferringLog: true)", deferredTimes),
            timed("state: open it, log replayed", "Notebook(snapshot:)", replayedTimes),
            size("state: the bundle files", "what import and a relay pull carry", bundleBytes),
            size("state: snapshot, deflated", "Notebook.snapshot(), deflated at level 6", deflated),
            size("state: snapshot", "Notebook.snapshot()", state.count),
            size("state: of which the log", "ChangeCodec.encode(allChanges)", logBytes),
        ]
        for figure in figures { progress(String(format: "  %@: %.1f %@", figure.name, figure.median, figure.unit)) }
        return figures
    }
}

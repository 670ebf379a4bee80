import ArgumentParser
import Foundation
import NotesCRDT
import NotesStore
import NotesTestSupport

/// `crdt-sync-bench scale-inprocess`: the inprocess group of `scale`, in its own process (run by
/// it): opening the store and reading a note, the first write after opening, durable keystrokes.
/// Prints the figures as JSON.
struct ScaleInProcess: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scale-inprocess", abstract: "The inprocess group of `scale` (run by it).", shouldDisplay: false)

    @Option var db: String
    @Option var runs = 5
    @Option var keystrokes = 1000
    @Option var seed: UInt64 = 42

    func run() throws {
        try runReporting {
            var picker = try NotePicker(path: db, seed: seed ^ 0x494E_5052)
            try printJSON(try measure(&picker))
        }
    }

    func progress(_ message: String) {
        FileHandle.standardError.write(Data("scale: \(message)\n".utf8))
    }

    func measure(_ picker: inout NotePicker) throws -> [Figure] {
        progress("inprocess: NoteStore on \(db)")
        var figures: [Figure] = []

        // Open and read one note, a different one each time; the first, untimed, warms the cache.
        let samples = max(runs, 20)
        let readNotes = picker.take(samples + 1)
        var times: [Double] = []
        for index in 0 ... samples {
            let start = ChildProcess.now()
            let store = try NoteStore.open(path: db, create: false)
            guard try store.note(readNotes[index].id) != nil else { throw StoreError(.notFound, "note \(readNotes[index].id) is gone") }
            let elapsed = Double(ChildProcess.now() - start) / 1e6
            try store.close()
            if index > 0 { times.append(elapsed) }
        }
        figures.append(Figure(group: "inprocess", name: "open + read one note", command: "NoteStore.open(path:) + note(_:)",
                              unit: "ms", samples: times, target: 5))

        // The first write after opening: it loads the CRDT state (snapshot, then the log after it).
        let writeNotes = picker.take(runs + 1)
        times = []
        for index in 0 ... runs {
            let store = try NoteStore.open(path: db, create: false)
            let start = ChildProcess.now()
            _ = try store.insertText(writeNotes[index].id, at: 0, "x")
            let elapsed = Double(ChildProcess.now() - start) / 1e6
            try store.close()
            if index > 0 { times.append(elapsed) }
        }
        figures.append(Figure(group: "inprocess", name: "first write after open", command: "insertText(_:at:_:), the store just opened",
                              unit: "ms", samples: times, target: nil))

        // Durable keystrokes in one typical note, the store open and warm.
        let store = try NoteStore.open(path: db, create: false)
        let note = picker.typical.id
        _ = try store.insertText(note, at: 0, "x")
        var random = SyntheticWorkload.Generator(seed: seed ^ 0x4B45_5953)
        var length = try store.note(note)?.bodyLength ?? 0
        var typing = length / 2
        var keys: [Double] = []
        for index in 0 ..< keystrokes {
            let offset: Int
            if index % 2 == 0 {
                offset = typing
                typing += 1
            } else {
                offset = Int(random.next() % UInt64(length + 1))
                if offset <= typing { typing += 1 }
            }
            let start = ChildProcess.now()
            _ = try store.insertText(note, at: offset, "x")
            keys.append(Double(ChildProcess.now() - start) / 1e6)
            length += 1
        }
        try store.close()
        let sorted = keys.sorted()
        func percentile(_ p: Double) -> Double { sorted[max(0, min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1))] }
        let bodyNote = "a \(picker.typical.bodyLength)-character note, \(keystrokes) inserts"
        figures.append(Figure(group: "inprocess", name: "durable keystroke p50", command: bodyNote, unit: "ms",
                              median: percentile(0.5), min: sorted.first!, max: sorted.last!, count: keys.count, target: nil))
        figures.append(Figure(group: "inprocess", name: "durable keystroke p99", command: bodyNote, unit: "ms",
                              median: percentile(0.99), min: sorted.first!, max: sorted.last!, count: keys.count, target: 1))
        for figure in figures { progress(String(format: "  %@: %.2f ms", figure.name, figure.median)) }
        return figures
    }

}

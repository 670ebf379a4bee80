import ArgumentParser
import Foundation
import NotesCRDT
import NotesStore
import NotesTestSupport

/// A burst of durable edits or applies that prints "ack N" after each commit, for the crash
/// tests (which kill it with SIGKILL at a random moment).
struct StoreStress: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store-stress", abstract: "Write a burst of edits, printing an ack after each commit (for crash tests).")

    enum Mode: String, ExpressibleByArgument { case edits, apply }

    @Option(help: "The replica database.") var db: String
    @Option var mode: Mode = .edits
    @Option var count = 1000
    @Option var seed: UInt64 = 1
    @Option(help: "Changes per apply batch.") var batch = 10
    @Option(help: "Refresh the snapshot after this many log rows.") var snapshotInterval = 50

    /// The note the edits mode writes to.
    static let noteID = NoteID(Identifier128(high: 0xC0FFEE, low: 1))

    func validate() throws {
        guard (1 ... 10_000_000).contains(count) else { throw ValidationError("--count must be between 1 and 10000000") }
        guard (1 ... 1_000_000).contains(batch) else { throw ValidationError("--batch must be between 1 and 1000000") }
        guard snapshotInterval >= 1 else { throw ValidationError("--snapshot-interval must be at least 1") }
    }

    func run() throws {
        try runReporting {
            let store = try NoteStore.open(path: db, options: StoreOptions(snapshotInterval: snapshotInterval))
            let out = FileHandle.standardOutput
            switch mode {
            case .edits:
                if try store.note(StoreStress.noteID) == nil {
                    try store.createNote(title: "stress", id: StoreStress.noteID)
                }
                for k in 1 ... count {
                    try store.appendText(StoreStress.noteID, "\(k),")
                    if k % 5 == 0 { try store.setTitle(StoreStress.noteID, "edit \(k)") }
                    out.write(Data("ack \(k)\n".utf8))
                }
            case .apply:
                let changes = SyntheticWorkload.notebook(seed: seed, notes: 20, operations: count).changes
                var index = 0
                var acked = 0
                while index < changes.count {
                    let slice = Array(changes[index ..< min(index + batch, changes.count)])
                    try store.apply(slice)
                    index += slice.count
                    acked += 1
                    out.write(Data("ack \(acked) \(index)\n".utf8))
                }
            }
        }
    }
}

/// Measures the store (build it with -c release for meaningful figures).
struct StoreBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store-bench", abstract: "Benchmark the store: keystroke latency, opening, search.")

    @Option(help: "A folder for the benchmark databases.") var dir = NSTemporaryDirectory()
    @Option var keystrokes = 2000
    @Option var notes = 10_000
    @Option var operations = 1_000_000
    @Option var queries = 200

    func validate() throws {
        for (name, value, most) in [("keystrokes", keystrokes, 10_000_000), ("notes", notes, 10_000_000),
                                    ("operations", operations, 100_000_000), ("queries", queries, 10_000_000)] {
            guard (1 ... most).contains(value) else { throw ValidationError("--\(name) must be between 1 and \(most)") }
        }
    }

    func run() throws {
        try runReporting {
            let base = (dir as NSString).appendingPathComponent("store-bench-\(getpid())")
            try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: base) }
            try keystrokeBenchmark(base + "/keystrokes.db")
            try largeNotebookBenchmark(base + "/large.db")
        }
    }

    func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    func describe(_ samples: [UInt64]) -> String {
        let sorted = samples.sorted()
        func ms(_ q: Double) -> String {
            String(format: "%.3f ms", Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * q))]) / 1e6)
        }
        return "p50 \(ms(0.5)), p90 \(ms(0.9)), p99 \(ms(0.99)), max \(ms(1.0)) (n=\(sorted.count))"
    }

    func keystrokeBenchmark(_ path: String) throws {
        let store = try NoteStore.open(path: path)
        var random = SyntheticWorkload.Generator(seed: 7)
        var text = String.UnicodeScalarView()
        let letters = Array("abcdefghijklmnopqrstuvwxyz      \n".unicodeScalars)
        for _ in 0 ..< 100_000 { text.append(letters[Int(random.next() % UInt64(letters.count))]) }
        let note = try store.createNote(title: "big", body: String(text))
        var samples: [UInt64] = []
        for i in 0 ..< keystrokes {
            let offset = i % 2 == 0 ? 50_000 + i / 2 : Int(random.next() % 100_000)
            let start = now()
            try store.insertText(note, at: offset, "x")
            samples.append(now() - start)
        }
        print("durable keystroke, 100,000-character note (\(keystrokes) inserts, half typing runs, half random positions):")
        print("    " + describe(samples))
        // The index is brought up to date before a search: the first search after the keystrokes
        // re-indexes the chunks they changed, the next one finds it up to date.
        var start = now()
        _ = try store.search("x*")
        let first = now() - start
        start = now()
        _ = try store.search("x*")
        print("search after those keystrokes: first \(String(format: "%.2f", Double(first) / 1e6)) ms (re-indexes the changed chunks), then \(String(format: "%.2f", Double(now() - start) / 1e6)) ms")
    }

    func largeNotebookBenchmark(_ path: String) throws {
        var start = now()
        let (_, changes) = SyntheticWorkload.notebook(seed: 42, notes: notes, operations: operations)
        print("generated \(changes.count) changes, \(operations) operations over \(notes) notes in \(String(format: "%.1f", Double(now() - start) / 1e9)) s")
        start = now()
        do {
            let store = try NoteStore.open(path: path, options: StoreOptions(snapshotInterval: Int.max))
            var index = 0
            while index < changes.count {
                let end = min(index + 20_000, changes.count)
                try store.apply(Array(changes[index ..< end]))
                index = end
            }
            try store.compact()
            try store.close()
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
        print("imported and compacted in \(String(format: "%.1f", Double(now() - start) / 1e9)) s; database \(size / 1024) KiB")

        var openSamples: [UInt64] = []
        for _ in 0 ..< 5 {
            start = now()
            let store = try NoteStore.open(path: path, create: false)
            let listed = try store.list()
            openSamples.append(now() - start)
            precondition(!listed.isEmpty)
            try store.close()
        }
        print("open + first list (\(notes) notes, \(operations) operations): " + describe(openSamples))

        start = now()
        let store = try NoteStore.open(path: path, create: false)
        let notebook = try store.notebook
        print("load the full CRDT state (snapshot replay): \(String(format: "%.1f", Double(now() - start) / 1e6)) ms, \(notebook.noteCount) notes")

        let terms = ["meeting", "gro*", "alpha bravo", "\"tango uniform\"", "zulu", "in*", "recipe garden", "xray"]
        var searchSamples: [UInt64] = []
        var found = 0
        for i in 0 ..< queries {
            let begin = now()
            found += try store.search(terms[i % terms.count]).count
            searchSamples.append(now() - begin)
        }
        print("search (\(terms.count) queries round robin, top 20 with snippets): " + describe(searchSamples) + ", \(found / queries) hits/query")

        // Edits spread over many notes, then one search: it first re-indexes every title and body
        // chunk those edits changed (one write transaction).
        let ids = try store.list(.all).map(\.id)
        for edits in [10, 100, 1000] {
            var editSamples: [UInt64] = []
            for i in 0 ..< edits {
                let id = ids[(i * 7919) % ids.count]
                let begin = now()
                try store.appendText(id, " quokka\(i) ")
                editSamples.append(now() - begin)
            }
            let begin = now()
            let hits = try store.search("quokka*").count
            let first = now() - begin
            let again = now()
            _ = try store.search("quokka*")
            print("search after \(edits) edits of \(min(edits, ids.count)) notes: first \(String(format: "%.1f", Double(first) / 1e6)) ms, then \(String(format: "%.1f", Double(now() - again) / 1e6)) ms (\(hits) hits); the edits: " + describe(editSamples))
        }
    }
}

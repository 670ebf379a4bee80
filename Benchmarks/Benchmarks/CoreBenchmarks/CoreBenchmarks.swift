import Benchmark
import NotesCRDT

/// A deterministic editing session: typing runs, backspaces and cursor jumps, like the recorded
/// traces but generated, so the benchmark needs no files. Each edit is its own change, or (batched)
/// all of them go through one `editBody`.
func editingSession(edits: Int, seed: UInt64, batched: Bool = false) -> Notebook {
    var notebook = Notebook(replicaID: ReplicaID(Identifier128(high: 1, low: seed)), wallClock: FixedWallClock(1_700_000_000_000))
    let note = notebook.createNote(id: NoteID(Identifier128(high: 2, low: seed)), title: "bench").id
    if batched {
        _ = try? notebook.editBody(note) { body in
            try script(edits: edits, seed: seed, insert: { try body.insert("e", at: $0) }, delete: { try body.delete($0) })
        }
    } else {
        try? script(edits: edits, seed: seed, insert: { _ = try notebook.insertText(note, at: $0, "e") },
                    delete: { _ = try notebook.deleteText(note, $0) })
    }
    return notebook
}

/// The edits of the session, as calls to `insert` (at an offset) and `delete` (a range).
func script(edits: Int, seed: UInt64, insert: (Int) throws -> Void, delete: (Range<Int>) throws -> Void) rethrows {
    var rng = Seeded(seed)
    var cursor = 0
    var length = 0
    for _ in 0 ..< edits {
        let roll = rng.next() % 100
        if roll < 70 || length == 0 {
            try insert(cursor)
            cursor += 1
            length += 1
        } else if roll < 90, cursor > 0 {
            try delete(cursor - 1 ..< cursor)
            cursor -= 1
            length -= 1
        } else {
            cursor = Int(rng.next() % UInt64(length + 1))
        }
    }
}

struct Seeded {
    var state: UInt64
    init(_ seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

let benchmarks: @Sendable () -> Void = {
    let metrics: [BenchmarkMetric] = [.instructions, .mallocCountTotal, .wallClock]
    // The gate is the allocation count (within 1%: it repeats to a few allocations). Wall time,
    // and instructions where perf events exist, are printed but not checked: on a shared machine
    // they move by tens of percent.
    Benchmark.defaultConfiguration = .init(
        metrics: metrics, maxDuration: .seconds(5), maxIterations: 20,
        thresholds: [
            .mallocCountTotal: BenchmarkThresholds(relative: [.p50: 1.0, .p90: 1.0]),
            .wallClock: .none,
            .instructions: .none,
        ])

    Benchmark("local edits (20,000 keystrokes)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(editingSession(edits: 20_000, seed: 7))
        }
    }

    Benchmark("local edits in one batch (20,000 keystrokes, editBody)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(editingSession(edits: 20_000, seed: 7, batched: true))
        }
    }

    let source = editingSession(edits: 20_000, seed: 7)
    let encoded = ChangeCodec.encode(source.changes(since: VersionVector()))

    Benchmark("encode history (20,000 keystrokes)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(ChangeCodec.encode(source.changes(since: VersionVector())))
        }
    }

    Benchmark("merge: decode and apply history into a fresh replica") { benchmark in
        for _ in benchmark.scaledIterations {
            var fresh = Notebook(replicaID: ReplicaID(Identifier128(high: 9, low: 9)), wallClock: FixedWallClock(0))
            try fresh.apply(contentsOf: ChangeCodec.decode(encoded))
            blackHole(fresh.digest())
        }
    }

    let snapshot = source.snapshot()
    Benchmark("load from snapshot") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try Notebook(snapshot: snapshot, wallClock: FixedWallClock(0)).noteCount)
        }
    }

    Benchmark("open snapshot with the log deferred, read the text") { benchmark in
        for _ in benchmark.scaledIterations {
            let opened = try Notebook(snapshot: snapshot, wallClock: FixedWallClock(0), deferringLog: true)
            blackHole(opened.allNotes.first?.body.count)
        }
    }
}

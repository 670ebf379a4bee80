import Foundation
import NotesCRDT
import NotesSync

/// What a replay of a trace measured.
public struct TraceReplayResult: Sendable, Codable {
    public var trace: String
    public var kind: String
    /// Whether the final body equals the trace's `endContent`.
    public var matches: Bool
    /// The final body's length in Unicode scalars.
    public var length: Int
    public var expectedLength: Int
    public var transactions: Int
    public var patches: Int
    /// How many warm local replays and merges the medians below are taken over (each after a
    /// first, cold one, reported apart).
    public var repeats: Int
    /// Milliseconds to replay every patch as local edits through the public API: one
    /// `Notebook.editBody` batch for a sequential trace (as the peers replay it in one transaction),
    /// one per transaction of a concurrent trace. The median of `repeats` warm replays, each on
    /// fresh replicas (the cold one when `repeats` is 0).
    public var localReplayMs: Double
    /// The first local replay of the process, cold (the one `peakMemoryMB` measures).
    public var localReplayColdMs: Double
    /// Milliseconds to decompress and decode the whole history (one bundle body) and apply it to
    /// a fresh replica, up to reading its text. The median of `repeats` warm merges, each into a
    /// fresh replica (the cold one when `repeats` is 0).
    public var mergeMs: Double
    /// The first merge of the process, cold (code, allocator and caches not yet warm).
    public var mergeColdMs: Double
    /// Minor page faults the cold merge took (fresh pages it wrote), where the system counts them:
    /// most of what the cold merge costs over a warm one (see Docs/Performance.md).
    public var mergeColdFaults: Int?
    /// Every warm merge, in the order run.
    public var mergeWarmMs: [Double]
    /// Bytes of the whole history as a bundle body carries it (the change encoding, compressed).
    public var encodedBytes: Int
    /// Bytes of the change encoding before compression.
    public var uncompressedBytes: Int
    /// Milliseconds to open a saved snapshot of the replica until its text is readable (with the
    /// log deferred: `Notebook(snapshot:deferringLog: true)`, then the note's body).
    public var loadMs: Double
    /// Milliseconds the replica so opened then takes to decode and replay its log (what its first
    /// change costs, or opening the snapshot without deferring).
    public var materializeMs: Double
    /// Bytes of that snapshot.
    public var snapshotBytes: Int
    /// Growth of the process's resident memory across the replay, in MB, with the replicas alive
    /// (the memory the replayed document and its history take).
    public var peakMemoryMB: Double
    /// Changes in the history after coalescing.
    public var changes: Int
    /// Runs that hold the final body.
    public var runs: Int
    /// Index of the first character where the text differs from `endContent`, when it does.
    public var firstDifference: Int?
}

/// Replays an editing trace through the public `Notebook` API.
///
/// Sequential traces run on one replica, all patches in one `editBody` batch. Concurrent traces run
/// one replica per agent (one more for each branch of an agent that edits two branches at once,
/// which the format forbids), one batch per transaction: before each transaction, the agent's replica
/// receives exactly the changes in its parents' history that it lacks (through `apply(_:)`, as a
/// sync would deliver them), so the transaction's positions apply to the document they were
/// recorded against. Every replica reads time from one fixed clock, so
/// the run is deterministic (the hybrid logical clock then counts like a Lamport clock).
public struct TraceReplayer {
    public let trace: EditingTrace

    public init(_ trace: EditingTrace) { self.trace = trace }

    /// The most replicas a concurrent replay keeps (lanes: one per agent, one more per branch an
    /// agent edits at once); the published traces need two or three.
    public static let maxLanes = LocalReplay.maxLanes

    /// Replays the trace, then merges its whole history into a fresh replica.
    ///
    /// - Parameter repeats: how many more times, after the first (cold) local replay and merge,
    ///   to replay and to merge in this process, each on fresh replicas; the figures are the
    ///   medians of those warm runs, the cold ones reported apart. 0: only the cold runs.
    public func run(repeats: Int = 1) throws -> TraceReplayResult {
        precondition(repeats >= 0, "a negative number of repeats")
        let local = LocalReplay(trace)
        let (clock, noteID, setup, mergeID) = (local.clock, local.noteID, local.setup, local.mergeID)

        #if os(Linux)
        _ = glibcMallocTrim(0)  // give back what parsing the trace freed, so the growth below is the replay's
        #endif
        let memoryBefore = peakResidentMB()
        let (replicas, patchCount, localColdNanos) = try local.run()
        let peakMemory = peakResidentMB() - memoryBefore

        // The whole history: what every replica made, in causal order.
        var everything = setup
        for replica in replicas { try everything.merge(replica) }
        let history = everything.changes(since: VersionVector())
        let encoding = ChangeCodec.encode(history)
        let (flags, body) = SyncBundle.packBody(encoding)

        /// Inflates, decodes and applies the whole history to a fresh replica until its text is
        /// readable: the replica, the text and the nanoseconds that took.
        func merge() throws -> (replica: Notebook, text: String, nanos: UInt64) {
            let mergeStart = DispatchTime.now().uptimeNanoseconds
            var fresh = Notebook(replicaID: mergeID, wallClock: clock)
            try fresh.applyStored(contentsOf: ChangeCodec.decode(SyncBundle.unpackBody(flags: flags, body)))
            let text = fresh.body(of: noteID)!.string
            return (fresh, text, DispatchTime.now().uptimeNanoseconds - mergeStart)
        }
        // The cold merge comes right after the one local replay and the encoding, as in the peers'
        // script, and its replica is dropped before the warm ones (as theirs is): kept, it made the
        // first warm merge take fresh memory.
        #if os(Linux)
        // Freed memory given back before the cold merge, in the peers' script too: a process's first
        // merge takes fresh pages, not what its replay left free. COLD_NO_TRIM=1 skips it, in both.
        if ProcessInfo.processInfo.environment["COLD_NO_TRIM"] == nil { _ = glibcMallocTrim(0) }
        #endif
        var fresh: Notebook
        let text: String, mergeColdNanos: UInt64
        let faultsBefore = minorFaults()  // read outside the timed merge
        (fresh, text, mergeColdNanos) = try merge()
        let faultsAfter = minorFaults()
        let mergeColdFaults = faultsBefore.flatMap { before in faultsAfter.map { $0 - before } }
        var mergeWarm: [Double] = []
        for _ in 0 ..< repeats {
            fresh = Notebook(replicaID: mergeID, wallClock: clock)
            let (warmReplica, warmText, nanos) = try merge()
            guard warmText == text else { throw TraceError("a repeated merge gave another text") }
            fresh = warmReplica
            mergeWarm.append(Double(nanos) / 1e6)
        }
        // The warm local replays after the merges: before them, they warmed our cold merge's heap
        // and code, which the peers' single replay does not.
        var localWarm: [Double] = []
        for _ in 0 ..< repeats { localWarm.append(Double(try local.run().nanos) / 1e6) }

        let snapshot = fresh.snapshot()
        let loadStart = DispatchTime.now().uptimeNanoseconds
        var loaded = try Notebook(snapshot: snapshot, wallClock: clock, deferringLog: true)
        let loadedText = loaded.note(noteID)?.body
        let loadNanos = DispatchTime.now().uptimeNanoseconds - loadStart
        guard loadedText == text else { throw TraceError("the snapshot did not restore the text") }
        let materializeStart = DispatchTime.now().uptimeNanoseconds
        loaded.materialize()
        let materializeNanos = DispatchTime.now().uptimeNanoseconds - materializeStart
        guard loaded.body(of: noteID)?.string == text else { throw TraceError("the snapshot's log did not restore the text") }

        let expected = trace.endContent
        let matches = text.unicodeScalars.elementsEqual(expected.unicodeScalars)  // not `==`: that is canonical equivalence
        var firstDifference: Int? = nil
        if !matches {
            firstDifference = zip(text.unicodeScalars, expected.unicodeScalars).enumerated().first { $0.element.0 != $0.element.1 }?.offset
                ?? min(text.unicodeScalars.count, expected.unicodeScalars.count)
        }
        let localColdMs = Double(localColdNanos) / 1e6
        let mergeColdMs = Double(mergeColdNanos) / 1e6
        return TraceReplayResult(
            trace: trace.name, kind: trace.kind.rawValue, matches: matches,
            length: text.unicodeScalars.count, expectedLength: expected.unicodeScalars.count,
            transactions: trace.transactions.count, patches: patchCount, repeats: repeats,
            localReplayMs: median(localWarm) ?? localColdMs, localReplayColdMs: localColdMs,
            mergeMs: median(mergeWarm) ?? mergeColdMs, mergeColdMs: mergeColdMs, mergeColdFaults: mergeColdFaults,
            mergeWarmMs: mergeWarm,
            encodedBytes: body.count, uncompressedBytes: encoding.count, loadMs: Double(loadNanos) / 1e6,
            materializeMs: Double(materializeNanos) / 1e6, snapshotBytes: snapshot.count,
            peakMemoryMB: peakMemory, changes: history.count,
            runs: fresh.body(of: noteID)!.runCount, firstDifference: firstDifference)
    }
}

/// The median of `values` (the mean of the middle two for an even count), or nil when empty.
func median(_ values: [Double]) -> Double? {
    guard !values.isEmpty else { return nil }
    let sorted = values.sorted()
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

#if os(Linux)
@_silgen_name("malloc_trim")
func glibcMallocTrim(_ pad: Int) -> Int32
#endif

/// The minor page faults this process has taken so far, where the system counts them.
func minorFaults() -> Int? {
    #if os(Linux)
    var usage = rusage()
    guard getrusage(RUSAGE_SELF.rawValue, &usage) == 0 else { return nil }
    return usage.ru_minflt
    #else
    return nil
    #endif
}

/// The resident memory of this process now, in MB (from /proc/self/statm; the peak so far where
/// that is not available).
func peakResidentMB() -> Double {
    if let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) {
        let fields = statm.split(separator: " ")
        if fields.count > 1, let pages = Double(fields[1]) {
            return pages * Double(sysconf(Int32(_SC_PAGESIZE))) / 1_048_576
        }
    }
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_maxrss) / 1024
}

import NotesCRDT
import NotesSync

/// The virtual clock of a run and every device's skew from it. Nothing in a run reads the real
/// clock: stores get a `DeviceClock`, the sync engine's sleeps advance `now`.
final class ClockState: @unchecked Sendable {
    /// The run starts at this wall-clock time (2024-01-01), so timestamps look like real ones.
    static let epoch: UInt64 = 1_704_067_200_000
    /// Virtual wall-clock milliseconds.
    var now: UInt64 = ClockState.epoch
    /// Per device: how far its clock is off (milliseconds, either way).
    var skews: [Int64]

    init(devices: Int) { skews = Array(repeating: 0, count: devices) }

    /// Milliseconds since the start of the run.
    var elapsed: UInt64 { now - ClockState.epoch }

    func reading(for device: Int) -> UInt64 {
        let value = Int64(bitPattern: now) &+ skews[device]
        return UInt64(max(0, value))
    }
}

/// The wall clock a simulated device's store reads: virtual time plus the device's skew.
struct DeviceClock: WallClock {
    let clocks: ClockState
    let device: Int
    func milliseconds() -> UInt64 { clocks.reading(for: device) }
}

/// Whether a device can reach a hub: counts of the partitions that cut each direction.
struct LinkState {
    var outboundCuts = 0
    var inboundCuts = 0
    var outboundUp: Bool { outboundCuts == 0 }
    var inboundUp: Bool { inboundCuts == 0 }
}

/// An in-memory relay: stores each change once per author and seq (contiguously, as uploaded),
/// and answers "the changes beyond your version vector", in arrival order, a page at a time.
/// Like the real relay it knows nothing of the CRDT beyond version vectors.
final class SimRelay: @unchecked Sendable {
    let id: ReplicaID
    private(set) var version = VersionVector()
    /// Per author, its changes in seq order, with their arrival number.
    private var logs: [ReplicaID: [(arrival: Int, change: Change)]] = [:]
    /// Changes that arrived ahead of a gap, per author.
    private(set) var held: [ReplicaID: [Change]] = [:]
    private var arrivals = 0
    /// Bumped whenever something new is stored.
    private(set) var revision = 0

    init(id: ReplicaID) { self.id = id }

    /// Stores the changes it does not have yet.
    func store(_ changes: [Change]) {
        for change in changes { store(change) }
    }

    private func store(_ change: Change) {
        let author = change.replica
        let have = version[author]
        if change.endSeq <= have { return }
        if change.startSeq > have + 1 {
            held[author, default: []].append(change)
            return
        }
        let piece = change.suffix(from: have + 1)!
        logs[author, default: []].append((arrivals, piece))
        arrivals += 1
        revision += 1
        version[author] = piece.endSeq
        if let waiting = held.removeValue(forKey: author) {
            for change in waiting.sorted(by: { $0.startSeq < $1.startSeq }) { store(change) }
        }
    }

    /// The changes a replica at `since` lacks, oldest arrival first, at most `limit` of them.
    func changes(beyond since: VersionVector, limit: Int) -> [Change] {
        // Positions are picked and sorted, and only the changes sent are copied out.
        var sources: [(log: [(arrival: Int, change: Change)], have: UInt64)] = []
        var picked: [(arrival: Int, source: Int, index: Int)] = []
        for (author, log) in logs {
            let have = since[author]
            guard version[author] > have else { continue }
            // The first change that ends past `have`.
            var low = 0
            var high = log.count
            while low < high {
                let mid = (low + high) / 2
                if log[mid].change.endSeq > have { high = mid } else { low = mid + 1 }
            }
            for i in low ..< log.count { picked.append((log[i].arrival, sources.count, i)) }
            sources.append((log, have))
        }
        picked.sort { $0.arrival < $1.arrival }
        return picked.prefix(limit).map { position in
            let source = sources[position.source]
            let change = source.log[position.index].change
            return change.startSeq > source.have ? change : change.suffix(from: source.have + 1)!
        }
    }

    /// The seq ranges of `author` the relay holds (stored and held).
    func ranges(of author: ReplicaID) -> [ClosedRange<UInt64>] {
        var result: [ClosedRange<UInt64>] = []
        if version[author] > 0 { result.append(1 ... version[author]) }
        for change in held[author] ?? [] { result.append(change.startSeq ... change.endSeq) }
        return result
    }
}

/// An in-memory shared folder with FolderTransport's semantics: each writer's files in its own
/// subfolder, named by author and seq range, written once. A sync tool copies them to the other
/// devices: each copy appears after a delay (late, sometimes), may first appear cut short or
/// damaged (and is read again later), may be listed twice. A device cut off from the folder's sync
/// keeps writing locally; its files travel once it is back.
final class SimFolder: @unchecked Sendable {
    enum Damage { case none, partial, corrupt }

    /// How one device sees one file.
    struct View {
        var visibleAt: UInt64
        var intactAt: UInt64
        var damage: Damage
        var twice: Bool
        var damageSeed: UInt64
    }

    struct File {
        var writer: ReplicaID
        /// The device (index) that wrote it.
        var writerDevice: Int
        var author: ReplicaID
        var first: UInt64
        var last: UInt64
        var bytes: [UInt8]
        var writtenAt: UInt64
        /// When it left the writer's device (nil: still waiting for the writer to be reachable).
        var uploadedAt: UInt64?
        var views: [Int: View] = [:]
    }

    private(set) var files: [File] = []
    private var index: [String: Int] = [:]
    /// Per device: since when it has received nothing new (an inbound partition).
    var inboundCutSince: [Int: UInt64] = [:]
    private(set) var revision = 0

    /// Writes (or replaces) a file in the writer's subfolder.
    func write(_ file: File) -> Int {
        let key = "\(file.writer)/\(FolderTransport.fileName(author: file.author, first: file.first, last: file.last))"
        revision += 1
        if let existing = index[key] {
            files[existing] = file
            return existing
        }
        files.append(file)
        index[key] = files.count - 1
        return files.count - 1
    }

    func setUploaded(_ i: Int, at time: UInt64, views: [Int: View]) {
        files[i].uploadedAt = time
        files[i].views = views
    }

    /// Drops the files a device wrote that never left it (it was reinstalled).
    func dropUnuploaded(fromDevice device: Int) {
        let keep = files.filter { !($0.writerDevice == device && $0.uploadedAt == nil) }
        guard keep.count != files.count else { return }
        files = keep
        index = [:]
        for (i, file) in files.enumerated() {
            index["\(file.writer)/\(FolderTransport.fileName(author: file.author, first: file.first, last: file.last))"] = i
        }
        revision += 1
    }

    /// The files device `device` (now replica `local`) sees at `now`, with the bytes it would
    /// read; files listed twice appear twice.
    func listing(device: Int, local: ReplicaID, now: UInt64) -> [(file: File, bytes: [UInt8])] {
        var result: [(File, [UInt8])] = []
        let cut = inboundCutSince[device]
        for file in files {
            if file.writer == local {
                result.append((file, file.bytes))
                continue
            }
            guard let view = visibleView(file, device: device, now: now, cut: cut) else { continue }
            var bytes = file.bytes
            if now < view.intactAt {
                var rng = SimRandom(seed: view.damageSeed)
                switch view.damage {
                case .none: break
                case .partial: bytes = Array(bytes.prefix(rng.below(max(1, bytes.count))))
                case .corrupt: Network.corrupt(&bytes, &rng)
                }
            }
            result.append((file, bytes))
            if view.twice { result.append((file, bytes)) }
        }
        return result
    }

    /// The author and seq range of every file `listing` would give (once each), without copying
    /// the files and their bytes: what `remoteVersion` needs, at every sync.
    func ranges(device: Int, local: ReplicaID, now: UInt64) -> [(author: ReplicaID, first: UInt64, last: UInt64)] {
        let cut = inboundCutSince[device]
        var result: [(author: ReplicaID, first: UInt64, last: UInt64)] = []
        for file in files where file.writer == local || visibleView(file, device: device, now: now, cut: cut) != nil {
            result.append((file.author, file.first, file.last))
        }
        return result
    }

    /// How `device` sees another writer's `file` at `now`, if it sees it at all.
    private func visibleView(_ file: File, device: Int, now: UInt64, cut: UInt64?) -> View? {
        guard file.uploadedAt != nil, let view = file.views[device], view.visibleAt <= now else { return nil }
        if let cut, view.visibleAt > cut { return nil }
        return view
    }
}

enum Network {
    /// Damages a byte so that the bundle's checksum no longer matches.
    static func corrupt(_ bytes: inout [UInt8], _ rng: inout SimRandom) {
        guard !bytes.isEmpty else { return }
        let i = rng.below(bytes.count)
        bytes[i] ^= UInt8(1 + rng.below(255))
    }
}

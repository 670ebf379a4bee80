import NotesCRDT
import NotesSync

/// A device's connection to a simulated relay, through the simulated network: each request and
/// each response may be lost, delayed, duplicated or damaged, and a partition cuts one direction
/// or both. A damaged bundle is always decoded by the receiving side and rejected there.
struct SimRelayTransport: SyncTransport {
    let world: Simulation
    let device: Int
    let hub: Int
    let crashBeforeReceive: Bool

    func remoteVersion(for local: ReplicaID) async throws -> VersionVector {
        try world.request(device, hub, "version")
        let version = world.relays[hub]!.version
        try world.response(device, hub, "version")
        return version
    }

    func send(_ bundle: SyncBundle) async throws {
        try world.request(device, hub, "upload")
        try world.upload(Canonical.bundle(bundle).encoded(using: &world.bundleEncoder), from: device, to: hub)
        try world.response(device, hub, "upload")
    }

    func receive(for local: ReplicaID, version: VersionVector) async throws -> (bundles: [ReceivedBundle], skipped: [SkippedInput]) {
        if crashBeforeReceive { throw SyncError(.io, "the device crashed in the middle of the sync") }
        try world.request(device, hub, "download")
        let relay = world.relays[hub]!
        var changes = relay.changes(beyond: version, limit: world.scenario.sync.pageSize)
        if changes.count > 1, world.faultsOn, world.eventRandom.chance(world.scenario.network.reorder) {
            changes.shuffle(using: &world.eventRandom)
            world.stats.reordered += 1
        }
        let response = SyncBundle(sender: relay.id, senderVersion: relay.version, changes: changes)
        var bytes = response.encoded(using: &world.bundleEncoder)
        try world.response(device, hub, "download")
        let damaged = world.faultsOn && world.eventRandom.chance(world.scenario.network.corrupt)
        if damaged {
            Network.corrupt(&bytes, &world.eventRandom)
            world.stats.corruptInjected += 1
        }
        let decoded: SyncBundle
        do {
            decoded = try SyncBundle.decode(bytes)
        } catch let error as SyncError {
            if damaged { world.stats.corruptRejected += 1 } else { world.violation("device \(device): an intact relay response does not decode: \(error)") }
            throw SyncError(.transient, "the relay's response was damaged in transit (\(error.code)); nothing of it was applied")
        }
        if damaged { world.violation("device \(device): a damaged relay response was accepted") }
        var bundles = [ReceivedBundle(bundle: decoded, source: world.scenario.hubs[hub].name)]
        if world.faultsOn, world.eventRandom.chance(world.scenario.network.duplicate) {
            bundles.append(bundles[0])
            world.stats.duplicated += 1
        }
        return (bundles, [])
    }
}

/// A device's view of a simulated shared folder, with FolderTransport's semantics (see that type):
/// per-writer files named by author and seq range, read what we lack, a file that does not decode
/// is skipped and read again on a later sync.
struct SimFolderTransport: SyncTransport {
    let world: Simulation
    let device: Int
    let hub: Int
    let crashBeforeReceive: Bool

    private var folder: SimFolder { world.folders[hub]! }

    func remoteVersion(for local: ReplicaID) async throws -> VersionVector {
        FolderTransport.contiguousCoverage(folder.ranges(device: device, local: local, now: world.clocks.now))
    }

    func send(_ bundle: SyncBundle) async throws {
        var byAuthor: [ReplicaID: [Change]] = [:]
        var order: [ReplicaID] = []
        for change in Canonical.bundle(bundle).changes {
            if byAuthor[change.replica] == nil { order.append(change.replica) }
            byAuthor[change.replica, default: []].append(change)
        }
        for author in order {
            let changes = byAuthor[author]!
            let piece = SyncBundle(sender: bundle.sender, senderVersion: bundle.senderVersion, changes: changes)
            world.writeFile(SimFolder.File(writer: bundle.sender, writerDevice: device, author: author,
                                           first: changes.map(\.startSeq).min()!, last: changes.map(\.endSeq).max()!,
                                           bytes: piece.encoded(using: &world.bundleEncoder), writtenAt: world.clocks.now), hub: hub)
        }
    }

    func receive(for local: ReplicaID, version: VersionVector) async throws -> (bundles: [ReceivedBundle], skipped: [SkippedInput]) {
        if crashBeforeReceive { throw SyncError(.io, "the device crashed in the middle of the sync") }
        var bundles: [ReceivedBundle] = []
        var newestRead: Set<ReplicaID> = []
        let all = folder.listing(device: device, local: local, now: world.clocks.now).filter { $0.file.writer != local }
        let name = world.scenario.hubs[hub].name
        for (file, bytes) in all.sorted(by: { ($0.file.author, $0.file.first) < ($1.file.author, $1.file.first) })
        where file.last > version[file.author] {
            let source = "\(name)/\(file.writer)/\(FolderTransport.fileName(author: file.author, first: file.first, last: file.last))"
            let damaged = bytes != file.bytes
            do {
                let bundle = try SyncBundle.decode(bytes)
                if damaged { world.violation("device \(device): a damaged copy of \(source) was accepted") }
                bundles.append(ReceivedBundle(bundle: bundle, source: source))
                newestRead.insert(file.writer)
            } catch let error as SyncError {
                if damaged { world.stats.corruptRejected += 1 } else { world.violation("device \(device): an intact \(source) does not decode: \(error)") }
                // SkippedInput has no public initializer (NotesSync), so a transport outside that
                // module cannot report what it skipped; the file is read again next time all the same.
                world.stats.skippedFiles += 1
                _ = error
            }
        }
        // For writers nothing was read from, the newest file's header says what they have.
        let byWriter = Dictionary(grouping: all, by: \.file.writer)
        for (writer, files) in byWriter.sorted(by: { $0.key < $1.key }) where !newestRead.contains(writer) {
            guard let newest = files.max(by: { $0.file.writtenAt < $1.file.writtenAt }),
                  let header = try? SyncBundle.decodeHeader(newest.bytes) else { continue }
            bundles.append(ReceivedBundle(bundle: SyncBundle(sender: header.sender, senderVersion: header.senderVersion, changes: []),
                                          source: "\(name)/\(writer)"))
        }
        return (bundles, [])
    }
}

/// A bundle's changes in a canonical order: a causal order that keeps each author's changes
/// together as long as it can.
///
/// The order in which a store lists changes it holds is a causal order, but not a function of
/// the seed alone: the order in which a batch's waiting changes are released follows the order
/// they arrived in, which follows the transports. The state is the same either way, but the
/// simulated relay's arrival order (and so its pages) would follow that order. Sorting what
/// crosses a transport makes a seed replay exactly in any process.
///
/// The order is causal, so a receiver applies each change as it comes rather than holding it
/// until what it depends on arrives later in the same bundle; and it keeps an author's changes
/// in runs, so a receiver logs a batch in a few rows (one per run of one author's changes) and
/// joins them in its history. It is built from each author's changes in seq order: the author
/// whose change came last goes on while its next change is ready (every operation it depends on
/// is already placed, or not in the bundle); otherwise the ready change with the earliest first
/// timestamp (then author) goes next. One always is ready: a change's author had observed,
/// through its hybrid logical clock, every operation the change depends on, so the earliest of
/// the authors' next changes depends on nothing still to come.
enum Canonical {
    static func bundle(_ bundle: SyncBundle) -> SyncBundle {
        SyncBundle(sender: bundle.sender, senderVersion: bundle.senderVersion, changes: order(bundle.changes))
    }

    static func order(_ changes: [Change]) -> [Change] {
        guard changes.count > 1 else { return changes }
        // Each author's changes (their positions) by seq (then as given), the authors in identity
        // order. A bundle has a handful of authors: they are found by a linear search, and the
        // changes are copied once, into the result.
        var found: [ReplicaID] = []
        var byAuthor: [[Int]] = []
        for i in changes.indices {
            let replica = changes[i].replica
            if let a = found.firstIndex(of: replica) { byAuthor[a].append(i) } else { found.append(replica); byAuthor.append([i]) }
        }
        let sorted = found.indices.sorted { found[$0] < found[$1] }
        let authors = sorted.map { found[$0] }
        let queues = sorted.map { a in
            byAuthor[a].sorted { (changes[$0].startSeq, $0) < (changes[$1].startSeq, $1) }
        }
        var next = [Int](repeating: 0, count: authors.count)  // per author, its first change not placed
        /// Whether every operation `change` depends on is placed or not in the bundle.
        func ready(_ change: Int) -> Bool {
            for dependency in changes[change].dependencies.sortedEntries where dependency.replica != changes[change].replica {
                guard let a = authors.firstIndex(of: dependency.replica), next[a] < queues[a].count else { continue }
                if changes[queues[a][next[a]]].startSeq <= dependency.seq { return false }
            }
            return true
        }
        func head(_ a: Int) -> Int { queues[a][next[a]] }
        var result: [Change] = []
        result.reserveCapacity(changes.count)
        var current: Int?
        while result.count < changes.count {
            if let a = current, next[a] < queues[a].count, ready(head(a)) {
                result.append(changes[head(a)])
                next[a] += 1
                continue
            }
            var best: Int?
            var fallback: Int?
            for a in authors.indices where next[a] < queues[a].count {
                let timestamp = changes[head(a)].timestamp
                if fallback == nil || timestamp < changes[head(fallback!)].timestamp { fallback = a }
                if ready(head(a)), best == nil || timestamp < changes[head(best!)].timestamp { best = a }
            }
            // (Without a ready one, which a causal history cannot give, the earliest goes.)
            let a = best ?? fallback!
            result.append(changes[head(a)])
            next[a] += 1
            current = a
        }
        return result
    }
}

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
        try world.upload(Canonical.bundle(bundle).encoded(), from: device, to: hub)
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
        var bytes = response.encoded()
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
                                           bytes: piece.encoded(), writtenAt: world.clocks.now), hub: hub)
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
                  let bundle = try? SyncBundle.decode(newest.bytes) else { continue }
            bundles.append(ReceivedBundle(bundle: SyncBundle(sender: bundle.sender, senderVersion: bundle.senderVersion, changes: []),
                                          source: "\(name)/\(writer)"))
        }
        return (bundles, [])
    }
}

/// A bundle's changes in a canonical order: by the timestamp of their first operation, then by
/// author and seq.
///
/// The order in which a store lists changes it holds is a causal order, but not a function of
/// the seed alone: the order in which a batch's waiting changes are released follows the order
/// they arrived in, which follows the transports. The state is the same either way, but the
/// simulated relay's arrival order (and so its pages) would follow that order. Sorting what
/// crosses a transport makes a seed replay exactly in any process.
///
/// The order is causal too, so a receiver applies each change as it comes rather than holding
/// it until what it depends on arrives later in the same bundle: a change's timestamps come from
/// its author's hybrid logical clock, which had observed every operation the change depends on,
/// so the change's first timestamp is later than the timestamp of the piece that carries each
/// of them (and an author's own changes follow each other in seq order and in time).
enum Canonical {
    static func bundle(_ bundle: SyncBundle) -> SyncBundle {
        let sorted = bundle.changes.enumerated().sorted {
            ($0.element.timestamp.rawValue, $0.element.replica, $0.element.startSeq, $0.offset)
                < ($1.element.timestamp.rawValue, $1.element.replica, $1.element.startSeq, $1.offset)
        }.map(\.element)
        return SyncBundle(sender: bundle.sender, senderVersion: bundle.senderVersion, changes: sorted)
    }
}

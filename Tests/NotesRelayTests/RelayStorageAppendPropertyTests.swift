import Foundation
import NotesCRDT
import NotesRelay
import NotesSync
import Testing

/// A storage's append taken directly (as another relay front end, or a service with a bug, would
/// call it), with records that lie: seqs at the edges of their type, ranges that end before they
/// start, repeats, overlaps and gaps inside one append, sealed and plain mixed, another signing
/// key. Checked against a model of the rules (`RelayStorage`): exactly the records that extend
/// what the space holds are stored; a refused append changes nothing; every page reads back as
/// each author's records following one another from seq 1 up to the space's version, so a client
/// paging from nothing gets everything and stops. (A record with seqs past 2^63 - 1 was stored,
/// and a page then read it as before seq 1: the space said it held more, and no page served it.)
struct RelayStorageAppendPropertyTests {
    static let authors = (1 ... 3).map { ReplicaID(Identifier128(high: 0xA9, low: $0)) }

    struct Model {
        var covered: [ReplicaID: UInt64] = [:]
        var sealed: Bool?
        var keys: [ReplicaID: [UInt8]] = [:]

        /// The indexes stored, or nil when the append must be refused (nothing stored).
        func append(_ records: [RelayRecord]) -> (stored: [Int], next: Model)? {
            var next = self
            let kind = sealed ?? records[0].sealed
            guard records.allSatisfy({ $0.sealed == kind }) else { return nil }
            next.sealed = kind
            var stored: [Int] = []
            for (index, record) in records.enumerated() {
                guard (1 ... Change.maxSeq).contains(record.startSeq), (record.startSeq ... Change.maxSeq).contains(record.endSeq) else { return nil }
                if let key = record.signingKey {
                    if let known = next.keys[record.author], known != key { return nil }
                    next.keys[record.author] = next.keys[record.author] ?? key
                }
                let have = next.covered[record.author] ?? 0
                if record.endSeq <= have { continue }
                guard record.startSeq <= have + 1 else { return nil }
                next.covered[record.author] = record.endSeq
                stored.append(index)
            }
            return (stored, next)
        }
    }

    /// A record of `author` whose seqs sit around what the space holds, or at an edge.
    static func record(_ rng: inout SplitMix64, _ author: ReplicaID, have: UInt64, sealed: Bool) -> RelayRecord {
        let near: [UInt64] = [have &- 1, have, have &+ 1, have &+ 1, have &+ 1, have &+ 1, have &+ 1, have &+ 2, have &+ 5]
        let edges: [UInt64] = [0, 1, Change.maxSeq - 1, Change.maxSeq, Change.maxSeq + 1, UInt64(Int64.max), UInt64(Int64.max) + 1, .max - 1, .max]
        let start = rng.next() % 25 == 0 ? edges[Int(rng.next() % UInt64(edges.count))] : near[Int(rng.next() % UInt64(near.count))]
        var end = start &+ rng.next() % 4
        switch rng.next() % 24 {
        case 0: end = start &- 1  // ends before it starts
        case 1: end = edges[Int(rng.next() % UInt64(edges.count))]
        default: break
        }
        let size = [0, 1, 40, 70_000][Int(rng.next() % 4)]
        let key: [UInt8]? = sealed ? Array(repeating: UInt8(rng.next() % 80 == 0 ? 2 : 1), count: 32) : nil
        return RelayRecord(author: author, startSeq: start, endSeq: end, payload: Array(repeating: UInt8(truncatingIfNeeded: start), count: size),
                           sealed: sealed, signingKey: key)
    }

    /// Every record a client at nothing is given, page by page (with a bound on the pages).
    static func readAll(_ storage: any RelayStorage, space: String, limits: RelayPageLimits) async throws -> (records: [RelayRecord], version: VersionVector) {
        var have = VersionVector()
        var records: [RelayRecord] = []
        var version = VersionVector()
        for _ in 0 ..< 10_000 {
            let page = try await storage.page(space: space, after: have, limits: limits)
            version = page.version
            for stored in page.records {
                // Each author's records follow what the client has, with no gap; one stored across
                // the end of what the space held may start inside it (the client cuts it).
                let had = have[stored.record.author]
                #expect(stored.record.startSeq <= had + 1 && stored.record.endSeq > had, "a page's record \(stored.record.startSeq) ... \(stored.record.endSeq) does not follow seq \(had)")
                #expect(stored.record.startSeq >= 1 && stored.record.endSeq >= stored.record.startSeq)
                have[stored.record.author] = stored.record.endSeq
                records.append(stored.record)
            }
            if !page.more { return (records, version) }
            guard !page.records.isEmpty else {
                Issue.record("a page with nothing that says there is more")
                return (records, version)
            }
        }
        Issue.record("paging did not end")
        return (records, version)
    }

    @Test(arguments: RelayBackend.available, [1, 2, 3] as [UInt64])
    func appendsKeepThePagesInvariants(backend: RelayBackend, seed: UInt64) async throws {
        try await backend.with { storage in
            var rng = SplitMix64(seed: seed)
            let space = uniqueSpace("append")
            var model = Model()
            let sealedSpace = seed == 3
            var refused = 0
            var stored = 0
            for round in 0 ..< 200 {
                var records: [RelayRecord] = []
                var have = model.covered
                for _ in 0 ..< 1 + Int(rng.next() % 3) {
                    let author = Self.authors[Int(rng.next() % UInt64(Self.authors.count))]
                    let sealed = rng.next() % 60 == 0 ? !sealedSpace : sealedSpace
                    let record = Self.record(&rng, author, have: have[author] ?? 0, sealed: sealed)
                    records.append(record)
                    if rng.next() % 6 == 0 { records.append(record) }  // a repeat inside one append
                    if record.endSeq > have[author] ?? 0, record.startSeq <= (have[author] ?? 0) + 1 { have[author] = record.endSeq }
                }
                let before = try await Self.readAll(storage, space: space, limits: RelayPageLimits(maxChanges: 7, maxBytes: 100_000))
                let expected = model.append(records)
                do {
                    let indexes = try await storage.append(space: space, records: records)
                    guard let expected else {
                        Issue.record("round \(round): an append the rules refuse was taken (\(indexes))")
                        break
                    }
                    #expect(indexes == expected.stored, "round \(round)")
                    model = expected.next
                    stored += indexes.count
                } catch let error as RelayStorageError {
                    #expect(expected == nil, "round \(round): refused \(error.kind) (\(error.message)), the model takes it")
                    #expect(error.kind != .failure, "round \(round): \(error.message)")
                    #expect(!error.message.isEmpty)
                    refused += 1
                    let after = try await Self.readAll(storage, space: space, limits: RelayPageLimits(maxChanges: 7, maxBytes: 100_000))
                    #expect(after.records == before.records && after.version == before.version, "round \(round): a refused append changed the space")
                }
                let now = try await Self.readAll(storage, space: space, limits: RelayPageLimits(maxChanges: 1 + Int(rng.next() % 9), maxBytes: 1 + Int(rng.next() % 200_000)))
                var expectedVersion = VersionVector()
                for (author, seq) in model.covered { expectedVersion[author] = seq }
                #expect(now.version == expectedVersion, "round \(round)")
                let status = try await storage.status(space: space)
                #expect(status.version == expectedVersion && status.changes == now.records.count, "round \(round)")
            }
            #expect(refused > 10 && stored > 30, "refused \(refused), stored \(stored)")
        }
    }
}

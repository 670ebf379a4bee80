import Foundation
import NotesCRDT
import NotesRelay
import NotesSync
import Testing

/// Records sent again (`appendAgain`) mixed with appends, checked against SQLite in memory (the
/// reference): each backend stores the same records, answers every page (from vectors at random,
/// within limits at random, through `page` and `appendThenPage`) with the same records in the same
/// order, `again` marked alike, and says alike whether there is more. So PostgreSQL's page
/// statement merges an author's chain and the records sent again beside it as
/// `RelayPageCandidate.pick` does.
struct RelayStorageAgainPropertyTests {
    static let authors = (1 ... 3).map { ReplicaID(Identifier128(high: 0xA6, low: $0)) }

    /// A record of `author` at seqs the space holds (sent again), or extending them (possibly
    /// straddling the end); its payload one of three per seqs, so some are sent again twice.
    static func record(_ rng: inout SplitMix64, _ author: ReplicaID, have: UInt64) -> RelayRecord {
        let start: UInt64
        let end: UInt64
        if have > 0, rng.next() % 2 == 0 {
            start = 1 + rng.next() % have
            end = start + rng.next() % (have - start + 1)
        } else {
            start = have > 1 && rng.next() % 4 == 0 ? have : have + 1
            end = max(start, have + 1) + rng.next() % 3
        }
        let variant = UInt8(rng.next() % 3)
        return RelayRecord(author: author, startSeq: start, endSeq: end,
                           payload: [variant, UInt8(truncatingIfNeeded: start), UInt8(truncatingIfNeeded: end)] + Array(repeating: variant, count: Int(variant) * 20))
    }

    static func randomClient(_ rng: inout SplitMix64, covered: [ReplicaID: UInt64]) -> VersionVector {
        var client = VersionVector()
        for author in authors where rng.next() % 3 != 0 {
            client[author] = rng.next() % ((covered[author] ?? 0) + 1)
        }
        return client
    }

    static func randomLimits(_ rng: inout SplitMix64) -> RelayPageLimits {
        RelayPageLimits(maxChanges: 1 + Int(rng.next() % 6), maxBytes: rng.next() % 4 == 0 ? 1 << 20 : 1 + Int(rng.next() % 150))
    }

    static func expectAlike(_ page: RelayPage, _ reference: RelayPage, _ what: String) {
        #expect(page.records.map(\.record) == reference.records.map(\.record), "\(what): records")
        #expect(page.version == reference.version && page.more == reference.more, "\(what): version, more")
    }

    @Test(arguments: RelayBackend.available, [1, 2, 3] as [UInt64])
    func recordsSentAgainAreKeptAndPagedAsSQLiteDoes(backend: RelayBackend, seed: UInt64) async throws {
        let reference = try SQLiteRelayStorage.inMemory()
        try await backend.with { storage in
            var rng = SplitMix64(seed: seed)
            let space = uniqueSpace("again")
            var covered: [ReplicaID: UInt64] = [:]
            for round in 0 ..< 80 {
                var batch: [RelayRecord] = []
                for _ in 0 ..< 1 + Int(rng.next() % 3) {
                    let author = Self.authors[Int(rng.next() % UInt64(Self.authors.count))]
                    let record = Self.record(&rng, author, have: covered[author] ?? 0)
                    batch.append(record)
                    if record.endSeq > covered[author] ?? 0 { covered[author] = record.endSeq }
                }
                let what = "\(backend.rawValue), seed \(seed), round \(round)"
                switch rng.next() % 3 {
                case 0:
                    let expected = try await reference.appendAgain(space: space, records: batch)
                    #expect(try await storage.appendAgain(space: space, records: batch) == expected, "\(what): stored")
                case 1:
                    let expected = try await reference.append(space: space, records: batch)
                    #expect(try await storage.append(space: space, records: batch) == expected, "\(what): stored")
                default:
                    let client = Self.randomClient(&rng, covered: covered)
                    let limits = Self.randomLimits(&rng)
                    let expected = try await reference.appendThenPage(space: space, records: batch, after: client, limits: limits, needsPayload: { _ in true })
                    let got = try await storage.appendThenPage(space: space, records: batch, after: client, limits: limits, needsPayload: { _ in true })
                    #expect(got.stored == expected.stored, "\(what): stored")
                    Self.expectAlike(got.page, expected.page, "\(what): sync page")
                }
                for probe in 0 ..< 3 {
                    let client = Self.randomClient(&rng, covered: covered)
                    let limits = Self.randomLimits(&rng)
                    Self.expectAlike(try await storage.page(space: space, after: client, limits: limits),
                                     try await reference.page(space: space, after: client, limits: limits), "\(what), page \(probe)")
                }
                let status = try await storage.status(space: space)
                let expected = try await reference.status(space: space)
                #expect(status.version == expected.version && status.changes == expected.changes && status.bytes == expected.bytes, "\(what): status")
            }
            let all = try await reference.page(space: space, after: VersionVector(), limits: RelayPageLimits(maxChanges: 100_000))
            let kept = all.records.filter(\.record.again).count
            #expect(kept > 10 && all.records.count > kept + 20, "records kept beside the chain: \(kept) of \(all.records.count)")
        }
    }
}

import BundleFuzz
import Testing

/// Structure-aware fuzzing of the bundle reader in the suite, from fixed seeds: 15,000 plain
/// bundles, record pages and re-issues, and 800 sealed bundles (`crdt-sync-fuzz` runs a million of every
/// kind in worker processes). Every case must end in a `SyncError` that names the problem (from
/// decode and from the relay client's record-by-record read alike) or in an accepted bundle that
/// both read the same, that round-trips, applies to a store without it throwing, and leaves the
/// store agreeing with a notebook that applied the same changes; a sealed bundle's units are
/// checked as the relay and a folder reader check them, and a store in the space opens exactly
/// those a model of it opens (whole units of new members always, altered ones never), its state
/// that of a notebook that applied their changes, a refused unit leaving it as it was.
/// Serialized, and yielding every few cases: one core for the fuzzing, and the tasks of the
/// suites beside it (the relay's, with deadlines) still get their turn.
@Suite(.serialized)
struct BundleFuzzTests {
    /// Four slices of 5,000 case numbers, the sealed ones left out (the next test has them).
    @Test(arguments: [0, 1, 2, 3] as [UInt64])
    func hostileBundlesEndInAnErrorOrAnAcceptedBundle(slice: UInt64) async {
        let tally = await FuzzTally.runYielding(seed: 20_261_124, cases: slice * 5000 ..< (slice + 1) * 5000, taking: .notSealed)
        #expect(tally.cases > 3500)
        #expect(tally.failures.isEmpty, "\(tally.failures.prefix(5))")
        // The cases reach every stage: the reader's checks, the limits, and applying.
        #expect(tally.accepted > 800, "\(tally)")
        #expect(tally.quarantined > 30, "\(tally)")
        #expect(tally.rejected["malformed", default: 0] > 1800, "\(tally)")
        #expect(tally.rejected["tooLarge", default: 0] > 50, "\(tally)")
        // A third are record pages (format version 5), read by decode and record by record; some
        // left valid (they must decode to their records' changes), most made hostile.
        #expect(tally.recordPagesAccepted > 150, "\(tally)")
        #expect(tally.recordPagesRejected > 500, "\(tally)")
        // An eighth of the plain half claim the store's own identity: echoes keep it, forks move it.
        #expect(tally.ownIdentityAccepted > 150 && tally.ownIdentityMoved > 50, "\(tally)")
        #expect(tally.ownIdentityAccepted - tally.ownIdentityMoved > 50, "\(tally)")
        // Another eighth re-issue operations of a forked identity the store holds: the
        // malformed ones are refused, the matching ones withdraw what they re-issue.
        #expect(tally.reissueAccepted > 150 && tally.reissueRejected > 30 && tally.reissueWithdrew > 80, "\(tally)")
        // No case meets a known fault of the code under test (`FuzzDriver.knownIssues`).
        #expect(tally.knownIssues.allSatisfy { $0 == 0 }, "\(tally.knownIssueSeeds)")
        // A hang detector, not a speed test: the issue's bound for one hostile import.
        #expect(tally.slowestMilliseconds < 10_000, "case seed \(tally.slowestSeed)")
    }

    /// Two slices of 400 sealed bundles (format version 4) of an encrypted space: most decode,
    /// and their units reach the store, which opens the whole ones and refuses the forged,
    /// altered and hostile ones.
    @Test(arguments: [0, 1] as [UInt64])
    func sealedBundlesEndInAnErrorOrUnitsOpenedAsAModelSays(slice: UInt64) async {
        let tally = await FuzzTally.runYielding(seed: 20_261_125, cases: slice * 1600 ..< (slice + 1) * 1600, taking: .sealed)
        #expect(tally.cases > 300)
        #expect(tally.failures.isEmpty, "\(tally.failures.prefix(5))")
        #expect(tally.sealedAccepted > 200, "\(tally)")
        #expect(tally.sealedRejected > 60, "\(tally)")
        #expect(tally.sealedUnitsOpened > 600, "\(tally)")
        #expect(tally.sealedUnitsRefused > 100, "\(tally)")
        #expect(tally.rejected["malformed", default: 0] > 30 && tally.rejected["truncated", default: 0] > 10, "\(tally)")
        #expect(tally.slowestMilliseconds < 10_000, "case seed \(tally.slowestSeed)")
    }

    /// One seed gives one bundle, on every run.
    @Test func casesRepeat() {
        let driver = FuzzDriver()
        for index in 0 ..< 50 as Range<UInt64> {
            let seed = FuzzDriver.caseSeed(7, index)
            #expect(driver.bytes(caseSeed: seed) == driver.bytes(caseSeed: seed))
        }
        #expect(FuzzDriver.caseSeed(7, 0) != FuzzDriver.caseSeed(7, 1))
        // Sealed cases among them: signatures, salts and keys all come from the seed.
        #expect((0 ..< 50 as Range<UInt64>).contains { FuzzDriver.isSealed(FuzzDriver.caseSeed(7, $0)) })
        // And re-issues: the forks, repairs and floods too.
        let reissues = (0 ..< 2000 as Range<UInt64>).map { FuzzDriver.caseSeed(7, $0) }.filter(FuzzDriver.isReissue).prefix(20)
        #expect(reissues.count == 20)
        for seed in reissues { #expect(driver.bytes(caseSeed: seed) == driver.bytes(caseSeed: seed)) }
    }
}

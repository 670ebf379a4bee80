import BundleFuzz
import Testing

/// Structure-aware fuzzing of the bundle reader in the suite: 20,000 cases from fixed seeds, a
/// quarter of them record pages (`crdt-sync-fuzz` runs a million in worker processes). Every case
/// must end in a `SyncError` that names the problem (from decode and from the relay client's
/// record-by-record read alike) or in an accepted bundle that both read the same, that
/// round-trips, applies to a store without it throwing, and leaves the store agreeing with a
/// notebook that applied the same changes.
/// Serialized, and yielding every few cases: one core for the fuzzing, and the tasks of the
/// suites beside it (the relay's, with deadlines) still get their turn.
@Suite(.serialized)
struct BundleFuzzTests {
    /// Four slices of 5,000 cases.
    @Test(arguments: [0, 1, 2, 3] as [UInt64])
    func hostileBundlesEndInAnErrorOrAnAcceptedBundle(slice: UInt64) async {
        let tally = await FuzzTally.runYielding(seed: 20_261_124, cases: slice * 5000 ..< (slice + 1) * 5000)
        #expect(tally.cases == 5000)
        #expect(tally.failures.isEmpty, "\(tally.failures.prefix(5))")
        // The cases reach every stage: the reader's checks, the limits, and applying.
        #expect(tally.accepted > 1000, "\(tally)")
        #expect(tally.quarantined > 50, "\(tally)")
        #expect(tally.rejected["malformed", default: 0] > 2000, "\(tally)")
        #expect(tally.rejected["tooLarge", default: 0] > 50, "\(tally)")
        // A quarter are record pages (format version 5), read by decode and record by record; some
        // left valid (they must decode to their records' changes), most made hostile.
        #expect(tally.recordPagesAccepted > 150, "\(tally)")
        #expect(tally.recordPagesRejected > 500, "\(tally)")
        // A hang detector, not a speed test: the bound for one hostile import.
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
    }
}

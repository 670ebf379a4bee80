import NotesCRDT
import PropertyBased
import Testing

struct HybridLogicalClockTests {
    @Test func timestampPacksMillisecondsAndCounter() {
        let t = Timestamp(milliseconds: 1234, counter: 7)
        #expect(t.milliseconds == 1234)
        #expect(t.counter == 7)
        #expect(t.rawValue == 1234 << 16 | 7)
        #expect(t.advanced(by: 1) == Timestamp(milliseconds: 1234, counter: 8))
        #expect(Timestamp(milliseconds: 1, counter: .max).advanced(by: 1) == Timestamp(milliseconds: 2))
        #expect(Timestamp(milliseconds: 1, counter: .max) < Timestamp(milliseconds: 2))
    }

    @Test func tickFollowsTheWallClockWhenItMovesForward() {
        var clock = HybridLogicalClock()
        #expect(clock.tick(wallMilliseconds: 1000) == Timestamp(milliseconds: 1000))
        #expect(clock.tick(wallMilliseconds: 2000) == Timestamp(milliseconds: 2000))
        #expect(clock.last == Timestamp(milliseconds: 2000))
    }

    @Test func tickWithinOneMillisecondCounts() {
        var clock = HybridLogicalClock()
        let first = clock.tick(wallMilliseconds: 1000)
        let second = clock.tick(wallMilliseconds: 1000)
        #expect(second == Timestamp(milliseconds: 1000, counter: 1))
        #expect(first < second)
    }

    @Test func tickIsStrictlyMonotonicWhenTheWallClockGoesBack() {
        var clock = HybridLogicalClock()
        let t1 = clock.tick(wallMilliseconds: 5000)
        let t2 = clock.tick(wallMilliseconds: 1000)
        let t3 = clock.tick(wallMilliseconds: 0)
        #expect(t1 < t2 && t2 < t3)
        #expect(t3.milliseconds == 5000)
    }

    @Test func tickOfSeveralReservesConsecutiveTimestamps() {
        var clock = HybridLogicalClock()
        let first = clock.tick(wallMilliseconds: 1000, count: 5)
        #expect(first == Timestamp(milliseconds: 1000))
        #expect(clock.last == first.advanced(by: 4))
        #expect(clock.tick(wallMilliseconds: 1000) == first.advanced(by: 5))
    }

    @Test func monotonicUnderAnyWallClock() async {
        await propertyCheck(count: 100, input: Gen.uint64(in: 0 ... 10_000).array(of: 1 ... 60), Gen.uint64(in: 1 ... 4).array(of: 60)) { walls, counts in
            var clock = HybridLogicalClock()
            var previous: Timestamp? = nil
            for (wall, count) in zip(walls, counts) {
                let t = clock.tick(wallMilliseconds: wall, count: count)
                if let previous { #expect(t > previous) }
                #expect(t.milliseconds >= wall)
                #expect(clock.last == t.advanced(by: count - 1))
                previous = clock.last
            }
        }
    }

    @Test func observeRaisesTheClockAboveTheRemoteTimestamp() {
        var clock = HybridLogicalClock()
        _ = clock.tick(wallMilliseconds: 1000)
        let remote = Timestamp(milliseconds: 30_000, counter: 3)
        let clamped = clock.observe(remote, wallMilliseconds: 1000)
        #expect(!clamped)
        #expect(clock.last == remote)
        #expect(clock.tick(wallMilliseconds: 1000) > remote)
    }

    @Test func observeOfAnOlderTimestampDoesNotLowerTheClock() {
        var clock = HybridLogicalClock()
        let mine = clock.tick(wallMilliseconds: 9000)
        let clamped = clock.observe(Timestamp(milliseconds: 10), wallMilliseconds: 9000)
        #expect(!clamped)
        #expect(clock.last == mine)
    }

    @Test func aRemoteTimestampBeyondTheDriftBoundIsClamped() {
        var clock = HybridLogicalClock(maxForwardDrift: 60_000)
        let wall: UInt64 = 1_000_000
        _ = clock.tick(wallMilliseconds: wall)
        let nextYear = Timestamp(milliseconds: wall + 365 * 86_400_000)
        let clamped = clock.observe(nextYear, wallMilliseconds: wall)
        #expect(clamped)
        #expect(clock.last < nextYear)
        #expect(clock.last.milliseconds <= wall + 60_000)
        // Later local timestamps stay near our wall clock, not next year.
        let next = clock.tick(wallMilliseconds: wall + 1)
        #expect(next.milliseconds <= wall + 60_001)
        #expect(next < nextYear)
        // Exactly at the bound is not clamped.
        var other = HybridLogicalClock(maxForwardDrift: 60_000)
        let atBound = other.observe(Timestamp(milliseconds: wall + 60_000), wallMilliseconds: wall)
        #expect(!atBound)
        #expect(other.last == Timestamp(milliseconds: wall + 60_000))
    }

    /// A clock years ahead of the wall clock (its device's clock was wrong, then corrected) ticks
    /// from the wall clock again; one kept at the drift bound by a fast peer goes on increasing.
    @Test func aClockFarAheadOfTheWallClockComesBack() {
        let wall: UInt64 = 1_000_000_000
        var corrected = HybridLogicalClock(last: Timestamp(milliseconds: wall + 10 * 365 * 86_400_000), maxForwardDrift: 60_000)
        #expect(corrected.tick(wallMilliseconds: wall) == Timestamp(milliseconds: wall))
        #expect(corrected.tick(wallMilliseconds: wall) == Timestamp(milliseconds: wall, counter: 1))
        var kept = HybridLogicalClock(maxForwardDrift: 60_000)
        kept.observe(Timestamp(milliseconds: wall + 3_600_000), wallMilliseconds: wall)
        var previous = kept.last
        for _ in 0 ..< 1000 {
            let t = kept.tick(wallMilliseconds: wall, count: 100)
            #expect(t > previous)
            previous = kept.last
        }
    }

    @Test func witnessLocalOnlyRaises() {
        var clock = HybridLogicalClock(last: Timestamp(milliseconds: 50))
        clock.witnessLocal(Timestamp(milliseconds: 10))
        #expect(clock.last == Timestamp(milliseconds: 50))
        clock.witnessLocal(Timestamp(milliseconds: 70))
        #expect(clock.last == Timestamp(milliseconds: 70))
    }

    @Test func aNotebookIsNotDraggedByAFarFutureReplica() throws {
        var future = makeNotebook(1, at: baseTime + 30 * 86_400_000)
        let (id, created) = future.createNote(id: noteID(1), title: "from the future")
        var local = makeNotebook(2)
        local.apply(created)
        #expect(local.clock.last.milliseconds <= baseTime + HybridLogicalClock.defaultMaxForwardDrift)
        let mine = try #require(try local.setPinned(id, true))
        #expect(mine.timestamp.milliseconds <= baseTime + HybridLogicalClock.defaultMaxForwardDrift + 1)
    }
}

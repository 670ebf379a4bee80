import Dispatch
import NotesCRDT
import NotesStore
import NotesSync

/// What one case came to.
public enum FuzzOutcome: Sendable, Hashable {
    /// `SyncBundle.decode` refused it, with this error code and message.
    case rejected(code: String, message: String)
    /// It decoded, and was applied to a notebook and a store with these results.
    case accepted(changes: Int, applied: Int, quarantined: Int)
    /// A sealed bundle decoded; of its units, the store opened and refused these many (and said why).
    case sealed(units: Int, opened: Int, refused: Int, quarantined: Int, reasons: [String])
    /// A case in the receiving store's own name (`OwnIdentityCases`) decoded: of its changes, these
    /// many showed another copy of the store (refused, or waiting on seqs it never made), and it
    /// moved to a fresh identity or not.
    case ownIdentity(changes: Int, showingACopy: Int, moved: Bool, kind: String)
    /// A case that re-issues operations (`ReissueCases`) was applied: its bundles' changes, the
    /// model's replays of its log, and whether the case withdrew operations from the store.
    case reissue(changes: Int, rebuilds: Int, withdrew: Bool, kind: String)
    /// The case met the known fault `FuzzDriver.knownIssues[index]` of the code under test
    /// (counted apart from failures, and from the accepted and rejected cases).
    case knownIssue(index: Int)
}

/// A case that broke a promise: an error of the wrong type, a store that threw, a digest that
/// cannot be computed or differs, a round trip that does not give the same changes back.
public struct FuzzFailure: Error, Sendable, CustomStringConvertible {
    public var caseSeed: UInt64
    public var message: String
    public var description: String { "case seed \(caseSeed): \(message)" }
}

/// Runs cases: each a `HostileBundles` bundle (or, a quarter of them each, a `HostileRecordPages`
/// record page or a `HostileSealedUnits` sealed bundle, run by `runSealed`; a sixteenth each,
/// `OwnIdentityCases` in the store's own name and `ReissueCases` re-issues, run by
/// `runReissue`) through `SyncBundle.decode` (what `crdt-sync import` reads with) and through the
/// relay client's record-by-record read (`recordCoverage`, then `RecordReader`), which must agree,
/// then (when it decodes) `Notebook.apply` and `NoteStore.apply` on a real in-memory store, each
/// bundle as one batch, checking what must hold of each: an error that is a `SyncError` with a
/// message; for what decodes, a round trip to the same changes, a store that does not throw, and
/// a store whose digest and quarantine are those of a notebook that applied the same changes (it
/// follows the store from case to case).
public struct FuzzDriver {
    let generator = HostileBundles()
    let recordPages = HostileRecordPages()
    let sealedGenerator = HostileSealedUnits()
    let ownCases = OwnIdentityCases()
    let reissueCases = ReissueCases()
    /// The store in an encrypted space that sealed cases go to (a new one every `casesPerStore / 4`).
    var receiver: SealedReceiver?
    var store: NoteStore?
    /// Applies what the store applies, in the same order: the store must agree with it.
    var shadow = FuzzDriver.freshNotebook()
    var casesOnStore = 0
    /// A store takes this many cases before it is replaced (its state grows with what it accepts).
    public var casesPerStore = 100

    public init() {}

    static let clock = FixedWallClock(1_700_000_000_000)

    static func freshNotebook() -> Notebook { Notebook(replicaID: OwnIdentityCases.receiver, wallClock: clock) }

    /// The seed of case `index` of a run seeded `seed`.
    public static func caseSeed(_ seed: UInt64, _ index: UInt64) -> UInt64 {
        var z = seed &+ index &* 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Whether case `caseSeed` is a record page (format version 5): a quarter of the cases.
    public static func isRecordPage(_ caseSeed: UInt64) -> Bool { caseSeed >> 62 == 3 }

    /// Whether case `caseSeed` claims the receiving store's identity (`OwnIdentityCases`): an
    /// eighth of the plain bundles' half.
    public static func isOwnIdentity(_ caseSeed: UInt64) -> Bool { caseSeed >> 62 < 2 && (caseSeed >> 56) & 7 == 0 }

    /// Whether case `caseSeed` re-issues operations (`ReissueCases`): another eighth of the
    /// plain bundles' half.
    public static func isReissue(_ caseSeed: UInt64) -> Bool { caseSeed >> 62 < 2 && (caseSeed >> 56) & 7 == 1 }

    /// The bytes of case `caseSeed`.
    public func bytes(caseSeed: UInt64) -> [UInt8] { input(caseSeed: caseSeed).bytes }

    /// The bytes of case `caseSeed`, and the changes they must decode to when the case is a valid page.
    func input(caseSeed: UInt64) -> (bytes: [UInt8], expected: [Change]?) {
        if Self.isSealed(caseSeed) { return (sealedGenerator.sealedCase(seed: caseSeed).bytes, nil) }
        if Self.isOwnIdentity(caseSeed) { return (ownCases.ownCase(seed: caseSeed).bytes, nil) }
        if Self.isReissue(caseSeed) { return (reissueCases.reissueCase(seed: caseSeed).bundles[0], nil) }
        guard Self.isRecordPage(caseSeed) else { return (generator.bundle(seed: caseSeed).bytes(), nil) }
        let page = recordPages.page(seed: caseSeed)
        return (page.bytes(), page.expected)
    }

    /// What the relay client reads of a record page: its coverage from the frames (checked whole
    /// first), then its changes record by record. Nil for a bundle of another version.
    public static func readAsRelayClient(_ bytes: [UInt8]) throws -> (coverage: VersionVector, changes: [Change])? {
        guard let coverage = try SyncBundle.recordCoverage(bytes) else {
            guard try SyncBundle.RecordReader(bytes) == nil else { throw SyncError(.malformed, "BUG: a record reader of a page with no coverage") }
            return nil
        }
        guard var reader = try SyncBundle.RecordReader(bytes) else { throw SyncError(.malformed, "BUG: no record reader of a page with coverage") }
        var changes: [Change] = []
        while let record = try reader.next() { changes += record }
        return (coverage, changes)
    }

    /// Per author, the last seq `changes` reach.
    static func coverage(of changes: [Change]) -> VersionVector {
        var covered = VersionVector()
        for change in changes where change.endSeq > covered[change.replica] { covered[change.replica] = change.endSeq }
        return covered
    }

    /// Runs one case.
    public mutating func run(caseSeed: UInt64) throws -> FuzzOutcome {
        do {
            return try runCase(caseSeed: caseSeed)
        } catch let failure as FuzzFailure {
            // A store broken by a known fault, met by whichever case uses it next.
            if let known = Self.knownIssues.firstIndex(where: { !$0.declared && failure.message.contains($0.symptom) }) {
                casesOnStore = casesPerStore
                return .knownIssue(index: known)
            }
            throw failure
        }
    }

    mutating func runCase(caseSeed: UInt64) throws -> FuzzOutcome {
        if Self.isSealed(caseSeed) { return try runSealed(caseSeed: caseSeed) }
        if Self.isReissue(caseSeed) { return try runReissue(caseSeed: caseSeed) }
        let (bytes, expected) = input(caseSeed: caseSeed)
        func fail(_ message: String) -> FuzzFailure { FuzzFailure(caseSeed: caseSeed, message: message) }
        let bundle: SyncBundle
        switch try read(bytes, expected: expected, caseSeed: caseSeed) {
        case .failure(let error): return .rejected(code: error.code.description, message: error.message)
        case .success(let decoded): bundle = decoded
        }
        try takeStore(caseSeed: caseSeed)
        let applied = try applyChecked(bundle, caseSeed: caseSeed)
        if Self.isOwnIdentity(caseSeed) {
            return .ownIdentity(changes: bundle.changes.count, showingACopy: applied.showingACopy, moved: applied.moved, kind: ownCases.ownCase(seed: caseSeed).kind)
        }
        return .accepted(changes: bundle.changes.count, applied: applied.applied, quarantined: applied.quarantined)
    }

    /// Reads `bytes` as `crdt-sync import` does (`SyncBundle.decode`) and as the relay client
    /// does (`recordCoverage`, then `RecordReader`), which must agree; what was accepted must
    /// round-trip, and a valid record page (`expected`) must decode to its records' changes.
    func read(_ bytes: [UInt8], expected: [Change]?, caseSeed: UInt64) throws -> Result<SyncBundle, SyncError> {
        func fail(_ message: String) -> FuzzFailure { FuzzFailure(caseSeed: caseSeed, message: message) }
        func refusal(_ read: () throws -> Void, _ what: String) throws -> SyncError? {
            do {
                try read()
                return nil
            } catch let error as SyncError {
                guard !error.message.isEmpty else { throw fail("\(what): an error with no message") }
                return error
            } catch {
                throw fail("\(what) threw \(type(of: error)): \(error)")
            }
        }
        var decoded: SyncBundle?
        let decodeError = try refusal({ decoded = try SyncBundle.decode(bytes) }, "decode")
        var relayRead: (coverage: VersionVector, changes: [Change])?
        let relayError = try refusal({ relayRead = try Self.readAsRelayClient(bytes) }, "the relay client's read")
        // The two readers must agree: the same changes, or both refuse.
        switch (decoded, relayRead) {
        case (let bundle?, let read?):
            guard read.changes == bundle.changes else { throw fail("record by record, the page gives other changes than decode") }
            guard read.coverage == Self.coverage(of: bundle.changes) else {
                throw fail("the frames say the page covers \(read.coverage), its changes \(Self.coverage(of: bundle.changes))")
            }
        case (.some, nil):
            if let relayError { throw fail("decode accepts a page the relay client refuses: \(relayError.message)") }
            guard bytes[SyncBundle.magic.count] != SyncBundle.recordsFormatVersion else { throw fail("a record page with no record reader") }
        case (nil, .some):
            throw fail("the relay client accepts a page decode refuses: \(decodeError?.message ?? "")")
        case (nil, nil):
            break
        }
        guard let bundle = decoded else {
            let error = decodeError!
            if expected != nil { throw fail("a valid record page was refused: \(error.message)") }
            return .failure(error)
        }
        if let expected, bundle.changes != expected { throw fail("the page decodes to other changes than its records hold") }
        // What was accepted encodes and decodes back to the same changes.
        guard let again = try? SyncBundle.decode(bundle.encoded()), again == bundle else {
            throw fail("the accepted bundle does not round-trip")
        }
        return .success(bundle)
    }

    /// What applying one bundle came to.
    struct Applied {
        var applied = 0
        var quarantined = 0
        /// Changes that showed another copy of the store (refused in its name, or made after
        /// seeing seqs in its name it never made).
        var showingACopy = 0
        var moved = false
        /// Replays of the log (`Notebook.rebuild`) the model's batch made.
        var rebuilds = 0
    }

    /// A store for the next case (`ensureStore`), counted against its share.
    mutating func takeStore(caseSeed: UInt64) throws {
        do {
            try ensureStore(caseSeed: caseSeed)
        } catch let failure as FuzzFailure {
            throw failure
        } catch {
            throw FuzzFailure(caseSeed: caseSeed, message: "the store threw: \(error)")
        }
        casesOnStore += 1
    }

    /// Makes a fresh store (with edits of its own) when there is none or the current one took
    /// its share of cases.
    mutating func ensureStore(caseSeed: UInt64) throws {
        guard store == nil || casesOnStore >= casesPerStore else { return }
        store = try NoteStore.openInMemory(replicaID: OwnIdentityCases.receiver, options: StoreOptions(wallClock: FuzzDriver.clock))
        // Edits of its own, not yet sent: what a crafted change in its name must not cost it.
        try store!.edit { try OwnIdentityCases.makeOwnEdits(&$0) }
        shadow = FuzzDriver.freshNotebook()
        let own = try store!.changes(since: VersionVector())
        guard own == OwnIdentityCases.receiverNotebook.allChanges else {
            throw FuzzFailure(caseSeed: caseSeed, message: "the store made other changes than the generator's model of it")
        }
        shadow.apply(contentsOf: own)
        casesOnStore = 0
    }

    /// Applies a decoded bundle to the store (`NoteStore.apply`, one batch) and to the model
    /// (`shadow`, the same changes in one batch, as `Notebook.apply(contentsOf:)` makes one, so
    /// that re-issues replay the log where the store's do), and checks that they agree: the
    /// store does not throw, its digest, quarantine and counts are the model's, it refuses
    /// exactly the changes in its name past what it made, moves to a fresh identity exactly
    /// when a change shows another copy of it, and keeps what it made; the model's batch
    /// replays its log at most `Notebook.maxRebuildsPerBatch + 1` times.
    mutating func applyChecked(_ bundle: SyncBundle, caseSeed: UInt64) throws -> Applied {
        func fail(_ message: String) -> FuzzFailure { FuzzFailure(caseSeed: caseSeed, message: message) }
        do {
            // The store refuses changes in its own name past what it made (a copy of it wrote
            // them), and counts those and the ones the notebook refuses as forks of its seqs.
            let own = store!.replicaID
            let ownMade = shadow.versionVector[own]
            let (admitted, refused) = (shadow.quarantineAdmissions, shadow.quarantineRefusals)
            let rebuildsBefore = shadow.rebuilds
            var result = Applied()
            var skipped = 0
            var forks = 0
            // Where a change forks from what the store made in its name (the store re-issues its
            // own from there), and the changes refused for it (applied once that is done).
            var forkedAt: UInt64?
            var forked: [Change] = []
            // Past what it made and forking from nothing it made: the copy's, applied at the end.
            var unmade: [Change] = []
            func noteFork(_ change: Change) -> Bool {
                guard change.startSeq <= ownMade, let found = shadow.forkPoint(of: change), found <= ownMade else { return false }
                let seq = shadow.forkBound(of: change, at: found)
                forkedAt = min(forkedAt ?? seq, seq)
                forked.append(change)
                return true
            }
            // One batch, as the store's: rebuilds that re-issues call for wait for its end, or
            // for a change of the replica whose operations they withdraw.
            shadow.beginBatch()
            for change in bundle.changes {
                if change.replica == own, change.endSeq > shadow.versionVector[own] {
                    if noteFork(change) { skipped += 1 } else { unmade.append(change) }
                    continue
                }
                // Made after seeing seqs in its name it never made: another copy's (it waits for them).
                if change.replica != own, change.dependencies[own] > shadow.versionVector[own] { forks += 1 }
                switch shadow.apply(change) {
                case .applied(let released): result.applied += 1 + released
                case .rejected(let error) where error.code == .equivocation && change.replica == own:
                    forks += 1
                    _ = noteFork(change)
                default: break
                }
            }
            if forkedAt == nil {
                for change in unmade {
                    if case .applied(let released) = shadow.apply(change) { result.applied += 1 + released }
                }
            }
            shadow.endBatch()
            // A re-issue of operations it made in its name (crafted: only a copy makes the same)
            // takes them back: the store then moves, as for a copy.
            let ownTaken = shadow.versionVector[own] < ownMade
            result.rebuilds = shadow.rebuilds - rebuildsBefore
            guard result.rebuilds <= Notebook.maxRebuildsPerBatch + 1 else {
                throw fail("one batch replayed the log \(result.rebuilds) times (at most \(Notebook.maxRebuildsPerBatch + 1))")
            }
            for id in shadow.noteIDs {
                if let problem = shadow.body(of: id)?.invariantViolation() { throw fail("note \(id): \(problem)") }
            }
            // From elsewhere: whatever they hold, the store must not throw.
            let report = try store!.apply(bundle.changes)
            guard report.forksRepaired == (forkedAt == nil ? 0 : 1) else {
                throw fail("the store repaired \(report.forksRepaired) forks of its identity, the model \(forkedAt == nil ? 0 : 1)")
            }
            if let forkedAt {
                // The repair, on the model: its own from the fork on re-issued as its new
                // identity, then the refused changes, in one batch as the store's.
                var repaired = shadow.replayed(as: store!.replicaID)
                repaired.beginBatch()
                for change in repaired.reissuing(own, from: forkedAt, through: ownMade) {
                    guard case .applied = repaired.apply(change) else { throw fail("the model's re-issue did not apply") }
                }
                for change in forked + unmade { repaired.apply(change) }
                repaired.endBatch()
                shadow = repaired
            }
            if bundle.sender != store!.replicaID && bundle.sender != own {
                try store!.recordPeer(bundle.sender, versionVector: bundle.senderVersion, seenAt: 1_700_000_000_000)
            }
            guard try store!.digest() == shadow.digest() else { throw fail("the store's digest differs from the notebook's") }
            result.quarantined = shadow.quarantineAdmissions - admitted
            guard report.quarantined == result.quarantined, report.rejected == shadow.quarantineRefusals - refused + skipped,
                  try store!.quarantinedChanges().count == shadow.quarantinedCount else {
                throw fail("the store quarantined \(report.quarantined) (\(try store!.quarantinedChanges().count) in all) and refused \(report.rejected), the notebook \(result.quarantined) (\(shadow.quarantinedCount)) and \(shadow.quarantineRefusals - refused + skipped)")
            }
            // It moves exactly when a change in its name shows another copy of it, and keeps what it made.
            let copied = skipped + unmade.count + forks
            guard report.foreignOwnChanges == copied else {
                throw fail("the store counted \(report.foreignOwnChanges) changes in its name that it never made, the model \(copied)")
            }
            result.showingACopy = copied
            result.moved = store!.replicaID != own
            guard result.moved == (copied > 0 || ownTaken) else {
                throw fail(result.moved ? "the store moved to a fresh identity with no change in its name it never made" : ownTaken ? "the store kept its identity after a re-issue took back seqs it made" : "the store kept its identity after \(copied) changes in its name it never made")
            }
            // What it made stays (in its name, re-issued from a fork on, or held as the
            // re-issuer's, the same operations, when a re-issue took them back).
            let keeps = forkedAt.map { $0 - 1 } ?? ownMade
            let ownNow = try store!.versionVector[own]
            guard ownNow >= keeps || ownTaken, ownNow == shadow.versionVector[own] else {
                throw fail("the store's own seqs went from \(ownMade) to \(ownNow)")
            }
            if result.moved {
                guard try store!.identityChanges().last?.retired == own else { throw fail("the store moved without recording it") }
                casesOnStore = casesPerStore  // a new store for the next case: this one writes as another
            }
            if casesOnStore % 25 == 0 { _ = try store!.status() }
            return result
        } catch let failure as FuzzFailure {
            throw failure
        } catch {
            throw fail("the store threw: \(error)")
        }
    }
}

/// Counts of a run of cases.
public struct FuzzTally: Sendable, Hashable {
    public var cases = 0
    public var accepted = 0
    public var rejected: [String: Int] = [:]
    public var quarantined = 0
    /// Of the cases, record pages (format version 5) accepted and refused.
    public var recordPagesAccepted = 0
    public var recordPagesRejected = 0
    /// Of the cases, sealed bundles (format version 4) decoded and refused, and of the decoded
    /// ones' units, those the store opened and those it refused.
    public var sealedAccepted = 0
    public var sealedRejected = 0
    public var sealedUnitsOpened = 0
    public var sealedUnitsRefused = 0
    /// Of the cases, those in the receiving store's own name decoded and refused, and of the
    /// decoded ones those that moved the store to a fresh identity.
    public var ownIdentityAccepted = 0
    public var ownIdentityRejected = 0
    public var ownIdentityMoved = 0
    /// Of the cases, those that re-issue operations applied and refused (every malformed one
    /// must be), those that withdrew operations from the store, and the model's replays of the
    /// log in all.
    public var reissueAccepted = 0
    public var reissueRejected = 0
    public var reissueWithdrew = 0
    public var reissueRebuilds = 0
    /// Per known fault of the code under test (`FuzzDriver.knownIssues`), the cases that met it
    /// and the first one's seed.
    public var knownIssues = Array(repeating: 0, count: FuzzDriver.knownIssues.count)
    public var knownIssueSeeds = Array(repeating: UInt64(0), count: FuzzDriver.knownIssues.count)
    public var failures: [String] = []
    /// The slowest case, in milliseconds, and its seed.
    public var slowestMilliseconds = 0.0
    public var slowestSeed: UInt64 = 0

    public init() {}

    public var rejectedTotal: Int { rejected.values.reduce(0, +) }

    public mutating func add(_ outcome: FuzzOutcome, milliseconds: Double, seed: UInt64) {
        cases += 1
        switch outcome {
        case .rejected(let code, _): rejected[code, default: 0] += 1
        case .accepted(_, _, let q):
            accepted += 1
            if q > 0 { quarantined += 1 }
        case .sealed(_, let opened, let refused, let q, _):
            accepted += 1
            if q > 0 { quarantined += 1 }
            sealedAccepted += 1
            sealedUnitsOpened += opened
            sealedUnitsRefused += refused
        case .ownIdentity(_, _, let moved, _):
            accepted += 1
            ownIdentityAccepted += 1
            if moved { ownIdentityMoved += 1 }
        case .reissue(_, let rebuilds, let withdrew, _):
            accepted += 1
            reissueAccepted += 1
            reissueRebuilds += rebuilds
            if withdrew { reissueWithdrew += 1 }
        case .knownIssue(let index):
            if knownIssues[index] == 0 { knownIssueSeeds[index] = seed }
            knownIssues[index] += 1
        }
        if FuzzDriver.isReissue(seed), case .rejected = outcome { reissueRejected += 1 }
        if FuzzDriver.isSealed(seed), case .rejected = outcome { sealedRejected += 1 }
        if FuzzDriver.isOwnIdentity(seed), case .rejected = outcome { ownIdentityRejected += 1 }
        if milliseconds > slowestMilliseconds {
            slowestMilliseconds = milliseconds
            slowestSeed = seed
        }
    }

    /// Runs one case with `driver` and counts what it came to.
    public mutating func run(caseSeed: UInt64, with driver: inout FuzzDriver) {
        let start = DispatchTime.now().uptimeNanoseconds
        do {
            let outcome = try driver.run(caseSeed: caseSeed)
            add(outcome, milliseconds: Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6, seed: caseSeed)
            if FuzzDriver.isRecordPage(caseSeed) {
                if case .accepted = outcome { recordPagesAccepted += 1 } else { recordPagesRejected += 1 }
            }
        } catch {
            cases += 1
            failures.append("\(error)")
        }
    }

    /// Which cases of a range a run takes.
    public enum Cases: Sendable {
        case all
        /// Only the sealed bundles (format version 4).
        case sealed
        /// All but the sealed bundles (a sealed case costs several times a plain one in a debug build).
        case notSealed

        func takes(_ caseSeed: UInt64) -> Bool {
            switch self {
            case .all: true
            case .sealed: FuzzDriver.isSealed(caseSeed)
            case .notSealed: !FuzzDriver.isSealed(caseSeed)
            }
        }
    }

    /// Runs cases `range` of a run seeded `seed` in this process.
    public static func run(seed: UInt64, cases range: Range<UInt64>, taking cases: Cases = .all) -> FuzzTally {
        var driver = FuzzDriver()
        var tally = FuzzTally()
        for index in range where cases.takes(FuzzDriver.caseSeed(seed, index)) { tally.run(caseSeed: FuzzDriver.caseSeed(seed, index), with: &driver) }
        return tally
    }

    /// `run(seed:cases:)`, giving the thread up to other tasks every few cases (a test runs on
    /// Swift's shared pool of as many threads as cores: holding one for half a minute starved
    /// tests that wait on a server with a deadline).
    public static func runYielding(seed: UInt64, cases range: Range<UInt64>, taking cases: Cases = .all) async -> FuzzTally {
        var driver = FuzzDriver()
        var tally = FuzzTally()
        for index in range where cases.takes(FuzzDriver.caseSeed(seed, index)) {
            tally.run(caseSeed: FuzzDriver.caseSeed(seed, index), with: &driver)
            if index % 16 == 0 { await Task.yield() }
        }
        return tally
    }
}

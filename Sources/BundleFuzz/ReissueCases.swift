import NotesCRDT
import NotesSync

/// Cases that re-issue operations (`Operation.reissue`, Docs/Architecture.md "Copied replicas"):
/// the most powerful thing a bundle can ask of a store, since a re-issue that matches what the
/// store holds makes it drop operations and replay its log.
///
/// Each case forks an identity X of its own (two copies of X's database wrote the same seqs: a
/// copy's branch, which the store holds, and the original's), then sends the store re-issues of
/// the copy's branch: malformed ones, which every reader must refuse with a message that names
/// the fault; the copy's honest repair (its branch re-issued as a new identity Y, references
/// renamed), which must withdraw exactly the branch from X and leave its characters as Y's;
/// re-issues that almost match (one unit, the timestamp or one reference off) or do not match,
/// which must remove nothing; overlapping re-issues of one branch by several re-issuers; a
/// re-issue of a re-issue (nested); the re-issue before the branch it withdraws (absorbed as
/// duplicates); the withdrawn branch or the original's branch after the re-issue; re-issues of
/// the receiving store's own identity; and floods of tiny re-issues meant to make the store
/// replay its log again and again. The driver checks the store against a notebook that applies
/// the same batches and against what the case says must hold (`Expectation`).
///
/// One seed gives one case, on every machine.
public struct ReissueCases: Sendable {
    public init() {}

    /// A character of a note, by identity.
    public struct Character: Sendable, Hashable {
        public var note: NoteID
        public var id: OpID
    }

    /// What must hold of the store once the case's bundles are applied, beyond what the driver
    /// checks of every case (a notebook's digest, quarantine and counts, its own seqs, bounded
    /// replays).
    public struct Check: Sendable {
        /// Per replica, where the store's version vector must end (a withdrawn branch's seqs are
        /// not held; a branch that must stay is held whole).
        public var seqs: [ReplicaID: UInt64] = [:]
        /// Characters the state holds (visible or deleted): the re-issuer's, or a branch's that
        /// must stay.
        public var present: [Character] = []
        /// Characters it must not hold: the withdrawn branch's.
        public var absent: [Character] = []
        /// Notes whose text must be exactly this (the re-issue moved the operations, and kept
        /// what they do).
        public var bodies: [NoteID: String] = [:]
        /// Seqs of which the store's log must hold no operation.
        public var withdrawn: [OpIDRange] = []
    }

    public enum Expectation: Sendable {
        /// Every reader refuses the (first) bundle as malformed, with a message holding this
        /// (empty: any message).
        case refused(String)
        /// The bundles apply, and this holds after.
        case holds(Check)
        /// Nothing beyond what the driver checks of every case.
        case modelOnly
    }

    public struct Case: Sendable {
        /// What the store applies first, in a batch of its own: the history it holds before the
        /// re-issue (honest changes, made by notebooks).
        public var setup: [Change]
        /// The bundles, each applied as one batch, in order.
        public var bundles: [[UInt8]]
        /// For a malformed case, its change encoding alone: `ChangeCodec.decode` must refuse it too.
        public var body: [UInt8]?
        public var kind: String
        public var expectation: Expectation
        /// The known fault of the code under test the case may meet (an index into
        /// `FuzzDriver.knownIssues`): a failure that shows its symptom is counted apart, not failed.
        public var knownIssue: Int?
    }

    /// The identities and notes of case `seed` (its own, so that cases on one store do not meet).
    struct Names {
        var x, y, z, w, stranger, third: ReplicaID
        var note, other: NoteID
        var seed: UInt64

        init(_ seed: UInt64) {
            self.seed = seed
            func replica(_ high: UInt64) -> ReplicaID { ReplicaID(Identifier128(high: high, low: seed)) }
            x = replica(0xE000)
            y = replica(0xE001)
            z = replica(0xE002)
            w = replica(0xE003)
            stranger = replica(0xE004)
            third = replica(0xE005)
            note = NoteID(Identifier128(high: 0xE0E0, low: seed))
            other = NoteID(Identifier128(high: 0xE0E1, low: seed))
        }

        /// The re-issuer of one seq in a flood of them.
        func reissuer(_ i: Int) -> ReplicaID { ReplicaID(Identifier128(high: 0xE100 + UInt64(i), low: seed)) }
    }

    /// Two copies of X that both wrote after the copy was made.
    struct Fork {
        var names: Names
        /// X before the copy.
        var base: Notebook
        /// The copy after its branch (as X).
        var copy: Notebook
        /// The original after its own branch at the same seqs (as X).
        var original: Notebook
        /// The first seq of the branches.
        var forkSeq: UInt64
        /// The clock the copies' repairs run at.
        var later: UInt64

        var branch: [Change] { copy.changes(since: base.versionVector) }
        var theirs: [Change] { original.changes(since: base.versionVector) }
        var x: ReplicaID { names.x }
        var made: UInt64 { copy.versionVector[names.x] }

        /// The copy, repaired as `identity`: its branch from `first` on re-issued (`reissue`),
        /// and the notebook after it.
        func repaired(as identity: ReplicaID, from first: UInt64) -> (notebook: Notebook, reissue: [Change]) {
            var notebook = try! Notebook(snapshot: copy.snapshot(), wallClock: FixedWallClock(later), replicaID: identity)
            let reissue = notebook.reissuing(names.x, from: first, through: made)
            notebook.apply(contentsOf: reissue)
            return (notebook, reissue)
        }

        /// The characters the branch inserted at seqs `from` on (by note).
        func branchCharacters(from first: UInt64) -> [Character] {
            ReissueCases.inserted(by: branch).filter { $0.id.seq >= first }
        }
    }

    static let scalars: [String] = ["a", "b", "c", "x", " ", "é", "日", "😀"]

    /// The fork for a case: a note (and sometimes another) made by X, then `entries` edits of the
    /// copy, each its own log entry unless it continues the one before at the same clock (a
    /// `tiny` branch types one character per entry, each a minute after the last), and one to
    /// three edits of the original.
    static func fork(_ names: Names, _ rng: inout SplitMix64, entries: Int, tiny: Bool) -> Fork {
        let t0 = 1_690_000_000_000 + UInt64(rng.below(1_000_000)) * 1000
        var base = Notebook(replicaID: names.x, wallClock: FixedWallClock(t0))
        var text = ""
        for _ in 0 ..< 2 + rng.below(8) { text += scalars[rng.below(scalars.count)] }
        base.createNote(id: names.note, title: "shared", body: text)
        if rng.below(3) == 0 {
            base.wallClock = FixedWallClock(t0 + 1000)
            _ = try? base.setPinned(names.note, true)
        }
        var copy = try! Notebook(snapshot: base.snapshot(), wallClock: FixedWallClock(t0 + 500_000))
        var clock = t0 + 500_000
        var madeOther = false
        for i in 0 ..< entries {
            if i == 0 || tiny || rng.below(4) != 0 { clock += 60_000 }
            copy.wallClock = FixedWallClock(clock)
            let length = copy.body(of: names.note)?.count ?? 0
            if tiny {
                _ = try? copy.insertText(names.note, at: rng.below(5) == 0 ? rng.below(length + 1) : length, scalars[rng.below(scalars.count)])
                continue
            }
            switch rng.below(10) {
            case 0, 1, 2, 3:
                var typed = ""
                for _ in 0 ..< 1 + rng.below(4) { typed += scalars[rng.below(scalars.count)] }
                _ = try? copy.insertText(names.note, at: rng.below(length + 1), typed)
            case 4 where length > 0, 5 where length > 0:
                let start = rng.below(length)
                _ = try? copy.deleteText(names.note, start ..< min(length, start + 1 + rng.below(3)))
            case 6:
                _ = try? copy.setTitle(names.note, "the copy's \(i)")
            case 7:
                _ = try? copy.setColor(names.note, ["red", "blue", nil][rng.below(3)])
            case 8:
                _ = try? copy.setTag(names.note, "t\(rng.below(3))", member: rng.below(2) == 0)
            default:
                if madeOther {
                    let otherLength = copy.body(of: names.other)?.count ?? 0
                    _ = try? copy.insertText(names.other, at: rng.below(otherLength + 1), "o" + scalars[rng.below(scalars.count)])
                } else {
                    copy.createNote(id: names.other, title: "only on the copy", body: "new")
                    madeOther = true
                }
            }
        }
        if copy.versionVector[names.x] == base.versionVector[names.x] {
            copy.wallClock = FixedWallClock(clock + 60_000)
            _ = try? copy.insertText(names.note, at: 0, "z")
        }
        var original = try! Notebook(snapshot: base.snapshot(), wallClock: FixedWallClock(t0 + 250_037))
        for k in 0 ..< 1 + rng.below(3) {
            original.wallClock = FixedWallClock(t0 + 250_037 + UInt64(k) * 45_000)
            if rng.below(2) == 0 {
                _ = try? original.insertText(names.note, at: 0, "orig\(k) ")
            } else {
                _ = try? original.setTitle(names.note, "the original's \(k)")
            }
        }
        return Fork(names: names, base: base, copy: copy, original: original, forkSeq: base.versionVector[names.x] + 1,
                    later: clock + 3_600_000)
    }

    /// The characters `changes` insert.
    static func inserted(by changes: [Change]) -> [Character] {
        var result: [Character] = []
        for change in changes {
            var seq = change.startSeq
            for op in change.operations {
                if case .insertText(let note, _, let text) = op {
                    for k in 0 ..< UInt64(text.count) { result.append(Character(note: note, id: OpID(replica: change.replica, seq: seq + k))) }
                }
                seq &+= op.seqCount
            }
        }
        return result
    }

    /// The bodies of the notes `notebook` holds among the case's.
    static func bodies(_ notebook: Notebook, _ names: Names) -> [NoteID: String] {
        var result: [NoteID: String] = [:]
        for note in [names.note, names.other] {
            if let body = notebook.body(of: note) { result[note] = body.string }
        }
        return result
    }

    /// `changes` as a bundle (version 3) or, when each author's changes follow one another with
    /// no gap or overlap (what a page may hold of one author), sometimes as a record page
    /// (version 5, a record per run of one author's consecutive changes).
    static func encode(_ changes: [Change], sender: ReplicaID, _ rng: inout SplitMix64) -> [UInt8] {
        var vector = VersionVector()
        var ordered = true
        for change in changes {
            if vector[change.replica] > 0, vector[change.replica] &+ 1 != change.startSeq { ordered = false }
            if change.endSeq > vector[change.replica] { vector[change.replica] = change.endSeq }
        }
        guard ordered, rng.below(3) == 0 else {
            return SyncBundle(sender: sender, senderVersion: vector, changes: changes).encoded()
        }
        return OwnIdentityCases.recordPage(sender: sender, senderVersion: vector, changes: changes)
    }

    /// The case for `seed`.
    public func reissueCase(seed: UInt64) -> Case {
        var rng = SplitMix64(seed: seed)
        let names = Names(seed)
        switch rng.below(32) {
        case 0 ..< 6: return Self.malformed(names, &rng)
        case 6 ..< 9: return Self.matching(names, &rng)
        case 9, 10: return Self.matchingThenTheirs(names, &rng)
        case 11, 12: return Self.matchingThenBranchAgain(names, &rng)
        case 13, 14: return Self.reissueBeforeBranch(names, &rng)
        case 15, 16, 17: return Self.almostMatching(names, &rng)
        case 18, 19: return Self.offInTheMiddle(names, &rng)
        case 20, 21: return Self.notMatching(names, &rng)
        case 22, 23: return Self.overlapping(names, &rng)
        case 24, 25: return Self.nested(names, &rng)
        case 26, 27: return Self.ownIdentity(names, &rng)
        case 28, 29: return Self.floodForcingReplays(names, &rng)
        default: return Self.floodOfReissuers(names, &rng)
        }
    }

    // MARK: Malformed

    /// A re-issue with one thing wrong, written field by field (the library writes none of these).
    static func malformed(_ names: Names, _ rng: inout SplitMix64) -> Case {
        let fork = fork(names, &rng, entries: 1 + rng.below(4), tiny: false)
        let (_, reissue) = fork.repaired(as: names.y, from: fork.forkSeq)
        var change = reissue[0]
        guard case .reissue(let range) = change.operations[0] else { preconditionFailure("a re-issue leads") }
        let rest = Array(change.operations.dropFirst())
        func with(_ op: Operation, _ ops: [Operation]? = nil, replica: ReplicaID? = nil, start: UInt64? = nil) -> Change {
            Change(replica: replica ?? change.replica, startSeq: start ?? change.startSeq, timestamp: change.timestamp,
                   dependencies: change.dependencies, operations: [op] + (ops ?? rest))
        }
        var fragment = ""
        var kind = ""
        var raw: RawChangeEncoding?
        switch rng.below(11) {
        case 0:
            kind = "count 0"
            change = with(.reissue(of: OpIDRange(replica: range.replica, seq: range.seq, count: 0)))
            fragment = "a re-issue of 0 operations"
        case 1:
            kind = "count past 2^53 - 1"
            let counts: [UInt64] = [Change.maxSeq - range.seq + 2, 1 << 53, (1 << 53) + 1, 1 << 63, .max]
            change = with(.reissue(of: OpIDRange(replica: range.replica, seq: range.seq, count: counts[rng.below(counts.count)])))
            fragment = "is empty or passes 2^53 - 1"
        case 2:
            kind = "past its change's end"
            let more: [UInt64] = [1, 2, 1000, Change.maxSeq / 2]
            change = with(.reissue(of: OpIDRange(replica: range.replica, seq: range.seq, count: range.count + more[rng.below(more.count)])))
            if rng.below(2) == 0, rest.count > 1 { change = with(.reissue(of: range), Array(rest.dropLast())) }
            fragment = "re-issues operations past its end"
        case 3:
            kind = "its own author's seqs"
            change = rng.below(2) == 0 ? with(.reissue(of: OpIDRange(replica: change.replica, seq: 1, count: range.count)))
                                       : with(.reissue(of: range), replica: range.replica, start: fork.made + 1)
            fragment = "re-issues operations of its own author"
        case 4:
            kind = "field byte 2 under a tag key"
            raw = RawChangeEncoding([change])
            var value = HostileBundles.varintBytes(UInt64(raw!.replicas.firstIndex(of: range.replica)!))
            let delta = Int64(bitPattern: change.startSeq &- range.seq)
            value += HostileBundles.varintBytes(UInt64(bitPattern: (delta << 1) ^ (delta >> 63)))
            value += HostileBundles.varintBytes(range.count)
            raw!.records[0] = .setTagField(tag: [[0x74], [0x20], [0xC3, 0xA9], Array("re-issue".utf8)][rng.below(4)], field: 2, value: value)
            fragment = "unknown tag field 2"
        case 5:
            kind = "a first seq at 0 or past 2^53 - 1"
            raw = RawChangeEncoding([change])
            let firsts: [UInt64] = [0, 1 << 53, (1 << 53) + 1, 1 << 63, .max]
            let first = firsts[rng.below(firsts.count)]
            guard case .reissue(let r, _, let count) = raw!.records[0] else { preconditionFailure() }
            raw!.records[0] = .reissue(replica: r, delta: Int64(bitPattern: change.startSeq &- first), count: count)
            fragment = "a re-issue is at seq"
        case 6:
            kind = "a replica index past the table"
            raw = RawChangeEncoding([change])
            guard case .reissue(_, let delta, let count) = raw!.records[0] else { preconditionFailure() }
            raw!.records[0] = .reissue(replica: HostileBundles.edge(&rng, near: UInt64(raw!.replicas.count)), delta: delta, count: count)
            if case .reissue(let r, _, _) = raw!.records[0], r < UInt64(raw!.replicas.count) {
                raw!.records[0] = .reissue(replica: UInt64(raw!.replicas.count), delta: delta, count: count)
            }
            fragment = "replica index"
        case 7:
            kind = "an operation count that leaves it short"
            raw = RawChangeEncoding([change])
            raw!.headers[0].operationCount = 1
            fragment = "re-issues operations past its end"
        case 8:
            kind = "its value cut short"
            // The re-issue last in the explicit column, cut inside its values.
            let tail = Change(replica: change.replica, startSeq: change.startSeq, timestamp: change.timestamp, dependencies: change.dependencies,
                              operations: [.setTagField(tag: "t", field: .name, value: .string("v")), .reissue(of: OpIDRange(replica: range.replica, seq: range.seq, count: 1)),
                                           .setTagField(tag: "t", field: .name, value: .string("w"))])
            raw = RawChangeEncoding([tail])
            raw!.records.removeLast()
            raw!.headers[0].operationCount = 2
            raw!.columnSkew[5] = -(1 + rng.below(3))
            fragment = ""
        case 9:
            kind = "the operation count takes a record of the next change"
            let next = Change(replica: names.third, startSeq: 1, timestamp: change.timestamp, dependencies: VersionVector(),
                              operations: [.setTagField(tag: "t", field: .name, value: .string("v"))])
            raw = RawChangeEncoding([change, next])
            raw!.headers[0].operationCount += 1
            fragment = ""
        default:
            kind = "seqs at the top"
            // The re-issuer's seqs end past 2^53 - 1, or the re-issued ones do.
            if rng.below(2) == 0 {
                change = with(.reissue(of: range), start: Change.maxSeq - change.seqCount + 2)
            } else {
                change = with(.reissue(of: OpIDRange(replica: range.replica, seq: Change.maxSeq - range.count + 2, count: range.count)))
            }
            fragment = "2^53 - 1"
        }
        var encoding = raw ?? RawChangeEncoding([change])
        if rng.below(4) == 0 { encoding.width = .padded(rng.below(2) == 0 ? 2 : 10) }
        let body = encoding.bytes()
        var bundle = RawBundle()
        bundle.sender = names.y
        bundle.width = rng.below(4) == 0 ? .padded(10) : .shortest
        if rng.below(3) == 0 {
            // A record page: the change in a record whose frame is its seqs.
            bundle.version = SyncBundle.recordsFormatVersion
            var records = RawRecordBody()
            let author = encoding.replicas[Int(encoding.headers[0].author)]
            let start = encoding.headers[0].startSeq
            records.records = [RawRecordFrame(author: author, startSeq: start, endSeq: max(start, change.endSeq), encoding: body)]
            bundle.body = records.bytes()
        } else {
            bundle.body = body
            bundle.compressed = rng.below(3) == 0
        }
        return Case(setup: fork.base.allChanges + fork.branch, bundles: [bundle.bytes()], body: body,
                    kind: "malformed: \(kind)", expectation: .refused(fragment))
    }

    // MARK: Matching

    /// Where a re-issue of the branch starts: its first seq, or a seq inside it.
    static func firstReissued(_ fork: Fork, _ rng: inout SplitMix64) -> UInt64 {
        rng.below(3) == 0 ? fork.forkSeq + UInt64(rng.below(Int(fork.made - fork.forkSeq + 1))) : fork.forkSeq
    }

    /// What a withdrawal of the branch from `first` must leave: X's seqs before it, the
    /// re-issuers' characters, none of the withdrawn ones, and the copy's text.
    static func withdrawal(_ fork: Fork, from first: UInt64, reissues: [Change], exactText: Bool = true) -> Check {
        var check = Check()
        check.seqs[fork.x] = first - 1
        check.present = inserted(by: reissues)
        check.absent = fork.branchCharacters(from: first)
        check.withdrawn = [OpIDRange(replica: fork.x, seq: first, count: fork.made - first + 1)]
        if exactText { check.bodies = bodies(fork.copy, fork.names) }
        return check
    }

    /// The copy's repair, sent to a store that holds its branch: X's branch goes, Y holds it.
    /// Sometimes with Y's edit on top, spelled with padded varints, or with a third replica's
    /// edit on the branch held before (after the withdrawal it names seqs X no longer holds).
    static func matching(_ names: Names, _ rng: inout SplitMix64) -> Case {
        let fork = fork(names, &rng, entries: 1 + rng.below(6), tiny: false)
        let first = firstReissued(fork, &rng)
        let repair = fork.repaired(as: names.y, from: first)
        var repaired = repair.notebook
        let reissue = repair.reissue
        var setup = fork.base.allChanges + fork.branch
        var check = withdrawal(fork, from: first, reissues: reissue)
        var changes = reissue
        var kind = "matching"
        switch rng.below(4) {
        case 0:
            kind += ", with the re-issuer's edit on top"
            repaired.wallClock = FixedWallClock(fork.later + 60_000)
            if let edit = try? repaired.insertText(names.note, at: 0, "Y") {
                changes.append(edit)
                check.present += inserted(by: [edit])
                check.bodies = bodies(repaired, names)
            }
        case 1:
            kind += ", a third replica's edit on the branch held before"
            var third = Notebook(replicaID: names.third, wallClock: FixedWallClock(fork.later - 1000))
            third.apply(contentsOf: setup)
            let length = third.body(of: names.note)?.count ?? 0
            if let edit = try? third.insertText(names.note, at: length, "T") {
                setup.append(edit)
                check.bodies = [:]  // the edit's origin may be withdrawn: it waits or is quarantined
            }
        default:
            break
        }
        if rng.below(4) == 0, kind == "matching" {
            // Spelled with every varint padded to 10 bytes: still the same changes.
            var encoding = RawChangeEncoding(changes)
            encoding.width = .padded(10)
            var bundle = RawBundle()
            bundle.sender = names.y
            bundle.body = encoding.bytes()
            bundle.compressed = rng.below(2) == 0
            return Case(setup: setup, bundles: [bundle.bytes()], kind: kind + ", padded", expectation: .holds(check))
        }
        return Case(setup: setup, bundles: [encode(changes, sender: names.y, &rng)], kind: kind, expectation: .holds(check))
    }

    /// The repair, then the original's branch (changes of the withdrawn identity), in the same
    /// batch or the next: both branches end in the state, the original's as X's.
    static func matchingThenTheirs(_ names: Names, _ rng: inout SplitMix64) -> Case {
        let fork = fork(names, &rng, entries: 1 + rng.below(5), tiny: false)
        let (_, reissue) = fork.repaired(as: names.y, from: fork.forkSeq)
        // What a replica that took the original's branch and the repair holds.
        var merged = Notebook(replicaID: names.third, wallClock: FixedWallClock(fork.later))
        merged.apply(contentsOf: fork.original.allChanges)
        merged.apply(contentsOf: reissue)
        var check = Check()
        check.seqs[fork.x] = fork.original.versionVector[fork.x]
        check.present = inserted(by: reissue) + inserted(by: fork.theirs)
        check.bodies = bodies(merged, names)
        let together = rng.below(2) == 0
        let bundles = together ? [encode(reissue + fork.theirs, sender: names.y, &rng)]
                               : [encode(reissue, sender: names.y, &rng), encode(fork.theirs, sender: names.x, &rng)]
        return Case(setup: fork.base.allChanges + fork.branch, bundles: bundles,
                    kind: "matching, then the original's branch" + (together ? "" : " in the next batch"), expectation: .holds(check))
    }

    /// The repair, then the withdrawn branch again (whole, or cut anywhere): duplicates.
    static func matchingThenBranchAgain(_ names: Names, _ rng: inout SplitMix64) -> Case {
        let fork = fork(names, &rng, entries: 1 + rng.below(5), tiny: false)
        let first = firstReissued(fork, &rng)
        let (_, reissue) = fork.repaired(as: names.y, from: first)
        var again = fork.branch
        if rng.below(2) == 0 {
            again = again.compactMap { change in
                let seq = change.startSeq + UInt64(rng.below(Int(change.seqCount)))
                return rng.below(2) == 0 ? change.suffix(from: seq) : change.prefix(through: seq)
            }
        }
        if rng.below(3) == 0 { again.shuffle(using: &rng) }
        let together = rng.below(2) == 0
        let bundles = together ? [encode(reissue + again, sender: names.y, &rng)]
                               : [encode(reissue, sender: names.y, &rng), encode(again, sender: names.x, &rng)]
        return Case(setup: fork.base.allChanges + fork.branch, bundles: bundles,
                    kind: "matching, then the withdrawn branch again", expectation: .holds(withdrawal(fork, from: first, reissues: reissue)))
    }

    /// The repair reaches the store before the branch it withdraws: the branch, when it comes
    /// (in the same batch or the next), is absorbed as duplicates.
    static func reissueBeforeBranch(_ names: Names, _ rng: inout SplitMix64) -> Case {
        let fork = fork(names, &rng, entries: 1 + rng.below(5), tiny: false)
        let (_, reissue) = fork.repaired(as: names.y, from: fork.forkSeq)
        let together = rng.below(2) == 0
        let bundles = together ? [encode(reissue + fork.branch, sender: names.y, &rng)]
                               : [encode(reissue, sender: names.y, &rng), encode(fork.branch, sender: names.x, &rng)]
        return Case(setup: fork.base.allChanges, bundles: bundles, kind: "the re-issue before the branch",
                    expectation: .holds(withdrawal(fork, from: fork.forkSeq, reissues: reissue)))
    }

    // MARK: Not matching

    /// `change` (a re-issue) with the operation at `index` (after the re-issue) altered in one
    /// thing: its content, or a reference; nil when it has none to alter so.
    static func altered(_ change: Change, at index: Int, reference: Bool, _ rng: inout SplitMix64) -> Change? {
        var ops = change.operations
        guard index < ops.count else { return nil }
        switch ops[index] {
        case .insertText(let note, let origin, let text):
            if reference {
                guard let origin else { return nil }
                let moved = rng.below(2) == 0 || origin.seq <= 1 ? origin.seq + 1 : origin.seq - 1
                ops[index] = .insertText(note: note, origin: OpID(replica: origin.replica, seq: moved), text: text)
            } else {
                var scalars = Array(text)
                scalars[0] = scalars[0] == "q" ? "r" : "q"
                ops[index] = .insertText(note: note, origin: origin, text: InsertedText(scalars))
            }
        case .deleteText(let note, var targets):
            guard reference else { return nil }
            targets[0].seq += 1
            ops[index] = .deleteText(note: note, targets: targets)
        case .deleteEach(let note, var runs):
            guard reference else { return nil }
            runs[0].range.seq += 1
            ops[index] = .deleteEach(note: note, runs: runs)
        case .setNoteField(let note, let field, let value):
            guard !reference else { return nil }
            ops[index] = .setNoteField(note: note, field: field, value: value == .string("q") ? .string("r") : .string("q"))
        case .setTagField(let tag, let field, let value):
            guard !reference else { return nil }
            ops[index] = .setTagField(tag: tag, field: field, value: value == .string("q") ? .string("r") : .string("q"))
        case .reissue:
            return nil
        }
        let result = Change(replica: change.replica, startSeq: change.startSeq, timestamp: change.timestamp,
                            dependencies: change.dependencies, operations: ops)
        return result.seqCount == change.seqCount ? result : nil
    }

    /// What must hold after re-issues that match nothing the store holds: X keeps its branch.
    static func keeps(_ fork: Fork) -> Check {
        var check = Check()
        check.seqs[fork.x] = fork.made
        check.present = fork.branchCharacters(from: fork.forkSeq)
        return check
    }

    /// The repair with its first re-issued operation's content, or one reference of it, or its
    /// timestamp off by one (every piece of it so): it matches nothing, and removes nothing.
    static func almostMatching(_ names: Names, _ rng: inout SplitMix64) -> Case {
        let fork = fork(names, &rng, entries: 1 + rng.below(5), tiny: false)
        let (_, reissue) = fork.repaired(as: names.y, from: fork.forkSeq)
        let how = rng.below(3)
        var changes: [Change] = []
        for change in reissue {
            if how == 2 {
                let shift: UInt64 = rng.below(2) == 0 ? 1 : UInt64.max  // +1 or -1, wrapping
                changes.append(Change(replica: change.replica, startSeq: change.startSeq, timestamp: Timestamp(rawValue: change.timestamp.rawValue &+ shift),
                                      dependencies: change.dependencies, operations: change.operations))
            } else if let off = altered(change, at: 1, reference: how == 1, &rng) ?? altered(change, at: 1, reference: how != 1, &rng) {
                changes.append(off)
            } else {
                // Nothing of the first operation to alter (a re-issue inside): its timestamp instead.
                changes.append(Change(replica: change.replica, startSeq: change.startSeq, timestamp: Timestamp(rawValue: change.timestamp.rawValue &+ 1),
                                      dependencies: change.dependencies, operations: change.operations))
            }
        }
        let what = ["one unit", "one reference", "the timestamp"][how]
        return Case(setup: fork.base.allChanges + fork.branch, bundles: [encode(changes, sender: names.y, &rng)],
                    kind: "almost matching: \(what) off", expectation: .holds(keeps(fork)))
    }

    /// The repair with one operation after its first altered (its content, or a reference):
    /// the seqs before it match and are withdrawn; the rest of that log entry of X waits for
    /// them for good, and the re-issuer holds its version of it. With the content altered, the
    /// text is what the altered repair makes of X's history before the fork.
    static func offInTheMiddle(_ names: Names, _ rng: inout SplitMix64) -> Case {
        let fork = fork(names, &rng, entries: 1 + rng.below(4), tiny: false)
        let (_, reissue) = fork.repaired(as: names.y, from: fork.forkSeq)
        var changes = reissue
        let i = rng.below(changes.count)
        let index = 2 + rng.below(max(1, changes[i].operations.count - 1))
        var byReference = rng.below(2) == 0
        if let off = altered(changes[i], at: index, reference: byReference, &rng) {
            changes[i] = off
        } else if let off = altered(changes[i], at: index, reference: !byReference, &rng) {
            changes[i] = off
            byReference.toggle()
        } else {
            byReference = false  // nothing to alter there: the whole repair, which matches
        }
        let bundles = [encode(changes, sender: names.y, &rng)]
        let setup = fork.base.allChanges + fork.branch
        let kind = "almost matching: " + (byReference ? "a reference" : "the content") + " of an operation in the middle off"
        // (A reference moved may name nothing: the piece is quarantined and withdraws nothing.)
        guard !byReference else { return Case(setup: setup, bundles: bundles, kind: kind, expectation: .modelOnly) }
        var altered = Notebook(replicaID: names.third, wallClock: FixedWallClock(fork.later))
        altered.apply(contentsOf: fork.base.allChanges + changes)
        var check = withdrawal(fork, from: fork.forkSeq, reissues: changes, exactText: false)
        check.bodies = bodies(altered, names)
        return Case(setup: setup, bundles: bundles, kind: kind, expectation: .holds(check))
    }

    /// A re-issue of the branch's seqs holding other operations altogether (characters no
    /// branch types, or tag writes), at the repair's timestamps or near them: removes nothing.
    /// (Text the branch may have typed would match a first few seqs by chance, and those would
    /// be withdrawn, the rest of their log entry waiting for them for good.)
    static func notMatching(_ names: Names, _ rng: inout SplitMix64) -> Case {
        let fork = fork(names, &rng, entries: 1 + rng.below(5), tiny: false)
        let count = fork.made - fork.forkSeq + 1
        var dependencies = fork.copy.versionVector
        dependencies[fork.x] = fork.forkSeq - 1
        var ops: [Operation] = [.reissue(of: OpIDRange(replica: fork.x, seq: fork.forkSeq, count: count))]
        if rng.below(2) == 0 {
            ops.append(.insertText(note: names.note, origin: nil, text: InsertedText(String(repeating: "q", count: Int(count)))))
        } else {
            for k in 0 ..< count { ops.append(.setTagField(tag: "liar", field: .name, value: .string("\(k)"))) }
        }
        let timestamp = fork.branch[0].timestamp.rawValue &- 1 &+ UInt64(rng.below(3))
        let lie = Change(replica: names.y, startSeq: 1, timestamp: Timestamp(rawValue: timestamp), dependencies: dependencies, operations: ops)
        return Case(setup: fork.base.allChanges + fork.branch, bundles: [encode([lie], sender: names.y, &rng)],
                    kind: "not matching", expectation: .holds(keeps(fork)))
    }

    // MARK: Several re-issuers

    /// The branch re-issued by Y from its first seq and by Z from a seq inside it, in either
    /// order, in one batch or two: X keeps nothing of the branch, both hold their part.
    static func overlapping(_ names: Names, _ rng: inout SplitMix64) -> Case {
        let fork = fork(names, &rng, entries: 2 + rng.below(5), tiny: false)
        let (_, byY) = fork.repaired(as: names.y, from: fork.forkSeq)
        let second = fork.forkSeq + UInt64(rng.below(Int(fork.made - fork.forkSeq + 1)))
        let (_, byZ) = fork.repaired(as: names.z, from: second)
        // Z's re-issue depends on X's seqs before its first, which Y's withdraws: unless both
        // start at the fork, it waits for them for good (after the replay that withdraws them,
        // in whatever order they came), and Y's holds the whole branch.
        var check = withdrawal(fork, from: fork.forkSeq, reissues: byY, exactText: second > fork.forkSeq)
        if second == fork.forkSeq {
            check.present += inserted(by: byZ)
        } else {
            check.seqs[names.z] = 0
            check.absent += inserted(by: byZ)
        }
        let zFirst = rng.below(2) == 0
        let (a, b) = zFirst ? (byZ, byY) : (byY, byZ)
        let bundles = rng.below(2) == 0 ? [encode(a + b, sender: names.y, &rng)]
                                        : [encode(a, sender: names.y, &rng), encode(b, sender: names.z, &rng)]
        return Case(setup: fork.base.allChanges + fork.branch, bundles: bundles,
                    kind: "overlapping re-issues from two re-issuers", expectation: .holds(check))
    }

    /// Y re-issued X's branch; a copy of Y's database re-issues Y's seqs (the re-issue among them)
    /// as W: X and Y both lose the seqs, W holds the branch, the text stays the copy's.
    static func nested(_ names: Names, _ rng: inout SplitMix64) -> Case {
        let fork = fork(names, &rng, entries: 1 + rng.below(5), tiny: false)
        let (repairedY, byY) = fork.repaired(as: names.y, from: fork.forkSeq)
        let madeY = repairedY.versionVector[names.y]
        // From the start of one of Y's re-issuing changes, or from a seq inside one, past its
        // `.reissue` operation: crafted (a copy is made between changes, so no copy's branch
        // starts there), so only the model's agreement is asked (Docs/Architecture.md, limits).
        var firstY = byY[rng.below(byY.count)].startSeq
        var kind = "nested re-issues"
        var crafted = false
        if rng.below(3) == 0 {
            let piece = byY[rng.below(byY.count)]
            firstY = piece.startSeq + 1 + UInt64(rng.below(Int(piece.seqCount - 1)))
            kind += ", one cutting a held re-issue"
            crafted = true
        }
        var copyW = try! Notebook(snapshot: repairedY.snapshot(), wallClock: FixedWallClock(fork.later + 600_000), replicaID: names.w)
        let byW = copyW.reissuing(names.y, from: firstY, through: madeY)
        copyW.apply(contentsOf: byW)
        var check = Check()
        check.seqs[fork.x] = fork.forkSeq - 1
        check.seqs[names.y] = firstY - 1
        check.present = inserted(by: byW)
        check.absent = fork.branchCharacters(from: fork.forkSeq) + inserted(by: byY).filter { $0.id.seq >= firstY }
        check.withdrawn = [OpIDRange(replica: fork.x, seq: fork.forkSeq, count: fork.made - fork.forkSeq + 1),
                           OpIDRange(replica: names.y, seq: firstY, count: madeY - firstY + 1)]
        check.bodies = bodies(fork.copy, names)
        var setup = fork.base.allChanges + fork.branch
        var bundles: [[UInt8]]
        switch rng.below(3) {
        case 0:
            setup += byY
            bundles = [encode(byW, sender: names.w, &rng)]
        case 1:
            bundles = [encode(byY + byW, sender: names.w, &rng)]
        default:
            bundles = [encode(byW, sender: names.w, &rng), encode(byY, sender: names.y, &rng)]
        }
        return Case(setup: setup, bundles: bundles, kind: kind, expectation: crafted ? .modelOnly : .holds(check))
    }

    // MARK: The store's own identity

    /// Another replica re-issues the receiving store's own operations (from any seq it made),
    /// with their content or other content, sometimes followed by the store's own changes echoed
    /// back. The store made them and never forked: their content stays, in its name or, where
    /// the re-issue matches them, as the re-issuer's; then it moves to a fresh identity, so that
    /// its next operations do not take the seqs again (the driver checks both against the model).
    static func ownIdentity(_ names: Names, _ rng: inout SplitMix64) -> Case {
        let mine = OwnIdentityCases.receiverNotebook
        let receiver = OwnIdentityCases.receiver
        let made = mine.versionVector[receiver]
        let first = 1 + UInt64(rng.below(Int(made)))
        var stranger = try! Notebook(snapshot: mine.snapshot(), wallClock: FixedWallClock(1_700_000_000_000 + 5000), replicaID: names.stranger)
        var changes = stranger.reissuing(receiver, from: first, through: made)
        var kind = "a re-issue of the store's own seqs"
        if rng.below(3) == 0, !changes.isEmpty, let off = altered(changes[0], at: 1, reference: false, &rng) {
            changes[0] = off
            kind += ", other content"
        }
        stranger.apply(contentsOf: changes)
        if rng.below(2) == 0 {
            changes += mine.allChanges
            kind += ", then its own changes echoed"
        }
        return Case(setup: [], bundles: [encode(changes, sender: names.stranger, &rng)], kind: kind, expectation: .modelOnly)
    }

    // MARK: Floods

    /// A branch of many one-character entries re-issued piece by piece, each piece followed by
    /// changes of the identity it withdraws from (the whole branch again, or its next entry):
    /// each such change asks for the replay the piece before it called for; a batch makes a
    /// bounded number, refuses what comes past them, and still ends with the branch withdrawn.
    static func floodForcingReplays(_ names: Names, _ rng: inout SplitMix64) -> Case {
        let entries = rng.below(8) == 0 ? 60 + rng.below(60) : 8 + rng.below(24)
        let fork = fork(names, &rng, entries: entries, tiny: true)
        let (_, reissue) = fork.repaired(as: names.y, from: fork.forkSeq)
        let branch = fork.branch
        var crafted: [Change] = []
        let whole = rng.below(2) == 0 && entries < 40
        for (i, piece) in reissue.enumerated() {
            crafted.append(piece)
            if whole { crafted += branch } else { crafted.append(branch[(i + 1) % branch.count]) }
        }
        return Case(setup: fork.base.allChanges + branch, bundles: [encode(crafted, sender: names.y, &rng)],
                    kind: "a flood of re-issues, each followed by the withdrawn identity's changes",
                    expectation: .holds(withdrawal(fork, from: fork.forkSeq, reissues: reissue)))
    }

    /// A branch of one-character entries re-issued seq by seq, each by a re-issuer of its own
    /// (references renamed to the re-issuer of the seq they name), in decreasing or shuffled
    /// order; or thousands of tiny re-issues in one change of seqs the store does not hold.
    static func floodOfReissuers(_ names: Names, _ rng: inout SplitMix64) -> Case {
        if rng.below(3) == 0 { return unheldFlood(names, &rng) }
        let entries = rng.below(8) == 0 ? 100 + rng.below(150) : 5 + rng.below(20)
        let fork = fork(names, &rng, entries: entries, tiny: true)
        let branch = fork.branch
        // Each seq of the branch (its entries join where typing went on at the end of the
        // text): the character, and what it follows.
        var units: [(seq: UInt64, timestamp: Timestamp, note: NoteID, origin: OpID?, scalar: Unicode.Scalar, dependencies: VersionVector)] = []
        for change in branch {
            var seq = change.startSeq
            for op in change.operations {
                if case .insertText(let note, let origin, let text) = op {
                    for (k, scalar) in text.enumerated() {
                        let at = seq + UInt64(k)
                        units.append((at, change.timestamp(ofSeq: at), note, k == 0 ? origin : OpID(replica: fork.x, seq: at - 1), scalar, change.dependencies))
                    }
                }
                seq &+= op.seqCount
            }
        }
        // Seq s of the branch is held again by its re-issuer's seq 2.
        var reissuerOf: [UInt64: ReplicaID] = [:]
        for (i, unit) in units.enumerated() { reissuerOf[unit.seq] = names.reissuer(i) }
        func renamed(_ id: OpID?) -> OpID? {
            guard let id, id.replica == fork.x, let by = reissuerOf[id.seq] else { return id }
            return OpID(replica: by, seq: 2)
        }
        var flood: [Change] = []
        for (i, unit) in units.enumerated() {
            var dependencies = unit.dependencies
            dependencies[fork.x] = fork.forkSeq - 1
            let origin = renamed(unit.origin)
            if let origin, origin.replica != fork.x, dependencies[origin.replica] < origin.seq { dependencies[origin.replica] = origin.seq }
            flood.append(Change(replica: names.reissuer(i), startSeq: 1, timestamp: Timestamp(rawValue: unit.timestamp.rawValue - 1),
                                dependencies: dependencies,
                                operations: [.reissue(of: OpIDRange(replica: fork.x, seq: unit.seq, count: 1)),
                                             .insertText(note: unit.note, origin: origin, text: InsertedText([unit.scalar]))]))
        }
        if rng.below(2) == 0 { flood.reverse() } else { flood.shuffle(using: &rng) }
        return Case(setup: fork.base.allChanges + branch, bundles: [encode(flood, sender: names.y, &rng)],
                    kind: "a flood of one-seq re-issues, each by its own re-issuer",
                    expectation: .holds(withdrawal(fork, from: fork.forkSeq, reissues: flood)))
    }

    /// Up to 4,096 one-seq re-issues in one change, of X's seqs past what the store holds (in
    /// decreasing or shuffled order), then a change of X at those seqs: none matches, nothing is
    /// removed, and every lookup stays bounded. Or, in the same batch, hundreds of changes of
    /// another replica that wait for its first seq, then the flood re-issuing their seqs: each
    /// re-issue asks whether what it re-issues is held or waits (`--maximal reissues` fills
    /// the limits so).
    static func unheldFlood(_ names: Names, _ rng: inout SplitMix64) -> Case {
        let fork = fork(names, &rng, entries: 1 + rng.below(3), tiny: false)
        let piled = rng.below(2) == 0
        let n = piled ? [64, 256, 1024][rng.below(3)] : [64, 512, 2000, 4096][rng.below(4)]
        let waiter = ReplicaID(Identifier128(high: 0xE006, low: names.seed))
        let target = piled ? waiter : fork.x
        let first = piled ? 2 : fork.made + 1
        var seqs = (0 ..< UInt64(n)).map { first + $0 }
        if rng.below(2) == 0 { seqs.reverse() } else { seqs.shuffle(using: &rng) }
        var ops: [Operation] = []
        for seq in seqs {
            ops.append(.reissue(of: OpIDRange(replica: target, seq: seq, count: 1)))
            ops.append(.setTagField(tag: "flood", field: .name, value: .string("\(seq)")))
        }
        let flood = Change(replica: names.y, startSeq: 1, timestamp: Timestamp(rawValue: (1_695_000_000_000 as UInt64) << 16),
                           dependencies: VersionVector(), operations: ops)
        var changes = [flood]
        var check = keeps(fork)
        var kind = "a flood of re-issues of seqs the store does not hold"
        if piled {
            // Changes of the waiter at seqs 2 ..., each waiting for its seq 1 (which never comes).
            let pile = (0 ..< [100, 500, 1000][rng.below(3)]).map { k in
                Change(replica: waiter, startSeq: UInt64(k) + 2, timestamp: Timestamp(rawValue: (1_694_000_000_000 as UInt64) << 16 + UInt64(k)),
                       dependencies: VersionVector(), operations: [.setTagField(tag: "w", field: .name, value: .string("\(k)"))])
            }
            changes = pile + changes
            check.seqs[waiter] = 0
            kind += ", but wait here"
        } else if rng.below(2) == 0 {
            // X goes on past its branch, at seqs the flood names.
            var on = fork.copy
            on.wallClock = FixedWallClock(fork.later)
            if let next = try? on.insertText(names.note, at: 0, String(repeating: "n", count: 1 + rng.below(50))) {
                changes.append(next)
                check.seqs[fork.x] = next.endSeq
                check.present += inserted(by: [next])
            }
        }
        return Case(setup: fork.base.allChanges + fork.branch, bundles: [encode(changes, sender: names.y, &rng)],
                    kind: kind, expectation: .holds(check))
    }
}

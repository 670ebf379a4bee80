import NotesCRDT
import Testing

/// Conveniences for tests on the core's seeded generator.
extension SplitMix64 {
    /// A value in `range`.
    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self) }
    mutating func int(_ range: Range<Int>) -> Int { Int.random(in: range, using: &self) }
    /// True with probability `p`.
    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0 ..< 1, using: &self) < p }
    /// A random element of a non-empty collection.
    mutating func pick<C: Collection>(_ c: C) -> C.Element where C.Index == Int {
        c[c.startIndex + int(0 ..< c.count)]
    }
}

/// A replica identity that sorts by `n` (tie-break tests rely on that).
func replica(_ n: UInt64) -> ReplicaID { ReplicaID(Identifier128(high: 0, low: n)) }

/// A note identity made from `n`.
func noteID(_ n: UInt64) -> NoteID { NoteID(Identifier128(high: 0xABCD, low: n)) }

/// The wall-clock time every test starts from (2023-11-14, in milliseconds).
let baseTime: UInt64 = 1_700_000_000_000

/// A fresh replica with a fixed wall clock.
func makeNotebook(_ n: UInt64, at ms: UInt64 = baseTime) -> Notebook {
    Notebook(replicaID: replica(n), wallClock: FixedWallClock(ms))
}

extension Notebook {
    /// Moves this replica's wall clock (a manual clock: tests decide what time it is).
    mutating func setWallTime(_ ms: UInt64) { wallClock = FixedWallClock(ms) }

    /// The body of a note as Unicode scalars.
    func scalars(of id: NoteID) -> [Unicode.Scalar] { Array((note(id)?.body ?? "").unicodeScalars) }

    /// Every note's body, by identity (deleted ones included), for whole-state comparisons.
    var bodies: [NoteID: String] {
        Dictionary(uniqueKeysWithValues: noteIDs.map { ($0, note($0)!.body) })
    }
}

/// Scalars the random scripts type: ASCII, a combining mark, CJK, emoji, an emoji skin-tone
/// modifier and a zero-width joiner (so grapheme clusters never line up with scalars).
let scriptAlphabet: [Unicode.Scalar] = Array("abcdefghij xyz.,".unicodeScalars) + [
    "\u{0301}", "\u{0308}", "é", "ß", "日", "本", "語", "中", "😀", "👍", "\u{1F3FD}", "\u{200D}", "👩", "\u{FE0F}",
]

/// A random string of `count` scalars from `scriptAlphabet`.
func randomText<G: RandomNumberGenerator>(_ count: Int, using rng: inout G) -> String {
    var view = String.UnicodeScalarView()
    for _ in 0 ..< count { view.append(scriptAlphabet[Int.random(in: 0 ..< scriptAlphabet.count, using: &rng)]) }
    return String(view)
}

/// The scalars of a string.
func scalars(_ s: String) -> [Unicode.Scalar] { Array(s.unicodeScalars) }

/// Drives several replicas through a random script of local edits, partial syncs and out-of-order
/// deliveries, recording every change any replica made. One seed replays a run exactly.
struct Simulation {
    var replicas: [Notebook]
    /// Every change made locally, by any replica, in the order made (a causal order).
    var made: [Change] = []
    var rng: SplitMix64
    var wallTimes: [UInt64]
    var nextNote: UInt64 = 1
    /// Whether edits also deliver single changes out of causal order (leaving some pending).
    var outOfOrderDeliveries: Bool
    /// Whether syncs send the changes as made (one per edit) instead of `changes(since:)` (the
    /// coalesced log).
    var syncWithChangesAsMade = false

    /// - Parameter farFuture: whether replica 0's clock is ten years ahead (far beyond the drift
    ///   bound, so the others do not follow it).
    init(seed: UInt64, replicaCount: Int, outOfOrderDeliveries: Bool = true, farFuture: Bool = false) {
        rng = SplitMix64(seed: seed)
        replicas = (0 ..< replicaCount).map { makeNotebook(UInt64($0) + 1) }
        // Skewed clocks: some replicas run ahead or behind by up to ten seconds.
        var r = SplitMix64(seed: seed ^ 0x5EED)
        wallTimes = (0 ..< replicaCount).map { _ in baseTime + UInt64(r.int(0 ... 10_000)) }
        if farFuture { wallTimes[0] += tenYears }
        self.outOfOrderDeliveries = outOfOrderDeliveries
    }

    /// Runs `steps` random steps.
    mutating func run(steps: Int) throws {
        for _ in 0 ..< steps { try step() }
    }

    /// Every note known to replica `i`.
    func notes(of i: Int) -> [NoteID] { replicas[i].noteIDs }

    mutating func record(_ change: Change?) { if let change { made.append(change) } }
    mutating func record(_ changes: [Change]) { made.append(contentsOf: changes) }

    /// Brings replica `i` up to date with what replica `j` has applied.
    mutating func sync(_ i: Int, from j: Int) throws {
        let (have, source) = (replicas[i].versionVector, replicas[j].versionVector)
        let missing = syncWithChangesAsMade
            ? made.filter { $0.endSeq > have[$0.replica] && $0.endSeq <= source[$0.replica] }
            : replicas[j].changes(since: have)
        replicas[i].apply(contentsOf: missing)
    }

    mutating func step() throws {
        let i = rng.int(0 ..< replicas.count)
        // Time mostly moves forward; now and then a clock jumps back.
        if rng.chance(0.1) {
            wallTimes[i] = wallTimes[i] - UInt64(rng.int(0 ... 5_000))
        } else {
            wallTimes[i] += UInt64(rng.int(0 ... 50))
        }
        replicas[i].setWallTime(wallTimes[i])
        let known = notes(of: i)
        let roll = rng.int(0 ..< 100)
        if known.isEmpty || roll < 4 {
            let id = noteID(nextNote)
            nextNote += 1
            let body = rng.chance(0.5) ? randomText(rng.int(1 ... 10), using: &rng) : ""
            let tags = rng.chance(0.3) ? [rng.pick(["Work", "home", " Ideas "])] : []
            record(replicas[i].createNote(id: id, title: "t\(id.raw.low)", body: body, tags: tags).change)
            return
        }
        let note = rng.pick(known)
        let length = replicas[i].body(of: note)!.count
        switch roll {
        case 4 ..< 32:  // insert a few scalars anywhere
            let at = rng.int(0 ... length)
            record(try replicas[i].insertText(note, at: at, randomText(rng.int(1 ... 6), using: &rng)))
        case 32 ..< 40:  // a burst of edits in one batch: typing, backspaces, a jump
            var r = rng
            record(try replicas[i].editBody(note) { body in
                var cursor = r.int(0 ... body.count)
                for _ in 0 ..< r.int(1 ... 8) {
                    if r.chance(0.25), cursor > 0 {
                        try body.delete(cursor - 1 ..< cursor)
                        cursor -= 1
                    } else if r.chance(0.1) {
                        cursor = r.int(0 ... body.count)
                    } else {
                        let text = randomText(r.int(1 ... 2), using: &r)
                        try body.insert(text, at: cursor)
                        cursor += text.unicodeScalars.count
                    }
                }
            })
            rng = r
        case 40 ..< 52:  // type a word one scalar at a time, then maybe select back over it and delete
            var note = note
            var start = rng.int(0 ... length)
            // Often the user goes on typing where they stopped (right after their own last character).
            let lastOwn = OpID(replica: replicas[i].replicaID, seq: replicas[i].versionVector[replicas[i].replicaID])
            if rng.chance(0.6) {
                let me = replicas[i]
                for n in known {
                    if let p = me.body(of: n)!.position(of: lastOwn) {
                        note = n
                        start = p + 1
                        break
                    }
                }
            }
            var at = start
            for _ in 0 ..< rng.int(2 ... 6) {
                record(try replicas[i].insertText(note, at: at, randomText(1, using: &rng)))
                at += 1
            }
            if roll >= 46, start > 0 {
                record(try replicas[i].deleteText(note, rng.int(0 ..< start) ..< at))
            }
        case 52 ..< 64 where length > 0:  // delete a range
            let start = rng.int(0 ..< length)
            let end = min(length, start + rng.int(1 ... 8))
            record(try replicas[i].deleteText(note, start ..< end))
        case 64 ..< 68:  // replace the whole body with an edited copy
            var text = replicas[i].scalars(of: note)
            if !text.isEmpty, rng.chance(0.5) { text.remove(at: rng.int(0 ..< text.count)) }
            text.insert(contentsOf: scalars(randomText(rng.int(0 ... 3), using: &rng)), at: rng.int(0 ... text.count))
            var view = String.UnicodeScalarView()
            view.append(contentsOf: text)
            record(try replicas[i].replaceBody(note, with: String(view)))
        case 68 ..< 80:  // a field
            switch rng.int(0 ..< 9) {
            case 8: record(try replicas[i].resolveConflicts(note))
            case 0: record(try replicas[i].setTitle(note, randomText(rng.int(0 ... 5), using: &rng)))
            case 1: record(try replicas[i].setPinned(note, rng.chance(0.5)))
            case 2: record(try replicas[i].setArchived(note, rng.chance(0.5)))
            case 3: record(try replicas[i].setColor(note, rng.chance(0.3) ? nil : rng.pick(["red", "blue"])))
            case 4: record(try replicas[i].setState(note, rng.pick(NoteLifecycle.allCases)))
            case 5: record(try replicas[i].setTag(note, rng.pick(["Work", "work", "home"]), member: rng.chance(0.6)))
            case 6: record(try replicas[i].setTagField(rng.pick(["work", "home"]), .color, .string(rng.pick(["red", "green"]))))
            default: record(try replicas[i].setExtra(note, rng.pick(["x", "y"]), .int(Int64(rng.int(-5 ... 5)))))
            }
        case 80 ..< 94:  // partial sync from another replica
            let j = rng.int(0 ..< replicas.count)
            if j != i { try sync(i, from: j) }
        default:  // a single change delivered out of order (it may wait for its dependencies)
            if outOfOrderDeliveries, !made.isEmpty {
                replicas[i].apply(rng.pick(made))
            }
        }
    }

    /// Syncs every replica with every other until all have the same version vector.
    mutating func syncAll() throws {
        for _ in 0 ..< 2 {
            for i in replicas.indices { for j in replicas.indices where i != j { try sync(i, from: j) } }
        }
    }
}

/// Ten years, in milliseconds.
let tenYears: UInt64 = 10 * 365 * 86_400_000

/// The rules of deletes against edits and of visible merges, worked out by brute force from every
/// operation made (each sequence number on its own, with its causal context), independently of
/// how `Notebook` keeps them.
struct MergeOracle {
    enum Kind: Hashable {
        case insert(origin: OpID?)
        case delete(targets: [OpIDRange])
        case write(NoteField, FieldValue)
        case resolve
    }

    struct SeqOp {
        var id: OpID
        var context: VersionVector  // the operations its author had applied before it
        var timestamp: Timestamp
        var note: NoteID
        var kind: Kind

        func sees(_ other: SeqOp) -> Bool { context.contains(other.id) }

        var isEdit: Bool {
            switch kind {
            case .insert, .delete: true
            case .write(let field, _): field != .state && !field.isReserved
            case .resolve: false
            }
        }

        var isDelete: Bool {
            if case .write(.state, let value) = kind { return value == .string("deleted") }
            return false
        }
    }

    var ops: [NoteID: [SeqOp]] = [:]

    init(_ changes: [Change]) {
        for change in changes {
            var seq = change.startSeq
            for op in change.operations {
                defer { seq += op.seqCount }
                guard let note = op.note else { continue }
                func add(_ s: UInt64, _ kind: Kind) {
                    var context = change.dependencies
                    context[change.replica] = s - 1
                    ops[note, default: []].append(SeqOp(id: OpID(replica: change.replica, seq: s), context: context,
                                                        timestamp: change.timestamp(ofSeq: s), note: note, kind: kind))
                }
                switch op {
                case .insertText(_, let origin, let text):
                    for k in 0 ..< UInt64(text.count) {
                        add(seq + k, .insert(origin: k == 0 ? origin : OpID(replica: change.replica, seq: seq + k - 1)))
                    }
                case .deleteText(_, let targets):
                    add(seq, .delete(targets: targets))
                case .deleteEach(_, let runs):
                    for (k, target) in runs.flatMap(\.targets).enumerated() { add(seq + UInt64(k), .delete(targets: [target])) }
                case .setNoteField(_, let field, let value):
                    add(seq, field == .resolution ? .resolve : .write(field, value))
                case .setTagField, .reissue:
                    break
                }
            }
        }
    }

    static func overlaps(_ a: OpIDRange, _ b: OpIDRange) -> Bool {
        a.replica == b.replica && a.seq < b.endSeq && b.seq < a.endSeq
    }

    static func contains(_ targets: [OpIDRange], _ id: OpID?) -> Bool {
        guard let id else { return false }
        return targets.contains { $0.replica == id.replica && id.seq >= $0.seq && id.seq < $0.endSeq }
    }

    /// What kind of region two operations both touch, if any (concurrency aside).
    static func conflictKind(_ a: SeqOp, _ b: SeqOp) -> NoteConflict.Kind? {
        if a.isDelete && b.isEdit || b.isDelete && a.isEdit { return .deletedWhileEdited }
        switch (a.kind, b.kind) {
        case (.insert(let x), .insert(let y)): return x == y ? .body : nil
        case (.insert(let x), .delete(let t)), (.delete(let t), .insert(let x)): return contains(t, x) ? .body : nil
        case (.delete(let t), .delete(let u)): return t.contains { x in u.contains { overlaps(x, $0) } } ? .body : nil
        case (.write(let f, let v), .write(let g, let w)): return f == g && v != w && !f.isReserved ? .field(f) : nil
        default: return nil
        }
    }

    /// The unresolved merges of a note: per kind, the pairs of replicas.
    func conflicts(of note: NoteID) -> Set<String> {
        let list = ops[note] ?? []
        let resolves = list.filter { if case .resolve = $0.kind { return true } else { return false } }
        var result: Set<String> = []
        for i in list.indices {
            for j in list.indices where j > i {
                let (a, b) = (list[i], list[j])
                guard a.id.replica != b.id.replica, !a.sees(b), !b.sees(a) else { continue }
                guard let kind = Self.conflictKind(a, b) else { continue }
                if resolves.contains(where: { $0.context.contains(a.id) && $0.context.contains(b.id) }) { continue }
                let pair = [a.id.replica, b.id.replica].sorted().map { String($0.raw.low) }.joined(separator: "/")
                result.insert("\(kind) \(pair)")
            }
        }
        return result
    }

    /// Whether the winning state write is a delete that some edit of the note is not in the context of.
    func isRestored(_ note: NoteID) -> Bool {
        let list = ops[note] ?? []
        let states = list.filter { if case .write(.state, _) = $0.kind { return true } else { return false } }
        guard let winner = states.max(by: { a, b in
            if a.timestamp != b.timestamp { return a.timestamp < b.timestamp }
            if a.id.replica != b.id.replica { return a.id.replica < b.id.replica }
            return a.id.seq < b.id.seq
        }), winner.isDelete else { return false }
        return list.contains { $0.isEdit && !winner.context.contains($0.id) }
    }

    /// For every register write that saw an earlier write of the same register: whether it has the
    /// greater timestamp (so it wins), as "note field: ok" lines that are false when not.
    static func laterWritesWin(_ changes: [Change]) -> [String] {
        struct Write { var id: OpID; var context: VersionVector; var timestamp: Timestamp }
        var writes: [String: [Write]] = [:]
        for change in changes {
            var seq = change.startSeq
            for op in change.operations {
                defer { seq += op.seqCount }
                var key: String?
                switch op {
                case .setNoteField(let note, let field, _): key = "\(note) \(field)"
                case .setTagField(let tag, let field, _): key = "tag \(tag) \(field)"
                default: break
                }
                guard let key else { continue }
                var context = change.dependencies
                context[change.replica] = seq - 1
                writes[key, default: []].append(Write(id: OpID(replica: change.replica, seq: seq), context: context, timestamp: change.timestamp(ofSeq: seq)))
            }
        }
        var problems: [String] = []
        for (key, list) in writes {
            for later in list {
                for earlier in list where later.context.contains(earlier.id) && later.timestamp <= earlier.timestamp {
                    problems.append("\(key): \(later.id) saw \(earlier.id) but does not beat it")
                }
            }
        }
        return problems
    }
}

/// A fresh replica that applied `changes` in the given order.
func replay(_ changes: some Sequence<Change>, as n: UInt64 = 999) throws -> Notebook {
    var nb = makeNotebook(n)
    nb.apply(contentsOf: changes)
    return nb
}

/// Runs a property's body and records what it throws as an issue.
///
/// swift-property-based 2.0.1 swallows errors thrown from a `propertyCheck` body (`try?` in its
/// IssueCounting.swift), so a body that throws would pass silently. Every throwing property body
/// goes through this instead.
func reportingErrors(_ context: @autoclosure () -> String, sourceLocation: SourceLocation = #_sourceLocation,
                     _ body: () async throws -> Void) async {
    do {
        try await body()
    } catch {
        Issue.record("\(context()): threw \(error)", sourceLocation: sourceLocation)
    }
}

/// A note typed into by a replica whose clock is ten days ahead ("o" then "z" before it: "oz"),
/// and replica 2, at the normal time, that has received it. A local insert next to that text must
/// take keys above the far-future ones to land where it is typed.
func farFutureNote() throws -> (future: Notebook, local: Notebook, id: NoteID) {
    var future = makeNotebook(1, at: baseTime + 10 * 86_400_000)
    let id = future.createNote(id: noteID(1)).id
    try future.insertText(id, at: 0, "z")
    future.setWallTime(baseTime + 10 * 86_400_000 + 1)
    try future.insertText(id, at: 0, "o")
    var local = makeNotebook(2)
    local.apply(contentsOf: future.allChanges)
    return (future, local, id)
}

/// A change encoding made by hand: replica(1) and noteID(1) in the tables, one change of replica(1)
/// from seq 1 at `timestamp`, without dependencies, of `records` records, then the seven columns
/// (kinds, notes, insert modes, delete modes, lengths, explicit values, text).
func handMadeEncoding(timestamp: UInt64 = 0, records: UInt64, columns: [[UInt8]]) -> [UInt8] {
    var bytes = BinaryWriter()
    bytes.varint(1); bytes.uint64(0); bytes.uint64(1)
    bytes.varint(1); bytes.uint64(0xABCD); bytes.uint64(1)
    bytes.varint(1)
    bytes.varint(0); bytes.varint(1); bytes.varint(timestamp); bytes.varint(0)
    bytes.varint(records)
    for column in columns {
        bytes.varint(UInt64(column.count))
        bytes.raw(column)
    }
    return bytes.bytes
}

extension Notebook.ApplyOutcome {
    /// The reason, when the change went to the quarantine.
    var quarantineReason: CRDTError? {
        if case .quarantined(let reason) = self { return reason }
        return nil
    }

    /// The reason, when the change was rejected as malformed.
    var rejectionReason: CRDTError? {
        if case .rejected(let reason) = self { return reason }
        return nil
    }
}

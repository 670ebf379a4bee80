import NotesCRDT

/// Makes bundles the way an attacker would: a plausible history (a few replicas typing, deleting,
/// setting fields) written at the wire level, then some of its values pushed to the edges of
/// their types (0, 1, max - 1, max, 2^31 - 1, 2^53 - 1, 2^63...), counts and lengths that lie,
/// varints padded, columns cut or extended; framed with a valid checksum (and valid DEFLATE when
/// compressed), so that every case reaches the values instead of stopping at the checksum.
///
/// One seed gives one bundle, on every machine.
public struct HostileBundles: Sendable {
    public init() {}

    /// The interesting values of a 64-bit field.
    public static let edges: [UInt64] = [
        0, 1, 2, 3, 4, 7, 127, 128, 255, 256, 1 << 14, (1 << 15) - 1, 1 << 15, (1 << 15) + 1, (1 << 16) - 1, 1 << 16, (1 << 16) + 1,
        1 << 17, (1 << 18) - 1, 1 << 18, (1 << 18) + 1, 1 << 20, (1 << 20) + 1, (1 << 22) - 1, 1 << 22, (1 << 22) + 1,
        1 << 23, (1 << 23) + 1, 1 << 24, (1 << 24) + 1, (1 << 31) - 3, (1 << 31) - 2, (1 << 31) - 1, 1 << 31, (1 << 32) - 1,
        1 << 32, (1 << 32) + 1, (1 << 53) - 2, (1 << 53) - 1, 1 << 53, (1 << 53) + 1, 1 << 62, (1 << 63) - 1, 1 << 63,
        (1 << 63) + 1, .max - 1, .max,
    ]

    /// The interesting values of a signed 64-bit field.
    public static let signedEdges: [Int64] = [
        0, 1, -1, 2, -2, 1 << 31, -(1 << 31), (1 << 53) - 1, -((1 << 53) - 1), 1 << 53, -(1 << 53), .max, .min, .max - 1, .min + 1,
    ]

    /// The bundle for `seed`.
    public func bundle(seed: UInt64) -> RawBundle {
        var rng = SplitMix64(seed: seed)
        var model = Model(rng: &rng)
        var encoding = model.history(&rng)
        var bundle = RawBundle()
        bundle.sender = encoding.replicas.first ?? bundle.sender
        bundle.vector = model.vector(of: encoding)
        // The hostile part: a few values pushed to an edge (sometimes none: a valid bundle).
        let mutations = rng.below(10) < 2 ? 0 : 1 + rng.below(3)
        for _ in 0 ..< mutations { mutate(&encoding, &bundle, &rng) }
        bundle.body = encoding.bytes()
        if bundle.compressed == false, rng.below(4) == 0 { bundle.compressed = true }
        return bundle
    }

    /// A value near `value` or at one of `edges`.
    static func edge(_ rng: inout SplitMix64, near value: UInt64, edges: [UInt64] = HostileBundles.edges) -> UInt64 {
        switch rng.below(4) {
        case 0: return value &+ 1
        case 1: return value &- 1
        default: return edges[rng.below(edges.count)]
        }
    }

    /// One change of a value, a count or the framing, towards an edge.
    func mutate(_ e: inout RawChangeEncoding, _ b: inout RawBundle, _ rng: inout SplitMix64) {
        switch rng.below(25) {
        case 0 where !e.headers.isEmpty:
            let i = rng.below(e.headers.count)
            e.headers[i].startSeq = Self.edge(&rng, near: e.headers[i].startSeq)
        case 1 where !e.headers.isEmpty:
            let i = rng.below(e.headers.count)
            e.headers[i].timestamp = Self.edge(&rng, near: e.headers[i].timestamp)
        case 2 where !e.headers.isEmpty:
            let i = rng.below(e.headers.count)
            e.headers[i].operationCount = Self.edge(&rng, near: e.headers[i].operationCount)
        case 3 where !e.headers.isEmpty:
            let i = rng.below(e.headers.count)
            if e.headers[i].dependencies.isEmpty || rng.below(3) == 0 {
                e.headers[i].dependencyCount = Self.edge(&rng, near: UInt64(e.headers[i].dependencies.count))
            } else {
                let d = rng.below(e.headers[i].dependencies.count)
                if rng.below(2) == 0 {
                    e.headers[i].dependencies[d].seq = Self.edge(&rng, near: e.headers[i].dependencies[d].seq)
                } else {
                    e.headers[i].dependencies[d].replica = Self.edge(&rng, near: e.headers[i].dependencies[d].replica)
                }
            }
        case 4 where !e.headers.isEmpty:
            let i = rng.below(e.headers.count)
            e.headers[i].author = Self.edge(&rng, near: e.headers[i].author)
        case 5:
            switch rng.below(3) {
            case 0: e.replicaCount = Self.edge(&rng, near: UInt64(e.replicas.count))
            case 1: e.noteCount = Self.edge(&rng, near: UInt64(e.notes.count))
            default: e.headerCount = Self.edge(&rng, near: UInt64(e.headers.count))
            }
        case 6 ... 9 where !e.records.isEmpty:
            let i = rng.below(e.records.count)
            e.records[i] = mutated(e.records[i], &rng)
        case 10:
            let c = rng.below(7)
            e.columnSkew[c] = [-3, -2, -1, 1, 2, 3][rng.below(6)]
        case 11:
            e.trailing = Array(repeating: UInt8(truncatingIfNeeded: rng.next()), count: 1 + rng.below(3))
        case 12:
            e.width = .padded([2, 9, 10, 10, 11][rng.below(5)])
            b.width = rng.below(2) == 0 ? e.width : .shortest
        case 13:
            e.noteRuns = [(Self.edge(&rng, near: UInt64(e.records.count)), Self.edge(&rng, near: 0))]
        case 14:
            // The sender's vector: a seq at an edge, entries out of order or repeated, a count that lies.
            switch rng.below(4) {
            case 0 where !b.vector.isEmpty:
                let i = rng.below(b.vector.count)
                b.vector[i].1 = Self.edge(&rng, near: b.vector[i].1)
            case 1 where b.vector.count > 1:
                b.vector.reverse()
            case 2 where !b.vector.isEmpty:
                b.vector.append(b.vector[0])
            default:
                b.vectorCount = Self.edge(&rng, near: UInt64(b.vector.count))
            }
        case 15:
            b.compressed = true
            b.declaredLength = rng.below(3) == 0 ? Self.edge(&rng, near: 0) : nil
            if b.declaredLength == nil {
                // Off by a little, or the largest a reader takes and one more.
                let length = UInt64(e.bytes().count)
                let lengths: [UInt64] = [length + 1, length - 1, 32 << 20, (32 << 20) + 1]
                b.declaredLength = lengths[rng.below(lengths.count)]
            }
        case 16:
            switch rng.below(4) {
            case 0: b.version = UInt8(truncatingIfNeeded: Self.edge(&rng, near: 3))
            case 1: b.flags = UInt8(truncatingIfNeeded: rng.next())
            case 2: b.bodyLength = Self.edge(&rng, near: 0)
            default: b.badChecksum = rng.below(8) == 0
            }
        case 17:
            // Many changes or records: towards the limits (kept small enough to run fast).
            grow(&e, &rng)
        case 18 where !e.records.isEmpty:
            // A long run of deletes, or a whole-range delete of a huge span.
            let i = rng.below(e.records.count)
            let note = UInt64(rng.below(max(1, e.notes.count)))
            if rng.below(2) == 0 {
                let n = [(1 << 31) - 1, 1 << 24, (1 << 24) - 1, (1 << 23) + 7][rng.below(4)] as UInt64
                e.records[i] = .run(note: note, shape: (n - 2) << 1 | UInt64(rng.below(2)), mode: 0,
                                    first: RawReference(replica: 0, delta: Int64(rng.below(3)) - 1))
            } else {
                e.records[i] = .deleteExplicit(note: note, targets: [RawTarget(RawReference(replica: 0, delta: 0), count: Self.edge(&rng, near: 1 << 24))],
                                               targetCount: nil)
            }
        case 19 where e.replicas.count > 1:
            e.replicas.swapAt(0, e.replicas.count - 1)
        case 20 where !e.records.isEmpty:
            e.records.remove(at: rng.below(e.records.count))
        case 21 where !e.records.isEmpty:
            let i = rng.below(e.records.count)
            e.records.insert(e.records[i], at: rng.below(e.records.count + 1))
        case 22 where !e.headers.isEmpty:
            let i = rng.below(e.headers.count)
            e.headers.append(e.headers[i])
        case 23:
            appendReissue(&e, &rng)
        default:
            b.sender = e.replicas.isEmpty ? b.sender : e.replicas[rng.below(e.replicas.count)]
        }
    }

    /// A record with one of its fields at an edge.
    func mutated(_ record: RawRecord, _ rng: inout SplitMix64) -> RawRecord {
        switch record {
        case .setNoteField(let note, let field, let value):
            switch rng.below(4) {
            case 0: return .setNoteField(note: Self.edge(&rng, near: note), field: field, value: value)
            case 1: return .setNoteField(note: note, field: [UInt8(truncatingIfNeeded: rng.next() % 10)] + Self.hostileString(&rng), value: value)
            case 2: return .setNoteField(note: note, field: field, value: [UInt8(truncatingIfNeeded: rng.next() % 7)] + Self.varintBytes(Self.edge(&rng, near: 0)))
            default: return .setNoteField(note: note, field: field, value: [4] + Self.hostileString(&rng))
            }
        case .insert(let note, let mode, let origin, let length, let text):
            switch rng.below(6) {
            case 0: return .insert(note: Self.edge(&rng, near: note), mode: mode, origin: origin, length: length, text: text)
            case 1: return .insert(note: note, mode: UInt8(rng.below(4)), origin: origin ?? RawReference(replica: 0, delta: 1), length: length, text: text)
            case 2:
                let o = origin ?? RawReference(replica: 0, delta: 1)
                return .insert(note: note, mode: 1, origin: RawReference(replica: Self.edge(&rng, near: o.replica), delta: o.delta), length: length, text: text)
            case 3:
                let o = origin ?? RawReference(replica: 0, delta: 1)
                return .insert(note: note, mode: 1, origin: RawReference(replica: o.replica, delta: Self.signedEdges[rng.below(Self.signedEdges.count)]), length: length, text: text)
            case 4: return .insert(note: note, mode: mode, origin: origin, length: Self.edge(&rng, near: length), text: text)
            default:
                // Text that is not UTF-8, or scalars cut in half.
                let bad: [[UInt8]] = [[0xFF], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xE2, 0x82], [0xF0]]
                return .insert(note: note, mode: mode, origin: origin, length: length, text: text + bad[rng.below(bad.count)])
            }
        case .deleteExplicit(let note, var targets, let count):
            switch rng.below(4) {
            case 0: return .deleteExplicit(note: note, targets: targets, targetCount: Self.edge(&rng, near: UInt64(targets.count)))
            case 1 where !targets.isEmpty:
                let t = rng.below(targets.count)
                targets[t].count = Self.edge(&rng, near: targets[t].count)
            case 2 where !targets.isEmpty:
                let t = rng.below(targets.count)
                targets[t].reference.delta = Self.signedEdges[rng.below(Self.signedEdges.count)]
            default:
                targets.append(contentsOf: targets)
            }
            return .deleteExplicit(note: note, targets: targets, targetCount: count)
        case .deletePredicted(let note, let mode):
            return rng.below(2) == 0 ? .deletePredicted(note: Self.edge(&rng, near: note), mode: mode) : .deletePredicted(note: note, mode: UInt8(rng.below(4)))
        case .run(let note, let shape, let mode, let first):
            switch rng.below(3) {
            case 0: return .run(note: note, shape: Self.edge(&rng, near: shape), mode: mode, first: first)
            case 1: return .run(note: note, shape: shape, mode: UInt8(rng.below(4)), first: first ?? RawReference(replica: 0, delta: 0))
            default:
                return .run(note: note, shape: shape, mode: 0, first: RawReference(replica: first?.replica ?? 0, delta: Self.signedEdges[rng.below(Self.signedEdges.count)]))
            }
        case .setTagField(let tag, let field, let value):
            switch rng.below(4) {
            case 0: return .setTagField(tag: Self.hostileString(&rng), field: field, value: value)
            case 1: return .setTagField(tag: tag, field: UInt8(truncatingIfNeeded: rng.next()), value: value)
            case 2: return .setTagField(tag: tag, field: field, value: [3] + Self.varintBytes(Self.edge(&rng, near: 0)))
            default:
                // Taken for a re-issue: an empty tag and field byte 2, with values at the edges.
                return .reissue(replica: Self.edge(&rng, near: 0), delta: Self.signedEdges[rng.below(Self.signedEdges.count)],
                                count: Self.edge(&rng, near: 1))
            }
        case .reissue(let replica, let delta, let count):
            switch rng.below(4) {
            case 0: return .reissue(replica: Self.edge(&rng, near: replica), delta: delta, count: count)
            case 1: return .reissue(replica: replica, delta: Self.signedEdges[rng.below(Self.signedEdges.count)], count: count)
            case 2: return .reissue(replica: replica, delta: delta, count: Self.edge(&rng, near: count))
            default:
                // Field byte 2 under a tag key: no tag field has it.
                var value = Self.varintBytes(replica)
                value += Self.varintBytes(UInt64(bitPattern: (delta << 1) ^ (delta >> 63)))
                value += Self.varintBytes(count)
                return .setTagField(tag: rng.below(2) == 0 ? [0x74] : Self.hostileString(&rng), field: 2, value: value)
            }
        }
    }

    /// The seqs each header's records cover (wrapping: the values may be anything), and the
    /// index of its first record.
    static func spans(of e: RawChangeEncoding) -> [(start: UInt64, count: UInt64, firstRecord: Int)] {
        var result: [(UInt64, UInt64, Int)] = []
        var next = 0
        for header in e.headers {
            let first = next
            var count: UInt64 = 0
            var taken: UInt64 = 0
            while taken < header.operationCount, next < e.records.count {
                switch e.records[next] {
                case .insert(_, _, _, let length, _): count &+= length
                case .run(_, let shape, _, _): count &+= (shape >> 1) &+ 2
                default: count &+= 1
                }
                next += 1
                taken += 1
            }
            result.append((header.startSeq, count, first))
        }
        return result
    }

    /// Appends a change that re-issues seqs of a replica of the history: well formed (the seqs
    /// after it hold tag writes), or with one thing wrong that every reader must refuse with a
    /// message that names it: no seqs, seqs past 2^53 - 1, more seqs than the change holds after
    /// it, its own author's seqs, field byte 2 under a tag key, a first seq at 0 or past the top,
    /// a replica index past the table, an operation count or a column that lies, a value cut
    /// short; or two re-issues in one change, the second inside the first.
    func appendReissue(_ e: inout RawChangeEncoding, _ rng: inout SplitMix64) {
        let spans = Self.spans(of: e)
        // The re-issuer: a replica new to the table (its seqs from 1), or an author of the history.
        var author: UInt64
        var start: UInt64
        if e.replicas.isEmpty || rng.below(3) != 0 {
            e.replicas.append(ReplicaID(Identifier128(high: 0xA000, low: 0x200 + UInt64(rng.below(4)))))
            author = UInt64(e.replicas.count - 1)
            start = [1, 1, 1, 2, Change.maxSeq - 3, Change.maxSeq][rng.below(6)]
        } else {
            author = UInt64(rng.below(e.replicas.count))
            start = 1
            for (i, header) in e.headers.enumerated() where header.author == author { start = max(start, spans[i].start &+ spans[i].count) }
        }
        // What it re-issues: seqs of another author's change of the history, or of nothing held.
        let others = e.headers.indices.filter { e.headers[$0].author != author && spans[$0].count > 0 }
        var original: UInt64 = author == 0 ? 1 : 0
        var first: UInt64 = 1 + UInt64(rng.below(20))
        var count: UInt64 = 1 + UInt64(rng.below(6))
        if let h = others.isEmpty ? nil : others[rng.below(others.count)], rng.below(4) != 0 {
            original = e.headers[h].author
            let span = spans[h]
            let offset = UInt64(rng.below(Int(min(span.count, 64))))
            first = span.start &+ offset
            count = 1 + UInt64(rng.below(Int(min(span.count &- offset, 8))))
        }
        if original >= UInt64(e.replicas.count) || original == author { original = author == 0 ? 1 : 0 }
        func tagWrites(_ n: UInt64) -> [RawRecord] {
            (0 ..< n).map { _ in .setTagField(tag: [0x72, 0x65], field: 0, value: [4, 1, 0x72]) }
        }
        let opSeq = start
        var delta = Int64(bitPattern: opSeq &- first)
        var records: [RawRecord] = []
        var operationCount: UInt64?
        switch rng.below(14) {
        case 0, 1, 2, 3:
            records = [.reissue(replica: original, delta: delta, count: count)] + tagWrites(count)
        case 4:
            records = [.reissue(replica: original, delta: delta, count: 0)] + tagWrites(1)
        case 5:
            // Past 2^53 - 1: just past what the first seq allows, or an edge.
            let past = rng.below(2) == 0 ? Change.maxSeq &- first &+ 2 : [1 << 53, (1 << 53) + 1, 1 << 63, .max][rng.below(4)]
            records = [.reissue(replica: original, delta: delta, count: past)] + tagWrites(count)
        case 6:
            // More than the change holds after it (by one, or by far).
            let short = count &- 1 &- UInt64(rng.below(Int(count)))
            records = [.reissue(replica: original, delta: delta, count: rng.below(3) == 0 ? count &+ 1000 : count)] + tagWrites(short)
        case 7:
            records = [.reissue(replica: author, delta: delta, count: count)] + tagWrites(count)
        case 8:
            var value = Self.varintBytes(original)
            value += Self.varintBytes(UInt64(bitPattern: (delta << 1) ^ (delta >> 63)))
            value += Self.varintBytes(count)
            records = [.setTagField(tag: [[0x74], [0x20], [0xC3, 0xA9]][rng.below(3)], field: 2, value: value)] + tagWrites(count)
        case 9:
            // The first seq at 0, past 2^53 - 1, or wherever an edge of the delta puts it.
            let firsts: [UInt64] = [0, 1 << 53, (1 << 53) + 1, 1 << 63, .max]
            delta = rng.below(3) == 0 ? Self.signedEdges[rng.below(Self.signedEdges.count)] : Int64(bitPattern: opSeq &- firsts[rng.below(firsts.count)])
            records = [.reissue(replica: original, delta: delta, count: count)] + tagWrites(count)
        case 10:
            records = [.reissue(replica: Self.edge(&rng, near: UInt64(e.replicas.count)), delta: delta, count: count)] + tagWrites(count)
        case 11:
            // A count that lies: the header's operation count, or the record cut short at the end.
            records = [.reissue(replica: original, delta: delta, count: count)] + tagWrites(count)
            if rng.below(2) == 0 {
                operationCount = [0, 1, count, count + 2, Self.edge(&rng, near: count + 1)][rng.below(5)]
            } else {
                let cut = [[], Self.varintBytes(original), Self.varintBytes(original) + [0x80]][rng.below(3)]
                records = tagWrites(count) + [.setTagField(tag: [], field: 2, value: cut)]
            }
        case 12:
            // Not the change's first operation.
            records = tagWrites(1) + [.reissue(replica: original, delta: delta &+ 1, count: count)] + tagWrites(count)
        default:
            // Two re-issues, the second among the seqs the first covers (nested).
            records = [.reissue(replica: original, delta: delta, count: count + 1),
                       .reissue(replica: original, delta: delta &+ 1 &- Int64(bitPattern: count), count: count)] + tagWrites(count)
        }
        let timestamp = UInt64(1_700_000_000_000 + 30_000) << 16
        let dependencies = original < UInt64(e.replicas.count) && original != author && rng.below(2) == 0
            ? [RawDependency(replica: original, seq: first &- 1)].filter { $0.seq > 0 } : []
        e.headers.append(RawHeader(author: author, startSeq: start, timestamp: timestamp, dependencies: dependencies,
                                   operationCount: operationCount ?? UInt64(records.count)))
        e.records += records
    }

    /// More changes or records than the history has: a few thousand, towards the limits.
    func grow(_ e: inout RawChangeEncoding, _ rng: inout SplitMix64) {
        let copies = [100, 500, 2000][rng.below(3)]
        switch rng.below(3) {
        case 0 where !e.headers.isEmpty:
            // The same change again and again (duplicates, or seqs that collide).
            var header = e.headers[0]
            // (Without the dependencies: a copy of a change that depends on thousands of replicas
            // would make the bundle tens of megabytes, a case of its own.)
            header.dependencies = Array(header.dependencies.prefix(4))
            header.dependencyCount = nil
            let records = Array(e.records.prefix(Int(min(header.operationCount, UInt64(e.records.count)))))
            for _ in 0 ..< copies {
                e.headers.append(header)
                e.records.append(contentsOf: records)
            }
        case 1:
            // One insert of one character at the start, per change, each by the next seq: as many
            // runs (and siblings) as changes.
            let author = UInt64(0)
            var seq = (e.headers.map { $0.startSeq &+ $0.operationCount }.max() ?? 1) &+ 100
            for k in 0 ..< copies {
                e.headers.append(RawHeader(author: author, startSeq: seq, timestamp: UInt64(1_700_000_000_000 << 16) &- UInt64(k), operationCount: 1))
                e.records.append(.insert(note: 0, mode: 0, origin: nil, length: 1, text: [0x61]))
                seq &+= 1
            }
        default:
            // Dependencies on every replica, in a table of many.
            for k in 0 ..< copies { e.replicas.append(ReplicaID(Identifier128(high: 0xFFFF, low: UInt64(k)))) }
            if !e.headers.isEmpty {
                e.headers[0].dependencies = (1 ..< e.replicas.count).map { RawDependency(replica: UInt64($0), seq: 1) }
            }
        }
    }

    static func varintBytes(_ value: UInt64) -> [UInt8] {
        var w = RawWriter()
        w.varint(value)
        return w.bytes
    }

    /// A string whose length lies, or holds bad UTF-8, or is long.
    static func hostileString(_ rng: inout SplitMix64) -> [UInt8] {
        switch rng.below(4) {
        case 0: return varintBytes(edges[rng.below(edges.count)]) + [0x61]
        case 1: return [2, 0xC3, 0x28]
        case 2: return [0]
        default:
            let n = rng.below(300)
            return varintBytes(UInt64(n)) + Array(repeating: 0x7A, count: n)
        }
    }

    /// A plausible history, tracked closely enough that most unmutated cases apply.
    struct Model {
        var replicas: [ReplicaID]
        var notes: [NoteID]
        /// The next seq of each replica.
        var next: [UInt64]
        /// The characters inserted, per note: (replica index, seq).
        var characters: [[(Int, UInt64)]]

        init(rng: inout SplitMix64) {
            let replicaCount = 1 + rng.below(4)
            // Sorted by identity, as a writer's dependencies must be.
            replicas = (0 ..< replicaCount).map { ReplicaID(Identifier128(high: 0xA000, low: UInt64($0) + 1)) }
            notes = (0 ..< 1 + rng.below(3)).map { NoteID(Identifier128(high: 0xB000, low: UInt64($0) + 1)) }
            next = Array(repeating: 1, count: replicaCount)
            characters = Array(repeating: [], count: notes.count)
        }

        /// What the bundle's sender has: every seq made.
        func vector(of encoding: RawChangeEncoding) -> [(ReplicaID, UInt64)] {
            replicas.indices.compactMap { next[$0] > 1 ? (replicas[$0], next[$0] - 1) : nil }
        }

        mutating func history(_ rng: inout SplitMix64) -> RawChangeEncoding {
            var e = RawChangeEncoding()
            e.replicas = replicas
            e.notes = notes
            var lastInsertEnd: (Int, UInt64)?
            let changes = 1 + rng.below(6)
            for k in 0 ..< changes {
                let author = rng.below(replicas.count)
                let start = next[author]
                var seq = start
                var records: [RawRecord] = []
                for _ in 0 ..< 1 + rng.below(8) {
                    let note = rng.below(notes.count)
                    let existing = characters[note]
                    switch rng.below(10) {
                    case 0, 1:
                        let field: [UInt8] = [[0], [1], [2], [3], [4], [5], [6, 4, 0x77, 0x6F, 0x72, 0x6B], [7, 1, 0x70]][rng.below(8)]
                        let value: [UInt8] = [[0], [1], [2], [3, 8], [4, 3, 0x61, 0x62, 0x63]][rng.below(5)]
                        records.append(.setNoteField(note: UInt64(note), field: field, value: value))
                        seq += 1
                    case 2, 3, 4, 5:
                        let scalars: [[UInt8]] = [[0x61], [0x62], [0x20], [0xC3, 0xA9], [0xE6, 0x97, 0xA5], [0xF0, 0x9F, 0x98, 0x80]]
                        let n = 1 + rng.below(5)
                        var text: [UInt8] = []
                        for _ in 0 ..< n { text += scalars[rng.below(scalars.count)] }
                        if let (r, s) = existing.isEmpty ? nil : existing[rng.below(existing.count)], rng.below(4) != 0 {
                            if let last = lastInsertEnd, last == (r, s), rng.below(2) == 0 {
                                records.append(.insert(note: UInt64(note), mode: 3, origin: nil, length: UInt64(n), text: text))
                            } else {
                                records.append(.insert(note: UInt64(note), mode: 1, origin: RawReference(replica: UInt64(r), delta: Int64(bitPattern: seq &- s)),
                                                       length: UInt64(n), text: text))
                            }
                        } else {
                            records.append(.insert(note: UInt64(note), mode: 0, origin: nil, length: UInt64(n), text: text))
                        }
                        for i in 0 ..< UInt64(n) { characters[note].append((author, seq + i)) }
                        lastInsertEnd = (author, seq + UInt64(n) - 1)
                        seq += UInt64(n)
                    case 6 ... 7 where !existing.isEmpty:
                        let (r, s) = existing[rng.below(existing.count)]
                        records.append(.deleteExplicit(note: UInt64(note), targets: [RawTarget(RawReference(replica: UInt64(r), delta: Int64(bitPattern: seq &- s)), count: 1)],
                                                       targetCount: nil))
                        seq += 1
                    case 8 where existing.count >= 3:
                        // A run over characters of one replica with consecutive seqs, when there are some.
                        let (r, s) = existing[rng.below(existing.count)]
                        let forward = rng.below(2) == 0
                        var n: UInt64 = 1
                        while n < 6, existing.contains(where: { $0 == (r, forward ? s + n : s &- n) }) { n += 1 }
                        if n >= 2 {
                            records.append(.run(note: UInt64(note), shape: (n - 2) << 1 | (forward ? 1 : 0), mode: 0,
                                                first: RawReference(replica: UInt64(r), delta: Int64(bitPattern: seq &- s))))
                            seq += n
                        } else {
                            records.append(.setTagField(tag: [0x74], field: 1, value: [4, 1, 0x72]))
                            seq += 1
                        }
                    default:
                        records.append(.setTagField(tag: [0x74, 0x61, 0x67], field: UInt8(rng.below(2)), value: [4, 1, 0x78]))
                        seq += 1
                    }
                }
                // What the author had of the others: everything made so far, by increasing replica.
                let dependencies = replicas.indices.compactMap { r -> RawDependency? in
                    r != author && next[r] > 1 ? RawDependency(replica: UInt64(r), seq: next[r] - 1) : nil
                }
                e.headers.append(RawHeader(author: UInt64(author), startSeq: start,
                                           timestamp: (1_700_000_000_000 + UInt64(k) * 1000) << 16,
                                           dependencies: dependencies, operationCount: UInt64(records.count)))
                e.records += records
                next[author] = seq
            }
            return e
        }
    }
}

extension SplitMix64 {
    /// A value in `0 ..< bound` (bound > 0).
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
}

import NotesCRDT
import NotesSync

/// Bundles that each fill one limit of `SyncBundle.changeLimits` (or come as close as the
/// others allow), made to cost the most a bundle may: what the peak memory and time of reading
/// and applying a bundle are measured on (Docs/BundleFormat.md, "Limits").
public enum MaximalBundle: String, CaseIterable, Sendable {
    /// The most changes, each one insert of one character at the start of a note, each with a
    /// smaller timestamp than the one before (so that each new character must pass every one
    /// already there).
    case changes
    /// The most operations: one change of inserts of one character each at the start.
    case operations
    /// The most characters: one insert of as many 3-byte scalars as the body holds.
    case scalars
    /// The most dependencies: the largest replica table, and changes that depend on all of it.
    case dependencies
    /// The most delete targets: a text, then deletes of many targets each.
    case targets
    /// The longest delete span: a text of one-character runs, then deletes of all of it, again and again.
    case span
    /// The most notes: a field set on each note of the largest note table.
    case notes
    /// The largest replica table and sender's vector.
    case replicas
    /// The most operations, each a field of a new tag (a tag entity per operation).
    case tags
    /// The most operations, each a new app-defined field of one note.
    case fields
    /// The most operations, each putting one note in a new tag.
    case memberships
    /// A note title as long as the largest body allows.
    case title
    /// The most changes, each from another replica, the replicas in decreasing order (each new
    /// entry of the version vector goes before all the others).
    case authors
    /// One change that types a character into each of the most notes, then deletes each one.
    case noteTexts
    /// The most changes, all for the same seq of one replica, each deleting characters that do
    /// not exist (each goes to the quarantine beside all the others).
    case quarantined
    /// The most changes, each waiting for a seq of a replica that is not there, the largest first
    /// (each must be filed before every one already waiting).
    case waiting
    /// The most changes of one replica waiting for its first seq, then one change of another
    /// replica with as many one-seq re-issues of the first's seqs as the operations left allow
    /// (each followed by the tag write it re-issues): each re-issue asks whether the replica
    /// holds what it re-issues, the waiting changes among it.
    case reissues
    /// Every limit at once, as far as they go together: the most changes, each depending on
    /// 16 replicas, with 4 operations each (new tags, new notes, new fields), and the first
    /// inserting the most characters.
    case combined

    /// The bundle, at `scale` (1: the limit itself; smaller for a quick test).
    public func bundle(scale: Double = 1) -> RawBundle {
        let limits = SyncBundle.changeLimits
        func scaled(_ n: Int) -> Int { max(2, Int(Double(n) * scale)) }
        let author = ReplicaID(Identifier128(high: 0xA11, low: 1))
        let note = NoteID(Identifier128(high: 0xB11, low: 1))
        let time: UInt64 = 1_700_000_000_000 << 16
        var e = RawChangeEncoding()
        e.replicas = [author]
        e.notes = [note]
        var b = RawBundle()
        b.sender = author
        switch self {
        case .changes:
            let n = scaled(limits.maxChanges)
            for k in 0 ..< n {
                e.headers.append(RawHeader(author: 0, startSeq: UInt64(k) + 1, timestamp: time - UInt64(k), operationCount: 1))
                e.records.append(.insert(note: 0, mode: 0, origin: nil, length: 1, text: [0x61]))
            }
            b.vector = [(author, UInt64(n))]
        case .operations:
            let n = scaled(limits.maxOperations)
            e.headers = [RawHeader(author: 0, startSeq: 1, timestamp: time, operationCount: UInt64(n))]
            e.records = Array(repeating: .insert(note: 0, mode: 0, origin: nil, length: 1, text: [0x61]), count: n)
            b.vector = [(author, UInt64(n))]
        case .scalars:
            // 3 bytes each: as many as the limit allows within the largest body.
            let n = min(scaled(limits.maxScalars), (SyncBundle.maxBodyBytes - 1024) / 3)
            e.headers = [RawHeader(author: 0, startSeq: 1, timestamp: time, operationCount: 1)]
            var text: [UInt8] = []
            text.reserveCapacity(3 * n)
            for _ in 0 ..< n { text += [0xE6, 0x97, 0xA5] }
            e.records = [.insert(note: 0, mode: 0, origin: nil, length: UInt64(n), text: text)]
            b.vector = [(author, UInt64(n))]
        case .dependencies:
            let replicas = scaled(limits.maxReplicas)
            e.replicas = (0 ..< replicas).map { ReplicaID(Identifier128(high: 0xA11, low: UInt64($0) + 1)) }
            let changes = max(1, scaled(limits.maxDependencies) / replicas)
            let deps = (1 ..< replicas).map { RawDependency(replica: UInt64($0), seq: 1) }
            for k in 0 ..< changes {
                e.headers.append(RawHeader(author: 0, startSeq: UInt64(k) + 1, timestamp: time + UInt64(k), dependencies: deps, operationCount: 1))
                e.records.append(.setTagField(tag: [0x74], field: 0, value: [0]))
            }
        case .targets:
            // A text of `chars` characters, then deletes naming 16 targets of one character each.
            let chars = 1 << 16
            e.headers = [RawHeader(author: 0, startSeq: 1, timestamp: time, operationCount: 1)]
            e.records = [.insert(note: 0, mode: 0, origin: nil, length: UInt64(chars), text: Array(repeating: 0x61, count: chars))]
            let deletes = scaled(limits.maxOperations) / 16 - 1
            var seq = UInt64(chars) + 1
            e.headers.append(RawHeader(author: 0, startSeq: seq, timestamp: time + seq, operationCount: UInt64(deletes)))
            for k in 0 ..< deletes {
                let targets = (0 ..< 16).map { t in RawTarget(RawReference(replica: 0, delta: Int64(seq) - Int64((k * 16 + t) % chars + 1)), count: 1) }
                e.records.append(.deleteExplicit(note: 0, targets: targets, targetCount: nil))
                seq += 1
            }
        case .span:
            // `chars` characters each inserted at the start (a run each), then deletes of all of them.
            let chars = scaled(1 << 12)
            let deletes = scaled(Int(limits.maxDeleteSpan)) / chars
            e.headers = [RawHeader(author: 0, startSeq: 1, timestamp: time, operationCount: UInt64(chars + deletes))]
            for _ in 0 ..< chars { e.records.append(.insert(note: 0, mode: 0, origin: nil, length: 1, text: [0x61])) }
            for k in 0 ..< deletes {
                let seq = Int64(chars + k + 1)
                e.records.append(.deleteExplicit(note: 0, targets: [RawTarget(RawReference(replica: 0, delta: seq - 1), count: UInt64(chars))], targetCount: nil))
            }
        case .notes:
            let n = scaled(limits.maxNotes)
            e.notes = (0 ..< n).map { NoteID(Identifier128(high: 0xB11, low: UInt64($0) + 1)) }
            e.headers = [RawHeader(author: 0, startSeq: 1, timestamp: time, operationCount: UInt64(n))]
            e.records = (0 ..< n).map { .setNoteField(note: UInt64($0), field: [0], value: [4, 1, 0x6E]) }
        case .replicas:
            let n = scaled(limits.maxReplicas)
            e.replicas = (0 ..< n).map { ReplicaID(Identifier128(high: 0xA11, low: UInt64($0) + 1)) }
            b.vector = e.replicas.map { ($0, 1) }
            e.headers = [RawHeader(author: 0, startSeq: 1, timestamp: time, operationCount: 1)]
            e.records = [.setTagField(tag: [0x74], field: 0, value: [0])]
        case .noteTexts:
            let n = min(scaled(limits.maxNotes), limits.maxOperations / 2)
            e.notes = (0 ..< n).map { NoteID(Identifier128(high: 0xB11, low: UInt64($0) + 1)) }
            e.headers = [RawHeader(author: 0, startSeq: 1, timestamp: time, operationCount: UInt64(2 * n))]
            for k in 0 ..< n { e.records.append(.insert(note: UInt64(k), mode: 0, origin: nil, length: 1, text: [0x61])) }
            for k in 0 ..< n {
                // Delete k's character (seq k + 1) at seq n + k + 1: `opSeq - seq` is n.
                e.records.append(.deleteExplicit(note: UInt64(k), targets: [RawTarget(RawReference(replica: 0, delta: Int64(n)), count: 1)], targetCount: nil))
            }
        case .authors:
            let n = min(scaled(limits.maxChanges), limits.maxReplicas)
            e.replicas = (0 ..< n).map { ReplicaID(Identifier128(high: 0xA11, low: UInt64(n - $0))) }
            for k in 0 ..< n {
                e.headers.append(RawHeader(author: UInt64(k), startSeq: 1, timestamp: time + UInt64(k), operationCount: 1))
                e.records.append(.insert(note: 0, mode: 0, origin: nil, length: 1, text: [0x61]))
            }
        case .quarantined:
            let n = scaled(limits.maxChanges)
            for k in 0 ..< n {
                e.headers.append(RawHeader(author: 0, startSeq: 1, timestamp: time + UInt64(k), operationCount: 1))
                e.records.append(.deleteExplicit(note: 0, targets: [RawTarget(RawReference(replica: 0, delta: -5), count: 1)], targetCount: nil))
            }
        case .reissues:
            let waiting = scaled(limits.maxChanges - 1)
            let reissuer = ReplicaID(Identifier128(high: 0xA12, low: 1))
            e.replicas.append(reissuer)
            for k in 0 ..< waiting {
                e.headers.append(RawHeader(author: 0, startSeq: UInt64(k) + 2, timestamp: time + UInt64(k), operationCount: 1))
                e.records.append(.setTagField(tag: [0x74], field: 0, value: [0]))
            }
            let reissues = (scaled(limits.maxOperations) - waiting) / 2
            e.headers.append(RawHeader(author: 1, startSeq: 1, timestamp: time, operationCount: UInt64(2 * reissues)))
            for k in 0 ..< reissues {
                // The re-issue at seq 2k + 1, of the first replica's seq k + 2.
                e.records.append(.reissue(replica: 0, delta: Int64(2 * k + 1) - Int64(k + 2), count: 1))
                e.records.append(.setTagField(tag: [0x74], field: 0, value: [0]))
            }
            b.vector = [(author, UInt64(waiting) + 1), (reissuer, UInt64(2 * reissues))]
        case .waiting:
            // One change from each of as many replicas as the table holds, each waiting for a
            // larger seq of the missing replica than the next.
            let n = min(scaled(limits.maxChanges), limits.maxReplicas - 1)
            e.replicas = (0 ..< n).map { ReplicaID(Identifier128(high: 0xA11, low: UInt64($0) + 1)) }
            e.replicas.append(ReplicaID(Identifier128(high: 0xA12, low: 0)))
            for k in 0 ..< n {
                e.headers.append(RawHeader(author: UInt64(k), startSeq: 1, timestamp: time + UInt64(k),
                                           dependencies: [RawDependency(replica: UInt64(n), seq: UInt64(n - k))], operationCount: 1))
                e.records.append(.setTagField(tag: [0x74], field: 0, value: [0]))
            }
        case .title:
            let length = scaled(SyncBundle.maxBodyBytes - 1024)
            var value = RawWriter()
            value.byte(4)
            value.varint(UInt64(length))
            value.raw(Array(repeating: 0x78, count: length))
            e.headers = [RawHeader(author: 0, startSeq: 1, timestamp: time, operationCount: 1)]
            e.records = [.setNoteField(note: 0, field: [0], value: value.bytes)]
        case .combined:
            let changes = scaled(limits.maxChanges)
            let perChange = max(1, scaled(limits.maxOperations) / changes)
            e.replicas = (0 ... 16).map { ReplicaID(Identifier128(high: 0xA11, low: UInt64($0) + 1)) }
            e.notes = (0 ..< min(changes, limits.maxNotes)).map { NoteID(Identifier128(high: 0xB11, low: UInt64($0) + 1)) }
            let deps = (1 ... 16).map { RawDependency(replica: UInt64($0), seq: 1) }
            let scalars = scaled(limits.maxScalars) - perChange
            // First what the others depend on: one change of each of the 16 replicas.
            for r in 1 ... 16 {
                e.headers.append(RawHeader(author: UInt64(r), startSeq: 1, timestamp: time, operationCount: 1))
                e.records.append(.setTagField(tag: [0x74], field: 0, value: [0]))
            }
            var seq: UInt64 = 1
            for k in 0 ..< changes - 16 {
                var records: [RawRecord] = []
                var taken: UInt64 = 0
                if k == 0 {
                    records.append(.insert(note: 0, mode: 0, origin: nil, length: UInt64(scalars), text: Array(repeating: 0x61, count: scalars)))
                    taken += UInt64(scalars)
                }
                while records.count < perChange - (k < 16 ? 1 : 0) {
                    var key = RawWriter()
                    key.blob(Array("k\(k).\(records.count)".utf8))
                    switch records.count % 3 {
                    case 0: records.append(.setTagField(tag: Array("k\(k).\(records.count)".utf8), field: 0, value: [4, 1, 0x6E]))
                    case 1: records.append(.setNoteField(note: UInt64(k % e.notes.count), field: [0], value: [4, 1, 0x74]))
                    default: records.append(.setNoteField(note: UInt64(k % e.notes.count), field: [7] + key.bytes, value: [2]))
                    }
                    taken += 1
                }
                e.headers.append(RawHeader(author: 0, startSeq: seq, timestamp: time &- UInt64(k), dependencies: deps,
                                           operationCount: UInt64(records.count)))
                e.records += records
                seq += taken
            }
        case .tags, .fields, .memberships:
            let n = scaled(limits.maxOperations)
            e.headers = [RawHeader(author: 0, startSeq: 1, timestamp: time, operationCount: UInt64(n))]
            e.records = (0 ..< n).map { k in
                var key = RawWriter()
                key.blob(Array("k\(k)".utf8))
                switch self {
                case .tags: return .setTagField(tag: Array("k\(k)".utf8), field: 0, value: [4, 1, 0x6E])
                case .fields: return .setNoteField(note: 0, field: [7] + key.bytes, value: [2])
                default: return .setNoteField(note: 0, field: [6] + key.bytes, value: [2])
                }
            }
        }
        b.body = e.bytes()
        // Compressed when that makes it fit (or smaller): what a writer would send.
        b.compressed = true
        return b
    }
}

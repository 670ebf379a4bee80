extension Notebook {
    static let snapshotMagic: [UInt8] = Array("CRDTSNAP".utf8)
    /// The version `snapshot()` writes. Version 1 (identity, clock, log, waiting changes),
    /// version 2 (without what the delete and conflict rules keep per note) and version 3
    /// (without the changes that hold the re-issues applied) are still read.
    static let snapshotVersion: UInt8 = 4

    /// A log kept encoded until it is needed: set in a replica opened from a snapshot with
    /// `deferringLog: true`, until its first change or `materialize()`.
    struct DeferredLog: Sendable {
        var history: [UInt8]
        var pending: [UInt8]
        var historyCount: Int
        var pendingCount: Int
        /// The changes that hold the re-issues applied (`ReissueTable.sources`), encoded.
        var reissues: [UInt8]
    }

    /// A serialized snapshot of this replica: its identity, clock and version vector, the visible
    /// state of every note and tag (field registers and body text), the log of changes and the
    /// changes that wait, and a checksum. `Notebook(snapshot:)` restores an equal replica.
    ///
    /// - Complexity: O(size of the log and the state).
    public func snapshot() -> [UInt8] {
        if deferred != nil {
            var copy = self
            copy.materialize()
            return copy.snapshot()
        }
        var writer = BinaryWriter()
        writer.raw(Notebook.snapshotMagic)
        writer.byte(Notebook.snapshotVersion)
        writer.raw(replicaID.raw.bytes)
        writer.varint(clock.last.rawValue)
        writer.varint(clock.maxForwardDrift)
        writer.versionVector(versionVector)
        writer.varint(UInt64(history.count))
        writer.varint(UInt64(pending.count))
        // The state, so that a replica opened with `deferringLog` can show it without the log.
        writer.varint(UInt64(notes.count))
        for id in notes.keys.sorted() {
            let record = notes[id]!
            writer.raw(id.raw.bytes)
            writer.varint(record.updatedAt.rawValue)
            Notebook.encodeFields(record, &writer)
            writer.string(record.body.string)
            writer.varint(UInt64(record.body.count))
            Notebook.encodeHistoryState(record, &writer)
        }
        Notebook.encode(tagRecords, &writer)
        let log = ChangeCodec.encode(history)
        writer.varint(UInt64(log.count))
        writer.raw(log)
        let waiting = ChangeCodec.encode(pending.all)
        writer.varint(UInt64(waiting.count))
        writer.raw(waiting)
        // The re-issues, so that the log replays as the replica that held them last replayed
        // it (a rebuild knows them all from the start, and drops what they withdrew wherever).
        let reissues = ChangeCodec.encode(reissueTable.sources)
        writer.varint(UInt64(reissues.count))
        writer.raw(reissues)
        let checksum = Notebook.checksum(writer.bytes[...])
        for shift in stride(from: 0, to: 64, by: 8) { writer.byte(UInt8(truncatingIfNeeded: checksum >> UInt64(shift))) }
        return writer.bytes
    }

    /// Restores a replica from `snapshot()`'s bytes.
    ///
    /// - Parameter deferringLog: when true, only the identity, clock, version vector and visible
    ///   state are read (after the checksum is checked): notes, tags and body text can be read at
    ///   once, and the log is decoded and replayed at the first change, at `materialize()`, or (on
    ///   a copy, every time) when something needs it: `body(of:)`, `changes(since:)`,
    ///   `allChanges`, `pendingChanges`, `snapshot()`. Open this way to show a replica quickly;
    ///   call `materialize()` before reading bodies through `body(of:)` repeatedly.
    /// - Parameter replicaID: the identity the restored replica writes as, when not the one the
    ///   snapshot recorded (a store that moved to a fresh identity: its old one's operations stay
    ///   in the log as another replica's).
    public init(snapshot bytes: [UInt8], wallClock: any WallClock = SystemWallClock(), deferringLog: Bool = false,
                replicaID override: ReplicaID? = nil) throws {
        var reader = BinaryReader(bytes)
        guard bytes.count >= 9, Array(try reader.raw(8)) == Notebook.snapshotMagic else {
            throw CRDTError(.malformedEncoding, "not a crdt-sync snapshot (wrong magic bytes)")
        }
        let version = try reader.byte()
        guard (1 ... Notebook.snapshotVersion).contains(version) else {
            throw CRDTError(.malformedEncoding, "snapshot format version \(version) is not supported (this build reads 1 to \(Notebook.snapshotVersion))")
        }
        // A version 2 snapshot lacks what the delete and conflict rules keep per note: its log is
        // replayed at once, which works them out.
        let deferringLog = deferringLog && version >= 3
        if version >= 2 {
            guard bytes.count >= 9 + 8 else { throw CRDTError(.malformedEncoding, "the snapshot is truncated") }
            var stored: UInt64 = 0
            for (i, byte) in bytes[(bytes.count - 8)...].enumerated() { stored |= UInt64(byte) << UInt64(8 * i) }
            guard Notebook.checksum(bytes[..<(bytes.count - 8)]) == stored else {
                throw CRDTError(.malformedEncoding, "the snapshot is damaged or truncated (checksum mismatch)")
            }
            reader = BinaryReader(Array(bytes[..<(bytes.count - 8)]), offset: 9)
        }
        let replica = ReplicaID(Identifier128(bytes: try reader.raw(16))!)
        let last = Timestamp(rawValue: try reader.varint())
        let drift = try reader.varint()
        self.init(replicaID: override ?? replica, wallClock: wallClock, maxForwardDrift: drift)
        guard version >= 2 else {
            // Version 1: the log and the waiting changes only.
            let history = try ChangeCodec.decode(from: &reader)
            let waiting = try ChangeCodec.decode(from: &reader)
            guard reader.isAtEnd else { throw CRDTError(.malformedEncoding, "\(reader.remaining) unexpected bytes after the snapshot") }
            try applyStored(contentsOf: history)
            apply(contentsOf: waiting)
            clock.witnessLocal(last)
            return
        }
        let vector = try reader.versionVector()
        let historyCount = try reader.count(max: reader.remaining, "the log's length")
        let pendingCount = try reader.count(max: reader.remaining, "the number of waiting changes")
        var notes: [NoteID: NoteRecord] = [:]
        for _ in 0 ..< (try reader.count(max: reader.remaining / 19, "the note count")) {
            let id = NoteID(Identifier128(bytes: try reader.raw(16))!)
            var record = NoteRecord()
            record.updatedAt = Timestamp(rawValue: try reader.varint())
            try Notebook.decodeFields(into: &record, &reader)
            let text = try reader.string()
            let count = try reader.varint()
            guard count == UInt64(text.unicodeScalars.count) else {
                throw CRDTError(.malformedEncoding, "a note's text does not have the length the snapshot gives")
            }
            record.body = RGAText(deferredText: text, count: Int(count))
            if version >= 3 { try Notebook.decodeHistoryState(into: &record, &reader) }
            notes[id] = record
        }
        let tags = try Notebook.decodeTags(&reader)
        let historyBytes = Array(try reader.raw(try reader.count(max: reader.remaining, "the log's byte length")))
        let pendingBytes = Array(try reader.raw(try reader.count(max: reader.remaining, "the waiting changes' byte length")))
        let reissueBytes = version >= 4 ? Array(try reader.raw(try reader.count(max: reader.remaining, "the re-issues' byte length"))) : []
        guard reader.isAtEnd else { throw CRDTError(.malformedEncoding, "\(reader.remaining) unexpected bytes after the snapshot") }
        if deferringLog {
            versionVector = vector
            self.notes = notes
            tagRecords = tags
            clock.witnessLocal(last)
            deferred = DeferredLog(history: historyBytes, pending: pendingBytes, historyCount: historyCount, pendingCount: pendingCount,
                                   reissues: reissueBytes)
        } else {
            try recordReissues(reissueBytes)
            try applyStored(contentsOf: ChangeCodec.decode(historyBytes))
            apply(contentsOf: try ChangeCodec.decode(pendingBytes))
            clock.witnessLocal(last)
            guard versionVector == vector else {
                throw CRDTError(.malformedEncoding, "the snapshot's log does not match its version vector (the log reaches \(versionVector), the snapshot says \(vector))")
            }
        }
    }

    /// Records the re-issues a snapshot kept before its log replays (each a well-formed change
    /// that holds one; its operations are not applied here: the log holds them).
    private mutating func recordReissues(_ bytes: [UInt8]) throws {
        guard !bytes.isEmpty else { return }  // (a snapshot before format 4 has none)
        for source in try ChangeCodec.decode(bytes) {
            try Notebook.checkShape(source)
            guard source.containsReissue else {
                throw CRDTError(.malformedEncoding, "the snapshot's re-issues hold a change of \(source.replica) that re-issues nothing")
            }
            _ = reissueTable.record(source)
        }
    }

    /// Whether this replica was opened with `deferringLog` and has not decoded its log yet.
    public var isLogDeferred: Bool { deferred != nil }

    /// Decodes and replays a log that `Notebook(snapshot:deferringLog:)` deferred (nothing to do
    /// otherwise). Every change does this first.
    ///
    /// A log that does not replay to the snapshot's version vector (bytes crafted with a valid
    /// checksum) does not trap: what of it replays is kept, what does not is quarantined or left
    /// out, and `logDamage` says why. If the log then lacks operations of this replica that the
    /// snapshot's vector says it made, the replica moves to a fresh identity (`salvagedIdentity`),
    /// so that its next edits do not repeat seqs it may have sent (Docs/Architecture.md).
    public mutating func materialize() {
        guard let log = deferred else { return }
        var fresh = Notebook(replicaID: replicaID, wallClock: wallClock, maxForwardDrift: clock.maxForwardDrift)
        do {
            try fresh.recordReissues(log.reissues)
            try fresh.applyStored(contentsOf: ChangeCodec.decode(log.history))
            fresh.apply(contentsOf: try ChangeCodec.decode(log.pending))
            guard fresh.versionVector == versionVector else {
                throw CRDTError(.malformedEncoding, "the log reaches \(fresh.versionVector), the snapshot's version vector says \(versionVector)")
            }
        } catch {
            self = salvaging(log, reason: error as? CRDTError ?? CRDTError(.malformedEncoding, "\(error)"))
            return
        }
        fresh.clock.witnessLocal(clock.last)
        self = fresh
    }

    /// What `materialize()` keeps of a log that does not replay: its changes applied as received
    /// ones (quarantined or waiting when they do not apply), under a fresh identity when they lack
    /// this replica's own operations that the snapshot counted.
    private func salvaging(_ log: DeferredLog, reason: CRDTError) -> Notebook {
        let history = (try? ChangeCodec.decode(log.history)) ?? []
        let waiting = (try? ChangeCodec.decode(log.pending)) ?? []
        var kept = history
        kept += waiting
        var probe = Notebook(replicaID: replicaID, wallClock: wallClock, maxForwardDrift: clock.maxForwardDrift)
        probe.apply(contentsOf: kept)
        let made = versionVector[replicaID]
        let short = probe.versionVector[replicaID] < made
        let identity = short ? Notebook.salvagedIdentity(of: replicaID, log: log.history) : replicaID
        var salvaged = Notebook(replicaID: identity, wallClock: wallClock, maxForwardDrift: clock.maxForwardDrift)
        try? salvaged.recordReissues(log.reissues)
        salvaged.apply(contentsOf: kept)
        salvaged.clock.witnessLocal(clock.last)
        var message = "the snapshot's log does not replay (\(reason.message)): what of it applies was kept"
        if short {
            message += "; it lacks operations \(probe.versionVector[replicaID] + 1) ... \(made) of \(replicaID), which this replica made, so it now writes as \(identity)"
        }
        salvaged.logDamage = CRDTError(.malformedEncoding, message)
        return salvaged
    }

    /// The identity a replica moves to when its snapshot's log lacks its own operations: drawn
    /// from the old identity and the log's bytes, so the same snapshot always gives the same one.
    static func salvagedIdentity(of old: ReplicaID, log: [UInt8]) -> ReplicaID {
        var input = Array("crdt-sync: a snapshot log that does not replay".utf8)
        input += old.raw.bytes
        input += SHA256.digest(log)
        return ReplicaID(Identifier128(bytes: SHA256.digest(input).prefix(16))!)
    }

    /// The log a replica opened from `snapshot` (or empty) that then applies `later`, changes
    /// stored in the order applied, would have (`allChanges`), joined the same way, without
    /// replaying anything: what reading a history needs, at the cost of decoding the log.
    ///
    /// - Returns: nil when the snapshot names another replica than `replicaID`, or when `later`
    ///   does not follow the log as an applied log does (a change that would wait or overlap):
    ///   then open the replica.
    /// - Throws: `CRDTError` when the snapshot or a change does not decode.
    package static func storedLog(snapshot bytes: [UInt8]?, replicaID: ReplicaID,
                                  later: some Sequence<Change>) throws -> [Change]? {
        var stored: [Change] = []
        if let bytes {
            let opened = try Notebook(snapshot: bytes, deferringLog: true)
            guard opened.replicaID == replicaID else { return nil }
            stored = try opened.deferred.map { try ChangeCodec.decode($0.history) } ?? opened.history
        }
        var log: [Change] = []
        log.reserveCapacity(stored.count)
        var version = VersionVector()
        func take(_ change: Change) -> Bool {
            // A replica's log holds each author's seqs once, in order: anything else is not one.
            guard change.startSeq == version[change.replica] &+ 1 else { return false }
            version[change.replica] = change.endSeq
            if !join(change, onto: &log) { log.append(change) }
            return true
        }
        for change in stored where !take(change) { return nil }
        for change in later where !take(change) { return nil }
        return log
    }

    /// A note's field registers, in field order (a snapshot's and a stored note state's).
    static func encodeFields(_ record: NoteRecord, _ writer: inout BinaryWriter) {
        let fields = record.fields.sorted { $0.key < $1.key }
        writer.varint(UInt64(fields.count))
        for (field, register) in fields {
            ChangeCodec.encode(field, &writer)
            Notebook.encode(register, &writer)
        }
    }

    static func decodeFields(into record: inout NoteRecord, _ reader: inout BinaryReader) throws {
        for _ in 0 ..< (try reader.count(max: reader.remaining / 20, "a note's field count")) {
            let field = try ChangeCodec.decodeField(&reader)
            record.fields[field] = try Notebook.decodeRegister(&reader)
        }
    }

    /// Every tag entity's fields, by key (a snapshot's and a stored tag state's).
    static func encode(_ tags: [String: [TagField: LWWRegister<FieldValue>]], _ writer: inout BinaryWriter) {
        writer.varint(UInt64(tags.count))
        for key in tags.keys.sorted() {
            writer.string(key)
            let fields = tags[key]!.sorted { $0.key.rawValue < $1.key.rawValue }
            writer.varint(UInt64(fields.count))
            for (field, register) in fields {
                writer.byte(field.rawValue)
                Notebook.encode(register, &writer)
            }
        }
    }

    static func decodeTags(_ reader: inout BinaryReader) throws -> [String: [TagField: LWWRegister<FieldValue>]] {
        var tags: [String: [TagField: LWWRegister<FieldValue>]] = [:]
        for _ in 0 ..< (try reader.count(max: reader.remaining / 4, "the tag count")) {
            let key = try reader.string()
            var fields: [TagField: LWWRegister<FieldValue>] = [:]
            for _ in 0 ..< (try reader.count(max: reader.remaining / 20, "a tag's field count")) {
                guard let field = TagField(rawValue: try reader.byte()) else { throw CRDTError(.malformedEncoding, "unknown tag field") }
                fields[field] = try Notebook.decodeRegister(&reader)
            }
            tags[key] = fields
        }
        return tags
    }

    static func encode(_ register: LWWRegister<FieldValue>, _ writer: inout BinaryWriter) {
        ChangeCodec.encode(register.value, &writer)
        writer.varint(register.timestamp.rawValue)
        writer.raw(register.writer.replica.raw.bytes)
        writer.varint(register.writer.seq)
    }

    /// Writes what a note record keeps of its history for the delete and conflict rules: the
    /// edit and touch vectors, the winning delete's context, the conflict points.
    static func encodeHistoryState(_ record: NoteRecord, _ writer: inout BinaryWriter) {
        writer.versionVector(record.edits)
        writer.versionVector(record.touched)
        if let context = record.deleteContext {
            writer.byte(1)
            writer.versionVector(context)
        } else {
            writer.byte(0)
        }
        let conflicts = record.conflicts.sorted()
        writer.varint(UInt64(conflicts.count))
        for point in conflicts { encode(point, &writer) }
    }

    static func decodeHistoryState(into record: inout NoteRecord, _ reader: inout BinaryReader) throws {
        record.edits = try reader.versionVector()
        record.touched = try reader.versionVector()
        switch try reader.byte() {
        case 0: record.deleteContext = nil
        case 1: record.deleteContext = try reader.versionVector()
        default: throw CRDTError(.malformedEncoding, "a note's delete context flag is not 0 or 1")
        }
        for _ in 0 ..< (try reader.count(max: reader.remaining / 35, "a note's conflict count")) {
            record.conflicts.append(try decodeConflictPoint(&reader))
        }
    }

    static func encode(_ point: ConflictPoint, _ writer: inout BinaryWriter) {
        switch point.kind {
        case .body: writer.byte(0)
        case .deletedWhileEdited: writer.byte(1)
        case .field(let field):
            writer.byte(2)
            ChangeCodec.encode(field, &writer)
        }
        for id in [point.first, point.second] {
            writer.raw(id.replica.raw.bytes)
            writer.varint(id.seq)
        }
    }

    static func decodeConflictPoint(_ reader: inout BinaryReader) throws -> ConflictPoint {
        let kind: NoteConflict.Kind
        switch try reader.byte() {
        case 0: kind = .body
        case 1: kind = .deletedWhileEdited
        case 2: kind = .field(try ChangeCodec.decodeField(&reader))
        default: throw CRDTError(.malformedEncoding, "unknown conflict kind")
        }
        var ids: [OpID] = []
        for _ in 0 ..< 2 {
            let replica = ReplicaID(Identifier128(bytes: try reader.raw(16))!)
            ids.append(OpID(replica: replica, seq: try reader.varint()))
        }
        return ConflictPoint(kind, ids[0], ids[1])
    }

    static func decodeRegister(_ reader: inout BinaryReader) throws -> LWWRegister<FieldValue> {
        let value = try ChangeCodec.decodeValue(&reader)
        let timestamp = Timestamp(rawValue: try reader.varint())
        let replica = ReplicaID(Identifier128(bytes: try reader.raw(16))!)
        return LWWRegister(value: value, timestamp: timestamp, writer: OpID(replica: replica, seq: try reader.varint()))
    }

    /// A 64-bit checksum of the bytes (word-wise multiply-rotate with a final avalanche): catches
    /// damage, quickly enough that opening a large snapshot stays well under a millisecond.
    static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        var hash: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(bytes.count)
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset + 8 <= raw.count {
                let word = raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                let mixed = hash ^ (word &* 0x87C3_7B91_1142_53D5)
                hash = (mixed << 31 | mixed >> 33) &* 0x4CF5_AD43_2745_937F
                offset += 8
            }
            var tail: UInt64 = 0
            for i in offset ..< raw.count { tail |= UInt64(raw[i]) << UInt64(8 * (i - offset)) }
            hash ^= tail &* 0x87C3_7B91_1142_53D5
        }
        hash ^= hash >> 33
        hash = hash &* 0xFF51_AFD7_ED55_8CCD
        hash ^= hash >> 33
        hash = hash &* 0xC4CE_B9FE_1A85_EC53
        hash ^= hash >> 33
        return hash
    }

    /// A canonical digest of the visible state: every note's fields and body, every tag. Two
    /// replicas have the same digest exactly when their visible states are equal (up to SHA-256
    /// collisions), however they got there.
    ///
    /// It is a SHA-256 over the note count, each note's identity and `noteDigest` in identity
    /// order, and every tag: a store keeps each note's digest beside the note, so that it can
    /// give the digest without loading every note (`digest(noteDigests:)`).
    ///
    /// - Complexity: O(size of the state).
    public func digest() -> String {
        return digest(noteDigests: notes.keys.sorted().map { ($0, Notebook.noteDigest(notes[$0]!)) })
    }

    /// The digest of a replica whose notes have these digests (`noteDigest`), sorted by identity,
    /// and whose tags are this replica's.
    package func digest(noteDigests: some Collection<(NoteID, [UInt8])>) -> String {
        var writer = BinaryWriter()
        writer.varint(UInt64(noteDigests.count))
        for (id, digest) in noteDigests {
            writer.raw(id.raw.bytes)
            writer.raw(digest)
        }
        writer.varint(UInt64(tagRecords.count))
        for key in tagRecords.keys.sorted() {
            writer.string(key)
            let fields = tagRecords[key]!.filter { $0.value.value != .null }.sorted { $0.key < $1.key }
            writer.varint(UInt64(fields.count))
            for (field, register) in fields {
                writer.byte(field.rawValue)
                ChangeCodec.encode(register.value, &writer)
            }
        }
        return SHA256.hex(writer.bytes)
    }

    /// One note's part of `digest()`: a SHA-256 over its fields that are set, its text, whether
    /// a delete stands against an edit that did not see it, and its unresolved merges; nil for
    /// an unknown note.
    package func noteDigest(_ id: NoteID) -> [UInt8]? {
        return notes[id].map(Notebook.noteDigest)
    }

    /// What a note's digest is the SHA-256 of (`noteDigest(_:)`), unless its body is longer than
    /// `limit` scalars; in one lookup, without copying the record out of the table. `NoteStore`
    /// hashes it for every note it writes, with a hardware-accelerated SHA-256.
    package func noteDigestInput(_ id: NoteID, unlessLongerThan limit: Int) -> NoteDigestInput {
        guard deferred == nil else {
            guard let record = materialized.notes[id] else { return .unknown }
            return record.body.count > limit ? .long : .bytes(Notebook.noteDigestInput(record))
        }
        guard let index = notes.index(forKey: id) else { return .unknown }
        if notes.values[index].body.count > limit { return .long }
        return .bytes(Notebook.noteDigestInput(notes.values[index]))
    }

    /// What `noteDigestInput(_:unlessLongerThan:)` found.
    package enum NoteDigestInput: Equatable {
        case unknown, long, bytes([UInt8])
    }

    static func noteDigest(_ record: borrowing NoteRecord) -> [UInt8] {
        SHA256.digest(noteDigestInput(record))
    }

    static func noteDigestInput(_ record: borrowing NoteRecord) -> [UInt8] {
        var writer = BinaryWriter()
        // The fields are kept in field order: the set ones are written as they come.
        var set = 0
        for (_, register) in record.fields where register.value != .null { set += 1 }
        writer.varint(UInt64(set))
        for (field, register) in record.fields where register.value != .null {
            ChangeCodec.encode(field, &writer)
            ChangeCodec.encode(register.value, &writer)
        }
        // As `writer.string(body.string)` writes it, without making the string.
        let utf8 = record.body.utf8
        writer.varint(UInt64(utf8.count))
        writer.raw(utf8)
        // What a reader sees beyond the fields: a delete that an edit did not see, and the
        // merges no device has resolved.
        writer.byte(record.isRestoredByConcurrentEdit ? 1 : 0)
        let conflicts = record.conflicts.sorted()
        writer.varint(UInt64(conflicts.count))
        for point in conflicts { Notebook.encode(point, &writer) }
        return writer.bytes
    }
}

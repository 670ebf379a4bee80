extension Notebook {
    static let snapshotMagic: [UInt8] = Array("CRDTSNAP".utf8)
    /// The version `snapshot()` writes. Version 1 (identity, clock, log, waiting changes) is still read.
    static let snapshotVersion: UInt8 = 2

    /// A log kept encoded until it is needed: set in a replica opened from a snapshot with
    /// `deferringLog: true`, until its first change or `materialize()`.
    struct DeferredLog: Sendable {
        var history: [UInt8]
        var pending: [UInt8]
        var historyCount: Int
        var pendingCount: Int
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
            let fields = record.fields.sorted { $0.key < $1.key }
            writer.varint(UInt64(fields.count))
            for (field, register) in fields {
                ChangeCodec.encode(field, &writer)
                Notebook.encode(register, &writer)
            }
            writer.string(record.body.string)
            writer.varint(UInt64(record.body.count))
        }
        writer.varint(UInt64(tagRecords.count))
        for key in tagRecords.keys.sorted() {
            writer.string(key)
            let fields = tagRecords[key]!.sorted { $0.key.rawValue < $1.key.rawValue }
            writer.varint(UInt64(fields.count))
            for (field, register) in fields {
                writer.byte(field.rawValue)
                Notebook.encode(register, &writer)
            }
        }
        let log = ChangeCodec.encode(history)
        writer.varint(UInt64(log.count))
        writer.raw(log)
        let waiting = ChangeCodec.encode(pending.all)
        writer.varint(UInt64(waiting.count))
        writer.raw(waiting)
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
    public init(snapshot bytes: [UInt8], wallClock: any WallClock = SystemWallClock(), deferringLog: Bool = false) throws {
        var reader = BinaryReader(bytes)
        guard bytes.count >= 9, Array(try reader.raw(8)) == Notebook.snapshotMagic else {
            throw CRDTError(.malformedEncoding, "not a crdt-sync snapshot (wrong magic bytes)")
        }
        let version = try reader.byte()
        guard version == 1 || version == Notebook.snapshotVersion else {
            throw CRDTError(.malformedEncoding, "snapshot format version \(version) is not supported (this build reads 1 and \(Notebook.snapshotVersion))")
        }
        if version == 2 {
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
        self.init(replicaID: replica, wallClock: wallClock, maxForwardDrift: drift)
        guard version == 2 else {
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
            for _ in 0 ..< (try reader.count(max: reader.remaining / 20, "a note's field count")) {
                let field = try ChangeCodec.decodeField(&reader)
                record.fields[field] = try Notebook.decodeRegister(&reader)
            }
            let text = try reader.string()
            let count = try reader.varint()
            guard count == UInt64(text.unicodeScalars.count) else {
                throw CRDTError(.malformedEncoding, "a note's text does not have the length the snapshot gives")
            }
            record.body = RGAText(deferredText: text, count: Int(count))
            notes[id] = record
        }
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
        let historyBytes = Array(try reader.raw(try reader.count(max: reader.remaining, "the log's byte length")))
        let pendingBytes = Array(try reader.raw(try reader.count(max: reader.remaining, "the waiting changes' byte length")))
        guard reader.isAtEnd else { throw CRDTError(.malformedEncoding, "\(reader.remaining) unexpected bytes after the snapshot") }
        if deferringLog {
            versionVector = vector
            self.notes = notes
            tagRecords = tags
            clock.witnessLocal(last)
            deferred = DeferredLog(history: historyBytes, pending: pendingBytes, historyCount: historyCount, pendingCount: pendingCount)
        } else {
            try applyStored(contentsOf: ChangeCodec.decode(historyBytes))
            apply(contentsOf: try ChangeCodec.decode(pendingBytes))
            clock.witnessLocal(last)
            guard versionVector == vector else {
                throw CRDTError(.malformedEncoding, "the snapshot's log does not match its version vector")
            }
        }
    }

    /// Whether this replica was opened with `deferringLog` and has not decoded its log yet.
    public var isLogDeferred: Bool { deferred != nil }

    /// Decodes and replays a log that `Notebook(snapshot:deferringLog:)` deferred (nothing to do
    /// otherwise). Every change does this first.
    public mutating func materialize() {
        guard let log = deferred else { return }
        var fresh = Notebook(replicaID: replicaID, wallClock: wallClock, maxForwardDrift: clock.maxForwardDrift)
        do {
            try fresh.applyStored(contentsOf: ChangeCodec.decode(log.history))
            fresh.apply(contentsOf: try ChangeCodec.decode(log.pending))
        } catch {
            // The bytes passed their checksum when the replica was opened: this is a bug, not damage.
            preconditionFailure("the log of a snapshot that passed its checksum does not replay: \(error)")
        }
        fresh.clock.witnessLocal(clock.last)
        precondition(fresh.versionVector == versionVector, "the log of a snapshot does not reach its version vector")
        self = fresh
    }

    static func encode(_ register: LWWRegister<FieldValue>, _ writer: inout BinaryWriter) {
        ChangeCodec.encode(register.value, &writer)
        writer.varint(register.timestamp.rawValue)
        writer.raw(register.writer.replica.raw.bytes)
        writer.varint(register.writer.seq)
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
    /// - Complexity: O(size of the state).
    public func digest() -> String {
        var writer = BinaryWriter()
        writer.varint(UInt64(notes.count))
        for id in notes.keys.sorted() {
            let record = notes[id]!
            writer.raw(id.raw.bytes)
            let fields = record.fields.filter { $0.value.value != .null }.sorted { $0.key < $1.key }
            writer.varint(UInt64(fields.count))
            for (field, register) in fields {
                ChangeCodec.encode(field, &writer)
                ChangeCodec.encode(register.value, &writer)
            }
            writer.string(record.body.string)
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
}

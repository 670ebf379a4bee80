extension Notebook {
    static let snapshotMagic: [UInt8] = Array("CRDTSNAP".utf8)
    static let snapshotVersion: UInt8 = 1

    /// A serialized snapshot of this replica: its identity, clock, every change in its log and the
    /// changes that wait. `Notebook(snapshot:)` restores an equal replica.
    ///
    /// - Complexity: O(size of the log).
    public func snapshot() -> [UInt8] {
        var writer = BinaryWriter()
        writer.raw(Notebook.snapshotMagic)
        writer.byte(Notebook.snapshotVersion)
        writer.raw(replicaID.raw.bytes)
        writer.varint(clock.last.rawValue)
        writer.varint(clock.maxForwardDrift)
        ChangeCodec.encode(history, into: &writer)
        ChangeCodec.encode(pending.all, into: &writer)
        return writer.bytes
    }

    /// Restores a replica from `snapshot()`'s bytes.
    public init(snapshot bytes: [UInt8], wallClock: any WallClock = SystemWallClock()) throws {
        var reader = BinaryReader(bytes)
        guard bytes.count >= 9, Array(try reader.raw(8)) == Notebook.snapshotMagic else {
            throw CRDTError(.malformedEncoding, "not a crdt-sync snapshot (wrong magic bytes)")
        }
        let version = try reader.byte()
        guard version == Notebook.snapshotVersion else {
            throw CRDTError(.malformedEncoding, "snapshot format version \(version) is not supported (this build reads \(Notebook.snapshotVersion))")
        }
        let replica = ReplicaID(Identifier128(bytes: try reader.raw(16))!)
        let last = Timestamp(rawValue: try reader.varint())
        let drift = try reader.varint()
        self.init(replicaID: replica, wallClock: wallClock, maxForwardDrift: drift)
        let history = try ChangeCodec.decode(from: &reader)
        let waiting = try ChangeCodec.decode(from: &reader)
        guard reader.isAtEnd else { throw CRDTError(.malformedEncoding, "\(reader.remaining) unexpected bytes after the snapshot") }
        try apply(contentsOf: history)
        try apply(contentsOf: waiting)
        clock.witnessLocal(last)
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

import NotesCRDT

extension VersionVector {
    /// A compact encoding for the peers table: a count, then per entry 16 bytes and a varint.
    var storeBytes: [UInt8] {
        var writer = BinaryWriter()
        let entries = sortedEntries
        writer.varint(UInt64(entries.count))
        for entry in entries {
            writer.raw(entry.replica.raw.bytes)
            writer.varint(entry.seq)
        }
        return writer.bytes
    }

    init(storeBytes bytes: [UInt8]) throws {
        var reader = BinaryReader(bytes)
        let count = try reader.count(max: reader.remaining / 17, "a version vector's length")
        self.init()
        for _ in 0 ..< count {
            let replica = ReplicaID(Identifier128(bytes: try reader.raw(16))!)
            self[replica] = try reader.varint()
        }
    }
}

extension ReplicaID {
    init?(blob: [UInt8]) {
        guard let raw = Identifier128(bytes: blob) else { return nil }
        self.init(raw)
    }
}

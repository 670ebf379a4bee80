import NotesCRDT

extension VersionVector {
    /// A compact encoding for the peers table: a count, then per entry 16 bytes and a varint.
    var storeBytes: [UInt8] {
        var writer = BinaryWriter()
        writer.versionVector(self)
        return writer.bytes
    }

    init(storeBytes bytes: [UInt8]) throws {
        var reader = BinaryReader(bytes)
        self = try reader.versionVector()
    }
}

extension ReplicaID {
    init?(blob: [UInt8]) {
        guard let raw = Identifier128(bytes: blob) else { return nil }
        self.init(raw)
    }
}

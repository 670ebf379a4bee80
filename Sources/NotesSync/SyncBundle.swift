import Crypto
import Deflate
import NotesCRDT

/// An error reading a bundle or syncing: a code that callers can switch over, and a message that
/// names the problem (and the file, where there is one).
public struct SyncError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of problem it is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        /// The bytes do not start with the bundle magic.
        public static let notABundle = Code("notABundle")
        /// A format version this build does not read.
        public static let unsupportedVersion = Code("unsupportedVersion")
        /// Shorter than its header and checksum, or cut off inside.
        public static let truncated = Code("truncated")
        /// The checksum does not match the content.
        public static let checksumMismatch = Code("checksumMismatch")
        /// The checksum matches but the content is inconsistent (lengths or indexes that lie).
        public static let malformed = Code("malformed")
        /// A file or folder could not be read or written.
        public static let io = Code("io")
        /// The transport failed in a way that may pass (a network error, a busy server).
        public static let transient = Code("transient")
        /// The transport refused for good (bad credentials, request too large).
        public static let rejected = Code("rejected")
        /// Larger than a reader takes (`SyncBundle.maxBytes`, or a limit of `SyncBundle.changeLimits`).
        public static let tooLarge = Code("tooLarge")
        /// Sealed under another space key than this replica's (a wrong passphrase, another space).
        public static let wrongKey = Code("wrongKey")
        /// A sealed unit that does not verify: a forged introduction or signature, a second key for
        /// a known replica, a ciphertext that was altered, content that is not what its header says.
        public static let forged = Code("forged")
        /// Plaintext where the space is encrypted, or sealed data where this replica has no space key.
        public static let encryption = Code("encryption")
        /// The code's name (e.g. `tooLarge`).
        public var description: String { name }
    }

    /// The kind of problem.
    public var code: Code
    /// A sentence that says what is wrong.
    public var message: String

    /// Creates an error.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The same error with a location (a file name) put in front of the message.
    public func at(_ location: String) -> SyncError { SyncError(code, "\(location): \(message)") }

    /// The message.
    public var description: String { message }
}

/// The one wire format for files and HTTP: who sent it, what the sender had, and changes.
///
/// Layout (Docs/BundleFormat.md has it byte by byte): the magic `CRDTBNDL`, a format-version byte,
/// a flags byte, the sender's 16-byte ReplicaID, the sender's version vector, the body length, the
/// body (the change encoding: replica table, note table, changes; from version 2, when flag bit 0 is
/// set, the body is that encoding's length and its raw DEFLATE), then a SHA-256 of everything
/// before it. A reader checks the magic, the version, the checksum and every length before it
/// hands out a single change.
public struct SyncBundle: Hashable, Sendable {
    /// The replica that wrote the bundle.
    public var sender: ReplicaID
    /// What the sender had applied when it wrote the bundle.
    public var senderVersion: VersionVector
    /// The changes, in a causal order (none in a sealed bundle: see `sealedUnits`).
    public var changes: [Change]
    /// Whether this is a sealed bundle (format version 4): its changes travel encrypted and
    /// signed, in `sealedUnits`, readable only with the space key.
    public var isSealed: Bool
    /// The sealed units of a sealed bundle, each one author's changes over a seq range.
    public var sealedUnits: [SealedUnit]

    /// A bundle of `changes` from `sender`, which had applied `senderVersion`.
    public init(sender: ReplicaID, senderVersion: VersionVector, changes: [Change]) {
        self.sender = sender
        self.senderVersion = senderVersion
        self.changes = changes
        isSealed = false
        sealedUnits = []
    }

    /// A sealed bundle (format version 4) of `units` from `sender`, which had applied `senderVersion`.
    public init(sender: ReplicaID, senderVersion: VersionVector, sealed units: [SealedUnit]) {
        self.sender = sender
        self.senderVersion = senderVersion
        changes = []
        isSealed = true
        sealedUnits = units
    }

    /// The version of a sealed bundle.
    public static let sealedFormatVersion: UInt8 = 4

    /// The 8 bytes every bundle starts with: `CRDTBNDL`.
    public static let magic: [UInt8] = Array("CRDTBNDL".utf8)
    /// The version this build writes. It reads 1 (never compressed), 2 (compressed bodies) and 3
    /// (runs of deletes as one record in the change encoding).
    public static let formatVersion: UInt8 = 3
    /// Flag bit 0: the body is compressed.
    static let deflatedFlag: UInt8 = 1
    /// Bodies shorter than this are sent as they are: compressing a few dozen edits saves a few
    /// hundred bytes and costs a compressor's setup and a Huffman table.
    static let compressionThreshold = 2048
    /// zlib's level for a body: 1 (its fastest) below 64 KiB, 9 (its best) from there.
    ///
    /// Below 64 KiB are the bodies of syncs (a few edits to a few thousand), where level 1 writes
    /// barely more than the default in less time. From 64 KiB are whole histories (a new device
    /// catching up, the editing traces), where 9 is a little smaller than the default and the
    /// time matters less.
    static func compressionLevel(forLength length: Int) -> Int32 { length < 1 << 16 ? 1 : 9 }
    /// The length of the SHA-256 that ends every bundle.
    package static let checksumLength = 32

    /// The largest bundle a reader takes, in bytes (16 MiB): an imported file, a file read from
    /// a sync folder (larger files must be skipped unread), a relay request or answer. See
    /// "Limits" in Docs/BundleFormat.md.
    public static let maxBytes = 16 << 20
    /// The largest change encoding a bundle's body may hold once inflated (32 MiB).
    public static let maxBodyBytes = 32 << 20
    /// The largest change encoding a writer puts in one bundle (8 MiB), so that one author's part
    /// of it (a relay record, a sealed unit) fits in a relay's answer beside the space's version
    /// vector: a relay refuses a larger record, which no reader could ever be sent.
    public static let maxRecordBytes = 8 << 20
    /// What the change encoding of one bundle may hold (changes, operations, characters...).
    public static let changeLimits = ChangeCodec.Limits.bundle
    /// Magic, version, flags, sender.
    static let fixedHeaderLength = 8 + 1 + 1 + 16

    /// The number of operations (sequence numbers) the bundle carries (at most `UInt64.max`).
    public var operationCount: UInt64 {
        isSealed ? UInt64.saturatingSum(sealedUnits.lazy.map { $0.endSeq - $0.startSeq + 1 }) : UInt64.saturatingSum(changes.lazy.map(\.seqCount))
    }

    /// The bundle's bytes.
    public func encoded() -> [UInt8] {
        var encoder = ChangeCodec.Encoder()
        return encoded(using: &encoder)
    }

    /// The bundle's bytes, with the changes encoded by `encoder` (a writer of many bundles keeps
    /// one: see `ChangeCodec.Encoder`).
    public func encoded(using encoder: inout ChangeCodec.Encoder) -> [UInt8] {
        var writer = BinaryWriter()
        writer.raw(SyncBundle.magic)
        if isSealed {
            // Version 4: the units as they are (sealed and signed by their authors), no body.
            writer.byte(SyncBundle.sealedFormatVersion)
            writer.byte(0)
            writer.raw(sender.raw.bytes)
            writer.versionVector(senderVersion)
            writer.varint(UInt64(sealedUnits.count))
            for unit in sealedUnits {
                writer.varint(UInt64(unit.bytes.count))
                writer.raw(unit.bytes)
            }
            var bytes = writer.bytes
            bytes.append(contentsOf: SyncBundle.checksum(bytes[...]))
            return bytes
        }
        let (flags, body) = SyncBundle.packBody(encoder.encode(changes))
        writer.byte(SyncBundle.formatVersion)
        writer.byte(flags)
        writer.raw(sender.raw.bytes)
        writer.versionVector(senderVersion)
        writer.varint(UInt64(body.count))
        writer.raw(body)
        var bytes = writer.bytes
        bytes.append(contentsOf: SyncBundle.checksum(bytes[...]))
        return bytes
    }

    /// Reads a bundle, checking everything before returning any of it.
    ///
    /// - Complexity: linear in the bytes, within the limits (`maxBytes`, `maxBodyBytes`,
    ///   `changeLimits`) that bound its memory.
    public static func decode(_ bytes: [UInt8]) throws -> SyncBundle {
        var (header, flags, body) = try checkedParts(bytes)
        if header.isSealed { return try sealedBundle(header, &body) }
        do {
            var reader: BinaryReader
            if flags & deflatedFlag != 0 {
                reader = BinaryReader(try inflate(&body))
            } else {
                reader = body
            }
            if header.formatVersion == recordsFormatVersion {
                return SyncBundle(sender: header.sender, senderVersion: header.senderVersion, changes: try recordChanges(&reader))
            }
            let changes = try ChangeCodec.decode(from: &reader, limits: changeLimits)
            guard reader.isAtEnd else { throw CRDTError(.malformedEncoding, "\(reader.remaining) unexpected bytes after the changes") }
            return SyncBundle(sender: header.sender, senderVersion: header.senderVersion, changes: changes)
        } catch let error as CRDTError {
            throw SyncError(error.code == .limitExceeded ? .tooLarge : .malformed,
                            error.code == .limitExceeded ? "bundle too large: \(error.message)" : "malformed bundle: \(error.message)")
        }
    }

    /// Who wrote a bundle and what it had: a bundle's header.
    public struct Header: Hashable, Sendable {
        /// The replica that wrote the bundle.
        public var sender: ReplicaID
        /// What the sender had applied when it wrote the bundle.
        public var senderVersion: VersionVector
        /// Whether the bundle is sealed (format version 4).
        public var isSealed = false
        /// The format version byte (1 to 5).
        public var formatVersion: UInt8 = SyncBundle.formatVersion
    }

    /// The units of a sealed bundle, parsed (their routing headers) but not opened.
    private static func sealedBundle(_ header: Header, _ reader: inout BinaryReader) throws -> SyncBundle {
        do {
            let count = try reader.count(max: min(reader.remaining, changeLimits.maxChanges), "the unit count")
            var units: [SealedUnit] = []
            units.reserveCapacity(count)
            for _ in 0 ..< count {
                let length = try reader.count(max: reader.remaining, "a unit's length")
                units.append(try SealedUnit(parsing: Array(try reader.raw(length))))
            }
            guard reader.isAtEnd else { throw SyncError(.malformed, "malformed bundle: \(reader.remaining) unexpected bytes after the units") }
            return SyncBundle(sender: header.sender, senderVersion: header.senderVersion, sealed: units)
        } catch let error as CRDTError {
            throw SyncError(.malformed, "malformed bundle: \(error.message)")
        }
    }

    /// Reads only a bundle's header, after the same checks of the whole bundle as `decode` (the
    /// magic, the version, the checksum over every byte, the lengths), without inflating or
    /// decoding its changes: what a folder reader needs from a writer's newest file to learn what
    /// the writer has.
    public static func decodeHeader(_ bytes: [UInt8]) throws -> Header {
        try checkedParts(bytes).header
    }

    /// The checks every read makes before it hands anything out, and the parts they delimit
    /// (the body as a reader over `bytes`, not a copy).
    static func checkedParts(_ bytes: [UInt8]) throws -> (header: Header, flags: UInt8, body: BinaryReader) {
        guard bytes.count >= magic.count, bytes[0 ..< magic.count].elementsEqual(magic) else {
            throw SyncError(.notABundle, bytes.isEmpty ? "not a crdt-sync bundle (it is empty)" : "not a crdt-sync bundle (wrong magic bytes)")
        }
        guard bytes.count > magic.count else { throw SyncError(.truncated, "truncated bundle: no format version") }
        let version = bytes[magic.count]
        guard (1 ... recordsFormatVersion).contains(version) else {
            throw SyncError(.unsupportedVersion, "bundle format version \(version) is not supported (this build reads versions 1 to \(recordsFormatVersion)); upgrade crdt-sync to read it")
        }
        guard bytes.count <= maxBytes else {
            throw SyncError(.tooLarge, "the bundle is \(bytes.count) bytes, more than the \(maxBytes) a reader takes")
        }
        guard bytes.count >= fixedHeaderLength + checksumLength else {
            throw SyncError(.truncated, "truncated bundle: \(bytes.count) bytes is shorter than the smallest bundle")
        }
        let contentEnd = bytes.count - checksumLength
        guard SyncBundle.checksum(bytes[0 ..< contentEnd]).elementsEqual(bytes[contentEnd...]) else {
            throw SyncError(.checksumMismatch, "checksum mismatch: the bundle is damaged or incomplete (\(bytes.count) bytes)")
        }
        do {
            var reader = BinaryReader(bytes, range: magic.count + 1 ..< contentEnd)
            let flags = try reader.byte()
            let knownFlags = version == 1 || version == sealedFormatVersion ? 0 : deflatedFlag
            guard flags & ~knownFlags == 0 else { throw SyncError(.malformed, "unknown flags \(flags) in a version \(version) bundle") }
            let sender = ReplicaID(Identifier128(bytes: try reader.raw(16))!)
            let senderVersion = try reader.versionVector(maxEntries: changeLimits.maxReplicas, maxSeq: Change.maxSeq)
            if version == sealedFormatVersion {
                return (Header(sender: sender, senderVersion: senderVersion, isSealed: true, formatVersion: version), flags, reader)
            }
            let bodyLength = try reader.count(max: reader.remaining, "the body length")
            guard bodyLength == reader.remaining else {
                throw SyncError(.malformed, "the body length says \(bodyLength) bytes but \(reader.remaining) follow")
            }
            return (Header(sender: sender, senderVersion: senderVersion, formatVersion: version), flags, reader)
        } catch let error as CRDTError {
            throw SyncError(.malformed, "malformed bundle: \(error.message)")
        }
    }

    /// The SHA-256 of a bundle's content, through swift-crypto (BoringSSL's assembly, faster than
    /// the portable implementation in NotesCRDT, which gives the same bytes).
    static func checksum(_ content: ArraySlice<UInt8>) -> Crypto.SHA256.Digest {
        content.withUnsafeBytes { Crypto.SHA256.hash(data: $0) }
    }

    /// The flags and body bytes for a change encoding: compressed (length, then raw DEFLATE) when
    /// that is smaller, as it is otherwise.
    package static func packBody(_ encoding: [UInt8]) -> (flags: UInt8, body: [UInt8]) {
        guard encoding.count >= compressionThreshold else { return (0, encoding) }
        var packed = BinaryWriter()
        packed.varint(UInt64(encoding.count))
        packed.raw(Deflate.compress(encoding, level: compressionLevel(forLength: encoding.count)))
        return packed.bytes.count < encoding.count ? (deflatedFlag, packed.bytes) : (0, encoding)
    }

    /// The change encoding inside a body written by `packBody`.
    package static func unpackBody(flags: UInt8, _ body: [UInt8]) throws -> [UInt8] {
        guard flags & deflatedFlag != 0 else { return body }
        var reader = BinaryReader(body)
        do {
            return try inflate(&reader)
        } catch let error as CRDTError {
            throw SyncError(.malformed, "malformed bundle: \(error.message)")
        }
    }

    /// Inflates a compressed body (its declared length, then raw DEFLATE), within `maxBodyBytes`.
    static func inflate(_ body: inout BinaryReader) throws -> [UInt8] {
        let length = try body.varint()
        guard length <= UInt64(maxBodyBytes) else {
            throw SyncError(.tooLarge, "bundle too large: the body declares \(length) bytes once inflated, more than the \(maxBodyBytes) a reader takes")
        }
        // DEFLATE expands at most 1032 to 1, so a larger declared length is a lie.
        guard length <= UInt64(body.remaining) * 1032 else {
            throw SyncError(.malformed, "malformed bundle: the body declares \(length) bytes, more than \(body.remaining) compressed bytes can hold")
        }
        do {
            return try Deflate.decompress(try body.raw(body.remaining), length: Int(length))
        } catch let failure as Deflate.Failure {
            throw SyncError(.malformed, "malformed bundle: \(failure.message)")
        }
    }
}

extension SyncBundle {
    /// Per author, the last seq the bundle's changes or sealed units reach.
    var coverage: VersionVector {
        var covered = VersionVector()
        for change in changes where change.endSeq > covered[change.replica] { covered[change.replica] = change.endSeq }
        for unit in sealedUnits where unit.endSeq > covered[unit.author] { covered[unit.author] = unit.endSeq }
        return covered
    }
}

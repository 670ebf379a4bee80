import Crypto
import NotesCRDT
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The time spent sealing, signing, verifying and opening units in this process (the simulator's
/// side-by-side measurement of what encryption costs a sync; Docs/Performance.md).
package enum SealingTime {
    /// Nanoseconds sealing and signing, over every thread.
    package static let sealing = Atomic<UInt64>(0)
    /// Nanoseconds checking introductions and signatures (devices, folder readers, relays).
    package static let verifying = Atomic<UInt64>(0)
    /// Nanoseconds deriving unit keys and decrypting.
    package static let decrypting = Atomic<UInt64>(0)
    /// All three.
    package static var nanoseconds: UInt64 {
        sealing.load(ordering: .relaxed) + verifying.load(ordering: .relaxed) + decrypting.load(ordering: .relaxed)
    }

    /// The process's CPU time in nanoseconds: what the measurement counts (wall time would count
    /// the other processes of a busy machine too).
    package static func cpuNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    /// Runs `body`, adding the CPU time it took to `counter`.
    @inline(__always)
    static func measure<T>(_ counter: borrowing Atomic<UInt64>, _ body: () throws -> T) rethrows -> T {
        let start = cpuNanoseconds()
        defer { counter.add(cpuNanoseconds() &- start, ordering: .relaxed) }
        return try body()
    }
}

/// One author's changes over a seq range, encrypted under the space key and signed by the
/// author: what an encrypted space exchanges, stores and forwards as it is.
///
/// Its header (author, seq range, key id, salt, the author's public key and its introduction) is
/// readable without a key, so a relay or a folder routes and pages units as it does changes; the
/// header is the associated data of the encryption and is signed with the rest, so none of it can
/// be changed. Docs/BundleFormat.md ("Sealed bundles") has the layout byte by byte.
public struct SealedUnit: Sendable, Hashable {
    /// The unit's bytes, exactly as its author wrote them.
    public let bytes: [UInt8]
    /// The author of the changes inside.
    public let author: ReplicaID
    /// The first seq the changes cover.
    public let startSeq: UInt64
    /// The last seq they cover.
    public let endSeq: UInt64
    /// The id of the space key it was sealed under.
    public let keyID: [UInt8]
    /// The author's Ed25519 public key.
    public let publicKey: [UInt8]
    let salt: [UInt8]
    let introduction: [UInt8]
    /// Where the header (the associated data) ends, the ciphertext and tag, and the signature.
    let headerEnd: Int
    let sealedBox: Range<Int>

    /// The unit format's version byte.
    public static let unitVersion: UInt8 = 1
    static let signatureLength = 64
    static let tagLength = 16
    /// What an author signs: this label, then the unit's bytes before the signature.
    static let signatureLabel = Array("crdt-sync sealed unit v1\u{0}".utf8)

    /// Reads a unit's header and framing, without any key.
    ///
    /// - Throws: `SyncError` `.malformed` when the framing is wrong.
    public init(parsing bytes: [UInt8]) throws {
        do {
            var reader = BinaryReader(bytes)
            let version = try reader.byte()
            guard version == SealedUnit.unitVersion else {
                throw SyncError(.malformed, "malformed bundle: a sealed unit of version \(version) (this build reads version 1)")
            }
            author = ReplicaID(Identifier128(bytes: try reader.raw(16))!)
            startSeq = try reader.varint()
            endSeq = try reader.varint()
            guard startSeq >= 1, startSeq <= endSeq, endSeq <= Change.maxSeq else {
                throw SyncError(.malformed, "malformed bundle: a sealed unit of \(author) covers seqs \(startSeq)-\(endSeq)")
            }
            keyID = Array(try reader.raw(8))
            salt = Array(try reader.raw(32))
            publicKey = Array(try reader.raw(32))
            introduction = Array(try reader.raw(32))
            headerEnd = reader.offset
            let length = try reader.count(max: reader.remaining, "a sealed unit's ciphertext length")
            guard length >= SealedUnit.tagLength + 1 else {
                throw SyncError(.malformed, "malformed bundle: a sealed unit of \(author) has a ciphertext of \(length) bytes")
            }
            let start = reader.offset
            _ = try reader.raw(length)
            sealedBox = start ..< start + length
            _ = try reader.raw(SealedUnit.signatureLength)
            guard reader.isAtEnd else {
                throw SyncError(.malformed, "malformed bundle: \(reader.remaining) unexpected bytes after a sealed unit's signature")
            }
        } catch let error as CRDTError {
            throw SyncError(.truncated, "malformed bundle: a sealed unit is cut short (\(error.message))")
        }
        self.bytes = bytes
    }

    /// The signature (the unit's last 64 bytes).
    var signature: ArraySlice<UInt8> { bytes[(bytes.count - SealedUnit.signatureLength)...] }

    /// `author@start-end`, for messages.
    public var label: String { "\(author)@\(startSeq)-\(endSeq)" }

    /// What the author's id says of the signing key, checked without any key: nil when the id is
    /// made from the unit's key, or is an older id (then the key first introduced for it holds);
    /// a reason when the id is made from a signing key, but not this one (a forgery).
    public var authorKeyProblem: String? {
        guard SigningIdentity.isSelfCertified(author), SigningIdentity.replicaID(for: publicKey) != author else { return nil }
        return "forged: \(label) is signed with a key that \(author) is not made from (someone writing in its name)"
    }

    /// Whether the signature verifies with the public key in the header: what a relay or a
    /// folder reader checks without the space key (it proves the unit is whole and that its
    /// signer holds that key, not that the key is its author's: that is `SpaceSealer.verify`).
    public var hasValidSignature: Bool { SealingTime.measure(SealingTime.verifying) { checkSignature() } }

    private func checkSignature() -> Bool {
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: publicKey) else { return false }
        return key.isValidSignature(signature, for: SealedUnit.signatureLabel + bytes[..<(bytes.count - SealedUnit.signatureLength)])
    }
}

/// A unit's bytes as a set member: hashed by its signature (64 bytes, in one call), equal only
/// when every byte is (hashing a unit's kilobytes one byte at a time showed in profiles).
package struct UnitBytes: Hashable, Sendable {
    package let bytes: [UInt8]

    package init(_ bytes: [UInt8]) { self.bytes = bytes }

    package func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: $0.suffix(64))) }
    }

    package static func == (a: UnitBytes, b: UnitBytes) -> Bool { a.bytes == b.bytes }
}

/// Units whose signatures a replica has verified, by their exact bytes (at most `capacity`): a
/// unit checked by a folder reader and then opened, or read twice in one sync, is verified once.
/// Only the signature is remembered (a function of the bytes alone); every other check is made
/// again each time.
public final class VerifiedUnits: Sendable {
    private let units = Mutex(Set<UnitBytes>())
    private let capacity: Int

    /// An empty memory of at most `capacity` units.
    public init(capacity: Int = 4096) { self.capacity = capacity }

    func contains(_ bytes: [UInt8]) -> Bool { units.withLock { $0.contains(UnitBytes(bytes)) } }

    func insert(_ bytes: [UInt8]) {
        units.withLock { set in
            if set.count >= capacity { set.removeAll(keepingCapacity: true) }
            set.insert(UnitBytes(bytes))
        }
    }
}

/// Seals and opens units with a space key, and signs as one replica: what an encrypted space's
/// replica holds.
public struct SpaceSealer: Sendable {
    /// The space key.
    public let key: SpaceKey
    /// This replica's signing key.
    public let signer: SigningIdentity
    private let introductionKey: SymmetricKey
    private let keyID: [UInt8]
    private let verified: VerifiedUnits?

    /// A sealer for `key` that signs with `signer`, remembering verified signatures in `verified`.
    public init(key: SpaceKey, signer: SigningIdentity, verified: VerifiedUnits? = nil) {
        self.key = key
        self.signer = signer
        introductionKey = key.derived("crdt-sync introduction v1")
        keyID = key.keyID
        self.verified = verified
    }

    /// The introduction of `publicKey` as `author`'s: an HMAC-SHA256 under a key derived from the
    /// space key, so only a holder of the space key can make one.
    public func introduction(author: ReplicaID, publicKey: [UInt8]) -> [UInt8] {
        var message = Array("crdt-sync introduction v1\u{0}".utf8)
        message += author.raw.bytes
        message += publicKey
        return Array(HMAC<Crypto.SHA256>.authenticationCode(for: message, using: introductionKey))
    }

    /// Seals `changes` (all of `author`, a gap-free seq range) as one unit, signed by this replica.
    ///
    /// The payload is sealed with ChaCha20-Poly1305 under a key of its own, derived with HKDF from
    /// the space key and 32 random bytes carried in the header, so no (key, nonce) pair repeats
    /// even when two copies of a database seal the same seqs; the nonce is then all zeros.
    public func seal(author: ReplicaID, changes: [Change], encoder: inout ChangeCodec.Encoder) throws -> SealedUnit {
        let (flags, body) = SyncBundle.packBody(encoder.encode(changes))
        return try SealingTime.measure(SealingTime.sealing) { try seal(author: author, changes: changes, flags: flags, body: body) }
    }

    private func seal(author: ReplicaID, changes: [Change], flags: UInt8, body: [UInt8]) throws -> SealedUnit {
        precondition(!changes.isEmpty && changes.allSatisfy { $0.replica == author })
        let startSeq = changes.map(\.startSeq).min()!
        let endSeq = changes.map(\.endSeq).max()!
        let salt = SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
        let publicKey = signer.publicKey
        var writer = BinaryWriter()
        writer.byte(SealedUnit.unitVersion)
        writer.raw(author.raw.bytes)
        writer.varint(startSeq)
        writer.varint(endSeq)
        writer.raw(keyID)
        writer.raw(salt)
        writer.raw(publicKey)
        writer.raw(introduction(author: author, publicKey: publicKey))
        let header = writer.bytes
        let box = try ChaChaPoly.seal([flags] + body, using: key.derived("crdt-sync unit key v1", salt: salt),
                                      nonce: try ChaChaPoly.Nonce(data: [UInt8](repeating: 0, count: 12)), authenticating: header)
        writer.varint(UInt64(box.ciphertext.count + SealedUnit.tagLength))
        writer.raw(box.ciphertext)
        writer.raw(box.tag)
        let signature = try signer.privateKey.signature(for: SealedUnit.signatureLabel + writer.bytes)
        writer.raw(signature)
        // Signed here: a folder reader that meets it again (our own file) need not verify it.
        verified?.insert(writer.bytes)
        return try SealedUnit(parsing: writer.bytes)
    }

    /// Whether a unit was sealed under this space key (else `open` throws `.wrongKey`).
    public func isOurs(_ unit: SealedUnit) -> Bool { unit.keyID == keyID }

    /// Opens a unit: checks its key id, its introduction, that its author's key is `knownKey`
    /// when one is known, its signature and its ciphertext, then decodes its changes and checks
    /// they are exactly its author's, over its seq range without a gap.
    ///
    /// - Throws: `SyncError` `.wrongKey` (another space key), `.forged` (anything that does not
    ///   verify), `.malformed` or `.tooLarge` (what is inside does not decode within the limits).
    public func open(_ unit: SealedUnit, knownKey: [UInt8]?) throws -> [Change] {
        guard isOurs(unit) else {
            throw SyncError(.wrongKey, "this space is encrypted with a different key: \(unit.label) is sealed under key \(hex(unit.keyID)), this replica's is \(hex(keyID))")
        }
        try verify(unit, knownKey: knownKey)
        let payload = try SealingTime.measure(SealingTime.decrypting) { try decrypt(unit) }
        return try decode(payload, of: unit)
    }

    /// The checks of `open` that need no decryption: the introduction (under the space key), the
    /// author's key as known, the signature. A folder reader makes them to distrust a file.
    public func verify(_ unit: SealedUnit, knownKey: [UInt8]?) throws {
        try SealingTime.measure(SealingTime.verifying) { try verifyUnmeasured(unit, knownKey: knownKey) }
    }

    private func verifyUnmeasured(_ unit: SealedUnit, knownKey: [UInt8]?) throws {
        guard constantTimeEqual(introduction(author: unit.author, publicKey: unit.publicKey), unit.introduction) else {
            throw SyncError(.forged, "forged: \(unit.label) introduces a signing key that was not introduced with the space key")
        }
        if let problem = unit.authorKeyProblem { throw SyncError(.forged, problem) }
        if !SigningIdentity.isSelfCertified(unit.author), let knownKey, knownKey != unit.publicKey {
            throw SyncError(.forged, "forged: \(unit.label) is signed with a second key for \(unit.author) (another key was introduced for it first)")
        }
        if verified?.contains(unit.bytes) == true { return }
        let signed = SealedUnit.signatureLabel + unit.bytes[..<(unit.bytes.count - SealedUnit.signatureLength)]
        guard let publicKey = try? Curve25519.Signing.PublicKey(rawRepresentation: unit.publicKey),
              publicKey.isValidSignature(unit.signature, for: signed) else {
            throw SyncError(.forged, "forged: the signature of \(unit.label) does not verify (the unit was altered, or not signed by its author)")
        }
        verified?.insert(unit.bytes)
    }

    /// Decrypts a verified unit.
    private func decrypt(_ unit: SealedUnit) throws -> [UInt8] {
        let payload: [UInt8]
        do {
            let ciphertext = unit.bytes[unit.sealedBox.lowerBound ..< unit.sealedBox.upperBound - SealedUnit.tagLength]
            let tag = unit.bytes[(unit.sealedBox.upperBound - SealedUnit.tagLength) ..< unit.sealedBox.upperBound]
            let box = try ChaChaPoly.SealedBox(nonce: try ChaChaPoly.Nonce(data: [UInt8](repeating: 0, count: 12)),
                                               ciphertext: ciphertext, tag: tag)
            payload = Array(try ChaChaPoly.open(box, using: key.derived("crdt-sync unit key v1", salt: unit.salt),
                                                authenticating: unit.bytes[..<unit.headerEnd]))
        } catch {
            throw SyncError(.forged, "forged: the ciphertext of \(unit.label) does not authenticate (it was altered)")
        }
        return payload
    }

    /// Decodes a decrypted unit's changes, checked against its header.
    private func decode(_ payload: [UInt8], of unit: SealedUnit) throws -> [Change] {
        let changes: [Change]
        do {
            guard let flags = payload.first, flags & ~SyncBundle.deflatedFlag == 0 else {
                throw SyncError(.malformed, "malformed bundle: \(unit.label) has unknown flags inside")
            }
            var reader = BinaryReader(try SyncBundle.unpackBody(flags: flags, Array(payload.dropFirst())))
            changes = try ChangeCodec.decode(from: &reader, limits: SyncBundle.changeLimits)
            guard reader.isAtEnd else { throw SyncError(.malformed, "malformed bundle: bytes after the changes of \(unit.label)") }
        } catch let error as CRDTError {
            throw SyncError(error.code == .limitExceeded ? .tooLarge : .malformed, "\(unit.label): \(error.message)")
        }
        // The header is what relays and folders route by: the inside must be exactly that.
        var covered = unit.startSeq - 1
        for change in changes.sorted(by: { $0.startSeq < $1.startSeq }) {
            guard change.replica == unit.author else {
                throw SyncError(.forged, "forged: \(unit.label) holds a change of \(change.replica)")
            }
            guard change.startSeq <= covered + 1 else { break }
            covered = max(covered, change.endSeq)
        }
        guard !changes.isEmpty, changes.map(\.startSeq).min() == unit.startSeq, covered == unit.endSeq,
              changes.map(\.endSeq).max() == unit.endSeq else {
            throw SyncError(.forged, "forged: \(unit.label) holds other seqs than its header says")
        }
        return changes
    }
}

private func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var difference: UInt8 = 0
    for i in a.indices { difference |= a[i] ^ b[i] }
    return difference == 0
}

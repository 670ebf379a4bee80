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
    /// Ed25519 signatures checked, and units taken on a recipient tag instead (the breakdown's counts).
    package static let signatureChecks = Atomic<UInt64>(0)
    package static let tagChecks = Atomic<UInt64>(0)
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
/// be changed. A version 2 unit also carries its author's X25519 agreement key in the header and,
/// after the signature, a short tag per recipient that a recipient checks instead of the signature.
/// Docs/BundleFormat.md ("Sealed bundles") has the layout byte by byte.
public struct SealedUnit: Sendable, Hashable {
    /// A recipient's tag: the first 8 bytes of its agreement key, and 16 bytes of HMAC-SHA256.
    struct RecipientTag: Sendable, Hashable {
        let recipient: [UInt8]
        let tag: [UInt8]
    }

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
    /// The unit's version: 1 (signature only) or 2 (agreement key and recipient tags).
    public let version: UInt8
    /// The author's X25519 agreement public key (version 2), signed with the rest of the header.
    public let agreementKey: [UInt8]?
    let keyIDOffset: Int
    let salt: [UInt8]
    let introduction: [UInt8]
    /// Where the header (the associated data) ends, the ciphertext and tag, and the signature.
    let headerEnd: Int
    let sealedBox: Range<Int>
    let signatureStart: Int
    /// The recipient tags after the signature (version 2; not signed: they are made over it).
    let tags: [RecipientTag]

    /// The version this build writes.
    public static let unitVersion: UInt8 = 2
    static let signatureLength = 64
    static let tagLength = 16
    /// A recipient's tag: its first bytes of agreement key, and of the HMAC.
    static let recipientHintLength = 8
    static let recipientTagLength = 16
    /// At most this many recipient tags in a unit (a space of more members falls back to signatures).
    static let maxRecipientTags = 64
    /// What an author signs: this label, then the unit's bytes before the signature.
    static func signatureLabel(_ version: UInt8) -> [UInt8] { Array("crdt-sync sealed unit v\(version)\u{0}".utf8) }

    /// Reads a unit's header and framing, without any key.
    ///
    /// - Throws: `SyncError` `.malformed` when the framing is wrong.
    public init(parsing bytes: [UInt8]) throws {
        do {
            var reader = BinaryReader(bytes)
            let version = try reader.byte()
            guard version == 1 || version == 2 else {
                throw SyncError(.malformed, "malformed bundle: a sealed unit of version \(version) (this build reads versions 1 and 2)")
            }
            self.version = version
            author = ReplicaID(Identifier128(bytes: try reader.raw(16))!)
            startSeq = try reader.varint()
            endSeq = try reader.varint()
            guard startSeq >= 1, startSeq <= endSeq, endSeq <= Change.maxSeq else {
                throw SyncError(.malformed, "malformed bundle: a sealed unit of \(author) covers seqs \(startSeq)-\(endSeq)")
            }
            keyIDOffset = reader.offset
            keyID = Array(try reader.raw(8))
            salt = Array(try reader.raw(32))
            publicKey = Array(try reader.raw(32))
            agreementKey = version >= 2 ? Array(try reader.raw(32)) : nil
            introduction = Array(try reader.raw(32))
            headerEnd = reader.offset
            let length = try reader.count(max: reader.remaining, "a sealed unit's ciphertext length")
            guard length >= SealedUnit.tagLength + 1 else {
                throw SyncError(.malformed, "malformed bundle: a sealed unit of \(author) has a ciphertext of \(length) bytes")
            }
            let start = reader.offset
            _ = try reader.raw(length)
            sealedBox = start ..< start + length
            signatureStart = reader.offset
            _ = try reader.raw(SealedUnit.signatureLength)
            var tags: [RecipientTag] = []
            if version >= 2 {
                let count = try reader.count(max: SealedUnit.maxRecipientTags, "a sealed unit's recipient tags")
                for _ in 0 ..< count {
                    tags.append(RecipientTag(recipient: Array(try reader.raw(SealedUnit.recipientHintLength)),
                                             tag: Array(try reader.raw(SealedUnit.recipientTagLength))))
                }
            }
            self.tags = tags
            guard reader.isAtEnd else {
                throw SyncError(.malformed, "malformed bundle: \(reader.remaining) unexpected bytes after a sealed unit's signature and tags")
            }
        } catch let error as CRDTError {
            // Only running out of bytes is a cut; a count past its limit is a lie about the unit.
            guard error.message.hasPrefix("truncated data") else {
                throw SyncError(.malformed, "malformed bundle: a sealed unit is malformed (\(error.message))")
            }
            throw SyncError(.truncated, "malformed bundle: a sealed unit is cut short (\(error.message))")
        }
        self.bytes = bytes
    }

    /// The signature.
    var signature: ArraySlice<UInt8> { bytes[signatureStart ..< signatureStart + SealedUnit.signatureLength] }
    /// What the signature is over (after its label): every byte before it.
    var signed: ArraySlice<UInt8> { bytes[..<signatureStart] }
    /// What recipient tags are over (after their label and the recipient's key): the signed bytes and the signature.
    var tagged: ArraySlice<UInt8> { bytes[..<(signatureStart + SealedUnit.signatureLength)] }

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

    func checkSignature() -> Bool {
        SealingTime.signatureChecks.add(1, ordering: .relaxed)
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: publicKey) else { return false }
        return key.isValidSignature(signature, for: SealedUnit.signatureLabel(version) + signed)
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

    /// Units taken on their tag for this replica (kept apart: their signature was not checked).
    private let tagged = Mutex(Set<UnitBytes>())

    func containsTagged(_ bytes: [UInt8]) -> Bool { tagged.withLock { $0.contains(UnitBytes(bytes)) } }

    func insertTagged(_ bytes: [UInt8]) {
        tagged.withLock { set in
            if set.count >= capacity { set.removeAll(keepingCapacity: true) }
            set.insert(UnitBytes(bytes))
        }
    }

    func insert(_ bytes: [UInt8]) {
        units.withLock { set in
            if set.count >= capacity { set.removeAll(keepingCapacity: true) }
            set.insert(UnitBytes(bytes))
        }
    }
}

/// How a unit's authorship was checked.
public enum UnitCheck: Sendable, Hashable {
    /// Its Ed25519 signature verified (now, or earlier in this process).
    case signature
    /// Its tag for this replica verified, under the pairwise key with the author's agreement key
    /// as first learnt here; the signature was not checked.
    case tag
}

/// Pairwise keys with other members' agreement keys, made once per peer (an X25519 and an HKDF).
final class PairKeys: Sendable {
    private let keys = Mutex([[UInt8]: SymmetricKey]())

    func key(for peer: [UInt8], make: () throws -> SymmetricKey) rethrows -> SymmetricKey {
        if let known = keys.withLock({ $0[peer] }) { return known }
        let made = try make()
        keys.withLock { $0[peer] = made }
        return made
    }
}

/// Seals and opens units with a space key, and signs as one replica: what an encrypted space's
/// replica holds.
public struct SpaceSealer: Sendable {
    /// The space key.
    public let key: SpaceKey
    /// This replica's signing key.
    public let signer: SigningIdentity
    /// This replica's X25519 agreement key, derived from its signing key (so nothing more is stored).
    let agreement: Curve25519.KeyAgreement.PrivateKey
    /// Its public half, which this replica's version 2 units carry.
    public let agreementPublicKey: [UInt8]
    private let introductionKey: SymmetricKey
    private let pairSalt: [UInt8]
    private let keyID: [UInt8]
    private let verified: VerifiedUnits?
    private let pairKeys = PairKeys()

    /// A sealer for `key` that signs with `signer`, remembering verified signatures in `verified`.
    public init(key: SpaceKey, signer: SigningIdentity, verified: VerifiedUnits? = nil) {
        self.key = key
        self.signer = signer
        let seed = HKDF<Crypto.SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: signer.rawRepresentation),
                                                 info: Array("crdt-sync agreement key v2".utf8), outputByteCount: 32)
        agreement = try! Curve25519.KeyAgreement.PrivateKey(rawRepresentation: seed.withUnsafeBytes { Array($0) })
        agreementPublicKey = Array(agreement.publicKey.rawRepresentation)
        introductionKey = key.derived("crdt-sync introduction v1")
        pairSalt = key.derived("crdt-sync pair key salt v2").withUnsafeBytes { Array($0) }
        keyID = key.keyID
        self.verified = verified
    }

    /// The introduction of `publicKey` (and, in a version 2 unit, `agreementKey`) as `author`'s:
    /// an HMAC-SHA256 under a key derived from the space key, so only a holder of the space key
    /// can make one.
    public func introduction(author: ReplicaID, publicKey: [UInt8], agreementKey: [UInt8]? = nil) -> [UInt8] {
        var message = Array((agreementKey == nil ? "crdt-sync introduction v1\u{0}" : "crdt-sync introduction v2\u{0}").utf8)
        message += author.raw.bytes
        message += publicKey
        if let agreementKey { message += agreementKey }
        return Array(HMAC<Crypto.SHA256>.authenticationCode(for: message, using: introductionKey))
    }

    /// The key this replica shares with the holder of agreement key `peer`: HKDF-SHA256 of their
    /// X25519 secret, salted with a key of the space, over both public keys in increasing order.
    func pairKey(with peer: [UInt8]) throws -> SymmetricKey {
        try pairKeys.key(for: peer) {
            let secret = try agreement.sharedSecretFromKeyAgreement(with: Curve25519.KeyAgreement.PublicKey(rawRepresentation: peer))
            let ends = [agreementPublicKey, peer].sorted { $0.lexicographicallyPrecedes($1) }
            return secret.hkdfDerivedSymmetricKey(using: Crypto.SHA256.self, salt: pairSalt,
                                                  sharedInfo: Array("crdt-sync pair key v2\u{0}".utf8) + ends[0] + ends[1], outputByteCount: 32)
        }
    }

    /// The tag for the holder of agreement key `recipient`, under the pairwise key with `peer`, of
    /// the bytes whose SHA-256 is `digest` (hashed once for all of a unit's recipients).
    func recipientTag(digest: [UInt8], recipient: [UInt8], peer: [UInt8]) throws -> [UInt8] {
        var hmac = HMAC<Crypto.SHA256>(key: try pairKey(with: peer))
        hmac.update(data: SpaceSealer.tagLabel)
        hmac.update(data: recipient)
        hmac.update(data: digest)
        return Array(Array(hmac.finalize()).prefix(SealedUnit.recipientTagLength))
    }

    /// The tag of a unit's `tagged` bytes (its signed bytes and signature) for `recipient`.
    func recipientTag(_ tagged: ArraySlice<UInt8>, recipient: [UInt8], peer: [UInt8]) throws -> [UInt8] {
        try recipientTag(digest: Array(Crypto.SHA256.hash(data: tagged)), recipient: recipient, peer: peer)
    }

    static let tagLabel = Array("crdt-sync unit tag v2\u{0}".utf8)

    /// Seals `changes` (all of `author`, a gap-free seq range) as one unit, signed by this replica,
    /// with a tag for each of `recipients` (other members' agreement keys; at most 64 are tagged).
    ///
    /// The payload is sealed with ChaCha20-Poly1305 under a key of its own, derived with HKDF from
    /// the space key and 32 random bytes carried in the header, so no (key, nonce) pair repeats
    /// even when two copies of a database seal the same seqs; the nonce is then all zeros.
    public func seal(author: ReplicaID, changes: [Change], encoder: inout ChangeCodec.Encoder,
                     recipients: [[UInt8]] = []) throws -> SealedUnit {
        try seal(author: author, changes: changes, encoder: &encoder, recipients: recipients, version: SealedUnit.unitVersion)
    }

    /// `seal` in unit version 1 (no agreement key, no tags) or 2: tests of older units.
    package func seal(author: ReplicaID, changes: [Change], encoder: inout ChangeCodec.Encoder,
                      recipients: [[UInt8]], version: UInt8) throws -> SealedUnit {
        let (flags, body) = SyncBundle.packBody(encoder.encode(changes))
        return try SealingTime.measure(SealingTime.sealing) {
            try seal(author: author, changes: changes, flags: flags, body: body, recipients: recipients, version: version)
        }
    }

    /// A unit in `author`'s name whose header names another member's public keys (`publicKey`,
    /// `agreementKey`) but which this sealer signs, with no tags: what a member can make in
    /// another's name with what every member knows. For the simulator's forgers and tests; it is
    /// not taken as verified here, so this replica checks it like anyone's.
    package func forge(author: ReplicaID, changes: [Change], claimingKey publicKey: [UInt8], agreementKey: [UInt8],
                       encoder: inout ChangeCodec.Encoder) throws -> SealedUnit {
        let (flags, body) = SyncBundle.packBody(encoder.encode(changes))
        return try seal(author: author, changes: changes, flags: flags, body: body, recipients: [], version: SealedUnit.unitVersion,
                        claiming: (publicKey, agreementKey))
    }

    private func seal(author: ReplicaID, changes: [Change], flags: UInt8, body: [UInt8], recipients: [[UInt8]], version: UInt8,
                      claiming: (publicKey: [UInt8], agreementKey: [UInt8])? = nil) throws -> SealedUnit {
        precondition(!changes.isEmpty && changes.allSatisfy { $0.replica == author })
        precondition(version == 1 || version == 2)
        let startSeq = changes.map(\.startSeq).min()!
        let endSeq = changes.map(\.endSeq).max()!
        let salt = SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
        let publicKey = claiming?.publicKey ?? signer.publicKey
        let agreementKey = version >= 2 ? (claiming?.agreementKey ?? agreementPublicKey) : nil
        var writer = BinaryWriter()
        writer.byte(version)
        writer.raw(author.raw.bytes)
        writer.varint(startSeq)
        writer.varint(endSeq)
        writer.raw(keyID)
        writer.raw(salt)
        writer.raw(publicKey)
        if let agreementKey { writer.raw(agreementKey) }
        writer.raw(introduction(author: author, publicKey: publicKey, agreementKey: agreementKey))
        let header = writer.bytes
        let box = try ChaChaPoly.seal([flags] + body, using: key.derived("crdt-sync unit key v1", salt: salt),
                                      nonce: try ChaChaPoly.Nonce(data: [UInt8](repeating: 0, count: 12)), authenticating: header)
        writer.varint(UInt64(box.ciphertext.count + SealedUnit.tagLength))
        writer.raw(box.ciphertext)
        writer.raw(box.tag)
        let signature = try signer.privateKey.signature(for: SealedUnit.signatureLabel(version) + writer.bytes)
        writer.raw(signature)
        if version >= 2 {
            let digest = Array(Crypto.SHA256.hash(data: writer.bytes))
            let others = Array(Set(recipients.filter { $0 != agreementPublicKey && $0.count == 32 })).sorted { $0.lexicographicallyPrecedes($1) }
            var tags: [(hint: [UInt8], tag: [UInt8])] = []
            for recipient in others.prefix(SealedUnit.maxRecipientTags) {
                guard let tag = try? recipientTag(digest: digest, recipient: recipient, peer: recipient) else { continue }
                tags.append((Array(recipient.prefix(SealedUnit.recipientHintLength)), tag))
            }
            writer.varint(UInt64(tags.count))
            for (hint, tag) in tags {
                writer.raw(hint)
                writer.raw(tag)
            }
        }
        // Signed here: a folder reader that meets it again (our own file) need not verify it.
        if claiming == nil { verified?.insert(writer.bytes) }
        return try SealedUnit(parsing: writer.bytes)
    }

    /// Whether a unit was sealed under this space key (else `open` throws `.wrongKey`).
    public func isOurs(_ unit: SealedUnit) -> Bool { unit.keyID == keyID }

    /// Opens a unit: checks its key id, its introduction, that its author's key is `knownKey`
    /// when one is known, its authorship (its tag for this replica when `knownAgreementKey` is the
    /// author's agreement key as learnt here, else its signature) and its ciphertext, then decodes
    /// its changes and checks they are exactly its author's, over its seq range without a gap.
    ///
    /// - Throws: `SyncError` `.wrongKey` (another space key), `.forged` (anything that does not
    ///   verify), `.malformed` or `.tooLarge` (what is inside does not decode within the limits).
    public func open(_ unit: SealedUnit, knownKey: [UInt8]?, knownAgreementKey: [UInt8]? = nil) throws -> [Change] {
        try openChecked(unit, knownKey: knownKey, knownAgreementKey: knownAgreementKey).changes
    }

    /// `open`, and how the authorship was checked (a store learns an author's agreement key only
    /// from a unit whose signature verified).
    public func openChecked(_ unit: SealedUnit, knownKey: [UInt8]?, knownAgreementKey: [UInt8]?) throws -> (changes: [Change], check: UnitCheck) {
        guard isOurs(unit) else {
            throw SyncError(.wrongKey, "this space is encrypted with a different key: \(unit.label) is sealed under key \(hex(unit.keyID)), this replica's is \(hex(keyID))")
        }
        let check = try verify(unit, knownKey: knownKey, knownAgreementKey: knownAgreementKey)
        let payload = try SealingTime.measure(SealingTime.decrypting) { try decrypt(unit) }
        return (try decode(payload, of: unit), check)
    }

    /// The checks of `open` that need no decryption: the introduction (under the space key), the
    /// author's key as known, the tag for this replica or the signature. A folder reader makes
    /// them to distrust a file.
    @discardableResult
    public func verify(_ unit: SealedUnit, knownKey: [UInt8]?, knownAgreementKey: [UInt8]? = nil) throws -> UnitCheck {
        try SealingTime.measure(SealingTime.verifying) { try verifyUnmeasured(unit, knownKey: knownKey, knownAgreementKey: knownAgreementKey) }
    }

    private func verifyUnmeasured(_ unit: SealedUnit, knownKey: [UInt8]?, knownAgreementKey: [UInt8]?) throws -> UnitCheck {
        guard constantTimeEqual(introduction(author: unit.author, publicKey: unit.publicKey, agreementKey: unit.agreementKey), unit.introduction) else {
            throw SyncError(.forged, "forged: \(unit.label) introduces a signing key that was not introduced with the space key")
        }
        if let problem = unit.authorKeyProblem { throw SyncError(.forged, problem) }
        if !SigningIdentity.isSelfCertified(unit.author), let knownKey, knownKey != unit.publicKey {
            throw SyncError(.forged, "forged: \(unit.label) is signed with a second key for \(unit.author) (another key was introduced for it first)")
        }
        if verified?.contains(unit.bytes) == true { return .signature }
        // The tag for us, under the key shared with the author's agreement key as first learnt
        // here from a unit whose signature verified (never the key this unit names alone).
        var badTag = false
        // A folder reader's check, then the open: the tag is checked once (against the same key).
        if let knownAgreementKey, unit.agreementKey == knownAgreementKey, verified?.containsTagged(unit.bytes) == true { return .tag }
        if let agreementKey = unit.agreementKey, let knownAgreementKey, agreementKey == knownAgreementKey,
           let mine = unit.tags.first(where: { $0.recipient.elementsEqual(agreementPublicKey.prefix(SealedUnit.recipientHintLength)) }) {
            if let expected = try? recipientTag(unit.tagged, recipient: agreementPublicKey, peer: knownAgreementKey),
               constantTimeEqual(expected, mine.tag) {
                SealingTime.tagChecks.add(1, ordering: .relaxed)
                verified?.insertTagged(unit.bytes)
                return .tag
            }
            badTag = true
        }
        guard unit.checkSignature() else {
            let what = badTag ? "its tag for this replica does not verify, nor does the signature of \(unit.label)" : "the signature of \(unit.label) does not verify"
            throw SyncError(.forged, "forged: \(what) (the unit was altered, or not signed by its author)")
        }
        verified?.insert(unit.bytes)
        return .signature
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
            let body: [UInt8]
            do {
                body = try SyncBundle.unpackBody(flags: flags, Array(payload.dropFirst()))
            } catch let error as SyncError {
                // Named, as every other refusal of a unit is (a batch's refusals are listed together).
                throw SyncError(error.code, "\(unit.label): \(error.message)")
            }
            var reader = BinaryReader(body)
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

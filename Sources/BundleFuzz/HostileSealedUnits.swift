import Crypto
import Deflate
import NotesCRDT
import NotesSync

/// A signing identity of the fuzzer's space, made from a seed, and the keys derived from it.
public struct FuzzMember: Sendable {
    public let signer: SigningIdentity
    /// The id it writes as: the one made from its key, or an older id (`legacy`).
    public let id: ReplicaID
    let agreement: Curve25519.KeyAgreement.PrivateKey
    public let agreementKey: [UInt8]
    /// Pair keys with the receiver and the regulars, in the fuzzer's space (an X25519 each: made once).
    let pairKeys: [[UInt8]: SymmetricKey]

    /// The member of `seed`, writing as the id made from its key or as `legacy`.
    public init(seed: UInt64, legacy: ReplicaID? = nil) {
        signer = Self.signer(seed: seed)
        id = legacy ?? signer.replicaID
        agreement = Self.agreementPrivateKey(of: signer)
        agreementKey = Array(agreement.publicKey.rawRepresentation)
        var pairKeys: [[UInt8]: SymmetricKey] = [:]
        for recipient in HostileSealedUnits.standardRecipients where recipient != agreementKey {
            pairKeys[recipient] = Self.pairKey(agreement, recipient, space: HostileSealedUnits.spaceKey)
        }
        self.pairKeys = pairKeys
    }

    static func signer(seed: UInt64) -> SigningIdentity {
        var material = Array("crdt-sync fuzz member".utf8)
        for shift in stride(from: 0, to: 64, by: 8) { material.append(UInt8(truncatingIfNeeded: seed >> UInt64(shift))) }
        return SigningIdentity(deriving: material)
    }

    /// As BundleFormat.md says the agreement key is made: written here again, not taken from NotesSync.
    static func agreementPrivateKey(of signer: SigningIdentity) -> Curve25519.KeyAgreement.PrivateKey {
        let seedKey = HKDF<Crypto.SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: signer.rawRepresentation),
                                                    info: Array("crdt-sync agreement key v2".utf8), outputByteCount: 32)
        return try! Curve25519.KeyAgreement.PrivateKey(rawRepresentation: seedKey.withUnsafeBytes { Array($0) })
    }

    static func agreementKey(of signer: SigningIdentity) -> [UInt8] { Array(agreementPrivateKey(of: signer).publicKey.rawRepresentation) }

    /// The pair key of `own` and `recipient` in `space` (nil: `recipient` is no X25519 key).
    static func pairKey(_ own: Curve25519.KeyAgreement.PrivateKey, _ recipient: [UInt8], space: SpaceKey) -> SymmetricKey? {
        guard let peer = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: recipient),
              let secret = try? own.sharedSecretFromKeyAgreement(with: peer) else { return nil }
        let pairSalt = HKDF<Crypto.SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: space.bytes),
                                                     info: Array("crdt-sync pair key salt v2".utf8), outputByteCount: 32).withUnsafeBytes { Array($0) }
        let ends = [Array(own.publicKey.rawRepresentation), recipient].sorted { $0.lexicographicallyPrecedes($1) }
        return secret.hkdfDerivedSymmetricKey(using: Crypto.SHA256.self, salt: pairSalt,
                                              sharedInfo: Array("crdt-sync pair key v2\u{0}".utf8) + ends[0] + ends[1], outputByteCount: 32)
    }
}

/// A sealed unit as its parts, sealed and signed by `bytes` following BundleFormat.md ("A sealed
/// unit") with the fuzzer's own code, so that any field can be set before or after the seal.
public struct RawSealedUnit: Sendable {
    public var version: UInt8 = 2
    public var author: ReplicaID
    public var startSeq: UInt64
    public var endSeq: UInt64
    public var keyID: [UInt8]
    public var salt: [UInt8]
    public var publicKey: [UInt8]
    public var agreementKey: [UInt8]
    /// The introduction written (nil: the right one, under the space key of `space`).
    public var introduction: [UInt8]?
    /// The payload: a flags byte and a body.
    public var plaintext: [UInt8]
    /// The salt the payload is really sealed with (nil: `salt`).
    public var encryptionSalt: [UInt8]?
    /// The ciphertext length written (nil: the true one).
    public var ciphertextLength: UInt64?
    /// Bytes flipped after signing, by offset from the start (wrapped to the unit's length).
    public var flips: [Int] = []
    /// Recipients' agreement keys to tag (with `tagKey`), extra tags of unknown recipients, the count written.
    public var recipients: [[UInt8]] = []
    public var unknownTags = 0
    public var tagCount: UInt64?
    /// Flip the tags' bytes (each tag for a recipient).
    public var badTags = false
    /// Bytes after the tags.
    public var trailing: [UInt8] = []
    public var width: VarintWidth = .shortest

    /// The unit's bytes, encrypted under `space` and signed by `signer`, tagged with `tagKey`'s pair keys.
    func bytes(space: SpaceKey, signer: SigningIdentity, tagKey: Curve25519.KeyAgreement.PrivateKey, pairKeys: [[UInt8]: SymmetricKey] = [:]) -> [UInt8] {
        var w = RawWriter()
        w.width = width
        w.byte(version)
        w.raw(author.raw.bytes)
        w.varint(startSeq)
        w.varint(endSeq)
        w.raw(keyID)
        w.raw(salt)
        w.raw(publicKey)
        if version >= 2 { w.raw(agreementKey) }
        if let introduction {
            w.raw(introduction)
        } else {
            // HMAC-SHA256 under the space's introduction key (BundleFormat.md, "A sealed unit").
            let key = HKDF<Crypto.SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: space.bytes), info: Array("crdt-sync introduction v1".utf8), outputByteCount: 32)
            let message = Array("crdt-sync introduction v\(version >= 2 ? 2 : 1)\u{0}".utf8) + author.raw.bytes + publicKey + (version >= 2 ? agreementKey : [])
            w.raw(Array(HMAC<Crypto.SHA256>.authenticationCode(for: message, using: key)))
        }
        let header = w.bytes
        let unitKey = HKDF<Crypto.SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: space.bytes), salt: encryptionSalt ?? salt,
                                                    info: Array("crdt-sync unit key v1".utf8), outputByteCount: 32)
        let box = try! ChaChaPoly.seal(plaintext, using: unitKey, nonce: try! ChaChaPoly.Nonce(data: [UInt8](repeating: 0, count: 12)), authenticating: header)
        w.varint(ciphertextLength ?? UInt64(box.ciphertext.count + 16))
        w.raw(Array(box.ciphertext))
        w.raw(Array(box.tag))
        w.raw(Array(try! signer.privateKey.signature(for: Array("crdt-sync sealed unit v\(version)\u{0}".utf8) + w.bytes)))
        if version >= 2 {
            let digest = Array(Crypto.SHA256.hash(data: w.bytes))
            var tags: [[UInt8]] = []
            for recipient in recipients {
                // (Made once per member for the space's regular recipients.)
                let known = space == HostileSealedUnits.spaceKey ? pairKeys[recipient] : nil
                guard let pair = known ?? FuzzMember.pairKey(tagKey, recipient, space: space) else { continue }
                var tag = Array(HMAC<Crypto.SHA256>.authenticationCode(for: Array("crdt-sync unit tag v2\u{0}".utf8) + recipient + digest, using: pair).prefix(16))
                if badTags { tag[0] ^= 1 }
                tags.append(Array(recipient.prefix(8)) + tag)
            }
            for k in 0 ..< unknownTags { tags.append((0 ..< 24).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ k) }) }
            w.varint(tagCount ?? UInt64(tags.count))
            for tag in tags { w.raw(tag) }
        }
        w.raw(trailing)
        var bytes = w.bytes
        for flip in flips where !bytes.isEmpty { bytes[flip % bytes.count] ^= 0x01 }
        return bytes
    }
}

/// A fuzz case that is a sealed bundle (format version 4): its bytes, and what must become of its
/// units at a receiver that has seen nothing of their authors before (the case's own members).
public struct SealedCase: Sendable {
    public var bytes: [UInt8]
    /// Units (by index in the bundle) made whole by the rules: a receiver that never heard of their
    /// authors must open them.
    public var mustOpen: Set<Int> = []
    /// Units altered so that no receiver may open them (forged, another key, a lying header).
    public var mustRefuse: Set<Int> = []
    /// What was done to it (mutation number and unit), for a failure's message.
    public var mutations: [String] = []
}

/// Makes sealed bundles (format version 4) of an encrypted space the way a hostile member, a
/// hostile relay or a stranger would: plausible histories of a few members (`HostileBundles.Model`)
/// sealed with a known space key and seeded signing keys, then units with header fields at the edges
/// of their types, key ids, salts, keys and introductions altered, ciphertext lengths and recipient
/// counts that lie, tags for strangers, signatures flipped, bytes after the end, units signed by one
/// member in another's name, the same seqs sealed twice with other content, hostile change encodings
/// inside valid encryption and signature, compressed and nested payloads, bombs.
///
/// One seed gives one bundle, on every machine.
public struct HostileSealedUnits: Sendable {
    /// The space's key, the receiver (a store in the space) and the members it may hear from.
    public static let spaceKey = SpaceKey(bytes: (0 ..< 32).map { UInt8($0) &* 7 &+ 3 })!
    public static let otherKey = SpaceKey(bytes: (0 ..< 32).map { UInt8($0) &* 11 &+ 5 })!
    public static let receiverSeed: [UInt8] = Array(Crypto.SHA256.hash(data: Array("crdt-sync fuzz receiver".utf8)))
    public static let receiver = try! SigningIdentity(rawRepresentation: receiverSeed)
    /// Members every case may use (a store hears from them again and again), the last with an older id.
    static let regulars = [FuzzMember(seed: 1), FuzzMember(seed: 2),
                           FuzzMember(seed: 3, legacy: ReplicaID(Identifier128(high: 0xA000, low: 0x1E6A)))]
    static let receiverAgreementKey = FuzzMember.agreementKey(of: receiver)
    /// The agreement keys a unit is tagged for: the receiver's and the regulars'.
    static let standardRecipients = [receiverAgreementKey] + [1, 2, 3].map { FuzzMember.agreementKey(of: FuzzMember.signer(seed: $0)) }

    let values = HostileBundles()

    public init() {}

    /// The bundle for `seed`.
    public func sealedCase(seed: UInt64) -> SealedCase {
        var rng = SplitMix64(seed: seed)
        // Authors: this case's own (fresh ids, a receiver knows nothing of them), or the regulars.
        let fresh = rng.below(5) < 3
        let authors = fresh ? (0 ..< 1 + rng.below(2)).map { FuzzMember(seed: seed &+ UInt64($0) &* 0x1000_0001) }
            : [Self.regulars[rng.below(3)]] + (rng.below(2) == 0 ? [Self.regulars[rng.below(3)]] : [])
        var units: [SealedEntry] = []
        var seenAuthors: [ReplicaID] = []
        for author in authors where !seenAuthors.contains(author.id) {
            seenAuthors.append(author.id)
            var model = HostileBundles.Model(rng: &rng)
            model.replicas = [author.id]
            model.next = [1]
            // One to three units of consecutive seqs.
            for _ in 0 ..< 1 + rng.below(3) {
                let encoding = model.history(&rng)
                units.append(unit(author: author, encoding: encoding, &rng))
            }
        }
        var sealed = SealedCase(bytes: [])
        var sender = ReplicaID(Identifier128(high: 0x5EA1, low: 1))
        var vectorCount: UInt64?
        var unitCount: UInt64?
        var lengths: [Int: UInt64] = [:]
        var trailing: [UInt8] = []
        var flags: UInt8 = 0
        let mutations = rng.below(10) < 2 ? 0 : 1 + rng.below(2)
        for _ in 0 ..< mutations {
            let i = rng.below(units.count)
            let kind = rng.below(24)
            sealed.mutations.append("\(kind) on unit \(i)")
            switch kind {
            case 0:
                // Header seqs at the edges of their type, the unit signed and sealed as it is.
                let edges: [UInt64] = [0, 1, Change.maxSeq, Change.maxSeq + 1, .max, 1 << 63]
                let range = (units[i].unit.startSeq, units[i].unit.endSeq)
                if rng.below(3) == 0 {
                    units[i].unit.startSeq = units[i].unit.endSeq &+ 1
                } else if rng.below(2) == 0 {
                    units[i].unit.startSeq = edges[rng.below(edges.count)]
                } else {
                    units[i].unit.endSeq = edges[rng.below(edges.count)]
                }
                units[i].mutations += 1
                // (An edge may be where the range was: 1.)
                units[i].mustRefuse = range != (units[i].unit.startSeq, units[i].unit.endSeq)
            case 1:
                units[i].unit.startSeq = HostileBundles.edge(&rng, near: units[i].unit.startSeq)
                units[i].unit.endSeq = HostileBundles.edge(&rng, near: units[i].unit.endSeq)
                units[i].mutations += 1
            case 2:
                // Another space's key id (the right key), or the unit sealed under another key altogether.
                if rng.below(2) == 0 {
                    units[i].unit.keyID = Self.otherKey.keyID
                } else {
                    units[i].unit.keyID[rng.below(8)] ^= 0x80
                }
                units[i].mutations += 1
                units[i].mustRefuse = true
            case 3:
                // Salt, public key, agreement key or introduction changed after the signature.
                // (The key id, or the salt, public key, agreement key or introduction after it.)
                let field = [0, 8, 40, 72, 104][rng.below(5)]
                units[i].unit.flips.append(units[i].unit.keyIDOffset + field + rng.below(field == 0 ? 8 : 32))
                units[i].mutations += 1
                units[i].mustRefuse = true
            case 4:
                // A public key that is not the signer's (random bytes, or another member's), introduced rightly.
                units[i].unit.publicKey = rng.below(2) == 0 ? (0 ..< 32).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                    : Self.regulars[rng.below(3)].signer.publicKey
                units[i].mutations += 1
                if units[i].unit.publicKey != units[i].signer.signer.publicKey { units[i].mustRefuse = true }
            case 5:
                // An agreement key that is no one's, or all zeros (a low-order point), introduced and signed rightly.
                units[i].unit.agreementKey = rng.below(2) == 0 ? [UInt8](repeating: 0, count: 32) : (0 ..< 32).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                units[i].mutations += 1
            case 6:
                units[i].unit.introduction = (0 ..< 32).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                units[i].mutations += 1
                units[i].mustRefuse = true
            case 7:
                // A ciphertext length that lies: past the end, 0, 16, 17, one off.
                let length = UInt64(units[i].unit.plaintext.count + 16)
                units[i].unit.ciphertextLength = [length + 1, length - 1, 0, 16, 17, 1 << 20, .max][rng.below(7)]
                units[i].mutations += 1
                units[i].mustRefuse = true
            case 8:
                // A recipient count that lies: one off, 65, huge.
                let count = UInt64(units[i].unit.recipients.count + units[i].unit.unknownTags)
                units[i].unit.tagCount = [count + 1, count &- 1, 64, 65, 1 << 32, .max][rng.below(6)]
                units[i].mutations += 1
            case 9:
                // Tags for strangers, up to the limit or past it.
                units[i].unit.unknownTags = [1, 3, 64, 65][rng.below(4)]
                units[i].mutations += 1
            case 10:
                // The signature flipped: a receiver with the author's agreement key may take it on its tag.
                units[i].unit.flips.append(units[i].unit.signatureOffset + rng.below(64))
                units[i].mutations += 1
            case 11:
                units[i].unit.badTags = true
                units[i].mutations += 1
            case 12:
                if rng.below(2) == 0 {
                    // A byte of the ciphertext or its Poly1305 tag, changed after the signature.
                    units[i].unit.flips.append(units[i].unit.headerLength + 1 + rng.below(units[i].unit.plaintext.count + 16))
                } else {
                    // Sealed under another unit key than its salt gives, then signed whole: only the ciphertext's tag tells.
                    units[i].unit.encryptionSalt = (0 ..< 32).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                }
                units[i].mutations += 1
                units[i].mustRefuse = true
            case 13:
                units[i].unit.trailing = Array(repeating: UInt8(truncatingIfNeeded: rng.next()), count: 1 + rng.below(3))
                units[i].mutations += 1
                units[i].mustRefuse = true
            case 14:
                // In another member's name: signed (and its key introduced) by one, the author another.
                let other = rng.below(2) == 0 ? Self.regulars[rng.below(3)] : FuzzMember(seed: rng.next())
                units[i].signer = other
                units[i].unit.publicKey = other.signer.publicKey
                units[i].unit.agreementKey = other.agreementKey
                units[i].mutations += 1
                if SigningIdentity.isSelfCertified(units[i].unit.author), other.id != units[i].unit.author { units[i].mustRefuse = true }
            case 15:
                // The same seqs sealed again with other content (equivocation), both whole.
                var copy = units[i]
                var e = RawChangeEncoding()
                e.replicas = [copy.unit.author]
                e.notes = [NoteID(Identifier128(high: 0xB000, low: 1))]
                let span = copy.unit.endSeq &- copy.unit.startSeq &+ 1
                e.headers = [RawHeader(author: 0, startSeq: copy.unit.startSeq, timestamp: (1_700_000_000_000 + rng.next() % 1000) << 16, operationCount: 1)]
                e.records = [.insert(note: 0, mode: 0, origin: nil, length: span, text: Array(repeating: 0x71, count: Int(min(span, 4096))))]
                copy.unit.plaintext = [0] + e.bytes()
                copy.unit.salt = (0 ..< 32).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                // Not the author's history (nor whole, past 4,096 seqs): it may open or not.
                copy.mutations = 1
                copy.mustRefuse = false
                units.insert(copy, at: rng.below(units.count + 1))
            case 16, 17:
                // Valid signature and encryption around a hostile change encoding.
                var encoding = units[i].encoding ?? RawChangeEncoding()
                var ignored = RawBundle()
                for _ in 0 ..< 1 + rng.below(2) { values.mutate(&encoding, &ignored, &rng) }
                let compressed = rng.below(4) == 0
                units[i].unit.plaintext = [compressed ? 1 : 0] + Self.body(encoding.bytes(), compressed: compressed)
                units[i].mutations += 1
            case 18:
                // Payload flags: unknown bits, compressed but not, empty payload, flags alone.
                // (An earlier change may have left no payload at all.)
                let rest = Array(units[i].unit.plaintext.dropFirst())
                let flags = units[i].unit.plaintext.first ?? 0
                switch rng.below(4) {
                case 0: units[i].unit.plaintext = [[2, 0x80, 0xFF][rng.below(3)]] + rest
                case 1: units[i].unit.plaintext = [flags ^ 1] + rest
                case 2: units[i].unit.plaintext = [0]
                default: units[i].unit.plaintext = []
                }
                units[i].mutations += 1
                units[i].mustRefuse = true
            case 19:
                // A bomb: a short compressed payload that inflates to a megabyte of zeros, or declares past the
                // limit. (Not more: a store and the model each inflate it, which takes seconds in a debug build;
                // the record pages' bombs inflate 4 MiB.)
                var w = RawWriter()
                let size = rng.below(4) == 0 ? 1 << 20 : 1 << 18
                w.varint(rng.below(3) == 0 ? UInt64(SyncBundle.maxBodyBytes) + 1 : UInt64(size))
                units[i].unit.plaintext = [1] + w.bytes + Deflate.compress([UInt8](repeating: 0, count: size), level: 1)
                units[i].mutations += 1
                units[i].mustRefuse = true
            case 20:
                // Nested: the payload holds a whole bundle (plain or sealed), compressed or not.
                let inner = rng.below(2) == 0 ? values.bundle(seed: rng.next()).bytes()
                    : units.map(\.unit.plaintext).reduce([], +)
                units[i].unit.plaintext = [1] + Self.body(inner + inner, compressed: true)
                units[i].mutations += 1
            case 21:
                // Unit version 1 (no agreement key, no tags), or one this build does not read.
                units[i].unit.version = [1, 1, 0, 3, 0xFF][rng.below(5)]
                units[i].mutations += 1
                if units[i].unit.version != 1 { units[i].mustRefuse = true }
            case 22:
                // The bundle's framing: a unit length or count that lies, bytes after the units, flags.
                switch rng.below(5) {
                case 0: lengths[i] = [0, 1, 1 << 20, .max][rng.below(4)]
                case 1: unitCount = [UInt64(units.count + 1), 0, 32_769, .max][rng.below(4)]
                case 2: trailing = [UInt8(truncatingIfNeeded: rng.next())]
                case 3: flags = [1, 2, 0xFF][rng.below(3)]
                default: vectorCount = HostileBundles.edge(&rng, near: 1)
                }
            default:
                // Many units: hundreds of one-change units of one fresh author, padded varints, or from a stranger's space.
                switch rng.below(3) {
                case 0:
                    let author = FuzzMember(seed: rng.next())
                    var model = HostileBundles.Model(rng: &rng)
                    model.replicas = [author.id]
                    model.next = [1]
                    for _ in 0 ..< [50, 300][rng.below(2)] {
                        var e = model.history(&rng)
                        e.headers = Array(e.headers.prefix(1))
                        e.records = Array(e.records.prefix(Int(e.headers.first?.operationCount ?? 0)))
                        units.append(unit(author: author, encoding: e, &rng))
                    }
                case 1:
                    units[i].unit.width = .padded([2, 10, 11][rng.below(3)])
                    units[i].mutations += 1
                default:
                    units[i].space = Self.otherKey
                    units[i].unit.keyID = Self.otherKey.keyID
                    units[i].mutations += 1
                    units[i].mustRefuse = true
                }
            }
        }
        // Whole units of authors a receiver never heard of, signed by themselves, must open.
        for (i, entry) in units.enumerated() where entry.mustRefuse && entry.mutations == 1 { sealed.mustRefuse.insert(i) }
        for (i, entry) in units.enumerated() where fresh && entry.mutations == 0 && entry.signer.id == entry.unit.author
            && entry.space == nil && !units.indices.contains(where: { $0 != i && units[$0].unit.author == entry.unit.author && units[$0].unit.endSeq == entry.unit.endSeq }) {
            sealed.mustOpen.insert(i)
        }
        if rng.below(8) == 0 { sender = units.first?.unit.author ?? sender }
        var w = RawWriter()
        w.raw(SyncBundle.magic)
        w.byte(SyncBundle.sealedFormatVersion)
        w.byte(flags)
        w.raw(sender.raw.bytes)
        // The sender's vector: what the units reach, per author, in increasing replica order.
        var vector: [ReplicaID: UInt64] = [:]
        for entry in units { vector[entry.unit.author] = max(vector[entry.unit.author] ?? 0, min(entry.unit.endSeq, Change.maxSeq)) }
        let entries = vector.sorted { $0.key < $1.key }
        w.varint(vectorCount ?? UInt64(entries.count))
        for (replica, seq) in entries {
            w.raw(replica.raw.bytes)
            w.varint(seq)
        }
        w.varint(unitCount ?? UInt64(units.count))
        for (i, entry) in units.enumerated() {
            let bytes = entry.unit.bytes(space: entry.space ?? Self.spaceKey, signer: entry.signer.signer, tagKey: entry.signer.agreement, pairKeys: entry.signer.pairKeys)
            w.varint(lengths[i] ?? UInt64(bytes.count))
            w.raw(bytes)
        }
        w.raw(trailing)
        sealed.bytes = w.bytes + Array(Crypto.SHA256.hash(data: w.bytes))
        return sealed
    }

    /// A body as a version 3 bundle carries it: the encoding, or its length and raw DEFLATE.
    static func body(_ encoding: [UInt8], compressed: Bool) -> [UInt8] {
        guard compressed else { return encoding }
        var w = RawWriter()
        w.varint(UInt64(encoding.count))
        return w.bytes + Deflate.compress(encoding, level: 1)
    }

    /// A whole unit of `encoding` (one author's changes from `HostileBundles.Model`), tagged for the
    /// receiver and the regulars.
    func unit(author: FuzzMember, encoding: RawChangeEncoding, _ rng: inout SplitMix64) -> SealedEntry {
        let plain = encoding.bytes()
        // The seqs its changes cover (the model's headers count records, not seqs).
        let changes = (try? ChangeCodec.decode(plain, limits: SyncBundle.changeLimits)) ?? []
        let start = changes.map(\.startSeq).min() ?? 1
        let end = changes.map(\.endSeq).max() ?? start
        let compressed = plain.count >= 2048 || rng.below(4) == 0
        let unit = RawSealedUnit(author: author.id, startSeq: start, endSeq: end, keyID: Self.spaceKey.keyID,
                                 salt: (0 ..< 32).map { _ in UInt8(truncatingIfNeeded: rng.next()) },
                                 publicKey: author.signer.publicKey, agreementKey: author.agreementKey, introduction: nil,
                                 plaintext: [compressed ? 1 : 0] + Self.body(plain, compressed: compressed),
                                 recipients: rng.below(3) == 0 ? [] : [Self.receiverAgreementKey] + Self.regulars.map(\.agreementKey).filter { $0 != author.agreementKey })
        return SealedEntry(unit: unit, signer: author, encoding: encoding)
    }
}

/// A unit being made: its parts, who signs it, under which space key (nil: the space's), from which encoding.
struct SealedEntry {
    var unit: RawSealedUnit
    var signer: FuzzMember
    var encoding: RawChangeEncoding?
    var space: SpaceKey?
    /// How many times it was altered; whether the last change makes it one that must not open
    /// (asserted only of a unit altered once: a second change may undo the first).
    var mutations = 0
    var mustRefuse = false
}

extension RawSealedUnit {
    /// Where the key id starts.
    var keyIDOffset: Int {
        var w = RawWriter()
        w.width = width
        w.varint(startSeq)
        w.varint(endSeq)
        return 1 + 16 + w.bytes.count
    }

    /// Where the header ends (the ciphertext length starts), with the shortest varints.
    var headerLength: Int {
        keyIDOffset + 8 + 32 + 32 + (version >= 2 ? 32 : 0) + 32
    }

    /// Where the signature starts.
    var signatureOffset: Int {
        var w = RawWriter()
        w.width = width
        w.varint(ciphertextLength ?? UInt64(plaintext.count + 16))
        return headerLength + w.bytes.count + plaintext.count + 16
    }
}


extension HostileSealedUnits {
    /// A unit of `author` over `startSeq ... endSeq` with `plaintext` (flags, body) as its payload,
    /// sealed under `space`, signed by `author`, tagged for `recipients`, after `alter` has changed
    /// any part of it: hand-made cases.
    public static func unitBytes(author: FuzzMember, startSeq: UInt64, endSeq: UInt64, plaintext: [UInt8], space: SpaceKey = spaceKey,
                                 recipients: [[UInt8]] = [], alter: (inout RawSealedUnit) -> Void = { _ in }) -> [UInt8] {
        var unit = RawSealedUnit(author: author.id, startSeq: startSeq, endSeq: endSeq, keyID: space.keyID, salt: [UInt8](repeating: 7, count: 32),
                                 publicKey: author.signer.publicKey, agreementKey: author.agreementKey, introduction: nil,
                                 plaintext: plaintext, recipients: recipients)
        alter(&unit)
        return unit.bytes(space: space, signer: author.signer, tagKey: author.agreement, pairKeys: author.pairKeys)
    }

    /// The receiver's agreement key (what a member tags a unit for it with).
    public static var receiverAgreement: [UInt8] { receiverAgreementKey }
}

import Crypto
import CryptoExtras
import Foundation
import NotesCRDT

/// The key of an end-to-end encrypted space: 32 bytes that only the space's devices hold.
///
/// Made from a passphrase with scrypt (`derive(passphrase:parameters:)`, its parameters and salt
/// kept in a `SpaceKey.Descriptor` that is not secret) or drawn at random and carried from device to
/// device as a recovery code (`recoveryCode`, `init(recoveryCode:)`). Every other key is derived
/// from it with HKDF-SHA256 under its own label: a fresh key per sealed unit, the key that makes
/// introductions, and the public key id that tells a device with another key apart.
public struct SpaceKey: Sendable, Hashable {
    /// The 32 key bytes.
    public let bytes: [UInt8]

    /// The key of these 32 bytes.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 32 else { return nil }
        self.bytes = bytes
    }

    /// A new random key (for a recovery code).
    public static func random() -> SpaceKey {
        SpaceKey(bytes: SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) })!
    }

    var symmetric: SymmetricKey { SymmetricKey(data: bytes) }

    /// Derives `count` bytes under `label` (and `salt`) with HKDF-SHA256.
    func derived(_ label: String, salt: [UInt8] = [], count: Int = 32) -> SymmetricKey {
        HKDF<Crypto.SHA256>.deriveKey(inputKeyMaterial: symmetric, salt: salt, info: Array(label.utf8), outputByteCount: count)
    }

    /// The 8-byte id every sealed unit carries: tells a key apart without revealing it.
    public var keyID: [UInt8] { derived("crdt-sync key id v1", count: 8).withUnsafeBytes { Array($0) } }

    /// The key id in hex.
    public var keyIDHex: String { keyID.map { String(format: "%02x", $0) }.joined() }

    // MARK: Passphrases

    /// scrypt's parameters and salt for a space made from a passphrase, and the id of the key
    /// they give: what a device needs, with the passphrase, to join (not secret).
    ///
    /// Written as `crdtspace1-scrypt-LOGN-R-P-SALTHEX-KEYIDHEX` (`description`).
    public struct Descriptor: Sendable, Hashable, CustomStringConvertible {
        /// log2 of scrypt's cost N (rounds).
        public var logN: Int
        /// scrypt's block size r.
        public var blockSize: Int
        /// scrypt's parallelism p.
        public var parallelism: Int
        /// 16 random bytes.
        public var salt: [UInt8]
        /// The id of the key the passphrase gives (a wrong passphrase gives another).
        public var keyID: [UInt8]

        /// The defaults: N = 2^15, r = 8, p = 1 (32 MiB of memory, about a tenth of a second).
        public static let defaultLogN = 15
        /// The most r * N a descriptor may ask for: 2^23, 1 GiB of scrypt memory (128 * r * N).
        static let maxCostUnits = 1 << 23

        /// The printed form.
        public var description: String {
            "crdtspace1-scrypt-\(logN)-\(blockSize)-\(parallelism)-\(hex(salt))-\(hex(keyID))"
        }

        /// Parses the printed form.
        public init(_ text: String) throws {
            let parts = text.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "-").map(String.init)
            guard parts.count == 7, parts[0] == "crdtspace1", parts[1] == "scrypt",
                  let logN = Int(parts[2]), (10 ... 22).contains(logN),
                  let r = Int(parts[3]), (1 ... 32).contains(r), let p = Int(parts[4]), (1 ... 16).contains(p),
                  let salt = unhex(parts[5]), salt.count == 16, let keyID = unhex(parts[6]), keyID.count == 8 else {
                throw SyncError(.malformed, "\"\(text.prefix(80))\" is not a space descriptor (crdtspace1-scrypt-LOGN-R-P-SALT-KEYID, as `crdt-sync space show` prints it)")
            }
            // scrypt holds 128 * r * N bytes: each bound alone allowed 16 GiB (N = 2^22, r = 32), p times over.
            guard r << logN <= Self.maxCostUnits, p * (r << logN) <= 4 * Self.maxCostUnits else {
                throw SyncError(.malformed, "the space descriptor asks scrypt for N = 2^\(logN), r = \(r), p = \(p): past the 1 GiB of memory (and 4 GiB of work) this build spends on a passphrase")
            }
            self.init(logN: logN, blockSize: r, parallelism: p, salt: salt, keyID: keyID)
        }

        /// A descriptor.
        public init(logN: Int, blockSize: Int, parallelism: Int, salt: [UInt8], keyID: [UInt8]) {
            self.logN = logN
            self.blockSize = blockSize
            self.parallelism = parallelism
            self.salt = salt
            self.keyID = keyID
        }
    }

    /// The key of `passphrase` with scrypt at `logN`, r, p and `salt`.
    public static func derive(passphrase: String, logN: Int, blockSize: Int, parallelism: Int, salt: [UInt8]) throws -> SpaceKey {
        let key: SymmetricKey
        do {
            key = try KDF.Scrypt.deriveKey(from: Array(passphrase.utf8), salt: salt, outputByteCount: 32,
                                           rounds: 1 << logN, blockSize: blockSize, parallelism: parallelism)
        } catch {
            throw SyncError(.rejected, "scrypt failed (N = 2^\(logN), r = \(blockSize), p = \(parallelism)): \(error)")
        }
        return SpaceKey(bytes: key.withUnsafeBytes { Array($0) })!
    }

    /// A new space from `passphrase`: a fresh salt, the key, and the descriptor other devices join with.
    public static func create(passphrase: String, logN: Int = Descriptor.defaultLogN) throws -> (key: SpaceKey, descriptor: Descriptor) {
        try checkPassphrase(passphrase)
        let salt = SymmetricKey(size: .bits128).withUnsafeBytes { Array($0) }
        let key = try derive(passphrase: passphrase, logN: logN, blockSize: 8, parallelism: 1, salt: salt)
        return (key, Descriptor(logN: logN, blockSize: 8, parallelism: 1, salt: salt, keyID: key.keyID))
    }

    /// The key of a space that `descriptor` describes, from `passphrase`.
    ///
    /// - Throws: `SyncError` `.wrongKey` when the passphrase gives another key than the space's.
    public static func join(passphrase: String, descriptor: Descriptor) throws -> SpaceKey {
        try checkPassphrase(passphrase)
        let key = try derive(passphrase: passphrase, logN: descriptor.logN, blockSize: descriptor.blockSize,
                             parallelism: descriptor.parallelism, salt: descriptor.salt)
        guard key.keyID == descriptor.keyID else {
            throw SyncError(.wrongKey, "this space is encrypted with a different key: the passphrase does not match the space's (key id \(hex(descriptor.keyID)), this passphrase gives \(key.keyIDHex))")
        }
        return key
    }

    static func checkPassphrase(_ passphrase: String) throws {
        guard passphrase.count >= 8 else {
            throw SyncError(.rejected, "the passphrase is too short (\(passphrase.count) characters; at least 8)")
        }
    }

    // MARK: Recovery codes

    /// The key as a recovery code: its 32 bytes and a 2-byte check, in base32 (RFC 4648, no
    /// padding), in groups of five letters or digits joined by dashes.
    public var recoveryCode: String {
        let check = Array(Crypto.SHA256.hash(data: Array("crdt-sync recovery v1".utf8) + bytes))[0 ..< 2]
        let text = base32(bytes + check)
        return stride(from: 0, to: text.count, by: 5).map { start in
            let from = text.index(text.startIndex, offsetBy: start)
            return String(text[from ..< text.index(from, offsetBy: min(5, text.count - start))])
        }.joined(separator: "-")
    }

    /// The key of a recovery code (dashes, spaces and case do not matter).
    ///
    /// - Throws: `SyncError` `.malformed` when it is not one (a typo fails its check).
    public init(recoveryCode: String) throws {
        let cleaned = recoveryCode.uppercased().filter { !$0.isWhitespace && $0 != "-" }
        guard let decoded = unbase32(cleaned), decoded.count == 34 else {
            throw SyncError(.malformed, "not a recovery code (55 letters and digits in groups of five, as `crdt-sync space create --recovery-code` printed it)")
        }
        let key = Array(decoded[0 ..< 32])
        let check = Array(Crypto.SHA256.hash(data: Array("crdt-sync recovery v1".utf8) + key))[0 ..< 2]
        guard decoded[32 ..< 34].elementsEqual(check) else {
            throw SyncError(.malformed, "the recovery code has a typo (its check does not match)")
        }
        self.init(bytes: key)!
    }
}

/// A replica's signing key in an encrypted space (Ed25519), and its public half.
public struct SigningIdentity: Sendable {
    /// The private key.
    public let privateKey: Curve25519.Signing.PrivateKey

    /// A new random key.
    public init() { privateKey = Curve25519.Signing.PrivateKey() }

    /// The key of these 32 raw bytes.
    public init(rawRepresentation: [UInt8]) throws {
        do {
            privateKey = try Curve25519.Signing.PrivateKey(rawRepresentation: rawRepresentation)
        } catch {
            throw SyncError(.malformed, "a signing key of \(rawRepresentation.count) bytes is not an Ed25519 key")
        }
    }

    /// The key whose 32 raw bytes are the SHA-256 of `material` (which must hold a secret).
    public init(deriving material: [UInt8]) {
        privateKey = try! Curve25519.Signing.PrivateKey(rawRepresentation: Array(Crypto.SHA256.hash(data: material)))
    }

    /// The 32 raw bytes of the private key (what the replica's database keeps).
    public var rawRepresentation: [UInt8] { Array(privateKey.rawRepresentation) }
    /// The 32 bytes of the public key.
    public var publicKey: [UInt8] { Array(privateKey.publicKey.rawRepresentation) }

    /// The replica identity made from this key (`replicaID(for:)`): what a replica takes when it
    /// enters an encrypted space, so that nobody else can sign as it.
    public var replicaID: ReplicaID { SigningIdentity.replicaID(for: publicKey) }

    /// The two bytes a replica id made from a signing key starts with.
    public static let selfCertifiedPrefix: [UInt8] = [0xE2, 0xE2]

    /// The replica id made from an Ed25519 public key: `E2 E2`, then the first 14 bytes of
    /// SHA-256("crdt-sync replica id v1\0" ‖ key). An id that starts with `E2 E2` must be signed
    /// by the key it is made from; any other id (made before its replica entered the space) by the
    /// key first introduced for it.
    public static func replicaID(for publicKey: [UInt8]) -> ReplicaID {
        let digest = Array(Crypto.SHA256.hash(data: Array("crdt-sync replica id v1\u{0}".utf8) + publicKey))
        return ReplicaID(Identifier128(bytes: selfCertifiedPrefix + digest[0 ..< 14])!)
    }

    /// Whether `replica` has the form of an id made from a signing key.
    public static func isSelfCertified(_ replica: ReplicaID) -> Bool {
        replica.raw.bytes.starts(with: selfCertifiedPrefix)
    }
}

func hex(_ bytes: some Sequence<UInt8>) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

func unhex(_ text: String) -> [UInt8]? {
    let utf8 = Array(text.utf8)
    guard utf8.count % 2 == 0 else { return nil }
    var result: [UInt8] = []
    result.reserveCapacity(utf8.count / 2)
    func value(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30 ... 0x39: c - 0x30
        case 0x61 ... 0x66: c - 0x61 + 10
        case 0x41 ... 0x46: c - 0x41 + 10
        default: nil
        }
    }
    for i in stride(from: 0, to: utf8.count, by: 2) {
        guard let high = value(utf8[i]), let low = value(utf8[i + 1]) else { return nil }
        result.append(high << 4 | low)
    }
    return result
}

private let base32Alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)

func base32(_ bytes: [UInt8]) -> String {
    var out: [UInt8] = []
    var buffer: UInt32 = 0
    var bits = 0
    for byte in bytes {
        buffer = buffer << 8 | UInt32(byte)
        bits += 8
        while bits >= 5 {
            out.append(base32Alphabet[Int(buffer >> UInt32(bits - 5)) & 31])
            bits -= 5
        }
    }
    if bits > 0 { out.append(base32Alphabet[Int(buffer << UInt32(5 - bits)) & 31]) }
    return String(decoding: out, as: UTF8.self)
}

func unbase32(_ text: String) -> [UInt8]? {
    var out: [UInt8] = []
    var buffer: UInt32 = 0
    var bits = 0
    for c in text.utf8 {
        guard let value = base32Alphabet.firstIndex(of: c) else { return nil }
        buffer = buffer << 5 | UInt32(value)
        bits += 5
        if bits >= 8 {
            out.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits - 8)))
            bits -= 8
        }
    }
    return out
}

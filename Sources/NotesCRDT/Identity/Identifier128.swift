/// 128 bits of identity, printed as 32 lowercase hexadecimal digits.
///
/// `ReplicaID` and `NoteID` are both 16 random bytes; this is their shared representation.
public struct Identifier128: Hashable, Comparable, Sendable {
    /// The most significant 64 bits.
    public var high: UInt64
    /// The least significant 64 bits.
    public var low: UInt64

    /// Creates an identifier from its two halves.
    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Creates a random identifier from the given generator.
    public init<G: RandomNumberGenerator>(using generator: inout G) {
        self.init(high: generator.next(), low: generator.next())
    }

    /// Parses 32 hexadecimal digits (case-insensitive); returns nil for anything else.
    public init?(hex: some StringProtocol) {
        // A native string's bytes in place: iterating a generic `utf8` called through witnesses
        // per byte (an eighth of `crdt-sync list`, which parses every row's id).
        if let parsed = hex.utf8.withContiguousStorageIfAvailable({ Identifier128(hexUTF8: $0) }) {
            guard let parsed else { return nil }
            self = parsed
            return
        }
        var high: UInt64 = 0
        var low: UInt64 = 0
        var index = 0
        for byte in hex.utf8 {
            guard index < 32, let nibble = Identifier128.nibble(byte) else { return nil }
            if index < 16 { high = high << 4 | UInt64(nibble) } else { low = low << 4 | UInt64(nibble) }
            index += 1
        }
        guard index == 32 else { return nil }
        self.init(high: high, low: low)
    }

    /// Parses 32 hexadecimal digits given as UTF-8 bytes in place; returns nil for anything else.
    public init?(hexUTF8 utf8: UnsafeBufferPointer<UInt8>) {
        var high: UInt64 = 0
        var low: UInt64 = 0
        var index = 0
        for byte in utf8 {
            guard index < 32, let nibble = Identifier128.nibble(byte) else { return nil }
            if index < 16 { high = high << 4 | UInt64(nibble) } else { low = low << 4 | UInt64(nibble) }
            index += 1
        }
        guard index == 32 else { return nil }
        self.init(high: high, low: low)
    }

    /// The 16 bytes, most significant first.
    public var bytes: [UInt8] {
        var result = [UInt8]()
        result.reserveCapacity(16)
        for shift in stride(from: 56, through: 0, by: -8) { result.append(UInt8(truncatingIfNeeded: high >> UInt64(shift))) }
        for shift in stride(from: 56, through: 0, by: -8) { result.append(UInt8(truncatingIfNeeded: low >> UInt64(shift))) }
        return result
    }

    // Inlinable so that a caller in another module gets it specialized for its collection (the
    // relay reads an author's 16 bytes from every row it pages through).
    /// Creates an identifier from 16 bytes, most significant first.
    @inlinable
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 16 else { return nil }
        var high: UInt64 = 0
        var low: UInt64 = 0
        for (index, byte) in bytes.enumerated() {
            if index < 8 { high = high << 8 | UInt64(byte) } else { low = low << 8 | UInt64(byte) }
        }
        self.init(high: high, low: low)
    }

    /// 32 lowercase hexadecimal digits.
    ///
    /// Written straight into the string's storage: one allocation (the store binds a note's
    /// identity as text in every statement about it).
    public var hex: String {
        String(unsafeUninitializedCapacity: 32) { buffer in
            for i in 0 ..< 32 {
                let word = i < 16 ? high : low
                let value = UInt8(truncatingIfNeeded: word >> UInt64(60 - 4 * (i & 15))) & 0xF
                buffer[i] = value < 10 ? 0x30 + value : 0x57 + value  // 0-9, a-f
            }
            return 32
        }
    }

    /// Orders identifiers as unsigned 128-bit numbers.
    @inlinable
    public static func < (lhs: Identifier128, rhs: Identifier128) -> Bool {
        (lhs.high, lhs.low) < (rhs.high, rhs.low)
    }

    /// Feeds the 128 bits to `hasher`.
    @inlinable
    public func hash(into hasher: inout Hasher) {
        hasher.combine(high)
        hasher.combine(low)
    }

    /// The hash that dictionaries and sets use. Identities are random bytes, so a keyed
    /// multiply-xorshift chain over the two halves spreads them as well as SipHash at a fraction
    /// of the cost (the notebook looks a note up several times per keystroke). Each step is a
    /// bijection of the running value, so identities that share one half still hash apart, and the
    /// per-table seed enters first and last, so a peer cannot choose identities that collide.
    @_documentation(visibility: internal)
    @inlinable
    public func _rawHashValue(seed: Int) -> Int {
        let key = UInt64(UInt(bitPattern: seed))
        var h = (low ^ key ^ 0x9E37_79B9_7F4A_7C15) &* 0xBF58_476D_1CE4_E5B9
        h ^= h >> 31
        h = (h ^ high) &* 0x94D0_49BB_1331_11EB
        h ^= h >> 29
        h = (h ^ (key &<< 32 | key &>> 32)) &* 0xD6E8_FEB8_6659_FD93
        h ^= h >> 32
        return Int(truncatingIfNeeded: h)
    }

    private static func nibble(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

/// What an `Identifier` identifies: a tag type that keeps a replica's identity and a note's apart
/// in the type system, though both are 16 random bytes.
public protocol IdentifierKind: Sendable {}

/// Tags the identity of a replica (one device and one account).
public enum ReplicaKind: IdentifierKind {}

/// Tags the identity of a note.
public enum NoteKind: IdentifierKind {}

/// 16 random bytes identifying something of kind `Kind` (`ReplicaID`, `NoteID`): made once, at
/// random, printed as 32 lowercase hexadecimal digits.
public struct Identifier<Kind: IdentifierKind>: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The underlying 128 bits.
    public var raw: Identifier128

    /// Wraps 128 bits.
    @inlinable
    public init(_ raw: Identifier128) { self.raw = raw }

    /// A new random identity from the given generator (deterministic for a seeded one).
    public static func random<G: RandomNumberGenerator>(using generator: inout G) -> Identifier {
        Identifier(Identifier128(using: &generator))
    }

    /// A new random identity from the system's generator.
    public static func random() -> Identifier {
        var generator = SystemRandomNumberGenerator()
        return random(using: &generator)
    }

    /// Parses 32 hexadecimal digits (case-insensitive); nil for anything else.
    public init?(hex: some StringProtocol) {
        guard let raw = Identifier128(hex: hex) else { return nil }
        self.raw = raw
    }

    /// 32 lowercase hexadecimal digits.
    public var description: String { raw.hex }

    /// Orders identities by their 128 bits.
    @inlinable
    public static func < (lhs: Identifier, rhs: Identifier) -> Bool { lhs.raw < rhs.raw }

    /// Whether two identities have the same 128 bits.
    @inlinable
    public static func == (lhs: Identifier, rhs: Identifier) -> Bool { lhs.raw == rhs.raw }

    /// Feeds the identity's 128 bits to `hasher`.
    @inlinable
    public func hash(into hasher: inout Hasher) { raw.hash(into: &hasher) }

    // Inlinable so that each module's sets and dictionaries of identities specialize it (the hash
    // is on every lookup of a note). Public only because Hashable's witness must be.
    /// The hash of the identity's bits with `seed`; part of `Hashable`, not meant to be called.
    @_documentation(visibility: internal)
    @inlinable
    public func _rawHashValue(seed: Int) -> Int { raw._rawHashValue(seed: seed) }
}

/// The identity of one replica: one device and one account. Made once, at random.
public typealias ReplicaID = Identifier<ReplicaKind>

/// The identity of one note: 16 random bytes made on the device that created it.
public typealias NoteID = Identifier<NoteKind>

/// The identity of one operation (and of one inserted character): the replica that made it and
/// its sequence number there. Sequence numbers count 1, 2, 3, ... per replica without gaps.
public struct OpID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The replica that made the operation.
    public var replica: ReplicaID
    /// Its sequence number on that replica, starting at 1.
    public var seq: UInt64

    /// Creates an operation identity.
    public init(replica: ReplicaID, seq: UInt64) {
        self.replica = replica
        self.seq = seq
    }

    /// The replica's first 8 hexadecimal digits and the seq, as `replica@seq`.
    public var description: String { "\(replica.raw.hex.prefix(8))@\(seq)" }

    /// Orders by replica, then by seq.
    public static func < (lhs: OpID, rhs: OpID) -> Bool {
        (lhs.replica, lhs.seq) < (rhs.replica, rhs.seq)
    }
}

/// A run of consecutive operation identities on one replica: `seq ..< seq + count`.
public struct OpIDRange: Hashable, Sendable {
    /// The replica.
    public var replica: ReplicaID
    /// The first sequence number.
    public var seq: UInt64
    /// How many consecutive sequence numbers.
    public var count: UInt64

    /// Creates a range of identities.
    public init(replica: ReplicaID, seq: UInt64, count: UInt64) {
        self.replica = replica
        self.seq = seq
        self.count = count
    }

    /// The first identity past the range.
    public var endSeq: UInt64 { seq + count }
}

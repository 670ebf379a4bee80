import Crypto
import NotesCRDT
import NotesSync

/// What happened in a run, step by step, compactly: enough to hash (the same seed gives the same
/// hash, run after run) and to draw the report's timelines.
public struct Trace: Sendable {
    /// What an entry records: an edit (or one skipped for lack of a note), a sync (or a failed
    /// one), an upload a relay stored, a partition or its heal, a crash, a reinstall, a clock jump,
    /// the start of the final healing, a failed safety check, a death, a forgery, an intrusion, or
    /// a copy of a database. (The final digests are kept in `digests`, not as entries.)
    public enum Kind: UInt8, Sendable, CaseIterable {
        case edit = 1, editSkipped, sync, syncFailed, relayStored, partition, heal, crash, reinstall, clockJump
        case healAll, violation, digest, death, forgery, intrusion, copy, restore, clone, outOfOrder, fork
    }

    /// One step of a run. `a` to `d` (0 when unused) depend on `kind`: for an edit, the edit kind's
    /// index in `EditKind.allCases`, the device's seq after it and the changes it made; for a sync,
    /// the hub and the changes sent, applied and left pending; for a failed sync, the hub and an
    /// error code; for a partition or heal, the hub (-1: every hub) and the direction (0 both, 1
    /// outbound, 2 inbound); for a clock jump, the milliseconds; for a copy, the device copied; for a
    /// restore, the seq its identity had in the backup and the seq it had reached.
    public struct Entry: Sendable, Hashable {
        /// Milliseconds since the start of the run.
        public var time: UInt64
        /// The device, or -1 for the world.
        public var device: Int
        /// What the step was.
        public var kind: Kind
        /// The first value; its meaning depends on `kind`.
        public var a: Int64
        /// The second value; its meaning depends on `kind`.
        public var b: Int64
        /// The third value; its meaning depends on `kind`.
        public var c: Int64
        /// The fourth value; its meaning depends on `kind`.
        public var d: Int64
    }

    /// Every entry, in the order the steps happened.
    public private(set) var entries: [Entry] = []
    /// The devices' final digests, in device order.
    public private(set) var digests: [String] = []
    /// SHA-256 through swift-crypto (the CPU's SHA instructions), fed 4 KiB at a time.
    private var hasher = Crypto.SHA256()
    private var buffer: [UInt8] = []

    mutating func add(_ time: UInt64, _ device: Int, _ kind: Kind, _ a: Int64 = 0, _ b: Int64 = 0, _ c: Int64 = 0, _ d: Int64 = 0) {
        let entry = Entry(time: time, device: device, kind: kind, a: a, b: b, c: c, d: d)
        entries.append(entry)
        append(time)
        buffer.append(UInt8(truncatingIfNeeded: device))
        buffer.append(kind.rawValue)
        append(UInt64(bitPattern: a))
        append(UInt64(bitPattern: b))
        append(UInt64(bitPattern: c))
        append(UInt64(bitPattern: d))
        if buffer.count >= 4096 { flush() }
    }

    mutating func addDigest(_ device: Int, _ digest: String) {
        digests.append(digest)
        buffer.append(UInt8(truncatingIfNeeded: device))
        buffer.append(contentsOf: digest.utf8)
    }

    private mutating func append(_ value: UInt64) {
        var v = value
        for _ in 0 ..< 8 {
            buffer.append(UInt8(truncatingIfNeeded: v))
            v >>= 8
        }
    }

    private mutating func flush() {
        buffer.withUnsafeBytes { hasher.update(bufferPointer: $0) }
        buffer.removeAll(keepingCapacity: true)
    }

    /// SHA-256 (hex) of every entry and the final digests.
    mutating func hash() -> String {
        flush()
        // The hex of the SHA-256 *of the digest*, as the hash has always been written (it was
        // `SHA256.hex(hasher.finalize())`, and `hex` hashes its input): the trace hashes of every
        // seed stay what they were.
        let digest = Crypto.SHA256.hash(data: Array(hasher.finalize()))
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: digest.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xF)]] }, as: UTF8.self)
    }

    static func code(_ kind: EditKind) -> Int { EditKind.allCases.firstIndex(of: kind) ?? -1 }

    static func code(_ direction: Scenario.Direction) -> Int {
        switch direction {
        case .both: 0
        case .outbound: 1
        case .inbound: 2
        }
    }

    static func code(_ code: SyncError.Code) -> Int {
        switch code {
        case .transient: 1
        case .io: 2
        default: 3
        }
    }
}

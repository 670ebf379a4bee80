import NotesCRDT
import NotesSync
import Synchronization

/// One change as the relay stores it: its author and seq range (all the relay needs to know), and
/// its encoding, which the relay hands back as it got it.
public struct RelayRecord: Sendable, Hashable {
    /// The change's author.
    public var author: ReplicaID
    /// Its first sequence number.
    public var startSeq: UInt64
    /// Its last sequence number.
    public var endSeq: UInt64
    /// Its encoding (`ChangeCodec.encode([change])`), or a sealed unit's bytes.
    public var payload: [UInt8]
    /// Whether the payload is a sealed unit (end-to-end encrypted: the relay cannot read it).
    public var sealed: Bool
    /// A sealed unit's signing key (its signature verified by the relay): the first one stored
    /// for an author in a space is the only one taken for it after.
    public var signingKey: [UInt8]?
    /// Whether it was sent again (`RelayStorage.appendAgain`): a branch at seqs the space holds
    /// already, kept beside them rather than in the author's chain.
    public var again: Bool

    /// A record.
    public init(author: ReplicaID, startSeq: UInt64, endSeq: UInt64, payload: [UInt8], sealed: Bool = false, signingKey: [UInt8]? = nil,
                again: Bool = false) {
        self.author = author
        self.startSeq = startSeq
        self.endSeq = endSeq
        self.payload = payload
        self.sealed = sealed
        self.signingKey = signingKey
        self.again = again
    }
}

extension RelayRecord {
    /// The refusal of an append holding a record whose seqs are no change's range (a storage
    /// keeps seqs as signed 64-bit numbers, and a page reads a record past 2^63 - 1 as before
    /// seq 1: it would never be served), or nil when every record's range is one.
    package static func rangeRefusal(_ records: [RelayRecord]) -> RelayStorageError? {
        guard let bad = records.first(where: { !(1 ... Change.maxSeq).contains($0.startSeq) || !($0.startSeq ... Change.maxSeq).contains($0.endSeq) }) else {
            return nil
        }
        return RelayStorageError(.malformed, "a record of \(bad.author) covers seqs \(bad.startSeq) ... \(bad.endSeq), not a range within 1 ... \(Change.maxSeq); nothing was stored")
    }
}

/// A stored record with the number the storage gave it on arrival (arrival order).
public struct RelayStoredRecord: Sendable, Hashable {
    /// Increasing with arrival, per storage.
    public var arrival: Int64
    /// The record.
    public var record: RelayRecord

    /// A stored record.
    public init(arrival: Int64, record: RelayRecord) {
        self.arrival = arrival
        self.record = record
    }
}

/// One page of what a client lacks.
public struct RelayPage: Sendable {
    /// The records, in arrival order; each author's in seq order, contiguous from what the client has.
    public var records: [RelayStoredRecord]
    /// The space's version vector when the page was read.
    public var version: VersionVector
    /// Whether the client lacks more than this page.
    public var more: Bool

    /// A page.
    public init(records: [RelayStoredRecord], version: VersionVector, more: Bool) {
        self.records = records
        self.version = version
        self.more = more
    }
}

/// What a space on the relay holds: its version vector and counts.
public struct RelaySpaceStatus: Sendable, Hashable {
    /// The space's name.
    public var space: String
    /// Per author, the operations the relay holds contiguously from seq 1.
    public var version: VersionVector
    /// Authors with at least one stored change.
    public var authors: Int
    /// Stored records.
    public var changes: Int
    /// Operations those records cover (saturating).
    public var operations: UInt64
    /// Bytes of stored encodings.
    public var bytes: Int

    /// A status.
    public init(space: String, version: VersionVector, authors: Int, changes: Int, operations: UInt64, bytes: Int) {
        self.space = space
        self.version = version
        self.authors = authors
        self.changes = changes
        self.operations = operations
        self.bytes = bytes
    }
}

/// How large one page of a relay's answer may be.
public struct RelayPageLimits: Sendable, Hashable {
    /// At most this many changes per page (at least 1).
    public var maxChanges: Int
    /// At most this many bytes of encoded changes per page (a single larger change still goes alone).
    public var maxBytes: Int

    /// Limits; the defaults keep a page around a megabyte.
    public init(maxChanges: Int = 1000, maxBytes: Int = 1 << 20) {
        self.maxChanges = max(1, maxChanges)
        // Beside the largest record, an answer must stay within what a reader takes.
        self.maxBytes = min(max(1, maxBytes), 4 << 20)
    }
}

/// Why a storage refused records.
public struct RelayStorageError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of refusal.
    public enum Kind: Sendable, Hashable {
        /// A record starts past what the space holds of its author (it would leave a gap).
        case gap
        /// A sealed record for a plain space, or a plain one for a space that holds sealed records.
        case encryption
        /// A record whose seqs are no change's range (outside 1 ... `Change.maxSeq`, or ending
        /// before they start): the relay's pages and vectors could not hold it.
        case malformed
        /// The storage failed (I/O, a corrupt file).
        case failure
    }

    /// What kind of refusal.
    public var kind: Kind
    /// What happened.
    public var message: String

    /// An error.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// The message.
    public var description: String { message }
}

/// Where a relay keeps its spaces: `SQLiteRelayStorage` (one process, the default) and, for
/// several relay processes over one database, a PostgreSQL storage. The rules every storage keeps:
///
/// - every record's seqs are a range within 1 ... `Change.maxSeq`, or the append is refused
///   (`RelayStorageError.malformed`);
/// - per space and author, the stored records cover seqs 1...n without a gap; a record that ends
///   at or before n is a repeat and is not stored; one that starts past n + 1 would leave a gap and
///   refuses the whole append (`RelayStorageError.gap`); one that straddles n is stored whole (a
///   client cuts what it already has);
/// - an append is one transaction: all of its new records or none;
/// - a page is a consistent prefix: records in arrival order, each author's contiguous from what
///   the client has;
/// - records sent again (`appendAgain`) lie beside an author's chain, at seqs it covers: a page
///   for a client that lacks their last seq carries them too, marked `again`.
public protocol RelayStorage: Sendable {
    /// 16 bytes that identify this storage (its relay), made when it was created.
    var relayID: [UInt8] { get }
    /// Stores the records that extend what the space holds, in one transaction.
    ///
    /// - Returns: the indexes (into `records`) of those stored; the rest were repeats.
    func append(space: String, records: [RelayRecord]) async throws -> [Int]
    /// `append`, but a record that ends at or before what the space holds of its author is kept
    /// too, beside the author's chain (a copied replica's other branch, sent again by a client
    /// that holds it where a re-issue withdrew the branch the relay took first), unless a record
    /// with the same author, seqs and payload is stored already.
    ///
    /// - Returns: the indexes (into `records`) of those stored.
    func appendAgain(space: String, records: [RelayRecord]) async throws -> [Int]
    /// One page of the records a client at `clientVersion` lacks. A record whose arrival number
    /// `needsPayload` says no to comes with an empty payload (the caller has it decoded already).
    func page(space: String, after clientVersion: VersionVector, limits: RelayPageLimits,
              needsPayload: @escaping @Sendable (Int64) -> Bool) async throws -> RelayPage
    /// `append`, then `page` for a client at `clientVersion` (which sees what was just stored): one
    /// sync request's work, which a storage across a network may do in one round trip.
    func appendThenPage(space: String, records: [RelayRecord], after clientVersion: VersionVector, limits: RelayPageLimits,
                        needsPayload: @escaping @Sendable (Int64) -> Bool) async throws -> (stored: [Int], page: RelayPage)
    /// What the space holds.
    func status(space: String) async throws -> RelaySpaceStatus
    /// What the storage holds in all (for metrics); nil when it cannot say cheaply.
    func totals() async throws -> RelayTotals?
    /// The spaces whose stored changes grow, through this instance or (shared storage) others.
    var changes: RelayChangeSignals { get }
}

/// A stored record a page may carry, as a storage lists it before reading payloads.
package struct RelayPageCandidate: Sendable {
    package var id: Int64
    package var author: ReplicaID
    package var startSeq: UInt64
    package var endSeq: UInt64
    package var size: Int
    package var again: Bool

    package init(_ id: Int64, _ author: ReplicaID, _ startSeq: UInt64, _ endSeq: UInt64, _ size: Int, again: Bool = false) {
        self.id = id
        self.author = author
        self.startSeq = startSeq
        self.endSeq = endSeq
        self.size = size
        self.again = again
    }

    /// One page from per-author queues (each in seq order): merged by arrival, within the page's
    /// limits (the first record always fits); with the last seq delivered per author.
    package static func pick(_ queues: [[RelayPageCandidate]], limits: RelayPageLimits)
        -> (picked: [RelayPageCandidate], delivered: [ReplicaID: UInt64]) {
        var heads = [Int](repeating: 0, count: queues.count)
        var picked: [RelayPageCandidate] = []
        var bytes = 0
        var delivered: [ReplicaID: UInt64] = [:]
        while picked.count < limits.maxChanges {
            var best = -1
            for (index, queue) in queues.enumerated() where heads[index] < queue.count {
                if best < 0 || queue[heads[index]].id < queues[best][heads[best]].id { best = index }
            }
            guard best >= 0 else { break }
            let row = queues[best][heads[best]]
            if !picked.isEmpty, bytes + row.size > limits.maxBytes { break }
            picked.append(row)
            bytes += row.size
            heads[best] += 1
            delivered[row.author] = row.endSeq
        }
        return (picked, delivered)
    }
}

/// What a relay's storage holds in all: for its metrics.
public struct RelayTotals: Sendable, Hashable {
    /// Spaces holding at least one change.
    public var spaces: Int
    /// Changes stored.
    public var changes: Int
    /// Bytes of stored payloads.
    public var bytes: Int

    public init(spaces: Int, changes: Int, bytes: Int) {
        self.spaces = spaces
        self.changes = changes
        self.bytes = bytes
    }
}

extension RelayStorage {
    /// `append` (the default, for a storage that keeps one chain per author only: what is sent
    /// again at seqs it holds is not kept).
    public func appendAgain(space: String, records: [RelayRecord]) async throws -> [Int] {
        try await append(space: space, records: records)
    }

    /// What the storage holds in all; nil when it cannot say cheaply (the default).
    public func totals() async throws -> RelayTotals? { nil }

    /// `append`, then `page` (the default: two calls).
    public func appendThenPage(space: String, records: [RelayRecord], after clientVersion: VersionVector, limits: RelayPageLimits,
                               needsPayload: @escaping @Sendable (Int64) -> Bool) async throws -> (stored: [Int], page: RelayPage) {
        let stored = try await append(space: space, records: records)
        return (stored, try await page(space: space, after: clientVersion, limits: limits, needsPayload: needsPayload))
    }
}

/// Tells listeners which spaces' stored changes grew: the relay's live push waits on it.
///
/// A storage signals the appends made through it; a storage shared by several relay instances
/// (PostgreSQL) also signals the appends other instances made, as it learns of them. A signal
/// may be spurious or coalesced; a listener re-reads the space after one.
public final class RelayChangeSignals: Sendable {
    private let listeners = Mutex<[UInt64: AsyncStream<String>.Continuation]>([:])
    private let nextID = Atomic<UInt64>(0)

    public init() {}

    /// A new stream of space names, from now until the stream is dropped.
    public func stream() -> AsyncStream<String> {
        let id = nextID.add(1, ordering: .relaxed).newValue
        let (stream, continuation) = AsyncStream<String>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        continuation.onTermination = { [weak self] _ in _ = self?.listeners.withLock { $0.removeValue(forKey: id) } }
        listeners.withLock { $0[id] = continuation }
        return stream
    }

    /// Tells every listener that `space` changed.
    public func signal(_ space: String) {
        let current = listeners.withLock { Array($0.values) }
        for continuation in current { continuation.yield(space) }
    }
}

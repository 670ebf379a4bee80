/// For each replica, the highest sequence number applied from it. Because sequence numbers have no
/// gaps and changes are applied in causal order, this says exactly which operations a replica has.
public struct VersionVector: Hashable, Sendable, CustomStringConvertible {
    /// The entries; a replica that is absent has seq 0 (nothing applied).
    public private(set) var entries: [ReplicaID: UInt64]

    /// An empty vector: nothing applied.
    public init() { entries = [:] }

    /// A vector with the given entries (zero entries are dropped).
    public init(_ entries: [ReplicaID: UInt64]) {
        self.entries = entries.filter { $0.value > 0 }
    }

    /// The highest sequence number applied from `replica` (0 when none).
    public subscript(replica: ReplicaID) -> UInt64 {
        get { entries[replica] ?? 0 }
        set { entries[replica] = newValue == 0 ? nil : newValue }
    }

    /// Whether the operation with this identity is covered.
    public func contains(_ id: OpID) -> Bool { id.seq <= self[id.replica] }

    /// Whether nothing is covered.
    public var isEmpty: Bool { entries.isEmpty }

    /// Total number of operations covered.
    public var totalOperations: UInt64 { entries.values.reduce(0, +) }

    /// Raises every entry to at least the other vector's.
    ///
    /// - Complexity: O(*m*), where *m* is the number of entries in `other`.
    public mutating func merge(_ other: VersionVector) {
        for (replica, seq) in other.entries where seq > self[replica] { entries[replica] = seq }
    }

    /// The entry-wise maximum of the two vectors.
    public func merging(_ other: VersionVector) -> VersionVector {
        var copy = self
        copy.merge(other)
        return copy
    }

    /// How two vectors relate in causal order.
    public enum Ordering: Sendable, Equatable {
        case equal, before, after, concurrent
    }

    /// Compares two vectors: `.before` when every entry of `self` is at most `other`'s and they differ.
    public func compare(_ other: VersionVector) -> Ordering {
        var less = false
        var greater = false
        for replica in Set(entries.keys).union(other.entries.keys) {
            let a = self[replica]
            let b = other[replica]
            if a < b { less = true } else if a > b { greater = true }
        }
        switch (less, greater) {
        case (false, false): return .equal
        case (true, false): return .before
        case (false, true): return .after
        case (true, true): return .concurrent
        }
    }

    /// Whether every entry of `self` is at most the other's.
    public func isCovered(by other: VersionVector) -> Bool {
        entries.allSatisfy { $0.value <= other[$0.key] }
    }

    /// The operations that `other` has and `self` lacks, one range per replica, sorted by replica.
    public func missing(from other: VersionVector) -> [OpIDRange] {
        other.entries.compactMap { replica, seq -> OpIDRange? in
            let have = self[replica]
            return seq > have ? OpIDRange(replica: replica, seq: have + 1, count: seq - have) : nil
        }.sorted { $0.replica < $1.replica }
    }

    /// Entries sorted by replica, for stable output.
    public var sortedEntries: [(replica: ReplicaID, seq: UInt64)] {
        entries.sorted { $0.key < $1.key }.map { (replica: $0.key, seq: $0.value) }
    }

    public var description: String {
        "{" + sortedEntries.map { "\($0.replica.raw.hex.prefix(8)):\($0.seq)" }.joined(separator: ", ") + "}"
    }
}

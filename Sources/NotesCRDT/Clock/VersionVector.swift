/// For each replica, the highest sequence number applied from it. Because sequence numbers have no
/// gaps and changes are applied in causal order, this says exactly which operations a replica has.
public struct VersionVector: Hashable, Sendable, CustomStringConvertible {
    /// The nonzero entries, sorted by replica. A handful of replicas is the common case, so a
    /// sorted array beats a hash table here: no hashing on the hot path of every edit, equality is
    /// a memory comparison, and a copy that is not changed shares its storage.
    private(set) var storage: [Entry]

    struct Entry: Hashable, Sendable {
        var replica: ReplicaID
        var seq: UInt64
    }

    /// The entries; a replica that is absent has seq 0 (nothing applied).
    public var entries: [ReplicaID: UInt64] {
        Dictionary(uniqueKeysWithValues: storage.map { ($0.replica, $0.seq) })
    }

    /// An empty vector: nothing applied.
    public init() { storage = [] }

    /// A vector with the given entries (zero entries are dropped).
    public init(_ entries: [ReplicaID: UInt64]) {
        storage = entries.filter { $0.value > 0 }.map { Entry(replica: $0.key, seq: $0.value) }
            .sorted { $0.replica < $1.replica }
    }

    /// The number of replicas with a nonzero entry.
    public var count: Int { storage.count }

    /// Where `replica` is, or where it would be inserted.
    @inline(__always)
    private func slot(of replica: ReplicaID) -> (index: Int, found: Bool) {
        // Linear for the usual few entries, binary beyond.
        if storage.count <= 8 {
            for i in storage.indices {
                let r = storage[i].replica
                if r == replica { return (i, true) }
                if replica < r { return (i, false) }
            }
            return (storage.count, false)
        }
        var low = 0
        var high = storage.count
        while low < high {
            let mid = (low + high) / 2
            if storage[mid].replica < replica { low = mid + 1 } else { high = mid }
        }
        return (low, low < storage.count && storage[low].replica == replica)
    }

    /// The highest sequence number applied from `replica` (0 when none).
    public subscript(replica: ReplicaID) -> UInt64 {
        get {
            let (index, found) = slot(of: replica)
            return found ? storage[index].seq : 0
        }
        set {
            let (index, found) = slot(of: replica)
            if found {
                if newValue == 0 { storage.remove(at: index) } else if storage[index].seq != newValue { storage[index].seq = newValue }
            } else if newValue != 0 {
                // Entries usually come in order (a decoder reads them sorted): appending skips
                // the general insertion's range replacement.
                if index == storage.count {
                    storage.append(Entry(replica: replica, seq: newValue))
                } else {
                    storage.insert(Entry(replica: replica, seq: newValue), at: index)
                }
            }
        }
    }

    /// Adds an entry for a replica that sorts after every replica already here (a decoder reads
    /// entries in order; a seq of 0 adds nothing).
    ///
    /// - Returns: false (and changes nothing) when `replica` does not sort after the last entry.
    /// - Complexity: O(1).
    mutating func appendSorted(_ replica: ReplicaID, _ seq: UInt64) -> Bool {
        if let last = storage.last, !(last.replica < replica) { return false }
        if seq > 0 { storage.append(Entry(replica: replica, seq: seq)) }
        return true
    }

    /// Whether the operation with this identity is covered.
    public func contains(_ id: OpID) -> Bool { id.seq <= self[id.replica] }

    /// Whether nothing is covered.
    public var isEmpty: Bool { storage.isEmpty }

    /// Total number of operations covered, or `UInt64.max` when that does not fit (a vector
    /// heard from elsewhere may hold anything up to 2^64 - 1 per entry).
    public var totalOperations: UInt64 { UInt64.saturatingSum(storage.lazy.map(\.seq)) }

    /// How many operations `self` covers that `other` lacks, or `UInt64.max` when that does not fit.
    public func operationsMissing(from other: VersionVector) -> UInt64 {
        UInt64.saturatingSum(storage.lazy.map { entry in entry.seq - min(entry.seq, other[entry.replica]) })
    }

    /// Raises every entry to at least the other vector's.
    ///
    /// - Complexity: O(*m*), where *m* is the number of entries in `other`.
    public mutating func merge(_ other: VersionVector) {
        guard other.storage.count > 8 else {
            for entry in other.storage where entry.seq > self[entry.replica] { self[entry.replica] = entry.seq }
            return
        }
        // Both sorted: one walk over each, and nothing written when `other` adds nothing (a
        // page's vector of thousands of authors, merged for every record of the page, took a
        // binary search per entry).
        var i = 0
        var adds = false
        for entry in other.storage {
            while i < storage.count, storage[i].replica < entry.replica { i += 1 }
            if i == storage.count || storage[i].replica != entry.replica || storage[i].seq < entry.seq { adds = true; break }
        }
        guard adds else { return }
        var merged: [Entry] = []
        merged.reserveCapacity(storage.count + other.storage.count)
        i = 0
        for entry in other.storage {
            while i < storage.count, storage[i].replica < entry.replica { merged.append(storage[i]); i += 1 }
            if i < storage.count, storage[i].replica == entry.replica {
                merged.append(Entry(replica: entry.replica, seq: max(storage[i].seq, entry.seq)))
                i += 1
            } else {
                merged.append(entry)
            }
        }
        merged.append(contentsOf: storage[i...])
        storage = merged
    }

    /// The entry-wise maximum of the two vectors.
    public func merging(_ other: VersionVector) -> VersionVector {
        var copy = self
        copy.merge(other)
        return copy
    }

    /// How two vectors relate in causal order.
    public enum Ordering: Sendable, Equatable {
        /// `equal`: the same entries; `before`: the other has all `self` has and more; `after`: the
        /// reverse; `concurrent`: each has something the other lacks.
        case equal, before, after, concurrent
    }

    /// Compares two vectors: `.before` when every entry of `self` is at most `other`'s and they differ.
    public func compare(_ other: VersionVector) -> Ordering {
        var less = false
        var greater = false
        for entry in storage {
            let b = other[entry.replica]
            if entry.seq < b { less = true } else if entry.seq > b { greater = true }
        }
        if other.storage.contains(where: { self[$0.replica] == 0 }) { less = true }
        switch (less, greater) {
        case (false, false): return .equal
        case (true, false): return .before
        case (false, true): return .after
        case (true, true): return .concurrent
        }
    }

    /// Whether every entry of `self` is at most the other's.
    public func isCovered(by other: VersionVector) -> Bool {
        storage.allSatisfy { $0.seq <= other[$0.replica] }
    }

    /// The operations that `other` has and `self` lacks, one range per replica, sorted by replica.
    public func missing(from other: VersionVector) -> [OpIDRange] {
        other.storage.compactMap { entry -> OpIDRange? in
            let have = self[entry.replica]
            return entry.seq > have ? OpIDRange(replica: entry.replica, seq: have + 1, count: entry.seq - have) : nil
        }
    }

    /// Entries sorted by replica, for stable output.
    public var sortedEntries: [(replica: ReplicaID, seq: UInt64)] {
        storage.map { (replica: $0.replica, seq: $0.seq) }
    }

    /// The entries as `{replica:seq, ...}`, each replica shortened to 8 hexadecimal digits.
    public var description: String {
        "{" + sortedEntries.map { "\($0.replica.raw.hex.prefix(8)):\($0.seq)" }.joined(separator: ", ") + "}"
    }
}

extension UInt64 {
    /// The sum of `values`, or `UInt64.max` when it does not fit (for sums of counts heard from
    /// elsewhere, which may be anything).
    package static func saturatingSum(_ values: some Sequence<UInt64>) -> UInt64 {
        var total: UInt64 = 0
        for value in values {
            let (sum, overflow) = total.addingReportingOverflow(value)
            if overflow { return .max }
            total = sum
        }
        return total
    }
}

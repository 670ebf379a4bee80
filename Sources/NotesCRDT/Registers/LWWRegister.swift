/// A last-writer-wins register: holds the value of the write with the greatest
/// `(timestamp, replica, seq)`. Merging is commutative, associative and idempotent.
public struct LWWRegister<Value: Hashable & Sendable>: Hashable, Sendable {
    /// The winning value.
    public private(set) var value: Value
    /// The timestamp of the winning write.
    public private(set) var timestamp: Timestamp
    /// The identity of the winning write (its replica breaks timestamp ties).
    public private(set) var writer: OpID

    /// A register holding one write.
    public init(value: Value, timestamp: Timestamp, writer: OpID) {
        self.value = value
        self.timestamp = timestamp
        self.writer = writer
    }

    /// Whether a write stamped `(timestamp, writer)` beats the current one.
    public func isSuperseded(by timestamp: Timestamp, writer: OpID) -> Bool {
        if timestamp != self.timestamp { return timestamp > self.timestamp }
        if writer.replica != self.writer.replica, !CRDTTestHooks.lwwIgnoresReplicaOnTies { return writer.replica > self.writer.replica }
        return writer.seq > self.writer.seq
    }

    /// Applies a write; keeps the current value when the write loses.
    ///
    /// - Returns: whether the value changed hands.
    @discardableResult
    public mutating func set(_ value: Value, timestamp: Timestamp, writer: OpID) -> Bool {
        guard isSuperseded(by: timestamp, writer: writer) else { return false }
        self.value = value
        self.timestamp = timestamp
        self.writer = writer
        return true
    }

    /// Takes the other register's write if it wins.
    public mutating func merge(_ other: LWWRegister) {
        set(other.value, timestamp: other.timestamp, writer: other.writer)
    }

    /// The register holding the winner of the two.
    public func merging(_ other: LWWRegister) -> LWWRegister {
        var copy = self
        copy.merge(other)
        return copy
    }
}

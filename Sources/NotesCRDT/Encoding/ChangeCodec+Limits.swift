extension ChangeCodec {
    /// How much one decoding may hold, beyond what its bytes allow: what keeps a small hostile
    /// input from costing much memory or time once decoded and applied.
    ///
    /// Every count is also checked against the bytes left, so these matter where a few bytes
    /// decode to much more: a change header (5 bytes) to a change of a few hundred, an insert of
    /// one character to an operation and an array, a dependency (2 bytes) to a vector entry of
    /// 24, a delete (3 bytes) to a range of any length that applying walks. Docs/BundleFormat.md
    /// ("Limits") gives the values and why.
    public struct Limits: Hashable, Sendable {
        /// Entries in the replica table (and in a bundle's sender vector).
        public var maxReplicas: Int
        /// Entries in the note table.
        public var maxNotes: Int
        /// Changes.
        public var maxChanges: Int
        /// Dependency entries, summed over the changes.
        public var maxDependencies: Int
        /// Operation records plus the targets of deletes with several, summed over the changes.
        public var maxOperations: Int
        /// Inserted characters (Unicode scalars), summed over the changes.
        public var maxScalars: Int
        /// Characters named by deletes (a range counts its length, a run its deletes), summed over
        /// the changes: applying walks what they name.
        public var maxDeleteSpan: UInt64

        /// Limits with these values.
        public init(maxReplicas: Int, maxNotes: Int, maxChanges: Int, maxDependencies: Int, maxOperations: Int,
                    maxScalars: Int, maxDeleteSpan: UInt64) {
            self.maxReplicas = maxReplicas
            self.maxNotes = maxNotes
            self.maxChanges = maxChanges
            self.maxDependencies = maxDependencies
            self.maxOperations = maxOperations
            self.maxScalars = maxScalars
            self.maxDeleteSpan = maxDeleteSpan
        }

        /// No limit beyond the bytes: for what this replica wrote itself (its op log, its snapshot).
        public static let unlimited = Limits(maxReplicas: .max, maxNotes: .max, maxChanges: .max, maxDependencies: .max,
                                             maxOperations: .max, maxScalars: .max, maxDeleteSpan: .max)

        /// These limits less what one decoding `used` (at 0 where it took all of one).
        public func remaining(after used: Usage) -> Limits {
            Limits(maxReplicas: maxReplicas, maxNotes: maxNotes, maxChanges: max(0, maxChanges - used.changes),
                   maxDependencies: max(0, maxDependencies - used.dependencies), maxOperations: max(0, maxOperations - used.operations),
                   maxScalars: max(0, maxScalars - used.scalars), maxDeleteSpan: maxDeleteSpan - min(maxDeleteSpan, used.deleteSpan))
        }

        /// The limits of one bundle (a file, a relay request or answer): see Docs/BundleFormat.md.
        public static let bundle = Limits(maxReplicas: 1 << 16, maxNotes: 1 << 16, maxChanges: 1 << 15,
                                          maxDependencies: 1 << 20, maxOperations: 1 << 18, maxScalars: 1 << 22,
                                          maxDeleteSpan: 1 << 24)
    }

    /// What one decoding took of its limits (the counts a bundle's limits bound in all).
    public struct Usage: Hashable, Sendable {
        /// Changes.
        public var changes = 0
        /// Dependency entries.
        public var dependencies = 0
        /// Operation records plus the extra targets of multi-target deletes.
        public var operations = 0
        /// Inserted characters.
        public var scalars = 0
        /// Characters named by deletes.
        public var deleteSpan: UInt64 = 0

        /// Nothing used.
        public init() {}

        /// These counts.
        public init(changes: Int, dependencies: Int, operations: Int, scalars: Int, deleteSpan: UInt64) {
            self.changes = changes
            self.dependencies = dependencies
            self.operations = operations
            self.scalars = scalars
            self.deleteSpan = deleteSpan
        }
    }
}

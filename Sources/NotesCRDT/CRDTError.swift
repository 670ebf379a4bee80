/// An error from the CRDT core: a change that cannot be applied, a snapshot that cannot be read.
///
/// A struct with an extensible `code`, as in swift-nio's `FileSystemError`, so new cases do not
/// break callers that switch over codes.
public struct CRDTError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of problem it is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        /// A change refers to an operation (an origin, a deleted character) that does not exist.
        public static let unknownReference = Code("unknownReference")
        /// A change is not well formed (empty, overlapping its own replica's history, bad sizes).
        public static let malformedChange = Code("malformedChange")
        /// Encoded bytes are truncated or inconsistent.
        public static let malformedEncoding = Code("malformedEncoding")
        /// Encoded bytes hold more than a decoder takes (`ChangeCodec.Limits`).
        public static let limitExceeded = Code("limitExceeded")
        /// A note or tag that the caller named does not exist.
        public static let notFound = Code("notFound")
        /// A position or range outside the text.
        public static let outOfBounds = Code("outOfBounds")
        /// A change holds different operations for seqs this replica already has from the same
        /// author: two copies of one replica wrote them (a copied or restored database).
        public static let equivocation = Code("equivocation")
        /// The code's name (e.g. `unknownReference`).
        public var description: String { name }

        /// The code with this name (`description`), for one read back from storage; nil for a
        /// name this build does not know.
        public init?(named name: String) {
            let known: [Code] = [.unknownReference, .malformedChange, .malformedEncoding, .limitExceeded, .notFound, .outOfBounds, .equivocation]
            guard let code = known.first(where: { $0.name == name }) else { return nil }
            self = code
        }
    }

    /// The kind of problem.
    public var code: Code
    /// A sentence that says what is wrong.
    public var message: String

    /// Creates an error.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The message.
    public var description: String { message }
}

import GRDB

/// An error from the store: a file that is not a replica, a schema from a newer version, a note
/// that does not exist, a database that cannot be written.
///
/// A struct with an extensible `code` (as swift-nio's `FileSystemError`), a sentence for people,
/// and the underlying cause as text. GRDB's and SQLite's error types never cross the public API.
public struct StoreError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of problem it is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        /// The file exists but is not a crdt-sync replica database.
        public static let notAReplica = Code("notAReplica")
        /// The database was written by a newer version of crdt-sync (an unknown migration).
        public static let newerSchema = Code("newerSchema")
        /// There is no replica database at the path (and creating one was not asked for).
        public static let noReplica = Code("noReplica")
        /// The database or its folder cannot be written.
        public static let readOnly = Code("readOnly")
        /// The database file cannot be opened or created.
        public static let cannotOpen = Code("cannotOpen")
        /// Another process held the database for longer than the busy timeout.
        public static let busy = Code("busy")
        /// A note named by the caller does not exist.
        public static let notFound = Code("notFound")
        /// An id prefix names more than one note.
        public static let ambiguous = Code("ambiguous")
        /// An argument is out of range or malformed (an offset, a tag name, a search query).
        public static let invalidArgument = Code("invalidArgument")
        /// A change from elsewhere is malformed or refers to things that do not exist.
        public static let invalidChange = Code("invalidChange")
        /// The stored data cannot be decoded.
        public static let corrupt = Code("corrupt")
        /// Any other database failure.
        public static let database = Code("database")
        /// The code's name (e.g. `corrupt`).
        public var description: String { name }
    }

    /// The kind of problem.
    public var code: Code
    /// A sentence that says what is wrong.
    public var message: String
    /// The underlying cause, as text (an SQLite message), if any.
    public var underlying: String?

    /// Creates an error.
    public init(_ code: Code, _ message: String, underlying: String? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    /// The message, followed by the underlying cause when the message does not already include it.
    public var description: String {
        guard let underlying, !message.contains(underlying) else { return message }
        return "\(message) (\(underlying))"
    }
}

extension StoreError {
    /// Wraps any error thrown inside the store into a `StoreError`, keeping store and core errors'
    /// meaning and turning SQLite result codes into codes.
    static func wrap(_ error: any Error, _ context: @autoclosure () -> String) -> StoreError {
        switch error {
        case let error as StoreError:
            return error
        case let error as CRDTError:
            return StoreError(core: error)
        case is RowDecodingError:
            return wrongType(error)
        case let error as DatabaseError:
            let sqliteMessage = error.message ?? "\(error.resultCode)"
            switch error.resultCode.primaryResultCode {
            case .SQLITE_READONLY:
                return StoreError(.readOnly, "\(context()): the database is read-only", underlying: sqliteMessage)
            case .SQLITE_BUSY, .SQLITE_LOCKED:
                return StoreError(.busy, "\(context()): the database is busy (another process holds it)", underlying: sqliteMessage)
            case .SQLITE_NOTADB:
                return StoreError(.notAReplica, "\(context()): the file is not a database", underlying: sqliteMessage)
            case .SQLITE_CORRUPT:
                return StoreError(.corrupt, "\(context()): the database is corrupt", underlying: sqliteMessage)
            case .SQLITE_CANTOPEN, .SQLITE_PERM, .SQLITE_AUTH:
                return StoreError(.cannotOpen, "\(context()): cannot open the database", underlying: sqliteMessage)
            case .SQLITE_FULL, .SQLITE_IOERR:
                return StoreError(.database, "\(context()): disk I/O failed", underlying: sqliteMessage)
            default:
                return StoreError(.database, "\(context())", underlying: sqliteMessage)
            }
        default:
            return StoreError(.database, "\(context())", underlying: "\(error)")
        }
    }
}

import NotesCRDT

extension StoreError {
    /// The store error that a core error means.
    init(core error: CRDTError) {
        let code: StoreError.Code
        switch error.code {
        case .notFound: code = .notFound
        case .outOfBounds: code = .invalidArgument
        case .malformedEncoding: code = .corrupt
        default: code = .invalidChange
        }
        self.init(code, error.message)
    }
}

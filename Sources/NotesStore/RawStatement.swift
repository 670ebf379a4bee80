import GRDB
import GRDBSQLite

/// A value bound to a statement parameter by `Statement.run(_:)`.
enum SQLValue {
    case int(Int64)
    case text(String)
    case optionalText(String?)
    case blob([UInt8])

    static func bool(_ value: Bool) -> SQLValue { .int(value ? 1 : 0) }
}

/// SQLite's "copy the bytes now" destructor (`SQLITE_TRANSIENT`), which the C header spells as a cast.
private let transient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)

extension Statement {
    /// Runs a statement that returns no rows (an INSERT, UPDATE or DELETE of the write path, and
    /// the store's BEGIN and COMMIT) with these values bound by position, through the SQLite C API.
    ///
    /// GRDB's `execute(arguments:)` turns each value into an existential, validates the arguments
    /// against the statement, and notifies its observers before and after every statement, work
    /// a keystroke would pay on every row. The store uses no GRDB
    /// observation; only ROLLBACK still goes through GRDB (see `NoteStore.transaction`). The
    /// values must be as many as the statement's parameters (checked).
    ///
    /// - Throws: GRDB's `DatabaseError` with SQLite's code and message, as `execute` would.
    func run(_ values: SQLValue...) throws {
        try start(values)
        let handle = sqliteStatement
        var code = sqlite3_step(handle)
        while code == SQLITE_ROW { code = sqlite3_step(handle) }
        try finish(code)
    }

    /// Runs a query with these values bound by position, through the SQLite C API, and calls
    /// `body` with the statement for each row (read its columns with `SQLColumn`).
    func forEachRow(_ values: SQLValue..., body: (OpaquePointer) throws -> Void) throws {
        try forEachRow(values, body: body)
    }

    /// `forEachRow(_:body:)` with the values as an array (a query whose parameters vary).
    func forEachRow(_ values: [SQLValue], body: (OpaquePointer) throws -> Void) throws {
        try start(values)
        let handle = sqliteStatement
        var code = sqlite3_step(handle)
        while code == SQLITE_ROW {
            do {
                try body(handle)
            } catch {
                sqlite3_reset(handle)
                sqlite3_clear_bindings(handle)
                throw error
            }
            code = sqlite3_step(handle)
        }
        try finish(code)
    }

    /// Resets the statement and binds the values.
    private func start(_ values: [SQLValue]) throws {
        let handle = sqliteStatement
        sqlite3_reset(handle)
        precondition(Int(sqlite3_bind_parameter_count(handle)) == values.count,
                     "\(values.count) values for a statement with \(sqlite3_bind_parameter_count(handle)) parameters: \(sql)")
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let code: Int32
            switch value {
            case .int(let number):
                code = sqlite3_bind_int64(handle, index, number)
            case .text(let string), .optionalText(let string?):
                code = Self.bind(string, handle, index)
            case .optionalText(nil):
                code = sqlite3_bind_null(handle, index)
            case .blob(let bytes):
                code = bytes.withUnsafeBytes { buffer in
                    buffer.isEmpty ? sqlite3_bind_zeroblob(handle, index, 0)
                                   : sqlite3_bind_blob(handle, index, buffer.baseAddress, Int32(buffer.count), transient)
                }
            }
            guard code == SQLITE_OK else {
                let error = failure(code)
                sqlite3_clear_bindings(handle)
                throw error
            }
        }
    }

    /// After the last step: the statement is reset and holds no values (no copies of them are kept
    /// longer than needed, and it is ready for GRDB or the next run); an error is thrown as GRDB would.
    private func finish(_ code: Int32) throws {
        let handle = sqliteStatement
        let error = code == SQLITE_DONE ? nil : failure(code)
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        if let error { throw error }
    }

    private static func bind(_ string: String, _ handle: OpaquePointer, _ index: Int32) -> Int32 {
        var string = string
        return string.withUTF8 { buffer in
            // An empty buffer may have no address, which SQLite would bind as NULL: bind "" instead.
            guard let base = buffer.baseAddress, buffer.count > 0 else { return sqlite3_bind_text(handle, index, "", 0, transient) }
            return base.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                sqlite3_bind_text(handle, index, $0, Int32(buffer.count), transient)
            }
        }
    }

    private func failure(_ code: Int32) -> DatabaseError {
        let message = sqlite3_db_handle(sqliteStatement).flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) }
        return DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: sql)
    }
}

/// Reading a column of the current row of a statement run by `Statement.forEachRow`.
enum SQLColumn {
    /// The whole text, by its byte count: a note's text may hold U+0000 (from any device), where
    /// `String(cString:)`, which GRDB's `String` reads with, stops.
    static func text(_ handle: OpaquePointer, _ index: Int32) -> String {
        guard let text = sqlite3_column_text(handle, index) else { return "" }
        return String(decoding: UnsafeBufferPointer(start: text, count: Int(sqlite3_column_bytes(handle, index))), as: UTF8.self)
    }

    static func optionalText(_ handle: OpaquePointer, _ index: Int32) -> String? {
        sqlite3_column_type(handle, index) == SQLITE_NULL ? nil : text(handle, index)
    }

    static func int(_ handle: OpaquePointer, _ index: Int32) -> Int64 {
        sqlite3_column_int64(handle, index)
    }

    static func blob(_ handle: OpaquePointer, _ index: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(handle, index))
        guard count > 0, let bytes = sqlite3_column_blob(handle, index) else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }
}

extension Database {
    /// The rowid of the last row inserted on this connection, from SQLite (GRDB's
    /// `lastInsertedRowID` first checks which dispatch queue it runs on, at every call; the
    /// write path reads it after every log row and new chunk).
    var lastRowID: Int64 { sqlite3_last_insert_rowid(sqliteConnection) }
}

import GRDB

/// Reading a column of a row the store fetched. GRDB's subscript stops the process when a value
/// has another type than the one asked for; a damaged or foreign file may hold any value in any
/// column, so the store reads through these, which throw a `.corrupt` error instead.
extension Row {
    func stored<Value: DatabaseValueConvertible>(_ index: Int, as type: Value.Type = Value.self) throws -> Value {
        do { return try decode(Value.self, atIndex: index) } catch { throw StoreError.wrongType(error) }
    }

    func stored<Value: DatabaseValueConvertible>(_ column: String, as type: Value.Type = Value.self) throws -> Value {
        do { return try decode(Value.self, forColumn: column) } catch { throw StoreError.wrongType(error) }
    }

    /// A note's text selected as a BLOB (`CAST(column AS BLOB)`), read whole: text from other
    /// devices may hold U+0000, where GRDB's `String`, read through `String(cString:)`, stops.
    func storedText(_ index: Int) throws -> String {
        let value: DatabaseValue = self[index]
        switch value.storage {
        case .blob(let data): return String(decoding: data, as: UTF8.self)
        case .string(let string): return string
        default: return try stored(index, as: String.self)  // (throws: a NULL or a number is corrupt)
        }
    }

    /// `storedText(_:)` for a column that may be NULL.
    func storedOptionalText(_ index: Int) throws -> String? {
        (self[index] as DatabaseValue).isNull ? nil : try storedText(index)
    }

    /// A column that holds a time, a seq or a count: a negative value is as corrupt as text.
    func storedUnsigned(_ index: Int) throws -> UInt64 {
        try NoteStore.unsigned(try stored(index, as: Int64.self), what: columnName(index))
    }

    func storedUnsigned(_ column: String) throws -> UInt64 {
        try NoteStore.unsigned(try stored(column, as: Int64.self), what: column)
    }

    /// Two columns that hold the first and last seq of a range: one that ends before it starts
    /// would trap when made.
    func storedSeqs(_ start: Int, _ end: Int) throws -> ClosedRange<UInt64> {
        let first = try storedUnsigned(start)
        let last = try storedUnsigned(end)
        guard first <= last else {
            throw StoreError(.corrupt, "the database holds seqs \(first)-\(last) in '\(columnName(start))' and '\(columnName(end))', which end before they start: the file was not written by crdt-sync, or was altered")
        }
        return first ... last
    }

    private func columnName(_ index: Int) -> String {
        index < columnNames.count ? columnNames[columnNames.index(columnNames.startIndex, offsetBy: index)] : "column \(index)"
    }
}

extension NoteStore {
    /// A stored integer that must not be negative (a time, a seq, a count).
    static func unsigned(_ value: Int64, what: String) throws -> UInt64 {
        guard value >= 0 else {
            throw StoreError(.corrupt, "the database holds \(value) in '\(what)', which cannot be negative: the file was not written by crdt-sync, or was altered")
        }
        return UInt64(value)
    }
}

extension StoreError {
    /// The error for a stored value of another type than its column's.
    static func wrongType(_ error: any Error) -> StoreError {
        if let error = error as? StoreError { return error }
        var detail = "\(error)"
        if detail.count > 300 { detail = String(detail.prefix(300)) + "…" }
        return StoreError(.corrupt, "the database holds a value of another type than its column's: the file was not written by crdt-sync, or was altered",
                          underlying: detail)
    }
}

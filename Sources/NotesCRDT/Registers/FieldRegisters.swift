/// A note's field registers, sorted by field, in one exactly sized array.
///
/// A note has a handful of fields; a dictionary of them took a table of 8 buckets per note (about
/// 460 bytes, 37 MB of an 80,000-note notebook). Lookups scan the few entries.
struct FieldRegisters: Sendable, Equatable, Sequence {
    typealias Element = (key: NoteField, value: LWWRegister<FieldValue>)

    private var storage: [Element] = []

    init() {}

    var count: Int { storage.count }
    var isEmpty: Bool { storage.isEmpty }
    var keys: LazyMapSequence<[Element], NoteField> { storage.lazy.map(\.key) }

    /// Where `key` is, or where it would go: a scan of the few fields most notes have, a binary
    /// search past them (a note of 10,000 tags took a scan per write, and seconds to load).
    @inline(__always)
    private func slot(of key: NoteField) -> (index: Int, found: Bool) {
        guard storage.count > 8 else {
            for i in storage.indices {
                let k = storage[i].key
                if k == key { return (i, true) }
                if key < k { return (i, false) }
            }
            return (storage.count, false)
        }
        return binarySlot(of: key)
    }

    private func binarySlot(of key: NoteField) -> (index: Int, found: Bool) {
        // Read in order (a snapshot's, a bundle's tags sorted): the slot past the last.
        if let last = storage.last?.key, last < key { return (storage.count, false) }
        var low = 0
        var high = storage.count
        while low < high {
            let middle = low + (high - low) / 2
            let k = storage[middle].key
            if k == key { return (middle, true) }
            if k < key { low = middle + 1 } else { high = middle }
        }
        return (low, false)
    }

    subscript(key: NoteField) -> LWWRegister<FieldValue>? {
        get {
            let (index, found) = slot(of: key)
            return found ? storage[index].value : nil
        }
        set {
            let (index, found) = slot(of: key)
            switch (found, newValue) {
            case (true, let value?): storage[index].value = value
            case (true, nil): storage.remove(at: index)
            case (false, let value?):
                // Grown one entry at a time up to 8: doubling would leave most notes half empty.
                if storage.count == storage.capacity, storage.count < 8 { storage.reserveCapacity(storage.count + 1) }
                storage.insert((key, value), at: index)
            case (false, nil): break
            }
        }
    }

    /// Applies a write to the field's register, creating it if needed. Returns whether it won.
    mutating func write(_ key: NoteField, _ value: FieldValue, _ timestamp: Timestamp, _ writer: OpID) -> Bool {
        let (index, found) = slot(of: key)
        if found { return storage[index].value.set(value, timestamp: timestamp, writer: writer) }
        self[key] = LWWRegister(value: value, timestamp: timestamp, writer: writer)
        return true
    }

    func makeIterator() -> IndexingIterator<[Element]> { storage.makeIterator() }

    static func == (lhs: FieldRegisters, rhs: FieldRegisters) -> Bool {
        lhs.storage.count == rhs.storage.count
            && zip(lhs.storage, rhs.storage).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }
}

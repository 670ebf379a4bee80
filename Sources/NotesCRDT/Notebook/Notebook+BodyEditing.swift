/// Many edits of one note's body in one batch: what an editor sends when it saves a burst of
/// typing, or what a replay of a recorded session does (the counterpart of a Yrs transaction or a
/// Loro commit).
///
/// Obtained from `Notebook.editBody(_:_:)`. Each edit takes effect at once (positions of the next
/// edit refer to the text after the previous one), but the edits are stamped, logged and counted
/// as one change: no `Change` value per keystroke, no lookup of the note per keystroke.
public struct BodyEditor {
    /// The text being edited, moved out of the note's record for the batch (so it is uniquely
    /// referenced and edited in place).
    var text: RGAText
    let note: NoteID
    let replica: ReplicaID
    /// The sequence number and key the next edit takes.
    var nextSeq: UInt64
    var nextKey: UInt64
    /// Where the change being built starts (nil before the first edit).
    var changeStart: (seq: UInt64, key: UInt64)?
    var operations: [Operation] = []
    /// The insert being built: consecutive typing joins into one operation.
    var runOrigin: OpID?
    var runText = InsertedText()
    /// The deletes of one target each being gathered into one `deleteEach`.
    var deletes = GatheredDeletes()
    /// The changes finished so far (a batch splits only when an edit must jump its key above
    /// characters stamped by a clock that ran far ahead).
    var finished: [(start: (seq: UInt64, key: UInt64), operations: [Operation])] = []
    /// The replica's clock and wall time, to stamp the first edit of the batch.
    let clock: HybridLogicalClock
    let wallMilliseconds: UInt64

    /// The number of visible Unicode scalars.
    public var count: Int { text.count }

    /// The visible text.
    ///
    /// - Complexity: O(*n*).
    public var string: String { text.string }

    /// Inserts text at a Unicode-scalar offset.
    ///
    /// - Complexity: O(log *n*) in the body's length, plus the inserted text.
    public mutating func insert(_ string: String, at offset: Int) throws {
        guard offset >= 0, offset <= text.count else {
            throw CRDTError(.outOfBounds, "offset \(offset) is outside the body (0...\(text.count))")
        }
        // A keystroke is usually one ASCII character: no scalar decoding, no array.
        let utf8 = string.utf8
        if utf8.count == 1, let byte = utf8.first, byte < 0x80 {
            let scalar = Unicode.Scalar(byte)
            insert(at: offset) { $0.append(scalar) }
        } else if !utf8.isEmpty {
            insert(at: offset) { $0.append(scalarsOf: string) }
        }
    }

    /// Inserts at an offset already checked the scalars `add` appends to the run being built (so a
    /// string's scalars are decoded once, straight into the run, then copied into the text).
    @inline(__always)
    private mutating func insert(at offset: Int, _ add: (inout InsertedText) -> Void) {
        let context = text.insertContext(at: offset)
        // The characters must sort before every existing child of their origin, so they land where
        // they were typed: keys above the origin's and its first child's.
        let floor = max(context.originKey.map { $0 + 1 } ?? 0, context.firstChildKey.map { $0 + 1 } ?? 0)
        startChange(floor: floor)
        let id = OpID(replica: replica, seq: nextSeq)
        if runText.isEmpty || context.origin != OpID(replica: replica, seq: nextSeq - 1) {
            flushRun()
            runOrigin = context.origin
        }
        let before = runText.count
        add(&runText)
        // Read in place (a second reference to `runText`'s buffer cost a retain and a release per
        // keystroke), widened when it is compact; a keystroke's one scalar as it is.
        let key = nextKey
        if runText.count - before == 1 {
            text.integrate(id: id, context: context, key: key, scalars: CollectionOfOne(runText[before]))
        } else {
            runText.withScalars(in: before ..< runText.count) { added in
                text.integrate(id: id, context: context, key: key, scalars: added)
            }
        }
        let length = UInt64(runText.count - before)
        nextSeq += length
        nextKey += length
    }

    /// Deletes the Unicode scalars in `range`.
    ///
    /// - Complexity: O(log *n* + runs in the range).
    public mutating func delete(_ range: Range<Int>) throws {
        guard range.lowerBound >= 0, range.upperBound <= text.count else {
            throw CRDTError(.outOfBounds, "range \(range) is outside the body (0..<\(text.count))")
        }
        guard !range.isEmpty else { return }
        startChange(floor: 0)
        flushInsert()
        let targets = text.deleteVisible(range)
        if targets.count == 1 {
            deletes.add(targets[0], in: note, array: targets)
        } else {
            flushDeletes()
            operations.append(.deleteText(note: note, targets: targets))
        }
        nextSeq += 1
        nextKey += 1
    }

    /// Replaces the scalars in `range` by `string`: a delete, then an insert where the range was.
    public mutating func replace(_ range: Range<Int>, with string: String) throws {
        try delete(range)
        try insert(string, at: range.lowerBound)
    }

    /// Makes sure a change is open whose next key is at least `floor`, finishing the open one and
    /// starting another at `floor` when it is below.
    private mutating func startChange(floor: UInt64) {
        if changeStart == nil {
            var clock = self.clock
            nextKey = max(clock.tick(wallMilliseconds: wallMilliseconds).rawValue, floor)
            changeStart = (nextSeq, nextKey)
        } else if nextKey < floor {
            finishChange()
            nextKey = floor
            changeStart = (nextSeq, nextKey)
        }
    }

    private mutating func flushDeletes() {
        if let op = deletes.take() { operations.append(op) }
    }

    /// Logs what is gathered (an insert or a run of deletes: never both, each flushes the other).
    private mutating func flushRun() {
        flushDeletes()
        flushInsert()
    }

    private mutating func flushInsert() {
        guard !runText.isEmpty else { return }
        operations.append(.insertText(note: note, origin: runOrigin, text: runText))
        runText = InsertedText()
        runOrigin = nil
    }

    mutating func finishChange() {
        flushRun()
        guard let start = changeStart, !operations.isEmpty else { return }
        finished.append((start, operations))
        operations = []
        changeStart = nil
    }
}

extension Notebook {
    /// Edits a note's body in one batch: `edits` inserts and deletes through the editor, each at
    /// once, and they are logged as one change (two, rarely: see `BodyEditor`).
    ///
    /// An edit that throws (an offset outside the text) changes nothing; the edits before it stay
    /// made and logged, and the error is rethrown.
    ///
    /// - Returns: the changes made (none when the batch made no edit).
    @discardableResult
    public mutating func editBody(_ note: NoteID, _ edits: (inout BodyEditor) throws -> Void) throws -> [Change] {
        materialize()
        guard notes.index(forKey: note) != nil else { throw CRDTError(.notFound, "no note \(note)") }
        // Move the text out, so the editor holds the only reference and edits it in place.
        var text = RGAText.placeholder
        swap(&text, &notes[note]!.body)
        var editor = BodyEditor(text: consume text, note: note, replica: replicaID,
                                nextSeq: versionVector[replicaID] + 1, nextKey: 0,
                                clock: clock, wallMilliseconds: wallClock.milliseconds())
        var failure: (any Error)?
        do { try edits(&editor) } catch { failure = error }
        editor.finishChange()
        let dependencies = localDependencies()
        var changes: [Change] = []
        let wall = wallClock.milliseconds()
        for (start, operations) in editor.finished {
            let change = Change(replica: replicaID, startSeq: start.seq, timestamp: Timestamp(rawValue: start.key),
                                dependencies: dependencies, operations: operations)
            versionVector[replicaID] = change.endSeq
            // No further than the drift bound: keys that jumped above far-future text stay this batch's.
            clock.observe(change.timestamp(ofSeq: change.endSeq), wallMilliseconds: wall)
            record(change)
            changes.append(change)
        }
        let index = notes.index(forKey: note)!  // one lookup for the writes below
        notes.values[index].body = editor.text
        if let last = changes.last {
            notes.values[index].touch(last.timestamp(ofSeq: last.endSeq))
            notes.values[index].edits.raise(replicaID, to: last.endSeq)
            notes.values[index].touched.raise(replicaID, to: last.endSeq)
        }
        if let failure { throw failure }
        return changes
    }
}

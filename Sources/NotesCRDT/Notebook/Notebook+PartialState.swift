/// The state of one note, and of the replica around it, as bytes a store keeps per note: so that
/// a local edit of one note can run on a replica that holds that note only (a partial replica),
/// instead of loading every note and the whole log first.
///
/// A partial replica (`Notebook(partialReplica:tags:notes:)`) makes the same local changes, with
/// the same seqs, timestamps and dependencies, as the whole replica would: those read only the
/// clock, the version vector, the tags, and the edited note's fields, body and rule state. It
/// keeps no log before its own changes and cannot apply changes from elsewhere (their conflict
/// check reads the log); a store applies those to the whole replica.
extension Notebook {
    /// The version byte of the encodings below.
    static let partialStateVersion: UInt8 = 1

    /// The replica-wide part: clock, drift bound and version vector.
    package func encodedReplicaState() -> [UInt8] {
        var writer = BinaryWriter()
        writer.byte(Notebook.partialStateVersion)
        writer.varint(clock.last.rawValue)
        writer.varint(clock.maxForwardDrift)
        writer.varint(latestTimestamp.rawValue)
        writer.versionVector(versionVector)
        return writer.bytes
    }

    /// Every tag entity's fields.
    package func encodedTagState() -> [UInt8] {
        var writer = BinaryWriter()
        writer.byte(Notebook.partialStateVersion)
        Notebook.encode(tagRecords, &writer)
        return writer.bytes
    }

    /// One note's whole CRDT state: its field registers, when it last changed, what the delete and
    /// conflict rules keep, and its body with every character's identity, key, origin and
    /// tombstone; nil for an unknown note (or a replica whose log is deferred). A checksum ends it.
    package func encodedNoteState(_ id: NoteID) -> [UInt8]? {
        guard deferred == nil, let record = notes[id] else { return nil }
        var writer = BinaryWriter()
        writer.byte(Notebook.partialStateVersion)
        writer.varint(record.updatedAt.rawValue)
        Notebook.encodeFields(record, &writer)
        Notebook.encodeHistoryState(record, &writer)
        let tree = record.body.tree
        writer.varint(UInt64(tree.agents.count))
        for agent in tree.agents { writer.raw(agent.raw.bytes) }
        let runs = tree.allRuns()
        writer.varint(UInt64(runs.count))
        var text: [Unicode.Scalar] = []
        text.reserveCapacity(tree.totalCharacters)
        for run in runs {
            writer.varint(UInt64(run.agent))
            writer.varint(run.seq)
            writer.varint(run.key)
            writer.varint(UInt64(run.originAgent + 1))
            writer.varint(run.originSeq)
            writer.varint(UInt64(run.length))
            writer.byte(run.deleted ? 1 : 0)
            text.append(contentsOf: tree.arena[run.content ..< run.content + Int(run.length)])
        }
        writer.string(String(String.UnicodeScalarView(text)))
        let checksum = Notebook.checksum(writer.bytes[...])
        for shift in stride(from: 0, to: 64, by: 8) { writer.byte(UInt8(truncatingIfNeeded: checksum >> UInt64(shift))) }
        return writer.bytes
    }

    /// A partial replica: the replica-wide state and tags as `encodedReplicaState()` and
    /// `encodedTagState()` wrote them, and the notes given (each as `encodedNoteState`).
    ///
    /// - Throws: `.malformedEncoding` when any part is damaged.
    package init(partialReplica replicaID: ReplicaID, wallClock: any WallClock, replicaState: [UInt8],
                 tags tagState: [UInt8], notes noteStates: [(NoteID, [UInt8])]) throws {
        var reader = BinaryReader(replicaState)
        guard try reader.byte() == Notebook.partialStateVersion else {
            throw CRDTError(.malformedEncoding, "the replica state has an unknown version")
        }
        let last = Timestamp(rawValue: try reader.varint())
        let drift = try reader.varint()
        let latest = Timestamp(rawValue: try reader.varint())
        self.init(replicaID: replicaID, wallClock: wallClock, maxForwardDrift: drift)
        versionVector = try reader.versionVector()
        guard reader.isAtEnd else { throw CRDTError(.malformedEncoding, "unexpected bytes after the replica state") }
        // The clock the whole replica would have: loading it replays every change, observing
        // each timestamp against the wall clock now.
        latestTimestamp = latest
        clock.witnessLocal(last)
        if latest > clock.last { clock.observe(latest, wallMilliseconds: wallClock.milliseconds()) }

        reader = BinaryReader(tagState)
        guard try reader.byte() == Notebook.partialStateVersion else {
            throw CRDTError(.malformedEncoding, "the tag state has an unknown version")
        }
        tagRecords = try Notebook.decodeTags(&reader)
        guard reader.isAtEnd else { throw CRDTError(.malformedEncoding, "unexpected bytes after the tag state") }
        for (id, bytes) in noteStates { notes[id] = try Notebook.decodeNoteState(bytes) }
        isPartial = true
    }

    /// Adds a note, as `encodedNoteState` wrote it, to a partial replica.
    package mutating func insertNoteState(_ id: NoteID, _ bytes: [UInt8]) throws {
        precondition(isPartial, "only a partial replica takes notes one at a time")
        notes[id] = try Notebook.decodeNoteState(bytes)
    }

    /// What differs between this replica's state of a note and a stored one (`encodedNoteState`
    /// bytes), as CRDT state: fields, rule state, every character; nil when nothing does. (Two
    /// equal states may cut the text into runs differently, so their bytes may differ.)
    package func noteStateDifference(_ id: NoteID, _ bytes: [UInt8]) -> String? {
        guard let mine = notes[id] else { return "the replica does not know the note" }
        let theirs: NoteRecord
        do { theirs = try Notebook.decodeNoteState(bytes) } catch { return "the stored state cannot be read: \(error)" }
        if mine.fields != theirs.fields { return "fields" }
        if mine.updatedAt != theirs.updatedAt { return "last change" }
        if mine.edits != theirs.edits || mine.touched != theirs.touched { return "edit vectors" }
        if mine.deleteContext != theirs.deleteContext { return "delete context" }
        if mine.conflicts.sorted() != theirs.conflicts.sorted() { return "conflicts" }
        return mine.body.structureDifference(from: theirs.body).map { "body: \($0)" }
    }

    /// Whether the replica holds this note.
    package func holds(_ id: NoteID) -> Bool { notes[id] != nil }

    static func decodeNoteState(_ bytes: [UInt8]) throws -> NoteRecord {
        guard bytes.count > 9 else { throw CRDTError(.malformedEncoding, "a note state is truncated") }
        var stored: UInt64 = 0
        for (i, byte) in bytes[(bytes.count - 8)...].enumerated() { stored |= UInt64(byte) << UInt64(8 * i) }
        guard Notebook.checksum(bytes[..<(bytes.count - 8)]) == stored else {
            throw CRDTError(.malformedEncoding, "a note state is damaged (checksum mismatch)")
        }
        var reader = BinaryReader(Array(bytes[..<(bytes.count - 8)]))
        guard try reader.byte() == Notebook.partialStateVersion else {
            throw CRDTError(.malformedEncoding, "a note state has an unknown version")
        }
        var record = NoteRecord()
        record.updatedAt = Timestamp(rawValue: try reader.varint())
        try Notebook.decodeFields(into: &record, &reader)
        try Notebook.decodeHistoryState(into: &record, &reader)
        var tree = RGATree()
        for _ in 0 ..< (try reader.count(max: reader.remaining / 16, "a body's agent count")) {
            let agent = ReplicaID(Identifier128(bytes: try reader.raw(16))!)
            guard tree.existingAgent(agent) == nil else { throw CRDTError(.malformedEncoding, "a body names an agent twice") }
            _ = tree.agent(for: agent)
        }
        let agentCount = UInt64(tree.agents.count)
        var runs: [RGATree.Run] = []
        var content = 0
        for _ in 0 ..< (try reader.count(max: reader.remaining / 7, "a body's run count")) {
            let agent = try reader.varint()
            let seq = try reader.varint()
            let key = try reader.varint()
            let originAgent = try reader.varint()
            let originSeq = try reader.varint()
            let length = try reader.varint()
            let deleted = try reader.byte()
            guard agent < agentCount, originAgent <= agentCount, length > 0, length <= UInt64(Int32.max),
                  seq <= UInt64.max - length, key <= UInt64.max - length, deleted <= 1 else {
                throw CRDTError(.malformedEncoding, "a body run is out of range")
            }
            runs.append(RGATree.Run(seq: seq, key: key, originSeq: originSeq, content: content, agent: Int32(agent),
                                    originAgent: Int32(originAgent) - 1, length: Int32(length), deleted: deleted == 1))
            // Within what an arena holds (and a run's 32-bit offset): no text is longer.
            let (sum, overflow) = content.addingReportingOverflow(Int(length))
            guard !overflow, sum <= ScalarBuffer.maxCount else { throw CRDTError(.malformedEncoding, "a body is too long") }
            content = sum
        }
        tree.arena.append(scalarsOf: try reader.string())
        guard tree.arena.count == content else {
            throw CRDTError(.malformedEncoding, "a body's text does not have the length its runs give")
        }
        guard reader.isAtEnd else { throw CRDTError(.malformedEncoding, "unexpected bytes after a note state") }
        // One leaf with every run, packed into a proper tree (and the ID index built) by the list form.
        tree.leaves = [RGATree.Leaf(runs: runs)]
        tree.totalCharacters = content
        var list = RGABulkList(tree)
        record.body = RGAText(tree: list.finish())
        return record
    }
}

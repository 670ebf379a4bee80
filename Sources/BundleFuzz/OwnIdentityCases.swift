import NotesCRDT
import NotesSync

/// Bundles and record pages whose changes claim the receiving store's own identity: its own
/// changes echoed back (as a relay or a folder does), cut or whole; a copy of it that went on
/// (seqs past what it made), or wrote other operations at seqs it made (an equivocation); a change
/// that starts inside what it made and ends past it; seqs at the top of the range; another
/// replica's change that depends on seqs of it that it never made; and a bundle that names it as
/// its sender. The store must refuse exactly the changes in its name it never made, move to a
/// fresh identity only then, and keep its own edits (Docs/Architecture.md, "Copied replicas").
///
/// One seed gives one case, on every machine.
public struct OwnIdentityCases: Sendable {
    public init() {}

    /// The receiving store's identity (the fuzzer's store, until it moves).
    public static let receiver = ReplicaID(Identifier128(high: 0xD0D0, low: 1))
    /// Another replica, which merged the receiver's changes before writing.
    static let stranger = ReplicaID(Identifier128(high: 0xA000, low: 9))
    /// The note the receiver made before any case.
    public static let note = NoteID(Identifier128(high: 0xD0D0, low: 0xAB))

    /// The edits a receiving store makes before it takes cases (its own, never sent), made the
    /// same way on the store (`NoteStore.edit`) and on a notebook.
    public static func makeOwnEdits(_ notebook: inout Notebook) throws {
        notebook.createNote(id: note, title: "mine", body: "abc")
        _ = try notebook.insertText(note, at: 3, "de")
        _ = try notebook.setTitle(note, "mine, again")
    }

    /// The receiver after its own edits, as a notebook.
    static let receiverNotebook: Notebook = {
        var notebook = Notebook(replicaID: receiver, wallClock: FuzzDriver.clock)
        try! makeOwnEdits(&notebook)
        return notebook
    }()

    /// What the case holds, and which kind it is (for a failure's message).
    public struct Case: Sendable {
        public var bytes: [UInt8]
        public var kind: String
    }

    /// The case for `seed`.
    public func ownCase(seed: UInt64) -> Case {
        var rng = SplitMix64(seed: seed)
        let mine = Self.receiverNotebook
        let own = mine.allChanges
        let made = mine.versionVector[Self.receiver]
        var changes: [Change] = []
        let kind: String
        switch rng.below(9) {
        case 0:
            kind = "its own changes echoed"
            changes = own
        case 1:
            kind = "its own changes echoed, cut"
            let from = 1 + UInt64(rng.below(Int(made)))
            changes = own.compactMap { $0.endSeq < from ? nil : ($0.suffix(from: from) ?? $0) }
            if rng.below(2) == 0, changes.count > 1 { changes.removeLast() }
        case 2:
            kind = "a copy that went on past its seqs"
            var copy = mine
            _ = try? copy.insertText(Self.note, at: 0, "copy ")
            changes = rng.below(2) == 0 ? copy.allChanges : copy.changes(since: mine.versionVector)
        case 3:
            kind = "a copy that wrote other operations at its seqs"
            var copy = Notebook(replicaID: Self.receiver, wallClock: FuzzDriver.clock)
            copy.apply(contentsOf: own.prefix(1 + rng.below(max(1, own.count - 1))))
            _ = try? copy.insertText(Self.note, at: 0, "other")
            changes = copy.changes(since: VersionVector())
        case 4:
            kind = "a change from inside its seqs to past them"
            let start = made - UInt64(rng.below(2))
            changes = [Change(replica: Self.receiver, startSeq: start, timestamp: Timestamp(rawValue: own.last!.timestamp.rawValue &+ made),
                              dependencies: VersionVector(),
                              operations: [.setNoteField(note: Self.note, field: .pinned, value: .bool(true)),
                                           .setNoteField(note: Self.note, field: .archived, value: .bool(true)),
                                           .setNoteField(note: Self.note, field: .color, value: .string("red"))])]
        case 5:
            kind = "its seqs at the top of the range"
            let starts: [UInt64] = [made + 1, made + 2, (1 << 53) - 2, (1 << 53) - 1, 1 << 53, .max]
            changes = [Change(replica: Self.receiver, startSeq: starts[rng.below(starts.count)], timestamp: own.last!.timestamp,
                              dependencies: VersionVector(), operations: [.setNoteField(note: Self.note, field: .title, value: .string("top"))])]
        case 6:
            kind = "another replica's change that depends on seqs of it it never made"
            var other = Notebook(replicaID: Self.stranger, wallClock: FuzzDriver.clock)
            other.apply(contentsOf: own)
            if let change = try? other.setColor(Self.note, "blue") {
                var claimed = change.dependencies
                claimed[Self.receiver] = made + 1 + UInt64(rng.below(3))
                changes = [Change(replica: change.replica, startSeq: change.startSeq, timestamp: change.timestamp,
                                  dependencies: claimed, operations: change.operations)]
            }
        case 7:
            kind = "another replica's edit of its note, with its changes"
            var other = Notebook(replicaID: Self.stranger, wallClock: FuzzDriver.clock)
            other.apply(contentsOf: own)
            _ = try? other.insertText(Self.note, at: 1, "xy")
            changes = other.changes(since: VersionVector())
        default:
            kind = "a change in its name at a seq it made, with another timestamp"
            let first = own[0]
            changes = [Change(replica: Self.receiver, startSeq: first.startSeq, timestamp: Timestamp(rawValue: first.timestamp.rawValue &+ 1 + UInt64(rng.below(1000))),
                              dependencies: VersionVector(), operations: [first.operations[0]])]
        }
        if rng.below(3) == 0 { changes.shuffle(using: &rng) }
        let sender = rng.below(3) == 0 ? Self.receiver : Self.stranger
        var vector = VersionVector()
        for change in changes where change.endSeq > vector[change.replica] { vector[change.replica] = change.endSeq }
        if rng.below(2) == 0 {
            return Case(bytes: SyncBundle(sender: sender, senderVersion: vector, changes: changes).encoded(), kind: kind)
        }
        return Case(bytes: Self.recordPage(sender: sender, senderVersion: vector, changes: changes), kind: kind + " (record page)")
    }

    /// A record page of `changes`: one record per run of one author's changes, as a relay serves them.
    static func recordPage(sender: ReplicaID, senderVersion vector: VersionVector, changes: [Change]) -> [UInt8] {
        var records: [SyncBundle.Record] = []
        var run: [Change] = []
        func flush() {
            guard let first = run.first, let last = run.last else { return }
            records.append(SyncBundle.Record(author: first.replica, startSeq: first.startSeq, endSeq: last.endSeq, encoding: ChangeCodec.encode(run)))
            run = []
        }
        for change in changes {
            if let last = run.last, last.replica != change.replica || change.startSeq != last.endSeq &+ 1 { flush() }
            run.append(change)
        }
        flush()
        return SyncBundle.encodedRecords(sender: sender, senderVersion: vector, records: records)
    }
}

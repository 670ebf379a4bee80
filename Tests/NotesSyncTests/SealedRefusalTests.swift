import BundleFuzz
import Deflate
import NotesCRDT
import NotesStore
import NotesSync
import Testing

/// Refusals of sealed units that the fuzzer's cases (`HostileSealedUnits`) showed saying less, or
/// saying it wrongly: every refusal names its unit, once.
struct SealedRefusalTests {
    /// A store in the fuzzer's space, and a member it has not heard from.
    func receiver() throws -> NoteStore {
        let store = try NoteStore.openInMemory()
        try store.enterSpace(key: HostileSealedUnits.spaceKey, origin: "recovery code", signingSeed: HostileSealedUnits.receiverSeed)
        return store
    }

    /// Changes of `member` from seq 1, and the payload of a unit holding them.
    func payload(of member: FuzzMember) throws -> (changes: [Change], plaintext: [UInt8]) {
        var notebook = Notebook(replicaID: member.id, wallClock: FixedWallClock(1_700_000_000_000))
        _ = notebook.createNote(title: "from the fuzzer's space")
        let changes = notebook.changes(since: VersionVector())
        return (changes, [0] + ChangeCodec.encode(changes))
    }

    /// A compressed payload that declares past the limit, or whose DEFLATE is corrupt, was refused
    /// with the reader's message alone, naming no unit (a batch's refusals are listed together).
    @Test func aPayloadThatDoesNotInflateIsRefusedNamingItsUnit() throws {
        let store = try receiver()
        let member = FuzzMember(seed: 41)
        let (changes, _) = try payload(of: member)
        let end = changes.map(\.endSeq).max()!
        var declared = BinaryWriter()
        declared.varint(UInt64(SyncBundle.maxBodyBytes) + 1)
        let bomb = [1] + declared.bytes + Deflate.compress([UInt8](repeating: 0, count: 4096), level: 1)
        var short = BinaryWriter()
        short.varint(64)
        let corrupt = [1] + short.bytes + [UInt8](repeating: 0xFF, count: 40)
        let before = try store.digest()
        for plaintext in [bomb, corrupt] {
            let unit = try SealedUnit(parsing: HostileSealedUnits.unitBytes(author: member, startSeq: 1, endSeq: end, plaintext: plaintext))
            let report = try store.integrate(sealed: [unit])
            #expect(report.applied == 0 && report.refused.count == 1)
            #expect(report.refused.first?.hasPrefix(unit.label + ": ") == true, "\(report.refused)")
        }
        #expect(try store.digest() == before)
        #expect(try store.refusedUnits().map(\.code) == ["tooLarge", "malformed"])
        // Handed over again at every sync, a refused unit is still kept once (a folder's 8 MiB
        // forgeries grew a replica by their size at every sync, 16 times over).
        let again = try SealedUnit(parsing: HostileSealedUnits.unitBytes(author: member, startSeq: 1, endSeq: end, plaintext: corrupt))
        for _ in 0 ..< 3 { #expect(try store.integrate(sealed: [again]).refused.count == 1) }
        #expect(try store.refusedUnits().map(\.code) == ["tooLarge", "malformed"])
    }

    /// A unit whose tag for this replica and signature both fail: the reason said "does not
    /// verify" twice ("nor does the signature of ... does not verify").
    @Test func aTagAndASignatureThatBothFailAreNamedOnce() throws {
        let store = try receiver()
        let member = FuzzMember(seed: 42)
        let (changes, plaintext) = try payload(of: member)
        let end = changes.map(\.endSeq).max()!
        // A first unit, whose signature verifies: the store learns the member's agreement key.
        let first = try SealedUnit(parsing: HostileSealedUnits.unitBytes(author: member, startSeq: 1, endSeq: end, plaintext: plaintext))
        #expect(try store.integrate(sealed: [first]).applied == changes.count)
        #expect(try store.space()?.members.first { $0.replica == member.id }?.agreementKey != nil)
        // The same seqs again, tagged for the store, with the tag and the signature spoiled.
        let bytes = HostileSealedUnits.unitBytes(author: member, startSeq: 1, endSeq: end, plaintext: plaintext,
                                                 recipients: [HostileSealedUnits.receiverAgreement]) { unit in
            unit.salt = [UInt8](repeating: 9, count: 32)
            unit.badTags = true
        }
        let signatureAt = try SealedUnit(parsing: bytes).bytes.count - 64 - 1 - 24
        var spoiled = bytes
        spoiled[signatureAt] ^= 1
        let unit = try SealedUnit(parsing: spoiled)
        let report = try store.integrate(sealed: [unit])
        #expect(report.refused == ["forged: its tag for this replica does not verify, nor does the signature of \(unit.label) (the unit was altered, or not signed by its author)"])
    }
}

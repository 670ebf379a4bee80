import Crypto
import Foundation
import NotesCRDT
import NotesStore
@testable import NotesSync
import Testing

/// Sealed units between in-memory replicas of one encrypted space: what opens, and every way a
/// unit is refused (forged, replayed, reordered, truncated, re-signed, tampered).
struct SealedUnitTests {
    let key = SpaceKey.random()

    /// A replica in the space (or in another, with `key`).
    func member(_ key: SpaceKey? = nil) throws -> NoteStore {
        let store = try NoteStore.openInMemory()
        try store.enterSpace(key: key ?? self.key, origin: "recovery code")
        return store
    }

    /// `bytes` with the signature replaced by `signer`'s over the rest (what a forger can do).
    func resigned(_ bytes: [UInt8], by signer: SigningIdentity) throws -> [UInt8] {
        let body = Array(bytes.dropLast(SealedUnit.signatureLength))
        return body + Array(try signer.privateKey.signature(for: SealedUnit.signatureLabel + body))
    }

    /// The byte offset of a unit's ciphertext.
    func ciphertextStart(_ unit: SealedUnit) -> Int { unit.sealedBox.lowerBound }

    /// Expects `units` to be refused by `store` with a reason containing `words`, applying nothing.
    func expectRefused(_ units: [SealedUnit], by store: NoteStore, _ words: String,
                       sourceLocation: SourceLocation = #_sourceLocation) throws {
        let before = try store.digest()
        let report = try store.integrate(sealed: units)
        #expect(report.applied == 0, sourceLocation: sourceLocation)
        #expect(report.refused.count == units.count && report.refused.allSatisfy { $0.contains(words) }, "\(report.refused)",
                sourceLocation: sourceLocation)
        #expect(try store.digest() == before, sourceLocation: sourceLocation)
        #expect(try store.refusedUnits().contains { $0.reason.contains(words) }, sourceLocation: sourceLocation)
    }

    /// `b` has opened a unit of `a` (so it knows a's key); returns a's units so far.
    func introduce(_ a: NoteStore, to b: NoteStore) throws -> [SealedUnit] {
        _ = try a.createNote(title: "from \(a.replicaID)", body: "first words")
        let units = try a.sealedUnits(since: VersionVector())
        let report = try b.integrate(sealed: units)
        #expect(report.applied > 0 && report.refused.isEmpty, "\(report.refused)")
        return units
    }

    @Test func unitsOpenAndConvergeAndHideTheText() throws {
        let a = try member(), b = try member()
        let note = try a.createNote(title: "a secret title", body: "a secret body")
        _ = try a.appendText(note, " and more")
        let units = try a.sealedUnits(since: VersionVector())
        #expect(!units.isEmpty)
        for unit in units {
            #expect(unit.author == a.replicaID)
            #expect(Data(unit.bytes).range(of: Data("secret".utf8)) == nil)
        }
        let report = try b.integrate(sealed: units)
        #expect(report.applied > 0 && report.refused.isEmpty)
        #expect(try b.digest() == a.digest())
        // Sealing again adds no unit for what is sealed; a new edit adds one past it.
        #expect(try a.sealedUnits(since: VersionVector()) == units)
        _ = try a.setPinned(note, true)
        let next = try a.sealedUnits(since: try b.currentVersion())
        #expect(next.count == 1 && next[0].startSeq == units.map(\.endSeq).max()! + 1)
        // b passes a's units on as they are: c opens them, signed by a.
        let c = try member()
        _ = try b.integrate(sealed: next)
        #expect(try c.integrate(sealed: try b.sealedUnits(since: VersionVector()).filter { $0.author == a.replicaID }).refused.isEmpty)
        #expect(try c.digest() == a.digest())
        #expect(try c.space()?.members.contains { $0.replica == a.replicaID } == true)
    }

    @Test func aDeviceWithAnotherKeyAppliesNothing() throws {
        let a = try member(), stranger = try member(SpaceKey.random())
        _ = try a.createNote(title: "t")
        let units = try a.sealedUnits(since: VersionVector())
        let before = try stranger.digest()
        #expect {
            _ = try stranger.integrate(sealed: units)
        } throws: { error in
            (error as? SyncError)?.code == .wrongKey && "\(error)".contains("this space is encrypted with a different key")
        }
        #expect(try stranger.digest() == before)
    }

    /// A token holder (or anyone who can write in the folder) without the space key: another key
    /// is refused; copying the space's key id in makes an introduction that does not verify.
    @Test func forgedUnitsAreRefused() throws {
        let a = try member(), b = try member()
        _ = try introduce(a, to: b)
        let forger = try member(SpaceKey.random())
        _ = try forger.createNote(title: "forged")
        let forged = try forger.sealedUnits(since: VersionVector())
        try expectRefused(forged, by: b, "this space is encrypted with a different key")
        // The same with the space's key id written in (it is public), re-signed by the forger.
        var bytes = forged[0].bytes
        let keyIDAt = forged[0].headerEnd - 32 - 32 - 32 - 8
        bytes.replaceSubrange(keyIDAt ..< keyIDAt + 8, with: key.keyID)
        let signer = try #require(try forger.spaceSealer()).signer
        try expectRefused([try SealedUnit(parsing: try resigned(bytes, by: signer))], by: b, "not introduced with the space key")
    }

    /// A member (it has the space key) seals changes in another member's name with its own key:
    /// a second key for a replica already known is refused (trust on first use).
    @Test func aMemberCannotWriteInAnotherReplicasName() throws {
        let a = try member(), b = try member(), mallory = try member()
        _ = try introduce(a, to: b)
        _ = try introduce(a, to: mallory)
        // Mallory makes a change as a (the next seqs of a) and seals it with its own signing key.
        let prior = try #require(try a.changes(since: VersionVector()).last)
        let change = Change(replica: a.replicaID, startSeq: prior.endSeq + 1, timestamp: prior.timestamp.advanced(by: prior.seqCount + 1),
                            dependencies: VersionVector(),
                            operations: [.setNoteField(note: try #require(try a.notebook.noteIDs.first), field: .title, value: .string("pwned"))])
        let mallorySealer = try #require(try mallory.spaceSealer())
        var encoder = ChangeCodec.Encoder()
        let unit = try mallorySealer.seal(author: a.replicaID, changes: [change], encoder: &encoder)
        // a's id is made from its signing key: nobody else's key fits it.
        #expect(SigningIdentity.isSelfCertified(a.replicaID))
        try expectRefused([unit], by: b, "is signed with a key that \(a.replicaID) is not made from")
        #expect(try b.space()?.members.first { $0.replica == a.replicaID }?.publicKey != nil)
    }

    /// Changes made before a replica entered the space stay under its older id, which is not made
    /// from a key: the first key introduced for it is the one taken after (trust on first use), so
    /// a member that seals them again with its own key is refused where the author was heard first.
    @Test func olderIdsKeepTheirFirstKey() throws {
        let old = try NoteStore.openInMemory()
        _ = try old.createNote(title: "written before the space")
        let legacy = old.replicaID
        try old.enterSpace(key: key, origin: "recovery code")
        #expect(old.replicaID != legacy && SigningIdentity.isSelfCertified(old.replicaID))
        let b = try member(), mallory = try member()
        let units = try old.sealedUnits(since: VersionVector())
        #expect(units.contains { $0.author == legacy })
        #expect(try b.integrate(sealed: units).refused.isEmpty)
        #expect(try b.digest() == old.digest())
        _ = try mallory.integrate(sealed: units)
        // Mallory seals a's older changes again with its own key, under the older id.
        let legacyChanges = try mallory.changes(since: VersionVector()).filter { $0.replica == legacy }
        var encoder = ChangeCodec.Encoder()
        let resealed = try #require(try mallory.spaceSealer()).seal(author: legacy, changes: legacyChanges, encoder: &encoder)
        let c = try member()
        _ = try c.integrate(sealed: units)
        try expectRefused([resealed], by: c, "second key for \(legacy)")
    }

    /// A unit altered and signed again: by another member with the author's key left in (the
    /// signature fails), and by the author itself (the ciphertext no longer authenticates).
    @Test func resignedAndTamperedUnitsAreRefused() throws {
        let a = try member(), b = try member(), mallory = try member()
        let units = try introduce(a, to: b)
        _ = try a.createNote(title: "second")
        let unit = try #require(try a.sealedUnits(since: try b.currentVersion()).first)
        var altered = unit.bytes
        altered[ciphertextStart(unit)] ^= 0x01
        // Not signed again: the signature fails.
        try expectRefused([try SealedUnit(parsing: altered)], by: b, "signature of")
        // Signed again by another member, with a's key in the header: the signature fails.
        let malloryKey = try #require(try mallory.spaceSealer()).signer
        try expectRefused([try SealedUnit(parsing: try resigned(altered, by: malloryKey))], by: b, "signature of")
        // Signed again by a itself (a stolen signing key): the ciphertext does not authenticate.
        let aKey = try #require(try a.spaceSealer()).signer
        try expectRefused([try SealedUnit(parsing: try resigned(altered, by: aKey))], by: b, "does not authenticate")
        // The untouched unit still opens.
        #expect(try b.integrate(sealed: [unit]).applied > 0)
        #expect(units.count == 1)
    }

    /// A unit's header moved onto another unit's ciphertext (reordered ranges), re-signed by the
    /// author: the header is the associated data, so the ciphertext no longer opens. Units that
    /// arrive in another order than sealed are not an error: they wait and apply.
    @Test func reorderedUnitsAreRefusedOrWait() throws {
        let a = try member(), b = try member()
        let note = try a.createNote(title: "one")
        let first = try a.sealedUnits(since: VersionVector())
        _ = try a.appendText(note, " two")
        let second = try #require(try a.sealedUnits(since: try a.currentVersion().with(a.replicaID, first[0].endSeq)).last)
        #expect(second.startSeq == first[0].endSeq + 1)
        // second's header, first's ciphertext.
        var swapped = Array(second.bytes[..<second.headerEnd])
        var writer = BinaryWriter()
        writer.varint(UInt64(first[0].sealedBox.count))
        swapped += writer.bytes + first[0].bytes[first[0].sealedBox] + [UInt8](repeating: 0, count: 64)
        let aKey = try #require(try a.spaceSealer()).signer
        try expectRefused([try SealedUnit(parsing: try resigned(swapped, by: aKey))], by: b, "does not authenticate")
        // Delivered backwards: the second waits for the first, then both apply.
        let c = try member()
        let late = try c.integrate(sealed: [second])
        #expect(late.applied == 0 && late.pending == 1 && late.refused.isEmpty)
        #expect(try c.integrate(sealed: first).applied == 2)
        #expect(try c.digest() == a.digest())
    }

    /// The same unit again (a replayed file, a relay that answers twice) is a harmless duplicate;
    /// replayed into another space it is refused for its key.
    @Test func replayedUnitsAreDuplicatesOrRefused() throws {
        let a = try member(), b = try member()
        let units = try introduce(a, to: b)
        let digest = try b.digest()
        let again = try b.integrate(sealed: units)
        #expect(again.applied == 0 && again.duplicates == units.count && again.refused.isEmpty)
        #expect(try b.digest() == digest)
        // Into another space whose replica has heard from its members: refused, not thrown.
        let otherKey = SpaceKey.random()
        let x = try member(otherKey), y = try member(otherKey)
        _ = try introduce(x, to: y)
        try expectRefused(units, by: y, "this space is encrypted with a different key")
    }

    /// A sealed bundle cut short fails its checksum; a unit cut short inside a bundle whose
    /// checksum was made again is refused as truncated; nothing of either is handed out.
    @Test func truncatedBundlesAndUnitsAreRefused() throws {
        let a = try member()
        _ = try a.createNote(title: "t", body: String(repeating: "words ", count: 50))
        let units = try a.sealedUnits(since: VersionVector())
        let bytes = SyncBundle(sender: a.replicaID, senderVersion: try a.currentVersion(), sealed: units).encoded()
        let decoded = try SyncBundle.decode(bytes)
        #expect(decoded.isSealed && decoded.sealedUnits == units)
        #expect { _ = try SyncBundle.decode(Array(bytes.dropLast(10))) } throws: { ($0 as? SyncError)?.code == .checksumMismatch }
        #expect { _ = try SealedUnit(parsing: Array(units[0].bytes.dropLast(1))) } throws: {
            ($0 as? SyncError)?.code == .truncated && "\($0)".contains("cut short")
        }
        // A bundle framing a cut unit, with its checksum made again.
        var cut = Array(bytes.dropLast(32))
        cut.removeLast(5)
        cut.append(contentsOf: Array(Crypto.SHA256.hash(data: cut)))
        #expect { _ = try SyncBundle.decode(cut) } throws: { error in
            let error = error as? SyncError
            return error?.code == .truncated || error?.code == .malformed
        }
    }

    @Test func passphrasesAndRecoveryCodes() throws {
        let (key, descriptor) = try SpaceKey.create(passphrase: "a long enough passphrase", logN: 10)
        let parsed = try SpaceKey.Descriptor(descriptor.description)
        #expect(parsed == descriptor)
        #expect(try SpaceKey.join(passphrase: "a long enough passphrase", descriptor: parsed) == key)
        #expect { _ = try SpaceKey.join(passphrase: "another passphrase", descriptor: parsed) } throws: {
            ($0 as? SyncError)?.code == .wrongKey && "\($0)".contains("this space is encrypted with a different key")
        }
        #expect(try SpaceKey(recoveryCode: key.recoveryCode.lowercased()) == key)
        var typo = Array(key.recoveryCode)
        typo[3] = typo[3] == "A" ? "B" : "A"
        #expect { _ = try SpaceKey(recoveryCode: String(typo)) } throws: { "\($0)".contains("typo") }
        #expect { _ = try SpaceKey.create(passphrase: "short") } throws: { "\($0)".contains("too short") }
    }
}

private extension VersionVector {
    func with(_ replica: ReplicaID, _ seq: UInt64) -> VersionVector {
        var copy = self
        copy[replica] = seq
        return copy
    }
}

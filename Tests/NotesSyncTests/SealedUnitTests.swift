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

    /// `bytes` with the signature replaced by `signer`'s over the rest, and no recipient tags
    /// (what a forger can do).
    func resigned(_ bytes: [UInt8], by signer: SigningIdentity) throws -> [UInt8] {
        let unit = try SealedUnit(parsing: bytes)
        let body = Array(bytes[..<unit.signatureStart])
        return body + Array(try signer.privateKey.signature(for: SealedUnit.signatureLabel(unit.version) + body)) + (unit.version >= 2 ? [0] : [])
    }

    /// `unit` with its recipient tags replaced by `tags` (recipient agreement key, tag).
    func retagged(_ unit: SealedUnit, _ tags: [(recipient: [UInt8], tag: [UInt8])]) throws -> SealedUnit {
        var writer = BinaryWriter()
        writer.raw(Array(unit.tagged))
        writer.varint(UInt64(tags.count))
        for (recipient, tag) in tags {
            writer.raw(Array(recipient.prefix(SealedUnit.recipientHintLength)))
            writer.raw(tag)
        }
        return try SealedUnit(parsing: writer.bytes)
    }

    /// `a` and `b` have each opened a unit of the other (so each knows the other's agreement key).
    func acquaint(_ a: NoteStore, _ b: NoteStore) throws {
        _ = try introduce(a, to: b)
        _ = try introduce(b, to: a)
    }

    /// A change as `a`'s next seq (a title `a` never wrote): what a forger makes in its name.
    func nextChange(inNameOf a: NoteStore) throws -> Change {
        let prior = try #require(try a.changes(since: VersionVector()).last)
        return Change(replica: a.replicaID, startSeq: prior.endSeq + 1, timestamp: prior.timestamp.advanced(by: prior.seqCount + 1),
                      dependencies: VersionVector(),
                      operations: [.setNoteField(note: try #require(try a.notebook.noteIDs.first), field: .title, value: .string("pwned"))])
    }

    /// How `store` checks `unit`'s authorship with what it knows of the unit's author.
    func check(_ unit: SealedUnit, by store: NoteStore) throws -> UnitCheck {
        let sealer = try #require(try store.spaceSealer())
        let member = try #require(try store.space()?.members.first { $0.replica == unit.author })
        return try sealer.verify(unit, knownKey: nil, knownAgreementKey: member.agreementKey.flatMap(hexBytes))
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
        let keyIDAt = forged[0].keyIDOffset
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
        let change = try nextChange(inNameOf: a)
        let mallorySealer = try #require(try mallory.spaceSealer())
        var encoder = ChangeCodec.Encoder()
        let unit = try mallorySealer.seal(author: a.replicaID, changes: [change], encoder: &encoder)
        // a's id is made from its signing key: nobody else's key fits it.
        #expect(SigningIdentity.isSelfCertified(a.replicaID))
        try expectRefused([unit], by: b, "is signed with a key that \(a.replicaID) is not made from")
        #expect(try b.space()?.members.first { $0.replica == a.replicaID }?.publicKey != nil)
    }

    /// A member (it has the space key, so the ciphertext authenticates) seals a change in another
    /// member's name with that member's public keys in the header and no tags: only the signature
    /// can tell, so every reader checks it, with or without a tag path for the author, the forger
    /// included when its unit comes back to it.
    @Test func aUnitInAnotherMembersNameWithItsKeysAndNoTagIsRefusedOnTheSignature() throws {
        let a = try member(), b = try member(), c = try member(), mallory = try member()
        try acquaint(a, b)
        _ = try introduce(a, to: c)
        _ = try introduce(a, to: mallory)
        let change = try nextChange(inNameOf: a)
        let aSealer = try #require(try a.spaceSealer())
        var encoder = ChangeCodec.Encoder()
        let forged = try #require(try mallory.spaceSealer()).forge(author: a.replicaID, changes: [change], claimingKey: aSealer.signer.publicKey,
                                                                    agreementKey: aSealer.agreementPublicKey, encoder: &encoder)
        #expect(forged.publicKey == aSealer.signer.publicKey && forged.agreementKey == aSealer.agreementPublicKey && forged.tags.isEmpty)
        #expect(forged.authorKeyProblem == nil && !forged.hasValidSignature)
        for reader in [b, c, mallory] {
            try expectRefused([forged], by: reader, "the signature of \(forged.label) does not verify")
        }
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
        swapped += writer.bytes + first[0].bytes[first[0].sealedBox] + [UInt8](repeating: 0, count: 64) + [0]
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

    /// A unit that claims more recipient tags than a unit may hold is named as lying about its
    /// count, not as cut short (the bytes for all of them are there).
    @Test func tooManyRecipientTagsAreNamedAsSuch() throws {
        let a = try member(), b = try member()
        try acquaint(a, b)
        _ = try a.createNote(title: "tagged")
        let unit = try #require(try a.sealedUnits(since: try b.currentVersion()).first)
        #expect(unit.version == 2 && unit.tags.count == 1)
        // The count's varint is the byte before the last tag (24 bytes).
        var bytes = Array(unit.bytes)
        let tag = Array(bytes.suffix(24))
        bytes[bytes.count - 25] = UInt8(SealedUnit.maxRecipientTags + 1)
        for _ in 0 ..< SealedUnit.maxRecipientTags { bytes += tag }
        #expect { _ = try SealedUnit(parsing: bytes) } throws: { error in
            let error = error as? SyncError
            return error?.code == .malformed && error!.message.contains("more than the \(SealedUnit.maxRecipientTags) possible")
                && !error!.message.contains("cut short")
        }
    }

    // MARK: Recipient tags (unit version 2)

    /// Members that know each other's agreement keys take each other's units on their tags, not
    /// their signatures; the units apply and converge as before.
    @Test func recipientTagsStandInForTheSignature() throws {
        let a = try member(), b = try member()
        try acquaint(a, b)
        let aSealer = try #require(try a.spaceSealer())
        #expect(try b.space()?.members.first { $0.replica == a.replicaID }?.agreementKey == hexText(aSealer.agreementPublicKey))
        let note = try a.createNote(title: "tagged")
        _ = try a.appendText(note, " for b")
        let units = try a.sealedUnits(since: try b.currentVersion())
        let bAgreement = try #require(try b.spaceSealer()).agreementPublicKey
        #expect(!units.isEmpty && units.allSatisfy { $0.version == 2 && $0.tags.map(\.recipient) == [Array(bAgreement.prefix(8))] })
        for unit in units { #expect(try check(unit, by: b) == .tag) }
        let report = try b.integrate(sealed: units)
        #expect(report.applied > 0 && report.refused.isEmpty, "\(report.refused)")
        #expect(try b.digest() == a.digest())
        // b passes them on after checking their signatures once: c, who has not met a, opens them.
        let c = try member()
        #expect(try c.integrate(sealed: try b.sealedUnits(since: VersionVector())).refused.isEmpty)
        #expect(try c.digest() == a.digest())
    }

    /// A recipient without a tag of its own (a's units were sealed before a knew it), or whose tag
    /// was cut off, checks the signature, as for a version 1 unit.
    @Test func aUnitWithoutATagForTheRecipientFallsBackToTheSignature() throws {
        let a = try member(), b = try member(), c = try member()
        try acquaint(a, b)
        _ = try introduce(a, to: c)
        _ = try a.createNote(title: "for b and c")
        let unit = try #require(try a.sealedUnits(since: try c.currentVersion()).first)
        #expect(unit.tags.count == 1)
        #expect(try check(unit, by: c) == .signature)
        #expect(try check(try retagged(unit, []), by: b) == .signature)
        let report = try c.integrate(sealed: [unit])
        #expect(report.applied > 0 && report.refused.isEmpty)
        // A version 1 unit (no agreement key, no tags) still opens, by its signature.
        var encoder = ChangeCodec.Encoder()
        let aSealer = try #require(try a.spaceSealer())
        _ = try a.createNote(title: "old format")
        let fresh = try a.changes(since: try c.currentVersion()).filter { $0.replica == a.replicaID }
        let v1 = try aSealer.seal(author: a.replicaID, changes: fresh, encoder: &encoder, recipients: [], version: 1)
        #expect(v1.version == 1 && v1.agreementKey == nil && v1.tags.isEmpty)
        #expect(try c.integrate(sealed: [v1]).applied == fresh.count)
    }

    /// A tampered tag is not taken: the unit is checked by its signature instead, which a genuine
    /// unit passes (the tags are outside the signature: anyone on the way can alter them) and an
    /// altered one fails, refused with a reason that names the tag.
    @Test func aTamperedTagIsRefused() throws {
        let a = try member(), b = try member()
        try acquaint(a, b)
        _ = try a.createNote(title: "tampered on the way")
        let unit = try #require(try a.sealedUnits(since: try b.currentVersion()).first)
        var flipped = unit.tags[0].tag
        flipped[0] ^= 0x80
        let badTag = try retagged(unit, [(try #require(try b.spaceSealer()).agreementPublicKey, flipped)])
        #expect(try check(badTag, by: b) == .signature)
        // The ciphertext altered, the tag left: neither the tag nor the signature verifies.
        var altered = unit.bytes
        altered[ciphertextStart(unit)] ^= 0x01
        try expectRefused([try SealedUnit(parsing: altered)], by: b, "its tag for this replica does not verify, nor does the signature of")
        #expect(try b.integrate(sealed: [badTag]).applied > 0)
    }

    /// A member (mallory) cannot make a tag in another member's name: the tag b checks is under
    /// the key b shares with a's agreement key as b learnt it, which mallory cannot make; putting
    /// its own agreement key in a's unit takes the unit off the tag path, to a's signature.
    @Test func aMemberCannotMakeATagInAnotherMembersName() throws {
        let a = try member(), b = try member(), mallory = try member()
        try acquaint(a, b)
        try acquaint(mallory, b)
        _ = try introduce(a, to: mallory)
        _ = try a.createNote(title: "a's words")
        let unit = try #require(try a.sealedUnits(since: try b.currentVersion()).first)
        let mallorySealer = try #require(try mallory.spaceSealer())
        let bAgreement = try #require(try b.spaceSealer()).agreementPublicKey
        // a's unit altered, tagged for b under mallory's key with b.
        var altered = unit.bytes
        altered[ciphertextStart(unit)] ^= 0x01
        let alteredUnit = try SealedUnit(parsing: altered)
        let forged = try retagged(alteredUnit, [(bAgreement, try mallorySealer.recipientTag(alteredUnit.tagged, recipient: bAgreement, peer: bAgreement))])
        try expectRefused([forged], by: b, "its tag for this replica does not verify, nor does the signature of")
        // With mallory's agreement key in a's header (its introduction made again with the space
        // key): b does not take the key from the unit, so the signature decides.
        var header = Array(unit.bytes[..<unit.headerEnd])
        let agreementAt = unit.keyIDOffset + 8 + 32 + 32
        header.replaceSubrange(agreementAt ..< agreementAt + 32, with: mallorySealer.agreementPublicKey)
        header.replaceSubrange((unit.headerEnd - 32) ..< unit.headerEnd,
                               with: mallorySealer.introduction(author: a.replicaID, publicKey: unit.publicKey, agreementKey: mallorySealer.agreementPublicKey))
        let swapped = try SealedUnit(parsing: header + Array(unit.bytes[unit.headerEnd...]))
        let retaggedSwap = try retagged(swapped, [(bAgreement, try mallorySealer.recipientTag(swapped.tagged, recipient: bAgreement, peer: bAgreement))])
        try expectRefused([retaggedSwap], by: b, "the signature of")
    }

    /// An author that tags a unit for one member and signs something else: that member takes it
    /// on its tag (an insider's equivocation), but checks the signature before passing it on, so it
    /// goes no further; it is refused and named, and the relay refuses it too.
    @Test func aUnitTakenOnItsTagIsCheckedBeforeItIsPassedOn() throws {
        let a = try member(), b = try member()
        try acquaint(a, b)
        _ = try a.createNote(title: "equivocated")
        let unit = try #require(try a.sealedUnits(since: try b.currentVersion()).first)
        var bad = Array(unit.signed) + [UInt8](repeating: 0x5A, count: 64)
        bad += [0]
        let unsigned = try SealedUnit(parsing: bad)
        let bAgreement = try #require(try b.spaceSealer()).agreementPublicKey
        let aSealer = try #require(try a.spaceSealer())
        let equivocating = try retagged(unsigned, [(bAgreement, try aSealer.recipientTag(unsigned.tagged, recipient: bAgreement, peer: bAgreement))])
        #expect(!equivocating.hasValidSignature)
        #expect(try b.integrate(sealed: [equivocating]).applied > 0)
        // Into a folder (whose readers check each file) it goes unchecked; b's relay uploads check it.
        #expect(try b.sealedUnits(since: VersionVector(), checkingTaggedUnits: false).contains(equivocating))
        #expect(try b.refusedUnits().isEmpty)
        let passedOn = try b.sealedUnits(since: VersionVector())
        #expect(!passedOn.contains { $0.author == a.replicaID && $0.endSeq == unit.endSeq })
        #expect(try b.refusedUnits().contains { $0.reason.contains("tagged one thing and signed another") })
        // Offered again, it stays out, without a second refusal.
        #expect(!(try b.sealedUnits(since: VersionVector())).contains { $0.author == a.replicaID && $0.endSeq == unit.endSeq })
        #expect(try b.refusedUnits().count == 1)
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

    /// A descriptor is pasted from elsewhere: one that asks scrypt for more than a gigabyte (each
    /// parameter within its own bound, N = 2^22 with r = 32 is 16 GiB) is refused before deriving.
    @Test func aDescriptorThatAsksForGigabytesIsRefused() throws {
        let salt = String(repeating: "ab", count: 16)
        let keyID = String(repeating: "cd", count: 8)
        for (logN, r, p) in [(22, 32, 1), (22, 3, 1), (20, 16, 1), (18, 32, 16)] {
            #expect(throws: SyncError.self, "N = 2^\(logN), r = \(r), p = \(p)") {
                try SpaceKey.Descriptor("crdtspace1-scrypt-\(logN)-\(r)-\(p)-\(salt)-\(keyID)")
            }
        }
        for (logN, r, p) in [(15, 8, 1), (22, 2, 1), (20, 8, 4), (10, 32, 16)] {
            #expect(try SpaceKey.Descriptor("crdtspace1-scrypt-\(logN)-\(r)-\(p)-\(salt)-\(keyID)").logN == logN)
        }
    }
}

private extension VersionVector {
    func with(_ replica: ReplicaID, _ seq: UInt64) -> VersionVector {
        var copy = self
        copy[replica] = seq
        return copy
    }
}

private func hexText(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

private func hexBytes(_ text: String) -> [UInt8]? {
    var out: [UInt8] = []
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2)
        guard let byte = UInt8(text[index ..< next], radix: 16) else { return nil }
        out.append(byte)
        index = next
    }
    return out
}

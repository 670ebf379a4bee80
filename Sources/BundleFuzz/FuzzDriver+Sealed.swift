import NotesCRDT
import NotesRelay
import NotesStore
import NotesSync

/// A store in the fuzzer's encrypted space, the notebook it must agree with, and what the store
/// keeps that decides how it takes the next units (a model of `integrate(sealed:)`'s memory).
struct SealedReceiver {
    struct UnitKey: Hashable {
        var author: ReplicaID
        var endSeq: UInt64
    }

    var store: NoteStore
    var shadow: Notebook
    /// The unit kept per (author, last seq): the first one opened.
    var kept: [UnitKey: [UInt8]] = [:]
    /// Whether a unit of another author than the store was ever opened.
    var heardFromOthers = false
    /// Members' signing keys as first introduced, and agreement keys as learnt from a signature.
    var members: [ReplicaID: [UInt8]] = [:]
    var agreements: [ReplicaID: [UInt8]] = [:]
    var cases = 0

    init() throws {
        store = try NoteStore.openInMemory(replicaID: ReplicaID(Identifier128(high: 0xD0D0, low: 2)), options: StoreOptions(wallClock: FuzzDriver.clock))
        try store.enterSpace(key: HostileSealedUnits.spaceKey, origin: "recovery code", signingSeed: HostileSealedUnits.receiverSeed)
        shadow = Notebook(replicaID: HostileSealedUnits.receiver.replicaID, wallClock: FuzzDriver.clock)
        (members, agreements) = try Self.memberKeys(of: store)
    }

    /// The members as `store.space()` lists them.
    static func memberKeys(of store: NoteStore) throws -> (signing: [ReplicaID: [UInt8]], agreement: [ReplicaID: [UInt8]]) {
        var members: [ReplicaID: [UInt8]] = [:]
        var agreements: [ReplicaID: [UInt8]] = [:]
        for member in try store.space()?.members ?? [] {
            members[member.replica] = FuzzDriver.unhex(member.publicKey)
            if let agreement = member.agreementKey { agreements[member.replica] = FuzzDriver.unhex(agreement) }
        }
        return (members, agreements)
    }
}

extension FuzzDriver {
    /// Whether case `caseSeed` is a sealed bundle (format version 4): a quarter of the cases.
    public static func isSealed(_ caseSeed: UInt64) -> Bool { caseSeed >> 62 == 2 }

    /// Runs a sealed case: `SyncBundle.decode`, a round trip, the relay's check of an upload's
    /// units (`RelayService.sealedRecords`), a folder reader's check of each unit
    /// (`NoteStore.sealedUnitCheck`), then `integrate(sealed:)` on a store in the space, against a
    /// model of which units it opens and a notebook that applies their changes directly.
    mutating func runSealed(caseSeed: UInt64) throws -> FuzzOutcome {
        let sealedCase = sealedGenerator.sealedCase(seed: caseSeed)
        func fail(_ message: String) -> FuzzFailure {
            FuzzFailure(caseSeed: caseSeed, message: message + " (sealed case; mutations: \(sealedCase.mutations))")
        }
        let bundle: SyncBundle
        do {
            bundle = try SyncBundle.decode(sealedCase.bytes)
        } catch let error as SyncError {
            guard !error.message.isEmpty else { throw fail("decode: an error with no message") }
            return .rejected(code: error.code.description, message: error.message)
        } catch {
            throw fail("decode threw \(type(of: error)): \(error)")
        }
        guard bundle.isSealed else { throw fail("a version 4 bundle decoded as a plain one") }
        guard let again = try? SyncBundle.decode(bundle.encoded()), again == bundle else { throw fail("the accepted sealed bundle does not round-trip") }
        let units = bundle.sealedUnits

        // The relay stores only units whose signature verifies with the key they name, as they are.
        do {
            for (record, _) in try RelayService.sealedRecords(of: bundle) {
                guard record.sealed, let unit = units.first(where: { $0.bytes == record.payload }), unit.author == record.author,
                      unit.startSeq == record.startSeq, unit.endSeq == record.endSeq, unit.hasValidSignature, unit.authorKeyProblem == nil else {
                    throw fail("the relay would store \(record.author)@\(record.startSeq)-\(record.endSeq), which is not a unit of the upload signed by its author's key")
                }
            }
        } catch let error as RelayService.UploadError {
            guard !error.message.isEmpty else { throw fail("the relay refused an upload with no message") }
        } catch let failure as FuzzFailure {
            throw failure
        } catch {
            throw fail("the relay's check threw \(type(of: error)): \(error)")
        }

        do {
            if receiver == nil || receiver!.cases >= casesPerStore / 4 { receiver = try SealedReceiver() }
            receiver!.cases += 1
            return try integrate(units, sealedCase, fail)
        } catch let failure as FuzzFailure {
            throw failure
        } catch {
            throw fail("the store threw: \(error)")
        }
    }

    private mutating func integrate(_ units: [SealedUnit], _ sealedCase: SealedCase, _ fail: (String) -> FuzzFailure) throws -> FuzzOutcome {
        let store = receiver!.store
        // A folder reader's check of each unit, with the keys known before the batch.
        guard let check = try store.sealedUnitCheck() else { throw fail("a store in a space has no unit check") }
        var folderRefused: Set<Int> = []
        for (i, unit) in units.enumerated() {
            guard let problem = check(unit) else { continue }
            guard !problem.message.isEmpty else { throw fail("the folder reader's check refused \(unit.label) with no message") }
            folderRefused.insert(i)
        }
        let digestBefore = try store.digest()
        let versionBefore = try store.currentVersion()

        // The model: the members as the store knows them (checked against its list every few
        // cases: listing them costs more than a case), each unit opened (or not) in order.
        if receiver!.cases % 10 == 0 {
            let listed = try SealedReceiver.memberKeys(of: store)
            guard listed.signing == receiver!.members, listed.agreement == receiver!.agreements else {
                throw fail("the store lists \(listed.signing.count) members (\(listed.agreement.count) agreement keys), the model \(receiver!.members.count) (\(receiver!.agreements.count))")
            }
        }
        var members = receiver!.members
        var agreements = receiver!.agreements
        let agreementsBefore = agreements
        let sealer = SpaceSealer(key: HostileSealedUnits.spaceKey, signer: HostileSealedUnits.receiver)
        let own = store.replicaID
        members[own] = members[own] ?? sealer.signer.publicKey
        var opened: [Int] = []
        var changes: [Change] = []
        var refused = 0
        var reasons: [Int: String] = [:]
        var otherKeys = 0
        var duplicates = 0
        for (i, unit) in units.enumerated() {
            if receiver!.kept[.init(author: unit.author, endSeq: unit.endSeq)] == unit.bytes { duplicates += 1; continue }
            guard sealer.isOurs(unit) else { otherKeys += 1; refused += 1; continue }
            do {
                let (inside, how) = try sealer.openChecked(unit, knownKey: members[unit.author], knownAgreementKey: agreements[unit.author])
                if members[unit.author] == nil { members[unit.author] = unit.publicKey }
                if how == .signature, agreements[unit.author] == nil, let agreement = unit.agreementKey { agreements[unit.author] = agreement }
                opened.append(i)
                changes += inside
            } catch let error as SyncError {
                reasons[i] = error.message
                refused += 1
            }
        }
        let wrongKey = otherKeys > 0 && opened.isEmpty && duplicates == 0 && !receiver!.heardFromOthers
        for i in sealedCase.mustOpen where !opened.contains(i) { throw fail("a whole unit of a new member was not opened: \(reasons[i] ?? units[i].label)") }
        for i in sealedCase.mustRefuse where opened.contains(i) { throw fail("an altered unit was opened: \(units[i].label)") }
        for i in folderRefused where opened.contains(i) && agreementsBefore[units[i].author] == agreements[units[i].author] {
            throw fail("the folder reader's check refuses \(units[i].label), the store opens it")
        }

        let report: IntegrationReport
        do {
            report = try store.integrate(sealed: units)
        } catch let error as SyncError {
            guard wrongKey, error.code == .wrongKey, !error.message.isEmpty else { throw fail("integrate threw \(error.code): \(error.message)") }
            guard try store.digest() == digestBefore, try store.currentVersion() == versionBefore else { throw fail("a refused batch changed the store") }
            return .sealed(units: units.count, opened: 0, refused: units.count, quarantined: 0, reasons: [error.message])
        }
        guard !wrongKey else { throw fail("no unit under this space's key and nothing heard before, yet integrate did not refuse the batch") }
        guard report.refused.count == refused, report.refused.allSatisfy({ !$0.isEmpty }) else {
            throw fail("the store refused \(report.refused.count) units (\(report.refused.prefix(3))), the model \(refused)")
        }
        let result = receiver!.shadow.apply(contentsOf: CausalOrder.canonical(changes))
        for id in receiver!.shadow.noteIDs {
            if let problem = receiver!.shadow.body(of: id)?.invariantViolation() { throw fail("note \(id): \(problem)") }
        }
        guard try store.digest() == receiver!.shadow.digest() else { throw fail("the store's digest differs from a notebook's that applied the opened units' changes") }
        guard report.quarantined == result.quarantined, report.rejected == result.rejected + refused,
              try store.quarantinedChanges().count == receiver!.shadow.quarantinedCount else {
            throw fail("the store quarantined \(report.quarantined) and rejected \(report.rejected), the notebook \(result.quarantined) and \(result.rejected) (+\(refused) units)")
        }
        if opened.isEmpty {
            guard try store.digest() == digestBefore, try store.currentVersion() == versionBefore else { throw fail("refused units changed the store") }
        }
        receiver!.members = members
        receiver!.agreements = agreements
        for i in opened {
            let key = SealedReceiver.UnitKey(author: units[i].author, endSeq: units[i].endSeq)
            if receiver!.kept[key] == nil { receiver!.kept[key] = units[i].bytes }
            if units[i].author != own { receiver!.heardFromOthers = true }
        }
        if receiver!.cases % 10 == 0 { _ = try store.status() }
        return .sealed(units: units.count, opened: opened.count, refused: refused, quarantined: result.quarantined, reasons: report.refused)
    }

    static func unhex(_ text: String) -> [UInt8] {
        let digits = Array(text.utf8).map { $0 <= 0x39 ? $0 - 0x30 : ($0 | 0x20) - 0x61 + 10 }
        return stride(from: 0, to: digits.count - 1, by: 2).map { digits[$0] << 4 | digits[$0 + 1] }
    }
}

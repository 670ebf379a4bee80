import NotesCRDT
import NotesStore
import NotesSync

extension FuzzDriver {
    /// Runs a case that re-issues operations (`ReissueCases`): the history it needs is applied
    /// to the store first (checked as any batch), then its bundles, each read by both readers
    /// and applied as one batch to the store and to the model; a malformed one must be refused
    /// by every reader (`SyncBundle.decode`, the relay client's record reader, and
    /// `ChangeCodec.decode` of its change encoding alone) as malformed, with a message that
    /// names the fault; after a well-formed one, what the case says must hold does: the
    /// withdrawn seqs are gone from the store's version vector and log, the re-issuers'
    /// characters are in the state, a re-issue that matches nothing removed nothing.
    mutating func runReissue(caseSeed: UInt64) throws -> FuzzOutcome {
        let reissueCase = reissueCases.reissueCase(seed: caseSeed)
        do {
            return try runReissue(reissueCase, caseSeed: caseSeed)
        } catch let failure as FuzzFailure {
            // A known fault of the code under test, met as it shows: counted, not failed (the
            // rest of the case is not checked, and the store is replaced).
            if let known = reissueCase.knownIssue, failure.message.contains(Self.knownIssues[known].symptom) {
                casesOnStore = casesPerStore
                return .knownIssue(index: known)
            }
            throw FuzzFailure(caseSeed: caseSeed, message: "\(reissueCase.kind): \(failure.message)")
        }
    }

    private mutating func runReissue(_ reissueCase: ReissueCases.Case, caseSeed: UInt64) throws -> FuzzOutcome {
        func fail(_ message: String) -> FuzzFailure { FuzzFailure(caseSeed: caseSeed, message: message) }
        try takeStore(caseSeed: caseSeed)
        if !reissueCase.setup.isEmpty {
            let setup = SyncBundle(sender: reissueCase.setup[0].replica, senderVersion: Self.coverage(of: reissueCase.setup), changes: reissueCase.setup)
            let applied = try applyChecked(setup, caseSeed: caseSeed)
            guard applied.quarantined == 0, !applied.moved, applied.applied == reissueCase.setup.count else {
                throw fail("the history the case needs did not apply: \(applied)")
            }
        }
        var changes = 0
        var rebuilds = 0
        for (index, bytes) in reissueCase.bundles.enumerated() {
            switch try read(bytes, expected: nil, caseSeed: caseSeed) {
            case .failure(let error):
                guard case .refused(let fragment) = reissueCase.expectation, index == 0 else {
                    throw fail("bundle \(index + 1) of \(reissueCase.bundles.count) was refused: \(error.message)")
                }
                guard error.code == .malformed, fragment.isEmpty || error.message.contains(fragment) else {
                    throw fail("refused as \(error.code): \(error.message) (expected malformed, naming '\(fragment)')")
                }
                // The change encoding alone, as a snapshot or an op log row is read.
                if let body = reissueCase.body {
                    do {
                        _ = try ChangeCodec.decode(body, limits: SyncBundle.changeLimits)
                        throw fail("ChangeCodec.decode accepts the encoding SyncBundle.decode refuses")
                    } catch let error as CRDTError {
                        guard fragment.isEmpty || error.message.contains(fragment) else {
                            throw fail("ChangeCodec.decode refuses it with: \(error.message) (expected '\(fragment)')")
                        }
                    }
                }
                return .rejected(code: error.code.description, message: error.message)
            case .success(let bundle):
                if case .refused(let fragment) = reissueCase.expectation {
                    throw fail("a malformed re-issue was accepted (expected a refusal naming '\(fragment)')")
                }
                let applied = try applyChecked(bundle, caseSeed: caseSeed)
                changes += bundle.changes.count
                rebuilds += applied.rebuilds
            }
        }
        var withdrew = false
        if case .holds(let check) = reissueCase.expectation {
            do {
                try verify(check, fail)
            } catch let failure as FuzzFailure {
                throw failure
            } catch {
                throw fail("the store threw: \(error)")
            }
            withdrew = !check.withdrawn.isEmpty
        }
        return .reissue(changes: changes, rebuilds: rebuilds, withdrew: withdrew, kind: reissueCase.kind)
    }

    /// Checks what a case says must hold of the store (its version vector, log and notes) and of
    /// the model that agrees with it (the characters, by identity: the store keeps text, not
    /// identities, where it can be read).
    func verify(_ check: ReissueCases.Check, _ fail: (String) -> FuzzFailure) throws {
        let vector = try store!.versionVector
        for (replica, seq) in check.seqs.sorted(by: { $0.key < $1.key }) where vector[replica] != seq {
            throw fail("the store holds \(replica)'s seqs through \(vector[replica]), the case expects \(seq)")
        }
        for character in check.present {
            guard vector[character.id.replica] >= character.id.seq, shadow.body(of: character.note)?.contains(character.id) == true else {
                throw fail("character \(character.id.replica):\(character.id.seq) is not in note \(character.note) (the store holds \(character.id.replica) through \(vector[character.id.replica]))")
            }
        }
        for character in check.absent where shadow.body(of: character.note)?.contains(character.id) == true {
            throw fail("withdrawn character \(character.id.replica):\(character.id.seq) is still in note \(character.note)")
        }
        for (note, text) in check.bodies.sorted(by: { $0.key < $1.key }) {
            let body = try store!.note(note)?.body
            guard body == text else { throw fail("note \(note) reads \(body.map { "'\($0)'" } ?? "nothing"), expected '\(text)'") }
        }
        for range in check.withdrawn {
            var others = vector
            others[range.replica] = 0
            let log = try store!.changes(since: others).filter { $0.replica == range.replica }
            if let held = log.first(where: { $0.endSeq >= range.seq && $0.startSeq < range.seq + range.count }) {
                throw fail("the store's log still holds \(range.replica)'s seqs \(held.startSeq)-\(held.endSeq), withdrawn from \(range.seq)")
            }
        }
    }
}

import Foundation
import GRDB
import NotesCRDT
import NotesSync

/// The encrypted space a replica is in, as `NoteStore.space()` reads it.
public struct SpaceState: Sendable, Hashable {
    /// The space key's id (16 hex digits), the same on every device of the space.
    public var keyID: String
    /// How the key was made: the scrypt descriptor other devices join with, or `recovery code`.
    public var origin: String
    /// This replica's signing public key (64 hex digits).
    public var publicKey: String
    /// The members whose signing keys this replica knows (trusted on first use), by replica.
    public var members: [Member]
    /// Sealed units kept to pass on.
    public var sealedUnits: Int
    /// Sealed units refused (forged, altered, another key), kept aside.
    public var refusedUnits: Int

    /// A member and its signing public key.
    public struct Member: Sendable, Hashable {
        /// The member replica.
        public var replica: ReplicaID
        /// Its signing public key (64 hex digits).
        public var publicKey: String
        /// Its X25519 agreement key (64 hex digits), once learnt from a unit whose signature verified.
        public var agreementKey: String?
    }
}

/// A sealed unit that a store refused, kept aside with the reason.
public struct RefusedUnit: Sendable, Hashable {
    /// The author its header names.
    public var author: ReplicaID
    /// The first seq its header names.
    public var startSeq: UInt64
    /// The last seq its header names.
    public var endSeq: UInt64
    /// The `SyncError` code (`forged`, `malformed`, `tooLarge`).
    public var code: String
    /// Why it was refused.
    public var reason: String
}

extension NoteStore {
    /// At most this many refused units are kept per author (as the quarantine keeps 16).
    static let refusedUnitsPerAuthor = 16
    /// The most bytes of refused units kept in all.
    static let refusedUnitBytes = 32 << 20

    /// Puts the replica in an encrypted space with `key`, and gives it a new signing key. From
    /// then on it syncs only sealed bundles. `origin` is how the key was made (the scrypt
    /// descriptor, or `recovery code`), kept for `space()`.
    ///
    /// - Throws: `StoreError` `.invalidArgument` when the replica is already in a space.
    public func enterSpace(key: SpaceKey, origin: String) throws {
        try enterSpace(key: key, origin: origin, signingSeed: nil)
    }

    /// `enterSpace(key:origin:)` with the signing key made from `signingSeed` (32 bytes: the
    /// simulator's seeded runs), or a random one. The replica takes the id made from the key.
    package func enterSpace(key: SpaceKey, origin: String, signingSeed: [UInt8]?) throws {
        lock.lock(); defer { lock.unlock() }
        var fresh: ReplicaID?
        defer {
            if let fresh {
                // Loaded again as the new identity at the next use (the snapshot names the old one).
                identity.withLock { $0 = fresh }
                loaded = nil
            }
        }
        do {
            try queue.write { db in
                if let existing = try Data.fetchOne(db, sql: "SELECT key FROM space_key WHERE id = 1") {
                    let keyID = SpaceKey(bytes: [UInt8](existing))?.keyIDHex ?? "?"
                    throw StoreError(.invalidArgument, "this replica is already in an encrypted space (key id \(keyID)); nothing was changed")
                }
                let signer = try signingSeed.map { try SigningIdentity(rawRepresentation: $0) } ?? SigningIdentity()
                let now = Int64(options.wallClock.milliseconds())
                try db.execute(sql: "INSERT INTO space_key (id, key, origin, signing_key, created_at) VALUES (1, ?, ?, ?, ?)",
                               arguments: [Data(key.bytes), origin, Data(signer.rawRepresentation), now])
                // From now on the replica writes as the id made from its key, which nobody else can
                // sign as; what it wrote before stays under the old id, which it seals too.
                let old = replicaID
                let id = signer.replicaID
                try db.execute(sql: "UPDATE replica SET replica_id = ? WHERE id = 1", arguments: [Data(id.raw.bytes)])
                try db.execute(sql: "INSERT INTO replica_history (retired_id, new_id, retired_at, reason) VALUES (?, ?, ?, ?)",
                               arguments: [Data(old.raw.bytes), Data(id.raw.bytes), now,
                                           "entered an encrypted space: the replica writes as the id made from its signing key"])
                // Our own keys are known first, so nobody can introduce others for them here.
                for replica in [old, id] {
                    try db.execute(sql: "INSERT OR IGNORE INTO space_member (replica, public_key, first_seen) VALUES (?, ?, ?)",
                                   arguments: [Data(replica.raw.bytes), Data(signer.publicKey), now])
                }
                fresh = id
            }
        } catch {
            throw StoreError.wrap(error, "cannot record the space key")
        }
    }

    /// The space key and this replica's signing key, or nil in a plain replica.
    public func spaceSealer() throws -> SpaceSealer? {
        do {
            return try queue.read { db in try self.sealer(db) }
        } catch {
            throw StoreError.wrap(error, "cannot read the space key")
        }
    }

    /// The sealer of the stored keys: made again only when they change (its derived keys cost
    /// two HKDFs, and every sync asks for it several times).
    func sealer(_ db: Database) throws -> SpaceSealer? {
        guard let row = try Row.fetchOne(db, sql: "SELECT key, signing_key FROM space_key WHERE id = 1") else { return nil }
        let keyBytes = try row.stored(0, as: Data.self)
        let signingBytes = try row.stored(1, as: Data.self)
        let raw = [UInt8](keyBytes) + [UInt8](signingBytes)
        if let cached = sealerCache.withLock({ $0 }), cached.raw == raw { return cached.sealer }
        guard let key = SpaceKey(bytes: [UInt8](keyBytes)), let signer = try? SigningIdentity(rawRepresentation: [UInt8](signingBytes)) else {
            throw StoreError(.corrupt, "the stored space key or signing key has the wrong length")
        }
        let sealer = SpaceSealer(key: key, signer: signer, verified: verifiedUnits)
        sealerCache.withLock { $0 = (raw, sealer) }
        return sealer
    }

    /// The encrypted space this replica is in, or nil.
    public func space() throws -> SpaceState? {
        do {
            return try queue.read { db -> SpaceState? in
                guard let sealer = try self.sealer(db),
                      let origin = try String.fetchOne(db, sql: "SELECT origin FROM space_key WHERE id = 1") else { return nil }
                let members = try Row.fetchAll(db, sql: "SELECT replica, public_key, agreement_key FROM space_member ORDER BY replica").compactMap { row -> SpaceState.Member? in
                    let replica = try row.stored(0, as: Data.self)
                    let key = try row.stored(1, as: Data.self)
                    let agreement = try row.stored(2, as: Data?.self)
                    return ReplicaID(blob: [UInt8](replica)).map { SpaceState.Member(replica: $0, publicKey: hexString(key), agreementKey: agreement.map(hexString)) }
                }
                return SpaceState(keyID: sealer.key.keyIDHex, origin: origin, publicKey: hexString(sealer.signer.publicKey), members: members,
                                  sealedUnits: try Int.fetchOne(db, sql: "SELECT count(*) FROM sealed_unit") ?? 0,
                                  refusedUnits: try Int.fetchOne(db, sql: "SELECT count(*) FROM sealed_refused") ?? 0)
            }
        } catch {
            throw StoreError.wrap(error, "cannot read the space")
        }
    }

    /// What a folder reader checks of a sealed unit with this replica's keys (`FolderTransport.
    /// sealedUnitCheck`): its introduction, its author's key as first introduced here, its tag for
    /// this replica or its signature. Nil in a plain replica. Units under another key pass (`integrate(sealed:)`
    /// refuses them and says why).
    public func sealedUnitCheck() throws -> (@Sendable (SealedUnit) -> SyncError?)? {
        guard let sealer = try spaceSealer() else { return nil }
        let (members, agreements) = try memberKeys()
        return { unit in
            guard sealer.isOurs(unit) else { return nil }
            do {
                try sealer.verify(unit, knownKey: members[unit.author], knownAgreementKey: agreements[unit.author])
                return nil
            } catch let error as SyncError {
                return error
            } catch {
                return SyncError(.forged, "\(unit.label): \(error)")
            }
        }
    }

    /// Every member's signing key as first introduced here, and the agreement keys learnt.
    func memberKeys() throws -> (signing: [ReplicaID: [UInt8]], agreement: [ReplicaID: [UInt8]]) {
        do {
            return try queue.read { db in try NoteStore.memberKeys(db) }
        } catch {
            throw StoreError.wrap(error, "cannot read the space's members")
        }
    }

    static func memberKeys(_ db: Database) throws -> (signing: [ReplicaID: [UInt8]], agreement: [ReplicaID: [UInt8]]) {
        var members: [ReplicaID: [UInt8]] = [:]
        var agreements: [ReplicaID: [UInt8]] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT replica, public_key, agreement_key FROM space_member") {
            let replica = try row.stored(0, as: Data.self)
            let key = try row.stored(1, as: Data.self)
            let agreement = try row.stored(2, as: Data?.self)
            guard let id = ReplicaID(blob: [UInt8](replica)) else { continue }
            members[id] = [UInt8](key)
            if let agreement { agreements[id] = [UInt8](agreement) }
        }
        return (members, agreements)
    }

    /// Records `publicKey` as `replica`'s signing key, as if introduced first (devices that
    /// joined together and compared keys; the simulator's devices). An existing key stays.
    package func pinMember(_ replica: ReplicaID, publicKey: [UInt8]) throws {
        try recordMember(replica, key: publicKey)
    }

    /// The sealed units refused here, oldest first.
    public func refusedUnits() throws -> [RefusedUnit] {
        do {
            return try queue.read { db in
                try Row.fetchAll(db, sql: "SELECT author, start_seq, end_seq, code, reason FROM sealed_refused ORDER BY row").compactMap { row in
                    let author = try row.stored(0, as: Data.self)
                    guard let id = ReplicaID(blob: [UInt8](author)) else { return nil }
                    return RefusedUnit(author: id, startSeq: UInt64(bitPattern: try row.stored(1, as: Int64.self)), endSeq: UInt64(bitPattern: try row.stored(2, as: Int64.self)),
                                       code: try row.stored(3), reason: try row.stored(4))
                }
            }
        } catch {
            throw StoreError.wrap(error, "cannot read the refused units")
        }
    }
}

extension NoteStore: SealedSyncReplica {
    /// Whether the replica is in an encrypted space.
    public func isInEncryptedSpace() throws -> Bool {
        do {
            return try queue.read { db in try Bool.fetchOne(db, sql: "SELECT 1 FROM space_key WHERE id = 1") ?? false }
        } catch {
            throw StoreError.wrap(error, "cannot read the space key")
        }
    }

    /// Seals this replica's own changes that no unit holds yet (one unit per piece a reader
    /// takes), keeps those units, and returns every kept unit a replica at `version` lacks whose
    /// changes are all applied here.
    public func sealedUnits(since version: VersionVector) throws -> [SealedUnit] {
        try sealedUnits(since: version, checkingTaggedUnits: true)
    }

    /// `sealedUnits(since:)`; with `checkingTaggedUnits` false, units taken here on their
    /// recipient tag are returned without a signature check (a folder's readers check each unit
    /// and skip only a bad one; a relay refuses a whole upload, so it gets checked units).
    public func sealedUnits(since version: VersionVector, checkingTaggedUnits: Bool) throws -> [SealedUnit] {
        guard let sealer = try spaceSealer() else { return [] }
        let have = try currentVersion()
        // Ours: the current id, and the older ids this replica wrote as that are not made from a
        // key (a retired id made from a key is sealed by the key's holder, if anyone).
        var own = [replicaID]
        var sealedUpTo: [UInt64] = []
        var recipients: [[UInt8]] = []
        do {
            try queue.read { db in
                // Every member whose agreement key is known here gets a tag (checked instead of the signature).
                recipients = try Data.fetchAll(db, sql: "SELECT DISTINCT agreement_key FROM space_member WHERE agreement_key IS NOT NULL").map { [UInt8]($0) }
                for blob in try Data.fetchAll(db, sql: "SELECT retired_id FROM replica_history ORDER BY row") {
                    if let old = ReplicaID(blob: [UInt8](blob)), !SigningIdentity.isSelfCertified(old), !own.contains(old) { own.append(old) }
                }
                for author in own {
                    sealedUpTo.append(UInt64(bitPattern: try Int64.fetchOne(db, sql: "SELECT max(end_seq) FROM sealed_unit WHERE author = ?",
                                                                            arguments: [Data(author.raw.bytes)]) ?? 0))
                }
            }
        } catch {
            throw StoreError.wrap(error, "cannot read the sealed units")
        }
        var encoder = ChangeCodec.Encoder()
        for (author, upTo) in zip(own, sealedUpTo) where have[author] > upTo {
            var since = have
            since[author] = upTo
            let fresh = try changes(since: since).filter { $0.replica == author }
            guard !fresh.isEmpty else { continue }
            var units: [SealedUnit] = []
            // Each unit holds what one bundle may: the pieces a plain writer would send.
            for piece in try SyncBundle.pieces(sender: author, senderVersion: VersionVector(), changes: fresh) {
                units.append(try sealer.seal(author: author, changes: piece.changes, encoder: &encoder, recipients: recipients))
            }
            try keep(units)
        }
        let offered: [(unit: SealedUnit, signature: Int)]
        do {
            offered = try queue.read { db in
                var result: [(unit: SealedUnit, signature: Int)] = []
                // Per author the other side lacks, through the (author, end_seq) key: past what the
                // other side has, and all applied here (a unit of changes that wait for their
                // dependencies goes once they are applied, as what we say we have).
                // A unit whose signature does not verify (taken on its tag) is never passed on.
                let select = try db.cachedStatement(sql: """
                    SELECT unit, signature FROM sealed_unit WHERE author = ? AND end_seq > ? AND end_seq <= ? AND signature >= 0 ORDER BY end_seq
                    """)
                for entry in have.sortedEntries where entry.seq > version[entry.replica] {
                    let from = version[entry.replica]
                    guard from < UInt64(Int64.max), entry.seq <= UInt64(Int64.max) else { continue }
                    for row in try Row.fetchAll(select, arguments: [Data(entry.replica.raw.bytes), Int64(from), Int64(entry.seq)]) {
                        let bytes = try row.stored(0, as: Data.self)
                        result.append((try SealedUnit(parsing: [UInt8](bytes)), try row.stored(1)))
                    }
                }
                return result
            }
        } catch let error as SyncError {
            throw StoreError(.corrupt, "a stored sealed unit does not parse: \(error.message)")
        } catch {
            throw StoreError.wrap(error, "cannot read the sealed units")
        }
        guard checkingTaggedUnits else { return offered.map(\.unit) }
        return try checkedBeforePassingOn(offered, sealer: sealer)
    }

    /// The units to pass on, after checking the signature of those taken here on their tag: the
    /// next replica, or the relay, checks it, so a unit whose author tagged it for this replica
    /// but signed something else (an author equivocating) stops here, refused and never offered again.
    private func checkedBeforePassingOn(_ offered: [(unit: SealedUnit, signature: Int)], sealer: SpaceSealer) throws -> [SealedUnit] {
        var checked: [SealedUnit] = []
        var bad: [SealedUnit] = []
        var result: [SealedUnit] = []
        for (unit, signature) in offered {
            if signature > 0 { result.append(unit); continue }
            if (try? sealer.verify(unit, knownKey: nil, knownAgreementKey: nil)) != nil {
                checked.append(unit)
                result.append(unit)
            } else {
                bad.append(unit)
            }
        }
        guard !checked.isEmpty || !bad.isEmpty else { return result }
        let now = Int64(options.wallClock.milliseconds())
        do {
            try queue.write { db in
                for unit in checked + bad {
                    try db.execute(sql: "UPDATE sealed_unit SET signature = ? WHERE author = ? AND end_seq = ?",
                                   arguments: [bad.contains(unit) ? -1 : 1, Data(unit.author.raw.bytes), Int64(bitPattern: unit.endSeq)])
                }
                for unit in bad {
                    try NoteStore.keepRefused(unit, code: "forged", reason: "forged: the signature of \(unit.label) does not verify, though its tag for this replica did (its author tagged one thing and signed another); it is not passed on", now: now, db)
                }
            }
        } catch {
            throw StoreError.wrap(error, "cannot record the checked sealed units")
        }
        return result
    }

    static func keepRefused(_ unit: SealedUnit, code: String, reason: String, now: Int64, _ db: Database) throws {
        let author = Data(unit.author.raw.bytes)
        let kept = try Int.fetchOne(db, sql: "SELECT count(*) FROM sealed_refused WHERE author = ?", arguments: [author]) ?? 0
        guard kept < NoteStore.refusedUnitsPerAuthor else { return }
        // Once each (a folder or relay hands the same refused unit over at every sync), and within
        // a total that a stranger who writes to the folder cannot grow without end.
        guard try Bool.fetchOne(db, sql: "SELECT 1 FROM sealed_refused WHERE author = ? AND end_seq = ? AND unit = ?",
                                arguments: [author, Int64(bitPattern: unit.endSeq), Data(unit.bytes)]) == nil,
              (try Int.fetchOne(db, sql: "SELECT coalesce(sum(length(unit)), 0) FROM sealed_refused") ?? 0) + unit.bytes.count <= NoteStore.refusedUnitBytes
        else { return }
        try db.execute(sql: """
            INSERT INTO sealed_refused (author, start_seq, end_seq, code, reason, unit, received_at) VALUES (?, ?, ?, ?, ?, ?, ?)
            """, arguments: [author, Int64(bitPattern: unit.startSeq), Int64(bitPattern: unit.endSeq), code, reason, Data(unit.bytes), now])
    }

    private func keep(_ units: [SealedUnit]) throws {
        do {
            try queue.write { db in try NoteStore.insert(units, db) }
        } catch {
            throw StoreError.wrap(error, "cannot keep the sealed units")
        }
    }

    /// Keeps `units`; those in `takenOnTag` had their tag checked, not their signature.
    static func insert(_ units: [SealedUnit], takenOnTag: Set<UnitBytes> = [], _ db: Database) throws {
        for unit in units {
            // One unit per (author, last seq): a second one for the same range adds nothing to pass on.
            try db.execute(sql: "INSERT OR IGNORE INTO sealed_unit (author, start_seq, end_seq, unit, signature) VALUES (?, ?, ?, ?, ?)",
                           arguments: [Data(unit.author.raw.bytes), Int64(bitPattern: unit.startSeq), Int64(bitPattern: unit.endSeq), Data(unit.bytes),
                                       takenOnTag.contains(UnitBytes(unit.bytes)) ? 0 : 1])
        }
    }

    /// Opens the units (each unit's introduction, its author's key as first introduced here, its
    /// signature, its ciphertext), then applies their changes, keeps them, records newly
    /// introduced members and keeps refused units aside, in one transaction.
    public func integrate(sealed units: [SealedUnit]) throws -> IntegrationReport {
        try integrate(sealed: units, compacting: true)
    }

    /// `integrate(sealed:)` for one batch of a sync's receive: the snapshot waits for `integrationFinished()`.
    public func integrate(sealedBatch units: [SealedUnit]) throws -> IntegrationReport {
        try integrate(sealed: units, compacting: false)
    }

    func integrate(sealed units: [SealedUnit], compacting: Bool) throws -> IntegrationReport {
        var sealer: SpaceSealer?
        var members: [ReplicaID: [UInt8]] = [:]
        var agreements: [ReplicaID: [UInt8]] = [:]
        var known: Set<UnitBytes> = []
        var heardFromOthers = false
        do {
            // One read for what opening needs: the keys, the members, the units kept already.
            try queue.read { db in
                sealer = try self.sealer(db)
                guard sealer != nil, !units.isEmpty else { return }
                heardFromOthers = try Bool.fetchOne(db, sql: "SELECT 1 FROM sealed_unit WHERE author != ? LIMIT 1",
                                                    arguments: [Data(replicaID.raw.bytes)]) ?? false
                (members, agreements) = try NoteStore.memberKeys(db)
                let select = try db.cachedStatement(sql: "SELECT unit FROM sealed_unit WHERE author = ? AND end_seq = ?")
                for unit in units {
                    if let stored = try Data.fetchOne(select, arguments: [Data(unit.author.raw.bytes), Int64(bitPattern: unit.endSeq)]),
                       stored.elementsEqual(unit.bytes) {
                        known.insert(UnitBytes(unit.bytes))
                    }
                }
            }
        } catch {
            throw StoreError.wrap(error, "cannot read the space's members")
        }
        guard let sealer else {
            throw SyncError(.encryption, "sealed (end-to-end encrypted) bundles refused: this replica is in no encrypted space (join it with `crdt-sync space join`)")
        }
        guard !units.isEmpty else { return IntegrationReport(try apply([], alsoWriting: nil, compacting: compacting)) }
        members[replicaID] = members[replicaID] ?? sealer.signer.publicKey
        var opened: [SealedUnit] = []
        var changes: [Change] = []
        var refused: [(unit: SealedUnit, error: SyncError)] = []
        var introduced: [ReplicaID: [UInt8]] = [:]
        var learnt: [ReplicaID: [UInt8]] = [:]
        var takenOnTag: Set<UnitBytes> = []
        var otherKeys = 0
        var duplicates = 0
        for unit in units {
            // A unit kept here already was opened and applied: a replay changes nothing.
            if known.contains(UnitBytes(unit.bytes)) { duplicates += 1; continue }
            guard sealer.isOurs(unit) else {
                otherKeys += 1
                refused.append((unit, SyncError(.wrongKey, "this space is encrypted with a different key: \(unit.label) is sealed under key \(hex16(unit.keyID)), this replica's is \(sealer.key.keyIDHex)")))
                continue
            }
            do {
                let (inside, check) = try sealer.openChecked(unit, knownKey: members[unit.author], knownAgreementKey: agreements[unit.author])
                if members[unit.author] == nil {
                    members[unit.author] = unit.publicKey
                    introduced[unit.author] = unit.publicKey
                }
                if check == .tag {
                    takenOnTag.insert(UnitBytes(unit.bytes))
                } else if agreements[unit.author] == nil, let agreement = unit.agreementKey {
                    // Learnt only from a unit whose signature verified: its author's key signed it.
                    agreements[unit.author] = agreement
                    learnt[unit.author] = agreement
                }
                opened.append(unit)
                changes += inside
            } catch let error as SyncError {
                refused.append((unit, error))
            }
        }
        // Nothing opens and nothing ever did from others: this device's key is the wrong one. (A
        // replica that has opened others' units refuses a stray foreign unit alone, so that a
        // file dropped in a folder cannot stop the space's syncs.)
        if otherKeys > 0, opened.isEmpty, duplicates == 0, !heardFromOthers {
            throw SyncError(.wrongKey, "this space is encrypted with a different key: \(otherKeys) sealed unit(s) received, none under this replica's key (\(sealer.key.keyIDHex)); nothing was applied. Check the passphrase or recovery code this device joined with")
        }
        let now = Int64(options.wallClock.milliseconds())
        let own = sealer.signer.publicKey
        let ownID = replicaID
        let report = try apply(CausalOrder.canonical(changes), alsoWriting: { db in
            try NoteStore.insert(opened, takenOnTag: takenOnTag, db)
            // Our own signing key is known as ours without an introduction from elsewhere.
            try db.execute(sql: "INSERT OR IGNORE INTO space_member (replica, public_key, first_seen) VALUES (?, ?, ?)",
                           arguments: [Data(ownID.raw.bytes), Data(own), now])
            for (replica, key) in introduced {
                try db.execute(sql: "INSERT OR IGNORE INTO space_member (replica, public_key, first_seen) VALUES (?, ?, ?)",
                               arguments: [Data(replica.raw.bytes), Data(key), now])
            }
            for (replica, agreement) in learnt {
                try db.execute(sql: "UPDATE space_member SET agreement_key = ? WHERE replica = ? AND agreement_key IS NULL",
                               arguments: [Data(agreement), Data(replica.raw.bytes)])
            }
            for (unit, error) in refused {
                try NoteStore.keepRefused(unit, code: error.code.description, reason: error.message, now: now, db)
            }
        }, compacting: compacting)
        return IntegrationReport(applied: report.applied, duplicates: report.duplicates + duplicates, pending: report.pending,
                                 quarantined: report.quarantined, rejected: report.rejected + refused.count,
                                 refused: refused.map(\.error.message), foreignOwnChanges: report.foreignOwnChanges, forks: report.forks)
    }

    fileprivate func recordMember(_ replica: ReplicaID, key: [UInt8]) throws {
        do {
            try queue.write { db in
                try db.execute(sql: "INSERT OR IGNORE INTO space_member (replica, public_key, first_seen) VALUES (?, ?, ?)",
                               arguments: [Data(replica.raw.bytes), Data(key), Int64(options.wallClock.milliseconds())])
            }
        } catch {
            throw StoreError.wrap(error, "cannot record a space member")
        }
    }
}

private func hexString(_ bytes: some Sequence<UInt8>) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
private func hex16(_ bytes: [UInt8]) -> String { hexString(bytes) }

import Foundation
import NotesCRDT
@testable import NotesRelay
import NotesStore
@testable import NotesSync
import Testing

/// The relay in an encrypted space: it stores and serves sealed units it cannot read, and refuses
/// what it can tell is forged without the space key.
struct SealedRelayTests {
    let key = SpaceKey.random()

    func member() throws -> NoteStore {
        let store = try NoteStore.openInMemory()
        try store.enterSpace(key: key, origin: "recovery code")
        return store
    }

    func upload(_ store: NoteStore, _ units: [SealedUnit]) -> SyncBundle {
        SyncBundle(sender: store.replicaID, senderVersion: (try? store.versionVector) ?? VersionVector(), sealed: units)
    }

    @Test(arguments: RelayBackend.available)
    func sealedUnitsAreStoredAndServedWithoutAKey(_ backend: RelayBackend) async throws {
        try await RelayServiceTests.withService(backend) { service, space in
            let a = try member(), b = try member()
            _ = try a.createNote(title: "the relay must not read this", body: "nor this")
            let units = try a.sealedUnits(since: VersionVector())
            let stored = await RelayServiceTests.post(service, space, upload(a, units))
            #expect(stored.status == 200 && stored.headers[RelayProtocol.storedHeader] == "\(units.count)")
            let reply = try SyncBundle.decode(await RelayServiceTests.post(service, space, SyncBundle(sender: b.replicaID, senderVersion: VersionVector(), changes: [])).body)
            #expect(reply.isSealed && reply.sealedUnits == units)
            #expect(try b.integrate(sealed: reply.sealedUnits).refused.isEmpty)
            #expect(try b.digest() == a.digest())
            // A plaintext upload into the sealed space is refused, and stores nothing.
            let plain = try NoteStore.openInMemory()
            _ = try plain.createNote(title: "plain")
            let refused = await RelayServiceTests.post(service, space, SyncBundle(sender: plain.replicaID, senderVersion: try plain.versionVector,
                                                                                  changes: try plain.changes(since: VersionVector())))
            #expect(refused.status == 400 && RelayServiceTests.message(refused).contains("end-to-end encrypted"), "\(RelayServiceTests.message(refused))")
            #expect(try await service.storage.status(space: space).authors == 1)
        }
    }

    /// A plain space (its first upload was plaintext) refuses sealed units, and stores nothing of them.
    @Test(arguments: RelayBackend.available)
    func aPlainSpaceRefusesSealedUploads(_ backend: RelayBackend) async throws {
        try await RelayServiceTests.withService(backend) { service, space in
            let plain = try NoteStore.openInMemory()
            _ = try plain.createNote(title: "plain")
            let first = await RelayServiceTests.post(service, space, SyncBundle(sender: plain.replicaID, senderVersion: try plain.versionVector,
                                                                                changes: try plain.changes(since: VersionVector())))
            #expect(first.status == 200)
            let a = try member()
            _ = try a.createNote(title: "sealed")
            let refused = await RelayServiceTests.post(service, space, upload(a, try a.sealedUnits(since: VersionVector())))
            #expect(refused.status == 400 && RelayServiceTests.message(refused).contains("not encrypted"), "\(RelayServiceTests.message(refused))")
            #expect(try await service.storage.status(space: space).authors == 1)
        }
    }

    @Test(arguments: RelayBackend.available)
    func forgedUnitsAreRefusedByTheRelay(_ backend: RelayBackend) async throws {
        try await RelayServiceTests.withService(backend) { service, space in
            let a = try member(), mallory = try member()
            _ = try a.createNote(title: "t")
            let units = try a.sealedUnits(since: VersionVector())
            // Altered after signing: the signature does not verify.
            var altered = units[0].bytes
            altered[altered.count - 100] ^= 1
            let tampered = await RelayServiceTests.post(service, space, upload(a, [try SealedUnit(parsing: altered)]))
            #expect(tampered.status == 400 && RelayServiceTests.message(tampered).contains("not signed by the key it names"))
            // A member's unit in a's name, signed with its own key: a's id is made from a's key.
            let changes = try a.changes(since: VersionVector())
            var encoder = ChangeCodec.Encoder()
            let forged = try #require(try mallory.spaceSealer()).seal(author: a.replicaID, changes: changes, encoder: &encoder)
            var claimed = try mallory.versionVector
            claimed[a.replicaID] = try a.versionVector[a.replicaID]
            let response = await RelayServiceTests.post(service, space, SyncBundle(sender: mallory.replicaID, senderVersion: claimed, sealed: [forged]))
            #expect(response.status == 400 && RelayServiceTests.message(response).contains("is not made from"), "\(RelayServiceTests.message(response))")
            #expect(try await service.storage.status(space: space).changes == 0)
            // The real unit is still taken.
            #expect(await RelayServiceTests.post(service, space, upload(a, units)).status == 200)
        }
    }
}

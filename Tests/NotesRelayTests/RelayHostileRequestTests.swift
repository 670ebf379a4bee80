import BundleFuzz
import Foundation
import NotesCRDT
@testable import NotesRelay
import NotesSync
import Testing

/// The relay's endpoints under generated hostile requests: push bodies from the bundle fuzzer
/// (version 3 and record pages, values and frames that lie), page requests whose version vector
/// or `since` sits at the edges of its type, odd `Accept` headers, odd tokens. Every answer is a
/// status the protocol names (never a 5xx), a refusal says why, a refusal stores nothing, and every
/// page the relay answers with reads back whole, by both readers.
struct RelayHostileRequestTests {
    static let token = "tok-hostile-1"

    /// SplitMix64 steps, so that every case repeats.
    struct Seeded {
        var state: UInt64
        mutating func next() -> UInt64 {
            state = FuzzDriver.caseSeed(state, 1)
            return state
        }
        mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
        mutating func pick<T>(_ values: [T]) -> T { values[below(values.count)] }
    }

    static let accepts = [
        nil, "", RelayProtocol.bundleContentType, RelayProtocol.recordsAccept, RelayProtocol.bundleContentType + ", " + RelayProtocol.recordsAccept,
        "application/vnd.crdt-sync.bundle;version=6", "application/vnd.crdt-sync.bundle;version=-1", "application/vnd.crdt-sync.bundle;version=18446744073709551616",
        "application/vnd.crdt-sync.bundle;version=5;version=3", "APPLICATION/VND.CRDT-SYNC.BUNDLE ; VERSION = 5", "*/*", ",,,;;;",
        String(repeating: "application/vnd.crdt-sync.bundle;version=5,", count: 2000), "application/json", "\u{0}\u{7F}é",
    ]

    static let authorizations = [
        "Bearer \(token)", "Bearer \(token)", "Bearer \(token)", nil, "", "Bearer", "Bearer ", "bearer \(token)", "Bearer  \(token)",
        "Bearer \(token) ", "Basic \(token)", "Bearer \(token)x", "Bearer " + String(repeating: "t", count: 100_000), "Bearer tök",
    ]

    /// `since` values: pairs with seqs at the edges of UInt64 and past it, bad hex, too many pairs.
    static func since(_ rng: inout Seeded, _ authors: [ReplicaID], space: VersionVector) -> String {
        let seqs = ["0", "1", "9007199254740991", "9007199254740992", "18446744073709551615", "18446744073709551616", "-1", "", "1e3", "0x10"]
        switch rng.below(7) {
        case 6:
            // Every author the space has, at a seq at or past its own: nothing is ahead (204 with no wait).
            return space.sortedEntries.map { "\($0.replica):\(rng.pick([String($0.seq), "9007199254740991", "18446744073709551615"]))" }.joined(separator: ",")
        case 0: return ""
        case 1: return (0 ..< 1 + rng.below(3)).map { _ in "\(rng.pick(authors).description):\(rng.pick(seqs))" }.joined(separator: ",")
        case 2: return "\(String(repeating: "g", count: 32)):1"
        case 3: return Array(repeating: "\(authors[0].description):1", count: 70_000).joined(separator: ",")
        case 4: return "\(authors[0].description):1:2"
        default: return String(repeating: ",", count: rng.below(5))
        }
    }

    /// What a refusal may be: the protocol's statuses, never a server error.
    static let refusals: Set<Int> = [400, 401, 403, 404, 405, 413]

    @Test(arguments: [1, 2] as [UInt64])
    func hostileRequestsGetAnAnswerAndARefusalStoresNothing(seed: UInt64) async throws {
        let space = uniqueSpace("hostile")
        let storage = try SQLiteRelayStorage.inMemory()
        let service = RelayService(storage: storage, tokens: try RelayTokens([(space: space, token: Self.token)]),
                                   limits: RelayLimits(page: RelayPageLimits(maxChanges: 50)))
        // A space with some history, so that pages have something to cut.
        var book = Notebook(replicaID: ReplicaID(Identifier128(high: 0xC11E, low: seed)), wallClock: FixedWallClock(1_700_000_000_000))
        let (id, _) = book.createNote(id: NoteID(Identifier128(high: 0xD0C, low: seed)), title: "t", body: "hello")
        for i in 0 ..< 120 { _ = try book.insertText(id, at: 0, "w\(i) ") }
        let first = SyncBundle(sender: book.replicaID, senderVersion: book.versionVector, changes: book.changes(since: VersionVector()))
        let seeded = await service.handle(RelayRequest(method: "POST", path: "/v1/spaces/\(space)/sync",
                                                       headers: ["authorization": "Bearer \(Self.token)"], body: first.encoded()))
        #expect(seeded.status == 200)
        let authors = [book.replicaID, ReplicaID(Identifier128(high: 0xA000, low: 1)), ReplicaID(Identifier128(high: 0xA000, low: 2))]

        let driver = FuzzDriver()
        var rng = Seeded(state: seed)
        var statuses: [Int: Int] = [:]
        var pagesRead = 0
        for index in 0 ..< 1500 as Range<UInt64> {
            var headers: [String: String] = [:]
            // Mostly the right token, so that most requests reach what is behind it.
            let authorization = rng.below(3) == 0 ? rng.pick(Self.authorizations) : "Bearer \(Self.token)"
            if let authorization { headers["authorization"] = authorization }
            if let accept = rng.pick(Self.accepts) { headers["accept"] = accept }
            let before = try await storage.status(space: space)
            let request: RelayRequest
            let isPush: Bool
            switch rng.below(8) {
            case 0 ... 4:
                // A push: a fuzz case's bundle (a quarter of them record pages), or a page request from a vector at the edges.
                var body = driver.bytes(caseSeed: FuzzDriver.caseSeed(seed &* 1000, index))
                if rng.below(5) == 0 {
                    var vector = VersionVector()
                    for author in authors where rng.below(2) == 0 { vector[author] = rng.pick([0, 1, 60, Change.maxSeq]) }
                    body = SyncBundle(sender: authors[rng.below(authors.count)], senderVersion: vector, changes: []).encoded()
                }
                if rng.below(20) == 0 { headers["content-length"] = rng.pick(["-1", "18446744073709551616", "99999999", "abc", "0"]) }
                request = RelayRequest(method: "POST", path: "/v1/spaces/\(space)/sync", headers: headers, body: body)
                isPush = true
            case 5, 6:
                // Never a wait that would hold the test: a bad one is refused, a valid one is 0 (or out of range).
                let wait = rng.pick(["0", "-1", "abc", "1e3", "99999999999999999999", ""])
                request = RelayRequest(method: "GET", path: "/v1/spaces/\(space)/changes", headers: headers,
                                       query: ["since": Self.since(&rng, authors, space: before.version), "wait": wait])
                isPush = false
            default:
                request = RelayRequest(method: rng.pick(["GET", "PUT", "DELETE", "get"]), path: rng.pick([
                    "/v1/spaces/\(space)/status", "/v1/spaces/\(space)/sync", "/v1/spaces/../status", "/v1/spaces/\(space)/status/x",
                    "/v1/spaces/%00/status", "/v1/spaces/" + String(repeating: "a", count: 200) + "/status", "//v1//spaces//\(space)//status",
                ]), headers: headers)
                isPush = false
            }
            let answer = await service.handle(request)
            statuses[answer.status, default: 0] += 1
            let after = try await storage.status(space: space)
            guard answer.status == 200 || answer.status == 204 || Self.refusals.contains(answer.status) else {
                Issue.record("case \(index): status \(answer.status): \(String(decoding: answer.body.prefix(200), as: UTF8.self))")
                continue
            }
            if answer.status >= 400 {
                #expect(!answer.body.isEmpty, "case \(index): a refusal with no reason")
                #expect(after == before, "case \(index): a refused request changed the space")
            }
            if isPush, answer.status == 200 {
                // The page the relay answers with is whole: both readers take it and agree.
                do {
                    let decoded = try SyncBundle.decode(answer.body)
                    if let read = try FuzzDriver.readAsRelayClient(answer.body) {
                        #expect(read.changes == decoded.changes, "case \(index)")
                        #expect(RelayProtocol.acceptsRecords(headers["accept"]), "case \(index): a record page to a client that did not ask for one")
                    }
                    pagesRead += 1
                } catch {
                    Issue.record("case \(index): the relay's answer does not read back: \(error)")
                }
            }
        }
        // The cases reach every kind of answer.
        for status in [200, 204, 400, 401, 404, 405] { #expect(statuses[status, default: 0] > 0, "\(statuses)") }
        #expect(pagesRead > 100, "\(statuses)")
    }

    @Test func sinceAtTheEdgesOfItsTypeParsesOrIsRefused() throws {
        let author = ReplicaID(Identifier128(high: 1, low: 2))
        #expect(try RelayProtocol.parseSince("\(author):18446744073709551615")[author] == .max)
        for bad in ["\(author):18446744073709551616", "\(author):-1", "\(author):", ":1", "\(author)", "zz:1", "\(author):1:1"] {
            #expect(throws: SyncError.self) { _ = try RelayProtocol.parseSince(bad) }
        }
        #expect(throws: SyncError.self) { _ = try RelayProtocol.parseSince(Array(repeating: "\(author):1", count: 100_000).joined(separator: ",")) }
    }
}

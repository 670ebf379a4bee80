import Foundation
import NotesCRDT
import NotesSync
import Testing

/// A seeded generator so that fuzz cases repeat.
struct SeededRNG: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

func sampleNotebooks() throws -> (Notebook, Notebook) {
    var rng = SeededRNG(state: 42)
    let clock = FixedWallClock(1_700_000_000_000)
    var a = Notebook(replicaID: .random(using: &rng), wallClock: clock)
    var b = Notebook(replicaID: .random(using: &rng), wallClock: clock)
    let (id, _) = a.createNote(id: .random(using: &rng), title: "Shared", body: "hello world", tags: ["Work"])
    try b.merge(a)
    try a.insertText(id, at: 5, ", dear")
    try a.setPinned(id, true)
    try b.insertText(id, at: 0, "Oh, ")
    try b.deleteText(id, 6 ..< 9)
    try b.setTitle(id, "Renamed 🎉")
    try b.setTag(id, "Home", member: true)
    return (a, b)
}

/// Expects decoding `bytes` to fail with this code and a message that contains `words`.
func expectError(_ bytes: [UInt8], _ code: SyncError.Code, _ words: String,
                 sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(sourceLocation: sourceLocation) {
        _ = try SyncBundle.decode(bytes)
    } throws: { error in
        guard let error = error as? SyncError else { return false }
        return error.code == code && error.message.contains(words)
    }
}

struct SyncBundleTests {
    @Test func roundTripKeepsEverything() throws {
        let (a, b) = try sampleNotebooks()
        let bundle = SyncBundle(sender: b.replicaID, senderVersion: b.versionVector, changes: b.changes(since: VersionVector()))
        let decoded = try SyncBundle.decode(bundle.encoded())
        #expect(decoded == bundle)
        var merged = a
        merged.apply(contentsOf: decoded.changes)
        #expect(merged.digest() == (try a.merging(b)).digest())
    }

    func validBytes() throws -> [UInt8] {
        let (_, b) = try sampleNotebooks()
        return SyncBundle(sender: b.replicaID, senderVersion: b.versionVector, changes: b.changes(since: VersionVector())).encoded()
    }

    /// A writer of many bundles keeps one encoder: the bytes are those of `encoded()`.
    @Test func bundlesEncodedWithOneEncoderAreTheSame() throws {
        let (a, b) = try sampleNotebooks()
        let bundles = [a, b, a].map { SyncBundle(sender: $0.replicaID, senderVersion: $0.versionVector, changes: $0.changes(since: VersionVector())) }
            + [SyncBundle(sender: a.replicaID, senderVersion: a.versionVector, changes: [])]
        var encoder = ChangeCodec.Encoder()
        for bundle in bundles {
            let bytes = bundle.encoded(using: &encoder)
            #expect(bytes == bundle.encoded())
            #expect(try SyncBundle.decode(bytes) == bundle)
        }
    }

    @Test func flippedByteIsAChecksumMismatch() throws {
        var bytes = try validBytes()
        bytes[bytes.count / 2] ^= 0x40
        expectError(bytes, .checksumMismatch, "checksum mismatch")
    }

    @Test func truncatedBundleIsRejected() throws {
        let bytes = try validBytes()
        expectError(Array(bytes.prefix(bytes.count - 1)), .checksumMismatch, "incomplete")
        expectError(Array(bytes.prefix(20)), .truncated, "truncated")
    }

    @Test func wrongMagicIsNotABundle() throws {
        var bytes = try validBytes()
        bytes[0] = UInt8(ascii: "X")
        expectError(bytes, .notABundle, "magic")
        expectError(Array("SQLite format 3\0".utf8), .notABundle, "not a crdt-sync bundle")
    }

    @Test func futureFormatVersionIsNamed() throws {
        var bytes = try validBytes()
        bytes[8] = 9
        expectError(bytes, .unsupportedVersion, "version 9")
    }

    @Test func lyingLengthsWithAMatchingChecksumAreMalformed() throws {
        // Re-seal a bundle whose body length field lies, so the checksum matches.
        let bytes = try validBytes()
        var content = Array(bytes.dropLast(32))
        // The body length varint sits right after the version vector; find it by re-encoding.
        let bundle = try SyncBundle.decode(bytes)
        var header = BinaryWriter()
        header.raw(SyncBundle.magic); header.byte(1); header.byte(0); header.raw(bundle.sender.raw.bytes)
        header.varint(UInt64(bundle.senderVersion.entries.count))
        for (r, s) in bundle.senderVersion.sortedEntries { header.raw(r.raw.bytes); header.varint(s) }
        let lengthOffset = header.bytes.count
        content[lengthOffset] = content[lengthOffset] &+ 1
        expectError(content + SHA256.digest(content), .malformed, "body length")

        // A change count far beyond what the bytes can hold.
        var lying = BinaryWriter()
        lying.raw(header.bytes)
        let body: [UInt8] = [0, 0, 0x7F]  // no replicas, no notes, 127 changes
        lying.varint(UInt64(body.count)); lying.raw(body)
        let sealed = lying.bytes + SHA256.digest(lying.bytes)
        expectError(sealed, .malformed, "malformed bundle")
    }

    /// Random mutations of valid bundles: never a crash, and a bundle either decodes whole or is
    /// rejected with a SyncError. SYNC_FUZZ_CASES raises the number of cases.
    @Test func fuzzedBundlesNeverCrashOrHalfDecode() throws {
        let cases = Int(ProcessInfo.processInfo.environment["SYNC_FUZZ_CASES"] ?? "") ?? 10_000
        let valid = try validBytes()
        let original = try SyncBundle.decode(valid)
        var rng = SeededRNG(state: 7)
        var rejected = 0
        for _ in 0 ..< cases {
            var bytes = valid
            switch Int.random(in: 0 ..< 5, using: &rng) {
            case 0:
                let i = Int.random(in: 0 ..< bytes.count, using: &rng)
                bytes[i] ^= UInt8.random(in: 1 ... 255, using: &rng)
            case 1:
                bytes = Array(bytes.prefix(Int.random(in: 0 ..< bytes.count, using: &rng)))
            case 2:
                bytes.insert(UInt8.random(in: 0 ... 255, using: &rng), at: Int.random(in: 0 ... bytes.count, using: &rng))
            case 3:
                bytes.remove(at: Int.random(in: 0 ..< bytes.count, using: &rng))
            default:
                // Mutate the content and re-seal it, so the checksum matches and the parser is tested.
                var content = Array(bytes.dropLast(32))
                for _ in 0 ..< Int.random(in: 1 ... 4, using: &rng) {
                    let i = Int.random(in: 9 ..< content.count, using: &rng)
                    content[i] = UInt8.random(in: 0 ... 255, using: &rng)
                }
                bytes = content + SHA256.digest(content)
            }
            do {
                let decoded = try SyncBundle.decode(bytes)
                // A mutation that still decodes must still be a whole, well-formed bundle.
                #expect(decoded.changes.count <= original.changes.count + 127)
            } catch is SyncError {
                rejected += 1
            }
        }
        #expect(rejected > cases / 2)
    }
}

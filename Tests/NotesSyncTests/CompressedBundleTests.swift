import Foundation
import Deflate
import NotesCRDT
import NotesSync
import Testing

/// Version 2 bundles compress bodies of 2,048 bytes or more with DEFLATE (512, then 1,024 before); version 1 bundles (never
/// compressed) are still read.
struct CompressedBundleTests {
    /// A notebook with a few thousand characters of typed, edited text: enough to be compressed.
    static func largeNotebook() throws -> Notebook {
        var rng = SeededRNG(state: 99)
        var nb = Notebook(replicaID: .random(using: &rng), wallClock: FixedWallClock(1_700_000_000_000))
        let (id, _) = nb.createNote(id: .random(using: &rng), title: "Essay")
        let words = ["merge", "replica", "offline", "the", "note", "edit", "never", "lost", "sync", "device"]
        for i in 0 ..< 600 {
            let length = nb.body(of: id)!.count
            let word = words[Int.random(in: 0 ..< words.count, using: &rng)] + " "
            if i % 7 == 6, length > 10 {
                try nb.deleteText(id, length - 3 ..< length)
            } else {
                try nb.insertText(id, at: Int.random(in: 0 ... 3, using: &rng) == 0 ? length / 2 : length, word)
            }
        }
        return nb
    }

    static func bundle(_ nb: Notebook) -> SyncBundle {
        SyncBundle(sender: nb.replicaID, senderVersion: nb.versionVector, changes: nb.changes(since: VersionVector()))
    }

    /// The offset of the body length varint: after magic, version, flags, sender and version vector.
    static func bodyLengthOffset(_ bundle: SyncBundle) -> Int {
        var header = BinaryWriter()
        header.varint(UInt64(bundle.senderVersion.count))
        for (r, s) in bundle.senderVersion.sortedEntries { header.raw(r.raw.bytes); header.varint(s) }
        return 8 + 1 + 1 + 16 + header.bytes.count
    }

    @Test func largeBodiesAreCompressedAndRoundTrip() throws {
        let nb = try Self.largeNotebook()
        let bundle = Self.bundle(nb)
        let bytes = bundle.encoded()
        #expect(bytes[8] == 3)
        #expect(bytes[9] == 1, "the deflated flag is set")
        let encoding = ChangeCodec.encode(bundle.changes)
        #expect(bytes.count < encoding.count * 2 / 3, "\(bytes.count) bytes for an encoding of \(encoding.count)")
        let decoded = try SyncBundle.decode(bytes)
        #expect(decoded == bundle)
        var fresh = Notebook(replicaID: .random(), wallClock: FixedWallClock(0))
        fresh.apply(contentsOf: decoded.changes)
        #expect(fresh.digest() == nb.digest())
    }

    @Test func smallBodiesAreNotCompressed() throws {
        let (_, b) = try sampleNotebooks()
        let bytes = Self.bundle(b).encoded()
        #expect(bytes[9] == 0)
    }

    @Test func bodiesAreCompressedFromTwoKibibytesOn() throws {
        let text = Array(String(repeating: "merge the replica offline ", count: 100).utf8)
        let below = Array(text.prefix(2047))
        let raw = SyncBundle.packBody(below)
        #expect(raw.flags == 0 && raw.body == below)
        let from = Array(text.prefix(2048))
        let (flags, body) = SyncBundle.packBody(from)
        #expect(flags == 1)
        #expect(body.count < 200, "\(body.count) bytes for 2,048 repetitive ones")
        #expect(try SyncBundle.unpackBody(flags: flags, body) == from)
    }

    @Test func versionTwoBundlesAreStillRead() throws {
        // The version byte 2 is still read. (Bodies of format 2, without run records, decode as
        // they did: DeleteRunTests.theFormatTwoEncodingStillDecodes.)
        let nb = try Self.largeNotebook()
        let bundle = Self.bundle(nb)
        var content = Array(bundle.encoded().dropLast(32))
        #expect(content[8] == 3)
        content[8] = 2
        #expect(try SyncBundle.decode(content + SHA256.digest(content)) == bundle)
    }

    @Test func versionOneBundlesAreStillRead() throws {
        let (_, b) = try sampleNotebooks()
        let bundle = Self.bundle(b)
        var content = Array(bundle.encoded().dropLast(32))
        content[8] = 1
        #expect(try SyncBundle.decode(content + SHA256.digest(content)) == bundle)
        // Version 1 had no flags: a compressed body in a version 1 bundle is not valid.
        content[9] = 1
        expectError(content + SHA256.digest(content), .malformed, "unknown flags 1 in a version 1 bundle")
    }

    @Test func aCompressedBodyThatLiesIsMalformed() throws {
        let nb = try Self.largeNotebook()
        let bundle = Self.bundle(nb)
        let bytes = bundle.encoded()
        let content = Array(bytes.dropLast(32))
        var reader = BinaryReader(content, offset: Self.bodyLengthOffset(bundle))
        let bodyLength = Int(try reader.varint())
        let bodyStart = reader.offset
        #expect(bodyStart + bodyLength == content.count)
        let body = Array(content[bodyStart...])
        var inner = BinaryReader(body)
        let declared = try inner.varint()
        let compressed = Array(body[inner.offset...])

        func reseal(_ newBody: [UInt8]) -> [UInt8] {
            var writer = BinaryWriter()
            writer.raw(content[..<Self.bodyLengthOffset(bundle)])
            writer.varint(UInt64(newBody.count))
            writer.raw(newBody)
            return writer.bytes + SHA256.digest(writer.bytes)
        }
        func framed(declaring length: UInt64, _ data: [UInt8]) -> [UInt8] {
            var writer = BinaryWriter()
            writer.varint(length)
            writer.raw(data)
            return writer.bytes
        }
        // The sealed original decodes.
        #expect(try SyncBundle.decode(reseal(body)) == bundle)
        // A declared length off by one either way.
        expectError(reseal(framed(declaring: declared + 1, compressed)), .malformed, "not the \(declared + 1) declared")
        expectError(reseal(framed(declaring: declared - 1, compressed)), .malformed, "more than the \(declared - 1) bytes declared")
        // A length no DEFLATE stream of this size can reach is refused before anything is allocated.
        expectError(reseal(framed(declaring: UInt64(compressed.count) * 2000, compressed)), .malformed, "more than")
        // Cut short, and with a byte left over.
        expectError(reseal(framed(declaring: declared, Array(compressed.dropLast(40)))), .malformed, "truncated")
        expectError(reseal(framed(declaring: declared, compressed + [0])), .malformed, "follow")
    }

    /// `decodeHeader` makes every check of the whole bundle that `decode` makes (so damage
    /// anywhere, the body included, is caught the same way), but does not inflate or decode the
    /// changes: a sealed bundle whose compressed body is cut short still gives its header.
    @Test func theHeaderIsCheckedWholeButTheBodyIsNotInflated() throws {
        let nb = try Self.largeNotebook()
        let bundle = Self.bundle(nb)
        let bytes = bundle.encoded()
        let header = try SyncBundle.decodeHeader(bytes)
        #expect(header.sender == bundle.sender)
        #expect(header.senderVersion == bundle.senderVersion)

        func code(_ read: ([UInt8]) throws -> Void, _ bytes: [UInt8]) -> SyncError.Code? {
            do { try read(bytes); return nil } catch { return (error as? SyncError)?.code }
        }
        var damaged: [[UInt8]] = []
        var flipped = bytes
        flipped[bytes.count - 100] ^= 0x10  // inside the compressed body
        damaged.append(flipped)
        damaged.append(Array(bytes.dropLast()))
        damaged.append([0] + bytes.dropFirst())
        var future = bytes
        future[8] = 99
        damaged.append(future)
        for bad in damaged {
            let whole = code({ _ = try SyncBundle.decode($0) }, bad)
            #expect(whole != nil)
            #expect(code({ _ = try SyncBundle.decodeHeader($0) }, bad) == whole)
        }

        // The body cut short and sealed again: the bundle is malformed, its header still reads.
        let content = Array(bytes.dropLast(32))
        var reader = BinaryReader(content, offset: Self.bodyLengthOffset(bundle))
        let bodyLength = Int(try reader.varint())
        let body = Array(content[reader.offset...].dropLast(40))
        var writer = BinaryWriter()
        writer.raw(content[..<Self.bodyLengthOffset(bundle)])
        writer.varint(UInt64(body.count))
        writer.raw(body)
        let resealed = writer.bytes + SHA256.digest(writer.bytes)
        #expect(bodyLength == body.count + 40)
        #expect(code({ _ = try SyncBundle.decode($0) }, resealed) == .malformed)
        #expect(try SyncBundle.decodeHeader(resealed) == header)
    }

    /// Random damage to the compressed body, re-sealed so the checksum matches: never a crash,
    /// and either the whole bundle or a SyncError.
    @Test func fuzzedCompressedBodiesNeverCrash() throws {
        let nb = try Self.largeNotebook()
        let valid = Self.bundle(nb).encoded()
        var rng = SeededRNG(state: 11)
        var rejected = 0
        let cases = 500
        for _ in 0 ..< cases {
            var content = Array(valid.dropLast(32))
            for _ in 0 ..< Int.random(in: 1 ... 3, using: &rng) {
                let i = Int.random(in: 60 ..< content.count, using: &rng)
                content[i] ^= UInt8.random(in: 1 ... 255, using: &rng)
            }
            do {
                _ = try SyncBundle.decode(content + SHA256.digest(content))
            } catch is SyncError {
                rejected += 1
            }
        }
        #expect(rejected > cases / 2)
    }
}

/// `Deflate.compress` sizes zlib's window and memory level to the input; every size around the
/// points where they change round-trips, for text-like, random and repetitive bytes.
struct DeflateParameterTests {
    @Test func everySizeAroundTheThresholdsRoundTrips() throws {
        var rng = SeededRNG(state: 5)
        var sizes: Set<Int> = [0, 1, 2, 100, 100_000]
        for bits in 6 ... 16 {
            for delta in -3 ... 3 { sizes.insert(max(0, (1 << bits) + delta)); sizes.insert(max(0, (1 << bits) - 262 + delta)) }
        }
        let words = Array("merge replica offline the note edit never lost sync device ".utf8)
        for size in sizes.sorted() {
            let inputs: [[UInt8]] = [
                (0 ..< size).map { _ in words[Int.random(in: 0 ..< words.count, using: &rng)] },
                (0 ..< size).map { _ in UInt8.random(in: 0 ... 255, using: &rng) },
                [UInt8](repeating: 0x61, count: size),
            ]
            for input in inputs {
                let packed = Deflate.compress(input)
                #expect(try Deflate.decompress(packed, length: input.count) == input, "\(size) bytes")
            }
        }
    }
}

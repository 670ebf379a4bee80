import NotesCRDT

extension SyncBundle {
    /// The changes as consecutive bundles that each a reader takes (`maxBytes` and `changeLimits`),
    /// in the order given, with `maxChanges` changes at most in each.
    ///
    /// A writer that put a whole history in one bundle would write what no reader takes (more than
    /// 32,768 changes, or 16 MiB), or a body past `maxRecordBytes` that no relay could send back.
    /// Each piece is checked by the reader itself (encoded, then decoded within the limits), and
    /// halved until it passes.
    ///
    /// A change too large for one bundle is cut between its operations into consecutive changes
    /// (what it was joined from, as far as a reader can tell), and a single operation of many seqs
    /// inside it.
    ///
    /// - Throws: `SyncError` `.tooLarge` when one seq alone is larger than a bundle may hold.
    public static func pieces(sender: ReplicaID, senderVersion: VersionVector, changes: [Change],
                              maxChanges: Int = SyncBundle.changeLimits.maxChanges / 2,
                              maxRecordBytes: Int = SyncBundle.maxRecordBytes) throws -> [SyncBundle] {
        var result: [SyncBundle] = []
        var encoder = ChangeCodec.Encoder()
        var start = 0
        let step = max(1, maxChanges)
        repeat {
            let end = min(changes.count, start + step)
            try append(changes[start ..< end], sender: sender, senderVersion: senderVersion, maxRecordBytes: min(maxRecordBytes, SyncBundle.maxRecordBytes),
                       into: &result, encoder: &encoder)
            start = end
        } while start < changes.count
        return result
    }

    private static func append(_ changes: ArraySlice<Change>, sender: ReplicaID, senderVersion: VersionVector, maxRecordBytes: Int,
                               into result: inout [SyncBundle], encoder: inout ChangeCodec.Encoder) throws {
        let piece = SyncBundle(sender: sender, senderVersion: senderVersion, changes: Array(changes))
        let bytes = piece.encoded(using: &encoder)
        let fits: Bool
        // (A compressed body's length counted apart: a bundle far under 16 MiB can hold a body
        // that no relay answer could carry. Uncompressed, the body is shorter than the bundle.)
        let flags = magic.count + 1
        let compressed = bytes.count > fixedHeaderLength && bytes[flags] & deflatedFlag != 0
        if bytes.count > maxBytes || (compressed ? encoder.encode(piece.changes).count : bytes.count) > maxRecordBytes {
            fits = false
        } else {
            do {
                _ = try SyncBundle.decode(bytes)
                fits = true
            } catch let error as SyncError where error.code == .tooLarge {
                fits = false
            }
        }
        if fits {
            result.append(piece)
        } else if changes.count > 1 {
            let middle = changes.startIndex + changes.count / 2
            try append(changes[..<middle], sender: sender, senderVersion: senderVersion, maxRecordBytes: maxRecordBytes, into: &result, encoder: &encoder)
            try append(changes[middle...], sender: sender, senderVersion: senderVersion, maxRecordBytes: maxRecordBytes, into: &result, encoder: &encoder)
        } else if let (head, tail) = changes[changes.startIndex].halved() {
            // One change too large: a log joins an author's consecutive changes into one (a
            // device that created 80,000 notes in a row holds a single change), cut back here.
            try append([head], sender: sender, senderVersion: senderVersion, maxRecordBytes: maxRecordBytes, into: &result, encoder: &encoder)
            try append([tail], sender: sender, senderVersion: senderVersion, maxRecordBytes: maxRecordBytes, into: &result, encoder: &encoder)
        } else {
            let change = changes[changes.startIndex]
            throw SyncError(.tooLarge, "the change of \(change.replica) at seqs \(change.startSeq)-\(change.endSeq) is larger than a bundle may hold (\(maxBytes) bytes, or a limit of Docs/BundleFormat.md)")
        }
    }
}

extension SyncBundle {
    /// Sealed units as consecutive sealed bundles of at most `maxUnits` units and `maxBytes`
    /// bytes each (a unit is at most a bundle's size less its framing: its author cut it so).
    public static func sealedPieces(sender: ReplicaID, senderVersion: VersionVector, units: [SealedUnit],
                                    maxUnits: Int = SyncBundle.changeLimits.maxChanges / 2) -> [SyncBundle] {
        let framing = fixedHeaderLength + 11 * (1 + 2 * senderVersion.count) + 16 * senderVersion.count + checksumLength + 10
        var result: [SyncBundle] = []
        var current: [SealedUnit] = []
        var bytes = framing
        for unit in units {
            let size = unit.bytes.count + 10
            if !current.isEmpty, current.count >= max(1, maxUnits) || bytes + size > maxBytes {
                result.append(SyncBundle(sender: sender, senderVersion: senderVersion, sealed: current))
                current = []
                bytes = framing
            }
            current.append(unit)
            bytes += size
        }
        result.append(SyncBundle(sender: sender, senderVersion: senderVersion, sealed: current))
        return result
    }
}

extension Change {
    /// The change cut in two between its operations, at the middle: the first half, then the
    /// rest as the change that directly follows it (next seqs, next timestamps, same
    /// dependencies). A change of one operation that covers several seqs (an insert of a long
    /// text, which a log joins from typing or takes whole from a paste, or a run of deletes) is
    /// cut at its middle seq, as `changes(since:)` cuts one; nil for a change of one seq.
    func halved() -> (Change, Change)? {
        guard operations.count > 1 else {
            guard seqCount > 1, let tail = suffix(from: startSeq + seqCount / 2) else { return nil }
            return (prefix(through: startSeq + seqCount / 2 - 1), tail)
        }
        let middle = operations.count / 2
        let head = Change(replica: replica, startSeq: startSeq, timestamp: timestamp, dependencies: dependencies,
                          operations: Array(operations[..<middle]))
        let tail = Change(replica: replica, startSeq: startSeq + head.seqCount, timestamp: timestamp.advanced(by: head.seqCount),
                          dependencies: dependencies, operations: Array(operations[middle...]))
        return (head, tail)
    }
}

import Foundation

/// An error reading or replaying an editing trace; the message names the problem.
public struct TraceError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// A recorded editing session in Joseph Gentle's editing-traces format (sequential or
/// concurrent), the workload and correctness oracle in Tests/Fixtures/traces.
public struct EditingTrace: Sendable {
    /// One patch: at `position` delete `deleteCount` scalars, then insert `insert`.
    public struct Patch: Sendable {
        public var position: Int
        public var deleteCount: Int
        public var insert: String
    }

    /// One transaction: patches applied one after another by `agent`, against the merged history
    /// of `parents` (concurrent traces only).
    public struct Transaction: Sendable {
        public var parents: [Int]
        public var agent: Int
        public var patches: [Patch]
    }

    public enum Kind: String, Sendable { case sequential, concurrent }

    public var name: String
    public var kind: Kind
    public var startContent: String
    public var endContent: String
    /// How many agents the trace declares (at least one more than the largest agent number). The
    /// replay makes replicas only for the agents that edit, so a hostile count costs nothing.
    public var numAgents: Int
    public var transactions: [Transaction]

    /// The largest trace a reader takes, as a file and once inflated (256 MiB; the largest
    /// published trace is a few dozen MB of JSON).
    public static let maxBytes = 256 << 20
    /// The largest position, count or agent a trace may hold: every such value is exact in a JSON
    /// number (a double) below it, and two of them add up without overflow.
    public static let maxPatchValue = 1 << 53

    /// Reads a trace file, gzipped or plain JSON.
    public static func load(path: String) throws -> EditingTrace {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else { throw TraceError("\(path): no such file") }
        guard !isFolder.boolValue else { throw TraceError("\(path): is a directory, not a trace file") }
        if let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber, size.int64Value > Int64(maxBytes) {
            throw TraceError("\(path): \(size.int64Value) bytes is larger than the \(maxBytes) a trace may be")
        }
        guard let data = FileManager.default.contents(atPath: path) else { throw TraceError("\(path): cannot be read") }
        let name = URL(fileURLWithPath: path).lastPathComponent
            .replacingOccurrences(of: ".json.gz", with: "").replacingOccurrences(of: ".json", with: "")
        do {
            guard Gzip.isGzip([UInt8](data.prefix(2))) else { return try parse(data, name: name) }  // plain JSON read in place, not copied
            return try Gzip.decompress([UInt8](data), limit: maxBytes).withUnsafeBufferPointer { utf8 in
                var reader = TraceReader(utf8)
                return try reader.trace(name: name)
            }
        } catch let error as TraceError {
            throw TraceError("\(path): \(error.message)")
        }
    }

    /// Parses the JSON of a trace (UTF-8). Object keys may come in any order, and keys the format
    /// does not use are skipped.
    public static func parse(_ data: Data, name: String) throws -> EditingTrace {
        try data.withUnsafeBytes { raw in
            var reader = TraceReader(raw.bindMemory(to: UInt8.self))
            return try reader.trace(name: name)
        }
    }
}

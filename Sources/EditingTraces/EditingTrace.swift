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
        guard FileManager.default.fileExists(atPath: path) else { throw TraceError("\(path): no such file") }
        if let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber, size.int64Value > Int64(maxBytes) {
            throw TraceError("\(path): \(size.int64Value) bytes is larger than the \(maxBytes) a trace may be")
        }
        guard let data = FileManager.default.contents(atPath: path) else { throw TraceError("\(path): cannot be read") }
        var bytes = [UInt8](data)
        if Gzip.isGzip(bytes) {
            do { bytes = try Gzip.decompress(bytes, limit: maxBytes) } catch let error as TraceError { throw TraceError("\(path): \(error.message)") }
        }
        let name = URL(fileURLWithPath: path).lastPathComponent
            .replacingOccurrences(of: ".json.gz", with: "").replacingOccurrences(of: ".json", with: "")
        do {
            return try parse(Data(bytes), name: name)
        } catch let error as TraceError {
            throw TraceError("\(path): \(error.message)")
        }
    }

    /// Parses the JSON of a trace.
    public static func parse(_ data: Data, name: String) throws -> EditingTrace {
        let object: Any
        do { object = try JSONSerialization.jsonObject(with: data) } catch {
            throw TraceError("not valid JSON (\(error.localizedDescription))")
        }
        guard let root = object as? [String: Any] else { throw TraceError("the top level is not a JSON object") }
        guard let txns = root["txns"] as? [Any] else { throw TraceError("no \"txns\" array") }
        guard let endContent = root["endContent"] as? String else { throw TraceError("no \"endContent\" string") }
        let kind: Kind = (root["kind"] as? String) == "concurrent" ? .concurrent : .sequential
        let startContent = root["startContent"] as? String ?? ""
        var transactions: [Transaction] = []
        transactions.reserveCapacity(txns.count)
        var agents = 1
        for (index, raw) in txns.enumerated() {
            guard let txn = raw as? [String: Any], let patches = txn["patches"] as? [Any] else {
                throw TraceError("transaction \(index) has no \"patches\" array")
            }
            var parsed: [Patch] = []
            parsed.reserveCapacity(patches.count)
            for (p, rawPatch) in patches.enumerated() {
                // A fourth element (a patch's timestamp, which the format's notes mention) is ignored.
                guard let patch = rawPatch as? [Any], patch.count >= 3,
                      let position = wholeNumber(patch[0], max: maxPatchValue), let deleteCount = wholeNumber(patch[1], max: maxPatchValue),
                      let insert = patch[2] as? String else {
                    throw TraceError("transaction \(index), patch \(p) is not [position, deleteCount, \"text\"] with whole numbers from 0 to 2^53")
                }
                parsed.append(Patch(position: position, deleteCount: deleteCount, insert: insert))
            }
            var parents: [Int] = []
            var agent = 0
            if kind == .concurrent {
                guard let ps = txn["parents"] as? [Any], let a = wholeNumber(txn["agent"] as Any, max: maxPatchValue) else {
                    throw TraceError("transaction \(index) lacks \"parents\" or \"agent\" (a whole number from 0 to 2^53)")
                }
                for p in ps {
                    guard let parent = wholeNumber(p, max: Int.max), parent < index else {
                        throw TraceError("transaction \(index) names a parent that is not an earlier transaction")
                    }
                    parents.append(parent)
                }
                agent = a
                agents = max(agents, a + 1)
            } else if index > 0 {
                parents = [index - 1]
            }
            transactions.append(Transaction(parents: parents, agent: agent, patches: parsed))
        }
        if let declared = root["numAgents"] {
            guard let n = wholeNumber(declared, max: maxPatchValue) else {
                throw TraceError("numAgents is not a whole number from 0 to 2^53")
            }
            agents = max(agents, n)
        }
        return EditingTrace(name: name, kind: kind, startContent: startContent, endContent: endContent,
                            numAgents: agents, transactions: transactions)
    }

    /// `value` as an Int when it is a JSON number holding a whole number in 0 ... `max` (nil for
    /// a fraction, a negative, a number too large for an Int, or another type).
    static func wholeNumber(_ value: Any, max: Int) -> Int? {
        guard let number = value as? NSNumber else { return nil }
        let double = number.doubleValue
        // From 2^63 a double no longer converts to an Int64 (a trap); below it `int64Value` is exact for a whole number.
        guard double.isFinite, double >= 0, double < 0x1p63, double.rounded(.towardZero) == double else { return nil }
        let whole = Int(number.int64Value)
        return whole >= 0 && whole <= max ? whole : nil
    }
}

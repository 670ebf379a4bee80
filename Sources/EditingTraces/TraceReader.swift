/// Reads a trace's JSON in one pass over its UTF-8 bytes, building the trace's values as it goes:
/// no object graph in between (JSONSerialization's took about 4 KB per transaction), so memory
/// follows what the trace holds. Keys may come in any order; keys it does not know are skipped,
/// their values checked as JSON all the same.
struct TraceReader {
    /// How deep objects and arrays may nest: a trace's own values are five deep, and skipping a
    /// value recurses once per level, so the bound keeps a hostile file off the stack's end.
    static let maxDepth = 128

    private let bytes: UnsafeBufferPointer<UInt8>
    private var at = 0
    private var depth = 0
    /// A string's bytes with its escapes resolved (reused: strings without escapes skip it).
    private var scratch: [UInt8] = []
    /// One transaction's patches while they are read, copied out at their exact count.
    private var patchScratch: [EditingTrace.Patch] = []
    /// The transaction and patch being read, which a message about the JSON names.
    private var transaction: Int?
    private var patch: Int?

    init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    // MARK: The trace

    /// Reads the whole input as a trace.
    mutating func trace(name: String) throws -> EditingTrace {
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { at = 3 }  // a byte-order mark, which some editors write
        guard peek() == .openBrace else {
            try skipValue()  // refuses what is not JSON at all first
            try end()
            throw TraceError("the top level is not a JSON object")
        }
        try open(.openBrace)
        var kind: EditingTrace.Kind?
        var startContent: String?
        var endContent: String?
        var declaredAgents: Int?
        var read: Transactions?
        var members = 0
        while let (key, start) = try nextMember(&members) {
            switch key {
            case "kind":
                guard kind == nil else { throw TraceError("the key \"kind\" appears twice") }
                guard peek() == .quote else { throw TraceError("\"kind\" is \(try skippedText(from: start)), not a string") }
                let name = try string()
                guard let known = EditingTrace.Kind(rawValue: name) else {
                    throw TraceError("unknown \"kind\" \(text(start ..< at)): a trace is \"sequential\" (the default) or \"concurrent\"")
                }
                kind = known
            case "startContent", "endContent":
                guard (key == "startContent" ? startContent : endContent) == nil else { throw TraceError("the key \"\(key)\" appears twice") }
                guard peek() == .quote else { throw TraceError("\"\(key)\" is \(try skippedText(from: start)), not a string") }
                let content = try string()
                if key == "startContent" { startContent = content } else { endContent = content }
            case "numAgents":
                guard declaredAgents == nil else { throw TraceError("the key \"numAgents\" appears twice") }
                guard let n = try wholeNumber(max: EditingTrace.maxPatchValue) else {
                    throw TraceError("numAgents is not a whole number from 0 to 2^53: \(text(start ..< at))")
                }
                declaredAgents = n
            case "txns":
                guard read == nil else { throw TraceError("the key \"txns\" appears twice") }
                guard peek() == .openBracket else { throw TraceError("no \"txns\" array: \"txns\" is \(try skippedText(from: start))") }
                read = try transactions(kind: kind)
            default:
                try skipValue()
            }
        }
        try end()
        guard var read = consume read else { throw TraceError("no \"txns\" array") }  // consumed: the fix-up below copies nothing
        guard let endContent else { throw TraceError("no \"endContent\" string") }
        let finalKind = kind ?? .sequential
        if finalKind == .concurrent {
            if let error = read.concurrentError { throw error }
        } else {
            // A sequential trace is one chain, whatever its transactions said of parents and agents.
            read.agents = 1
            for index in read.list.indices {
                read.list[index].parents = index > 0 ? [index - 1] : []
                read.list[index].agent = 0
            }
        }
        return EditingTrace(name: name, kind: finalKind, startContent: startContent ?? "", endContent: endContent,
                            numAgents: max(read.agents, declaredAgents ?? 0), transactions: read.list)
    }

    /// The "txns" array as read, before the trace's kind is known for certain.
    private struct Transactions {
        var list: [EditingTrace.Transaction]
        /// The first transaction's failure of what a concurrent trace requires (its parents and agent).
        var concurrentError: TraceError?
        /// One more than the largest agent (at least 1).
        var agents: Int
    }

    /// Reads the "txns" array. What a concurrent trace requires of a transaction is refused at once
    /// when `kind` came before the array; otherwise the first failure is kept, to throw once the
    /// trace turns out concurrent.
    private mutating func transactions(kind: EditingTrace.Kind?) throws -> Transactions {
        var list: [EditingTrace.Transaction] = []
        var concurrentError: TraceError?
        var agents = 1
        try open(.openBracket)
        while try another(.closeBracket, after: list.count) {
            let index = list.count
            transaction = index
            let start = valueStart()
            guard peek() == .openBrace else { throw TraceError("transaction \(index) is not a JSON object: \(try skippedText(from: start))") }
            try open(.openBrace)
            var patches: [EditingTrace.Patch]?
            var parents: [Int]?
            var agent: Int?
            var members = 0
            while let (key, start) = try nextMember(&members) {
                switch key {
                case "patches":
                    guard patches == nil else { throw TraceError("transaction \(index) has the key \"patches\" twice") }
                    guard peek() == .openBracket else {
                        throw TraceError("transaction \(index) has no \"patches\" array: \"patches\" is \(try skippedText(from: start))")
                    }
                    patches = try self.patches(of: index)
                case "parents":
                    guard parents == nil else { throw TraceError("transaction \(index) has the key \"parents\" twice") }
                    guard peek() == .openBracket else {
                        throw TraceError("transaction \(index): \"parents\" is \(try skippedText(from: start)), not an array")
                    }
                    parents = try self.parents(of: index)
                case "agent":
                    guard agent == nil else { throw TraceError("transaction \(index) has the key \"agent\" twice") }
                    guard let value = try wholeNumber(max: EditingTrace.maxPatchValue) else {
                        throw TraceError("transaction \(index): \"agent\" is \(text(start ..< at)), not a whole number from 0 to 2^53")
                    }
                    agent = value
                default:
                    try skipValue()
                }
            }
            guard let patches else { throw TraceError("transaction \(index) has no \"patches\" array") }
            var problem: TraceError?
            if parents == nil || agent == nil {
                problem = TraceError("transaction \(index) lacks \(parents == nil ? "\"parents\"" : "\"agent\"") (a concurrent trace's transactions have both)")
            } else if let late = parents!.first(where: { $0 >= index }) {
                problem = TraceError("transaction \(index) names a parent that is not an earlier transaction: \(late)")
            }
            if let problem {
                if kind == .concurrent { throw problem }
                concurrentError = concurrentError ?? problem
            }
            agents = max(agents, (agent ?? 0) + 1)
            list.append(EditingTrace.Transaction(parents: parents ?? [], agent: agent ?? 0, patches: patches))
        }
        transaction = nil
        return Transactions(list: list, concurrentError: concurrentError, agents: agents)
    }

    /// Reads a transaction's "patches" array.
    private mutating func patches(of index: Int) throws -> [EditingTrace.Patch] {
        try open(.openBracket)
        patchScratch.removeAll(keepingCapacity: true)
        while try another(.closeBracket, after: patchScratch.count) {
            patch = patchScratch.count
            let read = try self.patch(index, patchScratch.count)
            patchScratch.append(read)
        }
        patch = nil
        return Array(patchScratch)
    }

    /// Reads one patch: [position, deleteCount, "text"], and perhaps a timestamp (a string) fourth,
    /// which the format's notes on concurrent traces mention and the replay ignores.
    private mutating func patch(_ index: Int, _ p: Int) throws -> EditingTrace.Patch {
        func refused(_ detail: String) -> TraceError {
            TraceError("transaction \(index), patch \(p) is not [position, deleteCount, \"text\"] with whole numbers from 0 to 2^53: \(detail)")
        }
        let start = valueStart()
        guard peek() == .openBracket else { throw refused("it is \(try skippedText(from: start))") }
        try open(.openBracket)
        var position = 0
        var deleteCount = 0
        var insert = ""
        var count = 0
        while try another(.closeBracket, after: count) {
            let start = valueStart()
            switch count {
            case 0, 1:
                guard let value = try wholeNumber(max: EditingTrace.maxPatchValue) else {
                    throw refused("its \(count == 0 ? "position" : "deleteCount") is \(text(start ..< at))")
                }
                if count == 0 { position = value } else { deleteCount = value }
            case 2:
                guard peek() == .quote else { throw refused("its text is \(try skippedText(from: start)), not a string") }
                insert = try string()
            case 3:
                guard peek() == .quote else { throw refused("its fourth element is \(try skippedText(from: start)), where only a timestamp (a string) may be") }
                try skipString()
            default:
                throw refused("it has more than four elements (position, deleteCount, text and a timestamp)")
            }
            count += 1
        }
        guard count >= 3 else { throw refused("it has \(count) element\(count == 1 ? "" : "s")") }
        return EditingTrace.Patch(position: position, deleteCount: deleteCount, insert: insert)
    }

    /// Reads a transaction's "parents" array (whether they are earlier transactions is the caller's check).
    private mutating func parents(of index: Int) throws -> [Int] {
        try open(.openBracket)
        var parents: [Int] = []
        while try another(.closeBracket, after: parents.count) {
            let start = valueStart()
            guard let parent = try wholeNumber(max: EditingTrace.maxPatchValue) else {
                throw TraceError("transaction \(index) names a parent that is not an earlier transaction: \(text(start ..< at))")
            }
            parents.append(parent)
        }
        return parents
    }

    // MARK: JSON

    /// The next byte that is not whitespace, left unread (nil at the end of the input).
    private mutating func peek() -> UInt8? {
        while at < bytes.count {
            switch bytes[at] {
            case 0x20, 0x09, 0x0A, 0x0D: at += 1
            default: return bytes[at]
            }
        }
        return nil
    }

    /// Where the next value starts, past whitespace.
    private mutating func valueStart() -> Int {
        _ = peek()
        return at
    }

    /// Reads `byte`, the next one past whitespace.
    private mutating func take(_ byte: UInt8) throws {
        guard peek() == byte else { throw syntaxError("expected '\(Character(Unicode.Scalar(byte)))'") }
        at += 1
    }

    /// Reads the opening `bracket` of an object or array, one level deeper.
    private mutating func open(_ bracket: UInt8) throws {
        try take(bracket)
        depth += 1
        guard depth <= Self.maxDepth else {
            throw TraceError("not valid JSON for a trace: arrays and objects nested more than \(Self.maxDepth) deep, at byte \(at - 1)\(place)")
        }
    }

    /// Whether the open object or array, with `count` members read so far, has another (reading
    /// the comma before it); at its `close`, reads that and says no.
    private mutating func another(_ close: UInt8, after count: Int) throws -> Bool {
        let next = peek()
        if next == close {
            at += 1
            depth -= 1
            return false
        }
        if count == 0 { return true }
        guard next == .comma else { throw syntaxError("expected ',' or '\(Character(Unicode.Scalar(close)))'") }
        at += 1
        return true
    }

    /// Reads an object member's key and its colon.
    /// The next member of the object being read (`count` of them read so far): its key, and where
    /// its value starts; nil at the object's end.
    private mutating func nextMember(_ count: inout Int) throws -> (key: String, start: Int)? {
        guard try another(.closeBrace, after: count) else { return nil }
        count += 1
        let key = try key()
        return (key, valueStart())
    }

    private mutating func key() throws -> String {
        guard peek() == .quote else { throw syntaxError("expected a key (a string)") }
        let key = try string()
        try take(.colon)
        return key
    }

    /// Checks that nothing but whitespace follows the top-level value.
    private mutating func end() throws {
        guard peek() == nil else { throw syntaxError("expected nothing after the top-level value") }
    }

    /// Reads the string whose opening quote is next.
    private mutating func string() throws -> String {
        let start = at + 1
        var end = start
        var high: UInt8 = 0  // any byte from 0x80: not ASCII, so the UTF-8 is checked
        while end < bytes.count {
            let byte = bytes[end]
            if byte == .quote || byte == .backslash || byte < 0x20 { break }
            high |= byte
            end += 1
        }
        guard end < bytes.count, bytes[end] == .quote else { return try escapedString(from: start, plainUntil: end) }
        at = end + 1
        let content = UnsafeBufferPointer(rebasing: bytes[start ..< end])
        if high < 0x80 { return String(decoding: content, as: UTF8.self) }
        return try validUTF8(content, stringAt: start - 1)
    }

    /// Reads the rest of a string from its first escape (or control character, or the input's end) at `plain`.
    private mutating func escapedString(from start: Int, plainUntil plain: Int) throws -> String {
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: bytes[start ..< plain])
        at = plain
        while at < bytes.count {
            let byte = bytes[at]
            switch byte {
            case .quote:
                at += 1
                return try validUTF8(scratch, stringAt: start - 1)
            case .backslash:
                guard at + 1 < bytes.count else { throw truncated() }
                at += 1
                switch bytes[at] {
                case .quote, .backslash, .slash: scratch.append(bytes[at])
                case UInt8(ascii: "b"): scratch.append(0x08)
                case UInt8(ascii: "f"): scratch.append(0x0C)
                case UInt8(ascii: "n"): scratch.append(0x0A)
                case UInt8(ascii: "r"): scratch.append(0x0D)
                case UInt8(ascii: "t"): scratch.append(0x09)
                case UInt8(ascii: "u"):
                    at += 1
                    try appendEscapedScalar()
                    continue
                default: throw syntaxError("expected an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t or \\u)")
                }
                at += 1
            case 0 ..< 0x20:
                throw syntaxError("expected a control character in a string to be escaped")
            default:
                scratch.append(byte)
                at += 1
            }
        }
        throw truncated()
    }

    /// Appends the scalar of a \u escape whose four hex digits are next (the pair's second half
    /// too, for a surrogate pair), as UTF-8.
    private mutating func appendEscapedScalar() throws {
        let escape = at - 2
        var value = try hex4()
        if 0xD800 ... 0xDBFF ~= value {
            if at + 1 >= bytes.count, at == bytes.count || bytes[at] == .backslash {  // cut inside the pair
                throw truncated()
            }
            guard at + 1 < bytes.count, bytes[at] == .backslash, bytes[at + 1] == UInt8(ascii: "u") else { throw unpairedSurrogate(at: escape) }
            at += 2
            let low = try hex4()
            guard 0xDC00 ... 0xDFFF ~= low else { throw unpairedSurrogate(at: escape) }
            value = 0x10000 + (value - 0xD800) << 10 + (low - 0xDC00)
        } else if 0xDC00 ... 0xDFFF ~= value {
            throw unpairedSurrogate(at: escape)
        }
        UTF8.encode(Unicode.Scalar(value)!) { scratch.append($0) }  // not a surrogate, so a scalar
    }

    /// A message for the surrogate escape at `escape` that has no other half.
    private func unpairedSurrogate(at escape: Int) -> TraceError {
        TraceError("not valid JSON: an unpaired surrogate \(text(escape ..< escape + 6)) at byte \(escape)\(place)")
    }

    /// Reads four hex digits.
    private mutating func hex4() throws -> UInt32 {
        var value: UInt32 = 0
        for _ in 0 ..< 4 {
            guard at < bytes.count else { throw truncated() }
            let byte = bytes[at]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0") ... UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a") ... UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A") ... UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw syntaxError("expected four hex digits after \\u")
            }
            value = value << 4 | UInt32(digit)
            at += 1
        }
        return value
    }

    /// `content` as a String, refused when it is not UTF-8.
    private func validUTF8(_ content: some Collection<UInt8>, stringAt start: Int) throws -> String {
        guard let string = String(validating: content, as: UTF8.self) else { throw TraceError("not valid JSON: the string at byte \(start) is not valid UTF-8\(place)") }
        return string
    }

    /// Skips the string whose opening quote is next.
    private mutating func skipString() throws {
        var end = at + 1
        while end < bytes.count, bytes[end] != .quote, bytes[end] != .backslash, 0x20 ..< 0x80 ~= bytes[end] { end += 1 }
        if end < bytes.count, bytes[end] == .quote { at = end + 1 } else { _ = try string() }  // escapes, UTF-8 or an error: read to check them
    }

    /// Reads a value where a whole number is due: the number when it is one from 0 to `max`
    /// (written 12, 12.0 or 1.2e1 alike); nil for any other number or value, which is then skipped.
    private mutating func wholeNumber(max: Int) throws -> Int? {
        guard let first = peek(), first == .minus || UInt8(ascii: "0") ... UInt8(ascii: "9") ~= first else {
            try skipValue()
            return nil
        }
        return try number(max: max)
    }

    /// Reads the number next, exactly: its value when it is whole and within 0 ... `max`, else nil.
    private mutating func number(max: Int) throws -> Int? {
        let negative = bytes[at] == .minus
        if negative { at += 1 }
        let integer = try digits()
        guard bytes[integer.lowerBound] != UInt8(ascii: "0") || integer.count == 1 else {
            at = integer.lowerBound + 1
            throw syntaxError("expected no digit after a leading 0")
        }
        var fraction = at ..< at
        if at < bytes.count, bytes[at] == UInt8(ascii: ".") {
            at += 1
            fraction = try digits()
        }
        var exponent = 0
        if at < bytes.count, bytes[at] | 0x20 == UInt8(ascii: "e") {
            at += 1
            let negativeExponent = at < bytes.count && bytes[at] == .minus
            if at < bytes.count, bytes[at] == .minus || bytes[at] == UInt8(ascii: "+") { at += 1 }
            // Saturated: far past where any digit string is a whole number within `max`, or none is.
            for i in try digits() { exponent = Swift.min(exponent * 10 + Int(bytes[i] - UInt8(ascii: "0")), 1 << 40) }
            if negativeExponent { exponent = -exponent }
        }
        // The value is the digits of integer and fraction together, times 10^(exponent - fraction.count).
        let count = integer.count + fraction.count
        func digit(_ k: Int) -> Int {
            Int(bytes[k < integer.count ? integer.lowerBound + k : fraction.lowerBound + k - integer.count] - UInt8(ascii: "0"))
        }
        guard let last = (0 ..< count).last(where: { digit($0) != 0 }) else { return 0 }  // zero, -0 too
        let first = (0 ..< count).first { digit($0) != 0 }!
        let scale = exponent - fraction.count + (count - 1 - last)  // trailing zeros moved into the exponent
        guard !negative, scale >= 0 else { return nil }
        var value = 0
        for k in first ... last {
            value = value * 10 + digit(k)
            if value > max { return nil }
        }
        for _ in 0 ..< scale {
            value *= 10
            if value > max { return nil }
        }
        return value
    }

    /// Reads one or more digits.
    private mutating func digits() throws -> Range<Int> {
        let start = at
        while at < bytes.count, UInt8(ascii: "0") ... UInt8(ascii: "9") ~= bytes[at] { at += 1 }
        guard at > start else { throw syntaxError("expected a digit") }
        return start ..< at
    }

    /// Skips the value next, of any type, checking that it is JSON.
    private mutating func skipValue() throws {
        guard let next = peek() else { throw syntaxError("expected a value") }
        switch next {
        case .openBrace:
            try open(.openBrace)
            var members = 0
            while try another(.closeBrace, after: members) {
                guard peek() == .quote else { throw syntaxError("expected a key (a string)") }
                try skipString()
                try take(.colon)
                try skipValue()
                members += 1
            }
        case .openBracket:
            try open(.openBracket)
            var elements = 0
            while try another(.closeBracket, after: elements) {
                try skipValue()
                elements += 1
            }
        case .quote: try skipString()
        case .minus, UInt8(ascii: "0") ... UInt8(ascii: "9"): _ = try number(max: 0)
        case UInt8(ascii: "t"): try literal("true")
        case UInt8(ascii: "f"): try literal("false")
        case UInt8(ascii: "n"): try literal("null")
        default: throw syntaxError("expected a value")
        }
    }

    /// Reads the literal `word` (true, false or null).
    private mutating func literal(_ word: StaticString) throws {
        let expected = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        for byte in expected {
            guard at < bytes.count, bytes[at] == byte else { throw syntaxError("expected \(word)") }
            at += 1
        }
    }

    // MARK: Messages

    /// Skips the value from `start` and returns its JSON text, to show in a message.
    private mutating func skippedText(from start: Int) throws -> String {
        try skipValue()
        return text(start ..< at)
    }

    /// The input's bytes in `range` as text, shortened past 40 bytes.
    private func text(_ range: Range<Int>) -> String {
        let shown = range.lowerBound ..< Swift.min(range.upperBound, range.lowerBound + 40, bytes.count)
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[shown]), as: UTF8.self)
        return shown.count < range.count ? text + "…" : text
    }

    /// Where the reader is in the trace, for a message: " (in transaction 3, patch 0)", or nothing.
    private var place: String {
        guard let transaction else { return "" }
        return " (in transaction \(transaction)\(patch.map { ", patch \($0)" } ?? ""))"
    }

    /// A message for JSON that ends before its values do.
    private func truncated() -> TraceError {
        TraceError("not valid JSON: the input ends early, at byte \(bytes.count) (truncated?)\(place)")
    }

    /// A message for JSON that breaks the grammar at `at`: what was `expected` there, or that the
    /// input ends.
    private func syntaxError(_ expected: String) -> TraceError {
        guard at < bytes.count else { return truncated() }
        let byte = bytes[at]
        let found = 0x20 ..< 0x7F ~= byte ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(String(byte, radix: 16, uppercase: true))"
        return TraceError("not valid JSON: \(expected) at byte \(at), found \(found)\(place)")
    }
}

private extension UInt8 {
    static let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\"), slash = UInt8(ascii: "/")
    static let openBrace = UInt8(ascii: "{"), closeBrace = UInt8(ascii: "}")
    static let openBracket = UInt8(ascii: "["), closeBracket = UInt8(ascii: "]")
    static let comma = UInt8(ascii: ","), colon = UInt8(ascii: ":"), minus = UInt8(ascii: "-")
}

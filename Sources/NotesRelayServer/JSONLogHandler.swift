import Foundation
import Logging
import Synchronization

/// A swift-log handler that writes one JSON object per line to stderr: `time`, `level`, `label`,
/// `message`, and the metadata as fields, for a log collector to index.
///
/// What the relay logs never holds a token or a change's payload (see `AccessLogMiddleware`):
/// headers, query strings and bodies are not logged.
public struct JSONLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    private let label: String
    private let write: @Sendable (String) -> Void

    /// A handler for `label` at `level`, writing to stderr (or to `write`, for tests).
    public init(label: String, level: Logger.Level = .info, write: (@Sendable (String) -> Void)? = nil) {
        self.label = label
        self.logLevel = level
        self.write = write ?? { line in FileHandle.standardError.write(Data(line.utf8)) }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(level: Logger.Level, message: Logger.Message, metadata explicit: Logger.Metadata?, source: String,
                    file: String, function: String, line: UInt) {
        var fields: [(String, String)] = [("time", JSONLogHandler.timestamp()), ("level", level.rawValue), ("label", label),
                                          ("message", message.description)]
        var merged = metadata
        if let explicit { merged.merge(explicit) { $1 } }
        for key in merged.keys.sorted() where !["time", "level", "label", "message"].contains(key) {
            fields.append((key, merged[key]!.description))
        }
        write("{" + fields.map { "\(JSONLogHandler.quoted($0.0)):\(JSONLogHandler.quoted($0.1))" }.joined(separator: ",") + "}\n")
    }

    /// ISO 8601 UTC with milliseconds.
    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                      parts.tm_hour, parts.tm_min, parts.tm_sec, Int(now.tv_nsec / 1_000_000))
    }

    /// A JSON string literal.
    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || (0x7F ... 0x9F).contains(scalar.value) || scalar == "\u{2028}" || scalar == "\u{2029}":
                out += String(format: "\\u%04X", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

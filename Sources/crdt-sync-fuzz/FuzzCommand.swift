import ArgumentParser
import BundleFuzz
import Foundation

/// Runs structure-aware fuzz cases of the bundle reader (`BundleFuzz`) in worker processes, so
/// that a case that crashes (a signal) or hangs (no answer within the timeout) is counted, and
/// its seed printed, instead of ending the run.
@main
struct FuzzCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "crdt-sync-fuzz",
        abstract: "Fuzz the bundle reader with hostile values in valid framing; print crashes, hangs, rejected and accepted counts.",
        discussion: """
        Each case is a bundle made from its seed (a plausible history with values pushed to the \
        edges of their types, counts and lengths that lie, a valid checksum and valid DEFLATE; a \
        quarter of them record pages, format version 5, with frames that lie), read by \
        SyncBundle.decode and by the relay client's record-by-record read, which must agree, and \
        when it decodes, applied to a notebook and to an in-memory \
        store; another quarter sealed bundles of an encrypted space (format version 4: units \
        forged, altered, lying or hostile inside), checked as a relay and a folder reader check \
        them and integrated by a store in the space, against a model of which units it opens; \
        a sixteenth in the receiving store's own name (its changes echoed, a copy's, a fork's), \
        which it must refuse exactly when it never made them, moving to a fresh identity then; \
        a sixteenth re-issuing operations of a forked identity the store holds (malformed, \
        matching, almost or not matching, overlapping, nested, of the store's own identity, \
        floods), which must be refused, withdraw exactly what they re-issue, or remove nothing; \
        checking that the store does not throw, that digests agree and that what was accepted \
        round-trips. Run it on a release build: \
        swift run -c release crdt-sync-fuzz --cases 1000000 --seed 1. \
        Replay one case with --case SEED (the seed a failure prints).
        """)

    @Option(help: "How many cases.") var cases: UInt64 = 100_000
    @Option(help: "The run's seed (case i gets a seed derived from it and i).") var seed: UInt64 = 1
    @Option(help: "Worker processes (default: the number of cores).") var workers: Int?
    @Option(help: "CPU seconds a case may take before it counts as a hang (or six times as many seconds of wall time, blocked).") var timeout: Double = 10
    @Option(help: "Cases per worker assignment.") var chunk: UInt64 = 5000
    @Option(name: .customLong("case"), help: ArgumentHelp("Run one case, by its seed, in this process.", valueName: "SEED"))
    var caseSeed: UInt64?
    @Option(help: ArgumentHelp("Write the bundle of one case, by its seed, to --out.", valueName: "SEED"))
    var write: UInt64?
    @Option(help: ArgumentHelp("Write the bundle that fills this limit to --out (\(MaximalBundle.allCases.map(\.rawValue).joined(separator: ", "))).", valueName: "LIMIT"))
    var maximal: String?
    @Option(help: ArgumentHelp("Where --write and --maximal write.", valueName: "FILE")) var out: String?
    @Flag(help: "Run --cases in this process and print how often each kind of outcome came (numbers left out), most frequent first.")
    var histogram = false
    @Flag(help: .hidden) var worker = false
    @Option(help: .hidden) var from: UInt64 = 0
    @Option(help: .hidden) var to: UInt64 = 0

    func validate() throws {
        guard cases >= 1 else { throw ValidationError("--cases must be at least 1") }
        guard UInt64.max - seed >= 0, chunk >= 1 else { throw ValidationError("--chunk must be at least 1") }
        if let workers, !(1 ... 256).contains(workers) { throw ValidationError("--workers must be between 1 and 256") }
        guard timeout.isFinite, timeout > 0, timeout <= 3600 else { throw ValidationError("--timeout must be between 0 and 3600 seconds") }
        if write != nil || maximal != nil, out == nil { throw ValidationError("--write and --maximal need --out FILE") }
        if let maximal, MaximalBundle(rawValue: maximal) == nil { throw ValidationError("--maximal takes one of \(MaximalBundle.allCases.map(\.rawValue).joined(separator: ", "))") }
    }

    func run() throws {
        if let maximal, let kind = MaximalBundle(rawValue: maximal), let out {
            let bytes = kind.bundle().bytes()
            try Data(bytes).write(to: URL(fileURLWithPath: out))
            print("\(out): \(bytes.count) bytes")
            return
        }
        if let write, let out {
            try Data(FuzzDriver().bytes(caseSeed: write)).write(to: URL(fileURLWithPath: out))
            return
        }
        if let caseSeed {
            var driver = FuzzDriver()
            do {
                print(try driver.run(caseSeed: caseSeed))
            } catch {
                print("FAILURE: \(error)")
                throw ExitCode(1)
            }
            return
        }
        if worker { return runWorker() }
        if histogram { return runHistogram() }
        try Runner(command: self).run()
    }

    /// A worker: runs cases `from ..< to`, a line before and after each (the parent reads them).
    func runWorker() {
        var driver = FuzzDriver()
        let output = FileHandle.standardOutput
        for index in from ..< to {
            let caseSeed = FuzzDriver.caseSeed(seed, index)
            output.write(Data("S \(index)\n".utf8))
            let start = DispatchTime.now().uptimeNanoseconds
            var line: String
            do {
                switch try driver.run(caseSeed: caseSeed) {
                case .rejected(let code, _): line = "R \(index) \(code)"
                case .accepted(_, _, let quarantined): line = "A \(index) \(quarantined)"
                case .sealed(_, let opened, let refused, let quarantined, _): line = "U \(index) \(quarantined) \(opened) \(refused)"
                case .ownIdentity(_, let refused, let moved, _): line = "O \(index) \(refused) \(moved ? 1 : 0)"
                case .reissue(_, let rebuilds, let withdrew, _): line = "E \(index) \(rebuilds) \(withdrew ? 1 : 0)"
                case .knownIssue(let known): line = "K \(index) \(known)"
                }
            } catch {
                line = "F \(index) \(String(describing: error).replacingOccurrences(of: "\n", with: " "))"
            }
            let milliseconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
            output.write(Data("\(line) \(String(format: "%.3f", milliseconds))\n".utf8))
        }
        output.write(Data("M \(peakResidentKilobytes())\n".utf8))
    }
}

extension FuzzCommand {
    /// Runs the cases here, tallying outcomes by their message with the numbers taken out: what
    /// the cases reach.
    func runHistogram() {
        var driver = FuzzDriver()
        var counts: [String: Int] = [:]
        for index in 0 ..< cases {
            let key: String
            do {
                switch try driver.run(caseSeed: FuzzDriver.caseSeed(seed, index)) {
                case .rejected(let code, let message): key = "rejected \(code): \(FuzzCommand.withoutNumbers(message))"
                case .accepted(_, _, let quarantined): key = quarantined > 0 ? "accepted, with a quarantined change" : "accepted"
                case .sealed(_, let opened, let refused, _, let reasons):
                    key = "sealed, \(opened > 0 ? "some" : "no") units opened, \(refused > 0 ? "some" : "none") refused"
                    // Each reason a unit was refused, once per case.
                    for reason in Set(reasons.map(FuzzCommand.withoutNumbers)) { counts["sealed unit refused: " + reason, default: 0] += 1 }
                case .ownIdentity(_, _, let moved, let kind): key = "in the store's own name: \(kind), \(moved ? "moved" : "kept its identity")"
                case .reissue(_, let rebuilds, _, let kind): key = "re-issue: \(kind), \(rebuilds == 0 ? "no replay" : rebuilds == 1 ? "1 replay" : "several replays")"
                case .knownIssue(let known): key = "KNOWN ISSUE: \(FuzzDriver.knownIssues[known].name)"
                }
            } catch {
                key = "FAILURE: \(error)"
            }
            counts[key, default: 0] += 1
        }
        for (key, count) in counts.sorted(by: { ($0.value, $1.key) > ($1.value, $0.key) }) {
            print(String(format: "%8d  ", count) + key)
        }
    }

    /// The message with every number and identity replaced by #.
    static func withoutNumbers(_ message: String) -> String {
        message.split(separator: " ", omittingEmptySubsequences: false).map { word -> String in
            // A replica or note identity: 32 hex digits.
            var word = Substring(word)
            var out = ""
            if word.count >= 32, word.prefix(32).allSatisfy(\.isHexDigit) {
                out = "#"
                word = word.dropFirst(32)
            }
            var inNumber = false
            for character in word {
                if character.isNumber {
                    if !inNumber { out.append("#") }
                    inNumber = true
                } else {
                    inNumber = false
                    out.append(character)
                }
            }
            return out
        }.joined(separator: " ")
    }
}

/// The most memory this process has held resident, in KiB (Linux's VmHWM; 0 elsewhere).
func peakResidentKilobytes() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "0") ?? 0
    }
    return 0
}

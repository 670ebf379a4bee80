import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The `crdt-sync` binary that `scale` runs as a child process, with what it printed kept in a
/// scratch folder so that a failure can be shown.
struct ScaleCLI {
    let binary: String
    let scratch: String
    /// What spawns and reaps the commands (so that their peak RSS is theirs).
    let launcher: Launcher

    /// This program's own binary.
    static func thisProgram() -> String {
        #if os(Linux)
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        #else
        Bundle.main.executablePath ?? CommandLine.arguments[0]
        #endif
    }

    /// The `crdt-sync` beside this program's own binary (the same `.build/release` folder).
    static func besideThisProgram() -> String {
        (thisProgram() as NSString).deletingLastPathComponent + "/crdt-sync"
    }

    /// This program's own binary looks like a debug build.
    static var benchIsDebugBuild: Bool {
        besideThisProgram().contains("/debug/")
    }

    var stderrFile: String { scratch + "/stderr.txt" }
    var stdoutFile: String { scratch + "/stdout.txt" }

    /// Runs `crdt-sync ARGUMENTS` to the end; throws with what it printed on stderr when it fails.
    /// - Parameter keepOutput: write stdout to `stdoutFile` (else it is discarded).
    @discardableResult
    func run(_ arguments: [String], keepOutput: Bool = false, environment: [String: String] = [:]) throws -> ChildRun {
        let result = try launcher.run(binary, arguments, stdout: keepOutput ? .file(stdoutFile) : .discard,
                                          stderr: .file(stderrFile), environment: environment)
        guard result.status == 0 else {
            let said = (try? String(contentsOfFile: stderrFile, encoding: .utf8)) ?? ""
            throw ChildProcessError(description: "`crdt-sync \(arguments.joined(separator: " "))` exited with status \(result.status): \(said.trimmingCharacters(in: .whitespacesAndNewlines))")
        }
        return result
    }

    /// What the last run kept on stdout, decoded as one JSON object.
    func jsonOutput() throws -> [String: Any] {
        guard let data = FileManager.default.contents(atPath: stdoutFile),
              let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw ChildProcessError(description: "crdt-sync did not print a JSON object")
        }
        return object
    }

    /// A relay run as `crdt-sync serve` on a free loopback port, over `store`.
    struct Relay {
        var child: RunningChild
        var url: String
        var log: String
    }

    /// Starts `crdt-sync serve` and returns once it listens (it logs its address at start).
    func startRelay(store: String, space: String, token: String) throws -> Relay {
        let log = scratch + "/relay-\(UInt64.random(in: 0 ... .max)).log"
        let child = try launcher.spawn(binary, ["serve", "--port", "0", "--store", store, "--token", "\(space)=\(token)",
                                                    "--log-level", "notice"],
                                           stderr: .file(log))
        let deadline = ChildProcess.now() + 60_000_000_000
        while ChildProcess.now() < deadline {
            let said = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            if let range = said.range(of: "listening on ") {
                let url = said[range.upperBound...].prefix { $0 != "," && !$0.isWhitespace }
                return Relay(child: child, url: String(url), log: log)
            }
            if let ended = try launcher.poll(child) {
                throw ChildProcessError(description: "`crdt-sync serve` exited with status \(ended.status) before listening: \(said)")
            }
            usleep(20_000)
        }
        _ = try? stopRelay(Relay(child: child, url: "", log: log))
        throw ChildProcessError(description: "`crdt-sync serve` did not say it was listening within 60 s")
    }

    /// Stops the relay (SIGTERM, a graceful shutdown; SIGKILL after 20 s) and reaps it.
    func stopRelay(_ relay: Relay) throws -> ChildRun {
        kill(relay.child.pid, SIGTERM)
        let deadline = ChildProcess.now() + 20_000_000_000
        while ChildProcess.now() < deadline {
            if let ended = try launcher.poll(relay.child) { return ended }
            usleep(20_000)
        }
        kill(relay.child.pid, SIGKILL)
        return try launcher.wait(relay.child)
    }
}

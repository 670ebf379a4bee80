import ArgumentParser
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `crdt-sync-bench scale-launcher`: spawns and reaps the commands `scale` measures, on its
/// behalf (run by it, one JSON request and one JSON answer a line on stdin and stdout).
///
/// A child's peak RSS is never reported below its spawner's (see `ChildRun`). `scale` itself
/// grows (it reads the notebook's notes to choose them, decodes figures); this process is
/// started before that, stays at the size of a program that has just parsed its arguments, and
/// says its own peak with every answer: the floor under the figures.
struct ScaleLauncher: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scale-launcher", abstract: "Spawn and reap processes for `scale` (run by it).", shouldDisplay: false)

    struct Request: Codable {
        enum Operation: String, Codable { case spawn, wait, poll }
        var operation: Operation
        var executable = ""
        var arguments: [String] = []
        var stdout: ChildProcess.Sink = .discard
        var stderr: ChildProcess.Sink = .discard
        var environment: [String: String] = [:]
        var pid: Int32 = 0
    }

    struct Answer: Codable {
        var pid: Int32?
        var run: ChildRun?
        var error: String?
        /// This launcher's own peak RSS, in megabytes.
        var launcherPeakRSSMegabytes: Double
    }

    func run() throws {
        var running: [Int32: RunningChild] = [:]
        let encoder = JSONEncoder()
        while let line = readLine() {
            var answer = Answer(launcherPeakRSSMegabytes: 0)
            do {
                let request = try JSONDecoder().decode(Request.self, from: Data(line.utf8))
                switch request.operation {
                case .spawn:
                    let child = try ChildProcess.spawn(request.executable, request.arguments, stdout: request.stdout,
                                                       stderr: request.stderr, environment: request.environment)
                    running[child.pid] = child
                    answer.pid = child.pid
                case .wait, .poll:
                    guard let child = running[request.pid] else { throw ChildProcessError(description: "no child \(request.pid)") }
                    answer.run = request.operation == .wait ? try ChildProcess.wait(child) : try ChildProcess.poll(child)
                    if answer.run != nil { running[request.pid] = nil }
                }
            } catch {
                answer.error = "\(error)"
            }
            answer.launcherPeakRSSMegabytes = ChildProcess.ownPeakRSSMegabytes()
            FileHandle.standardOutput.write(try encoder.encode(answer) + Data("\n".utf8))
        }
    }
}

/// The parent's side of `scale-launcher`: the same calls as `ChildProcess`, carried out there.
final class Launcher {
    private let child: RunningChild
    private let requests: Int32
    private let answers: Int32
    /// The launcher's largest peak RSS it has said: the floor under its children's figures.
    private(set) var floorMegabytes: Double = 0

    /// Starts `bench scale-launcher`.
    init(bench: String) throws {
        var toLauncher: [Int32] = [0, 0]
        var fromLauncher: [Int32] = [0, 0]
        guard pipe(&toLauncher) == 0, pipe(&fromLauncher) == 0 else {
            throw ChildProcessError(description: "pipe: \(String(cString: strerror(errno)))")
        }
        // Only the launcher's ends go to it; ours are closed in it when it starts.
        for descriptor in [toLauncher[1], fromLauncher[0]] { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        child = try ChildProcess.spawn(bench, ["scale-launcher"], stdin: toLauncher[0], stdout: .descriptor(fromLauncher[1]), stderr: .inherit)
        close(toLauncher[0])
        close(fromLauncher[1])
        requests = toLauncher[1]
        answers = fromLauncher[0]
    }

    /// Ends the launcher (end of its input) and reaps it.
    func finish() {
        close(requests)
        _ = try? ChildProcess.wait(child)
        close(answers)
    }

    private func ask(_ request: ScaleLauncher.Request) throws -> ScaleLauncher.Answer {
        let line = try JSONEncoder().encode(request) + Data("\n".utf8)
        try line.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = write(requests, bytes.baseAddress! + offset, bytes.count - offset)
                guard written > 0 else { throw ChildProcessError(description: "the launcher is gone") }
                offset += written
            }
        }
        var reply: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let got = read(answers, &byte, 1)
            guard got == 1 else { throw ChildProcessError(description: "the launcher is gone") }
            if byte == UInt8(ascii: "\n") { break }
            reply.append(byte)
        }
        let answer = try JSONDecoder().decode(ScaleLauncher.Answer.self, from: Data(reply))
        floorMegabytes = max(floorMegabytes, answer.launcherPeakRSSMegabytes)
        if let error = answer.error { throw ChildProcessError(description: error) }
        return answer
    }

    func spawn(_ executable: String, _ arguments: [String], stdout: ChildProcess.Sink = .discard, stderr: ChildProcess.Sink = .discard,
               environment: [String: String] = [:]) throws -> RunningChild {
        let answer = try ask(.init(operation: .spawn, executable: executable, arguments: arguments, stdout: stdout, stderr: stderr,
                                   environment: environment))
        return RunningChild(pid: answer.pid ?? 0, started: 0)
    }

    func wait(_ child: RunningChild) throws -> ChildRun {
        guard let run = try ask(.init(operation: .wait, pid: child.pid)).run else { throw ChildProcessError(description: "no figures") }
        return run
    }

    func poll(_ child: RunningChild) throws -> ChildRun? {
        try ask(.init(operation: .poll, pid: child.pid)).run
    }

    func run(_ executable: String, _ arguments: [String], stdout: ChildProcess.Sink = .discard, stderr: ChildProcess.Sink = .discard,
             environment: [String: String] = [:]) throws -> ChildRun {
        try wait(spawn(executable, arguments, stdout: stdout, stderr: stderr, environment: environment))
    }
}

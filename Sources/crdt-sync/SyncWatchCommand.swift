import ArgumentParser
import Dispatch
import Foundation
import NotesStore
import NotesSync
import NotesSyncHTTP

/// `crdt-sync sync --watch`: keeps the replica in sync until SIGINT or SIGTERM (Docs/CLI.md).
extension SyncCommand {
    func validateWatch() throws {
        guard let interval else { return }
        guard watch else { throw ValidationError("--interval goes with --watch") }
        guard interval.isFinite, interval >= 0.05, interval <= 86_400 else {
            throw ValidationError("--interval must be between 0.05 and 86400 seconds")
        }
    }

    /// One thing to stay in sync with.
    struct WatchTarget: Sendable {
        var remote: String?
        var transport: any SyncTransport
        var describe: @Sendable (SyncReport) -> String
        var client: HTTPRelayClient?
    }

    func runWatch() async throws {
        var failed = false
        try await runReportingAsync {
            let store = try replica.open()
            let targets = try watchTargets(store)
            let options = SyncWatchOptions(pollMilliseconds: UInt64((interval ?? 2) * 1000))
            let json = self.json
            let work = Task {
                await withTaskGroup(of: Bool.self) { group in
                    for target in targets {
                        group.addTask { await SyncCommand.watchOne(target, store: store, options: options, json: json, commitEvery: commitEvery) }
                    }
                    return await group.reduce(false) { $0 || !$1 }
                }
            }
            // SIGINT and SIGTERM end the watch (exit 0): the task is cancelled, syncs in progress stop.
            let queue = DispatchQueue(label: "crdt-sync.signals")
            let sources = [SIGINT, SIGTERM].map { number -> any DispatchSourceSignal in
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
                source.setEventHandler { work.cancel() }
                source.resume()
                return source
            }
            failed = await work.value
            for source in sources { source.cancel() }
            for target in targets { try? await target.client?.shutdown() }
        }
        if failed { throw ExitCode(1) }
    }

    /// The transports of --dir, --url, the named remote or every remote.
    private func watchTargets(_ store: NoteStore) throws -> [WatchTarget] {
        if let dir { return [try folderTarget(nil, dir, store)] }
        if let url, let space, let relayToken { return [try relayTarget(nil, url, space, relayToken)] }
        let remotes = try remote.map { [try store.remote(named: $0)] } ?? store.remotes()
        if remotes.isEmpty {
            throw NoteCommandError("no remotes to watch: give --dir FOLDER or --url URL --space SPACE, or add one (`crdt-sync remote add NAME --dir FOLDER | --url URL --space SPACE`)")
        }
        return try remotes.map { remote in
            switch remote.target {
            case .folder(let path):
                return try folderTarget(remote.name, path, store)
            case .relay(let url, let space):
                guard let token = try store.token(forRemote: remote.name) else {
                    throw NoteCommandError("the remote \(remote.name) has no token (`crdt-sync remote set-token \(remote.name)`)")
                }
                return try relayTarget(remote.name, url, space, token)
            }
        }
    }

    private func folderTarget(_ name: String?, _ dir: String, _ store: NoteStore) throws -> WatchTarget {
        let command = self
        var transport = FolderTransport(folder: dir)
        transport.sealedUnitCheck = try store.sealedUnitCheck()
        return WatchTarget(remote: name, transport: transport, describe: { command.folderLine($0) })
    }

    private func relayTarget(_ name: String?, _ url: String, _ space: String, _ token: String) throws -> WatchTarget {
        let client = HTTPRelayClient(maxConnections: 2, trustedCertificatesFile: try trustedCertificates())
        do {
            let command = self
            return WatchTarget(remote: name, transport: try client.transport(url: url, space: space, token: token),
                               describe: { command.relayLine($0, url: url, space: space) }, client: client)
        } catch {
            Task { try? await client.shutdown() }
            throw error
        }
    }

    /// Watches one target until cancelled; false when it ended on an error that will not pass.
    static func watchOne(_ target: WatchTarget, store: NoteStore, options: SyncWatchOptions, json: Bool, commitEvery: Int?) async -> Bool {
        var engine = SyncEngine(retry: RetryPolicy(maxAttempts: 1))
        engine.changesPerTransaction = commitEvery
        var first = true
        do {
            for try await event in engine.watch(store, over: target.transport, options: options) {
                switch event {
                case .synced(let report):
                    if let folder = target.transport as? FolderTransport, report.sentChanges > 0 {
                        _ = try? folder.compact(writer: store.replicaID)
                    }
                    // Idle looks at a folder print (and record) nothing; the first sync and every one that moved something do.
                    guard first || report.sentChanges > 0 || report.receivedChanges > 0 || !report.skipped.isEmpty else { continue }
                    first = false
                    let line = target.describe(report)
                    if let name = target.remote { try? store.recordRemoteSync(name, result: line, failed: false) }
                    if json {
                        struct Out: Encodable { var time: String; var remote: String?; var report: SyncReport }
                        writeLine(jsonLine(Out(time: watchTime(), remote: target.remote, report: report)))
                    } else {
                        writeLine("\(watchTime()) " + (target.remote.map { "\($0): " } ?? "") + line)
                        for skipped in report.skipped { writeLine("\(watchTime()) skipped: \(TerminalText.escaped(skipped))") }
                    }
                case .failed(let error, let delay):
                    if let name = target.remote { try? store.recordRemoteSync(name, result: error.message, failed: true) }
                    if json {
                        struct Out: Encodable { var time: String; var remote: String?; var error: String; var retryInMilliseconds: UInt64 }
                        writeLine(jsonLine(Out(time: watchTime(), remote: target.remote, error: error.message, retryInMilliseconds: delay)))
                    } else {
                        let prefix = target.remote.map { "\($0): " } ?? ""
                        writeStandardError(Data("crdt-sync: \(prefix)\(TerminalText.escaped(error.message)); retrying in \(delay) ms\n".utf8))
                    }
                }
            }
            return true
        } catch {
            let message = describeFailure(error)
            if let name = target.remote { try? store.recordRemoteSync(name, result: message, failed: true) }
            printError((target.remote.map { "\($0): " } ?? "") + message)
            return false
        }
    }

    /// The local time, to the second, in ISO 8601 with its offset.
    static func watchTime() -> String {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = .current
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.string(from: Date())
    }

    /// One line on stdout, written at once (a pipe would otherwise hold it in a buffer).
    static func writeLine(_ line: String) {
        writeStandardOutput(Data((line + "\n").utf8))
    }

    static func jsonLine(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}

import ArgumentParser
import Foundation
import NotesCRDT
import NotesStore
import NotesSync
import NotesSyncHTTP

/// Runs an async command body, turning sync and store errors into a message and an exit code.
func runReportingAsync(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as SyncError {
        printError(error.message)
        throw ExitCode(1)
    } catch let error as CRDTError {
        printError(error.message)
        throw ExitCode(1)
    } catch let error as StoreError {
        try runReporting { throw error }
    } catch let error as NoteCommandError {
        try runReporting { throw error }
    }
}

/// Finds a known peer by its replica id or a unique prefix of it.
func resolvePeer(_ prefix: String, in store: NoteStore) throws -> (replica: ReplicaID, versionVector: VersionVector) {
    let lowered = prefix.lowercased()
    let peers = try store.peers()
    let matches = peers.filter { $0.replica.description.hasPrefix(lowered) }
    if matches.count == 1 { return (matches[0].replica, matches[0].versionVector) }
    if matches.isEmpty {
        if let full = ReplicaID(hex: lowered) {
            return (full, VersionVector())
        }
        let known = peers.map { String($0.replica.description.prefix(12)) }.joined(separator: ", ")
        throw NoteCommandError("no known peer matches \"\(prefix)\"" + (known.isEmpty ? " (no peers known yet)" : " (known peers: \(known))"))
    }
    throw NoteCommandError("\"\(prefix)\" matches \(matches.count) peers; give more of the id")
}

struct ExportBundle: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write a bundle file with this replica's changes, for another machine to import.",
        discussion: """
        Without --for, the bundle holds everything this replica has. With --for PEER (a replica id or a \
        unique prefix of a known peer), it holds only what that peer lacks, as last heard from it. The \
        file is written atomically (a temporary file, fsync, rename). Carry it over and run \
        `crdt-sync import FILE` there. A history larger than one bundle may hold (32,768 changes, \
        16 MiB: Docs/BundleFormat.md) is written as FILE, FILE-2, FILE-3...; import them all.

        --markdown DIR writes every note as a Markdown file instead (Docs/CLI.md).
        """
    )

    @OptionGroup var replica: ReplicaOptions

    @Option(name: .long, help: ArgumentHelp("The bundle file to write.", valueName: "FILE"))
    var out: String?

    @Option(help: ArgumentHelp("Write every note as a .md file in this folder instead of a bundle.", valueName: "DIR"))
    var markdown: String?

    @Option(name: .customLong("for"), help: ArgumentHelp("Only what this peer lacks.", valueName: "PEER"))
    var peer: String?

    @Flag(help: "Print one JSON object.")
    var json = false

    func validate() throws {
        if (out == nil) == (markdown == nil) { throw ValidationError("give one of --out FILE, --markdown DIR") }
        if markdown != nil, peer != nil { throw ValidationError("--for goes with --out, not --markdown") }
    }

    func run() async throws {
        if let markdown { return try exportMarkdown(replica, to: markdown, json: json) }
        let out = out!
        try await runReportingAsync {
            let store = try replica.open()
            var since = VersionVector()
            var peerID: ReplicaID? = nil
            if let peer {
                let state = try resolvePeer(peer, in: store)
                since = state.versionVector
                peerID = state.replica
            }
            // In an encrypted space: the sealed units the peer lacks, never plaintext.
            let sealed = try store.isInEncryptedSpace()
            let units = sealed ? try store.sealedUnits(since: since) : []
            let changes = sealed ? [] : try store.changes(since: since)
            let pieces = sealed ? SyncBundle.sealedPieces(sender: store.replicaID, senderVersion: try store.versionVector, units: units)
                : try SyncBundle.pieces(sender: store.replicaID, senderVersion: try store.versionVector, changes: changes)
            // A history larger than one bundle may hold goes to FILE, FILE-2, ... (each one a reader takes).
            let stem = out.hasSuffix(".crdtb") ? String(out.dropLast(6)) : out
            let files = pieces.indices.map { $0 == 0 ? out : stem + "-\($0 + 1)" + (out.hasSuffix(".crdtb") ? ".crdtb" : "") }
            var bytes = 0
            for (piece, file) in zip(pieces, files) {
                let encoded = piece.encoded()
                bytes += encoded.count
                try AtomicFile.write(encoded, toPath: file)
            }
            let operations = UInt64.saturatingSum(pieces.lazy.map(\.operationCount))
            if json {
                struct Out: Encodable { var file: String; var files: [String]; var changes: Int; var operations: UInt64; var bytes: Int; var peer: String?; var sealedUnits: Int? }
                try printJSON(Out(file: out, files: files, changes: changes.count, operations: operations, bytes: bytes, peer: peerID?.description,
                                  sealedUnits: sealed ? units.count : nil))
            } else {
                let target = peerID.map { " for \($0.description.prefix(12))" } ?? ""
                let written = files.count == 1 ? out : "\(files.count) files (\(files.joined(separator: ", ")))"
                print("wrote \(written)\(target): " + (sealed ? "\(units.count) sealed unit(s)" : "\(changes.count) change(s)") + ", \(operations) operation(s), \(bytes) bytes")
            }
        }
    }
}

struct ImportBundles: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Apply bundle files written by `crdt-sync export` or found in a sync folder.",
        discussion: """
        Every file is read and checked (magic, version, checksum) before anything is applied, and \
        the files are applied in one transaction: a damaged file is named and nothing is applied. \
        Importing the same bundle twice changes nothing. Changes whose dependencies are missing are kept and applied when those arrive.

        --markdown DIR imports the .md files of a folder as notes instead (Docs/CLI.md).
        """
    )

    @OptionGroup var replica: ReplicaOptions

    @Argument(help: ArgumentHelp("The bundle files.", valueName: "FILE"))
    var files: [String] = []

    @Option(help: ArgumentHelp("Create or update notes from the .md files in this folder instead.", valueName: "DIR"))
    var markdown: String?

    @Flag(help: "Print one JSON object.")
    var json = false

    func validate() throws {
        if markdown != nil, !files.isEmpty { throw ValidationError("give bundle files or --markdown DIR, not both") }
        if markdown == nil, files.isEmpty { throw ValidationError("name at least one bundle file") }
    }

    func run() async throws {
        if let markdown { return try importMarkdown(replica, from: markdown, json: json) }
        try await runReportingAsync {
            func decode(_ file: String) throws -> SyncBundle {
                // Read at most a bundle's largest size, checked and decoded whole.
                do { return try SyncBundle.decode(SyncBundle.readFile(at: URL(fileURLWithPath: file))) } catch let error as SyncError {
                    throw error.at(file)
                }
            }
            // Every file's header and checksum are checked before anything is applied; the
            // changes are decoded file by file as they are applied, in one transaction, so a file
            // that fails to decode still leaves the replica as it was.
            var headers: [SyncBundle.Header] = []
            for file in files {
                do { headers.append(try SyncBundle.decodeHeader(SyncBundle.readFile(at: URL(fileURLWithPath: file)))) } catch let error as SyncError {
                    throw error.at(file)
                }
            }
            let store = try replica.open()
            let encrypted = try store.isInEncryptedSpace()
            // An encrypted space takes only sealed bundles (a plaintext one with no changes is
            // harmless); a plain replica cannot open them.
            if let index = try headers.indices.first(where: { index in
                if !encrypted { return headers[index].isSealed }
                return try !headers[index].isSealed && !decode(files[index]).changes.isEmpty
            }) {
                printError(encrypted ? "\(files[index]): plaintext bundle refused: this replica is in an end-to-end encrypted space; nothing was applied"
                    : "\(files[index]): sealed (end-to-end encrypted) bundle: this replica is in no encrypted space (`crdt-sync space join`); nothing was applied")
                throw ExitCode(2)
            }
            // A file is the user's choice, not a stray in a folder: one sealed under another key
            // refuses the whole import (sync alone skips such a unit and goes on).
            var sealedUnits: [SealedUnit] = []
            if encrypted, let sealer = try store.spaceSealer() {
                for (index, file) in files.enumerated() where headers[index].isSealed {
                    let units = try decode(file).sealedUnits
                    sealedUnits += units
                    if let unit = units.first(where: { !sealer.isOurs($0) }) {
                        printError("\(file): this space is encrypted with a different key: \(unit.label) is sealed under key "
                            + "\(unit.keyID.map { String(format: "%02x", $0) }.joined()), this replica's is \(sealer.key.keyIDHex); nothing was applied")
                        throw ExitCode(2)
                    }
                }
            }
            let progress = ProgressLine(label: "importing files", total: files.count)
            let report: IntegrationReport
            var changeCount = 0
            do {
                if encrypted {
                    // (Each file read and decoded once, for the key check above.)
                    report = try store.integrate(sealed: sealedUnits)
                } else {
                    var remaining = files[...]
                    report = IntegrationReport(try store.apply(batches: {
                        guard let file = remaining.popFirst() else { return nil }
                        let changes = try decode(file).changes
                        changeCount += changes.count
                        return changes
                    }, progress: { _ in progress.update(files.count - remaining.count) }))
                }
            } catch let error as SyncError where error.code == .wrongKey {
                printError(error.message)
                throw ExitCode(2)
            }
            progress.finish()
            for line in report.refused { printError("refused: \(line)") }
            for line in report.forks { printError("fork: \(line)") }
            for header in headers where header.sender != store.replicaID {
                try store.recordPeer(header.sender, versionVector: header.senderVersion)
            }
            if json {
                struct Out: Encodable {
                    var files: Int; var changes: Int; var applied: Int; var duplicates: Int; var pending: Int
                    var quarantined: Int; var rejected: Int; var forksRepaired: Int; var forks: [String]
                }
                try printJSON(Out(files: files.count, changes: changeCount, applied: report.applied, duplicates: report.duplicates,
                                  pending: report.pending, quarantined: report.quarantined, rejected: report.rejected,
                                  forksRepaired: report.forksRepaired, forks: report.forks))
            } else {
                var summary = SyncReport()
                summary.quarantined = report.quarantined
                summary.rejected = report.rejected
                summary.refused = report.refused
                summary.forks = report.forks
                summary.foreignOwnChanges = report.foreignOwnChanges
                summary.forksRepaired = report.forksRepaired
                print("imported \(files.count) file(s): \(report.applied) change(s) applied, \(report.duplicates) already here, \(report.pending) waiting for earlier changes"
                    + setAside(summary))
            }
            try store.closeForExit()
        }
    }
}

struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Exchange changes with other replicas through a shared folder or a relay.",
        discussion: """
        With no flags, syncs with every remote added by `crdt-sync remote add`, one line each; \
        `crdt-sync sync NAME` syncs with one. A remote that fails is reported and the others are \
        still synced (the exit status is then 1).

        --dir FOLDER: a folder every machine can reach (a USB stick, a Syncthing or cloud-drive \
        folder). This replica writes its new changes as write-once files in its own subfolder and \
        applies everything new from the others. Files still being copied in are skipped and taken on \
        a later run. Nothing is ever edited in place, so sync tools never make conflict copies.

        --url URL --space SPACE: a relay run by `crdt-sync serve`. This replica sends what the relay \
        lacks and applies what it lacks. The token comes from --token or, better (it stays out of \
        the shell history and the process list), from $CRDT_SYNC_TOKEN. Network errors and busy \
        relays are retried with exponential backoff (said on stderr); a refusal (a wrong token, a \
        request too large) is not.

        --watch keeps syncing until SIGINT or SIGTERM (exit 0), one line per sync that moved \
        something: a relay pushes changes as they arrive (a long poll), a folder is looked at every \
        --interval seconds (default 2). --json then prints one JSON object per line.
        """
    )

    @OptionGroup var replica: ReplicaOptions

    @Argument(help: ArgumentHelp("A remote's name (`crdt-sync remote list`); every remote when omitted.", valueName: "REMOTE"))
    var remote: String?

    @Option(name: .long, help: ArgumentHelp("The shared folder (it must exist).", valueName: "FOLDER"))
    var dir: String?

    @Option(name: .long, help: ArgumentHelp("The relay's base URL, e.g. http://127.0.0.1:8080.", valueName: "URL"))
    var url: String?

    @Option(name: .long, help: ArgumentHelp("The space (notebook) on the relay.", valueName: "SPACE"))
    var space: String?

    @Option(name: .long, help: ArgumentHelp("The relay's bearer token for the space (default: $CRDT_SYNC_TOKEN).", valueName: "TOKEN"))
    var token: String?

    @Option(name: .long, help: ArgumentHelp("Attempts in all when the relay cannot be reached.", valueName: "N"))
    var attempts: Int = 5

    @Option(name: .customLong("ca-file"), help: ArgumentHelp(
        "PEM certificates to trust besides the system's, for an https relay with a private or self-signed certificate (default: $CRDT_SYNC_CA_FILE).",
        valueName: "FILE"))
    var caFile: String?

    @Flag(help: "Print one JSON object (with remotes: an array, one object per remote; with --watch, one object per line).")
    var json = false

    @Flag(help: "Keep syncing until interrupted: relays push changes, folders are polled (Docs/CLI.md).")
    var watch = false

    @Option(help: ArgumentHelp("With --watch, seconds between two looks at a folder (default 2).", valueName: "SECONDS"))
    var interval: Double?

    @Option(name: .customLong("commit-every"), help: ArgumentHelp(
        "Commit what arrives every N changes or so, so that notes show while a long pull goes on and an interrupted one keeps what it applied (default: all of it in one transaction, which costs less).",
        valueName: "N"))
    var commitEvery: Int?

    func validate() throws {
        switch (dir, url) {
        case (nil, nil):
            if space != nil || token != nil { throw ValidationError("--space and --token go with --url") }
        case (.some, .some): throw ValidationError("give --dir or --url, not both")
        case (.some, nil):
            if space != nil || token != nil { throw ValidationError("--space and --token go with --url") }
        case (nil, .some):
            if space == nil { throw ValidationError("--url needs --space SPACE") }
            if relayToken == nil { throw ValidationError("--url needs a token: --token TOKEN or $CRDT_SYNC_TOKEN") }
        }
        if remote != nil, dir != nil || url != nil { throw ValidationError("give a remote's name or --dir/--url, not both") }
        if attempts < 1 { throw ValidationError("--attempts must be at least 1") }
        if let commitEvery, commitEvery < 1 { throw ValidationError("--commit-every must be at least 1") }
        try validateWatch()
    }

    /// --token, else $CRDT_SYNC_TOKEN.
    var relayToken: String? {
        if let token, !token.isEmpty { return token }
        if let fromEnvironment = ProcessInfo.processInfo.environment["CRDT_SYNC_TOKEN"], !fromEnvironment.isEmpty { return fromEnvironment }
        return nil
    }

    func run() async throws {
        if watch { return try await runWatch() }
        if let url, let space, let relayToken {
            try await runReportingAsync {
                let store = try replica.open()
                let report = try await syncWithRelay(store, url: url, space: space, token: relayToken)
                if json {
                    try printJSON(report)
                } else {
                    print(relayLine(report, url: url, space: space))
                    for line in report.refused { print("refused: \(TerminalText.escaped(line))") }
                    for line in report.forks { print("fork: \(TerminalText.escaped(line))") }
                }
                try store.closeForExit()
            }
            return
        }
        if let dir {
            try await runReportingAsync {
                let store = try replica.open()
                let report = try await syncWithFolder(store, dir: dir)
                if json { try printJSON(report) } else { printFolderLines(report) }
                try store.closeForExit()
            }
            return
        }
        try await syncWithRemotes()
    }

    /// Syncs with the named remote, or with every remote, each in turn; one that fails does not
    /// stop the others.
    private func syncWithRemotes() async throws {
        var failures = 0
        try await runReportingAsync {
            let store = try replica.open()
            let remotes = try remote.map { [try store.remote(named: $0)] } ?? store.remotes()
            if remotes.isEmpty {
                throw NoteCommandError("no remotes to sync with: give --dir FOLDER or --url URL --space SPACE, or add one (`crdt-sync remote add NAME --dir FOLDER | --url URL --space SPACE`)")
            }
            struct Outcome: Encodable { var remote: String; var ok: Bool; var report: SyncReport?; var error: String? }
            var outcomes: [Outcome] = []
            for remote in remotes {
                do {
                    let report: SyncReport
                    let line: String
                    switch remote.target {
                    case .folder(let path):
                        report = try await syncWithFolder(store, dir: path)
                        line = folderLine(report)
                    case .relay(let url, let space):
                        guard let token = try store.token(forRemote: remote.name) else {
                            throw NoteCommandError("the remote \(remote.name) has no token (`crdt-sync remote set-token \(remote.name)`)")
                        }
                        report = try await syncWithRelay(store, url: url, space: space, token: token)
                        line = relayLine(report, url: url, space: space)
                    }
                    try store.recordRemoteSync(remote.name, result: line, failed: false)
                    outcomes.append(Outcome(remote: remote.name, ok: true, report: report))
                    if !json {
                        print("\(remote.name): \(line)")
                        for refused in report.refused { print("\(remote.name): refused: \(TerminalText.escaped(refused))") }
                        for line in report.forks { print("\(remote.name): fork: \(TerminalText.escaped(line))") }
                    }
                } catch {
                    let message = describeFailure(error)
                    failures += 1
                    try? store.recordRemoteSync(remote.name, result: message, failed: true)
                    outcomes.append(Outcome(remote: remote.name, ok: false, error: message))
                    printError("\(remote.name): \(message)")
                }
            }
            if json { try printJSON(outcomes) }
            try store.closeForExit()
        }
        if failures > 0 { throw ExitCode(1) }
    }

    private func syncWithFolder(_ store: NoteStore, dir: String) async throws -> SyncReport {
        var transport = FolderTransport(folder: dir)
        transport.sealedUnitCheck = try store.sealedUnitCheck()
        let progress = ProgressLine(label: "receiving", total: 0)
        var engine = SyncEngine(retry: RetryPolicy(maxAttempts: 1), onProgress: { progress.update(Int(clamping: $0.receivedOperations), of: Int(clamping: $0.expectedOperations)) })
        engine.changesPerTransaction = commitEvery
        let report = try await engine.sync(store, over: transport)
        progress.finish()
        _ = try? transport.compact(writer: store.replicaID)
        return report
    }

    func folderLine(_ report: SyncReport) -> String {
        "sent \(report.sentChanges) change(s) (\(report.sentOperations) operations); received \(report.receivedChanges) change(s) from \(report.receivedBundles) file(s): \(report.applied) applied, \(report.duplicates) already here, \(report.pending) waiting" + setAside(report)
    }

    private func printFolderLines(_ report: SyncReport) {
        print(folderLine(report))
        for skipped in report.skipped { print("skipped: \(TerminalText.escaped(skipped))") }
        for line in report.refused { print("refused: \(TerminalText.escaped(line))") }
        for line in report.forks { print("fork: \(TerminalText.escaped(line))") }
    }

    func relayLine(_ report: SyncReport, url: String, space: String) -> String {
        "sent \(report.sentChanges) change(s) (\(report.sentOperations) operations) to \(url) space \(space); received \(report.receivedChanges) change(s): \(report.applied) applied, \(report.duplicates) already here, \(report.pending) waiting" + setAside(report) + (report.retries > 0 ? " (after \(report.retries) retr\(report.retries == 1 ? "y" : "ies"))" : "")
    }

    /// --ca-file, else $CRDT_SYNC_CA_FILE: certificates to trust besides the system's.
    func trustedCertificates() throws -> String? {
        let trusted = caFile ?? ProcessInfo.processInfo.environment["CRDT_SYNC_CA_FILE"].flatMap { $0.isEmpty ? nil : $0 }
        if let trusted, !FileManager.default.isReadableFile(atPath: trusted) {
            throw NoteCommandError("the certificates file \(trusted) cannot be read")
        }
        return trusted
    }

    private func syncWithRelay(_ store: NoteStore, url: String, space: String, token: String) async throws -> SyncReport {
        let client = HTTPRelayClient(maxConnections: 2, trustedCertificatesFile: try trustedCertificates())
        let outcome: Result<SyncReport, any Error>
        do {
            let transport = try client.transport(url: url, space: space, token: token)
            let maxAttempts = attempts
            // A long pull shows how far it has come (operations received of those the relay has).
            let progress = ProgressLine(label: "receiving", total: 0)
            var engine = SyncEngine(retry: RetryPolicy(maxAttempts: maxAttempts), onRetry: { attempt, delay, error in
                writeStandardError(Data("crdt-sync: \(TerminalText.escaped(error.message)); retrying in \(delay) ms (attempt \(attempt) of \(maxAttempts))\n".utf8))
            }, onProgress: { progress.update(Int(clamping: $0.receivedOperations), of: Int(clamping: $0.expectedOperations)) })
            engine.changesPerTransaction = commitEvery
            outcome = .success(try await engine.sync(store, over: transport))
            progress.finish()
        } catch {
            outcome = .failure(error)
        }
        try? await client.shutdown()
        return try outcome.get()
    }
}

/// The sentence an error from a sync says.
func describeFailure(_ error: any Error) -> String {
    switch error {
    case let error as SyncError: return error.message
    case let error as CRDTError: return error.message
    case let error as StoreError: return error.description
    case let error as NoteCommandError: return error.message
    default: return "\(error)"
    }
}

/// A one-line progress indicator on a terminal (stderr), shown only when the work takes more
/// than a moment; silent when stderr is not a terminal.
final class ProgressLine: @unchecked Sendable {
    let label: String
    let total: Int
    let start = Date()
    let enabled = isatty(2) != 0
    /// The total last drawn, once something was (a sync learns its total as it goes).
    private let drawn = NSLock()
    private var drawnTotal: Int?

    init(label: String, total: Int) {
        self.label = label
        self.total = total
    }

    func update(_ done: Int) { update(done, of: total) }

    /// Draws `done` of `total` (a sync's: what the other side said it has that this replica lacked).
    func update(_ done: Int, of total: Int) {
        guard enabled, Date().timeIntervalSince(start) > 0.3, total > 0 else { return }
        let done = min(max(done, 0), total)
        let width = 30
        let filled = width * done / total
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        drawn.withLock { drawnTotal = total }
        writeStandardError(Data("\r\(label) [\(bar)] \(done)/\(total)".utf8))
    }

    func finish() {
        guard enabled, Date().timeIntervalSince(start) > 0.3 else { return }
        let total = total > 0 ? total : drawn.withLock { drawnTotal } ?? 0
        guard total > 0 else { return }
        update(total, of: total)
        writeStandardError(Data("\n".utf8))
    }
}

/// Where a summary's refused changes are explained.
private func refusalsNamed(_ report: SyncReport) -> String {
    switch (report.refused.isEmpty, report.forks.isEmpty) {
    case (true, true): " (malformed, or no room left in the quarantine)"
    case (false, true): " (each named in a `refused:` line)"
    case (true, false): " (another version of seqs held here: see the `fork:` lines)"
    case (false, false): " (see the `refused:` and `fork:` lines)"
    }
}

/// The part of a sync summary about received changes kept aside or refused (empty when none were).
func setAside(_ report: SyncReport) -> String {
    (report.quarantined > 0 ? ", \(report.quarantined) quarantined (see `crdt-sync status`)" : "")
        + (report.rejected > 0 ? ", \(report.rejected) refused" + refusalsNamed(report) : "")
        + (report.foreignOwnChanges > 0 ? "; \(report.foreignOwnChanges) change(s) in this replica's name that it never made (a copy of this database is writing elsewhere)" : "")
        + (report.forksRepaired > 0 ? "; repaired: a copy of this database wrote \(report.forksRepaired == 1 ? "an identity" : "\(report.forksRepaired) identities") of this replica differently, and what this replica wrote there is re-issued as its new identity, both kept (see `crdt-sync status`)" : "")
}

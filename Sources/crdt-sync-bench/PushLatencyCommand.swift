import ArgumentParser
import Foundation
import Logging
import NotesCRDT
import NotesRelay
import NotesRelayServer
import NotesSync
import NotesSyncHTTP

/// Push latency: how long after an upload's response a client waiting on the relay's long poll
/// wakes up.
struct PushLatencyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-latency",
        abstract: "Measure live push: upload a change, time until a watching client wakes up.",
        discussion: """
        Without --url, starts a relay in this process on 127.0.0.1 (a free port). A watcher holds \
        the relay's long poll (GET .../changes) through --watch-url (default: --url; point it at \
        another relay instance over the same PostgreSQL storage to measure across instances); an \
        uploader posts one small change at a time through --url and waits for the watcher to wake \
        before the next. Prints percentiles of the time from the upload's response to the wake-up \
        (0 when the wake-up came first) and from the upload's request to the wake-up.
        """
    )

    @Option(help: "Uploads to time.") var uploads = 200
    @Option(help: ArgumentHelp("The uploader's relay (default: one in this process).", valueName: "URL")) var url: String?
    @Option(help: ArgumentHelp("The watcher's relay (default: --url).", valueName: "URL")) var watchURL: String?
    @Option(help: "The space (with --url).") var space = "bench"
    @Option(help: "The token (with --url; default $CRDT_SYNC_TOKEN).") var token: String?
    @Flag(help: "Print one JSON object.") var json = false

    func validate() throws {
        if uploads < 1 || uploads > 100_000 { throw ValidationError("--uploads must be between 1 and 100000") }
        if watchURL != nil, url == nil { throw ValidationError("--watch-url goes with --url") }
    }

    struct Figures: Encodable {
        var uploads: Int
        var wakeBeforeResponse: Int
        var fromResponseP50Milliseconds: Double
        var fromResponseP99Milliseconds: Double
        var fromResponseMaxMilliseconds: Double
        var fromRequestP50Milliseconds: Double
        var fromRequestP99Milliseconds: Double
    }

    func run() async throws {
        try await runReportingAsync {
            var relay: RunningRelay?
            var folder: URL?
            let benchToken = token ?? ProcessInfo.processInfo.environment["CRDT_SYNC_TOKEN"] ?? "bench-\(UInt64.random(in: 0 ... .max))"
            let uploadBase: String
            if let url {
                uploadBase = url
            } else {
                let temporary = FileManager.default.temporaryDirectory.appendingPathComponent("crdt-sync-push-bench-\(UUID().uuidString)")
                try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
                folder = temporary
                var tokens = RelayTokens()
                try tokens.add(space: space, token: benchToken)
                var logger = Logger(label: "crdt-sync.relay")
                logger.logLevel = .warning
                let storage = try SQLiteRelayStorage(path: temporary.appendingPathComponent("relay.sqlite").path)
                let running = try await RelayServer(service: RelayService(storage: storage, tokens: tokens),
                                                    configuration: RelayServerConfiguration(host: "127.0.0.1", port: 0), logger: logger).start()
                relay = running
                uploadBase = running.url
            }
            defer { if let folder { try? FileManager.default.removeItem(at: folder) } }
            let uploadClient = HTTPRelayClient(maxConnections: 2)
            let watchClient = HTTPRelayClient(maxConnections: 2)
            let result: Result<Figures, any Error>
            do {
                let uploader = try uploadClient.transport(url: uploadBase, space: space, token: benchToken)
                let watcher = try watchClient.transport(url: watchURL ?? uploadBase, space: space, token: benchToken)
                result = .success(try await measure(uploader: uploader, watcher: watcher))
            } catch {
                result = .failure(error)
            }
            try? await uploadClient.shutdown()
            try? await watchClient.shutdown()
            if let relay { await relay.stop() }
            let figures = try result.get()
            if json {
                try printJSON(figures)
            } else {
                print(String(format: "%d uploads: from the upload's response to the wake-up p50 %.2f ms, p99 %.2f ms, max %.2f ms (%d woke before the response)",
                             figures.uploads, figures.fromResponseP50Milliseconds, figures.fromResponseP99Milliseconds,
                             figures.fromResponseMaxMilliseconds, figures.wakeBeforeResponse))
                print(String(format: "from the upload's request to the wake-up: p50 %.2f ms, p99 %.2f ms",
                             figures.fromRequestP50Milliseconds, figures.fromRequestP99Milliseconds))
            }
        }
    }

    func measure(uploader: RelayTransport, watcher: RelayTransport) async throws -> Figures {
        let replica = LightBenchReplica()
        // The watcher starts from what the space holds now, and wakes once per upload.
        let start = try await watcher.remoteVersion(for: replica.replicaID)
        let (wakes, wake) = AsyncThrowingStream<(ContinuousClock.Instant, VersionVector), any Error>.makeStream()
        let watching = Task {
            var known = start
            do {
                while !Task.isCancelled {
                    guard let version = try await watcher.waitForChanges(after: known, seconds: 25) else { continue }
                    wake.yield((ContinuousClock.now, version))
                    known = version
                }
                wake.finish()
            } catch {
                wake.finish(throwing: error)
            }
        }
        defer { watching.cancel() }
        var wakeIterator = wakes.makeAsyncIterator()
        var fromResponse: [Double] = []
        var fromRequest: [Double] = []
        var early = 0
        func milliseconds(_ duration: Duration) -> Double {
            Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
        }
        for _ in 0 ..< uploads {
            // A moment for the watcher to be waiting again, so that the next wake-up is a push.
            try await Task.sleep(for: .milliseconds(10))
            try replica.makeEdit()
            let version = try replica.currentVersion()
            let change = try replica.changes(since: VersionVector()).last!  // the edit just made
            let sentAt = ContinuousClock.now
            _ = try await uploader.exchange(SyncBundle(sender: replica.replicaID, senderVersion: version, changes: [change]))
            let answeredAt = ContinuousClock.now
            // Wait for the wake-up that covers this upload.
            var wokeAt: ContinuousClock.Instant
            repeat {
                guard let (at, seen) = try await wakeIterator.next() else { throw SyncError(.io, "the watcher stopped") }
                wokeAt = at
                if seen[replica.replicaID] >= version[replica.replicaID] { break }
            } while true
            if wokeAt < answeredAt { early += 1 }
            fromResponse.append(max(0, milliseconds(wokeAt - answeredAt)))
            fromRequest.append(milliseconds(wokeAt - sentAt))
        }
        fromResponse.sort()
        fromRequest.sort()
        func percentile(_ values: [Double], _ p: Double) -> Double {
            values[min(values.count - 1, Int((Double(values.count) * p).rounded(.up)) - 1)]
        }
        return Figures(uploads: uploads, wakeBeforeResponse: early,
                       fromResponseP50Milliseconds: percentile(fromResponse, 0.5), fromResponseP99Milliseconds: percentile(fromResponse, 0.99),
                       fromResponseMaxMilliseconds: fromResponse.last!,
                       fromRequestP50Milliseconds: percentile(fromRequest, 0.5), fromRequestP99Milliseconds: percentile(fromRequest, 0.99))
    }
}

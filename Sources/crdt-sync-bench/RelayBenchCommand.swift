import ArgumentParser
import Foundation
import Logging
import NotesCRDT
import NotesStore
import NotesRelay
import NotesRelayServer
import NotesSync
import NotesSyncHTTP
import Synchronization

/// A load run against a relay: many clients, each making a small change and syncing, in a loop.
struct RelayBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay-bench",
        abstract: "Load-test a relay on loopback: many clients syncing small changes in a loop.",
        discussion: """
        Without --url, starts a relay in this process on 127.0.0.1 (a free port) with a store in a \
        temporary folder. Each client makes one small change, then runs a full sync (the real \
        SyncEngine over the HTTP transport), and again, until --duration is over. Prints syncs per \
        second, latency percentiles of one whole sync, and errors. --replica store gives each client \
        a real in-memory NoteStore (every client applies everyone's changes); --replica light gives \
        it a bare version vector, so that the relay, not the clients, is what is measured.
        """
    )

    enum ReplicaKind: String, ExpressibleByArgument, CaseIterable { case store, light }

    @Option(help: "Concurrent clients.") var clients = 50
    @Option(help: "Seconds to run.") var duration = 30.0
    @Option(help: "store or light (see above).") var replica: ReplicaKind = .store
    @Option(help: ArgumentHelp("An existing relay's URL (default: one in this process).", valueName: "URL")) var url: String?
    @Option(help: "The space (with --url).") var space = "bench"
    @Option(help: "The token (with --url; default $CRDT_SYNC_TOKEN).") var token: String?
    @Flag(help: "Print one JSON object.") var json = false

    func validate() throws {
        if clients < 1 || clients > 10_000 { throw ValidationError("--clients must be between 1 and 10000") }
        if !duration.isFinite || duration <= 0 || duration > 3600 { throw ValidationError("--duration must be between 0 and 3600 seconds") }
    }

    struct Figures: Encodable {
        var clients: Int
        var replica: String
        var seconds: Double
        var syncs: Int
        var syncsPerSecond: Double
        var requests: Int
        var p50Milliseconds: Double
        var p90Milliseconds: Double
        var p99Milliseconds: Double
        var maxMilliseconds: Double
        var errors: Int
        var firstError: String?
        var changesSent: Int
        var changesReceived: Int
        var relayChanges: Int?
        var converged: Bool?
    }

    func run() async throws {
        try await runReportingAsync {
            var relay: RunningRelay? = nil
            var folder: URL? = nil
            let benchToken = token ?? ProcessInfo.processInfo.environment["CRDT_SYNC_TOKEN"] ?? "bench-\(UInt64.random(in: 0 ... .max))"
            let base: String
            if let url {
                base = url
            } else {
                let temporary = FileManager.default.temporaryDirectory.appendingPathComponent("crdt-sync-relay-bench-\(UUID().uuidString)")
                try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
                folder = temporary
                let storage = try SQLiteRelayStorage(path: temporary.appendingPathComponent("relay.sqlite").path)
                var tokens = RelayTokens()
                try tokens.add(space: space, token: benchToken)
                var logger = Logger(label: "crdt-sync.relay")
                logger.logLevel = .warning
                let server = RelayServer(service: RelayService(storage: storage, tokens: tokens),
                                         configuration: RelayServerConfiguration(host: "127.0.0.1", port: 0,
                                                                                 maxConnectionsPerAddress: clients + 16,
                                                                                 maxConnections: clients + 64),
                                         logger: logger)
                let running = try await server.start()
                relay = running
                base = running.url
            }
            defer { if let folder { try? FileManager.default.removeItem(at: folder) } }
            let client = HTTPRelayClient(maxConnections: clients)
            let result: Result<Figures, any Error>
            do {
                let counter = CountingHTTP(base: client)
                let transport = try RelayTransport(url: base, space: space, token: benchToken, http: counter)
                result = .success(try await measure(transport, counter: counter))
            } catch {
                result = .failure(error)
            }
            try? await client.shutdown()
            if let relay { await relay.stop() }
            let figures = try result.get()
            if json {
                try printJSON(figures)
            } else {
                print(String(format: "%d clients (%@ replicas), %.1f s: %d syncs, %.0f syncs/s, %d requests",
                             figures.clients, figures.replica, figures.seconds, figures.syncs, figures.syncsPerSecond, figures.requests))
                print(String(format: "latency of one sync: p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms",
                             figures.p50Milliseconds, figures.p90Milliseconds, figures.p99Milliseconds, figures.maxMilliseconds))
                print("errors: \(figures.errors)" + (figures.firstError.map { " (first: \($0))" } ?? ""))
                print("changes sent: \(figures.changesSent), received: \(figures.changesReceived)"
                      + (figures.relayChanges.map { ", held by the relay: \($0)" } ?? "")
                      + (figures.converged.map { $0 ? "; all clients converged" : "; CLIENTS DID NOT CONVERGE" } ?? ""))
            }
        }
    }

    struct ClientOutcome: Sendable {
        var latencies: [Double] = []
        var errors = 0
        var firstError: String?
        var sent = 0
        var received = 0
    }

    func measure(_ transport: RelayTransport, counter: CountingHTTP) async throws -> Figures {
        let engine = SyncEngine(retry: RetryPolicy(maxAttempts: 1))
        let requestsBefore = counter.count
        let kind = replica
        var replicas: [any BenchReplica] = []
        for index in 0 ..< clients {
            replicas.append(kind == .store ? try StoreBenchReplica(index: index) : LightBenchReplica())
        }
        let start = ContinuousClock.now
        let deadline = start + .milliseconds(Int64(duration * 1000))
        let outcomes = await withTaskGroup(of: ClientOutcome.self) { group in
            for replica in replicas {
                group.addTask {
                    var outcome = ClientOutcome()
                    while ContinuousClock.now < deadline {
                        let began = ContinuousClock.now
                        do {
                            try replica.makeEdit()
                            let report = try await engine.sync(replica.syncReplica, over: transport)
                            let elapsed = ContinuousClock.now - began
                            outcome.latencies.append(Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
                            outcome.sent += report.sentChanges
                            outcome.received += report.receivedChanges
                        } catch {
                            outcome.errors += 1
                            if outcome.firstError == nil { outcome.firstError = "\(error)" }
                            try? await Task.sleep(nanoseconds: 10_000_000)
                        }
                    }
                    return outcome
                }
            }
            var all: [ClientOutcome] = []
            for await outcome in group { all.append(outcome) }
            return all
        }
        let seconds = Double((ContinuousClock.now - start).components.seconds) + Double((ContinuousClock.now - start).components.attoseconds) / 1e18
        let latencies = outcomes.flatMap(\.latencies).sorted()
        func percentile(_ p: Double) -> Double {
            guard !latencies.isEmpty else { return 0 }
            return latencies[min(latencies.count - 1, Int((Double(latencies.count) * p).rounded(.up)) - 1)]
        }
        var figures = Figures(
            clients: clients, replica: kind.rawValue, seconds: seconds, syncs: latencies.count,
            syncsPerSecond: Double(latencies.count) / seconds,
            requests: counter.count - requestsBefore,
            p50Milliseconds: percentile(0.50), p90Milliseconds: percentile(0.90), p99Milliseconds: percentile(0.99),
            maxMilliseconds: latencies.last ?? 0,
            errors: outcomes.reduce(0) { $0 + $1.errors }, firstError: outcomes.compactMap(\.firstError).first,
            changesSent: outcomes.reduce(0) { $0 + $1.sent }, changesReceived: outcomes.reduce(0) { $0 + $1.received })
        figures.relayChanges = try? await transport.status().changes
        // Two quiet rounds, then every client must have the same state.
        for _ in 0 ..< 2 {
            for replica in replicas { _ = try? await engine.sync(replica.syncReplica, over: transport) }
        }
        let fingerprints = Set(replicas.map { $0.fingerprint() })
        figures.converged = fingerprints.count == 1
        return figures
    }
}

/// A client of the benchmark.
protocol BenchReplica: Sendable {
    var syncReplica: any SyncReplica { get }
    func makeEdit() throws
    /// Equal on two replicas that have the same state.
    func fingerprint() -> String
}

/// A real replica: an in-memory NoteStore with one note of its own, appended to at each edit.
final class StoreBenchReplica: BenchReplica, @unchecked Sendable {
    let store: NoteStore
    let note: NoteID
    var syncReplica: any SyncReplica { store }

    init(index: Int) throws {
        store = try NoteStore.openInMemory()
        note = try store.createNote(title: "client \(index)")
    }

    func makeEdit() throws { try store.appendText(note, "x") }

    func fingerprint() -> String { (try? store.digest()) ?? "error" }
}

/// A bare replica: a version vector and its own changes (title writes), nothing materialized.
final class LightBenchReplica: BenchReplica, SyncReplica, @unchecked Sendable {
    let id = ReplicaID.random()
    let note = NoteID.random()
    private let lock = NSLock()
    private var version = VersionVector()
    private var own: [Change] = []
    var syncReplica: any SyncReplica { self }

    func makeEdit() throws {
        lock.lock(); defer { lock.unlock() }
        let seq = version[id] + 1
        var dependencies = version
        dependencies[id] = 0
        let change = Change(replica: id, startSeq: seq, timestamp: Timestamp(rawValue: UInt64(Date().timeIntervalSince1970 * 1000) << 16 | seq & 0xFFFF),
                            dependencies: dependencies, operations: [.setNoteField(note: note, field: .title, value: .string("edit \(seq)"))])
        own.append(change)
        version[id] = seq
    }

    func fingerprint() -> String { lock.withLock { version.description } }

    var replicaID: ReplicaID { id }
    func currentVersion() throws -> VersionVector { lock.withLock { version } }
    func changes(since other: VersionVector) throws -> [Change] {
        lock.withLock { own.filter { $0.endSeq > other[id] } }
    }
    func integrate(_ changes: [Change]) throws -> IntegrationReport {
        lock.lock(); defer { lock.unlock() }
        var applied = 0
        var duplicates = 0
        for change in changes {
            if change.endSeq <= version[change.replica] { duplicates += 1; continue }
            if change.startSeq <= version[change.replica] + 1 {
                version[change.replica] = change.endSeq
                applied += 1
            }
        }
        return IntegrationReport(applied: applied, duplicates: duplicates)
    }
    func recordPeer(_ replica: ReplicaID, version: VersionVector) throws {}
}

/// Counts the requests made through it.
final class CountingHTTP: HTTPCalling {
    let base: any HTTPCalling
    private let requests = Mutex(0)

    init(base: any HTTPCalling) { self.base = base }

    var count: Int { requests.withLock { $0 } }

    func call(_ request: HTTPCallRequest, maxResponseBytes: Int) async throws -> HTTPCallResponse {
        requests.withLock { $0 += 1 }
        return try await base.call(request, maxResponseBytes: maxResponseBytes)
    }
}

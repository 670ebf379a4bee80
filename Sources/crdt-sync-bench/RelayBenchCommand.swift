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
        it a bare version vector, so that the relay, not the clients, is what is measured. \
        --spaces N spreads the clients over N spaces (SPACE-0 ... SPACE-N-1, one token for all); \
        --url may be repeated (several relay instances over one database): clients take the URLs \
        in turn, and a client whose relay fails (a network error, a 5xx) goes on through the next \
        one. At the end every space is checked through every URL that still answers: its version \
        vector must hold each client's changes exactly (nothing lost), and a fresh client syncing \
        it from nothing must receive each change once (nothing duplicated).
        """
    )

    enum ReplicaKind: String, ExpressibleByArgument, CaseIterable { case store, light }

    @Option(help: "Concurrent clients.") var clients = 50
    @Option(help: "Seconds to run.") var duration = 30.0
    @Option(help: "store or light (see above).") var replica: ReplicaKind = .store
    @Option(name: .customLong("url"), help: ArgumentHelp("An existing relay's URL, repeatable (default: one in this process).", valueName: "URL"))
    var urls: [String] = []
    @Option(help: "The space (with --spaces N > 1, the prefix of SPACE-0 ... SPACE-N-1).") var space = "bench"
    @Option(help: "Spread the clients over this many spaces.") var spaces = 1
    @Option(help: "The token (with --url; default $CRDT_SYNC_TOKEN).") var token: String?
    @Flag(help: "Print one JSON object.") var json = false

    func validate() throws {
        if clients < 1 || clients > 10_000 { throw ValidationError("--clients must be between 1 and 10000") }
        if !duration.isFinite || duration <= 0 || duration > 3600 { throw ValidationError("--duration must be between 0 and 3600 seconds") }
        if spaces < 1 || spaces > clients { throw ValidationError("--spaces must be between 1 and --clients") }
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
        var spaces: Int = 1
        var urls: Int = 1
        /// Times a client went on through another URL after its relay failed.
        var failovers: Int = 0
        /// Spaces whose every answering URL held every change exactly once.
        var spacesVerified: Int = 0
        /// Operations of the clients that no answering URL's space holds (0 when nothing is lost).
        var lostOperations: UInt64 = 0
        /// Changes a fresh client received more than once (0 when nothing is duplicated).
        var duplicateChanges: Int = 0
        /// URLs that did not answer at the end (e.g. an instance killed during the run).
        var unreachableURLs: [String] = []
        var verificationProblems: [String] = []
    }

    /// The space of the `index`th space.
    func spaceName(_ index: Int) -> String { spaces == 1 ? space : "\(space)-\(index)" }

    func run() async throws {
        try await runReportingAsync {
            var relay: RunningRelay? = nil
            var folder: URL? = nil
            let benchToken = token ?? ProcessInfo.processInfo.environment["CRDT_SYNC_TOKEN"] ?? "bench-\(UInt64.random(in: 0 ... .max))"
            let bases: [String]
            if !urls.isEmpty {
                bases = urls
            } else {
                let temporary = FileManager.default.temporaryDirectory.appendingPathComponent("crdt-sync-relay-bench-\(UUID().uuidString)")
                try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
                folder = temporary
                let storage = try SQLiteRelayStorage(path: temporary.appendingPathComponent("relay.sqlite").path)
                var tokens = RelayTokens()
                for index in 0 ..< spaces { try tokens.add(space: spaceName(index), token: benchToken) }
                var logger = Logger(label: "crdt-sync.relay")
                logger.logLevel = .warning
                let server = RelayServer(service: RelayService(storage: storage, tokens: tokens),
                                         configuration: RelayServerConfiguration(host: "127.0.0.1", port: 0,
                                                                                 maxConnectionsPerAddress: clients + 16,
                                                                                 maxConnections: clients + 64),
                                         logger: logger)
                let running = try await server.start()
                relay = running
                bases = [running.url]
            }
            defer { if let folder { try? FileManager.default.removeItem(at: folder) } }
            let client = HTTPRelayClient(maxConnections: clients)
            let result: Result<Figures, any Error>
            do {
                let counter = CountingHTTP(base: client)
                // transports[space][url]
                let transports = try (0 ..< spaces).map { index in
                    try bases.map { try RelayTransport(url: $0, space: spaceName(index), token: benchToken, http: counter) }
                }
                result = .success(try await measure(transports, urls: bases, counter: counter))
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
                print("\(figures.spaces) space(s) over \(figures.urls) URL(s), \(figures.failovers) failover(s); "
                      + "verified \(figures.spacesVerified) of \(figures.spaces) space(s): "
                      + "\(figures.lostOperations) operation(s) lost, \(figures.duplicateChanges) change(s) duplicated"
                      + (figures.unreachableURLs.isEmpty ? "" : "; unreachable at the end: \(figures.unreachableURLs.joined(separator: ", "))"))
                for problem in figures.verificationProblems.prefix(10) { print("  problem: \(problem)") }
            }
            if figures.spacesVerified != figures.spaces { throw ExitCode(1) }
        }
    }

    struct ClientOutcome: Sendable {
        var latencies: [Double] = []
        var errors = 0
        var firstError: String?
        var sent = 0
        var received = 0
        var failovers = 0
    }

    func measure(_ transports: [[RelayTransport]], urls: [String], counter: CountingHTTP) async throws -> Figures {
        let engine = SyncEngine(retry: RetryPolicy(maxAttempts: 1))
        let requestsBefore = counter.count
        let kind = replica
        var replicas: [any BenchReplica] = []
        for index in 0 ..< clients {
            replicas.append(kind == .store ? try StoreBenchReplica(index: index) : LightBenchReplica())
        }
        let spaceCount = transports.count
        let urlCount = urls.count
        let start = ContinuousClock.now
        let deadline = start + .milliseconds(Int64(duration * 1000))
        let outcomes = await withTaskGroup(of: ClientOutcome.self) { group in
            for (index, replica) in replicas.enumerated() {
                // Client i: space i mod N, and its URLs in turn from i mod U.
                let mine = transports[index % spaceCount]
                group.addTask {
                    var outcome = ClientOutcome()
                    var current = index % urlCount
                    while ContinuousClock.now < deadline {
                        let began = ContinuousClock.now
                        do {
                            try replica.makeEdit()
                            let report = try await engine.sync(replica.syncReplica, over: mine[current])
                            let elapsed = ContinuousClock.now - began
                            outcome.latencies.append(Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
                            outcome.sent += report.sentChanges
                            outcome.received += report.receivedChanges
                        } catch {
                            outcome.errors += 1
                            if outcome.firstError == nil { outcome.firstError = "\(error)" }
                            // A relay that fails may be gone: go on through the next one.
                            if let error = error as? SyncError, error.code == .transient, urlCount > 1 {
                                current = (current + 1) % urlCount
                                outcome.failovers += 1
                            }
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
        figures.spaces = spaceCount
        figures.urls = urlCount
        figures.failovers = outcomes.reduce(0) { $0 + $1.failovers }
        // Which URLs still answer.
        var alive: [Int] = []
        for (index, url) in urls.enumerated() {
            if (try? await transports[0][index].status()) != nil { alive.append(index) } else { figures.unreachableURLs.append(url) }
        }
        guard let first = alive.first else {
            figures.verificationProblems.append("no URL answers")
            return figures
        }
        var held = 0
        for transport in transports { held += (try? await transport[first].status().changes) ?? 0 }
        figures.relayChanges = held
        // Two quiet rounds through a live URL, then every client of a space must have the same state.
        for _ in 0 ..< 2 {
            for (index, replica) in replicas.enumerated() { _ = try? await engine.sync(replica.syncReplica, over: transports[index % spaceCount][first]) }
        }
        figures.converged = (0 ..< spaceCount).allSatisfy { space in
            Set(replicas.indices.filter { $0 % spaceCount == space }.map { replicas[$0].fingerprint() }).count == 1
        }
        // Every space, through every live URL: each client's changes held exactly, and a fresh
        // client syncing from nothing receives each once.
        for space in 0 ..< spaceCount {
            var expected = VersionVector()
            for index in replicas.indices where index % spaceCount == space {
                let own = replicas[index].own()
                expected[own.replica] = own.seq
            }
            var ok = true
            for url in alive {
                let name = "\(urls[url]) \(transports[space][url].space)"
                do {
                    let held = try await transports[space][url].status().versionVector()
                    for (author, seq) in expected.entries where held[author] < seq {
                        figures.lostOperations += seq - held[author]
                        ok = false
                        figures.verificationProblems.append("\(name): holds \(author) up to \(held[author]) of \(seq)")
                    }
                    if held != expected {
                        ok = false
                        figures.verificationProblems.append("\(name): holds \(held), the clients made \(expected)")
                    }
                    let checker = LightBenchReplica()
                    let report = try await SyncEngine(retry: RetryPolicy(maxAttempts: 3)).sync(checker, over: transports[space][url])
                    let fresh = try checker.currentVersion()
                    let duplicates = checker.duplicatesSeen
                    figures.duplicateChanges += duplicates
                    if duplicates > 0 || fresh != expected {
                        ok = false
                        figures.verificationProblems.append("\(name): a fresh client got \(fresh) with \(duplicates) duplicate(s) (\(report.receivedChanges) change(s))")
                    }
                } catch {
                    ok = false
                    figures.verificationProblems.append("\(name): \(error)")
                }
            }
            if ok { figures.spacesVerified += 1 }
        }
        return figures
    }
}

/// A client of the benchmark.
protocol BenchReplica: Sendable {
    var syncReplica: any SyncReplica { get }
    func makeEdit() throws
    /// Equal on two replicas that have the same state.
    func fingerprint() -> String
    /// Its own changes so far: its id and last seq.
    func own() -> (replica: ReplicaID, seq: UInt64)
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

    func own() -> (replica: ReplicaID, seq: UInt64) { (store.replicaID, (try? store.versionVector[store.replicaID]) ?? 0) }
}

/// A bare replica: a version vector and its own changes (title writes), nothing materialized.
final class LightBenchReplica: BenchReplica, SyncReplica, @unchecked Sendable {
    let id = ReplicaID.random()
    let note = NoteID.random()
    private let lock = NSLock()
    private var version = VersionVector()
    private var ownChanges: [Change] = []
    private var duplicateCount = 0
    var syncReplica: any SyncReplica { self }

    func makeEdit() throws {
        lock.lock(); defer { lock.unlock() }
        let seq = version[id] + 1
        var dependencies = version
        dependencies[id] = 0
        let change = Change(replica: id, startSeq: seq, timestamp: Timestamp(rawValue: UInt64(Date().timeIntervalSince1970 * 1000) << 16 | seq & 0xFFFF),
                            dependencies: dependencies, operations: [.setNoteField(note: note, field: .title, value: .string("edit \(seq)"))])
        ownChanges.append(change)
        version[id] = seq
    }

    func fingerprint() -> String { lock.withLock { version.description } }

    func own() -> (replica: ReplicaID, seq: UInt64) { lock.withLock { (id, version[id]) } }

    /// Changes received that it already had, over its life.
    var duplicatesSeen: Int { lock.withLock { duplicateCount } }

    var replicaID: ReplicaID { id }
    func currentVersion() throws -> VersionVector { lock.withLock { version } }
    func changes(since other: VersionVector) throws -> [Change] {
        lock.withLock { ownChanges.filter { $0.endSeq > other[id] } }
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
        duplicateCount += duplicates
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

import ArgumentParser
import Foundation
import Logging
import NotesRelay
import NotesRelayPostgres
import NotesRelayServer
import NotesSync

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run a sync relay: replicas sync through it over HTTP with `crdt-sync sync --url`.",
        discussion: """
        The relay stores the changes of each space (one person's or team's notebook) in one SQLite \
        file and answers "here is my version vector and my new changes; give me what I lack", in \
        pages. It needs no CRDT knowledge beyond version vectors. Each space has one or more bearer \
        tokens (--token SPACE=TOKEN, repeatable, or --tokens-file FILE with SPACE=TOKEN lines; a \
        tokens file keeps tokens out of the process list). It listens on 127.0.0.1 unless --host \
        says otherwise; put it behind a TLS-terminating proxy to reach it from other machines. \
        Each request is logged to stderr (method, path, status, duration; never a token). \
        Docs/HTTP.md describes the endpoints. With --postgres URL (or $CRDT_SYNC_RELAY_POSTGRES) \
        the relay keeps its spaces in PostgreSQL instead, and several relay processes over one \
        database can serve the same spaces behind a load balancer.
        """
    )

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("The port to listen on (0: any free port, printed at start).", valueName: "PORT"))
    var port: Int = 8080

    @Option(name: .long, help: ArgumentHelp("The address to listen on.", valueName: "HOST"))
    var host: String = "127.0.0.1"

    @Option(name: .long, help: ArgumentHelp("The relay's SQLite file (created if missing).", valueName: "FILE"))
    var store: String?

    @Option(name: .long, help: ArgumentHelp(
        "Keep the spaces in this PostgreSQL database instead (postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require]; default $CRDT_SYNC_RELAY_POSTGRES when --store is not given).",
        valueName: "URL"))
    var postgres: String?

    @Option(name: .customLong("postgres-connections"), parsing: .unconditional, help: ArgumentHelp("At most this many pooled PostgreSQL connections (one more listens).", valueName: "N"))
    var postgresConnections: Int = 20

    @Option(name: .customLong("token"), help: ArgumentHelp("A space and its bearer token (repeatable).", valueName: "SPACE=TOKEN"))
    var tokens: [String] = []

    @Option(name: .customLong("tokens-file"), help: ArgumentHelp("A file of SPACE=TOKEN lines (# starts a comment).", valueName: "FILE"))
    var tokensFile: String?

    @Option(name: .customLong("max-body-bytes"), parsing: .unconditional, help: ArgumentHelp("Larger request bodies get 413 (1024 to 16777216, the largest bundle).", valueName: "BYTES"))
    var maxBodyBytes: Int = 16 << 20

    @Option(name: .customLong("page-changes"), parsing: .unconditional, help: ArgumentHelp("At most this many changes per answer page.", valueName: "N"))
    var pageChanges: Int = 1000

    @Option(name: .customLong("page-bytes"), parsing: .unconditional, help: ArgumentHelp("At most about this many bytes of changes per answer page.", valueName: "BYTES"))
    var pageBytes: Int = 1 << 20

    @Option(name: .customLong("log-level"), help: ArgumentHelp("trace, debug, info, notice, warning, error or critical.", valueName: "LEVEL"))
    var logLevel: String = "info"

    @Option(name: .customLong("max-connections-per-address"), parsing: .unconditional, help: ArgumentHelp(
        "At most this many open connections from one client address; more are closed at once (raise it behind a proxy or NAT, or for a load test from one machine).",
        valueName: "N"))
    var maxConnectionsPerAddress: Int = 64

    @Option(name: .customLong("max-connections"), parsing: .unconditional, help: ArgumentHelp("At most this many open connections in all; more wait in the listen backlog.", valueName: "N"))
    var maxConnections: Int = 512

    @Option(name: .customLong("tls-cert"), help: ArgumentHelp("Serve HTTPS with this PEM certificate chain (with --tls-key).", valueName: "FILE"))
    var tlsCert: String?

    @Option(name: .customLong("tls-key"), help: ArgumentHelp("The PEM private key of --tls-cert.", valueName: "FILE"))
    var tlsKey: String?

    @Option(name: .customLong("log-format"), help: ArgumentHelp("text (one line per event, key=value fields) or json (one JSON object per line).", valueName: "FORMAT"))
    var logFormat: String = "text"

    @Option(name: .customLong("metrics-token-file"), help: ArgumentHelp(
        "Require this file's first line as a bearer token on GET /metrics (default: /metrics is open).", valueName: "FILE"))
    var metricsTokenFile: String?

    @Flag(name: .customLong("power-loss-durable"), help: "fsync at every commit, so a power cut loses nothing either (slower).")
    var powerLossDurable = false

    /// The PostgreSQL URL: --postgres, else $CRDT_SYNC_RELAY_POSTGRES unless --store says SQLite.
    var postgresURL: String? {
        if let postgres { return postgres }
        if store != nil { return nil }
        return ProcessInfo.processInfo.environment["CRDT_SYNC_RELAY_POSTGRES"].flatMap { $0.isEmpty ? nil : $0 }
    }

    func validate() throws {
        if store != nil, postgres != nil { throw ValidationError("give --store FILE (SQLite) or --postgres URL, not both") }
        if store == nil, postgresURL == nil { throw ValidationError("give --store FILE (SQLite) or --postgres URL (or set CRDT_SYNC_RELAY_POSTGRES)") }
        if postgresURL != nil, powerLossDurable { throw ValidationError("--power-loss-durable is for --store; PostgreSQL's durability is its own (synchronous_commit)") }
        if postgresConnections < 1 { throw ValidationError("--postgres-connections must be positive") }
        if let postgresURL {
            do { _ = try PostgresLocation(url: postgresURL) } catch let error as RelayStorageError { throw ValidationError(error.message) }
        }
        if tokens.isEmpty, tokensFile == nil { throw ValidationError("give at least one --token SPACE=TOKEN or a --tokens-file") }
        if !(0 ... 65535).contains(port) { throw ValidationError("--port must be between 0 and 65535") }
        if maxBodyBytes < 1024 { throw ValidationError("--max-body-bytes must be at least 1024") }
        // No bundle is larger: a larger limit only let bodies that must be refused be read whole.
        if maxBodyBytes > SyncBundle.maxBytes { throw ValidationError("--max-body-bytes must be at most \(SyncBundle.maxBytes) (no bundle is larger)") }
        if (tlsCert == nil) != (tlsKey == nil) { throw ValidationError("--tls-cert and --tls-key go together") }
        if logFormat != "text", logFormat != "json" { throw ValidationError("--log-format must be text or json") }
        if maxConnectionsPerAddress < 1 || maxConnections < 1 { throw ValidationError("--max-connections-per-address and --max-connections must be positive") }
        if pageChanges < 1 || pageBytes < 1 { throw ValidationError("--page-changes and --page-bytes must be positive") }
        // An answer holds a page beside its largest record: past this, no reader would take it.
        if pageBytes > 4 << 20 { throw ValidationError("--page-bytes must be at most 4194304 (an answer must stay within the 16 MiB a client takes)") }
        if Logger.Level(rawValue: logLevel) == nil { throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical") }
    }

    func run() async throws {
        try await runReportingAsync {
            var relayTokens = RelayTokens()
            for (index, assignment) in tokens.enumerated() {
                do { try relayTokens.add(assignment: assignment) } catch let error as SyncError {
                    throw SyncError(.rejected, "--token #\(index + 1): \(error.message)")
                }
            }
            if let tokensFile {
                // A regular file of at most 1 MiB, opened without blocking: a FIFO hung the start,
                // /dev/zero filled memory, and a folder was "no such file".
                let bytes: [UInt8]
                do {
                    bytes = try LocalFileSystem().read(tokensFile, limit: 1 << 20)
                } catch let error as SyncError where error.code == .tooLarge {
                    throw SyncError(.io, "\(tokensFile): larger than 1 MiB, not a tokens file")
                } catch let error as SyncError {
                    throw SyncError(.io, "the tokens file \(error.message)")
                }
                guard let text = String(validating: bytes, as: UTF8.self) else {
                    throw SyncError(.rejected, "\(tokensFile): not UTF-8 text (a token with invalid bytes would be taken as another)")
                }
                try relayTokens.add(file: text, name: tokensFile)
            }
            guard !relayTokens.isEmpty else {
                throw SyncError(.rejected, "no tokens: \(tokensFile ?? "the tokens file") gives no SPACE=TOKEN line, and a relay without one would serve nothing")
            }
            let level = Logger.Level(rawValue: logLevel) ?? .info
            var metricsToken: String? = nil
            if let metricsTokenFile {
                guard let data = FileManager.default.contents(atPath: metricsTokenFile),
                      let line = String(data: data, encoding: .utf8)?.split(whereSeparator: \.isNewline).first, !line.isEmpty else {
                    throw SyncError(.io, "\(metricsTokenFile): cannot be read, or its first line is empty")
                }
                metricsToken = String(line).trimmingCharacters(in: .whitespaces)
            }
            let json = logFormat == "json"
            LoggingSystem.bootstrap { label in
                if json { return JSONLogHandler(label: label, level: level) }
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            }
            var logger = Logger(label: "crdt-sync.relay")
            logger.logLevel = level
            let storage: any RelayStorage
            let storeName: String
            do {
                if let postgresURL {
                    let location = try PostgresLocation(url: postgresURL)
                    storage = try await PostgresRelayStorage.connect(location, maxConnections: postgresConnections, logger: logger)
                    storeName = location.redacted
                } else {
                    let path = store ?? ""
                    storage = try SQLiteRelayStorage(path: path, powerLoss: powerLossDurable)
                    storeName = path
                }
            } catch let error as RelayStorageError {
                throw SyncError(.io, error.message)
            }
            let service = RelayService(storage: storage, tokens: relayTokens, limits: RelayLimits(
                maxRequestBytes: maxBodyBytes, page: RelayPageLimits(maxChanges: pageChanges, maxBytes: pageBytes)))
            let server = RelayServer(service: service, configuration: RelayServerConfiguration(
                host: host, port: port, maxConnectionsPerAddress: maxConnectionsPerAddress, maxConnections: maxConnections,
                tls: tlsCert.flatMap { cert in tlsKey.map { RelayTLSFiles(certificateChain: cert, privateKey: $0) } },
                metricsToken: metricsToken), logger: logger)
            RelayServer.raiseOpenFileLimit()
            let spaces = relayTokens.spaces
            let startLogger = logger
            let scheme = tlsCert == nil ? "http" : "https"
            do {
                let app = try server.application { boundPort in
                    startLogger.notice("relay listening on \(scheme)://\(host):\(boundPort), store \(storeName), spaces: \(spaces.joined(separator: ", "))")
                }
                do {
                    try await app.runService()
                } catch {
                    throw SyncError(.io, "the relay stopped: \(error)")
                }
            } catch let error as RelayTLSError {
                throw SyncError(.io, error.message)
            }
        }
    }
}

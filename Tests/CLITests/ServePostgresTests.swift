import Foundation
import Testing

/// `crdt-sync serve --postgres`: usage errors, a server that is not there, and (with
/// `$CRDT_SYNC_TEST_POSTGRES`) two relay processes over one database serving one space, plain or encrypted.
struct ServePostgresTests {
    static let postgresURL = ProcessInfo.processInfo.environment["CRDT_SYNC_TEST_POSTGRES"].flatMap { $0.isEmpty ? nil : $0 }

    @Test func storageChoiceIsRequiredAndExclusive() throws {
        let neither = try CLI.run(["serve", "--token", "s=t"], environment: ["CRDT_SYNC_RELAY_POSTGRES": ""])
        #expect(neither.status != 0)
        #expect(neither.stderr.contains("--store FILE (SQLite) or --postgres URL"), "\(neither.stderr)")
        let both = try CLI.run(["serve", "--token", "s=t", "--store", "/tmp/x.sqlite", "--postgres", "postgres://u@127.0.0.1/db"])
        #expect(both.status != 0)
        #expect(both.stderr.contains("not both"), "\(both.stderr)")
        let badURL = try CLI.run(["serve", "--token", "s=t", "--postgres", "mysql://u@h/db"])
        #expect(badURL.status != 0)
        #expect(badURL.stderr.contains("is not a PostgreSQL URL"), "\(badURL.stderr)")
        let durable = try CLI.run(["serve", "--token", "s=t", "--postgres", "postgres://u@h/db", "--power-loss-durable"])
        #expect(durable.status != 0)
        #expect(durable.stderr.contains("--power-loss-durable is for --store"), "\(durable.stderr)")
    }

    @Test func anUnreachableDatabaseIsAClearErrorWithoutThePassword() throws {
        // The environment variable selects PostgreSQL when --store is not given; port 1 has no server.
        let result = try CLI.run(["serve", "--token", "s=t"],
                                 environment: ["CRDT_SYNC_RELAY_POSTGRES": "postgres://relay:hunter2@127.0.0.1:1/notes?sslmode=disable"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("postgres://relay@127.0.0.1:1/notes: cannot connect to PostgreSQL"), "\(result.stderr)")
        #expect(!result.stderr.contains("hunter2"))
    }

    /// Two `serve --postgres` processes over the test database, serving a fresh space with one token.
    static func twoRelays(prefix: String) throws -> (RelayProcess, RelayProcess, space: String, token: String) {
        let url = try #require(postgresURL)
        let space = "\(prefix)-\(UUID().uuidString.lowercased())"
        let token = "tok-\(UUID().uuidString)"
        let first = try RelayProcess(arguments: ["--postgres", url, "--token", "\(space)=\(token)"])
        do {
            return (first, try RelayProcess(arguments: ["--postgres", url, "--token", "\(space)=\(token)"]), space, token)
        } catch {
            first.stop()
            throw error
        }
    }

    @Test(.enabled(if: ServePostgresTests.postgresURL != nil,
                   "set CRDT_SYNC_TEST_POSTGRES to a PostgreSQL URL (Scripts/with-postgres.sh does) to test serve --postgres"))
    func twoRelayProcessesOverOneDatabaseServeOneSpace() throws {
        let (first, second, space, token) = try Self.twoRelays(prefix: "cli")
        defer { first.stop(); second.stop() }
        let scratch = Scratch()
        let a = scratch.path + "/a.db", b = scratch.path + "/b.db"
        try CLI.ok(["init"], db: a)
        try CLI.ok(["init"], db: b)
        let id = try CLI.ok(["new", "--title", "via first", "--body", "hello"], db: a)
        let env = ["CRDT_SYNC_TOKEN": token]
        #expect(try CLI.run(["sync", "--url", first.url, "--space", space], db: a, environment: env).status == 0)
        let pulled = try CLI.run(["sync", "--url", second.url, "--space", space], db: b, environment: env)
        #expect(pulled.status == 0, "\(pulled.stderr)")
        #expect(try CLI.ok(["show", id], db: b).contains("hello"))
        try CLI.ok(["edit", id, "--append", " and back"], db: b)
        #expect(try CLI.run(["sync", "--url", second.url, "--space", space], db: b, environment: env).status == 0)
        #expect(try CLI.run(["sync", "--url", first.url, "--space", space], db: a, environment: env).status == 0)
        #expect(try CLI.ok(["digest"], db: a) == CLI.ok(["digest"], db: b))
    }

    /// An encrypted space through two `serve --postgres` processes: members converge through
    /// either, the relay holds only sealed units, and a plain replica's upload is refused.
    @Test(.enabled(if: ServePostgresTests.postgresURL != nil,
                   "set CRDT_SYNC_TEST_POSTGRES to a PostgreSQL URL (Scripts/with-postgres.sh does) to test serve --postgres"))
    func anEncryptedSpaceThroughTwoRelayProcesses() throws {
        let (first, second, space, token) = try Self.twoRelays(prefix: "cli-e2e")
        defer { first.stop(); second.stop() }
        let scratch = Scratch()
        let passphrase = scratch.path + "/passphrase"
        try "correct horse battery staple\n".write(toFile: passphrase, atomically: true, encoding: .utf8)
        let a = scratch.path + "/a.db", b = scratch.path + "/b.db", plain = scratch.path + "/plain.db"
        for path in [a, b, plain] { try CLI.ok(["init"], db: path) }
        let created = try CLI.json(["space", "create", "--passphrase-file", passphrase], db: a) as? [String: Any] ?? [:]
        let descriptor = try #require(created["descriptor"] as? String)
        try CLI.ok(["space", "join", "--descriptor", descriptor, "--passphrase-file", passphrase], db: b)
        let id = try CLI.ok(["new", "--title", "sealed title", "--body", "sealed body"], db: a)
        let env = ["CRDT_SYNC_TOKEN": token]
        let sent = try CLI.run(["sync", "--url", first.url, "--space", space], db: a, environment: env)
        #expect(sent.status == 0, "\(sent.stderr)")
        let pulled = try CLI.run(["sync", "--url", second.url, "--space", space], db: b, environment: env)
        #expect(pulled.status == 0, "\(pulled.stderr)")
        #expect(try CLI.ok(["show", id], db: b).contains("sealed body"))
        try CLI.ok(["edit", id, "--append", " and back"], db: b)
        #expect(try CLI.run(["sync", "--url", second.url, "--space", space], db: b, environment: env).status == 0)
        #expect(try CLI.run(["sync", "--url", first.url, "--space", space], db: a, environment: env).status == 0)
        #expect(try CLI.ok(["digest"], db: a) == CLI.ok(["digest"], db: b))
        // A replica outside the space uploads plaintext: refused by either process, with the reason.
        try CLI.ok(["new", "--title", "plain"], db: plain)
        let refused = try CLI.run(["sync", "--url", second.url, "--space", space], db: plain, environment: env)
        #expect(refused.status != 0 && refused.stderr.contains("end-to-end encrypted"), "\(refused.stderr)")
    }
}

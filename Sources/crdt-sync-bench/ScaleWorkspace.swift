import ArgumentParser
import Foundation
import NotesCRDT
import NotesStore
import NotesSync
import NotesSyncHTTP
import NotesTestSupport

/// The databases `scale` measures, built once per set of parameters in the work folder and reused
/// by later runs: a folder is complete when its manifest exists (written last), so a build that
/// was interrupted is started over, never half used.
struct ScaleWorkspace {
    /// What a built folder holds and how it was made.
    struct Manifest: Codable, Equatable {
        /// Bumped when what the builder makes changes, so that an older folder is not reused.
        static let currentFormat = 1

        var format: Int
        var notes: Int
        var operations: Int
        var seed: UInt64
        var changes: Int = 0
        var builtAt: String = ""
        var buildSeconds: Double = 0
        var databaseBytes: Int = 0
        /// The bundle files, relative to the folder (bootstrap only).
        var bundleFiles: [String] = []
        /// The changes in those files: fewer than `changes`, since the store joins one author's
        /// consecutive changes (bootstrap only).
        var bundleChanges: Int = 0

        func sameParameters(as other: Manifest) -> Bool {
            format == other.format && notes == other.notes && operations == other.operations && seed == other.seed
        }
    }

    /// The space and token of the relay the bootstrap fills (on loopback only).
    static let space = "scale"
    static let token = "scale-bench-token"

    let root: String
    /// This program's binary: the building runs in a child process (`scale-build`), so that the
    /// hundreds of megabytes it takes are given back before anything is measured.
    let bench: String
    let log: (String) -> Void

    /// The folder of the big notebook for these parameters.
    func notebookFolder(notes: Int, operations: Int, seed: UInt64) -> String {
        root + "/notebook-n\(notes)-o\(operations)-s\(seed)"
    }

    /// The folder of the bootstrap bundle and relay for these parameters.
    func bootstrapFolder(notes: Int, seed: UInt64) -> String {
        root + "/bootstrap-n\(notes)-s\(seed)"
    }

    static func readManifest(_ folder: String) -> Manifest? {
        guard let data = FileManager.default.contents(atPath: folder + "/manifest.json") else { return nil }
        return try? JSONDecoder().decode(Manifest.self, from: data)
    }

    static func writeManifest(_ manifest: Manifest, _ folder: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(manifest).write(to: URL(fileURLWithPath: folder + "/manifest.json"), options: .atomic)
    }

    /// The big notebook's database, built unless a complete one with the same parameters exists.
    ///
    /// Built the way a bulk import would: the seeded workload's changes applied in large batches
    /// with the periodic snapshot off, then one snapshot and the full-text index, so the database
    /// is as a notebook that has been in use reads (snapshot, empty log, index up to date).
    func notebook(notes: Int, operations: Int, seed: UInt64, rebuild: Bool) throws -> (path: String, manifest: Manifest) {
        let folder = notebookFolder(notes: notes, operations: operations, seed: seed)
        let wanted = Manifest(format: Manifest.currentFormat, notes: notes, operations: operations, seed: seed)
        if !rebuild, let found = ScaleWorkspace.readManifest(folder), found.sameParameters(as: wanted),
           FileManager.default.fileExists(atPath: folder + "/notebook.db") {
            log("reusing \(folder) (built \(found.builtAt) in \(String(format: "%.1f", found.buildSeconds)) s)")
            return (folder + "/notebook.db", found)
        }
        try? FileManager.default.removeItem(atPath: folder)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let start = ChildProcess.now()
        let path = folder + "/notebook.db"
        var manifest = wanted
        manifest.changes = try build(path, notes: notes, operations: operations, seed: seed, what: "notebook")
        manifest.buildSeconds = Double(ChildProcess.now() - start) / 1e9
        manifest.builtAt = ISO8601DateFormatter().string(from: Date())
        manifest.databaseBytes = ScaleWorkspace.fileSize(path)
        try ScaleWorkspace.writeManifest(manifest, folder)
        log(String(format: "built %@ in %.1f s (%d changes, %.1f MB)", path, manifest.buildSeconds, manifest.changes,
                   Double(manifest.databaseBytes) / 1e6))
        return (path, manifest)
    }

    /// Builds the replica at `path` in a child process (`crdt-sync-bench scale-build`).
    /// - Returns: the number of changes applied.
    func build(_ path: String, notes: Int, operations: Int, seed: UInt64, what: String) throws -> Int {
        let output = path + ".build.json"
        let result = try ChildProcess.run(bench, ["scale-build", "--path", path, "--notes", "\(notes)", "--operations", "\(operations)",
                                                  "--seed", "\(seed)", "--what", what],
                                          stdout: .file(output), stderr: .inherit)
        defer { try? FileManager.default.removeItem(atPath: output) }
        guard result.status == 0, let data = FileManager.default.contents(atPath: output),
              let built = try? JSONDecoder().decode(ScaleBuild.Output.self, from: data) else {
            throw ChildProcessError(description: "building \(path) failed (`crdt-sync-bench scale-build` exited with status \(result.status))")
        }
        return built.changes
    }

    /// Generates the seeded workload and applies it to a new replica at `path` in bulk.
    /// - Returns: the number of changes applied.
    static func buildInProcess(_ path: String, notes: Int, operations: Int, seed: UInt64, what: String,
                               log: (String) -> Void) throws -> Int {
        var start = ChildProcess.now()
        log("generating the \(what): \(notes) notes, \(operations) operations, seed \(seed)...")
        let changes = SyntheticWorkload.notebook(seed: seed, notes: notes, operations: operations).changes
        log(String(format: "  %d changes in %.1f s; applying them to %@", changes.count, Double(ChildProcess.now() - start) / 1e9, path))
        start = ChildProcess.now()
        let store = try NoteStore.open(path: path, options: StoreOptions(snapshotInterval: Int.max))
        var index = 0
        var reported = 0
        while index < changes.count {
            let end = min(index + 20_000, changes.count)
            try store.apply(Array(changes[index ..< end]))
            index = end
            if index * 10 / changes.count > reported {
                reported = index * 10 / changes.count
                log(String(format: "  applied %d of %d changes (%.1f s)", index, changes.count, Double(ChildProcess.now() - start) / 1e9))
            }
        }
        log("  writing the snapshot and the full-text index...")
        try store.compact()
        _ = try store.updateSearchIndex()
        try store.close()
        return changes.count
    }

    static func fileSize(_ path: String) -> Int {
        (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
    }
}

/// `crdt-sync-bench scale-build`: builds one of `scale`'s databases, or its bootstrap bundle and
/// relay, in its own process (run by `scale`).
struct ScaleBuild: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scale-build", abstract: "Build a notebook database for `scale` (run by it).", shouldDisplay: false)

    struct Output: Codable {
        var changes: Int
        /// The bundle files written (with --bundle).
        var files: [String] = []
    }

    @Option var path: String?
    @Option var notes: Int
    @Option var operations: Int
    @Option var seed: UInt64
    @Option var what = "notebook"
    @Option(help: "Write the workload's changes as bundle files (FOLDER/notebook-N.crdtb).") var bundle: String?
    @Option(help: "Push the workload's changes to this relay.") var pushURL: String?
    @Option var space = ScaleWorkspace.space
    @Option var token = ScaleWorkspace.token

    func progress(_ message: String) {
        FileHandle.standardError.write(Data("scale: \(message)\n".utf8))
    }

    func run() async throws {
        try await runReportingAsync {
            if let path {
                let changes = try ScaleWorkspace.buildInProcess(path, notes: notes, operations: operations, seed: seed, what: what, log: progress)
                try printJSON(Output(changes: changes))
                return
            }
            // The bootstrap: the changes as their author made them, one per edit. (A store joins
            // one author's consecutive changes into one, which may be more than a bundle holds.)
            let start = ChildProcess.now()
            progress("generating the \(what): \(notes) notes, \(operations) operations, seed \(seed)...")
            let (notebook, changes) = SyntheticWorkload.notebook(seed: seed, notes: notes, operations: operations)
            progress(String(format: "  %d changes in %.1f s", changes.count, Double(ChildProcess.now() - start) / 1e9))
            var output = Output(changes: changes.count)
            if let bundle {
                let pieces = try SyncBundle.pieces(sender: notebook.replicaID, senderVersion: notebook.versionVector, changes: changes)
                for (index, piece) in pieces.enumerated() {
                    let file = bundle + "/notebook-\(index + 1).crdtb"
                    try AtomicFile.write(piece.encoded(), toPath: file)
                    output.files.append(file)
                }
                progress("  wrote \(pieces.count) bundle file(s) with SyncBundle.pieces")
            }
            if let pushURL {
                let client = HTTPRelayClient(maxConnections: 2)
                let outcome: Result<SyncReport, any Error>
                do {
                    let transport = try client.transport(url: pushURL, space: space, token: token)
                    let author = PushingReplica(id: notebook.replicaID, version: notebook.versionVector, changes: changes)
                    outcome = .success(try await SyncEngine(retry: RetryPolicy(maxAttempts: 1)).sync(author, over: transport))
                } catch {
                    outcome = .failure(error)
                }
                try? await client.shutdown()
                let report = try outcome.get()
                progress("  pushed \(report.sentChanges) changes to the relay")
            }
            try printJSON(output)
        }
    }
}

/// The bootstrap's author as a sync replica: the changes it made, nothing else; it takes nothing in.
final class PushingReplica: SyncReplica, @unchecked Sendable {
    let replicaID: ReplicaID
    let version: VersionVector
    let all: [Change]

    init(id: ReplicaID, version: VersionVector, changes: [Change]) {
        replicaID = id
        self.version = version
        all = changes
    }

    func currentVersion() throws -> VersionVector { version }
    func changes(since other: VersionVector) throws -> [Change] { all.filter { $0.endSeq > other[$0.replica] } }
    func integrate(_ changes: [Change]) throws -> IntegrationReport { IntegrationReport(duplicates: changes.count) }
    func recordPeer(_ replica: ReplicaID, version: VersionVector) throws {}
}

import ArgumentParser
import Foundation
import NotesCRDT
import NotesStore
import NotesTestSupport

/// Measures the command line and the store at the size of a real notebook (issue 20): the wall
/// time of the real `crdt-sync` process for every everyday command, a few in-process figures, and
/// bringing up a new device from a large bundle or a relay. Figures go to Docs/Performance.md.
struct ScaleCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scale",
        abstract: "Time the crdt-sync commands, the store and a new device's bootstrap on a notebook of real size.",
        discussion: """
        Builds (once) a notebook of --notes notes and --operations operations, generated from \
        --seed, and keeps it in --workdir: a later run with the same parameters reuses it (--rebuild \
        builds it again, as after a change to the store's format). It is built through the store's \
        bulk path: the changes applied in batches of 20,000, then one snapshot and the full-text index.

        Groups (--only GROUP, repeatable; all three by default):

        cli: the wall time, from spawn to exit, of the release `crdt-sync` binary found beside this \
        one (the same .build/release folder; --crdt-sync PATH names another), run as a child \
        process on the notebook's database itself (no copy), for list, show, search, edit --append, \
        edit --title, pin, tag, trash (then restore, untimed), new, status, digest, log ID, list \
        --json, log and export. Each command runs once untimed first (a warm page cache), then \
        --runs times; the median is shown, with the largest peak RSS of the child (wait4). Every \
        run of a command that writes works on a different note, so that no run finds its work \
        already done. The commands' output goes to /dev/null.

        inprocess: through NoteStore's API in this process: open the store and read one note; the \
        first write after opening (it loads the CRDT state); durable keystrokes (--keystrokes, \
        each one committed; half typed on at one place, half at random places) in one note.

        bootstrap: a second notebook of --bundle-notes notes with about ten operations each is \
        generated once, its changes written as bundle files (SyncBundle.pieces) and pushed to a \
        relay store through `crdt-sync serve`, straight from the generated changes (quicker than \
        through a store). Then, \
        --bootstrap-runs times after one untimed run: `crdt-sync import` of that bundle into \
        a fresh replica, and a fresh replica pulling the same from `crdt-sync serve` (a separate \
        process on a loopback port) with `crdt-sync sync --url`. Shown: the wall time and peak \
        RSS of each client, and the relay's peak RSS over its whole life (all the pulls). Last, in \
        memory, in a process of its own: the bundle's changes applied to a new notebook, against \
        opening the snapshot they make (a compacted state), and both sizes.

        The edits stay in the cached notebook: a run adds about 1,100 changes (the commands' and \
        the keystrokes), so some later run's write pays for refreshing the snapshot (every 4,096). \
        A child's peak RSS is its own: the commands are spawned from a small launcher process, \
        since on Linux a child's ru_maxrss starts at its spawner's peak. Build both programs in \
        release first: \
        `swift build -c release --product crdt-sync-bench --product crdt-sync`.
        """
    )

    enum Group: String, ExpressibleByArgument, CaseIterable, Encodable { case cli, inprocess, bootstrap }

    @Option(help: "Notes in the notebook.") var notes = 10_000
    @Option(help: "Operations in the notebook (sequence numbers: a typed character is one).") var operations = 1_000_000
    @Option(help: "The seed the notebooks are generated from.") var seed: UInt64 = 42
    @Option(help: ArgumentHelp("Where the built databases are kept and reused (default: a folder in the system's temporary folder).",
                               valueName: "FOLDER")) var workdir: String?
    @Option(help: "Timed runs of each figure (the median is shown).") var runs = 5
    @Option(help: "Notes in the bootstrap bundle (about 10 operations each).") var bundleNotes = 80_000
    @Option(help: "Timed imports and relay pulls of the bundle.") var bootstrapRuns = 3
    @Option(help: "Durable keystrokes timed in process.") var keystrokes = 1000
    @Option(help: ArgumentHelp("Run only this group: cli, inprocess or bootstrap (repeatable).", valueName: "GROUP"))
    var only: [Group] = []
    @Option(name: .customLong("crdt-sync"), help: ArgumentHelp("The crdt-sync binary (default: the one beside this program).", valueName: "PATH"))
    var cliBinary: String?
    @Flag(help: "Build the databases again even when the work folder has them.") var rebuild = false
    @Flag(help: "Print one JSON object (progress still goes to stderr).") var json = false

    func validate() throws {
        for (name, value, least, most) in [("notes", notes, 1, 10_000_000), ("operations", operations, 1, 100_000_000),
                                           ("runs", runs, 1, 1000), ("bundle-notes", bundleNotes, 1, 10_000_000),
                                           ("bootstrap-runs", bootstrapRuns, 1, 100), ("keystrokes", keystrokes, 1, 10_000_000)] {
            guard (least ... most).contains(value) else { throw ValidationError("--\(name) must be between \(least) and \(most)") }
        }
    }

    var groups: [Group] { only.isEmpty ? Group.allCases : Group.allCases.filter(only.contains) }

    func run() throws {
        try runReporting {
            let root = workdir ?? (NSTemporaryDirectory() as NSString).appendingPathComponent("crdt-sync-bench-scale")
            let scratch = root + "/scratch-\(getpid())"
            try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: scratch) }
            // First, while this process is small: it spawns the commands (see ScaleLauncher).
            let launcher = try Launcher(bench: ScaleCLI.thisProgram())
            defer { launcher.finish() }
            let workspace = ScaleWorkspace(root: root, bench: ScaleCLI.thisProgram(), log: progress)
            let binary = cliBinary ?? ScaleCLI.besideThisProgram()
            let needsCLI = groups.contains(.cli) || groups.contains(.bootstrap)
            if needsCLI, !FileManager.default.isExecutableFile(atPath: binary) {
                throw ValidationError("""
                    there is no crdt-sync binary at \(binary): the cli and bootstrap groups run the real program. \
                    Build it beside this one (`swift build -c release --product crdt-sync-bench --product crdt-sync`), \
                    give --crdt-sync PATH, or run --only inprocess
                    """)
            }
            if ScaleCLI.benchIsDebugBuild {
                progress("warning: this is a debug build of crdt-sync-bench; the figures are not the release build's")
            }
            let cli = ScaleCLI(binary: binary, scratch: scratch, launcher: launcher)
            var report = ScaleReport(parameters: .init(notes: notes, operations: operations, seed: seed, runs: runs,
                                                       bundleNotes: bundleNotes, bootstrapRuns: bootstrapRuns, keystrokes: keystrokes,
                                                       groups: groups.map(\.rawValue), workdir: root),
                                     conditions: .current(binary: binary))
            if groups.contains(.cli) || groups.contains(.inprocess) {
                let (path, manifest) = try workspace.notebook(notes: notes, operations: operations, seed: seed, rebuild: rebuild)
                report.parameters.changes = manifest.changes
                report.parameters.databaseMegabytes = Double(ScaleWorkspace.fileSize(path)) / 1e6
                if groups.contains(.cli) {
                    var picker = try NotePicker(path: path, seed: seed)
                    report.figures += try measureCLI(cli, path, &picker)
                }
                if groups.contains(.inprocess) {
                    report.figures += try measureInProcess(workspace.bench, path, scratch: scratch)
                }
            }
            if groups.contains(.bootstrap) {
                report.figures += try measureBootstrap(cli, workspace, &report)
            }
            report.conditions.spawnerPeakRSSMegabytes = launcher.floorMegabytes
            if json {
                try printJSON(report)
            } else {
                print(report.table())
            }
        }
    }

    func progress(_ message: String) {
        FileHandle.standardError.write(Data("scale: \(message)\n".utf8))
    }

    // MARK: The command line

    /// One command of the cli group: its arguments for each run (0 is the untimed one), and what
    /// to undo after each run, untimed.
    struct CLICase {
        var name: String
        var target: Double?
        var arguments: (Int) -> [String]
        var after: ((Int) throws -> Void)? = nil
    }

    func measureCLI(_ cli: ScaleCLI, _ db: String, _ picker: inout NotePicker) throws -> [Figure] {
        let total = runs + 1
        let typical = picker.typical
        let appendNotes = picker.take(total)
        let titleNotes = picker.take(total)
        let pinNotes = picker.take(total) { !$0.pinned }
        let tagNotes = picker.take(total) { !$0.tags.contains(NotePicker.tag) }
        let trashNotes = picker.take(total)
        let exportFolder = cli.scratch + "/export"
        let base = ["--db", db]
        let cases: [CLICase] = [
            CLICase(name: "list", target: 50) { _ in ["list"] + base },
            CLICase(name: "show ID", target: 30) { _ in ["show", typical.id.description] + base },
            CLICase(name: "search WORD", target: 50) { _ in ["search", "meeting"] + base },
            CLICase(name: "edit ID --append TEXT", target: 30) { run in ["edit", appendNotes[run].id.description, "--append", " scale bench \(run)"] + base },
            CLICase(name: "edit ID --title T", target: 30) { run in ["edit", titleNotes[run].id.description, "--title", "scale bench title \(run)"] + base },
            CLICase(name: "pin ID", target: 30) { run in ["pin", pinNotes[run].id.description] + base },
            CLICase(name: "tag ID NAME", target: 30) { run in ["tag", tagNotes[run].id.description, NotePicker.tag] + base },
            CLICase(name: "trash ID (restore untimed)", target: 30, arguments: { run in ["trash", trashNotes[run].id.description] + base },
                    after: { run in try cli.run(["restore", trashNotes[run].id.description] + base) }),
            CLICase(name: "new --title T", target: 30) { run in ["new", "--title", "scale bench note \(run)"] + base },
            CLICase(name: "status", target: 50) { _ in ["status"] + base },
            CLICase(name: "digest", target: 50) { _ in ["digest"] + base },
            CLICase(name: "log ID", target: 30) { _ in ["log", typical.id.description] + base },
            CLICase(name: "list --json", target: 300) { _ in ["list", "--json"] + base },
            CLICase(name: "log (all)", target: nil) { _ in ["log"] + base },
            CLICase(name: "export (everything)", target: nil, arguments: { _ in ["export", "--out", exportFolder + "/all.crdtb"] + base },
                    after: { _ in
                        try? FileManager.default.removeItem(atPath: exportFolder)
                        try FileManager.default.createDirectory(atPath: exportFolder, withIntermediateDirectories: true)
                    }),
        ]
        try FileManager.default.createDirectory(atPath: exportFolder, withIntermediateDirectories: true)
        progress("cli: \(cli.binary) on \(db), \(runs) timed runs after one untimed")
        var figures: [Figure] = []
        for item in cases {
            var times: [Double] = []
            var peak = 0
            for run in 0 ..< total {
                let result = try cli.run(item.arguments(run))
                if run > 0 {
                    times.append(result.milliseconds)
                    peak = max(peak, result.peakRSSBytes)
                }
                try item.after?(run)
            }
            let figure = Figure(group: "cli", name: item.name, command: "crdt-sync " + item.arguments(1).joined(separator: " "),
                                unit: "ms", samples: times, target: item.target, peakRSSMegabytes: Double(peak) / 1_048_576)
            progress(String(format: "  %@: median %.1f ms, peak RSS %.1f MB", item.name, figure.median, figure.peakRSSMegabytes ?? 0))
            figures.append(figure)
        }
        return figures
    }

    // MARK: In process

    /// The inprocess group, run in a child process (`scale-inprocess`): a fresh process opens
    /// the store as an app that starts would, and the CRDT state it loads is given back after.
    func measureInProcess(_ bench: String, _ db: String, scratch: String) throws -> [Figure] {
        let output = scratch + "/inprocess.json"
        let result = try ChildProcess.run(bench, ["scale-inprocess", "--db", db, "--runs", "\(runs)", "--keystrokes", "\(keystrokes)",
                                                  "--seed", "\(seed)"],
                                          stdout: .file(output), stderr: .inherit)
        guard result.status == 0, let data = FileManager.default.contents(atPath: output) else {
            throw ChildProcessError(description: "the inprocess group failed (`crdt-sync-bench scale-inprocess` exited with status \(result.status))")
        }
        return try JSONDecoder().decode([Figure].self, from: data)
    }

    // MARK: Bootstrap

    func measureBootstrap(_ cli: ScaleCLI, _ workspace: ScaleWorkspace, _ report: inout ScaleReport) throws -> [Figure] {
        let folder = workspace.bootstrapFolder(notes: bundleNotes, seed: seed)
        let manifest = try bootstrapFolder(cli, workspace, folder)
        report.parameters.bundleChanges = manifest.bundleChanges
        report.parameters.bundleMegabytes = Double(manifest.bundleFiles.reduce(0) { $0 + ScaleWorkspace.fileSize(folder + "/" + $1) }) / 1e6
        let files = manifest.bundleFiles.map { folder + "/" + $0 }
        let fresh = cli.scratch + "/fresh.db"
        func freshReplica() throws {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: fresh + suffix) }
            try cli.run(["init", "--db", fresh])
        }
        func expectApplied(_ what: String) throws {
            let applied = try cli.jsonOutput()["applied"] as? Int ?? -1
            guard applied == manifest.bundleChanges else {
                throw ChildProcessError(description: "\(what) applied \(applied) changes, not the \(manifest.bundleChanges) of the bundle")
            }
        }
        var figures: [Figure] = []

        progress("bootstrap: importing \(files.count) bundle file(s), \(manifest.bundleChanges) changes of \(bundleNotes) notes, \(bootstrapRuns) timed runs after one untimed")
        var times: [Double] = []
        var peak = 0
        for run in 0 ... bootstrapRuns {
            try freshReplica()
            let result = try cli.run(["import", "--db", fresh, "--json"] + files, keepOutput: true)
            try expectApplied("crdt-sync import")
            if run > 0 {
                times.append(result.milliseconds)
                peak = max(peak, result.peakRSSBytes)
            }
            progress(String(format: "  import: %.0f ms, peak RSS %.1f MB", result.milliseconds, result.peakRSSMegabytes))
        }
        figures.append(Figure(group: "bootstrap", name: "import the bundle", command: "crdt-sync import --db NEW FILE...",
                              unit: "ms", samples: times, target: 2000))
        figures.append(Figure(group: "bootstrap", name: "import: peak RSS", command: "crdt-sync import",
                              unit: "MB", samples: [Double(peak) / 1_048_576], target: 200))

        progress("bootstrap: a fresh replica pulling from `crdt-sync serve`, \(bootstrapRuns) timed runs after one untimed")
        let relay = try cli.startRelay(store: folder + "/relay.sqlite", space: ScaleWorkspace.space, token: ScaleWorkspace.token)
        times = []
        peak = 0
        let pulled = Result<Void, any Error> {
            for run in 0 ... bootstrapRuns {
                try freshReplica()
                let result = try cli.run(["sync", "--db", fresh, "--url", relay.url, "--space", ScaleWorkspace.space, "--json"],
                                         keepOutput: true, environment: ["CRDT_SYNC_TOKEN": ScaleWorkspace.token])
                try expectApplied("crdt-sync sync")
                if run > 0 {
                    times.append(result.milliseconds)
                    peak = max(peak, result.peakRSSBytes)
                }
                progress(String(format: "  pull: %.0f ms, peak RSS %.1f MB", result.milliseconds, result.peakRSSMegabytes))
            }
        }
        let relayRun = try cli.stopRelay(relay)
        try pulled.get()
        figures.append(Figure(group: "bootstrap", name: "pull from a relay", command: "crdt-sync sync --db NEW --url URL --space S",
                              unit: "ms", samples: times, target: 2000))
        figures.append(Figure(group: "bootstrap", name: "pull: client peak RSS", command: "crdt-sync sync",
                              unit: "MB", samples: [Double(peak) / 1_048_576], target: 200))
        figures.append(Figure(group: "bootstrap", name: "pull: relay peak RSS", command: "crdt-sync serve (its whole life)",
                              unit: "MB", samples: [relayRun.peakRSSMegabytes], target: 150))

        progress("bootstrap: a compacted state against the history, in memory, \(bootstrapRuns) timed runs after one untimed")
        let output = cli.scratch + "/state.json"
        let state = try ChildProcess.run(workspace.bench, ["scale-state", "--runs", "\(bootstrapRuns)"] + files,
                                         stdout: .file(output), stderr: .inherit)
        guard state.status == 0, let data = FileManager.default.contents(atPath: output) else {
            throw ChildProcessError(description: "`crdt-sync-bench scale-state` exited with status \(state.status)")
        }
        return figures + (try JSONDecoder().decode([Figure].self, from: data))
    }

    /// The bootstrap's source replica, its exported bundle and a relay store that holds the same,
    /// built unless a complete folder with the same parameters exists.
    func bootstrapFolder(_ cli: ScaleCLI, _ workspace: ScaleWorkspace, _ folder: String) throws -> ScaleWorkspace.Manifest {
        let bundleOperations = bundleNotes * 10
        let wanted = ScaleWorkspace.Manifest(format: ScaleWorkspace.Manifest.currentFormat, notes: bundleNotes,
                                             operations: bundleOperations, seed: seed)
        if !rebuild, let found = ScaleWorkspace.readManifest(folder), found.sameParameters(as: wanted),
           found.bundleFiles.allSatisfy({ FileManager.default.fileExists(atPath: folder + "/" + $0) }) {
            progress("reusing \(folder) (built \(found.builtAt))")
            return found
        }
        try? FileManager.default.removeItem(atPath: folder)
        try FileManager.default.createDirectory(atPath: folder + "/bundle", withIntermediateDirectories: true)
        let start = ChildProcess.now()
        var manifest = wanted
        // The bundle is written with SyncBundle.pieces and the relay filled by a sync from the
        // workload's own changes, in a child process: `crdt-sync export` and `sync` of a replica
        // that imported them fail, since the store joins one author's consecutive changes into
        // one change larger than a bundle may hold (issue 20's first full-size run).
        let relay = try cli.startRelay(store: folder + "/relay.sqlite", space: ScaleWorkspace.space, token: ScaleWorkspace.token)
        let output = cli.scratch + "/bootstrap-build.json"
        // Another seed than the big notebook's, so that the two never share a note or a replica.
        let built = Result<ChildRun, any Error> {
            try ChildProcess.run(workspace.bench, ["scale-build", "--notes", "\(bundleNotes)", "--operations", "\(bundleOperations)",
                                                   "--seed", "\(seed &+ 1)", "--what", "bundle's notebook", "--bundle", folder + "/bundle",
                                                   "--push-url", relay.url],
                                 stdout: .file(output), stderr: .inherit)
        }
        _ = try cli.stopRelay(relay)
        guard try built.get().status == 0, let data = FileManager.default.contents(atPath: output),
              let made = try? JSONDecoder().decode(ScaleBuild.Output.self, from: data) else {
            throw ChildProcessError(description: "building the bootstrap bundle and relay failed (see above)")
        }
        manifest.changes = made.changes
        manifest.bundleChanges = made.changes
        manifest.bundleFiles = made.files.map { String($0.dropFirst(folder.count + 1)) }
        manifest.buildSeconds = Double(ChildProcess.now() - start) / 1e9
        manifest.builtAt = ISO8601DateFormatter().string(from: Date())
        manifest.databaseBytes = ScaleWorkspace.fileSize(folder + "/relay.sqlite")
        try ScaleWorkspace.writeManifest(manifest, folder)
        progress(String(format: "built %@ in %.1f s", folder, manifest.buildSeconds))
        return manifest
    }
}

/// Notes of the big notebook for the commands to work on: each taken once, in a seeded order.
struct NotePicker {
    /// The tag `tag ID NAME` puts notes in.
    static let tag = "scale-bench"

    /// A note of median body length: what `show`, `log ID` and the keystrokes work on.
    let typical: StoredNote
    private var order: [StoredNote]
    private var next = 0

    init(path: String, seed: UInt64) throws {
        let store = try NoteStore.open(path: path, create: false)
        let active = try store.list(.active)
        try store.close()
        guard !active.isEmpty else { throw StoreError(.notFound, "the notebook at \(path) has no active note") }
        let byLength = active.sorted { ($0.bodyLength, $0.id.description) < ($1.bodyLength, $1.id.description) }
        let median = byLength[byLength.count / 2]
        typical = median
        var shuffled = active.filter { $0.id != median.id }.sorted { $0.id.description < $1.id.description }
        var random = SyntheticWorkload.Generator(seed: seed ^ 0x5049_434B)
        shuffled.shuffle(using: &random)
        order = shuffled
    }

    /// `count` notes not taken before that satisfy `condition`.
    mutating func take(_ count: Int, where condition: (StoredNote) -> Bool = { _ in true }) -> [StoredNote] {
        var taken: [StoredNote] = []
        while taken.count < count {
            precondition(next < order.count, "the notebook has too few notes for this many runs")
            if condition(order[next]) { taken.append(order[next]) }
            next += 1
        }
        return taken
    }
}

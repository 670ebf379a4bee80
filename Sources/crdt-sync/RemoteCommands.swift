import ArgumentParser
import Foundation
import NotesStore

struct RemoteCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remote",
        abstract: "Remember the folders and relays this replica syncs with, by name.",
        discussion: """
        Once a remote is added, `crdt-sync sync` with no flags syncs with every remote, and \
        `crdt-sync sync NAME` with one. A relay's token is read from --token-file, else \
        $CRDT_SYNC_TOKEN, else asked for on the terminal (never from the command line, so it stays \
        out of the shell history), and kept in the replica database, which is then made readable by \
        its owner only.
        """,
        subcommands: [RemoteAdd.self, RemoteList.self, RemoteRemove.self, RemoteSetToken.self],
        defaultSubcommand: RemoteList.self
    )
}

struct RemoteAdd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Add a remote: a shared folder (--dir) or a space on a relay (--url and --space).",
        discussion: """
        crdt-sync remote add usb --dir /media/usb/notes
        crdt-sync remote add home --url https://relay.example.net \\
          --space notes --token-file ~/relay-token
        """
    )

    @OptionGroup var replica: ReplicaOptions
    @Argument(help: "The remote's name (letters, digits, '.', '_', '-').") var name: String
    @Option(help: ArgumentHelp("A shared folder (it must exist; kept as an absolute path).", valueName: "FOLDER")) var dir: String?
    @Option(help: ArgumentHelp("A relay's base URL, e.g. https://relay.example.net.", valueName: "URL")) var url: String?
    @Option(help: ArgumentHelp("The space (notebook) on the relay.", valueName: "SPACE")) var space: String?
    @Option(name: .customLong("token-file"), help: ArgumentHelp("A file whose first line is the relay's token.", valueName: "FILE"))
    var tokenFile: String?
    @Flag(help: "Print one JSON object.") var json = false

    func validate() throws {
        switch (dir, url) {
        case (nil, nil): throw ValidationError("give --dir FOLDER or --url URL --space SPACE")
        case (.some, .some): throw ValidationError("give --dir or --url, not both")
        case (.some, nil):
            if space != nil || tokenFile != nil { throw ValidationError("--space and --token-file go with --url") }
        case (nil, .some):
            if space == nil { throw ValidationError("--url needs --space SPACE") }
        }
    }

    func run() throws {
        try runReporting {
            let store = try replica.open()
            let target: Remote.Target
            var token: String? = nil
            if let dir {
                let absolute = URL(fileURLWithPath: dir).standardizedFileURL.path
                var isFolder: ObjCBool = false
                guard FileManager.default.fileExists(atPath: absolute, isDirectory: &isFolder), isFolder.boolValue else {
                    throw NoteCommandError("\(dir) is not a folder (create it first; every machine that syncs through it must reach it)")
                }
                target = .folder(path: absolute)
            } else if let url, let space {
                target = .relay(url: url, space: space)
                token = try RelayToken.obtain(file: tokenFile, purpose: "the token of the relay \(url) space \(space)")
            } else {
                throw ValidationError("give --dir FOLDER or --url URL --space SPACE")
            }
            try store.addRemote(name, target: target, token: token)
            let remote = try store.remote(named: name)
            if json {
                try printJSON(RemoteJSON(remote))
            } else {
                print("added remote \(name): \(RemoteJSON(remote).location); `crdt-sync sync \(name)` syncs with it, `crdt-sync sync` with every remote")
            }
        }
    }
}

struct RemoteList: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the remotes, with how their last sync went.")

    @OptionGroup var replica: ReplicaOptions
    @Flag(help: "Print JSON (an array; tokens are never printed).") var json = false

    func run() throws {
        try runReporting {
            let remotes = try replica.open().remotes()
            if json {
                try printJSON(remotes.map(RemoteJSON.init))
                return
            }
            if remotes.isEmpty {
                print("no remotes (add one: crdt-sync remote add NAME --dir FOLDER | --url URL --space SPACE)")
                return
            }
            for remote in remotes {
                let shown = RemoteJSON(remote)
                var line = "\(remote.name)\t\(shown.kind)\t\(shown.location)"
                if let at = remote.lastSyncAt {
                    line += "\tlast sync \(shownDate(at))" + (remote.lastFailed ? " FAILED: " : ": ") + (remote.lastResult ?? "")
                } else {
                    line += "\tnever synced"
                }
                print(line)
            }
        }
    }
}

struct RemoteRemove: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "remove", abstract: "Forget a remote and its token.")

    @OptionGroup var replica: ReplicaOptions
    @Argument(help: "The remote's name.") var name: String

    func run() throws {
        try runReporting { try replica.open().removeRemote(name) }
    }
}

struct RemoteSetToken: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set-token",
        abstract: "Replace a relay remote's token (from --token-file, $CRDT_SYNC_TOKEN, or the terminal).")

    @OptionGroup var replica: ReplicaOptions
    @Argument(help: "The remote's name.") var name: String
    @Option(name: .customLong("token-file"), help: ArgumentHelp("A file whose first line is the token.", valueName: "FILE"))
    var tokenFile: String?

    func run() throws {
        try runReporting {
            let store = try replica.open()
            _ = try store.remote(named: name)
            try store.setToken(try RelayToken.obtain(file: tokenFile, purpose: "the new token of the remote \(name)"), forRemote: name)
        }
    }
}

/// A remote as `remote list --json` prints it.
struct RemoteJSON: Encodable {
    var name: String
    var kind: String
    var location: String
    var folder: String?
    var url: String?
    var space: String?
    var hasToken: Bool
    var addedAt: String
    var lastSyncAt: String?
    var lastResult: String?
    var lastFailed: Bool

    init(_ remote: Remote) {
        name = remote.name
        switch remote.target {
        case .folder(let path):
            kind = "folder"; location = path; folder = path
        case .relay(let url, let space):
            kind = "relay"; location = "\(url) space \(space)"; self.url = url; self.space = space
        }
        hasToken = remote.hasToken
        addedAt = isoDate(remote.addedAt)
        lastSyncAt = remote.lastSyncAt.map(isoDate)
        lastResult = remote.lastResult
        lastFailed = remote.lastFailed
    }
}

/// Reads a relay token without it passing through the command line.
enum RelayToken {
    /// The first line of `file`, else $CRDT_SYNC_TOKEN, else a line typed on the terminal
    /// without echo (`SecretSource`).
    static func obtain(file: String?, purpose: String) throws -> String {
        if let file {
            guard let data = FileManager.default.contents(atPath: file) else { throw NoteCommandError("cannot read the token file \(file)") }
            guard data.count <= 4096, let text = String(data: data, encoding: .utf8) else {
                throw NoteCommandError("the token file \(file) is not a line of text")
            }
            let line = text.split(whereSeparator: \.isNewline).first.map(String.init)?.trimmingCharacters(in: .whitespaces) ?? ""
            guard !line.isEmpty else { throw NoteCommandError("the token file \(file) is empty") }
            return line
        }
        // The environment, else the terminal: as the space commands read their secrets.
        return try SecretSource(file: nil, variable: "CRDT_SYNC_TOKEN", prompt: "\(purpose): ", what: "token").read()
    }
}

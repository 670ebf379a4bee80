import Foundation
import GRDB
import NotesSync

/// A place this replica syncs with, remembered by name, so that `sync` needs no flags.
public struct Remote: Hashable, Sendable {
    /// Where the remote is.
    public enum Target: Hashable, Sendable {
        /// A shared folder (an absolute path).
        case folder(path: String)
        /// A space on a relay.
        case relay(url: String, space: String)
    }

    /// The remote's name: letters, digits, `.`, `_` and `-`, at most 64 characters.
    public var name: String
    /// Where it is.
    public var target: Target
    /// Whether a token is stored for it (the token itself is read with `NoteStore.token(forRemote:)`).
    public var hasToken: Bool
    /// When it was added (wall-clock milliseconds).
    public var addedAt: UInt64
    /// When the last sync with it ended, if one has.
    public var lastSyncAt: UInt64?
    /// What the last sync did, in a line ("sent 3 changes; received 5: 5 applied"), or its error.
    public var lastResult: String?
    /// Whether the last sync with it failed.
    public var lastFailed: Bool

    /// Whether `name` may name a remote: 1 to 64 letters, digits, `.`, `_` or `-`, not starting
    /// with `-` or `.` (it is used as a command-line argument).
    public static func isValidName(_ name: String) -> Bool {
        guard (1 ... 64).contains(name.unicodeScalars.count), let first = name.unicodeScalars.first,
              first != "-", first != "." else { return false }
        return name.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII && (CharacterSet.alphanumerics.contains(scalar) || scalar == "." || scalar == "_" || scalar == "-")
        }
    }
}

extension NoteStore {
    /// Remembers a remote under `name`.
    ///
    /// A relay's token is kept in the database, readable by anyone who can read the file: the
    /// store makes the database file (and its WAL) readable by its owner only when it keeps a
    /// token (Docs/CLI.md, "Remotes").
    ///
    /// - Throws: `StoreError` `.invalidArgument` for a malformed name, a relative folder path, a
    ///   URL that is not http(s), an empty space, or a name already taken.
    public func addRemote(_ name: String, target: Remote.Target, token: String?) throws {
        guard Remote.isValidName(name) else {
            throw StoreError(.invalidArgument, "'\(name)' cannot name a remote: use 1 to 64 letters, digits, '.', '_' or '-', not starting with '-' or '.'")
        }
        let (kind, location, space): (String, String, String?)
        switch target {
        case .folder(let path):
            guard path.hasPrefix("/") else { throw StoreError(.invalidArgument, "a remote folder's path must be absolute: '\(path)'") }
            (kind, location, space) = ("folder", path, nil)
            if token != nil { throw StoreError(.invalidArgument, "a folder remote takes no token") }
        case .relay(let url, let spaceName):
            guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(), scheme == "http" || scheme == "https",
                  let host = parsed.host, !host.isEmpty else {
                throw StoreError(.invalidArgument, "'\(url)' is not an http:// or https:// URL")
            }
            if let problem = RelayProtocol.portProblem(url) { throw StoreError(.invalidArgument, problem) }
            guard !spaceName.isEmpty else { throw StoreError(.invalidArgument, "a relay remote needs a space") }
            guard RelayProtocol.isValidSpace(spaceName) else {
                throw StoreError(.invalidArgument, "\"\(spaceName)\" is not a valid space name (1 to 128 of A-Z a-z 0-9 . _ -, not starting with a dot)")
            }
            guard let token, !token.isEmpty else { throw StoreError(.invalidArgument, "a relay remote needs a token") }
            guard !token.contains(where: \.isNewline) else { throw StoreError(.invalidArgument, "a token is one line") }
            (kind, location, space) = ("relay", url, spaceName)
        }
        do {
            try queue.write { db in
                if try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM remotes WHERE name = ?)", arguments: [name]) == true {
                    throw StoreError(.invalidArgument, "a remote named '\(name)' exists already (`crdt-sync remote remove \(name)` first)")
                }
                try db.execute(sql: """
                    INSERT INTO remotes (name, kind, location, space, token, added_at) VALUES (?, ?, ?, ?, ?, ?)
                    """, arguments: [name, kind, location, space, token, Int64(options.wallClock.milliseconds())])
            }
        } catch {
            throw StoreError.wrap(error, "cannot add the remote '\(name)'")
        }
        if token != nil { restrictFileToOwner() }
    }

    /// Replaces the token of a relay remote (a token rotated on the relay).
    public func setToken(_ token: String, forRemote name: String) throws {
        guard !token.isEmpty, !token.contains(where: \.isNewline) else { throw StoreError(.invalidArgument, "a token is one non-empty line") }
        let remote = try self.remote(named: name)
        guard case .relay = remote.target else { throw StoreError(.invalidArgument, "'\(name)' is a folder; only a relay remote has a token") }
        do {
            try queue.write { db in try db.execute(sql: "UPDATE remotes SET token = ? WHERE name = ?", arguments: [token, name]) }
        } catch {
            throw StoreError.wrap(error, "cannot set the token of the remote '\(name)'")
        }
        restrictFileToOwner()
    }

    /// Forgets a remote (and its token).
    ///
    /// - Throws: `StoreError` `.notFound` when no remote has that name.
    public func removeRemote(_ name: String) throws {
        let removed: Int
        do {
            removed = try queue.write { db in
                try db.execute(sql: "DELETE FROM remotes WHERE name = ?", arguments: [name])
                return db.changesCount
            }
        } catch {
            throw StoreError.wrap(error, "cannot remove the remote '\(name)'")
        }
        if removed == 0 { throw try unknownRemote(name) }
    }

    /// The remembered remotes, by name.
    public func remotes() throws -> [Remote] {
        do {
            return try queue.read { db in
                try Row.fetchAll(db, sql: """
                    SELECT name, kind, location, space, token IS NOT NULL AS has_token, added_at, last_sync_at, last_result, last_failed
                    FROM remotes ORDER BY name
                    """).map(Self.remote(from:))
            }
        } catch {
            throw StoreError.wrap(error, "cannot read the remotes")
        }
    }

    /// The remote named `name`.
    ///
    /// - Throws: `StoreError` `.notFound`, naming the remotes there are.
    public func remote(named name: String) throws -> Remote {
        guard let remote = try remotes().first(where: { $0.name == name }) else { throw try unknownRemote(name) }
        return remote
    }

    /// The token kept for a relay remote, if any.
    public func token(forRemote name: String) throws -> String? {
        _ = try remote(named: name)
        do {
            return try queue.read { db in try String.fetchOne(db, sql: "SELECT token FROM remotes WHERE name = ?", arguments: [name]) }
        } catch {
            throw StoreError.wrap(error, "cannot read the token of the remote '\(name)'")
        }
    }

    /// Records how a sync with a remote ended, shown by `remotes()`.
    public func recordRemoteSync(_ name: String, result: String, failed: Bool) throws {
        do {
            try queue.write { db in
                try db.execute(sql: "UPDATE remotes SET last_sync_at = ?, last_result = ?, last_failed = ? WHERE name = ?",
                               arguments: [Int64(options.wallClock.milliseconds()), result, failed, name])
            }
        } catch {
            throw StoreError.wrap(error, "cannot record the sync with the remote '\(name)'")
        }
    }

    private func unknownRemote(_ name: String) throws -> StoreError {
        let names = try remotes().map(\.name)
        return StoreError(.notFound, "no remote is named '\(name)'"
                          + (names.isEmpty ? " (none yet: `crdt-sync remote add NAME --dir PATH | --url URL --space SPACE`)"
                                           : " (remotes: \(names.joined(separator: ", ")))"))
    }

    private static func remote(from row: Row) throws -> Remote {
        let kind = try row.stored("kind", as: String.self)
        let location = try row.stored("location", as: String.self)
        let target: Remote.Target
        switch kind {
        case "folder": target = .folder(path: location)
        case "relay":
            guard let space = try row.stored("space", as: String?.self) else { throw StoreError(.corrupt, "the relay remote '\(try row.stored("name", as: String.self))' has no space") }
            target = .relay(url: location, space: space)
        default: throw StoreError(.corrupt, "the remote '\(try row.stored("name", as: String.self))' is of an unknown kind '\(kind)'")
        }
        let added = try row.stored("added_at", as: Int64.self)
        let last = try row.stored("last_sync_at", as: Int64?.self)
        return Remote(name: try row.stored("name"), target: target, hasToken: try row.stored("has_token"), addedAt: UInt64(max(0, added)),
                      lastSyncAt: last.map { UInt64(max(0, $0)) }, lastResult: try row.stored("last_result"), lastFailed: try row.stored("last_failed", as: Bool?.self) ?? false)
    }

    /// Makes the database file and its WAL and shared-memory files readable and writable by
    /// their owner only (they hold a token now).
    private func restrictFileToOwner() {
        guard let path else { return }
        for file in [path, path + "-wal", path + "-shm"] { _ = chmod(file, 0o600) }
    }
}

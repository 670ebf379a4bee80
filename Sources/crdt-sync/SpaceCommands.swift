import ArgumentParser
import Foundation
import NotesCRDT
import NotesStore
import NotesSync

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

struct SpaceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "space",
        abstract: "End-to-end encryption: put this replica in an encrypted space, or show the one it is in.",
        discussion: """
        In an encrypted space every bundle this replica writes (sync folder, relay, export) is sealed \
        under the space key and signed with this replica's own key; it reads only sealed bundles \
        whose signatures verify. Relays and folder hosts store what they cannot read. See \
        Docs/Security.md.
        """,
        subcommands: [SpaceCreate.self, SpaceJoin.self, SpaceShow.self]
    )
}

/// Where a secret comes from: a file, an environment variable, else a prompt on the terminal;
/// never an argument (the process list and shell history would hold it).
struct SecretSource {
    var file: String?
    var variable: String
    var prompt: String
    var what: String

    func read() throws -> String {
        if let file {
            guard let data = FileManager.default.contents(atPath: file) else { throw NoteCommandError("\(file): cannot read the \(what) file") }
            var text = String(decoding: data, as: UTF8.self)
            while let last = text.last, last == "\n" || last == "\r" { text.removeLast() }
            guard !text.isEmpty else { throw NoteCommandError("\(file): the \(what) file is empty") }
            return text
        }
        if let value = ProcessInfo.processInfo.environment[variable], !value.isEmpty { return value }
        guard isatty(0) != 0, let typed = getpass(prompt) else {
            throw NoteCommandError("no \(what) given: use --\(what.replacingOccurrences(of: " ", with: "-"))-file FILE or $\(variable) (or run on a terminal to be asked)")
        }
        return String(cString: typed)
    }
}

/// Runs a space command: input problems (a wrong passphrase, a malformed descriptor or recovery
/// code, a missing secret) exit with 2, and leave the replica as it was.
private func runSpaceCommand(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let error as SyncError {
        printError(error.message)
        throw ExitCode(2)
    } catch let error as NoteCommandError {
        printError(error.message)
        throw ExitCode(2)
    } catch let error as StoreError where error.code == .invalidArgument {
        printError(error.message)
        throw ExitCode(2)
    } catch let error as StoreError {
        try runReporting { throw error }
    }
}

extension SpaceCommand {
    struct SpaceCreate: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "create",
            abstract: "Make a new encrypted space and put this replica in it.",
            discussion: """
            From a passphrase (default): the key is made with scrypt (N = 2^15, r = 8, p = 1) and a \
            random salt; the command prints a descriptor (the parameters, the salt and the key's id: \
            not secret) that other devices join with, with the same passphrase. The passphrase comes \
            from --passphrase-file FILE, else $CRDT_SYNC_PASSPHRASE, else a prompt.

            With --recovery-code: a random key, printed once as a recovery code (55 letters and \
            digits). Keep it secret; other devices join with it.
            """
        )

        @OptionGroup var replica: ReplicaOptions

        @Option(name: .long, help: ArgumentHelp("A file whose first line is the passphrase.", valueName: "FILE"))
        var passphraseFile: String?

        @Flag(name: .long, help: "Make a random key and print it as a recovery code, instead of using a passphrase.")
        var recoveryCode = false

        @Flag(help: "Print one JSON object.")
        var json = false

        func validate() throws {
            if recoveryCode, passphraseFile != nil { throw ValidationError("--recovery-code makes a key without a passphrase; drop --passphrase-file") }
        }

        func run() throws {
            try runSpaceCommand {
                let store = try replica.open()
                if let existing = try store.space() {
                    throw NoteCommandError("this replica is already in an encrypted space (key id \(existing.keyID)); nothing was changed")
                }
                let key: SpaceKey
                let origin: String
                if recoveryCode {
                    key = SpaceKey.random()
                    origin = "recovery code"
                } else {
                    let passphrase = try SecretSource(file: passphraseFile, variable: "CRDT_SYNC_PASSPHRASE", prompt: "passphrase for the new space: ",
                                                      what: "passphrase").read()
                    let made = try SpaceKey.create(passphrase: passphrase)
                    key = made.key
                    origin = made.descriptor.description
                }
                try store.enterSpace(key: key, origin: origin)
                if json {
                    struct Out: Encodable { var keyID: String; var descriptor: String?; var recoveryCode: String? }
                    try printJSON(Out(keyID: key.keyIDHex, descriptor: recoveryCode ? nil : origin, recoveryCode: recoveryCode ? key.recoveryCode : nil))
                } else if recoveryCode {
                    print("created encrypted space \(key.keyIDHex)")
                    print("recovery code (secret: every device joins with it): \(key.recoveryCode)")
                } else {
                    print("created encrypted space \(key.keyIDHex)")
                    print("descriptor (not secret; join other devices with it and the passphrase): \(origin)")
                }
            }
        }
    }

    struct SpaceJoin: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "join",
            abstract: "Put this replica in an existing encrypted space.",
            discussion: """
            With --descriptor D (printed by `space create` or `space show` on a member device) and \
            the space's passphrase (--passphrase-file FILE, else $CRDT_SYNC_PASSPHRASE, else a \
            prompt): a wrong passphrase is refused here, with nothing changed. Or with the recovery \
            code (--recovery-code-file FILE, else $CRDT_SYNC_RECOVERY_CODE, else a prompt).
            """
        )

        @OptionGroup var replica: ReplicaOptions

        @Option(name: .long, help: ArgumentHelp("The space's descriptor (crdtspace1-scrypt-...).", valueName: "DESCRIPTOR"))
        var descriptor: String?

        @Option(name: .long, help: ArgumentHelp("A file whose first line is the passphrase.", valueName: "FILE"))
        var passphraseFile: String?

        @Option(name: .long, help: ArgumentHelp("A file holding the recovery code.", valueName: "FILE"))
        var recoveryCodeFile: String?

        @Flag(help: "Print one JSON object.")
        var json = false

        func validate() throws {
            if descriptor != nil, recoveryCodeFile != nil { throw ValidationError("give --descriptor (with a passphrase) or a recovery code, not both") }
            if descriptor == nil, passphraseFile != nil { throw ValidationError("--passphrase-file goes with --descriptor") }
        }

        func run() throws {
            try runSpaceCommand {
                let store = try replica.open()
                if let existing = try store.space() {
                    throw NoteCommandError("this replica is already in an encrypted space (key id \(existing.keyID)); nothing was changed")
                }
                let key: SpaceKey
                let origin: String
                if let descriptor {
                    let parsed = try SpaceKey.Descriptor(descriptor)
                    let passphrase = try SecretSource(file: passphraseFile, variable: "CRDT_SYNC_PASSPHRASE", prompt: "passphrase of the space: ",
                                                      what: "passphrase").read()
                    key = try SpaceKey.join(passphrase: passphrase, descriptor: parsed)
                    origin = parsed.description
                } else {
                    let code = try SecretSource(file: recoveryCodeFile, variable: "CRDT_SYNC_RECOVERY_CODE", prompt: "recovery code: ",
                                                what: "recovery code").read()
                    key = try SpaceKey(recoveryCode: code)
                    origin = "recovery code"
                }
                try store.enterSpace(key: key, origin: origin)
                if json {
                    struct Out: Encodable { var keyID: String }
                    try printJSON(Out(keyID: key.keyIDHex))
                } else {
                    print("joined encrypted space \(key.keyIDHex); from now on this replica syncs only sealed bundles")
                }
            }
        }
    }

    struct SpaceShow: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "show",
            abstract: "Show the encrypted space this replica is in: key id, descriptor, members, refused units."
        )

        @OptionGroup var replica: ReplicaOptions

        @Flag(help: "Print one JSON object.")
        var json = false

        func run() throws {
            try runSpaceCommand {
                let store = try replica.open()
                let space = try store.space()
                let refused = try store.refusedUnits()
                if json {
                    struct Member: Encodable { var replica: String; var publicKey: String }
                    struct Refused: Encodable { var author: String; var startSeq: UInt64; var endSeq: UInt64; var code: String; var reason: String }
                    struct Out: Encodable {
                        var encrypted: Bool; var keyID: String?; var origin: String?; var publicKey: String?
                        var members: [Member]; var sealedUnits: Int; var refused: [Refused]
                    }
                    try printJSON(Out(encrypted: space != nil, keyID: space?.keyID, origin: space?.origin, publicKey: space?.publicKey,
                                      members: (space?.members ?? []).map { Member(replica: $0.replica.description, publicKey: $0.publicKey) },
                                      sealedUnits: space?.sealedUnits ?? 0,
                                      refused: refused.map { Refused(author: $0.author.description, startSeq: $0.startSeq, endSeq: $0.endSeq, code: $0.code, reason: $0.reason) }))
                    return
                }
                guard let space else {
                    print("not encrypted: this replica is in no encrypted space (`crdt-sync space create` or `space join`)")
                    return
                }
                print("encrypted space \(space.keyID)")
                print(space.origin == "recovery code" ? "key: from a recovery code" : "descriptor: \(space.origin)")
                print("this replica: \(store.replicaID) signs with \(space.publicKey)")
                print("members known: \(space.members.count)")
                for member in space.members { print("  \(member.replica) \(member.publicKey)") }
                print("sealed units kept: \(space.sealedUnits)")
                if !refused.isEmpty {
                    print("refused units: \(refused.count)")
                    for unit in refused { print("  \(unit.author)@\(unit.startSeq)-\(unit.endSeq): \(TerminalText.escaped(unit.reason))") }
                }
            }
        }
    }
}

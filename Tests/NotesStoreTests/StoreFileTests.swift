import Foundation
import NotesCRDT
@testable import NotesStore
import Testing

/// Files that are not replicas, newer schemas, read-only places, and two writers at once.
struct StoreFileTests {
    func bytes(_ path: String) -> [UInt8] { [UInt8](FileManager.default.contents(atPath: path) ?? Data()) }

    func expectRefused(_ path: String, code: StoreError.Code, create: Bool = true) {
        let before = bytes(path)
        let siblings = try? FileManager.default.contentsOfDirectory(atPath: (path as NSString).deletingLastPathComponent)
        do {
            _ = try NoteStore.open(path: path, create: create)
            Issue.record("opening \(path) should fail")
        } catch let error as StoreError {
            #expect(error.code == code, "\(error)")
            #expect(error.message.contains(path))
        } catch {
            Issue.record("unexpected error type: \(error)")
        }
        #expect(bytes(path) == before, "the file must be left byte-identical")
        #expect((try? FileManager.default.contentsOfDirectory(atPath: (path as NSString).deletingLastPathComponent)) == siblings)
    }

    @Test func aTextFileIsNotAReplica() throws {
        let folder = TemporaryFolder()
        let path = folder.file("notes.txt")
        try Data(String(repeating: "not a database\n", count: 100).utf8).write(to: URL(fileURLWithPath: path))
        expectRefused(path, code: .notAReplica)
    }

    @Test func anotherAppsSQLiteDatabaseIsNotAReplica() throws {
        let folder = TemporaryFolder()
        // Make it someone else's: a different application id and a table of theirs.
        let other = try NoteStore.open(path: folder.file("scratch2.db"))
        try other.queue.writeWithoutTransaction { db in
            try db.execute(sql: "ATTACH DATABASE ? AS foreign_db", arguments: [folder.file("foreign.db")])
            try db.execute(sql: "CREATE TABLE foreign_db.things (x)")
            try db.execute(sql: "DETACH DATABASE foreign_db")
        }
        expectRefused(folder.file("foreign.db"), code: .notAReplica)
    }

    @Test func aNewerSchemaIsRefusedUntouched() throws {
        let folder = TemporaryFolder()
        let path = folder.file("notes.db")
        do {
            let store = try NoteStore.open(path: path)
            try store.createNote(title: "x")
            try store.queue.writeWithoutTransaction { db in
                try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v99-from-the-future')")
                try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            }
            try store.close()
        }
        expectRefused(path, code: .newerSchema)
    }

    @Test func aReadOnlyLocationIsAClearError() throws {
        if geteuid() == 0 {
            // Permissions do not stop root: use a file system that nobody can write.
            do {
                _ = try NoteStore.open(path: "/proc/crdt-sync-test/notes.db")
                Issue.record("should fail")
            } catch let error as StoreError {
                #expect(error.code == .readOnly || error.code == .cannotOpen)
            }
            return
        }
        let folder = TemporaryFolder()
        let locked = folder.file("locked")
        try FileManager.default.createDirectory(atPath: locked, withIntermediateDirectories: true)
        chmod(locked, 0o555)
        defer { chmod(locked, 0o755) }
        do {
            _ = try NoteStore.open(path: locked + "/notes.db")
            Issue.record("should fail")
        } catch let error as StoreError {
            #expect(error.code == .readOnly)
        }
    }

    @Test func aMissingReplicaIsNotCreatedUnlessAsked() throws {
        let folder = TemporaryFolder()
        let path = folder.file("absent.db")
        #expect(throws: StoreError.self) { try NoteStore.open(path: path, create: false) }
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(FileManager.default.createFile(atPath: path, contents: Data()))
        expectRefused(path, code: .noReplica, create: false)
        let created = try NoteStore.open(path: path)
        #expect(created.wasCreated)
    }

    @Test func twoWritersOnOneDatabase() throws {
        let folder = TemporaryFolder()
        let path = folder.file("notes.db")
        let first = try NoteStore.open(path: path, options: StoreOptions(snapshotInterval: 40))
        let second = try NoteStore.open(path: path, options: StoreOptions(snapshotInterval: 40))
        #expect(first.replicaID == second.replicaID)
        let shared = try first.createNote(title: "shared")
        let errors = ErrorBox()
        let group = DispatchGroup()
        for (index, store) in [first, second].enumerated() {
            DispatchQueue.global().async(group: group) {
                do {
                    for i in 0 ..< 60 {
                        try store.appendText(shared, "\(index):\(i) ")
                        if i % 10 == 0 { try store.createNote(title: "writer \(index) note \(i)") }
                    }
                } catch {
                    errors.add(error)
                }
            }
        }
        group.wait()
        #expect(errors.all.isEmpty, "\(errors.all)")
        let reopened = try NoteStore.open(path: path, create: false)
        let body = try #require(try reopened.note(shared)?.body)
        for index in 0 ..< 2 {
            for i in 0 ..< 60 { #expect(body.contains("\(index):\(i) ")) }
        }
        #expect(try reopened.noteCount() == 13)
        try first.refresh()
        #expect(try first.digest() == (try reopened.digest()))
        #expect(try reopened.notebook.note(shared)?.body == body)
    }
}

final class ErrorBox: @unchecked Sendable {
    private let lock = NSLock()
    private var errors: [any Error] = []
    func add(_ error: any Error) { lock.lock(); errors.append(error); lock.unlock() }
    var all: [any Error] { lock.lock(); defer { lock.unlock() }; return errors }
}

import Foundation
import NotesCRDT
@testable import NotesStore
import Testing

/// A database restored from a backup over itself keeps its inode, so only the seq mark beside it
/// (`SeqMark`) can tell that its identity already handed out the seqs it is about to use again.
struct SeqMarkTests {
    /// Writes `bytes` over the file in place, as `cp backup.db notes.db` does: the same inode.
    func overwrite(_ path: String, with bytes: Data) throws {
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: bytes)
        try handle.close()
    }

    /// A backup of the database's whole folder (the file and its mark) restored over it in
    /// place: the mark beside it went back too, so only the copy of the mark kept elsewhere
    /// (`seqMarkCopies`) sees the restore; without copies the store writes the sent seqs again.
    @Test(arguments: [true, false])
    func aFolderRestoredOverItselfIsSeenByTheMarksCopy(keepingCopies: Bool) throws {
        let folder = TemporaryFolder()
        let path = folder.file("notes.db")
        let copies = keepingCopies ? folder.file("state/seqmarks") : nil
        let options = { var o = StoreOptions(); o.seqMarkCopies = copies; return o }()
        var store = try NoteStore.open(path: path, options: options)
        let note = try store.createNote(title: "shared", body: "base")
        let peer = try NoteStore.openInMemory()
        _ = try peer.apply(store.changes(since: peer.versionVector))
        try store.close()
        let backup = try Data(contentsOf: URL(fileURLWithPath: path))
        let markBackup = try Data(contentsOf: URL(fileURLWithPath: path + SeqMark.suffix))

        store = try NoteStore.open(path: path, options: options)
        let id = store.replicaID
        try store.appendText(note, " sent before the restore")
        _ = try peer.apply(store.changes(since: peer.versionVector))
        try store.close()
        try overwrite(path, with: backup)
        try overwrite(path + SeqMark.suffix, with: markBackup)

        let restored = try NoteStore.open(path: path, options: options)
        try restored.appendText(note, " typed after the restore")
        _ = try peer.apply(restored.changes(since: peer.versionVector))
        _ = try restored.apply(peer.changes(since: restored.versionVector))
        if keepingCopies {
            #expect(restored.replicaID != id)
            #expect(try restored.identityChanges().last?.reason.contains("went back") == true)
            #expect(try restored.digest() == peer.digest())
            let body = try #require(try peer.note(note)?.body)
            #expect(body.contains(" sent before the restore") && body.contains(" typed after the restore"))
        } else {
            #expect(restored.replicaID == id)
            #expect(try restored.digest() != peer.digest())
        }
    }

    /// A replica sends an edit, is restored from a backup taken before it, edits again: with the
    /// mark it moves to a fresh identity at open and both edits reach everyone; without it (the
    /// mark lost with the restore) its new edit repeats sent seqs and the peer refuses it.
    @Test(arguments: [true, false])
    func aDatabaseRestoredOverItselfMovesToAFreshIdentity(keepingTheMark: Bool) throws {
        let folder = TemporaryFolder()
        let path = folder.file("notes.db")
        var store = try NoteStore.open(path: path)
        let note = try store.createNote(title: "shared", body: "base")
        let peer = try NoteStore.openInMemory()
        _ = try peer.apply(store.changes(since: peer.versionVector))
        try store.close()
        let backup = try Data(contentsOf: URL(fileURLWithPath: path))

        store = try NoteStore.open(path: path)
        let id = store.replicaID
        try store.appendText(note, " sent before the restore")
        _ = try peer.apply(store.changes(since: peer.versionVector))
        try store.close()
        let inode = NoteStore.fileIdentity(of: path)
        try overwrite(path, with: backup)
        #expect(NoteStore.fileIdentity(of: path) == inode, "restored in place: the file identity cannot see it")
        if !keepingTheMark { try FileManager.default.removeItem(atPath: path + SeqMark.suffix) }

        let restored = try NoteStore.open(path: path)
        let idAtOpen = restored.replicaID
        try restored.appendText(note, " typed after the restore, and more")
        let toPeer = try peer.apply(restored.changes(since: peer.versionVector))
        let fromPeer = try restored.apply(peer.changes(since: restored.versionVector))
        if keepingTheMark {
            #expect(idAtOpen != id)
            let move = try #require(try restored.identityChanges().last)
            #expect(move.retired == id && move.reason.contains("went back"))
            #expect(toPeer.rejected == 0 && fromPeer.rejected == 0)
            #expect(try restored.digest() == peer.digest())
            let body = try #require(try peer.note(note)?.body)
            #expect(body.contains(" sent before the restore") && body.contains(" typed after the restore"))
        } else {
            // Its new edit repeats seqs the peer has; each side's version vector says it has the
            // other's, so neither ever sends them, and the two never converge.
            #expect(idAtOpen == id)
            #expect(try restored.digest() != peer.digest())
        }
    }

    /// Opening the same file again, editing and sending, never moves it; the mark follows what
    /// was sent.
    @Test func aDatabaseThatDidNotGoBackKeepsItsIdentity() throws {
        let folder = TemporaryFolder()
        let path = folder.file("notes.db")
        let store = try NoteStore.open(path: path)
        let id = store.replicaID
        let note = try store.createNote(title: "a", body: "b")
        for word in [" one", " two", " three"] {
            try store.appendText(note, word)
            _ = try store.changes(since: VersionVector())
            let mark = try #require(SeqMark.read(file: path + SeqMark.suffix))
            #expect(mark == SeqMark(replica: id, seq: try store.versionVector[id]))
        }
        try store.close()
        let again = try NoteStore.open(path: path)
        #expect(again.replicaID == id)
        #expect(try again.identityChanges().isEmpty)
    }

    /// A mark that cannot be read is no mark (rewritten, nothing moved); one that names an identity
    /// this database never had means another database held this file since: it moves.
    @Test func aDamagedMarkIsRewrittenAndAForeignOneMovesTheReplica() throws {
        let folder = TemporaryFolder()
        let path = folder.file("notes.db")
        var store = try NoteStore.open(path: path)
        let id = store.replicaID
        _ = try store.createNote(title: "a", body: "b")
        try store.close()
        for garbage in ["", "crdt-sync seqmark 1\n", "crdt-sync seqmark 1\nnot-hex 5\n",
                        "crdt-sync seqmark 1\n\(id) 99999999999999999999999\n", "crdt-sync seqmark 2\n\(id) 1\n"] {
            try Data(garbage.utf8).write(to: URL(fileURLWithPath: path + SeqMark.suffix))
            store = try NoteStore.open(path: path)
            #expect(store.replicaID == id, "\(garbage.debugDescription) is no mark")
            #expect(SeqMark.read(file: path + SeqMark.suffix)?.replica == id, "and it was rewritten")
            try store.close()
        }
        let stranger = ReplicaID.random()
        #expect(SeqMark(replica: stranger, seq: 3).write(file: path + SeqMark.suffix))
        store = try NoteStore.open(path: path)
        #expect(store.replicaID != id)
        #expect(try store.identityChanges().last?.reason.contains("\(stranger)") == true)
    }

    /// A database deleted and made again at the same path owes nothing to the old one's mark.
    @Test func aNewDatabaseWhereAnOldOneWasIsNotMoved() throws {
        let folder = TemporaryFolder()
        let path = folder.file("notes.db")
        let old = try NoteStore.open(path: path)
        _ = try old.createNote(title: "a", body: "b")
        _ = try old.changes(since: VersionVector())
        try old.close()
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        let new = try NoteStore.open(path: path)
        #expect(new.replicaID != old.replicaID)
        #expect(try new.identityChanges().isEmpty)
        #expect(SeqMark.read(file: path + SeqMark.suffix) == SeqMark(replica: new.replicaID, seq: 0))
    }
}

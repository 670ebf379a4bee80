import Foundation
import NotesCRDT
import NotesStore
import NotesTestSupport
import Testing

/// Kills a real `crdt-sync-bench store-stress` process with SIGKILL in the middle of a burst of writes, repeatedly, and
/// checks that what is on disk opens, holds every acknowledged write, and is a prefix of the burst.
@Suite(.serialized)
struct CrashTests {
    /// Starts `crdt-sync-bench store-stress`, waits until it has acknowledged `after` writes, kills it.
    /// Returns the last acknowledgement line read.
    func runAndKill(_ arguments: [String], db: String, after: Int) throws -> [String] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CLI.benchBinary)
        process.arguments = ["store-stress", "--db", db] + arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        var acks: [String] = []
        var buffer = Data()
        let handle = out.fileHandleForReading
        while acks.count < after {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            buffer.append(chunk)
            while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                acks.append(String(decoding: buffer[buffer.startIndex ..< newline], as: UTF8.self))
                buffer.removeSubrange(buffer.startIndex ... newline)
            }
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        // Acks written before the kill but not yet read count too.
        buffer.append(handle.readDataToEndOfFile())
        for line in String(decoding: buffer, as: UTF8.self).split(separator: "\n") { acks.append(String(line)) }
        return acks.filter { $0.hasPrefix("ack ") }
    }

    @Test func killedInTheMiddleOfEdits() throws {
        let scratch = Scratch()
        var random = SyntheticWorkload.Generator(seed: UInt64(Date().timeIntervalSince1970))
        var expectedMinimum = 0
        for round in 0 ..< 4 {
            let acks = try runAndKill(["--mode", "edits", "--count", "100000"], db: scratch.db, after: 20 + Int(random.next() % 150))
            let store = try NoteStore.open(path: scratch.db, create: false)
            let note = try #require(try store.note(NoteID(Identifier128(high: 0xC0FFEE, low: 1))), "round \(round)")
            let body = try #require(note.body)
            // The body is "1,2,...,n," for the runs so far, run after run: a prefix of the edits.
            let numbers = body.split(separator: ",").map { Int($0)! }
            var runs: [[Int]] = []
            for n in numbers { if n == 1 { runs.append([n]) } else { runs[runs.count - 1].append(n) } }
            #expect(runs.count == round + 1, "round \(round)")
            for run in runs { #expect(run == Array(1 ... run.count)) }
            let lastAck = Int(acks.last?.split(separator: " ")[1] ?? "0") ?? 0
            #expect(runs.last!.count >= lastAck, "acknowledged \(lastAck) edits, found \(runs.last!.count)")
            expectedMinimum += lastAck
            #expect(numbers.count >= expectedMinimum)
            // The materialized note equals the CRDT state.
            #expect(try store.notebook.note(note.id)?.body == body)
            #expect(try store.notebook.note(note.id)?.title == note.title)
            try store.close()
        }
    }

    @Test func killedInTheMiddleOfApplyingChanges() throws {
        let changes = SyntheticWorkload.notebook(seed: 77, notes: 20, operations: 30_000).changes
        let batch = 10
        var digests: [String: Int] = [:]
        var reference = Notebook(replicaID: ReplicaID(Identifier128(high: 1, low: 1)))
        digests[reference.digest()] = 0
        var index = 0
        while index < changes.count {
            let end = min(index + batch, changes.count)
            reference.apply(contentsOf: changes[index ..< end])
            index = end
            digests[reference.digest()] = index
        }
        var random = SyntheticWorkload.Generator(seed: UInt64(Date().timeIntervalSince1970))
        for round in 0 ..< 3 {
            let scratch = Scratch()
            let acks = try runAndKill(["--mode", "apply", "--seed", "77", "--count", "30000", "--batch", "\(batch)"],
                                      db: scratch.db, after: 5 + Int(random.next() % 60))
            let store = try NoteStore.open(path: scratch.db, create: false)
            let digest = try store.digest()
            let prefix = try #require(digests[digest], "round \(round): the state is not that of a prefix of the batches")
            let acknowledged = Int(acks.last?.split(separator: " ")[2] ?? "0") ?? 0
            #expect(prefix >= acknowledged)
            // The materialized rows agree with the CRDT state.
            for note in try store.notebook.allNotes {
                #expect(try store.note(note.id)?.body == note.body)
            }
        }
    }

    @Test func twoProcessesWriteOneDatabase() throws {
        let scratch = Scratch()
        try CLI.ok(["init"], db: scratch.db)
        let note = try CLI.ok(["new", "--title", "shared"], db: scratch.db)
        let writers = (0 ..< 2).map { writer -> Process in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", "for i in $(seq 1 15); do \"$0\" edit \(note) --append \"w\(writer)-$i \" --db \"$1\" || exit 1; done", CLI.binary, scratch.db]
            return process
        }
        for process in writers { try process.run() }
        for process in writers { process.waitUntilExit() }
        #expect(writers.allSatisfy { $0.terminationStatus == 0 })
        let body = try #require(try NoteStore.open(path: scratch.db, create: false).note(NoteID(hex: note)!)?.body)
        for writer in 0 ..< 2 {
            for i in 1 ... 15 { #expect(body.contains("w\(writer)-\(i) ")) }
        }
    }
}

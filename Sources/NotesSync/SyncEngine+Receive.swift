import Foundation
import NotesCRDT

extension SyncEngine {
    /// Runs `body` (a send or a receive) with retries, applying what it hands over as it
    /// arrives: in one transaction on a thread of its own (`inOneTransaction`), or batch by
    /// batch. `body` is given, on a retry, what the session has received so far (ask only past it).
    func streaming<T>(_ session: inout SyncSession, _ replica: any SyncReplica, _ sealing: (any SealedSyncReplica)?,
                      inOneTransaction: Bool,
                      _ body: (_ received: VersionVector?, _ each: (ReceivedBundle) async throws -> Void) async throws -> T) async throws -> T {
        if inOneTransaction { return try await streamingInOneTransaction(&session, replica, body) }
        var wrongKey: SyncError?
        do {
            let result = try await withRetries(&session, body) { session, item in
                guard let batch = try session.arrived(item) else { return }
                switch batch {
                case .apply(let changes):
                    try session.batchApplied(try replica.integrate(batch: changes))
                case .applySealed(let units):
                    do {
                        try session.batchApplied(try sealing!.integrate(sealedBatch: units))
                    } catch let error as SyncError where error.code == .wrongKey {
                        // Judged on the whole receive, as one batch would be: refused units if
                        // another batch opened, the error if none did.
                        wrongKey = wrongKey ?? error
                        try session.batchApplied(IntegrationReport(rejected: units.count, refused: [error.message]))
                    }
                default:
                    throw SyncSession.MisuseError(description: "arrived handed out \(batch)")
                }
                onProgress(session.progress)
            }
            try replica.integrationFinished()
            let report = session.progress.report
            if let wrongKey, report.applied == 0, report.duplicates == 0 { throw wrongKey }
            return result
        } catch {
            try? replica.integrationFinished()
            throw error
        }
    }

    /// `body` with retries of transient failures; `take` gets each bundle it hands over.
    func withRetries<T>(_ session: inout SyncSession,
                                _ body: (_ received: VersionVector?, _ each: (ReceivedBundle) async throws -> Void) async throws -> T,
                                _ take: @escaping (inout SyncSession, ReceivedBundle) async throws -> Void) async throws -> T {
        var attempt = 1
        while true {
            do {
                return try await body(attempt == 1 ? nil : session.receivedVersion) { item in try await take(&session, item) }
            } catch let error as SyncError where error.code == .transient && attempt < retry.maxAttempts {
                attempt += 1
                let delay = retry.delay(beforeAttempt: attempt, random: random())
                onRetry(attempt, delay, error)
                session.retried()
                try await sleep(delay)
            }
        }
    }

    /// The pages go, as they arrive, to a thread that applies them all in one transaction
    /// (`SyncReplica.integrate(batches:progress:)`), while the next ones are fetched; at most
    /// one batch waits between the two (each decoded page held adds to a pull's peak memory).
    /// Any failure rolls the whole receive back.
    private func streamingInOneTransaction<T>(_ session: inout SyncSession, _ replica: any SyncReplica,
                                              _ body: (_ received: VersionVector?, _ each: (ReceivedBundle) async throws -> Void) async throws -> T) async throws -> T {
        let handoff = BatchHandoff(capacity: 1)
        let onProgress = onProgress
        // Started with the first batch: a sync that brings nothing opens no write transaction.
        var applying: Task<Result<IntegrationReport, any Error>, Never>?
        let produced: Result<T, any Error>
        do {
            produced = .success(try await withRetries(&session, body) { session, item in
                guard let batch = try session.arrived(item) else { return }
                guard case .apply(let changes) = batch else { throw SyncSession.MisuseError(description: "arrived handed out \(batch)") }
                if applying == nil { applying = Task { await Self.applyOnAThread(replica, handoff, onProgress) } }
                try await handoff.put(changes, session.progress)
            })
            handoff.end()
        } catch {
            handoff.fail(error)
            produced = .failure(error)
        }
        // Nothing was handed over: the session asks for an empty batch at the end (`streamEnded`).
        guard let applying else { return try produced.get() }
        let outcome = await applying.value
        // The first failure is the one to tell: the transport's (the replica then rolled back),
        // else the replica's (the transport stopped because of it).
        if case .failure(let error) = produced, !(error is BatchHandoff.Stopped) { throw error }
        let report = try outcome.get()
        let result = try produced.get()
        try session.batchApplied(report)
        return result
    }

    private static func applyOnAThread(_ replica: any SyncReplica, _ handoff: BatchHandoff,
                                       _ onProgress: @escaping @Sendable (SyncProgress) -> Void) async -> Result<IntegrationReport, any Error> {
        // Task-locals do not follow a thread: the one the code below reads is bound again there.
        let lwwIgnoresReplicaOnTies = CRDTTestHooks.lwwIgnoresReplicaOnTies
        return await withCheckedContinuation { continuation in
            // A thread of its own: the transaction waits for pages, which must not hold up a
            // thread of the concurrency pool.
            let thread = Thread {
                var current: SyncProgress?
                let result = CRDTTestHooks.$lwwIgnoresReplicaOnTies.withValue(lwwIgnoresReplicaOnTies) {
                    Result {
                        try replica.integrate(batches: {
                            guard let (batch, progress) = try handoff.take() else { return nil }
                            current = progress
                            return batch
                        }, progress: { _ in if let current { onProgress(current) } })
                    }
                }
                handoff.stop()
                continuation.resume(returning: result)
            }
            thread.start()
        }
    }
}

/// Batches handed from a sync's task to the thread that applies them: `put` waits (without
/// blocking a thread) while `capacity` batches wait; `take` blocks its thread until one comes.
final class BatchHandoff: @unchecked Sendable {
    /// The applying side stopped (it failed): nothing more is taken.
    struct Stopped: Error {}

    private let condition = NSCondition()
    private var queue: [([Change], SyncProgress)] = []
    private var ended = false
    private var failure: (any Error)?
    private var stopped = false
    private var waiting: CheckedContinuation<Void, any Error>?
    private let capacity: Int

    init(capacity: Int) { self.capacity = max(1, capacity) }

    func put(_ batch: [Change], _ progress: SyncProgress) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            condition.lock()
            defer { condition.unlock() }
            if stopped { return continuation.resume(throwing: Stopped()) }
            queue.append((batch, progress))
            condition.signal()
            if queue.count >= capacity { waiting = continuation } else { continuation.resume() }
        }
    }

    /// The next batch; nil after `end()`; throws what `fail` was given.
    func take() throws -> ([Change], SyncProgress)? {
        condition.lock()
        defer { condition.unlock() }
        while queue.isEmpty && !ended && failure == nil { condition.wait() }
        if let failure { throw failure }
        guard !queue.isEmpty else { return nil }
        let item = queue.removeFirst()
        if let waiting { self.waiting = nil; waiting.resume() }
        return item
    }

    /// No more batches.
    func end() {
        condition.lock()
        ended = true
        condition.signal()
        condition.unlock()
    }

    /// The sending side failed: the applying side throws `error` (and rolls back).
    func fail(_ error: any Error) {
        condition.lock()
        failure = error
        condition.signal()
        condition.unlock()
    }

    /// The applying side is done: a waiting or later `put` throws `Stopped`.
    func stop() {
        condition.lock()
        stopped = true
        if let waiting { self.waiting = nil; waiting.resume(throwing: Stopped()) }
        condition.unlock()
    }
}

import NotesCRDT
import NotesSync
import Synchronization

/// Bounds of the relay's live push (`GET /v1/spaces/{space}/changes`, a long poll).
public struct RelayPushLimits: Sendable, Hashable {
    /// A client's `wait` is cut to this many seconds.
    public var maxWaitSeconds: Int
    /// At most this many clients wait on one space at once; more get 503.
    public var maxWaitersPerSpace: Int
    /// At most this many clients wait in all; more get 503 (kept below the server's connection cap,
    /// so that waiting clients never leave no room for syncs).
    public var maxWaiters: Int

    /// Limits; the defaults suit a relay for a few hundred people behind a 512-connection server.
    public init(maxWaitSeconds: Int = 60, maxWaitersPerSpace: Int = 32, maxWaiters: Int = 256) {
        self.maxWaitSeconds = max(0, maxWaitSeconds)
        self.maxWaitersPerSpace = max(1, maxWaitersPerSpace)
        self.maxWaiters = max(1, maxWaiters)
    }
}

extension RelayService {
    /// `GET /v1/spaces/{space}/changes?since=VECTOR&wait=SECONDS`: answers at once (like status)
    /// when the space holds changes past `since`, else when `storage.changes` signals the space
    /// and a new look finds some, else 204 when `wait` runs out (or the task is cancelled: the
    /// server shutting down).
    /// Clients holding a request open for a change of their space, now (for metrics).
    public var pushWaiterCount: Int { waiters.total }

    func changes(_ request: RelayRequest, space: String) async -> RelayResponse {
        let since: VersionVector
        do {
            since = try RelayProtocol.parseSince(request.query["since"] ?? "")
        } catch let error as SyncError {
            return RelayService.text(400, error.message)
        } catch {
            return RelayService.text(400, "since is not a version vector")
        }
        var wait = RelayProtocol.defaultWaitSeconds
        if let text = request.query["wait"] {
            guard let seconds = Int(text), seconds >= 0 else {
                return RelayService.text(400, "wait must be a whole number of seconds (0 or more), not \"\(text.prefix(32))\"")
            }
            wait = seconds
        }
        wait = min(wait, limits.push.maxWaitSeconds)
        let asBundle = request.headers["accept"]?.contains(RelayProtocol.bundleContentType) == true
        guard waiters.enter(space, perSpace: limits.push.maxWaitersPerSpace, total: limits.push.maxWaiters) else {
            var busy = RelayService.text(503, "too many clients are waiting for changes; try again later")
            busy.headers["Retry-After"] = "5"
            return busy
        }
        defer { waiters.leave(space) }
        // Listen before the first look, so that an append between the look and the wait is not missed.
        let signals = storage.changes.stream()
        let storage = self.storage
        @Sendable func look() async -> RelayResponse? {
            let status: RelaySpaceStatus
            do {
                status = try await storage.status(space: space)
            } catch {
                // Cancelled (the server shutting down) while reading: the wait ends as a timeout would.
                if Task.isCancelled || error is CancellationError { return RelayResponse(status: 204) }
                return RelayService.text(503, "the relay could not read its store; try again")
            }
            let ahead = status.version.sortedEntries.contains { $0.seq > since[$0.replica] }
            return ahead ? statusResponse(status, space: space, asBundle: asBundle) : nil
        }
        if let answer = await look() { return answer }
        guard wait > 0 else { return RelayResponse(status: 204) }
        let seconds = wait
        let answer = await withTaskGroup(of: RelayResponse?.self) { group in
            group.addTask {
                for await name in signals where name == space {
                    if let answer = await look() { return answer }
                }
                return nil  // cancelled
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(seconds))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        return answer ?? RelayResponse(status: 204)
    }
}

/// Clients waiting for changes, per space and in all.
final class WaiterCounter: Sendable {
    private struct State {
        var perSpace: [String: Int] = [:]
        var total = 0
    }

    private let state = Mutex(State())

    /// Counts a new waiter on `space`; false (not counted) when a bound is reached.
    func enter(_ space: String, perSpace: Int, total: Int) -> Bool {
        state.withLock { state in
            let current = state.perSpace[space, default: 0]
            guard current < perSpace, state.total < total else { return false }
            state.perSpace[space] = current + 1
            state.total += 1
            return true
        }
    }

    func leave(_ space: String) {
        state.withLock { state in
            let current = state.perSpace[space, default: 0]
            state.perSpace[space] = current <= 1 ? nil : current - 1
            state.total -= 1
        }
    }

    /// Waiters on `space` now.
    func count(_ space: String) -> Int { state.withLock { $0.perSpace[space, default: 0] } }

    /// Waiters on every space now.
    var total: Int { state.withLock { $0.total } }
}

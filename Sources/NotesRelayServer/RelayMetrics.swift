import Foundation
import Hummingbird
import NotesRelay
import Prometheus
import Synchronization

/// The relay's figures in the Prometheus text format (`GET /metrics`): requests by route and
/// status, bytes in and out, the time of a sync, open connections and push waiters, and, read
/// from the storage at each scrape, its spaces and stored changes.
///
/// Labels are the route's pattern (`/v1/spaces/{space}/sync`), never a space name, a token or a
/// body, so the number of series stays bounded and nothing private is exposed.
public final class RelayMetrics: Sendable {
    /// The registry the figures are kept in (an app may add its own).
    public let registry = PrometheusCollectorRegistry()
    let requestBytes: Counter
    let responseBytes: Counter
    let syncDuration: DurationHistogram
    let openConnections: Gauge
    /// Clients waiting for a change of their space (live push), as the push code reports them.
    public let pushWaiters: Gauge
    let spaces: Gauge
    let storedChanges: Gauge
    let storedBytes: Gauge
    private let requestCounters = Mutex<[String: Counter]>([:])

    public init() {
        requestBytes = registry.makeCounter(name: "crdt_sync_relay_request_bytes_total", help: "Bytes of request bodies received.")
        responseBytes = registry.makeCounter(name: "crdt_sync_relay_response_bytes_total", help: "Bytes of response bodies sent.")
        syncDuration = registry.makeDurationHistogram(
            name: "crdt_sync_relay_sync_duration_seconds",
            buckets: [.milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
                      .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5)],
            help: "Time to answer one sync request (POST /v1/spaces/:space/sync), body included.")
        openConnections = registry.makeGauge(name: "crdt_sync_relay_open_connections", help: "Open client connections.")
        pushWaiters = registry.makeGauge(name: "crdt_sync_relay_push_waiters", help: "Clients holding a request open for a change of their space.")
        spaces = registry.makeGauge(name: "crdt_sync_relay_spaces", help: "Spaces that hold at least one change.")
        storedChanges = registry.makeGauge(name: "crdt_sync_relay_stored_changes", help: "Changes stored, in all spaces.")
        storedBytes = registry.makeGauge(name: "crdt_sync_relay_stored_bytes", help: "Bytes of stored change payloads, in all spaces.")
    }

    /// Counts one answered request.
    func countRequest(route: String, method: String, status: Int, requestBytes received: Int, responseBytes sent: Int) {
        let key = "\(method) \(route) \(status)"
        let counter = requestCounters.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = registry.makeCounter(name: "crdt_sync_relay_requests_total",
                                               labels: [("method", method), ("route", route), ("status", String(status))],
                                               help: "Requests answered, by method, route and status.")
            counters[key] = counter
            return counter
        }
        counter.increment()
        if received > 0 { requestBytes.increment(by: Int64(received)) }
        if sent > 0 { responseBytes.increment(by: Int64(sent)) }
    }

    /// The text a scrape returns, with the storage's totals read now.
    public func render(storage: any RelayStorage) async -> String {
        if let totals = try? await storage.totals() {
            spaces.set(Double(totals.spaces))
            storedChanges.set(Double(totals.changes))
            storedBytes.set(Double(totals.bytes))
        }
        return registry.emitToString()
    }
}

/// Counts every request (route pattern, method, status, bytes) and times syncs.
struct MetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: RelayMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let received = request.headers[.contentLength].flatMap(Int.init) ?? 0
        let response: Response
        do {
            response = try await next(request, context)
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            metrics.countRequest(route: route(context, request), method: request.method.rawValue, status: status,
                                 requestBytes: received, responseBytes: 0)
            throw error
        }
        let route = route(context, request)
        metrics.countRequest(route: route, method: request.method.rawValue, status: response.status.code,
                             requestBytes: received, responseBytes: response.body.contentLength ?? 0)
        if route.hasSuffix("/sync") { metrics.syncDuration.record(ContinuousClock.now - start) }
        return response
    }

    /// The matched route's pattern, so that a space's name never becomes a label; "unmatched" else.
    private func route(_ context: Context, _ request: Request) -> String {
        let pattern = context.endpointPath ?? ""
        return pattern.isEmpty ? "unmatched" : pattern
    }
}

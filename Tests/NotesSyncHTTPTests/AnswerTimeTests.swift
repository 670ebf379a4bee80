import AsyncHTTPClient
import Foundation
import NIOCore
@testable import NotesSyncHTTP
import Synchronization
import Testing

/// A relay (or something posing as one) cannot hold a sync forever by sending its answer slowly
/// or not at all: the body gets the request's time plus a second per 64 KiB that arrives. The
/// clock is a stand-in that moves a fixed step each time it is read, and the watchdog waits out
/// only the stall test, so what is "too slow" does not depend on how busy the machine is.
struct AnswerTimeTests {
    /// A body whose parts come one after another (forever when `parts` is nil), each `size` bytes.
    func body(parts: Int?, size: Int) -> HTTPClientResponse.Body {
        let stream = AsyncStream<ByteBuffer> { continuation in
            let task = Task {
                var sent = 0
                while parts.map({ sent < $0 }) ?? true, !Task.isCancelled {
                    continuation.yield(ByteBuffer(repeating: 0x61, count: size))
                    sent += 1
                    await Task.yield()
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
        return .stream(stream)
    }

    /// A watchdog that waits until the read is over (cancelled then).
    let noWatchdog: @Sendable (TimeAmount) async throws -> Void = { _ in try await Task.sleep(for: .seconds(86_400)) }

    /// A clock that starts at `start` and moves `step` each time it is read.
    final class SteppingClock: Sendable {
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)
        let step: TimeAmount
        let reads = Mutex(0)
        init(step: TimeAmount) { self.step = step }
        func now() -> NIODeadline { start + .nanoseconds(step.nanoseconds * Int64(reads.withLock { $0 += 1; return $0 })) }
    }

    @Test func anAnswerThatArrivesInTimeIsTakenWhole() async throws {
        let clock = SteppingClock(step: .milliseconds(1))
        let buffer = try await HTTPRelayClient.collect(body(parts: 40, size: 4096), upTo: 1 << 20, started: clock.start,
                                                       timeoutSeconds: 1, now: clock.now, sleep: noWatchdog)
        #expect(buffer.readableBytes == 40 * 4096)
    }

    @Test func aTrickledAnswerIsCutOffOnceItFallsBehind() async throws {
        // A byte per second of the stand-in clock: behind after the request's second.
        let clock = SteppingClock(step: .seconds(1))
        await #expect { try await HTTPRelayClient.collect(body(parts: nil, size: 1), upTo: 16 << 20, started: clock.start,
                                                          timeoutSeconds: 1, now: clock.now, sleep: noWatchdog) } throws: { error in
            "\(error)".contains("too slowly")
        }
    }

    @Test func aStalledAnswerEndsWhenTheLargestBodyWouldHaveHadItsTime() async throws {
        // Nothing ever comes: the watchdog ends it after the request's second and 64 KiB's worth.
        let (never, continuation) = AsyncStream<ByteBuffer>.makeStream()
        await #expect { try await HTTPRelayClient.collect(.stream(never), upTo: 64 << 10, started: .now(), timeoutSeconds: 1) } throws: { error in
            "\(error)".contains("stalled")
        }
        continuation.finish()  // held open until here
    }

    @Test func anAnswerOverTheLimitIsRefused() async throws {
        let clock = SteppingClock(step: .milliseconds(1))
        await #expect { try await HTTPRelayClient.collect(body(parts: 5, size: 1000), upTo: 4500, started: clock.start,
                                                          timeoutSeconds: 5, now: clock.now, sleep: noWatchdog) } throws: { error in
            "\(error)".contains("larger than the client accepts")
        }
    }
}

import AsyncHTTPClient
import Foundation
import NIOCore
@testable import NotesSyncHTTP
import Testing

/// A relay (or something posing as one) cannot hold a sync forever by sending its answer slowly
/// or not at all: the body gets the request's time plus a second per 64 KiB that arrives.
struct AnswerTimeTests {
    /// A body whose parts come `every` apart (forever when `parts` is nil), each `size` bytes.
    func body(parts: Int?, size: Int, every: Duration) -> HTTPClientResponse.Body {
        let stream = AsyncStream<ByteBuffer> { continuation in
            let task = Task {
                var sent = 0
                while parts.map({ sent < $0 }) ?? true {
                    if every > .zero { try? await Task.sleep(for: every) }
                    if Task.isCancelled { break }
                    continuation.yield(ByteBuffer(repeating: 0x61, count: size))
                    sent += 1
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
        return .stream(stream)
    }

    @Test func anAnswerThatArrivesInTimeIsTakenWhole() async throws {
        let buffer = try await HTTPRelayClient.collect(body(parts: 40, size: 4096, every: .zero), upTo: 1 << 20,
                                                       started: .now(), timeoutSeconds: 1)
        #expect(buffer.readableBytes == 40 * 4096)
    }

    @Test func aTrickledAnswerIsCutOffSoonAfterTheRequestsTime() async throws {
        let clock = ContinuousClock()
        let start = clock.now
        await #expect { try await HTTPRelayClient.collect(body(parts: nil, size: 1, every: .milliseconds(50)), upTo: 16 << 20,
                                                          started: .now(), timeoutSeconds: 1) } throws: { error in
            "\(error)".contains("too slowly")
        }
        // One second, not the 256 s a 16 MiB answer may take at the slowest rate taken.
        #expect(clock.now - start < .seconds(10))
    }

    @Test func aStalledAnswerEndsWhenTheLargestBodyWouldHaveHadItsTime() async throws {
        let clock = ContinuousClock()
        let start = clock.now
        await #expect { try await HTTPRelayClient.collect(body(parts: nil, size: 1, every: .seconds(3600)), upTo: 64 << 10,
                                                          started: .now(), timeoutSeconds: 1) } throws: { error in
            "\(error)".contains("stalled")
        }
        #expect(clock.now - start < .seconds(10))
    }

    @Test func anAnswerOverTheLimitIsRefused() async throws {
        await #expect { try await HTTPRelayClient.collect(body(parts: 5, size: 1000, every: .zero), upTo: 4500,
                                                          started: .now(), timeoutSeconds: 5) } throws: { error in
            "\(error)".contains("larger than the client accepts")
        }
    }
}

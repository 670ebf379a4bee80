import Foundation
import NotesRelayServer
import NotesSyncHTTP
import Testing

/// Slow or greedy clients cannot take the relay: half-sent requests are timed out, one address
/// gets a bounded share of connections, and the health check keeps answering.
@Suite(.serialized)
struct RelayServerLimitsTests {
    /// A TCP connection to 127.0.0.1:port (nil when refused).
    static func connect(_ port: Int) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Foundation.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { close(fd); return nil }
        return fd
    }

    static func send(_ fd: Int32, _ text: String) {
        _ = text.utf8CString.withUnsafeBufferPointer { Foundation.send(fd, $0.baseAddress!, $0.count - 1, Int32(MSG_NOSIGNAL)) }
    }

    /// Whether the server closed the connection within `seconds` (a read returns 0 or fails).
    static func closedByServer(_ fd: Int32, within seconds: Double) -> Bool {
        var timeout = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var byte: UInt8 = 0
        var result = 0
        repeat { result = recv(fd, &byte, 1, 0) } while result > 0
        return result == 0 || (result < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    }

    /// Half-sent requests are closed, and the health check answers meanwhile. A body that stops
    /// arriving is the client's failure: counted as 408, never as a 500 of the relay's own.
    @Test func aRequestWhoseHeadersOrBodyNeverFinishIsClosed() async throws {
        let configuration = RelayServerConfiguration(idleTimeoutSeconds: 1)
        try await withRelay(server: configuration) { relay, client in
            for request in ["POST /v1/spaces/notes/sync HTTP/1.1\r\nHost: relay\r\nAuthor",
                            "POST /v1/spaces/notes/sync HTTP/1.1\r\nHost: relay\r\nAuthorization: Bearer \(notesToken)\r\nContent-Length: 1000\r\n\r\nabc"] {
                let fd = try #require(Self.connect(relay.port))
                defer { close(fd) }
                Self.send(fd, request)
                #expect(Self.closedByServer(fd, within: 10))
                #expect(try await rawRequest(client, "GET", "\(relay.url)/healthz").status == 200)
            }
            // The handler's answer is counted once it returns, which may be after the close.
            var metrics = ""
            for _ in 0 ..< 100 {
                metrics = try await rawRequest(client, "GET", relay.url + "/metrics").body.text
                if metrics.contains("status=\"408\"") || metrics.contains("status=\"500\"") { break }
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(!metrics.contains("status=\"500\""), "\(metrics)")
            #expect(metrics.contains("status=\"408\""), "\(metrics)")
        }
    }

    /// The first line of the server's answer to `request`, sent on a fresh connection.
    static func statusLine(_ port: Int, _ request: String) -> String {
        guard let fd = connect(port) else { return "" }
        defer { close(fd) }
        send(fd, request)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while recv(fd, &byte, 1, 0) == 1, byte != UInt8(ascii: "\n") { bytes.append(byte) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A length past Int's range is answered 413 at once (it was waited for); two Authorization
    /// headers get 400 (which one counted depended on their order).
    @Test func hugeLengthsAndTwoTokensAreAnsweredAtOnce() async throws {
        try await withRelay(server: RelayServerConfiguration(idleTimeoutSeconds: 30)) { relay, _ in
            let huge = Self.statusLine(relay.port, "POST /v1/spaces/notes/sync HTTP/1.1\r\nHost: relay\r\nAuthorization: Bearer \(notesToken)\r\n"
                                                + "Content-Length: 18446744073709551615\r\n\r\n")
            #expect(huge.contains("413"), "\(huge)")
            let two = Self.statusLine(relay.port, "GET /v1/spaces/notes/status HTTP/1.1\r\nHost: relay\r\nAuthorization: Bearer \(notesToken)\r\n"
                                               + "Authorization: Bearer other\r\n\r\n")
            #expect(two.contains("400"), "\(two)")
        }
    }

    /// A sync with no token or a wrong one is answered 401 from its headers: its body is not
    /// waited for nor read (it was read whole first, up to 16 MiB a connection, before the 401).
    @Test func aRefusedTokenIsAnsweredBeforeTheBody() async throws {
        try await withRelay(server: RelayServerConfiguration(idleTimeoutSeconds: 30)) { relay, _ in
            for authorization in ["", "Authorization: Bearer not-a-token\r\n"] {
                let line = Self.statusLine(relay.port, "POST /v1/spaces/notes/sync HTTP/1.1\r\nHost: relay\r\n\(authorization)"
                                                     + "Content-Length: 1000000\r\n\r\nabc")
                #expect(line.contains("401"), "\(authorization): \(line)")
            }
            let elsewhere = Self.statusLine(relay.port, "POST /v1/spaces/notes/status HTTP/1.1\r\nHost: relay\r\n"
                                                      + "Authorization: Bearer \(notesToken)\r\nContent-Length: 1000000\r\n\r\n")
            #expect(elsewhere.contains("405"), "\(elsewhere)")
        }
    }

    @Test func oneAddressGetsABoundedShareOfConnections() async throws {
        let configuration = RelayServerConfiguration(idleTimeoutSeconds: 30, maxConnectionsPerAddress: 8)
        try await withRelay(server: configuration) { relay, _ in
            var open: [Int32] = []
            defer { open.forEach { close($0) } }
            for _ in 0 ..< 8 { open.append(try #require(Self.connect(relay.port))) }
            // Give the server time to count them, then one more is closed at once.
            try await Task.sleep(nanoseconds: 200_000_000)
            let extra = try #require(Self.connect(relay.port))
            defer { close(extra) }
            #expect(Self.closedByServer(extra, within: 5))
            // When one goes away, a new one is let in and served (once the server has seen the
            // close: under load that takes a moment, so a refused attempt is tried again).
            close(open.removeFirst())
            var answer = ""
            for _ in 0 ..< 40 where !answer.hasPrefix("HTTP/1.1 200") {
                try await Task.sleep(nanoseconds: 200_000_000)
                guard let next = Self.connect(relay.port) else { continue }
                defer { close(next) }
                Self.send(next, "GET /healthz HTTP/1.1\r\nHost: relay\r\n\r\n")
                var buffer = [UInt8](repeating: 0, count: 64)
                var timeout = timeval(tv_sec: 5, tv_usec: 0)
                setsockopt(next, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                let count = recv(next, &buffer, buffer.count, 0)
                answer = String(decoding: buffer.prefix(max(0, count)), as: UTF8.self)
            }
            #expect(answer.hasPrefix("HTTP/1.1 200"))
        }
    }

    /// Many half-open connections from one address do not starve others: the health check from a
    /// fresh client still answers.
    @Test func theHealthCheckAnswersUnderManySlowConnections() async throws {
        let configuration = RelayServerConfiguration(idleTimeoutSeconds: 2, maxConnectionsPerAddress: 32)
        try await withRelay(server: configuration) { relay, client in
            var open: [Int32] = []
            defer { open.forEach { close($0) } }
            for _ in 0 ..< 200 {
                guard let fd = Self.connect(relay.port) else { continue }
                Self.send(fd, "GET /healthz HTTP/1.1\r\nHo")
                open.append(fd)
            }
            // Those past the address's share are closed at once; the rest time out. Meanwhile the
            // relay answers (the test client comes from the same address, so wait for the idle
            // timeout to free a share).
            try await Task.sleep(nanoseconds: 3_000_000_000)
            #expect(try await rawRequest(client, "GET", "\(relay.url)/healthz").status == 200)
        }
    }
}

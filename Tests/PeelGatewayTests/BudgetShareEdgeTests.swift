import Foundation
import PeelGateway
import PeelIO
import XCTest

/// The memory budget's per-client share at its edges: one whole body always fits, and unread
/// answers count against the address that does not read them.
final class BudgetShareEdgeTests: XCTestCase {
    private func buffered(_ h: Harness) -> Int {
        let line = (try? h.admin("/metrics").text)?.split(separator: "\n").first { $0.hasPrefix("peel_buffered_bytes ") }
        return line.flatMap { Int($0.split(separator: " ")[1]) } ?? -1
    }

    /// Issue 28: the share is "never less than max_body (one client can always send one whole body)",
    /// and the README allows `--max-buffered-per-client` from max_body up. A chunked body is charged
    /// for its buffer, which grows by doubling up to max_body + 64 KiB past the head, so a chunked
    /// body of 90 % of max_body, the only one in flight on an idle server, is refused 503 once its
    /// buffer doubles past the share.
    func testAChunkedBodyUnderMaxBody_fitsAShareOfMaxBody() throws {
        let h = try Harness(workers: 1) { c in c.memory.maxBody = 100_000; c.memory.maxBuffered = 1_000_000; c.memory.maxBufferedPerClient = 100_000 }
        defer { h.stop() }
        let body = String(repeating: "a", count: 90_000)
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        // A small answer: the request's own memory is what is judged here (an echoed 90 KB answer
        // would count against the share too, while the body is still held).
        try c.send("POST /api/user HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                   + String(body.utf8.count, radix: 16) + "\r\n" + body + "\r\n0\r\n\r\n")
        let r = try c.readResponse()
        XCTAssertEqual(r.status, 200, "one whole chunked body under max_body was refused: \(r.text.prefix(300))")
    }

    /// The same promise for a Content-Length body after a large head: the head's buffer growth is
    /// charged as body memory, so a 10-byte body behind a 40 KB head (cookies, a JWT) passes a share
    /// of max_body = 16 KiB and is refused.
    func testASmallBodyBehindALargeHead_fitsAShareOfMaxBody() throws {
        let h = try Harness(workers: 1) { c in c.memory.maxBody = 16_384; c.memory.maxBuffered = 1_000_000; c.memory.maxBufferedPerClient = 16_384 }
        defer { h.stop() }
        let cookie = String(repeating: "c", count: 40_000)
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try c.send("POST /api/echo HTTP/1.1\r\nHost: x\r\nX-Big: \(cookie)\r\nContent-Length: 10\r\nConnection: close\r\n\r\n")
        usleep(100_000)
        try c.send("0123456789")
        let r = try c.readResponse()
        XCTAssertEqual(r.status, 200, "a 10-byte body was refused for its head's memory: \(r.text.prefix(300))")
    }

    /// Issue 28: "A client address holds at most a bounded share of the budget ... so no one client
    /// can starve the rest." The share covers request bodies only: one address that asks for large
    /// judged answers and does not read them holds the whole budget (each answer stays charged while
    /// it waits to be written, and any progress restarts client_timeout), and another address's
    /// judged answer gets 503 server-busy.
    func testOneAddressNotReadingItsAnswers_doesNotStarveAnother() throws {
        let h = try Harness(workers: 2) { c in c.memory.maxBody = 1000; c.memory.maxBuffered = 32 << 20 
            // Answers held in memory, which these bounds are about: spooling off.
            c.spooling.threshold = 0
        }
        defer { h.stop() }
        var attackers: [Int32] = []
        defer { for fd in attackers { close(fd) } }
        for _ in 0..<4 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var small: Int32 = 4096
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr("127.0.0.9")
            _ = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            var peer = sockaddr_in()
            peer.sin_family = sa_family_t(AF_INET)
            peer.sin_addr.s_addr = inet_addr("127.0.0.1")
            peer.sin_port = in_port_t(UInt16(h.port).bigEndian)
            let rc = withUnsafePointer(to: &peer) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            XCTAssertEqual(rc, 0)
            var req = Array("GET /api/large?kb=7168 HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
            _ = write(fd, &req, req.count)
            attackers.append(fd)
        }
        // Some of the four answers are held unread; the rest of them pass the address's share and
        // are refused. Before the share covered answers, all four held ~28 MiB of the 32 MiB.
        XCTAssertTrue(h.eventually(20) { self.buffered(h) > 0 }, "no unread answer is held")
        usleep(500_000)
        let share = h.gateway.budget.perClientLimit
        XCTAssertLessThanOrEqual(buffered(h), max(share, 8 << 20), "one address holds more than its share (or one answer)")
        let victim = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 20, from: "127.0.0.2")
        try victim.send("GET /api/large?kb=6144 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let r = try victim.readResponse()
        XCTAssertEqual(r.status, 200, "another address was starved by one that does not read: \(r.text.prefix(200))")
    }
}

import Foundation
@testable import PeelGateway
import PeelIO
import XCTest

/// Issue 18: a streamed answer whose upstream goes silent is cut after `upstream_idle_timeout`.
final class StreamIdleTests: XCTestCase {
    private static let head = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n"

    func testStallingUpstream_streamIsCutAfterTheIdleTimeout_withoutItsEnd() throws {
        let h = try RawHarness(configure: { $0.upstreamIdleTimeout = 0.5; $0.timeout = 10 }) { _ in
            .send(Self.head + "5\r\nhello\r\n")   // then nothing, the connection kept open
        }
        defer { h.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try c.send("GET /stall HTTP/1.1\r\nHost: x\r\n\r\n")
        let got = try c.readUntil("hello\r\n")
        XCTAssertTrue(got.hasPrefix("HTTP/1.1 200"), got)
        let flowing = Date()
        XCTAssertTrue(c.peerClosed(within: 4), "the stream was not cut")
        let after = Date().timeIntervalSince(flowing)
        XCTAssertGreaterThan(after, 0.4, "cut before the idle timeout")
        XCTAssertLessThan(after, 2, "cut long after the idle timeout")
        // peerClosed read nothing more: the last chunk (0\r\n\r\n) never came, so the client can tell.
    }

    func testUpstreamSendingWithinTheBound_isNotCut() throws {
        // A pause well inside the bound: a loop thread held up on a busy machine stays inside it too.
        let h = try RawHarness(configure: { $0.upstreamIdleTimeout = 1.5 }) { _ in
            .sendInTwoParts(Self.head + "5\r\nhello\r\n", after: 0.3, "5\r\nworld\r\n0\r\n\r\n")
        }
        defer { h.stop() }
        let r = try h.request("GET", "/slow-but-alive")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.text, "helloworld")
    }
}

import Foundation
@testable import PeelGateway
import PeelIO
import XCTest

/// Issue 18's smaller holes: traceparent form, 205 bodies, empty lines before a request line.
final class SmallHolesTests: XCTestCase {
    private static let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    func testTraceparent_onlyTheW3CFormPasses_elseDroppedWithTracestate() throws {
        let h = try Harness(workers: 1)
        defer { h.stop() }
        func seen(_ tp: String) throws -> (String?, String?) {
            let e = echo(try h.request("GET", "/api/echo", headers: [("traceparent", tp), ("tracestate", "congo=t61rcWkgMzE")]))
            let headers = echoedHeaders(e)
            return (headers.first { $0.0.lowercased() == "traceparent" }?.1, headers.first { $0.0.lowercased() == "tracestate" }?.1)
        }
        let (tp, ts) = try seen(Self.valid)
        XCTAssertEqual(tp, Self.valid)
        XCTAssertEqual(ts, "congo=t61rcWkgMzE")
        let bad = [
            String(repeating: "a", count: 60_000),                          // the 60 KB one of the report
            Self.valid.uppercased(),                                        // hex must be lowercase
            Self.valid + "-extra",                                          // version 00 is exactly 55
            "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",      // wrong separator
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",      // all-zero trace id
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",      // version ff is invalid
        ]
        for v in bad {
            let (tp, ts) = try seen(v)
            XCTAssertNil(tp, "\(v.prefix(70)) passed")
            XCTAssertNil(ts, "tracestate kept without its traceparent")
        }
        XCTAssertTrue(RequestPolicy.isTraceparent(Array("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later".utf8)),
                      "a later version may carry more after a dash (§3.2.4)")
    }

    func testResetContent_isRelayedWithoutItsBody() throws {
        for answer in ["HTTP/1.1 205 Reset Content\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello",
                       "HTTP/1.1 205 Reset Content\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"] {
            let h = try RawHarness { _ in .send(answer) }
            defer { h.stop() }
            let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
            try c.send("POST /form HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\nGET /again HTTP/1.1\r\nHost: x\r\n\r\n")
            let r = try c.readResponse()
            XCTAssertEqual(r.status, 205)
            XCTAssertEqual(r.header("Content-Length"), "0", "a 205 says it has no content (RFC 9110 §15.3.6)")
            XCTAssertNil(r.header("Transfer-Encoding"))
            XCTAssertEqual(r.body, [])
            // The connection's framing held: the next answer on it is read as its own.
            XCTAssertEqual(try c.readResponse().status, 205)
        }
    }

    func testEmptyLinesBeforeTheRequestLine_countTowardTheHeadBound() throws {
        let h = try Harness(workers: 1)
        defer { h.stop() }
        // A few are fine (RFC 9112 §2.2).
        let ok = try h.raw(String(repeating: "\r\n", count: 500) + "GET /api/user HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        XCTAssertEqual(ok.status, 200)
        // 64 KiB of them and more, sent in pieces the server reads one by one: refused as an oversized head.
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        let piece = String(repeating: "\r\n", count: 4096)
        for _ in 0..<9 {
            try c.send(piece)
            usleep(2_000)
        }
        try? c.send("GET /api/user HTTP/1.1\r\nHost: x\r\n\r\n")
        let r = try c.readResponse()
        XCTAssertEqual(r.status, 431)
        XCTAssertEqual(problem(r)["kind"] as? String, "request-too-large")
    }
}

import Foundation
import PeelDemo
@testable import PeelGateway
import PeelIO
import XCTest

/// What a request names, end to end: the host it is routed by (an absolute-form target's
/// authority over Host, canonical forms of both), and its path and query as the upstream gets them
/// (bytes that are not UTF-8 percent-encoded, never replaced; passthrough paths read as sent).
final class RequestTargetTests: XCTestCase {
    private func routing(_ file: String) throws -> RoutingConfig {
        try XCTUnwrap(try loadConfig(file: file, environment: ["PEEL_UPSTREAM": "http://127.0.0.1:1"]).routing)
    }

    /// `head` (with `raw` bytes spliced in at `{}`) on a fresh connection.
    private func send(_ h: Harness, _ head: String, raw: [UInt8] = []) throws -> BlockingClient.Response {
        let parts = head.components(separatedBy: "{}")
        var bytes = Array(parts[0].utf8)
        if parts.count > 1 { bytes += raw + Array(parts[1].utf8) }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try c.send(bytes)
        return try c.readResponse()
    }

    private func header(_ e: [String: Any], _ name: String) -> String? {
        echoedHeaders(e).first { $0.0.lowercased() == name }?.1
    }

    func testBytesThatAreNotUTF8_reachTheUpstreamPercentEncoded_soDistinctPathsStayDistinct() throws {
        let h = try Harness()
        defer { h.stop() }
        let ff = echo(try send(h, "GET /api/echo/{} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", raw: [0xFF]))
        let fe = echo(try send(h, "GET /api/echo/{} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", raw: [0xFE]))
        XCTAssertEqual(ff["target"] as? String, "/api/echo/%ff")
        XCTAssertEqual(fe["target"] as? String, "/api/echo/%fe")
        let query = echo(try send(h, "GET /api/echo/q?name={}&x=1 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", raw: [0xD6, 0xD0]))
        XCTAssertEqual(query["target"] as? String, "/api/echo/q?name=%d6%d0&x=1", "a GBK query keeps its octets")
        // Well-formed UTF-8 in a path as before: each byte escaped the same way.
        let utf8 = echo(try send(h, "GET /api/echo/caf{} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", raw: [0xC3, 0xA9]))
        XCTAssertEqual(utf8["target"] as? String, "/api/echo/caf%c3%a9")
    }

    func testARawOverlongForm_isRefusedAsItsEscapedFormIs() throws {
        let h = try Harness()
        defer { h.stop() }
        h.upstream.resetCount()
        for raw: [UInt8] in [[0xC0, 0xAE, 0xC0, 0xAE], [0xE0, 0x80, 0xAF], [0xC1, 0x9C]] {
            let r = try send(h, "GET /api/{}/user HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", raw: raw)
            XCTAssertEqual(r.status, 400, r.text)
            XCTAssertEqual(problem(r)["detail"] as? String, "path holds an overlong UTF-8 encoding", "\(raw)")
        }
        XCTAssertEqual(h.upstream.requestCount, 0)
    }
}

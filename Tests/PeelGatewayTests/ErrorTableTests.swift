import PeelEnvelope
import Foundation
import PeelDemo
import PeelGateway
import PeelIO
import XCTest

/// Every row of the SPEC error table, produced through a running gateway against the fake upstream.
final class ErrorTableTests: XCTestCase {
    var h: Harness!

    override func setUpWithError() throws {
        h = try Harness { c in
            c.calls.timeout = 1
            c.calls.connectTimeout = 1
            c.envelope.dialect.codeStatus = CodeStatusMap([2002: 409])
            c.probe.fall = 1000  // these tests provoke transport failures on purpose; stay online
        }
    }
    override func tearDown() { h.stop() }

    private func expect(_ path: String, status: Int, kind: String, code: Int, method: String = "GET",
                        headers: [(String, String)] = [], file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
        let r = try h.request(method, path, headers: headers)
        XCTAssertEqual(r.status, status, "\(path): \(r.text)", file: file, line: line)
        let p = problem(r, file: file, line: line)
        XCTAssertEqual(p["kind"] as? String, kind, path, file: file, line: line)
        XCTAssertEqual(p["code"] as? Int, code, path, file: file, line: line)
        XCTAssertEqual(p["status"] as? Int, status, path, file: file, line: line)
        XCTAssertEqual(p["type"] as? String, "urn:peel:problem:" + kind, path, file: file, line: line)
        XCTAssertNotNil(p["title"] as? String, file: file, line: line)
        XCTAssertNotNil(p["detail"] as? String, file: file, line: line)
        XCTAssertEqual(p["request_id"] as? String, r.header("X-Request-Id"), file: file, line: line)
        return p
    }

    func testBusinessError_defaultsTo422WithUpstreamMessageAndCode() throws {
        let p = try expect("/api/business-error", status: 422, kind: "business-error", code: 1001)
        XCTAssertEqual(p["detail"] as? String, "insufficient balance")
        XCTAssertEqual(p["upstream_status"] as? Int, 200)
    }

    func testAuthExpired_code7Is401() throws {
        let p = try expect("/api/token-expired", status: 401, kind: "auth-expired", code: 7)
        XCTAssertEqual(p["detail"] as? String, "token expired")
    }

    func testBadUpstreamFormat_forEveryMalformedBody() throws {
        for path in ["/api/html", "/api/array", "/api/invalid-json", "/api/duplicate", "/api/no-code", "/api/code-float",
                     "/api/message-number", "/api/empty"] {
            let p = try expect(path, status: 502, kind: "bad-upstream-format", code: -100)
            XCTAssertEqual(p["upstream_status"] as? Int, 200, path)
        }
    }

    func testBadUpstreamFormat_detailInChineseWhenPreferred() throws {
        let p = try expect("/api/html", status: 502, kind: "bad-upstream-format", code: -100,
                           headers: [("Accept-Language", "zh-CN,zh;q=0.9,en;q=0.5")])
        XCTAssertEqual(p["detail"] as? String, "服务器数据结构错误")
    }

    func testUpstreamUnreachable_whenConnectionRefused() throws {
        h.stop()
        h = try Harness { c in c.upstream = try! UpstreamURL.parse("http://127.0.0.1:1").get(); c.probe.fall = 1000 }
        _ = try expect("/api/user", status: 502, kind: "upstream-unreachable", code: -101)
    }

    func testUpstreamUnreachable_whenResetBeforeAnyAnswer() throws {
        _ = try expect("/fault/reset", status: 502, kind: "upstream-unreachable", code: -101)
    }

    func testBadUpstreamFormat_whenResetOrClosedAfterTheStatusLine() throws {
        // The upstream answered, then broke its answer: its bug, not a lost upstream (issue 14).
        for path in ["/fault/close-mid-body", "/fault/close-after-headers", "/fault/reset-mid-body"] {
            _ = try expect(path, status: 502, kind: "bad-upstream-format", code: -100)
        }
    }

    func testUpstreamTimeout_whenUpstreamStalls() throws {
        _ = try expect("/fault/stall", status: 504, kind: "upstream-timeout", code: -102)
        _ = try expect("/api/slow?ms=3000", status: 504, kind: "upstream-timeout", code: -102)
    }

    func testUpstreamError_keeps4xxAndMaps5xxTo502() throws {
        let p404 = try expect("/api/status/404", status: 404, kind: "upstream-error", code: 5001)
        XCTAssertEqual(p404["upstream_status"] as? Int, 404)
        XCTAssertEqual(p404["detail"] as? String, "upstream said 404")
        let p500 = try expect("/fault/5xx", status: 502, kind: "upstream-error", code: 5000)
        XCTAssertEqual(p500["upstream_status"] as? Int, 500)
        let plain = try expect("/api/status-plain/503", status: 502, kind: "upstream-error", code: -104)
        XCTAssertEqual(plain["upstream_status"] as? Int, 503)
    }

    func testRequestTooLarge_is413AndNeverReachesUpstream() throws {
        h.stop()
        h = try Harness { c in c.memory.maxBody = 1024 }
        let before = h.upstream.requestCount
        let r = try h.request("POST", "/api/echo", headers: [("Content-Type", "text/plain")], body: [UInt8](repeating: 0x61, count: 4096))
        XCTAssertEqual(r.status, 413)
        let p = problem(r)
        XCTAssertEqual(p["kind"] as? String, "request-too-large")
        XCTAssertEqual(p["code"] as? Int, -105)
        XCTAssertEqual(h.upstream.requestCount, before)
    }

    func testUpstreamTooLarge_whenBodyExceedsLimit() throws {
        h.stop()
        h = try Harness { c in c.calls.maxResponseBody = 64 * 1024 }
        _ = try expect("/api/large?kb=256", status: 502, kind: "upstream-too-large", code: -107)
        XCTAssertEqual(try h.request("GET", "/api/user").status, 200, "gateway keeps serving after a too-large answer")
    }

    func testOffline_isImmediate503WithRetryAfterAndNoUpstreamCall() throws {
        h.stop()
        h = try Harness { c in
            c.upstream = try! UpstreamURL.parse("http://127.0.0.1:1").get()
            c.probe.interval = 0.1
            c.probe.timeout = 0.1
            c.calls.connectTimeout = 0.1
            c.probe.fall = 1
        }
        XCTAssertTrue(h.eventually { h.gateway.reachability.isDown })
        let r = try h.request("GET", "/api/user")
        XCTAssertEqual(r.status, 503)
        XCTAssertEqual(r.header("Retry-After"), "1")
        let p = problem(r)
        XCTAssertEqual(p["kind"] as? String, "offline")
        XCTAssertEqual(p["code"] as? Int, -103)
        XCTAssertEqual(p["detail"] as? String, "The network is unavailable, please try again later")
        let zh = problem(try h.request("GET", "/api/user", headers: [("Accept-Language", "zh")]))
        XCTAssertEqual(zh["detail"] as? String, "当前网络不可用，请检查网络稍后再试")
    }

    func testProtocolViolations_areBadUpstreamFormat() throws {
        _ = try expect("/fault/bad-gzip", status: 502, kind: "bad-upstream-format", code: -100)
        _ = try expect("/fault/bad-chunking", status: 502, kind: "bad-upstream-format", code: -100)
    }

    func testSuccessVariants_nullNoDataCodeStringBomTextHtmlGzip() throws {
        let null = try h.request("GET", "/api/null")
        XCTAssertEqual(null.status, 200)
        XCTAssertEqual(null.text, "null")
        let none = try h.request("GET", "/api/nodata")
        XCTAssertEqual(none.status, 204)
        XCTAssertTrue(none.body.isEmpty)
        XCTAssertEqual(try h.request("GET", "/api/code-string").text, #"{"id":42}"#)
        XCTAssertEqual(try h.request("GET", "/api/bom").text, DemoCatalog.userData)
        XCTAssertEqual(try h.request("GET", "/api/text-json").text, DemoCatalog.userData)
        let gz = try h.request("GET", "/api/gzip")
        XCTAssertEqual(gz.status, 200)
        XCTAssertNil(gz.header("Content-Encoding"))
        XCTAssertEqual(try h.request("GET", "/api/created").status, 201)
    }

    func testPassthrough_imagesKeepTypeAndBytes() throws {
        let direct = try XCTUnwrap(BlockingClient.get(host: "127.0.0.1", port: h.upstream.port, path: "/api/image"))
        let r = try h.request("GET", "/api/image")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.header("Content-Type"), "image/png")
        XCTAssertEqual(r.body, direct.body)
    }
}

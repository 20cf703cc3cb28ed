import PeelEnvelope
import Foundation
import PeelDemo
@testable import PeelGateway
import PeelIO
import XCTest

final class ForwardingTests: XCTestCase {
    var h: Harness!

    override func setUpWithError() throws { h = try Harness() }
    override func tearDown() { h.stop() }

    func testUnwrap_returnsDataBytesExactly() throws {
        let r = try h.request("GET", "/api/user")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.text, DemoCatalog.userData)
        XCTAssertEqual(r.header("Content-Type"), "application/json")
        XCTAssertNotNil(r.header("X-Request-Id"))
    }

    func testUnwrap_keepsNumbersEscapesAndOrderByteForByte() throws {
        let r = try h.request("GET", "/api/exact")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.text, DemoCatalog.exactData)
        for literal in ["1.10", "12345678901234567890", "-0.0", "中文"] {
            XCTAssertTrue(r.text.contains(literal), "\(literal) missing from \(r.text)")
        }
    }

    func testForward_everyMethodWithPathQueryAndBody() throws {
        for method in ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] {
            let body: [UInt8] = Array("payload-\(method)".utf8)
            let r = try h.request(method, "/api/echo?x=1&y=%20z", headers: [("Content-Type", "text/plain")], body: body)
            // Answers to OPTIONS pass unjudged (RFC 9110 §9.3.7): the envelope arrives whole.
            let e = method == "OPTIONS" ? envelopeData(r) : echo(r)
            XCTAssertEqual(e["method"] as? String, method)
            XCTAssertEqual(e["target"] as? String, "/api/echo?x=1&y=%20z")
            XCTAssertEqual(e["body"] as? String, String(decoding: body, as: UTF8.self))
        }
    }

    /// The `data` member of a passed-through envelope.
    private func envelopeData(_ r: BlockingClient.Response) -> [String: Any] {
        let obj = try? JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any]
        return obj?["data"] as? [String: Any] ?? [:]
    }

    func testForward_targetKeepsPercentEscapesAsSent() throws {
        // Upper-case %-escapes stay upper-case: signed query strings depend on the exact bytes.
        let target = "/api/echo/%C3%A9t%C3%A9?q=%E4%B8%AD&sig=A%2Fb%3D"
        let e = echo(try h.request("GET", target))
        XCTAssertEqual(e["target"] as? String, target)
    }

    func testForward_bodyWithoutContentTypeGetsNoneInvented() throws {
        for method in ["GET", "POST", "DELETE"] {
            let e = echo(try h.request(method, "/api/echo", body: Array("raw".utf8)))
            XCTAssertEqual(e["body"] as? String, "raw", method)
            XCTAssertFalse(echoedHeaders(e).contains { $0.0.lowercased() == "content-type" }, "\(method): curl invented a Content-Type")
            XCTAssertTrue(echoedHeaders(e).contains { $0.0.lowercased() == "content-length" && $0.1 == "3" }, method)
        }
    }

    func testForward_headReturnsHeadersWithoutBody() throws {
        let r = try h.request("HEAD", "/api/user")
        XCTAssertEqual(r.status, 200)
        XCTAssertTrue(r.body.isEmpty)
    }

    func testForward_dropsHopByHopAndConnectionNamedHeaders() throws {
        let e = echo(try h.request("GET", "/api/echo", headers: [
            ("Connection", "close, X-Secret"), ("X-Secret", "1"), ("Keep-Alive", "timeout=5"), ("TE", "trailers"),
            ("Upgrade", "h2c"), ("Proxy-Authorization", "Basic Zm9v"), ("X-Kept", "yes"),
            ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"), ("tracestate", "a=b"),
        ]))
        let names = Set(echoedHeaders(e).map { $0.0.lowercased() })
        for dropped in ["x-secret", "keep-alive", "te", "upgrade", "proxy-authorization", "connection"] {
            XCTAssertFalse(names.contains(dropped), "\(dropped) was forwarded")
        }
        let headers = echoedHeaders(e)
        XCTAssertTrue(headers.contains { $0 == ("X-Kept", "yes") })
        XCTAssertTrue(headers.contains { $0 == ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01") })
        XCTAssertTrue(headers.contains { $0 == ("tracestate", "a=b") })
    }

    func testForward_setsHostAndForwardedHeaders() throws {
        let e = echo(try h.request("GET", "/api/echo", headers: [("X-Forwarded-For", "10.1.2.3")]))
        let headers = echoedHeaders(e)
        func value(_ n: String) -> String? { headers.first { $0.0.lowercased() == n }?.1 }
        XCTAssertEqual(value("host"), "127.0.0.1:\(h.upstream.port)")
        // From a peer outside trusted_proxies (none by default) the incoming chain is not believed.
        XCTAssertEqual(value("x-forwarded-for"), "127.0.0.1")
        XCTAssertEqual(value("x-forwarded-proto"), "http")
        XCTAssertEqual(value("x-forwarded-host"), "127.0.0.1:\(h.port)")
        XCTAssertNil(value("expect"))
    }

    func testRequestId_keptWhenSaneGeneratedOtherwiseAndEchoed() throws {
        let kept = try h.request("GET", "/api/echo", headers: [("X-Request-Id", "abc-123")])
        XCTAssertEqual(kept.header("X-Request-Id"), "abc-123")
        XCTAssertTrue(echoedHeaders(echo(kept)).contains { $0 == ("X-Request-Id", "abc-123") })
        let made = try h.request("GET", "/api/user", headers: [("X-Request-Id", "bad\"id")])
        let id = try XCTUnwrap(made.header("X-Request-Id"))
        XCTAssertNotEqual(id, "bad\"id")
        XCTAssertFalse(id.isEmpty)
        let problemAnswer = try h.request("GET", "/api/business-error", headers: [("X-Request-Id", "p-1")])
        XCTAssertEqual(problemAnswer.header("X-Request-Id"), "p-1")
        XCTAssertEqual(problem(problemAnswer)["request_id"] as? String, "p-1")
    }

    func testForward_chunkedClientBodyArrivesWhole() throws {
        let c = try BlockingClient(host: "127.0.0.1", port: h.port)
        try c.send("POST /api/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
        let e = echo(try c.readResponse())
        XCTAssertEqual(e["body"] as? String, "hello world")
    }

    func testForward_largeBinaryBodyByteForByte() throws {
        var body = [UInt8](repeating: 0, count: 300_000)
        for i in body.indices { body[i] = UInt8(truncatingIfNeeded: i &* 31 &+ 7) }
        let e = echo(try h.request("POST", "/api/echo", headers: [("Content-Type", "application/octet-stream")], body: body))
        XCTAssertEqual(e["body_length"] as? Int, body.count)
        var hash: UInt64 = 0xcbf29ce484222325
        for b in body { hash = (hash ^ UInt64(b)) &* 0x100000001b3 }
        XCTAssertEqual(e["body_fnv1a"] as? String, String(hash, radix: 16).leftPad16())
    }

    func testKeepAlive_manyRequestsOnOneConnection() throws {
        let c = try BlockingClient(host: "127.0.0.1", port: h.port)
        for _ in 0..<20 {
            try c.send("GET /api/user HTTP/1.1\r\nHost: x\r\n\r\n")
            let r = try c.readResponse()
            XCTAssertEqual(r.text, DemoCatalog.userData)
        }
        try c.send("GET /api/user HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        let r10 = try c.readResponse()
        XCTAssertEqual(r10.status, 200)
        XCTAssertEqual(r10.header("Connection")?.lowercased(), "keep-alive")
    }

    func testBasePath_isJoinedWithOneSlash() throws {
        h.stop()
        h = try Harness { c in c.upstream.basePath = "/v1" }
        let e = echo(try h.request("GET", "/api/echo?q=1"))
        XCTAssertEqual(e["target"] as? String, "/v1/api/echo?q=1")
    }

    func testRefuse_connectAbsoluteFormAndClimbingPaths() throws {
        let upstreamBefore = h.upstream.requestCount
        let cases = [
            "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
            "GET http://evil.example/api/user HTTP/1.1\r\nHost: evil.example\r\n\r\n",
            "GET http://other.example/api/user HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
            "GET /../secret HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET /api/../../secret HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET /%2e%2e/secret HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET /api/%2E%2E%2f%2e%2e/secret HTTP/1.1\r\nHost: x\r\n\r\n",
            "TRACE /api/user HTTP/1.1\r\nHost: x\r\n\r\n",
        ]
        for raw in cases {
            let r = try h.raw(raw)
            XCTAssertEqual(r.status, 400, raw)
            let p = problem(r)
            XCTAssertEqual(p["kind"] as? String, "bad-request", raw)
            XCTAssertEqual(p["code"] as? Int, -106, raw)
        }
        XCTAssertEqual(h.upstream.requestCount, upstreamBefore, "a refused request reached the upstream")
        // Dot-segments that stay inside the base path are forwarded as sent (the upstream resolves them;
        // the demo does not, so it answers 404, which proves the call reached it unchanged).
        let inside = try h.raw("GET /api/x/../user HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(inside.status, 404)
        XCTAssertEqual(problem(inside)["kind"] as? String, "upstream-error")
        XCTAssertEqual(h.upstream.lastRequest?.target, "/api/x/../user")
    }

    // RFC 9112 §3.2: a Host that is not a host and optional port gets 400 before anything uses it
    // (X-Forwarded-Host, Forwarded, rewritten Locations, the cache key).
    func testRefuse_hostThatIsNotAHostAndPort() throws {
        let before = h.upstream.requestCount
        for host in ["[::1", "[::1]x", "a:b:c", "a:80x", "[::1]:80:80", "a:", "[::1]:", "[1.2.3.4]", "a%zz"] {
            let r = try h.raw("GET /api/user HTTP/1.1\r\nHost: \(host)\r\n\r\n")
            XCTAssertEqual(r.status, 400, host)
            XCTAssertEqual(problem(r)["kind"] as? String, "bad-request", host)
        }
        XCTAssertEqual(h.upstream.requestCount, before, "a refused Host reached the upstream")
        XCTAssertEqual(try h.raw("GET /api/user HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n").status, 200)
    }

    func testAbsoluteForm_namingPeelItselfIsAccepted() throws {
        let r = try h.raw("GET http://127.0.0.1:\(h.port)/api/user HTTP/1.1\r\nHost: 127.0.0.1:\(h.port)\r\n\r\n")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.text, DemoCatalog.userData)
    }

    func testRefuse_ambiguousFraming() throws {
        let before = h.upstream.requestCount
        let te = try h.raw("POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        XCTAssertEqual(te.status, 400)
        let noHost = try h.raw("GET /api/user HTTP/1.1\r\n\r\n")
        XCTAssertEqual(noHost.status, 400)
        XCTAssertEqual(h.upstream.requestCount, before)
    }

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
}

extension String {
    func leftPad16() -> String { count >= 16 ? self : String(repeating: "0", count: 16 - count) + self }
}

final class ResponseHeaderTests: XCTestCase {
    func testUpstreamFields_endToEndKeptHopByHopAndEnvelopeFieldsDropped() throws {
        let h = try Harness()
        defer { h.stop() }
        let r = try h.request("GET", "/api/with-headers")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.text, #"{"id":44}"#)
        XCTAssertEqual(r.header("Cache-Control"), "private, max-age=60")
        XCTAssertEqual(r.header("ETag"), "\"v44\"")
        XCTAssertEqual(r.header("X-Upstream"), "demo")
        XCTAssertEqual(r.headers.filter { $0.0.lowercased() == "set-cookie" }.map(\.1), ["a=1; Path=/", "b=2; Path=/"])
        for dropped in ["content-md5", "keep-alive", "proxy-authenticate", "trailer", "upgrade", "content-encoding"] {
            XCTAssertNil(r.header(dropped), "\(dropped) passed through")
        }
        XCTAssertEqual(r.header("Content-Length"), "9", "recomputed for the data bytes")
        XCTAssertEqual(r.headers.filter { $0.0.lowercased() == "content-type" }.map(\.1), ["application/json"])
    }

    func testCodeStatusMap_setsTheBusinessErrorStatus() throws {
        let h = try Harness { c in c.envelope.dialect.codeStatus = CodeStatusMap([1002: 404]) }
        defer { h.stop() }
        let mapped = try h.request("GET", "/api/code-1002")
        XCTAssertEqual(mapped.status, 404)
        XCTAssertEqual(problem(mapped)["kind"] as? String, "business-error")
        XCTAssertEqual(problem(mapped)["code"] as? Int, 1002)
        XCTAssertEqual(try h.request("GET", "/api/business-error").status, 422, "unmapped codes keep the default")
    }
}

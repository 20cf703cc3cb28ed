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

    func testAnAbsoluteFormTargetNamingPeel_isRoutedByItsAuthority_andHostIsIgnored() throws {
        let pay = try DemoUpstream(listen: HostPort(host: "127.0.0.1", port: 0))
        try pay.start()
        defer { pay.stop() }
        let r = try routing("""
            {"upstreams": {"pay": {"endpoints": ["\(pay.baseURL)"]}},
             "routes": [{"host": "other", "prefix": "/", "upstream": "default"},
                        {"host": "127.0.0.1", "prefix": "/", "upstream": "pay"}]}
            """)
        // A trusted peer: its X-Forwarded-Host would otherwise be believed.
        let loopback = try IPNetwork.parse("127.0.0.1/32").get()
        let h = try Harness { c in
            c.routing = r; c.calls.preserveHost = true; c.clients.trustedProxies = [loopback]; c.calls.forwardFields = .both
        }
        defer { h.stop() }
        h.upstream.resetCount()
        let authority = "127.0.0.1:\(h.port)"
        // RFC 9112 §3.2.2: the target's authority names the host; Host and X-Forwarded-Host are ignored.
        let absolute = try h.raw("GET http://\(authority)/api/echo/x?a=1 HTTP/1.1\r\nHost: other\r\nX-Forwarded-Host: evil.example\r\n"
                                 + "Connection: close\r\n\r\n")
        let e = echo(absolute)
        XCTAssertEqual(pay.requestCount, 1, "routed by Host, not by the target's authority")
        XCTAssertEqual(h.upstream.requestCount, 0)
        XCTAssertEqual(e["target"] as? String, "/api/echo/x?a=1")
        XCTAssertEqual(header(e, "host"), authority, "the preserved Host is the one the target names")
        XCTAssertEqual(header(e, "x-forwarded-host"), authority)
        XCTAssertEqual(header(e, "forwarded").map { $0.contains("host=\"\(authority)\"") }, true, header(e, "forwarded") ?? "none")

        // Origin-form, Host routes as before.
        XCTAssertEqual(try h.raw("GET /api/echo/x HTTP/1.1\r\nHost: other\r\nConnection: close\r\n\r\n").status, 200)
        XCTAssertEqual(h.upstream.requestCount, 1)
        // An absolute-form target naming any other authority stays refused, whatever Host says.
        let foreign = try h.raw("GET http://other/api/echo/x HTTP/1.1\r\nHost: \(authority)\r\nConnection: close\r\n\r\n")
        XCTAssertEqual(foreign.status, 400, foreign.text)
        XCTAssertEqual(pay.requestCount + h.upstream.requestCount, 2)
        // The Host field is still checked (RFC 9112 §3.2): an invalid one is refused even when ignored.
        let badHost = try h.raw("GET http://\(authority)/api/echo/x HTTP/1.1\r\nHost: a:b:c\r\nConnection: close\r\n\r\n")
        XCTAssertEqual(badHost.status, 400, badHost.text)
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

    func testRequestHosts_areCanonicalisedAsRouteHostsAre() throws {
        let pay = try DemoUpstream(listen: HostPort(host: "127.0.0.1", port: 0))
        try pay.start()
        defer { pay.stop() }
        let r = try routing("""
            {"upstreams": {"pay": {"endpoints": ["\(pay.baseURL)"]}},
             "routes": [{"prefix": "/", "upstream": "default"},
                        {"host": "[::1]", "prefix": "/", "upstream": "pay"},
                        {"host": "[2001:DB8:0:0:0:0:0:1]", "prefix": "/", "upstream": "pay"},
                        {"host": "api.example", "prefix": "/", "upstream": "pay"}]}
            """)
        XCTAssertEqual(r.routes[2].host, "[2001:db8::1]", "a route's IPv6 host is kept in its RFC 5952 form")
        let h = try Harness { c in c.routing = r }
        defer { h.stop() }
        h.upstream.resetCount()
        let hosts = ["[0:0:0:0:0:0:0:1]", "[0:0::1]:8080", "[::1]", "[2001:db8::0:1]", "[2001:0DB8::1]:80", "API.Example.", "%61pi.example",
                     "api.ex%41mple:81"]
        for host in hosts {
            let r = try h.raw("GET /api/user HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n")
            XCTAssertEqual(r.status, 200, "\(host): \(r.text)")
        }
        XCTAssertEqual(pay.requestCount, hosts.count, "every form of a route's host takes its route")
        XCTAssertEqual(h.upstream.requestCount, 0)
        XCTAssertEqual(try h.raw("GET /api/user HTTP/1.1\r\nHost: [::2]\r\nConnection: close\r\n\r\n").status, 200)
        XCTAssertEqual(h.upstream.requestCount, 1, "another address takes the route without a host")
    }

    func testPassthroughPaths_matchThePathAsSent_beforeTheRoutesPrefixIsStripped() throws {
        let r = try routing("""
            {"routes": [{"prefix": "/", "upstream": "default"},
                        {"prefix": "/raw/", "upstream": "default", "strip_prefix": true, "passthrough_paths": ["/raw/api/user"]},
                        {"prefix": "/stripped/", "upstream": "default", "strip_prefix": true, "passthrough_paths": ["/api/user"]}]}
            """)
        let h = try Harness { c in c.routing = r }
        defer { h.stop() }
        // As sent: `/raw/api/user` passes through; the upstream got `/api/user` and its envelope comes whole.
        let passed = try h.request("GET", "/raw/api/user")
        XCTAssertEqual(passed.status, 200, passed.text)
        XCTAssertEqual(passed.text, DemoCatalog.userEnvelope)
        XCTAssertEqual(h.upstream.lastRequest?.target, "/api/user")
        // The stripped path is not what they match: `/stripped/api/user` is unwrapped.
        let judged = try h.request("GET", "/stripped/api/user")
        XCTAssertEqual(judged.text, DemoCatalog.userData)
        XCTAssertEqual(h.upstream.lastRequest?.target, "/api/user")
    }
}

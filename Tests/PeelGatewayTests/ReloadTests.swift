import PeelEnvelope
import Foundation
import PeelGateway
import PeelIO
import XCTest

/// `Gateway.reload` (what SIGHUP does after re-reading the configuration).
final class ReloadTests: XCTestCase {
    func testReload_appliesUpstreamAndLimitsToNewRequestsAndKeepsListenAndWorkers() throws {
        let other = try RawUpstream { _ in .send(RawUpstream.envelope("\"other\"")) }
        defer { other.stop() }
        let h = try RawHarness(workers: 2) { _ in .send(RawUpstream.envelope("\"first\"")) }
        defer { h.stop() }
        XCTAssertEqual(try h.request("GET", "/a").text, "\"first\"")

        var next = h.gateway.config
        next.upstream = try UpstreamURL.parse(other.baseURL).get()
        next.maxBody = 4
        next.workers = 7
        next.listen = HostPort(host: "127.0.0.1", port: 1)
        XCTAssertEqual(h.gateway.reload(next), ["listen", "workers"])
        XCTAssertEqual(h.gateway.config.workers, 2)

        // Pooled handles and kept-alive connections of the old upstream are not used again.
        for _ in 0..<4 { XCTAssertEqual(try h.request("GET", "/a").text, "\"other\"") }
        XCTAssertEqual(try h.request("POST", "/a", body: Array("12345".utf8)).status, 413)
        XCTAssertEqual(try h.request("GET", "/a").status, 200, "still listening where it was")
    }

    func testReload_aCallInFlightIsJudgedByTheRulesItStartedUnder() throws {
        let h = try RawHarness { r in
            let five = RawUpstream.answer("{\"code\":5,\"message\":\"five\",\"data\":1}")
            return r.path == "/slow" ? .sendInTwoParts("", after: 0.3, five) : .send(five)
        }
        defer { h.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try c.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        // Reload once the call is with the upstream (its answer comes 0.3 s later).
        let deadline = Date().addingTimeInterval(2)
        while h.seen("/slow").isEmpty && Date() < deadline { usleep(10_000) }
        XCTAssertEqual(h.seen("/slow").count, 1)
        var next = h.gateway.config
        next.envelope.dialect.successCodes = CodeSet([5])
        XCTAssertEqual(h.gateway.reload(next), [])
        XCTAssertEqual(try c.readResponse().status, 422, "judged by the rules it started under")
        XCTAssertEqual(try h.request("GET", "/now").status, 200, "new calls use the reloaded rules")
    }

    // Issue 26: the whole route is pinned when the call is planned, not only its envelope rules. A
    // reload between the call's send and its head changes the dialect, CORS and compression at
    // once; the answer follows the generation the call started under in every part.
    func testReload_betweenSendAndHead_theAnswerFollowsOneGeneration() throws {
        let body = #"{"code":0,"message":"ok","data":{"x":1},"errcode":0}"#
        let h = try RawHarness(configure: { c in
            c.corsOrigins = ["https://a.example"]
            c.compression = []
        }) { r in
            let answer = RawUpstream.answer(body)
            return r.path == "/slow" ? .sendInTwoParts("", after: 0.3, answer) : .send(answer)
        }
        defer { h.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try c.send("GET /slow HTTP/1.1\r\nHost: x\r\nOrigin: https://a.example\r\nAccept-Encoding: gzip\r\n\r\n")
        let deadline = Date().addingTimeInterval(2)
        while h.seen("/slow").isEmpty && Date() < deadline { usleep(10_000) }
        XCTAssertEqual(h.seen("/slow").count, 1)
        var next = h.gateway.config
        next.envelope.dialect = .wechat
        next.corsOrigins = ["https://b.example"]
        next.compression = [.gzip]
        next.compressionMinSize = 1
        XCTAssertEqual(h.gateway.reload(next), [])
        let old = try c.readResponse()
        XCTAssertEqual(old.status, 200)
        XCTAssertEqual(old.text, #"{"x":1}"#, "judged by the dialect it started under")
        XCTAssertEqual(old.header("access-control-allow-origin"), "https://a.example", "CORS of its own generation")
        XCTAssertNil(old.header("content-encoding"), "not compressed: its generation had compression off")

        let n = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try n.send("GET /now HTTP/1.1\r\nHost: x\r\nOrigin: https://a.example\r\n\r\n")
        let now = try n.readResponse()
        XCTAssertEqual(now.text, #"{"code":0,"message":"ok","data":{"x":1}}"#, "new calls: the rest of the object under wechat")
        XCTAssertNil(now.header("access-control-allow-origin"), "new calls: a.example is no longer allowed")
    }

    // MARK: CORS and redirect rewriting follow a reload

    func testReloadAddingCorsOrigins_makesPeelAnswerPreflightsItself() throws {
        let h = try RawHarness { _ in .send(RawUpstream.envelope("\"upstream\"")) }
        defer { h.stop() }
        let preflight = "OPTIONS /api/x HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example\r\n"
            + "Access-Control-Request-Method: POST\r\nConnection: close\r\n\r\n"
        let before = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try before.send(preflight)
        XCTAssertEqual(try before.readResponse().status, 200, "no CORS managed yet: the upstream answers")
        XCTAssertEqual(h.seen("/api/x").count, 1)

        var next = h.gateway.config
        next.corsOrigins = ["https://app.example"]
        XCTAssertEqual(h.gateway.reload(next), [])
        let after = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try after.send(preflight)
        let r = try after.readResponse()
        XCTAssertEqual(r.status, 204, "the reloaded CORS policy is not used: \(r.text)")
        XCTAssertEqual(r.header("Access-Control-Allow-Origin"), "https://app.example")
        XCTAssertEqual(h.seen("/api/x").count, 1, "the preflight reached the upstream after the reload")
    }

    private func redirectHarness(rewriting: Bool) throws -> RawHarness {
        try RawHarness(configure: { $0.rewriteRedirects = rewriting }) { r in
            .send("HTTP/1.1 302 Found\r\nLocation: /target\r\nContent-Length: 0\r\n\r\n")
        }
    }

    private func locations(_ h: RawHarness) throws -> [String] {
        let r = try h.request("GET", "/go")
        XCTAssertEqual(r.status, 302, r.text)
        return r.headers.filter { $0.0.lowercased() == "location" }.map(\.1)
    }

    func testReloadTurningRewriteRedirectsOn_keepsOneLocation() throws {
        let h = try redirectHarness(rewriting: false)
        defer { h.stop() }
        XCTAssertEqual(try locations(h).count, 1)
        var next = h.gateway.config
        next.rewriteRedirects = true
        XCTAssertEqual(h.gateway.reload(next), [])
        let after = try locations(h)
        XCTAssertEqual(after.count, 1, "Location fields after turning rewriting on: \(after)")
    }

    func testReloadTurningRewriteRedirectsOff_keepsOneLocation() throws {
        let h = try redirectHarness(rewriting: true)
        defer { h.stop() }
        XCTAssertEqual(try locations(h).count, 1)
        var next = h.gateway.config
        next.rewriteRedirects = false
        XCTAssertEqual(h.gateway.reload(next), [])
        let after = try locations(h)
        XCTAssertEqual(after, ["/target"], "Location fields after turning rewriting off")
    }
}

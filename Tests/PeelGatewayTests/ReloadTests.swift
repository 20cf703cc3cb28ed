import PeelEnvelope
import Foundation
import PeelGateway
import PeelIO
import PeelTestSupport
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
        next.memory.maxBody = 4
        next.listeners.workers = 7
        next.listeners.client = HostPort(host: "127.0.0.1", port: 1)
        XCTAssertEqual(h.gateway.reload(next), ["listen", "workers"])
        XCTAssertEqual(h.gateway.config.listeners.workers, 2)

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
            c.cors.origins = ["https://a.example"]
            c.compression.codings = []
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
        next.cors.origins = ["https://b.example"]
        next.compression.codings = [.gzip]
        next.compression.minSize = 1
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
        next.cors.origins = ["https://app.example"]
        XCTAssertEqual(h.gateway.reload(next), [])
        let after = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try after.send(preflight)
        let r = try after.readResponse()
        XCTAssertEqual(r.status, 204, "the reloaded CORS policy is not used: \(r.text)")
        XCTAssertEqual(r.header("Access-Control-Allow-Origin"), "https://app.example")
        XCTAssertEqual(h.seen("/api/x").count, 1, "the preflight reached the upstream after the reload")
    }

    private func redirectHarness(rewriting: Bool) throws -> RawHarness {
        try RawHarness(configure: { $0.rewrite.redirects = rewriting }) { r in
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
        next.rewrite.redirects = true
        XCTAssertEqual(h.gateway.reload(next), [])
        let after = try locations(h)
        XCTAssertEqual(after.count, 1, "Location fields after turning rewriting on: \(after)")
    }

    func testReloadTurningRewriteRedirectsOff_keepsOneLocation() throws {
        let h = try redirectHarness(rewriting: true)
        defer { h.stop() }
        XCTAssertEqual(try locations(h).count, 1)
        var next = h.gateway.config
        next.rewrite.redirects = false
        XCTAssertEqual(h.gateway.reload(next), [])
        let after = try locations(h)
        XCTAssertEqual(after, ["/target"], "Location fields after turning rewriting off")
    }

    /// The routing sections of `file` (no `--upstream` group in them).
    private func routing(_ file: String) throws -> RoutingConfig {
        try XCTUnwrap(try loadConfig(file: file, environment: ["PEEL_UPSTREAM": "http://127.0.0.1:1"]).routing)
    }

    // The whole generation is pinned, not only the route: a reload between a call's send and its
    // answer changes the dialect, CORS, the gzip level, the default timeout and the offline cache's
    // max age at once. The call's first endpoint loses it after the reload, so its failover attempt
    // is sent under the new configuration too; every part of the answer follows the old one.
    func testReload_betweenSendAndAnswer_everyPartOfTheAnswerComesFromTheCallsGeneration() throws {
        let data = #"{"x":""# + String(repeating: "peel ", count: 200) + #""}"#
        let body = #"{"code":0,"message":"ok","data":"# + data + #","errcode":0}"#
        // Shared (public) and 100 s old: kept under an hour's max age (the old one), refused under 10 s (the new one).
        let answer = RawUpstream.answer(body, fields: ["Cache-Control: public", "Age: 100"])
        let first = try RawUpstream { r in r.path == "/probe" ? .send(RawUpstream.answer("{}")) : .closeAfter(0.5) }
        defer { first.stop() }
        let second = try RawUpstream { r in r.path == "/probe" ? .send(RawUpstream.answer("{}")) : .sendInTwoParts("", after: 0.6, answer) }
        defer { second.stop() }
        let routes = try routing("""
            {"upstreams": {"two": {"endpoints": ["\(first.baseURL)", "\(second.baseURL)"]}},
             "routes": [{"prefix": "/", "upstream": "two"}]}
            """)
        let h = try RawHarness(configure: { c in
            c.routing = routes
            c.calls.timeout = 5
            c.cors.origins = ["https://a.example"]
            c.compression.codings = [.gzip]
            c.compression.minSize = 1
            c.compression.gzipLevel = 1
            c.offline.capacity = 1 << 20
            c.offline.maxAge = 3600
        }) { _ in .send(RawUpstream.answer("{}")) }
        defer { h.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try c.send("GET /slow HTTP/1.1\r\nHost: x\r\nOrigin: https://a.example\r\nAccept-Encoding: gzip\r\n\r\n")
        let deadline = Date().addingTimeInterval(2)
        while !first.requests.contains(where: { $0.path == "/slow" }) && Date() < deadline { usleep(10_000) }
        XCTAssertTrue(second.requests.allSatisfy { $0.path != "/slow" }, "the first attempt goes to the first endpoint")
        var next = h.gateway.config
        next.envelope.dialect = .wechat
        next.cors.origins = ["https://b.example"]
        next.compression.gzipLevel = 9
        next.calls.timeout = 0.3
        next.offline.maxAge = 10
        XCTAssertEqual(h.gateway.reload(next), [])

        let old = try c.readResponse()
        XCTAssertEqual(old.status, 200, "the failover attempt keeps the 5 s timeout of its generation, not 0.3 s: \(old.text)")
        XCTAssertEqual(second.requests.filter { $0.path == "/slow" }.count, 1, "answered by the second endpoint")
        XCTAssertEqual(old.header("access-control-allow-origin"), "https://a.example", "CORS of its own generation")
        XCTAssertEqual(old.header("content-encoding"), "gzip")
        // RFC 1952 §2.3.1: XFL is 4 for zlib's fastest level, 2 for its best.
        XCTAssertEqual(old.body.count > 8 ? old.body[8] : 0, 4, "compressed at its generation's gzip level 1, not 9")
        XCTAssertEqual(gunzip(old.body).map { String(decoding: $0, as: UTF8.self) }, data, "judged by the dialect it started under")
        // Stored before the answer is written.
        XCTAssertEqual(h.gateway.offlineCache.entries, 1, "stored under its generation's max age (an hour), not 10 s")

        // Calls planned from now on take the new generation in every part.
        let n = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try n.send("GET /now HTTP/1.1\r\nHost: x\r\nOrigin: https://b.example\r\nAccept-Encoding: gzip\r\n\r\n")
        let now = try n.readResponse()
        XCTAssertEqual(now.status, 504, "the new 0.3 s timeout: \(now.text)")
        XCTAssertEqual(now.header("access-control-allow-origin"), "https://b.example")
    }

    // Turning the offline cache off stops every write at once (README), even for a call planned
    // while it was on: the call keeps its generation's max age, not the cache's being on.
    func testReload_turningTheCacheOff_stopsTheWriteOfACallInFlight() throws {
        let h = try RawHarness(configure: { c in c.offline.capacity = 1 << 20 }) { r in
            let answer = RawUpstream.envelope("1")
            return r.path == "/slow" ? .sendInTwoParts("", after: 0.3, answer) : .send(answer)
        }
        defer { h.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try c.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        let deadline = Date().addingTimeInterval(2)
        while h.seen("/slow").isEmpty && Date() < deadline { usleep(10_000) }
        var next = h.gateway.config
        next.offline.capacity = 0
        XCTAssertEqual(h.gateway.reload(next), [])
        XCTAssertEqual(try c.readResponse().status, 200)
        XCTAssertEqual(h.gateway.offlineCache.entries, 0, "stored after the cache was turned off")
    }

    // A backend drained by taking it out of the configuration must not keep Peel's connections:
    // the idle ones close within a second of the reload, and a call in flight to it finishes and
    // then closes its own.
    func testReload_removingAnEndpoint_closesItsIdleConnections_andACallInFlightFinishesFirst() throws {
        let removed = try RawUpstream { r in
            let answer = RawUpstream.envelope("\"old\"")
            return r.path == "/probe" ? .send(answer) : .sendInTwoParts("", after: 0.3, answer)
        }
        defer { removed.stop() }
        let kept = try RawUpstream { _ in .send(RawUpstream.envelope("\"new\"")) }
        defer { kept.stop() }
        let h = try RawHarness(configure: { c in c.upstream = try! UpstreamURL.parse(removed.baseURL).get() }) { _ in .close }
        defer { h.stop() }
        // Eight calls at once: eight connections, idle once answered.
        let clients = try (0..<8).map { _ in try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5) }
        for c in clients { try c.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n") }
        for c in clients { XCTAssertEqual(try c.readResponse().text, "\"old\"") }
        let idle = Set(removed.requests.filter { $0.path == "/a" }.map(\.connection))
        XCTAssertEqual(idle.count, 8)
        XCTAssertTrue(Set(removed.closed).isDisjoint(with: idle), "kept alive while configured")

        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try c.send("GET /held HTTP/1.1\r\nHost: x\r\n\r\n")
        let deadline = Date().addingTimeInterval(2)
        while !removed.requests.contains(where: { $0.path == "/held" }) && Date() < deadline { usleep(10_000) }
        let busy = try XCTUnwrap(removed.requests.first { $0.path == "/held" }?.connection)
        var next = h.gateway.config
        next.upstream = try UpstreamURL.parse(kept.baseURL).get()
        let reloaded = Date()
        XCTAssertEqual(h.gateway.reload(next), [])
        XCTAssertEqual(try c.readResponse().text, "\"old\"", "the call in flight finishes")
        // The probe's connection too: the endpoint's prober stops.
        var all = Set(removed.requests.map(\.connection))
        all.insert(busy)
        while !all.isSubset(of: Set(removed.closed)) && Date().timeIntervalSince(reloaded) < 1 { usleep(10_000) }
        XCTAssertTrue(all.isSubset(of: Set(removed.closed)),
                      "open 1 s after the reload: \(all.subtracting(removed.closed).sorted()) of \(all.sorted())")
        XCTAssertEqual(try h.request("GET", "/a").text, "\"new\"")
    }

    // A call planned before the reload can fail over to the removed endpoint after it, on a handle
    // made since: that connection closes too, within a second of the answer.
    func testReload_aFailoverAttemptToTheRemovedEndpoint_closesItsConnectionAfterwards() throws {
        let first = try RawUpstream { r in r.path == "/probe" ? .send(RawUpstream.answer("{}")) : .closeAfter(0.3) }
        defer { first.stop() }
        let removed = try RawUpstream { _ in .send(RawUpstream.envelope("\"removed\"")) }
        defer { removed.stop() }
        let group = { (endpoints: [RawUpstream]) in
            try self.routing("""
                {"upstreams": {"two": {"endpoints": [\(endpoints.map { "\"\($0.baseURL)\"" }.joined(separator: ", "))]}},
                 "routes": [{"prefix": "/", "upstream": "two"}]}
                """)
        }
        let routes = try group([first, removed])
        let h = try RawHarness(configure: { c in c.routing = routes }) { _ in .send(RawUpstream.answer("{}")) }
        defer { h.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try c.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
        let deadline = Date().addingTimeInterval(2)
        while !first.requests.contains(where: { $0.path == "/a" }) && Date() < deadline { usleep(10_000) }
        var next = h.gateway.config
        next.routing = try group([first])
        XCTAssertEqual(h.gateway.reload(next), [])
        XCTAssertEqual(try c.readResponse().text, "\"removed\"", "the failover attempt of the old route")
        let used = try XCTUnwrap(removed.requests.first { $0.path == "/a" }?.connection)
        let answered = Date()
        while !removed.closed.contains(used) && Date().timeIntervalSince(answered) < 1.5 { usleep(10_000) }
        XCTAssertTrue(removed.closed.contains(used), "the connection of the attempt stays open")
    }
}

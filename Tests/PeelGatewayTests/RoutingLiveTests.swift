import Foundation
import PeelDemo
@testable import PeelGateway
import PeelIO
import XCTest

/// Calls routed by the config file's `routes` to their groups, end to end through a real gateway
/// and real upstreams on port 0 (issue 27): each route's dialect and stripped prefix, `no-route`,
/// and one group offline while the others work.
final class RoutingLiveTests: XCTestCase {
    /// The routing sections of `file`, with `default` being the harness's upstream.
    private func routing(_ file: String) throws -> RoutingConfig {
        try XCTUnwrap(try loadConfig(file: file, environment: ["PEEL_UPSTREAM": "http://127.0.0.1:1"]).routing)
    }

    private func json(_ r: BlockingClient.Response) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any]) ?? [:]
    }

    func testEachRouteGoesToItsGroup_withItsDialectAndStrippedPrefix() throws {
        let pay = try DemoUpstream(listen: HostPort(host: "127.0.0.1", port: 0))
        try pay.start()
        defer { pay.stop() }
        let r = try routing("""
            {"upstreams": {"pay": {"endpoints": ["\(pay.baseURL)"]}},
             "routes": [{"prefix": "/", "upstream": "default"},
                        {"name": "pay", "prefix": "/pay/", "upstream": "pay", "strip_prefix": true, "dialect": "ruoyi"},
                        {"prefix": "/raw/", "upstream": "pay", "strip_prefix": true}]}
            """)
        let h = try Harness { c in c.routing = r }
        defer { h.stop() }
        h.upstream.resetCount()
        // The default route: the peel envelope unwrapped, from the harness's upstream.
        let user = try h.request("GET", "/api/user")
        XCTAssertEqual(user.status, 200, user.text)
        XCTAssertEqual(h.upstream.requestCount, 1)
        // The pay route judges with RuoYi's rules: the demo's `"code":0` is not RuoYi's success (200).
        let judged = try h.request("GET", "/pay/api/user")
        XCTAssertEqual(problem(judged)["kind"] as? String, "business-error", judged.text)
        XCTAssertEqual(pay.requestCount, 1)
        XCTAssertEqual(h.upstream.requestCount, 1, "the pay route's call reached the other group")
        // The prefix is stripped before the call goes out, the query kept.
        let echoed = echo(try h.request("GET", "/raw/api/echo/x?a=1"))
        XCTAssertEqual(echoed["target"] as? String, "/api/echo/x?a=1")
        XCTAssertEqual(pay.requestCount, 2)
        // Stripped, `/raw/../admin` would climb above the group's base path: refused, never sent.
        let climbing = try h.raw("GET /raw/%2e%2e/admin HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        XCTAssertEqual(problem(climbing)["kind"] as? String, "bad-request", climbing.text)
        XCTAssertEqual(pay.requestCount + h.upstream.requestCount, 3)

        // Metrics count calls by route and group, with label values from the config alone.
        let metrics = String(decoding: try h.admin("/metrics").body, as: UTF8.self)
        XCTAssertTrue(metrics.contains(#"peel_route_requests_total{route="pay",upstream="pay",class="4xx"} 1"#), metrics)
        XCTAssertTrue(metrics.contains(#"peel_route_requests_total{route="/",upstream="default",class="2xx"} 1"#), metrics)
        XCTAssertTrue(metrics.contains(#"peel_route_requests_total{route="/raw/",upstream="pay",class="2xx"} 1"#), metrics)
        XCTAssertTrue(metrics.contains(#"peel_upstream_group_up{upstream="pay"} 1"#), metrics)
        XCTAssertTrue(metrics.contains(#"peel_upstream_endpoint_up{upstream="pay",endpoint="\#(pay.baseURL)"} 1"#), metrics)
        XCTAssertFalse(metrics.contains("echo/x"), "a request's path is never a label value")
    }

    func testAGroupsOwnTimeout_appliesToItsRoutesAlone() throws {
        let r = try routing("""
            {"upstreams": {"quick": {"endpoints": ["http://127.0.0.1:1"], "timeout": 0.3}},
             "routes": [{"prefix": "/", "upstream": "default"}, {"prefix": "/quick/", "upstream": "quick"}]}
            """)
        let h = try Harness { c in
            c.routing = r
            // The quick group's endpoint is the harness's upstream too.
            c.routing?.upstreams[0].endpoints[0].url = c.upstream
        }
        defer { h.stop() }
        let cut = try h.request("GET", "/quick/api/slow?ms=1200")
        XCTAssertEqual(problem(cut)["kind"] as? String, "upstream-timeout", cut.text)
        XCTAssertEqual(try h.request("GET", "/api/slow?ms=600").status, 200, "the default route keeps the global 30 s")
    }

    func testNoRoute_is404WithCode110_andContactsNoUpstream() throws {
        let r = try routing(#"{"routes": [{"prefix": "/api/", "upstream": "default"}, {"host": "*.tenant.example", "prefix": "/", "upstream": "default"}]}"#)
        let h = try Harness { c in c.routing = r }
        defer { h.stop() }
        XCTAssertTrue(h.eventually { h.gateway.reachability.state == .reachable })
        h.upstream.resetCount()
        let missed = try h.request("GET", "/other")
        XCTAssertEqual(missed.status, 404, missed.text)
        let p = problem(missed)
        XCTAssertEqual(p["kind"] as? String, "no-route")
        XCTAssertEqual(p["code"] as? Int, -110)
        XCTAssertEqual(h.upstream.requestCount, 0)
        // The wildcard host route takes any path of a name under it, never the bare domain.
        func get(_ path: String, host: String) throws -> Int {
            try h.raw("GET \(path) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n").status
        }
        // (The demo answers its echo under any base path: /t/api/echo/x is outside the /api/ route.)
        XCTAssertEqual(try get("/t/api/echo/x", host: "A.tenant.example:8080"), 200)
        XCTAssertEqual(try get("/t/api/echo/x", host: "tenant.example"), 404)
        XCTAssertEqual(try h.request("GET", "/api/user").status, 200)
        XCTAssertEqual(h.upstream.requestCount, 2)
        // The reachability path is matched before any route.
        XCTAssertEqual(try h.request("GET", "/_peel/reachability").status, 200)
    }

    func testDotSegmentsThatLeaveTheirRoute_areRefused() throws {
        let r = try routing(#"{"upstreams": {"pay": {"endpoints": ["http://127.0.0.1:1"]}}, "routes": [{"prefix": "/", "upstream": "default"}, {"prefix": "/pay/", "upstream": "pay"}]}"#)
        let h = try Harness { c in c.routing = r }
        defer { h.stop() }
        h.upstream.resetCount()
        let escape = try h.raw("GET /pay/../api/user HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        XCTAssertEqual(escape.status, 400, escape.text)
        XCTAssertEqual(problem(escape)["kind"] as? String, "bad-request")
        XCTAssertEqual(h.upstream.requestCount, 0)
        // Within the route they are the upstream's to resolve, as without routes (the demo does not
        // resolve them: its 404 shows the path went as sent).
        let inside = try h.raw("GET /api/./user HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        XCTAssertEqual(inside.status, 404, inside.text)
        XCTAssertEqual(h.upstream.lastRequest?.target, "/api/./user")
    }

    func testOneGroupOffline_itsRoutesAnswerOffline_theOthersWork_andAppsSeeWhich() throws {
        // A closed port: the pay group's probe is refused.
        let r = try routing("""
            {"upstreams": {"pay": {"endpoints": ["http://127.0.0.1:1"], "probe": {"fall": 1}}},
             "routes": [{"prefix": "/", "upstream": "default"}, {"prefix": "/pay/", "upstream": "pay"}]}
            """)
        let h = try Harness { c in c.routing = r; c.probe.interval = 3600; c.probe.fall = 1 }
        defer { h.stop() }
        let groups = h.gateway.groups
        let payState = try XCTUnwrap(groups.named("pay"))
        XCTAssertTrue(h.eventually { payState.state == .unreachable && h.gateway.reachability.state == .reachable })
        h.upstream.resetCount()
        let offline = try h.request("GET", "/pay/order/1")
        XCTAssertEqual(offline.status, 503, offline.text)
        XCTAssertEqual(problem(offline)["kind"] as? String, "offline")
        XCTAssertEqual(try h.request("GET", "/api/user").status, 200, "the other group's routes work")
        XCTAssertEqual(h.upstream.requestCount, 1)

        let doc = json(try h.request("GET", "/_peel/reachability"))
        XCTAssertEqual(doc["state"] as? String, "reachable", "offline only when every group is")
        let upstreams = try XCTUnwrap(doc["upstreams"] as? [String: [String: Any]])
        XCTAssertEqual(upstreams["pay"]?["state"] as? String, "unreachable")
        XCTAssertEqual(upstreams["pay"]?["reason"] as? String, "connect refused")
        XCTAssertEqual(upstreams["default"]?["state"] as? String, "reachable")
        XCTAssertFalse(String(decoding: try h.request("GET", "/_peel/reachability").body, as: UTF8.self).contains("127.0.0.1"),
                       "the public document names no address")

        // The stream: one event per group at once, each carrying `upstream`; then a transition.
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try c.send("GET /_peel/reachability HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
        _ = try c.readUntil("\r\n\r\n")
        var events = ""
        while events.components(separatedBy: "event: reachability").count - 1 < 2 { events += try c.readUntil("\n\n") }
        XCTAssertTrue(events.contains(#""upstream":"default","state":"reachable""#), events)
        XCTAssertTrue(events.contains(#""upstream":"pay","state":"unreachable""#), events)
        h.gateway.reachability.recordPassiveFailure("connect refused")
        let next = try c.readUntil("\n\n")
        XCTAssertTrue(next.contains(#""upstream":"default","state":"unreachable""#), next)
        XCTAssertTrue(h.eventually { h.gateway.groups.overall.state == .unreachable })
        XCTAssertEqual(json(try h.request("GET", "/_peel/reachability"))["state"] as? String, "unreachable")

        // The admin's view names each group with its endpoint.
        let status = json(try h.admin("/status"))
        let adminGroups = try XCTUnwrap(status["upstreams"] as? [String: [String: Any]])
        XCTAssertEqual(adminGroups["pay"]?["state"] as? String, "unreachable")
        let endpoints = try XCTUnwrap(adminGroups["pay"]?["endpoints"] as? [[String: Any]])
        XCTAssertEqual(endpoints.first?["url"] as? String, "http://127.0.0.1:1")
    }

    func testReload_addsARoute_andAGroupThatStaysKeepsItsState() throws {
        let h = try Harness { c in c.probe.interval = 3600; c.probe.fall = 1 }
        defer { h.stop() }
        XCTAssertTrue(h.eventually { h.gateway.reachability.state == .reachable })
        let before = h.gateway.reachability
        before.recordPassiveFailure("connect refused")
        XCTAssertEqual(before.state, .unreachable)
        // Routes arrive by reload: the default group (same endpoint) keeps its state.
        var next = h.gateway.config
        next.routing = try routing(#"{"routes": [{"prefix": "/api/", "upstream": "default"}]}"#)
        XCTAssertEqual(h.gateway.reload(next), [])
        XCTAssertTrue(h.gateway.reachability === before)
        XCTAssertEqual(try h.request("GET", "/other").status, 404, "the new routes apply")
        XCTAssertEqual(problem(try h.request("GET", "/api/user"))["kind"] as? String, "offline", "the kept state applies")
    }

    /// A routes-only configuration (no `--upstream`) of groups `names`, each on `upstream`, with
    /// `routes` as written.
    private func routesOnly(_ names: [String], on upstream: DemoUpstream, routes: String) throws -> RoutingConfig {
        let groups = names.map { "\"\($0)\": {\"endpoints\": [\"\(upstream.baseURL)\"], \"probe\": {\"path\": \"/__demo/health\"}}" }
        let file = "{\"upstreams\": {" + groups.joined(separator: ", ") + "}, \"routes\": [" + routes + "]}"
        return try XCTUnwrap(try loadConfig(file: file, environment: [:]).routing)
    }

    func testRoutesOnly_statusNamesNoUpstream() throws {
        let up = try DemoUpstream(listen: HostPort(host: "127.0.0.1", port: 0))
        try up.start()
        defer { up.stop() }
        let r = try routesOnly(["app"], on: up, routes: #"{"prefix": "/", "upstream": "app"}"#)
        let h = try Harness { c in c.routing = r }
        defer { h.stop() }
        let status = json(try h.admin("/status"))
        XCTAssertTrue(status["upstream"] is NSNull, "a phantom upstream: \(status["upstream"] ?? "none")")
        XCTAssertNotNil((status["upstreams"] as? [String: Any])?["app"])
    }

    func testReload_removedRoutesAndGroupsLeaveMetrics() throws {
        let up = try DemoUpstream(listen: HostPort(host: "127.0.0.1", port: 0))
        try up.start()
        defer { up.stop() }
        let h = try Harness { c in
            c.routing = try? self.routesOnly(["app", "pay"], on: up, routes: """
                {"name": "old", "prefix": "/", "upstream": "app"}, {"prefix": "/pay/", "upstream": "pay"}
                """)
        }
        defer { h.stop() }
        XCTAssertEqual(try h.request("GET", "/api/user").status, 200)
        XCTAssertEqual(try h.request("GET", "/pay/api/user").status, 200)
        let before = String(decoding: try h.admin("/metrics").body, as: UTF8.self)
        XCTAssertTrue(before.contains(#"peel_route_requests_total{route="old",upstream="app",class="2xx"} 1"#), before)
        XCTAssertTrue(before.contains(#"peel_upstream_group_up{upstream="pay"}"#), before)
        // A route renamed by every reload, and the pay group gone: only the newest route's series stay.
        for i in 0..<20 {
            var next = h.gateway.config
            next.routing = try routesOnly(["app"], on: up, routes: #"{"name": "r\#(i)", "prefix": "/", "upstream": "app"}"#)
            XCTAssertEqual(h.gateway.reload(next), [])
        }
        XCTAssertEqual(try h.request("GET", "/api/user").status, 200)
        let after = String(decoding: try h.admin("/metrics").body, as: UTF8.self)
        let series = after.split(separator: "\n").filter { $0.hasPrefix("peel_route_requests_total{") }
        XCTAssertEqual(series.count, 5, series.joined(separator: "\n"))
        XCTAssertTrue(after.contains(#"peel_route_requests_total{route="r19",upstream="app",class="2xx"} 1"#), after)
        XCTAssertFalse(after.contains(#"route="old""#), after)
        XCTAssertFalse(after.contains(#"upstream="pay""#), after)
    }

    func testReload_thatDropsAGroup_announcesItRemovedOnTheStream() throws {
        let up = try DemoUpstream(listen: HostPort(host: "127.0.0.1", port: 0))
        try up.start()
        defer { up.stop() }
        let routes = #"{"prefix": "/", "upstream": "app"}, {"prefix": "/pay/", "upstream": "pay"}"#
        let h = try Harness { c in c.routing = try? self.routesOnly(["app", "pay"], on: up, routes: routes) }
        defer { h.stop() }
        XCTAssertTrue(h.eventually { h.gateway.groups.all.allSatisfy { $0.state == .reachable } })
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try c.send("GET /_peel/reachability HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
        _ = try c.readUntil("\r\n\r\n")
        var events = ""
        while events.components(separatedBy: "event: reachability").count - 1 < 2 { events += try c.readUntil("\n\n") }
        XCTAssertTrue(events.contains(#""upstream":"pay","state":"#), events)
        var next = h.gateway.config
        next.routing = try routesOnly(["app"], on: up, routes: #"{"prefix": "/", "upstream": "app"}"#)
        XCTAssertEqual(h.gateway.reload(next), [])
        var removed = ""
        while !removed.contains(#""state":"removed""#) { removed = try c.readUntil("\n\n") }
        XCTAssertTrue(removed.contains(#"data: {"upstream":"pay","state":"removed","since":""#), removed)
        XCTAssertTrue(removed.contains(#""reason":"configuration changed"}"#), removed)
        let doc = json(try h.request("GET", "/_peel/reachability"))
        XCTAssertEqual((doc["upstreams"] as? [String: Any]).map { Array($0.keys) }, ["app"])
    }
}

/// A group of several endpoints, end to end (issue 27): balanced calls, failover that never re-sends
/// a POST that went out, ejection of a dead endpoint and its return.
final class EndpointFailoverLiveTests: XCTestCase {
    private func start(_ count: Int) throws -> [DemoUpstream] {
        try (0..<count).map { _ in
            let u = try DemoUpstream(listen: HostPort(host: "127.0.0.1", port: 0))
            try u.start()
            return u
        }
    }

    private func harness(_ endpoints: [DemoUpstream], extra: String = "", probeInterval: Double = 3600, workers: Int = 2) throws -> Harness {
        let list = endpoints.map { "\"\($0.baseURL)\"" }.joined(separator: ", ")
        let config = try loadConfig(file: """
            {"upstreams": {"app": {"endpoints": [\(list)], "probe": {"path": "/__demo/health", "rise": 1}\(extra)}},
             "routes": [{"prefix": "/", "upstream": "app"}]}
            """, environment: [:])
        return try Harness(workers: workers) { c in c.routing = config.routing; c.probe.interval = probeInterval }
    }

    func testEqualWeights_spreadCallsEvenly() throws {
        let ups = try start(3)
        defer { ups.forEach { $0.stop() } }
        let h = try harness(ups)
        defer { h.stop() }
        for u in ups { u.resetCount() }
        let calls = 600
        for _ in 0..<calls { XCTAssertEqual(try h.request("GET", "/api/user").status, 200) }
        let counts = ups.map(\.requestCount)
        XCTAssertEqual(counts.reduce(0, +), calls)
        // Each worker balances its own share in turn: no endpoint gets more than 1.2 times its share.
        for c in counts { XCTAssertLessThanOrEqual(Double(c), 1.2 * Double(calls) / 3, "\(counts)") }
    }

    func testADeadEndpoint_noGetFails_aPostThatCouldNotConnectMovesOn_andItIsEjectedThenBack() throws {
        var ups = try start(3)
        defer { ups.forEach { $0.stop() } }
        let h = try harness(ups, extra: #", "eject": {"after": 1, "base": 0.3, "max": 1}"#, probeInterval: 0.1, workers: 1)
        defer { h.stop() }
        let g = try XCTUnwrap(h.gateway.groups.named("app"))
        XCTAssertTrue(h.eventually { g.state == .reachable })
        let deadPort = ups[0].port
        ups[0].stop()
        // The one worker's round robin starts at the first endpoint, the dead one: the first call,
        // a POST, tries it and must move on.
        for i in 0..<30 {
            let r = try h.request(i % 3 == 0 ? "POST" : "GET", "/api/echo/\(i)", body: Array("{}".utf8))
            XCTAssertEqual(r.status, 200, "call \(i): \(r.text)")
        }
        // Refused connects took it out (live ejection, or its probes falling).
        XCTAssertFalse(g.endpoints[0].available.load(ordering: .relaxed))
        XCTAssertEqual(g.state, .reachable, "the group stays up while endpoints are left")
        let status = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(h.admin("/status").body)) as? [String: Any])
        let app = try XCTUnwrap((status["upstreams"] as? [String: [String: Any]])?["app"])
        let endpoints = try XCTUnwrap(app["endpoints"] as? [[String: Any]])
        XCTAssertNotEqual(endpoints[0]["state"] as? String, "reachable")
        XCTAssertNotNil(endpoints[0]["last_error"] as? String)
        // It comes back: probes pass once it listens again, and calls reach it.
        ups[0] = try DemoUpstream(listen: HostPort(host: "127.0.0.1", port: deadPort))
        try ups[0].start()
        XCTAssertTrue(h.eventually(5) { g.endpoints[0].available.load(ordering: .relaxed) })
        ups[0].resetCount()
        for _ in 0..<12 { XCTAssertEqual(try h.request("GET", "/api/user").status, 200) }
        XCTAssertGreaterThan(ups[0].requestCount, 0)
    }

    func testLostAfterSending_anIdempotentCallMovesOn_aPostIsNeverSentTwice() throws {
        let ups = try start(2)
        defer { ups.forEach { $0.stop() } }
        let h = try harness(ups)
        defer { h.stop() }
        for u in ups { u.resetCount() }
        // Both endpoints reset the connection once the request is read: the GET tries both.
        let get = try h.request("GET", "/fault/reset")
        XCTAssertEqual(problem(get)["kind"] as? String, "upstream-unreachable", get.text)
        XCTAssertGreaterThanOrEqual(ups[0].requestCount, 1)
        XCTAssertGreaterThanOrEqual(ups[1].requestCount, 1, "the GET moved to the other endpoint")
        for u in ups { u.resetCount() }
        let post = try h.request("POST", "/fault/reset", body: Array("{}".utf8))
        XCTAssertEqual(problem(post)["kind"] as? String, "upstream-unreachable", post.text)
        XCTAssertEqual(ups[0].requestCount + ups[1].requestCount, 1, "a POST that went out is not sent again")
    }

    func testAPostCurlResentOnAFreshConnectionThatWasRefused_isNotSentToAnotherEndpoint() throws {
        // A: answers GETs on a kept-alive connection, and drops the connection on a POST.
        let body = #"{"code":0,"message":"ok","data":1}"#
        let a = try RawUpstream { r in
            r.method == "POST" ? .close
                : .send("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body)
        }
        defer { a.stop() }
        let b = try DemoUpstream(listen: HostPort(host: "127.0.0.1", port: 0))
        try b.start()
        defer { b.stop() }
        let config = try loadConfig(file: """
            {"upstreams": {"app": {"endpoints": ["http://127.0.0.1:\(a.port)", "\(b.baseURL)"], "probe": {"interval": 3600},
                                   "eject": {"after": 100}}},
             "routes": [{"prefix": "/", "upstream": "app"}]}
            """, environment: [:])
        let h = try Harness(workers: 1) { c in c.routing = config.routing }
        defer { h.stop() }
        // Round robin on the one worker: A, then B; A's connection stays in the pool.
        XCTAssertEqual(try h.request("GET", "/x").status, 200)
        XCTAssertEqual(try h.request("GET", "/api/user").status, 200)
        b.resetCount()
        // A goes away with its connection still open: the POST goes out on it and the connection
        // drops; curl sends it again on a fresh connection, which is refused. It went out once:
        // it must not go to B.
        a.closeListenerOnly()
        let post = try h.request("POST", "/api/echo", body: Array("{}".utf8))
        XCTAssertEqual(problem(post)["kind"] as? String, "upstream-unreachable", post.text)
        XCTAssertEqual(b.requestCount, 0, "a POST that went out was sent to another endpoint")
        XCTAssertEqual(a.requests.filter { $0.method == "POST" }.count, 1)
    }

    func testARedirectsPath_isReadUnderTheBasePathOfTheEndpointThatAnswered() throws {
        // Both endpoints redirect to /v1/next: the bare one means its own /v1/next, the one whose
        // base path is /v1 means its /next.
        let redirect: @Sendable (RawUpstream.Request) -> RawUpstream.Reply = { _ in
            .send("HTTP/1.1 302 Found\r\nLocation: /v1/next\r\nSet-Cookie: s=1; Path=/v1\r\nContent-Length: 0\r\n\r\n")
        }
        let bare = try RawUpstream(redirect)
        defer { bare.stop() }
        let v1 = try RawUpstream(redirect)
        defer { v1.stop() }
        let config = try loadConfig(file: """
            {"upstreams": {"app": {"endpoints": ["http://127.0.0.1:\(bare.port)", "http://127.0.0.1:\(v1.port)/v1"],
                                   "probe": {"interval": 3600}}},
             "routes": [{"prefix": "/", "upstream": "app"}]}
            """, environment: [:])
        let h = try Harness(workers: 1) { c in c.routing = config.routing }
        defer { h.stop() }
        var seen: [String: String] = [:]
        for _ in 0..<2 {
            let r = try h.request("GET", "/start")
            XCTAssertEqual(r.status, 302, r.text)
            seen[r.header("Location") ?? ""] = r.header("Set-Cookie") ?? ""
        }
        // Probes aside, each endpoint took one of the two calls.
        XCTAssertEqual(bare.requests.map(\.path).filter { $0.hasSuffix("start") }, ["/start"])
        XCTAssertEqual(v1.requests.map(\.path).filter { $0.hasSuffix("start") }, ["/v1/start"])
        XCTAssertEqual(seen, ["/v1/next": "s=1; Path=/v1", "/next": "s=1; Path=/"])
    }

    /// An HTTP answer with a JSON body, as the fakes below write them.
    private static func answer(_ status: String, _ body: String, fields: String = "") -> RawUpstream.Reply {
        .send("HTTP/1.1 \(status)\r\n\(fields)Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
    }

    func testOnePeel_normalizesARuoYiBackendAndARESTBackend_eachByItsRoute() throws {
        // RuoYi-Vue answers 200 with its AjaxResult/TableDataInfo (Jackson writes msg, code, …).
        let ruoyi = try RawUpstream { r in
            switch r.path {
            case "/system/user/list":
                return Self.answer("200 OK", #"{"total":1,"rows":[{"userId":1,"userName":"admin"}],"code":200,"msg":"查询成功"}"#)
            default:
                return Self.answer("200 OK", #"{"msg":"用户不存在/密码错误","code":500}"#)
            }
        }
        defer { ruoyi.stop() }
        // A REST backend without an envelope: bare JSON on 2xx, its framework's error bodies otherwise.
        let rest = try RawUpstream { r in
            switch r.path {
            case "/orders": return Self.answer("200 OK", #"[{"id":7,"total":"19.90"}]"#)
            case "/orders/new":
                return Self.answer("422 Unprocessable Content",
                                   #"{"detail":[{"type":"missing","loc":["body","items",0,"sku"],"msg":"Field required","input":{}}]}"#)
            case "/me": return Self.answer("401 Unauthorized", #"{"detail":"Not authenticated"}"#, fields: "WWW-Authenticate: Bearer\r\n")
            default: return Self.answer("500 Internal Server Error", #"{"message":"column users.pw does not exist"}"#)
            }
        }
        defer { rest.stop() }
        let config = try loadConfig(file: """
            {"upstreams": {"admin": {"endpoints": ["\(ruoyi.baseURL)"], "probe": {"interval": 3600}},
                           "shop": {"endpoints": ["\(rest.baseURL)"], "probe": {"interval": 3600}}},
             "routes": [{"prefix": "/admin/", "upstream": "admin", "strip_prefix": true, "dialect": "ruoyi"},
                        {"prefix": "/v2/", "upstream": "shop", "strip_prefix": true, "dialect": "rest"}]}
            """, environment: [:])
        let h = try Harness(workers: 1) { c in c.routing = config.routing }
        defer { h.stop() }

        let list = try h.request("GET", "/admin/system/user/list")
        XCTAssertEqual(list.status, 200, list.text)
        XCTAssertEqual(list.text, #"{"total":1,"rows":[{"userId":1,"userName":"admin"}]}"#)
        let refused = problem(try h.request("POST", "/admin/login"))
        XCTAssertEqual(refused["kind"] as? String, "business-error")
        XCTAssertEqual(refused["detail"] as? String, "用户不存在/密码错误")
        XCTAssertEqual(refused["code"] as? Int, 500)

        let orders = try h.request("GET", "/v2/orders")
        XCTAssertEqual(orders.status, 200, orders.text)
        XCTAssertEqual(orders.text, #"[{"id":7,"total":"19.90"}]"#, "a bare array passes byte for byte")
        XCTAssertEqual(orders.header("Content-Type"), "application/json")
        let invalid = try h.request("POST", "/v2/orders/new")
        XCTAssertEqual(invalid.status, 422)
        XCTAssertEqual(invalid.header("Content-Type"), "application/problem+json")
        XCTAssertTrue(invalid.text.contains(##""errors":[{"detail":"Field required","pointer":"#/items/0/sku"}]"##), invalid.text)
        XCTAssertEqual(problem(invalid)["detail"] as? String, "Field required")
        let expired = try h.request("GET", "/v2/me")
        XCTAssertEqual(expired.status, 401)
        XCTAssertEqual(problem(expired)["kind"] as? String, "auth-expired")
        XCTAssertEqual(problem(expired)["detail"] as? String, "Not authenticated")
        XCTAssertEqual(expired.header("WWW-Authenticate"), "Bearer")
        let broken = try h.request("GET", "/v2/report")
        XCTAssertEqual(broken.status, 502)
        XCTAssertNil(problem(broken)["upstream"])
        XCTAssertFalse(broken.text.contains("column users.pw"), "a 5xx's words never reach the client: \(broken.text)")
    }
}

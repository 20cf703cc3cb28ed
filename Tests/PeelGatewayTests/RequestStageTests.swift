@testable import PeelGateway
import PeelIO
import XCTest

/// The request stages on their own (issue 20): the fields read once into `RequestFacts`, and
/// `RequestPlan.decide`.
final class RequestStageTests: XCTestCase {
    private func facts(_ pairs: [(String, String)], keys: [String]? = nil) -> RequestFacts {
        RequestFacts(ResponseHeaders(pairs), keys: keys.map(CacheKeyFields.init))
    }

    func testTheFieldsPeelActsOn_areReadInOneWalk() {
        let f = facts([("Host", "a.example"), ("X-Request-Id", "abc"), ("X-Forwarded-For", "1.1.1.1"), ("x-forwarded-for", "2.2.2.2"),
                       ("Accept-Language", "fr"), ("Origin", "https://o"), ("Access-Control-Request-Method", "PUT"),
                       ("Access-Control-Request-Headers", "a"), ("Access-Control-Request-Headers", "b"),
                       ("Accept-Encoding", "gzip"), ("ACCEPT-ENCODING", "br"), ("Authorization", "Bearer t"),
                       ("Forwarded", "for=1.1.1.1"), ("Connection", "keep-alive"), ("Connection", "X-Secret, Upgrade"),
                       ("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", "pub.example")])
        XCTAssertEqual(f.host, "a.example")
        XCTAssertFalse(f.duplicateHost)
        XCTAssertEqual(f.requestId, "abc")
        XCTAssertEqual(f.xForwardedFor, "1.1.1.1, 2.2.2.2")
        XCTAssertEqual(f.acceptLanguage, "fr")
        XCTAssertEqual(f.origin, "https://o")
        XCTAssertEqual(f.accessControlRequestMethod, "PUT")
        XCTAssertEqual(f.accessControlRequestHeaders, "a, b")
        XCTAssertEqual(f.acceptEncoding, "gzip, br")
        XCTAssertTrue(f.hasAuthorization)
        XCTAssertEqual(f.forwarded, "for=1.1.1.1")
        XCTAssertEqual(f.connectionOptions, ["x-secret", "upgrade"])
        XCTAssertEqual(f.xForwardedProto, "https")
        XCTAssertTrue(f.traceOK)
        XCTAssertTrue(f.keyValues.isEmpty, "key fields are read only while the cache is on")
        XCTAssertTrue(f.cacheControl.isEmpty)

        var untrusted = f
        untrusted.distrustForwardingFields()
        XCTAssertNil(untrusted.xForwardedFor)
        XCTAssertNil(untrusted.xForwardedProto)
        XCTAssertNil(untrusted.xForwardedHost)
        XCTAssertNil(untrusted.forwarded)
        XCTAssertEqual(untrusted.host, "a.example")
    }

    func testASecondHost_andASecondTraceparent_areNoticed() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        XCTAssertTrue(facts([("Host", "a"), ("host", "b")]).duplicateHost)
        XCTAssertTrue(facts([("traceparent", tp)]).traceOK)
        XCTAssertFalse(facts([("traceparent", tp), ("Traceparent", tp)]).traceOK)
        XCTAssertFalse(facts([("traceparent", "00-zz")]).traceOK)
    }

    func testKeyFields_matchByTokenOrByBytes_andCookiesJoinWithSemicolons() {
        let f = facts([("Cookie", "a=1"), ("Authorization", "Bearer x"), ("X-Tenant", "t1"), ("cookie", "b=2"), ("x-tenant", "t2"),
                       ("Cache-Control", "max-stale"), ("Cache-Control", "no-cache"), ("Pragma", "no-cache"),
                       ("If-None-Match", "\"e\""), ("If-Modified-Since", "Mon, 30 Nov 2026 10:00:00 GMT")],
                      keys: ["authorization", "cookie", "x-tenant"])
        XCTAssertEqual(f.keyValues, ["Bearer x", "a=1; b=2", "t1, t2"])
        XCTAssertEqual(f.cacheControl, ["max-stale", "no-cache"])
        XCTAssertEqual(f.pragma, "no-cache")
        XCTAssertEqual(f.ifNoneMatch, "\"e\"")
        XCTAssertNotNil(f.ifModifiedSince)
        XCTAssertEqual(facts([("X-Other", "1")], keys: ["authorization", "x-tenant"]).keyValues, [nil, nil])
    }

    private func plan(method: String = "GET", target: String = "/v1/x", http11: Bool = true, _ pairs: [(String, String)],
                      cors: Bool = false, reachability: String? = "/_peel/reachability") -> RequestPlan {
        var read = facts(pairs)
        return RequestPlan.decide(method: method, target: target, http11: http11, &read, selfAuthorities: ["peel:80"],
                           managesCORS: cors, reachabilityPath: reachability,
                           accept: { pairs.first { $0.0.lowercased() == "accept" }?.1 }).0
    }

    func testAnAbsoluteFormTargetNamingPeel_namesTheHost_overHostAndXForwardedHost() {
        var f = facts([("Host", "other"), ("X-Forwarded-Host", "pub.example")])
        let (decided, path) = RequestPlan.decide(method: "GET", target: "http://PEEL:80/v1/x?q=1", http11: true, &f,
                                                 selfAuthorities: ["peel:80"], managesCORS: false, reachabilityPath: nil, accept: { nil })
        XCTAssertEqual(decided, .forward(path: "/v1/x", query: "q=1"))
        XCTAssertEqual(path, "/v1/x")
        XCTAssertEqual(f.host, "PEEL:80", "RFC 9112 §3.2.2: Host is ignored")
        XCTAssertNil(f.xForwardedHost)
        // Origin-form leaves Host as it came; another authority, or a bad Host field, is refused.
        var g = facts([("Host", "other")])
        _ = RequestPlan.decide(method: "GET", target: "/v1/x", http11: true, &g, selfAuthorities: ["peel:80"], managesCORS: false,
                               reachabilityPath: nil, accept: { nil })
        XCTAssertEqual(g.host, "other")
        XCTAssertEqual(plan(target: "http://other/v1/x", [("Host", "peel")]),
                       .refuse("absolute-form target names another host; Peel only forwards to its upstream"))
        XCTAssertEqual(plan(target: "http://peel/v1/x", [("Host", "u@x")]), .refuse("Host must not carry userinfo"))
    }

    func testThePlan_forEachKindOfRequest() {
        XCTAssertEqual(plan([("Host", "h")]), .forward(path: "/v1/x", query: nil))
        XCTAssertEqual(plan(target: "/v1/x?q=1", [("Host", "h")]), .forward(path: "/v1/x", query: "q=1"))
        XCTAssertEqual(plan([]), .refuse("HTTP/1.1 request without Host"))
        XCTAssertEqual(plan(http11: false, []), .forward(path: "/v1/x", query: nil))
        XCTAssertEqual(plan([("Host", "a"), ("Host", "b")]), .refuse("more than one Host header"))
        XCTAssertEqual(plan([("Host", "u:p@evil")]), .refuse("Host must not carry userinfo"))
        XCTAssertEqual(plan(method: "TRACE", [("Host", "h")]), .refuse("TRACE is not forwarded"))
        let preflight = [("Host", "h"), ("Origin", "https://o"), ("Access-Control-Request-Method", "PUT")]
        XCTAssertEqual(plan(method: "OPTIONS", preflight, cors: true), .preflight)
        XCTAssertEqual(plan(method: "OPTIONS", preflight, cors: false), .forward(path: "/v1/x", query: nil),
                       "without managed CORS the upstream answers its own preflights")
        XCTAssertEqual(plan(target: "/_peel/reachability", [("Host", "h")]), .reachability(events: false))
        XCTAssertEqual(plan(target: "/_peel/reachability", [("Host", "h"), ("Accept", "Text/Event-Stream")]), .reachability(events: true))
        XCTAssertEqual(plan(target: "/_peel/reachability", [("Host", "h")], reachability: nil), .forward(path: "/_peel/reachability", query: nil))
    }
}

import XCTest

@testable import PeelGateway

/// Forms that common upstream servers decode into something the dot-segment rule never saw.
final class RequestPolicyTests: XCTestCase {
    private func refused(_ target: String) -> Bool {
        if case .refuse = RequestPolicy.check(method: "GET", target: target, selfAuthorities: []) { return true }
        return false
    }

    func testSemicolonDotSegments_countAsDotSegments() {
        // Tomcat and Spring drop `;params` from each segment before resolving dot-segments.
        for t in ["/..;/admin", "/api/..;/..;/admin", "/..;jsessionid=x/admin", "/%2e%2e;/admin", "/..%3b/admin", "/.%2E;x/admin"] {
            XCTAssertTrue(refused(t), t)
        }
        XCTAssertFalse(refused("/api/x/..;/user"), "stays inside the base path")
        XCTAssertFalse(refused("/api/;v=1/user"))
        XCTAssertFalse(refused("/api/...;/user"), "three dots are a name")
    }

    func testOverlongUTF8_isRefusedWhereverItIs() {
        for t in ["/%c0%ae%c0%ae/admin", "/%C0%AE%C0%AE%C0%AFadmin", "/api/%e0%80%ae%e0%80%ae/x", "/a%c0%afb",
                  "/a%c1%9cb", "/%f0%80%80%ae", "/api/%c0%ae", "/q/%E0%80%AF"] {
            XCTAssertTrue(refused(t), t)
            XCTAssertEqual(RequestPolicy.check(method: "GET", target: t, selfAuthorities: []),
                           .refuse("path holds an overlong UTF-8 encoding"), t)
        }
    }

    func testValidUTF8AndPlainPercentEscapes_areForwarded() {
        for t in ["/caf%C3%A9", "/%E2%82%AC", "/%F0%9F%98%80", "/%e0%a4%85", "/a%2Fb", "/100%25", "/%zz"] {
            XCTAssertFalse(refused(t), t)
        }
    }

    func testHostWithUserinfo_isRefused() {
        XCTAssertEqual(RequestPolicy.hostProblem("user:pw@evil.example"), "Host must not carry userinfo")
        XCTAssertEqual(RequestPolicy.hostProblem("@evil.example"), "Host must not carry userinfo")
        XCTAssertNotNil(RequestPolicy.hostProblem("evil.example/path"))
        XCTAssertNotNil(RequestPolicy.hostProblem("a b"))
    }

    // RFC 9112 §3.2: a Host that is not `uri-host [":" port]` (RFC 3986 §3.2.2) is a 400.
    func testHostThatIsNotAHostAndPort_isRefused() {
        for host in ["[::1", "[::1]x", "a:b:c", "a:80x", "[::1]:80:80", "a:", "[::1]:", "::1", "[]", "[::1::2]",
                     "[1.2.3.4]", "[::g]", "a%zz", "a%4", "[v1.]", "[vx.a]", "a:-1", "a: 80", "a:+80", "[::1]]"] {
            XCTAssertNotNil(RequestPolicy.hostProblem(host), host)
        }
    }

    func testOrdinaryHosts_areAccepted() {
        for host in ["example.com", "127.0.0.1:8080", "[::1]:80", "api.example.com:443", "xn--bcher-kva.example", "",
                     "[::ffff:10.0.0.1]", "[2001:db8::1]:8443", "[v1.fe80::a+en1]", "a%20b", "host_name.local:1", "999.1.1.1"] {
            XCTAssertNil(RequestPolicy.hostProblem(host), host)
        }
    }

    func testDotSegmentsResolveAsTheUpstreamWill() {
        XCTAssertNil(RequestPolicy.resolvingDotSegments("/pay/orders"))
        XCTAssertNil(RequestPolicy.resolvingDotSegments("/a.b/c.d"))
        XCTAssertEqual(RequestPolicy.resolvingDotSegments("/pay/../admin"), "/admin")
        XCTAssertEqual(RequestPolicy.resolvingDotSegments("/a/./b"), "/a/b")
        XCTAssertEqual(RequestPolicy.resolvingDotSegments("/pay/%2E%2e/admin/x"), "/admin/x")
        XCTAssertEqual(RequestPolicy.resolvingDotSegments("/pay%2f..%2fadmin"), "/admin")
        XCTAssertEqual(RequestPolicy.resolvingDotSegments("/pay\\..\\admin"), "/admin")
        XCTAssertEqual(RequestPolicy.resolvingDotSegments("/x/..;y/z"), "/z")
        XCTAssertEqual(RequestPolicy.resolvingDotSegments("/a/b/.."), "/a/")
        XCTAssertEqual(RequestPolicy.resolvingDotSegments("/a/.."), "/")
        // One trailing slash, kept after `..;x`, none after `a.`.
        XCTAssertEqual(RequestPolicy.resolvingDotSegments("/a/b/../"), "/a/")
        XCTAssertEqual(RequestPolicy.resolvingDotSegments("/pay/../pay/"), "/pay/")
        XCTAssertEqual(RequestPolicy.resolvingDotSegments("/pay/x/..;"), "/pay/")
        XCTAssertEqual(RequestPolicy.resolvingDotSegments("/x/../a."), "/a.")
        XCTAssertEqual(RequestPolicy.resolvingDotSegments("/./"), "/")
        XCTAssertEqual(RequestPolicy.resolvingDotSegments("//.."), "/")
        XCTAssertEqual(RequestPolicy.resolvingDotSegments("/a/.%2e/b"), "/b")
        XCTAssertNil(RequestPolicy.resolvingDotSegments("/app.js"))
        XCTAssertNil(RequestPolicy.resolvingDotSegments("/a..b/c"))
    }
}

@testable import PeelGateway
import XCTest

/// Route choice (issue 27): a pure function of Host and path.
final class RouteTableTests: XCTestCase {
    private let table = RouteTable<String>([
        (host: nil, prefix: "/", target: "root"),
        (host: "*.example.com", prefix: "/", target: "wild-root"),
        (host: "api.example.com", prefix: "/", target: "api-root"),
        (host: nil, prefix: "/wx/", target: "wx"),
        (host: "*.example.com", prefix: "/wx/", target: "wild-wx"),
        (host: "*.eu.example.com", prefix: "/", target: "eu-root"),
        (host: nil, prefix: "/wx/pay/", target: "pay"),
    ])

    func testTheLongestPrefixWins_whateverTheHost() {
        XCTAssertEqual(table.choose(host: "api.example.com", path: "/wx/pay/x"), "pay")
        XCTAssertEqual(table.choose(host: "other.org", path: "/wx/token"), "wx")
        XCTAssertEqual(table.choose(host: nil, path: "/users"), "root")
    }

    func testAtEqualPrefix_exactBeatsWildcardBeatsNone() {
        XCTAssertEqual(table.choose(host: "api.example.com", path: "/users"), "api-root")
        XCTAssertEqual(table.choose(host: "www.example.com", path: "/users"), "wild-root")
        XCTAssertEqual(table.choose(host: "www.example.com", path: "/wx/a"), "wild-wx")
        XCTAssertEqual(table.choose(host: "a.eu.example.com", path: "/"), "eu-root", "the longer wildcard is the more specific")
        XCTAssertEqual(table.choose(host: "example.org", path: "/"), "root")
    }

    func testHostsMatchWithoutCaseAndPort_andAWildcardNeverMatchesItsOwnName() {
        XCTAssertEqual(table.choose(host: "API.Example.COM:8443", path: "/"), "api-root")
        XCTAssertEqual(table.choose(host: "api.example.com.", path: "/"), "api-root")
        XCTAssertEqual(table.choose(host: "a.b.example.com", path: "/"), "wild-root", "one or more labels")
        XCTAssertEqual(table.choose(host: "example.com", path: "/"), "root")
        XCTAssertEqual(table.choose(host: "badexample.com", path: "/"), "root")
        XCTAssertEqual(RouteTable<Int>.hostName("[::1]:8080"), Array("[::1]".utf8))
    }

    func testRequestHosts_takeTheFormRouteHostsAreWrittenIn() {
        func name(_ host: String) -> String { String(decoding: RouteTable<Int>.hostName(host), as: UTF8.self) }
        XCTAssertEqual(name("[0:0:0:0:0:0:0:1]"), "[::1]")
        XCTAssertEqual(name("[0:0::1]:8080"), "[::1]")
        XCTAssertEqual(name("[2001:0DB8:0:0:1:0:0:1]"), "[2001:db8::1:0:0:1]", "RFC 5952: the first longest zero run")
        XCTAssertEqual(name("[::FFFF:127.0.0.1]"), "[::ffff:127.0.0.1]")
        XCTAssertEqual(name("%61pi.Ex%41mple.com.:80"), "api.example.com", "escaped unreserved characters are decoded")
        XCTAssertEqual(name("a%2Fb"), "a%2fb", "other escapes stay, lowercased (and match no route's name)")
        XCTAssertEqual(name("example.com%2e"), "example.com", "a trailing dot, escaped")
    }

    func testListOrderDecidesNothing() {
        let rules: [(host: String?, prefix: String, target: String)] = [
            (nil, "/", "a"), ("x.example.com", "/", "b"), ("*.example.com", "/", "c"), (nil, "/api/", "d")]
        for order in [rules, rules.reversed(), [rules[2], rules[0], rules[3], rules[1]]] {
            let t = RouteTable(order)
            XCTAssertEqual(t.choose(host: "x.example.com", path: "/p"), "b")
            XCTAssertEqual(t.choose(host: "y.example.com", path: "/p"), "c")
            XCTAssertEqual(t.choose(host: "y.example.com", path: "/api/p"), "d")
        }
    }

    func testNoRouteApplies() {
        let t = RouteTable<String>([(host: "a.com", prefix: "/", target: "a"), (host: nil, prefix: "/api/", target: "api")])
        XCTAssertNil(t.choose(host: "b.com", path: "/index.html"))
        XCTAssertNil(t.choose(host: nil, path: "/api"), "a plain byte prefix: /api is not under /api/")
        XCTAssertEqual(t.choose(host: "b.com", path: "/api/x"), "api")
    }

    func testStripPrefixKeepsOneLeadingSlash() {
        let wx = RouteRule(prefix: "/wx/", upstream: "wechat", stripPrefix: true)
        XCTAssertEqual(wx.upstreamPath("/wx/token"), "/token")
        XCTAssertEqual(wx.upstreamPath("/wx/"), "/")
        let bare = RouteRule(prefix: "/wx", upstream: "wechat", stripPrefix: true)
        XCTAssertEqual(bare.upstreamPath("/wx/token"), "/token")
        XCTAssertEqual(bare.upstreamPath("/wx"), "/")
        XCTAssertEqual(RouteRule(prefix: "/wx/", upstream: "wechat").upstreamPath("/wx/token"), "/wx/token")
    }

    func testAStrippedPathNeverClimbsAboveTheRoot() {
        let wx = RouteRule(prefix: "/wx/", upstream: "wechat", stripPrefix: true)
        for path in ["/wx/../admin", "/wx/%2e%2e/admin", "/wx/a/../../admin"] {
            XCTAssertFalse(RequestPolicy.climbsAboveRoot(Substring(path)), path)
            XCTAssertNil(wx.upstreamPath(path), path)
        }
        XCTAssertNil(RouteRule(prefix: "/wx", upstream: "wechat", stripPrefix: true).upstreamPath("/wx../admin"))
        XCTAssertEqual(wx.upstreamPath("/wx/a/../b"), "/a/../b", "a dot-segment that stays under the root is left to the upstream")
        let table = RouteTable<String>([(host: "[::1]", prefix: "/", target: "v6"), (host: nil, prefix: "/", target: "any")])
        XCTAssertEqual(table.choose(host: "[::1]:8080", path: "/x"), "v6")
        XCTAssertEqual(table.choose(host: "[::2]", path: "/x"), "any")
    }
}

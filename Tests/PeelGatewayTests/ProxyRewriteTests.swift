@testable import PeelGateway
import XCTest

/// Location/Content-Location/Refresh and Set-Cookie rewriting towards Peel (nginx's proxy_redirect
/// default, proxy_cookie_path, proxy_cookie_domain).
final class ProxyRewriteTests: XCTestCase {
    private func rewrite(_ url: String) throws -> ProxyRewrite { ProxyRewrite(upstream: try UpstreamURL.parse(url).get()) }
    private let peel = "http://peel.example:8080"

    func testLocation_absoluteUpstreamURLUnderTheBasePath_namesPeel() throws {
        let r = try rewrite("http://127.0.0.1:8001/api/v1")
        XCTAssertEqual(r.location("http://127.0.0.1:8001/api/v1/user?id=1", publicOrigin: peel), peel + "/user?id=1")
        XCTAssertEqual(r.location("HTTP://127.0.0.1:8001/api/v1", publicOrigin: peel), peel + "/")
        XCTAssertEqual(r.location("http://127.0.0.1:8001/api/v1?x=1", publicOrigin: peel), peel + "/?x=1")
        XCTAssertEqual(r.location("//127.0.0.1:8001/api/v1/a", publicOrigin: peel), peel + "/a")
        // Without a usable Host the path alone still keeps the client on Peel.
        XCTAssertEqual(r.location("http://127.0.0.1:8001/api/v1/user", publicOrigin: nil), "/user")
    }

    func testLocation_otherURLsStayAsTheyAre() throws {
        let r = try rewrite("http://127.0.0.1:8001/api/v1")
        XCTAssertEqual(r.location("http://127.0.0.1:8001/api/v10/user", publicOrigin: peel), "http://127.0.0.1:8001/api/v10/user")
        XCTAssertEqual(r.location("http://127.0.0.1:8001/other", publicOrigin: peel), "http://127.0.0.1:8001/other")
        XCTAssertEqual(r.location("http://127.0.0.1:9999/api/v1/x", publicOrigin: peel), "http://127.0.0.1:9999/api/v1/x")
        XCTAssertEqual(r.location("https://login.example.com/api/v1", publicOrigin: peel), "https://login.example.com/api/v1")
        XCTAssertEqual(r.location("/elsewhere", publicOrigin: peel), "/elsewhere")
        XCTAssertEqual(r.location("next", publicOrigin: peel), "next")
        XCTAssertEqual(r.location("//cdn.example/api/v1/x", publicOrigin: peel), "//cdn.example/api/v1/x")
    }

    func testLocation_relativeUnderTheBasePath_losesIt() throws {
        let r = try rewrite("http://127.0.0.1:8001/api/v1")
        XCTAssertEqual(r.location("/api/v1/user", publicOrigin: peel), "/user")
        XCTAssertEqual(r.location("/api/v1", publicOrigin: peel), "/")
        XCTAssertEqual(r.location("/api/v1#top", publicOrigin: peel), "/#top")
        XCTAssertEqual(r.location("/api/v1x", publicOrigin: peel), "/api/v1x")
    }

    func testLocation_defaultPortSpellingsAreTheSameOrigin() throws {
        let r = try rewrite("https://API.example.com/v1")
        XCTAssertEqual(r.location("https://api.example.com:443/v1/a", publicOrigin: peel), peel + "/a")
        XCTAssertEqual(r.location("https://api.example.com/v1/a", publicOrigin: peel), peel + "/a")
        XCTAssertEqual(r.location("http://api.example.com/v1/a", publicOrigin: peel), "http://api.example.com/v1/a")
    }

    func testLocation_withoutABasePath_onlyAbsoluteURLsChange() throws {
        let r = try rewrite("http://up:8001")
        XCTAssertEqual(r.location("http://up:8001/a", publicOrigin: peel), peel + "/a")
        XCTAssertEqual(r.location("/a", publicOrigin: peel), "/a")
    }

    func testRefresh_rewritesItsURL() throws {
        let r = try rewrite("http://127.0.0.1:8001/api/v1")
        XCTAssertEqual(r.refresh("5; url=http://127.0.0.1:8001/api/v1/done", publicOrigin: peel), "5; url=\(peel)/done")
        XCTAssertEqual(r.refresh("0;URL=/api/v1/x", publicOrigin: peel), "0;URL=/x")
        XCTAssertEqual(r.refresh("5", publicOrigin: peel), "5")
    }

    func testSetCookie_pathUnderTheBasePathLosesIt_upstreamDomainIsDropped() throws {
        let r = try rewrite("http://127.0.0.1:8001/api/v1")
        XCTAssertEqual(r.setCookie("sid=abc; Path=/api/v1; Domain=127.0.0.1; HttpOnly"), "sid=abc; Path=/; HttpOnly")
        XCTAssertEqual(r.setCookie("sid=abc; path=/api/v1/admin; SameSite=Lax"), "sid=abc; Path=/admin; SameSite=Lax")
        XCTAssertEqual(r.setCookie("sid=abc; Path=/other; Domain=example.com"), "sid=abc; Path=/other; Domain=example.com")
        XCTAssertEqual(r.setCookie("sid=; Max-Age=0; Path=/api/v10"), "sid=; Max-Age=0; Path=/api/v10")
        XCTAssertEqual(r.setCookie("plain=1"), "plain=1")
        let named = try rewrite("https://api.example.com/v1")
        XCTAssertEqual(named.setCookie("a=1; Domain=.API.example.com; Secure"), "a=1; Secure")
        // The cookie's value is never touched, even when it looks like an attribute.
        XCTAssertEqual(named.setCookie("Path=/v1/x; Path=/v1"), "Path=/v1/x; Path=/")
    }

    func testPublicOrigin_fromForwardedFieldsThenHost() {
        XCTAssertEqual(ProxyRewrite.publicOrigin(host: "peel:8080", forwardedProto: nil, forwardedHost: nil), "http://peel:8080")
        XCTAssertEqual(ProxyRewrite.publicOrigin(host: "peel:8080", forwardedProto: "https, http", forwardedHost: "app.example.com"),
                       "https://app.example.com")
        XCTAssertEqual(ProxyRewrite.publicOrigin(host: "peel", forwardedProto: "gopher", forwardedHost: nil), "http://peel")
        XCTAssertNil(ProxyRewrite.publicOrigin(host: "evil.example/x", forwardedProto: nil, forwardedHost: nil))
        XCTAssertNil(ProxyRewrite.publicOrigin(host: nil, forwardedProto: "https", forwardedHost: nil))
    }

    // MARK: groups of endpoints and a stripped prefix

    func testRewrite_everyEndpointOfTheGroup_andTheStrippedPrefixPutBack() throws {
        let a = try UpstreamURL.parse("http://10.0.0.1:8080").get()
        let b = try UpstreamURL.parse("http://10.0.0.2:8080/v1").get()
        let r = ProxyRewrite(upstreams: [a, b], restoring: "/pay/")
        XCTAssertEqual(r.location("http://10.0.0.2:8080/v1/login?x=1", publicOrigin: "https://app.example"), "https://app.example/pay/login?x=1")
        XCTAssertEqual(r.location("http://10.0.0.1:8080/orders", publicOrigin: "https://app.example"), "https://app.example/pay/orders")
        XCTAssertEqual(r.location("/orders/1", publicOrigin: nil), "/pay/orders/1")
        XCTAssertEqual(r.location("/v1/orders/1", publicOrigin: nil), "/pay/orders/1")
        XCTAssertEqual(r.location("https://elsewhere.example/x", publicOrigin: "https://app.example"), "https://elsewhere.example/x")
        // One endpoint's origin a byte prefix of another's: the other is still rewritten.
        let near = ProxyRewrite(upstreams: [try UpstreamURL.parse("http://10.0.0.1").get(), try UpstreamURL.parse("http://10.0.0.12").get()])
        XCTAssertEqual(near.location("http://10.0.0.12/login", publicOrigin: "https://app.example"), "https://app.example/login")
        XCTAssertEqual(r.setCookie("s=1; Path=/; Domain=10.0.0.2"), "s=1; Path=/pay/")
        // Without a stripped prefix and a base path, a path-absolute Location stays as it is (as before).
        XCTAssertEqual(ProxyRewrite(upstreams: [a]).location("/orders", publicOrigin: nil), "/orders")
    }

    func testRewrite_aBarePathIsReadUnderTheAnsweringEndpointsBasePath() throws {
        let bare = try UpstreamURL.parse("http://10.0.0.1:8080").get()
        let v1 = try UpstreamURL.parse("http://10.0.0.2:8080/v1").get()
        let fromBare = ProxyRewrite(upstreams: [bare, v1], answeredBy: 0)
        let fromV1 = ProxyRewrite(upstreams: [bare, v1], answeredBy: 1)
        // The bare endpoint's own /v1/x is a path of its own, not the other endpoint's base path.
        XCTAssertEqual(fromBare.location("/v1/x", publicOrigin: nil), "/v1/x")
        XCTAssertEqual(fromV1.location("/v1/x", publicOrigin: nil), "/x")
        XCTAssertEqual(fromBare.setCookie("s=1; Path=/v1"), "s=1; Path=/v1")
        XCTAssertEqual(fromV1.setCookie("s=1; Path=/v1"), "s=1; Path=/")
        // An absolute URL names its endpoint whichever answered: a redirect to a sibling is rewritten.
        XCTAssertEqual(fromBare.location("http://10.0.0.2:8080/v1/login", publicOrigin: "https://app.example"), "https://app.example/login")
        XCTAssertEqual(fromV1.location("http://10.0.0.1:8080/v1/login", publicOrigin: "https://app.example"), "https://app.example/v1/login")
        // With a stripped prefix, the bare endpoint's paths get it back in front.
        XCTAssertEqual(ProxyRewrite(upstreams: [bare, v1], restoring: "/pay/", answeredBy: 0).location("/v1/x", publicOrigin: nil), "/pay/v1/x")
    }
}

@testable import PeelGateway
@testable import PeelIO
import XCTest

/// Request fields as the parser hands them over: every line, Upgrade included (a `ResponseHeaders`
/// drops the fields Connection names, as it must for an answer).
private struct RequestFields: FieldSource {
    let pairs: [(String, String)]

    func forEachField(_ body: (HeaderField) -> Void) {
        for (n, v) in pairs {
            var n = n, v = v
            n.withUTF8 { nb in
                v.withUTF8 { vb in
                    let name = UnsafeRawBufferPointer(nb)
                    body(HeaderField(name: name, value: UnsafeRawBufferPointer(vb), token: FieldToken.identify(name)))
                }
            }
        }
    }
}

/// Which requests planning turns into tunnels (`CallPlan.upgrade`): an HTTP/1.1 GET without a body
/// asking, in Connection and Upgrade, for a protocol the route tunnels, from an allowed Origin.
final class UpgradePlanTests: XCTestCase {
    private let websocket = [("Host", "peel"), ("Connection", "Upgrade"), ("Upgrade", "websocket"),
                             ("Sec-WebSocket-Version", "13"), ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")]

    private func cors(_ origins: [String]) -> CORSPolicy? {
        var s = GatewayConfig.CORS()
        s.origins = origins
        return CORSPolicy(s)
    }

    private func decide(_ pairs: [(String, String)], method: String = "GET", http11: Bool = true, body: Int = 0,
                        protocols: [String] = ["websocket"], cors: CORSPolicy? = nil) -> CallPlan.Upgrade? {
        let facts = RequestFacts(RequestFields(pairs: pairs), keys: nil)
        return CallPlan.upgrade(method: MethodToken(method), http11: http11, bodyBytes: body, facts, protocols: protocols, cors: cors)
    }

    func testAWebSocketHandshake_isTunneled() {
        XCTAssertEqual(decide(websocket), .tunnel("websocket"))
    }

    func testTheTokens_matchWhateverTheirCase_amongOtherOptionsAndProtocols() {
        let pairs = [("Host", "peel"), ("Connection", "keep-alive, UPGRADE"), ("Upgrade", "foo/2, WebSocket")]
        XCTAssertEqual(decide(pairs), .tunnel("WebSocket"), "matched without case, offered upstream as sent, alone")
        let split = [("Host", "peel"), ("Connection", "keep-alive"), ("connection", "Upgrade"), ("Upgrade", "websocket")]
        XCTAssertEqual(decide(split), .tunnel("websocket"), "Connection over two lines is one list (RFC 9110 §5.3)")
    }

    func testAProtocolVersion_isMatchedByName_andForwardedAsSent() {
        // RFC 9110 §7.8: protocol = protocol-name ["/" protocol-version].
        XCTAssertEqual(decide([("Host", "peel"), ("Connection", "Upgrade"), ("Upgrade", "websocket/13")]), .tunnel("websocket/13"))
        let both = [("Host", "peel"), ("Connection", "Upgrade"), ("Upgrade", "h2c/2, WebSocket/13, websocket")]
        XCTAssertEqual(decide(both, protocols: ["websocket", "h2c"]), .tunnel("h2c/2, WebSocket/13, websocket"))
        XCTAssertNil(decide([("Host", "peel"), ("Connection", "Upgrade"), ("Upgrade", "websocketx/13")]),
                     "the name is the whole part before the slash")
    }

    func testUpgradeWithoutConnectionUpgrade_isAnsweredOverHTTP11() {
        // RFC 9110 §7.8: Upgrade is a hop-by-hop request only when Connection names it.
        XCTAssertNil(decide([("Host", "peel"), ("Upgrade", "websocket")]))
        XCTAssertNil(decide([("Host", "peel"), ("Connection", "keep-alive"), ("Upgrade", "websocket")]))
        XCTAssertNil(decide([("Host", "peel"), ("Connection", "Upgrade")]))
    }

    func testH2c_fromCurlHTTP2_isIgnored() {
        let h2c = [("Host", "peel"), ("Connection", "Upgrade, HTTP2-Settings"), ("Upgrade", "h2c"), ("HTTP2-Settings", "AAMAAABkAAQCAAAAAAIAAAAA")]
        XCTAssertNil(decide(h2c))
        XCTAssertNil(decide(websocket, protocols: []), "an empty --upgrade-protocols turns tunnels off")
        XCTAssertEqual(decide(h2c, protocols: ["websocket", "h2c"]), .tunnel("h2c"), "only because it is listed")
    }

    func testOnlyABodilessGET_isTunneled() {
        XCTAssertNil(decide(websocket + [("Content-Length", "5")], method: "POST", body: 5))
        XCTAssertNil(decide(websocket, method: "POST"), "RFC 6455 §4.1: the handshake is a GET")
        XCTAssertNil(decide(websocket, method: "HEAD"))
        XCTAssertNil(decide(websocket + [("Content-Length", "3")], body: 3), "a GET with a body is answered as a call")
    }

    func testHTTP10_isNeverUpgraded() {
        // RFC 9110 §7.8: a server must ignore Upgrade received in an HTTP/1.0 request.
        XCTAssertNil(decide(websocket, http11: false))
    }

    func testWithAnAllowList_anOriginItDoesNotName_isRefused() {
        let allowed = cors(["https://app.example.com", "https://*.example.org"])
        XCTAssertEqual(decide(websocket + [("Origin", "https://evil.example")], cors: allowed), .forbiddenOrigin)
        XCTAssertEqual(decide(websocket + [("Origin", "null")], cors: allowed), .forbiddenOrigin)
        XCTAssertEqual(decide(websocket + [("Origin", "https://app.example.com")], cors: allowed), .tunnel("websocket"))
        XCTAssertEqual(decide(websocket + [("Origin", "https://chat.example.org")], cors: allowed), .tunnel("websocket"))
        XCTAssertEqual(decide(websocket, cors: allowed), .tunnel("websocket"), "no Origin: a native app")
        XCTAssertEqual(decide(websocket + [("Origin", "https://x.example")], cors: cors(["*"])), .tunnel("websocket"))
    }

    func testWithoutAnAllowList_theBackendJudgesOrigin() {
        XCTAssertEqual(decide(websocket + [("Origin", "https://evil.example")]), .tunnel("websocket"))
    }

    func testAnOriginRefusal_isForUpgradesOnly() {
        let allowed = cors(["https://app.example.com"])
        XCTAssertNil(decide([("Host", "peel"), ("Origin", "https://evil.example")], cors: allowed),
                     "a plain call from another origin is CORS's business, not refused here")
        XCTAssertNil(decide([("Host", "peel"), ("Connection", "Upgrade"), ("Upgrade", "h2c"), ("Origin", "https://evil.example")],
                            cors: allowed))
    }
}

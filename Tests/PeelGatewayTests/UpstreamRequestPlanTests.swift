@testable import PeelGateway
import PeelIO
import XCTest

/// The upstream request a call makes, built from the request's fields held as a value: no socket,
/// no loop (issue 26).
final class UpstreamRequestPlanTests: XCTestCase {
    private func request(_ pairs: [(String, String)], method: String = "GET", preserveHost: Bool = false,
                         peer: String = "10.0.0.9", forwardFields: GatewayConfig.ForwardFields = .xForwarded,
                         trusted: Bool = true, stripping: Bool = false) throws -> UpstreamRequest {
        let fields = ResponseHeaders(pairs)
        var facts = RequestFacts(fields, keys: nil)
        if !trusted { facts.distrustForwardingFields() }
        var config = stripping ? try loadConfig(file: #"{"routes": [{"prefix": "/api/", "upstream": "default", "strip_prefix": true}]}"#,
                                                environment: ["PEEL_UPSTREAM": "http://127.0.0.1:1"]) : GatewayConfig()
        config.calls.preserveHost = preserveHost
        config.calls.forwardFields = forwardFields
        let routes = try RouteSet(config, groups: UpstreamGroups(config, onTransition: { _, _ in }))
        let route = try XCTUnwrap(routes.choose(host: nil, path: "/api/users"))
        XCTAssertEqual(route.stripsPrefix, stripping)
        return Forwarder.upstreamRequest(fields, method: method, MethodToken(method), facts, route: route, endpoint: route.picker.endpoints[0],
                                         target: (path: "/api/users", query: "page=2"), peer: peer, requestId: "req-1",
                                         accepted: facts.acceptEncoding.map { AcceptedCodings($0) })
    }

    func testHopByHopAndNamedFieldsStay_PeelsForwardingFieldsFollow() throws {
        let r = try request([("Host", "app.example"), ("Connection", "keep-alive, X-Hop"), ("X-Hop", "secret"), ("Keep-Alive", "timeout=5"),
                         ("Authorization", "Bearer t"), ("Accept", "application/json"), ("Accept-Encoding", "gzip;q=0.5, br"),
                         ("X-Forwarded-For", "1.2.3.4"), ("TE", "trailers")])
        XCTAssertEqual(r.method, "GET")
        guard case .origin(_, let path, let query) = r.target else { return XCTFail("an origin-form target") }
        XCTAssertEqual(path, "/api/users")
        XCTAssertEqual(query, "page=2")
        XCTAssertEqual(r.fieldLines, ["Authorization: Bearer t", "Accept: application/json",
                                      "X-Forwarded-For: 1.2.3.4, 10.0.0.9", "X-Forwarded-Proto: http", "X-Forwarded-Host: app.example",
                                      "X-Request-Id: req-1", "Accept-Encoding: \(r.acceptEncoding)"])
        // The client's codings, limited to those curl decodes, highest q first.
        XCTAssertEqual(r.acceptEncoding, UpstreamClient.decodableCodings.contains("br") ? "br, gzip" : "gzip")
    }

    func testHeadGoesUpAsGet_andTheClientsHostOnlyWhenPreserved() throws {
        let head = try request([("Host", "app.example")], method: "HEAD", preserveHost: true)
        XCTAssertEqual(head.method, "GET")
        XCTAssertTrue(head.fieldLines.contains("Host: app.example"))
        XCTAssertEqual(head.acceptEncoding, "identity", "a client that named no coding gets none")
        XCTAssertFalse(try request([("Host", "app.example")]).fieldLines.contains { $0.hasPrefix("Host") })
    }

    func testABrokenTraceparentTakesTracestateWithIt() throws {
        let r = try request([("traceparent", "not-a-trace"), ("tracestate", "a=1"), ("X-Other", "1")], method: "DELETE", peer: "::1")
        XCTAssertEqual(r.method, "DELETE")
        XCTAssertEqual(r.fieldLines, ["X-Other: 1", "X-Forwarded-For: ::1", "X-Forwarded-Proto: http",
                                      "X-Request-Id: req-1", "Accept-Encoding: identity", "Accept:"])
    }

    // `--forward-fields`: each family Peel writes on its own, both, or none.
    func testForwardFields_eachChoiceWritesItsFamilies() throws {
        let host = [("Host", "app.example")]
        let element = "Forwarded: for=10.0.0.9;host=\"app.example\";proto=http"
        let x = ["X-Forwarded-For: 10.0.0.9", "X-Forwarded-Proto: http", "X-Forwarded-Host: app.example"]
        XCTAssertEqual(try request(host, forwardFields: .xForwarded).fieldLines, x + ["X-Request-Id: req-1", "Accept-Encoding: identity", "Accept:"])
        XCTAssertEqual(try request(host, forwardFields: .forwarded).fieldLines, [element, "X-Request-Id: req-1", "Accept-Encoding: identity", "Accept:"])
        XCTAssertEqual(try request(host, forwardFields: .both).fieldLines, x + [element, "X-Request-Id: req-1", "Accept-Encoding: identity", "Accept:"])
        XCTAssertEqual(try request(host, forwardFields: .none).fieldLines, ["X-Request-Id: req-1", "Accept-Encoding: identity", "Accept:"])
    }

    // A family left out is still carried on when a trusted proxy sent it, with this hop appended;
    // from an untrusted peer the client's are dropped whatever the choice (they could be forged).
    func testForwardFields_aTrustedProxysFamilyIsCarriedOnWhenNotChosen() throws {
        let sent = [("Host", "app.example"), ("Forwarded", "for=198.51.100.1"), ("X-Forwarded-For", "203.0.113.7")]
        let none = try request(sent, forwardFields: .none).fieldLines
        XCTAssertEqual(none, ["X-Forwarded-For: 203.0.113.7, 10.0.0.9", "X-Forwarded-Proto: http", "X-Forwarded-Host: app.example",
                              "Forwarded: for=198.51.100.1, for=10.0.0.9;host=\"app.example\";proto=http", "X-Request-Id: req-1", "Accept-Encoding: identity", "Accept:"])
        let onlyProto = try request([("Host", "app.example"), ("X-Forwarded-Proto", "https")], forwardFields: .forwarded).fieldLines
        XCTAssertTrue(onlyProto.contains("X-Forwarded-Proto: http"), "\(onlyProto)")
        XCTAssertEqual(try request(sent, forwardFields: .none, trusted: false).fieldLines, ["X-Request-Id: req-1", "Accept-Encoding: identity", "Accept:"])
        XCTAssertFalse(try request(sent, trusted: false).fieldLines.contains { $0.hasPrefix("Forwarded") })
    }

    // The request id: the worker's prefix, then the call's number in lowercase hex.
    func testRequestIds_areThePrefixThenTheCounterInHex() {
        let prefix = "00c0ffee12345678-1-"
        for (n, hex) in [(UInt64(0), "0"), (1, "1"), (9, "9"), (10, "a"), (15, "f"), (16, "10"), (255, "ff"), (256, "100"),
                         (0xdead_beef, "deadbeef"), (UInt64.max, "ffffffffffffffff")] {
            XCTAssertEqual(Forwarder.requestId(prefix: prefix, counter: n), prefix + String(n, radix: 16), "\(n)")
            XCTAssertEqual(Forwarder.requestId(prefix: prefix, counter: n), prefix + hex)
        }
        XCTAssertEqual(Forwarder.requestId(prefix: "", counter: 0x1f), "1f")
    }

    // Fields about a proxy's own hop never go on; those naming the client (or a stripped prefix) go
    // on only from a trusted proxy. Other fields are untouched.
    func testHopFieldsNeverGo_clientNamingFieldsOnlyFromATrustedProxy() throws {
        let sent = [("Host", "app.example"), ("X-Forwarded-Port", "31337"), ("X-Forwarded-Ssl", "on"),
                    ("X-Forwarded-Scheme", "https"), ("X-Forwarded-Server", "evil"), ("X-Forwarded-Prefix", "/evil"),
                    ("X-Real-IP", "6.6.6.6"), ("Proxy-Client-IP", "6.6.6.7"), ("WL-Proxy-Client-IP", "6.6.6.8"),
                    ("True-Client-IP", "6.6.6.9"), ("X-Client-IP", "6.6.6.10"), ("X-Cluster-Client-IP", "6.6.6.11"),
                    ("X-Other", "1"), ("Connection", "X-Hop"), ("X-Hop", "2")]
        let mine = ["X-Forwarded-For: 10.0.0.9", "X-Forwarded-Proto: http", "X-Forwarded-Host: app.example",
                    "X-Request-Id: req-1", "Accept-Encoding: identity", "Accept:"]
        XCTAssertEqual(try request(sent, trusted: false).fieldLines, ["X-Other: 1"] + mine)
        XCTAssertEqual(try request(sent, trusted: true).fieldLines,
                       ["X-Forwarded-Prefix: /evil", "X-Real-IP: 6.6.6.6", "Proxy-Client-IP: 6.6.6.7", "WL-Proxy-Client-IP: 6.6.6.8",
                        "True-Client-IP: 6.6.6.9", "X-Client-IP: 6.6.6.10", "X-Cluster-Client-IP: 6.6.6.11", "X-Other: 1"] + mine)
        // Without a Connection option, the shared sets are used: the same answer.
        let plain = sent.filter { $0.0 != "Connection" && $0.0 != "X-Hop" }
        XCTAssertEqual(try request(plain, trusted: false).fieldLines, ["X-Other: 1"] + mine)
        XCTAssertEqual(try request(plain, trusted: true).fieldLines.count, 8 + mine.count)
        // A route that strips its prefix drops a trusted proxy's X-Forwarded-Prefix as well: it
        // would name a prefix without the one Peel took off.
        for others in [plain, sent] {
            let stripped = try request(others, trusted: true, stripping: true).fieldLines
            XCTAssertFalse(stripped.contains { $0.hasPrefix("X-Forwarded-Prefix") }, "\(stripped)")
            XCTAssertTrue(stripped.contains("X-Real-IP: 6.6.6.6"))
        }
        // Other names frameworks read a client's address from, when X-Forwarded-For is missing.
        let more = [("Client-IP", "1"), ("HTTP_CLIENT_IP", "2"), ("HTTP_X_FORWARDED_FOR", "3"), ("X-Forwarded", "4"),
                    ("Forwarded-For", "5"), ("X-Original-Forwarded-For", "6"), ("X-Other", "7")]
        XCTAssertEqual(try request(more, forwardFields: .none, trusted: false).fieldLines,
                       ["X-Other: 7", "X-Request-Id: req-1", "Accept-Encoding: identity", "Accept:"])
        XCTAssertEqual(try request(more, forwardFields: .none, trusted: true).fieldLines.count, 7 + 3)
    }
}

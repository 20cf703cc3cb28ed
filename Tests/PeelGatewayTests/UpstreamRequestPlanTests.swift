@testable import PeelGateway
import PeelIO
import XCTest

/// The upstream request a call makes, built from the request's fields held as a value: no socket,
/// no loop (issue 26).
final class UpstreamRequestPlanTests: XCTestCase {
    private func request(_ pairs: [(String, String)], method: String = "GET", preserveHost: Bool = false,
                         peer: String = "10.0.0.9") throws -> UpstreamRequest {
        let fields = ResponseHeaders(pairs)
        let facts = RequestFacts(fields, keys: nil)
        var config = GatewayConfig()
        config.calls.preserveHost = preserveHost
        let route = try RouteSet(config, groups: UpstreamGroups(config, onTransition: { _, _ in })).fallback
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
                                      "Forwarded: for=10.0.0.9;host=\"app.example\";proto=http", "X-Request-Id: req-1"])
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
        XCTAssertEqual(r.fieldLines, ["X-Other: 1", "X-Forwarded-For: ::1", "X-Forwarded-Proto: http", "Forwarded: for=\"[::1]\";proto=http",
                                      "X-Request-Id: req-1", "Accept:"])
    }
}

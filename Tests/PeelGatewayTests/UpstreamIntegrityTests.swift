import Foundation
import PeelGateway
import PeelIO
import XCTest

/// Upstreams that misbehave on raw sockets: what Peel sends them, and what it relays from them.
final class UpstreamIntegrityTests: XCTestCase {
    /// The fake answers every request except `path` on a reused connection (its second request or
    /// later), which it reads, counts and then closes without a byte: processed, answer lost.
    private func harness(dyingOnReuse path: String) throws -> RawHarness {
        try RawHarness { r in
            r.path == path && r.number > 1 ? .close : .send(RawUpstream.envelope("{\"n\":\(r.number)}"))
        }
    }

    func testPostProcessedThenClosedOnAReusedConnection_isNotSentAgain() throws {
        let h = try harness(dyingOnReuse: "/charge")
        defer { h.stop() }
        XCTAssertEqual(try h.request("GET", "/warm").status, 200)
        let r = try h.request("POST", "/charge", body: Array("amount=100".utf8))
        XCTAssertEqual(h.seen("/charge").count, 1, "the POST reached the upstream more than once")
        XCTAssertEqual(r.status, 502, r.text)
        let p = problem(r)
        XCTAssertEqual(p["kind"] as? String, "upstream-unreachable")
        XCTAssertEqual(p["code"] as? Int, -101)
        XCTAssertEqual(p["detail"] as? String,
                       "the connection died after the request was sent; not re-sent because POST is not idempotent")
    }

    func testPatchProcessedThenClosedOnAReusedConnection_isNotSentAgain() throws {
        let h = try harness(dyingOnReuse: "/order")
        defer { h.stop() }
        XCTAssertEqual(try h.request("GET", "/warm").status, 200)
        let r = try h.request("PATCH", "/order", body: Array("{}".utf8))
        XCTAssertEqual(h.seen("/order").count, 1, "the PATCH reached the upstream more than once")
        XCTAssertEqual(r.status, 502, r.text)
    }

    func testGetOnAReusedConnectionThatDies_isRetriedOnceOnAFreshOne() throws {
        let h = try harness(dyingOnReuse: "/read")
        defer { h.stop() }
        XCTAssertEqual(try h.request("GET", "/warm").status, 200)
        let r = try h.request("GET", "/read")
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(r.text, "{\"n\":1}", "answered by the fresh connection's first request")
        XCTAssertEqual(h.seen("/read").map(\.number), [2, 1])
    }

    func testNotResent_doesNotCountAgainstReachability() throws {
        let h = try RawHarness(configure: { $0.fall = 1 }) { r in
            r.path == "/charge" && r.number > 1 ? .close : .send(RawUpstream.envelope("1"))
        }
        defer { h.stop() }
        XCTAssertEqual(try h.request("GET", "/warm").status, 200)
        XCTAssertEqual(try h.request("POST", "/charge", body: [0x31]).status, 502)
        XCTAssertEqual(try h.request("GET", "/after").status, 200, "one closed keep-alive connection took the upstream offline")
    }
}

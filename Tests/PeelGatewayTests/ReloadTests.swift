import Foundation
import PeelGateway
import PeelIO
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
        next.maxBody = 4
        next.workers = 7
        next.listen = HostPort(host: "127.0.0.1", port: 1)
        XCTAssertEqual(h.gateway.reload(next), ["listen", "workers"])
        XCTAssertEqual(h.gateway.config.workers, 2)

        // Pooled handles and kept-alive connections of the old upstream are not used again.
        for _ in 0..<4 { XCTAssertEqual(try h.request("GET", "/a").text, "\"other\"") }
        XCTAssertEqual(try h.request("POST", "/a", body: Array("12345".utf8)).status, 413)
        XCTAssertEqual(try h.request("GET", "/a").status, 200, "still listening where it was")
    }
}

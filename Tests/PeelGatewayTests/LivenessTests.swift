import Foundation
@testable import PeelGateway
import PeelIO
import XCTest

/// Issue 18: /healthz and /readyz see a worker whose event loop is blocked.
final class LivenessTests: XCTestCase {
    func testBlockedWorkerLoop_turnsHealthzAndReadyz503_thenBack() throws {
        let h = try Harness(workers: 2) { $0.lifecycle.workerStallTimeout = 1 }
        defer { h.stop() }
        XCTAssertEqual(try h.admin("/healthz").status, 200)
        XCTAssertEqual(try h.admin("/readyz").status, 200)
        // Blocks worker 1's loop for real: its thread sleeps inside a loop callback.
        let blockedAt = Date()
        h.gateway.workers[1].loop.execute { usleep(2_500_000) }
        XCTAssertTrue(h.eventually(2.2) { (try? h.admin("/healthz").status) == 503 }, "/healthz did not see the stuck loop")
        XCTAssertLessThan(Date().timeIntervalSince(blockedAt), 2.3, "within the bound and a heartbeat or so")
        let health = try h.admin("/healthz")
        XCTAssertTrue(health.text.contains("\"worker\":1"), health.text)
        XCTAssertEqual(try h.admin("/readyz").status, 503)
        // Once the loop is free again, both turn 200.
        XCTAssertTrue(h.eventually(3) { (try? h.admin("/healthz").status) == 200 }, "did not recover")
        XCTAssertEqual(try h.admin("/readyz").status, 200)
    }
}

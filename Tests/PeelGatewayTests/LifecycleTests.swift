import Foundation
import PeelDemo
import PeelGateway
import PeelIO
import XCTest

final class LifecycleTests: XCTestCase {
    func testShutdown_letsSlowCallFinishAndReadyzTurns503() throws {
        let h = try Harness { c in c.lifecycle.drainDelay = 0.3 }
        XCTAssertEqual(try h.admin("/readyz").status, 200)
        let result = LockedBox<BlockingClient.Response?>(nil)
        let done = expectation(description: "slow call answered")
        let port = h.port
        Thread.detachNewThread {
            let c = try? BlockingClient(host: "127.0.0.1", port: port, timeout: 10)
            try? c?.send("GET /api/slow?ms=1500 HTTP/1.1\r\nHost: x\r\n\r\n")
            result.set(try? c?.readResponse())
            done.fulfill()
        }
        XCTAssertTrue(h.eventually { h.gateway.inflight == 1 })
        let stopped = expectation(description: "shutdown returned")
        let clean = LockedBox(false)
        Thread.detachNewThread {
            clean.set(h.gateway.shutdown())
            stopped.fulfill()
        }
        // The slow call keeps the gateway draining for about 1.5 s: room for a late thread.
        XCTAssertTrue(h.eventually(1) { h.gateway.isDraining })
        XCTAssertEqual(try h.admin("/readyz").status, 503, "/readyz must turn 503 while draining")
        wait(for: [done, stopped], timeout: 10)
        XCTAssertEqual(result.get()?.status, 200)
        XCTAssertEqual(result.get()?.header("Connection")?.lowercased(), "close")
        XCTAssertTrue(clean.get())
        h.upstream.stop()
    }

    func testShutdown_timeoutCutsStuckCallsShort() throws {
        let h = try Harness { c in c.lifecycle.shutdownTimeout = 0.3; c.calls.timeout = 30 }
        let port = h.port
        let c = try BlockingClient(host: "127.0.0.1", port: port, timeout: 5)
        try c.send("GET /fault/stall HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertTrue(h.eventually { h.gateway.inflight == 1 })
        let started = Date()
        XCTAssertFalse(h.gateway.shutdown(), "a stalled call should be reported as cut short")
        XCTAssertLessThan(Date().timeIntervalSince(started), 2)
        let r = try c.readResponse()
        XCTAssertEqual(r.status, 503, "a call cut by the shutdown timeout got no answer")
        XCTAssertEqual(problem(r)["kind"] as? String, "upstream-unreachable")
        XCTAssertEqual(r.header("Connection")?.lowercased(), "close")
        XCTAssertTrue(c.peerClosed(within: 1))
        h.upstream.stop()
    }

    /// Sends a request the fake upstream never answers on `c`, runs `between` while it waits, lets
    /// `leave` end the connection, and requires the call to end as one client-closed 499.
    private func assertLeavingCancelsTheCall(
        _ h: Harness, _ c: BlockingClient, between: () throws -> Void = {}, leave: () -> Void,
        file: StaticString = #filePath, line: UInt = #line
    ) throws {
        try c.send("GET /fault/stall HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertTrue(h.eventually { h.gateway.inflight == 1 }, file: file, line: line)
        try between()
        leave()
        XCTAssertTrue(h.eventually(1) { h.gateway.inflight == 0 }, "leaving did not end the call", file: file, line: line)
        let metrics = try h.admin("/metrics").text
        XCTAssertTrue(
            metrics.contains("peel_requests_total{kind=\"client-closed\",status=\"499\"} 1"), metrics, file: file, line: line)
        XCTAssertEqual(try h.request("GET", "/api/user").status, 200, "gateway keeps serving", file: file, line: line)
    }

    func testClientHangUp_cancelsUpstreamTransfer() throws {
        let h = try Harness()
        defer { h.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try assertLeavingCancelsTheCall(h, c) { c.close() }
    }

    // The hang-up watch belongs to the connection and is armed per request: it must work again on a
    // later request of a keep-alive connection, after earlier replies disarmed it.
    func testClientHangUp_onALaterKeepAliveRequest_cancelsUpstreamTransfer() throws {
        let h = try Harness()
        defer { h.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        for _ in 0..<3 {
            try c.send("GET /api/user HTTP/1.1\r\nHost: x\r\n\r\n")
            XCTAssertEqual(try c.readResponse().status, 200)
        }
        try assertLeavingCancelsTheCall(h, c) { c.close() }
    }

    // A reset (SO_LINGER 0) reaches epoll as EPOLLERR/EPOLLHUP, which libevent reports without its
    // close bit: the watch must still see the client leave.
    func testClientReset_cancelsUpstreamTransfer() throws {
        let h = try Harness()
        defer { h.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try assertLeavingCancelsTheCall(h, c) { c.close(reset: true) }
    }

    // After pipelined bytes the request is watched for a close alone; a client that then leaves is still seen.
    func testClientHangUp_afterPipelinedBytes_cancelsUpstreamTransfer() throws {
        let h = try Harness()
        defer { h.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try assertLeavingCancelsTheCall(h, c, between: {
            try c.send("GET /api/user HTTP/1.1\r\nHost: x\r\n\r\n")
            // Give the loop time to see the pipelined bytes and fall back to the close-only watch.
            usleep(100_000)
            XCTAssertEqual(h.gateway.inflight, 1, "pipelined bytes were taken for a hang-up")
        }) { c.close() }
    }

    // Bytes of the next request arriving while one waits for the upstream are no hang-up.
    func testPipelinedBytesWhileWaiting_areNotAHangUp() throws {
        let h = try Harness()
        defer { h.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try c.send("GET /api/slow?ms=400 HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertTrue(h.eventually { h.gateway.inflight == 1 })
        try c.send("GET /api/user HTTP/1.1\r\nHost: x\r\n\r\n")
        let slow = try c.readResponse()
        XCTAssertEqual(slow.status, 200)
        XCTAssertEqual(slow.text, #"{"slow":true,"ms":400}"#)
        XCTAssertEqual(try c.readResponse().text, DemoCatalog.userData)
        let metrics = try h.admin("/metrics").text
        XCTAssertFalse(metrics.contains("kind=\"client-closed\""), metrics)
    }

    func testAdmin_statusMetricsHealthz() throws {
        let h = try Harness()
        defer { h.stop() }
        XCTAssertTrue(h.eventually { h.gateway.reachability.state == .reachable })
        _ = try h.request("GET", "/api/user")
        _ = try h.request("GET", "/api/business-error")
        // A call is counted on its worker just after its answer is written; a client that has the
        // answer can ask the admin listener before that (seen under load in a CI dry run).
        XCTAssertTrue(h.eventually { h.gateway.inflight == 0 })
        XCTAssertEqual(try h.admin("/healthz").status, 200)
        let status = try h.admin("/status")
        let doc = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(status.body)) as? [String: Any])
        XCTAssertEqual(doc["version"] as? String, peelVersion)
        XCTAssertEqual(doc["upstream"] as? String, h.upstream.baseURL)
        let reach = try XCTUnwrap(doc["reachability"] as? [String: Any])
        XCTAssertEqual(reach["state"] as? String, "reachable")
        XCTAssertNotNil(reach["since"] as? String)
        let probe = try XCTUnwrap(reach["last_probe"] as? [String: Any])
        XCTAssertEqual(probe["ok"] as? Bool, true)
        XCTAssertEqual(probe["status"] as? Int, 200)
        XCTAssertNotNil(probe["latency_ms"] as? Double)
        XCTAssertEqual(doc["inflight"] as? Int, 0)

        let m = try h.admin("/metrics")
        XCTAssertTrue(m.header("Content-Type")?.hasPrefix("text/plain; version=0.0.4") ?? false)
        let text = m.text
        for name in ["peel_requests_total", "peel_request_duration_seconds", "peel_upstream_duration_seconds", "peel_upstream_up",
                     "peel_upstream_errors_total", "peel_reachability_transitions_total", "peel_connections_active",
                     "peel_inflight_requests"] {
            XCTAssertTrue(text.contains("# TYPE \(name) "), "missing TYPE for \(name)")
            XCTAssertTrue(text.contains("# HELP \(name) "), "missing HELP for \(name)")
        }
        XCTAssertTrue(text.contains("peel_requests_total{kind=\"ok\",status=\"200\"} 1"), text)
        XCTAssertTrue(text.contains("peel_requests_total{kind=\"business-error\",status=\"422\"} 1"), text)
        XCTAssertTrue(text.contains("peel_request_duration_seconds_count 2"), text)
        XCTAssertTrue(text.contains("peel_request_duration_seconds_bucket{le=\"+Inf\"} 2"), text)
        XCTAssertTrue(text.contains("peel_upstream_up 1"), text)
        XCTAssertEqual(try h.admin("/nope").status, 404)
    }

    func testAdminOff_andBadConfigNamesTheOption() throws {
        XCTAssertThrowsError(try ConfigLoader.load(arguments: ["--timeout", "soon"], environment: ["PEEL_UPSTREAM": "http://x"])) { e in
            XCTAssertEqual((e as? ConfigError)?.option, "--timeout")
        }
        let c = try ConfigLoader.load(arguments: ["--admin-listen", "off"], environment: ["PEEL_UPSTREAM": "http://x"])
        XCTAssertNil(c.listeners.admin)
    }
}

/// A value shared with a detached thread in a test.
final class LockedBox<T>: @unchecked Sendable {
    private var value: T
    private let lock = NSLock()
    init(_ v: T) { value = v }
    func set(_ v: T) { lock.lock(); value = v; lock.unlock() }
    func get() -> T { lock.lock(); defer { lock.unlock() }; return value }
}

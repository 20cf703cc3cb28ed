import PeelDemo
import PeelGateway
import PeelIO
import XCTest

/// The pure machine, driven with an injected clock: no sleeps.
final class ReachabilityMachineTests: XCTestCase {
    func testUnknown_becomesReachableOnFirstPass() {
        var m = ReachabilityMachine(fall: 3, rise: 2, now: 0)
        XCTAssertEqual(m.record(success: true, at: 1), ReachabilityTransition(from: .unknown, to: .reachable, at: 1))
        XCTAssertEqual(m.state, .reachable)
        XCTAssertEqual(m.since, 1)
    }

    func testFall_needsConsecutiveFailures() {
        var m = ReachabilityMachine(fall: 3, rise: 2, now: 0)
        _ = m.record(success: true, at: 0)
        XCTAssertNil(m.record(success: false, at: 1))
        XCTAssertNil(m.record(success: false, at: 2))
        XCTAssertNil(m.record(success: true, at: 3), "a pass resets the failure run")
        XCTAssertNil(m.record(success: false, at: 4))
        XCTAssertNil(m.record(success: false, at: 5))
        XCTAssertEqual(m.record(success: false, at: 6), ReachabilityTransition(from: .reachable, to: .unreachable, at: 6))
        XCTAssertNil(m.record(success: false, at: 7), "no repeated transition while down")
    }

    func testRise_needsConsecutivePasses() {
        var m = ReachabilityMachine(fall: 1, rise: 2, now: 0)
        XCTAssertEqual(m.record(success: false, at: 1)?.to, .unreachable)
        XCTAssertNil(m.record(success: true, at: 2))
        XCTAssertNil(m.record(success: false, at: 3))
        XCTAssertNil(m.record(success: true, at: 4))
        XCTAssertEqual(m.record(success: true, at: 5), ReachabilityTransition(from: .unreachable, to: .reachable, at: 5))
    }

    func testUnknown_goesDownAfterFallFailures() {
        var m = ReachabilityMachine(fall: 2, rise: 1, now: 0)
        XCTAssertNil(m.record(success: false, at: 1))
        XCTAssertEqual(m.state, .unknown)
        XCTAssertEqual(m.record(success: false, at: 2)?.to, .unreachable)
    }

    func testShared_publishesStateAndCountsTransitions() {
        final class Clock: @unchecked Sendable { var now = 0.0 }
        let clock = Clock()
        let r = Reachability(fall: 2, rise: 1, clock: { clock.now }, onTransition: { _ in })
        XCTAssertEqual(r.state, .unknown)
        XCTAssertFalse(r.isDown)
        r.recordPassiveFailure()
        clock.now = 1
        r.recordPassiveFailure()
        XCTAssertTrue(r.isDown)
        XCTAssertEqual(r.since, 1)
        r.recordProbe(ProbeReport(ok: true, status: 200, error: nil, latency: 0.001, at: 0))
        XCTAssertEqual(r.state, .reachable)
        XCTAssertEqual(r.transitionCounts[.unreachable], 1)
        XCTAssertEqual(r.transitionCounts[.reachable], 1)
        XCTAssertEqual(r.lastProbeReport?.status, 200)
    }
}

/// Reachability through a running gateway: killing and restarting the fake upstream.
final class ReachabilityLiveTests: XCTestCase {
    func testUpstreamKilled_callsGoOfflineWithinASecond_andComeBackAfterRestart() throws {
        let h = try Harness { c in
            c.probeInterval = 0.2
            c.probeTimeout = 0.2
            c.connectTimeout = 0.2
            c.fall = 2
            c.rise = 1
        }
        defer { h.stop() }
        XCTAssertTrue(h.eventually { h.gateway.reachability.state == .reachable })
        XCTAssertEqual(try h.request("GET", "/api/user").status, 200)
        let port = h.upstream.port
        h.upstream.stop()
        let killedAt = Date()
        XCTAssertTrue(h.eventually(1.0) { h.gateway.reachability.isDown }, "not offline within 1 s")
        let offline = try h.request("GET", "/api/user")
        XCTAssertEqual(offline.status, 503)
        XCTAssertEqual(problem(offline)["kind"] as? String, "offline")
        XCTAssertLessThan(Date().timeIntervalSince(killedAt), 1.5)

        // Same port, so the gateway's configured upstream answers again.
        let revived = try DemoUpstream(listen: HostPort(host: "127.0.0.1", port: port))
        try revived.start()
        defer { revived.stop() }
        XCTAssertTrue(h.eventually(1.0) { !h.gateway.reachability.isDown }, "not back within 1 s")
        XCTAssertEqual(try h.request("GET", "/api/user").status, 200)

        let status = try h.admin("/status")
        XCTAssertTrue(status.text.contains("\"state\":\"reachable\""), status.text)
        let metrics = try h.admin("/metrics").text
        XCTAssertTrue(metrics.contains("peel_reachability_transitions_total{to=\"unreachable\"} 1"), metrics)
        XCTAssertTrue(metrics.contains("peel_reachability_transitions_total{to=\"reachable\"} 2"), metrics)
        XCTAssertTrue(metrics.contains("peel_requests_total{kind=\"offline\",status=\"503\"} 1"), metrics)
    }

    func testOffline_upstreamSeesNoCallsWhileDown() throws {
        let h = try Harness { c in
            c.probeInterval = 3600  // only the first probe runs during the test
            c.fall = 1
        }
        defer { h.stop() }
        XCTAssertTrue(h.eventually { h.gateway.reachability.state == .reachable })
        h.gateway.reachability.recordPassiveFailure()
        XCTAssertTrue(h.gateway.reachability.isDown)
        let before = h.upstream.requestCount
        for _ in 0..<10 { XCTAssertEqual(try h.request("GET", "/api/user").status, 503) }
        XCTAssertEqual(h.upstream.requestCount, before, "the upstream was contacted while offline")
    }

    func testPassiveFailures_flipStateBeforeTheTimer() throws {
        let h = try Harness { c in
            c.upstream = try! UpstreamURL.parse("http://127.0.0.1:1").get()
            c.probeInterval = 3600  // only the first probe runs during the test
            c.fall = 3
        }
        defer { h.stop() }
        XCTAssertTrue(h.eventually { h.gateway.reachability.lastProbeReport != nil })
        for _ in 0..<2 { XCTAssertEqual(try h.request("GET", "/api/user").status, 502) }
        XCTAssertTrue(h.eventually(0.5) { h.gateway.reachability.isDown }, "three refused connections did not flip the state")
        XCTAssertEqual(try h.request("GET", "/api/user").status, 503)
    }
}

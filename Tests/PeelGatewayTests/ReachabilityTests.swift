import Foundation
import Glibc
import PeelDemo
import PeelGateway
import PeelIO
import Synchronization
import XCTest

/// The pure machine, driven with an injected clock: no sleeps.
final class ReachabilityMachineTests: XCTestCase {
    func testUnknown_becomesReachableOnFirstPass() {
        var m = ReachabilityMachine(fall: 3, rise: 2, now: 0)
        XCTAssertEqual(m.record(.probePassed, at: 1), ReachabilityTransition(from: .unknown, to: .reachable, at: 1, reason: "probe passed"))
        XCTAssertEqual(m.state, .reachable)
        XCTAssertEqual(m.since, 1)
    }

    func testFall_needsConsecutiveFailures() {
        var m = ReachabilityMachine(fall: 3, rise: 2, now: 0)
        _ = m.record(.probePassed, at: 0)
        XCTAssertNil(m.record(.probeFailed("connect refused"), at: 1))
        XCTAssertNil(m.record(.probeFailed("connect refused"), at: 2))
        XCTAssertNil(m.record(.probePassed, at: 3), "a pass resets the failure run")
        XCTAssertNil(m.record(.probeFailed("connect refused"), at: 4))
        XCTAssertNil(m.record(.probeFailed("connect refused"), at: 5))
        XCTAssertEqual(m.record(.probeFailed("connect refused"), at: 6), ReachabilityTransition(from: .reachable, to: .unreachable, at: 6, reason: "connect refused"))
        XCTAssertNil(m.record(.probeFailed("connect refused"), at: 7), "no repeated transition while down")
    }

    func testRise_needsConsecutivePasses() {
        var m = ReachabilityMachine(fall: 1, rise: 2, now: 0)
        XCTAssertEqual(m.record(.probeFailed("connect refused"), at: 1)?.to, .unreachable)
        XCTAssertNil(m.record(.probePassed, at: 2))
        XCTAssertNil(m.record(.probeFailed("connect refused"), at: 3))
        XCTAssertNil(m.record(.probePassed, at: 4))
        XCTAssertEqual(m.record(.probePassed, at: 5), ReachabilityTransition(from: .unreachable, to: .reachable, at: 5, reason: "probe passed"))
    }

    func testUnknown_goesDownAfterFallFailures() {
        var m = ReachabilityMachine(fall: 2, rise: 1, now: 0)
        XCTAssertNil(m.record(.probeFailed("connect refused"), at: 1))
        XCTAssertEqual(m.state, .unknown)
        XCTAssertEqual(m.record(.probeFailed("connect refused"), at: 2)?.to, .unreachable)
    }

    // Issue 13: live answers are evidence.

    func testProbeTimeout_isNotAFailure_whileLiveCallsWereAnsweredWithinTheWindow() {
        var m = ReachabilityMachine(fall: 3, rise: 2, liveWindow: 2, now: 0)
        _ = m.record(.probePassed, at: 0)
        for t in stride(from: 1.0, through: 20, by: 1) {
            _ = m.record(.liveAnswer, at: t - 0.5)
            XCTAssertNil(m.record(.probeTimedOut("probe timeout after 1 s"), at: t))
        }
        XCTAssertEqual(m.state, .reachable, "a slow upstream that answers live calls turned offline")
        XCTAssertNil(m.lastFailure, "an excused timeout is not a failure")
    }

    func testProbeTimeout_counts_onceLiveAnswersAreOlderThanTheWindow() {
        var m = ReachabilityMachine(fall: 3, rise: 2, liveWindow: 2, now: 0)
        _ = m.record(.probePassed, at: 0)
        _ = m.record(.liveAnswer, at: 1)
        XCTAssertNil(m.record(.probeTimedOut("probe timeout after 1 s"), at: 3), "1 s after the last answer is excused")
        XCTAssertNil(m.record(.probeTimedOut("probe timeout after 1 s"), at: 3.5))
        XCTAssertNil(m.record(.probeTimedOut("probe timeout after 1 s"), at: 4))
        XCTAssertEqual(m.record(.probeTimedOut("probe timeout after 1 s"), at: 5),
                       ReachabilityTransition(from: .reachable, to: .unreachable, at: 5, reason: "probe timeout after 1 s"))
    }

    func testLiveAnswer_resetsTheFailureRun() {
        var m = ReachabilityMachine(fall: 3, rise: 2, liveWindow: 2, now: 0)
        _ = m.record(.probePassed, at: 0)
        XCTAssertNil(m.record(.probeFailed("probe status 503"), at: 1))
        XCTAssertNil(m.record(.probeFailed("probe status 503"), at: 2))
        XCTAssertFalse(m.isSettled)
        XCTAssertNil(m.record(.liveAnswer, at: 2.5))
        XCTAssertTrue(m.isSettled)
        XCTAssertNil(m.record(.probeFailed("probe status 503"), at: 3))
        XCTAssertNil(m.record(.probeFailed("probe status 503"), at: 4))
        XCTAssertEqual(m.record(.probeFailed("probe status 503"), at: 5)?.to, .unreachable)
    }

    func testTransportFailures_countEvenWhileLiveCallsAreAnswered() {
        // A refused connection is not slowness: the live window excuses timeouts only, so a dead
        // upstream is found as fast as before.
        var m = ReachabilityMachine(fall: 3, rise: 2, liveWindow: 2, now: 0)
        _ = m.record(.probePassed, at: 0)
        _ = m.record(.liveAnswer, at: 0.9)
        XCTAssertNil(m.record(.liveFailed("connect refused"), at: 1))
        XCTAssertNil(m.record(.probeFailed("dns: Could not resolve host"), at: 1.1))
        XCTAssertEqual(m.record(.liveFailed("tls: certificate expired"), at: 1.2),
                       ReachabilityTransition(from: .reachable, to: .unreachable, at: 1.2, reason: "tls: certificate expired"))
        XCTAssertEqual(m.reason, "tls: certificate expired")
        XCTAssertEqual(m.lastFailure?.reason, "tls: certificate expired")
    }

    func testRecovery_liveAnswersAndProbesCountTowardRise() {
        var m = ReachabilityMachine(fall: 1, rise: 2, liveWindow: 2, now: 0)
        XCTAssertEqual(m.record(.probeFailed("connect refused"), at: 1)?.to, .unreachable)
        XCTAssertNil(m.record(.liveAnswer, at: 2), "one pass of two")
        XCTAssertEqual(m.record(.probePassed, at: 3),
                       ReachabilityTransition(from: .unreachable, to: .reachable, at: 3, reason: "probe passed"))
        XCTAssertEqual(m.since, 3)
        XCTAssertEqual(m.lastFailure?.reason, "connect refused", "the last failure stays for /status")
    }

    func testShared_liveAnswerOnTheFastPath_excusesTheNextProbeTimeout() {
        final class Clock: @unchecked Sendable { var now = 0.0 }
        let clock = Clock()
        let r = Reachability(fall: 1, rise: 1, liveWindow: 2, clock: { clock.now }, onTransition: { _ in })
        r.recordProbe(ProbeReport(ok: true, status: 200, error: nil, latency: 0.001, at: 0))
        clock.now = 1
        r.recordLiveAnswer()  // settled: taken without the lock
        clock.now = 2.5
        r.recordProbe(ProbeReport(ok: false, status: nil, error: "probe timeout after 1 s", latency: 1, at: 0, timedOut: true))
        XCTAssertEqual(r.state, .reachable)
        clock.now = 4
        r.recordProbe(ProbeReport(ok: false, status: nil, error: "probe timeout after 1 s", latency: 1, at: 0, timedOut: true))
        XCTAssertEqual(r.state, .unreachable)
        XCTAssertEqual(r.snapshot.reason, "probe timeout after 1 s")
    }

    func testBusyProbes_neverTurnOffline_andCountTowardRise() {
        // Issue 17: a probe that connected but got no answer in time (gunicorn's sync workers all held
        // by slow calls) is busy, not gone.
        var m = ReachabilityMachine(fall: 2, rise: 2, now: 0)
        _ = m.record(.probePassed, at: 0)
        for t in 1...10 { XCTAssertNil(m.record(.probeBusy("probe connected, no answer within 1 s"), at: Double(t))) }
        XCTAssertEqual(m.state, .reachable)
        XCTAssertEqual(m.busyProbes, 10)
        XCTAssertNil(m.record(.probeFailed("connect refused"), at: 11))
        XCTAssertNil(m.record(.probeBusy("busy"), at: 12), "a busy probe breaks a failure run: the host is there")
        XCTAssertNil(m.record(.probeFailed("connect refused"), at: 13))
        XCTAssertEqual(m.record(.probeFailed("connect refused"), at: 14)?.to, .unreachable)
        XCTAssertNil(m.record(.probeBusy("busy"), at: 15))
        let back = m.record(.probeBusy(FailureCause(coarse: "busy", detail: "probe connected, no answer within 1 s")), at: 16)
        XCTAssertEqual(back?.to, .reachable, "an upstream that takes connections again is reachable, busy or not")
        XCTAssertEqual(back?.publicReason, "probe connected, upstream busy")
    }

    func testTransitions_carryACoarsePublicReason_besideTheDetail() {
        var m = ReachabilityMachine(fall: 1, rise: 1, now: 0)
        let cause = FailureCause(coarse: "connect refused", detail: "connect refused: Failed to connect to 10.0.0.7 port 8443")
        let t = m.record(.probeFailed(cause), at: 1)
        XCTAssertEqual(t?.reason, cause.detail)
        XCTAssertEqual(t?.publicReason, "connect refused")
        XCTAssertEqual(m.publicReason, "connect refused")
        XCTAssertEqual(m.lastFailure?.reason, cause.detail)
    }

    func testShared_busyProbeReports_areCountedApart_andKeepTheStateUp() {
        final class Clock: @unchecked Sendable { var now = 0.0 }
        let clock = Clock()
        let r = Reachability(fall: 1, rise: 1, clock: { clock.now }, onTransition: { _ in })
        r.recordProbe(ProbeReport(ok: true, status: 200, error: nil, latency: 0.001, at: 0))
        for i in 1...5 {
            clock.now = Double(i)
            r.recordProbe(ProbeReport(ok: false, status: nil, error: "probe connected, no answer within 1 s", latency: 1, at: 0,
                                      busy: true, coarseError: "busy"))
        }
        XCTAssertEqual(r.state, .reachable)
        XCTAssertEqual(r.probeTotals.passed, 1)
        XCTAssertEqual(r.probeTotals.busy, 5)
        XCTAssertEqual(r.probeTotals.failed, 0)
        XCTAssertEqual(r.snapshot.busyProbes, 5)
    }

    func testShared_publishesStateAndCountsTransitions() {
        final class Clock: @unchecked Sendable { var now = 0.0 }
        let clock = Clock()
        let r = Reachability(fall: 2, rise: 1, clock: { clock.now }, onTransition: { _ in })
        XCTAssertEqual(r.state, .unknown)
        XCTAssertFalse(r.isDown)
        r.recordPassiveFailure("connect refused")
        clock.now = 1
        r.recordPassiveFailure("connect refused")
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
            c.probe.interval = 0.2
            c.probe.timeout = 0.2
            c.calls.connectTimeout = 0.2
            c.probe.fall = 2
            c.probe.rise = 1
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
        // Issue 13: the last failure stays named after recovery.
        XCTAssertTrue(status.text.contains("\"last_failure\":{\"reason\":\"connect refused"), status.text)
        let metrics = try h.admin("/metrics").text
        XCTAssertTrue(metrics.contains("peel_reachability_transitions_total{to=\"unreachable\"} 1"), metrics)
        XCTAssertTrue(metrics.contains("peel_reachability_transitions_total{to=\"reachable\"} 2"), metrics)
        XCTAssertTrue(metrics.contains("peel_requests_total{kind=\"offline\",status=\"503\"} 1"), metrics)
    }

    func testSlowUpstreamUnderLoad_neverTurnsOffline() throws {
        // Issue 13's report, scaled down: every answer, probes included, takes 0.3 s; the probe may
        // take 0.2 s. Before, two timed-out probes made it offline although every call was answered.
        let h = try Harness { c in
            c.probe.path = "/api/slow?ms=300"
            c.probe.interval = 0.25
            c.probe.timeout = 0.2
            c.probe.fall = 3
            c.probe.rise = 1
        }
        defer { h.stop() }
        XCTAssertEqual(try h.request("GET", "/api/slow?ms=300").status, 200)
        let statuses = Locked<[Int: Int]>([:])
        let everDown = Atomic<Bool>(false)
        let deadline = Date().addingTimeInterval(3)
        // One thread each (concurrentPerform would run only as many as there are cores).
        let group = DispatchGroup()
        for _ in 0..<6 {
            DispatchQueue.global().async(group: group) {
                while Date() < deadline {
                    let status = (try? h.request("GET", "/api/slow?ms=300").status) ?? -1
                    statuses.withLock { $0[status, default: 0] += 1 }
                }
            }
        }
        while Date() < deadline {
            if h.gateway.reachability.isDown { everDown.store(true, ordering: .relaxed) }
            usleep(10_000)
        }
        group.wait()
        let seen = statuses.withLock { $0 }
        XCTAssertEqual(seen[503], nil, "offline answers for a slow but alive upstream: \(seen)")
        XCTAssertGreaterThan(seen[200] ?? 0, 30, "\(seen)")
        XCTAssertFalse(everDown.load(ordering: .relaxed), "the state went unreachable")
        XCTAssertGreaterThan(h.upstream.probeCount + h.upstream.requestCount, 0)
    }

    func testBusyUpstream_probesThatConnectButWait_neverTurnItOffline() throws {
        // Issue 17's gunicorn report, scaled down: every probe is taken and then waits past the probe
        // timeout. Before, three such probes made Peel answer every call 503 offline.
        let h = try RawHarness(configure: { c in
            c.probe.interval = 0.1
            // Room for a loop held up on a busy machine: a probe that had not even connected by its
            // timeout would be a connect timeout, not a busy one.
            c.probe.timeout = 0.3
            c.probe.fall = 2
            c.listeners.admin = HostPort(host: "127.0.0.1", port: 0)
        }) { r in
            r.path == "/probe" ? .sendInTwoParts("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", after: 1, "\r\nok")
                : .send(RawUpstream.envelope("1"))
        }
        defer { h.stop() }
        let deadline = Date().addingTimeInterval(2)
        var everDown = false
        while Date() < deadline {
            if h.gateway.reachability.isDown { everDown = true }
            usleep(10_000)
        }
        XCTAssertFalse(everDown, "a busy upstream was called offline")
        XCTAssertGreaterThanOrEqual(h.gateway.reachability.probeTotals.busy, 3)
        XCTAssertEqual(h.gateway.reachability.probeTotals.failed, 0)
        XCTAssertEqual(try h.request("GET", "/x").status, 200)
        let status = try XCTUnwrap(BlockingClient.get(host: "127.0.0.1", port: h.gateway.adminPort!, path: "/status", timeout: 5)).text
        XCTAssertTrue(status.contains("\"busy\":true"), status)
        let metrics = try XCTUnwrap(BlockingClient.get(host: "127.0.0.1", port: h.gateway.adminPort!, path: "/metrics", timeout: 5)).text
        XCTAssertTrue(metrics.contains("peel_probes_total{result=\"busy\"}"), metrics)
    }

    func testAHostThatTakesNoConnection_isOfflineWithinFallProbesPlusAConnectTimeout() throws {
        // A listener that never accepts, with its accept queue full: Linux drops further SYNs, so a
        // connect waits for its timeout, as for a black-holed host. Issue 17: found idle within
        // fall × probe_interval plus a connect timeout (here 2 × 0.1 s + 0.2 s, given slack).
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        XCTAssertEqual(bound, 0)
        XCTAssertEqual(listen(fd, 0), 0)
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        let port = Int(UInt16(bigEndian: addr.sin_port))
        // Fill the queue (backlog 0 holds one); the fillers wait in it, never accepted.
        var fillers: [Int32] = []
        for _ in 0..<3 {
            let c = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            _ = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(c, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            fillers.append(c)
        }
        defer { for c in fillers { close(c) } }
        usleep(50_000)
        let started = Date()
        let h = try Harness { c in
            c.upstream = try! UpstreamURL.parse("http://127.0.0.1:\(port)").get()
            c.probe.interval = 0.1
            c.probe.timeout = 0.2
            c.calls.connectTimeout = 0.2
            c.probe.fall = 2
        }
        defer { h.stop() }
        XCTAssertTrue(h.eventually(3) { h.gateway.reachability.isDown }, "a host that takes no connection was not found offline")
        XCTAssertLessThan(Date().timeIntervalSince(started), 1.5)
        XCTAssertEqual(h.gateway.reachability.snapshot.publicReason, "connect timeout")
        XCTAssertEqual(h.gateway.reachability.probeTotals.busy, 0, "a connect timeout is not busy")
    }

    func testOffline_upstreamSeesNoCallsWhileDown() throws {
        let h = try Harness { c in
            c.probe.interval = 3600  // only the first probe runs during the test
            c.probe.fall = 1
        }
        defer { h.stop() }
        XCTAssertTrue(h.eventually { h.gateway.reachability.state == .reachable })
        h.gateway.reachability.recordPassiveFailure("connect refused")
        XCTAssertTrue(h.gateway.reachability.isDown)
        let before = h.upstream.requestCount
        for _ in 0..<10 { XCTAssertEqual(try h.request("GET", "/api/user").status, 503) }
        XCTAssertEqual(h.upstream.requestCount, before, "the upstream was contacted while offline")
    }

    func testPassiveFailures_flipStateBeforeTheTimer() throws {
        let h = try Harness { c in
            c.upstream = try! UpstreamURL.parse("http://127.0.0.1:1").get()
            c.probe.interval = 3600  // only the first probe runs during the test
            c.probe.fall = 3
        }
        defer { h.stop() }
        XCTAssertTrue(h.eventually { h.gateway.reachability.lastProbeReport != nil })
        for _ in 0..<2 { XCTAssertEqual(try h.request("GET", "/api/user").status, 502) }
        XCTAssertTrue(h.eventually(0.5) { h.gateway.reachability.isDown }, "three refused connections did not flip the state")
        XCTAssertEqual(try h.request("GET", "/api/user").status, 503)
    }

    // MARK: upstreams that are there but answer badly or not at all

    /// Calls that were in flight when the host stopped taking connections time out later; each
    /// `.timeout` is taken as a live answer (`reachedUpstream`), which passes the machine and counts
    /// toward rise: Peel turns reachable again while every connect is refused.
    func testCallsInFlight_whenTheHostWentAway_timingOut_doNotBringItBack() throws {
        let h = try RawHarness(configure: { c in
            c.probe.interval = 0.1
            c.probe.timeout = 0.2
            c.calls.connectTimeout = 0.2
            c.calls.timeout = 1.5
            c.probe.fall = 2
            c.probe.rise = 2
        }) { r in
            switch r.path {
            // Connection: close, so no probe connection outlives the listener.
            case "/probe": return .sendThenClose("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            case "/slow": return .sendInTwoParts("", after: 60, "")
            default: return .send(RawUpstream.envelope("1"))
            }
        }
        defer { h.stop() }
        XCTAssertTrue(waitFor(3) { h.gateway.reachability.state == .reachable })
        // Threads, not the global queue: on 2 cores it runs only 2 blocking calls at once.
        let finished = Locked(0)
        let port = h.port
        for _ in 0..<4 {
            Thread.detachNewThread {
                if let c = try? BlockingClient(host: "127.0.0.1", port: port, timeout: 10) {
                    try? c.send("GET /slow HTTP/1.1\r\nHost: api.example\r\nConnection: close\r\n\r\n")
                    _ = try? c.readResponse()
                }
                finished.withLock { $0 += 1 }
            }
        }
        XCTAssertTrue(waitFor(3) { h.upstream.requests.filter { $0.path == "/slow" }.count == 4 })
        h.upstream.closeListenerOnly()
        XCTAssertTrue(waitFor(3) { h.gateway.reachability.isDown }, "not offline once every connect is refused")
        let downAt = Date()
        var cameBack = false
        while Date().timeIntervalSince(downAt) < 2.5 {
            if !h.gateway.reachability.isDown { cameBack = true; break }
            usleep(1_000)
        }
        XCTAssertTrue(waitFor(5) { finished.withLock { $0 } == 4 })
        XCTAssertFalse(cameBack, "calls that timed out on connections taken before the host went away made Peel reachable again")
        XCTAssertEqual(h.gateway.reachability.transitionCounts[.reachable] ?? 0, 1, "reachable transitions")
    }

    /// A dead app behind a TCP forwarder (docker-proxy, kubectl port-forward, socat, an L4 balancer
    /// with no backend) takes every connection and closes it without a byte. Every probe is "busy",
    /// every call gets 502, and Peel never says offline (nor serves stale answers).
    func testAnUpstreamThatClosesEveryConnection_probeIncluded_isFoundOffline() throws {
        let h = try RawHarness(configure: { c in
            c.probe.interval = 0.05
            c.probe.timeout = 0.2
            c.probe.fall = 2
        }) { _ in .close }
        defer { h.stop() }
        usleep(1_000_000)
        let r = h.gateway.reachability
        XCTAssertTrue(r.isDown, "state \(r.state), probes passed/busy/failed \(r.probeTotals)")
    }

    func testAnUpstreamAnsweringEveryRequestWithAnInvalidFieldName_isNotProbedUnreachable() throws {
        // Every request, probes included, gets a 200 whose head has a field name that is not a token:
        // curl reports it as a protocol error (-100). The upstream is there all the same.
        let h = try RawHarness(configure: { c in
            c.probe.fall = 2
            c.probe.rise = 1
            c.probe.interval = 0.1
            c.probe.timeout = 0.5
            c.calls.connectTimeout = 0.5
        }) { _ in .send(RawUpstream.envelope("1", fields: ["X(A)@: 1"])) }
        defer { h.stop() }
        // Several probe rounds (fall 2 needs only two) and live calls in between.
        let deadline = Date().addingTimeInterval(1.2)
        var calls = 0
        while Date() < deadline {
            let r = try h.request("GET", "/x")
            calls += 1
            XCTAssertEqual(r.status, 502, "call \(calls): \(r.text)")
            XCTAssertEqual(problem(r)["kind"] as? String, "bad-upstream-format", "call \(calls)")
            if r.status != 502 { break }
            usleep(100_000)
        }
        XCTAssertGreaterThanOrEqual(h.upstream.requests.filter { $0.path == "/probe" }.count, 3, "too few probes ran")
        XCTAssertNotEqual(h.gateway.reachability.state, .unreachable, "a reachable upstream with a malformed head was taken offline")
        XCTAssertNotEqual(h.gateway.reachability.lastProbeReport?.ok, false, "the probe that got an answer failed")
        let last = try h.request("GET", "/x")
        XCTAssertEqual(last.status, 502, last.text)
        XCTAssertEqual(problem(last)["kind"] as? String, "bad-upstream-format")
    }
}

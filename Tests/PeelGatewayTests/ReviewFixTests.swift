import Foundation
@testable import PeelGateway
import PeelIO
import XCTest

/// Regression tests for the review fixes of 7c16796 (after issues 12-14 merged): each one failed
/// before its fix.
final class ReviewFixTests: XCTestCase {
    // MARK: probes and live calls that get a broken answer (issue 14)

    func testAnUpstreamAnsweringEveryRequestWithAnInvalidFieldName_isNotProbedUnreachable() throws {
        // Every request, probes included, gets a 200 whose head has a field name that is not a token:
        // curl reports it as a protocol error (-100). The upstream is there all the same.
        let h = try RawHarness(configure: { c in
            c.fall = 2
            c.rise = 1
            c.probeInterval = 0.1
            c.probeTimeout = 0.5
            c.connectTimeout = 0.5
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

    // MARK: a streamed HEAD answer, then a pipelined request

    func testStreamedHeadThenAPipelinedGetInOneWrite_areBothAnswered() throws {
        // application/octet-stream passes unjudged; 200 bytes over a 16-byte threshold is streamed.
        let body = String(repeating: "b", count: 200)
        let h = try RawHarness(configure: { $0.streamThreshold = 16 }) { r in
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
            return .send(r.method == "HEAD" ? head : head + body)
        }
        defer { h.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try c.send("HEAD /file HTTP/1.1\r\nHost: x\r\n\r\nGET /file HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let head = try c.readResponse(head: true)
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.header("Content-Type"), "application/octet-stream")
        let get = try c.readResponse()
        XCTAssertEqual(get.status, 200, "the pipelined GET after a streamed HEAD: \(get.text)")
        XCTAssertEqual(get.text, body)
    }

    // MARK: reload derives CORS and rewriting again

    func testReloadAddingCorsOrigins_makesPeelAnswerPreflightsItself() throws {
        let h = try RawHarness { _ in .send(RawUpstream.envelope("\"upstream\"")) }
        defer { h.stop() }
        let preflight = "OPTIONS /api/x HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example\r\n"
            + "Access-Control-Request-Method: POST\r\nConnection: close\r\n\r\n"
        let before = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try before.send(preflight)
        XCTAssertEqual(try before.readResponse().status, 200, "no CORS managed yet: the upstream answers")
        XCTAssertEqual(h.seen("/api/x").count, 1)

        var next = h.gateway.config
        next.corsOrigins = ["https://app.example"]
        XCTAssertEqual(h.gateway.reload(next), [])
        let after = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try after.send(preflight)
        let r = try after.readResponse()
        XCTAssertEqual(r.status, 204, "the reloaded CORS policy is not used: \(r.text)")
        XCTAssertEqual(r.header("Access-Control-Allow-Origin"), "https://app.example")
        XCTAssertEqual(h.seen("/api/x").count, 1, "the preflight reached the upstream after the reload")
    }

    private func redirectHarness(rewriting: Bool) throws -> RawHarness {
        try RawHarness(configure: { $0.rewriteRedirects = rewriting }) { r in
            .send("HTTP/1.1 302 Found\r\nLocation: /target\r\nContent-Length: 0\r\n\r\n")
        }
    }

    private func locations(_ h: RawHarness) throws -> [String] {
        let r = try h.request("GET", "/go")
        XCTAssertEqual(r.status, 302, r.text)
        return r.headers.filter { $0.0.lowercased() == "location" }.map(\.1)
    }

    func testReloadTurningRewriteRedirectsOn_keepsOneLocation() throws {
        let h = try redirectHarness(rewriting: false)
        defer { h.stop() }
        XCTAssertEqual(try locations(h).count, 1)
        var next = h.gateway.config
        next.rewriteRedirects = true
        XCTAssertEqual(h.gateway.reload(next), [])
        let after = try locations(h)
        XCTAssertEqual(after.count, 1, "Location fields after turning rewriting on: \(after)")
    }

    func testReloadTurningRewriteRedirectsOff_keepsOneLocation() throws {
        let h = try redirectHarness(rewriting: true)
        defer { h.stop() }
        XCTAssertEqual(try locations(h).count, 1)
        var next = h.gateway.config
        next.rewriteRedirects = false
        XCTAssertEqual(h.gateway.reload(next), [])
        let after = try locations(h)
        XCTAssertEqual(after, ["/target"], "Location fields after turning rewriting off")
    }

    // MARK: the offline cache keeps no answer that sets a cookie

    func testAnAnswerThatSetsACookie_isNotServedStaleWhileOffline() throws {
        let down = Locked(false)
        let h = try RawHarness(configure: { c in
            c.offlineCache = 1 << 20
            c.probeInterval = 0.1
            c.probeTimeout = 0.3
            c.connectTimeout = 0.3
            c.fall = 2
            c.rise = 1
        }) { r in
            if down.withLock({ $0 }) { return .close }
            // Marked public, so that the cookie is what keeps /login out (issue 17: an anonymous answer
            // is stored only when the upstream says it may be shared).
            if r.path == "/login" {
                return .send(RawUpstream.envelope("{\"user\":\"alice\"}", fields: ["Set-Cookie: sid=alice-session", "Cache-Control: public"]))
            }
            return .send(RawUpstream.envelope("{\"plain\":1}", fields: ["Cache-Control: public"]))
        }
        defer { h.stop() }
        let login = try h.request("GET", "/login")
        XCTAssertEqual(login.status, 200, login.text)
        XCTAssertNotNil(login.header("Set-Cookie"))
        XCTAssertEqual(try h.request("GET", "/plain").status, 200)
        XCTAssertEqual(h.gateway.offlineCache.entries, 1, "only the answer without a cookie is stored")

        down.withLock { $0 = true }
        h.upstream.closeListener()
        let deadline = Date().addingTimeInterval(3)
        while !h.gateway.reachability.isDown && Date() < deadline { usleep(20_000) }
        XCTAssertTrue(h.gateway.reachability.isDown, "not offline within 3 s")

        let stale = try h.request("GET", "/login")
        XCTAssertEqual(stale.status, 503, "a cookie-setting answer was replayed: \(stale.headers) \(stale.text)")
        XCTAssertEqual(problem(stale)["kind"] as? String, "offline")
        XCTAssertNil(stale.header("Set-Cookie"))
        let plain = try h.request("GET", "/plain")
        XCTAssertEqual(plain.status, 200, "the control: a stored answer is served stale")
        XCTAssertEqual(plain.header("Cache-Status"), "Peel; hit; detail=offline")
    }

    func testAStaleAnswerCarriesPeelsCorsFieldsOnly_notTheUpstreamsStoredOnes() throws {
        let down = Locked(false)
        let h = try RawHarness(configure: { c in
            c.offlineCache = 1 << 20
            c.corsOrigins = ["https://app.example"]
            c.probeInterval = 0.1
            c.probeTimeout = 0.3
            c.connectTimeout = 0.3
            c.fall = 2
            c.rise = 1
        }) { _ in
            if down.withLock({ $0 }) { return .close }
            return .send(RawUpstream.envelope("{\"plain\":1}", fields: ["Access-Control-Allow-Origin: *",
                                                                        "Access-Control-Expose-Headers: X-Upstream",
                                                                        "Cache-Control: public"]))
        }
        defer { h.stop() }
        func get() throws -> BlockingClient.Response {
            let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
            try c.send("GET /data HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example\r\nConnection: close\r\n\r\n")
            return try c.readResponse()
        }
        func allowOrigin(_ r: BlockingClient.Response) -> [String] {
            r.headers.filter { $0.0.lowercased() == "access-control-allow-origin" }.map { $0.1 }
        }
        let fresh = try get()
        XCTAssertEqual(fresh.status, 200, fresh.text)
        XCTAssertEqual(allowOrigin(fresh), ["https://app.example"])
        XCTAssertEqual(h.gateway.offlineCache.entries, 1)

        down.withLock { $0 = true }
        h.upstream.closeListener()
        let deadline = Date().addingTimeInterval(3)
        while !h.gateway.reachability.isDown && Date() < deadline { usleep(20_000) }
        XCTAssertTrue(h.gateway.reachability.isDown, "not offline within 3 s")
        let stale = try get()
        XCTAssertEqual(stale.status, 200, stale.text)
        XCTAssertEqual(stale.header("Cache-Status"), "Peel; hit; detail=offline")
        XCTAssertEqual(allowOrigin(stale), ["https://app.example"],
                       "the upstream's stored CORS fields were replayed: \(stale.headers)")
        XCTAssertNil(stale.headers.first { $0.1 == "X-Upstream" }, "the upstream's Expose-Headers was replayed")
    }

    // MARK: a client leaving mid-stream

    /// Calls in the forwarders' waiting tables (private: read by reflection, on each worker's loop thread).
    private func waitingCalls(_ gateway: Gateway) -> Int {
        let workers = Mirror(reflecting: gateway).children.first { $0.label == "workers" }?.value as? [Worker] ?? []
        XCTAssertFalse(workers.isEmpty, "Gateway.workers not found by reflection")
        var total = 0
        for w in workers {
            let count = Locked(-1)
            let done = DispatchSemaphore(value: 0)
            w.loop.execute {
                let forwarder = Mirror(reflecting: w).children.first { $0.label == "forwarder" }?.value
                if let forwarder = forwarder as? Forwarder,
                   let waiting = Mirror(reflecting: forwarder).children.first(where: { $0.label == "waiting" })?.value {
                    count.withLock { $0 = Mirror(reflecting: waiting).children.count }
                }
                done.signal()
            }
            done.wait()
            let n = count.withLock { $0 }
            XCTAssertGreaterThanOrEqual(n, 0, "Forwarder.waiting not found by reflection")
            total += max(0, n)
        }
        return total
    }

    func testAClientLeavingMidStream_leavesNoCallWaiting_andLaterRequestsWork() throws {
        // 1 MB of octet-stream (over the 16-byte threshold: streamed): 64 KiB at once, the rest 1 s later.
        let total = 1 << 20
        let first = 64 * 1024
        let h = try RawHarness(configure: { $0.streamThreshold = 16 }) { r in
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: \(total)\r\n\r\n"
            if r.path == "/small" { return .send(RawUpstream.envelope("1")) }
            return .sendInTwoParts(head + String(repeating: "a", count: first), after: 1.0,
                                   String(repeating: "a", count: total - first))
        }
        defer { h.stop() }
        for _ in 0..<3 {
            let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
            try c.send("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
            let head = try c.readUntil("\r\n\r\n")
            XCTAssertTrue(head.hasPrefix("HTTP/1.1 200"), head)
            c.close(reset: true)
        }
        let deadline = Date().addingTimeInterval(5)
        while h.gateway.inflight > 0 && Date() < deadline { usleep(20_000) }
        XCTAssertEqual(h.gateway.inflight, 0, "departed streams still in flight")
        usleep(200_000)
        XCTAssertEqual(waitingCalls(h.gateway), 0, "departed streams left their calls in the forwarder's waiting table")
        let r = try h.request("GET", "/small")
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(waitingCalls(h.gateway), 0)
    }
}

import Foundation
import PeelGateway
import PeelIO
import Synchronization
import XCTest

/// Waits up to `seconds` for `condition`, polling every 2 ms; returns its last value.
func waitFor(_ seconds: Double, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(2_000)
    }
    return condition()
}

/// One request to `h` on a fresh connection, with `Host: api.example` and these fields.
func sendRequest(_ h: RawHarness, _ method: String, _ path: String, _ fields: [(String, String)] = [],
          body: String = "") throws -> BlockingClient.Response {
    let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 10)
    var head = "\(method) \(path) HTTP/1.1\r\nHost: api.example\r\nConnection: close\r\n"
    for (n, v) in fields { head += "\(n): \(v)\r\n" }
    if !body.isEmpty || method == "PUT" || method == "POST" { head += "Content-Length: \(body.utf8.count)\r\n" }
    try c.send(head + "\r\n" + body)
    return try c.readResponse(head: method == "HEAD")
}

/// The review of issue 17: what its first tests missed, each failing before its fix.
final class Review17Tests: XCTestCase {
    // MARK: reachability

    /// Calls that were in flight when the host stopped taking connections time out later; each
    /// `.timeout` is taken as a live answer (`reachedUpstream`), which passes the machine and counts
    /// toward rise: Peel turns reachable again while every connect is refused.
    func testCallsInFlight_whenTheHostWentAway_timingOut_doNotBringItBack() throws {
        let h = try RawHarness(configure: { c in
            c.probeInterval = 0.1
            c.probeTimeout = 0.2
            c.connectTimeout = 0.2
            c.timeout = 1.5
            c.fall = 2
            c.rise = 2
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
            c.probeInterval = 0.05
            c.probeTimeout = 0.2
            c.fall = 2
        }) { _ in .close }
        defer { h.stop() }
        usleep(1_000_000)
        let r = h.gateway.reachability
        XCTAssertTrue(r.isDown, "state \(r.state), probes passed/busy/failed \(r.probeTotals)")
    }

    // MARK: offline cache

    /// RFC 9111 §4.4: a cache MUST invalidate the target URI when a non-error answer to an unsafe
    /// method comes back. Here alice changes her name with PUT /me, the upstream goes away, and
    /// Peel answers her GET /me with the name from before the change.
    func testAnUnsafeMethodsSuccess_invalidatesTheStoredAnswer() throws {
        let version = Locked(1)
        let h = try RawHarness(configure: { c in
            c.offlineCache = 1 << 20
            c.probeInterval = 0.1
            c.probeTimeout = 0.3
            c.connectTimeout = 0.3
            c.fall = 2
            c.rise = 1
        }) { r in
            if r.path == "/me" && r.method == "PUT" {
                version.withLock { $0 = 2 }
                return .send(RawUpstream.envelope("\"saved\""))
            }
            if r.path == "/me" { return .send(RawUpstream.envelope("\"name v\(version.withLock { $0 })\"")) }
            return .send(RawUpstream.envelope("0"))
        }
        defer { h.stop() }
        let alice = ("Authorization", "Bearer alice")
        XCTAssertEqual(try sendRequest(h, "GET", "/me", [alice]).text, "\"name v1\"")
        XCTAssertEqual(try sendRequest(h, "PUT", "/me", [alice, ("Content-Type", "application/json")], body: "{\"name\":\"v2\"}").status, 200)
        h.upstream.closeListener()
        XCTAssertTrue(waitFor(3) { h.gateway.reachability.isDown })
        let stale = try sendRequest(h, "GET", "/me", [alice])
        XCTAssertNotEqual(stale.text, "\"name v1\"", "the answer from before alice's PUT was served as her current /me")
    }

    /// A newer answer that may not be stored (no-store, or too large) leaves the older one in place,
    /// and a 304 that says no-store does not remove it: while offline the older answer is served,
    /// though the upstream has since said it must not be kept.
    func testANewerAnswerThatMayNotBeStored_removesTheOlderOne() {
        let k = OfflineCacheKey(host: "h", target: "/me", acceptLanguage: nil, fieldNames: ["authorization"], user: ["Bearer a"])
        func hit(_ c: OfflineCache) -> Bool {
            if case .hit = c.lookup(key: k, request: CacheRequest(), requestField: { _ in nil }, now: 10) { return true }
            return false
        }
        let c = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        XCTAssertEqual(c.store(key: k, request: CacheRequest(), hasAuthorization: true, requestField: { _ in nil }, status: 200,
                               fields: ResponseHeaders([("ETag", "\"v1\"")]), contentType: "application/json",
                               body: Array("1".utf8), now: 0), .stored(shared: false))
        _ = c.store(key: k, request: CacheRequest(), hasAuthorization: true, requestField: { _ in nil }, status: 200,
                    fields: ResponseHeaders([("Cache-Control", "no-store")]), contentType: "application/json",
                    body: Array("2".utf8), now: 1)
        XCTAssertFalse(hit(c), "an answer older than a no-store one was kept and served")

        let d = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        _ = d.store(key: k, request: CacheRequest(), hasAuthorization: true, requestField: { _ in nil }, status: 200,
                    fields: ResponseHeaders([("ETag", "\"v1\"")]), contentType: "application/json", body: Array("1".utf8), now: 0)
        _ = d.refresh(key: k, request: CacheRequest(ifNoneMatch: "\"v1\""), hasAuthorization: true, requestField: { _ in nil },
                      notModified: ResponseHeaders([("ETag", "\"v1\""), ("Cache-Control", "no-store")]), now: 1)
        XCTAssertFalse(hit(d), "a 304 that says no-store left the stored answer servable")
    }

    /// Entry.size counts the key, fields and body but not the request values the answer's Vary
    /// names: with `Vary: Accept` and a 60 KB Accept, each entry holds ~60 KB the budget never sees.
    func testVaryValues_countTowardTheByteBudget() {
        let capacity = 1 << 20
        let c = OfflineCache(capacity: capacity, maxAge: 86_400)
        let big = String(repeating: "a", count: 60_000)
        for i in 0..<200 {
            let k = OfflineCacheKey(host: "h", target: "/x?\(i)", acceptLanguage: nil, fieldNames: ["authorization"], user: ["Bearer m"])
            _ = c.store(key: k, request: CacheRequest(), hasAuthorization: true, requestField: { $0 == "accept" ? big : nil },
                        status: 200, fields: ResponseHeaders([("Vary", "Accept")]), contentType: "application/json",
                        body: Array("1".utf8), now: 0)
        }
        let held = c.entries * big.utf8.count
        XCTAssertLessThanOrEqual(held, capacity, "\(c.entries) entries hold \(held) bytes of Vary values; the budget says \(c.bytes)")
    }
}

extension Review17Tests {
    /// RFC 9110 §15.4.5: a 304 MUST carry the ETag and Vary a 200 to the same request would. A fresh
    /// compressed answer carries `ETag: W/"v1"` and `Vary: Accept-Encoding`; the stale 304 for the
    /// same request carries the strong `"v1"` and no Vary.
    func testAStale304_carriesTheValidatorsAFreshAnswerWould() throws {
        let h = try RawHarness(configure: { c in
            c.offlineCache = 1 << 20
            c.probeInterval = 0.1
            c.probeTimeout = 0.3
            c.connectTimeout = 0.3
            c.fall = 2
            c.rise = 1
        }) { _ in
            let items = (0..<300).map { "{\"n\":\($0),\"name\":\"item\"}" }.joined(separator: ",")
            return .send(RawUpstream.envelope("[\(items)]", fields: ["Cache-Control: public", "ETag: \"v1\""]))
        }
        defer { h.stop() }
        let gzip = ("Accept-Encoding", "gzip")
        let fresh = try sendRequest(h, "GET", "/big", [gzip])
        XCTAssertEqual(fresh.header("Content-Encoding"), "gzip")
        let etag = try XCTUnwrap(fresh.header("ETag"))
        XCTAssertEqual(etag, "W/\"v1\"")
        h.upstream.closeListener()
        XCTAssertTrue(waitFor(3) { h.gateway.reachability.isDown })
        let nm = try sendRequest(h, "GET", "/big", [gzip, ("If-None-Match", etag)])
        XCTAssertEqual(nm.status, 304)
        XCTAssertEqual(nm.header("ETag"), etag, "the 304 names another validator than the 200 it stands for")
        XCTAssertEqual(nm.header("Vary"), "Accept-Encoding")
    }
}

extension Review17Tests {
    /// RFC 9111 §4.1: the fields Vary names are compared with all their field lines combined. Peel
    /// compares only the first line (`HTTPExchange.header`): with the key not naming Cookie and an
    /// answer `public` with `Vary: Cookie`, bob's request whose first Cookie line equals alice's
    /// gets alice's answer.
    func testVary_comparesEveryLineOfTheField() throws {
        let h = try RawHarness(configure: { c in
            c.offlineCache = 1 << 20
            c.offlineCacheKey = ["x-token"]
            c.probeInterval = 0.1
            c.probeTimeout = 0.3
            c.connectTimeout = 0.3
            c.fall = 2
            c.rise = 1
        }) { r in
            let cookies = r.headers.filter { $0.0.lowercased() == "cookie" }.map { $0.1 }.joined(separator: "; ")
            return .send(RawUpstream.envelope("\"\(cookies)\"", fields: ["Cache-Control: public, max-age=0", "Vary: Cookie"]))
        }
        defer { h.stop() }
        XCTAssertEqual(try sendRequest(h, "GET", "/feed", [("Cookie", "theme=dark"), ("Cookie", "sid=alice")]).text, "\"theme=dark; sid=alice\"")
        h.upstream.closeListener()
        XCTAssertTrue(waitFor(3) { h.gateway.reachability.isDown })
        let bob = try sendRequest(h, "GET", "/feed", [("Cookie", "theme=dark"), ("Cookie", "sid=bob")])
        XCTAssertNotEqual(bob.text, "\"theme=dark; sid=alice\"", "bob was served alice's answer")
    }
}

extension Review17Tests {
    /// README: "an app that authenticates with a field Peel was not told about never shares an
    /// entry". It does as soon as its users also send the same non-identifying cookie (a consent
    /// banner's, a load balancer's `SERVERID=s1`, `lang=en`): the default key counts Cookie as
    /// "whose answer it is", so alice's X-Token answer is stored under `consent=yes` and bob gets it.
}

/// The final review of session 4 (the merged issues 17-21): what its tests showed, each failing before its fix.
final class ReviewMergeTests: XCTestCase {
    private func harness(_ respond: @escaping @Sendable (RawUpstream.Request) -> RawUpstream.Reply) throws -> RawHarness {
        try RawHarness(configure: { c in
            c.offlineCache = 1 << 20; c.probeInterval = 0.1; c.probeTimeout = 0.3
            c.connectTimeout = 0.3; c.fall = 2; c.rise = 1
        }, respond)
    }

    private static let chunkedCSV = "HTTP/1.1 200 OK\r\nContent-Type: text/csv\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nsaved\r\n0\r\n\r\n"

    func testAStreamedAnswerToAnUnsafeMethod_stillInvalidates_thatUsersEntryOnly() throws {
        let version = Locked(1)
        let h = try harness { r in
            if r.path == "/me" && r.method == "PUT" {
                version.withLock { $0 = 2 }
                return .send(Self.chunkedCSV)
            }
            if r.path == "/me" {
                let who = r.headers.first { $0.0.lowercased() == "authorization" }?.1 ?? ""
                return .send(RawUpstream.envelope("\"\(who) v\(version.withLock { $0 })\""))
            }
            return .send(RawUpstream.envelope("0"))
        }
        defer { h.stop() }
        let alice = ("Authorization", "Bearer alice"), bob = ("Authorization", "Bearer bob")
        XCTAssertEqual(try sendRequest(h, "GET", "/me", [alice]).text, "\"Bearer alice v1\"")
        XCTAssertEqual(try sendRequest(h, "GET", "/me", [bob]).text, "\"Bearer bob v1\"")
        let put = try sendRequest(h, "PUT", "/me", [alice, ("Content-Type", "application/json")], body: "{\"name\":\"v2\"}")
        XCTAssertEqual(put.status, 200)
        XCTAssertEqual(put.text, "saved")
        h.upstream.closeListener()
        XCTAssertTrue(waitFor(3) { h.gateway.reachability.isDown })
        XCTAssertEqual(try sendRequest(h, "GET", "/me", [alice]).status, 503, "alice's answer from before her PUT was served")
        XCTAssertEqual(try sendRequest(h, "GET", "/me", [bob]).text, "\"Bearer bob v1\"", "alice's PUT changed what bob gets")
    }

    func testAStreamedNewerAnswer_toAGet_dropsTheOlderEntry() throws {
        let version = Locked(1)
        let h = try harness { r in
            if r.path == "/report" {
                let v = version.withLock { v in defer { v += 1 }; return v }
                return .send(v == 1 ? RawUpstream.envelope("\"old\"") : Self.chunkedCSV)
            }
            return .send(RawUpstream.envelope("0"))
        }
        defer { h.stop() }
        let alice = ("Authorization", "Bearer alice")
        XCTAssertEqual(try sendRequest(h, "GET", "/report", [alice]).text, "\"old\"")
        XCTAssertEqual(try sendRequest(h, "GET", "/report", [alice]).text, "saved")
        h.upstream.closeListener()
        XCTAssertTrue(waitFor(3) { h.gateway.reachability.isDown })
        XCTAssertNotEqual(try sendRequest(h, "GET", "/report", [alice]).text, "\"old\"")
    }
}

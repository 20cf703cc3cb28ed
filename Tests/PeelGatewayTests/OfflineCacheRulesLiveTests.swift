import Foundation
import PeelGateway
import PeelIO
import Synchronization
import XCTest

/// Issue 17's cache rules through a running gateway: answers stored while the upstream is there,
/// then the upstream's listener closed (every connect refused) and the same and other users asking.
final class OfflineCacheRulesLiveTests: XCTestCase {
    private static func value(_ r: RawUpstream.Request, _ name: String) -> String? {
        r.headers.first { $0.0.lowercased() == name }?.1
    }

    private func harness(_ configure: @escaping (inout GatewayConfig) -> Void = { _ in }) throws -> RawHarness {
        try RawHarness(configure: { c in
            c.offline.capacity = 1 << 20
            c.probeQuickly()
            configure(&c)
        }) { r in
            let value = Self.value
            switch r.path {
            case "/me":
                // Echoes whoever asked, by either way of saying it.
                let who = value(r, "authorization") ?? value(r, "x-token") ?? "nobody"
                return .send(RawUpstream.envelope("\"\(who)\""))
            case "/tenant":
                return .send(RawUpstream.envelope("\"\(value(r, "x-forwarded-host") ?? "")\"", fields: ["Cache-Control: public"]))
            case "/pub":
                return .send(RawUpstream.envelope("1", fields: ["Cache-Control: public", "ETag: \"v1\""]))
            case "/cors":
                return .send(RawUpstream.envelope("1", fields: ["Cache-Control: public", "Access-Control-Allow-Origin: https://app.example",
                                                                "Vary: Origin"]))
            case "/big":
                let items = (0..<300).map { "{\"n\":\($0),\"name\":\"item\"}" }.joined(separator: ",")
                return .send(RawUpstream.envelope("[\(items)]", fields: ["Cache-Control: public"]))
            case "/validated":
                if value(r, "if-none-match") == "\"v7\"" {
                    return .send("HTTP/1.1 304 Not Modified\r\nETag: \"v7\"\r\nCache-Control: private\r\n\r\n")
                }
                return .send(RawUpstream.envelope("7", fields: ["ETag: \"v7\""]))
            default:
                return .send(RawUpstream.envelope("0"))
            }
        }
    }

    private func get(_ h: RawHarness, _ path: String, method: String = "GET", _ fields: [(String, String)] = [],
                     host: String = "api.example") throws -> BlockingClient.Response {
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n"
        for (n, v) in fields { head += "\(n): \(v)\r\n" }
        try c.send(head + "\r\n")
        return try c.readResponse(head: method == "HEAD")
    }

    private func goOffline(_ h: RawHarness) {
        h.upstream.closeListener()
        let deadline = Date().addingTimeInterval(3)
        while !h.gateway.reachability.isDown && Date() < deadline { usleep(10_000) }
        XCTAssertTrue(h.gateway.reachability.isDown, "not offline within 3 s")
    }

    private func isOffline(_ r: BlockingClient.Response) -> Bool {
        r.status == 503 && (try? JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any])?["kind"] as? String == "offline"
    }

    func testStaleAnswers_neverCrossUsersOrTenants_andFollowTheRequestsAndValidators() throws {
        let h = try harness()
        defer { h.stop() }
        let alice = ("Authorization", "Bearer alice")
        XCTAssertEqual(try get(h, "/me", [("X-Token", "alice")]).text, "\"alice\"")
        XCTAssertEqual(try get(h, "/me", [alice]).text, "\"Bearer alice\"")
        XCTAssertEqual(try get(h, "/tenant", host: "tenant-a.example").text, "\"tenant-a.example\"")
        XCTAssertEqual(try get(h, "/pub", method: "HEAD").status, 200)
        XCTAssertEqual(try get(h, "/cors", [("Origin", "https://app.example")]).status, 200)
        XCTAssertEqual(try get(h, "/big").status, 200)
        XCTAssertEqual(try get(h, "/validated", [alice, ("If-None-Match", "\"v7\"")]).status, 304)
        XCTAssertEqual(h.gateway.offlineCache.entries, 5, "stored: alice's /me, tenant-a, /cors, /big, /validated's validator")

        goOffline(h)
        // A custom auth field Peel was not told about: the answer was never shared (it once was).
        XCTAssertTrue(isOffline(try get(h, "/me", [("X-Token", "bob")])), "bob got an answer stored for alice")
        XCTAssertTrue(isOffline(try get(h, "/me")))
        XCTAssertTrue(isOffline(try get(h, "/me", [("Authorization", "Bearer bob")])))
        let mine = try get(h, "/me", [alice])
        XCTAssertEqual(mine.text, "\"Bearer alice\"")
        XCTAssertEqual(mine.header("Cache-Status"), "Peel; hit; detail=offline")
        // The client asked for the origin: no stale answer (OkHttp's FORCE_NETWORK is no-cache).
        XCTAssertTrue(isOffline(try get(h, "/me", [alice, ("Cache-Control", "no-cache")])))
        XCTAssertTrue(isOffline(try get(h, "/me", [alice, ("Cache-Control", "max-age=0")])))
        XCTAssertEqual(try get(h, "/me", [alice, ("Cache-Control", "max-age=0, stale-if-error=3600")]).status, 200)
        // Tenants behind one Peel.
        XCTAssertTrue(isOffline(try get(h, "/tenant", host: "tenant-b.example")), "tenant-b got tenant-a's answer")
        XCTAssertEqual(try get(h, "/tenant", host: "tenant-a.example").text, "\"tenant-a.example\"")
        // A HEAD stored nothing that a GET could be served.
        XCTAssertTrue(isOffline(try get(h, "/pub")), "a HEAD's answer was served to a GET")
        // The upstream's own CORS fields come back with the stale answer (it manages CORS here).
        let cors = try get(h, "/cors", [("Origin", "https://app.example")])
        XCTAssertEqual(cors.status, 200)
        XCTAssertEqual(cors.header("Access-Control-Allow-Origin"), "https://app.example")
        XCTAssertTrue(isOffline(try get(h, "/cors", [("Origin", "https://evil.example")])), "Vary: Origin ignored")
        // Compressed like a fresh answer, with Vary named once.
        let big = try get(h, "/big", [("Accept-Encoding", "gzip")])
        XCTAssertEqual(big.status, 200)
        XCTAssertEqual(big.header("Content-Encoding"), "gzip")
        XCTAssertEqual(big.headers.filter { $0.0.lowercased() == "vary" }.map { $0.1 }, ["Accept-Encoding"])
        XCTAssertEqual(big.header("Cache-Status"), "Peel; hit; detail=offline")
        // The app's own copy is current: its validator gets 304, and never someone else's.
        let nm = try get(h, "/validated", [alice, ("If-None-Match", "\"v7\"")])
        XCTAssertEqual(nm.status, 304)
        XCTAssertEqual(nm.header("ETag"), "\"v7\"")
        XCTAssertNotNil(nm.header("Age"))
        XCTAssertTrue(isOffline(try get(h, "/validated", [alice])), "a body that was never stored")
        XCTAssertTrue(isOffline(try get(h, "/validated", [("Authorization", "Bearer bob"), ("If-None-Match", "\"v7\"")])))
        let metrics = h.gateway.offlineCache
        XCTAssertEqual(metrics.notModifiedHits, 1)
        XCTAssertGreaterThanOrEqual(metrics.misses, 9)
    }

    func testCustomKeyField_separatesUsers() throws {
        let h = try harness { c in c.offline.keyFields = ["x-token"] }
        defer { h.stop() }
        XCTAssertEqual(try get(h, "/me", [("X-Token", "alice")]).text, "\"alice\"")
        XCTAssertEqual(h.gateway.offlineCache.entries, 1)
        goOffline(h)
        XCTAssertEqual(try get(h, "/me", [("X-Token", "alice")]).text, "\"alice\"")
        XCTAssertTrue(isOffline(try get(h, "/me", [("X-Token", "bob")])))
        XCTAssertTrue(isOffline(try get(h, "/me")))
    }

    func testReload_turnsTheCacheOffAtOnce_andChangingTheKeyDropsEntries() throws {
        let h = try harness()
        defer { h.stop() }
        let alice = ("Authorization", "Bearer alice")
        XCTAssertEqual(try get(h, "/me", [alice]).status, 200)
        XCTAssertEqual(h.gateway.offlineCache.entries, 1)
        var next = h.gateway.config
        next.offline.keyFields = ["authorization", "x-token"]
        XCTAssertEqual(h.gateway.reload(next), [])
        XCTAssertEqual(h.gateway.offlineCache.entries, 0, "entries under the old key fields stayed")
        XCTAssertEqual(try get(h, "/me", [alice]).status, 200)
        XCTAssertEqual(h.gateway.offlineCache.entries, 1)
        // An operator turning the cache off after a privacy incident: gone at once, nothing served.
        next.offline.capacity = 0
        XCTAssertEqual(h.gateway.reload(next), [], "a reload that could not apply the cache said nothing")
        XCTAssertEqual(h.gateway.offlineCache.entries, 0)
        XCTAssertEqual(try get(h, "/me", [alice]).status, 200)
        XCTAssertEqual(h.gateway.offlineCache.entries, 0, "stored while off")
        goOffline(h)
        XCTAssertTrue(isOffline(try get(h, "/me", [alice])))
    }

    // MARK: invalidation, validators and Vary

    /// RFC 9111 §4.4: a cache MUST invalidate the target URI when a non-error answer to an unsafe
    /// method comes back. Here alice changes her name with PUT /me, the upstream goes away, and
    /// Peel answers her GET /me with the name from before the change.
    func testAnUnsafeMethodsSuccess_invalidatesTheStoredAnswer() throws {
        let version = Locked(1)
        let h = try RawHarness(configure: { c in
            c.offline.capacity = 1 << 20
            c.probeQuickly()
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

    /// RFC 9110 §15.4.5: a 304 MUST carry the ETag and Vary a 200 to the same request would. A fresh
    /// compressed answer carries `ETag: W/"v1"` and `Vary: Accept-Encoding`; the stale 304 for the
    /// same request carries the strong `"v1"` and no Vary.
    func testAStale304_carriesTheValidatorsAFreshAnswerWould() throws {
        let h = try RawHarness(configure: { c in
            c.offline.capacity = 1 << 20
            c.probeQuickly()
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

    /// RFC 9111 §4.1: the fields Vary names are compared with all their field lines combined. Peel
    /// compares only the first line (`HTTPExchange.header`): with the key not naming Cookie and an
    /// answer `public` with `Vary: Cookie`, bob's request whose first Cookie line equals alice's
    /// gets alice's answer.
    func testVary_comparesEveryLineOfTheField() throws {
        let h = try RawHarness(configure: { c in
            c.offline.capacity = 1 << 20
            c.offline.keyFields = ["x-token"]
            c.probeQuickly()
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

    // MARK: streamed answers drop what they replace

    private func harnessAnswering(_ respond: @escaping @Sendable (RawUpstream.Request) -> RawUpstream.Reply) throws -> RawHarness {
        try RawHarness(configure: { c in
            c.offline.capacity = 1 << 20; c.probe.interval = 0.1; c.probe.timeout = 0.3
            c.calls.connectTimeout = 0.3; c.probe.fall = 2; c.probe.rise = 1
        }, respond)
    }

    private static let chunkedCSV = "HTTP/1.1 200 OK\r\nContent-Type: text/csv\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nsaved\r\n0\r\n\r\n"

    func testAStreamedAnswerToAnUnsafeMethod_stillInvalidates_thatUsersEntryOnly() throws {
        let version = Locked(1)
        let h = try harnessAnswering { r in
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
        let h = try harnessAnswering { r in
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

    // MARK: what a stale answer carries

    func testAnAnswerThatSetsACookie_isNotServedStaleWhileOffline() throws {
        let down = Locked(false)
        let h = try RawHarness(configure: { c in
            c.offline.capacity = 1 << 20
            c.probeQuickly()
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
            c.offline.capacity = 1 << 20
            c.cors.origins = ["https://app.example"]
            c.probeQuickly()
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
}

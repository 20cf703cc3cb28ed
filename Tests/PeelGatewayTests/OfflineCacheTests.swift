import PeelDemo
import PeelGateway
import PeelIO
import XCTest

/// The offline cache on its own, with the clock passed in (issue 13).
final class OfflineCacheTests: XCTestCase {
    private let json = [("Content-Type", "application/json")]

    private func key(_ target: String = "/api/user", auth: String? = "Bearer alice", cookie: String? = nil,
                     lang: String? = nil) -> OfflineCacheKey {
        OfflineCacheKey(target: target, authorization: auth, cookie: cookie, acceptLanguage: lang)
    }

    private func body(_ n: Int) -> [UInt8] { [UInt8](repeating: 0x61, count: n) }

    func testKeying_anotherUsersAuthorizationMisses() {
        let c = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        XCTAssertTrue(c.store(method: "GET", key: key(), requestField: { _ in nil }, status: 200, fields: json,
                              body: Array(#"{"id":1}"#.utf8), now: 0))
        let hit = c.lookup(method: "GET", key: key(), requestField: { _ in nil }, now: 5)
        XCTAssertEqual(hit.map { String(decoding: $0.body, as: UTF8.self) }, #"{"id":1}"#)
        XCTAssertEqual(hit?.status, 200)
        XCTAssertEqual(hit?.age, 5)
        XCTAssertNil(c.lookup(method: "GET", key: key(auth: "Bearer mallory"), requestField: { _ in nil }, now: 5))
        XCTAssertNil(c.lookup(method: "GET", key: key(auth: nil), requestField: { _ in nil }, now: 5))
        XCTAssertNil(c.lookup(method: "GET", key: key(cookie: "sid=2"), requestField: { _ in nil }, now: 5))
        XCTAssertNil(c.lookup(method: "GET", key: key(lang: "zh-CN"), requestField: { _ in nil }, now: 5))
        XCTAssertNil(c.lookup(method: "GET", key: key("/api/user?x=1"), requestField: { _ in nil }, now: 5))
        XCTAssertEqual(c.hits, 1)
    }

    func testKeying_fieldsNamedByVaryMustMatch() {
        let c = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        XCTAssertTrue(c.store(method: "GET", key: key(), requestField: { $0 == "x-tenant" ? "a" : nil }, status: 200,
                              fields: json + [("Vary", "X-Tenant, Accept-Encoding")], body: body(10), now: 0))
        XCTAssertNotNil(c.lookup(method: "GET", key: key(), requestField: { $0 == "x-tenant" ? "a" : nil }, now: 1))
        XCTAssertNil(c.lookup(method: "GET", key: key(), requestField: { $0 == "x-tenant" ? "b" : nil }, now: 1))
        XCTAssertNil(c.lookup(method: "GET", key: key(), requestField: { _ in nil }, now: 1))
        XCTAssertFalse(c.store(method: "GET", key: key("/other"), requestField: { _ in nil }, status: 200,
                               fields: json + [("Vary", "*")], body: body(10), now: 0), "Vary: * never matches")
    }

    func testEviction_leastRecentlyUsedGoesFirst_withinSize() {
        // Each entry is ~1 KiB of body plus its key and fields; three fit, four do not.
        let c = OfflineCache(capacity: 3 * 1024 + 600, maxAge: 86_400)
        for i in 0..<3 {
            XCTAssertTrue(c.store(method: "GET", key: key("/\(i)"), requestField: { _ in nil }, status: 200, fields: json,
                                  body: body(1024), now: Double(i)))
        }
        XCTAssertEqual(c.entries, 3)
        XCTAssertNotNil(c.lookup(method: "GET", key: key("/0"), requestField: { _ in nil }, now: 3), "/0 is now the newest")
        XCTAssertTrue(c.store(method: "GET", key: key("/3"), requestField: { _ in nil }, status: 200, fields: json,
                              body: body(1024), now: 4))
        XCTAssertEqual(c.entries, 3)
        XCTAssertLessThanOrEqual(c.bytes, c.capacity)
        XCTAssertNil(c.lookup(method: "GET", key: key("/1"), requestField: { _ in nil }, now: 5), "the least recently used went")
        XCTAssertNotNil(c.lookup(method: "GET", key: key("/0"), requestField: { _ in nil }, now: 5))
        XCTAssertNotNil(c.lookup(method: "GET", key: key("/2"), requestField: { _ in nil }, now: 5))
        XCTAssertNotNil(c.lookup(method: "GET", key: key("/3"), requestField: { _ in nil }, now: 5))
        XCTAssertFalse(c.store(method: "GET", key: key("/huge"), requestField: { _ in nil }, status: 200, fields: json,
                               body: body(8192), now: 6), "an answer larger than SIZE is not stored")
        XCTAssertEqual(c.entries, 3)
    }

    func testReplacing_anEntryKeepsTheByteCountRight() {
        let c = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        c.store(method: "GET", key: key(), requestField: { _ in nil }, status: 200, fields: json, body: body(1000), now: 0)
        let one = c.bytes
        c.store(method: "GET", key: key(), requestField: { _ in nil }, status: 200, fields: json, body: body(1000), now: 1)
        XCTAssertEqual(c.bytes, one)
        XCTAssertEqual(c.entries, 1)
    }

    func testMaxAge_boundsStaleness_includingTheUpstreamsOwnAge() {
        let c = OfflineCache(capacity: 1 << 20, maxAge: 60)
        c.store(method: "GET", key: key("/a"), requestField: { _ in nil }, status: 200, fields: json, body: body(1), now: 0)
        c.store(method: "GET", key: key("/b"), requestField: { _ in nil }, status: 200, fields: json + [("Age", "50")],
                body: body(1), now: 0)
        XCTAssertEqual(c.lookup(method: "GET", key: key("/a"), requestField: { _ in nil }, now: 60)?.age, 60)
        XCTAssertNil(c.lookup(method: "GET", key: key("/a"), requestField: { _ in nil }, now: 61))
        XCTAssertEqual(c.entries, 1, "an expired entry is dropped when found")
        XCTAssertNil(c.lookup(method: "GET", key: key("/b"), requestField: { _ in nil }, now: 11), "50 s old when stored")
        XCTAssertFalse(c.lookup(method: "GET", key: key("/a"), requestField: { _ in nil }, now: 1)?.fields.contains { $0.0 == "Age" } ?? false)
    }

    func testNoStore_andNon2xx_areNotStored() {
        let c = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        XCTAssertFalse(c.store(method: "GET", key: key(), requestField: { _ in nil }, status: 200,
                               fields: json + [("Cache-Control", "private, no-store")], body: body(1), now: 0))
        XCTAssertFalse(c.store(method: "GET", key: key(), requestField: { _ in nil }, status: 304, fields: json, body: [], now: 0))
        XCTAssertTrue(c.store(method: "GET", key: key(), requestField: { _ in nil }, status: 200,
                              fields: json + [("Cache-Control", "max-age=0")], body: body(1), now: 0),
                      "only no-store keeps an answer out: staleness is what this cache is for")
    }

    func testMethods_onlyGetAndHeadAreStoredOrServed() {
        let c = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        for m in ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"] {
            XCTAssertFalse(c.store(method: m, key: key(), requestField: { _ in nil }, status: 200, fields: json, body: body(1), now: 0), m)
        }
        XCTAssertTrue(c.store(method: "GET", key: key(), requestField: { _ in nil }, status: 200, fields: json, body: body(1), now: 0))
        for m in ["POST", "PUT", "PATCH", "DELETE"] {
            XCTAssertNil(c.lookup(method: m, key: key(), requestField: { _ in nil }, now: 1), m)
        }
        XCTAssertNotNil(c.lookup(method: "HEAD", key: key(), requestField: { _ in nil }, now: 1))
    }
}

/// The offline cache through a running gateway: the upstream killed, then revived.
final class OfflineCacheLiveTests: XCTestCase {
    func testUpstreamKilled_storedGetsAreServedStale_everythingElseIsOffline_thenFreshAgain() throws {
        let h = try Harness { c in
            c.offlineCache = 1 << 20
            c.probeInterval = 0.2
            c.probeTimeout = 0.2
            c.connectTimeout = 0.2
            c.fall = 2
            c.rise = 1
        }
        defer { h.stop() }
        XCTAssertTrue(h.eventually { h.gateway.reachability.state == .reachable })
        let alice = [("Authorization", "Bearer alice")]
        let fresh = try h.request("GET", "/api/user", headers: alice)
        XCTAssertEqual(fresh.status, 200)
        XCTAssertNil(fresh.header("Cache-Status"))
        XCTAssertEqual(try h.request("GET", "/api/nostore-missing", headers: alice).status, 404, "a 404 is not stored")
        XCTAssertEqual(h.gateway.offlineCache?.entries, 1)

        let port = h.upstream.port
        h.upstream.stop()
        XCTAssertTrue(h.eventually(1.0) { h.gateway.reachability.isDown }, "not offline within 1 s")
        let stale = try h.request("GET", "/api/user", headers: alice)
        XCTAssertEqual(stale.status, 200)
        XCTAssertEqual(stale.body, fresh.body)
        XCTAssertEqual(stale.header("Content-Type"), "application/json")
        XCTAssertEqual(stale.header("Cache-Status"), "Peel; hit; detail=offline")
        XCTAssertNotNil(stale.header("Age").flatMap { Int($0) })
        XCTAssertNotNil(stale.header("X-Request-Id"))
        XCTAssertEqual(try h.request("HEAD", "/api/user", headers: alice).status, 200)

        let bob = try h.request("GET", "/api/user", headers: [("Authorization", "Bearer bob")])
        XCTAssertEqual(problem(bob)["kind"] as? String, "offline", "another user's answer was served")
        XCTAssertEqual(problem(try h.request("GET", "/api/items", headers: alice))["kind"] as? String, "offline")
        XCTAssertEqual(problem(try h.request("POST", "/api/user", headers: alice))["kind"] as? String, "offline")
        XCTAssertEqual(problem(try h.request("DELETE", "/api/user", headers: alice))["kind"] as? String, "offline")
        let metrics = try h.admin("/metrics").text
        XCTAssertTrue(metrics.contains("peel_offline_cache_hits_total 2"), metrics)
        XCTAssertTrue(metrics.contains("peel_offline_cache_entries 1"), metrics)

        let revived = try DemoUpstream(listen: HostPort(host: "127.0.0.1", port: port))
        try revived.start()
        defer { revived.stop() }
        XCTAssertTrue(h.eventually(1.0) { !h.gateway.reachability.isDown }, "not back within 1 s")
        let again = try h.request("GET", "/api/user", headers: alice)
        XCTAssertEqual(again.status, 200)
        XCTAssertNil(again.header("Cache-Status"), "a fresh answer once the upstream is back")
    }
}

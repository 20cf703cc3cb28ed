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
            c.offlineCache = 1 << 20
            c.probeInterval = 0.1
            c.probeTimeout = 0.3
            c.connectTimeout = 0.3
            c.fall = 2
            c.rise = 1
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
        let h = try harness { c in c.offlineCacheKey = ["x-token"] }
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
        next.offlineCacheKey = ["authorization", "x-token"]
        XCTAssertEqual(h.gateway.reload(next), [])
        XCTAssertEqual(h.gateway.offlineCache.entries, 0, "entries under the old key fields stayed")
        XCTAssertEqual(try get(h, "/me", [alice]).status, 200)
        XCTAssertEqual(h.gateway.offlineCache.entries, 1)
        // An operator turning the cache off after a privacy incident: gone at once, nothing served.
        next.offlineCache = 0
        XCTAssertEqual(h.gateway.reload(next), [], "a reload that could not apply the cache said nothing")
        XCTAssertEqual(h.gateway.offlineCache.entries, 0)
        XCTAssertEqual(try get(h, "/me", [alice]).status, 200)
        XCTAssertEqual(h.gateway.offlineCache.entries, 0, "stored while off")
        goOffline(h)
        XCTAssertTrue(isOffline(try get(h, "/me", [alice])))
    }
}

import Foundation
import PeelGateway
import PeelIO
import XCTest

/// The shared offline store's pure parts (issue 21): keys, values, TTLs and the store option.
final class OfflineStoreCodecTests: XCTestCase {
    private let secret = Array("a test secret of 32 bytes, fixed".utf8)
    /// The store key a value is written under (the MAC covers it).
    private let storeKey = Array("peel:oc:1:0123".utf8)

    private func key(auth: String? = "Bearer alice", cookie: String? = nil, target: String = "/api/user?x=1",
                     host: String = "api.example", lang: String? = nil) -> OfflineCacheKey {
        OfflineCacheKey(host: host, target: target, acceptLanguage: lang, fieldNames: ["authorization", "cookie"], user: [auth, cookie])
    }

    private func record(body: [UInt8] = Array(#"{"id":1}"#.utf8), fields: [(String, String)] = [("Cache-Control", "max-age=60")],
                        storedAt: Double = 1_790_000_000.25) -> OfflineCacheRecord {
        OfflineCacheRecord(status: 200, fields: ResponseHeaders(fields), contentType: "application/json", body: body,
                           storedAt: storedAt, etag: "\"v1\"", lastModified: nil)
    }

    private func hex(_ b: [UInt8]) -> String { b.map { String(format: "%02x", $0) }.joined() }

    func testHMAC_matchesRFC4231() {
        // RFC 4231 §4.3, test case 2.
        let mac = KeyedHash(secret: Array("Jefe".utf8)).mac(Array("what do ya want for nothing?".utf8))
        XCTAssertEqual(hex(mac), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    func testKeys_areKeyedHashes_withoutAnythingInClear() {
        let c = OfflineStoreCodec(secret: secret, maxEntry: 1 << 20)
        let k = String(decoding: c.key(key()), as: UTF8.self)
        XCTAssertTrue(k.hasPrefix(OfflineStoreCodec.keyPrefix))
        XCTAssertEqual(k.count, OfflineStoreCodec.keyPrefix.count + 64)
        for clear in ["alice", "Bearer", "api", "user", "example"] { XCTAssertFalse(k.contains(clear), clear) }
        XCTAssertEqual(c.key(key()), c.key(key()), "the same request must find the same key on every replica")
        XCTAssertEqual(c.key(key()), OfflineStoreCodec(secret: secret, maxEntry: 1024).key(key()), "the bound is not part of a key")
    }

    func testKeys_differByEveryPartAndBySecret() {
        let c = OfflineStoreCodec(secret: secret, maxEntry: 1 << 20)
        let base = c.key(key())
        let others = [key(auth: "Bearer bob"), key(auth: nil), key(cookie: "s=1"), key(target: "/api/user?x=2"),
                      key(host: "other.example"), key(lang: "fr"), key(lang: "")]
        var seen: Set<[UInt8]> = [base]
        for k in others { XCTAssertTrue(seen.insert(c.key(k)).inserted, "\(k) collides") }
        // Length prefixes: moving a byte between parts changes the key.
        XCTAssertNotEqual(c.key(key(auth: "ab", cookie: "c")), c.key(key(auth: "a", cookie: "bc")))
        XCTAssertNotEqual(base, OfflineStoreCodec(secret: Array("another secret of enough length".utf8), maxEntry: 1 << 20).key(key()))
    }

    func testValues_roundTrip() throws {
        let c = OfflineStoreCodec(secret: secret, maxEntry: 1 << 20)
        let vary = ["accept", "x-tenant"]
        let hashes = [c.varyHash(name: "accept", value: "application/json"), c.varyHash(name: "x-tenant", value: nil)]
        let r = record(fields: [("Cache-Control", "max-age=60, stale-if-error=300"), ("ETag", "\"v1\""), ("X-Thing", "a\tb")])
        let bytes = try XCTUnwrap(c.encode(r, vary: vary, varyHashes: hashes, under: storeKey))
        guard case .success(let v) = c.decode(bytes, under: storeKey) else { return XCTFail("did not decode") }
        XCTAssertEqual(v.record.status, 200)
        XCTAssertEqual(v.record.body, r.body)
        XCTAssertEqual(v.record.storedAt, r.storedAt)
        XCTAssertEqual(v.record.contentType, "application/json")
        XCTAssertEqual(v.record.etag, "\"v1\"")
        XCTAssertNil(v.record.lastModified)
        XCTAssertEqual(v.record.fields.pairs.map { "\($0.0): \($0.1)" }, r.fields.pairs.map { "\($0.0): \($0.1)" })
        XCTAssertEqual(v.record.directives, r.directives)
        XCTAssertEqual(v.record.directives.staleIfError, 300)
        XCTAssertEqual(v.vary, vary)
        XCTAssertEqual(v.varyHashes, hashes)
        XCTAssertNotEqual(hashes[0], c.varyHash(name: "accept", value: "text/html"))
        XCTAssertNotEqual(c.varyHash(name: "x", value: nil), c.varyHash(name: "x", value: ""))
    }

    func testValues_holdNoVaryValueInClear() throws {
        let c = OfflineStoreCodec(secret: secret, maxEntry: 1 << 20)
        let bytes = try XCTUnwrap(c.encode(record(), vary: ["authorization"], varyHashes: [c.varyHash(name: "authorization", value: "Bearer alice")], under: storeKey))
        XCTAssertNil(String(decoding: bytes, as: UTF8.self).range(of: "alice"))
    }

    func testDecode_refusesGarbageVersionsAndOversizedValues() throws {
        let c = OfflineStoreCodec(secret: secret, maxEntry: 4096)
        let good = try XCTUnwrap(c.encode(record(), vary: [], varyHashes: [], under: storeKey))
        func why(_ b: [UInt8]) -> OfflineStoreRejection? {
            if case .failure(let w) = c.decode(b, under: storeKey) { return w }
            return nil
        }
        XCTAssertNil(why(good))
        XCTAssertEqual(why([]), .garbage)
        XCTAssertEqual(why(Array("not a peel value".utf8)), .garbage)
        var other = good
        other[6] = OfflineStoreCodec.version &+ 1
        XCTAssertEqual(why(other), .version)
        XCTAssertEqual(why(Array(good.dropLast())), .garbage, "a truncated body")
        XCTAssertEqual(why(good + [0]), .garbage, "a byte after the body")
        var badStatus = good
        badStatus[7] = 0xFF
        XCTAssertEqual(why(badStatus), .garbage)
        XCTAssertEqual(why([UInt8](repeating: 0x50, count: 4097)), .tooLarge)
        // Every truncation of a good value is refused, none crashes.
        for n in 0..<good.count { XCTAssertNotNil(why(Array(good.prefix(n))), "prefix \(n)") }
    }

    func testDecode_refusesAValueMadeWithAnotherSecret_orMovedToAnotherKey() throws {
        // The final review of session 4: a value SET by someone without the secret was served.
        let c = OfflineStoreCodec(secret: secret, maxEntry: 4096)
        let forger = OfflineStoreCodec(secret: Array("another secret of 32 bytes, made".utf8), maxEntry: 4096)
        let forged = try XCTUnwrap(forger.encode(record(), vary: [], varyHashes: [], under: storeKey))
        guard case .failure(.garbage) = c.decode(forged, under: storeKey) else { return XCTFail("a forged value was accepted") }
        let alices = try XCTUnwrap(c.encode(record(), vary: [], varyHashes: [], under: storeKey))
        guard case .failure(.garbage) = c.decode(alices, under: Array("peel:oc:1:bob".utf8)) else {
            return XCTFail("alice's value was accepted under bob's key")
        }
        guard case .success = c.decode(alices, under: storeKey) else { return XCTFail("the control did not decode") }
    }

    func testDecode_refusesFieldsThatCouldNotGoBackOnTheWire() throws {
        let c = OfflineStoreCodec(secret: secret, maxEntry: 4096)
        let good = try XCTUnwrap(c.encode(record(fields: [("X-A", "bbbb")]), vary: [], varyHashes: [], under: storeKey))
        // Put CR LF into the value "bbbb" as a hand-planted value could.
        let at = try XCTUnwrap((0..<good.count - 3).first { Array(good[$0..<$0 + 4]) == Array("bbbb".utf8) })
        var bad = good
        bad[at + 1] = 0x0D
        bad[at + 2] = 0x0A
        guard case .failure(.garbage) = c.decode(bad, under: storeKey) else { return XCTFail("a CR LF in a field value was accepted") }
    }

    func testEncode_refusesValuesOverTheBound() {
        let c = OfflineStoreCodec(secret: secret, maxEntry: 1024)
        XCTAssertNotNil(c.encode(record(body: [UInt8](repeating: 0x61, count: 900)), vary: [], varyHashes: [], under: storeKey))
        XCTAssertNil(c.encode(record(body: [UInt8](repeating: 0x61, count: 1024)), vary: [], varyHashes: [], under: storeKey))
    }

    func testTTL_isTheTimeItMayStillBeServed() {
        func r(_ cc: String?, age: Double = 0) -> OfflineCacheRecord {
            record(fields: cc.map { [("Cache-Control", $0)] } ?? [], storedAt: 1000 - age)
        }
        let ttl = { (x: OfflineCacheRecord, override: Bool) in OfflineCacheRules.servableFor(x, maxAge: 3600, override: override, now: 1000) }
        XCTAssertEqual(ttl(r(nil), false), 3600)
        XCTAssertEqual(ttl(r(nil, age: 600), false), 3000)
        XCTAssertEqual(ttl(r("max-age=60, stale-if-error=120"), false), 180)
        XCTAssertEqual(ttl(r("max-age=60, must-revalidate"), false), 60, "only while fresh")
        XCTAssertEqual(ttl(r("max-age=60, must-revalidate"), true), 3600)
        XCTAssertEqual(ttl(r("no-cache"), false), 0, "never served: not written")
        XCTAssertEqual(ttl(r(nil, age: 4000), false), 0)
        // The TTL never outlives what serve() allows.
        let e = r("max-age=60, stale-if-error=120", age: 181)
        if case .hit = OfflineCacheRules.serve(e, request: CacheRequest(), maxAge: 3600, override: false, now: 1000) {
            XCTFail("served past its TTL")
        }
    }

    func testStoreOption_parses() {
        func p(_ s: String) -> String {
            switch OfflineStoreURL.parse(s) {
            case .success(let u): return u.description
            case .failure(let e): return "error: " + e.reason
            }
        }
        XCTAssertEqual(p("memory"), "memory")
        XCTAssertEqual(p("redis://127.0.0.1:6380/3"), "redis://127.0.0.1:6380/3")
        XCTAssertEqual(p("redis://redis"), "redis://redis:6379/0")
        XCTAssertEqual(p("redis://[::1]:7000"), "redis://[::1]:7000/0")
        XCTAssertEqual(p("unix:///run/redis/redis.sock"), "unix:///run/redis/redis.sock")
        for bad in ["redis://", "redis://h:0", "redis://h:x", "redis://:pw@h:6379", "redis://h/x", "unix://relative", "http://h", "Memory"] {
            XCTAssertTrue(p(bad).hasPrefix("error: "), bad)
        }
    }

    func testRedisStore_needsTheSecret() throws {
        let base = ["--upstream", "http://u.example", "--offline-store", "redis://127.0.0.1:6379"]
        XCTAssertThrowsError(try ConfigLoader.load(arguments: base, environment: [:])) { e in
            XCTAssertEqual((e as? ConfigError)?.option, "--offline-store-secret-file")
        }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("peel-secret-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let short = dir.appendingPathComponent("short"), good = dir.appendingPathComponent("good")
        try Data("too short\n".utf8).write(to: short)
        try Data("0123456789abcdef0123\n".utf8).write(to: good)
        XCTAssertThrowsError(try ConfigLoader.load(arguments: base + ["--offline-store-secret-file", short.path], environment: [:])) { e in
            XCTAssertEqual((e as? ConfigError)?.option, "--offline-store-secret-file")
        }
        let c = try ConfigLoader.load(arguments: base + ["--offline-store-secret-file", good.path], environment: [:])
        XCTAssertEqual(c.offline.storeSecret, Array("0123456789abcdef0123".utf8), "one trailing newline is not part of the secret")
        XCTAssertEqual(c.offline.store, .redis(.tcp(host: "127.0.0.1", port: 6379), database: 0))
        XCTAssertEqual(try ConfigLoader.load(arguments: ["--upstream", "http://u.example"], environment: [:]).offline.store, .memory)
    }

    func testReload_keepsTheStoreSettings_andNamesThem() {
        var c = GatewayConfig()
        c.offline.capacity = 1 << 20
        c.offline.store = .redis(.tcp(host: "127.0.0.1", port: 6379), database: 0)
        c.offline.storeSecret = Array("0123456789abcdef".utf8)
        let g = Gateway(config: c)
        XCTAssertNotNil(g.offlineStoreStats)
        var next = c
        next.offline.store = .redis(.tcp(host: "127.0.0.1", port: 6380), database: 1)
        next.offline.storeSecret = Array("fedcba9876543210".utf8)
        next.offline.storeMaxEntry = 4096
        next.offline.storeTimeout = 0.2
        next.offline.maxAge = 60
        XCTAssertEqual(g.reload(next), ["offline_store", "offline_store_secret_file", "offline_store_max_entry", "offline_store_timeout"])
        XCTAssertEqual(g.config.offline.store, c.offline.store)
        XCTAssertEqual(g.config.offline.storeSecret, c.offline.storeSecret)
        XCTAssertEqual(g.config.offline.storeTimeout, 0.05)
        XCTAssertEqual(g.config.offline.maxAge, 60, "the cache's own settings follow a reload")
        XCTAssertEqual(g.offlineCache.settings.maxAge, 60)
    }
}

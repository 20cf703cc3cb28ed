import PeelDemo
import PeelGateway
import PeelIO
import XCTest

/// The offline cache on its own, with the clock passed in (issues 13 and 17).
final class OfflineCacheTests: XCTestCase {
    private let none: (String) -> String? = { _ in nil }

    private func key(_ target: String = "/api/user", auth: String? = "Bearer alice", cookie: String? = nil,
                     lang: String? = nil, host: String = "api.example") -> OfflineCacheKey {
        OfflineCacheKey(host: host, target: target, acceptLanguage: lang, fieldNames: ["authorization", "cookie"], user: [auth, cookie])
    }

    private func body(_ n: Int) -> [UInt8] { [UInt8](repeating: 0x61, count: n) }

    private func fields(_ pairs: [(String, String)] = []) -> ResponseHeaders { ResponseHeaders(pairs) }

    @discardableResult
    private func put(_ c: OfflineCache, _ k: OfflineCacheKey? = nil, _ pairs: [(String, String)] = [], body b: [UInt8]? = nil,
                     request: CacheRequest = CacheRequest(), authorization: Bool = false,
                     requestField: (String) -> String? = { _ in nil }, now: Double = 0) -> OfflineCacheStore {
        c.store(key: k ?? key(), request: request, hasAuthorization: authorization, requestField: requestField, status: 200,
                fields: fields(pairs), contentType: "application/json", body: b ?? Array(#"{"id":1}"#.utf8), now: now)
    }

    private func get(_ c: OfflineCache, _ k: OfflineCacheKey? = nil, request: CacheRequest = CacheRequest(),
                     requestField: (String) -> String? = { _ in nil }, now: Double = 1) -> OfflineCacheHit? {
        if case .hit(let h) = c.lookup(key: k ?? key(), request: request, requestField: requestField, now: now) { return h }
        return nil
    }

    private func missWhy(_ c: OfflineCache, _ k: OfflineCacheKey? = nil, request: CacheRequest = CacheRequest(), now: Double = 1) -> String? {
        if case .miss(let why) = c.lookup(key: k ?? key(), request: request, requestField: { _ in nil }, now: now) { return why }
        return nil
    }

    func testKeying_anotherUsersAuthorizationMisses() {
        let c = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        XCTAssertEqual(put(c), .stored(shared: false))
        let hit = get(c, now: 5)
        XCTAssertEqual(hit.map { String(decoding: $0.body, as: UTF8.self) }, #"{"id":1}"#)
        XCTAssertEqual(hit?.status, 200)
        XCTAssertEqual(hit?.age, 5)
        XCTAssertEqual(hit?.contentType, "application/json")
        XCTAssertNil(get(c, key(auth: "Bearer mallory"), now: 5))
        XCTAssertNil(get(c, key(auth: nil), now: 5))
        XCTAssertNil(get(c, key(cookie: "sid=2"), now: 5))
        XCTAssertNil(get(c, key(lang: "zh-CN"), now: 5))
        XCTAssertNil(get(c, key("/api/user?x=1"), now: 5))
        XCTAssertNil(get(c, key(host: "tenant-b.example"), now: 5), "another tenant's Host got the entry")
        XCTAssertEqual(c.hits, 1)
    }

    func testKeying_customKeyFieldsSeparateUsers_andTheirNamesArePartOfTheKey() {
        // `--offline-cache-key X-Token`: bob's X-Token never finds alice's entry.
        let c = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        let alice = OfflineCacheKey(host: "h", target: "/me", acceptLanguage: nil, fieldNames: ["x-token"], user: ["alice"])
        let bob = OfflineCacheKey(host: "h", target: "/me", acceptLanguage: nil, fieldNames: ["x-token"], user: ["bob"])
        XCTAssertEqual(put(c, alice), .stored(shared: false))
        XCTAssertNotNil(get(c, alice))
        XCTAssertNil(get(c, bob))
        let sameValueOtherField = OfflineCacheKey(host: "h", target: "/me", acceptLanguage: nil, fieldNames: ["authorization"], user: ["alice"])
        XCTAssertNil(get(c, sameValueOtherField), "a value under another field name matched")
    }

    func testShared_onlyWhatTheUpstreamMarkedShareable_isStoredForARequestWithoutAKeyField() {
        let c = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        let anonymous = key(auth: nil)
        // An app authenticating with X-Token that Peel was not told about: nothing marks it shareable.
        XCTAssertEqual(put(c, anonymous), .refused("not marked public, and no key field"))
        XCTAssertEqual(put(c, anonymous, [("Cache-Control", "max-age=60")]), .refused("not marked public, and no key field"))
        XCTAssertEqual(put(c, anonymous, [("Cache-Control", "public, private")]),
                       .refused("private answer to a request without a key field"))
        XCTAssertEqual(put(c, anonymous, [("Cache-Control", "public"), ("Set-Cookie", "sid=1")]),
                       .refused("a shared answer that sets a cookie"))
        XCTAssertEqual(c.entries, 0)
        XCTAssertEqual(put(c, anonymous, [("Cache-Control", "public, max-age=10")]), .stored(shared: true))
        XCTAssertEqual(put(c, key("/s", auth: nil), [("Cache-Control", "s-maxage=10")]), .stored(shared: true))
        XCTAssertNotNil(get(c, anonymous))
    }

    func testShared_authorizationThatIsNotAKeyField_needsTheUpstreamsLeave() {
        // RFC 9111 §3.5, reached when the operator keyed on other fields only.
        let c = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        let k = OfflineCacheKey(host: "h", target: "/a", acceptLanguage: nil, fieldNames: ["x-token"], user: [nil])
        XCTAssertEqual(put(c, k, [("Cache-Control", "public")], authorization: true), .stored(shared: true))
        XCTAssertEqual(put(c, k, [], authorization: true), .refused("not marked public, and no key field"))
    }

    func testPerUser_privateIsStored_butSetCookieIsNeverReplayed() {
        let c = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        XCTAssertEqual(put(c, key(), [("Cache-Control", "private"), ("Set-Cookie", "sid=alice"), ("X-Kept", "1")]), .stored(shared: false))
        let hit = get(c)
        XCTAssertEqual(hit?.fields.first("x-kept"), "1")
        XCTAssertNil(hit?.fields.first("set-cookie"), "Set-Cookie replayed from an entry")
    }

    func testKeying_fieldsNamedByVaryMustMatch() {
        let c = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        let tenantA: (String) -> String? = { $0 == "x-tenant" ? "a" : nil }
        XCTAssertEqual(put(c, key(), [("Vary", "X-Tenant, Accept-Encoding")], requestField: tenantA), .stored(shared: false))
        XCTAssertNotNil(get(c, requestField: tenantA))
        XCTAssertNil(get(c, requestField: { $0 == "x-tenant" ? "b" : nil }))
        XCTAssertNil(get(c, requestField: none))
        XCTAssertEqual(put(c, key("/other"), [("Vary", "*")]), .refused("Vary: *"), "Vary: * never matches")
    }

    func testEviction_leastRecentlyUsedGoesFirst_withinSize() {
        // Each entry is ~1 KiB of body plus its key and fields; three fit, four do not.
        let c = OfflineCache(capacity: 3 * 1024 + 600, maxAge: 86_400)
        for i in 0..<3 { XCTAssertEqual(put(c, key("/\(i)"), body: body(1024), now: Double(i)), .stored(shared: false)) }
        XCTAssertEqual(c.entries, 3)
        XCTAssertNotNil(get(c, key("/0"), now: 3), "/0 is now the newest")
        XCTAssertEqual(put(c, key("/3"), body: body(1024), now: 4), .stored(shared: false))
        XCTAssertEqual(c.entries, 3)
        XCTAssertLessThanOrEqual(c.bytes, c.capacity)
        XCTAssertNil(get(c, key("/1"), now: 5), "the least recently used went")
        XCTAssertNotNil(get(c, key("/0"), now: 5))
        XCTAssertNotNil(get(c, key("/2"), now: 5))
        XCTAssertNotNil(get(c, key("/3"), now: 5))
        XCTAssertEqual(put(c, key("/huge"), body: body(8192), now: 6), .refused("larger than the cache"))
        XCTAssertEqual(c.entries, 3)
    }

    func testReplacing_anEntryKeepsTheByteCountRight() {
        let c = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        put(c, body: body(1000), now: 0)
        let one = c.bytes
        put(c, body: body(1000), now: 1)
        XCTAssertEqual(c.bytes, one)
        XCTAssertEqual(c.entries, 1)
    }

    func testMaxAge_boundsStaleness_includingTheUpstreamsOwnAge() {
        let c = OfflineCache(capacity: 1 << 20, maxAge: 60)
        put(c, key("/a"))
        put(c, key("/b"), [("Age", "50")])
        XCTAssertEqual(get(c, key("/a"), now: 60)?.age, 60)
        XCTAssertNil(get(c, key("/a"), now: 61))
        XCTAssertEqual(c.entries, 1, "an expired entry is dropped when found")
        XCTAssertNil(get(c, key("/b"), now: 11), "50 s old when stored")
        XCTAssertNil(get(c, key("/b"), now: 1)?.fields.first("age"), "the upstream's Age is not kept as a field")
    }

    func testAge_invalidOrNegativeIsIgnored() {
        // RFC 9111 §5.1: `Age: -100000` once made an entry outlive --offline-cache-max-age.
        let c = OfflineCache(capacity: 1 << 20, maxAge: 60)
        put(c, key("/neg"), [("Age", "-100000")])
        put(c, key("/junk"), [("Age", "ten")])
        XCTAssertEqual(get(c, key("/neg"), now: 30)?.age, 30)
        XCTAssertNil(get(c, key("/neg"), now: 61), "a negative Age extended the entry's life")
        XCTAssertEqual(get(c, key("/junk"), now: 2)?.age, 2)
    }

    func testNoStore_onEitherSide_andNon2xx_areNotStored() {
        let c = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        XCTAssertEqual(put(c, key(), [("Cache-Control", "private, no-store")]), .refused("the answer says no-store"))
        XCTAssertEqual(put(c, key(), [], request: CacheRequest(cacheControl: ["no-store"])), .refused("the request says no-store"))
        XCTAssertEqual(c.store(key: key(), request: CacheRequest(), hasAuthorization: false, requestField: none, status: 206,
                               fields: fields(), contentType: nil, body: [], now: 0), .refused("status 206"))
        XCTAssertEqual(c.entries, 0)
        XCTAssertEqual(put(c, key(), [("Cache-Control", "max-age=0")]), .stored(shared: false),
                       "max-age=0 is stale at once, which is what this cache is for")
        XCTAssertNotNil(get(c))
    }

    func testNeverServedStale_answersTheUpstreamMarkedSo() {
        let c = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        let marked = ["no-cache", "must-revalidate", "proxy-revalidate", "s-maxage=0", "max-age=0, must-revalidate",
                      "no-cache=\"set-cookie, x-a\""]
        for (i, cc) in marked.enumerated() { put(c, key("/\(i)"), [("Cache-Control", cc)]) }
        for (i, cc) in marked.enumerated() { XCTAssertNil(get(c, key("/\(i)"), now: 5), cc) }
        // Fresh is fresh: must-revalidate with max-age=60 may be used for 60 s, not after.
        put(c, key("/fresh"), [("Cache-Control", "max-age=60, must-revalidate")])
        XCTAssertNotNil(get(c, key("/fresh"), now: 59))
        XCTAssertNil(get(c, key("/fresh"), now: 61))
        // The operator's explicit choice lifts these (never no-store, never the key rules).
        c.configure(OfflineCache.Settings(capacity: 1 << 20, maxAge: 86_400, override: true))
        for (i, cc) in marked.enumerated() { XCTAssertNotNil(get(c, key("/\(i)"), now: 5), "override: " + cc) }
    }

    func testStaleIfError_boundsHowLongPastItsLifetime() {
        let c = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        put(c, key("/zero"), [("Cache-Control", "stale-if-error=0")])
        put(c, key("/ten"), [("Cache-Control", "max-age=5, stale-if-error=10")])
        XCTAssertNil(get(c, key("/zero"), now: 1), "stale-if-error=0 served stale")
        XCTAssertNotNil(get(c, key("/ten"), now: 15))
        XCTAssertNil(get(c, key("/ten"), now: 16))
        // The request may bound it too (RFC 5861 §4), the tighter bound wins.
        put(c, key("/any"))
        XCTAssertNil(get(c, key("/any"), request: CacheRequest(cacheControl: ["stale-if-error=3"]), now: 4))
        XCTAssertNotNil(get(c, key("/any"), request: CacheRequest(cacheControl: ["stale-if-error=3"]), now: 3))
    }

    func testRequestDirectives_askingForTheOrigin_getNoStaleAnswer() {
        let c = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        put(c)
        for cc in ["no-cache", "no-store", "max-age=0", "NO-CACHE"] {
            XCTAssertEqual(missWhy(c, request: CacheRequest(cacheControl: [cc]), now: 5), "the request asks for a fresh answer", cc)
        }
        XCTAssertNil(get(c, request: CacheRequest(pragma: "no-cache"), now: 5), "Pragma: no-cache without Cache-Control")
        XCTAssertNotNil(get(c, request: CacheRequest(cacheControl: ["no-cache, max-stale"]), now: 5), "max-stale says a stale one will do")
        XCTAssertNotNil(get(c, request: CacheRequest(cacheControl: ["max-age=0", "stale-if-error=60"]), now: 5))
        XCTAssertNil(get(c, request: CacheRequest(cacheControl: ["max-age=3"]), now: 5), "older than max-age=3")
        XCTAssertNotNil(get(c, request: CacheRequest(cacheControl: ["max-age=30"]), now: 5))
        XCTAssertNil(get(c, request: CacheRequest(cacheControl: ["max-stale=2"]), now: 5), "staler than max-stale=2")
    }

    func testConditional_aMatchingValidatorGets304_andAnotherGetsTheBody() {
        let c = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        put(c, key(), [("ETag", "\"v1\""), ("Last-Modified", "Tue, 01 Dec 2026 10:00:00 GMT")])
        func answer(_ r: CacheRequest) -> OfflineCacheAnswer { c.lookup(key: key(), request: r, requestField: none, now: 5) }
        guard case .notModified(let nm) = answer(CacheRequest(ifNoneMatch: "\"v0\", W/\"v1\"")) else { return XCTFail("no 304") }
        XCTAssertEqual(nm.status, 304)
        XCTAssertEqual(nm.body, [])
        guard case .hit(let full) = answer(CacheRequest(ifNoneMatch: "\"v2\"")) else { return XCTFail("no body for another tag") }
        XCTAssertEqual(full.status, 200)
        guard case .notModified = answer(CacheRequest(ifModifiedSince: "Tue, 01 Dec 2026 10:00:00 GMT")) else { return XCTFail("IMS") }
        guard case .hit = answer(CacheRequest(ifNoneMatch: "\"v2\"", ifModifiedSince: "Tue, 01 Dec 2026 10:00:00 GMT")) else {
            return XCTFail("If-None-Match takes precedence over If-Modified-Since")
        }
        XCTAssertEqual(c.notModifiedHits, 2)
    }

    func testA304_refreshesTheStoredAge_andItsFields() {
        // RFC 9111 §4.3.4: the age counts from the 304, not from the first 200.
        let c = OfflineCache(capacity: 1 << 20, maxAge: 100)
        put(c, key(), [("ETag", "\"v1\""), ("Cache-Control", "max-age=0"), ("X-Version", "1")], now: 0)
        let r = c.refresh(key: key(), request: CacheRequest(ifNoneMatch: "\"v1\""), hasAuthorization: true, requestField: none,
                          notModified: fields([("ETag", "\"v1\""), ("X-Version", "2")]), now: 90)
        XCTAssertEqual(r, .stored(shared: false))
        let hit = get(c, now: 150)
        XCTAssertEqual(hit?.age, 60, "the age did not start again at the 304")
        XCTAssertEqual(hit?.fields.first("x-version"), "2")
        XCTAssertEqual(hit.map { String(decoding: $0.body, as: UTF8.self) }, #"{"id":1}"#)
    }

    func testA304_withNothingStored_keepsTheValidator_forConditionalRequestsOnly() {
        let c = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        XCTAssertEqual(c.refresh(key: key(), request: CacheRequest(ifNoneMatch: "\"v9\""), hasAuthorization: true, requestField: none,
                                 notModified: fields([("ETag", "\"v9\"")]), now: 0), .stored(shared: false))
        guard case .notModified = c.lookup(key: key(), request: CacheRequest(ifNoneMatch: "\"v9\""), requestField: none, now: 5) else {
            return XCTFail("the app's own copy is current: 304")
        }
        XCTAssertEqual(missWhy(c, now: 5), "only a validator is stored", "an unconditional request got a body that was never stored")
        XCTAssertNil(get(c, key(auth: "Bearer bob"), now: 5))
        guard case .miss = c.lookup(key: key(auth: "Bearer bob"), request: CacheRequest(ifNoneMatch: "\"v9\""), requestField: none, now: 5) else {
            return XCTFail("another user's validator answered 304")
        }
        // A 304 whose tag differs from the stored answer's neither refreshes nor replaces it (§4.3.4).
        put(c, key("/x"), [("ETag", "\"a\"")], now: 0)
        XCTAssertEqual(c.refresh(key: key("/x"), request: CacheRequest(), hasAuthorization: true, requestField: none,
                                 notModified: fields([("ETag", "\"b\"")]), now: 1), .refused("the 304 names another representation"))
        XCTAssertEqual(get(c, key("/x"), now: 2)?.age, 2, "the stored answer was replaced or refreshed by a 304 for another tag")
    }

    func testReload_capacityZeroDropsEverything_andASmallerOneEvicts() {
        let c = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        for i in 0..<4 { put(c, key("/\(i)"), body: body(1000)) }
        XCTAssertEqual(c.entries, 4)
        c.configure(OfflineCache.Settings(capacity: 2500, maxAge: 86_400))
        XCTAssertLessThanOrEqual(c.bytes, 2500)
        XCTAssertEqual(c.entries, 2)
        XCTAssertTrue(c.isEnabled)
        c.configure(OfflineCache.Settings(capacity: 0, maxAge: 86_400))
        XCTAssertEqual(c.entries, 0)
        XCTAssertEqual(c.bytes, 0)
        XCTAssertFalse(c.isEnabled)
        XCTAssertEqual(put(c, key()), .refused("larger than the cache"))
        c.configure(OfflineCache.Settings(capacity: 1 << 20, maxAge: 10))
        put(c)
        XCTAssertNil(get(c, now: 11), "the new max age was not applied")
    }

    func testVaryAcceptEncoding_isNotCompared_andIfNoneMatchStarMatchesWithoutAnETag() {
        // Peel asks the upstream for codings itself and stores the decoded body.
        let c = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        put(c, key(), [("Vary", "Accept-Encoding")], requestField: { $0 == "accept-encoding" ? "gzip" : nil })
        XCTAssertNotNil(get(c, requestField: { $0 == "accept-encoding" ? "br" : nil }))
        guard case .notModified = c.lookup(key: key(), request: CacheRequest(ifNoneMatch: "*"), requestField: none, now: 1) else {
            return XCTFail("If-None-Match: * matches any stored representation (RFC 9110 §13.1.2)")
        }
    }

    func testAnEntryAlreadyOlderThanMaxAge_isNotStored_andReplacesNothing() {
        let c = OfflineCache(capacity: 1 << 20, maxAge: 60)
        put(c, key(), [], now: 0)
        XCTAssertEqual(put(c, key(), [("Age", "61")], now: 1), .refused("older than offline_cache_max_age"))
        XCTAssertNil(get(c, now: 2), "the older entry stayed behind a newer one that could not be stored")
    }

    func testInvalidation_dropsThatKeyOnly() {
        let c = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        put(c, key("/items/1"))
        put(c, key("/items/1", auth: "Bearer bob"))
        c.invalidate(key: key("/items/1"))
        XCTAssertNil(get(c, key("/items/1")))
        XCTAssertNotNil(get(c, key("/items/1", auth: "Bearer bob")))
        XCTAssertEqual(c.entries, 1)
    }

    func testA304WithoutAnETag_refreshesOnlyWhatTheRequestsValidatorNamed() {
        let c = OfflineCache(capacity: 1 << 20, maxAge: 100)
        put(c, key(), [("ETag", "\"v1\"")], now: 0)
        // Another replica's client asked about v2 and got a bare 304: that says nothing of v1.
        c.refresh(key: key(), request: CacheRequest(ifNoneMatch: "\"v2\""), hasAuthorization: true, requestField: none,
                  notModified: fields([("Last-Modified", "Tue, 01 Dec 2026 10:00:00 GMT")]), now: 90)
        XCTAssertNil(get(c, now: 150)?.body.first, "v1 was refreshed by a 304 for v2")
        put(c, key("/b"), [("ETag", "\"v1\"")], now: 0)
        c.refresh(key: key("/b"), request: CacheRequest(ifNoneMatch: "\"v1\""), hasAuthorization: true, requestField: none,
                  notModified: fields([]), now: 90)
        XCTAssertEqual(get(c, key("/b"), now: 150)?.age, 60)
    }

    func testKeyFields_theCachesOwnRuleFieldsAreRefused() throws {
        for bad in ["Cache-Control", "pragma", "If-None-Match", "if-modified-since", "bad name"] {
            XCTAssertThrowsError(try ConfigLoader.load(arguments: ["--upstream", "http://127.0.0.1:1", "--offline-cache-key", bad],
                                                       environment: [:]), bad)
        }
        let c = try ConfigLoader.load(arguments: ["--upstream", "http://127.0.0.1:1", "--offline-cache-key", "X-Token, authorization"],
                                      environment: [:])
        XCTAssertEqual(c.offline.keyFields, ["x-token", "authorization"])
    }

    func testTheSameAnswerAgainWithinASecond_leavesTheEntry_andAnyChangeReplacesIt() {
        let c = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        put(c, key(), [("X-V", "1")], body: Array("1".utf8), now: 0)
        XCTAssertEqual(put(c, key(), [("X-V", "1")], body: Array("1".utf8), now: 0.5), .stored(shared: false))
        XCTAssertEqual(get(c, now: 2)?.age, 2, "the unchanged answer within a second kept the first entry")
        put(c, key(), [("X-V", "1")], body: Array("2".utf8), now: 2.1)
        XCTAssertEqual(get(c, now: 3).map { String(decoding: $0.body, as: UTF8.self) }, "2", "a changed body within a second")
        put(c, key(), [("X-V", "2")], body: Array("2".utf8), now: 2.2)
        XCTAssertEqual(get(c, now: 3)?.fields.first("x-v"), "2", "a changed field within a second")
        put(c, key(), [("X-V", "2")], body: Array("2".utf8), now: 3.5)
        XCTAssertEqual(get(c, now: 4)?.age, 0, "after a second the same answer is stored again (its age starts again)")
        XCTAssertEqual(put(c, key(), [("X-V", "2")], body: Array("2".utf8), request: CacheRequest(cacheControl: ["no-store"]), now: 3.6),
                       .refused("the request says no-store"))
        // RFC 9111 §5.2.1.5: a request's no-store forbids storing its own answer, not the stored one.
        XCTAssertEqual(get(c, now: 4)?.fields.first("x-v"), "2", "a no-store request removed the stored answer")
    }

    func testDirectives_parseQuotedValuesAndCase() {
        let d = CacheDirectives(["Public, MAX-AGE=30", "no-cache=\"a, b\", stale-if-error=x, s-maxage=abc"])
        XCTAssertTrue(d.isPublic)
        XCTAssertEqual(d.maxAge, 30)
        XCTAssertTrue(d.noCache)
        XCTAssertNil(d.staleIfError, "an invalid stale-if-error is ignored")
        XCTAssertEqual(d.sMaxAge, 0, "an invalid s-maxage is treated as stale (RFC 9111 §4.2.1)")
        XCTAssertFalse(d.noStore)
    }

    // MARK: newer answers and the byte budget

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

/// The offline cache through a running gateway: the upstream killed, then revived.
final class OfflineCacheLiveTests: XCTestCase {
    func testUpstreamKilled_storedGetsAreServedStale_everythingElseIsOffline_thenFreshAgain() throws {
        let h = try Harness { c in
            c.offline.capacity = 1 << 20
            c.probe.interval = 0.2
            c.probe.timeout = 0.2
            c.calls.connectTimeout = 0.2
            c.probe.fall = 2
            c.probe.rise = 1
        }
        defer { h.stop() }
        XCTAssertTrue(h.eventually { h.gateway.reachability.state == .reachable })
        let alice = [("Authorization", "Bearer alice")]
        let fresh = try h.request("GET", "/api/user", headers: alice)
        XCTAssertEqual(fresh.status, 200)
        XCTAssertNil(fresh.header("Cache-Status"))
        XCTAssertEqual(try h.request("GET", "/api/nostore-missing", headers: alice).status, 404, "a 404 is not stored")
        XCTAssertEqual(h.gateway.offlineCache.entries, 1)

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

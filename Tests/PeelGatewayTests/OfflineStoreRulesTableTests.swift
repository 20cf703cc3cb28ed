import Foundation
import PeelIO
import XCTest

@testable import PeelGateway

/// What may remove or replace a stored answer (RFC 9111 §4, §4.3.4, §4.4), as one table both stores
/// pass side by side: Peel's memory and a real redis-server. Each row starts from a stored answer
/// (or none), applies what the forwarder does for newer answers, and reads what is served offline.
final class OfflineStoreRulesTableTests: XCTestCase {
    /// A newer answer, as the forwarder hands it to the store.
    enum Step {
        /// A 2xx unwrapped answer to a GET (`OfflineStore.store`).
        case store(CacheRequest, [(String, String)], body: String, fields: [String: String] = [:])
        /// An answer that is not stored: a 4xx, a 412, a 5xx, a passthrough (`answeredUnstored`).
        case unstored(Int, CacheRequest)
        /// A 304 (`OfflineStore.refresh`).
        case notModified(CacheRequest, [(String, String)], fields: [String: String] = [:])
        /// An unsafe method's success (RFC 9111 §4.4; the forwarder's `invalidateAfterUnsafe`).
        case unsafe
    }

    /// What an offline lookup gets.
    enum Served: Equatable {
        case body(String)
        case notModified
        case miss
    }

    struct Row {
        let name: String
        let steps: [Step]
        let lookup: CacheRequest
        let lookupFields: [String: String]
        let expected: Served
        init(_ name: String, _ steps: [Step], lookup: CacheRequest = CacheRequest(), fields: [String: String] = [:], _ expected: Served) {
            self.name = name
            self.steps = steps
            self.lookup = lookup
            self.lookupFields = fields
            self.expected = expected
        }
    }

    private static let shared = [("Cache-Control", "public, max-age=60"), ("ETag", "\"v1\"")]
    private static func stored(_ pairs: [(String, String)] = shared, fields: [String: String] = [:]) -> Step {
        .store(CacheRequest(), pairs, body: "v1", fields: fields)
    }
    private static let ifMatch = CacheRequest(otherConditions: true)
    private static let noStore = CacheRequest(cacheControl: ["no-store"])

    /// The rules. Every row's first step stores `v1` (public, ETag "v1") for a plain request, unless
    /// the row is about an empty key.
    static let rows: [Row] = [
        // A client's own directives forbid storing its answer, never the stored one (§5.2.1.5).
        Row("a no-store request's storable answer leaves the shared entry",
            [stored(), .store(noStore, shared, body: "v2")], .body("v1")),
        Row("a no-store request's 404 leaves it", [stored(), .unstored(404, noStore)], .body("v1")),
        Row("a no-cache request's unstorable answer leaves it",
            [stored(), .store(CacheRequest(cacheControl: ["no-cache"]), [("Cache-Control", "private")], body: "v2")], .body("v1")),
        Row("a Pragma: no-cache request's 403 leaves it", [stored(), .unstored(403, CacheRequest(pragma: "no-cache"))], .body("v1")),
        // A precondition's answer speaks of the precondition (RFC 9110 §13.2.2).
        Row("an If-Match request answered 412 leaves it", [stored(), .unstored(412, ifMatch)], .body("v1")),
        Row("a conditional request's 404 leaves it", [stored(), .unstored(404, CacheRequest(ifNoneMatch: "\"v1\""))], .body("v1")),
        // A plain request's newer answer that is not stored replaces it (§4): a deleted resource.
        Row("a plain request's 404 drops it", [stored(), .unstored(404, CacheRequest())], .miss),
        Row("a plain request's answer marked no-store drops it",
            [stored(), .store(CacheRequest(), [("Cache-Control", "no-store")], body: "v2")], .miss),
        Row("a plain request's 503 keeps it (stale-if-error)", [stored(), .unstored(503, CacheRequest())], .body("v1")),
        Row("a plain request's newer storable answer replaces it", [stored(), .store(CacheRequest(), shared, body: "v2")], .body("v2")),
        Row("a no-cache request's storable answer replaces it (a reload)",
            [stored(), .store(CacheRequest(cacheControl: ["no-cache"]), shared, body: "v2")], .body("v2")),
        Row("an unsafe method's success drops it (§4.4)", [stored(), .unsafe], .miss),
        // A Vary member that is not a field name: no later request can be shown to match.
        Row("a plain answer that varies on `X-Lang;q=1` is not stored, and drops the older",
            [stored(), .store(CacheRequest(), shared + [("Vary", "X-Lang;q=1")], body: "v2")], .miss),
        Row("a plain answer that varies on `\"X-Lang\"` is not stored",
            [.store(CacheRequest(), shared + [("Vary", "\"X-Lang\"")], body: "v2")], .miss),
        // 304s (§4.3.4): only one that validates the stored answer, for the same variant, touches it.
        Row("a 304 for another Vary value leaves the full entry",
            [stored(shared + [("Vary", "X-Lang")], fields: ["x-lang": "en"]),
             .notModified(CacheRequest(ifNoneMatch: "\"v1\""), [("ETag", "\"v1\""), ("Vary", "X-Lang")], fields: ["x-lang": "fr"])],
            fields: ["x-lang": "en"], .body("v1")),
        Row("a 304 naming another ETag leaves the full entry",
            [stored(), .notModified(CacheRequest(ifNoneMatch: "\"v2\""), [("ETag", "\"v2\"")])], .body("v1")),
        Row("a bare 304 for another If-None-Match leaves the full entry",
            [stored(), .notModified(CacheRequest(ifNoneMatch: "\"v2\""), [])], .body("v1")),
        Row("a no-store request's validating 304 leaves it",
            [stored(), .notModified(CacheRequest(cacheControl: ["no-store"], ifNoneMatch: "\"v1\""),
                                    [("ETag", "\"v1\""), ("Cache-Control", "no-store")])], .body("v1")),
        Row("a validating 304 that says no-store drops it",
            [stored(), .notModified(CacheRequest(ifNoneMatch: "\"v1\""), [("ETag", "\"v1\""), ("Cache-Control", "no-store")])], .miss),
        Row("a validating 304 refreshes it (a conditional request then gets 304)",
            [stored(), .notModified(CacheRequest(ifNoneMatch: "\"v1\""), shared)], lookup: CacheRequest(ifNoneMatch: "\"v1\""), .notModified),
        Row("a 304 with nothing stored keeps its validator for conditional requests",
            [.notModified(CacheRequest(ifNoneMatch: "\"v9\""), [("Cache-Control", "public"), ("ETag", "\"v9\"")])],
            lookup: CacheRequest(ifNoneMatch: "\"v9\""), .notModified),
        Row("... and never a body for a plain one",
            [.notModified(CacheRequest(ifNoneMatch: "\"v9\""), [("Cache-Control", "public"), ("ETag", "\"v9\"")])], .miss),
        Row("a no-store request's 304 keeps nothing",
            [.notModified(CacheRequest(cacheControl: ["no-store"], ifNoneMatch: "\"v9\""), [("Cache-Control", "public"), ("ETag", "\"v9\"")])],
            lookup: CacheRequest(ifNoneMatch: "\"v9\""), .miss),
    ]

    /// An anonymous request's key (its entries are shared by every client), one target per row.
    private static func key(_ row: Int) -> OfflineCacheKey {
        OfflineCacheKey(host: "api.example", target: "/rules/\(row)", acceptLanguage: nil, fieldNames: ["authorization"], user: [nil])
    }

    /// One lookup on the thread `run` gives, waited for (at most 5 s; a lookup that never answers is a miss).
    static func lookup(_ store: OfflineStore, key: OfflineCacheKey, request: CacheRequest, fields: [String: String],
                       on run: (@escaping () -> Void) -> Void) -> Served {
        let result = Locked<Served?>(nil)
        let done = DispatchSemaphore(value: 0)
        run {
            store.lookup(key: key, request: request, requestField: { fields[$0] }) { answer in
                switch answer {
                case .hit(let h): result.withLock { $0 = .body(String(decoding: h.body, as: UTF8.self)) }
                case .notModified: result.withLock { $0 = .notModified }
                case .miss: result.withLock { $0 = .miss }
                }
                done.signal()
            }
        }
        _ = done.wait(timeout: .now() + 5)
        return result.withLock { $0 } ?? .miss
    }

    /// Runs every row against `store`, on the thread `run` gives, and returns what each served.
    private static func play(_ store: OfflineStore, on run: (@escaping () -> Void) -> Void, settle: () -> Void) -> [Served] {
        var served: [Served] = []
        for (i, row) in rows.enumerated() {
            let key = key(i)
            for step in row.steps {
                run {
                    switch step {
                    case .store(let request, let pairs, let body, let fields):
                        store.store(key: key, request: request, hasAuthorization: false, requestField: { fields[$0] }, status: 200,
                                    fields: ResponseHeaders(pairs), contentType: "application/json", body: Array(body.utf8))
                    case .unstored(let status, let request):
                        store.answeredUnstored(key: key, status: status, request: request)
                    case .notModified(let request, let pairs, let fields):
                        store.refresh(key: key, request: request, hasAuthorization: false, requestField: { fields[$0] },
                                      notModified: ResponseHeaders(pairs))
                    case .unsafe:
                        store.invalidate(key: key)
                    }
                }
                settle()
            }
            served.append(lookup(store, key: key, request: row.lookup, fields: row.lookupFields, on: run))
        }
        return served
    }

    func testTheMemoryStore_followsTheTable() {
        let store = MemoryOfflineStore(OfflineCache(capacity: 1 << 20, maxAge: 86_400))
        let served = Self.play(store, on: { $0() }, settle: {})
        for (row, got) in zip(Self.rows, served) { XCTAssertEqual(got, row.expected, "memory: \(row.name)") }
    }

    func testTheRedisStore_followsTheSameTable() throws {
        let redis = try RedisServer()
        defer { redis.stop() }
        let loop = try EventLoop()
        loop.startThread()
        defer {
            loop.stop()
            loop.join()
        }
        let cache = OfflineCache(capacity: 1 << 20, maxAge: 86_400)
        let stats = OfflineStoreStats(endpoint: "redis://127.0.0.1:\(redis.port)/0")
        let store = RedisOfflineStore(loop: loop, cache: cache, stats: stats,
                                      codec: OfflineStoreCodec(secret: Array("a table test secret, 32 bytes...".utf8), maxEntry: 1 << 20),
                                      endpoint: .tcp(host: "127.0.0.1", port: redis.port), database: 0, credentials: nil,
                                      readTimeout: 2, workerIndex: 0)
        let box = UncheckedBox(store)
        let onLoop: (@escaping () -> Void) -> Void = { work in
            let done = DispatchSemaphore(value: 0)
            let job = UncheckedBox(work)
            loop.execute {
                job.value()
                done.signal()
            }
            done.wait()
        }
        onLoop { box.value.start() }
        let deadline = Date().addingTimeInterval(5)
        while stats.connected.load(ordering: .relaxed) == 0 && Date() < deadline { usleep(10_000) }
        XCTAssertEqual(stats.connected.load(ordering: .relaxed), 1, "not connected to redis-server on \(redis.port)")
        // Writes are deferred and a 304's refresh reads before it writes: twice every command sent.
        let settle = {
            for _ in 0..<2 {
                let done = DispatchSemaphore(value: 0)
                loop.execute { box.value.afterPendingCommands { done.signal() } }
                _ = done.wait(timeout: .now() + 5)
            }
        }
        let served = Self.play(store, on: onLoop, settle: settle)
        for (row, got) in zip(Self.rows, served) { XCTAssertEqual(got, row.expected, "redis: \(row.name)") }
        onLoop { box.value.stop() }
    }
}

import Foundation
import PeelIO
import XCTest

@testable import PeelGateway

/// What may remove or replace a shared stale entry, on both stores, beyond the table in
/// OfflineStoreRulesTableTests: answers finishing in the same pass, unservable storable answers.
final class OfflineStoreEdgeTests: XCTestCase {
    private static let shared = [("Cache-Control", "public, max-age=60"), ("ETag", "\"v1\""), ("Vary", "X-Lang")]
    private static let key = OfflineCacheKey(host: "api.example", target: "/r28", acceptLanguage: nil, fieldNames: ["authorization"], user: [nil])

    typealias Served = OfflineStoreRulesTableTests.Served

    /// A Redis store on its own loop against a real redis-server; `run` executes on the loop thread.
    final class RedisRig {
        let redis: RedisServer
        let loop: EventLoop
        let store: RedisOfflineStore
        let stats: OfflineStoreStats

        init() throws {
            redis = try RedisServer()
            loop = try EventLoop()
            loop.startThread()
            stats = OfflineStoreStats(endpoint: "redis://127.0.0.1:\(redis.port)/0")
            store = RedisOfflineStore(loop: loop, cache: OfflineCache(capacity: 1 << 20, maxAge: 86_400), stats: stats,
                                      codec: OfflineStoreCodec(secret: Array("a review test secret of 32 bytes".utf8), maxEntry: 1 << 20),
                                      endpoint: .tcp(host: "127.0.0.1", port: redis.port), database: 0, credentials: nil,
                                      readTimeout: 2, workerIndex: 0)
            run { self.store.start() }
            let deadline = Date().addingTimeInterval(5)
            while stats.connected.load(ordering: .relaxed) == 0 && Date() < deadline { usleep(10_000) }
        }

        func run(_ work: @escaping () -> Void) {
            let done = DispatchSemaphore(value: 0)
            let job = UncheckedBox(work)
            loop.execute {
                job.value()
                done.signal()
            }
            done.wait()
        }

        func settle() {
            for _ in 0..<3 {
                let done = DispatchSemaphore(value: 0)
                let store = UncheckedBox(self.store)
                loop.execute { store.value.afterPendingCommands { done.signal() } }
                _ = done.wait(timeout: .now() + 5)
            }
        }

        func stop() {
            run { self.store.stop() }
            loop.stop()
            loop.join()
            redis.stop()
        }
    }

    private func lookup(_ store: OfflineStore, _ fields: [String: String], run: (@escaping () -> Void) -> Void) -> Served {
        OfflineStoreRulesTableTests.lookup(store, key: Self.key, request: CacheRequest(), fields: fields, on: run)
    }

    private func storeV1(_ store: OfflineStore) {
        store.store(key: Self.key, request: CacheRequest(), hasAuthorization: false, requestField: { $0 == "x-lang" ? "en" : nil },
                    status: 200, fields: ResponseHeaders(Self.shared), contentType: "application/json", body: Array("v1".utf8))
    }

    private func conditionalOtherVariant(_ store: OfflineStore) {
        store.refresh(key: Self.key, request: CacheRequest(ifNoneMatch: "\"v1\""), hasAuthorization: false,
                      requestField: { $0 == "x-lang" ? "fr" : nil }, notModified: ResponseHeaders([("Cache-Control", "public, max-age=60"), ("ETag", "\"v1\""), ("Vary", "X-Lang")]))
    }

    /// Issue 28 item 3, again: the Redis store reads what is stored for a 304 at once, but writes a
    /// 200 on the loop's next pass. When a plain GET's 200 and another user's conditional GET with
    /// another X-Lang (answered 304) finish in the same pass (curl completes several transfers in one
    /// callback), the 304's read finds nothing, and its validator-only value is written over the
    /// shared full entry the 200 just wrote. The memory store decides both under one lock: v1 stays.
    func testA304ForAnotherVariant_inTheSamePassAsTheFull200_doesNotReplaceItOnRedis() throws {
        let memory = MemoryOfflineStore(OfflineCache(capacity: 1 << 20, maxAge: 86_400))
        storeV1(memory)
        conditionalOtherVariant(memory)
        XCTAssertEqual(lookup(memory, ["x-lang": "en"], run: { $0() }), .body("v1"), "memory")

        let rig = try RedisRig()
        defer { rig.stop() }
        let store = UncheckedBox(rig.store)
        rig.run {
            self.storeV1(store.value)
            self.conditionalOtherVariant(store.value)
        }
        rig.settle()
        XCTAssertEqual(lookup(rig.store, ["x-lang": "en"], run: rig.run), .body("v1"),
                       "redis: the shared full entry was replaced by a validator for another variant")
    }

    /// The stores disagree on a storable 200 that may not be served (public, no-cache) to a request
    /// with directives (a reload): the memory store stores it over v1 (so v1 is gone while offline),
    /// the Redis store skips the write (TTL 0) and keeps serving v1. The issue asks for one table
    /// both stores pass; this row is missing from it.
    func testAnUnservableStorable200ToANoCacheRequest_isTreatedAlikeByBothStores() throws {
        let request = CacheRequest(cacheControl: ["no-cache"])
        let newer = ResponseHeaders([("Cache-Control", "public, no-cache"), ("ETag", "\"v2\"")])
        let memory = MemoryOfflineStore(OfflineCache(capacity: 1 << 20, maxAge: 86_400))
        storeV1(memory)
        memory.store(key: Self.key, request: request, hasAuthorization: false, requestField: { $0 == "x-lang" ? "en" : nil },
                     status: 200, fields: newer, contentType: "application/json", body: Array("v2".utf8))
        let fromMemory = lookup(memory, ["x-lang": "en"], run: { $0() })

        let rig = try RedisRig()
        defer { rig.stop() }
        let store = UncheckedBox(rig.store)
        rig.run { self.storeV1(store.value) }
        rig.settle()
        rig.run {
            store.value.store(key: Self.key, request: request, hasAuthorization: false, requestField: { $0 == "x-lang" ? "en" : nil },
                              status: 200, fields: newer, contentType: "application/json", body: Array("v2".utf8))
        }
        rig.settle()
        let fromRedis = lookup(rig.store, ["x-lang": "en"], run: rig.run)
        XCTAssertEqual(fromMemory, fromRedis, "memory serves \(fromMemory), redis serves \(fromRedis)")
    }

}

/// A revoked token's 401 or a deleted resource's 404 drops the user's own stored answer whatever
/// the request carried: a browser revalidates its cached `/me` with If-None-Match, and many API
/// clients send `Cache-Control: no-cache` on every call.
final class RevocationTests: XCTestCase {
    private let key = OfflineCacheKey(host: "api.example", target: "/me", acceptLanguage: nil, fieldNames: ["authorization"],
                                      user: ["Bearer revoked-token"])

    private func servedAfter401(_ request: CacheRequest) -> Bool {
        let store = MemoryOfflineStore(OfflineCache(capacity: 1 << 20, maxAge: 86_400))
        store.store(key: key, request: CacheRequest(), hasAuthorization: true, requestField: { _ in nil }, status: 200,
                    fields: ResponseHeaders([("Cache-Control", "private, max-age=60"), ("ETag", "\"me1\"")]),
                    contentType: "application/json", body: Array("{\"me\":1}".utf8))
        store.answeredUnstored(key: key, status: 401, request: request)
        var hit = false
        store.lookup(key: key, request: CacheRequest(), requestField: { _ in nil }) { if case .hit = $0 { hit = true } }
        return hit
    }

    func testARevokedTokens401_toARevalidatingRequest_dropsTheStaleAnswer() {
        XCTAssertFalse(servedAfter401(CacheRequest(ifNoneMatch: "\"me1\"")), "If-None-Match: the revoked token's /me is still served offline")
    }

    func testARevokedTokens401_toANoCacheRequest_dropsTheStaleAnswer() {
        XCTAssertFalse(servedAfter401(CacheRequest(cacheControl: ["no-cache"])), "no-cache: the revoked token's /me is still served offline")
        XCTAssertFalse(servedAfter401(CacheRequest(pragma: "no-cache")), "Pragma: the revoked token's /me is still served offline")
    }
}

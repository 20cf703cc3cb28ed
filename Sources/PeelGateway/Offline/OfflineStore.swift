import PeelIO
import Synchronization

/// Where one worker keeps and finds its offline answers: Peel's own memory (one cache shared by the
/// workers) or the shared Redis store (`--offline-store`). Loop-thread only.
protocol OfflineStore: AnyObject {
    /// True while the offline cache is on (`--offline-cache` other than 0).
    var isEnabled: Bool { get }
    /// The largest body worth copying for `store`.
    var maxBody: Int { get }
    /// Keeps a successful unwrapped answer to a GET when the rules allow; called once it is answered.
    /// `terms`: the call's generation's max age and override (nil: the settings in force).
    func store(key: OfflineCacheKey, request: CacheRequest, hasAuthorization: Bool, requestField: (String) -> String?,
               status: Int, fields: ResponseHeaders, contentType: String?, body: [UInt8], terms: OfflineCache.Terms?)
    /// Takes a 304 answer to a conditional GET (RFC 9111 §4.3.4), by the call's generation's `terms`.
    func refresh(key: OfflineCacheKey, request: CacheRequest, hasAuthorization: Bool, requestField: (String) -> String?,
                 notModified fields: ResponseHeaders, terms: OfflineCache.Terms?)
    /// What may be served while offline, by the call's generation's `terms`; `done` runs exactly
    /// once on the loop thread, at once or within the store's read bound. `requestField` may be
    /// asked until then.
    func lookup(key: OfflineCacheKey, request: CacheRequest, requestField: @escaping (String) -> String?, terms: OfflineCache.Terms?,
                _ done: @escaping (OfflineCacheAnswer) -> Void)
    /// Drops the entry for `key` (a newer answer that may not be stored; RFC 9111 §4.4).
    func invalidate(key: OfflineCacheKey)
}

extension OfflineStore {
    /// `store` by the settings in force.
    func store(key: OfflineCacheKey, request: CacheRequest, hasAuthorization: Bool, requestField: (String) -> String?,
               status: Int, fields: ResponseHeaders, contentType: String?, body: [UInt8]) {
        store(key: key, request: request, hasAuthorization: hasAuthorization, requestField: requestField, status: status,
              fields: fields, contentType: contentType, body: body, terms: nil)
    }

    /// `refresh` by the settings in force.
    func refresh(key: OfflineCacheKey, request: CacheRequest, hasAuthorization: Bool, requestField: (String) -> String?,
                 notModified fields: ResponseHeaders) {
        refresh(key: key, request: request, hasAuthorization: hasAuthorization, requestField: requestField, notModified: fields,
                terms: nil)
    }

    /// `lookup` by the settings in force.
    func lookup(key: OfflineCacheKey, request: CacheRequest, requestField: @escaping (String) -> String?,
                _ done: @escaping (OfflineCacheAnswer) -> Void) {
        lookup(key: key, request: request, requestField: requestField, terms: nil, done)
    }

    /// A newer answer to the GET or HEAD keyed `key` that is not stored: drops the stored entry when
    /// `OfflineCacheRules.unstoredAnswerDrops` says it speaks for the resource (RFC 9111 §4).
    func answeredUnstored(key: OfflineCacheKey, status: Int, request: CacheRequest, revokes: Bool = false) {
        if OfflineCacheRules.unstoredAnswerDrops(status: status, request: request, shared: key.isShared, revokes: revokes) {
            invalidate(key: key)
        }
    }
}

/// The in-memory cache as a worker's store: answers at once.
final class MemoryOfflineStore: OfflineStore {
    private let cache: OfflineCache

    init(_ cache: OfflineCache) { self.cache = cache }

    var isEnabled: Bool { cache.isEnabled }
    var maxBody: Int { cache.capacity }

    func store(key: OfflineCacheKey, request: CacheRequest, hasAuthorization: Bool, requestField: (String) -> String?,
               status: Int, fields: ResponseHeaders, contentType: String?, body: [UInt8], terms: OfflineCache.Terms?) {
        cache.store(key: key, request: request, hasAuthorization: hasAuthorization, requestField: requestField, status: status,
                    fields: fields, contentType: contentType, body: body, terms: terms, now: monotonicNow())
    }

    func refresh(key: OfflineCacheKey, request: CacheRequest, hasAuthorization: Bool, requestField: (String) -> String?,
                 notModified fields: ResponseHeaders, terms: OfflineCache.Terms?) {
        cache.refresh(key: key, request: request, hasAuthorization: hasAuthorization, requestField: requestField,
                      notModified: fields, terms: terms, now: monotonicNow())
    }

    func lookup(key: OfflineCacheKey, request: CacheRequest, requestField: @escaping (String) -> String?, terms: OfflineCache.Terms?,
                _ done: @escaping (OfflineCacheAnswer) -> Void) {
        done(cache.lookup(key: key, request: request, requestField: requestField, terms: terms, now: monotonicNow()))
    }

    func invalidate(key: OfflineCacheKey) { cache.invalidate(key: key) }
}

/// The shared store's counters, all workers: written by the workers' loops, read by /metrics and
/// /status.
public final class OfflineStoreStats: Sendable {
    /// `redis://HOST:PORT/DB` or `unix:///PATH`, as configured (never a secret).
    public let endpoint: String
    /// Reads answered from a stored value (a whole answer or a 304).
    public let hits = Atomic<Int>(0)
    /// Reads that found nothing servable (no value, or one the rules would not serve).
    public let misses = Atomic<Int>(0)
    /// Reads that got no reply within `--offline-store-timeout`.
    public let timeouts = Atomic<Int>(0)
    /// Reads that failed: not connected, an error reply, the connection lost.
    public let readErrors = Atomic<Int>(0)
    /// Values never served because they did not parse, had another version or were too large.
    public let rejectedGarbage = Atomic<Int>(0)
    /// See `rejectedGarbage`.
    public let rejectedVersion = Atomic<Int>(0)
    /// See `rejectedGarbage`.
    public let rejectedTooLarge = Atomic<Int>(0)
    /// Writes the store took.
    public let writesStored = Atomic<Int>(0)
    /// Writes Redis refused with an error reply (`OOM` when maxmemory is reached without eviction).
    public let writesRefused = Atomic<Int>(0)
    /// Writes that got no reply: the connection ended first.
    public let writesFailed = Atomic<Int>(0)
    /// Writes dropped before they were sent: the worker's outstanding-write bound was reached.
    public let writesDropped = Atomic<Int>(0)
    /// Writes not attempted because the worker's connection was down.
    public let writesUnconnected = Atomic<Int>(0)
    /// Answers not written because their value is over `--offline-store-max-entry`.
    public let writesTooLarge = Atomic<Int>(0)
    /// Writes skipped because the same answer was written recently and has not changed.
    public let writesUnchanged = Atomic<Int>(0)
    /// Workers connected now.
    public let connected = Atomic<Int>(0)
    /// Connection attempts that failed, and connections lost.
    public let connectFailures = Atomic<Int>(0)
    /// Connections the server refused for credentials (`NOAUTH`, `WRONGPASS`), counted apart.
    public let authFailures = Atomic<Int>(0)
    /// True while the last connection failure of a worker not connected now was an authentication one.
    public let authFailed = Atomic<Bool>(false)
    /// Read latency (request sent to reply, or to the timeout).
    let latency = Locked(Histogram())
    /// The last connection failure, for /status.
    let lastError = Locked<(String, Double)?>(nil)

    /// The counters at one moment.
    struct Snapshot {
        var hits = 0, misses = 0, timeouts = 0, readErrors = 0, garbage = 0, version = 0, tooLarge = 0
        var stored = 0, refused = 0, failed = 0, dropped = 0, unconnected = 0, writeTooLarge = 0, unchanged = 0
        var connected = 0, connectFailures = 0, authFailures = 0
        var rejected: Int { garbage + version + tooLarge }
    }

    /// Reads every counter.
    func snapshot() -> Snapshot {
        Snapshot(hits: hits.load(ordering: .relaxed), misses: misses.load(ordering: .relaxed), timeouts: timeouts.load(ordering: .relaxed),
                 readErrors: readErrors.load(ordering: .relaxed), garbage: rejectedGarbage.load(ordering: .relaxed),
                 version: rejectedVersion.load(ordering: .relaxed), tooLarge: rejectedTooLarge.load(ordering: .relaxed),
                 stored: writesStored.load(ordering: .relaxed), refused: writesRefused.load(ordering: .relaxed),
                 failed: writesFailed.load(ordering: .relaxed), dropped: writesDropped.load(ordering: .relaxed),
                 unconnected: writesUnconnected.load(ordering: .relaxed), writeTooLarge: writesTooLarge.load(ordering: .relaxed),
                 unchanged: writesUnchanged.load(ordering: .relaxed), connected: connected.load(ordering: .relaxed),
                 connectFailures: connectFailures.load(ordering: .relaxed), authFailures: authFailures.load(ordering: .relaxed))
    }

    /// Counters for a store at `endpoint`.
    public init(endpoint: String) { self.endpoint = endpoint }

    func count(_ rejection: OfflineStoreRejection) {
        switch rejection {
        case .garbage: rejectedGarbage.add(1, ordering: .relaxed)
        case .version: rejectedVersion.add(1, ordering: .relaxed)
        case .tooLarge: rejectedTooLarge.add(1, ordering: .relaxed)
        }
    }
}

import PeelIO
import Synchronization

/// What a stored answer is found by: the target and the request fields that say whose answer it is
/// (issue 13: one user is never served another's data). Fields the answer's `Vary` names are
/// matched separately, since they are known only once an answer arrived.
public struct OfflineCacheKey: Hashable, Sendable {
    /// Request target as sent (path and query).
    public var target: String
    /// The request's `Authorization`, if any.
    public var authorization: String?
    /// The request's `Cookie` fields, joined with `; ` (RFC 9110 §5.3 does not apply to Cookie:
    /// RFC 6265 §5.4 joins them so), if any.
    public var cookie: String?
    /// The request's `Accept-Language`, if any.
    public var acceptLanguage: String?

    /// Creates a key.
    public init(target: String, authorization: String?, cookie: String?, acceptLanguage: String?) {
        self.target = target
        self.authorization = authorization
        self.cookie = cookie
        self.acceptLanguage = acceptLanguage
    }

    var size: Int {
        target.utf8.count + (authorization?.utf8.count ?? 0) + (cookie?.utf8.count ?? 0) + (acceptLanguage?.utf8.count ?? 0)
    }
}

/// A stored answer as served while offline.
public struct OfflineCacheHit: Sendable {
    /// Status as first answered.
    public var status: Int
    /// Fields as first answered (Peel's `Content-Type` included), without `Age`.
    public var fields: [(String, String)]
    /// The unwrapped body.
    public var body: [UInt8]
    /// Seconds since the answer was generated (RFC 9111 §4.2.3: the upstream's own `Age`, plus
    /// the time it was stored here), whole seconds for the `Age` field (§5.1).
    public var age: Int
}

/// Stale answers for while the upstream is unreachable (issue 13, `--offline-cache`): the last
/// successful unwrapped answer to each GET, LRU within a byte budget, for at most `maxAge`.
///
/// One cache shared by all workers behind one lock, not one per worker: SO_REUSEPORT spreads an
/// app's connections over the workers by address hash, so per-worker caches would miss whenever
/// the app's next connection lands elsewhere, and would split SIZE between copies of the same
/// answers. The lock is taken to store a successful GET (rare next to the copy of its body) and to
/// look one up only while offline, when no upstream call is made at all.
public final class OfflineCache: Sendable {
    /// Byte budget: bodies, fields and keys of all entries.
    public let capacity: Int
    /// Oldest an entry may be when served, in seconds.
    public let maxAge: Double
    private let state: Locked<LRU>
    private let hitCount = Atomic<Int>(0)

    /// Creates an empty cache.
    public init(capacity: Int, maxAge: Double) {
        self.capacity = capacity
        self.maxAge = maxAge
        state = Locked(LRU())
    }

    /// Entries stored now.
    public var entries: Int { state.withLock { $0.map.count } }
    /// Bytes stored now.
    public var bytes: Int { state.withLock { $0.bytes } }
    /// Offline answers served from the cache so far.
    public var hits: Int { hitCount.load(ordering: .relaxed) }

    /// Stores a successful unwrapped answer when it may be stored; returns whether it was.
    /// `requestField` gives the request's value of a lowercased field name (for `Vary`).
    @discardableResult
    public func store(method: String, key: OfflineCacheKey, requestField: (String) -> String?, status: Int,
                      fields: [(String, String)], body: [UInt8], now: Double) -> Bool {
        // Only GET answers are replayed (HEAD asks for the same answer, without its body).
        guard method == "GET" || method == "HEAD", (200...299).contains(status) else { return false }
        var vary: [String] = []
        var upstreamAge = 0
        var kept: [(String, String)] = []
        kept.reserveCapacity(fields.count)
        for (name, value) in fields {
            switch name.lowercased() {
            case "cache-control":
                // RFC 9111 §5.2.2.5: no-store forbids any cache to keep it, ours included.
                if Self.directives(value).contains("no-store") { return false }
            case "vary":
                for v in Self.directives(value) {
                    // RFC 9111 §4.1: `Vary: *` never matches a later request.
                    if v == "*" { return false }
                    vary.append(v)
                }
            case "age":
                // RFC 9111 §5.1: the age the upstream's own caches gave it; ours is added on top.
                upstreamAge = Int(value.trimmingCharacters(in: .whitespaces)) ?? 0
                continue
            default: break
            }
            kept.append((name, value))
        }
        let varyValues = vary.map { requestField($0) }
        let size = key.size + body.count + kept.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count + 4 } + 64
        guard size <= capacity else { return false }
        let entry = Entry(key: key, vary: vary, varyValues: varyValues, status: status, fields: kept, body: body,
                          storedAt: now - Double(upstreamAge), size: size)
        state.withLock { lru in
            lru.insert(entry)
            while lru.bytes > capacity, let oldest = lru.oldest { lru.remove(oldest) }
        }
        return true
    }

    /// The stored answer for this request while offline, if one is fresh enough and matches.
    public func lookup(method: String, key: OfflineCacheKey, requestField: (String) -> String?, now: Double) -> OfflineCacheHit? {
        // POST, PUT, PATCH and DELETE change things: answering one from a cache would claim a change
        // that never happened.
        guard method == "GET" || method == "HEAD" else { return nil }
        let found: Entry? = state.withLock { lru in
            guard let e = lru.map[key] else { return nil }
            if now - e.storedAt > maxAge {
                lru.remove(e)
                return nil
            }
            lru.touch(e)
            return e
        }
        guard let e = found else { return nil }
        // RFC 9111 §4.1: a stored answer is used only when the fields its Vary names match.
        for (name, value) in zip(e.vary, e.varyValues) where requestField(name) != value { return nil }
        hitCount.add(1, ordering: .relaxed)
        return OfflineCacheHit(status: e.status, fields: e.fields, body: e.body, age: max(0, Int(now - e.storedAt)))
    }

    /// Comma-separated list members, lowercased, without parameters (`max-age=0` → `max-age`).
    static func directives(_ value: String) -> [String] {
        value.split(separator: ",").compactMap { member in
            let name = member.split(separator: "=", maxSplits: 1).first.map { trimOWS($0).lowercased() } ?? ""
            return name.isEmpty ? nil : name
        }
    }

    final class Entry {
        let key: OfflineCacheKey
        let vary: [String]
        let varyValues: [String?]
        let status: Int
        let fields: [(String, String)]
        let body: [UInt8]
        let storedAt: Double
        let size: Int
        var newer: Entry?
        weak var older: Entry?

        init(key: OfflineCacheKey, vary: [String], varyValues: [String?], status: Int, fields: [(String, String)],
             body: [UInt8], storedAt: Double, size: Int) {
            self.key = key
            self.vary = vary
            self.varyValues = varyValues
            self.status = status
            self.fields = fields
            self.body = body
            self.storedAt = storedAt
            self.size = size
        }
    }

    /// Entries by key, and a recency list from `oldest` to `newest` (strong links toward newer).
    struct LRU {
        var map: [OfflineCacheKey: Entry] = [:]
        var bytes = 0
        var oldest: Entry?
        var newest: Entry?

        mutating func insert(_ e: Entry) {
            if let old = map[e.key] { remove(old) }
            map[e.key] = e
            bytes += e.size
            append(e)
        }

        mutating func touch(_ e: Entry) {
            guard newest !== e else { return }
            unlink(e)
            append(e)
        }

        mutating func remove(_ e: Entry) {
            guard map[e.key] === e else { return }
            map[e.key] = nil
            bytes -= e.size
            unlink(e)
        }

        private mutating func append(_ e: Entry) {
            e.older = newest
            e.newer = nil
            newest?.newer = e
            newest = e
            if oldest == nil { oldest = e }
        }

        private mutating func unlink(_ e: Entry) {
            let older = e.older, newer = e.newer
            if let older { older.newer = newer } else { oldest = newer }
            if let newer { newer.older = older } else { newest = older }
            e.older = nil
            e.newer = nil
        }
    }
}

import PeelIO
import Synchronization

/// What a stored answer is found by (issue 17): the Host as forwarded, the target, Accept-Language,
/// and the values of the request fields that say whose answer it is (`--offline-cache-key`,
/// Authorization and Cookie by default). Fields the answer's `Vary` names are matched separately,
/// since they are known only once an answer arrived.
public struct OfflineCacheKey: Hashable, Sendable {
    /// The request's Host, lowercased: two tenants behind one Peel never share an entry.
    public var host: String
    /// Request target as sent (path and query).
    public var target: String
    /// The request's `Accept-Language`, if any.
    public var acceptLanguage: String?
    /// The names of the key fields, in order (a reload that changes them changes every key).
    public var fieldNames: [String]
    /// Each key field's value (all of its fields joined), nil where the request had none.
    public var user: [String?]

    /// Creates a key.
    public init(host: String, target: String, acceptLanguage: String?, fieldNames: [String], user: [String?]) {
        self.host = host
        self.target = target
        self.acceptLanguage = acceptLanguage
        self.fieldNames = fieldNames
        self.user = user
    }

    /// True when the request carried none of the key fields: an entry for it would be shared by
    /// everyone who asks for the same target.
    public var isShared: Bool { user.allSatisfy { $0 == nil } }

    var size: Int {
        host.utf8.count + target.utf8.count + (acceptLanguage?.utf8.count ?? 0) + user.reduce(0) { $0 + ($1?.utf8.count ?? 0) }
    }
}

/// A stored answer as served while offline.
public struct OfflineCacheHit: Sendable {
    /// Status as first answered (304 for an answer to a conditional request whose validator matched).
    public var status: Int
    /// The upstream's fields as stored (never Set-Cookie, never Age).
    public var fields: ResponseHeaders
    /// Peel's Content-Type for the unwrapped body, nil where there is no body (204).
    public var contentType: String?
    /// The unwrapped body; empty for a 304.
    public var body: [UInt8]
    /// The stored body's length (a 304's too: whether a 200 would have been compressed).
    public var storedBodyCount: Int = 0
    /// Seconds since the answer was generated (RFC 9111 §4.2.3: the upstream's own valid `Age`,
    /// plus the time it was stored here), whole seconds for the `Age` field (§5.1).
    public var age: Int
}

/// What the cache has for a request while the upstream is unreachable.
public enum OfflineCacheAnswer: Sendable {
    /// A stored answer to send.
    case hit(OfflineCacheHit)
    /// The request's validator matches the stored one: 304 (RFC 9110 §15.4.5), the app's own copy
    /// is current. The hit's body is empty and its status 304.
    case notModified(OfflineCacheHit)
    /// Nothing that may be served; `why` says which rule, for the tests and the log.
    case miss(String)
}

/// Whether an answer was stored, and if not, which rule said no.
public enum OfflineCacheStore: Equatable, Sendable {
    /// Stored as a per-user entry, or as one shared by every requester of the target.
    case stored(shared: Bool)
    /// Not stored; the rule that said no.
    case refused(String)
}

/// Stale answers for while the upstream is unreachable (`--offline-cache`): a per-user cache that
/// follows RFC 9111 and RFC 5861 for what may be stored and served stale. LRU within a byte budget,
/// for at most `maxAge`. The rules and the RFC sections are in the README's offline-cache table.
///
/// One cache shared by all workers behind one lock, not one per worker: SO_REUSEPORT spreads an
/// app's connections over the workers by address hash, so per-worker caches would miss whenever
/// the app's next connection lands elsewhere, and would split SIZE between copies of the same
/// answers. The lock is taken to store a successful GET (rare next to the copy of its body) and to
/// look one up only while offline, when no upstream call is made at all.
public final class OfflineCache: Sendable {
    /// What a reload may change.
    public struct Settings: Sendable, Equatable {
        /// Byte budget: bodies, fields and keys of all entries; 0 turns the cache off.
        public var capacity: Int
        /// Oldest an entry may be when served, in seconds.
        public var maxAge: Double
        /// `--offline-cache-override`: the upstream's no-cache/must-revalidate family is ignored.
        public var override: Bool
        /// Creates settings.
        public init(capacity: Int, maxAge: Double, override: Bool = false) {
            self.capacity = capacity
            self.maxAge = maxAge
            self.override = override
        }
    }

    private let state: Locked<LRU>
    private let enabled: Atomic<Bool>
    private let hitCount = Atomic<Int>(0)
    private let notModifiedCount = Atomic<Int>(0)
    private let missCount = Atomic<Int>(0)

    /// Creates an empty cache.
    public init(capacity: Int, maxAge: Double, override: Bool = false) {
        let settings = Settings(capacity: capacity, maxAge: maxAge, override: override)
        state = Locked(LRU(settings: settings))
        enabled = Atomic(capacity > 0)
    }

    /// True while the cache is on (`capacity > 0`): one relaxed load, on every request.
    public var isEnabled: Bool { enabled.load(ordering: .relaxed) }
    /// The settings in force.
    public var settings: Settings { state.withLock { $0.settings } }
    /// Byte budget now.
    public var capacity: Int { settings.capacity }
    /// Entries stored now.
    public var entries: Int { state.withLock { $0.map.count } }
    /// Bytes stored now.
    public var bytes: Int { state.withLock { $0.bytes } }
    /// Offline answers served whole from the cache so far.
    public var hits: Int { hitCount.load(ordering: .relaxed) }
    /// Offline conditional requests answered 304 from the cache so far.
    public var notModifiedHits: Int { notModifiedCount.load(ordering: .relaxed) }
    /// Offline GETs the cache had nothing servable for.
    public var misses: Int { missCount.load(ordering: .relaxed) }

    /// Applies reloaded settings: capacity 0 drops every entry at once (an operator turning the
    /// cache off after a privacy incident), a smaller one evicts down to it. `dropAll` empties the
    /// cache whatever the settings (the key fields changed).
    public func configure(_ new: Settings, dropAll: Bool = false) {
        state.withLock { lru in
            lru.settings = new
            if dropAll || new.capacity == 0 { lru.removeAll() }
            while lru.bytes > new.capacity, let oldest = lru.oldest { lru.remove(oldest) }
        }
        enabled.store(new.capacity > 0, ordering: .relaxed)
    }

    /// Stores a successful unwrapped answer to a GET when RFC 9111 and the key rules allow it.
    /// `fields` are the upstream's; `contentType` is Peel's for the body (nil for a 204).
    /// `requestField` gives the request's value of a lowercased field name (for `Vary`).
    @discardableResult
    public func store(key: OfflineCacheKey, request: CacheRequest, hasAuthorization: Bool, requestField: (String) -> String?,
                      status: Int, fields: ResponseHeaders, contentType: String?, body: [UInt8], now: Double) -> OfflineCacheStore {
        // A 206 is part of a representation (RFC 9111 §3.3): never replayed as the whole of it.
        guard (200...299).contains(status), status != 206 else { return refuse(key, "status \(status)") }
        let answer: Stored
        switch Self.storable(key: key, request: request, hasAuthorization: hasAuthorization, fields: fields) {
        case .failure(let why): return refuse(key, why.text)
        case .success(let s): answer = s
        }
        return insert(Entry(key: key, vary: answer.vary, varyValues: answer.vary.map(requestField), status: status,
                            fields: answer.kept, contentType: contentType, body: body, storedAt: now - Double(answer.age),
                            directives: answer.directives, etag: answer.etag, lastModified: answer.lastModified), now: now)
    }

    /// Takes a 304 answer to a conditional GET (RFC 9111 §4.3.4): a stored answer it validates has
    /// its age start again and its fields updated; where nothing is stored, the validator alone is
    /// kept, so that while offline the same user's conditional request with it still gets 304 (their
    /// app's own copy is current). A 304 for another validator than the stored one replaces it with
    /// that validator; one whose Vary values differ leaves the stored answer alone.
    @discardableResult
    public func refresh(key: OfflineCacheKey, request: CacheRequest, hasAuthorization: Bool, requestField: (String) -> String?,
                        notModified fields: ResponseHeaders, now: Double) -> OfflineCacheStore {
        let answer: Stored
        switch Self.storable(key: key, request: request, hasAuthorization: hasAuthorization, fields: fields) {
        case .failure(let why): return refuse(key, why.text)
        case .success(let s): answer = s
        }
        let varyValues = answer.vary.map(requestField)
        // One critical section from reading the stored answer to replacing it, so a newer 200 that
        // lands meanwhile is not overwritten by an entry merged from the older one.
        return state.withLock { lru in
            let entry: Entry
            if let e = lru.map[key], e.status != 304 {
                guard zip(e.vary, e.varyValues).allSatisfy({ requestField($0.0) == $0.1 }) else {
                    return .refused("the stored answer is another variant")
                }
                // The 304's own ETag names what it validates; without one, the request's If-None-Match does.
                let validated = answer.etag.map { tag in e.etag.map { opaqueTag($0) == opaqueTag(tag) } ?? false }
                    ?? (request.ifNoneMatch.map { inm in e.etag.map { ifNoneMatchMatches(inm, etag: $0) } ?? false } ?? true)
                if validated {
                    // §3.2: the 304's fields replace the stored ones of the same name.
                    let names = Set(answer.kept.pairs.map { $0.0.lowercased() })
                    let merged = ResponseHeaders(e.fields.pairs.filter { !names.contains($0.0.lowercased()) } + answer.kept.pairs)
                    let directives = CacheDirectives(merged.pairs.filter { $0.0.lowercased() == "cache-control" }.map { $0.1 })
                    if directives.noStore {
                        lru.remove(e)
                        return .refused("the answer says no-store")
                    }
                    entry = Entry(key: key, vary: e.vary, varyValues: e.varyValues, status: e.status, fields: merged,
                                  contentType: e.contentType, body: e.body, storedAt: now - Double(answer.age),
                                  directives: directives, etag: e.etag, lastModified: answer.lastModified ?? e.lastModified)
                } else {
                    guard answer.etag != nil || answer.lastModified != nil else { return .refused("no validator in the 304") }
                    entry = Entry(key: key, vary: answer.vary, varyValues: varyValues, status: 304, fields: answer.kept,
                                  contentType: nil, body: [], storedAt: now - Double(answer.age), directives: answer.directives,
                                  etag: answer.etag, lastModified: answer.lastModified)
                }
            } else {
                guard answer.etag != nil || answer.lastModified != nil else { return .refused("no validator in the 304") }
                entry = Entry(key: key, vary: answer.vary, varyValues: varyValues, status: 304, fields: answer.kept,
                              contentType: nil, body: [], storedAt: now - Double(answer.age), directives: answer.directives,
                              etag: answer.etag, lastModified: answer.lastModified)
            }
            return lru.insertBounded(entry, now: now)
        }
    }

    /// Drops the entry for `key`: a newer answer to its request that may not be stored (a 4xx, one
    /// too large, one marked no-store) must not leave the older one servable (review of issue 17:
    /// a revoked token's stale `/me`, a deleted resource coming back).
    public func invalidate(key: OfflineCacheKey) {
        state.withLock { lru in if let e = lru.map[key] { lru.remove(e) } }
    }

    /// RFC 9111 §4.4: a non-error answer to an unsafe method (POST, PUT, PATCH, DELETE) invalidates
    /// what is stored for its target, for every user, and for the same-host URLs its Location and
    /// Content-Location name (`targets`).
    public func invalidate(host: String, targets: [String]) {
        state.withLock { lru in
            for target in targets {
                guard let keys = lru.byResource[OfflineCache.resource(host, target)] else { continue }
                for k in keys { if let e = lru.map[k] { lru.remove(e) } }
            }
        }
    }

    /// The index of entries by host and target.
    static func resource(_ host: String, _ target: String) -> String { host + " " + target }

    private func refuse(_ key: OfflineCacheKey, _ why: String) -> OfflineCacheStore {
        invalidate(key: key)
        return .refused(why)
    }

    /// What may be served for a GET or HEAD while offline.
    public func lookup(key: OfflineCacheKey, request: CacheRequest, requestField: (String) -> String?, now: Double) -> OfflineCacheAnswer {
        let result = decide(key: key, request: request, requestField: requestField, now: now)
        switch result {
        case .hit: hitCount.add(1, ordering: .relaxed)
        case .notModified: notModifiedCount.add(1, ordering: .relaxed)
        case .miss: missCount.add(1, ordering: .relaxed)
        }
        return result
    }

    private func decide(key: OfflineCacheKey, request: CacheRequest, requestField: (String) -> String?, now: Double) -> OfflineCacheAnswer {
        // RFC 9111 §5.2.1.4/§5.2.1.5/§5.2.1.1: the client asked for an answer from the origin.
        if request.refusesStored { return .miss("the request asks for a fresh answer") }
        let found: (Entry, Settings)? = state.withLock { lru in
            guard let e = lru.map[key] else { return nil }
            if now - e.storedAt > lru.settings.maxAge {
                lru.remove(e)
                return nil
            }
            lru.touch(e)
            return (e, lru.settings)
        }
        guard let (e, settings) = found else { return .miss("nothing stored") }
        // RFC 9111 §4.1: a stored answer is used only when the fields its Vary names match.
        for (name, value) in zip(e.vary, e.varyValues) where requestField(name) != value { return .miss("Vary differs") }
        let age = max(0, now - e.storedAt)
        let d = e.directives
        // §5.2.2.4: no-cache answers are never used without the origin's word, fresh or not.
        if d.noCache && !settings.override { return .miss("no-cache") }
        // §4.2.1: s-maxage (we are a shared cache), else max-age; Expires is not read, so an answer
        // with only Expires counts as stale at once (the stricter reading, never the looser).
        let lifetime = Double(d.sMaxAge ?? d.maxAge ?? 0)
        let fresh = age < lifetime
        if !fresh {
            // §4.2.4 and §5.2.2.2/§5.2.2.8/§5.2.2.10: these may never be served stale, even disconnected.
            if (d.mustRevalidate || d.proxyRevalidate || d.sMaxAge != nil) && !settings.override {
                return .miss("must be revalidated once stale")
            }
            // RFC 5861 §4: stale-if-error bounds how long past its lifetime it may be used, from
            // either side; with both, the tighter one.
            let bounds = [d.staleIfError, request.directives.staleIfError].compactMap { $0 }
            if let bound = bounds.min(), age > lifetime + Double(bound) { return .miss("past stale-if-error") }
            // §5.2.1.2: max-stale=N says how stale the client will take it.
            if let limit = request.directives.maxStale.limit, age - lifetime > Double(limit) { return .miss("past max-stale") }
        }
        // §5.2.1.1: max-age=N asks for an answer no older than N (unless the client takes stale ones).
        if let maxAge = request.directives.maxAge, !request.directives.maxStale.present,
           request.directives.staleIfError == nil, age > Double(maxAge) {
            return .miss("older than the request's max-age")
        }
        let hit = OfflineCacheHit(status: e.status, fields: e.fields, contentType: e.contentType, body: e.body,
                                  storedBodyCount: e.body.count, age: Int(age))
        // RFC 9110 §13.1.2, §13.1.3: If-None-Match takes precedence; If-Modified-Since is compared
        // exactly with the stored Last-Modified (nginx's `if_modified_since exact`).
        var matches = false
        if let inm = request.ifNoneMatch {
            // `*` matches any current representation, with or without an ETag (RFC 9110 §13.1.2).
            if trimOWS(inm) == "*" { matches = true } else if let etag = e.etag { matches = ifNoneMatchMatches(inm, etag: etag) }
        } else if let ims = request.ifModifiedSince, let lm = e.lastModified {
            matches = trimOWS(ims) == trimOWS(lm)
        }
        if matches {
            var nm = hit
            nm.status = 304
            nm.body = []
            return .notModified(nm)
        }
        // A validator-only entry (from a 304) has no body to send.
        if e.status == 304 { return .miss("only a validator is stored") }
        return .hit(hit)
    }

    /// What a storable answer keeps.
    private struct Stored {
        var kept: ResponseHeaders
        var vary: [String]
        var directives: CacheDirectives
        var age: Int
        var etag: String?
        var lastModified: String?
    }

    private struct Refusal: Error {
        let text: String
        init(_ text: String) { self.text = text }
    }

    /// RFC 9111 §3 and the key rules of issue 17: whether an answer may be stored, and what of it.
    private static func storable(key: OfflineCacheKey, request: CacheRequest, hasAuthorization: Bool,
                                 fields: ResponseHeaders) -> Result<Stored, Refusal> {
        // §5.2.1.5 and §5.2.2.5: no-store on either side forbids any cache to keep it, ours included.
        if request.directives.noStore { return .failure(Refusal("the request says no-store")) }
        var cacheControl: [String] = []
        var vary: [String] = []
        var age = 0
        var etag: String?
        var lastModified: String?
        var setsCookie = false
        var kept: [(String, String)] = []
        for (name, value) in fields.pairs {
            switch name.lowercased() {
            case "cache-control": cacheControl.append(value)
            case "vary":
                for v in CacheDirectives.members(value).map({ $0.0 }) {
                    // §4.1: `Vary: *` never matches a later request.
                    if v == "*" { return .failure(Refusal("Vary: *")) }
                    // Peel asks the upstream for codings itself and stores the decoded body, so the
                    // client's Accept-Encoding chooses nothing stored here.
                    if v == "accept-encoding" { continue }
                    if !vary.contains(v) { vary.append(v) }
                }
            case "age":
                // §5.1: a non-negative integer, else ignored (an `Age: -100000` once made an entry
                // outlive --offline-cache-max-age). Ours is added on top when served.
                age = CacheDirectives.seconds(trimOWS(value)) ?? 0
                continue
            case "set-cookie":
                // Never replayed from any entry: a session cookie is one response's, not a resource's.
                setsCookie = true
                continue
            case "etag": etag = trimOWS(value)
            case "last-modified": lastModified = trimOWS(value)
            default: break
            }
            kept.append((name, value))
        }
        let d = CacheDirectives(cacheControl)
        if d.noStore { return .failure(Refusal("the answer says no-store")) }
        if key.isShared {
            // Issue 17: an app that authenticates with a field Peel was not told about must never
            // share an entry, so without a key field only what the upstream marked shareable is kept.
            if d.isPrivate { return .failure(Refusal("private answer to a request without a key field")) }
            guard d.isPublic || d.sMaxAge != nil else { return .failure(Refusal("not marked public, and no key field")) }
            // An answer that sets a cookie is one user's (a session, a login), whatever it says.
            if setsCookie { return .failure(Refusal("a shared answer that sets a cookie")) }
            // §3.5 (a shared cache keeps an answer to a request with Authorization only when the
            // upstream allowed it with public or s-maxage) holds by the guard above; must-revalidate
            // alone, which §3.5 also allows, never reaches here.
        }
        return .success(Stored(kept: ResponseHeaders(kept), vary: vary, directives: d, age: age, etag: etag, lastModified: lastModified))
    }

    private func insert(_ entry: Entry, now: Double) -> OfflineCacheStore {
        state.withLock { $0.insertBounded(entry, now: now) }
    }

    final class Entry {
        let key: OfflineCacheKey
        let vary: [String]
        let varyValues: [String?]
        let status: Int
        let fields: ResponseHeaders
        let contentType: String?
        let body: [UInt8]
        let storedAt: Double
        let directives: CacheDirectives
        let etag: String?
        let lastModified: String?
        let size: Int
        var newer: Entry?
        weak var older: Entry?

        init(key: OfflineCacheKey, vary: [String], varyValues: [String?], status: Int, fields: ResponseHeaders,
             contentType: String?, body: [UInt8], storedAt: Double, directives: CacheDirectives, etag: String?,
             lastModified: String?) {
            self.key = key
            self.vary = vary
            self.varyValues = varyValues
            self.status = status
            self.fields = fields
            self.contentType = contentType
            self.body = body
            self.storedAt = storedAt
            self.directives = directives
            self.etag = etag
            self.lastModified = lastModified
            // Everything the entry holds counts, the request values its Vary names too (review of
            // issue 17: 60 KB Accept values on 200 entries held 12 MB in a 1 MiB cache).
            size = key.size + body.count + fields.pairs.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count + 4 }
                + vary.reduce(0) { $0 + $1.utf8.count } + varyValues.reduce(0) { $0 + ($1?.utf8.count ?? 0) } + 96
        }
    }

    /// Entries by key, and a recency list from `oldest` to `newest` (strong links toward newer).
    struct LRU {
        var settings: Settings
        var map: [OfflineCacheKey: Entry] = [:]
        /// Keys by host and target, for invalidation by unsafe methods (RFC 9111 §4.4).
        var byResource: [String: Set<OfflineCacheKey>] = [:]
        var bytes = 0
        var oldest: Entry?
        var newest: Entry?

        init(settings: Settings) { self.settings = settings }

        mutating func insert(_ e: Entry) {
            if let old = map[e.key] { remove(old) }
            map[e.key] = e
            byResource[OfflineCache.resource(e.key.host, e.key.target), default: []].insert(e.key)
            bytes += e.size
            append(e)
        }

        /// Inserts within the byte budget and the age bound, evicting the least recently used.
        mutating func insertBounded(_ e: Entry, now: Double) -> OfflineCacheStore {
            guard e.size <= settings.capacity else {
                if let old = map[e.key] { remove(old) }
                return .refused("larger than the cache")
            }
            // Already older than may be served (the upstream's Age): it would only take room.
            guard now - e.storedAt <= settings.maxAge else {
                if let old = map[e.key] { remove(old) }
                return .refused("older than offline_cache_max_age")
            }
            insert(e)
            while bytes > settings.capacity, let oldest = oldest { remove(oldest) }
            return .stored(shared: e.key.isShared)
        }

        mutating func touch(_ e: Entry) {
            guard newest !== e else { return }
            unlink(e)
            append(e)
        }

        mutating func remove(_ e: Entry) {
            guard map[e.key] === e else { return }
            map[e.key] = nil
            let r = OfflineCache.resource(e.key.host, e.key.target)
            byResource[r]?.remove(e.key)
            if byResource[r]?.isEmpty == true { byResource[r] = nil }
            bytes -= e.size
            unlink(e)
        }

        mutating func removeAll() {
            // Unlinked one by one: the strong `newer` chain would otherwise free recursively.
            while let e = oldest { remove(e) }
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

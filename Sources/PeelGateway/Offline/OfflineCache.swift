import PeelIO
import Synchronization

/// What a stored answer is found by: the Host as forwarded, the target, Accept-Language,
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
        /// The terms an answer is stored and served by.
        public var terms: Terms { Terms(maxAge: maxAge, override: override) }
    }

    /// What one configuration generation stores and serves answers by: a call keeps its
    /// generation's across a reload (the byte budget, and whether the cache is on, stay live).
    public struct Terms: Sendable, Equatable {
        /// Oldest an entry may be when served, in seconds (`offline_cache_max_age`).
        public var maxAge: Double
        /// `offline_cache_override`: the upstream's no-cache/must-revalidate family is ignored.
        public var override: Bool
        /// Creates terms.
        public init(maxAge: Double, override: Bool) {
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
    /// `requestField` gives the request's value of a lowercased field name (for `Vary`); `terms` are
    /// those of the call's generation (nil: the settings in force).
    @discardableResult
    public func store(key: OfflineCacheKey, request: CacheRequest, hasAuthorization: Bool, requestField: (String) -> String?,
                      status: Int, fields: ResponseHeaders, contentType: String?, body: [UInt8], terms: Terms? = nil,
                      now: Double) -> OfflineCacheStore {
        // The same answer again within a second (a hot endpoint): the entry stands as it is, at the
        // cost of one comparison instead of reading every field, a copy and a replacement on each
        // call (that work put the in-memory cache at 0.78x the req/s of none). Its Age may be
        // up to a second high, within the whole seconds Age counts in.
        if !request.directives.noStore {
            let unchanged = state.withLock { lru -> Bool in
                guard let e = lru.map[key], now - e.insertedAt < 1, e.record.status == status, e.record.contentType == contentType,
                      e.rawFields == fields, e.record.body == body,
                      zip(e.vary, e.varyValues).allSatisfy({ requestField($0.0) == $0.1 }) else { return false }
                lru.touch(e)
                return true
            }
            if unchanged { return .stored(shared: key.isShared) }
        }
        let answer: OfflineCacheRules.Stored
        switch OfflineCacheRules.storable(status: status, key: key, request: request, hasAuthorization: hasAuthorization, fields: fields) {
        case .failure(let why):
            if OfflineCacheRules.unstoredAnswerDrops(status: status, request: request, shared: key.isShared) { invalidate(key: key) }
            return .refused(why.text)
        case .success(let s): answer = s
        }
        let entry = Entry(key: key, vary: answer.vary, varyValues: answer.vary.map(requestField),
                          record: OfflineCacheRules.record(answer, status: status, contentType: contentType, body: body, now: now))
        entry.rawFields = fields
        entry.insertedAt = now
        let dropsOlder = OfflineCacheRules.unstoredAnswerDrops(status: status, request: request, shared: key.isShared)
        return state.withLock { $0.insertBounded(entry, now: now, maxAge: terms?.maxAge, dropsOlder: dropsOlder) }
    }

    /// Takes a 304 answer to a conditional GET (`OfflineCacheRules.notModified`, RFC 9111 §4.3.4): a
    /// stored answer it validates has its age start again and its fields updated; where nothing full
    /// is stored the validator alone is kept, so that while offline the same user's conditional
    /// request with it still gets 304 (their app's own copy is current). A 304 that does not match
    /// the stored answer leaves it as it is.
    @discardableResult
    public func refresh(key: OfflineCacheKey, request: CacheRequest, hasAuthorization: Bool, requestField: (String) -> String?,
                        notModified fields: ResponseHeaders, terms: Terms? = nil, now: Double) -> OfflineCacheStore {
        let maxAge = terms?.maxAge
        let storable = OfflineCacheRules.storable(status: 200, key: key, request: request, hasAuthorization: hasAuthorization, fields: fields)
        let vary = OfflineCacheRules.varyNames(fields)
        // One critical section from reading the stored answer to replacing it, so a newer 200 that
        // lands meanwhile is not overwritten by an entry merged from the older one.
        return state.withLock { lru in
            let e = lru.map[key]
            let sameVariant = e.map { $0.vary == vary && zip($0.vary, $0.varyValues).allSatisfy({ requestField($0.0) == $0.1 }) } ?? false
            switch OfflineCacheRules.notModified(stored: e?.record, sameVariant: sameVariant, storable: storable, notModified: fields,
                                                 request: request, now: now) {
            case .refresh(let record):
                guard let e else { return .refused("nothing stored") }
                return lru.insertBounded(Entry(key: key, vary: e.vary, varyValues: e.varyValues, record: record), now: now, maxAge: maxAge)
            case .validator(let record, let vary):
                return lru.insertBounded(Entry(key: key, vary: vary, varyValues: vary.map(requestField), record: record), now: now,
                                         maxAge: maxAge)
            case .drop:
                if let e { lru.remove(e) }
                return .refused("the 304 makes the stored answer unstorable")
            case .leave(let why):
                return .refused(why)
            }
        }
    }

    /// Drops the entry for `key`: a newer answer to its request that may not be stored (a 4xx, one
    /// too large, one marked no-store) must not leave the older one servable: a revoked token's
    /// stale `/me`, or a deleted resource, would come back.
    public func invalidate(key: OfflineCacheKey) {
        state.withLock { lru in if let e = lru.map[key] { lru.remove(e) } }
    }

    /// What may be served for a GET or HEAD while offline, by the call's generation's `terms` (nil:
    /// the settings in force).
    public func lookup(key: OfflineCacheKey, request: CacheRequest, requestField: (String) -> String?, terms: Terms? = nil,
                       now: Double) -> OfflineCacheAnswer {
        let result = decide(key: key, request: request, requestField: requestField, terms: terms, now: now)
        count(result)
        return result
    }

    /// Counts an offline answer in the cache's totals, whichever store it came from.
    public func count(_ result: OfflineCacheAnswer) {
        switch result {
        case .hit: hitCount.add(1, ordering: .relaxed)
        case .notModified: notModifiedCount.add(1, ordering: .relaxed)
        case .miss: missCount.add(1, ordering: .relaxed)
        }
    }

    private func decide(key: OfflineCacheKey, request: CacheRequest, requestField: (String) -> String?, terms: Terms?,
                        now: Double) -> OfflineCacheAnswer {
        // RFC 9111 §5.2.1.4/§5.2.1.5/§5.2.1.1: the client asked for an answer from the origin.
        if request.refusesStored { return .miss("the request asks for a fresh answer") }
        let found: (Entry, Terms)? = state.withLock { lru in
            guard let e = lru.map[key] else { return nil }
            let terms = terms ?? lru.settings.terms
            if now - e.record.storedAt > terms.maxAge {
                lru.remove(e)
                return nil
            }
            lru.touch(e)
            return (e, terms)
        }
        guard let (e, terms) = found else { return .miss("nothing stored") }
        // RFC 9111 §4.1: a stored answer is used only when the fields its Vary names match.
        for (name, value) in zip(e.vary, e.varyValues) where requestField(name) != value { return .miss("Vary differs") }
        return OfflineCacheRules.serve(e.record, request: request, maxAge: terms.maxAge, override: terms.override, now: now)
    }

    final class Entry {
        let key: OfflineCacheKey
        let vary: [String]
        let varyValues: [String?]
        let record: OfflineCacheRecord
        let size: Int
        /// The upstream's fields as they came, and when the entry went in: `store` compares a new
        /// answer with them (nil and -inf for entries made from a 304).
        var rawFields: ResponseHeaders?
        var insertedAt = -Double.infinity
        var newer: Entry?
        weak var older: Entry?

        init(key: OfflineCacheKey, vary: [String], varyValues: [String?], record: OfflineCacheRecord) {
            self.key = key
            self.vary = vary
            self.varyValues = varyValues
            self.record = record
            // Everything the entry holds counts, the request values its Vary names too: otherwise
            // 60 KB Accept values on 200 entries hold 12 MB in a 1 MiB cache.
            size = key.size + record.body.count + record.fields.pairs.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count + 4 }
                + vary.reduce(0) { $0 + $1.utf8.count } + varyValues.reduce(0) { $0 + ($1?.utf8.count ?? 0) } + 96
        }
    }

    /// Entries by key, and a recency list from `oldest` to `newest` (strong links toward newer).
    struct LRU {
        var settings: Settings
        var map: [OfflineCacheKey: Entry] = [:]
        var bytes = 0
        var oldest: Entry?
        var newest: Entry?

        init(settings: Settings) { self.settings = settings }

        mutating func insert(_ e: Entry) {
            if let old = map[e.key] { remove(old) }
            map[e.key] = e
            bytes += e.size
            append(e)
        }

        /// Inserts within the byte budget (the one in force: 0 refuses every entry) and the age bound
        /// (`maxAge`, the call's generation's; nil: the one in force), evicting the least recently
        /// used; an entry that may not go in takes the older one for its key out with it when
        /// `dropsOlder` (`OfflineCacheRules.unstoredAnswerDrops`).
        mutating func insertBounded(_ e: Entry, now: Double, maxAge: Double? = nil, dropsOlder: Bool = true) -> OfflineCacheStore {
            guard e.size <= settings.capacity else {
                if dropsOlder, let old = map[e.key] { remove(old) }
                return .refused("larger than the cache")
            }
            // Already older than may be served (the upstream's Age): it would only take room.
            guard now - e.record.storedAt <= maxAge ?? settings.maxAge else {
                if dropsOlder, let old = map[e.key] { remove(old) }
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

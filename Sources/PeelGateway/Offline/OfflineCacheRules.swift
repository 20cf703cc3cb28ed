import PeelIO

/// A stored answer, wherever it lives (Peel's memory or the shared store): what the serve rules read.
public struct OfflineCacheRecord: Sendable {
    /// Status as first answered; 304 for a validator-only entry (from a 304 with nothing to refresh).
    public var status: Int
    /// The upstream's fields as kept (never Set-Cookie, never Age).
    public var fields: ResponseHeaders
    /// Peel's Content-Type for the unwrapped body, nil where there is no body (204).
    public var contentType: String?
    /// The unwrapped body; empty for a 204 or a validator-only entry.
    public var body: [UInt8]
    /// When the upstream generated it (its own `Age` taken off), on the caller's clock.
    public var storedAt: Double
    /// The kept Cache-Control directives.
    public var directives: CacheDirectives
    /// The answer's ETag, if any.
    public var etag: String?
    /// The answer's Last-Modified, if any.
    public var lastModified: String?

    /// Creates a record; `directives` are read from `fields`' Cache-Control.
    public init(status: Int, fields: ResponseHeaders, contentType: String?, body: [UInt8], storedAt: Double,
                etag: String?, lastModified: String?) {
        self.status = status
        self.fields = fields
        self.contentType = contentType
        self.body = body
        self.storedAt = storedAt
        directives = CacheDirectives(fields.pairs.filter { $0.0.lowercased() == "cache-control" }.map { $0.1 })
        self.etag = etag
        self.lastModified = lastModified
    }
}

/// The offline cache's rules as pure functions (RFC 9111 and RFC 5861 decisions), so the
/// in-memory cache and the shared store decide the same way: what may be stored, how a 304
/// refreshes an entry, and what may be served stale.
public enum OfflineCacheRules {
    /// What a storable answer keeps.
    public struct Stored: Sendable {
        /// The fields kept (without Age and Set-Cookie).
        public var kept: ResponseHeaders
        /// The request fields the answer's Vary names, lowercased, in order.
        public var vary: [String]
        /// Its Cache-Control directives.
        public var directives: CacheDirectives
        /// The upstream's valid `Age`, else 0.
        public var age: Int
        /// The answer's ETag.
        public var etag: String?
        /// The answer's Last-Modified.
        public var lastModified: String?
    }

    /// Why an answer was not stored.
    public struct Refusal: Error, Sendable {
        /// The rule that said no.
        public let text: String
        init(_ text: String) { self.text = text }
    }

    /// RFC 9111 §3 and the cache key rules: whether an answer may be stored, and what of it.
    public static func storable(status: Int, key: OfflineCacheKey, request: CacheRequest, hasAuthorization: Bool,
                                fields: ResponseHeaders) -> Result<Stored, Refusal> {
        // A 206 is part of a representation (RFC 9111 §3.3): never replayed as the whole of it.
        guard (200...299).contains(status), status != 206 else { return .failure(Refusal("status \(status)")) }
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
                for (v, argument) in CacheDirectives.members(value) {
                    // §4.1: `Vary: *` never matches a later request.
                    if v == "*" { return .failure(Refusal("Vary: *")) }
                    // RFC 9110 §12.5.5: members are field names (tokens). `X-Lang;q=1` or `"X-Lang"`
                    // names no field a request could carry, so no later request can be shown to
                    // match: like `*`, the answer cannot be selected again.
                    guard argument == nil, v.utf8.allSatisfy(isTokenByte) else {
                        return .failure(Refusal("Vary member is not a field name"))
                    }
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

    /// The record a storable answer makes, generated `answer.age` seconds before `now`.
    public static func record(_ answer: Stored, status: Int, contentType: String?, body: [UInt8], now: Double) -> OfflineCacheRecord {
        OfflineCacheRecord(status: status, fields: answer.kept, contentType: contentType, body: body,
                           storedAt: now - Double(answer.age), etag: answer.etag, lastModified: answer.lastModified)
    }

    /// What a 304 does to a stored answer.
    public enum Refresh: Sendable {
        /// It validates it: the merged record (age started again, fields replaced).
        case merged(OfflineCacheRecord)
        /// It validates it, but the merged fields say no-store: the stored answer must go.
        case noStore
        /// It names another representation (or `e` is a validator-only entry).
        case notValidated
    }

    /// RFC 9111 §4.3.4: whether a 304 validates `e` (whose Vary fields the caller found matching) —
    /// by the 304's own ETag, else by the request's If-None-Match (a bare 304
    /// for v2 once refreshed a stored v1) — and, if so, `e` with its age started again and its
    /// fields of the same names replaced (§3.2).
    public static func refreshed(_ e: OfflineCacheRecord, by answer: Stored, request: CacheRequest, now: Double) -> Refresh {
        guard e.status != 304 else { return .notValidated }
        let validated: Bool
        if let tag = answer.etag {
            validated = e.etag.map { opaqueTag($0) == opaqueTag(tag) } ?? false
        } else if let inm = request.ifNoneMatch {
            validated = e.etag.map { ifNoneMatchMatches(inm, etag: $0) } ?? false
        } else {
            validated = true
        }
        guard validated else { return .notValidated }
        let names = Set(answer.kept.pairs.map { $0.0.lowercased() })
        let merged = e.fields.pairs.filter { !names.contains($0.0.lowercased()) } + answer.kept.pairs
        let record = OfflineCacheRecord(status: e.status, fields: ResponseHeaders(merged), contentType: e.contentType, body: e.body,
                                        storedAt: now - Double(answer.age), etag: e.etag, lastModified: answer.lastModified ?? e.lastModified)
        return record.directives.noStore ? .noStore : .merged(record)
    }

    /// Whether a newer answer to a GET or HEAD that is not stored takes the entry stored for its key
    /// with it (RFC 9111 §4: the newer response replaces the older).
    /// - A user's own entry (`shared` false: the request carried key fields, so only that user's
    ///   requests reach it) goes on a 4xx, or with `revokes` (an envelope's business or auth error
    ///   in a 2xx), whatever the request carried: a revoked token's `/me` or a deleted resource must
    ///   not come back while offline (a browser revalidates its `/me` with If-None-Match).
    /// - Otherwise only a plain request's answer speaks for the resource: a request's own
    ///   directives forbid storing its answer, never the stored one (§5.2.1.5), so no anonymous
    ///   client removes the shared entry everyone else is served by sending them.
    /// Never: a precondition's answer (412, a 304, a 416 to a Range) says nothing of the
    /// representation stored (RFC 9110 §13.2.2), nor do 408, 414, 429 and 431, which answer the
    /// request itself; a 5xx keeps it, as that is what stale answers are for (RFC 5861 §4). A 304 is
    /// `notModified`'s to judge.
    public static func unstoredAnswerDrops(status: Int, request: CacheRequest, shared: Bool, revokes: Bool = false) -> Bool {
        if status >= 500 || [304, 408, 412, 414, 416, 429, 431].contains(status) { return false }
        if !shared && (revokes || (400...499).contains(status)) { return true }
        return request.isPlain
    }

    /// The request fields an answer's `Vary` names, lowercased, each once, in order, without
    /// `Accept-Encoding` (Peel stores the decoded body); as `storable` keeps them.
    public static func varyNames(_ fields: ResponseHeaders) -> [String] {
        var names: [String] = []
        for (name, value) in fields.pairs where name.lowercased() == "vary" {
            for (v, _) in CacheDirectives.members(value) where v != "accept-encoding" && !names.contains(v) { names.append(v) }
        }
        return names
    }

    /// What a 304 does to what is stored under its key.
    public enum NotModified: Sendable {
        /// The stored answer was validated: this is it with its age started again and its fields
        /// updated (RFC 9111 §4.3.4), stored under the same Vary names and values.
        case refresh(OfflineCacheRecord)
        /// Nothing full was stored: keep the 304's validator alone, under its own Vary names.
        case validator(OfflineCacheRecord, vary: [String])
        /// The stored answer was validated, and the 304's fields make it unstorable (no-store, or
        /// no longer shareable): it goes.
        case drop
        /// Leave what is stored as it is; the rule that said so.
        case leave(String)
    }

    /// RFC 9111 §4.3.4 for every store: a 304 refreshes only a full stored answer it validates
    /// (`sameVariant`: the stored answer was stored under the 304's Vary names, `varyNames`, with the
    /// request's values of them, §4.1), and a 304 that
    /// does not match what is stored never removes or replaces it. Where nothing full is stored (nil,
    /// or a validator-only entry) the 304's validator alone is kept, so the same user's conditional
    /// request still gets 304 while offline. A request that says no-store leaves everything as it
    /// is (§5.2.1.5). `storable` is the 304's own fields read by `storable(status: 200, …)`.
    public static func notModified(stored: OfflineCacheRecord?, sameVariant: Bool, storable: Result<Stored, Refusal>,
                                   notModified fields: ResponseHeaders, request: CacheRequest, now: Double) -> NotModified {
        if request.directives.noStore { return .leave("the request says no-store") }
        if let e = stored, e.status != 304 {
            guard sameVariant else { return .leave("the stored answer is another variant") }
            let etag = fields.first(.etag).map { trimOWS($0) }
            let validated: Bool
            if let tag = etag {
                validated = e.etag.map { opaqueTag($0) == opaqueTag(tag) } ?? false
            } else if let inm = request.ifNoneMatch {
                // A bare 304 validates what the request's own validator named (RFC 9111 §4.3.4).
                validated = e.etag.map { ifNoneMatchMatches(inm, etag: $0) } ?? false
            } else {
                validated = true
            }
            guard validated else { return .leave("the 304 names another representation") }
            switch storable {
            case .failure: return .drop
            case .success(let answer):
                switch refreshed(e, by: answer, request: request, now: now) {
                case .merged(let record): return .refresh(record)
                case .noStore: return .drop
                case .notValidated: return .leave("the 304 names another representation")
                }
            }
        }
        guard case .success(let answer) = storable else {
            if case .failure(let why) = storable { return .leave(why.text) }
            return .leave("not storable")
        }
        guard let record = validatorOnly(answer, now: now) else { return .leave("no validator in the 304") }
        return .validator(record, vary: answer.vary)
    }

    /// A 304 with nothing to refresh keeps its validator alone, so that while offline the same
    /// user's conditional request with it still gets 304; nil when it carries no validator.
    public static func validatorOnly(_ answer: Stored, now: Double) -> OfflineCacheRecord? {
        guard answer.etag != nil || answer.lastModified != nil else { return nil }
        return OfflineCacheRecord(status: 304, fields: answer.kept, contentType: nil, body: [], storedAt: now - Double(answer.age),
                                  etag: answer.etag, lastModified: answer.lastModified)
    }

    /// What may be served from `e` while offline (its Vary fields already found matching): RFC 9111
    /// §4.2.4, §5.2, RFC 5861 §4 and RFC 9110 §13.1 as the README's offline-cache tables say.
    public static func serve(_ e: OfflineCacheRecord, request: CacheRequest, maxAge: Double, override: Bool,
                             now: Double) -> OfflineCacheAnswer {
        // RFC 9111 §5.2.1.4/§5.2.1.5/§5.2.1.1: the client asked for an answer from the origin.
        if request.refusesStored { return .miss("the request asks for a fresh answer") }
        let age = max(0, now - e.storedAt)
        if age > maxAge { return .miss("older than --offline-cache-max-age") }
        let d = e.directives
        // §5.2.2.4: no-cache answers are never used without the origin's word, fresh or not.
        if d.noCache && !override { return .miss("no-cache") }
        // §4.2.1: s-maxage (we are a shared cache), else max-age; Expires is not read, so an answer
        // with only Expires counts as stale at once (the stricter reading, never the looser).
        let lifetime = Double(d.sMaxAge ?? d.maxAge ?? 0)
        let fresh = age < lifetime
        if !fresh {
            // §4.2.4 and §5.2.2.2/§5.2.2.8/§5.2.2.10: these may never be served stale, even disconnected.
            if (d.mustRevalidate || d.proxyRevalidate || d.sMaxAge != nil) && !override {
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

    /// How long an entry may still be served from `now`, in seconds: at most `maxAge` from when it was
    /// generated, and, for an answer that says `stale-if-error`, no longer than its freshness
    /// lifetime plus that bound (the shared store's TTL). 0 when it may not be served at all.
    public static func servableFor(_ e: OfflineCacheRecord, maxAge: Double, override: Bool, now: Double) -> Double {
        let age = max(0, now - e.storedAt)
        var limit = maxAge
        let d = e.directives
        let lifetime = Double(d.sMaxAge ?? d.maxAge ?? 0)
        if !override && (d.mustRevalidate || d.proxyRevalidate || d.sMaxAge != nil) { limit = min(limit, lifetime) }
        if let bound = d.staleIfError { limit = min(limit, lifetime + Double(bound)) }
        if d.noCache && !override { limit = 0 }
        return max(0, limit - age)
    }
}

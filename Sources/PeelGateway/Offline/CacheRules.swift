/// Cache-Control directives (RFC 9111 §5.2), parsed once from every field of a request or an answer.
/// Names are case-insensitive (§5.2); a quoted value may hold commas (`no-cache="a, b"`).
public struct CacheDirectives: Equatable, Sendable {
    public var noStore = false
    public var noCache = false
    public var isPrivate = false
    public var isPublic = false
    public var mustRevalidate = false
    public var proxyRevalidate = false
    /// `max-age`: nil when absent; 0 when present but invalid (§4.2.1: treat as stale).
    public var maxAge: Int?
    /// `s-maxage` (answers), same rule.
    public var sMaxAge: Int?
    /// `max-stale` (requests): present, with its limit when one is given.
    public var maxStale: (present: Bool, limit: Int?) = (false, nil)
    /// `stale-if-error` (RFC 5861 §4), either side; an invalid value is ignored.
    public var staleIfError: Int?

    /// No directives.
    public init() {}

    /// Parses the values of every Cache-Control field, in order.
    public init(_ values: [String]) {
        for value in values {
            for (name, argument) in Self.members(value) {
                switch name {
                case "no-store": noStore = true
                case "no-cache": noCache = true
                case "private": isPrivate = true
                case "public": isPublic = true
                case "must-revalidate": mustRevalidate = true
                case "proxy-revalidate": proxyRevalidate = true
                case "max-age": maxAge = Self.seconds(argument) ?? 0
                case "s-maxage": sMaxAge = Self.seconds(argument) ?? 0
                case "max-stale": maxStale = (true, argument.flatMap(Self.seconds))
                case "stale-if-error": if let s = Self.seconds(argument) { staleIfError = s }
                default: break
                }
            }
        }
    }

    public static func == (a: CacheDirectives, b: CacheDirectives) -> Bool {
        a.noStore == b.noStore && a.noCache == b.noCache && a.isPrivate == b.isPrivate && a.isPublic == b.isPublic
            && a.mustRevalidate == b.mustRevalidate && a.proxyRevalidate == b.proxyRevalidate && a.maxAge == b.maxAge
            && a.sMaxAge == b.sMaxAge && a.maxStale.present == b.maxStale.present && a.maxStale.limit == b.maxStale.limit
            && a.staleIfError == b.staleIfError
    }

    /// delta-seconds (RFC 9111 §1.2.2): digits only; a value too large for 2^31 is 2^31.
    static func seconds(_ s: String?) -> Int? {
        guard let s, !s.isEmpty, s.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return s.utf8.count > 10 ? 2_147_483_648 : min(Int(s) ?? 2_147_483_648, 2_147_483_648)
    }

    /// `name[=value]` members of one field value, names lowercased, quotes removed from values.
    static func members(_ value: String) -> [(String, String?)] {
        var out: [(String, String?)] = []
        var name: [UInt8] = []
        var arg: [UInt8] = []
        var inArg = false, quoted = false, escaped = false
        func flush() {
            let n = String(decoding: name, as: UTF8.self).lowercased()
            if !n.isEmpty { out.append((n, inArg ? String(decoding: arg, as: UTF8.self) : nil)) }
            name = []; arg = []; inArg = false
        }
        for b in value.utf8 {
            if quoted {
                if escaped { arg.append(b); escaped = false } else if b == 0x5C { escaped = true } else if b == 0x22 { quoted = false } else { arg.append(b) }
                continue
            }
            switch b {
            case 0x2C: flush()
            case 0x20, 0x09: continue
            case 0x3D where !inArg: inArg = true
            case 0x22 where inArg: quoted = true
            default: if inArg { arg.append(b) } else { name.append(b) }
            }
        }
        flush()
        return out
    }
}

/// What a request asks of a cache (RFC 9111 §5.2.1, RFC 5861 §4), and the validators it carries.
public struct CacheRequest: Sendable {
    /// The request's Cache-Control directives (`Pragma: no-cache` counts as `no-cache` when the
    /// request has no Cache-Control, §5.4).
    public var directives: CacheDirectives
    /// `If-None-Match`, as sent.
    public var ifNoneMatch: String?
    /// `If-Modified-Since`, as sent.
    public var ifModifiedSince: String?
    /// True when the request carried any Cache-Control field, or Pragma (§5.4), whatever it said.
    public var hasDirectives: Bool
    /// True when the request carried `If-Match`, `If-Unmodified-Since`, `If-Range` or `Range`
    /// (RFC 9110 §13.1, §14.2): its answer may speak of a precondition or a part, not the resource.
    public var hasOtherConditions: Bool

    /// Reads the request's Cache-Control fields, Pragma, validators and other preconditions.
    public init(cacheControl: [String] = [], pragma: String? = nil, ifNoneMatch: String? = nil, ifModifiedSince: String? = nil,
                otherConditions: Bool = false) {
        directives = CacheDirectives(cacheControl)
        if cacheControl.isEmpty, let pragma, CacheDirectives.members(pragma).contains(where: { $0.0 == "no-cache" }) {
            directives.noCache = true
        }
        hasDirectives = !cacheControl.isEmpty || pragma != nil
        self.ifNoneMatch = ifNoneMatch
        self.ifModifiedSince = ifModifiedSince
        hasOtherConditions = otherConditions
    }

    /// A plain request: no cache directives and no preconditions. Only a plain request's answer
    /// speaks for the resource itself (RFC 9111 §4): a client's `no-store` forbids storing its own
    /// answer (§5.2.1.5), and a 412 or a 304 answers a precondition (RFC 9110 §13.2.2).
    public var isPlain: Bool {
        !hasDirectives && !hasOtherConditions && ifNoneMatch == nil && ifModifiedSince == nil
    }

    /// True when the client asked for a stored answer not to be used (`no-cache`, `no-store`,
    /// `max-age=0`) and did not also say a stale one will do (`max-stale`, `stale-if-error`).
    public var refusesStored: Bool {
        let asksFresh = directives.noCache || directives.noStore || directives.maxAge == 0
        return asksFresh && !directives.maxStale.present && directives.staleIfError == nil
    }
}

/// RFC 9110 §13.1.2: `If-None-Match` holds `*` or a list of entity tags; the weak comparison is
/// used (a GET's conditional, §8.8.3.2), so `W/"a"` matches `"a"`.
func ifNoneMatchMatches(_ header: String, etag: String) -> Bool {
    let trimmed = trimOWS(header)
    if trimmed == "*" { return true }
    let mine = opaqueTag(etag)
    for member in splitEntityTags(trimmed) where opaqueTag(member) == mine { return true }
    return false
}

/// The opaque part of an entity tag, without `W/`.
func opaqueTag(_ tag: String) -> String {
    let t = trimOWS(tag)
    return t.hasPrefix("W/") ? String(t.dropFirst(2)) : t
}

/// Entity tags of a list: commas inside the quotes of a tag do not split it.
private func splitEntityTags(_ s: String) -> [String] {
    var out: [String] = []
    var current = ""
    var quoted = false
    for c in s {
        if c == "\"" { quoted.toggle() }
        if c == "," && !quoted {
            out.append(current)
            current = ""
        } else {
            current.append(c)
        }
    }
    out.append(current)
    return out.map { trimOWS($0) }.filter { !$0.isEmpty }
}

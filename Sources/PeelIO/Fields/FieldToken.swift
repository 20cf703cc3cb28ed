/// The field names Peel acts on, each identified once: by the request parser as the name's bytes
/// go by, and by the upstream head collector as each line arrives (h2o's `h2o_token_t` is the
/// model). Every later stage asks a field for its token and tests it against a `FieldSet`, one
/// bit test instead of a case-insensitive compare per name per stage; before this, the request's
/// fields were walked three times and the upstream head about six, each walk re-comparing bytes
/// (`HeaderNameSet.index` and `equalsLowercased` were in the top of the /small profile).
///
/// A name Peel does not act on is `.other`: it passes (or is dropped) by rules that do not need
/// its name. Names configured at run time (`--offline-cache-key`, the ones a `Connection` field
/// lists) are compared by bytes, for the fields whose token is `.other` only.
public enum FieldToken: UInt8, Sendable, CaseIterable {
    case other = 0
    case host, contentLength, transferEncoding, connection, expect, keepAlive, proxyConnection, te, trailer, upgrade
    case proxyAuthorization, proxyAuthenticate, acceptEncoding, xForwardedProto, xForwardedHost, xForwardedFor
    case xRequestId, forwarded, acceptLanguage, origin, accessControlRequestMethod, accessControlRequestHeaders
    case authorization, traceparent, tracestate, accept, contentType, cookie, cacheControl, pragma, ifNoneMatch
    case ifModifiedSince, contentEncoding, contentMD5, vary, location, contentLocation, refresh, setCookie
    case retryAfter, wwwAuthenticate, etag, contentRange, contentDisposition, accessControlAllowOrigin
    case accessControlAllowCredentials, accessControlAllowMethods, accessControlAllowHeaders
    case accessControlExposeHeaders, accessControlMaxAge, date, expires, lastModified, age
    case ifMatch, ifUnmodifiedSince, ifRange, range

    /// The name in lowercase, as RFC 9110 §5.1 compares it.
    public var name: String {
        switch self {
        case .other: return ""
        case .host: return "host"
        case .contentLength: return "content-length"
        case .transferEncoding: return "transfer-encoding"
        case .connection: return "connection"
        case .expect: return "expect"
        case .keepAlive: return "keep-alive"
        case .proxyConnection: return "proxy-connection"
        case .te: return "te"
        case .trailer: return "trailer"
        case .upgrade: return "upgrade"
        case .proxyAuthorization: return "proxy-authorization"
        case .proxyAuthenticate: return "proxy-authenticate"
        case .acceptEncoding: return "accept-encoding"
        case .xForwardedProto: return "x-forwarded-proto"
        case .xForwardedHost: return "x-forwarded-host"
        case .xForwardedFor: return "x-forwarded-for"
        case .xRequestId: return "x-request-id"
        case .forwarded: return "forwarded"
        case .acceptLanguage: return "accept-language"
        case .origin: return "origin"
        case .accessControlRequestMethod: return "access-control-request-method"
        case .accessControlRequestHeaders: return "access-control-request-headers"
        case .authorization: return "authorization"
        case .traceparent: return "traceparent"
        case .tracestate: return "tracestate"
        case .accept: return "accept"
        case .contentType: return "content-type"
        case .cookie: return "cookie"
        case .cacheControl: return "cache-control"
        case .pragma: return "pragma"
        case .ifNoneMatch: return "if-none-match"
        case .ifModifiedSince: return "if-modified-since"
        case .contentEncoding: return "content-encoding"
        case .contentMD5: return "content-md5"
        case .vary: return "vary"
        case .location: return "location"
        case .contentLocation: return "content-location"
        case .refresh: return "refresh"
        case .setCookie: return "set-cookie"
        case .retryAfter: return "retry-after"
        case .wwwAuthenticate: return "www-authenticate"
        case .etag: return "etag"
        case .contentRange: return "content-range"
        case .contentDisposition: return "content-disposition"
        case .accessControlAllowOrigin: return "access-control-allow-origin"
        case .accessControlAllowCredentials: return "access-control-allow-credentials"
        case .accessControlAllowMethods: return "access-control-allow-methods"
        case .accessControlAllowHeaders: return "access-control-allow-headers"
        case .accessControlExposeHeaders: return "access-control-expose-headers"
        case .accessControlMaxAge: return "access-control-max-age"
        case .date: return "date"
        case .expires: return "expires"
        case .lastModified: return "last-modified"
        case .age: return "age"
        case .ifMatch: return "if-match"
        case .ifUnmodifiedSince: return "if-unmodified-since"
        case .ifRange: return "if-range"
        case .range: return "range"
        }
    }

    /// Longest token name in bytes (`access-control-allow-credentials`); `NamePack` holds this many.
    public static let longestName = 32

    /// The token for a name given as bytes, any case; `.other` for names Peel does not act on and
    /// for anything that is not a field name (a byte outside tchar: the fold would map CR onto `-`).
    public static func identify(_ name: UnsafeRawBufferPointer) -> FieldToken {
        var pack = NamePack()
        for (i, b) in name.enumerated() {
            guard i < longestName, isTokenByte(b) else { return .other }
            pack.add(b, at: i)
        }
        return identify(pack, length: name.count)
    }

    /// The token for a name packed by `NamePack` (the parser packs as it reads). The caller has
    /// checked that every byte is a token character.
    @inline(__always)
    public static func identify(_ pack: NamePack, length: Int) -> FieldToken {
        guard length > 0, length <= longestName else { return .other }
        return table.find(pack, length: length)
    }

    /// The token for a name given as a String, any case.
    public static func identify(_ name: String) -> FieldToken {
        var name = name
        return name.withUTF8 { identify(UnsafeRawBufferPointer($0)) }
    }

    private static let table = TokenTable()
}

/// A field name's first 32 bytes, folded to lowercase and packed into four words as it is read,
/// so a token is found by comparing words instead of bytes. The fold is `b | 0x20`: for the bytes
/// a field name may hold (tchar, RFC 9110 §5.6.2) it maps only ASCII capitals onto the letters the
/// token names are spelled with, so no other name packs like a token's (`^` folds onto `~`, but
/// neither is in any token name).
public struct NamePack: Equatable, Sendable {
    var w0: UInt64 = 0, w1: UInt64 = 0, w2: UInt64 = 0, w3: UInt64 = 0

    public init() {}

    /// Adds byte `b`, the name's byte number `k` (bytes from 32 on are not kept).
    @inline(__always)
    public mutating func add(_ b: UInt8, at k: Int) {
        let v = UInt64(b | 0x20)
        switch k >> 3 {
        case 0: w0 = w0 << 8 | v
        case 1: w1 = w1 << 8 | v
        case 2: w2 = w2 << 8 | v
        case 3: w3 = w3 << 8 | v
        default: break
        }
    }
}

/// The token names by length, packed; a lookup compares at most a handful of packs.
private struct TokenTable: Sendable {
    private var byLength: [[(NamePack, FieldToken)]]

    init() {
        byLength = Array(repeating: [], count: FieldToken.longestName + 1)
        for token in FieldToken.allCases where token != .other {
            var pack = NamePack()
            for (i, b) in token.name.utf8.enumerated() { pack.add(b, at: i) }
            byLength[token.name.utf8.count].append((pack, token))
        }
    }

    @inline(__always)
    func find(_ pack: NamePack, length: Int) -> FieldToken {
        for (candidate, token) in byLength[length] where candidate == pack { return token }
        return .other
    }
}

/// A set of tokens as one bit mask: membership is a shift and an and.
public struct FieldSet: Sendable, Hashable {
    public private(set) var bits: UInt64

    public init(_ tokens: [FieldToken]) {
        bits = 0
        for t in tokens where t != .other { bits |= 1 << UInt64(t.rawValue) }
    }

    private init(bits: UInt64) { self.bits = bits }

    /// The set with `token` too (`.other` is never kept).
    @inline(__always)
    public func inserting(_ token: FieldToken) -> FieldSet {
        token == .other ? self : FieldSet(bits: bits | 1 << UInt64(token.rawValue))
    }

    /// Adds `token` (`.other` is never kept).
    @inline(__always)
    public mutating func insert(_ token: FieldToken) { if token != .other { bits |= 1 << UInt64(token.rawValue) } }

    /// Whether `token` is in the set; `.other` never is.
    @inline(__always)
    public func contains(_ token: FieldToken) -> Bool { bits & (1 << UInt64(token.rawValue)) != 0 && token != .other }

    /// The set with `other`'s tokens too.
    public func union(_ other: FieldSet) -> FieldSet { FieldSet(bits: bits | other.bits) }

    /// The set without `other`'s tokens.
    public func subtracting(_ other: FieldSet) -> FieldSet { FieldSet(bits: bits & ~other.bits) }

    /// Hop-by-hop fields (RFC 9110 §7.6.1): never forwarded in either direction.
    public static let hopByHop = FieldSet([.connection, .keepAlive, .proxyConnection, .te, .trailer, .transferEncoding, .upgrade])

    /// Fields the reply writer frames or states itself (see `ReplyHead.field`).
    public static let writerOwned = FieldSet([.contentLength, .transferEncoding, .date, .connection])

    /// Upstream fields that carry an answer's CORS decision (dropped when Peel manages CORS).
    public static let upstreamCORS = FieldSet([.accessControlAllowOrigin, .accessControlAllowCredentials,
                                               .accessControlAllowMethods, .accessControlAllowHeaders,
                                               .accessControlExposeHeaders, .accessControlMaxAge])
}

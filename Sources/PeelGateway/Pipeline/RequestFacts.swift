import PeelIO

/// Stage 1 of a call: what the request's fields say, read in one walk over tokens identified by the
/// parser. Only the few values Peel acts on become Strings; every later stage reads this value
/// instead of the fields (request fields were walked three times, by name each time).
struct RequestFacts {
    var requestId: String?
    var host: String?
    /// Set when a second Host field came (RFC 9112 §3.2).
    var duplicateHost = false
    var xForwardedFor: String?
    var acceptLanguage: String?
    /// Options the Connection fields name besides `keep-alive` and `close`, lowercased.
    var connectionOptions: [String] = []
    var origin: String?
    /// The Upgrade field's protocols as sent, versions and case kept (RFC 9110 §7.8:
    /// protocol-name ["/" protocol-version]).
    var upgrade: [String] = []
    var accessControlRequestMethod: String?
    var accessControlRequestHeaders: String?
    var xForwardedProto: String?
    var xForwardedHost: String?
    var forwarded: String?
    /// False once the forwarding fields were forgotten (the peer is not a trusted proxy).
    var forwardingTrusted = true
    var acceptEncoding: String?
    var hasAuthorization = false
    /// False when traceparent is not in its W3C form or comes twice (W3C Trace Context §3.2): it
    /// goes, with tracestate.
    var traceOK = true
    private var sawTraceparent = false
    /// Read only while the offline cache is on: the key fields' values, by `CacheKeyFields` position.
    var keyValues: [String?] = []
    /// Every Cache-Control line (RFC 9111 §5.2.1), Pragma, If-None-Match, If-Modified-Since.
    var cacheControl: [String] = []
    var pragma: String?
    var ifNoneMatch: String?
    var ifModifiedSince: String?
    /// If-Match, If-Unmodified-Since, If-Range or Range came (the offline cache's plain-request rule).
    var otherConditions = false

    /// Reads `source`'s fields once; `keys` is nil while the offline cache is off. The forwarding
    /// fields are forgotten unless `trustingForwarding` (the peer is a trusted proxy).
    init<Source: FieldSource>(_ source: Source, keys: CacheKeyFields?, trustingForwarding: Bool = true) {
        read(source, keys: keys, trustingForwarding: trustingForwarding)
    }

    /// No fields read yet.
    init() {}

    /// Reads `source`'s fields into these (empty) facts, in one walk and in place: the call's
    /// planner reads into its own variable, so the value is neither copied nor destroyed twice.
    mutating func read<Source: FieldSource>(_ source: Source, keys: CacheKeyFields?, trustingForwarding: Bool) {
        if let keys { keyValues = Array(repeating: nil, count: keys.names.count) }
        source.forEachField { take($0, keys: keys) }
        if !trustingForwarding { distrustForwardingFields() }
    }

    /// Takes one field of the request.
    private mutating func take(_ f: HeaderField, keys: CacheKeyFields?) {
        switch f.token {
        case .xRequestId: requestId = f.valueString
        case .host: if host == nil { host = f.valueString } else { duplicateHost = true }
        case .xForwardedFor: Self.join(&xForwardedFor, f.valueString)
        case .acceptLanguage: acceptLanguage = f.valueString
        case .connection:
            // `keep-alive` and `close` (nearly every client's value) name nothing that is not dropped anyway.
            if f.valueEquals("keep-alive") || f.valueEquals("close") { break }
            for t in f.valueString.split(separator: ",") { connectionOptions.append(trimOWS(t).lowercased()) }
        case .origin: origin = f.valueString
        case .upgrade:
            for t in f.valueString.split(separator: ",") where !trimOWS(t).isEmpty { upgrade.append(String(trimOWS(t))) }
        case .accessControlRequestMethod: accessControlRequestMethod = f.valueString
        case .accessControlRequestHeaders: Self.join(&accessControlRequestHeaders, f.valueString)
        case .xForwardedProto: xForwardedProto = f.valueString
        case .xForwardedHost: xForwardedHost = f.valueString
        case .acceptEncoding: Self.join(&acceptEncoding, f.valueString)
        case .authorization: hasAuthorization = true
        case .forwarded: Self.join(&forwarded, f.valueString)
        case .traceparent:
            traceOK = !sawTraceparent && RequestPolicy.isTraceparent(Array(f.valueString.utf8))
            sawTraceparent = true
        case .cacheControl where keys != nil: cacheControl.append(f.valueString)
        case .pragma where keys != nil: Self.join(&pragma, f.valueString)
        case .ifNoneMatch where keys != nil: Self.join(&ifNoneMatch, f.valueString)
        case .ifModifiedSince where keys != nil: Self.join(&ifModifiedSince, f.valueString)
        case .ifMatch, .ifUnmodifiedSince, .ifRange, .range: otherConditions = true
        default: break
        }
        // Whose answer it is: read only while the cache is on.
        if let keys, let i = keys.position(of: f) {
            // RFC 6265 §5.4 joins Cookie fields with `; `; other list fields join with `, ` (RFC 9110 §5.3).
            let value = f.valueString
            keyValues[i] = keyValues[i].map { $0 + (keys.tokens[i] == .cookie ? "; " : ", ") + value } ?? value
        }
    }

    /// An absolute-form target names the host (RFC 9112 §3.2.2: a server MUST ignore Host then):
    /// `authority` replaces Host for routing, the cache's tenant, rewritten URLs and what goes
    /// upstream, and a trusted proxy's X-Forwarded-Host goes too. The Host field was checked first
    /// (§3.2 still refuses a missing, doubled or invalid one).
    mutating func nameHost(byTarget authority: String) {
        host = authority
        xForwardedHost = nil
    }

    /// The fields a trusted proxy sends about the client, forgotten for a request from anyone else
    /// (from an untrusted client they could steer rewritten redirects and forge the chain).
    mutating func distrustForwardingFields() {
        forwardingTrusted = false
        xForwardedFor = nil
        xForwardedProto = nil
        xForwardedHost = nil
        forwarded = nil
    }

    /// What the request asks of caches, with its validators.
    var cacheRequest: CacheRequest {
        CacheRequest(cacheControl: cacheControl, pragma: pragma, ifNoneMatch: ifNoneMatch, ifModifiedSince: ifModifiedSince,
                     otherConditions: otherConditions)
    }

    private static func join(_ into: inout String?, _ value: String) {
        into = into.map { $0 + ", " + value } ?? value
    }
}

/// `--offline-cache-key`'s field names, each matched by token where it has one and by bytes
/// otherwise (a tenant field such as `x-tenant`).
struct CacheKeyFields {
    /// The names, lowercased, in order.
    let names: [String]
    /// Each name's token (`.other` for names Peel has no token for).
    let tokens: [FieldToken]
    /// The names without a token, compared by bytes on fields whose token is `.other`.
    private let untokened: HeaderNameSet
    /// Position in `names` of each `untokened` entry.
    private let untokenedPositions: [Int]

    init(_ names: [String]) {
        self.names = names
        let tokens = names.map { FieldToken.identify($0) }
        self.tokens = tokens
        let positions = tokens.indices.filter { tokens[$0] == .other }
        untokenedPositions = positions
        untokened = HeaderNameSet(positions.map { names[$0] })
    }

    /// The position of `field`'s name among the key fields, or nil.
    @inline(__always)
    func position(of field: HeaderField) -> Int? {
        if field.token != .other { return tokens.firstIndex(of: field.token) }
        if untokenedPositions.isEmpty { return nil }
        return field.index(in: untokened).map { untokenedPositions[$0] }
    }
}

/// Stage 2 of a call: what Peel does with it, decided from the request alone.
enum RequestPlan: Equatable {
    /// Refused before any upstream work (400, with this detail).
    case refuse(String)
    /// A CORS preflight Peel answers itself.
    case preflight
    /// Peel's reachability path; `events` for `Accept: text/event-stream`.
    case reachability(events: Bool)
    /// Forward `path` with `query`.
    case forward(path: String, query: String?)

    /// Decides what to do with a request (`method`, `target`, HTTP/1.1 or later, fields `facts`),
    /// and is the one place that decides the request's host: an absolute-form target's authority
    /// replaces Host in `facts`. Pure; `accept` reads Accept, which only the reachability path needs.
    static func decide(method: String, target: String, http11: Bool, _ facts: inout RequestFacts, selfAuthorities: Set<String>,
                       managesCORS: Bool, reachabilityPath: String?, accept: () -> String?) -> (RequestPlan, path: String) {
        // RFC 9112 §3.2: a 1.1 request without Host, or with two, is refused.
        if facts.duplicateHost { return (.refuse("more than one Host header"), "") }
        if http11 && facts.host == nil { return (.refuse("HTTP/1.1 request without Host"), "") }
        if let host = facts.host, let why = RequestPolicy.hostProblem(host) { return (.refuse(why), "") }
        // Content-Length and Transfer-Encoding framing was judged by the server's parser.
        switch RequestPolicy.check(method: method, target: target, selfAuthorities: selfAuthorities) {
        case .refuse(let why): return (.refuse(why), "")
        case .forward(let path, let query, let authority):
            if let authority { facts.nameHost(byTarget: authority) }
            // A preflight is Peel's to answer when it manages CORS: the upstream is not contacted.
            if managesCORS, CORSPolicy.isPreflight(method: method, origin: facts.origin,
                                                   requestMethod: facts.accessControlRequestMethod) {
                return (.preflight, path)
            }
            // Peel's own path: answered here, never forwarded. Accept is read only here:
            // Foundation's `contains` on every request's Accept cost ~4k instructions (callgrind).
            if let own = reachabilityPath, path == own {
                let events = accept().map { $0.lowercased().contains("text/event-stream") } ?? false
                return (.reachability(events: events), path)
            }
            return (.forward(path: path, query: query), path)
        }
    }
}

/// Anything whose header fields can be walked with their tokens: a client's exchange (read in
/// place), or fields held as a value (tests, stored answers). Generic where the hot path reads a
/// request's facts, so it calls the exchange's walk directly, with no closure context.
public protocol FieldSource {
    /// Calls `body` with each field, in order.
    func forEachField(_ body: (HeaderField) -> Void)
}

extension HTTPExchange: FieldSource {}
extension ResponseHeaders: FieldSource {}

/// One field line Peel adds to an upstream request of its own (a probe's User-Agent).
public struct FieldLine: Sendable {
    public let name: String
    public let value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// The fields a gateway adds about the hop it forwards (RFC 7239, and the X-Forwarded-* fields
/// every proxy writes), plus the request id and the Host it forwards. Values only: which values
/// they get is the gateway's rule; the sender writes each under its name, after the relayed fields.
public struct ForwardingFields: Sendable {
    /// X-Forwarded-For: the chain a trusted proxy sent, then this hop's peer; nil: not written.
    public var forwardedFor: String?
    /// X-Forwarded-Proto: this hop's scheme; nil: not written.
    public var forwardedProto: String?
    /// X-Forwarded-Host: the Host the client sent, when it sent one.
    public var forwardedHost: String?
    /// Forwarded (RFC 7239 §4); nil: not written.
    public var forwarded: String?
    /// A Host sent instead of the upstream's (`--preserve-host`); nil lets curl send the upstream's.
    public var host: String?
    /// X-Request-Id.
    public var requestId: String

    public init(forwardedFor: String?, forwardedProto: String?, forwardedHost: String?, forwarded: String?, host: String?,
                requestId: String) {
        self.forwardedFor = forwardedFor
        self.forwardedProto = forwardedProto
        self.forwardedHost = forwardedHost
        self.forwarded = forwarded
        self.host = host
        self.requestId = requestId
    }
}

/// A call's own timeouts and CA bundle, in place of the client's options (which a reload replaces
/// while the call runs).
public struct TransferLimits: Sendable, Equatable {
    /// Whole exchange limit in seconds.
    public var timeout: Double
    /// TCP+TLS connect limit in seconds.
    public var connectTimeout: Double
    /// The CA bundle https endpoints are checked against; nil: curl's built-in one.
    public var caFile: String?
    /// Largest body in bytes; nil: the client's `maxResponseBody`.
    public var maxResponseBody: Int?
    /// Silence allowed once a streamed answer flows, in seconds; nil: the client's `idleTimeout`.
    public var idleTimeout: Double?

    public init(timeout: Double, connectTimeout: Double, caFile: String? = nil, maxResponseBody: Int? = nil,
                idleTimeout: Double? = nil) {
        self.timeout = timeout
        self.connectTimeout = connectTimeout
        self.caFile = caFile
        self.maxResponseBody = maxResponseBody
        self.idleTimeout = idleTimeout
    }
}

/// Which resource an upstream request names.
public enum UpstreamTarget: Sendable {
    /// A path (already validated, sent as is after the endpoint's base path) and query (without
    /// `?`) on one endpoint. Failing over swaps the endpoint and keeps the rest.
    case origin(UpstreamEndpoint, path: String, query: String?)
    /// A whole URL (Peel's own calls: probes).
    case url(String)
}

/// One upstream call, built whole before it is sent: the method, the target, the field lines and
/// the body. The sender writes it into a pooled handle and adds nothing but what curl would
/// otherwise invent or alter (see `fieldLines`).
public struct UpstreamRequest {
    /// The method as sent.
    public let method: String
    /// The method as a token, for the re-send rule.
    public let methodToken: MethodToken
    public private(set) var target: UpstreamTarget
    public let body: UpstreamBody
    /// The Accept-Encoding value sent ("" asks for every coding curl decodes).
    public let acceptEncoding: String
    /// Fields relayed in order, minus those `dropping` names by token and `droppingNamed` by name.
    public let relayed: (any FieldSource)?
    public let dropping: FieldSet
    public let droppingNamed: HeaderNameSet?
    /// The forwarding fields, written after the relayed ones.
    public let forwarding: ForwardingFields?
    /// Fields added after those, in order: Peel's own, never Accept or Content-Type (see
    /// `writeFields`). An empty value sends `Name:`, which stops curl from sending a field of its
    /// own by that name.
    public let added: [FieldLine]
    /// The call's own timeouts and CA bundle; nil: the client's options.
    public let limits: TransferLimits?

    public init(method: String, target: UpstreamTarget, body: UpstreamBody = .none, acceptEncoding: String = "",
                relayed: (any FieldSource)? = nil, dropping: FieldSet = FieldSet([]), droppingNamed: HeaderNameSet? = nil,
                forwarding: ForwardingFields? = nil, added: [FieldLine] = [], limits: TransferLimits? = nil) {
        self.method = method
        methodToken = MethodToken(method)
        self.target = target
        self.body = body
        self.acceptEncoding = acceptEncoding
        self.relayed = relayed
        self.dropping = dropping
        self.droppingNamed = droppingNamed
        self.forwarding = forwarding
        self.added = added
        self.limits = limits
    }

    /// The same request to another endpoint (failing over): the path, query, fields and body stay.
    public func retargeted(to endpoint: UpstreamEndpoint) -> UpstreamRequest {
        var copy = self
        if case .origin(_, let path, let query) = target { copy.target = .origin(endpoint, path: path, query: query) }
        return copy
    }

    /// The request body's length in bytes.
    public var bodyCount: Int {
        switch body {
        case .none: return 0
        case .exchange(let ex): return ex.bodyCount
        case .bytes(let b): return b.count
        }
    }

    /// Whether curl sends the request as a POST (CURLOPT_POST with POSTFIELDS): it has a body, or its
    /// method is POST, PUT or PATCH (an empty body is still one). The one place this rule lives:
    /// the handle's setup and the field lines below both read it.
    public var sentAsPost: Bool {
        methodToken != .head && (bodyCount > 0 || methodToken == .post || methodToken == .put || methodToken == .patch)
    }

    /// Writes the field lines: the relayed ones, the forwarding ones, the added ones, the codings
    /// asked for (`acceptEncoding`, when it names any and no line above did: curl then writes no line
    /// of its own, which it formats twice, through aprintf and again into the head, ~3k instructions
    /// a call, and still decodes what arrives, CURLOPT_ACCEPT_ENCODING being set), then empty `Accept:` and
    /// `Content-Type:` where none was written, since curl would invent `Accept: */*` and, for a
    /// request it sends as a POST, `Content-Type: application/x-www-form-urlencoded`; and
    /// `Expect:` for a POST, since curl would add `Expect: 100-continue` to a large body the client
    /// already sent whole.
    func writeFields(into list: inout UpstreamHeaderList) {
        var sawAccept = false
        var sawContentType = false
        var sawCodings = false
        if let relayed {
            relayed.forEachField { field in
                if field.isIn(dropping) { return }
                if field.token == .other, let droppingNamed, field.isIn(droppingNamed) { return }
                switch field.token {
                case .accept: sawAccept = true
                case .contentType: sawContentType = true
                case .acceptEncoding: sawCodings = true
                default: break
                }
                list.append(field)
            }
        }
        if let f = forwarding {
            if let chain = f.forwardedFor { list.append("X-Forwarded-For", chain) }
            if let proto = f.forwardedProto { list.append("X-Forwarded-Proto", proto) }
            if let host = f.forwardedHost { list.append("X-Forwarded-Host", host) }
            if let element = f.forwarded { list.append("Forwarded", element) }
            if let host = f.host { list.append("Host", host) }
            list.append("X-Request-Id", f.requestId)
        }
        for line in added {
            list.append(line.name, line.value)
            if line.name.utf8.count == 15 && line.name.lowercased() == "accept-encoding" { sawCodings = true }
        }
        if !acceptEncoding.isEmpty && !sawCodings { list.append("Accept-Encoding", acceptEncoding) }
        if !sawAccept { list.append("Accept", "") }
        if sentAsPost {
            if !sawContentType { list.append("Content-Type", "") }
            list.append("Expect", "")
        }
    }

    /// The field lines as curl will send them (`Name: value`, or `Name:`), for tests and diagnostics.
    public var fieldLines: [String] {
        let block = HeaderBlock()
        var list = UpstreamHeaderList(block: block)
        writeFields(into: &list)
        return block.lines
    }
}

/// CORS when Peel manages it (`--cors-origins`), following the Fetch standard's CORS protocol
/// (fetch.spec.whatwg.org §3.2). Pure: requests' fields in, fields to add out.
struct CORSPolicy: Sendable {
    /// Allowed origins as browsers serialise them (`https://app.example.com`), compared exactly.
    let origins: Set<String>
    /// `*` was configured: any origin is allowed, and answers say `*` (no credentials, see ConfigLoader).
    let anyOrigin: Bool
    /// Adds `Access-Control-Allow-Credentials: true`.
    let credentials: Bool
    /// Seconds a browser may cache a preflight answer.
    let maxAge: Int

    /// Upstream fields dropped when Peel manages CORS, so only Peel's decision reaches the browser.
    static let upstreamFields = ["access-control-allow-origin", "access-control-allow-credentials",
                                 "access-control-allow-methods", "access-control-allow-headers",
                                 "access-control-expose-headers", "access-control-max-age"]

    /// Nil when CORS is not managed (no origins configured).
    init?(config: GatewayConfig) {
        guard !config.corsOrigins.isEmpty else { return nil }
        anyOrigin = config.corsOrigins.contains("*")
        origins = Set(config.corsOrigins.filter { $0 != "*" })
        credentials = config.corsCredentials
        maxAge = config.corsMaxAge
    }

    /// Whether the request is a CORS preflight: OPTIONS with Origin and Access-Control-Request-Method.
    static func isPreflight(method: String, origin: String?, requestMethod: String?) -> Bool {
        method == "OPTIONS" && origin != nil && requestMethod != nil
    }

    /// Whether `origin` may read answers.
    func allows(_ origin: String?) -> Bool {
        guard let origin else { return false }
        return anyOrigin || origins.contains(origin)
    }

    /// Fields for an actual (non-preflight) answer to a request from `origin`: success, problem,
    /// offline and refusals alike, so apps can read errors too.
    func answerFields(origin: String?) -> [(String, String)] {
        // The answer depends on Origin whenever origins are listed (Fetch §3.2.5, "CORS protocol and HTTP caches").
        var out: [(String, String)] = anyOrigin ? [] : [("Vary", "Origin")]
        guard let origin, allows(origin) else { return out }
        out.append(("Access-Control-Allow-Origin", anyOrigin ? "*" : origin))
        if credentials { out.append(("Access-Control-Allow-Credentials", "true")) }
        // Not CORS-safelisted response fields, so scripts can only read them when exposed.
        out.append(("Access-Control-Expose-Headers", "X-Request-Id, Retry-After"))
        return out
    }

    /// Fields for Peel's 204 answer to a preflight: what was asked for, when the origin is allowed;
    /// otherwise none, and the browser fails the preflight.
    func preflightFields(origin: String?, requestMethod: String?, requestHeaders: String?) -> [(String, String)] {
        var out: [(String, String)] = [("Vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers")]
        guard let origin, allows(origin) else { return out }
        out.append(("Access-Control-Allow-Origin", anyOrigin ? "*" : origin))
        if credentials { out.append(("Access-Control-Allow-Credentials", "true")) }
        if let m = requestMethod.flatMap(Self.tokenList) { out.append(("Access-Control-Allow-Methods", m)) }
        if let h = requestHeaders.flatMap(Self.tokenList) { out.append(("Access-Control-Allow-Headers", h)) }
        out.append(("Access-Control-Max-Age", String(maxAge)))
        return out
    }

    /// `value` when it is a comma-separated list of tokens (RFC 9110 §5.6.2), else nil: echoing
    /// anything else back would let a request write arbitrary text into the answer.
    static func tokenList(_ value: String) -> String? {
        let tchar = Set("!#$%&'*+-.^_`|~".utf8)
        var sawToken = false
        for b in value.utf8 {
            let isAlnum = (b >= 0x30 && b <= 0x39) || (b | 0x20 >= 0x61 && b | 0x20 <= 0x7A)
            if isAlnum || tchar.contains(b) { sawToken = true; continue }
            if b == UInt8(ascii: ",") || b == 0x20 || b == 0x09 { continue }
            return nil
        }
        return sawToken ? trimOWS(value) : nil
    }
}

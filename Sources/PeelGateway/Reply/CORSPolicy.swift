/// CORS when Peel manages it (`--cors-origins`), following the Fetch standard's CORS protocol
/// (fetch.spec.whatwg.org §3.2). Pure: requests' fields in, fields to add out.
struct CORSPolicy: Sendable {
    /// Allowed origins as browsers serialise them (`https://app.example.com`), compared exactly.
    let origins: Set<String>
    /// Allowed subdomain wildcards (`https://*.example.com`).
    let patterns: [OriginPattern]
    /// `Access-Control-Expose-Headers` names besides the upstream's: Peel's own fields, then
    /// `--cors-expose-headers`.
    let exposed: [String]
    /// Peel's own fields a browser app needs to read (RFC 9111 §5.1 Age and RFC 9211 Cache-Status on
    /// stale answers, RFC 9110 §10.2.3 Retry-After, the request id on every answer).
    static let ownExposed = ["X-Request-Id", "Retry-After", "Age", "Cache-Status"]
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
    init?(_ settings: GatewayConfig.CORS) {
        guard !settings.origins.isEmpty else { return nil }
        anyOrigin = settings.origins.contains("*")
        origins = Set(settings.origins.filter { $0 != "*" && !$0.contains("*") })
        patterns = settings.origins.compactMap(OriginPattern.init(wildcard:))
        var names = Self.ownExposed
        for name in settings.exposeHeaders where !names.contains(where: { $0.lowercased() == name.lowercased() }) {
            names.append(name)
        }
        exposed = names
        credentials = settings.credentials
        maxAge = settings.maxAge
    }

    /// Whether the request is a CORS preflight: OPTIONS with Origin and Access-Control-Request-Method.
    static func isPreflight(method: String, origin: String?, requestMethod: String?) -> Bool {
        method == "OPTIONS" && origin != nil && requestMethod != nil
    }

    /// Whether `origin` may read answers.
    func allows(_ origin: String?) -> Bool {
        guard let origin else { return false }
        return anyOrigin || origins.contains(origin) || patterns.contains { $0.matches(origin) }
    }

    /// Fields for an actual (non-preflight) answer to a request from `origin`: success, problem,
    /// offline and refusals alike, so apps can read errors too. `upstreamExposed` is the upstream's
    /// own Access-Control-Expose-Headers list (its pagination fields, say), merged into Peel's.
    func answerFields(origin: String?, upstreamExposed: [String] = []) -> [(String, String)] {
        // The answer depends on Origin whenever origins are listed (Fetch §3.2.5, "CORS protocol and HTTP caches").
        var out: [(String, String)] = anyOrigin ? [] : [("Vary", "Origin")]
        guard let origin, allows(origin) else { return out }
        out.append(("Access-Control-Allow-Origin", anyOrigin ? "*" : origin))
        if credentials { out.append(("Access-Control-Allow-Credentials", "true")) }
        // Not CORS-safelisted response fields, so scripts can only read them when exposed.
        out.append(("Access-Control-Expose-Headers", exposeList(upstreamExposed)))
        return out
    }

    /// Peel's exposed names followed by the upstream's, each once (field names are case-insensitive).
    func exposeList(_ upstream: [String]) -> String {
        var names = exposed
        var seen = Set(names.map { $0.lowercased() })
        for name in upstream where !name.isEmpty && seen.insert(name.lowercased()).inserted { names.append(name) }
        return names.joined(separator: ", ")
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

/// An allowed origin naming every subdomain of a host: `https://*.example.com` or
/// `http://*.example.com:8080`. `*` stands for one or more whole leading labels; the scheme and port
/// must be the same; the bare domain and lookalikes (`https://example.com.evil.net`,
/// `https://badexample.com`) never match.
struct OriginPattern: Sendable {
    /// `https://`, lowercased.
    let scheme: String
    /// `.example.com`, lowercased, with its leading dot.
    let suffix: String
    /// `:8080`, or empty.
    let port: String

    /// The pattern when `text` is a subdomain wildcard; nil for anything else.
    init?(wildcard text: String) {
        guard OriginPattern.problem(text) == nil, let r = text.range(of: "://*.") else { return nil }
        scheme = text[..<r.lowerBound].lowercased() + "://"
        let rest = text[r.upperBound...].lowercased()
        if let colon = rest.lastIndex(of: ":") {
            suffix = "." + rest[..<colon]
            port = String(rest[colon...])
        } else {
            suffix = "." + rest
            port = ""
        }
    }

    /// Whether `origin` (as a browser sends it) is a subdomain of this pattern's host.
    func matches(_ origin: String) -> Bool {
        let o = origin.lowercased()
        guard o.hasPrefix(scheme) else { return false }
        var authority = o.dropFirst(scheme.count)
        if !port.isEmpty {
            guard authority.hasSuffix(port) else { return false }
            authority = authority.dropLast(port.count)
        }
        // A port the pattern does not name, or any other character, is not this host.
        guard authority.hasSuffix(suffix), !authority.contains(":") else { return false }
        let labels = authority.dropLast(suffix.count)
        // One or more whole labels before the suffix: never empty, never starting or ending with a dot.
        return !labels.isEmpty && !labels.hasPrefix(".") && !labels.hasSuffix(".") && !labels.contains("..")
            && labels.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "." }
    }

    /// Why `text` is not an allowed origin entry (exact origin, or a subdomain wildcard), or nil.
    static func problem(_ text: String) -> String? {
        let stars = text.filter { $0 == "*" }.count
        if stars == 0 {
            return ConfigLoader.isOrigin(text) ? nil : "\(text) is not an origin like https://app.example.com or *"
        }
        let wildcardHelp = "\(text): * is allowed only alone or as the leading labels of a host, like https://*.example.com"
        guard stars == 1, let r = text.range(of: "://*.") else { return wildcardHelp }
        let scheme = text[..<r.lowerBound]
        guard !scheme.isEmpty, scheme.allSatisfy({ $0.isLetter || $0.isNumber || "+-.".contains($0) }) else { return wildcardHelp }
        var host = Substring(text[r.upperBound...])
        if let colon = host.lastIndex(of: ":") {
            let port = host[host.index(after: colon)...]
            guard !port.isEmpty, port.allSatisfy(\.isNumber), let n = Int(port), (1...65535).contains(n) else {
                return "\(text): the port must be a number 1-65535"
            }
            host = host[..<colon]
        }
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" } }) else {
            return "\(text): \(host) is not a host name"
        }
        // `*.com` would allow every site under a top-level domain.
        guard labels.count >= 2 else { return "\(text): a wildcard needs a domain of at least two labels (like *.example.com)" }
        return nil
    }
}

import Foundation

/// Rewrites upstream URLs and cookies so they name Peel instead of the upstream, as nginx's
/// `proxy_redirect default`, `proxy_cookie_path` and `proxy_cookie_domain` do: for every endpoint
/// of a route's group, and with the route's stripped prefix put back in front of the paths the
/// upstream names (`/orders` from a `/pay/` route that strips is `/pay/orders` to the client). Pure.
struct ProxyRewrite: Sendable {
    /// One endpoint as its answers may name it.
    private struct Target: Sendable {
        /// Its base path without a trailing slash ("" for none), e.g. `/api/v1`.
        let basePath: String
        /// Its host, lowercased, without brackets.
        let host: String
        /// Lowercased `scheme://authority` spellings of its origin (with and without the default
        /// port), and `//authority` for scheme-relative references (RFC 3986 §4.2).
        let origins: [[UInt8]]
    }
    private let targets: [Target]
    /// Whose base path a path-absolute reference (`/v1/x`, a cookie's Path) is read under: the
    /// endpoint that answered when that is known, else every endpoint of the group.
    private let pathTargets: [Target]
    /// Put in front of every path the upstream names: the route prefix it stripped, without its
    /// trailing slash ("" when nothing is stripped).
    private let restored: String

    init(upstream: UpstreamURL) { self.init(upstreams: [upstream]) }

    /// `answeredBy`: the position in `upstreams` of the endpoint whose answers this rewrites, when
    /// known. Absolute URLs may name any endpoint of the group (a redirect to a sibling); a bare path
    /// is under the answering endpoint's base path only, so a bare endpoint's `/v1/x` keeps its `/v1`
    /// beside an endpoint whose base path is `/v1`.
    init(upstreams: [UpstreamURL], restoring prefix: String = "", answeredBy: Int? = nil) {
        let targets: [Target] = upstreams.map { u in
            let host = u.host.lowercased()
            let h = host.contains(":") ? "[\(host)]" : host
            let defaultPort = u.scheme == "https" ? 443 : 80
            let port = u.port ?? defaultPort
            var authorities = ["\(h):\(port)"]
            if port == defaultPort { authorities.append(h) }
            let origins = authorities.map { "\(u.scheme)://\($0)" } + authorities.map { "//\($0)" }
            return Target(basePath: u.basePath, host: host, origins: origins.map { Array($0.utf8) })
        }
        self.targets = targets
        pathTargets = answeredBy.map { [targets[$0]] } ?? targets
        restored = prefix.hasSuffix("/") ? String(prefix.dropLast()) : prefix
    }

    /// A Location or Content-Location value (RFC 9110 §10.2.2, §8.7): an absolute URL naming an
    /// endpoint's origin and base path becomes one naming `publicOrigin` (a path alone when that is
    /// unknown); a path starting with the base path loses it. The stripped prefix goes back in front.
    /// Anything else is left as it is.
    func location(_ value: String, publicOrigin: String?) -> String {
        let bytes = Array(value.utf8)
        for t in targets {
            // `http://backend` is a byte prefix of `http://backend-2/x`: a prefix that does not end
            // at the authority's end (or under the base path) is another origin; the next is tried.
            for origin in t.origins where Self.hasPrefixFolded(bytes, origin) {
                guard let rest = Self.stripBase(bytes[origin.count...], t.basePath) else { continue }
                return (publicOrigin ?? "") + restored + rest
            }
        }
        // A path-absolute reference; `//host` is scheme-relative and was handled above.
        guard bytes.first == UInt8(ascii: "/") && !(bytes.count > 1 && bytes[1] == UInt8(ascii: "/")) else { return value }
        return path(bytes[...]) ?? value
    }

    /// A path the upstream names, as the client must see it: without an endpoint's base path and
    /// with the stripped prefix; nil when it is not under any endpoint's base path (left as it is).
    private func path(_ bytes: ArraySlice<UInt8>) -> String? {
        var bare = false
        for t in pathTargets {
            if t.basePath.isEmpty { bare = true; continue }
            if let rest = Self.stripBase(bytes, t.basePath) { return restored + rest }
        }
        return bare && !restored.isEmpty ? restored + String(decoding: bytes, as: UTF8.self) : nil
    }

    /// A Refresh value (`5; url=…`, a de-facto field from HTML's meta refresh): its URL is rewritten as Location is.
    func refresh(_ value: String, publicOrigin: String?) -> String {
        guard let r = value.range(of: "url=", options: .caseInsensitive) else { return value }
        return String(value[..<r.upperBound]) + location(String(value[r.upperBound...]), publicOrigin: publicOrigin)
    }

    /// A Set-Cookie value (RFC 6265 §4.1): a Path at or under the base path loses the base path (and
    /// gets the stripped prefix), and a Domain naming an endpoint's host is dropped, so the cookie
    /// lands on Peel's own host and paths.
    func setCookie(_ value: String) -> String {
        var parts = value.split(separator: ";", omittingEmptySubsequences: false).map(String.init)
        guard parts.count > 1 else { return value }
        var changed = false
        var i = 1
        while i < parts.count {
            let attribute = trimOWS(parts[i])
            let eq = attribute.firstIndex(of: "=") ?? attribute.endIndex
            let name = attribute[..<eq].trimmingOWS().lowercased()
            let attributeValue = eq == attribute.endIndex ? "" : trimOWS(attribute[attribute.index(after: eq)...])
            if name == "path", attributeValue.hasPrefix("/"), let rest = path(Array(attributeValue.utf8)[...]) {
                parts[i] = " Path=" + rest
                changed = true
            } else if name == "domain" {
                var domain = attributeValue.lowercased()
                // RFC 6265 §5.2.3: a leading dot is ignored.
                if domain.hasPrefix(".") { domain.removeFirst() }
                if targets.contains(where: { domain == $0.host || "[\(domain)]" == $0.host || domain == "[\($0.host)]" }) {
                    parts.remove(at: i)
                    changed = true
                    continue
                }
            }
            i += 1
        }
        return changed ? parts.joined(separator: ";") : value
    }

    /// `path` without `basePath` when it starts with it at a segment boundary (`/api/v1`, `/api/v1/x`,
    /// `/api/v1?q`), always starting with `/`; nil when it does not.
    private static func stripBase(_ path: ArraySlice<UInt8>, _ basePath: String) -> String? {
        let base = Array(basePath.utf8)
        guard path.starts(with: base) else { return nil }
        let rest = path.dropFirst(base.count)
        guard let next = rest.first else { return "/" }
        switch next {
        case UInt8(ascii: "/"): return String(decoding: rest, as: UTF8.self)
        case UInt8(ascii: "?"), UInt8(ascii: "#"): return "/" + String(decoding: rest, as: UTF8.self)
        default: return nil
        }
    }

    /// Whether `bytes` starts with `lowercasedPrefix`, ignoring ASCII case (scheme and host are
    /// case-insensitive, RFC 3986 §6.2.2.1).
    private static func hasPrefixFolded(_ bytes: [UInt8], _ lowercasedPrefix: [UInt8]) -> Bool {
        guard bytes.count >= lowercasedPrefix.count else { return false }
        for (i, p) in lowercasedPrefix.enumerated() {
            let b = bytes[i]
            if (b &- UInt8(ascii: "A") < 26 ? b | 0x20 : b) != p { return false }
        }
        return true
    }

    /// Peel's own origin as the client named it: `X-Forwarded-Proto` (http or https, else http) and
    /// `X-Forwarded-Host` or `Host` (RFC 9110 §7.2); nil when no usable host was sent.
    static func publicOrigin(host: String?, forwardedProto: String?, forwardedHost: String?) -> String? {
        func first(_ v: String?) -> String? {
            guard let v, let f = v.split(separator: ",").first else { return nil }
            let t = trimOWS(f)
            return t.isEmpty ? nil : t
        }
        guard let authority = first(forwardedHost) ?? first(host) else { return nil }
        // An authority is host[:port]: anything that could end it or smuggle a path is refused.
        for b in authority.utf8 where b <= 0x20 || b >= 0x7F || b == UInt8(ascii: "/") || b == UInt8(ascii: "\\")
            || b == UInt8(ascii: "@") || b == UInt8(ascii: "?") || b == UInt8(ascii: "#") || b == UInt8(ascii: "\"") {
            return nil
        }
        let proto = first(forwardedProto)?.lowercased()
        return (proto == "https" ? "https" : "http") + "://" + authority
    }
}

extension Substring {
    /// The substring without optional whitespace at either end (RFC 9110 §5.6.3).
    fileprivate func trimmingOWS() -> String { trimOWS(self) }
}

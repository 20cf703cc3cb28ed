import Foundation

/// Rewrites upstream URLs and cookies so they name Peel instead of the upstream, as nginx's
/// `proxy_redirect default`, `proxy_cookie_path` and `proxy_cookie_domain` do. Pure.
struct ProxyRewrite: Sendable {
    /// The upstream's base path without a trailing slash ("" for none), e.g. `/api/v1`.
    let basePath: String
    /// The upstream's host, lowercased, without brackets.
    let host: String
    /// Lowercased `scheme://authority` spellings of the upstream origin (with and without the
    /// default port), and `//authority` for scheme-relative references (RFC 3986 §4.2).
    private let origins: [String]

    init(upstream: UpstreamURL) {
        basePath = upstream.basePath
        host = upstream.host.lowercased()
        let h = host.contains(":") ? "[\(host)]" : host
        let defaultPort = upstream.scheme == "https" ? 443 : 80
        let port = upstream.port ?? defaultPort
        var authorities = ["\(h):\(port)"]
        if port == defaultPort { authorities.append(h) }
        origins = authorities.map { "\(upstream.scheme)://\($0)" } + authorities.map { "//\($0)" }
    }

    /// A Location or Content-Location value (RFC 9110 §10.2.2, §8.7): an absolute URL naming the
    /// upstream origin and base path becomes one naming `publicOrigin` (a path alone when that is
    /// unknown); a path starting with the base path loses it. Anything else is left as it is.
    func location(_ value: String, publicOrigin: String?) -> String {
        let bytes = Array(value.utf8)
        for origin in origins where Self.hasPrefixFolded(bytes, Array(origin.utf8)) {
            guard let rest = stripBase(bytes[origin.utf8.count...]) else { return value }
            return (publicOrigin ?? "") + rest
        }
        // A path-absolute reference; `//host` is scheme-relative and was handled above.
        if bytes.first == UInt8(ascii: "/") && !(bytes.count > 1 && bytes[1] == UInt8(ascii: "/")) && !basePath.isEmpty {
            return stripBase(bytes[...]) ?? value
        }
        return value
    }

    /// A Refresh value (`5; url=…`, a de-facto field from HTML's meta refresh): its URL is rewritten as Location is.
    func refresh(_ value: String, publicOrigin: String?) -> String {
        guard let r = value.range(of: "url=", options: .caseInsensitive) else { return value }
        return String(value[..<r.upperBound]) + location(String(value[r.upperBound...]), publicOrigin: publicOrigin)
    }

    /// A Set-Cookie value (RFC 6265 §4.1): a Path at or under the base path loses the base path, and
    /// a Domain naming the upstream host is dropped, so the cookie lands on Peel's own host and paths.
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
            if name == "path", !basePath.isEmpty, let rest = stripBase(Array(attributeValue.utf8)[...]) {
                parts[i] = " Path=" + rest
                changed = true
            } else if name == "domain" {
                var domain = attributeValue.lowercased()
                // RFC 6265 §5.2.3: a leading dot is ignored.
                if domain.hasPrefix(".") { domain.removeFirst() }
                if domain == host || "[\(domain)]" == host || domain == "[\(host)]" {
                    parts.remove(at: i)
                    changed = true
                    continue
                }
            }
            i += 1
        }
        return changed ? parts.joined(separator: ";") : value
    }

    /// `path` without the base path when it starts with it at a segment boundary (`/api/v1`, `/api/v1/x`,
    /// `/api/v1?q`), always starting with `/`; nil when it does not.
    private func stripBase(_ path: ArraySlice<UInt8>) -> String? {
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

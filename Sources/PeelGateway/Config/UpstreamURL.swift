/// The upstream base URL, split once at load time.
public struct UpstreamURL: Sendable, Equatable, CustomStringConvertible {
    /// `http` or `https`.
    public var scheme: String
    /// Host name or address (IPv6 without brackets).
    public var host: String
    /// Explicit port, or nil for the scheme's default.
    public var port: Int?
    /// Base path without a trailing slash ("" for none), e.g. `/v1`.
    public var basePath: String

    /// `scheme://host[:port]` with brackets around IPv6 hosts.
    public var origin: String {
        let h = host.contains(":") ? "[\(host)]" : host
        return port.map { "\(scheme)://\(h):\($0)" } ?? "\(scheme)://\(h)"
    }

    /// The authority as sent in Host.
    public var authority: String {
        let h = host.contains(":") ? "[\(host)]" : host
        return port.map { "\(h):\($0)" } ?? h
    }

    public var description: String { origin + basePath }

    /// Parses an absolute http(s) URL; the error names what is wrong.
    public static func parse(_ text: String) -> Result<UpstreamURL, UpstreamURLError> {
        let lower = text.lowercased()
        let scheme: String
        if lower.hasPrefix("http://") { scheme = "http" } else if lower.hasPrefix("https://") { scheme = "https" } else {
            return .failure(UpstreamURLError(reason: "must start with http:// or https://"))
        }
        let rest = text.dropFirst(scheme.count + 3)
        if rest.contains("?") || rest.contains("#") { return .failure(UpstreamURLError(reason: "must not carry a query or fragment")) }
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<slash]
        var path = String(rest[slash...])
        if authority.isEmpty { return .failure(UpstreamURLError(reason: "has no host")) }
        if authority.contains("@") { return .failure(UpstreamURLError(reason: "must not carry user information")) }
        var host: Substring
        var port: Int? = nil
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return .failure(UpstreamURLError(reason: "has an unclosed IPv6 bracket")) }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let p = Int(after.dropFirst()) else { return .failure(UpstreamURLError(reason: "has a bad port")) }
                port = p
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            guard let p = Int(authority[authority.index(after: colon)...]) else { return .failure(UpstreamURLError(reason: "has a bad port")) }
            port = p
        } else {
            host = authority
        }
        if let p = port, !(1...65535).contains(p) { return .failure(UpstreamURLError(reason: "port must be 1-65535")) }
        if host.isEmpty { return .failure(UpstreamURLError(reason: "has no host")) }
        for c in host.utf8 where c <= 0x20 || c == 0x7F || c == UInt8(ascii: "/") || c == UInt8(ascii: "\\") {
            return .failure(UpstreamURLError(reason: "has an invalid host"))
        }
        while path.hasSuffix("/") { path.removeLast() }
        for c in path.utf8 where c <= 0x20 || c == 0x7F { return .failure(UpstreamURLError(reason: "has a control character or space in its path")) }
        return .success(UpstreamURL(scheme: scheme, host: String(host), port: port, basePath: path))
    }
}

/// Why an upstream URL was refused.
public struct UpstreamURLError: Error, Sendable {
    /// What is wrong, as a phrase.
    public let reason: String
}

/// What the forwarder decided about a request before any upstream work.
enum RequestCheck: Equatable {
    /// Forward to `path` (with `query`, no leading `?`).
    case forward(path: String, query: String?)
    /// Refuse with 400 and this detail.
    case refuse(String)
}

/// Request-target and header rules (RFC 9110, RFC 9112); pure, so tests reach them without sockets.
enum RequestPolicy {
    /// Hop-by-hop fields never forwarded (RFC 9110 §7.6.1), plus ones Peel sets itself.
    static let droppedRequestHeaders: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
        "proxy-authorization", "host", "content-length", "expect", "accept-encoding",
        "x-forwarded-proto", "x-forwarded-host", "x-forwarded-for", "x-request-id",
    ]

    /// Upstream response fields not passed to the client: hop-by-hop, and those describing the envelope bytes.
    static let droppedResponseHeaders: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
        "proxy-authenticate", "content-length", "content-encoding", "content-md5", "x-request-id",
    ]

    /// Checks method and target; returns the path and query to forward or why to refuse.
    static func check(method: String, target: String, selfAuthorities: Set<String>) -> RequestCheck {
        if method == "CONNECT" { return .refuse("CONNECT is not forwarded: Peel only talks to its configured upstream") }
        if method == "TRACE" { return .refuse("TRACE is not forwarded") }
        var origin = Substring(target)
        if !target.hasPrefix("/") {
            // Absolute-form (RFC 9112 §3.2.2) is accepted only when it names Peel's own listener:
            // anything else is a client using Peel as a forward proxy.
            guard let schemeEnd = target.range(of: "://") else {
                return .refuse("request target must be an absolute path")
            }
            let scheme = target[..<schemeEnd.lowerBound].lowercased()
            guard scheme == "http" || scheme == "https" else { return .refuse("request target has an unsupported scheme") }
            let afterScheme = target[schemeEnd.upperBound...]
            let slash = afterScheme.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? afterScheme.endIndex
            let authority = afterScheme[..<slash]
            guard selfAuthorities.contains(authority.lowercased()) else {
                return .refuse("absolute-form target names another host; Peel only forwards to its upstream")
            }
            origin = afterScheme[slash...]
            if origin.isEmpty { origin = "/" }
            if origin.hasPrefix("?") { return .forward(path: "/", query: String(origin.dropFirst())) }
        }
        for b in origin.utf8 where b <= 0x20 || b == 0x7F || b == UInt8(ascii: "#") {
            if b == UInt8(ascii: "#") { return .refuse("request target must not carry a fragment") }
            return .refuse("request target contains a control character or space")
        }
        let path: Substring
        let query: Substring?
        if let q = origin.utf8.firstIndex(of: UInt8(ascii: "?")) {
            path = origin[..<q]
            query = origin[origin.index(after: q)...]
        } else {
            path = origin
            query = nil
        }
        if climbsAboveRoot(path) { return .refuse("path climbs above the upstream base path") }
        return .forward(path: String(path), query: query.map(String.init))
    }

    /// True when dot-segments (also percent-encoded, or with backslashes some servers treat as
    /// slashes) would take the path above its root (RFC 3986 §5.2.4).
    static func climbsAboveRoot(_ path: Substring) -> Bool {
        // Only '.', '%' (an encoded dot or slash) and a backslash can make a dot-segment; most paths have none
        // (callgrind: the walk below was ~4.8k instructions of a ~140k /small request).
        if !path.utf8.contains(where: { $0 == 0x2E || $0 == 0x25 || $0 == 0x5C }) { return false }
        var depth = 0
        var segment: [UInt8] = []
        var bytes = Array(path.utf8)
        bytes.append(UInt8(ascii: "/"))
        var i = 1  // skip the leading slash
        while i < bytes.count {
            var b = bytes[i]
            if b == UInt8(ascii: "%"), i + 2 < bytes.count {
                let pair = (bytes[i + 1] | 0x20, bytes[i + 2] | 0x20)
                if pair == (UInt8(ascii: "2"), UInt8(ascii: "e")) { b = UInt8(ascii: "."); i += 2 }
                else if pair == (UInt8(ascii: "2"), UInt8(ascii: "f")) || pair == (UInt8(ascii: "5"), UInt8(ascii: "c")) {
                    b = UInt8(ascii: "/"); i += 2
                }
            }
            if b == UInt8(ascii: "\\") { b = UInt8(ascii: "/") }
            if b == UInt8(ascii: "/") {
                if segment == [0x2E, 0x2E] {
                    depth -= 1
                    if depth < 0 { return true }
                } else if segment != [0x2E] {
                    depth += 1
                }
                segment.removeAll(keepingCapacity: true)
            } else {
                segment.append(b)
            }
            i += 1
        }
        return false
    }

    /// A client-supplied X-Request-Id is kept when it is short visible ASCII without quotes or backslashes.
    static func acceptableRequestId(_ id: String) -> Bool {
        guard (1...128).contains(id.utf8.count) else { return false }
        for b in id.utf8 where b < 0x21 || b > 0x7E || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") { return false }
        return true
    }
}

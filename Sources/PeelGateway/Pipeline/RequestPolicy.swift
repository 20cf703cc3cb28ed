import Glibc
import PeelIO

/// What the forwarder decided about a request before any upstream work.
enum RequestCheck: Equatable {
    /// Forward to `path` (with `query`, no leading `?`); `authority` is an absolute-form target's
    /// (one of Peel's own), nil for origin-form.
    case forward(path: String, query: String?, authority: String? = nil)
    /// Refuse with 400 and this detail.
    case refuse(String)
}

/// Request-target and header rules (RFC 9110, RFC 9112); pure, so tests reach them without sockets.
enum RequestPolicy {
    /// Hop-by-hop fields never forwarded (RFC 9110 §7.6.1), plus ones Peel sets itself.
    static let droppedRequestFields = FieldSet.hopByHop.union(FieldSet([
        .proxyAuthorization, .host, .contentLength, .expect, .acceptEncoding,
        .xForwardedProto, .xForwardedHost, .xForwardedFor, .xRequestId, .forwarded,
    ]))

    /// Fields a proxy writes about the hop it took the request on, never relayed: like
    /// X-Forwarded-Proto and -Host they would be this hop's, and Peel writes none of them. Relayed
    /// beside Peel's X-Forwarded-Host they would describe another hop (Spring's
    /// `ForwardedHeaderFilter` takes X-Forwarded-Port over the host's port, and X-Forwarded-Ssl over
    /// the proto), so a client could steer the upstream's absolute URLs.
    static let hopFieldNames = ["x-forwarded-port", "x-forwarded-ssl", "x-forwarded-scheme", "x-forwarded-server"]
    /// Fields naming the client, or the prefix a proxy took off the path, believed only from a
    /// trusted proxy: when X-Forwarded-For is missing, RuoYi's `IpUtils` reads X-Real-IP,
    /// Proxy-Client-IP and WL-Proxy-Client-IP, and Hutool's `getClientIP` HTTP_CLIENT_IP and
    /// HTTP_X_FORWARDED_FOR; Spring reads X-Forwarded-Prefix.
    static let clientFieldNames = ["x-forwarded-prefix", "x-real-ip", "proxy-client-ip", "wl-proxy-client-ip",
                                   "true-client-ip", "x-client-ip", "x-cluster-client-ip", "client-ip",
                                   "http_client_ip", "http_x_forwarded_for", "x-forwarded", "forwarded-for",
                                   "x-original-forwarded-for"]
    /// The fields dropped by name: the hop fields; the client-naming ones unless the peer is a
    /// trusted proxy; a trusted proxy's X-Forwarded-Prefix on a route that strips its prefix (Peel
    /// writes none of its own, and the proxy's alone would name a prefix without the one Peel took
    /// off); and those the request's Connection field names. The three usual sets are made once.
    static func droppedByName(trusted: Bool, stripping: Bool, connectionNamed: [String]) -> HeaderNameSet {
        let names = !trusted ? untrustedNames : stripping ? trustedStrippingNames : hopFieldNames
        guard connectionNamed.isEmpty else { return HeaderNameSet(names + connectionNamed) }
        return !trusted ? droppedFromUntrusted : stripping ? droppedFromTrustedStripping : droppedFromTrusted
    }
    private static let untrustedNames = hopFieldNames + clientFieldNames
    private static let trustedStrippingNames = hopFieldNames + ["x-forwarded-prefix"]
    private static let droppedFromTrusted = HeaderNameSet(hopFieldNames)
    private static let droppedFromTrustedStripping = HeaderNameSet(trustedStrippingNames)
    private static let droppedFromUntrusted = HeaderNameSet(untrustedNames)

    /// True for a traceparent in the W3C Trace Context form (§3.2.2): `00-` 32 lowercase hex (not all
    /// zeros) `-` 16 lowercase hex (not all zeros) `-` 2 lowercase hex, exactly 55 bytes for version 00;
    /// a later version (not `ff`) may carry more after a `-` at byte 55 (§3.2.4). Anything else, a
    /// 60 KB value included, is dropped rather than passed on.
    static func isTraceparent(_ v: [UInt8]) -> Bool {
        guard v.count >= 55 else { return false }
        func hex(_ range: Range<Int>) -> Bool {
            range.allSatisfy { (v[$0] >= 0x30 && v[$0] <= 0x39) || (v[$0] >= 0x61 && v[$0] <= 0x66) }
        }
        func zeros(_ range: Range<Int>) -> Bool { range.allSatisfy { v[$0] == 0x30 } }
        guard hex(0..<2), v[2] == 0x2D, hex(3..<35), v[35] == 0x2D, hex(36..<52), v[52] == 0x2D, hex(53..<55) else { return false }
        guard !zeros(3..<35), !zeros(36..<52) else { return false }
        let version = (v[0], v[1])
        if version == (0x66, 0x66) { return false }
        if version == (0x30, 0x30) { return v.count == 55 }
        return v.count == 55 || (v[55] == 0x2D && v.count <= 512)
    }

    /// Checks method and target; returns the path and query to forward or why to refuse.
    static func check(method: String, target: String, selfAuthorities: Set<String>) -> RequestCheck {
        if method == "CONNECT" { return .refuse("CONNECT is not forwarded: Peel only talks to its configured upstream") }
        if method == "TRACE" { return .refuse("TRACE is not forwarded") }
        var origin = Substring(target)
        var named: String? = nil
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
            named = String(authority)
            origin = afterScheme[slash...]
            if origin.isEmpty { origin = "/" }
            if origin.hasPrefix("?") { return .forward(path: "/", query: String(origin.dropFirst()), authority: named) }
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
        if hasOverlongUTF8(path) { return .refuse("path holds an overlong UTF-8 encoding") }
        if climbsAboveRoot(path) { return .refuse("path climbs above the upstream base path") }
        return .forward(path: String(path), query: query.map(String.init), authority: named)
    }

    /// True when dot-segments (also percent-encoded, or with backslashes some servers treat as
    /// slashes) would take the path above its root (RFC 3986 §5.2.4). A segment is read up to its
    /// first `;`, as Tomcat and Spring strip path parameters before resolving dot-segments: for them
    /// `..;x` is `..`.
    static func climbsAboveRoot(_ path: Substring) -> Bool {
        // Only '.', '%' (an encoded dot or slash) and a backslash can make a dot-segment; most paths have none
        // (callgrind: the walk below was ~4.8k instructions of a ~140k /small request).
        if !path.utf8.contains(where: { $0 == 0x2E || $0 == 0x25 || $0 == 0x5C }) { return false }
        var depth = 0
        var climbs = false
        walkSegments(path) { _, kind, _ in
            switch kind {
            case .dotDot:
                depth -= 1
                if depth < 0 { climbs = true; return false }
            case .dot: break
            case .name: depth += 1
            }
            return true
        }
        return climbs
    }

    /// The path with its dot-segments resolved (RFC 3986 §5.2.4), read as `climbsAboveRoot` reads
    /// them; nil when it has none. Only routes read it: a call must take the route of the path its
    /// upstream will resolve.
    static func resolvingDotSegments(_ path: String) -> String? {
        // A dot-segment starts with `.` or an encoded one right after a slash (`/`, `\`, `%2f`,
        // `%5c`): most paths with dots (`/app.js`) have none, and cost no more than this scan.
        if !Self.mayHoldDotSegment(path) { return nil }
        var kept: [ArraySlice<UInt8>] = []
        var sawDots = false
        // Whether the last segment read was a dot-segment: the path then names a directory.
        var endsInDots = false
        walkSegments(Substring(path)) { raw, kind, last in
            switch kind {
            case .dotDot:
                sawDots = true
                if !kept.isEmpty { kept.removeLast() }
                endsInDots = last
            case .dot:
                sawDots = true
                endsInDots = last
            case .name:
                kept.append(raw)
                endsInDots = false
            }
            return true
        }
        guard sawDots else { return nil }
        // The kept segments joined; an empty last one is a trailing slash already.
        var out = "/" + kept.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "/")
        if endsInDots && !kept.isEmpty && !(kept.last?.isEmpty ?? true) { out += "/" }
        return out
    }

    private enum SegmentKind { case name, dot, dotDot }

    /// Walks the segments of `path` after its leading slash as lenient upstreams read them: `%2e` is
    /// a dot, `%2f`, `%5c` and a backslash separate segments, and a segment's name ends at its first
    /// `;` (or `%3b`), as Tomcat and Spring strip path parameters before resolving dot-segments (for
    /// them `..;x` is `..`). `visit` gets each segment's bytes as sent, its kind and whether it is the
    /// last; it returns false to stop.
    private static func walkSegments(_ path: Substring, _ visit: (ArraySlice<UInt8>, SegmentKind, Bool) -> Bool) {
        var name: [UInt8] = []
        var bytes = Array(path.utf8)
        bytes.append(UInt8(ascii: "/"))
        var start = 1
        var i = 1  // skip the leading slash
        while i < bytes.count {
            let at = i
            var b = bytes[i]
            if b == UInt8(ascii: "%"), i + 2 < bytes.count {
                let pair = (bytes[i + 1] | 0x20, bytes[i + 2] | 0x20)
                if pair == (UInt8(ascii: "2"), UInt8(ascii: "e")) { b = UInt8(ascii: "."); i += 2 }
                else if pair == (UInt8(ascii: "2"), UInt8(ascii: "f")) || pair == (UInt8(ascii: "5"), UInt8(ascii: "c")) {
                    b = UInt8(ascii: "/"); i += 2
                }
                else if pair == (UInt8(ascii: "3"), UInt8(ascii: "b")) { b = UInt8(ascii: ";"); i += 2 }
            }
            if b == UInt8(ascii: "\\") { b = UInt8(ascii: "/") }
            if b == UInt8(ascii: "/") {
                let bare = name.firstIndex(of: UInt8(ascii: ";")).map { name[..<$0] } ?? name[...]
                let kind: SegmentKind = bare.elementsEqual([0x2E, 0x2E]) ? .dotDot : bare.elementsEqual([0x2E]) ? .dot : .name
                if !visit(bytes[start..<at], kind, i == bytes.count - 1) { return }
                name.removeAll(keepingCapacity: true)
                start = i + 1
            } else {
                name.append(b)
            }
            i += 1
        }
    }

    /// Whether `path` may hold a dot-segment: a `.` (or `%2e`) right after a slash (or `\`, `%2f`, `%5c`).
    private static func mayHoldDotSegment(_ path: String) -> Bool {
        var path = path
        return path.withUTF8 { b in
            var i = 0
            while i < b.count {
                var afterSlash = -1
                if b[i] == 0x2F || b[i] == 0x5C { afterSlash = i + 1 }
                else if b[i] == 0x25, i + 2 < b.count, b[i + 1] == 0x32 || b[i + 1] == 0x35,
                        (b[i + 2] | 0x20) == 0x66 || (b[i + 2] | 0x20) == 0x63 { afterSlash = i + 3 }
                if afterSlash >= 0 && afterSlash < b.count {
                    if b[afterSlash] == 0x2E { return true }
                    if b[afterSlash] == 0x25, afterSlash + 2 < b.count, b[afterSlash + 1] == 0x32, (b[afterSlash + 2] | 0x20) == 0x65 { return true }
                }
                i += 1
            }
            return false
        }
    }

    /// True when the path, raw or percent-decoded, holds an overlong UTF-8 form (`%c0%ae` for `.`,
    /// `%e0%80%af` for `/`, `%c1%9c` for a backslash…). Such forms are invalid UTF-8 (RFC 3629 §3: a decoder
    /// must not accept them), yet IIS-style and lenient decoders turn them into dot-segments and
    /// slashes that the dot-segment rule above never saw; no legitimate client sends them.
    static func hasOverlongUTF8(_ path: Substring) -> Bool {
        // Only '%' or a byte above 0x7F can start one.
        if !path.utf8.contains(where: { $0 == 0x25 || $0 >= 0x80 }) { return false }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(path.utf8.count)
        var bytes = path.utf8.makeIterator()
        while let b = bytes.next() {
            guard b == 0x25 else { decoded.append(b); continue }
            guard let h = bytes.next(), let l = bytes.next(), let hi = hexValue(h), let lo = hexValue(l) else { return false }
            decoded.append(hi << 4 | lo)
        }
        for i in decoded.indices {
            let b = decoded[i]
            // C0 and C1 lead only overlong two-byte forms of ASCII.
            if b == 0xC0 || b == 0xC1 { return true }
            guard i + 1 < decoded.count else { break }
            let next = decoded[i + 1]
            // E0 80..9F and F0 80..8F are three- and four-byte forms of what fits in fewer bytes.
            if b == 0xE0 && next & 0xE0 == 0x80 { return true }
            if b == 0xF0 && next & 0xF0 == 0x80 { return true }
        }
        return false
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x41...0x46: return c - 0x37
        case 0x61...0x66: return c - 0x57
        default: return nil
        }
    }

    /// Why a Host value is refused, or nil. RFC 9112 §3.2 answers 400 to a Host that is not
    /// `uri-host [":" port]` (RFC 9110 §7.2), with uri-host = IP-literal / IPv4address / reg-name
    /// (RFC 3986 §3.2.2). The port must have digits: RFC 3986 §3.2.3 lets it be empty, but such a
    /// Host names nothing a client means, and it would reach rewritten URLs and X-Forwarded-Host.
    /// §4.2.4 of RFC 9110 forbids userinfo in http(s) URIs (`user:pw@evil.example`).
    static func hostProblem(_ host: String) -> String? {
        // A native String's bytes in place: no copy for the Host every request carries.
        var text = host
        return text.withUTF8 { hostProblem($0) }
    }

    private static func hostProblem(_ b: UnsafeBufferPointer<UInt8>) -> String? {
        if b.contains(UInt8(ascii: "@")) { return "Host must not carry userinfo" }
        var i = 0
        if b.first == UInt8(ascii: "[") {
            // IP-literal = "[" ( IPv6address / IPvFuture ) "]"
            guard let close = b.firstIndex(of: UInt8(ascii: "]")) else { return "Host has an unclosed IP literal" }
            guard ipLiteral(UnsafeBufferPointer(rebasing: b[1..<close])) else { return "Host has an invalid IP literal" }
            i = close + 1
        } else {
            // reg-name = *( unreserved / pct-encoded / sub-delims ); an IPv4address is one too. An
            // http URI's host is never empty (RFC 9110 §4.2.1), so `:80` alone is refused (an empty
            // Host field, RFC 9112 §3.2's for a target without authority, stays allowed).
            if b.first == UInt8(ascii: ":") { return "Host is not a host and port" }
            while i < b.count && b[i] != UInt8(ascii: ":") {
                if b[i] == UInt8(ascii: "%") {
                    guard i + 2 < b.count, isHex(b[i + 1]), isHex(b[i + 2]) else { return "Host is not a host and port" }
                    i += 3
                    continue
                }
                guard isUnreserved(b[i]) || isSubDelim(b[i]) else { return "Host is not a host and port" }
                i += 1
            }
        }
        if i == b.count { return nil }
        // port = 1*DIGIT after one colon, and nothing else.
        guard b[i] == UInt8(ascii: ":"), i + 1 < b.count else { return "Host is not a host and port" }
        for d in b[(i + 1)...] where !(0x30...0x39).contains(d) { return "Host is not a host and port" }
        return nil
    }

    /// IPv6address (inet_pton's grammar) or IPvFuture = "v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" ).
    private static func ipLiteral(_ b: UnsafeBufferPointer<UInt8>) -> Bool {
        if let v = b.first, v | 0x20 == UInt8(ascii: "v") {
            guard let dot = b.firstIndex(of: UInt8(ascii: ".")), dot > 1, dot + 1 < b.count else { return false }
            return b[1..<dot].allSatisfy(isHex) && b[(dot + 1)...].allSatisfy { isUnreserved($0) || isSubDelim($0) || $0 == UInt8(ascii: ":") }
        }
        guard !b.isEmpty, b.count < 46, b.allSatisfy({ isHex($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }) else { return false }
        var address = in6_addr()
        return inet_pton(AF_INET6, String(decoding: b, as: UTF8.self), &address) == 1
    }

    private static func isHex(_ c: UInt8) -> Bool { hexValue(c) != nil }

    // unreserved = ALPHA / DIGIT / "-" / "." / "_" / "~" (RFC 3986 §2.3)
    private static func isUnreserved(_ c: UInt8) -> Bool {
        switch c {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, 0x2D, 0x2E, 0x5F, 0x7E: return true
        default: return false
        }
    }

    // sub-delims = "!" / "$" / "&" / "'" / "(" / ")" / "*" / "+" / "," / ";" / "=" (RFC 3986 §2.2)
    private static func isSubDelim(_ c: UInt8) -> Bool {
        switch c {
        case 0x21, 0x24, 0x26...0x2C, 0x3B, 0x3D: return true
        default: return false
        }
    }

    /// A client-supplied X-Request-Id is kept when it is short visible ASCII without quotes or backslashes.
    static func acceptableRequestId(_ id: String) -> Bool {
        guard (1...128).contains(id.utf8.count) else { return false }
        for b in id.utf8 where b < 0x21 || b > 0x7E || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") { return false }
        return true
    }
}

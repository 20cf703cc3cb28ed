import Glibc

/// Which route a call takes: a pure function of its Host and path, decided right after parsing.
///
/// A route without a host applies to every host. Among the routes that apply, the longest prefix
/// wins (a plain byte prefix of the path); at equal prefix an exact host beats a wildcard, which
/// beats no host, and a longer wildcard beats a shorter one. List order decides nothing. Hosts are
/// matched without case and port; `*.example.com` matches any name ending in `.example.com` (one or
/// more labels), never `example.com` itself.
struct RouteTable<Target> {
    /// How a route's host is matched.
    enum HostMatch: Equatable {
        case any
        /// A lowercased name.
        case exact([UInt8])
        /// A lowercased suffix with its leading dot (`.example.com`).
        case wildcard([UInt8])

        /// Exact beats wildcard beats any; a longer wildcard beats a shorter one.
        var rank: Int {
            switch self {
            case .any: 0
            case .wildcard(let s): 1 + s.count
            case .exact: Int.max
            }
        }

        init(_ pattern: String?) {
            guard let p = pattern?.lowercased() else { self = .any; return }
            if p.hasPrefix("*.") { self = .wildcard(Array(p.utf8.dropFirst())) } else { self = .exact(Array(p.utf8)) }
        }

        /// Whether `host` (lowercased, without port) matches.
        func matches(_ host: ArraySlice<UInt8>) -> Bool {
            switch self {
            case .any: return true
            case .exact(let name): return host.elementsEqual(name)
            case .wildcard(let suffix):
                // At least one label before the suffix: `.example.com` alone is not a name under it.
                return host.count > suffix.count && host.suffix(suffix.count).elementsEqual(suffix)
            }
        }
    }

    struct Entry {
        let host: HostMatch
        let prefix: [UInt8]
        let target: Target
    }

    /// In the order they are tried: longest prefix first, then the most specific host.
    private let entries: [Entry]
    /// Whether any route names a host: only then is the request's Host read.
    private let needsHost: Bool
    /// Every entry's prefix bytes, one after another, and where each starts and how long it is: the
    /// scan reads them in place (a loop over `entries` retained each entry's arrays: 44
    /// instructions an entry, 2.2k of a /small request with 50 routes, by callgrind).
    private let flat: [UInt8]
    private let starts: [Int]
    private let lengths: [Int]

    init(_ routes: [(host: String?, prefix: String, target: Target)]) {
        let built = routes.map { Entry(host: HostMatch($0.host), prefix: Array($0.prefix.utf8), target: $0.target) }
        entries = built.enumerated().sorted { a, b in
            if a.element.prefix.count != b.element.prefix.count { return a.element.prefix.count > b.element.prefix.count }
            if a.element.host.rank != b.element.host.rank { return a.element.host.rank > b.element.host.rank }
            return a.offset < b.offset
        }.map(\.element)
        needsHost = built.contains { $0.host != .any }
        var flat: [UInt8] = []
        var starts: [Int] = []
        for e in entries {
            starts.append(flat.count)
            flat += e.prefix
        }
        self.flat = flat
        self.starts = starts
        lengths = entries.map(\.prefix.count)
    }

    /// The route for a request with Host `host` (as sent; nil when absent) and `path` (the
    /// origin-form path, without the query); nil when none applies.
    func choose(host: String?, path: String) -> Target? {
        let name = needsHost ? Self.hostName(host) : []
        var path = path
        let found: Int? = path.withUTF8 { p in
            flat.withUnsafeBufferPointer { f in
                starts.withUnsafeBufferPointer { start in
                    lengths.withUnsafeBufferPointer { length in
                        for i in 0..<length.count where length[i] <= p.count {
                            let n = length[i], s = start[i]
                            // Every prefix starts with `/`: its second byte rejects most at once.
                            if n > 1 && f[s + 1] != p[1] { continue }
                            guard memcmp(p.baseAddress!, f.baseAddress! + s, n) == 0 else { continue }
                            if entries[i].host.matches(name[...]) { return i }
                        }
                        return nil
                    }
                }
            }
        }
        return found.map { entries[$0].target }
    }

    /// A Host value in the form route hosts are written in (RFC 9110 §7.2, §4.2.3; RFC 3986 §6.2.2):
    /// lowercased, without its port and any trailing dot, escapes of unreserved characters decoded
    /// (`%61pi` is `api`), and an IPv6 literal in its one text form (RFC 5952), brackets kept:
    /// `[0:0:0:0:0:0:0:1]` is `[::1]`, as `RoutingConfig.hostPattern` writes a route's.
    static func hostName(_ host: String?) -> [UInt8] {
        guard let host else { return [] }
        var bytes = Array(host.utf8)
        if bytes.first == 0x5B {
            if let close = bytes.firstIndex(of: 0x5D) {
                bytes.removeSubrange((close + 1)...)
                if let canonical = canonicalIPv6(bytes[1..<close]) { return canonical }
            }
        } else if let colon = bytes.lastIndex(of: 0x3A) {
            bytes.removeSubrange(colon...)
        }
        var escaped = false
        for i in bytes.indices {
            if bytes[i] &- 0x41 < 26 { bytes[i] |= 0x20 } else if bytes[i] == 0x25 { escaped = true }
        }
        if escaped { bytes = decodingUnreserved(bytes) }
        if bytes.last == 0x2E { bytes.removeLast() }
        return bytes
    }

    /// `[` the RFC 5952 text of the IPv6 address in `text` (lowercase hex, the longest run of zero
    /// groups as `::`) `]`, from inet_ntop; nil when `text` is not one.
    static func canonicalIPv6(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        guard !text.isEmpty, text.count < 46 else { return nil }
        var address = in6_addr()
        guard inet_pton(AF_INET6, String(decoding: text, as: UTF8.self), &address) == 1 else { return nil }
        var out = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &address, &out, socklen_t(out.count)) != nil else { return nil }
        return [0x5B] + out.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) } + [0x5D]
    }

    /// `name` with each `%XX` that encodes an unreserved character (RFC 3986 §2.3) decoded and
    /// lowercased (§6.2.2.2); other escapes stay, and match no route's name.
    private static func decodingUnreserved(_ name: [UInt8]) -> [UInt8] {
        func hex(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: return c - 0x30
            case 0x41...0x46: return c - 0x37
            case 0x61...0x66: return c - 0x57
            default: return nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(name.count)
        var i = 0
        while i < name.count {
            if name[i] == 0x25, i + 2 < name.count, let hi = hex(name[i + 1]), let lo = hex(name[i + 2]) {
                var c = hi << 4 | lo
                if c &- 0x41 < 26 { c |= 0x20 }
                if (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x2D || c == 0x2E || c == 0x5F || c == 0x7E {
                    out.append(c)
                    i += 3
                    continue
                }
            }
            out.append(name[i])
            i += 1
        }
        return out
    }
}

extension RouteRule {
    /// The path sent upstream for `path` on this route: with `strip_prefix`, the prefix goes and one
    /// leading slash stays (`/wx/token` → `/token`, `/wx/` → `/`, `/wx` → `/`). nil when what is
    /// left climbs above the root: the request checks saw `/wx/../admin` stay under `/`, but
    /// stripped it is `/../admin`, which the group's base path would not contain (RFC 3986 §5.2.4).
    func upstreamPath(_ path: String) -> String? {
        guard stripPrefix, path.utf8.starts(with: prefix.utf8) else { return path }
        let rest = path.utf8.dropFirst(prefix.utf8.count)
        let stripped = rest.first == 0x2F ? String(Substring(rest)) : "/" + String(Substring(rest))
        return RequestPolicy.climbsAboveRoot(Substring(stripped)) ? nil : stripped
    }
}

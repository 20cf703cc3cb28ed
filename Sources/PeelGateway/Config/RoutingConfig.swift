import PeelEnvelope
import PeelIO

/// The config file's `upstreams` and `routes` sections, decoded strictly into typed values: every
/// key is known, every value has its type, and an error names the 0-based path of the offending
/// key (`routes[2].upstrem`, `upstreams.app.endpoints[1]`).
public struct RoutingConfig: Sendable, Equatable {
    /// The named upstream groups, in the file's order.
    public var upstreams: [UpstreamGroup] = []
    /// The routes, in the file's order (which decides nothing when a route is chosen).
    public var routes: [RouteRule] = []
    /// Whether `--upstream` (or its variable or key) made the group `default`.
    public var hasDefaultGroup = false
}

/// One named group of endpoints that serve the same API.
public struct UpstreamGroup: Sendable, Equatable {
    public var name: String
    public var endpoints: [Endpoint]
    public var balance: Balance = .roundRobin
    /// Whole-exchange and connect timeouts, in seconds; nil: the global ones.
    public var timeout: Double?
    public var connectTimeout: Double?
    /// CA bundle for https endpoints; nil: the global one.
    public var caFile: String?
    /// Active health checks; nil fields take the global probe options.
    public var probe = Probe()
    /// Passive ejection after connect-level failures of live calls.
    public var eject = Eject()
    /// Where the group's OpenAPI document is, for the contract Peel publishes; nil: none.
    public var openapi: ContractSource?

    public struct Endpoint: Sendable, Equatable {
        public var url: UpstreamURL
        /// The endpoint's share of calls relative to the others' (1 unless set).
        public var weight: Int = 1
    }

    public enum Balance: String, Sendable, Equatable, CaseIterable {
        case roundRobin = "round_robin"
        /// Power of two choices over calls in flight.
        case leastRequest = "least_request"
    }

    public struct Probe: Sendable, Equatable {
        public var path: String?
        public var interval: Double?
        public var timeout: Double?
        public var fall: Int?
        public var rise: Int?
    }

    public struct Eject: Sendable, Equatable {
        /// Consecutive connect-level failures that eject an endpoint.
        public var after = 3
        /// The first ejection's length in seconds; it doubles per repeat up to `max`.
        public var base = 5.0
        public var max = 300.0
        /// The largest share of the group's endpoints passive ejection may hold out at once.
        public var maxShare = 0.5
    }
}

/// One route: which calls go to which group, and what differs for them.
public struct RouteRule: Sendable, Equatable {
    public var name: String?
    /// Lowercased; `*.example.com` for any name under example.com; nil for every host.
    public var host: String?
    /// A plain byte prefix of the path, starting with `/`.
    public var prefix: String
    public var upstream: String
    /// Whether the prefix is removed before the group's base path is joined.
    public var stripPrefix = false
    /// nil: the global dialect.
    public var dialect: Dialect?
    /// nil: the global passthrough paths.
    public var passthroughPaths: [String]?
    /// nil: the global offline cache key fields.
    public var offlineCacheKey: [String]?

    /// The route's name in logs and metrics: its `name`, else `HOST PREFIX`, or the prefix alone.
    public var label: String { name ?? (host.map { $0 + " " + prefix } ?? prefix) }
}

extension RoutingConfig {
    static let routeKeys = ["name", "host", "prefix", "upstream", "strip_prefix", "dialect", "passthrough_paths", "offline_cache_key"]
    static let groupKeys = ["endpoints", "balance", "timeout", "connect_timeout", "ca_file", "probe", "eject", "openapi"]

    /// Decodes the sections from the config file `file`; `defaultGroup` is the group `--upstream`
    /// makes, which routes may name as `default`.
    static func decode(upstreams: ConfigJSON?, routes: ConfigJSON?, file: String,
                       defaultGroup: Bool) throws(ConfigError) -> RoutingConfig {
        var out = RoutingConfig()
        out.hasDefaultGroup = defaultGroup
        if let upstreams {
            let members = try object(upstreams, at: "\(file): upstreams")
            for m in members {
                let at = "\(file): upstreams.\(m.name)"
                guard !m.name.isEmpty, m.name.utf8.allSatisfy({ isTokenByte($0) }) else {
                    throw ConfigError(option: at, problem: "a group's name must be a token (letters, digits, - _ .)")
                }
                if m.name == "default" && defaultGroup {
                    throw ConfigError(option: at, problem: "is the group --upstream makes; name this one otherwise")
                }
                out.upstreams.append(try group(m.name, m.value, at: at))
            }
        }
        guard let routes else {
            throw ConfigError(option: "\(file): routes", problem: "is required with upstreams (which calls go where)")
        }
        guard case .array(let items) = routes else {
            throw ConfigError(option: "\(file): routes", problem: "must be a list, not \(routes.kind)")
        }
        if items.isEmpty { throw ConfigError(option: "\(file): routes", problem: "must name at least one route") }
        let groups = Set(out.upstreams.map(\.name) + (defaultGroup ? ["default"] : []))
        for (i, item) in items.enumerated() {
            let at = "\(file): routes[\(i)]"
            let rule = try route(item, at: at, file: file)
            guard groups.contains(rule.upstream) else {
                throw ConfigError(option: "\(at).upstream", problem: "names no group in upstreams (\(groups.sorted().joined(separator: ", ")))")
            }
            if let earlier = out.routes.firstIndex(where: { $0.host == rule.host && $0.prefix == rule.prefix }) {
                throw ConfigError(option: at, problem: "has the host and prefix of routes[\(earlier)]")
            }
            out.routes.append(rule)
        }
        return out
    }

    /// An object's members, each key among `allowed`; the first unknown one is named.
    static func object(_ json: ConfigJSON, at: String, allowed: [String]? = nil) throws(ConfigError) -> [ConfigJSON.Member] {
        guard case .object(let members) = json else { throw ConfigError(option: at, problem: "must be an object, not \(json.kind)") }
        if let allowed {
            for m in members where !allowed.contains(m.name) {
                throw ConfigError(option: "\(at).\(m.name)", problem: "unknown key (known: \(allowed.joined(separator: ", ")))")
            }
        }
        return members
    }

    static func group(_ name: String, _ json: ConfigJSON, at: String) throws(ConfigError) -> UpstreamGroup {
        let members = try object(json, at: at, allowed: groupKeys)
        guard let list = json["endpoints"] else { throw ConfigError(option: "\(at).endpoints", problem: "is required") }
        guard case .array(let items) = list, !items.isEmpty else {
            throw ConfigError(option: "\(at).endpoints", problem: "must be a list of at least one URL")
        }
        var endpoints: [UpstreamGroup.Endpoint] = []
        for (i, item) in items.enumerated() {
            let here = "\(at).endpoints[\(i)]"
            let text: String
            var urlAt = here
            var weight = 1
            switch item {
            case .string(let s): text = s
            case .object:
                _ = try object(item, at: here, allowed: ["url", "weight"])
                urlAt = "\(here).url"
                guard let u = item["url"] else { throw ConfigError(option: urlAt, problem: "is required") }
                text = try string(u, at: urlAt)
                if let w = item["weight"] { weight = try integer(w, at: "\(here).weight", in: 1...1000) }
            default:
                throw ConfigError(option: here, problem: "must be a URL or {\"url\": …, \"weight\": …}, not \(item.kind)")
            }
            switch UpstreamURL.parse(text) {
            case .success(let url):
                // The same origin written another way (`http://a`, `http://A:80`) is the same endpoint.
                if endpoints.contains(where: { Self.sameEndpoint($0.url, url) }) {
                    throw ConfigError(option: urlAt, problem: "is already an endpoint of this group")
                }
                endpoints.append(.init(url: try ConfigLoader.curlAccepts(url, urlAt), weight: weight))
            case .failure(let e): throw ConfigError(option: urlAt, problem: e.reason)
            }
        }
        var g = UpstreamGroup(name: name, endpoints: endpoints)
        for m in members {
            let here = "\(at).\(m.name)"
            switch m.name {
            case "balance":
                let text = try string(m.value, at: here)
                guard let b = UpstreamGroup.Balance(rawValue: text) else {
                    throw ConfigError(option: here, problem: "must be round_robin or least_request")
                }
                g.balance = b
            case "timeout": g.timeout = try seconds(m.value, at: here)
            case "connect_timeout": g.connectTimeout = try seconds(m.value, at: here)
            case "ca_file": g.caFile = try ConfigLoader.readableCAFile(string(m.value, at: here), here)
            case "probe": g.probe = try probe(m.value, at: here)
            case "eject": g.eject = try eject(m.value, at: here)
            case "openapi": g.openapi = try ContractSource.decode(m.value, at: here)
            default: break
            }
        }
        if let t = g.timeout, let c = g.connectTimeout, c > t {
            throw ConfigError(option: "\(at).connect_timeout", problem: "must not exceed timeout")
        }
        return g
    }

    /// Whether two endpoint URLs name the same resource: scheme and host without case, the port
    /// with the scheme's default filled in, and the same base path.
    static func sameEndpoint(_ a: UpstreamURL, _ b: UpstreamURL) -> Bool {
        func port(_ u: UpstreamURL) -> Int { u.port ?? (u.scheme == "https" ? 443 : 80) }
        return a.scheme == b.scheme && a.host.lowercased() == b.host.lowercased() && port(a) == port(b) && a.basePath == b.basePath
    }

    static func probe(_ json: ConfigJSON, at: String) throws(ConfigError) -> UpstreamGroup.Probe {
        var p = UpstreamGroup.Probe()
        for m in try object(json, at: at, allowed: ["path", "interval", "timeout", "fall", "rise"]) {
            let here = "\(at).\(m.name)"
            switch m.name {
            case "path":
                let path = try string(m.value, at: here)
                // As --probe-path: a path curl would not send keeps a healthy group offline for good.
                guard path.hasPrefix("/") else { throw ConfigError(option: here, problem: "must start with /") }
                if let why = ConfigLoader.originFormProblem(path) { throw ConfigError(option: here, problem: why) }
                p.path = path
            case "interval": p.interval = try seconds(m.value, at: here)
            case "timeout": p.timeout = try seconds(m.value, at: here)
            case "fall": p.fall = try integer(m.value, at: here, in: 1...100)
            case "rise": p.rise = try integer(m.value, at: here, in: 1...100)
            default: break
            }
        }
        if let t = p.timeout, let i = p.interval, t > i * 10 {
            throw ConfigError(option: "\(at).timeout", problem: "must not exceed ten probe intervals")
        }
        return p
    }

    static func eject(_ json: ConfigJSON, at: String) throws(ConfigError) -> UpstreamGroup.Eject {
        var e = UpstreamGroup.Eject()
        for m in try object(json, at: at, allowed: ["after", "base", "max", "max_share"]) {
            let here = "\(at).\(m.name)"
            switch m.name {
            case "after": e.after = try integer(m.value, at: here, in: 1...1000)
            case "base": e.base = try seconds(m.value, at: here)
            case "max": e.max = try seconds(m.value, at: here)
            case "max_share":
                guard case .number(let text) = m.value, let share = Double(text), share > 0, share <= 1 else {
                    throw ConfigError(option: here, problem: "must be a number above 0 and at most 1")
                }
                e.maxShare = share
            default: break
            }
        }
        if e.max < e.base { throw ConfigError(option: "\(at).max", problem: "must be at least base (\(e.base))") }
        return e
    }

    static func route(_ json: ConfigJSON, at: String, file: String) throws(ConfigError) -> RouteRule {
        let members = try object(json, at: at, allowed: routeKeys)
        guard let prefixValue = json["prefix"] else { throw ConfigError(option: "\(at).prefix", problem: "is required") }
        let prefix = try string(prefixValue, at: "\(at).prefix")
        guard prefix.hasPrefix("/"), !prefix.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F || $0 == 0x3F || $0 == 0x23 }) else {
            throw ConfigError(option: "\(at).prefix", problem: "must start with / and hold no space, control character, ? or #")
        }
        guard let upstream = json["upstream"] else { throw ConfigError(option: "\(at).upstream", problem: "is required") }
        var r = RouteRule(prefix: prefix, upstream: try string(upstream, at: "\(at).upstream"))
        for m in members {
            let here = "\(at).\(m.name)"
            switch m.name {
            case "name":
                let name = try string(m.value, at: here)
                guard !name.isEmpty, name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                    throw ConfigError(option: here, problem: "must be printable ASCII without spaces")
                }
                r.name = name
            case "host": r.host = try hostPattern(m.value, at: here)
            case "strip_prefix":
                guard case .bool(let b) = m.value else { throw ConfigError(option: here, problem: "must be true or false") }
                r.stripPrefix = b
            case "dialect":
                guard let v = ConfigLoader.fileValue(m.value) else { continue }
                let d = try DialectConfig.dialect(v, here)
                try DialectConfig.check(d, DialectOrigin(option: here, object: v.isMap))
                r.dialect = d
            case "passthrough_paths":
                let paths = try strings(m.value, at: here)
                for p in paths where !p.hasPrefix("/") { throw ConfigError(option: here, problem: "\(p) must start with /") }
                r.passthroughPaths = paths
            case "offline_cache_key":
                r.offlineCacheKey = try ConfigLoader.keyFieldNames(strings(m.value, at: here), here)
            default: break
            }
        }
        return r
    }

    /// A route's host: a name (matched without case and port), or `*.` and a name for any name
    /// under it (one or more labels, never the name itself).
    static func hostPattern(_ json: ConfigJSON, at: String) throws(ConfigError) -> String {
        let host = try string(json, at: at).lowercased()
        // An IPv6 literal in brackets, as a Host field carries it (RFC 9110 §7.2, RFC 3986 §3.2.2), in
        // its one text form (RFC 5952), which a request's Host is brought to before it is matched.
        if host.hasPrefix("[") {
            let inner = Array(host.utf8.dropFirst().dropLast())
            guard host.hasSuffix("]"), inner.contains(0x3A),
                  inner.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) || $0 == 0x3A || $0 == 0x2E }),
                  let canonical = RouteTable<Void>.canonicalIPv6(inner[...]) else {
                throw ConfigError(option: at, problem: "must be an IPv6 address in brackets ([2001:db8::1])")
            }
            return String(decoding: canonical, as: UTF8.self)
        }
        let name = host.hasPrefix("*.") ? String(host.dropFirst(2)) : host
        let ok = !name.isEmpty && name.utf8.allSatisfy { b in
            (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == 0x2D || b == 0x2E || b == 0x5F
        } && !name.hasPrefix(".") && !name.hasSuffix(".") && !name.contains("..")
        guard ok else {
            throw ConfigError(option: at, problem: "must be a host name without port (example.com), *. and one (*.example.com), or [an IPv6 address]")
        }
        return host
    }

    static func string(_ json: ConfigJSON, at: String) throws(ConfigError) -> String {
        guard case .string(let s) = json else { throw ConfigError(option: at, problem: "must be a string, not \(json.kind)") }
        return s
    }

    static func strings(_ json: ConfigJSON, at: String) throws(ConfigError) -> [String] {
        guard case .array(let items) = json else { throw ConfigError(option: at, problem: "must be a list, not \(json.kind)") }
        var out: [String] = []
        for (i, item) in items.enumerated() { out.append(try string(item, at: "\(at)[\(i)]")) }
        return out
    }

    static func integer(_ json: ConfigJSON, at: String, in range: ClosedRange<Int>) throws(ConfigError) -> Int {
        guard case .number(let text) = json, let n = Int(text), range.contains(n) else {
            throw ConfigError(option: at, problem: "must be a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return n
    }

    static func seconds(_ json: ConfigJSON, at: String) throws(ConfigError) -> Double {
        guard case .number(let text) = json, let s = Double(text), s >= 0.001, s <= 86_400 else {
            throw ConfigError(option: at, problem: "must be a number of seconds from 0.001 to 86400")
        }
        return s
    }
}

extension RoutingConfig {
    /// The sections as JSON for `check-config`, every value as it is used.
    var json: (upstreams: String, routes: String) {
        func q(_ s: String) -> String { jsonEscaped(s) }
        func num(_ d: Double) -> String { d == d.rounded() && abs(d) < 1e15 ? String(Int(d)) : String(d) }
        let groups = upstreams.map { g in
            var fields = ["\"endpoints\": [" + g.endpoints.map { "{\"url\": \(q($0.url.description)), \"weight\": \($0.weight)}" }
                .joined(separator: ", ") + "]", "\"balance\": \(q(g.balance.rawValue))"]
            if let t = g.timeout { fields.append("\"timeout\": \(num(t))") }
            if let t = g.connectTimeout { fields.append("\"connect_timeout\": \(num(t))") }
            if let f = g.caFile { fields.append("\"ca_file\": \(q(f))") }
            var probe: [String] = []
            if let v = g.probe.path { probe.append("\"path\": \(q(v))") }
            if let v = g.probe.interval { probe.append("\"interval\": \(num(v))") }
            if let v = g.probe.timeout { probe.append("\"timeout\": \(num(v))") }
            if let v = g.probe.fall { probe.append("\"fall\": \(v)") }
            if let v = g.probe.rise { probe.append("\"rise\": \(v)") }
            fields.append("\"probe\": {" + probe.joined(separator: ", ") + "}")
            fields.append("\"eject\": {\"after\": \(g.eject.after), \"base\": \(num(g.eject.base)), \"max\": \(num(g.eject.max)), "
                          + "\"max_share\": \(num(g.eject.maxShare))}")
            if let o = g.openapi {
                let location = switch o.location {
                case .path(let p): "\"path\": \(q(p))"
                case .file(let f): "\"file\": \(q(f))"
                }
                fields.append("\"openapi\": {\(location), \"refresh\": \(num(o.refresh))}")
            }
            return "\(q(g.name)): {" + fields.joined(separator: ", ") + "}"
        }
        let rules = routes.map { r in
            var fields: [String] = []
            if let n = r.name { fields.append("\"name\": \(q(n))") }
            if let h = r.host { fields.append("\"host\": \(q(h))") }
            fields.append("\"prefix\": \(q(r.prefix))")
            fields.append("\"upstream\": \(q(r.upstream))")
            fields.append("\"strip_prefix\": \(r.stripPrefix)")
            if let d = r.dialect { fields.append("\"dialect\": " + DialectConfig.json(d)) }
            if let p = r.passthroughPaths { fields.append("\"passthrough_paths\": [" + p.map(q).joined(separator: ", ") + "]") }
            if let k = r.offlineCacheKey { fields.append("\"offline_cache_key\": [" + k.map(q).joined(separator: ", ") + "]") }
            return "{" + fields.joined(separator: ", ") + "}"
        }
        return ("{" + groups.joined(separator: ", ") + "}", "[" + rules.joined(separator: ", ") + "]")
    }
}

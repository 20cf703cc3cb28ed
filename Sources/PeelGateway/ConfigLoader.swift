import Foundation
import PeelEnvelope
import PeelIO

/// A bad configuration: names the option and what was wrong (printed as one line, exit 2).
public struct ConfigError: Error, CustomStringConvertible, Equatable {
    /// The option as the user wrote it (`--timeout`, `PEEL_TIMEOUT` or the config key).
    public var option: String
    /// What was wrong.
    public var problem: String
    public var description: String { "peel: \(option): \(problem)" }
}

/// A value as it arrives from a flag, the environment or the config file.
enum ConfigValue {
    case text(String)
    case list([String])
    /// A JSON array from the config file, its items' types kept (codes tell 0 from "0").
    case array([Any])
    case map([String: Any])
}

/// One option, declared once: its name (from which the flag, the environment variable and the
/// config key are derived), its help, the placeholder of its value, how its effective value is
/// shown, and how a value lands in the config. The default is not written here: it is what `show`
/// gives for `GatewayConfig()`, so `--help`, `check-config` and the README (held to this by a
/// test) all say what the config struct says.
struct OptionSpec: Sendable {
    let name: String
    let help: String
    /// The value's placeholder in `--help` and the README (`SEC`, `BYTES`, `HOST:PORT`, …).
    let value: String
    /// The default in words, for defaults that are not a value of `GatewayConfig()` (`required`, `CPU count`).
    let fixedDefault: String?
    /// The effective value as a JSON fragment (check-config).
    let show: (@Sendable (GatewayConfig) -> String)?
    let apply: @Sendable (inout GatewayConfig, ConfigValue, String) throws(ConfigError) -> Void

    init(name: String, help: String, value: String = "VALUE", fixedDefault: String? = nil,
         show: (@Sendable (GatewayConfig) -> String)? = nil,
         apply: @escaping @Sendable (inout GatewayConfig, ConfigValue, String) throws(ConfigError) -> Void) {
        self.name = name
        self.help = help
        self.value = value
        self.fixedDefault = fixedDefault
        self.show = show
        self.apply = apply
    }

    var flag: String { "--" + name }
    var env: String { "PEEL_" + name.uppercased().replacingOccurrences(of: "-", with: "_") }
    var key: String { name.replacingOccurrences(of: "-", with: "_") }

    /// The default as people read it: `30` for 30.0 s, `a,b` for a list, `none` for nothing.
    var defaultText: String {
        if let fixedDefault { return fixedDefault }
        guard let show else { return "none" }
        var t = show(GatewayConfig())
        if t == "null" || t == "[]" || t == "{}" { return "none" }
        if t.hasPrefix("[") { t = String(t.dropFirst().dropLast()).replacingOccurrences(of: "\"", with: "") }
        if t.hasPrefix("\"") { t = String(t.dropFirst().dropLast()) }
        if t.hasSuffix(".0"), Double(t) != nil { t = String(t.dropLast(2)) }
        return t
    }
}

/// Loads flags > environment > config file > defaults, strictly.
public enum ConfigLoader {
    /// Options every source accepts, in `--help` order.
    static let options: [OptionSpec] = [
        OptionSpec(name: "upstream", help: "http(s) base URL of the upstream API, may carry a base path", value: "URL", fixedDefault: "required", show: { c in q(c.upstream.description) }) { c, v, o throws(ConfigError) in
            switch UpstreamURL.parse(try text(v, o)) {
            case .success(let u): c.upstream = u
            case .failure(let why): throw ConfigError(option: o, problem: why.reason)
            }
        },
        OptionSpec(name: "listen", help: "client-facing HOST:PORT", value: "HOST:PORT", show: { c in q(c.listen.description) }) { c, v, o throws(ConfigError) in
            c.listen = try hostPort(v, o)
        },
        OptionSpec(name: "admin-listen", help: "admin HOST:PORT, or off", value: "HOST:PORT", show: { c in q(c.adminListen?.description ?? "off") }) { c, v, o throws(ConfigError) in
            let t = try text(v, o)
            c.adminListen = t == "off" ? nil : try hostPort(v, o)
        },
        OptionSpec(name: "workers", help: "event-loop threads, each with its own listener", value: "N", fixedDefault: "CPU count", show: { c in "\(c.workers)" }) { c, v, o throws(ConfigError) in
            c.workers = try integer(v, o, 1...256)
        },
        OptionSpec(name: "timeout", help: "seconds for the whole upstream exchange", value: "SEC", show: { c in num(c.timeout) }) { c, v, o throws(ConfigError) in
            c.timeout = try seconds(v, o)
        },
        OptionSpec(name: "connect-timeout", help: "seconds for TCP+TLS connect", value: "SEC", show: { c in num(c.connectTimeout) }) { c, v, o throws(ConfigError) in
            c.connectTimeout = try seconds(v, o)
        },
        OptionSpec(name: "trusted-proxies", help: "CIDRs (IPv4 or IPv6) of proxies whose X-Forwarded-* and Forwarded fields are believed",
                   value: "LIST", show: { c in strs(c.trustedProxies.map(\.description)) }) { c, v, o throws(ConfigError) in
            var networks: [IPNetwork] = []
            for t in try list(v, o) {
                switch IPNetwork.parse(t) {
                case .success(let n): networks.append(n)
                case .failure(let why): throw ConfigError(option: o, problem: why.description)
                }
            }
            c.trustedProxies = networks
        },
        OptionSpec(name: "upstream-idle-timeout", help: "seconds a streamed answer may wait between two reads from the upstream",
                   value: "SEC", show: { c in num(c.upstreamIdleTimeout) }) { c, v, o throws(ConfigError) in
            c.upstreamIdleTimeout = try seconds(v, o)
        },
        OptionSpec(name: "worker-stall-timeout", help: "seconds a worker's event loop may go without turning before /healthz and /readyz answer 503",
                   value: "SEC", show: { c in num(c.workerStallTimeout) }) { c, v, o throws(ConfigError) in
            // The loops' heartbeat ticks every 0.25 s: under 1 s, scheduling noise on a loaded
            // machine would read as a stuck worker.
            c.workerStallTimeout = try seconds(v, o, minimum: 1)
        },
        OptionSpec(name: "probe-path", help: "reachability probe path, relative to the upstream", value: "PATH", show: { c in q(c.probePath) }) { c, v, o throws(ConfigError) in
            let t = try text(v, o)
            guard t.hasPrefix("/") else { throw ConfigError(option: o, problem: "must start with /") }
            // curl refuses a URL with a space or a control character in it, so every probe would fail
            // and a healthy upstream would be offline for good (issue 18).
            if let why = originFormProblem(t) { throw ConfigError(option: o, problem: why) }
            c.probePath = t
        },
        OptionSpec(name: "probe-interval", help: "seconds between probes", value: "SEC", show: { c in num(c.probeInterval) }) { c, v, o throws(ConfigError) in
            // A floor: 0.0001 s was accepted and made about 270 probes a second (issue 18).
            c.probeInterval = try seconds(v, o, minimum: 0.1)
        },
        OptionSpec(name: "probe-timeout", help: "seconds one probe may take", value: "SEC", show: { c in num(c.probeTimeout) }) { c, v, o throws(ConfigError) in
            c.probeTimeout = try seconds(v, o)
        },
        OptionSpec(name: "fall", help: "consecutive failures to go offline", value: "N", show: { c in "\(c.fall)" }) { c, v, o throws(ConfigError) in
            c.fall = try integer(v, o, 1...1000)
        },
        OptionSpec(name: "rise", help: "consecutive successes to come back", value: "N", show: { c in "\(c.rise)" }) { c, v, o throws(ConfigError) in
            c.rise = try integer(v, o, 1...1000)
        },
        OptionSpec(name: "dialect", help: "envelope dialect: a preset (peel, ruoyi, yudao, alibaba, wechat, jsend, antd, jeecg, alipay, error-object), or in the config file an object",
                   value: "NAME", fixedDefault: "peel", show: { c in DialectConfig.json(c.envelope.dialect) }) { c, v, o throws(ConfigError) in
            c.dialectChoice = try DialectConfig.dialect(v, o)
        },
        OptionSpec(name: "success-codes", help: "envelope codes that mean success: integers and \"quoted\" strings; +LIST adds to the dialect's", value: "LIST", show: { c in c.envelope.dialect.successCodes.json }) { c, v, o throws(ConfigError) in
            c.dialectOverrides.successCodes = try DialectConfig.codes(v, o)
        },
        OptionSpec(name: "auth-codes", help: "envelope codes that mean token expired: integers and \"quoted\" strings; +LIST adds to the dialect's", value: "LIST", show: { c in c.envelope.dialect.authCodes.json }) { c, v, o throws(ConfigError) in
            c.dialectOverrides.authCodes = try DialectConfig.codes(v, o)
        },
        OptionSpec(name: "code-field", help: "envelope code member (a dotted path reaches into objects)", value: "NAME", show: { c in c.envelope.dialect.code.map { q($0.description) } ?? "null" }) { c, v, o throws(ConfigError) in
            c.dialectOverrides.code = try memberPath(v, o)
        },
        OptionSpec(name: "message-field", help: "envelope message member", value: "NAME", show: { c in q(c.envelope.dialect.messages.first?.description ?? "") }) { c, v, o throws(ConfigError) in
            c.dialectOverrides.message = try memberPath(v, o)
        },
        OptionSpec(name: "data-field", help: "envelope payload member", value: "NAME", show: { c in
            if case .member(let p) = c.envelope.dialect.payload { return q(p.description) }
            return "null"
        }) { c, v, o throws(ConfigError) in
            c.dialectOverrides.data = try memberPath(v, o)
        },
        OptionSpec(name: "max-body", help: "largest client request body in bytes", value: "BYTES", show: { c in "\(c.maxBody)" }) { c, v, o throws(ConfigError) in
            c.maxBody = try integer(v, o, 0...(1 << 40))
        },
        OptionSpec(name: "max-upstream-body", help: "largest upstream response body in bytes", value: "BYTES", show: { c in "\(c.maxUpstreamBody)" }) { c, v, o throws(ConfigError) in
            c.maxUpstreamBody = try integer(v, o, 1...(1 << 40))
        },
        OptionSpec(name: "max-buffered", help: "request and upstream body bytes held at once, whole process", value: "BYTES",
                   show: { c in "\(c.maxBuffered)" }) { c, v, o throws(ConfigError) in
            c.maxBuffered = try integer(v, o, 1...(1 << 40))
        },
        OptionSpec(name: "max-buffered-per-client", help: "request body bytes one client address (an IPv6 /64) may hold at once", value: "BYTES",
                   fixedDefault: "max_buffered/8, at least max_body", show: { c in "\(c.bufferedPerClient)" }) { c, v, o throws(ConfigError) in
            c.maxBufferedPerClient = try byteSize(v, o)
        },
        OptionSpec(name: "log-buffer", help: "bytes of lines each log (stdout, stderr) holds while its reader does not take them; the rest are dropped and counted",
                   value: "SIZE", show: { c in "\(c.logBuffer)" }) { c, v, o throws(ConfigError) in
            let n = try byteSize(v, o)
            // Under one batch of lines (a worker hands over 4 KiB at a time) nothing would ever fit.
            guard n >= 65_536, n <= 1 << 30 else { throw ConfigError(option: o, problem: "must be from 64KiB to 1GiB") }
            c.logBuffer = n
        },
        OptionSpec(name: "access-log", help: "json or off: one JSON line per request on stdout", value: "json|off", show: { c in q(c.accessLog ? "json" : "off") }) { c, v, o throws(ConfigError) in
            switch try text(v, o) {
            case "json", "true": c.accessLog = true
            case "off", "false": c.accessLog = false
            default: throw ConfigError(option: o, problem: "must be json or off")
            }
        },
        OptionSpec(name: "ca-file", help: "extra CA bundle (PEM) for https upstreams", value: "PATH", fixedDefault: "system", show: { c in c.caFile.map(q) ?? "null" }) { c, v, o throws(ConfigError) in
            let path = try nonEmpty(v, o)
            guard FileManager.default.isReadableFile(atPath: path) else {
                throw ConfigError(option: o, problem: "cannot read \(path)")
            }
            c.caFile = path
        },
        OptionSpec(name: "drain-delay", help: "seconds between /readyz turning 503 and listeners closing", value: "SEC", show: { c in num(c.drainDelay) }) { c, v, o throws(ConfigError) in
            c.drainDelay = try seconds(v, o, allowZero: true)
        },
        OptionSpec(name: "shutdown-timeout", help: "seconds calls in flight may take after SIGTERM", value: "SEC", show: { c in num(c.shutdownTimeout) }) { c, v, o throws(ConfigError) in
            c.shutdownTimeout = try seconds(v, o, allowZero: true)
        },
        OptionSpec(name: "max-inflight", help: "upstream calls in flight per worker before refusing", value: "N", show: { c in "\(c.maxInFlight)" }) { c, v, o throws(ConfigError) in
            c.maxInFlight = try integer(v, o, 1...1_000_000)
        },
        OptionSpec(name: "client-timeout", help: "seconds an idle or stalled client connection is kept", value: "SEC", show: { c in num(c.clientTimeout) }) { c, v, o throws(ConfigError) in
            c.clientTimeout = try seconds(v, o)
        },
        OptionSpec(name: "header-timeout", help: "seconds a request head may take from first to last byte", value: "SEC", show: { c in num(c.headerTimeout) }) { c, v, o throws(ConfigError) in
            c.headerTimeout = try seconds(v, o)
        },
        OptionSpec(name: "body-timeout", help: "seconds a request body may take from the end of its head", value: "SEC", show: { c in num(c.bodyTimeout) }) { c, v, o throws(ConfigError) in
            c.bodyTimeout = try seconds(v, o)
        },
        OptionSpec(name: "reachability-path", help: "client-listener path where apps read reachability (JSON or text/event-stream), or off",
                   value: "PATH", show: { c in q(c.reachabilityPath ?? "off") }) { c, v, o throws(ConfigError) in
            let t = try nonEmpty(v, o)
            if t == "off" { c.reachabilityPath = nil; return }
            guard t.hasPrefix("/") else { throw ConfigError(option: o, problem: "must start with / (or be off)") }
            guard !t.contains("?"), !t.contains("#") else { throw ConfigError(option: o, problem: "must be a path without query or fragment") }
            c.reachabilityPath = t
        },
        OptionSpec(name: "max-streams", help: "reachability event streams open at once, all workers", value: "N",
                   show: { c in "\(c.maxStreams)" }) { c, v, o throws(ConfigError) in
            c.maxStreams = try integer(v, o, 0...1_000_000)
        },
        OptionSpec(name: "max-streams-per-client", help: "reachability event streams one client address may hold", value: "N",
                   show: { c in "\(c.maxStreamsPerClient)" }) { c, v, o throws(ConfigError) in
            c.maxStreamsPerClient = try integer(v, o, 1...1_000_000)
        },
        OptionSpec(name: "offline-cache", help: "bytes of stale GET answers served while the upstream is unreachable, suffixes KiB/MiB/GiB (KB/MB/GB decimal) accepted; 0 is off",
                   value: "SIZE", show: { c in "\(c.offlineCache)" }) { c, v, o throws(ConfigError) in
            c.offlineCache = try byteSize(v, o)
        },
        OptionSpec(name: "offline-cache-max-age", help: "seconds a stored answer may be served after it was first answered",
                   value: "SEC", show: { c in num(c.offlineCacheMaxAge) }) { c, v, o throws(ConfigError) in
            let t = try text(v, o)
            guard let d = Double(t), d.isFinite, d > 0 else { throw ConfigError(option: o, problem: "\(t) is not a positive number of seconds") }
            guard d <= 365 * 86_400 else { throw ConfigError(option: o, problem: "must be at most 31536000 seconds (a year)") }
            c.offlineCacheMaxAge = d
        },
        OptionSpec(name: "offline-cache-key", help: "request fields that say whose answer it is; Host, target, Accept-Language and Vary are always part of the key",
                   value: "LIST", show: { c in strs(c.offlineCacheKey) }) { c, v, o throws(ConfigError) in
            var names: [String] = []
            for n in try list(v, o) {
                let lower = n.lowercased()
                guard !lower.isEmpty, lower.utf8.allSatisfy(isTokenByte) else {
                    throw ConfigError(option: o, problem: "\(n) is not a field name")
                }
                // The fields the cache reads for its own rules: a key of one would stop them being read.
                guard !["cache-control", "pragma", "if-none-match", "if-modified-since"].contains(lower) else {
                    throw ConfigError(option: o, problem: "\(n) is read for the cache's rules and cannot be a key field")
                }
                if !names.contains(lower) { names.append(lower) }
            }
            c.offlineCacheKey = names
        },
        OptionSpec(name: "offline-cache-override", help: "on or off: serve stale even answers the upstream marked no-cache, must-revalidate, proxy-revalidate or s-maxage (never no-store or private)",
                   value: "on|off", show: { c in q(c.offlineCacheOverride ? "on" : "off") }) { c, v, o throws(ConfigError) in
            c.offlineCacheOverride = try onOff(v, o)
        },
        OptionSpec(name: "offline-store", help: "where the offline cache's entries live: memory, or redis://HOST:PORT[/DB] or unix:///PATH for Redis or Valkey shared by every replica",
                   value: "URL", show: { c in q(c.offlineStore.description) }) { c, v, o throws(ConfigError) in
            switch OfflineStoreURL.parse(try text(v, o)) {
            case .success(let u): c.offlineStore = u
            case .failure(let why): throw ConfigError(option: o, problem: why.reason)
            }
        },
        OptionSpec(name: "offline-store-secret-file", help: "file holding the secret that keys the shared store's HMAC keys (at least 16 bytes, the same on every replica); required with Redis",
                   value: "PATH", show: { c in c.offlineStoreSecretFile.map(q) ?? "null" }) { c, v, o throws(ConfigError) in
            let path = try nonEmpty(v, o)
            guard let data = FileManager.default.contents(atPath: path) else { throw ConfigError(option: o, problem: "cannot read \(path)") }
            var secret = [UInt8](data)
            // `echo secret > file` adds a newline that a Kubernetes Secret written elsewhere lacks.
            if secret.last == 0x0A { secret.removeLast() }
            if secret.last == 0x0D { secret.removeLast() }
            guard secret.count >= 16 else {
                throw ConfigError(option: o, problem: "\(path) holds \(secret.count) bytes; at least 16 are needed (head -c 32 /dev/urandom | base64)")
            }
            c.offlineStoreSecretFile = path
            c.offlineStoreSecret = secret
        },
        OptionSpec(name: "offline-store-password-file", help: "file holding the shared store's password (one line), or an ACL user and password (two lines), sent with AUTH",
                   value: "PATH", show: { c in c.offlineStorePasswordFile.map(q) ?? "null" }) { c, v, o throws(ConfigError) in
            let path = try nonEmpty(v, o)
            guard let data = FileManager.default.contents(atPath: path) else { throw ConfigError(option: o, problem: "cannot read \(path)") }
            switch RedisPasswordFile.parse([UInt8](data)) {
            case .success(let credentials): c.offlineStoreCredentials = credentials
            // The reason names the file's shape, never its bytes.
            case .failure(let why): throw ConfigError(option: o, problem: "\(path): \(why.reason)")
            }
            c.offlineStorePasswordFile = path
        },
        OptionSpec(name: "offline-store-max-entry", help: "largest value written to or served from the shared store, suffixes as for offline-cache",
                   value: "SIZE", show: { c in "\(c.offlineStoreMaxEntry)" }) { c, v, o throws(ConfigError) in
            let n = try byteSize(v, o)
            guard (1024...(512 << 20)).contains(n) else { throw ConfigError(option: o, problem: "must be 1KiB-512MiB (Redis's own limit for a value)") }
            c.offlineStoreMaxEntry = n
        },
        OptionSpec(name: "offline-store-timeout", help: "seconds an offline call waits for the shared store before it gets the offline problem",
                   value: "SEC", show: { c in num(c.offlineStoreTimeout) }) { c, v, o throws(ConfigError) in
            let d = try seconds(v, o)
            guard d <= 5 else { throw ConfigError(option: o, problem: "must be at most 5 seconds (it delays an offline answer)") }
            c.offlineStoreTimeout = d
        },
        OptionSpec(name: "problem-type-base", help: "prefix of every problem type", value: "TEXT", show: { c in q(c.envelope.problemTypeBase) }) { c, v, o throws(ConfigError) in
            c.envelope.problemTypeBase = try nonEmpty(v, o)
        },
        OptionSpec(name: "passthrough-content-types", help: "media types passed through unwrapped", value: "LIST", show: { c in strs(c.envelope.passthroughContentTypes) }) { c, v, o throws(ConfigError) in
            c.envelope.passthroughContentTypes = try list(v, o, default: GatewayConfig().envelope.passthroughContentTypes)
        },
        OptionSpec(name: "passthrough-paths", help: "path prefixes passed through unwrapped", value: "LIST", show: { c in strs(c.envelope.passthroughPaths) }) { c, v, o throws(ConfigError) in
            let l = try list(v, o, default: GatewayConfig().envelope.passthroughPaths)
            for p in l where !p.hasPrefix("/") { throw ConfigError(option: o, problem: "\(p) must start with /") }
            c.envelope.passthroughPaths = l
        },
        OptionSpec(name: "code-status", help: "business code to HTTP status map, e.g. 1001=409,\"A0400\"=400", value: "LIST", show: { c in c.envelope.dialect.codeStatus.json }) { c, v, o throws(ConfigError) in
            c.dialectOverrides.codeStatus = try DialectConfig.codeStatus(v, o)
        },
        OptionSpec(name: "cors-origins", help: "origins (exact, https://*.example.com for its subdomains, or *) whose CORS Peel answers itself, preflights included", value: "LIST", show: { c in strs(c.corsOrigins) }) { c, v, o throws(ConfigError) in
            let l = try list(v, o, default: GatewayConfig().corsOrigins)
            for origin in l where origin != "*" {
                if let why = OriginPattern.problem(origin) { throw ConfigError(option: o, problem: why) }
            }
            c.corsOrigins = l
        },
        OptionSpec(name: "cors-expose-headers", help: "fields browsers may read besides X-Request-Id, Retry-After, Age, Cache-Status and the upstream's own list", value: "LIST", show: { c in strs(c.corsExposeHeaders) }) { c, v, o throws(ConfigError) in
            let l = try list(v, o, default: GatewayConfig().corsExposeHeaders)
            for name in l where !isToken(name) { throw ConfigError(option: o, problem: "\(name) is not a field name") }
            c.corsExposeHeaders = l
        },
        OptionSpec(name: "cors-credentials", help: "on or off: allow credentialed cross-origin calls (never with --cors-origins *)", value: "on|off", show: { c in q(c.corsCredentials ? "on" : "off") }) { c, v, o throws(ConfigError) in
            c.corsCredentials = try onOff(v, o)
        },
        OptionSpec(name: "cors-max-age", help: "seconds a browser may cache Peel's preflight answer", value: "SEC", show: { c in "\(c.corsMaxAge)" }) { c, v, o throws(ConfigError) in
            c.corsMaxAge = try integer(v, o, 0...86_400)
        },
        OptionSpec(name: "rewrite-redirects", help: "on or off: Location, Content-Location and Refresh naming the upstream name Peel", value: "on|off", show: { c in q(c.rewriteRedirects ? "on" : "off") }) { c, v, o throws(ConfigError) in
            c.rewriteRedirects = try onOff(v, o)
        },
        OptionSpec(name: "preserve-host", help: "on or off: forward the client's Host instead of the upstream's (nginx proxy_set_header Host $host)", value: "on|off", show: { c in q(c.preserveHost ? "on" : "off") }) { c, v, o throws(ConfigError) in
            c.preserveHost = try onOff(v, o)
        },
        OptionSpec(name: "rewrite-cookies", help: "on or off: Set-Cookie Path loses the base path, Domain naming the upstream is dropped", value: "on|off", show: { c in q(c.rewriteCookies ? "on" : "off") }) { c, v, o throws(ConfigError) in
            c.rewriteCookies = try onOff(v, o)
        },
        OptionSpec(name: "stream-threshold", help: "passthrough answers of unknown length or longer than this many bytes stream as they arrive", value: "BYTES", show: { c in "\(c.streamThreshold)" }) { c, v, o throws(ConfigError) in
            c.streamThreshold = try integer(v, o, 0...(1 << 40))
        },
        OptionSpec(name: "compression", help: "codings offered to clients, in tie-break order, or off", value: "LIST|off", show: { c in strs(c.compression.map(\.rawValue)) }) { c, v, o throws(ConfigError) in
            let l = try list(v, o, default: GatewayConfig().compression.map(\.rawValue))
            if l == ["off"] { c.compression = []; return }
            var codings: [ContentCoding] = []
            for name in l {
                guard let coding = ContentCoding(rawValue: name.lowercased()) else {
                    throw ConfigError(option: o, problem: "\(name) is not gzip, br or off")
                }
                if !codings.contains(coding) { codings.append(coding) }
            }
            c.compression = codings
        },
        OptionSpec(name: "compression-min-size", help: "smallest answer body compressed, in bytes", value: "BYTES", show: { c in "\(c.compressionMinSize)" }) { c, v, o throws(ConfigError) in
            c.compressionMinSize = try integer(v, o, 1...(1 << 30))
        },
        OptionSpec(name: "gzip-level", help: "zlib level for gzip answers, 1-9", value: "N", show: { c in "\(c.gzipLevel)" }) { c, v, o throws(ConfigError) in
            c.gzipLevel = try integer(v, o, 1...9)
        },
        OptionSpec(name: "brotli-quality", help: "brotli quality for br answers, 0-11", value: "N", show: { c in "\(c.brotliQuality)" }) { c, v, o throws(ConfigError) in
            c.brotliQuality = try integer(v, o, 0...11)
        },
        OptionSpec(name: "business-status", help: "HTTP status of a business error without a code-status entry", value: "N", show: { c in "\(c.envelope.businessStatus)" }) { c, v, o throws(ConfigError) in
            c.envelope.businessStatus = try integer(v, o, 400...599)
        },
    ]

    /// Builds the config from `arguments` (flags only, no subcommand), `environment` and the config file they name.
    public static func load(arguments: [String], environment: [String: String]) throws(ConfigError) -> GatewayConfig {
        var flagValues: [(OptionSpec, String, String)] = []
        var configPath: (String, String)? = nil
        var i = 0
        while i < arguments.count {
            let arg = arguments[i]
            guard arg.hasPrefix("--") else { throw ConfigError(option: arg, problem: "unexpected argument") }
            var name = String(arg.dropFirst(2))
            var value: String? = nil
            if let eq = name.firstIndex(of: "=") {
                value = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            if value == nil {
                guard i + 1 < arguments.count else { throw ConfigError(option: "--\(name)", problem: "needs a value") }
                i += 1
                value = arguments[i]
            }
            if name == "config" {
                configPath = (value!, "--config")
            } else if let spec = options.first(where: { $0.name == name }) {
                flagValues.append((spec, value!, "--\(name)"))
            } else {
                throw ConfigError(option: "--\(name)", problem: "unknown option (see peel --help)")
            }
            i += 1
        }
        if configPath == nil, let p = environment["PEEL_CONFIG"], !p.isEmpty { configPath = (p, "PEEL_CONFIG") }

        var config = GatewayConfig()
        var explicit: Set<String> = []
        func apply(_ spec: OptionSpec, _ value: ConfigValue, _ origin: String) throws(ConfigError) {
            try spec.apply(&config, value, origin)
            explicit.insert(spec.name)
        }
        if let (path, origin) = configPath {
            let entries = try readConfigFile(path, origin: origin)
            for (key, raw) in entries.sorted(by: { $0.key < $1.key }) {
                guard let spec = options.first(where: { $0.key == key }) else {
                    throw ConfigError(option: "\(path): \(key)", problem: "unknown key")
                }
                try apply(spec, try fileValue(raw, "\(path): \(key)"), "\(path): \(key)")
            }
        }
        for spec in options {
            if let v = environment[spec.env] { try apply(spec, .text(v), spec.env) }
        }
        for (spec, v, origin) in flagValues { try apply(spec, .text(v), origin) }
        // A short --timeout with the default connect timeout shortens the connect timeout with it.
        if !explicit.contains("connect-timeout") { config.connectTimeout = min(config.connectTimeout, config.timeout) }
        guard explicit.contains("upstream") else { throw ConfigError(option: "--upstream", problem: "is required (or PEEL_UPSTREAM)") }
        // The field and code options change the chosen dialect, whichever source named either.
        config.envelope.dialect = config.dialectOverrides.applied(to: config.dialectChoice)
        try validate(config)
        return config
    }

    /// Rejects combinations that cannot work.
    static func validate(_ c: GatewayConfig) throws(ConfigError) {
        if c.connectTimeout > c.timeout {
            throw ConfigError(option: "--connect-timeout", problem: "must not exceed --timeout")
        }
        if c.probeTimeout > c.probeInterval * 10 {
            throw ConfigError(option: "--probe-timeout", problem: "must not exceed ten probe intervals")
        }
        if !c.envelope.dialect.successCodes.isDisjoint(with: c.envelope.dialect.authCodes) {
            throw ConfigError(option: "--auth-codes", problem: "overlaps --success-codes")
        }
        if let why = c.envelope.dialect.problem() { throw ConfigError(option: "--dialect", problem: why) }
        // The Fetch standard refuses a credentialed answer that allows every origin (Fetch §3.2.5).
        if c.corsCredentials && c.corsOrigins.contains("*") {
            throw ConfigError(option: "--cors-credentials", problem: "cannot be used with --cors-origins *")
        }
        // A body over the budget is refused as "try again shortly"; one the budget can never hold
        // would be told that forever.
        if c.maxBuffered < c.maxBody {
            throw ConfigError(option: "--max-buffered", problem: "must be at least --max-body")
        }
        // One client can always send one whole body, and no share is larger than the whole.
        if let share = c.maxBufferedPerClient, share < c.maxBody || share > c.maxBuffered {
            throw ConfigError(option: "--max-buffered-per-client", problem: "must be at least --max-body (\(c.maxBody)) and at most --max-buffered (\(c.maxBuffered))")
        }
        // Issue 21: the shared store's keys are HMACs; without the secret they could not be.
        if c.offlineStore != .memory && c.offlineStoreSecret == nil {
            throw ConfigError(option: "--offline-store-secret-file", problem: "is required with a Redis --offline-store (every replica mounts the same secret)")
        }
        if let a = c.adminListen, a == c.listen, a.port != 0 {
            throw ConfigError(option: "--admin-listen", problem: "must differ from --listen")
        }
    }

    private static func readConfigFile(_ path: String, origin: String) throws(ConfigError) -> [String: Any] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigError(option: origin, problem: "cannot read \(path)")
        }
        // Foundation's parser accepts trailing commas; the strict scanner judges first (RFC 8259).
        guard JSONScanner.validate([UInt8](data)) else {
            throw ConfigError(option: origin, problem: "\(path) is not valid JSON (RFC 8259)")
        }
        guard let obj = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw ConfigError(option: origin, problem: "\(path) must hold a JSON object")
        }
        return obj
    }

    private static func fileValue(_ raw: Any, _ o: String) throws(ConfigError) -> ConfigValue {
        switch raw {
        case let s as String: return .text(s)
        case let b as Bool where isBool(raw): return .text(b ? "true" : "false")
        case let n as NSNumber: return .text(n.stringValue)
        case let a as [Any]: return .array(a)
        case let d as [String: Any]: return .map(d)
        default: throw ConfigError(option: o, problem: "has an unsupported value")
        }
    }

    // MARK: value parsers

    /// True for JSON true/false as Foundation hands them back (not for the numbers 0 and 1).
    static func isBool(_ v: Any) -> Bool {
        if type(of: v) == Bool.self { return true }
        if let n = v as? NSNumber { return String(cString: n.objCType) == "c" }
        return false
    }

    static func text(_ v: ConfigValue, _ o: String) throws(ConfigError) -> String {
        switch v {
        case .text(let t): return t
        case .list(let l): return l.joined(separator: ",")
        case .array(let a): return stringItems(a).joined(separator: ",")
        case .map: throw ConfigError(option: o, problem: "must be a string, not an object")
        }
    }

    static func onOff(_ v: ConfigValue, _ o: String) throws(ConfigError) -> Bool {
        switch try text(v, o) {
        case "on", "true": return true
        case "off", "false": return false
        default: throw ConfigError(option: o, problem: "must be on or off")
        }
    }

    /// Whether `s` is a serialised origin (`scheme://host[:port]`, RFC 6454 §6.2): what browsers send in Origin.
    static func isOrigin(_ s: String) -> Bool {
        guard let r = s.range(of: "://") else { return false }
        let scheme = s[..<r.lowerBound]
        let authority = s[r.upperBound...]
        guard !scheme.isEmpty, scheme.allSatisfy({ $0.isLetter || $0.isNumber || "+-.".contains($0) }), !authority.isEmpty else { return false }
        return !authority.contains(where: { "/?#@ ".contains($0) })
    }

    static func nonEmpty(_ v: ConfigValue, _ o: String) throws(ConfigError) -> String {
        let t = try text(v, o)
        if t.isEmpty { throw ConfigError(option: o, problem: "must not be empty") }
        return t
    }

    /// A list value. One that begins with `+` (`+application/x-ndjson`, `["+401"]`) adds its items to
    /// `base`, the option's default, instead of replacing it (issue 19); repeats are dropped.
    static func list(_ v: ConfigValue, _ o: String, default base: [String] = []) throws(ConfigError) -> [String] {
        var items: [String]
        switch v {
        case .list(let l): items = l.map { $0.trimmingCharacters(in: .whitespaces) }
        case .array(let a): items = stringItems(a).map { $0.trimmingCharacters(in: .whitespaces) }
        case .text(let t): items = t.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        case .map: throw ConfigError(option: o, problem: "must be a list, not an object")
        }
        guard let first = items.first, first.hasPrefix("+") else { return items.filter { !$0.isEmpty } }
        items[0] = String(first.dropFirst()).trimmingCharacters(in: .whitespaces)
        var out = base
        for item in items where !item.isEmpty && !out.contains(item) { out.append(item) }
        if out.count == base.count && items.allSatisfy(\.isEmpty) {
            throw ConfigError(option: o, problem: "+ must be followed by what to add")
        }
        return out
    }

    /// Whether `s` is an RFC 9110 token (a field name).
    static func isToken(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b | 0x20 >= 0x61 && b | 0x20 <= 0x7A) || "!#$%&'*+-.^_`|~".utf8.contains(b)
        }
    }

    static func hostPort(_ v: ConfigValue, _ o: String) throws(ConfigError) -> HostPort {
        let t = try text(v, o)
        guard let hp = HostPort(parsing: t) else { throw ConfigError(option: o, problem: "\(t) is not HOST:PORT") }
        return hp
    }

    static func integer(_ v: ConfigValue, _ o: String, _ range: ClosedRange<Int>) throws(ConfigError) -> Int {
        let t = try text(v, o)
        guard let n = Int(t) else { throw ConfigError(option: o, problem: "\(t) is not a whole number") }
        guard range.contains(n) else { throw ConfigError(option: o, problem: "must be \(range.lowerBound)-\(range.upperBound)") }
        return n
    }

    /// A byte count with an optional unit: `64MiB`, `512 KiB`, `1GB`, `1048576`. IEC units are powers
    /// of 1024, SI ones of 1000 (IEC 80000-13), case-insensitive.
    static func byteSize(_ v: ConfigValue, _ o: String) throws(ConfigError) -> Int {
        let t = try text(v, o).trimmingCharacters(in: .whitespaces)
        let digits = t.prefix { $0.isASCII && $0.isNumber }
        let unit = t.dropFirst(digits.count).trimmingCharacters(in: .whitespaces).lowercased()
        let factors: [String: Int] = ["": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1 << 10, "m": 1_000_000, "mb": 1_000_000,
                                      "mib": 1 << 20, "g": 1_000_000_000, "gb": 1_000_000_000, "gib": 1 << 30]
        guard let n = Int(digits), let f = factors[unit] else {
            throw ConfigError(option: o, problem: "\(t) is not a size in bytes (like 67108864 or 64MiB)")
        }
        let (bytes, overflow) = n.multipliedReportingOverflow(by: f)
        guard !overflow, bytes <= 1 << 40 else { throw ConfigError(option: o, problem: "must be at most 1 TiB") }
        return bytes
    }

    /// Seconds, at least `minimum` (1 ms unless said otherwise), or exactly 0 when `allowZero`. Below
    /// 1 ms a time would become 0 ms, which curl and libevent read as "no limit" (issue 18).
    static func seconds(_ v: ConfigValue, _ o: String, allowZero: Bool = false, minimum: Double = 0.001) throws(ConfigError) -> Double {
        let t = try text(v, o)
        guard let d = Double(t), d.isFinite else { throw ConfigError(option: o, problem: "\(t) is not a number of seconds") }
        if allowZero && d == 0 { return 0 }
        guard d >= minimum else {
            throw ConfigError(option: o, problem: "must be \(allowZero ? "0 or " : "")at least \(num(minimum)) seconds")
        }
        guard d <= 86_400 else { throw ConfigError(option: o, problem: "must be at most 86400 seconds") }
        return d
    }

    /// A config-file array's items as text: numbers in their JSON form, strings as they are.
    static func stringItems(_ a: [Any]) -> [String] {
        a.map { v in
            if let n = v as? NSNumber { return n.stringValue }
            return "\(v)"
        }
    }

    /// A member name or dotted path.
    static func memberPath(_ v: ConfigValue, _ o: String) throws(ConfigError) -> MemberPath {
        let t = try nonEmpty(v, o)
        guard let p = MemberPath(dotted: t) else { throw ConfigError(option: o, problem: "\(t) is not a member name or a dotted path") }
        return p
    }

    /// The `--help` text.
    public static var helpText: String {
        var lines = [
            "peel — an envelope-unwrapping HTTP gateway in front of one upstream API",
            "",
            "usage: peel [options]            run the gateway",
            "       peel demo [options]       start the demo upstream and the gateway in front of it",
            "       peel demo-upstream [--listen HOST:PORT]   start only the demo upstream",
            "       peel check-config [options]   print the effective configuration or the error",
            "       peel dialects             list the envelope dialects, each with sample envelopes and Peel's answers",
            "       peel healthcheck [--admin-listen HOST:PORT]   exit 0 when the local admin /healthz answers",
            "       peel --help | --version",
            "",
            "Every option has an environment variable; precedence is flag > environment > config file > default.",
            "",
            "  --config FILE  (PEEL_CONFIG)",
            "      JSON object with any option below as a key (snake_case), e.g. {\"timeout\": 10, \"code_status\": {\"1001\": 409}}",
        ]
        for spec in options {
            lines.append("  \(spec.flag) \(spec.value)  (\(spec.env))")
            lines.append("      \(spec.help) (\(spec.defaultText == "required" ? "required" : "default " + spec.defaultText))")
        }
        return lines.joined(separator: "\n")
    }

    /// The effective configuration as JSON, for `peel check-config`: every option, in `--help` order.
    public static func describe(_ c: GatewayConfig) -> String {
        let fields = options.compactMap { spec in spec.show.map { (spec.key, $0(c)) } }
        return "{\n" + fields.map { "  \(q($0.0)): \($0.1)" }.joined(separator: ",\n") + "\n}"
    }

    // MARK: showing values (JSON fragments)

    /// A JSON string (RFC 8259 §7): control characters are escaped too, so check-config output parses.
    static func q(_ s: String) -> String { JSONString.quoted(s) }

    /// Why `t` is not an origin-form request target (RFC 9112 §3.2.1, RFC 3986 §3.3 and §3.4:
    /// pchar, "/" and "?", `%` only before two hex digits); nil when it is one.
    static func originFormProblem(_ t: String) -> String? {
        let bytes = Array(t.utf8)
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "%") {
                guard i + 2 < bytes.count, isHex(bytes[i + 1]), isHex(bytes[i + 2]) else {
                    return "% must be followed by two hex digits"
                }
                i += 3
                continue
            }
            let allowed = (b >= 0x61 && b <= 0x7A) || (b >= 0x41 && b <= 0x5A) || (b >= 0x30 && b <= 0x39)
                || "-._~!$&'()*+,;=:@/?".utf8.contains(b)
            guard allowed else {
                return b < 0x20 || b == 0x7F ? "has a control character: not an origin-form target"
                    : "has \(b == 0x20 ? "a space" : "'\(String(decoding: [b], as: UTF8.self))'"): not an origin-form target (percent-encode it)"
            }
            i += 1
        }
        return nil
    }

    private static func isHex(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x61 && b <= 0x66) || (b >= 0x41 && b <= 0x46)
    }
    static func num(_ d: Double) -> String { "\(d)" }
    static func strs(_ a: [String]) -> String { "[" + a.map(q).joined(separator: ",") + "]" }
}

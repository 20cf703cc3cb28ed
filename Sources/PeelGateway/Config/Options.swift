import Foundation
import PeelEnvelope
import PeelIO

// Every option Peel takes, declared once: `--help`, `check-config`, the environment, the config file
// and the README's options table (held to this by a test) all come from this table.
extension ConfigLoader {
    /// Options every source accepts, in `--help` order.
    static let options: [OptionSpec] = [
        OptionSpec(name: "upstream", help: "http(s) base URL of the upstream API, may carry a base path", value: "URL", fixedDefault: "required", show: { c in q(c.upstream.description) }) { c, v, o throws(ConfigError) in
            switch UpstreamURL.parse(try text(v, o)) {
            case .success(let u): c.upstream = try curlAccepts(u, o)
            case .failure(let why): throw ConfigError(option: o, problem: why.reason)
            }
        },
        OptionSpec(name: "listen", help: "client-facing HOST:PORT", value: "HOST:PORT", show: { c in q(c.listeners.client.description) }) { c, v, o throws(ConfigError) in
            c.listeners.client = try hostPort(v, o)
        },
        OptionSpec(name: "admin-listen", help: "admin HOST:PORT, or off", value: "HOST:PORT", show: { c in q(c.listeners.admin?.description ?? "off") }) { c, v, o throws(ConfigError) in
            let t = try text(v, o)
            c.listeners.admin = t == "off" ? nil : try hostPort(v, o)
        },
        OptionSpec(name: "workers", help: "event-loop threads, each with its own listener", value: "N", fixedDefault: "CPU count", show: { c in "\(c.listeners.workers)" }) { c, v, o throws(ConfigError) in
            c.listeners.workers = try integer(v, o, 1...256)
        },
        OptionSpec(name: "timeout", help: "seconds for the whole upstream exchange", value: "SEC", show: { c in num(c.calls.timeout) }) { c, v, o throws(ConfigError) in
            c.calls.timeout = try seconds(v, o)
        },
        OptionSpec(name: "connect-timeout", help: "seconds for TCP+TLS connect", value: "SEC", show: { c in num(c.calls.connectTimeout) }) { c, v, o throws(ConfigError) in
            c.calls.connectTimeout = try seconds(v, o)
        },
        OptionSpec(name: "trusted-proxies", help: "CIDRs (IPv4 or IPv6) of proxies whose X-Forwarded-* and Forwarded fields are believed",
                   value: "LIST", show: { c in strs(c.clients.trustedProxies.map(\.description)) }) { c, v, o throws(ConfigError) in
            var networks: [IPNetwork] = []
            for t in try list(v, o) {
                switch IPNetwork.parse(t) {
                case .success(let n): networks.append(n)
                case .failure(let why): throw ConfigError(option: o, problem: why.description)
                }
            }
            c.clients.trustedProxies = networks
        },
        OptionSpec(name: "upstream-idle-timeout", help: "seconds a streamed answer may wait between two reads from the upstream",
                   value: "SEC", show: { c in num(c.calls.idleTimeout) }) { c, v, o throws(ConfigError) in
            c.calls.idleTimeout = try seconds(v, o)
        },
        OptionSpec(name: "worker-stall-timeout", help: "seconds a worker's event loop may go without turning before /healthz and /readyz answer 503",
                   value: "SEC", show: { c in num(c.lifecycle.workerStallTimeout) }) { c, v, o throws(ConfigError) in
            // The loops' heartbeat ticks every 0.25 s: under 1 s, scheduling noise on a loaded
            // machine would read as a stuck worker.
            c.lifecycle.workerStallTimeout = try seconds(v, o, minimum: 1)
        },
        OptionSpec(name: "probe-path", help: "reachability probe path, relative to the upstream", value: "PATH", show: { c in q(c.probe.path) }) { c, v, o throws(ConfigError) in
            let t = try text(v, o)
            guard t.hasPrefix("/") else { throw ConfigError(option: o, problem: "must start with /") }
            // curl refuses a URL with a space or a control character in it, so every probe would fail
            // and a healthy upstream would be offline for good.
            if let why = originFormProblem(t) { throw ConfigError(option: o, problem: why) }
            c.probe.path = t
        },
        OptionSpec(name: "probe-interval", help: "seconds between probes", value: "SEC", show: { c in num(c.probe.interval) }) { c, v, o throws(ConfigError) in
            // A floor: 0.0001 s was accepted and made about 270 probes a second.
            c.probe.interval = try seconds(v, o, minimum: 0.1)
        },
        OptionSpec(name: "probe-timeout", help: "seconds one probe may take", value: "SEC", show: { c in num(c.probe.timeout) }) { c, v, o throws(ConfigError) in
            c.probe.timeout = try seconds(v, o)
        },
        OptionSpec(name: "fall", help: "consecutive failures to go offline", value: "N", show: { c in "\(c.probe.fall)" }) { c, v, o throws(ConfigError) in
            c.probe.fall = try integer(v, o, 1...1000)
        },
        OptionSpec(name: "rise", help: "consecutive successes to come back", value: "N", show: { c in "\(c.probe.rise)" }) { c, v, o throws(ConfigError) in
            c.probe.rise = try integer(v, o, 1...1000)
        },
        OptionSpec(name: "dialect", help: "envelope dialect: a preset (\(DialectConfig.presetNames)), or in the config file an object",
                   value: "NAME", fixedDefault: "peel", show: { c in DialectConfig.json(c.envelope.dialect) }) { c, v, o throws(ConfigError) in
            c.dialectChoice = try DialectConfig.dialect(v, o)
            c.dialectOrigin = DialectOrigin(option: o, object: v.isMap)
        },
        // The field and code options change the chosen dialect; check-config shows their effect
        // once, in the effective `dialect`, and these as not set (null), so its output loads back.
        OptionSpec(name: "success-codes", help: "envelope codes that mean success: integers and \"quoted\" strings; +LIST adds to the dialect's", value: "LIST", fixedDefault: "the dialect's (0)", show: { _ in "null" }) { c, v, o throws(ConfigError) in
            c.dialectOverrides.successCodes = try DialectConfig.codes(v, o)
            c.dialectOverrides.origins["success_codes"] = o
        },
        OptionSpec(name: "auth-codes", help: "envelope codes that mean token expired: integers and \"quoted\" strings (\"AuthFailure.*\" for a prefix); +LIST adds to the dialect's", value: "LIST", fixedDefault: "the dialect's (7)", show: { _ in "null" }) { c, v, o throws(ConfigError) in
            c.dialectOverrides.authCodes = try DialectConfig.codes(v, o, prefixes: true)
            c.dialectOverrides.origins["auth_codes"] = o
        },
        OptionSpec(name: "code-field", help: "envelope code member (a dotted path reaches into objects)", value: "NAME", fixedDefault: "the dialect's (code)", show: { _ in "null" }) { c, v, o throws(ConfigError) in
            c.dialectOverrides.code = try memberPath(v, o)
            c.dialectOverrides.origins["code"] = o
        },
        OptionSpec(name: "message-field", help: "envelope message member", value: "NAME", fixedDefault: "the dialect's (message)", show: { _ in "null" }) { c, v, o throws(ConfigError) in
            c.dialectOverrides.message = try memberPath(v, o)
            c.dialectOverrides.origins["message"] = o
        },
        OptionSpec(name: "data-field", help: "envelope payload member", value: "NAME", fixedDefault: "the dialect's (data)", show: { _ in "null" }) { c, v, o throws(ConfigError) in
            c.dialectOverrides.data = try memberPath(v, o)
            c.dialectOverrides.origins["payload"] = o
        },
        OptionSpec(name: "max-body", help: "largest client request body in bytes", value: "BYTES", show: { c in "\(c.memory.maxBody)" }) { c, v, o throws(ConfigError) in
            c.memory.maxBody = try integer(v, o, 0...(1 << 40))
        },
        OptionSpec(name: "max-upstream-body", help: "largest upstream response body in bytes", value: "BYTES", show: { c in "\(c.calls.maxResponseBody)" }) { c, v, o throws(ConfigError) in
            c.calls.maxResponseBody = try integer(v, o, 1...(1 << 40))
        },
        OptionSpec(name: "max-buffered", help: "request and upstream body bytes held at once, whole process", value: "BYTES",
                   show: { c in "\(c.memory.maxBuffered)" }) { c, v, o throws(ConfigError) in
            c.memory.maxBuffered = try integer(v, o, 1...(1 << 40))
        },
        OptionSpec(name: "max-buffered-per-client", help: "request body bytes one client address (an IPv6 /64) may hold at once", value: "BYTES",
                   fixedDefault: "max_buffered/8, at least max_body", show: { c in "\(c.memory.bufferedPerClient)" }) { c, v, o throws(ConfigError) in
            c.memory.maxBufferedPerClient = try byteSize(v, o)
        },
        OptionSpec(name: "spool-dir", help: "directory where buffered upstream answers past spool_threshold are held, unlinked at creation; must be writable at start", value: "PATH",
                   fixedDefault: "$TMPDIR, else /tmp", show: { c in q(c.spooling.directory) }) { c, v, o throws(ConfigError) in
            let dir = try text(v, o)
            guard !dir.isEmpty else { throw ConfigError(option: o, problem: "must name a directory") }
            c.spooling.directory = dir
        },
        OptionSpec(name: "spool-threshold", help: "a buffered upstream answer past this many bytes, or a request body declaring (or de-chunked to) more, goes to a file in spool_dir instead of memory; 0 keeps every body in memory", value: "BYTES",
                   show: { c in "\(c.spooling.threshold)" }) { c, v, o throws(ConfigError) in
            c.spooling.threshold = try byteSize(v, o)
        },
        OptionSpec(name: "max-spooled", help: "bytes of spooled upstream answers held at once on disk, whole process", value: "BYTES",
                   show: { c in "\(c.spooling.maxSpooled)" }) { c, v, o throws(ConfigError) in
            let n = try byteSize(v, o)
            guard n >= 1 else { throw ConfigError(option: o, problem: "must be at least 1") }
            c.spooling.maxSpooled = n
        },
        OptionSpec(name: "max-spooled-per-client", help: "bytes of spooled upstream answers one client address (an IPv6 /64) may hold at once", value: "BYTES",
                   fixedDefault: "max_spooled/2", show: { c in "\(c.spooling.spooledPerClient)" }) { c, v, o throws(ConfigError) in
            c.spooling.maxSpooledPerClient = try byteSize(v, o)
        },
        OptionSpec(name: "log-buffer", help: "bytes of lines each log (stdout, stderr) holds while its reader does not take them; the rest are dropped and counted",
                   value: "SIZE", show: { c in "\(c.logs.buffer)" }) { c, v, o throws(ConfigError) in
            let n = try byteSize(v, o)
            // Under one batch of lines (a worker hands over 4 KiB at a time) nothing would ever fit.
            guard n >= 65_536, n <= 1 << 30 else { throw ConfigError(option: o, problem: "must be from 64KiB to 1GiB") }
            c.logs.buffer = n
        },
        OptionSpec(name: "access-log", help: "json or off: one JSON line per request on stdout", value: "json|off", show: { c in q(c.logs.access ? "json" : "off") }) { c, v, o throws(ConfigError) in
            switch try text(v, o) {
            case "json", "true": c.logs.access = true
            case "off", "false": c.logs.access = false
            default: throw ConfigError(option: o, problem: "must be json or off")
            }
        },
        OptionSpec(name: "ca-file", help: "extra CA bundle (PEM) for https upstreams", value: "PATH", fixedDefault: "system", show: { c in c.calls.caFile.map(q) ?? "null" }) { c, v, o throws(ConfigError) in
            c.calls.caFile = try readableCAFile(nonEmpty(v, o), o)
        },
        OptionSpec(name: "drain-delay", help: "seconds between /readyz turning 503 and listeners closing", value: "SEC", show: { c in num(c.lifecycle.drainDelay) }) { c, v, o throws(ConfigError) in
            c.lifecycle.drainDelay = try seconds(v, o, allowZero: true)
        },
        OptionSpec(name: "shutdown-timeout", help: "seconds calls in flight may take after SIGTERM", value: "SEC", show: { c in num(c.lifecycle.shutdownTimeout) }) { c, v, o throws(ConfigError) in
            c.lifecycle.shutdownTimeout = try seconds(v, o, allowZero: true)
        },
        OptionSpec(name: "max-inflight", help: "upstream calls in flight per worker before refusing", value: "N", show: { c in "\(c.calls.maxInFlight)" }) { c, v, o throws(ConfigError) in
            c.calls.maxInFlight = try integer(v, o, 1...1_000_000)
        },
        OptionSpec(name: "client-timeout", help: "seconds an idle or stalled client connection is kept", value: "SEC", show: { c in num(c.clients.timeout) }) { c, v, o throws(ConfigError) in
            c.clients.timeout = try seconds(v, o)
        },
        OptionSpec(name: "header-timeout", help: "seconds a request head may take from first to last byte", value: "SEC", show: { c in num(c.clients.headerTimeout) }) { c, v, o throws(ConfigError) in
            c.clients.headerTimeout = try seconds(v, o)
        },
        OptionSpec(name: "body-timeout", help: "seconds a request body may take from the end of its head", value: "SEC", show: { c in num(c.clients.bodyTimeout) }) { c, v, o throws(ConfigError) in
            c.clients.bodyTimeout = try seconds(v, o)
        },
        OptionSpec(name: "reachability-path", help: "client-listener path where apps read reachability (JSON or text/event-stream), or off",
                   value: "PATH", show: { c in q(c.reachability.path ?? "off") }) { c, v, o throws(ConfigError) in
            let t = try nonEmpty(v, o)
            if t == "off" { c.reachability.path = nil; return }
            guard t.hasPrefix("/") else { throw ConfigError(option: o, problem: "must start with / (or be off)") }
            guard !t.contains("?"), !t.contains("#") else { throw ConfigError(option: o, problem: "must be a path without query or fragment") }
            c.reachability.path = t
        },
        OptionSpec(name: "max-streams", help: "reachability event streams open at once, all workers", value: "N",
                   show: { c in "\(c.reachability.maxStreams)" }) { c, v, o throws(ConfigError) in
            c.reachability.maxStreams = try integer(v, o, 0...1_000_000)
        },
        OptionSpec(name: "max-streams-per-client", help: "reachability event streams one client address may hold", value: "N",
                   show: { c in "\(c.reachability.maxStreamsPerClient)" }) { c, v, o throws(ConfigError) in
            c.reachability.maxStreamsPerClient = try integer(v, o, 1...1_000_000)
        },
        OptionSpec(name: "upgrade-protocols", help: "Upgrade protocols tunneled to the route's backend (others are answered over HTTP/1.1); empty turns tunnels off",
                   value: "LIST", show: { c in strs(c.tunnels.protocols) }) { c, v, o throws(ConfigError) in
            c.tunnels.protocols = try list(v, o).map { $0.lowercased() }
        },
        OptionSpec(name: "tunnel-idle-timeout", help: "seconds a tunnel may pass no byte either way before it is closed",
                   value: "SEC", show: { c in num(c.tunnels.idleTimeout) }) { c, v, o throws(ConfigError) in
            c.tunnels.idleTimeout = try seconds(v, o)
        },
        OptionSpec(name: "max-tunnels", help: "tunnels (WebSockets) open at once, all workers", value: "N",
                   show: { c in "\(c.tunnels.maxTunnels)" }) { c, v, o throws(ConfigError) in
            c.tunnels.maxTunnels = try integer(v, o, 0...1_000_000)
        },
        OptionSpec(name: "max-tunnels-per-client", help: "tunnels one client address may hold", value: "N",
                   show: { c in "\(c.tunnels.maxTunnelsPerClient)" }) { c, v, o throws(ConfigError) in
            c.tunnels.maxTunnelsPerClient = try integer(v, o, 1...1_000_000)
        },
        OptionSpec(name: "offline-cache", help: "bytes of stale GET answers served while the upstream is unreachable, suffixes KiB/MiB/GiB (KB/MB/GB decimal) accepted; 0 is off",
                   value: "SIZE", show: { c in "\(c.offline.capacity)" }) { c, v, o throws(ConfigError) in
            c.offline.capacity = try byteSize(v, o)
        },
        OptionSpec(name: "offline-cache-max-age", help: "seconds a stored answer may be served after it was first answered",
                   value: "SEC", show: { c in num(c.offline.maxAge) }) { c, v, o throws(ConfigError) in
            let t = try text(v, o)
            guard let d = Double(t), d.isFinite, d > 0 else { throw ConfigError(option: o, problem: "\(t) is not a positive number of seconds") }
            guard d <= 365 * 86_400 else { throw ConfigError(option: o, problem: "must be at most 31536000 seconds (a year)") }
            c.offline.maxAge = d
        },
        OptionSpec(name: "offline-cache-key", help: "request fields that say whose answer it is; Host, target, Accept-Language and Vary are always part of the key",
                   value: "LIST", show: { c in strs(c.offline.keyFields) }) { c, v, o throws(ConfigError) in
            c.offline.keyFields = try keyFieldNames(list(v, o), o)
        },
        OptionSpec(name: "offline-cache-override", help: "on or off: serve stale even answers the upstream marked no-cache, must-revalidate, proxy-revalidate or s-maxage (never no-store or private)",
                   value: "on|off", show: { c in q(c.offline.override ? "on" : "off") }) { c, v, o throws(ConfigError) in
            c.offline.override = try onOff(v, o)
        },
        OptionSpec(name: "offline-store", help: "where the offline cache's entries live: memory, or redis://HOST:PORT[/DB] or unix:///PATH for Redis or Valkey shared by every replica",
                   value: "URL", show: { c in q(c.offline.store.description) }) { c, v, o throws(ConfigError) in
            switch OfflineStoreURL.parse(try text(v, o)) {
            case .success(let u): c.offline.store = u
            case .failure(let why): throw ConfigError(option: o, problem: why.reason)
            }
        },
        OptionSpec(name: "offline-store-secret-file", help: "file holding the secret that keys the shared store's HMAC keys (at least 16 bytes, the same on every replica); required with Redis",
                   value: "PATH", show: { c in c.offline.storeSecretFile.map(q) ?? "null" }) { c, v, o throws(ConfigError) in
            let path = try nonEmpty(v, o)
            guard let data = FileManager.default.contents(atPath: path) else { throw ConfigError(option: o, problem: "cannot read \(path)") }
            var secret = [UInt8](data)
            // `echo secret > file` adds a newline that a Kubernetes Secret written elsewhere lacks.
            if secret.last == 0x0A { secret.removeLast() }
            if secret.last == 0x0D { secret.removeLast() }
            guard secret.count >= 16 else {
                throw ConfigError(option: o, problem: "\(path) holds \(secret.count) bytes; at least 16 are needed (head -c 32 /dev/urandom | base64)")
            }
            c.offline.storeSecretFile = path
            c.offline.storeSecret = secret
        },
        OptionSpec(name: "offline-store-password-file", help: "file holding the shared store's password (one line), or an ACL user and password (two lines), sent with AUTH",
                   value: "PATH", show: { c in c.offline.storePasswordFile.map(q) ?? "null" }) { c, v, o throws(ConfigError) in
            let path = try nonEmpty(v, o)
            guard let data = FileManager.default.contents(atPath: path) else { throw ConfigError(option: o, problem: "cannot read \(path)") }
            switch RedisPasswordFile.parse([UInt8](data)) {
            case .success(let credentials): c.offline.storeCredentials = credentials
            // The reason names the file's shape, never its bytes.
            case .failure(let why): throw ConfigError(option: o, problem: "\(path): \(why.reason)")
            }
            c.offline.storePasswordFile = path
        },
        OptionSpec(name: "offline-store-max-entry", help: "largest value written to or served from the shared store, suffixes as for offline-cache",
                   value: "SIZE", show: { c in "\(c.offline.storeMaxEntry)" }) { c, v, o throws(ConfigError) in
            let n = try byteSize(v, o)
            guard (1024...(512 << 20)).contains(n) else { throw ConfigError(option: o, problem: "must be 1KiB-512MiB (Redis's own limit for a value)") }
            c.offline.storeMaxEntry = n
        },
        OptionSpec(name: "offline-store-timeout", help: "seconds an offline call waits for the shared store before it gets the offline problem",
                   value: "SEC", show: { c in num(c.offline.storeTimeout) }) { c, v, o throws(ConfigError) in
            let d = try seconds(v, o)
            guard d <= 5 else { throw ConfigError(option: o, problem: "must be at most 5 seconds (it delays an offline answer)") }
            c.offline.storeTimeout = d
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
        OptionSpec(name: "code-status", help: "business code to HTTP status map, e.g. 1001=409,\"A0400\"=400", value: "LIST", fixedDefault: "the dialect's (none)", show: { _ in "null" }) { c, v, o throws(ConfigError) in
            c.dialectOverrides.codeStatus = try DialectConfig.codeStatus(v, o)
            c.dialectOverrides.origins["code_status"] = o
        },
        OptionSpec(name: "cors-origins", help: "origins (exact, https://*.example.com for its subdomains, or *) whose CORS Peel answers itself, preflights included", value: "LIST", show: { c in strs(c.cors.origins) }) { c, v, o throws(ConfigError) in
            let l = try list(v, o, default: GatewayConfig().cors.origins)
            for origin in l where origin != "*" {
                if let why = OriginPattern.problem(origin) { throw ConfigError(option: o, problem: why) }
            }
            c.cors.origins = l
        },
        OptionSpec(name: "cors-expose-headers", help: "fields browsers may read besides X-Request-Id, Retry-After, Age, Cache-Status and the upstream's own list", value: "LIST", show: { c in strs(c.cors.exposeHeaders) }) { c, v, o throws(ConfigError) in
            let l = try list(v, o, default: GatewayConfig().cors.exposeHeaders)
            for name in l where !isToken(name) { throw ConfigError(option: o, problem: "\(name) is not a field name") }
            c.cors.exposeHeaders = l
        },
        OptionSpec(name: "cors-credentials", help: "on or off: allow credentialed cross-origin calls (never with --cors-origins *)", value: "on|off", show: { c in q(c.cors.credentials ? "on" : "off") }) { c, v, o throws(ConfigError) in
            c.cors.credentials = try onOff(v, o)
        },
        OptionSpec(name: "cors-max-age", help: "seconds a browser may cache Peel's preflight answer", value: "SEC", show: { c in "\(c.cors.maxAge)" }) { c, v, o throws(ConfigError) in
            c.cors.maxAge = try integer(v, o, 0...86_400)
        },
        OptionSpec(name: "rewrite-redirects", help: "on or off: Location, Content-Location and Refresh naming the upstream name Peel", value: "on|off", show: { c in q(c.rewrite.redirects ? "on" : "off") }) { c, v, o throws(ConfigError) in
            c.rewrite.redirects = try onOff(v, o)
        },
        OptionSpec(name: "preserve-host", help: "on or off: forward the client's Host instead of the upstream's (nginx proxy_set_header Host $host)", value: "on|off", show: { c in q(c.calls.preserveHost ? "on" : "off") }) { c, v, o throws(ConfigError) in
            c.calls.preserveHost = try onOff(v, o)
        },
        OptionSpec(name: "forward-fields", help: "forwarding fields Peel writes about the client: x-forwarded (X-Forwarded-For, -Proto, -Host), forwarded (RFC 7239), both or none; a trusted proxy's are carried on whatever this says", value: "x-forwarded|forwarded|both|none", show: { c in q(c.calls.forwardFields.rawValue) }) { c, v, o throws(ConfigError) in
            let name = try text(v, o)
            guard let f = GatewayConfig.ForwardFields(rawValue: name) else {
                throw ConfigError(option: o, problem: "must be x-forwarded, forwarded, both or none")
            }
            c.calls.forwardFields = f
        },
        OptionSpec(name: "rewrite-cookies", help: "on or off: Set-Cookie Path loses the base path, Domain naming the upstream is dropped", value: "on|off", show: { c in q(c.rewrite.cookies ? "on" : "off") }) { c, v, o throws(ConfigError) in
            c.rewrite.cookies = try onOff(v, o)
        },
        OptionSpec(name: "stream-threshold", help: "passthrough answers of unknown length or longer than this many bytes stream as they arrive", value: "BYTES", show: { c in "\(c.calls.streamThreshold)" }) { c, v, o throws(ConfigError) in
            c.calls.streamThreshold = try integer(v, o, 0...(1 << 40))
        },
        OptionSpec(name: "compression", help: "codings offered to clients, in tie-break order, or off", value: "LIST|off", show: { c in strs(c.compression.codings.map(\.rawValue)) }) { c, v, o throws(ConfigError) in
            let l = try list(v, o, default: GatewayConfig().compression.codings.map(\.rawValue))
            if l == ["off"] { c.compression.codings = []; return }
            var codings: [ContentCoding] = []
            for name in l {
                guard let coding = ContentCoding(rawValue: name.lowercased()) else {
                    throw ConfigError(option: o, problem: "\(name) is not gzip, br or off")
                }
                if !codings.contains(coding) { codings.append(coding) }
            }
            c.compression.codings = codings
        },
        OptionSpec(name: "compression-min-size", help: "smallest answer body compressed, in bytes", value: "BYTES", show: { c in "\(c.compression.minSize)" }) { c, v, o throws(ConfigError) in
            c.compression.minSize = try integer(v, o, 1...(1 << 30))
        },
        OptionSpec(name: "gzip-level", help: "zlib level for gzip answers, 1-9", value: "N", show: { c in "\(c.compression.gzipLevel)" }) { c, v, o throws(ConfigError) in
            c.compression.gzipLevel = try integer(v, o, 1...9)
        },
        OptionSpec(name: "brotli-quality", help: "brotli quality for br answers, 0-11", value: "N", show: { c in "\(c.compression.brotliQuality)" }) { c, v, o throws(ConfigError) in
            c.compression.brotliQuality = try integer(v, o, 0...11)
        },
        OptionSpec(name: "business-status", help: "HTTP status of a business error without a code-status entry", value: "N", show: { c in "\(c.envelope.businessStatus)" }) { c, v, o throws(ConfigError) in
            c.envelope.businessStatus = try integer(v, o, 400...599)
        },
    ]
}

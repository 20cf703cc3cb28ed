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
    case map([String: Any])
}

/// One option: its flag, variable and config key, and how it lands in the config.
struct OptionSpec: Sendable {
    let name: String
    let help: String
    let apply: @Sendable (inout GatewayConfig, ConfigValue, String) throws(ConfigError) -> Void
    var flag: String { "--" + name }
    var env: String { "PEEL_" + name.uppercased().replacingOccurrences(of: "-", with: "_") }
    var key: String { name.replacingOccurrences(of: "-", with: "_") }
}

/// Loads flags > environment > config file > defaults, strictly.
public enum ConfigLoader {
    /// Options every source accepts, in `--help` order.
    static let options: [OptionSpec] = [
        OptionSpec(name: "upstream", help: "http(s) base URL of the upstream API, may carry a base path (required)") { c, v, o throws(ConfigError) in
            switch UpstreamURL.parse(try text(v, o)) {
            case .success(let u): c.upstream = u
            case .failure(let why): throw ConfigError(option: o, problem: why.reason)
            }
        },
        OptionSpec(name: "listen", help: "client-facing HOST:PORT (default 127.0.0.1:8080)") { c, v, o throws(ConfigError) in
            c.listen = try hostPort(v, o)
        },
        OptionSpec(name: "admin-listen", help: "admin HOST:PORT, or off (default 127.0.0.1:9090)") { c, v, o throws(ConfigError) in
            let t = try text(v, o)
            c.adminListen = t == "off" ? nil : try hostPort(v, o)
        },
        OptionSpec(name: "workers", help: "event-loop threads, each with its own listener (default: CPU count)") { c, v, o throws(ConfigError) in
            c.workers = try integer(v, o, 1...256)
        },
        OptionSpec(name: "timeout", help: "seconds for the whole upstream exchange (default 30)") { c, v, o throws(ConfigError) in
            c.timeout = try seconds(v, o)
        },
        OptionSpec(name: "connect-timeout", help: "seconds for TCP+TLS connect (default 5)") { c, v, o throws(ConfigError) in
            c.connectTimeout = try seconds(v, o)
        },
        OptionSpec(name: "probe-path", help: "reachability probe path, relative to the upstream (default /)") { c, v, o throws(ConfigError) in
            let t = try text(v, o)
            guard t.hasPrefix("/") else { throw ConfigError(option: o, problem: "must start with /") }
            c.probePath = t
        },
        OptionSpec(name: "probe-interval", help: "seconds between probes (default 2)") { c, v, o throws(ConfigError) in
            c.probeInterval = try seconds(v, o)
        },
        OptionSpec(name: "probe-timeout", help: "seconds one probe may take (default 1)") { c, v, o throws(ConfigError) in
            c.probeTimeout = try seconds(v, o)
        },
        OptionSpec(name: "fall", help: "consecutive failures to go offline (default 3)") { c, v, o throws(ConfigError) in
            c.fall = try integer(v, o, 1...1000)
        },
        OptionSpec(name: "rise", help: "consecutive successes to come back (default 2)") { c, v, o throws(ConfigError) in
            c.rise = try integer(v, o, 1...1000)
        },
        OptionSpec(name: "success-codes", help: "envelope codes that mean success (default 0)") { c, v, o throws(ConfigError) in
            c.envelope.successCodes = try codes(v, o)
        },
        OptionSpec(name: "auth-codes", help: "envelope codes that mean token expired (default 7)") { c, v, o throws(ConfigError) in
            c.envelope.authCodes = try codes(v, o)
        },
        OptionSpec(name: "code-field", help: "envelope code member (default code)") { c, v, o throws(ConfigError) in
            c.envelope.codeField = try nonEmpty(v, o)
        },
        OptionSpec(name: "message-field", help: "envelope message member (default message)") { c, v, o throws(ConfigError) in
            c.envelope.messageField = try nonEmpty(v, o)
        },
        OptionSpec(name: "data-field", help: "envelope data member (default data)") { c, v, o throws(ConfigError) in
            c.envelope.dataField = try nonEmpty(v, o)
        },
        OptionSpec(name: "max-body", help: "largest client request body in bytes (default 10485760)") { c, v, o throws(ConfigError) in
            c.maxBody = try integer(v, o, 0...(1 << 40))
        },
        OptionSpec(name: "max-upstream-body", help: "largest upstream response body in bytes (default 67108864)") { c, v, o throws(ConfigError) in
            c.maxUpstreamBody = try integer(v, o, 1...(1 << 40))
        },
        OptionSpec(name: "max-buffered", help: "request and upstream body bytes held at once, whole process (default 268435456)") { c, v, o throws(ConfigError) in
            c.maxBuffered = try integer(v, o, 1...(1 << 40))
        },
        OptionSpec(name: "access-log", help: "json or off: one JSON line per request on stdout (default json)") { c, v, o throws(ConfigError) in
            switch try text(v, o) {
            case "json": c.accessLog = true
            case "off": c.accessLog = false
            default: throw ConfigError(option: o, problem: "must be json or off")
            }
        },
        OptionSpec(name: "ca-file", help: "extra CA bundle (PEM) for https upstreams (default: system store)") { c, v, o throws(ConfigError) in
            let path = try nonEmpty(v, o)
            guard FileManager.default.isReadableFile(atPath: path) else {
                throw ConfigError(option: o, problem: "cannot read \(path)")
            }
            c.caFile = path
        },
        OptionSpec(name: "drain-delay", help: "seconds between /readyz turning 503 and listeners closing (default 0)") { c, v, o throws(ConfigError) in
            c.drainDelay = try seconds(v, o, allowZero: true)
        },
        OptionSpec(name: "shutdown-timeout", help: "seconds calls in flight may take after SIGTERM (default 30)") { c, v, o throws(ConfigError) in
            c.shutdownTimeout = try seconds(v, o, allowZero: true)
        },
        OptionSpec(name: "max-inflight", help: "upstream calls in flight per worker before refusing (default 10000)") { c, v, o throws(ConfigError) in
            c.maxInFlight = try integer(v, o, 1...1_000_000)
        },
        OptionSpec(name: "client-timeout", help: "seconds an idle or stalled client connection is kept (default 60)") { c, v, o throws(ConfigError) in
            c.clientTimeout = try seconds(v, o)
        },
        OptionSpec(name: "header-timeout", help: "seconds a request head may take from first to last byte (default 10)") { c, v, o throws(ConfigError) in
            c.headerTimeout = try seconds(v, o)
        },
        OptionSpec(name: "body-timeout", help: "seconds a request body may take from the end of its head (default 60)") { c, v, o throws(ConfigError) in
            c.bodyTimeout = try seconds(v, o)
        },
        OptionSpec(name: "problem-type-base", help: "prefix of every problem type (default urn:peel:problem:)") { c, v, o throws(ConfigError) in
            c.envelope.problemTypeBase = try nonEmpty(v, o)
        },
        OptionSpec(name: "passthrough-content-types", help: "media types passed through unwrapped (default image/*,audio/*,video/*,application/octet-stream)") { c, v, o throws(ConfigError) in
            c.envelope.passthroughContentTypes = try list(v, o)
        },
        OptionSpec(name: "passthrough-paths", help: "path prefixes passed through unwrapped (default none)") { c, v, o throws(ConfigError) in
            let l = try list(v, o)
            for p in l where !p.hasPrefix("/") { throw ConfigError(option: o, problem: "\(p) must start with /") }
            c.envelope.passthroughPaths = l
        },
        OptionSpec(name: "code-status", help: "business code to HTTP status map, e.g. 1001=409,1002=404 (default: all 422)") { c, v, o throws(ConfigError) in
            var m: [Int64: Int] = [:]
            let pairs: [(String, String)]
            switch v {
            case .map(let d):
                pairs = try d.map { (k, val) throws(ConfigError) in
                    guard !isBool(val), let n = val as? NSNumber else {
                        throw ConfigError(option: o, problem: "status for \(k) must be a number")
                    }
                    return (k, n.stringValue)
                }
            default:
                pairs = try list(v, o).map { item throws(ConfigError) in
                    let parts = item.split(separator: "=", maxSplits: 1).map(String.init)
                    guard parts.count == 2 else { throw ConfigError(option: o, problem: "\(item) is not CODE=STATUS") }
                    return (parts[0], parts[1])
                }
            }
            for (k, s) in pairs {
                guard let code = Int64(k.trimmingCharacters(in: .whitespaces)) else {
                    throw ConfigError(option: o, problem: "\(k) is not an integer code")
                }
                guard let st = Int(s.trimmingCharacters(in: .whitespaces)), (400...599).contains(st) else {
                    throw ConfigError(option: o, problem: "status for \(k) must be 400-599")
                }
                m[code] = st
            }
            c.envelope.codeStatus = m
        },
        OptionSpec(name: "business-status", help: "HTTP status of a business error without a code-status entry (default 422)") { c, v, o throws(ConfigError) in
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
        if !c.envelope.successCodes.isDisjoint(with: c.envelope.authCodes) {
            throw ConfigError(option: "--auth-codes", problem: "overlaps --success-codes")
        }
        let fields = [c.envelope.codeField, c.envelope.messageField, c.envelope.dataField]
        if Set(fields).count != 3 { throw ConfigError(option: "--data-field", problem: "code, message and data fields must differ") }
        // A body over the budget is refused as "try again shortly"; one the budget can never hold
        // would be told that forever.
        if c.maxBuffered < c.maxBody {
            throw ConfigError(option: "--max-buffered", problem: "must be at least --max-body")
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
        case let b as Bool where isBool(raw): return .text(b ? "json" : "off")
        case let n as NSNumber: return .text(n.stringValue)
        case let a as [Any]:
            return .list(a.map { v in
                if let n = v as? NSNumber { return n.stringValue }
                return "\(v)"
            })
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
        case .map: throw ConfigError(option: o, problem: "must be a string, not an object")
        }
    }

    static func nonEmpty(_ v: ConfigValue, _ o: String) throws(ConfigError) -> String {
        let t = try text(v, o)
        if t.isEmpty { throw ConfigError(option: o, problem: "must not be empty") }
        return t
    }

    static func list(_ v: ConfigValue, _ o: String) throws(ConfigError) -> [String] {
        switch v {
        case .list(let l): return l.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        case .text(let t):
            return t.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        case .map: throw ConfigError(option: o, problem: "must be a list, not an object")
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

    static func seconds(_ v: ConfigValue, _ o: String, allowZero: Bool = false) throws(ConfigError) -> Double {
        let t = try text(v, o)
        guard let d = Double(t), d.isFinite else { throw ConfigError(option: o, problem: "\(t) is not a number of seconds") }
        guard allowZero ? d >= 0 : d > 0 else { throw ConfigError(option: o, problem: "must be \(allowZero ? "0 or more" : "more than 0") seconds") }
        guard d <= 86_400 else { throw ConfigError(option: o, problem: "must be at most 86400 seconds") }
        return d
    }

    static func codes(_ v: ConfigValue, _ o: String) throws(ConfigError) -> Set<Int64> {
        var s = Set<Int64>()
        for item in try list(v, o) {
            guard let n = Int64(item) else { throw ConfigError(option: o, problem: "\(item) is not an integer code") }
            s.insert(n)
        }
        if s.isEmpty { throw ConfigError(option: o, problem: "needs at least one code") }
        return s
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
            "       peel healthcheck [--admin-listen HOST:PORT]   exit 0 when the local admin /healthz answers",
            "       peel --help | --version",
            "",
            "Every option has an environment variable; precedence is flag > environment > config file > default.",
            "",
            "  --config FILE  (PEEL_CONFIG)",
            "      JSON object with any option below as a key (snake_case), e.g. {\"timeout\": 10, \"code_status\": {\"1001\": 409}}",
        ]
        for spec in options {
            lines.append("  \(spec.flag) VALUE  (\(spec.env))")
            lines.append("      \(spec.help)")
        }
        return lines.joined(separator: "\n")
    }

    /// The effective configuration as JSON, for `peel check-config`.
    public static func describe(_ c: GatewayConfig) -> String {
        func q(_ s: String) -> String { "\"" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\"" }
        func codes(_ s: Set<Int64>) -> String { "[" + s.sorted().map(String.init).joined(separator: ",") + "]" }
        func strs(_ a: [String]) -> String { "[" + a.map(q).joined(separator: ",") + "]" }
        let map = c.envelope.codeStatus.sorted { $0.key < $1.key }.map { "\(q(String($0.key))):\($0.value)" }.joined(separator: ",")
        let fields: [(String, String)] = [
            ("upstream", q(c.upstream.description)),
            ("listen", q(c.listen.description)),
            ("admin_listen", q(c.adminListen?.description ?? "off")),
            ("workers", "\(c.workers)"),
            ("timeout", "\(c.timeout)"),
            ("connect_timeout", "\(c.connectTimeout)"),
            ("probe_path", q(c.probePath)),
            ("probe_interval", "\(c.probeInterval)"),
            ("probe_timeout", "\(c.probeTimeout)"),
            ("fall", "\(c.fall)"),
            ("rise", "\(c.rise)"),
            ("success_codes", codes(c.envelope.successCodes)),
            ("auth_codes", codes(c.envelope.authCodes)),
            ("code_field", q(c.envelope.codeField)),
            ("message_field", q(c.envelope.messageField)),
            ("data_field", q(c.envelope.dataField)),
            ("code_status", "{\(map)}"),
            ("business_status", "\(c.envelope.businessStatus)"),
            ("max_body", "\(c.maxBody)"),
            ("max_upstream_body", "\(c.maxUpstreamBody)"),
            ("max_buffered", "\(c.maxBuffered)"),
            ("access_log", q(c.accessLog ? "json" : "off")),
            ("ca_file", c.caFile.map(q) ?? "null"),
            ("drain_delay", "\(c.drainDelay)"),
            ("shutdown_timeout", "\(c.shutdownTimeout)"),
            ("max_inflight", "\(c.maxInFlight)"),
            ("client_timeout", "\(c.clientTimeout)"),
            ("header_timeout", "\(c.headerTimeout)"),
            ("body_timeout", "\(c.bodyTimeout)"),
            ("problem_type_base", q(c.envelope.problemTypeBase)),
            ("passthrough_content_types", strs(c.envelope.passthroughContentTypes)),
            ("passthrough_paths", strs(c.envelope.passthroughPaths)),
        ]
        return "{\n" + fields.map { "  \(q($0.0)): \($0.1)" }.joined(separator: ",\n") + "\n}"
    }
}

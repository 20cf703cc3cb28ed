import Foundation
import PeelEnvelope
import PeelIO

/// Loads flags > environment > config file > defaults, strictly.
public enum ConfigLoader {
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
        var sections: (file: String, upstreams: ConfigJSON?, routes: ConfigJSON?)? = nil
        if let (path, origin) = configPath {
            let entries = try readConfigFile(path, origin: origin)
            for member in entries.sorted(by: { $0.name < $1.name }) {
                let key = member.name
                // The routing sections are typed trees of their own, decoded once every option is in.
                if key == "openapi" {
                    config.contract = try ContractPublishing.decode(member.value, at: "\(path): openapi")
                    continue
                }
                if key == "upstreams" || key == "routes" {
                    if sections == nil { sections = (path, nil, nil) }
                    if key == "upstreams" { sections?.upstreams = member.value } else { sections?.routes = member.value }
                    continue
                }
                guard let spec = options.first(where: { $0.key == key }) else {
                    throw ConfigError(option: "\(path): \(key)", problem: "unknown key")
                }
                // null is "not set": check-config shows options nobody set that way.
                guard let value = fileValue(member.value) else { continue }
                try apply(spec, value, "\(path): \(key)")
            }
        }
        for spec in options {
            if let v = environment[spec.env] { try apply(spec, .text(v), spec.env) }
        }
        for (spec, v, origin) in flagValues { try apply(spec, .text(v), origin) }
        // A short --timeout with the default connect timeout shortens the connect timeout with it.
        if !explicit.contains("connect-timeout") { config.calls.connectTimeout = min(config.calls.connectTimeout, config.calls.timeout) }
        if let sections, sections.upstreams != nil || sections.routes != nil {
            config.routing = try RoutingConfig.decode(upstreams: sections.upstreams, routes: sections.routes, file: sections.file,
                                                      defaultGroup: explicit.contains("upstream"))
        }
        guard explicit.contains("upstream") || config.routing != nil else {
            throw ConfigError(option: "--upstream", problem: "is required (or PEEL_UPSTREAM, or routes in the config file)")
        }
        // The field and code options change the chosen dialect, whichever source named either.
        config.envelope.dialect = config.dialectOverrides.applied(to: config.dialectChoice)
        try validate(config)
        try checkSpoolDirectory(config.spooling)
        return config
    }

    /// A spool directory Peel cannot create a file in would fail every big answer later: refused at
    /// load (exit 2), naming the path and why. Not checked while spooling is off.
    static func checkSpoolDirectory(_ s: GatewayConfig.Spooling) throws(ConfigError) {
        guard s.threshold > 0 else { return }
        if let why = Spool(directory: s.directory, threshold: 0, limit: 1, perClient: 1).check() {
            throw ConfigError(option: "--spool-dir", problem: "\(s.directory) is not a writable directory (\(why))")
        }
    }

    /// Rejects combinations that cannot work.
    static func validate(_ c: GatewayConfig) throws(ConfigError) {
        if c.calls.connectTimeout > c.calls.timeout {
            throw ConfigError(option: "--connect-timeout", problem: "must not exceed --timeout")
        }
        if c.probe.timeout > c.probe.interval * 10 {
            throw ConfigError(option: "--probe-timeout", problem: "must not exceed ten probe intervals")
        }
        try DialectConfig.check(c.envelope.dialect, c.dialectOrigin, overrides: c.dialectOverrides)
        // The Fetch standard refuses a credentialed answer that allows every origin (Fetch §3.2.5).
        if c.cors.credentials && c.cors.origins.contains("*") {
            throw ConfigError(option: "--cors-credentials", problem: "cannot be used with --cors-origins *")
        }
        // A body over the budget is refused as "try again shortly"; one the budget can never hold
        // would be told that forever.
        if c.memory.maxBuffered < c.memory.maxBody {
            throw ConfigError(option: "--max-buffered", problem: "must be at least --max-body")
        }
        // One client can always send one whole body, and no share is larger than the whole.
        if let share = c.memory.maxBufferedPerClient, share < c.memory.maxBody || share > c.memory.maxBuffered {
            throw ConfigError(option: "--max-buffered-per-client", problem: "must be at least --max-body (\(c.memory.maxBody)) and at most --max-buffered (\(c.memory.maxBuffered))")
        }
        if let share = c.spooling.maxSpooledPerClient, share < 1 || share > c.spooling.maxSpooled {
            throw ConfigError(option: "--max-spooled-per-client", problem: "must be from 1 to --max-spooled (\(c.spooling.maxSpooled))")
        }
        // Issue 21: the shared store's keys are HMACs; without the secret they could not be.
        if c.offline.store != .memory && c.offline.storeSecret == nil {
            throw ConfigError(option: "--offline-store-secret-file", problem: "is required with a Redis --offline-store (every replica mounts the same secret)")
        }
        if let a = c.listeners.admin, a == c.listeners.client, a.port != 0 {
            throw ConfigError(option: "--admin-listen", problem: "must differ from --listen")
        }
    }

    /// The config file's members: the strict scanner judges the text (RFC 8259), then a typed tree
    /// keeps every value's JSON type; a name twice in one object is refused with its path.
    static func readConfigFile(_ path: String, origin: String) throws(ConfigError) -> [ConfigJSON.Member] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigError(option: origin, problem: "cannot read \(path)")
        }
        let bytes = [UInt8](data)
        guard JSONScanner.validate(bytes) else {
            throw ConfigError(option: origin, problem: "\(path) is not valid JSON (RFC 8259)")
        }
        switch ConfigJSON.parse(bytes) {
        case .failure(let duplicate):
            throw ConfigError(option: "\(path): \(duplicate.path)", problem: "is given twice")
        case .success(.object(let members)):
            return members
        case .success:
            throw ConfigError(option: origin, problem: "\(path) must hold a JSON object")
        }
    }

    /// A config-file value as options take it; nil for null (not set).
    static func fileValue(_ json: ConfigJSON) -> ConfigValue? {
        switch json {
        case .string(let s): return .text(s)
        case .number(let n): return .text(n)
        case .bool(let b): return .text(b ? "true" : "false")
        case .array(let a): return .array(a)
        case .object(let m): return .map(m)
        case .null: return nil
        }
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
            "       peel openapi [options] [--group NAME] [SOURCE]   the upstream's OpenAPI document (file, http:// URL, - or stdin) as Peel answers it",
            "       peel openapi --detect [SOURCE]    which dialect presets the document's 2xx schemas match",
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

    /// The effective configuration as JSON, for `peel check-config`: every option, in `--help` order,
    /// then the routing sections when the file has them.
    public static func describe(_ c: GatewayConfig) -> String {
        var fields = options.compactMap { spec in spec.show.map { (spec.key, $0(c)) } }
        if let routing = c.routing {
            // Without --upstream the built-in default URL is no group: shown as not set, so the
            // output loads back to the same groups.
            if !routing.hasDefaultGroup, let i = fields.firstIndex(where: { $0.0 == "upstream" }) { fields[i].1 = "null" }
            let json = routing.json
            fields.append(("upstreams", json.upstreams))
            fields.append(("routes", json.routes))
        }
        if c.contract != ContractPublishing() {
            fields.append(("openapi", "{\"public\": \(c.contract.isPublic)" + (c.contract.server.map { ", \"server\": " + q($0) } ?? "") + "}"))
        }
        return "{\n" + fields.map { "  \(q($0.0)): \($0.1)" }.joined(separator: ",\n") + "\n}"
    }
}

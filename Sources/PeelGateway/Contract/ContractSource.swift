/// Where a group's OpenAPI document comes from: a path fetched from the group's endpoints
/// (springdoc's `/v3/api-docs`, FastAPI's `/openapi.json`) or a file, read again every `refresh`.
public struct ContractSource: Sendable, Equatable {
    public enum Location: Sendable, Equatable {
        /// Fetched from the group's first endpoint, under its base path.
        case path(String)
        case file(String)
    }

    public var location: Location
    /// Seconds between two reads (default 10 minutes).
    public var refresh: Double = 600

    static func decode(_ json: ConfigJSON, at: String) throws(ConfigError) -> ContractSource {
        var location: Location?
        var refresh = 600.0
        for m in try RoutingConfig.object(json, at: at, allowed: ["path", "file", "refresh"]) {
            let here = "\(at).\(m.name)"
            switch m.name {
            case "path":
                guard let p = m.value.string, p.hasPrefix("/") else { throw ConfigError(option: here, problem: "must be a path starting with /") }
                if let why = ConfigLoader.originFormProblem(p) { throw ConfigError(option: here, problem: why) }
                if location != nil { throw ConfigError(option: here, problem: "path and file exclude each other") }
                location = .path(p)
            case "file":
                guard let f = m.value.string, !f.isEmpty else { throw ConfigError(option: here, problem: "must be a file's path") }
                if location != nil { throw ConfigError(option: here, problem: "path and file exclude each other") }
                location = .file(f)
            case "refresh":
                refresh = try RoutingConfig.seconds(m.value, at: here)
                guard refresh >= 1 else { throw ConfigError(option: here, problem: "must be at least 1 second") }
            default: break
            }
        }
        guard let location else { throw ConfigError(option: at, problem: "names neither path nor file") }
        return ContractSource(location: location, refresh: refresh)
    }
}

/// How the published contract is served beyond the admin listener: the config file's top-level
/// `openapi` object.
public struct ContractPublishing: Sendable, Equatable {
    /// The document is also served on the client listener at `path` (default off: it describes
    /// every route's backend).
    public var isPublic = false
    /// Written as the document's `servers` when set; else the document has none, so clients read
    /// the operations under the URL they fetched it from.
    public var server: String?
    /// Where the client listener serves it.
    public static let path = "/_peel/openapi.json"

    public init() {}

    static func decode(_ json: ConfigJSON, at: String) throws(ConfigError) -> ContractPublishing {
        var c = ContractPublishing()
        for m in try RoutingConfig.object(json, at: at, allowed: ["public", "server"]) {
            let here = "\(at).\(m.name)"
            switch m.name {
            case "public":
                guard case .bool(let b) = m.value else { throw ConfigError(option: here, problem: "must be true or false") }
                c.isPublic = b
            case "server":
                guard let url = m.value.string, url.hasPrefix("http://") || url.hasPrefix("https://") else {
                    throw ConfigError(option: here, problem: "must be an http(s) URL")
                }
                c.server = url
            default: break
            }
        }
        return c
    }
}

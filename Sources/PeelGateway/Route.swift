import PeelEnvelope
import PeelIO

/// Everything one call reads of the configuration, built once per configuration generation and
/// pinned to the call when it is planned: every later stage reads the call's route, never the live
/// configuration, so a reload between a call's send and its answer cannot mix two generations.
final class Route {
    /// How the upstream's envelopes look and which answers pass unjudged.
    let envelope: EnvelopeConfig
    /// Where the route's calls go: the origin, parsed once, and the base path joined before each target.
    let endpoint: UpstreamEndpoint
    /// `Retry-After` of the offline problem: the probe interval in whole seconds, at least 1.
    let retryAfter: String
    /// The offline cache's key fields.
    let keyFields: CacheKeyFields
    /// Peel's own CORS answers; nil when the upstream's CORS fields pass as they are.
    let cors: CORSPolicy?
    /// URL and cookie rewriting towards Peel's own address.
    let rewrite: ProxyRewrite
    /// The one reply shaper every answer passes.
    let shaper: ReplyShaper
    /// Whether the client's Host goes upstream (`--preserve-host`).
    let preserveHost: Bool
    /// Answers declared larger than this stream instead of being buffered.
    let streamThreshold: Int
    /// Proxies whose forwarding fields are believed.
    let trustedProxies: [IPNetwork]
    /// The public reachability path, matched before anything is forwarded.
    let reachabilityPath: String?
    /// Whether calls on this route are written to the access log.
    let accessLog: Bool

    /// The route's name in logs and metrics (`RouteRule.label`); `/` for the route `--upstream` makes.
    let name: String
    /// The upstream group the route's calls go to; `default` for `--upstream`'s.
    let group: String

    /// The route for `config`'s single upstream, or for one of its `routes` (`rule`): the rule's
    /// dialect, passthrough paths and key fields replace the global ones where it sets them.
    init(_ config: GatewayConfig, rule: RouteRule? = nil, endpoint: UpstreamEndpoint) {
        var envelope = config.envelope
        if let rule {
            if let dialect = rule.dialect { envelope.dialect = dialect }
            if let paths = rule.passthroughPaths { envelope.passthroughPaths = paths }
        }
        self.envelope = envelope
        name = rule?.label ?? "/"
        group = rule?.upstream ?? "default"
        self.endpoint = endpoint
        retryAfter = String(max(1, Int(config.probeInterval.rounded(.up))))
        keyFields = CacheKeyFields(rule?.offlineCacheKey ?? config.offlineCacheKey)
        let cors = CORSPolicy(config: config)
        self.cors = cors
        rewrite = ProxyRewrite(upstream: config.upstream)
        shaper = ReplyShaper(cors: cors, compression: CompressionPolicy(offered: config.compression, minSize: config.compressionMinSize),
                             rewriteRedirects: config.rewriteRedirects, rewriteCookies: config.rewriteCookies)
        preserveHost = config.preserveHost
        streamThreshold = config.streamThreshold
        trustedProxies = config.trustedProxies
        reachabilityPath = config.reachabilityPath
        accessLog = config.accessLog
    }
}

/// One configuration generation's routes and the choice among them (`RouteTable`): the route
/// `--upstream` makes, or one per rule of the config file's `routes`. Built beside the single
/// `Route` the forwarder pins today; calls are chosen through it once groups are served.
final class RouteSet {
    let routes: [Route]
    private let table: RouteTable<Route>

    /// Throws when curl's URL parser refuses an endpoint's origin.
    init(_ config: GatewayConfig) throws(PeelIOError) {
        guard let routing = config.routing else {
            let only = Route(config, endpoint: try Self.endpoint(config.upstream))
            routes = [only]
            table = RouteTable([(host: nil, prefix: "/", target: only)])
            return
        }
        var built: [Route] = []
        var entries: [(host: String?, prefix: String, target: Route)] = []
        var endpoints: [String: UpstreamEndpoint] = [:]
        if routing.hasDefaultGroup { endpoints["default"] = try Self.endpoint(config.upstream) }
        for group in routing.upstreams {
            if let first = group.endpoints.first { endpoints[group.name] = try Self.endpoint(first.url) }
        }
        for rule in routing.routes {
            guard let endpoint = endpoints[rule.upstream] else { continue }
            let route = Route(config, rule: rule, endpoint: endpoint)
            built.append(route)
            entries.append((rule.host, rule.prefix, route))
        }
        routes = built
        table = RouteTable(entries)
    }

    /// The endpoint for an upstream URL.
    static func endpoint(_ url: UpstreamURL) throws(PeelIOError) -> UpstreamEndpoint {
        try UpstreamEndpoint(origin: url.origin, basePath: url.basePath)
    }

    /// The route for a request's Host and path; nil when none applies (the `no-route` problem).
    func choose(host: String?, path: String) -> Route? { table.choose(host: host, path: path) }
}


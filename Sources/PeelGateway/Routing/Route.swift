import PeelEnvelope
import PeelIO

/// Everything one call reads of the configuration, built once per configuration generation and
/// pinned to the call when it is planned: every later stage reads the call's route, never the live
/// configuration, so a reload between a call's send and its answer cannot mix two generations.
final class Route {
    /// How the upstream's envelopes look and which answers pass unjudged.
    let envelope: EnvelopeConfig
    /// Where the route's calls go: its group's endpoints, and this worker's choice among them.
    let picker: EndpointPicker
    /// curl's timeouts and CA bundle for the route's calls, failover attempts included: the group's
    /// own, else the generation's global ones (never the client's live defaults).
    let limits: TransferLimits
    /// The generation's encoder and offline-cache terms, shared by its routes.
    let generation: Generation
    /// Its position among the (route, upstream) pairs metrics count (`RouteLabels`); nil when uncounted.
    let metricsPosition: Int?
    /// `Retry-After` of the offline problem: the probe interval in whole seconds, at least 1.
    let retryAfter: String
    /// The offline cache's key fields.
    let keyFields: CacheKeyFields
    /// Where each key field's value sits among those the generation reads (`RouteSet.keyFields`);
    /// nil when they are the same fields in the same order.
    let keyPositions: [Int]?
    /// Peel's own CORS answers; nil when the upstream's CORS fields pass as they are.
    let cors: CORSPolicy?
    /// URL and cookie rewriting towards Peel's own address, for answers of any endpoint of the group.
    let rewrite: ProxyRewrite
    /// The same for answers of each endpoint, when the group's base paths differ (else empty: the
    /// one above reads every answer alike).
    private let rewriteByEndpoint: [ProxyRewrite]
    /// The one reply shaper every answer passes.
    let shaper: ReplyShaper
    /// Whether the client's Host goes upstream (`--preserve-host`).
    let preserveHost: Bool
    /// The forwarding fields Peel writes (`--forward-fields`).
    let forwardFields: GatewayConfig.ForwardFields
    /// Answers declared larger than this stream instead of being buffered.
    let streamThreshold: Int
    /// Proxies whose forwarding fields are believed.
    let trustedProxies: [IPNetwork]
    /// The public reachability path, matched before anything is forwarded.
    let reachabilityPath: String?
    /// Where the client listener serves the published contract; nil when it does not.
    let contractPath: String?
    /// Whether calls on this route are written to the access log.
    let accessLog: Bool
    /// Which upgrades are tunneled, and the tunnels' bounds.
    let tunnels: GatewayConfig.Tunnels

    /// The route's name in logs and metrics (`RouteRule.label`); `/` for the route `--upstream`
    /// makes; nil for the answers Peel gives when no route applies.
    let name: String?
    /// The upstream group the route's calls go to; `default` for `--upstream`'s.
    var group: UpstreamGroupState { picker.group }
    /// The rule whose `strip_prefix` the upstream path follows; nil when nothing is stripped.
    private let stripping: RouteRule?
    /// Whether the route takes its prefix off the path it sends upstream.
    var stripsPrefix: Bool { stripping != nil }
    /// What the offline cache's keys carry of the group: its name with `routes`, nothing without
    /// (so the keys of a configuration without routes stay as they were).
    let keyGroup: String

    /// The route for `config`'s single upstream, or for one of its `routes` (`rule`): the rule's
    /// dialect, passthrough paths and key fields replace the global ones where it sets them.
    /// `unrouted`: Peel's own answers for calls no route applies to (no name).
    init(_ config: GatewayConfig, generation: Generation, rule: RouteRule? = nil, picker: EndpointPicker,
         keyFields union: [String]? = nil, unrouted: Bool = false, labels: RouteLabels? = nil) {
        self.generation = generation
        var envelope = config.envelope
        if let rule {
            if let dialect = rule.dialect { envelope.dialect = dialect }
            if let paths = rule.passthroughPaths { envelope.passthroughPaths = paths }
        }
        self.envelope = envelope
        let name = unrouted ? nil : rule?.label ?? "/"
        self.name = name
        metricsPosition = name.flatMap { n in labels?.position(route: n, upstream: picker.group.name) }
        self.picker = picker
        let group: UpstreamGroup? = config.routing?.upstreams.first { $0.name == picker.group.name }
        limits = TransferLimits(config.calls, group: group)
        stripping = rule?.stripPrefix == true ? rule : nil
        keyGroup = config.routing == nil ? "" : picker.group.name
        let interval: Double = group?.probe.interval ?? config.probe.interval
        retryAfter = String(max(1, Int(interval.rounded(.up))))
        let names = rule?.offlineCacheKey ?? config.offline.keyFields
        keyFields = CacheKeyFields(names)
        keyPositions = union.flatMap { all in all == names ? nil : names.map { all.firstIndex(of: $0)! } }
        let cors = CORSPolicy(config.cors)
        self.cors = cors
        // The answers of every endpoint of the group, and the prefix a stripping route took off.
        let restoring: String = rule.map { $0.stripPrefix ? $0.prefix : "" } ?? ""
        let urls = picker.group.endpoints.map(\.url)
        rewrite = ProxyRewrite(upstreams: urls, restoring: restoring)
        rewriteByEndpoint = Set(urls.map(\.basePath)).count > 1
            ? urls.indices.map { ProxyRewrite(upstreams: urls, restoring: restoring, answeredBy: $0) } : []
        shaper = ReplyShaper(cors: cors, compression: CompressionPolicy(offered: config.compression.codings, minSize: config.compression.minSize),
                             rewriteRedirects: config.rewrite.redirects, rewriteCookies: config.rewrite.cookies)
        preserveHost = config.calls.preserveHost
        forwardFields = config.calls.forwardFields
        streamThreshold = config.calls.streamThreshold
        trustedProxies = config.clients.trustedProxies
        reachabilityPath = config.reachability.path
        contractPath = config.contract.isPublic ? ContractPublishing.path : nil
        accessLog = config.logs.access
        tunnels = config.tunnels
    }
}

extension Route {
    /// The path sent upstream for the client's `path` (see `RouteRule.upstreamPath`); nil when
    /// stripping the prefix would leave a path that climbs above the root.
    func upstreamPath(_ path: String) -> String? {
        guard let stripping else { return path }
        return stripping.upstreamPath(path)
    }

    /// The rewriting for an answer of the endpoint at `answeredBy` in the group; `answeredBy` is nil
    /// when no endpoint's live answer is passed on (a stored one, Peel's own), and every endpoint's
    /// base path is read then.
    func rewrite(answeredBy: Int?) -> ProxyRewrite {
        guard let i = answeredBy, i < rewriteByEndpoint.count else { return rewrite }
        return rewriteByEndpoint[i]
    }
}

/// One configuration generation's routes and the choice among them (`RouteTable`): the route
/// `--upstream` makes, or one per rule of the config file's `routes`.
final class RouteSet {
    let routes: [Route]
    /// The route of calls no route is chosen for: Peel's own answers (refusals, preflights, the
    /// reachability path, `no-route`); without `routes`, the one route every call takes.
    let fallback: Route
    /// Whether calls are chosen among `routes` (the config file has `routes`).
    let routed: Bool
    /// Every key field any route reads, in order: a request's fields are read once, before its
    /// route is known.
    let keyFields: CacheKeyFields
    /// Every endpoint of every group, as this worker's routes parsed them.
    let endpoints: [UpstreamEndpoint]
    private let table: RouteTable<Route>

    /// Throws when curl's URL parser refuses an endpoint's origin.
    init(_ config: GatewayConfig, groups: UpstreamGroups, labels: RouteLabels? = nil, worker: Int = 0) throws(PeelIOError) {
        // One picker per group, shared by the group's routes: its balancing spans them all.
        let generation = Generation(config)
        var pickers: [String: EndpointPicker] = [:]
        for g in groups.all { pickers[g.name] = try EndpointPicker(g, worker: worker) }
        endpoints = groups.all.flatMap { pickers[$0.name]!.endpoints }
        let first = pickers[groups.all[0].name]!
        guard let routing = config.routing else {
            let only = Route(config, generation: generation, picker: first, labels: labels)
            routes = [only]
            fallback = only
            routed = false
            keyFields = only.keyFields
            table = RouteTable([(host: nil, prefix: "/", target: only)])
            return
        }
        var union = config.offline.keyFields
        for rule in routing.routes {
            for name in rule.offlineCacheKey ?? [] where !union.contains(name) { union.append(name) }
        }
        var built: [Route] = []
        var entries: [(host: String?, prefix: String, target: Route)] = []
        for rule in routing.routes {
            guard let picker = pickers[rule.upstream] else { continue }
            let route = Route(config, generation: generation, rule: rule, picker: picker, keyFields: union, labels: labels)
            built.append(route)
            entries.append((rule.host, rule.prefix, route))
        }
        routes = built
        fallback = Route(config, generation: generation, picker: first, keyFields: union, unrouted: true)
        routed = true
        keyFields = CacheKeyFields(union)
        table = RouteTable(entries)
    }

    /// The route for a request's Host and path; nil when none applies (the `no-route` problem).
    func choose(host: String?, path: String) -> Route? {
        routed ? table.choose(host: host, path: path) : fallback
    }
}

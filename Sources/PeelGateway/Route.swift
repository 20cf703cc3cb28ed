import PeelEnvelope
import PeelIO

/// Everything one call reads of the configuration, built once per configuration generation and
/// pinned to the call when it is planned: every later stage reads the call's route, never the live
/// configuration, so a reload between a call's send and its answer cannot mix two generations.
final class Route {
    /// How the upstream's envelopes look and which answers pass unjudged.
    let envelope: EnvelopeConfig
    /// The upstream URL's base path, joined before each target.
    let basePath: String
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

    init(_ config: GatewayConfig) {
        envelope = config.envelope
        basePath = config.upstream.basePath
        retryAfter = String(max(1, Int(config.probeInterval.rounded(.up))))
        keyFields = CacheKeyFields(config.offlineCacheKey)
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

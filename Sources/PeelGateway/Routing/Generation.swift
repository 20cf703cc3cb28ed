import PeelIO

/// What one configuration generation fixes for every call planned under it, beyond each route's own
/// settings: made once per worker when a configuration is applied and held by each of the
/// generation's routes, so a call reaches it through the route it is pinned to, from plan to log
/// line, whatever a reload does meanwhile.
final class Generation {
    /// This worker's gzip/br encoder at the generation's `gzip_level` and `brotli_quality`;
    /// loop-thread only.
    let encoder: ContentEncoder
    /// What the offline cache keeps a call's answer by: the generation's `offline_cache_max_age` and
    /// `offline_cache_override`. (Whether the cache is on, and its size, stay live: turning it off
    /// stops every write at once.)
    let cacheTerms: OfflineCache.Terms

    init(_ config: GatewayConfig) {
        encoder = ContentEncoder(gzipLevel: config.compression.gzipLevel, brotliQuality: config.compression.brotliQuality)
        cacheTerms = OfflineCache.Terms(maxAge: config.offline.maxAge, override: config.offline.override)
    }
}

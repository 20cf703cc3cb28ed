import Glibc
import PeelIO
import Synchronization

/// Fixed histogram buckets in seconds, shared by request and upstream durations.
let durationBuckets: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

/// A cumulative-at-render histogram (per-bucket counts, sum, count).
struct Histogram: Sendable {
    var counts = [UInt64](repeating: 0, count: durationBuckets.count + 1)
    var sum: Double = 0
    var count: UInt64 = 0

    mutating func observe(_ v: Double) {
        var i = 0
        while i < durationBuckets.count && v > durationBuckets[i] { i += 1 }
        counts[i] += 1
        sum += v
        count += 1
    }

    mutating func merge(_ o: Histogram) {
        for i in counts.indices { counts[i] += o.counts[i] }
        sum += o.sum
        count += o.count
    }
}

/// One label pair of `peel_requests_total`.
struct RequestKey: Hashable, Sendable {
    var kind: String
    var status: Int
}

/// The (route, upstream) pairs metrics count calls by, each with a fixed position for the life of the
/// process: a reload that keeps a route's name and group keeps its series, and one that drops the
/// pair drops its series from /metrics (its count is kept, should a later reload bring it back).
/// Values come from the config alone, never from a request.
final class RouteLabels: Sendable {
    private struct Known {
        var positions: [String: Int] = [:]
        var pairs: [(route: String, upstream: String)] = []
        /// Positions of the newest configuration's pairs, the ones /metrics shows.
        var current: Set<Int> = []
    }
    private let known = Locked(Known())

    /// The position of `route` on `upstream`, assigned on first sight.
    func position(route: String, upstream: String) -> Int {
        known.withLock { k in Self.position(route: route, upstream: upstream, in: &k) }
    }

    private static func position(route: String, upstream: String, in k: inout Known) -> Int {
        let key = route + "\u{0}" + upstream
        if let i = k.positions[key] { return i }
        k.pairs.append((route, upstream))
        k.positions[key] = k.pairs.count - 1
        return k.pairs.count - 1
    }

    /// Makes `pairs` the ones shown (a configuration generation's); the others leave /metrics.
    func keep(_ pairs: [(route: String, upstream: String)]) {
        known.withLock { k in
            k.current = Set(pairs.map { Self.position(route: $0.route, upstream: $0.upstream, in: &k) })
        }
    }

    /// The pairs `config`'s routes count calls by (`/` on `default` without `routes`).
    static func pairs(_ config: GatewayConfig) -> [(route: String, upstream: String)] {
        guard let routing = config.routing else { return [("/", "default")] }
        return routing.routes.map { ($0.label, $0.upstream) }
    }

    /// The pairs shown, with their positions, in order.
    var shown: [(position: Int, route: String, upstream: String)] {
        known.withLock { k in k.current.sorted().map { ($0, k.pairs[$0].route, k.pairs[$0].upstream) } }
    }
}

/// Counters of one worker; only that worker writes, the scraper reads, so the lock is never contended
/// by another worker (no shared lock on the hot path).
public final class WorkerMetrics: Sendable {
    struct Stats: Sendable {
        var requests: [RequestKey: UInt64] = [:]
        var requestDuration = Histogram()
        var upstreamDuration = Histogram()
        var upstreamErrors: [String: UInt64] = [:]
        var refusals: [String: UInt64] = [:]
        /// Calls by route position (`RouteLabels`) and status class (1xx..5xx at 0..4).
        var routeCalls: [UInt64] = []
    }
    let stats = Locked(Stats())
    /// Calls being handled right now on this worker.
    let inflight = Atomic<Int>(0)

    /// Creates empty counters.
    public init() {}

    func recordRequest(kind: String, status: Int, duration: Double, upstreamDuration: Double?, route: Int? = nil) {
        stats.withLock { s in
            s.requests[RequestKey(kind: kind, status: status), default: 0] += 1
            if let route {
                let slot = route * 5 + min(4, max(0, status / 100 - 1))
                if slot >= s.routeCalls.count { s.routeCalls += Array(repeating: 0, count: slot + 1 - s.routeCalls.count) }
                s.routeCalls[slot] += 1
            }
            s.requestDuration.observe(duration)
            if let u = upstreamDuration { s.upstreamDuration.observe(u) }
        }
    }

    func recordUpstreamError(_ reason: String) {
        stats.withLock { $0.upstreamErrors[reason, default: 0] += 1 }
    }

    /// A call Peel refused for want of its own resources, named by the bound that refused it.
    func recordRefusal(_ bound: String) {
        stats.withLock { $0.refusals[bound, default: 0] += 1 }
    }
}

/// Renders Prometheus text format 0.0.4 from all workers' counters, merged at scrape time.
enum MetricsRenderer {
    /// A label value, quoted, with `\`, `"` and line feeds escaped (exposition format 0.0.4).
    static func label(_ value: String) -> String {
        var out = "\""
        for c in value.unicodeScalars {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(c)
            }
        }
        return out + "\""
    }

    /// Each group's state and each endpoint's, from the shared states.
    static func groups(_ out: inout String, _ groups: UpstreamGroups) {
        out += "# HELP peel_upstream_group_up 1 while a group has an endpoint to take calls, 0 while it is offline.\n"
        out += "# TYPE peel_upstream_group_up gauge\n"
        for g in groups.all { out += "peel_upstream_group_up{upstream=\(label(g.name))} \(g.isDown ? 0 : 1)\n" }
        out += "# HELP peel_upstream_endpoint_up 1 while an endpoint is in its group's pool, 0 while probes or ejection hold it out.\n"
        out += "# TYPE peel_upstream_endpoint_up gauge\n"
        var inFlight = "", ejections = "", failures = ""
        for g in groups.all {
            let book = g.ejection
            for (i, e) in g.endpoints.enumerated() {
                let labels = "{upstream=\(label(g.name)),endpoint=\(label(e.url.description))}"
                out += "peel_upstream_endpoint_up\(labels) \(e.available.load(ordering: .relaxed) ? 1 : 0)\n"
                inFlight += "peel_upstream_endpoint_in_flight\(labels) \(e.inFlight.load(ordering: .relaxed))\n"
                ejections += "peel_upstream_endpoint_ejections_total\(labels) \(book.entries[i].ejections)\n"
                failures += "peel_upstream_endpoint_connect_failures_total\(labels) \(e.connectFailures.load(ordering: .relaxed))\n"
            }
        }
        out += "# HELP peel_upstream_endpoint_in_flight Calls on an endpoint now, all workers.\n# TYPE peel_upstream_endpoint_in_flight gauge\n" + inFlight
        out += "# HELP peel_upstream_endpoint_ejections_total Times passive ejection took an endpoint out.\n"
        out += "# TYPE peel_upstream_endpoint_ejections_total counter\n" + ejections
        out += "# HELP peel_upstream_endpoint_connect_failures_total Live calls that could not connect to an endpoint.\n"
        out += "# TYPE peel_upstream_endpoint_connect_failures_total counter\n" + failures
    }

    static func render(workers: [WorkerMetrics], reachability: Reachability, cache: OfflineCache, store: OfflineStoreStats?, connections: Int,
                       buffered: MemoryBudget, streams: StreamBudget, groups: UpstreamGroups? = nil, routes: RouteLabels? = nil,
                       spool: Spool? = nil, tunnels: [TunnelMeter] = []) -> String {
        var merged = WorkerMetrics.Stats()
        var inflight = 0
        for w in workers {
            // The gauge before the counts: a call is counted before it leaves the gauge
            // (`Forwarder.record`), so a scrape never shows a call gone from both.
            inflight += w.inflight.load(ordering: .acquiring)
            let s = w.stats.withLock { $0 }
            for (k, v) in s.requests { merged.requests[k, default: 0] += v }
            for (k, v) in s.upstreamErrors { merged.upstreamErrors[k, default: 0] += v }
            for (k, v) in s.refusals { merged.refusals[k, default: 0] += v }
            if merged.routeCalls.count < s.routeCalls.count {
                merged.routeCalls += Array(repeating: 0, count: s.routeCalls.count - merged.routeCalls.count)
            }
            for (i, v) in s.routeCalls.enumerated() { merged.routeCalls[i] += v }
            merged.requestDuration.merge(s.requestDuration)
            merged.upstreamDuration.merge(s.upstreamDuration)
        }
        var out = ""
        out += "# HELP peel_requests_total Requests answered, by outcome kind and HTTP status.\n"
        out += "# TYPE peel_requests_total counter\n"
        for (k, v) in merged.requests.sorted(by: { ($0.key.kind, $0.key.status) < ($1.key.kind, $1.key.status) }) {
            out += "peel_requests_total{kind=\"\(k.kind)\",status=\"\(k.status)\"} \(v)\n"
        }
        histogram(&out, "peel_request_duration_seconds", "Time from request received to answer sent.", merged.requestDuration)
        histogram(&out, "peel_upstream_duration_seconds", "Time of upstream exchanges that got an answer.", merged.upstreamDuration)
        out += "# HELP peel_upstream_up 1 while the upstream is reachable or unknown, 0 while unreachable.\n"
        out += "# TYPE peel_upstream_up gauge\n"
        out += "peel_upstream_up \(reachability.isDown ? 0 : 1)\n"
        if let groups { self.groups(&out, groups) }
        if let routes {
            out += "# HELP peel_route_requests_total Calls a route took, by route, upstream group and status class.\n"
            out += "# TYPE peel_route_requests_total counter\n"
            for (i, route, upstream) in routes.shown {
                for c in 0..<5 {
                    let n = i * 5 + c < merged.routeCalls.count ? merged.routeCalls[i * 5 + c] : 0
                    out += "peel_route_requests_total{route=\(label(route)),upstream=\(label(upstream)),class=\"\(c + 1)xx\"} \(n)\n"
                }
            }
        }
        out += "# HELP peel_upstream_errors_total Upstream exchanges that failed, by reason.\n"
        out += "# TYPE peel_upstream_errors_total counter\n"
        for (k, v) in merged.upstreamErrors.sorted(by: { $0.key < $1.key }) {
            out += "peel_upstream_errors_total{reason=\"\(k)\"} \(v)\n"
        }
        out += "# HELP peel_refusals_total Calls Peel refused for want of its own resources (the upstream did nothing wrong), by the bound that refused.\n"
        out += "# TYPE peel_refusals_total counter\n"
        for bound in ["max_buffered", "max_buffered_per_client", "max_buffered_upstream", "max_buffered_per_client_upstream",
                      "max_spooled", "max_spooled_per_client", "spool_write",
                      "max_tunnels", "max_tunnels_per_client", "tunnel_draining"] {
            out += "peel_refusals_total{bound=\"\(bound)\"} \(merged.refusals[bound] ?? 0)\n"
        }
        out += "# HELP peel_reachability_transitions_total Reachability state changes, by target state.\n"
        out += "# TYPE peel_reachability_transitions_total counter\n"
        let t = reachability.transitionCounts
        for s in [ReachabilityState.reachable, .unreachable] {
            out += "peel_reachability_transitions_total{to=\"\(s)\"} \(t[s] ?? 0)\n"
        }
        let probes = reachability.probeTotals
        out += "# HELP peel_probes_total Active probes, by result: passed, busy (connected, no answer in time: counts as reachable), failed.\n"
        out += "# TYPE peel_probes_total counter\n"
        out += "peel_probes_total{result=\"passed\"} \(probes.passed)\n"
        out += "peel_probes_total{result=\"busy\"} \(probes.busy)\n"
        out += "peel_probes_total{result=\"failed\"} \(probes.failed)\n"
        out += "# HELP peel_reachability_streams Reachability event streams open now.\n"
        out += "# TYPE peel_reachability_streams gauge\n"
        out += "peel_reachability_streams \(streams.count)\n"
        out += "# HELP peel_reachability_stream_clients Client addresses holding reachability event streams now.\n"
        out += "# TYPE peel_reachability_stream_clients gauge\n"
        out += "peel_reachability_stream_clients \(streams.clients)\n"
        out += "# HELP peel_offline_cache_hits_total Answers served from the offline cache while the upstream was unreachable.\n"
        out += "# TYPE peel_offline_cache_hits_total counter\n"
        out += "peel_offline_cache_hits_total \(cache.hits)\n"
        out += "# HELP peel_offline_cache_not_modified_total Conditional requests answered 304 from the offline cache while unreachable.\n"
        out += "# TYPE peel_offline_cache_not_modified_total counter\n"
        out += "peel_offline_cache_not_modified_total \(cache.notModifiedHits)\n"
        out += "# HELP peel_offline_cache_misses_total GET and HEAD calls while unreachable that the offline cache had nothing servable for.\n"
        out += "# TYPE peel_offline_cache_misses_total counter\n"
        out += "peel_offline_cache_misses_total \(cache.misses)\n"
        out += "# HELP peel_offline_cache_entries Answers stored in the offline cache.\n"
        out += "# TYPE peel_offline_cache_entries gauge\n"
        out += "peel_offline_cache_entries \(cache.entries)\n"
        out += "# HELP peel_offline_cache_bytes Bytes stored in the offline cache (bodies, fields and keys).\n"
        out += "# TYPE peel_offline_cache_bytes gauge\n"
        out += "peel_offline_cache_bytes \(cache.bytes)\n"
        if let store { offlineStore(&out, store) }
        out += "# HELP peel_connections_active Open client connections.\n"
        out += "# TYPE peel_connections_active gauge\n"
        out += "peel_connections_active \(connections)\n"
        out += "# HELP peel_buffered_bytes Request and upstream body bytes held now (max_buffered bounds them).\n"
        out += "# TYPE peel_buffered_bytes gauge\n"
        out += "peel_buffered_bytes \(buffered.bytes)\n"
        out += "# HELP peel_buffered_limit_bytes The max_buffered budget.\n"
        out += "# TYPE peel_buffered_limit_bytes gauge\n"
        out += "peel_buffered_limit_bytes \(buffered.limit)\n"
        out += "# HELP peel_buffered_per_client_limit_bytes Request body and held answer bytes one client may hold (max_buffered_per_client).\n"
        out += "# TYPE peel_buffered_per_client_limit_bytes gauge\n"
        out += "peel_buffered_per_client_limit_bytes \(buffered.perClientLimit)\n"
        out += "# HELP peel_buffered_clients Clients holding request body or answer bytes charged to them now.\n"
        out += "# TYPE peel_buffered_clients gauge\n"
        out += "peel_buffered_clients \(buffered.clientCount)\n"
        if let spool {
            out += "# HELP peel_spooled_bytes Bytes of buffered upstream answers held in spool files now (max_spooled bounds them).\n"
            out += "# TYPE peel_spooled_bytes gauge\n"
            out += "peel_spooled_bytes \(spool.bytes)\n"
            out += "# HELP peel_spooled_files Spool files open now (being written, or held until their answer is written).\n"
            out += "# TYPE peel_spooled_files gauge\n"
            out += "peel_spooled_files \(spool.files)\n"
            out += "# HELP peel_spooled_limit_bytes The max_spooled disk budget.\n"
            out += "# TYPE peel_spooled_limit_bytes gauge\n"
            out += "peel_spooled_limit_bytes \(spool.budget.limit)\n"
        }
        self.tunnels(&out, tunnels)
        out += "# HELP peel_inflight_requests Requests being handled now.\n"
        out += "# TYPE peel_inflight_requests gauge\n"
        out += "peel_inflight_requests \(inflight)\n"
        out += "# HELP peel_log_lines_dropped_total Log lines dropped because their sink (stdout, stderr) did not take them in time.\n"
        out += "# TYPE peel_log_lines_dropped_total counter\n"
        out += "peel_log_lines_dropped_total{log=\"access\"} \(LogSinks.accessDropped)\n"
        out += "peel_log_lines_dropped_total{log=\"event\"} \(LogSinks.eventDropped.load(ordering: .relaxed))\n"
        return out
    }

    /// Tunnels (WebSockets) open now and the bytes they relayed each way, all workers.
    private static func tunnels(_ out: inout String, _ meters: [TunnelMeter]) {
        let open = meters.reduce(0) { $0 + $1.open.load(ordering: .relaxed) }
        let fromClient = meters.reduce(0) { $0 + $1.bytesFromClient.load(ordering: .relaxed) }
        let fromUpstream = meters.reduce(0) { $0 + $1.bytesFromUpstream.load(ordering: .relaxed) }
        out += "# HELP peel_tunnels_open Tunnels (WebSockets) open now, from the 101 relayed to the close.\n"
        out += "# TYPE peel_tunnels_open gauge\n"
        out += "peel_tunnels_open \(open)\n"
        out += "# HELP peel_tunnel_bytes_total Bytes tunnels relayed, by the side that sent them: client (to the upstream) or upstream.\n"
        out += "# TYPE peel_tunnel_bytes_total counter\n"
        out += "peel_tunnel_bytes_total{from=\"client\"} \(fromClient)\n"
        out += "peel_tunnel_bytes_total{from=\"upstream\"} \(fromUpstream)\n"
    }

    /// The shared offline store's families.
    private static func offlineStore(_ out: inout String, _ s: OfflineStoreStats) {
        let n = s.snapshot()
        out += "# HELP peel_offline_store_connected Workers connected to the shared offline store now.\n"
        out += "# TYPE peel_offline_store_connected gauge\n"
        out += "peel_offline_store_connected \(n.connected)\n"
        out += "# HELP peel_offline_store_connect_failures_total Connection attempts to the shared offline store that failed, and connections lost.\n"
        out += "# TYPE peel_offline_store_connect_failures_total counter\n"
        out += "peel_offline_store_connect_failures_total \(n.connectFailures)\n"
        out += "# HELP peel_offline_store_auth_failures_total Connections the shared offline store refused for credentials (NOAUTH, WRONGPASS).\n"
        out += "# TYPE peel_offline_store_auth_failures_total counter\n"
        out += "peel_offline_store_auth_failures_total \(n.authFailures)\n"
        out += "# HELP peel_offline_store_reads_total Reads of the shared offline store while the upstream was unreachable, by result.\n"
        out += "# TYPE peel_offline_store_reads_total counter\n"
        let reads = [("hit", n.hits), ("miss", n.misses), ("timeout", n.timeouts), ("error", n.readErrors), ("rejected", n.rejected)]
        for (result, v) in reads { out += "peel_offline_store_reads_total{result=\"\(result)\"} \(v)\n" }
        out += "# HELP peel_offline_store_rejected_total Stored values never served, by reason: garbage (does not parse), version, too_large.\n"
        out += "# TYPE peel_offline_store_rejected_total counter\n"
        for (reason, v) in [("garbage", n.garbage), ("version", n.version), ("too_large", n.tooLarge)] {
            out += "peel_offline_store_rejected_total{reason=\"\(reason)\"} \(v)\n"
        }
        out += "# HELP peel_offline_store_writes_total Answers offered to the shared offline store, by result.\n"
        out += "# TYPE peel_offline_store_writes_total counter\n"
        let writes = [("stored", n.stored), ("refused", n.refused), ("failed", n.failed), ("not_connected", n.unconnected),
                      ("too_large", n.writeTooLarge), ("unchanged", n.unchanged)]
        for (result, v) in writes { out += "peel_offline_store_writes_total{result=\"\(result)\"} \(v)\n" }
        out += "# HELP peel_offline_store_writes_dropped_total Writes dropped because a worker already had 256 commands or 8 MiB waiting for the store.\n"
        out += "# TYPE peel_offline_store_writes_dropped_total counter\n"
        out += "peel_offline_store_writes_dropped_total \(n.dropped)\n"
        histogram(&out, "peel_offline_store_read_duration_seconds", "Time from a shared-store read sent to its reply or timeout.",
                  s.latency.withLock { $0 })
    }

    private static func histogram(_ out: inout String, _ name: String, _ help: String, _ h: Histogram) {
        out += "# HELP \(name) \(help)\n# TYPE \(name) histogram\n"
        var cumulative: UInt64 = 0
        for (i, b) in durationBuckets.enumerated() {
            cumulative += h.counts[i]
            out += "\(name)_bucket{le=\"\(b)\"} \(cumulative)\n"
        }
        cumulative += h.counts[durationBuckets.count]
        out += "\(name)_bucket{le=\"+Inf\"} \(cumulative)\n"
        out += "\(name)_sum \(h.sum)\n\(name)_count \(h.count)\n"
    }
}

extension String {
    func leftPadded(to n: Int) -> String { count >= n ? self : String(repeating: "0", count: n - count) + self }
}

import PeelEnvelope
import PeelIO

/// Everything Peel runs with; defaults and units are on each field.
public struct GatewayConfig: Sendable {
    /// Upstream base URL (required).
    public var upstream: UpstreamURL = UpstreamURL(scheme: "http", host: "127.0.0.1", port: 80, basePath: "")
    /// The config file's `upstreams` and `routes` sections, when it has them.
    public var routing: RoutingConfig? = nil
    /// Client-facing listener (default 127.0.0.1:8080).
    public var listen = HostPort(host: "127.0.0.1", port: 8080)
    /// Admin listener, nil when `off` (default 127.0.0.1:9090).
    public var adminListen: HostPort? = HostPort(host: "127.0.0.1", port: 9090)
    /// Event-loop threads (default: CPU count).
    public var workers: Int = GatewayConfig.cpuCount
    /// Whole upstream exchange in seconds (default 30).
    public var timeout: Double = 30
    /// TCP+TLS connect in seconds (default 5).
    public var connectTimeout: Double = 5
    /// Peers whose X-Forwarded-For/-Host/-Proto and Forwarded fields are believed (default none).
    public var trustedProxies: [IPNetwork] = []
    /// Seconds a streamed answer may wait between two reads from the upstream (default 60).
    public var upstreamIdleTimeout: Double = 60
    /// Seconds a worker's loop may go without turning before /healthz and /readyz answer 503 (default 5).
    public var workerStallTimeout: Double = 5
    /// Reachability probe path relative to the upstream (default `/`).
    public var probePath: String = "/"
    /// Seconds between probes (default 2).
    public var probeInterval: Double = 2
    /// One probe's limit in seconds (default 1).
    public var probeTimeout: Double = 1
    /// Consecutive failures to go offline (default 3).
    public var fall: Int = 3
    /// Consecutive successes to come back (default 2).
    public var rise: Int = 2
    /// Envelope rules: codes, member names, code map, passthrough, problem type base.
    public var envelope = EnvelopeConfig()
    /// The dialect the `dialect` option chose, before the field and code options change it.
    var dialectChoice = Dialect.peel
    /// What the field and code options change in the chosen dialect.
    var dialectOverrides = DialectOverrides()
    /// Where the `dialect` option was set, so a dialect error names the key that set the part.
    var dialectOrigin = DialectOrigin(option: "--dialect", object: false)
    /// Largest client request body in bytes (default 10 MiB).
    public var maxBody: Int = 10_485_760
    /// Largest upstream response body in bytes (default 64 MiB).
    public var maxUpstreamBody: Int = 67_108_864
    /// Request and judged upstream bodies held at once, whole process, in bytes (default 256 MiB).
    public var maxBuffered: Int = 268_435_456
    /// Request body bytes one client address may hold at once (default nil: `bufferedPerClient`).
    public var maxBufferedPerClient: Int? = nil
    /// The share in effect: `max_buffered_per_client`, else an eighth of `max_buffered`, never less
    /// than one whole body as it is held (`bodyFloor`) nor more than `max_buffered`.
    public var bufferedPerClient: Int {
        min(maxBuffered, max(maxBufferedPerClient ?? maxBuffered / 8, bodyFloor))
    }
    /// What one whole body costs as it is held: `max_body`, plus a chunked body's buffer growth past
    /// it (its framing: up to `max_body` again or 64 KiB). With less, one client could not always
    /// send one body.
    public var bodyFloor: Int { maxBody + min(maxBody, 65_536) }
    /// One JSON line per request on stdout (default on).
    public var accessLog: Bool = true
    /// Bytes of log lines each log (access, event) holds while its sink does not take them (default
    /// 4 MiB: 512 lines of 8 KB, twice what a 1,000-a-second burst of them writes between two reads
    /// of a reader that wakes every 250 ms; past it lines are dropped and counted).
    public var logBuffer: Int = 4 << 20
    /// Extra CA bundle for https upstreams (default: system store).
    public var caFile: String? = nil
    /// Seconds between /readyz turning 503 and the listeners closing (default 0).
    public var drainDelay: Double = 0
    /// Seconds calls in flight may take to finish after a stop signal (default 30).
    public var shutdownTimeout: Double = 30
    /// Upstream calls in flight per worker before new calls are refused (default 10000).
    public var maxInFlight: Int = 10_000
    /// Seconds an idle or stalled client connection is kept (default 60).
    public var clientTimeout: Double = 60
    /// Seconds a request head may take from first to last byte (default 10).
    public var headerTimeout: Double = 10
    /// Seconds a request body may take from the end of its head (default 60).
    public var bodyTimeout: Double = 60
    /// Reserved path on the client listener where apps read reachability, nil when `off` (default
    /// `/_peel/reachability`); never forwarded.
    public var reachabilityPath: String? = "/_peel/reachability"
    /// Reachability event streams open at once, all workers (default 1000; over it, 503 `server-busy`).
    public var maxStreams: Int = 1000
    /// Reachability event streams one client address may hold (default 8; over it, 429 `too-many-streams`).
    public var maxStreamsPerClient: Int = 8
    /// Seconds between heartbeat comments on an event stream (default 15; no flag, tests shorten it).
    public var streamHeartbeat: Double = 15
    /// Bytes of stale answers kept for while the upstream is unreachable (default 0: off).
    public var offlineCache: Int = 0
    /// Oldest a stored answer may be when served, in seconds (default 86400, 24 h).
    public var offlineCacheMaxAge: Double = 86_400
    /// Request fields, lowercased, that say whose answer it is: part of every entry's key (default
    /// Authorization and Cookie). A request with none of them shares only what the upstream marked
    /// `public`.
    public var offlineCacheKey: [String] = ["authorization", "cookie"]
    /// Serve stale even what the upstream marked `no-cache`, `must-revalidate`, `proxy-revalidate`
    /// or `s-maxage` (default off; like nginx's `proxy_ignore_headers`). Never lifts `no-store`,
    /// `private` without a key field, or the key rules.
    public var offlineCacheOverride: Bool = false
    /// Where the offline cache's entries live (default memory); a Redis store is shared by every
    /// replica and survives restarts.
    public var offlineStore: OfflineStoreURL = .memory
    /// The file holding the HMAC secret of the shared store's keys (required with Redis).
    public var offlineStoreSecretFile: String? = nil
    /// That file's secret, read at load (never shown).
    public var offlineStoreSecret: [UInt8]? = nil
    /// The file holding the shared store's credentials, sent with AUTH (default none).
    public var offlineStorePasswordFile: String? = nil
    /// That file's user and password, read at load (never shown).
    public var offlineStoreCredentials: RedisCredentials? = nil
    /// Largest value written to or served from the shared store, in bytes (default 1 MiB).
    public var offlineStoreMaxEntry: Int = 1_048_576
    /// Seconds an offline call waits for the shared store before it gets the offline problem (default 0.05).
    public var offlineStoreTimeout: Double = 0.05
    /// Origins (exact, or `*`) whose CORS Peel answers itself (default none: the upstream's CORS fields pass).
    public var corsOrigins: [String] = []
    /// Adds `Access-Control-Allow-Credentials: true` for allowed origins (default off; never with `*`).
    public var corsCredentials: Bool = false
    /// Seconds a browser may cache Peel's preflight answer (default 600).
    public var corsMaxAge: Int = 600
    /// Fields browsers may read besides Peel's own (X-Request-Id, Retry-After, Age, Cache-Status) and
    /// the upstream's Access-Control-Expose-Headers (`--cors-expose-headers`).
    public var corsExposeHeaders: [String] = []
    /// Forwards the client's Host instead of the upstream's (nginx `proxy_set_header Host $host`).
    public var preserveHost: Bool = false
    /// Passthrough answers of unknown length or declared longer than this many bytes are streamed as
    /// they arrive, with back-pressure, instead of buffered (default 1 MiB); event streams always are.
    public var streamThreshold: Int = 1_048_576
    /// Codings offered to clients in tie-break order (default gzip, br); empty turns compression off.
    public var compression: [ContentCoding] = [.gzip, .br]
    /// Smallest answer body compressed, in bytes (default 1024).
    public var compressionMinSize: Int = 1024
    /// zlib level for gzip, 1-9 (default 3: the knee measured in Benchmarks/RESULTS.md).
    public var gzipLevel: Int = 3
    /// Brotli quality, 0-11 (default 3: the knee measured in Benchmarks/RESULTS.md).
    public var brotliQuality: Int = 3
    /// Rewrites Location, Content-Location and Refresh URLs naming the upstream to Peel (default on).
    public var rewriteRedirects: Bool = true
    /// Rewrites Set-Cookie Path under the base path and drops a Domain naming the upstream (default on).
    public var rewriteCookies: Bool = true

    /// Creates the defaults.
    public init() {}

    /// Processor count, the default worker count.
    public static var cpuCount: Int {
        let n = Int(sysconfNumProcessors())
        return max(1, n)
    }
}

#if canImport(Glibc)
import Glibc
private func sysconfNumProcessors() -> Int { sysconf(Int32(_SC_NPROCESSORS_ONLN)) }
#endif

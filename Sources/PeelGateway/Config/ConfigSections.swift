import Glibc
import PeelIO

// GatewayConfig's sections. Each field's doc gives its default and unit; the option that sets it
// is named where the field's name, or its section's, does not say it.
extension GatewayConfig {
    /// Where Peel listens, and with how many event loops.
    public struct Listeners: Sendable, Equatable {
        /// Client-facing listener (`listen`, default 127.0.0.1:8080).
        public var client = HostPort(host: "127.0.0.1", port: 8080)
        /// Admin listener (`admin_listen`), nil when `off` (default 127.0.0.1:9090).
        public var admin: HostPort? = HostPort(host: "127.0.0.1", port: 9090)
        /// Event-loop threads, each with its own client listener (default: CPU count).
        public var workers: Int = GatewayConfig.cpuCount

        /// Creates the defaults.
        public init() {}
    }

    /// How upstream calls are made; a group of the config file may set its own timeouts and CA file.
    public struct Calls: Sendable, Equatable {
        /// Whole upstream exchange in seconds (default 30).
        public var timeout: Double = 30
        /// TCP+TLS connect in seconds (default 5).
        public var connectTimeout: Double = 5
        /// Seconds a streamed answer may wait between two reads from the upstream
        /// (`upstream_idle_timeout`, default 60).
        public var idleTimeout: Double = 60
        /// Largest upstream response body in bytes (`max_upstream_body`, default 64 MiB).
        public var maxResponseBody: Int = 67_108_864
        /// Extra CA bundle for https upstreams (default: system store).
        public var caFile: String? = nil
        /// Forwards the client's Host instead of the upstream's (nginx `proxy_set_header Host $host`).
        public var preserveHost: Bool = false
        /// Which forwarding fields Peel writes about the hop that reached it (`forward_fields`).
        public var forwardFields: ForwardFields = .xForwarded
        /// Passthrough answers of unknown length or declared longer than this many bytes are streamed as
        /// they arrive, with back-pressure, instead of buffered (default 1 MiB); event streams always are.
        public var streamThreshold: Int = 1_048_576
        /// Upstream calls in flight per worker before new calls are refused (`max_inflight`, default 10000).
        public var maxInFlight: Int = 10_000

        /// Creates the defaults.
        public init() {}
    }

    /// The forwarding fields Peel writes: X-Forwarded-For, -Proto and -Host, RFC 7239's Forwarded,
    /// both or none. Why the default is X-Forwarded-* alone, and what each costs: the README's
    /// request-field rules.
    public enum ForwardFields: String, Sendable, Equatable, CaseIterable {
        case xForwarded = "x-forwarded"
        case forwarded
        case both
        case none

        /// Whether Peel writes X-Forwarded-For, -Proto and -Host.
        public var writesXForwarded: Bool { self == .xForwarded || self == .both }
        /// Whether Peel writes its Forwarded element.
        public var writesForwarded: Bool { self == .forwarded || self == .both }
    }

    /// How the upstream's reachability is probed; a group of the config file may set its own.
    public struct Probe: Sendable, Equatable {
        /// Probe path relative to the upstream (`probe_path`, default `/`).
        public var path: String = "/"
        /// Seconds between probes (`probe_interval`, default 2).
        public var interval: Double = 2
        /// One probe's limit in seconds (`probe_timeout`, default 1).
        public var timeout: Double = 1
        /// Consecutive failures to go offline (default 3).
        public var fall: Int = 3
        /// Consecutive successes to come back (default 2).
        public var rise: Int = 2

        /// Creates the defaults.
        public init() {}
    }

    /// How long client connections may take, and whose forwarding fields are believed.
    public struct Clients: Sendable, Equatable {
        /// Seconds an idle or stalled client connection is kept (`client_timeout`, default 60).
        public var timeout: Double = 60
        /// Seconds a request head may take from first to last byte (default 10).
        public var headerTimeout: Double = 10
        /// Seconds a request body may take from the end of its head (default 60).
        public var bodyTimeout: Double = 60
        /// Peers whose X-Forwarded-For/-Host/-Proto and Forwarded fields are believed (default none).
        public var trustedProxies: [IPNetwork] = []

        /// Creates the defaults.
        public init() {}
    }

    /// Request body sizes and the body bytes held at once: one section, because every bound on what
    /// is held is measured against what one body costs.
    public struct Memory: Sendable, Equatable {
        /// Largest client request body in bytes (`max_body`, default 10 MiB).
        public var maxBody: Int = 10_485_760
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

        /// Creates the defaults.
        public init() {}
    }

    /// Where buffered upstream answers past a threshold are held instead of memory, and the disk
    /// budget that bounds them (nginx's `proxy_temp_path` and `proxy_max_temp_file_size`).
    public struct Spooling: Sendable, Equatable {
        /// Directory of the spool files, unlinked as they are created (`spool_dir`, default
        /// `$TMPDIR`, else `/tmp`); a reload keeps the one Peel started with.
        public var directory: String = Spooling.defaultDirectory
        /// A buffered answer past this many bytes goes to a spool file (`spool_threshold`, default
        /// 1 MiB; 0 keeps every answer in memory).
        public var threshold: Int = 1_048_576
        /// Spooled bytes held at once, whole process (`max_spooled`, default 1 GiB).
        public var maxSpooled: Int = 1 << 30
        /// Spooled bytes one client address may hold at once (default nil: `spooledPerClient`).
        public var maxSpooledPerClient: Int? = nil
        /// The share in effect: `max_spooled_per_client`, else half of `max_spooled`, never more than it.
        public var spooledPerClient: Int { min(maxSpooled, maxSpooledPerClient ?? maxSpooled / 2) }

        /// `$TMPDIR` when set and not empty, else `/tmp`.
        static var defaultDirectory: String {
            if let t = getenv("TMPDIR"), t.pointee != 0 { return String(cString: t) }
            return "/tmp"
        }

        /// Creates the defaults.
        public init() {}
    }

    /// The access log and the log writers' buffers.
    public struct Logs: Sendable, Equatable {
        /// One JSON line per request on stdout (`access_log`, default on).
        public var access: Bool = true
        /// Bytes of log lines each log (access, event) holds while its sink does not take them
        /// (`log_buffer`, default 4 MiB: 512 lines of 8 KB, twice what a 1,000-a-second burst of them
        /// writes between two reads of a reader that wakes every 250 ms; past it lines are dropped and
        /// counted).
        public var buffer: Int = 4 << 20

        /// Creates the defaults.
        public init() {}
    }

    /// Draining, shutdown and the stuck-worker bound.
    public struct Lifecycle: Sendable, Equatable {
        /// Seconds between /readyz turning 503 and the listeners closing (default 0).
        public var drainDelay: Double = 0
        /// Seconds calls in flight may take to finish after a stop signal (default 30).
        public var shutdownTimeout: Double = 30
        /// Seconds a worker's loop may go without turning before /healthz and /readyz answer 503 (default 5).
        public var workerStallTimeout: Double = 5

        /// Creates the defaults.
        public init() {}
    }

    /// Where apps read reachability, and the bounds on its event streams.
    public struct Reachability: Sendable, Equatable {
        /// Reserved path on the client listener where apps read reachability (`reachability_path`), nil
        /// when `off` (default `/_peel/reachability`); never forwarded.
        public var path: String? = "/_peel/reachability"
        /// Event streams open at once, all workers (default 1000; over it, 503 `server-busy`).
        public var maxStreams: Int = 1000
        /// Event streams one client address may hold (default 8; over it, 429 `too-many-streams`).
        public var maxStreamsPerClient: Int = 8
        /// Seconds between heartbeat comments on an event stream (default 15; no option, tests shorten it).
        public var heartbeat: Double = 15

        /// Creates the defaults.
        public init() {}
    }

    /// Upgraded connections passed through to the backend (WebSockets, RFC 6455), and their bounds.
    public struct Tunnels: Sendable, Equatable {
        /// Upgrade protocols tunneled, lowercased (`upgrade_protocols`, default websocket); any other
        /// Upgrade is ignored and the request answered over HTTP/1.1 (RFC 9110 §7.8).
        public var protocols: [String] = ["websocket"]
        /// Seconds a tunnel may pass no byte either way before it is closed (`tunnel_idle_timeout`, default 600).
        public var idleTimeout: Double = 600
        /// Tunnels open at once, all workers (`max_tunnels`, default 10000; over it, 503 `server-busy`).
        public var maxTunnels: Int = 10_000
        /// Tunnels one client address may hold (`max_tunnels_per_client`, default 256; over it, 429).
        public var maxTunnelsPerClient: Int = 256

        /// Creates the defaults.
        public init() {}
    }

    /// Stale answers for while the upstream is unreachable, and the store that keeps them (the
    /// `store…` fields are the `offline_store_…` options).
    public struct Offline: Sendable, Equatable {
        /// Bytes of stale answers kept (`offline_cache`, default 0: off).
        public var capacity: Int = 0
        /// Oldest a stored answer may be when served, in seconds (`offline_cache_max_age`, default
        /// 86400, 24 h).
        public var maxAge: Double = 86_400
        /// Request fields, lowercased, that say whose answer it is: part of every entry's key
        /// (`offline_cache_key`, default Authorization and Cookie). A request with none of them shares
        /// only what the upstream marked `public`.
        public var keyFields: [String] = ["authorization", "cookie"]
        /// Serve stale even what the upstream marked `no-cache`, `must-revalidate`, `proxy-revalidate`
        /// or `s-maxage` (`offline_cache_override`, default off; like nginx's `proxy_ignore_headers`).
        /// Never lifts `no-store`, `private` without a key field, or the key rules.
        public var override: Bool = false
        /// Where the entries live (`offline_store`, default memory); a Redis store is shared by every
        /// replica and survives restarts.
        public var store: OfflineStoreURL = .memory
        /// The file holding the HMAC secret of the shared store's keys (required with Redis).
        public var storeSecretFile: String? = nil
        /// That file's secret, read at load (never shown).
        public var storeSecret: [UInt8]? = nil
        /// The file holding the shared store's credentials, sent with AUTH (default none).
        public var storePasswordFile: String? = nil
        /// That file's user and password, read at load (never shown).
        public var storeCredentials: RedisCredentials? = nil
        /// Largest value written to or served from the shared store, in bytes (default 1 MiB).
        public var storeMaxEntry: Int = 1_048_576
        /// Seconds an offline call waits for the shared store before it gets the offline problem (default 0.05).
        public var storeTimeout: Double = 0.05

        /// Creates the defaults.
        public init() {}
    }

    /// CORS when Peel answers it itself (`cors_*` options).
    public struct CORS: Sendable, Equatable {
        /// Origins (exact, or `*`) whose CORS Peel answers itself (default none: the upstream's CORS fields pass).
        public var origins: [String] = []
        /// Adds `Access-Control-Allow-Credentials: true` for allowed origins (default off; never with `*`).
        public var credentials: Bool = false
        /// Seconds a browser may cache Peel's preflight answer (default 600).
        public var maxAge: Int = 600
        /// Fields browsers may read besides Peel's own (X-Request-Id, Retry-After, Age, Cache-Status) and
        /// the upstream's Access-Control-Expose-Headers.
        public var exposeHeaders: [String] = []

        /// Creates the defaults.
        public init() {}
    }

    /// Compression of answers to clients.
    public struct Compression: Sendable, Equatable {
        /// Codings offered to clients in tie-break order (`compression`, default gzip, br); empty
        /// turns compression off.
        public var codings: [ContentCoding] = [.gzip, .br]
        /// Smallest answer body compressed, in bytes (`compression_min_size`, default 1024).
        public var minSize: Int = 1024
        /// zlib level for gzip, 1-9 (default 3: the knee measured in Benchmarks/RESULTS.md).
        public var gzipLevel: Int = 3
        /// Brotli quality, 0-11 (default 3: the knee measured in Benchmarks/RESULTS.md).
        public var brotliQuality: Int = 3

        /// Creates the defaults.
        public init() {}
    }

    /// What of the upstream's names is rewritten to Peel's in answers (`rewrite_*` options).
    public struct Rewrite: Sendable, Equatable {
        /// Rewrites Location, Content-Location and Refresh URLs naming the upstream to Peel (default on).
        public var redirects: Bool = true
        /// Rewrites Set-Cookie Path under the base path and drops a Domain naming the upstream (default on).
        public var cookies: Bool = true

        /// Creates the defaults.
        public init() {}
    }
}

import PeelEnvelope
import PeelIO

/// Everything Peel runs with, one section per concern; defaults and units are on each section's
/// fields (`ConfigSections.swift`), and `Options.swift` maps every option onto one of them.
public struct GatewayConfig: Sendable {
    /// Upstream base URL (required).
    public var upstream: UpstreamURL = UpstreamURL(scheme: "http", host: "127.0.0.1", port: 80, basePath: "")
    /// The config file's `upstreams` and `routes` sections, when it has them.
    public var routing: RoutingConfig? = nil
    /// The config file's `openapi` section: where the published contract is served.
    public var contract = ContractPublishing()
    /// Where Peel listens, and with how many event loops.
    public var listeners = Listeners()
    /// How upstream calls are made.
    public var calls = Calls()
    /// How the upstream's reachability is probed.
    public var probe = Probe()
    /// How long client connections may take, and whose forwarding fields are believed.
    public var clients = Clients()
    /// Body sizes, and the body bytes held at once.
    public var memory = Memory()
    /// Where big buffered answers go instead of memory, and the disk budget.
    public var spooling = Spooling()
    /// The access log and the log writers' buffers.
    public var logs = Logs()
    /// Draining, shutdown and the stuck-worker bound.
    public var lifecycle = Lifecycle()
    /// The reachability path and its event streams.
    public var reachability = Reachability()
    public var tunnels = Tunnels()
    /// Stale answers for while the upstream is unreachable, and the store that keeps them.
    public var offline = Offline()
    /// CORS when Peel answers it itself.
    public var cors = CORS()
    /// Compression of answers to clients.
    public var compression = Compression()
    /// What of the upstream's names is rewritten to Peel's in answers.
    public var rewrite = Rewrite()
    /// Envelope rules: codes, member names, code map, passthrough, problem type base.
    public var envelope = EnvelopeConfig()
    /// The dialect the `dialect` option chose, before the field and code options change it.
    var dialectChoice = Dialect.peel
    /// What the field and code options change in the chosen dialect.
    var dialectOverrides = DialectOverrides()
    /// Where the `dialect` option was set, so a dialect error names the key that set the part.
    var dialectOrigin = DialectOrigin(option: "--dialect", object: false)

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

import PeelIO

/// What PeelIO is told of a configuration: the worker's upstream client options and each client
/// connection's limits. Derived here only, so a setting added to the config reaches the IO layer
/// by one edit, at start and on reload alike.
struct IOSettings {
    /// The worker's upstream client (one curl multi handle per worker).
    let upstream: UpstreamOptions
    /// Every client connection's limits and timeouts.
    let connection: ConnectionLimits

    /// Derives both from `config`; `budget` is the process's body budget, which both charge, and
    /// `spool` where buffered answers past its threshold go.
    init(_ config: GatewayConfig, budget: MemoryBudget, spool: Spool? = nil) {
        var o = UpstreamOptions()
        o.budget = budget
        o.spool = spool
        o.timeout = config.calls.timeout
        o.connectTimeout = config.calls.connectTimeout
        o.maxResponseBody = config.calls.maxResponseBody
        o.caFile = config.calls.caFile
        o.maxInFlight = config.calls.maxInFlight
        o.idleTimeout = config.calls.idleTimeout
        upstream = o

        var l = ConnectionLimits()
        l.budget = budget
        l.spool = spool
        l.trustedProxies = config.clients.trustedProxies
        l.maxBody = config.memory.maxBody
        l.idleTimeout = config.clients.timeout
        l.writeTimeout = config.clients.timeout
        l.bodyTimeout = config.clients.bodyTimeout
        l.headerTimeout = config.clients.headerTimeout
        connection = l
    }
}

extension TransferLimits {
    /// What every call to `group`'s endpoints is sent under (forwarded calls, the group's OpenAPI
    /// document): the group's timeouts and CA file over those of `calls`; nil: the `calls` section's.
    init(_ calls: GatewayConfig.Calls, group: UpstreamGroup?) {
        self.init(timeout: group?.timeout ?? calls.timeout, connectTimeout: group?.connectTimeout ?? calls.connectTimeout,
                  caFile: group?.caFile ?? calls.caFile, maxResponseBody: calls.maxResponseBody, idleTimeout: calls.idleTimeout)
    }
}

extension UpstreamOptions {
    /// A prober's client: its endpoint's timeouts and CA file, a small answer limit (a probe's body
    /// is read only to be discarded) and two idle connections.
    init(probe settings: ProbeSettings) {
        self.init()
        timeout = settings.timeout
        connectTimeout = settings.connectTimeout
        maxResponseBody = 1 << 20
        caFile = settings.caFile
        maxIdleConnections = 2
    }
}

extension MemoryBudget {
    /// The process's body budget as `memory` sets it (`max_buffered`, `max_buffered_per_client`).
    convenience init(_ memory: GatewayConfig.Memory) {
        self.init(limit: memory.maxBuffered)
        apply(memory)
    }

    /// Takes a reloaded configuration's limits; what is held stays held.
    func apply(_ memory: GatewayConfig.Memory) {
        limit = memory.maxBuffered
        perClientLimit = memory.bufferedPerClient
    }
}

extension Spool {
    /// The process's spool as `spooling` sets it (`spool_dir`, `spool_threshold`, `max_spooled`,
    /// `max_spooled_per_client`).
    convenience init(_ spooling: GatewayConfig.Spooling) {
        self.init(directory: spooling.directory, threshold: spooling.threshold, limit: spooling.maxSpooled,
                  perClient: spooling.spooledPerClient)
    }

    /// Takes a reloaded configuration's threshold and limits; the directory stays, and what is
    /// spooled stays spooled.
    func apply(_ spooling: GatewayConfig.Spooling) {
        threshold = spooling.threshold
        budget.limit = spooling.maxSpooled
        budget.perClientLimit = spooling.spooledPerClient
    }
}

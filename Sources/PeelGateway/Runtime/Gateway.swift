import Glibc
import PeelIO
import Synchronization

/// Peel's version, printed by `--version` and in /status.
public let peelVersion = "0.1.0"

/// The running gateway: workers, prober, admin listener and the drain sequence.
public final class Gateway: @unchecked Sendable {
    /// The configuration it runs with (the latest `reload`'s).
    public var config: GatewayConfig { current.withLock { $0 } }
    private let current: Locked<GatewayConfig>
    /// The upstream groups and their reachability, shared by the workers; a reload replaces it
    /// (keeping the states of groups that stay).
    var groups: UpstreamGroups { currentGroups.withLock { $0 } }
    private let currentGroups: Locked<UpstreamGroups>
    /// The (route, upstream) pairs metrics count calls by.
    let routeLabels = RouteLabels()
    /// The first group's first endpoint's reachability: without `routes`, the one upstream's.
    public var reachability: Reachability { groups.all[0].endpoints[0].reachability }
    /// The body budget every worker shares (`max_buffered`).
    public let budget: MemoryBudget
    /// Where big buffered answers go, and the disk budget every worker shares (`max_spooled`).
    public let spool: Spool
    /// Why no spool file can be written now (checked by the admin loop every few seconds); nil while one can.
    let spoolFault = Locked<String?>(nil)
    private(set) var workers: [Worker] = []
    private var admin: AdminServer?
    /// The contract published on the admin listener (`/_peel/openapi.json`); nil while it is off.
    private(set) var contract: ContractPublisher?
    /// The workers transitions are broadcast to, set once they exist.
    private let listeners: Locked<[Worker]>
    private let streamBudget: StreamBudget
    /// Open tunnels (WebSockets), all workers.
    private let tunnelBudget: StreamBudget
    /// Stale answers for while offline, shared by the workers; off while its capacity is 0 (a
    /// reload can turn it on or off).
    public let offlineCache: OfflineCache
    /// The shared offline store's counters, when `--offline-store` names one.
    public let offlineStoreStats: OfflineStoreStats?
    private let draining = Atomic<Bool>(false)
    private let serving = Atomic<Bool>(false)
    /// The client-facing port actually bound.
    public private(set) var port = 0
    /// The admin port actually bound, nil when off.
    public private(set) var adminPort: Int?

    /// Prepares (binds nothing yet).
    public init(config: GatewayConfig) {
        current = Locked(config)
        LogSinks.configure(buffer: config.logs.buffer)
        budget = MemoryBudget(config.memory)
        spool = Spool(config.spooling)
        let listeners = Locked<[Worker]>([])
        self.listeners = listeners
        streamBudget = StreamBudget(limit: config.reachability.maxStreams, perClient: config.reachability.maxStreamsPerClient)
        tunnelBudget = StreamBudget(limit: config.tunnels.maxTunnels, perClient: config.tunnels.maxTunnelsPerClient)
        offlineCache = OfflineCache(capacity: config.offline.capacity, maxAge: config.offline.maxAge,
                                    override: config.offline.override)
        offlineStoreStats = config.offline.store == .memory ? nil : OfflineStoreStats(endpoint: config.offline.store.description)
        currentGroups = Locked(UpstreamGroups(config, onTransition: Self.transitionHandler(listeners)))
        routeLabels.keep(RouteLabels.pairs(config))
    }

    /// What a group's transition does: one log line, and every worker's event streams hear of it
    /// (on whichever thread observed it: each worker's loop gets its own copy).
    private static func transitionHandler(_ listeners: Locked<[Worker]>) -> @Sendable (UpstreamGroupState, ReachabilityTransition) -> Void {
        { g, t in
            let upstream = g.endpoints.count == 1 ? g.endpoints[0].url.description : g.name
            EventLog.emit("reachability", [("from", "\"\(t.from)\""), ("to", "\"\(t.to)\""),
                                           ("reason", t.reason.map(jsonEscaped) ?? "null"), ("upstream", jsonEscaped(upstream)),
                                           ("group", jsonEscaped(g.name))])
            for w in listeners.withLock({ $0 }) { w.broadcast(t, group: g.name) }
        }
    }

    /// Binds every listener, starts the threads and the first probe.
    public func start() throws(PeelIOError) {
        var listen = config.listeners.client
        // Workers share the port through SO_REUSEPORT; refuse to join a port someone else serves.
        try HTTPServer.ensureNotServed(listen)
        for i in 0..<config.listeners.workers {
            let w = try Worker(index: i, config: config, listen: listen, groups: groups, labels: routeLabels, streamBudget: streamBudget,
                               tunnelBudget: tunnelBudget,
                               cache: offlineCache, storeStats: offlineStoreStats, budget: budget,
                               spool: spool)
            // Port 0: the first worker's real port is the one every other worker shares.
            if i == 0 { listen.port = w.server.port }
            workers.append(w)
        }
        port = listen.port
        listeners.withLock { $0 = workers }
        try workers[0].probe(groups)
        // The contract is read on a thread of its own, for the admin listener and (when public) the
        // client listener's workers.
        let publisher = try ContractPublisher()
        publisher.apply(config)
        contract = publisher
        for w in workers { w.forwarder.contract = publisher }
        if let a = config.listeners.admin {
            let admin = try AdminServer(address: a, gateway: self)
            self.admin = admin
            adminPort = admin.port
            admin.start()
        }
        for w in workers { w.start() }
        serving.store(true, ordering: .relaxed)
        EventLog.emit("start", [
            ("version", jsonEscaped(peelVersion)), ("listen", jsonEscaped(HostPort(host: config.listeners.client.host, port: port).description)),
            ("admin", adminPort.map { jsonEscaped(HostPort(host: config.listeners.admin!.host, port: $0).description) } ?? "null"),
            ("upstream", config.routing?.hasDefaultGroup == false ? "null" : jsonEscaped(config.upstream.description)),
            ("groups", "[" + groups.all.map { jsonEscaped($0.name) }.joined(separator: ",") + "]"), ("workers", "\(config.listeners.workers)"),
        ])
    }

    /// Applies a re-read configuration to requests and connections that start from now on (SIGHUP).
    /// Listen addresses and the worker count need a restart: they keep their old values, and their
    /// names are returned so the caller can log them. Call after `start`, before `shutdown`; blocks
    /// until every worker has applied it.
    public func reload(_ new: GatewayConfig) -> [String] {
        let old = config
        var next = new
        var kept: [String] = []
        if next.listeners.client != old.listeners.client { kept.append("listen"); next.listeners.client = old.listeners.client }
        if next.listeners.admin != old.listeners.admin { kept.append("admin_listen"); next.listeners.admin = old.listeners.admin }
        if next.listeners.workers != old.listeners.workers { kept.append("workers"); next.listeners.workers = old.listeners.workers }
        // Each worker's store connection is made at start.
        if next.offline.store != old.offline.store { kept.append("offline_store"); next.offline.store = old.offline.store }
        if next.offline.storeSecret != old.offline.storeSecret {
            kept.append("offline_store_secret_file")
            (next.offline.storeSecret, next.offline.storeSecretFile) = (old.offline.storeSecret, old.offline.storeSecretFile)
        }
        if next.offline.storeCredentials != old.offline.storeCredentials || next.offline.storePasswordFile != old.offline.storePasswordFile {
            kept.append("offline_store_password_file")
            (next.offline.storeCredentials, next.offline.storePasswordFile) = (old.offline.storeCredentials, old.offline.storePasswordFile)
        }
        if next.offline.storeMaxEntry != old.offline.storeMaxEntry { kept.append("offline_store_max_entry"); next.offline.storeMaxEntry = old.offline.storeMaxEntry }
        if next.offline.storeTimeout != old.offline.storeTimeout { kept.append("offline_store_timeout"); next.offline.storeTimeout = old.offline.storeTimeout }
        if next.spooling.directory != old.spooling.directory { kept.append("spool_dir"); next.spooling.directory = old.spooling.directory }
        current.withLock { $0 = next }
        let previous = self.groups
        let groups = UpstreamGroups(next, previous: previous, onTransition: Self.transitionHandler(listeners))
        currentGroups.withLock { $0 = groups }
        routeLabels.keep(RouteLabels.pairs(next))
        budget.apply(next.memory)
        spool.apply(next.spooling)
        contract?.apply(next)
        LogSinks.configure(buffer: next.logs.buffer)
        // Issue 17: the cache and the stream bounds follow a reload too. Other key fields change every
        // key, so the entries stored under the old ones go at once rather than linger unreachable.
        offlineCache.configure(OfflineCache.Settings(capacity: next.offline.capacity, maxAge: next.offline.maxAge,
                                                     override: next.offline.override),
                               dropAll: next.offline.keyFields != old.offline.keyFields)
        streamBudget.setLimits(total: next.reachability.maxStreams, perClient: next.reachability.maxStreamsPerClient)
        tunnelBudget.setLimits(total: next.tunnels.maxTunnels, perClient: next.tunnels.maxTunnelsPerClient)
        let applied = next
        let done = Locked(0)
        for w in workers {
            w.loop.execute {
                do throws(PeelIOError) {
                    try w.apply(applied, groups: groups)
                } catch {
                    EventLog.emit("reload_failed", [("worker", "\(w.index)"), ("error", jsonEscaped(error.description))])
                }
                w.reprobe(groups)
                done.withLock { $0 += 1 }
            }
        }
        // Returns once every worker has it, so a request sent after SIGHUP is handled under it; a
        // loop that has stopped (shutdown) is not waited for beyond a second.
        let deadline = monotonicNow() + 1
        while done.withLock({ $0 }) < workers.count && monotonicNow() < deadline { sleepSeconds(0.001) }
        groups.announceReload()
        // A group the reload dropped says so once, or an app's flag for it would keep its last state.
        let removedAt = monotonicNow()
        for g in previous.all where groups.named(g.name) == nil {
            for w in workers { w.announceRemoved(group: g.name, at: removedAt) }
        }
        return kept
    }

    /// SIGHUP: re-reads the configuration with `load` and applies it, logging `reloaded` (with the
    /// settings that need a restart and kept their values) or `reload_failed` with the reason, in
    /// which case the running configuration stays as it was.
    public func reload(load: () throws(ConfigError) -> GatewayConfig) {
        let new: GatewayConfig
        do throws(ConfigError) {
            new = try load()
        } catch {
            EventLog.emit("reload_failed", [("error", jsonEscaped(error.description)), ("kept", "\"the running configuration\"")])
            return
        }
        let kept = reload(new)
        EventLog.emit("reloaded", [("upstream", new.routing?.hasDefaultGroup == false ? "null" : jsonEscaped(new.upstream.description)),
                                   ("needs_restart", "[" + kept.map(jsonEscaped).joined(separator: ",") + "]")])
    }

    /// Workers whose event loop has not turned for `worker_stall_timeout`, with how long:
    /// a blocked loop answers nobody, so /healthz and /readyz must not say all is well. None while
    /// starting or draining (loops that ended are not stuck).
    func stalledWorkers() -> [(index: Int, seconds: Double)] {
        guard isServing && !isDraining else { return [] }
        let bound = config.lifecycle.workerStallTimeout
        return workers.compactMap { w in
            let s = w.sinceHeartbeat
            return s > bound ? (w.index, s) : nil
        }
    }

    /// True once listeners are up.
    public var isServing: Bool { serving.load(ordering: .relaxed) }
    /// True after a stop signal.
    public var isDraining: Bool { draining.load(ordering: .relaxed) }

    /// Graceful stop: /readyz turns 503, listeners close after `lifecycle.drainDelay`, calls in flight get up to
    /// `lifecycle.shutdownTimeout`. Blocks until done; returns false when the timeout cut calls short.
    @discardableResult
    public func shutdown() -> Bool {
        guard !draining.exchange(true, ordering: .relaxed) else { return true }
        EventLog.emit("draining", [("drain_delay", "\(config.lifecycle.drainDelay)"), ("inflight", "\(inflight)")])
        // A tunnel opened now would only be cut at shutdown_timeout: refused from the start of the drain.
        for w in workers { w.refuseTunnels() }
        if config.lifecycle.drainDelay > 0 { sleepSeconds(config.lifecycle.drainDelay) }
        for w in workers { w.drain() }
        let deadline = monotonicNow() + config.lifecycle.shutdownTimeout
        let finished = Locked(0)
        for w in workers {
            let loop = w.loop
            OSThread.detach { loop.join(); finished.withLock { $0 += 1 } }
        }
        var clean = true
        while finished.withLock({ $0 }) < workers.count {
            if monotonicNow() > deadline {
                clean = false
                break
            }
            sleepSeconds(0.01)
        }
        if !clean {
            // Calls still running past shutdown_timeout get a 503 problem with Connection: close;
            // the loops end once it is written. A client that does not read it within 2 s is cut
            // off where it stands.
            for w in workers { w.cutWaitingCalls() }
            var cutoff = monotonicNow() + 2
            while finished.withLock({ $0 }) < workers.count && monotonicNow() < cutoff { sleepSeconds(0.01) }
            if finished.withLock({ $0 }) < workers.count {
                for w in workers { w.loop.stop() }
                cutoff = monotonicNow() + 2
                while finished.withLock({ $0 }) < workers.count && monotonicNow() < cutoff { sleepSeconds(0.01) }
            }
        }
        serving.store(false, ordering: .relaxed)
        admin?.stop()
        contract?.stop()
        EventLog.emit("stopped", [("clean", clean ? "true" : "false"), ("inflight", "\(inflight)")])
        // The log writers' threads end with the process: what they still hold goes out first.
        LogSinks.flush()
        return clean
    }

    /// Calls being handled now, all workers.
    public var inflight: Int { workers.reduce(0) { $0 + $1.metrics.inflight.load(ordering: .relaxed) } }

    /// Tunnels (WebSockets) open now, all workers.
    var openTunnels: Int { workers.reduce(0) { $0 + $1.server.tunnelMeter.open.load(ordering: .relaxed) } }

    /// Prometheus text for /metrics.
    func metricsText() -> String {
        MetricsRenderer.render(workers: workers.map(\.metrics), reachability: reachability, cache: offlineCache, store: offlineStoreStats,
                               connections: workers.reduce(0) { $0 + $1.server.connectionCount }, buffered: budget,
                               streams: streamBudget, groups: groups, routes: routeLabels, spool: spool,
                               tunnels: workers.map { $0.server.tunnelMeter })
    }

    /// JSON for /status.
    func statusDocument() -> String {
        let snap = reachability.snapshot
        let now = monotonicNow(), wall = wallNow()
        let since = wall - (now - snap.since)
        var lastFailure = "null"
        if let f = snap.lastFailure {
            lastFailure = "{\"reason\":\(jsonEscaped(f.reason)),\"at\":\"\(rfc3339(wall - (now - f.at)))\"}"
        }
        var probe = "null"
        if let p = reachability.lastProbeReport {
            probe = "{\"ok\":\(p.ok),\"busy\":\(p.busy),\"status\":\(p.status.map(String.init) ?? "null"),\"error\":\(p.error.map(jsonEscaped) ?? "null")"
                + ",\"latency_ms\":\((p.latency * 1_000_000).rounded() / 1000),\"at\":\"\(rfc3339(p.at))\"}"
        }
        let config = self.config
        // With routes only there is no `--upstream`: null, as `check-config` and the start line say.
        let upstream = config.routing?.hasDefaultGroup == false ? "null" : jsonEscaped(config.upstream.description)
        return "{\"version\":\(jsonEscaped(peelVersion)),\"upstream\":\(upstream)"
            + ",\"reachability\":{\"state\":\"\(snap.state)\",\"since\":\"\(rfc3339(since))\""
            + ",\"reason\":\(snap.reason.map(jsonEscaped) ?? "null"),\"public_reason\":\(snap.publicReason.map(jsonEscaped) ?? "null")"
            + ",\"busy_probes\":\(snap.busyProbes),\"last_failure\":\(lastFailure),\"last_probe\":\(probe)}"
            + ",\"upstreams\":\(groupsDocument())"
            + ",\"offline_store\":\(offlineStoreDocument())"
            + ",\"openapi\":\(contract?.statusJSON() ?? "{}")"
            + ",\"spooled\":{\"bytes\":\(spool.bytes),\"files\":\(spool.files),\"limit\":\(spool.budget.limit)}"
            + ",\"tunnels\":{\"open\":\(openTunnels),\"limit\":\(tunnelBudget.limit),\"per_client_limit\":\(tunnelBudget.perClient)}"
            + ",\"inflight\":\(inflight),\"streams\":\(streamBudget.count),\"workers\":\(workers.count),\"draining\":\(isDraining)}"
    }
}

extension Gateway {
    /// Each upstream group's state for /status (the operator's view: full reasons and URLs), with
    /// each endpoint's own state, ejections, calls in flight and last error.
    func groupsDocument() -> String {
        let now = monotonicNow(), wall = wallNow()
        return "{" + groups.all.map { g in
            let snap = g.snapshot
            let ejection = g.ejection
            let endpoints = g.endpoints.enumerated().map { i, e in
                let state = ejection.isEjected(i) ? "ejected" : e.reachability.state.description
                return "{\"url\":\(jsonEscaped(e.url.description)),\"state\":\"\(state)\",\"weight\":\(g.weights[i])"
                    + ",\"ejections\":\(ejection.entries[i].ejections),\"in_flight\":\(e.inFlight.load(ordering: .relaxed))"
                    + ",\"last_error\":\(e.lastError.withLock { $0 }.map(jsonEscaped) ?? "null")}"
            }
            return jsonEscaped(g.name) + ":{\"state\":\"\(snap.state)\",\"since\":\"\(rfc3339(wall - (now - snap.since)))\""
                + ",\"reason\":\(snap.reason.map(jsonEscaped) ?? "null"),\"endpoints\":[" + endpoints.joined(separator: ",") + "]}"
        }.joined(separator: ",") + "}"
    }

    /// The offline store's state for /status: where entries live, and for the shared store whether
    /// the workers are connected, its read results and the last connection error.
    func offlineStoreDocument() -> String {
        guard let s = offlineStoreStats else { return "{\"kind\":\"memory\",\"entries\":\(offlineCache.entries)}" }
        let n = s.snapshot()
        var last = "null"
        if let (why, at) = s.lastError.withLock({ $0 }) { last = "{\"error\":\(jsonEscaped(why)),\"at\":\"\(rfc3339(at))\"}" }
        // A store that refuses Peel's credentials (or wants some) is not down: the password is what to fix.
        let authFailed = n.connected < workers.count && s.authFailed.load(ordering: .relaxed)
        let state = authFailed ? "auth_failed" : n.connected == workers.count ? "connected" : n.connected == 0 ? "down" : "partial"
        var doc = "{\"kind\":\"redis\",\"url\":\(jsonEscaped(s.endpoint)),\"state\":\"\(state)\",\"connected_workers\":\(n.connected)"
        doc += ",\"hits\":\(n.hits),\"misses\":\(n.misses),\"timeouts\":\(n.timeouts),\"errors\":\(n.readErrors)"
        doc += ",\"rejected\":\(n.rejected),\"writes\":\(n.stored),\"writes_dropped\":\(n.dropped),\"writes_refused\":\(n.refused)"
        doc += ",\"connect_failures\":\(n.connectFailures),\"auth_failures\":\(n.authFailures),\"last_error\":\(last)}"
        return doc
    }
}

func sleepSeconds(_ s: Double) {
    var want = timespec(tv_sec: Int(s), tv_nsec: Int((s - Double(Int(s))) * 1e9))
    var left = timespec()
    while nanosleep(&want, &left) != 0 && errno == EINTR { want = left }
}

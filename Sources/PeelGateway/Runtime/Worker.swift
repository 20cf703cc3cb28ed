import PeelEnvelope
import PeelIO
import Synchronization

/// One event-loop thread: its own SO_REUSEPORT listener, curl multi handle, pool and counters.
final class Worker: @unchecked Sendable {
    let index: Int
    let loop: EventLoop
    let metrics = WorkerMetrics()
    private(set) var server: HTTPServer!
    private var client: UpstreamClient!
    private(set) var forwarder: Forwarder!
    /// This worker's reachability event streams.
    private(set) var streams: ReachabilityStreams!
    private let accessLog: AccessLog?
    private var flushTimer: LoopTimer?
    /// Milliseconds on the monotonic clock when this worker's loop last turned (its heartbeat timer
    /// fired); read by /healthz and /readyz from the admin thread.
    let heartbeat = Atomic<Int>(Int(monotonicNow() * 1000))
    private var heartbeatTimer: LoopTimer?
    private var drainTimer: LoopTimer?
    /// One prober per endpoint of every group, on the worker that probes (the first); empty on the others.
    private(set) var probers: [Prober] = []
    /// This worker's connection to the shared offline store, when `--offline-store` names one.
    private var redisStore: RedisOfflineStore?

    /// The body budget shared with every worker.
    private let budget: MemoryBudget
    /// Where big buffered answers go, shared with every worker.
    private let spool: Spool

    /// The (route, upstream) pairs metrics count, shared by every worker.
    private let labels: RouteLabels

    init(index: Int, config: GatewayConfig, listen: HostPort, groups: UpstreamGroups, labels: RouteLabels,
         streamBudget: StreamBudget, tunnelBudget: StreamBudget? = nil, cache: OfflineCache, storeStats: OfflineStoreStats?,
         budget: MemoryBudget, spool: Spool) throws(PeelIOError) {
        self.index = index
        self.budget = budget
        self.spool = spool
        self.labels = labels
        loop = try EventLoop()
        let io = IOSettings(config, budget: budget, spool: spool)
        client = try UpstreamClient(loop: loop, options: io.upstream)
        // Always there, so a reload can turn the access log on; the forwarder writes to it only when on.
        accessLog = AccessLog()
        streams = ReachabilityStreams(loop: loop, budget: streamBudget, heartbeat: config.reachability.heartbeat)
        let store: OfflineStore
        if case .redis(let endpoint, let database) = config.offline.store, let storeStats {
            let codec = OfflineStoreCodec(secret: config.offline.storeSecret ?? [], maxEntry: config.offline.storeMaxEntry)
            let r = RedisOfflineStore(loop: loop, cache: cache, stats: storeStats, codec: codec, endpoint: endpoint,
                                      database: database, credentials: config.offline.storeCredentials,
                                      readTimeout: config.offline.storeTimeout, workerIndex: index)
            redisStore = r
            store = r
        } else {
            store = MemoryOfflineStore(cache)
        }
        forwarder = try Forwarder(config: config, upstream: client, groups: groups, labels: labels, metrics: metrics,
                              accessLog: accessLog, streams: streams, cache: store, workerIndex: index)
        let forwarder = self.forwarder!
        if let tunnelBudget { forwarder.tunnels.budget = tunnelBudget }
        server = try HTTPServer(loop: loop, address: listen, reusePort: true, limits: io.connection) { ex in
            forwarder.handle(ex)
        }
        server.onAcceptError = { message in EventLog.emit("accept_paused", [("error", jsonEscaped(message))]) }
        forwarder.listening(on: HostPort(host: listen.host, port: server.port))
        if let accessLog {
            let timer = LoopTimer(loop: loop) { [weak self] in
                accessLog.flush()
                self?.flushTimer?.arm(seconds: 0.1)
            }
            timer.arm(seconds: 0.1)
            flushTimer = timer
        }
        // Every 0.25 s, a quarter of the smallest stall bound: a loop blocked for the bound misses
        // several beats, and a reload may lower the bound without the beat being too slow for it.
        let beat = Worker.heartbeatInterval
        let heartbeatTimer = LoopTimer(loop: loop) { [weak self] in
            guard let self else { return }
            self.heartbeat.store(Int(monotonicNow() * 1000), ordering: .relaxed)
            self.heartbeatTimer?.arm(seconds: beat)
        }
        heartbeatTimer.arm(seconds: beat)
        self.heartbeatTimer = heartbeatTimer
    }

    /// Seconds between heartbeats.
    static let heartbeatInterval = 0.25

    /// Seconds since this worker's loop last turned.
    var sinceHeartbeat: Double { monotonicNow() - Double(heartbeat.load(ordering: .relaxed)) / 1000 }

    /// Applies a reloaded configuration to requests and connections that start after this; loop
    /// thread only. Throws (and changes nothing) when curl refuses the new upstream settings.
    func apply(_ config: GatewayConfig, groups: UpstreamGroups) throws(PeelIOError) {
        let routes = try RouteSet(config, groups: groups, labels: labels, worker: index)
        let io = IOSettings(config, budget: budget, spool: spool)
        try client.apply(io.upstream)
        server.limits = io.connection
        // Connections to origins the reload removed close: idle ones now, the others once their calls finish.
        client.keepConnections(to: Set(routes.endpoints.map(\.origin)), previous: forwarder.routes.endpoints)
        forwarder.apply(routes: routes, groups: groups)
    }

    /// Makes this the worker that probes `groups`: one prober per endpoint, started with the loop.
    func probe(_ groups: UpstreamGroups) throws(PeelIOError) {
        probers = try probers(for: groups)
    }

    /// One prober per endpoint of `groups`: the running one where its endpoint and settings stay,
    /// a new (not yet started) one otherwise.
    private func probers(for groups: UpstreamGroups) throws(PeelIOError) -> [Prober] {
        var next: [Prober] = []
        for (g, settings) in zip(groups.all, groups.probes) {
            for (e, s) in zip(g.endpoints, settings) {
                if let kept = probers.first(where: { $0.endpoint === e && $0.settings == s }) {
                    next.append(kept)
                } else {
                    next.append(try Prober(loop: loop, settings: s, endpoint: e))
                }
            }
        }
        return next
    }

    /// Probes a reloaded generation's endpoints; loop thread only, on the worker that probes. An
    /// endpoint whose state and settings stay keeps its prober (and its rhythm); the others get new ones,
    /// and probers of groups that went stop. When one cannot be set up, the old ones keep probing.
    func reprobe(_ groups: UpstreamGroups) {
        guard !probers.isEmpty else { return }
        let next: [Prober]
        do throws(PeelIOError) {
            next = try probers(for: groups)
        } catch {
            EventLog.emit("reload_failed", [("worker", "\(index)"), ("error", jsonEscaped(error.description))])
            return
        }
        for old in probers where !next.contains(where: { $0 === old }) { old.stop() }
        for p in next where !probers.contains(where: { $0 === p }) { p.start() }
        probers = next
    }

    /// Starts the loop thread.
    func start() {
        heartbeat.store(Int(monotonicNow() * 1000), ordering: .relaxed)
        if !probers.isEmpty { loop.execute { [self] in for p in self.probers { p.start() } } }
        if redisStore != nil { loop.execute { [self] in self.redisStore?.start() } }
        loop.startThread()
    }

    /// Sends a reachability transition to this worker's event streams; safe from any thread.
    func broadcast(_ t: ReachabilityTransition, group: String) {
        loop.execute { [self] in streams.broadcast(t, group: group) }
    }

    /// Tells this worker's event streams that a reload removed group `group`; safe from any thread.
    func announceRemoved(group: String, at: Double) {
        loop.execute { [self] in streams.announceRemoved(group: group, at: at) }
    }

    /// SIGTERM: no new tunnel opens from now, while the listeners stay open for `drain_delay`;
    /// safe from any thread.
    func refuseTunnels() {
        loop.execute { [self] in forwarder.tunnels.refusing = true }
    }

    /// Stops accepting, lets pending calls finish, then closes connections and ends the loop.
    func drain() {
        loop.execute { [self] in
            server.drain()
            forwarder.draining = true
            // Event streams never end by themselves: end them now, or drain would wait for them
            // until shutdown_timeout.
            streams.finishAll()
            for p in probers { p.stop() }
            let timer = LoopTimer(loop: loop) { [weak self] in self?.checkDrained() }
            drainTimer = timer
            checkDrained()
        }
    }

    /// Shutdown timeout reached: calls still waiting for the upstream get a 503; the loop ends once
    /// those answers are written (checkDrained keeps polling).
    func cutWaitingCalls() {
        loop.execute { [self] in forwarder.cutWaitingCalls() }
    }

    private func checkDrained() {
        if server.pending == 0 {
            accessLog?.flush()
            flushTimer?.cancel()
            heartbeatTimer?.cancel()
            redisStore?.stop()
            server.close()
            loop.stop()
        } else {
            drainTimer?.arm(seconds: 0.02)
        }
    }
}

import PeelEnvelope
import PeelIO

/// One event-loop thread: its own SO_REUSEPORT listener, curl multi handle, pool and counters.
final class Worker: @unchecked Sendable {
    let index: Int
    let loop: EventLoop
    let metrics = WorkerMetrics()
    private(set) var server: HTTPServer!
    private var client: UpstreamClient!
    private var forwarder: Forwarder!
    /// This worker's reachability event streams.
    private(set) var streams: ReachabilityStreams!
    private let accessLog: AccessLog?
    private var flushTimer: LoopTimer?
    private var drainTimer: LoopTimer?
    var prober: Prober?

    init(index: Int, config: GatewayConfig, listen: HostPort, reachability: Reachability,
         streamBudget: StreamBudget, cache: OfflineCache?) throws(PeelIOError) {
        self.index = index
        loop = try EventLoop()
        var upstreamOptions = UpstreamOptions()
        upstreamOptions.timeout = config.timeout
        upstreamOptions.connectTimeout = config.connectTimeout
        upstreamOptions.maxResponseBody = config.maxUpstreamBody
        upstreamOptions.caFile = config.caFile
        upstreamOptions.maxInFlight = config.maxInFlight
        upstreamOptions.origin = config.upstream.origin
        client = try UpstreamClient(loop: loop, options: upstreamOptions)
        accessLog = config.accessLog ? AccessLog() : nil
        streams = ReachabilityStreams(loop: loop, budget: streamBudget, heartbeat: config.streamHeartbeat)
        forwarder = Forwarder(config: config, upstream: client, reachability: reachability, metrics: metrics,
                              accessLog: accessLog, streams: streams, cache: cache, workerIndex: index)
        var limits = ConnectionLimits()
        limits.maxBody = config.maxBody
        limits.idleTimeout = config.clientTimeout
        limits.writeTimeout = config.clientTimeout
        limits.bodyTimeout = config.bodyTimeout
        limits.headerTimeout = config.headerTimeout
        let forwarder = self.forwarder!
        server = try HTTPServer(loop: loop, address: listen, reusePort: true, limits: limits) { ex in
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
    }

    /// Starts the loop thread.
    func start() {
        if prober != nil { loop.execute { [self] in self.prober?.start() } }
        loop.startThread()
    }

    /// Sends a reachability transition to this worker's event streams; safe from any thread.
    func broadcast(_ t: ReachabilityTransition) {
        loop.execute { [self] in streams.broadcast(t) }
    }

    /// Stops accepting, lets pending calls finish, then closes connections and ends the loop.
    func drain() {
        loop.execute { [self] in
            server.drain()
            forwarder.draining = true
            // Event streams never end by themselves: end them now, or drain would wait for them
            // until shutdown_timeout.
            streams.finishAll()
            prober?.stop()
            let timer = LoopTimer(loop: loop) { [weak self] in self?.checkDrained() }
            drainTimer = timer
            checkDrained()
        }
    }

    private func checkDrained() {
        if server.pending == 0 {
            accessLog?.flush()
            flushTimer?.cancel()
            server.close()
            loop.stop()
        } else {
            drainTimer?.arm(seconds: 0.02)
        }
    }
}

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
    private let accessLog: AccessLog?
    private var flushTimer: LoopTimer?
    private var drainTimer: LoopTimer?
    var prober: Prober?

    init(index: Int, config: GatewayConfig, listen: HostPort, reachability: Reachability) throws(PeelIOError) {
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
        forwarder = Forwarder(config: config, upstream: client, reachability: reachability, metrics: metrics,
                              accessLog: accessLog, workerIndex: index)
        var serverOptions = HTTPServerOptions()
        serverOptions.maxBodySize = config.maxBody
        serverOptions.connectionTimeout = config.clientTimeout
        serverOptions.headerTimeout = config.headerTimeout
        let forwarder = self.forwarder!
        server = try HTTPServer(loop: loop, address: listen, reusePort: true, options: serverOptions) { ex in
            forwarder.handle(ex)
        }
        forwarder.listening(on: HostPort(host: listen.host, port: server.port))
        let typeBase = config.envelope.problemTypeBase
        server.errorDocument = { status, violation in
            // Requests refused before the forwarder saw them get the same problem shape as every other failure.
            let problem: Problem
            if let violation {
                problem = Problem(kind: .badRequest, detail: violation)
            } else if status == 413 {
                problem = Problem(kind: .requestTooLarge)
            } else if status == 431 {
                problem = Problem(kind: .requestTooLarge, status: 431, detail: "request head too large")
            } else {
                problem = Problem(kind: .badRequest, detail: "malformed HTTP request")
            }
            let body = renderProblem(problem, requestId: forwarder.nextRequestId(), language: .english, typeBase: typeBase)
            return (problem.status, "application/problem+json", body)
        }
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

    /// Stops accepting, lets pending calls finish, then closes connections and ends the loop.
    func drain() {
        loop.execute { [self] in
            server.stopAccepting()
            forwarder.draining = true
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

import PeelIO

/// The admin listener: /healthz, /readyz, /status, /metrics on its own loop thread.
final class AdminServer: @unchecked Sendable {
    let loop: EventLoop
    private var server: HTTPServer!
    /// Re-checks the spool directory every `spoolCheckInterval`, traffic or not.
    private var spoolWatch: LoopTimer?
    /// Seconds between two checks of the spool directory for /readyz.
    static let spoolCheckInterval = 5.0
    /// The port actually bound.
    var port: Int { server.port }

    init(address: HostPort, gateway: Gateway) throws(PeelIOError) {
        loop = try EventLoop()
        server = try HTTPServer(loop: loop, address: address, reusePort: false) { [unowned gateway] ex in
            AdminServer.handle(ex, gateway: gateway)
        }
        spoolWatch = LoopTimer(loop: loop) { [unowned self, unowned gateway] in
            // A directory removed, remounted read-only or full after start: /readyz says so until
            // a file can be written there again.
            gateway.spoolFault.withLock { $0 = gateway.spool.threshold > 0 ? gateway.spool.check() : nil }
            spoolWatch?.arm(seconds: Self.spoolCheckInterval)
        }
    }

    func start() {
        spoolWatch?.arm(seconds: Self.spoolCheckInterval)
        loop.startThread()
    }

    func stop() {
        loop.execute { [self] in
            spoolWatch?.cancel()
            server.close()
            loop.stop()
        }
        loop.join()
    }

    private static func handle(_ ex: HTTPExchange, gateway: Gateway) {
        if let refusal = ex.refusal {
            ex.respond(status: refusal.status, headers: [("Content-Type", "application/json")],
                       body: Array("{\"error\":\(jsonEscaped(refusal.detail))}".utf8), closing: true)
            return
        }
        let path = ex.target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? ex.target
        guard ex.methodToken.readsResource else {
            ex.respond(status: 405, headers: [("Allow", "GET, HEAD"), ("Content-Type", "application/json")],
                       body: Array("{\"error\":\"method not allowed\"}".utf8))
            return
        }
        let json = ("Content-Type", "application/json")
        let stalled = path == "/healthz" || path == "/readyz" ? gateway.stalledWorkers() : []
        switch path {
        case _ where !stalled.isEmpty:
            let list = stalled.map { "{\"worker\":\($0.index),\"seconds\":\(($0.seconds * 10).rounded() / 10)}" }.joined(separator: ",")
            ex.respond(status: 503, headers: [json], body: Array("{\"status\":\"stalled\",\"stalled\":[\(list)]}".utf8))
        case "/_peel/openapi.json":
            if let document = gateway.contract?.document {
                ex.respond(status: 200, headers: [json, ("Cache-Control", "no-cache")], body: document)
            } else if gateway.contract?.hasSources == true {
                ex.respond(status: 503, headers: [json, ("Retry-After", "1")],
                           body: Array("{\"error\":\"no group's OpenAPI document has been read yet (see /status openapi)\"}".utf8))
            } else {
                ex.respond(status: 404, headers: [json], body: Array("{\"error\":\"no upstream group names an OpenAPI document\"}".utf8))
            }
        case "/healthz":
            ex.respond(status: 200, headers: [json], body: Array("{\"status\":\"ok\"}".utf8))
        case "/readyz":
            if gateway.isDraining {
                ex.respond(status: 503, headers: [json], body: Array("{\"status\":\"draining\"}".utf8))
            } else if let fault = gateway.spoolFault.withLock({ $0 }) {
                ex.respond(status: 503, headers: [json],
                           body: Array("{\"status\":\"spool_unwritable\",\"spool_dir\":\(jsonEscaped(gateway.spool.directory)),\"error\":\(jsonEscaped(fault))}".utf8))
            } else if gateway.isServing {
                ex.respond(status: 200, headers: [json], body: Array("{\"status\":\"ready\"}".utf8))
            } else {
                ex.respond(status: 503, headers: [json], body: Array("{\"status\":\"starting\"}".utf8))
            }
        case "/status":
            ex.respond(status: 200, headers: [json], body: Array(gateway.statusDocument().utf8))
        case "/metrics":
            ex.respond(status: 200, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")],
                       body: Array(gateway.metricsText().utf8))
        default:
            ex.respond(status: 404, headers: [json], body: Array("{\"error\":\"not found\"}".utf8))
        }
    }
}

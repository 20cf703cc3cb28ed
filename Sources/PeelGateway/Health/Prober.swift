import PeelIO

/// Active health checks of one endpoint (healthy ones too): one probe at a time on a loop, the next armed when the last
/// one ends.
final class Prober {
    private let loop: EventLoop
    private let client: UpstreamClient
    private let url: String
    private let interval: Double
    /// The endpoint it probes.
    let endpoint: EndpointState
    private let timeout: Double
    private var timer: LoopTimer?
    private var current: UpstreamTransfer?
    private var stopped = false

    /// The settings it runs with, so a reload that changes none of them keeps it running.
    let settings: ProbeSettings

    init(loop: EventLoop, settings: ProbeSettings, endpoint: EndpointState) throws(PeelIOError) {
        self.loop = loop
        self.settings = settings
        client = try UpstreamClient(loop: loop, options: UpstreamOptions(probe: settings))
        url = settings.url
        interval = settings.interval
        timeout = settings.timeout
        self.endpoint = endpoint
    }

    /// Sends one probe and reports it; `done` runs after the report (tests call this directly).
    func probeOnce(_ done: @escaping () -> Void = {}) {
        let started = monotonicNow()
        current = client.send(UpstreamRequest(method: "GET", target: .url(url), added: [FieldLine("User-Agent", "peel-probe")])) { [self] result in
            current = nil
            let latency = monotonicNow() - started
            let report: ProbeReport
            switch result {
            case .success(let r):
                // Any HTTP answer below 500 means the upstream is there; 5xx on the path the operator
                // chose for it is the upstream saying it is down (SPEC, Reachability).
                let why = r.status < 500 ? nil : "probe status \(r.status)"
                report = ProbeReport(ok: r.status < 500, status: r.status, error: why, latency: latency, at: wallNow())
            case .failure(.localResources), .failure(.overloaded), .failure(.overBudget), .failure(.overClientShare):
                // Peel could not even try (its own descriptors or in-flight limit): no evidence either
                // way, so the state is left as it is.
                done()
                return
            case .failure(.protocolError), .failure(.tooLarge):
                // The upstream answered, badly or at length: it is there (only failing to
                // connect or to get any answer counts toward fall). Its calls get -100 / -107.
                report = ProbeReport(ok: true, status: nil, error: nil, latency: latency, at: wallNow())
            case .failure(.timeout):
                // Issue 17: connected, then no answer in time. Busy, not gone: gunicorn's sync
                // workers all held by slow calls queue the probe behind them.
                report = ProbeReport(ok: false, status: nil, error: "probe connected, no answer within \(secondsText(timeout))",
                                     latency: latency, at: wallNow(), busy: true, coarseError: "busy")
            case .failure(.connectTimeout(let m)):
                // Excused only while live calls are being answered (Reachability.swift).
                report = ProbeReport(ok: false, status: nil, error: "connect timeout after \(secondsText(timeout)): " + m,
                                     latency: latency, at: wallNow(), timedOut: true, coarseError: coarseReason(.connectTimeout(m)))
            case .failure(let f):
                // Refused, DNS, TLS, and also a close before any status line: no client can make the
                // operator's probe path drop its connection, but a port-forward, docker-proxy or L4
                // balancer with nothing behind it takes every connection and closes it. Live calls'
                // closes stay neutral (Forwarder.upstreamFinished).
                report = ProbeReport(ok: false, status: nil, error: failureReason(f), latency: latency, at: wallNow(),
                                     coarseError: coarseReason(f))
            }
            endpoint.probed(report)
            done()
        }
    }

    /// Probes now, then every interval until `stop()`; must run on the loop thread.
    func start() {
        timer = LoopTimer(loop: loop) { [weak self] in self?.tick() }
        tick()
    }

    private func tick() {
        guard !stopped else { return }
        probeOnce { [weak self] in
            guard let self, !self.stopped else { return }
            self.timer?.arm(seconds: self.interval)
        }
    }

    /// Stops probing; loop thread only.
    func stop() {
        stopped = true
        timer?.cancel()
        current?.cancel()
        current = nil
    }
}

/// The words a transition and /status use for a failure: `connect refused`, `dns: …`,
/// `tls: …`, so the log line alone says why the state changed.
func failureReason(_ f: UpstreamFailure) -> String {
    switch f {
    case .refused(let m): return m.isEmpty ? "connect refused" : "connect refused: " + m
    case .dns(let m): return "dns: " + m
    case .tls(let m): return "tls: " + m
    case .reset(let m): return "connection reset: " + m
    case .connectTimeout(let m): return "connect timeout: " + m
    case .timeout(let m): return "timeout: " + m
    case .protocolError(let m): return "protocol: " + m
    case .notResent(let m): return "connection died after the request: " + m
    case .streamIdle(let m): return m
    case .other(let m): return m
    case .tooLarge, .overloaded, .localResources, .overBudget, .overClientShare, .overSpoolBudget, .overSpoolClientShare,
         .spoolWrite: return f.message
    }
}

/// The coarse words for a failure, for anonymous clients of `/_peel/reachability`: no
/// address, port, host name or curl text, which `failureReason` carries for the log and `/status`.
func coarseReason(_ f: UpstreamFailure) -> String {
    switch f {
    case .refused: return "connect refused"
    case .dns: return "dns"
    case .tls: return "tls"
    case .connectTimeout: return "connect timeout"
    case .reset, .notResent: return "connection closed"
    case .timeout, .streamIdle: return "timeout"
    case .protocolError: return "protocol error"
    case .tooLarge, .overloaded, .localResources, .overBudget, .overClientShare, .overSpoolBudget, .overSpoolClientShare,
         .spoolWrite, .other: return "upstream error"
    }
}

/// The cause a live or probe failure is recorded with: coarse and detailed words.
func failureCause(_ f: UpstreamFailure) -> FailureCause {
    FailureCause(coarse: coarseReason(f), detail: failureReason(f))
}

/// `1 s`, `0.2 s`: seconds as a person writes them.
func secondsText(_ s: Double) -> String {
    s == s.rounded() ? "\(Int(s)) s" : "\(s) s"
}

import Glibc
import PeelIO
import Synchronization

/// The demo upstream: a small strict HTTP/1.1 envelope API on its own loop thread, for `peel demo` and tests.
public final class DemoUpstream: @unchecked Sendable {
    // Unchecked: `server` is only read or written under `phase`'s lock, by `start` and `stop`; the loop thread
    // uses the DemoServer object itself, between those two. Everything else is immutable or synchronised.
    private let loop: EventLoop
    private let address: HostPort
    private let stats = DemoStats()
    private let boundPort = Atomic<Int>(0)
    private let phase = Locked(Phase.created)
    private var server: DemoServer?

    private enum Phase { case created, running, stopped }

    /// Prepares a server for `listen` (port 0 picks a free port) with its own event loop.
    public init(listen: HostPort) throws {
        loop = try EventLoop()
        address = listen
    }

    /// Binds and starts the loop thread; `port` is known when this returns. Calls after the first do nothing.
    public func start() throws {
        // The lock is held throughout so a concurrent `stop` sees either nothing started or a running loop.
        try phase.withLock { p in
            guard p == .created else { return }
            Self.ignoreSIGPIPE()
            do {
                let server = try DemoServer(loop: loop, address: address, stats: stats)
                self.server = server
                boundPort.store(server.port, ordering: .sequentiallyConsistent)
            } catch {
                p = .stopped
                throw error
            }
            loop.startThread()
            p = .running
        }
    }

    /// The bound port (0 before `start`).
    public var port: Int { boundPort.load(ordering: .sequentiallyConsistent) }

    /// `http://HOST:PORT` for clients on this machine; wildcard listens are reached through loopback.
    public var baseURL: String {
        switch address.host {
        case "0.0.0.0", "": return "http://127.0.0.1:\(port)"
        case "::": return "http://[::1]:\(port)"
        case let host where host.contains(":"): return "http://[\(host)]:\(port)"
        case let host: return "http://\(host):\(port)"
        }
    }

    /// Closes the listener and every connection, then stops and joins the loop thread; idempotent.
    public func stop() {
        // The loop thread never takes `phase`, so joining under it cannot deadlock.
        phase.withLock { p in
            defer { p = .stopped }
            guard p == .running else { return }
            let server = LoopBound(server)
            let loop = self.loop
            loop.execute {
                server.value?.shutdown()
                // bufferevent_free leaves the close(2) to a finalizer on the loop's next pass; stopping
                // from a deferred job lets that pass run, so clients see the FIN before `stop` returns.
                loop.defer { loop.stop() }
            }
            loop.join()
            // The loop thread is gone: releasing the server (and its timers) here races with nothing.
            self.server = nil
        }
    }

    /// Whole requests received since start or `resetCount`, health probes excluded.
    public var requestCount: Int { stats.requests.load(ordering: .sequentiallyConsistent) }

    /// Whole health-probe requests (`/`, `/__demo/health`) received since start or `resetCount`.
    public var probeCount: Int { stats.probes.load(ordering: .sequentiallyConsistent) }

    /// Sets both counters back to zero and forgets the last request.
    public func resetCount() {
        stats.requests.store(0, ordering: .sequentiallyConsistent)
        stats.probes.store(0, ordering: .sequentiallyConsistent)
        stats.last.withLock { $0 = nil }
    }

    /// True while the demo plays dead (`POST /_demo/down`): every request but the switch gets a reset.
    public var isPlayingDead: Bool {
        get { stats.playDead.isDown }
        set { stats.playDead.isDown = newValue }
    }

    /// A copy of the most recent request, health probes excluded.
    public var lastRequest: RecordedRequest? { stats.last.withLock { $0 } }

    deinit { stop() }

    /// libevent writes with writev(2), which raises SIGPIPE on a socket the peer has reset; a test process
    /// hosting the demo must not die of that. A handler someone else installed is left alone.
    private static func ignoreSIGPIPE() {
        var current = sigaction()
        guard sigaction(SIGPIPE, nil, &current) == 0, current.__sigaction_handler.sa_handler == nil else { return }
        signal(SIGPIPE, SIG_IGN)
    }
}

/// Carries a loop-thread object through `execute`; only the loop thread may use `value`.
private struct LoopBound<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

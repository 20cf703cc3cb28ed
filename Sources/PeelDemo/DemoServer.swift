import PeelIO
import Synchronization

/// Counters and the last request, shared between the loop thread and any reader.
final class DemoStats: Sendable {
    /// Whole requests received, probes excluded.
    let requests = Atomic<Int>(0)
    /// Whole requests to the health endpoint (`/`, `/__demo/health`).
    let probes = Atomic<Int>(0)
    /// The most recent non-probe request.
    let last = Locked<RecordedRequest?>(nil)
    /// The play-dead switch.
    let playDead = DemoSwitch()

    /// Counts one request; probes are counted apart so a gateway's prober cannot disturb "not contacted" checks.
    func record(_ request: ParsedRequest) {
        if DemoRoutes.routedPath(request.path) == "/" || DemoRoutes.routedPath(request.path) == "/__demo/health" {
            probes.add(1, ordering: .sequentiallyConsistent)
            return
        }
        let copy = request.recorded
        last.withLock { $0 = copy }
        requests.add(1, ordering: .sequentiallyConsistent)
    }
}

/// The listener and its open connections; loop-thread only.
final class DemoServer {
    private let listener: TCPServer
    private let table: ConnectionTable
    /// The port actually bound.
    var port: Int { listener.port }

    /// Binds `address` on `loop` (callable before the loop thread starts).
    init(loop: EventLoop, address: HostPort, stats: DemoStats) throws {
        let table = ConnectionTable(loop: loop, stats: stats)
        self.table = table
        listener = try TCPServer(loop: loop, address: address) { tcp in table.adopt(tcp) }
    }

    /// Stops listening and ends every connection.
    func shutdown() {
        listener.close()
        table.closeAll()
    }
}

/// Owns the connections while they are open.
private final class ConnectionTable {
    private let loop: EventLoop
    private let stats: DemoStats
    private var open: [ObjectIdentifier: DemoConnection] = [:]
    /// Connections that just closed, released on the next loop turn rather than inside their own callbacks.
    private var graveyard: [DemoConnection] = []

    init(loop: EventLoop, stats: DemoStats) {
        self.loop = loop
        self.stats = stats
    }

    func adopt(_ tcp: TCPConnection) {
        let stats = self.stats
        let connection = DemoConnection(tcp: tcp, onRequest: { request in
            stats.record(request)
            return stats.playDead.reply(to: request)
        }, onGone: { [weak self] in self?.release($0) })
        open[ObjectIdentifier(connection)] = connection
    }

    func closeAll() {
        for connection in open.values { connection.shutdown() }
    }

    private func release(_ connection: DemoConnection) {
        guard let gone = open.removeValue(forKey: ObjectIdentifier(connection)) else { return }
        graveyard.append(gone)
        // The graveyard is only reachable weakly from the deferred job, so a stopped loop leaks nothing past its base.
        if graveyard.count == 1 { loop.defer { [weak self] in self?.graveyard.removeAll() } }
    }
}

import CEvent
import Glibc
import Synchronization

/// Peel's HTTP/1.1 server on one loop: an `evconnlistener` (SO_REUSEPORT, so every worker has its
/// own) and a table of client connections, each a `ClientConnection` driven by its own pure
/// `ConnectionMachine`. The handler runs on the loop's thread.
public final class HTTPServer {
    private let loop: EventLoop
    private var listener: Listener?
    let handler: (HTTPExchange) -> Void
    /// Limits for connections accepted from now on (a reload changes them; open ones keep theirs).
    public var limits: ConnectionLimits
    /// The port actually bound (useful with port 0).
    public let port: Int
    /// Exchanges handed out whose answer is not yet written.
    public private(set) var pending = 0
    /// Open connections, by descriptor; the only strong references to them.
    private var connections: [Int32: ClientConnection] = [:]
    private var closing: [ClientConnection] = []
    private var reapEvent: OpaquePointer?
    private let openConnections = Atomic<Int>(0)
    private let date = HTTPDate()
    /// Read-and-discard space for lingering closes (loop-thread only).
    var scratch = [UInt8](repeating: 0, count: 65_536)
    /// True once `drain` ran: answers say `Connection: close`.
    private(set) var draining = false
    /// Called (on the loop thread) when accepting hits a descriptor limit; at most once a second.
    public var onAcceptError: ((String) -> Void)? {
        get { listener?.onAcceptError }
        set { listener?.onAcceptError = newValue }
    }

    /// Client connections open now (safe to read from any thread).
    public var connectionCount: Int { openConnections.load(ordering: .relaxed) }
    /// This server's tunnels: open now, and the bytes they relayed (safe to read from any thread).
    public let tunnelMeter = TunnelMeter()

    /// Binds `address` (SO_REUSEPORT when `reusePort`) and starts accepting on `loop`.
    public init(loop: EventLoop, address: HostPort, reusePort: Bool, limits: ConnectionLimits = .init(),
                handler: @escaping (HTTPExchange) -> Void) throws(PeelIOError) {
        self.loop = loop
        self.handler = handler
        self.limits = limits
        var accept: ((Int32, UnsafeMutablePointer<sockaddr>?, Int32) -> Void)?
        let l = try Listener(loop: loop, address: address, reusePort: reusePort) { fd, address, length in
            accept?(fd, address, length)
        }
        port = l.port
        listener = l
        let me = Unmanaged.passUnretained(self).toOpaque()
        reapEvent = event_new(loop.base, -1, 0, { _, _, arg in
            Unmanaged<HTTPServer>.fromOpaque(arg!).takeUnretainedValue().reap()
        }, me)
        guard reapEvent != nil else {
            l.close()
            throw PeelIOError(.libevent, "event_new")
        }
        accept = { [unowned self] fd, address, length in self.accepted(fd, address, length) }
    }

    /// Fails with `address in use` when another socket already listens on `address` (SO_REUSEPORT
    /// would let a second process share it silently); call once before the workers bind.
    public static func ensureNotServed(_ address: HostPort) throws(PeelIOError) {
        try Sockets.ensureNotServed(address)
    }

    private func accepted(_ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>?, _ length: Int32) {
        // LEV_OPT makes accepted sockets non-blocking; TCP_NODELAY is inherited from the listener.
        let peer = Sockets.describe(address, length)
        let conn = ClientConnection(server: self, loop: loop, fd: fd, clientAddress: peer, limits: limits)
        connections[fd] = conn
        openConnections.add(1, ordering: .relaxed)
        if !conn.start() { conn.close() }
    }

    func connectionClosed(_ conn: ClientConnection) {
        openConnections.subtract(1, ordering: .relaxed)
        // Its events may be the ones calling: free them and drop it from the table after this pass.
        closing.append(conn)
        if closing.count == 1 { event_active(reapEvent, 0, 0) }
    }

    private func reap() {
        let done = closing
        closing.removeAll(keepingCapacity: true)
        for conn in done {
            conn.freeEvents()
            if connections[conn.fd] === conn { connections.removeValue(forKey: conn.fd) }
        }
    }

    func exchangeStarted() { pending += 1 }
    func exchangeEnded() { pending -= 1 }

    /// Calls `body` with the current IMF-fixdate.
    func withDate<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        var tv = timeval()
        event_base_gettimeofday_cached(loop.base, &tv)
        return date.with(now: tv.tv_sec, body)
    }

    /// Stops accepting new connections; open ones keep being served.
    public func stopAccepting() {
        listener?.close()
        listener = nil
    }

    /// Stops accepting and closes idle connections; busy ones close after their answer.
    public func drain() {
        stopAccepting()
        draining = true
        for conn in Array(connections.values) { conn.drain() }
    }

    /// Closes the listener and every connection (call once nothing is pending).
    public func close() {
        stopAccepting()
        for conn in Array(connections.values) { conn.close() }
        reap()
        connections.removeAll()
        if let reapEvent { event_free(reapEvent) }
        reapEvent = nil
    }
}

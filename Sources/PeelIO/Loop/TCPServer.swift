import CEvent
import Glibc

/// A raw TCP listener on one loop, for servers that must control every byte (the demo upstream).
public final class TCPServer {
    private let loop: EventLoop
    private var listener: Listener?
    private let onConnection: (TCPConnection) -> Void
    /// The port actually bound.
    public let port: Int

    /// Listens on `address`; `onConnection` runs on the loop thread for each accepted socket.
    public init(loop: EventLoop, address: HostPort, reusePort: Bool = false,
                onConnection: @escaping (TCPConnection) -> Void) throws(PeelIOError) {
        self.loop = loop
        self.onConnection = onConnection
        var accept: ((Int32) -> Void)?
        let l = try Listener(loop: loop, address: address, reusePort: reusePort) { fd, _, _ in accept?(fd) }
        port = l.port
        listener = l
        accept = { [unowned self] fd in self.accepted(fd) }
    }

    private func accepted(_ fd: Int32) {
        evutil_make_socket_nonblocking(fd)
        var on: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, 4)
        guard let conn = TCPConnection(loop: loop, fd: fd) else {
            Glibc.close(fd)
            return
        }
        onConnection(conn)
        conn.start()
    }

    /// Stops listening; open connections stay.
    public func close() {
        listener?.close()
        listener = nil
    }

    deinit { close() }
}

/// One accepted socket; kept alive by itself until it closes.
public final class TCPConnection {
    private var bev: OpaquePointer?
    private var retained: Unmanaged<TCPConnection>?
    private var closeAfterFlush = false
    /// The loop this connection runs on.
    public let loop: EventLoop
    /// Called with each chunk of bytes read.
    public var onData: ((ArraySlice<UInt8>) -> Void)?
    /// Called once when the connection is gone.
    public var onClose: (() -> Void)?
    /// Called each time everything queued has been handed to the kernel (pace large writes on it).
    public var onDrain: (() -> Void)?
    /// Bytes queued and not yet handed to the kernel.
    public var pendingOutputBytes: Int {
        guard let bev, let out = bufferevent_get_output(bev) else { return 0 }
        return evbuffer_get_length(out)
    }
    /// True until the connection is closed.
    public var isOpen: Bool { bev != nil }

    init?(loop: EventLoop, fd: Int32) {
        self.loop = loop
        guard let b = bufferevent_socket_new(loop.base, fd, Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)) else { return nil }
        bev = b
    }

    func start() {
        guard let bev else { return }
        retained = Unmanaged.passRetained(self)
        let me = Unmanaged.passUnretained(self).toOpaque()
        bufferevent_setcb(bev, { _, arg in
            Unmanaged<TCPConnection>.fromOpaque(arg!).takeUnretainedValue().readable()
        }, { _, arg in
            Unmanaged<TCPConnection>.fromOpaque(arg!).takeUnretainedValue().drained()
        }, { _, what, arg in
            Unmanaged<TCPConnection>.fromOpaque(arg!).takeUnretainedValue().event(what)
        }, me)
        bufferevent_enable(bev, Int16(EV_READ | EV_WRITE))
    }

    private func readable() {
        guard let bev, let input = bufferevent_get_input(bev) else { return }
        let n = evbuffer_get_length(input)
        if n == 0 { return }
        var bytes = [UInt8](repeating: 0, count: n)
        bytes.withUnsafeMutableBytes { _ = evbuffer_remove(input, $0.baseAddress, n) }
        onData?(bytes[...])
    }

    private func drained() {
        if closeAfterFlush { teardown() } else { onDrain?() }
    }

    private func event(_ what: Int16) {
        if what & Int16(BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT) != 0 { teardown() }
    }

    /// Queues bytes for sending.
    public func write(_ bytes: [UInt8]) {
        guard let bev else { return }
        bytes.withUnsafeBytes { _ = bufferevent_write(bev, $0.baseAddress, $0.count) }
    }

    /// Queues a string as UTF-8 for sending.
    public func write(_ text: String) { write(Array(text.utf8)) }

    /// Closes once everything queued has been sent.
    public func close() {
        guard let bev else { return }
        if let out = bufferevent_get_output(bev), evbuffer_get_length(out) > 0 {
            closeAfterFlush = true
            bufferevent_disable(bev, Int16(EV_READ))
        } else {
            teardown()
        }
    }

    /// Aborts with a TCP RST (SO_LINGER 0), dropping anything queued.
    public func reset() {
        guard let bev else { return }
        let fd = bufferevent_getfd(bev)
        var l = linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, socklen_t(MemoryLayout<linger>.size))
        teardown()
    }

    /// Stops reading from the peer (to simulate a server that stalls).
    public func pauseReading() {
        if let bev { bufferevent_disable(bev, Int16(EV_READ)) }
    }

    private func teardown() {
        guard let bev else { return }
        self.bev = nil
        bufferevent_free(bev)
        let cb = onClose
        onClose = nil
        onData = nil
        onDrain = nil
        cb?()
        retained?.release()
        retained = nil
    }
}

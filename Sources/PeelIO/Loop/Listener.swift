import CEvent
import Glibc

/// One listening socket on one loop (`evconnlistener`), shared by Peel's HTTP server and the raw
/// TCP server of the demo upstream. Accepted sockets are non-blocking and close-on-exec.
final class Listener {
    private var listener: OpaquePointer?
    private var resumeTimer: OpaquePointer?
    private let onAccept: (Int32, UnsafeMutablePointer<sockaddr>?, Int32) -> Void
    private var lastWarning = -1.0
    /// The port actually bound (useful with port 0).
    let port: Int
    /// Called (on the loop thread) when accepting hits a descriptor or memory limit; at most once a second.
    var onAcceptError: ((String) -> Void)?

    /// Binds `address` (SO_REUSEPORT when `reusePort`) and calls `onAccept` for each new socket.
    init(loop: EventLoop, address: HostPort, reusePort: Bool,
         onAccept: @escaping (Int32, UnsafeMutablePointer<sockaddr>?, Int32) -> Void) throws(PeelIOError) {
        self.onAccept = onAccept
        let fd = try Sockets.listen(address, reusePort: reusePort)
        port = Sockets.localPort(fd)
        let me = Unmanaged.passUnretained(self).toOpaque()
        // Backlog 0: the socket already listens with Sockets' backlog. libevent 2.1 takes -1 as
        // "call listen(fd, 128)", which shrank the accept queue and dropped connections under load.
        listener = evconnlistener_new(loop.base, { _, fd, address, length, arg in
            Unmanaged<Listener>.fromOpaque(arg!).takeUnretainedValue().onAccept(fd, address, length)
        }, me, UInt32(LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC), 0, fd)
        guard let listener else {
            Glibc.close(fd)
            throw PeelIOError(.libevent, "evconnlistener_new")
        }
        evconnlistener_set_error_cb(listener) { _, arg in
            Unmanaged<Listener>.fromOpaque(arg!).takeUnretainedValue().acceptFailed(errno)
        }
        resumeTimer = event_new(loop.base, -1, 0, { _, _, arg in
            let l = Unmanaged<Listener>.fromOpaque(arg!).takeUnretainedValue()
            if let listener = l.listener { evconnlistener_enable(listener) }
        }, me)
        guard resumeTimer != nil else {
            close()
            throw PeelIOError(.libevent, "event_new")
        }
    }

    // The only accept errors libevent hands here are the ones it cannot retry: descriptor limits
    // (EMFILE, ENFILE) and memory (ENOBUFS, ENOMEM). Accepting again at once would spin on the same
    // error (the backlog stays readable), so pause like nginx does and let connections close.
    private func acceptFailed(_ error: Int32) {
        guard let listener else { return }
        evconnlistener_disable(listener)
        var tv = timeval.peel(0.1)
        event_add(resumeTimer, &tv)
        let now = monotonicSeconds()
        if now - lastWarning >= 1 {
            lastWarning = now
            onAcceptError?("accept: \(String(cString: strerror(error))); pausing 100 ms")
        }
    }

    /// Stops listening and frees the listener (idempotent).
    func close() {
        if let listener { evconnlistener_free(listener) }
        listener = nil
        if let resumeTimer { event_free(resumeTimer) }
        resumeTimer = nil
    }

    deinit { close() }
}

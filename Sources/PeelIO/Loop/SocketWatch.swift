import CEvent
import Glibc

/// One socket curl asked us to watch; found by fd.
final class SocketWatch {
    /// The watched descriptor.
    let fd: Int32
    /// True for sockets our open callback made: they may stay registered while parked.
    let owned: Bool
    /// The libevent event, created on first arm and reused after.
    var event: OpaquePointer?
    /// The EV_* flags the event was last armed with.
    var flags: Int16 = 0
    /// True while the event is added to the loop.
    var registered = false
    /// True while curl is not watching an owned socket (an idle keep-alive connection).
    var parked = false
    /// The socket's inode (sockfs), read when our open callback made it: tells our socket from
    /// another one that reuses its number after curl closed ours without telling us.
    var inode: UInt = 0
    /// True once curl asked to read from it: a socket still connecting has only been asked for writes.
    var connected = false
    /// The handle and serial of the transfer that last told curl to watch (or stop watching) this
    /// owned socket. While it runs, the connection is its own and not idle, whatever curl's watch
    /// says (a paused transfer, back-pressure); once it has finished, a parked socket is an idle
    /// pooled connection. The pooled handle and a number, not a weak reference to the transfer: a
    /// weakly referenced object takes the runtime's slow path on every retain and release
    /// (~2.3k instructions per /small call, Benchmarks/RESULTS.md). A handle cleaned up after a
    /// reload may stay held here; only its `running` (0 from then on) is read.
    var ownerHandle: EasyHandle?
    var ownerSerial: UInt64 = 0

    /// Whether the transfer that last owned this socket still runs.
    var ownerRuns: Bool { ownerSerial != 0 && ownerHandle?.running == ownerSerial }

    /// Notes `t` as the owner; a finished transfer owns nothing.
    func own(_ t: UpstreamTransfer) {
        guard let h = t.handle else { ownerSerial = 0; return }
        if ownerHandle !== h { ownerHandle = h }
        ownerSerial = t.serial
    }
    /// The endpoint the latest transfer on this owned socket's connection went to (nil for a
    /// whole-URL target): an idle connection to one a reload removed is closed.
    var endpoint: UpstreamEndpoint?

    /// Watches nothing yet.
    init(fd: Int32, owned: Bool) {
        self.fd = fd
        self.owned = owned
        if owned { inode = SocketWatch.inode(of: fd) ?? 0 }
    }

    /// The inode behind `fd`, nil when `fd` is not open.
    static func inode(of fd: Int32) -> UInt? {
        var st = stat()
        return fstat(fd, &st) == 0 ? UInt(st.st_ino) : nil
    }

    /// False when `fd` was closed, or now names another socket than the one we opened.
    var stillOurs: Bool { SocketWatch.inode(of: fd) == inode }

    /// (Re)registers the event for `flags`, calling `cb` with `arg`.
    func arm(base: OpaquePointer, flags: Int16, arg: UnsafeMutableRawPointer,
             _ cb: @escaping @convention(c) (Int32, Int16, UnsafeMutableRawPointer?) -> Void) {
        if event == nil {
            event = event_new(base, fd, flags, cb, arg)
        } else {
            event_del(event)
            event_assign(event, base, fd, flags, cb, arg)
        }
        self.flags = flags
        event_add(event, nil)
        registered = true
    }

    /// Stops listening but keeps the event for the next arm.
    func disarm() {
        if registered { event_del(event) }
        registered = false
    }

    /// Frees the event.
    func free() {
        if let event { event_free(event) }
        event = nil
        registered = false
    }
}

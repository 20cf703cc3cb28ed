import CEvent
import Glibc
import Synchronization

/// Limits and timeouts for one evhttp listener.
public struct HTTPServerOptions: Sendable {
    /// Largest request body in bytes (default 10 MiB).
    public var maxBodySize: Int = 10_485_760
    /// Largest request head (request line plus headers) in bytes (default 64 KiB).
    public var maxHeadersSize: Int = 65_536
    /// Seconds a connection may sit idle or stall while reading a request (default 60).
    public var connectionTimeout: Double = 60
    /// Seconds a request head may take from its first byte to its last (default 10; slow-header clients).
    public var headerTimeout: Double = 10
    /// Largest single socket write in bytes, so large replies leave in few syscalls (default 1 MiB).
    public var maxSingleWrite: Int = 1 << 20
    /// Creates the defaults.
    public init() {}
}

/// One evhttp listener on one loop; the request handler runs on that loop's thread.
public final class HTTPServer {
    private let loop: EventLoop
    private let http: OpaquePointer
    private var bound: OpaquePointer?
    private let handler: (HTTPExchange) -> Void
    private let options: HTTPServerOptions
    /// The port actually bound (useful with port 0).
    public let port: Int
    /// Exchanges handed out and not yet answered.
    public private(set) var pending = 0
    /// Builds the answer that replaces evhttp's own HTML error pages (400, 413, …) for requests refused
    /// before the handler sees them; gets evhttp's status and, when Peel's framing check refused the
    /// request, why. Nil keeps evhttp's pages.
    public var errorDocument: ((_ status: Int, _ violation: String?) -> (status: Int, contentType: String, body: [UInt8]))?
    /// Open client connections by evhttp connection pointer.
    private var connections: [OpaquePointer: ClientConnection] = [:]
    private var unattached: [ClientConnection] = []
    private var attachEvent: OpaquePointer?
    private let openConnections = Atomic<Int>(0)
    /// Client connections open now (safe to read from any thread).
    public var connectionCount: Int { openConnections.load(ordering: .relaxed) }
    /// Largest request head in bytes.
    var maxHeadersSize: Int { options.maxHeadersSize }

    private static nonisolated(unsafe) let defaultContentType: UnsafeMutablePointer<CChar> = strdup("application/json")!

    /// Loop this server runs on.
    var eventLoop: EventLoop { loop }
    /// Seconds a request head may take to arrive completely.
    var headerTimeout: Double { options.headerTimeout }

    /// Binds `address` (SO_REUSEPORT when `reusePort`) and starts accepting on `loop`.
    public init(loop: EventLoop, address: HostPort, reusePort: Bool, options: HTTPServerOptions = .init(),
                handler: @escaping (HTTPExchange) -> Void) throws(PeelIOError) {
        guard let http = evhttp_new(loop.base) else { throw PeelIOError(.libevent, "evhttp_new") }
        self.loop = loop
        self.http = http
        self.handler = handler
        self.options = options
        let fd: Int32
        do { fd = try Sockets.listen(address, reusePort: reusePort) } catch { evhttp_free(http); throw error }
        port = Sockets.localPort(fd)
        // evhttp only allows a few methods by default; Peel forwards them all and refuses CONNECT itself.
        let all = EVHTTP_REQ_GET.rawValue | EVHTTP_REQ_POST.rawValue | EVHTTP_REQ_HEAD.rawValue | EVHTTP_REQ_PUT.rawValue
            | EVHTTP_REQ_DELETE.rawValue | EVHTTP_REQ_OPTIONS.rawValue | EVHTTP_REQ_TRACE.rawValue
            | EVHTTP_REQ_CONNECT.rawValue | EVHTTP_REQ_PATCH.rawValue
        evhttp_set_allowed_methods(http, UInt16(all))
        evhttp_set_max_body_size(http, options.maxBodySize)
        evhttp_set_max_headers_size(http, options.maxHeadersSize)
        var tv = timeval.peel(options.connectionTimeout)
        evhttp_set_timeout_tv(http, &tv)
        // Read and discard the rest of an oversized body before answering 413, so the client sees the
        // answer instead of a reset.
        evhttp_set_flags(http, Int32(EVHTTP_SERVER_LINGERING_CLOSE))
        // evhttp would label every reply text/html otherwise. It keeps the pointer, not a copy, so the
        // string must outlive the server (AddressSanitizer caught a temporary here).
        evhttp_set_default_content_type(http, UnsafePointer(HTTPServer.defaultContentType))
        let me = Unmanaged.passUnretained(self).toOpaque()
        attachEvent = event_new(loop.base, -1, 0, { _, _, arg in
            Unmanaged<HTTPServer>.fromOpaque(arg!).takeUnretainedValue().attachNewConnections()
        }, me)
        evhttp_set_gencb(http, { req, arg in
            guard let req, let arg else { return }
            Unmanaged<HTTPServer>.fromOpaque(arg).takeUnretainedValue().accept(req)
        }, me)
        evhttp_set_bevcb(http, { base, arg in
            let server = Unmanaged<HTTPServer>.fromOpaque(arg!).takeUnretainedValue()
            let bev = bufferevent_socket_new(base, -1, Int32(BEV_OPT_CLOSE_ON_FREE.rawValue))
            if let bev {
                bufferevent_set_max_single_write(bev, server.options.maxSingleWrite)
                server.connectionCreated(bev)
            }
            return bev
        }, me)
        guard let b = evhttp_accept_socket_with_handle(http, fd) else {
            Glibc.close(fd)
            evhttp_free(http)
            throw PeelIOError(.libevent, "evhttp_accept_socket_with_handle")
        }
        bound = b
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 400: return "Bad Request"
        case 408: return "Request Timeout"
        case 413: return "Content Too Large"
        case 417: return "Expectation Failed"
        case 431: return "Request Header Fields Too Large"
        case 501: return "Not Implemented"
        case 505: return "HTTP Version Not Supported"
        default: return "Error"
        }
    }

    // bevcb runs before evhttp has wired the connection; finish on this loop pass, before any read.
    private func connectionCreated(_ bev: OpaquePointer) {
        openConnections.add(1, ordering: .relaxed)
        unattached.append(ClientConnection(server: self, bev: bev))
        if unattached.count == 1 { event_active(attachEvent, 0, 0) }
    }

    private func attachNewConnections() {
        let fresh = unattached
        unattached.removeAll(keepingCapacity: true)
        for conn in fresh {
            if let evcon = conn.attach() { connections[evcon] = conn }
        }
    }

    func connectionClosed(_ evcon: OpaquePointer?) {
        if let evcon { connections.removeValue(forKey: evcon) }
        openConnections.subtract(1, ordering: .relaxed)
    }

    func connection(for evcon: OpaquePointer) -> ClientConnection? { connections[evcon] }

    private func accept(_ req: UnsafeMutablePointer<evhttp_request>) {
        let exchange = HTTPExchange(req: req, server: self)
        pending += 1
        handler(exchange)
    }

    func finished() { pending -= 1 }

    /// Header lines of the reply being built (one reply at a time on this loop).
    let replyBlock = HeaderBlock()
    private var dateSecond = -1
    private var date = [UInt8](repeating: 0, count: 29)
    private static let days = Array("SunMonTueWedThuFriSat".utf8)
    private static let months = Array("JanFebMarAprMayJunJulAugSepOctNovDec".utf8)

    /// Calls `body` with the loop's current time as an IMF-fixdate (RFC 9110 §5.6.7), formatted at
    /// most once per second.
    func withHTTPDate(_ body: (UnsafeRawBufferPointer) -> Void) {
        var tv = timeval()
        event_base_gettimeofday_cached(loop.base, &tv)
        if tv.tv_sec != dateSecond {
            dateSecond = tv.tv_sec
            var t = time_t(tv.tv_sec)
            var parts = tm()
            gmtime_r(&t, &parts)
            func two(_ v: Int32, _ at: Int) {
                date[at] = 0x30 + UInt8(v / 10 % 10)
                date[at + 1] = 0x30 + UInt8(v % 10)
            }
            let d = Int(parts.tm_wday) * 3
            let m = Int(parts.tm_mon) * 3
            date[0] = Self.days[d]; date[1] = Self.days[d + 1]; date[2] = Self.days[d + 2]
            date[3] = 0x2C; date[4] = 0x20
            two(parts.tm_mday, 5)
            date[7] = 0x20
            date[8] = Self.months[m]; date[9] = Self.months[m + 1]; date[10] = Self.months[m + 2]
            date[11] = 0x20
            let year = parts.tm_year + 1900
            two(year / 100, 12)
            two(year % 100, 14)
            date[16] = 0x20
            two(parts.tm_hour, 17)
            date[19] = 0x3A
            two(parts.tm_min, 20)
            date[22] = 0x3A
            two(parts.tm_sec, 23)
            date[25] = 0x20; date[26] = 0x47; date[27] = 0x4D; date[28] = 0x54
        }
        date.withUnsafeBytes(body)
    }

    /// Stops accepting new connections; open ones keep being served.
    public func stopAccepting() {
        if let bound { evhttp_del_accept_socket(http, bound) }
        bound = nil
    }

    /// Closes the listener and every connection (call once nothing is pending).
    public func close() {
        stopAccepting()
        evhttp_free(http)
        if let attachEvent { event_free(attachEvent) }
        attachEvent = nil
    }
}


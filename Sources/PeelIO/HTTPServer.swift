import CEvent
import Glibc

/// Limits and timeouts for one evhttp listener.
public struct HTTPServerOptions: Sendable {
    /// Largest request body in bytes (default 10 MiB).
    public var maxBodySize: Int = 10_485_760
    /// Largest request head (request line plus headers) in bytes (default 64 KiB).
    public var maxHeadersSize: Int = 65_536
    /// Seconds a connection may sit idle or stall while reading a request (default 60).
    public var connectionTimeout: Double = 60
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
    /// Builds the body (and its media type) that replaces evhttp's own HTML error pages (400, 413, …),
    /// which it sends for requests it refuses before the handler sees them; nil keeps evhttp's pages.
    public var errorDocument: ((Int) -> (status: Int, contentType: String, body: [UInt8]))?
    private var rewriting = false

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
        // evhttp would label every reply text/html otherwise.
        evhttp_set_default_content_type(http, "application/json")
        let me = Unmanaged.passUnretained(self).toOpaque()
        evhttp_set_gencb(http, { req, arg in
            guard let req, let arg else { return }
            Unmanaged<HTTPServer>.fromOpaque(arg).takeUnretainedValue().accept(req)
        }, me)
        evhttp_set_bevcb(http, { base, arg in
            let server = Unmanaged<HTTPServer>.fromOpaque(arg!).takeUnretainedValue()
            let bev = bufferevent_socket_new(base, -1, Int32(BEV_OPT_CLOSE_ON_FREE.rawValue))
            if let bev {
                bufferevent_set_max_single_write(bev, server.options.maxSingleWrite)
                if server.errorDocument != nil, let out = bufferevent_get_output(bev) {
                    evbuffer_add_cb(out, { buffer, info, arg in
                        guard let buffer, let info, let arg else { return }
                        Unmanaged<HTTPServer>.fromOpaque(arg).takeUnretainedValue().outputGrew(buffer, info.pointee)
                    }, arg)
                }
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

    // evhttp writes its own error page (status line, headers, then the body in one add) for requests
    // it rejects itself: a body over the limit, a malformed head. Watching the connection's output
    // buffer is the only hook; the tail check runs only for adds the size of such a page.
    private static let pageTail = Array("</BODY></HTML>\n".utf8)
    private static let pageStart = Array("<HTML><HEAD>\n<TITLE>".utf8)

    private func outputGrew(_ buffer: OpaquePointer, _ info: evbuffer_cb_info) {
        guard !rewriting, info.n_added >= 60, info.n_added <= 400, let errorDocument else { return }
        let length = evbuffer_get_length(buffer)
        let tail = Self.pageTail
        guard length >= tail.count + 40 else { return }
        var end = [UInt8](repeating: 0, count: tail.count)
        var at = evbuffer_ptr()
        guard evbuffer_ptr_set(buffer, &at, length - tail.count, EVBUFFER_PTR_SET) == 0 else { return }
        _ = end.withUnsafeMutableBytes { evbuffer_copyout_from(buffer, &at, $0.baseAddress, tail.count) }
        guard end == tail else { return }
        let bodyStart = Self.pageStart.withUnsafeBytes { evbuffer_search(buffer, $0.baseAddress, $0.count, nil) }
        guard bodyStart.pos >= 0 else { return }
        // The page's response starts at the last status line before its body.
        var headStart = -1
        var cursor = evbuffer_ptr()
        while true {
            let found: evbuffer_ptr
            if headStart < 0 {
                found = evbuffer_search(buffer, "HTTP/1.", 7, nil)
            } else {
                found = evbuffer_search(buffer, "HTTP/1.", 7, &cursor)
            }
            guard found.pos >= 0, found.pos < bodyStart.pos else { break }
            headStart = found.pos
            cursor = found
            guard evbuffer_ptr_set(buffer, &cursor, 1, EVBUFFER_PTR_ADD) == 0 else { break }
        }
        guard headStart >= 0 else { return }
        var statusBytes = [UInt8](repeating: 0, count: 3)
        var statusAt = evbuffer_ptr()
        guard evbuffer_ptr_set(buffer, &statusAt, headStart + 9, EVBUFFER_PTR_SET) == 0 else { return }
        _ = statusBytes.withUnsafeMutableBytes { evbuffer_copyout_from(buffer, &statusAt, $0.baseAddress, 3) }
        guard let status = Int(String(decoding: statusBytes, as: UTF8.self)) else { return }
        let doc = errorDocument(status)
        let head = "HTTP/1.1 \(doc.status) \(Self.reason(doc.status))\r\nContent-Type: \(doc.contentType)\r\n"
            + "Content-Length: \(doc.body.count)\r\nConnection: close\r\n\r\n"
        rewriting = true
        defer { rewriting = false }
        let kept = evbuffer_new()
        evbuffer_remove_buffer(buffer, kept, headStart)
        evbuffer_drain(buffer, evbuffer_get_length(buffer))
        evbuffer_add_buffer(buffer, kept)
        evbuffer_free(kept)
        let bytes = Array(head.utf8) + doc.body
        bytes.withUnsafeBytes { _ = evbuffer_add(buffer, $0.baseAddress, $0.count) }
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

    private func accept(_ req: UnsafeMutablePointer<evhttp_request>) {
        let exchange = HTTPExchange(req: req, loop: loop, server: self)
        pending += 1
        handler(exchange)
    }

    func finished() { pending -= 1 }

    /// Stops accepting new connections; open ones keep being served.
    public func stopAccepting() {
        if let bound { evhttp_del_accept_socket(http, bound) }
        bound = nil
    }

    /// Closes the listener and every connection (call once nothing is pending).
    public func close() {
        stopAccepting()
        evhttp_free(http)
    }
}

/// One request and the promise to answer it exactly once; owned by Swift while evhttp holds it.
public final class HTTPExchange {
    private var req: UnsafeMutablePointer<evhttp_request>?
    private let loop: EventLoop
    private unowned let server: HTTPServer
    private var closeWatch: OpaquePointer?
    private var retainedSelf: Unmanaged<HTTPExchange>?
    /// True once `respond` ran or the client vanished; a second answer is ignored.
    public private(set) var answered = false
    /// True when the client hung up before the answer.
    public private(set) var clientGone = false
    /// Runs once if the client hangs up before the answer (cancel the upstream transfer here).
    public var onClientGone: (() -> Void)?

    /// Request method as sent (GET, POST, ...).
    public let method: String
    /// Raw request target as sent (origin-form `/a/b?x=1`, or absolute-form).
    public let target: String
    /// HTTP major and minor version.
    public let version: (major: Int, minor: Int)
    /// The peer's address.
    public let clientAddress: String

    init(req: UnsafeMutablePointer<evhttp_request>, loop: EventLoop, server: HTTPServer) {
        self.req = req
        self.loop = loop
        self.server = server
        method = HTTPExchange.methodName(evhttp_request_get_command(req))
        target = evhttp_request_get_uri(req).map { String(cString: $0) } ?? ""
        version = (Int(req.pointee.major), Int(req.pointee.minor))
        clientAddress = req.pointee.remote_host.map { String(cString: $0) } ?? ""
        retainedSelf = Unmanaged.passRetained(self)
        watchClient()
    }

    private static func methodName(_ cmd: evhttp_cmd_type) -> String {
        switch cmd {
        case EVHTTP_REQ_GET: return "GET"
        case EVHTTP_REQ_POST: return "POST"
        case EVHTTP_REQ_HEAD: return "HEAD"
        case EVHTTP_REQ_PUT: return "PUT"
        case EVHTTP_REQ_DELETE: return "DELETE"
        case EVHTTP_REQ_OPTIONS: return "OPTIONS"
        case EVHTTP_REQ_TRACE: return "TRACE"
        case EVHTTP_REQ_CONNECT: return "CONNECT"
        case EVHTTP_REQ_PATCH: return "PATCH"
        default: return "UNKNOWN"
        }
    }

    /// Calls `body` with each request header, in order, as sent.
    public func forEachHeader(_ body: (String, String) -> Void) {
        guard let req, let headers = evhttp_request_get_input_headers(req) else { return }
        var node = headers.pointee.tqh_first
        while let kv = node {
            body(String(cString: kv.pointee.key), String(cString: kv.pointee.value))
            node = kv.pointee.next.tqe_next
        }
    }

    /// The first value of header `name` (case-insensitive), if present.
    public func header(_ name: String) -> String? {
        guard let req, let headers = evhttp_request_get_input_headers(req),
              let v = evhttp_find_header(headers, name) else { return nil }
        return String(cString: v)
    }

    /// Request body length in bytes (chunked bodies arrive de-chunked).
    public var bodyCount: Int {
        guard let req, let buf = evhttp_request_get_input_buffer(req) else { return 0 }
        return evbuffer_get_length(buf)
    }

    /// A contiguous view of the body, valid until the exchange is answered.
    func bodyPointer() -> (UnsafeRawPointer?, Int) {
        guard let req, let buf = evhttp_request_get_input_buffer(req) else { return (nil, 0) }
        let n = evbuffer_get_length(buf)
        if n == 0 { return (nil, 0) }
        return (UnsafeRawPointer(evbuffer_pullup(buf, -1)), n)
    }

    /// Copies the body out (for small bodies and tests).
    public func bodyBytes() -> [UInt8] {
        let (p, n) = bodyPointer()
        guard let p, n > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: p, count: n))
    }

    /// Answers the request once; later calls, and calls after the client left, do nothing.
    public func respond(status: Int, headers: [(String, String)], body: [UInt8]) {
        guard !answered else { return }
        answered = true
        stopWatchingHangUp()
        guard let req else { release(); return }
        let out = evhttp_request_get_output_headers(req)
        var hasLength = false
        for (name, value) in headers {
            if !hasLength && name.utf8.count == 14 && name.lowercased() == "content-length" { hasLength = true }
            evhttp_add_header(out, name, value)
        }
        // Always state the length ourselves: evhttp omits it on some paths (CONNECT) and formats it otherwise.
        if !hasLength && status != 204 && status != 304 && status >= 200 {
            evhttp_add_header(out, "Content-Length", String(body.count))
        }
        if !body.isEmpty, let buf = evhttp_request_get_output_buffer(req) {
            body.withUnsafeBytes { _ = evbuffer_add(buf, $0.baseAddress, $0.count) }
        }
        // Stay counted as pending until the bytes are written (or the connection dies), so a
        // draining server never frees a connection with half a reply in it.
        evhttp_request_set_on_complete_cb(req, { req, arg in
            let ex = Unmanaged<HTTPExchange>.fromOpaque(arg!).takeUnretainedValue()
            if let req, let conn = evhttp_request_get_connection(req) { evhttp_connection_set_closecb(conn, nil, nil) }
            ex.release()
        }, Unmanaged.passUnretained(self).toOpaque())
        self.req = nil
        evhttp_send_reply(req, Int32(status), nil, nil)
    }

    private func release() {
        guard let retainedSelf else { return }
        self.retainedSelf = nil
        server.finished()
        retainedSelf.release()
    }

    // evhttp stops reading while a request is being answered, so it misses a client that hangs up.
    // Watch the socket for EPOLLRDHUP (EV_CLOSED) ourselves; pipelined bytes do not trigger it.
    private func watchClient() {
        guard let req, let conn = evhttp_request_get_connection(req) else { return }
        let me = Unmanaged.passUnretained(self).toOpaque()
        evhttp_connection_set_closecb(conn, { _, arg in
            Unmanaged<HTTPExchange>.fromOpaque(arg!).takeUnretainedValue().connectionFreed()
        }, me)
        guard let bev = evhttp_connection_get_bufferevent(conn) else { return }
        let fd = bufferevent_getfd(bev)
        guard fd >= 0 else { return }
        closeWatch = event_new(loop.base, fd, Int16(EV_CLOSED), { _, _, arg in
            Unmanaged<HTTPExchange>.fromOpaque(arg!).takeUnretainedValue().hangUp()
        }, me)
        event_add(closeWatch, nil)
    }

    private func stopWatchingHangUp() {
        if let closeWatch {
            event_free(closeWatch)
            self.closeWatch = nil
        }
    }

    private func hangUp() {
        guard !answered else { return }
        clientGone = true
        let callback = onClientGone
        onClientGone = nil
        callback?()
        // Answer into the closing socket: evhttp then frees the request and the connection.
        if !answered {
            respond(status: 499, headers: [("Connection", "close")], body: [])
        }
    }

    private func connectionFreed() {
        // evhttp freed the connection: before our answer (client gone), or while writing it.
        req = nil
        if !answered {
            clientGone = true
            let callback = onClientGone
            onClientGone = nil
            callback?()
            answered = true
            stopWatchingHangUp()
        }
        release()
    }
}

import CEvent
import Glibc

/// One request and the promise to answer it exactly once; owned by Swift while evhttp holds it.
public final class HTTPExchange {
    private var req: UnsafeMutablePointer<evhttp_request>?
    private unowned let server: HTTPServer
    private var retainedSelf: Unmanaged<HTTPExchange>?
    /// The connection this request came on; it watches for the client hanging up and tells us if
    /// evhttp frees it before or while we answer. Cleared (breaking the cycle) in `release`.
    private var connection: ClientConnection?
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

    init(req: UnsafeMutablePointer<evhttp_request>, server: HTTPServer) {
        self.req = req
        self.server = server
        method = HTTPExchange.methodName(evhttp_request_get_command(req))
        target = evhttp_request_get_uri(req).map { String(cString: $0) } ?? ""
        version = (Int(req.pointee.major), Int(req.pointee.minor))
        clientAddress = req.pointee.remote_host.map { String(cString: $0) } ?? ""
        retainedSelf = Unmanaged.passRetained(self)
        if let evcon = evhttp_request_get_connection(req) {
            connection = server.connection(for: evcon)
            connection?.exchangeStarted(self)
        }
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

    /// Calls `body` with each request header field, in order, as sent, without copying it.
    public func forEachField(_ body: (HeaderField) -> Void) {
        guard let req, let headers = evhttp_request_get_input_headers(req) else { return }
        var node = headers.pointee.tqh_first
        while let kv = node {
            body(HeaderField(name: UnsafeRawBufferPointer(start: kv.pointee.key, count: strlen(kv.pointee.key)),
                             value: UnsafeRawBufferPointer(start: kv.pointee.value, count: strlen(kv.pointee.value))))
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
        respond(status: status, body: body) { out in
            for (name, value) in headers { out.add(name, value) }
        }
    }

    /// Answers once with `body[range]` (all of it when nil) and the fields `headers` adds; later calls,
    /// and calls after the client left, do nothing. Large bodies are handed to evhttp without a copy.
    public func respond(status: Int, body: [UInt8], range: Range<Int>? = nil, headers: (inout ReplyHeaders) -> Void) {
        guard !answered else { return }
        answered = true
        connection?.replyStarted(self)
        guard let req else { release(); return }
        let range = range ?? 0..<body.count
        var out = ReplyHeaders(list: evhttp_request_get_output_headers(req), block: server.replyBlock)
        headers(&out)
        // Always state the length ourselves: evhttp omits it on some paths (CONNECT) and formats it otherwise.
        if !out.hasLength && status != 204 && status != 304 && status >= 200 {
            out.add("Content-Length", String(range.count))
        }
        server.withHTTPDate { out.finish(date: $0) }
        if !range.isEmpty, let buf = evhttp_request_get_output_buffer(req) {
            if range.count >= ReplyBody.referenceThreshold {
                ReplyBody.add(body, range, to: buf)
            } else {
                body.withUnsafeBytes { _ = evbuffer_add(buf, $0.baseAddress! + range.lowerBound, range.count) }
            }
        }
        // Stay counted as pending until the bytes are written (or the connection dies), so a
        // draining server never frees a connection with half a reply in it.
        evhttp_request_set_on_complete_cb(req, { _, arg in
            Unmanaged<HTTPExchange>.fromOpaque(arg!).takeUnretainedValue().release()
        }, Unmanaged.passUnretained(self).toOpaque())
        self.req = nil
        evhttp_send_reply(req, Int32(status), nil, nil)
    }

    private func release() {
        guard let retainedSelf else { return }
        self.retainedSelf = nil
        connection?.exchangeEnded(self)
        connection = nil
        server.finished()
        retainedSelf.release()
    }

    /// The client hung up before the answer (the connection's EV_CLOSED watch saw it): cancel the
    /// upstream call and answer into the closing socket, so evhttp frees the request and the connection.
    func clientHungUp() {
        guard !answered else { return }
        clientGone = true
        let callback = onClientGone
        onClientGone = nil
        callback?()
        if !answered {
            respond(status: 499, headers: [("Connection", "close")], body: [])
        }
    }

    func connectionFreed() {
        // evhttp freed the connection: before our answer (client gone), or while writing it.
        req = nil
        if !answered {
            clientGone = true
            let callback = onClientGone
            onClientGone = nil
            callback?()
            answered = true
        }
        release()
    }
}


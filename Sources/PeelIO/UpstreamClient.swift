import CCurl
import CEvent
import CPeelShims
import Glibc

/// Settings for one worker's upstream client.
public struct UpstreamOptions: Sendable {
    /// Whole exchange limit in seconds (default 30, the seed's timeoutInterval).
    public var timeout: Double = 30
    /// TCP+TLS connect limit in seconds (default 5).
    public var connectTimeout: Double = 5
    /// Largest upstream body in bytes after decoding (default 64 MiB).
    public var maxResponseBody: Int = 67_108_864
    /// Extra CA bundle for https upstreams (default: system store).
    public var caFile: String? = nil
    /// Receive buffer per transfer in bytes (default 256 KiB: large bodies arrive in few reads).
    public var bufferSize: Int = 256 * 1024
    /// Idle keep-alive connections kept per worker (default 1024).
    public var maxIdleConnections: Int = 1024
    /// Transfers in flight per worker before new ones are refused (default 10000).
    public var maxInFlight: Int = 10_000
    /// `scheme://host[:port]` that `send(method:path:query:…)` talks to (default none: `send(url:…)` only).
    /// Each pooled handle keeps it pre-parsed, so a call only changes the path and query.
    public var origin: String? = nil
    /// Creates the defaults.
    public init() {}
}

/// Why an upstream exchange produced no usable answer; the gateway maps these to the error table.
public enum UpstreamFailure: Error, Sendable, Equatable {
    /// Name resolution failed.
    case dns(String)
    /// Connection refused or no route.
    case refused(String)
    /// The TCP+TLS connect did not finish within the connect timeout.
    case connectTimeout(String)
    /// The whole exchange did not finish within the timeout.
    case timeout(String)
    /// The connection was reset or closed before a whole answer.
    case reset(String)
    /// TLS handshake or certificate failure.
    case tls(String)
    /// The answer broke HTTP (bad chunking, bad encoding, garbage status line).
    case protocolError(String)
    /// The body exceeded `maxResponseBody`.
    case tooLarge
    /// Too many transfers already in flight on this worker.
    case overloaded
    /// Anything else curl reported.
    case other(String)

    /// True for failures that say the upstream host is unreachable (feeds passive health checks).
    public var isTransportFailure: Bool {
        switch self {
        case .dns, .refused, .connectTimeout, .reset: return true
        default: return false
        }
    }

    /// A short label for metrics and logs.
    public var reason: String {
        switch self {
        case .dns: return "dns"
        case .refused: return "refused"
        case .connectTimeout: return "connect_timeout"
        case .timeout: return "timeout"
        case .reset: return "reset"
        case .tls: return "tls"
        case .protocolError: return "protocol"
        case .tooLarge: return "too_large"
        case .overloaded: return "overloaded"
        case .other: return "other"
        }
    }

    /// curl's words for the failure.
    public var message: String {
        switch self {
        case .dns(let m), .refused(let m), .connectTimeout(let m), .timeout(let m), .reset(let m), .tls(let m),
             .protocolError(let m), .other(let m): return m
        case .tooLarge: return "upstream body too large"
        case .overloaded: return "too many upstream transfers in flight"
        }
    }
}

/// A whole upstream answer.
public struct UpstreamResponse: Sendable {
    /// HTTP status of the final response.
    public var status: Int
    /// Response header fields as received (final response only, no trailers).
    public var headers: ResponseHeaders
    /// Body bytes, decoded from any Content-Encoding.
    public var body: [UInt8]
    /// Seconds from start to the last byte.
    public var duration: Double
}

/// What to send upstream as the body.
public enum UpstreamBody {
    /// No body.
    case none
    /// The client's body, read in place until the exchange is answered.
    case exchange(HTTPExchange)
    /// Bytes owned by the transfer.
    case bytes([UInt8])
}

/// A transfer in flight; `cancel()` stops it without calling its completion.
public final class UpstreamTransfer {
    fileprivate var handle: EasyHandle?
    fileprivate var headerList: UnsafeMutablePointer<curl_slist>?
    fileprivate var body: [UInt8] = []
    fileprivate var ownedRequestBody: [UInt8] = []
    fileprivate var requestBodyOwner: HTTPExchange?
    fileprivate var tooLarge = false
    fileprivate var limit = 0
    fileprivate var completion: ((Result<UpstreamResponse, UpstreamFailure>) -> Void)?
    fileprivate weak var client: UpstreamClient?
    fileprivate var started: Double = 0

    /// Stops the transfer; its completion never runs.
    public func cancel() {
        completion = nil
        client?.abort(self)
    }
}

/// One worker's libcurl multi handle driven by that worker's event loop (hiperfifo's shape):
/// per-loop state here, per-transfer state via CURLOPT_PRIVATE, per-socket state in `sockets`.
public final class UpstreamClient {
    private let loop: EventLoop
    private let multi: UnsafeMutableRawPointer
    private let options: UpstreamOptions
    private var timer: OpaquePointer?
    // Runs curl's "timeout now" on this loop pass instead of through a 0 ms timer (no extra epoll_wait).
    private var kick: OpaquePointer?
    private var freeHandles: [EasyHandle] = []
    private var sockets: [Int32: SocketWatch] = [:]
    private let scratch = LineScratch()
    /// Transfers in flight.
    public private(set) var inFlight = 0

    /// Creates the multi handle and hooks it to `loop`.
    public init(loop: EventLoop, options: UpstreamOptions) throws(PeelIOError) {
        UpstreamClient.globalInit()
        guard let m = curl_multi_init() else { throw PeelIOError(.curlMulti(0), "curl_multi_init") }
        self.loop = loop
        multi = m
        self.options = options
        let me = Unmanaged.passUnretained(self).toOpaque()
        timer = event_new(loop.base, -1, 0, { _, _, arg in
            Unmanaged<UpstreamClient>.fromOpaque(arg!).takeUnretainedValue().timerFired()
        }, me)
        kick = event_new(loop.base, -1, 0, { _, _, arg in
            Unmanaged<UpstreamClient>.fromOpaque(arg!).takeUnretainedValue().timerFired()
        }, me)
        try check(peel_multi_setopt_socket_cb(m, { easy, s, what, userp, socketp in
            Unmanaged<UpstreamClient>.fromOpaque(userp!).takeUnretainedValue().socketCallback(s, what)
            return 0
        }), "CURLMOPT_SOCKETFUNCTION")
        try check(peel_multi_setopt_ptr(m, CURLMOPT_SOCKETDATA, me), "CURLMOPT_SOCKETDATA")
        try check(peel_multi_setopt_timer_cb(m, { _, timeoutMs, userp in
            Unmanaged<UpstreamClient>.fromOpaque(userp!).takeUnretainedValue().timerCallback(timeoutMs)
            return 0
        }), "CURLMOPT_TIMERFUNCTION")
        try check(peel_multi_setopt_ptr(m, CURLMOPT_TIMERDATA, me), "CURLMOPT_TIMERDATA")
        // A connection cache smaller than the concurrency makes curl open a connection per request.
        try check(peel_multi_setopt_long(m, CURLMOPT_MAXCONNECTS, options.maxIdleConnections), "CURLMOPT_MAXCONNECTS")
    }

    deinit {
        for h in freeHandles { h.cleanup() }
        curl_multi_cleanup(multi)
        for (_, w) in sockets { w.free() }
        if let timer { event_free(timer) }
        if let kick { event_free(kick) }
    }

    private static let initOnce: Void = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()
    private static func globalInit() { _ = initOnce }

    private func check(_ code: CURLMcode, _ site: String) throws(PeelIOError) {
        if code != CURLM_OK { throw PeelIOError(.curlMulti(code.rawValue), site) }
    }

    // MARK: starting and finishing transfers

    /// Starts `method url` with `headers` ("Name: value" lines); `completion` runs once on this loop.
    @discardableResult
    public func send(method: String, url: String, headers: [String], body: UpstreamBody,
                     completion: @escaping (Result<UpstreamResponse, UpstreamFailure>) -> Void) -> UpstreamTransfer {
        var list = UpstreamHeaderList(scratch: scratch)
        for line in headers { list.append(line: line) }
        return start(method: method, headers: list.list, body: body, completion: completion) { h in
            peel_easy_setopt_ptr(h.easy, CURLOPT_CURLU, nil)
            peel_easy_setopt_ptr(h.easy, CURLOPT_REQUEST_TARGET, nil)
            peel_easy_setopt_ptr(h.easy, CURLOPT_URL, url)
            return true
        }
    }

    /// Starts `method` on `options.origin` + `path` (already validated, sent as is) and `query`
    /// (without `?`) with the header lines `headers` adds; `completion` runs once on this loop.
    @discardableResult
    public func send(method: String, path: String, query: String?, body: UpstreamBody,
                     headers: (inout UpstreamHeaderList) -> Void,
                     completion: @escaping (Result<UpstreamResponse, UpstreamFailure>) -> Void) -> UpstreamTransfer {
        var list = UpstreamHeaderList(scratch: scratch)
        headers(&list)
        return start(method: method, headers: list.list, body: body, completion: completion) { h in
            // The handle's URL is the origin, parsed once; the path and query go in as the request
            // target, copied into the request line as they are. (Setting them as URL parts would
            // make curl lowercase %-escapes: `%C3%A9` → `%c3%a9`, which breaks signed queries.)
            guard let url = h.url else { return false }
            peel_easy_setopt_ptr(h.easy, CURLOPT_CURLU, UnsafeRawPointer(url))
            return scratch.target(path: path, query: query) { peel_easy_setopt_ptr(h.easy, CURLOPT_REQUEST_TARGET, $0) } == CURLE_OK
        }
    }

    private func start(method: String, headers: UnsafeMutablePointer<curl_slist>?, body: UpstreamBody,
                       completion: @escaping (Result<UpstreamResponse, UpstreamFailure>) -> Void,
                       target: (EasyHandle) -> Bool) -> UpstreamTransfer {
        let t = UpstreamTransfer()
        t.client = self
        t.limit = options.maxResponseBody
        var list = headers
        guard inFlight < options.maxInFlight, let h = takeHandle() else {
            curl_slist_free_all(list)
            loop.defer { completion(.failure(.overloaded)) }
            return t
        }
        guard target(h) else {
            curl_slist_free_all(list)
            freeHandles.append(h)
            loop.defer { completion(.failure(.other("the request target was refused by curl"))) }
            return t
        }
        let easy = h.easy
        t.handle = h
        t.completion = completion
        h.errorBuffer.pointee = 0
        h.head.reset()
        t.started = loop.now
        let ptr = Unmanaged.passRetained(t).toOpaque()
        peel_easy_setopt_ptr(easy, CURLOPT_PRIVATE, ptr)
        peel_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, ptr)
        peel_easy_setopt_ptr(easy, CURLOPT_HEADERDATA, ptr)

        var bodyPtr: UnsafeRawPointer? = nil
        var bodyLen = 0
        switch body {
        case .none: break
        case .exchange(let ex):
            (bodyPtr, bodyLen) = ex.bodyPointer()
            t.requestBodyOwner = ex
        case .bytes(let b):
            t.ownedRequestBody = b
            bodyLen = b.count
            bodyPtr = t.ownedRequestBody.withUnsafeBytes { UnsafeRawPointer($0.baseAddress) }
        }
        peel_easy_setopt_long(easy, CURLOPT_NOBODY, 0)
        switch method {
        case "GET" where bodyLen == 0:
            peel_easy_setopt_long(easy, CURLOPT_HTTPGET, 1)
            peel_easy_setopt_ptr(easy, CURLOPT_CUSTOMREQUEST, nil)
        case "HEAD":
            peel_easy_setopt_long(easy, CURLOPT_NOBODY, 1)
            peel_easy_setopt_ptr(easy, CURLOPT_CUSTOMREQUEST, nil)
        default:
            if bodyLen > 0 || method == "POST" || method == "PUT" || method == "PATCH" {
                // curl adds `Expect: 100-continue` to large bodies; the client already sent the whole body.
                list = curl_slist_append(list, "Expect:")
                peel_easy_setopt_long(easy, CURLOPT_POST, 1)
                peel_easy_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bodyLen))
                // POSTFIELDS must not be NULL or curl would read the body from stdin-like callbacks.
                peel_easy_setopt_ptr(easy, CURLOPT_POSTFIELDS, bodyPtr ?? UnsafeRawPointer(emptyBody))
            } else {
                peel_easy_setopt_long(easy, CURLOPT_HTTPGET, 1)
            }
            peel_easy_setopt_ptr(easy, CURLOPT_CUSTOMREQUEST, method == "POST" ? nil : method)
        }
        t.headerList = list
        peel_easy_setopt_ptr(easy, CURLOPT_HTTPHEADER, list)
        inFlight += 1
        let rc = curl_multi_add_handle(multi, easy)
        if rc != CURLM_OK {
            inFlight -= 1
            finish(t, handle: h, result: .failure(.other(String(cString: curl_multi_strerror(rc)))), removeFromMulti: false)
        }
        return t
    }

    fileprivate func abort(_ t: UpstreamTransfer) {
        guard let h = t.handle else { return }
        curl_multi_remove_handle(multi, h.easy)
        inFlight -= 1
        finish(t, handle: h, result: nil, removeFromMulti: false)
    }

    private func finish(_ t: UpstreamTransfer, handle h: EasyHandle, result: Result<UpstreamResponse, UpstreamFailure>?,
                        removeFromMulti: Bool) {
        let easy = h.easy
        if removeFromMulti { curl_multi_remove_handle(multi, easy) }
        t.handle = nil
        if let list = t.headerList { curl_slist_free_all(list) }
        t.headerList = nil
        peel_easy_setopt_ptr(easy, CURLOPT_HTTPHEADER, nil)
        peel_easy_setopt_ptr(easy, CURLOPT_PRIVATE, nil)
        peel_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, nil)
        peel_easy_setopt_ptr(easy, CURLOPT_HEADERDATA, nil)
        t.requestBodyOwner = nil
        t.ownedRequestBody = []
        freeHandles.append(h)
        let completion = t.completion
        t.completion = nil
        Unmanaged.passUnretained(t).release()
        if let result, let completion { completion(result) }
    }

    private func takeHandle() -> EasyHandle? {
        if let h = freeHandles.popLast() { return h }
        guard let easy = curl_easy_init() else { return nil }
        let me = Unmanaged.passUnretained(self).toOpaque()
        let h = EasyHandle(easy: easy)
        if let origin = options.origin {
            h.url = curl_url()
            if let url = h.url, curl_url_set(url, CURLUPART_URL, origin, 0) != CURLUE_OK {
                h.cleanup()
                return nil
            }
        }
        peel_easy_setopt_ptr(easy, CURLOPT_ERRORBUFFER, h.errorBuffer)
        // Signals must not be used in a threaded server; DNS timeouts come from the threaded resolver.
        peel_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        // An empty proxy disables http_proxy and friends: only the configured upstream is contacted.
        peel_easy_setopt_ptr(easy, CURLOPT_PROXY, "")
        // With no proxy, no_proxy means nothing; set, curl stops reading it from the environment per call.
        peel_easy_setopt_ptr(easy, CURLOPT_NOPROXY, "")
        peel_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, Int(options.timeout * 1000))
        peel_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(options.connectTimeout * 1000))
        peel_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1))
        peel_easy_setopt_long(easy, CURLOPT_TCP_NODELAY, 1)
        // Forward the path exactly as validated; curl would otherwise squash dot-segments itself.
        peel_easy_setopt_long(easy, CURLOPT_PATH_AS_IS, 1)
        peel_easy_setopt_long(easy, CURLOPT_BUFFERSIZE, options.bufferSize)
        peel_easy_setopt_off(easy, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(options.maxResponseBody))
        // Ask for any encoding curl can decode; envelopes are judged on decoded bytes.
        peel_easy_setopt_ptr(easy, CURLOPT_ACCEPT_ENCODING, "")
        if let ca = options.caFile { peel_easy_setopt_ptr(easy, CURLOPT_CAINFO, ca) }
        peel_easy_setopt_write_cb(easy, CURLOPT_WRITEFUNCTION) { data, size, count, userdata in
            let t = Unmanaged<UpstreamTransfer>.fromOpaque(userdata!).takeUnretainedValue()
            let n = size * count
            if t.body.count + n > t.limit {
                t.tooLarge = true
                return 0
            }
            if t.body.capacity == 0, let easy = t.handle?.easy {
                // Size the buffer once from Content-Length (a hint: decoding may change it) instead of
                // growing and copying it chunk by chunk.
                var length: curl_off_t = -1
                peel_easy_getinfo_off(easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length)
                if length > 0 { t.body.reserveCapacity(min(Int(length), t.limit)) }
            }
            t.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: n))
            return n
        }
        peel_easy_setopt_write_cb(easy, CURLOPT_HEADERFUNCTION) { data, size, count, userdata in
            let t = Unmanaged<UpstreamTransfer>.fromOpaque(userdata!).takeUnretainedValue()
            let n = size * count
            t.handle?.head.addLine(UnsafeRawBufferPointer(start: data, count: n))
            return n
        }
        peel_easy_setopt_open_cb(easy) { clientp, purpose, address in
            guard let address else { return -1 }
            let a = address.pointee
            let fd = socket(a.family, a.socktype | Int32(SOCK_CLOEXEC.rawValue), a.protocol)
            if fd >= 0 {
                Unmanaged<UpstreamClient>.fromOpaque(clientp!).takeUnretainedValue().socketOpened(fd)
            }
            return fd
        }
        peel_easy_setopt_ptr(easy, CURLOPT_OPENSOCKETDATA, me)
        peel_easy_setopt_close_cb(easy) { clientp, fd in
            Unmanaged<UpstreamClient>.fromOpaque(clientp!).takeUnretainedValue().socketClosing(fd)
            return close(fd)
        }
        peel_easy_setopt_ptr(easy, CURLOPT_CLOSESOCKETDATA, me)
        return h
    }

    // MARK: curl callbacks

    private func socketOpened(_ fd: Int32) {
        // Only sockets we opened may keep their event registered while curl is not watching them:
        // the close callback tells us when they go. Others (the resolver's) are freed on REMOVE.
        sockets[fd]?.free()
        sockets[fd] = SocketWatch(fd: fd, owned: true)
    }

    private func socketClosing(_ fd: Int32) {
        sockets.removeValue(forKey: fd)?.free()
    }

    // CURLMOPT_SOCKETFUNCTION
    private func socketCallback(_ fd: Int32, _ what: Int32) {
        if what == CURL_POLL_REMOVE {
            guard let w = sockets[fd] else { return }
            if w.owned {
                // Parked: stays registered for reads so the next request on this connection costs no epoll_ctl.
                w.parked = true
            } else {
                sockets.removeValue(forKey: fd)?.free()
            }
            return
        }
        let w: SocketWatch
        if let existing = sockets[fd] { w = existing } else {
            w = SocketWatch(fd: fd, owned: false)
            sockets[fd] = w
        }
        w.parked = false
        var flags: Int16 = Int16(EV_PERSIST)
        if what & CURL_POLL_IN != 0 { flags |= Int16(EV_READ) }
        if what & CURL_POLL_OUT != 0 { flags |= Int16(EV_WRITE) }
        if w.event != nil && w.flags == flags && w.registered { return }
        w.arm(base: loop.base, flags: flags, arg: Unmanaged.passUnretained(self).toOpaque()) { fd, events, arg in
            Unmanaged<UpstreamClient>.fromOpaque(arg!).takeUnretainedValue().socketReady(fd, events)
        }
    }

    private func socketReady(_ fd: Int32, _ events: Int16) {
        if let w = sockets[fd], w.parked {
            // The server closed or wrote to an idle connection: stop listening; curl checks it on reuse.
            w.disarm()
            return
        }
        var action: Int32 = 0
        if events & Int16(EV_READ) != 0 { action |= CURL_CSELECT_IN }
        if events & Int16(EV_WRITE) != 0 { action |= CURL_CSELECT_OUT }
        var running: Int32 = 0
        curl_multi_socket_action(multi, fd, action, &running)
        drainDone()
    }

    // CURLMOPT_TIMERFUNCTION: only (re)arms the single-shot timer; curl is never called from here.
    private func timerCallback(_ timeoutMs: Int) {
        if timeoutMs < 0 {
            event_del(timer)
        } else if timeoutMs == 0 {
            // "Now" (a handle was just added): later on this loop pass, batched with its neighbours.
            event_del(timer)
            event_active(kick, 0, 0)
        } else {
            var tv = timeval(tv_sec: timeoutMs / 1000, tv_usec: (timeoutMs % 1000) * 1000)
            event_add(timer, &tv)
        }
    }

    private func timerFired() {
        var running: Int32 = 0
        curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running)
        drainDone()
    }

    // Drains CURLMSG_DONE after every socket action, as hiperfifo does.
    private func drainDone() {
        var left: Int32 = 0
        while let msg = curl_multi_info_read(multi, &left) {
            guard msg.pointee.msg == CURLMSG_DONE, let easy = msg.pointee.easy_handle else { continue }
            let code = msg.pointee.data.result
            var priv: UnsafeMutableRawPointer? = nil
            peel_easy_getinfo_ptr(easy, CURLINFO_PRIVATE, &priv)
            curl_multi_remove_handle(multi, easy)
            inFlight -= 1
            guard let priv else { continue }
            let t = Unmanaged<UpstreamTransfer>.fromOpaque(priv).takeUnretainedValue()
            guard let h = t.handle else { continue }
            let result: Result<UpstreamResponse, UpstreamFailure>
            if code == CURLE_OK {
                var status = 0
                peel_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
                let body = t.body
                t.body = []
                result = .success(UpstreamResponse(status: status, headers: h.head.take(), body: body,
                                                   duration: loop.now - t.started))
            } else {
                result = .failure(classify(code, handle: h, tooLarge: t.tooLarge))
            }
            finish(t, handle: h, result: result, removeFromMulti: false)
        }
    }

    // The one place CURLcodes become Peel's failure kinds.
    private func classify(_ code: CURLcode, handle h: EasyHandle, tooLarge: Bool) -> UpstreamFailure {
        let easy = h.easy
        var text = String(cString: curl_easy_strerror(code))
        if h.errorBuffer.pointee != 0 { text = String(cString: h.errorBuffer) }
        switch code {
        case CURLE_WRITE_ERROR where tooLarge, CURLE_FILESIZE_EXCEEDED:
            return .tooLarge
        case CURLE_COULDNT_RESOLVE_HOST:
            return .dns(text)
        case CURLE_COULDNT_CONNECT:
            return .refused(text)
        case CURLE_OPERATION_TIMEDOUT:
            var connectTime: curl_off_t = 0
            peel_easy_getinfo_off(easy, CURLINFO_CONNECT_TIME_T, &connectTime)
            return connectTime == 0 ? .connectTimeout(text) : .timeout(text)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
             CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
             CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED,
             CURLE_SSL_SHUTDOWN_FAILED, CURLE_SSL_CRL_BADFILE, CURLE_USE_SSL_FAILED:
            return .tls(text)
        case CURLE_RECV_ERROR where text.contains("chunk"):
            // curl reports broken chunked framing as a receive error; the upstream lied, it did not vanish.
            return .protocolError(text)
        case CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE:
            return .reset(text)
        case CURLE_BAD_CONTENT_ENCODING, CURLE_WEIRD_SERVER_REPLY, CURLE_UNSUPPORTED_PROTOCOL, CURLE_HTTP2,
             CURLE_RANGE_ERROR:
            return .protocolError(text)
        default:
            return .other(text)
        }
    }
}

// A zero-length body still needs a non-NULL POSTFIELDS pointer; a static C string is immutable.
private nonisolated(unsafe) let emptyBody: UnsafePointer<CChar> = {
    let p = UnsafeMutablePointer<CChar>.allocate(capacity: 1)
    p.pointee = 0
    return UnsafePointer(p)
}()

/// The request header lines of one upstream call, built straight into curl's list (no String per line).
public struct UpstreamHeaderList {
    fileprivate var list: UnsafeMutablePointer<curl_slist>?
    fileprivate let scratch: LineScratch

    fileprivate init(scratch: LineScratch) { self.scratch = scratch }

    /// Adds a client's field as `Name: value`.
    public mutating func append(_ field: HeaderField) {
        list = scratch.line(field.name, field.value) { curl_slist_append(list, $0) } ?? list
    }

    /// Adds `Name: value`; `Name:` alone stops curl from sending a field it would add itself.
    public mutating func append(_ name: String, _ value: String) {
        var name = name
        var value = value
        name.withUTF8 { n in
            value.withUTF8 { v in
                list = scratch.line(UnsafeRawBufferPointer(n), UnsafeRawBufferPointer(v)) { curl_slist_append(list, $0) } ?? list
            }
        }
    }

    /// Adds one whole line as curl takes it.
    public mutating func append(line: String) {
        list = curl_slist_append(list, line) ?? list
    }
}

/// A reusable buffer in which header lines are assembled before curl copies them.
final class LineScratch {
    private var buffer = UnsafeMutablePointer<CChar>.allocate(capacity: 256)
    private var capacity = 256

    deinit { buffer.deallocate() }

    /// Writes `path[?query]` NUL-terminated and hands it to `use`. Bytes above 0x7F in the path are
    /// %-encoded (lowercase hex) and the query is left as it is, as curl did with whole URLs.
    func target<R>(path: String, query: String?, _ use: (UnsafePointer<CChar>) -> R) -> R {
        var path = path
        var rest = query ?? ""
        return path.withUTF8 { p in
            rest.withUTF8 { q in
                reserve(p.count * 3 + q.count + 2)
                let raw = UnsafeMutableRawPointer(buffer)
                var at = 0
                for b in p {
                    if b < 0x80 {
                        raw.storeBytes(of: b, toByteOffset: at, as: UInt8.self)
                        at += 1
                    } else {
                        raw.storeBytes(of: 0x25, toByteOffset: at, as: UInt8.self)
                        raw.storeBytes(of: Self.hex[Int(b >> 4)], toByteOffset: at + 1, as: UInt8.self)
                        raw.storeBytes(of: Self.hex[Int(b & 15)], toByteOffset: at + 2, as: UInt8.self)
                        at += 3
                    }
                }
                if query != nil {
                    raw.storeBytes(of: 0x3F, toByteOffset: at, as: UInt8.self)
                    if let base = q.baseAddress { (raw + at + 1).copyMemory(from: base, byteCount: q.count) }
                    at += 1 + q.count
                }
                raw.storeBytes(of: 0, toByteOffset: at, as: UInt8.self)
                return use(buffer)
            }
        }
    }

    private static let hex = Array("0123456789abcdef".utf8)

    private func reserve(_ n: Int) {
        if n > capacity {
            buffer.deallocate()
            capacity = max(n, capacity * 2)
            buffer = UnsafeMutablePointer<CChar>.allocate(capacity: capacity)
        }
    }

    /// Writes `name: value` (or `name:` for an empty value) NUL-terminated and hands it to `use`.
    func line<R>(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer,
                 _ use: (UnsafePointer<CChar>) -> R) -> R {
        reserve(name.count + value.count + 3)
        let raw = UnsafeMutableRawPointer(buffer)
        if let p = name.baseAddress { raw.copyMemory(from: p, byteCount: name.count) }
        var at = name.count
        raw.storeBytes(of: 0x3A, toByteOffset: at, as: UInt8.self)
        at += 1
        if value.count > 0 {
            raw.storeBytes(of: 0x20, toByteOffset: at, as: UInt8.self)
            at += 1
            raw.advanced(by: at).copyMemory(from: value.baseAddress!, byteCount: value.count)
            at += value.count
        }
        raw.storeBytes(of: 0, toByteOffset: at, as: UInt8.self)
        return use(buffer)
    }
}

/// One pooled easy handle and what it owns: curl's error text buffer and the pre-parsed origin URL.
final class EasyHandle {
    let easy: UnsafeMutableRawPointer
    // CURLOPT_ERRORBUFFER storage; curl writes its detailed reason here.
    let errorBuffer: UnsafeMutablePointer<CChar>
    var url: OpaquePointer?
    // The response's header lines, captured by CURLOPT_HEADERFUNCTION.
    let head = HeaderCollector()

    init(easy: UnsafeMutableRawPointer) {
        self.easy = easy
        errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.pointee = 0
    }

    func cleanup() {
        curl_easy_cleanup(easy)
        if let url { curl_url_cleanup(url) }
        url = nil
        errorBuffer.deallocate()
    }
}

/// One socket curl asked us to watch; found by fd.
final class SocketWatch {
    let fd: Int32
    let owned: Bool
    var event: OpaquePointer?
    var flags: Int16 = 0
    var registered = false
    var parked = false

    init(fd: Int32, owned: Bool) {
        self.fd = fd
        self.owned = owned
    }

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

    func disarm() {
        if registered { event_del(event) }
        registered = false
    }

    func free() {
        if let event { event_free(event) }
        event = nil
        registered = false
    }
}

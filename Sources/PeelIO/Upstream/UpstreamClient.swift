import CCurl
import CEvent
import CPeelShims
import Glibc

/// One worker's libcurl multi handle driven by that worker's event loop (hiperfifo's shape):
/// per-loop state here, per-transfer state via CURLOPT_PRIVATE, per-socket state in `sockets`.
public final class UpstreamClient {
    /// The loop every callback and completion runs on.
    public let loop: EventLoop
    /// The curl multi handle.
    let multi: UnsafeMutableRawPointer
    /// Settings shared by every handle; `apply` replaces them.
    private(set) var options: UpstreamOptions
    /// The memory budget answers are held under; nil when there is none.
    public var budget: MemoryBudget? { options.budget }
    /// Bumped by `apply`: handles set up under an older one are cleaned up instead of pooled.
    private(set) var generation = 0
    /// The origins the latest reload configured (`keepConnections`); nil until one does.
    private var configuredOrigins: Set<String>?
    /// The single-shot timer CURLMOPT_TIMERFUNCTION arms.
    private var timer: OpaquePointer?
    /// Runs curl's "timeout now" on this loop pass instead of through a 0 ms timer (no extra epoll_wait).
    private var kick: OpaquePointer?
    /// Idle easy handles, each already set up (the transfer pool).
    var freeHandles: [EasyHandle] = []
    /// The sockets curl asked us to watch, by fd.
    private var sockets: [Int32: SocketWatch] = [:]
    /// Owned sockets curl stopped watching before they ever connected, checked once curl returns.
    private var unsettled: [SocketWatch] = []
    /// Where header lines and request targets are assembled.
    let scratch = LineScratch()
    /// Transfers in flight.
    public internal(set) var inFlight = 0
    /// The latest transfer's serial (`UpstreamTransfer.serial`).
    var lastSerial: UInt64 = 0
    /// Transfers their sinks paused (back-pressure), until they resume or end.
    var pausedBySink: [ObjectIdentifier: UpstreamTransfer] = [:]
    /// curl failures that had no transfer to fail (socket actions, removals, handle resets).
    public private(set) var driverErrors = 0
    /// The latest of those, naming the call and with curl's words.
    public private(set) var lastDriverError: PeelIOError?

    /// Creates the multi handle and hooks it to `loop`.
    public init(loop: EventLoop, options: UpstreamOptions) throws(PeelIOError) {
        try curlCheck(UpstreamClient.globalInit, "curl_global_init")
        // curl_multi_init returns NULL only when it cannot allocate.
        guard let m = curl_multi_init() else { throw PeelIOError(.curlMulti(CURLM_OUT_OF_MEMORY.rawValue), "curl_multi_init") }
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
        try curlCheck(peel_multi_setopt_socket_cb(m, { easy, s, what, userp, socketp in
            Unmanaged<UpstreamClient>.fromOpaque(userp!).takeUnretainedValue().socketCallback(s, what, easy: easy)
            return 0
        }), "curl_multi_setopt(CURLMOPT_SOCKETFUNCTION)")
        try curlCheck(peel_multi_setopt_ptr(m, CURLMOPT_SOCKETDATA, me), "curl_multi_setopt(CURLMOPT_SOCKETDATA)")
        try curlCheck(peel_multi_setopt_timer_cb(m, { _, timeoutMs, userp in
            Unmanaged<UpstreamClient>.fromOpaque(userp!).takeUnretainedValue().timerCallback(timeoutMs)
            return 0
        }), "curl_multi_setopt(CURLMOPT_TIMERFUNCTION)")
        try curlCheck(peel_multi_setopt_ptr(m, CURLMOPT_TIMERDATA, me), "curl_multi_setopt(CURLMOPT_TIMERDATA)")
        // A connection cache smaller than the concurrency makes curl open a connection per request.
        try curlCheck(peel_multi_setopt_long(m, CURLMOPT_MAXCONNECTS, options.maxIdleConnections),
                      "curl_multi_setopt(CURLMOPT_MAXCONNECTS)")
    }

    deinit {
        for h in freeHandles { h.cleanup() }
        // Its only failures (a bad multi handle, a call from inside a callback) cannot happen in
        // deinit, and no one is left to hear of one.
        _ = curl_multi_cleanup(multi)
        for (_, w) in sockets { w.free() }
        if let timer { event_free(timer) }
        if let kick { event_free(kick) }
    }

    /// New settings for transfers started from now on (a configuration reload): idle handles are
    /// dropped, and handles of running transfers are dropped when those finish.
    public func apply(_ new: UpstreamOptions) throws(PeelIOError) {
        try curlCheck(peel_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, new.maxIdleConnections),
                      "curl_multi_setopt(CURLMOPT_MAXCONNECTS)")
        options = new
        generation += 1
        for h in freeHandles { h.cleanup() }
        freeHandles = []
    }

    /// Content codings the linked libcurl decodes and Peel asks upstreams for: gzip and deflate with
    /// zlib, br with brotli (zstd and others are never asked for: Peel does not offer them).
    public static let decodableCodings: [String] = {
        guard let info = curl_version_info(CURLVERSION_TENTH) else { return [] }
        let features = info.pointee.features
        var out: [String] = []
        if features & (1 << 3) != 0 { out += ["gzip", "deflate"] }  // CURL_VERSION_LIBZ
        if features & (1 << 23) != 0 { out.append("br") }  // CURL_VERSION_BROTLI
        return out
    }()

    /// curl_global_init's result, run once per process.
    private static let globalInit: CURLcode = curl_global_init(Int(CURL_GLOBAL_DEFAULT))

    /// Keeps a failure no transfer can carry: counted, the latest kept with its text.
    func record(_ error: PeelIOError) {
        driverErrors += 1
        lastDriverError = error
    }

    /// curl_multi_remove_handle, checked: false (and recorded) when curl keeps the handle.
    func removeFromMulti(_ easy: UnsafeMutableRawPointer) -> Bool {
        do throws(PeelIOError) {
            try curlCheck(curl_multi_remove_handle(multi, easy), "curl_multi_remove_handle")
            settle()
            return true
        } catch {
            settle()
            record(error)
            return false
        }
    }

    /// Frees the watches of sockets curl closed behind our back. libcurl 7.88 closes a socket whose
    /// connect timed out without CURLOPT_CLOSESOCKETFUNCTION (only the CURL_POLL_REMOVE before it
    /// comes): its watch stayed parked and registered, the next client connection accepted on the
    /// same number inherited the event (libevent's epoll MOD fails with ENOENT and is re-done as an
    /// ADD with both flags), and the parked watch's callback shut that client's socket down with no
    /// answer. Run after every call into curl that can close sockets, on the loop thread,
    /// so nothing on this loop can reuse the number first; another worker's thread can, which is why
    /// the socket is told by its inode, not by whether the number is open.
    func settle() {
        guard !unsettled.isEmpty else { return }
        let watches = unsettled
        unsettled.removeAll(keepingCapacity: true)
        for w in watches where sockets[w.fd] === w && !w.stillOurs {
            sockets.removeValue(forKey: w.fd)
            w.free()
        }
    }

    /// curl_multi_socket_action, checked, then drainDone. A failure (7.88: bad handle, out of memory,
    /// a recursive call; an unknown socket is ignored and returns CURLM_OK) concerns the call, not one
    /// transfer: each transfer still ends with its own CURLMSG_DONE, at the latest when its
    /// CURLOPT_TIMEOUT_MS expires through the timer callback, so it is recorded rather than failing
    /// every transfer on the worker.
    private func socketAction(_ fd: Int32, _ action: Int32) {
        var running: Int32 = 0
        do throws(PeelIOError) {
            try curlCheck(curl_multi_socket_action(multi, fd, action, &running), "curl_multi_socket_action")
        } catch {
            record(error)
        }
        settle()
        drainDone()
    }

    // MARK: curl callbacks

    /// CURLOPT_OPENSOCKETFUNCTION: a socket curl will connect.
    func socketOpened(_ fd: Int32) {
        // Only sockets we opened may keep their event registered while curl is not watching them:
        // the close callback tells us when they go. Others (the resolver's) are freed on REMOVE.
        sockets[fd]?.free()
        sockets[fd] = SocketWatch(fd: fd, owned: true)
    }

    /// CURLOPT_CLOSESOCKETFUNCTION: a socket about to be closed.
    func socketClosing(_ fd: Int32) {
        sockets.removeValue(forKey: fd)?.free()
    }

    /// The transfer paused by its sink whose connection is `fd`, matched by local port (curl names
    /// no socket for a transfer before it is done); nil when none is. Only when a parked socket
    /// turns readable, so never on a call's path.
    private func pausedTransfer(on fd: Int32) -> UpstreamTransfer? {
        guard !pausedBySink.isEmpty else { return nil }
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { return nil }
        let port: Int
        switch Int32(address.ss_family) {
        case AF_INET: port = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) } }
        case AF_INET6: port = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) } }
        default: return nil
        }
        for t in pausedBySink.values {
            guard let h = t.handle else { continue }
            var local = 0
            if peel_easy_getinfo_long(h.easy, CURLINFO_LOCAL_PORT, &local) == CURLE_OK && local == port { return t }
        }
        return nil
    }

    /// CURLMOPT_SOCKETFUNCTION: what curl wants to hear about `fd`.
    private func socketCallback(_ fd: Int32, _ what: Int32, easy: UnsafeMutableRawPointer?) {
        if what == CURL_POLL_REMOVE {
            guard let w = sockets[fd] else { return }
            if w.owned {
                // Parked: stays registered for reads so the next request on this connection costs no epoll_ctl.
                w.parked = true
                // A connection that never connected is not kept by curl: it is closing it, maybe
                // without our close callback (see settle).
                if !w.connected { unsettled.append(w) }
                noteOwner(w, easy)
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
        if w.owned { noteOwner(w, easy) }
        var flags: Int16 = Int16(EV_PERSIST)
        if what & CURL_POLL_IN != 0 { flags |= Int16(EV_READ); w.connected = true }
        if what & CURL_POLL_OUT != 0 { flags |= Int16(EV_WRITE) }
        if w.event != nil && w.flags == flags && w.registered { return }
        w.arm(base: loop.base, flags: flags, arg: Unmanaged.passUnretained(self).toOpaque()) { fd, events, arg in
            Unmanaged<UpstreamClient>.fromOpaque(arg!).takeUnretainedValue().socketReady(fd, events)
        }
    }

    /// Remembers which transfer `easy` runs (CURLOPT_PRIVATE) as the owner of `w`'s connection, and
    /// the endpoint it talks to.
    private func noteOwner(_ w: SocketWatch, _ easy: UnsafeMutableRawPointer?) {
        guard let easy else { return }
        var priv: UnsafeMutableRawPointer? = nil
        guard peel_easy_getinfo_ptr(easy, CURLINFO_PRIVATE, &priv) == CURLE_OK, let priv else { return }
        let t = Unmanaged<UpstreamTransfer>.fromOpaque(priv).takeUnretainedValue()
        w.own(t)
        // Compared first: a connection's endpoint changes only across reloads, so this stores (and
        // retains) once per connection and generation, not per call.
        if let e = t.handle?.endpoint, w.endpoint !== e { w.endpoint = e }
    }

    /// A reload configured calls to `origins` (`scheme://host[:port]`) only; `previous` are the
    /// endpoints calls planned before it go to. Idle connections to any other origin close now,
    /// and those of calls still running once the calls finish (`unhook`: a call of the previous
    /// configuration may still fail over to a removed endpoint), so a backend drained by taking it
    /// out of the configuration is left alone. libcurl 7.88 has no call that closes one host's
    /// connections in a multi handle's cache, so each is shut down both ways, as `socketReady`
    /// does for an idle connection that receives bytes: the upstream sees the close at once, and
    /// curl, finding the socket hung up, closes its descriptor at its next check of the cache.
    /// Loop thread, never inside a curl callback.
    public func keepConnections(to origins: Set<String>, previous: [UpstreamEndpoint]) {
        configuredOrigins = origins
        for e in previous where !origins.contains(e.origin) { e.retire() }
        closeIdleToRemoved()
    }

    /// Whether `endpoint` is no longer among the configured origins.
    func isRemoved(_ endpoint: UpstreamEndpoint?) -> Bool {
        guard let endpoint, let configuredOrigins else { return false }
        return !configuredOrigins.contains(endpoint.origin)
    }

    /// Shuts down every idle pooled connection whose latest transfer went to a removed origin.
    func closeIdleToRemoved() {
        for w in sockets.values where w.owned && w.parked && !w.ownerRuns && isRemoved(w.endpoint) {
            w.endpoint = nil
            w.disarm()
            // Closed by curl behind our back and the number reused: not ours to shut.
            guard w.stillOurs else { continue }
            if shutdown(w.fd, Int32(SHUT_RDWR)) != 0 && errno != ENOTCONN {
                record(PeelIOError(.system(errno), "shutdown(idle connection to a removed upstream)"))
            }
        }
    }

    /// A watched socket is ready: tell curl, then collect finished transfers.
    private func socketReady(_ fd: Int32, _ events: Int16) {
        // One lookup for every case below (each its own lookup cost a hash per socket event).
        if let w = sockets[fd], w.parked {
            if !w.stillOurs {
                // Closed by curl without our close callback and the number reused (see settle): not
                // ours to touch.
                sockets.removeValue(forKey: fd)
                w.free()
                return
            }
            if w.ownerRuns {
                // Not idle: its transfer still runs (paused by its sink, back-pressure). The bytes are
                // the rest of that answer; they wait in the kernel until the transfer resumes and curl
                // watches the socket again. (Issue 19: a flag taken when curl stopped watching could be
                // stale by the time bytes came; the transfer's own state now is what counts.)
                w.disarm()
                return
            }
            if let t = pausedTransfer(on: fd) {
                // A reused connection whose answer came in the very call that sent the request, and
                // whose transfer its sink paused there: curl never asked for the socket again, so it
                // is still parked under the transfer before. The bytes are the rest of the paused
                // answer (taken for an idle connection's, they cut a streamed 20 MB answer in 1 of 5
                // first calls).
                w.own(t)
                w.disarm()
                return
            }
            // The server closed or wrote to an idle connection. Bytes nobody asked for (a forged
            // answer after a chunked one, a late 408) would be read as the next request's answer:
            // libcurl 7.88 reuses a connection with input pending (only POLLHUP/POLLERR make it
            // "dead"). Shutting both directions raises POLLHUP, so curl closes it instead of reusing it.
            w.disarm()
            // ENOTCONN: the peer's close already ended it, which curl sees as well.
            if shutdown(fd, Int32(SHUT_RDWR)) != 0 && errno != ENOTCONN {
                record(PeelIOError(.system(errno), "shutdown(idle upstream connection)"))
            }
            return
        }
        var action: Int32 = 0
        if events & Int16(EV_READ) != 0 { action |= CURL_CSELECT_IN }
        if events & Int16(EV_WRITE) != 0 { action |= CURL_CSELECT_OUT }
        socketAction(fd, action)
    }

    /// CURLMOPT_TIMERFUNCTION: only (re)arms the single-shot timer; curl is never called from here.
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

    /// curl's timeout expired: let it act, then collect finished transfers.
    private func timerFired() {
        socketAction(CURL_SOCKET_TIMEOUT, 0)
    }

    /// Drains CURLMSG_DONE after every socket action, as hiperfifo does.
    private func drainDone() {
        var left: Int32 = 0
        while let msg = curl_multi_info_read(multi, &left) {
            guard msg.pointee.msg == CURLMSG_DONE, let easy = msg.pointee.easy_handle else { continue }
            let code = msg.pointee.data.result
            var priv: UnsafeMutableRawPointer? = nil
            peel_easy_getinfo_ptr(easy, CURLINFO_PRIVATE, &priv)
            let removed = removeFromMulti(easy)
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
                let facts = h.head.facts
                let headers = h.head.take()
                var response = UpstreamResponse(status: status, headers: headers,
                                                facts: facts ?? ResponseFacts(status: status, headers: headers), body: body,
                                                duration: loop.now - t.started, streamed: t.sink != nil)
                // The body's share of the budget (and of its client's) goes with the body: it is
                // held until the answer made from it is written, not only until the transfer ends,
                // since a client that does not read keeps it in memory that long.
                // A spooled body holds only its gathering buffer, freed now with the writer.
                if t.spoolWriter != nil { t.releaseBudget() } else { response.hold = t.takeHold() }
                switch t.spoolWriter?.finish() {
                case nil:
                    result = .success(response)
                case .success(let file)?:
                    response.spooled = file
                    result = .success(response)
                case .failure(.write(let e))?:
                    // The last gathered bytes could not be written: the answer is not whole on disk.
                    result = .failure(.spoolWrite(e.description))
                case .failure(.full)?:
                    result = .failure(.overSpoolBudget)
                case .failure(.clientShare)?:
                    result = .failure(.overSpoolClientShare)
                }
            } else {
                result = .failure(classify(code, handle: h, transfer: t))
            }
            finish(t, handle: h, result: result, stillInMulti: !removed)
        }
    }

    /// The one place CURLcodes become Peel's failure kinds.
    private func classify(_ code: CURLcode, handle h: EasyHandle, transfer t: UpstreamTransfer) -> UpstreamFailure {
        let easy = h.easy
        if code == CURLE_ABORTED_BY_CALLBACK && t.state == .stopped(.resendRefused) { return t.refusedResend }
        if code == CURLE_WRITE_ERROR, let why = h.head.violation { return .protocolError(why) }
        if code == CURLE_WRITE_ERROR && t.state == .stopped(.overBudget) { return .overBudget }
        if code == CURLE_WRITE_ERROR && t.state == .stopped(.overClientShare) { return .overClientShare }
        if code == CURLE_WRITE_ERROR && t.state == .stopped(.overSpoolBudget) { return .overSpoolBudget }
        if code == CURLE_WRITE_ERROR && t.state == .stopped(.overSpoolClientShare) { return .overSpoolClientShare }
        if code == CURLE_WRITE_ERROR, case .stopped(.spoolWrite(let e)) = t.state { return .spoolWrite(e.description) }
        let tooLarge = t.state == .stopped(.tooLarge)
        var text = String(cString: curl_easy_strerror(code))
        if h.errorBuffer.pointee != 0 { text = String(cString: h.errorBuffer) }
        if h.localSocketError != 0 {
            return .localResources("cannot open an upstream socket: " + String(cString: strerror(h.localSocketError)))
        }
        switch code {
        case CURLE_WRITE_ERROR where tooLarge, CURLE_FILESIZE_EXCEEDED:
            return .tooLarge
        case CURLE_COULDNT_RESOLVE_HOST:
            return .dns(text)
        case CURLE_COULDNT_CONNECT:
            // Out of local ports toward the one upstream (slow calls piling up)
            // or out of kernel buffers is Peel's own shortage, not evidence against the upstream.
            var osErrno = 0
            peel_easy_getinfo_long(easy, CURLINFO_OS_ERRNO, &osErrno)
            if osErrno == Int(EADDRNOTAVAIL) || osErrno == Int(ENOBUFS) || osErrno == Int(ENOMEM) {
                return .localResources("cannot connect to the upstream: " + String(cString: strerror(Int32(osErrno))))
            }
            return .refused(text)
        case CURLE_OPERATION_TIMEDOUT:
            var connectTime: curl_off_t = 0
            peel_easy_getinfo_off(easy, CURLINFO_CONNECT_TIME_T, &connectTime)
            // libcurl resets the connect time per transfer and sets it only for a new connection:
            // on a reused one it stays 0, so a request that went out timed out waiting for its
            // answer, never connecting (a slow endpoint must not count as an unreachable one).
            return connectTime == 0 && !t.requestWentOut ? .connectTimeout(text) : .timeout(text)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
             CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
             CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED,
             CURLE_SSL_SHUTDOWN_FAILED, CURLE_SSL_CRL_BADFILE, CURLE_USE_SSL_FAILED:
            return .tls(text)
        case CURLE_RECV_ERROR where text.contains("chunk"):
            // curl reports broken chunked framing as a receive error; the upstream lied, it did not vanish.
            return .protocolError(text)
        case CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE:
            // Once a status line arrived the upstream is there and answering: an answer that breaks
            // after it (fewer bytes than its Content-Length, chunked framing cut short, a reset
            // mid-body: an incomplete message, RFC 9112 §8) is a bad answer, not a lost upstream, and
            // must not count towards `fall`.
            return h.head.statusSeen ? .protocolError(text) : .reset(text)
        case CURLE_BAD_CONTENT_ENCODING, CURLE_WEIRD_SERVER_REPLY, CURLE_UNSUPPORTED_PROTOCOL, CURLE_HTTP2,
             CURLE_RANGE_ERROR:
            return .protocolError(text)
        default:
            return .other(text)
        }
    }
}

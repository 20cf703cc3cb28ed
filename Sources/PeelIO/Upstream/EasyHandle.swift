import CCurl
import CPeelShims
// The SOCK_* constants reach Swift through libevent's headers: Glibc's module leaves them out.
import CEvent
import Glibc

/// One pooled easy handle and what it owns: curl's error text buffer, and the endpoint its URL is set to.
final class EasyHandle {
    /// The curl easy handle.
    let easy: UnsafeMutableRawPointer
    /// CURLOPT_ERRORBUFFER storage; curl writes its detailed reason here.
    let errorBuffer: UnsafeMutablePointer<CChar>
    /// The endpoint whose URL the handle is set to (CURLOPT_CURLU); nil for a whole URL or none.
    /// Held, not identified: curl keeps pointing at its CURLU, and a freed endpoint's address can be
    /// a new one's.
    var endpoint: UpstreamEndpoint?
    /// The response's header lines, captured by CURLOPT_HEADERFUNCTION.
    let head = HeaderCollector()
    /// The request's header lines (CURLOPT_HTTPHEADER), reused from transfer to transfer.
    let headers = HeaderBlock()
    /// The serial of the transfer this handle runs; 0 while it is pooled.
    var running: UInt64 = 0
    /// The client's `generation` when this handle was set up.
    var generation = 0
    /// errno of a socket() that failed for this transfer (EMFILE, ENFILE, ENOBUFS, ENOMEM), else 0.
    var localSocketError: Int32 = 0
    /// CURLOPT_TIMEOUT_MS and CURLOPT_CONNECTTIMEOUT_MS as set on this handle (0 once a streamed
    /// body lifted the timeout): each transfer sets them only when it wants others.
    var timeoutMs = 0
    var connectTimeoutMs = 0
    /// CURLOPT_CAINFO as set on this handle, and libcurl's built-in bundle to go back to (nil when
    /// it has none).
    var caFile: String?
    var defaultCAFile: String?
    /// Content decoding was switched off for a body kept in its coding; the next transfer sets it again.
    var decodingOff = false
    /// The CURLOPT_ACCEPT_ENCODING value set on this handle ("" is every coding curl decodes).
    var acceptEncoding = ""
    /// The client whose loop watches this handle's sockets (it owns the pool this handle lives in).
    unowned(unsafe) var client: UpstreamClient?

    /// Wraps `easy` with a fresh error buffer; no options set.
    init(easy: UnsafeMutableRawPointer) {
        self.easy = easy
        errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.pointee = 0
    }

    /// Frees the handle, its URL and its error buffer.
    func cleanup() {
        curl_easy_cleanup(easy)
        endpoint = nil
        errorBuffer.deallocate()
    }

    /// A new handle with the options every transfer of `client` shares, set once; callbacks reach
    /// the transfer through CURLOPT_PRIVATE/WRITEDATA/HEADERDATA and `client` through the socket data.
    /// Throws the first call curl refuses, by name; nothing is left allocated then.
    static func make(for client: UpstreamClient, options: UpstreamOptions) throws(PeelIOError) -> EasyHandle {
        guard let easy = curl_easy_init() else { throw curlError(CURLE_FAILED_INIT, "curl_easy_init") }
        let h = EasyHandle(easy: easy)
        h.generation = client.generation
        do throws(PeelIOError) {
            try h.setUp(for: client, options: options)
        } catch {
            h.cleanup()
            throw error
        }
        return h
    }

    /// Sets what every transfer on this handle shares; throws the first option curl refuses.
    private func setUp(for client: UpstreamClient, options: UpstreamOptions) throws(PeelIOError) {
        let me = Unmanaged.passUnretained(client).toOpaque()
        try set(CURLOPT_ERRORBUFFER, UnsafeRawPointer(errorBuffer))
        // Signals must not be used in a threaded server; DNS timeouts come from the threaded resolver.
        try set(CURLOPT_NOSIGNAL, 1)
        // An empty proxy disables http_proxy and friends: only the configured upstream is contacted.
        try set(CURLOPT_PROXY, "")
        // With no proxy, no_proxy means nothing; set, curl stops reading it from the environment per call.
        try set(CURLOPT_NOPROXY, "")
        timeoutMs = Int(options.timeout * 1000)
        connectTimeoutMs = Int(options.connectTimeout * 1000)
        try set(CURLOPT_TIMEOUT_MS, timeoutMs)
        try set(CURLOPT_CONNECTTIMEOUT_MS, connectTimeoutMs)
        try set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1))
        try set(CURLOPT_TCP_NODELAY, 1)
        // Forward the path exactly as validated; curl would otherwise squash dot-segments itself.
        try set(CURLOPT_PATH_AS_IS, 1)
        try set(CURLOPT_BUFFERSIZE, options.bufferSize)
        // No CURLOPT_MAXFILESIZE: a streamed passthrough body has no size limit; buffered bodies are
        // bounded by the write callback below.
        // Decoding on: envelopes are judged on decoded bytes. Each transfer names the codings it asks
        // for (the client's own, see UpstreamClient.start); "" until then is every coding curl decodes.
        try set(CURLOPT_ACCEPT_ENCODING, "")
        var builtIn: UnsafeMutableRawPointer? = nil
        if peel_easy_getinfo_ptr(easy, CURLINFO_CAINFO, &builtIn) == CURLE_OK, let builtIn {
            defaultCAFile = String(cString: builtIn.assumingMemoryBound(to: CChar.self))
        }
        caFile = defaultCAFile
        if let ca = options.caFile {
            try set(CURLOPT_CAINFO, ca)
            caFile = ca
        }
        let writeCB = peel_easy_setopt_write_cb(easy, CURLOPT_WRITEFUNCTION) { data, size, count, userdata in
            let t = Unmanaged<UpstreamTransfer>.fromOpaque(userdata!).takeUnretainedValue()
            let n = size * count
            if !t.state.bodyStarted {
                if t.sink != nil, let h = t.handle { t.startFlowing(h) } else { t.state = .buffering }
            }
            if let sink = t.sink {
                switch sink(UnsafeRawBufferPointer(start: data, count: n)) {
                case .taken:
                    if t.idleTimer != nil { t.lastRead = monotonicSeconds() }
                    return n
                case .pause:
                    t.state = .streaming(paused: true)
                    t.client?.pausedBySink[ObjectIdentifier(t)] = t
                    return 0x1000_0001  // CURL_WRITEFUNC_PAUSE
                case .abort: return 0
                }
            }
            if case .stopped = t.state { return 0 }
            return t.keep(UnsafeRawBufferPointer(start: data, count: n)) ? n : 0
        }
        try curlCheck(writeCB, setoptSite(CURLOPT_WRITEFUNCTION))
        let headerCB = peel_easy_setopt_write_cb(easy, CURLOPT_HEADERFUNCTION) { data, size, count, userdata in
            let t = Unmanaged<UpstreamTransfer>.fromOpaque(userdata!).takeUnretainedValue()
            let n = size * count
            // 0 aborts the transfer (CURLE_WRITE_ERROR) before a byte of the answer is relayed, and
            // curl closes a connection whose transfer failed instead of pooling it.
            guard let h = t.handle else { return n }
            guard h.head.addLine(UnsafeRawBufferPointer(start: data, count: n)) else { return 0 }
            if t.state == .awaitingHead && h.head.finalHeadComplete {
                t.state = .headWhole
                if let onHead = t.onHead, let facts = h.head.facts {
                    t.onHead = nil
                    let plan = onHead(facts, ResponseHeadView(collector: h.head))
                    if plan.stop {
                        t.state = .stopped(.answeredWithHead)
                        return 0
                    }
                    // Set before the first body byte: curl 7.88 reads the switch on every body write.
                    if plan.keepsCoding, peel_easy_setopt_long(h.easy, CURLOPT_HTTP_CONTENT_DECODING, 0) == CURLE_OK {
                        h.decodingOff = true
                        t.codingKept = true
                    }
                    if let sink = plan.sink {
                        t.sink = sink
                        if plan.flowsFromHead { t.startFlowing(h) }
                    }
                }
            }
            return n
        }
        try curlCheck(headerCB, setoptSite(CURLOPT_HEADERFUNCTION))
        let prereqCB = peel_easy_setopt_prereq_cb(easy) { userdata, _, _, _, _ in
            // No transfer (a pooled handle): nothing to count.
            guard let userdata else { return Int32(CURL_PREREQFUNC_OK) }
            let t = Unmanaged<UpstreamTransfer>.fromOpaque(userdata).takeUnretainedValue()
            return t.mayBeSent() ? Int32(CURL_PREREQFUNC_OK) : Int32(CURL_PREREQFUNC_ABORT)
        }
        try curlCheck(prereqCB, setoptSite(CURLOPT_PREREQFUNCTION))
        // CURLOPT_READFUNCTION: a spooled request body, read from its file (a body in memory goes
        // as CURLOPT_POSTFIELDS and never gets here).
        let readCB = peel_easy_setopt_write_cb(easy, CURLOPT_READFUNCTION) { data, size, count, userdata in
            guard let userdata, let data else { return 0x1000_0000 }  // CURL_READFUNC_ABORT
            let t = Unmanaged<UpstreamTransfer>.fromOpaque(userdata).takeUnretainedValue()
            return t.readRequestBody(into: UnsafeMutableRawBufferPointer(start: data, count: size * count))
        }
        try curlCheck(readCB, setoptSite(CURLOPT_READFUNCTION))
        // CURLOPT_SEEKFUNCTION: curl rewinds the body to send it again (a reused connection that
        // turned out dead, a redirect or an authentication round).
        let seekCB = peel_easy_setopt_seek_cb(easy) { userdata, offset, origin in
            guard let userdata else { return 2 }  // CURL_SEEKFUNC_CANTSEEK
            let t = Unmanaged<UpstreamTransfer>.fromOpaque(userdata).takeUnretainedValue()
            return t.seekRequestBody(to: Int(offset), origin: origin) ? 0 : 2
        }
        try curlCheck(seekCB, setoptSite(CURLOPT_SEEKFUNCTION))
        self.client = client
        let openCB = peel_easy_setopt_open_cb(easy) { handlep, purpose, address in
            guard let address else { return -1 }
            let h = Unmanaged<EasyHandle>.fromOpaque(handlep!).takeUnretainedValue()
            let a = address.pointee
            let fd = socket(a.family, a.socktype | Int32(SOCK_CLOEXEC.rawValue), a.protocol)
            if fd >= 0 {
                h.client?.socketOpened(fd)
            } else {
                // curl reports this as "could not connect", which would count against the upstream.
                h.localSocketError = errno
            }
            return fd
        }
        try curlCheck(openCB, setoptSite(CURLOPT_OPENSOCKETFUNCTION))
        try set(CURLOPT_OPENSOCKETDATA, UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque()))
        let closeCB = peel_easy_setopt_close_cb(easy) { clientp, fd in
            Unmanaged<UpstreamClient>.fromOpaque(clientp!).takeUnretainedValue().socketClosing(fd)
            return close(fd)
        }
        try curlCheck(closeCB, setoptSite(CURLOPT_CLOSESOCKETFUNCTION))
        try set(CURLOPT_CLOSESOCKETDATA, UnsafeRawPointer(me))
    }

    // MARK: checked curl_easy_setopt

    /// Sets a long option; throws the option's name if curl refuses the value.
    func set(_ option: CURLoption, _ value: Int) throws(PeelIOError) {
        try curlCheck(peel_easy_setopt_long(easy, option, value), setoptSite(option))
    }

    /// Sets a pointer option (nil clears it); throws the option's name if curl refuses it.
    func set(_ option: CURLoption, _ value: UnsafeRawPointer?) throws(PeelIOError) {
        try curlCheck(peel_easy_setopt_ptr(easy, option, value), setoptSite(option))
    }

    /// Sets a string option (curl copies it); throws the option's name if curl refuses it.
    func set(_ option: CURLoption, _ value: String) throws(PeelIOError) {
        try curlCheck(peel_easy_setopt_ptr(easy, option, value), setoptSite(option))
    }

    /// Sets a curl_off_t option; throws the option's name if curl refuses the value.
    func set(_ option: CURLoption, offset value: curl_off_t) throws(PeelIOError) {
        try curlCheck(peel_easy_setopt_off(easy, option, value), setoptSite(option))
    }
}

// MARK: the one named error for curl statuses

/// A curl_easy_* status as a PeelIOError: `site`, then curl's words for `code`.
func curlError(_ code: CURLcode, _ site: String) -> PeelIOError {
    PeelIOError(.curl(Int32(truncatingIfNeeded: code.rawValue)), site)
}

/// hiperfifo's `mcode_or_die(where, code)` without the dying: anything but CURLE_OK throws a
/// PeelIOError naming the call (`site` is only built then).
func curlCheck(_ code: CURLcode, _ site: @autoclosure () -> String) throws(PeelIOError) {
    if code != CURLE_OK { throw curlError(code, site()) }
}

/// The same for curl_multi_* statuses: anything but CURLM_OK throws a PeelIOError naming the call.
func curlCheck(_ code: CURLMcode, _ site: @autoclosure () -> String) throws(PeelIOError) {
    if code != CURLM_OK { throw PeelIOError(.curlMulti(code.rawValue), site()) }
}

/// `curl_easy_setopt(CURLOPT_NAME)` for `option`, named from curl's own option table.
func setoptSite(_ option: CURLoption) -> String {
    guard let entry = curl_easy_option_by_id(option), let name = entry.pointee.name else {
        return "curl_easy_setopt(option \(option.rawValue))"
    }
    return "curl_easy_setopt(CURLOPT_\(String(cString: name)))"
}

extension UpstreamTransfer {
    /// The body flows to the sink from now on: a stream lasts as long as it lasts (a download to a
    /// slow client, server-sent events), so the whole-exchange timeout no longer applies; an
    /// upstream that goes silent mid-stream is cut after the idle timeout instead (one was held 40 s
    /// with a 5 s timeout). Inside curl's callbacks: only setopt, which curl allows there.
    func startFlowing(_ h: EasyHandle) {
        state = .streaming(paused: false)
        _ = peel_easy_setopt_long(h.easy, CURLOPT_TIMEOUT_MS, 0)
        h.timeoutMs = 0
        if let c = client { watchIdle(loop: c.loop, seconds: idleSeconds) }
    }
}

import CCurl
import CEvent
import CPeelShims
import Glibc

/// How a tunnel's opening ended.
public enum TunnelOpening {
    /// The upstream switched protocols (101): its fields go to the client, then bytes flow.
    case switched(TunnelUpstream)
    /// The upstream answered something else, whole: judged like any answer.
    case answered(UpstreamResponse)
    /// No usable answer; `wentOut` once any byte of the request was sent.
    case failed(UpstreamFailure, wentOut: Bool)
}

/// Opens the upstream end of a tunnel: connects with curl in its connect-only role (TCP, and TLS
/// for https endpoints with the call's CA file), driven by a multi handle of its own on the loop,
/// then writes the upgrade request head itself and reads the answer's head (RFC 6455 §4.1, RFC
/// 9110 §7.8). A 101 hands the connection over; any other answer is read whole (by its length,
/// chunked, or to the close) and handed back to be judged. Loop-thread only.
public final class TunnelDial {
    private let loop: EventLoop
    private var multi: UnsafeMutableRawPointer?
    private var easy: UnsafeMutableRawPointer?
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
    /// The events curl asked for while connecting, by socket; freed at the end, never in their callbacks.
    private var curlWatches: [Int32: OpaquePointer] = [:]
    private var retiredWatches: [OpaquePointer] = []
    private var curlTimer: LoopTimer?
    private var deadline: LoopTimer?
    private var fd: Int32 = -1
    private var readWatch: ReadyWatch?
    private var writeWatch: ReadyWatch?
    private let head: [UInt8]
    private var sent = 0
    private var reading: UpgradeAnswer
    private let tls: Bool
    /// The memory budget a non-101 answer is held under while it is read (and until the answer
    /// made from it is written), charged to its client past `MemoryBudget.answerAllowance`.
    private let budget: MemoryBudget?
    private let client: String?
    private var charged = 0
    private var chargedToClient = false
    private let started: Double
    private var completion: ((TunnelOpening) -> Void)?
    /// Keeps the dial alive while curl and libevent hold unretained pointers to it.
    private var keepAlive: TunnelDial?
    /// Set once the connection went to a tunnel: curl's multi is the tunnel's from then on.
    private var handedOver = false
    /// curl callbacks that reached the dial after the hand-over (none may: the dial may be gone).
    private(set) var strayCallbacks = 0

    /// Starts opening a tunnel for `request` (an origin-form target) asking for `upgrade`; the
    /// completion runs once, on the loop, unless `cancel` ran first. A non-101 answer's bytes are
    /// charged to `defaults.budget`, and to `clientAddress`'s share past the allowance.
    public init(loop: EventLoop, request: UpstreamRequest, upgrade: String, defaults: UpstreamOptions,
                clientAddress: String? = nil, completion: @escaping (TunnelOpening) -> Void) {
        self.loop = loop
        errorBuffer.pointee = 0
        started = loop.now
        reading = UpgradeAnswer(maxBody: request.limits?.maxResponseBody ?? defaults.maxResponseBody)
        budget = defaults.budget
        client = clientAddress.map(IPNetwork.clientGroup)
        let (origin, text) = Self.requestHead(request, upgrade: upgrade)
        tls = origin.lowercased().hasPrefix("https:")
        head = Array(text.utf8)
        self.completion = completion
        keepAlive = self
        let connectTimeout = request.limits?.connectTimeout ?? defaults.connectTimeout
        let timeout = request.limits?.timeout ?? defaults.timeout
        let ca = request.limits?.caFile ?? defaults.caFile
        if let failure = connect(origin: origin, connectTimeout: connectTimeout, caFile: ca) {
            loop.defer { [self] in fail(failure, wentOut: false) }
            return
        }
        // The whole opening (connect, request, answer) within the call's timeout.
        deadline = LoopTimer(loop: loop) { [weak self] in self?.timedOut() }
        deadline?.arm(seconds: timeout)
    }

    deinit { errorBuffer.deallocate() }

    /// Abandons the opening (the client left, or shutdown): nothing more is reported.
    public func cancel() {
        completion = nil
        finish()
    }

    // MARK: connecting

    private func connect(origin: String, connectTimeout: Double, caFile: String?) -> UpstreamFailure? {
        guard let m = curl_multi_init() else { return .localResources("curl_multi_init failed") }
        multi = m
        guard let e = curl_easy_init() else { return .localResources("curl_easy_init failed") }
        easy = e
        let me = Unmanaged.passUnretained(self).toOpaque()
        var rc = CURLE_OK
        func set(_ o: CURLoption, _ v: Int) { if rc == CURLE_OK { rc = peel_easy_setopt_long(e, o, v) } }
        func set(_ o: CURLoption, _ v: String) { if rc == CURLE_OK { rc = peel_easy_setopt_ptr(e, o, v) } }
        if rc == CURLE_OK { rc = peel_easy_setopt_ptr(e, CURLOPT_ERRORBUFFER, UnsafeRawPointer(errorBuffer)) }
        set(CURLOPT_URL, origin)
        // Connect (and the TLS handshake) only: the request head is Peel's to write.
        set(CURLOPT_CONNECT_ONLY, 1)
        set(CURLOPT_NOSIGNAL, 1)
        // As for calls: no proxy from the environment, only the configured upstream.
        set(CURLOPT_PROXY, "")
        set(CURLOPT_NOPROXY, "")
        set(CURLOPT_CONNECTTIMEOUT_MS, Int(connectTimeout * 1000))
        // ALPN offers http/1.1 only: the upgrade is an HTTP/1.1 mechanism (RFC 9113 §8.6 forbids it).
        set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1))
        set(CURLOPT_TCP_NODELAY, 1)
        // The tunnel takes a read shorter than this as the socket's last bytes (`Tunnel.pump`).
        set(CURLOPT_BUFFERSIZE, TunnelUpstream.readCap)
        if let caFile { set(CURLOPT_CAINFO, caFile) }
        if rc != CURLE_OK { return .other("curl_easy_setopt: " + String(cString: curl_easy_strerror(rc))) }
        // A nil userp: the dial handed the multi over (`detachFromCurl`) and is no longer curl's to call.
        var mrc = peel_multi_setopt_socket_cb(m, { _, s, what, userp, _ in
            if let userp { Unmanaged<TunnelDial>.fromOpaque(userp).takeUnretainedValue().curlWatch(s, what) }
            return 0
        })
        if mrc == CURLM_OK { mrc = peel_multi_setopt_ptr(m, CURLMOPT_SOCKETDATA, me) }
        if mrc == CURLM_OK {
            mrc = peel_multi_setopt_timer_cb(m, { _, ms, userp in
                if let userp { Unmanaged<TunnelDial>.fromOpaque(userp).takeUnretainedValue().curlTimerSet(ms) }
                return 0
            })
        }
        if mrc == CURLM_OK { mrc = peel_multi_setopt_ptr(m, CURLMOPT_TIMERDATA, me) }
        if mrc == CURLM_OK { mrc = curl_multi_add_handle(m, e) }
        if mrc != CURLM_OK { return .other("curl_multi: " + String(cString: curl_multi_strerror(mrc))) }
        return nil
    }

    /// CURLMOPT_SOCKETFUNCTION: watch `s` as curl asks (never calls curl).
    private func curlWatch(_ s: Int32, _ what: Int32) {
        guard !handedOver else { strayCallbacks += 1; return }
        if let old = curlWatches.removeValue(forKey: s) {
            event_del(old)
            retiredWatches.append(old)
        }
        guard what != CURL_POLL_REMOVE else { return }
        var flags = Int16(EV_PERSIST)
        if what & CURL_POLL_IN != 0 { flags |= Int16(EV_READ) }
        if what & CURL_POLL_OUT != 0 { flags |= Int16(EV_WRITE) }
        let ev = event_new(loop.base, s, flags, { fd, events, arg in
            var action: Int32 = 0
            if events & Int16(EV_READ) != 0 { action |= CURL_CSELECT_IN }
            if events & Int16(EV_WRITE) != 0 { action |= CURL_CSELECT_OUT }
            Unmanaged<TunnelDial>.fromOpaque(arg!).takeUnretainedValue().curlAction(fd, action)
        }, Unmanaged.passUnretained(self).toOpaque())
        guard let ev else { return }
        event_add(ev, nil)
        curlWatches[s] = ev
    }

    /// CURLMOPT_TIMERFUNCTION: arm (or disarm) the one timer; curl is called from the timer, not here.
    private func curlTimerSet(_ ms: Int) {
        guard !handedOver else { strayCallbacks += 1; return }
        if ms < 0 { curlTimer?.cancel(); return }
        if curlTimer == nil { curlTimer = LoopTimer(loop: loop) { [weak self] in self?.curlAction(CURL_SOCKET_TIMEOUT, 0) } }
        curlTimer?.arm(seconds: Double(ms) / 1000)
    }

    private func curlAction(_ s: Int32, _ action: Int32) {
        guard let multi, completion != nil, fd < 0 else { return }
        var running: Int32 = 0
        _ = curl_multi_socket_action(multi, s, action, &running)
        var left: Int32 = 0
        while let msg = curl_multi_info_read(multi, &left) {
            guard msg.pointee.msg == CURLMSG_DONE else { continue }
            return connected(msg.pointee.data.result)
        }
    }

    private func connected(_ code: CURLcode) {
        curlTimer?.cancel()
        for (_, ev) in curlWatches {
            event_del(ev)
            retiredWatches.append(ev)
        }
        curlWatches = [:]
        guard code == CURLE_OK, let easy else { return fail(classify(code), wentOut: false) }
        var s: curl_socket_t = -1
        guard peel_easy_getinfo_socket(easy, CURLINFO_ACTIVESOCKET, &s) == CURLE_OK, s >= 0 else {
            return fail(.other("curl gave no socket for the connection"), wentOut: false)
        }
        fd = s
        readWatch = ReadyWatch(loop: loop, fd: s, flags: Int16(EV_READ)) { [weak self] in self?.receive() }
        writeWatch = ReadyWatch(loop: loop, fd: s, flags: Int16(EV_WRITE)) { [weak self] in self?.sendHead() }
        guard readWatch != nil, writeWatch != nil else { return fail(.localResources("event_new failed"), wentOut: false) }
        sendHead()
    }

    /// The one place a connect's CURLcode becomes a failure kind (as `UpstreamClient.classify` for calls).
    private func classify(_ code: CURLcode) -> UpstreamFailure {
        let text = errorBuffer.pointee != 0 ? String(cString: errorBuffer) : String(cString: curl_easy_strerror(code))
        switch code {
        case CURLE_COULDNT_RESOLVE_HOST: return .dns(text)
        case CURLE_COULDNT_CONNECT: return .refused(text)
        case CURLE_OPERATION_TIMEDOUT: return .connectTimeout(text)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
             CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH:
            return .tls(text)
        default: return .other(text)
        }
    }

    // MARK: the request and its answer

    private func sendHead() {
        guard completion != nil, let easy else { return }
        while sent < head.count {
            var n = 0
            let rc = head.withUnsafeBytes { curl_easy_send(easy, $0.baseAddress! + sent, head.count - sent, &n) }
            if rc == CURLE_AGAIN { writeWatch?.arm(); return }
            if rc != CURLE_OK { return fail(.reset("sending the upgrade request: " + String(cString: curl_easy_strerror(rc))), wentOut: sent > 0) }
            sent += n
        }
        receive()
    }

    private func receive() {
        guard completion != nil, let easy, sent == head.count else { return }
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            var n = 0
            let rc = chunk.withUnsafeMutableBytes { curl_easy_recv(easy, $0.baseAddress, $0.count, &n) }
            if rc == CURLE_AGAIN { readWatch?.arm(); return }
            if rc != CURLE_OK {
                let why = String(cString: curl_easy_strerror(rc))
                return fail(reading.input.isEmpty ? .reset(why) : .protocolError(why), wentOut: true)
            }
            let progress = n == 0 ? reading.ended() : chunk.withUnsafeBytes { reading.take(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            if progress != .switched, let refusal = chargeBudget() { return fail(refusal, wentOut: true) }
            switch progress {
            case .needMore: if n == 0 { return }
            case .switched: return switched()
            case .broken(let failure): return fail(failure, wentOut: true)
            case .whole(let body): return succeed(answer(body: body))
            }
        }
    }

    /// Charges what the answer's bytes hold beyond what is charged already (a 101's head is not
    /// held: it goes to the client at once); the budget's refusal, with nothing more taken.
    private func chargeBudget() -> UpstreamFailure? {
        guard let budget else { return nil }
        let n = reading.input.count - charged
        guard n > 0 else { return nil }
        if chargedToClient || (charged + n > MemoryBudget.answerAllowance && client != nil), let client {
            if let refusal = budget.reserveAnswer(n, client: client, held: charged, charged: chargedToClient) {
                return refusal == .full ? .overBudget : .overClientShare
            }
            chargedToClient = true
        } else if !budget.reserve(n) {
            return .overBudget
        }
        charged += n
        return nil
    }

    /// Gives back what the answer holds of the budget, or hands it on with the answer.
    private func takeHold() -> BudgetHold? {
        defer { charged = 0; chargedToClient = false }
        guard let budget, charged > 0 else { return nil }
        return BudgetHold(budget, charged, client: chargedToClient ? client : nil)
    }

    private func answer(body: [UInt8]) -> TunnelOpening {
        guard let p = reading.head else { return .failed(.protocolError("the upstream's answer has no head"), wentOut: true) }
        let collector = HeaderCollector()
        var lines: [[UInt8]] = [Array("HTTP/1.1 \(p.status) \r\n".utf8)]
        for f in p.fields { lines.append(Array("\(f.name): \(f.value)\r\n".utf8)) }
        lines.append(Array("\r\n".utf8))
        for line in lines {
            guard line.withUnsafeBytes({ collector.addLine($0) }) else {
                return .failed(.protocolError(collector.violation ?? "the upstream's head was refused"), wentOut: true)
            }
        }
        let facts = collector.facts ?? ResponseFacts(status: p.status, headers: collector.snapshot())
        var response = UpstreamResponse(status: p.status, headers: collector.take(), facts: facts, body: body,
                                        duration: loop.now - started)
        response.hold = takeHold()
        return .answered(response)
    }

    private func succeed(_ opening: TunnelOpening) {
        if case .failed(let f, let out) = opening { return fail(f, wentOut: out) }
        let done = completion
        completion = nil
        finish()
        done?(opening)
    }

    /// The 101 came: the connection (and the bytes after the head) go to the tunnel.
    private func switched() {
        guard let p = reading.head, let multi, let easy else { return }
        if let failure = detachFromCurl(multi) { return fail(failure, wentOut: true) }
        let done = completion
        completion = nil
        let upstream = TunnelUpstream(multi: multi, easy: easy, fd: fd, tls: tls, early: Array(reading.early), fields: p.fields)
        self.multi = nil
        self.easy = nil
        finish()
        done?(.switched(upstream))
    }

    /// Leaves curl's multi with nothing of the dial's before the tunnel takes it: the multi lives on
    /// in the tunnel, and removing the handle at the tunnel's end reports the socket and the timer
    /// (CURLMOPT_SOCKETFUNCTION, CURLMOPT_TIMERFUNCTION) to whatever they name then; the socket's
    /// curl_multi_assign data is cleared too, and the loop's events for the socket are gone (`connected`).
    private func detachFromCurl(_ multi: UnsafeMutableRawPointer) -> UpstreamFailure? {
        handedOver = true
        var rc = curl_multi_assign(multi, fd, nil)
        // CURLM_BAD_SOCKET: curl no longer tracks the socket (the connect finished), so it holds nothing for it.
        if rc == CURLM_BAD_SOCKET { rc = CURLM_OK }
        if rc == CURLM_OK { rc = peel_multi_setopt_ptr(multi, CURLMOPT_SOCKETDATA, nil) }
        if rc == CURLM_OK { rc = peel_multi_setopt_ptr(multi, CURLMOPT_TIMERDATA, nil) }
        if rc == CURLM_OK { rc = peel_multi_setopt_socket_cb(multi, nil) }
        if rc == CURLM_OK { rc = peel_multi_setopt_timer_cb(multi, nil) }
        return rc == CURLM_OK ? nil : .localResources("handing the connection to the tunnel: " + String(cString: curl_multi_strerror(rc)))
    }

    private func timedOut() {
        fail(fd < 0 ? .connectTimeout("connecting for the upgrade took longer than the timeout")
                    : .timeout("the upstream did not answer the upgrade within the timeout"), wentOut: sent > 0)
    }

    private func fail(_ failure: UpstreamFailure, wentOut: Bool) {
        let done = completion
        completion = nil
        finish()
        done?(.failed(failure, wentOut: wentOut))
    }

    /// Lets go of everything; the events on the socket go before curl closes it.
    private func finish() {
        _ = takeHold()
        deadline?.cancel()
        curlTimer?.cancel()
        readWatch?.disarm()
        writeWatch?.disarm()
        for (_, ev) in curlWatches { event_del(ev); retiredWatches.append(ev) }
        curlWatches = [:]
        if let easy {
            if let multi { _ = curl_multi_remove_handle(multi, easy) }
            curl_easy_cleanup(easy)
        }
        easy = nil
        if let multi { _ = curl_multi_cleanup(multi) }
        multi = nil
        // Freed on the next pass: one of them may be the event whose callback is running.
        let retired = retiredWatches
        retiredWatches = []
        let me = keepAlive
        keepAlive = nil
        loop.defer {
            for ev in retired { event_free(ev) }
            _ = me
        }
    }

    /// The upgrade request's head as it goes upstream, and the origin it goes to.
    static func requestHead(_ request: UpstreamRequest, upgrade: String) -> (origin: String, head: String) {
        var origin = ""
        var target = "/"
        if case .origin(let endpoint, let path, let query) = request.target {
            origin = endpoint.origin
            target = Self.encoded(endpoint.basePath + path) + (query.map { "?" + $0 } ?? "")
        }
        let authority = origin.split(separator: "/", omittingEmptySubsequences: true).dropFirst().first.map(String.init) ?? ""
        var text = "GET \(target) HTTP/1.1\r\nHost: \(request.forwarding?.host ?? authority)\r\n"
        // RFC 9110 §7.6.1: Connection and Upgrade are this hop's; the tunnel asks for the upgrade
        // itself. Fields curl would have left out when empty (`Accept:`) are not written.
        // Host is written once, above (RFC 9112 §3.2: two are a 400): a preserved Host among the
        // request's lines is that one.
        for line in request.fieldLines where !line.hasSuffix(":") && !Self.isHostLine(line) { text += line + "\r\n" }
        text += "Connection: Upgrade\r\nUpgrade: \(upgrade)\r\n\r\n"
        return (origin, text)
    }

    /// Whether a field line is a Host field (any case).
    static func isHostLine(_ line: String) -> Bool {
        line.utf8.count >= 5 && line.prefix(5).lowercased() == "host:"
    }

    /// `path` with bytes above 0x7F percent-encoded, as calls' targets are.
    static func encoded(_ path: String) -> String {
        var out = ""
        for b in path.utf8 {
            if b > 0x7F {
                out += "%" + String(b, radix: 16, uppercase: true)
            } else {
                out.unicodeScalars.append(Unicode.Scalar(b))
            }
        }
        return out
    }
}

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
    private var input: [UInt8] = []
    private let tls: Bool
    private let maxBody: Int
    private let started: Double
    private var completion: ((TunnelOpening) -> Void)?
    /// Keeps the dial alive while curl and libevent hold unretained pointers to it.
    private var keepAlive: TunnelDial?
    /// Largest upstream answer head, as for calls.
    static let maxHead = 64 * 1024

    /// Starts opening a tunnel for `request` (an origin-form target) asking for `upgrade`; the
    /// completion runs once, on the loop, unless `cancel` ran first.
    public init(loop: EventLoop, request: UpstreamRequest, upgrade: String, defaults: UpstreamOptions,
                completion: @escaping (TunnelOpening) -> Void) {
        self.loop = loop
        errorBuffer.pointee = 0
        started = loop.now
        maxBody = request.limits?.maxResponseBody ?? defaults.maxResponseBody
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
        if let caFile { set(CURLOPT_CAINFO, caFile) }
        if rc != CURLE_OK { return .other("curl_easy_setopt: " + String(cString: curl_easy_strerror(rc))) }
        var mrc = peel_multi_setopt_socket_cb(m, { _, s, what, userp, _ in
            Unmanaged<TunnelDial>.fromOpaque(userp!).takeUnretainedValue().curlWatch(s, what)
            return 0
        })
        if mrc == CURLM_OK { mrc = peel_multi_setopt_ptr(m, CURLMOPT_SOCKETDATA, me) }
        if mrc == CURLM_OK {
            mrc = peel_multi_setopt_timer_cb(m, { _, ms, userp in
                Unmanaged<TunnelDial>.fromOpaque(userp!).takeUnretainedValue().curlTimerSet(ms)
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
                return fail(input.isEmpty ? .reset(why) : .protocolError(why), wentOut: true)
            }
            if n == 0 { return answerEnded() }
            input.append(contentsOf: chunk[0..<n])
            if let opening = progress() { return succeed(opening) }
            if parsed?.status == 101 { return switched() }
            if let failure = refusal { return fail(failure, wentOut: true) }
        }
    }

    private var refusal: UpstreamFailure?
    private var parsed: (status: Int, fields: [(name: String, value: String)], headEnd: Int)?

    /// What the bytes so far make: nil while more are needed (`refusal` set when they never will).
    private func progress() -> TunnelOpening? {
        if parsed == nil {
            guard let end = Self.headEnd(input) else {
                if input.count > Self.maxHead { refusal = .protocolError("the upstream's head is over 64 KiB") }
                return nil
            }
            guard let head = Self.parseHead(input[0..<end]) else {
                refusal = .protocolError("the upstream's answer to the upgrade is not an HTTP/1.1 head")
                return nil
            }
            // An interim answer other than 101 (RFC 9110 §15.2) is dropped; the next head is the answer.
            if head.status >= 100 && head.status < 200 && head.status != 101 {
                input.removeFirst(end)
                return progress()
            }
            parsed = (head.status, head.fields, end)
            if head.status == 101 { return nil }
        }
        guard let p = parsed else { return nil }
        if p.status == 101 { return nil }
        switch Self.body(of: p.status, p.fields, input[p.headEnd...]) {
        case .needMore:
            if input.count - p.headEnd > maxBody { refusal = .tooLarge }
            return nil
        case .broken(let why):
            refusal = .protocolError(why)
            return nil
        case .whole(let body):
            return answer(p, body: body)
        }
    }

    /// The upstream closed: the end of a body that runs to the close, else an answer cut short.
    private func answerEnded() {
        if let p = parsed, p.status != 101, Self.runsToClose(p.status, p.fields) {
            return succeed(answer(p, body: Array(input[p.headEnd...])))
        }
        fail(parsed == nil && input.isEmpty ? .reset("the upstream closed the connection before answering the upgrade")
                                            : .protocolError("the upstream's answer to the upgrade was cut short"), wentOut: true)
    }

    private func answer(_ p: (status: Int, fields: [(name: String, value: String)], headEnd: Int), body: [UInt8]) -> TunnelOpening {
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
        return .answered(UpstreamResponse(status: p.status, headers: collector.take(), facts: facts, body: body,
                                          duration: loop.now - started))
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
        guard let p = parsed, let multi, let easy else { return }
        let done = completion
        completion = nil
        let upstream = TunnelUpstream(multi: multi, easy: easy, fd: fd, tls: tls, early: Array(input[p.headEnd...]), fields: p.fields)
        self.multi = nil
        self.easy = nil
        finish()
        done?(.switched(upstream))
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

    // MARK: reading an HTTP/1.1 answer (RFC 9112)

    /// The end of the head (after its empty line), if it has arrived.
    static func headEnd(_ b: [UInt8]) -> Int? {
        guard b.count >= 4 else { return nil }
        var i = 3
        while i < b.count {
            if b[i] == 0x0A && b[i - 1] == 0x0D && b[i - 2] == 0x0A && b[i - 3] == 0x0D { return i + 1 }
            i += 1
        }
        return nil
    }

    /// The status and fields of a head (status line, field lines, empty line); nil when it is not one.
    static func parseHead(_ bytes: ArraySlice<UInt8>) -> (status: Int, fields: [(name: String, value: String)])? {
        let text = String(decoding: bytes, as: UTF8.self)
        // CR LF is one Character to Swift.
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: false)
        guard !lines.isEmpty else { return nil }
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0] == "HTTP/1.1" || parts[0] == "HTTP/1.0", parts[1].count == 3,
              let status = Int(parts[1]), status >= 100 else { return nil }
        var fields: [(name: String, value: String)] = []
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else { return nil }
            let name = String(line[..<colon])
            guard !name.contains(" "), !name.contains("\t") else { return nil }
            fields.append((name, trimmedOWS(line[line.index(after: colon)...])))
        }
        return (status, fields)
    }

    enum Body: Equatable {
        case needMore
        case whole([UInt8])
        case broken(String)
    }

    /// A non-101 answer's body from the bytes after its head (RFC 9112 §6.3).
    static func body(of status: Int, _ fields: [(name: String, value: String)], _ rest: ArraySlice<UInt8>) -> Body {
        if status == 204 || status == 304 { return .whole([]) }
        if fields.contains(where: { $0.name.lowercased() == "transfer-encoding" && $0.value.lowercased().contains("chunked") }) {
            return dechunk(rest)
        }
        if let length = fields.first(where: { $0.name.lowercased() == "content-length" }) {
            guard let n = Int(length.value), n >= 0 else { return .broken("the upstream's Content-Length is not a number") }
            return rest.count >= n ? .whole(Array(rest.prefix(n))) : .needMore
        }
        return .needMore
    }

    /// Whether the body ends with the connection (no length, not chunked).
    static func runsToClose(_ status: Int, _ fields: [(name: String, value: String)]) -> Bool {
        !fields.contains { let n = $0.name.lowercased(); return n == "content-length" || n == "transfer-encoding" }
            && status != 204 && status != 304
    }

    /// A chunked body's data (RFC 9112 §7.1), once its last chunk and trailer section are in.
    static func dechunk(_ b: ArraySlice<UInt8>) -> Body {
        var out: [UInt8] = []
        var i = b.startIndex
        func line() -> ArraySlice<UInt8>? {
            var j = i
            while j + 1 < b.endIndex {
                if b[j] == 0x0D && b[j + 1] == 0x0A {
                    let l = b[i..<j]
                    i = j + 2
                    return l
                }
                j += 1
            }
            return nil
        }
        while true {
            guard let sizeLine = line() else { return .needMore }
            let digits = sizeLine.prefix { $0 != 0x3B && $0 != 0x20 && $0 != 0x09 }
            // chunk-size = 1*HEXDIG: no sign, and few enough digits that the size fits an Int.
            guard !digits.isEmpty, digits.count <= 15, digits.allSatisfy(Self.isHexDigit),
                  let size = Int(String(decoding: digits, as: UTF8.self), radix: 16) else {
                return .broken("the upstream's chunked framing is broken")
            }
            if size == 0 {
                // Trailer fields up to the empty line.
                while true {
                    guard let t = line() else { return .needMore }
                    if t.isEmpty { return .whole(out) }
                }
            }
            guard b.endIndex - i >= size + 2 else { return .needMore }
            out.append(contentsOf: b[i..<(i + size)])
            i += size
            guard b[i] == 0x0D && b[i + 1] == 0x0A else { return .broken("the upstream's chunked framing is broken") }
            i += 2
        }
    }

    private static func isHexDigit(_ b: UInt8) -> Bool {
        (0x30...0x39).contains(b) || (0x41...0x46).contains(b) || (0x61...0x66).contains(b)
    }

    /// `path` with bytes above 0x7F percent-encoded, as calls' targets are.
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

/// `s` without optional whitespace at either end (RFC 9110 §5.6.3).
private func trimmedOWS(_ s: Substring) -> String {
    var v = s[...]
    while let f = v.first, f == " " || f == "\t" { v = v.dropFirst() }
    while let l = v.last, l == " " || l == "\t" { v = v.dropLast() }
    return String(v)
}

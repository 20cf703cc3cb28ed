/// Limits and timeouts of one client connection (every one is in the README's limits table).
public struct ConnectionLimits: Sendable {
    /// Largest request head in bytes (default 64 KiB; 431 above).
    public var maxHead = 65_536
    /// Largest request line in bytes (default 8 KiB; 414 above).
    public var maxRequestLine = 8_192
    /// Largest request body in bytes (default 10 MiB; 413 above).
    public var maxBody = 10_485_760
    /// Bytes of pipelined requests read ahead while one is being answered (default 64 KiB; reading pauses above).
    public var maxPipelined = 65_536
    /// Seconds a request head may take from its first byte to its last (default 10; 408 after).
    public var headerTimeout: Double = 10
    /// Seconds a request body may take from the end of its head (default 60; 408 after).
    public var bodyTimeout: Double = 60
    /// Seconds an idle keep-alive connection is kept (default 60).
    public var idleTimeout: Double = 60
    /// Seconds a reply may make no progress because the client does not read (default 60; then closed).
    public var writeTimeout: Double = 60
    /// Seconds to keep reading and discarding after a refusal, so the client sees the answer rather
    /// than a reset (default 2).
    public var lingerTime: Double = 2
    /// The process's body budget (`max_buffered`), shared by every connection; nil: unbounded.
    public var budget: MemoryBudget? = nil
    /// Where a request body with a declared length past the spool's threshold is written instead
    /// of memory (`spool_dir`, under `max_spooled`); nil keeps every body in memory. A body that
    /// arrives whole with its head (at most one head-sized read) stays in memory.
    public var spool: Spool? = nil
    /// Proxies whose X-Forwarded-For names the client a request body is charged to (`trusted_proxies`).
    public var trustedProxies: [IPNetwork] = []
    /// Creates the defaults.
    public init() {}

    var parserLimits: HTTP1Parser.Limits {
        var l = HTTP1Parser.Limits()
        l.maxHead = maxHead
        l.maxRequestLine = maxRequestLine
        l.maxBody = maxBody
        return l
    }
}

/// A complete request, handed from the connection to its exchange with the buffer that holds it.
struct ParsedRequest {
    let buffer: RequestBuffer
    let method: Range<Int>
    let target: Range<Int>
    let minorVersion: Int
    let fields: [HTTP1Parser.FieldRange]
    var body: Range<Int>
    /// The client asked to keep the connection (RFC 9112 §9.3).
    let keepAlive: Bool
    /// The body, when it passed the spool's threshold: in this file, and `body` is empty.
    var spooled: SpooledBody? = nil
}

/// One client connection's HTTP/1.1 state: head → body → waiting for the answer → writing it →
/// idle or closing. Pure: events in (bytes received, end of input, a failed read, the answer
/// written, the clock), one action out; the socket shell only reads, writes and arms the timer at
/// `deadline`. Time is whatever the caller passes as `now`, so tests drive it with a fake clock.
struct ConnectionMachine {
    /// Where the connection is.
    enum Phase: Equatable {
        /// Between requests (or before the first), nothing of the next one read but empty lines.
        case idle
        /// Part of a request head has arrived.
        case head
        /// The head is in, the body is arriving.
        case body
        /// A request (or a refusal) is with the handler; nothing is being written yet.
        case waiting
        /// The answer is being written.
        case writing
        /// A refusal was written; reading and discarding until the client closes or `lingerTime` ends.
        case lingering
        /// The answer was a 101 and the connection is a tunnel's (RFC 9110 §15.2.2): the tunnel reads
        /// and writes, no timeout of the machine's runs, the tunnel closes it.
        case tunneled
        /// Done; the socket is to be closed.
        case closed
    }

    /// What the shell does next.
    enum Action {
        /// Nothing to do.
        case none
        /// Hand this request to the handler.
        case dispatch(ParsedRequest)
        /// Answer this refusal through the handler; the connection closes after it.
        case refuse(RequestError)
        /// Write `100 Continue` (RFC 9110 §10.1.1) and keep reading the body.
        case sendContinue
        /// The client half-closed while its request waits: write `100 Continue` to tell a half-close
        /// (the client reads on) from a departed client (its kernel answers with a reset).
        case probe
        /// The client left while its request waits: cancel the upstream call, then close.
        case cancel
        /// Close the socket now.
        case close
        /// Shut the sending side and read out what the client still sends, then close.
        case linger
    }

    let limits: ConnectionLimits
    private(set) var phase = Phase.idle
    private(set) var parser: HTTP1Parser
    /// The bytes of the request being read (or read ahead while one is answered).
    private(set) var buffer = RequestBuffer()
    private var since: Double
    private var expectChecked = false
    private var closeAfterReply = false
    private var refusing = false
    private var lingerAfterReply = true
    private var producerIdle = false
    /// Bytes of `limits.budget` this connection holds for the request being read or answered.
    private var reserved = 0
    /// The buffer's size when the head ended: what the head needed is the head's, not the body's.
    private var headCapacity = 0
    /// Whose share of the budget `reserved` is charged to; found once a body follows a head.
    private var account: String?
    /// The body's spool file while a body past the spool's threshold arrives; nil for one in memory.
    private var spoolWriter: SpoolWriter?
    /// The TCP peer's address.
    let peer: String
    /// True once the client's end of input (FIN) was read.
    private(set) var peerClosed = false
    /// True while the current request is HTTP/1.0 (no 1xx may be sent to it, RFC 9110 §15.2).
    private var http10 = false
    private var probed = false
    /// True while the answer is a stream with no end of its own (server-sent events): only the
    /// client ends it, and its end of input does, at once.
    private var endsWithInput = false
    /// Empty lines dropped before the current request line: they count toward `maxHead`, or a
    /// client could send gigabytes of CRLF before its request line.
    private var droppedBlank = 0

    init(limits: ConnectionLimits, peer: String = "", now: Double) {
        self.limits = limits
        self.peer = peer
        parser = HTTP1Parser(limits: limits.parserLimits)
        since = now
    }

    /// When the timer should fire, if at all.
    var deadline: Double? {
        switch phase {
        case .idle: return since + limits.idleTimeout
        case .head: return since + limits.headerTimeout
        case .body: return since + limits.bodyTimeout
        case .waiting, .closed, .tunneled: return nil
        case .writing: return producerIdle ? nil : since + limits.writeTimeout
        case .lingering: return since + limits.lingerTime
        }
    }

    /// Whether the shell should read from the socket now.
    var wantsRead: Bool {
        switch phase {
        case .idle, .head, .body, .lingering: return !peerClosed || phase == .lingering
        case .waiting, .writing: return !peerClosed && (buffer.count < limits.maxPipelined || endsWithInput)
        case .closed, .tunneled: return false
        }
    }

    /// True while what the client sends is read and dropped: an endless stream's client whose
    /// read-ahead is full is still listened to, so that its leaving is seen at once.
    var dropsInput: Bool { endsWithInput && buffer.count >= limits.maxPipelined }

    /// Free space to read into, grown within what the phase allows (empty: nothing may be read now);
    /// nil when memory for it could not be had.
    mutating func readSpace() -> UnsafeMutableRawBufferPointer? {
        if phase == .body, let writer = spoolWriter {
            // A spooled body passes through one window after the head, never more than a declared
            // length still owes, so no byte of a pipelined request lands in the file (a chunked
            // body's end is found by parsing: what follows it stays in the buffer).
            let window = parser.chunked ? Self.spoolWindow : min(Self.spoolWindow, parser.contentLength - writer.count)
            guard buffer.reserve(total: buffer.count + window) else { return nil }
            return UnsafeMutableRawBufferPointer(start: buffer.base + buffer.count, count: window)
        }
        switch phase {
        case .body where !parser.chunked:
            // Grown as the body arrives (doubling, up to the declared length): a peer that declares
            // 10 MiB and sends one byte does not get 10 MiB reserved.
            let need = parser.headEnd + parser.contentLength
            if buffer.capacity < need && buffer.capacity - buffer.count < 16_384 {
                guard buffer.reserve(total: min(need, max(buffer.capacity * 2, buffer.count + 262_144))) else { return nil }
            }
            return buffer.free
        case .body:
            // A chunked body's room: the body, plus its framing up to the body's size again or
            // 64 KiB (so that the buffer one whole body needs fits a share of `bodyFloor`).
            guard grow(upTo: parser.headEnd + limits.maxBody + min(limits.maxBody, 65_536)) else { return nil }
        case .idle, .head:
            guard grow(upTo: limits.maxHead + 1024) else { return nil }
        case .waiting, .writing:
            guard grow(upTo: limits.maxPipelined) else { return nil }
        case .lingering, .closed, .tunneled:
            return UnsafeMutableRawBufferPointer(start: nil, count: 0)
        }
        return buffer.free
    }

    private func grow(upTo limit: Int) -> Bool {
        if buffer.capacity - buffer.count < 1024 && buffer.capacity < limit {
            return buffer.reserve(total: min(limit, max(buffer.capacity * 2, buffer.count + 4096)))
        }
        return true
    }

    // MARK: events

    /// `n` bytes were read into `readSpace()`.
    mutating func received(_ n: Int, now: Double) -> Action {
        if phase == .lingering { return .none }
        buffer.count += n
        if phase == .body && spoolWriter != nil && !parser.chunked { return spoolBody(now) }
        switch phase {
        case .idle, .head, .body: return advance(now)
        default: return .none
        }
    }

    /// The client's end of input (a read returned 0).
    mutating func endOfInput(now: Double) -> Action {
        peerClosed = true
        switch phase {
        case .idle, .head, .body, .lingering:
            // A request cut short is abandoned, as nginx does; a lingering close is over.
            phase = .closed
            return .close
        case .waiting:
            if refusing || probed { return .none }
            probed = true
            // HTTP/1.0 cannot be sent an interim answer; its client is taken as gone.
            if http10 {
                phase = .closed
                return .cancel
            }
            return .probe
        case .tunneled:
            return .none
        case .writing:
            // A stream only the client ends: its FIN is its leaving. Waiting for a write to fail
            // instead kept the stream's place taken until the second heartbeat after it (~28 s).
            if endsWithInput { return closeNow() }
            return .none
        case .closed:
            return .none
        }
    }

    /// A read or write failed (reset): the client is gone.
    mutating func failed() -> Action {
        let wasWaiting = phase == .waiting && !refusing
        phase = .closed
        return wasWaiting ? .cancel : .close
    }

    /// The handler started the answer; `closing` when the answer itself says `Connection: close`.
    /// Returns whether the connection closes after it (the writer says so in the reply).
    mutating func replyStarted(closing: Bool, now: Double) -> Bool {
        if closing { closeAfterReply = true }
        // A refused request's bytes are not needed any more (what is read after it is discarded):
        // its body's memory goes now, not after the lingering close.
        if refusing && buffer.capacity > RequestBuffer.initialCapacity { buffer = RequestBuffer() }
        if peerClosed && !hasBufferedRequest { closeAfterReply = true }
        phase = .writing
        since = now
        return closeAfterReply
    }

    /// The answer being written is a stream with no end of its own (server-sent events): the
    /// client's end of input ends it (`endOfInput` closes), as its reset does; when that input has
    /// ended already, it closes now.
    mutating func streamEndsWithInput() -> Action {
        guard phase == .writing else { return .none }
        if peerClosed { return closeNow() }
        endsWithInput = true
        return .none
    }

    /// The stream is finished: the connection goes on to the next request (set here, on the
    /// stream's path, so that a plain answer pays nothing for it).
    mutating func streamFinished() {
        endsWithInput = false
    }

    /// Some of the answer left, or more was queued (the write timeout counts from here).
    mutating func wrote(now: Double) {
        if phase == .writing { since = now }
        producerIdle = false
    }

    /// A streamed answer has sent all it was given: the client is not to blame for the wait until
    /// the producer writes again, so no write timeout runs meanwhile.
    mutating func outputDrainedWhileStreaming() {
        producerIdle = true
    }

    /// Gives back what this connection holds of the budget: its request's body is no longer needed
    /// (the answer is written, or the connection is closing).
    mutating func releaseBudget() {
        if let account { limits.budget?.release(reserved, client: account) }
        reserved = 0
        account = nil
    }

    /// At the end of a head with a body: refuses (503) at once a declared length that the budget,
    /// or this client's share of it, has no room for now, before `100 Continue`. Nothing is taken:
    /// a declared length is a promise, and reserving it would let heads that never send a byte
    /// hold the whole budget for `body_timeout` (nginx never reserves one either).
    private mutating func admitBody() -> RequestError? {
        guard let budget = limits.budget, !parser.chunked, parser.contentLength > 0 else { return nil }
        return Self.refusal(budget.admits(parser.contentLength, client: clientAccount()))
    }

    /// Charges the memory the body holds to the budget and to this client's share, as its bytes
    /// arrive: the bytes themselves (de-chunked ones for a chunked body) while they fit the first
    /// allocation, then the buffer beyond the head, which grows ahead of the bytes by doubling, so
    /// that counting bytes alone would let the memory held run far past the budget. A request
    /// without a body never gets here.
    private mutating func chargeBody() -> RequestError? {
        guard let budget = limits.budget else { return nil }
        let arrived = parser.bodyReceived
        // Growth past what the head needed: a large head's buffer is not the body's memory.
        let grown = buffer.capacity - max(headCapacity, parser.headEnd)
        let held = buffer.capacity > max(RequestBuffer.initialCapacity, headCapacity) ? max(arrived, grown) : arrived
        guard held > reserved else { return nil }
        let client = clientAccount()
        if let refusal = Self.refusal(budget.reserve(held - reserved, client: client)) { return refusal }
        reserved = held
        return nil
    }

    private static func refusal(_ r: MemoryBudget.Refusal?) -> RequestError? {
        switch r {
        case nil: return nil
        case .full: return .overBudget
        case .clientShare: return .overClientShare
        }
    }

    /// The client a body is charged to, found once per request: the peer, or behind a trusted
    /// proxy the client its X-Forwarded-For names (as the handler finds it), grouped as per-client
    /// bounds group addresses (an IPv6 client's /64).
    private mutating func clientAccount() -> String {
        if let account { return account }
        var client = peer
        if !limits.trustedProxies.isEmpty, IPNetwork.any(limits.trustedProxies, contain: peer) {
            var forwardedFor: String?
            for f in parser.fields where f.token == .xForwardedFor && Int(f.valueEnd) <= buffer.count {
                let value = buffer.string(Int(f.valueStart)..<Int(f.valueEnd))
                forwardedFor = forwardedFor.map { $0 + ", " + value } ?? value
            }
            client = IPNetwork.realClient(peer: peer, forwardedFor: forwardedFor, trusted: limits.trustedProxies)
        }
        let key = IPNetwork.clientGroup(client)
        account = key
        return key
    }

    /// The answer is fully written.
    mutating func replyFinished(now: Double) -> Action {
        guard phase == .writing else { return .none }
        releaseBudget()
        since = now
        producerIdle = false
        if closeAfterReply {
            // Closing with bytes of the client's still unread makes the kernel send a reset, which
            // discards whatever of the answer is not yet delivered (RFC 9112 §9.6). Shut the
            // sending side instead and read out until the client closes or `lingerTime` ends.
            if peerClosed || !lingerAfterReply { return closeNow() }
            phase = .lingering
            return .linger
        }
        phase = .idle
        expectChecked = false
        probed = false
        let next = advance(now)
        // After the client's end of input no more bytes come: a request it left unfinished is
        // abandoned as `endOfInput` does, not kept open until header_timeout answers it with 408.
        if peerClosed, phase == .idle || phase == .head || phase == .body { return closeNow() }
        return next
    }

    /// The timer fired; acts only when `deadline` has passed.
    mutating func timerFired(now: Double) -> Action {
        guard let d = deadline, now >= d else { return .none }
        switch phase {
        case .idle, .writing, .lingering:
            return closeNow()
        case .head:
            return refuse(.headTimeout)
        case .body:
            return refuse(.bodyTimeout)
        case .waiting, .closed, .tunneled:
            return .none
        }
    }

    /// The handler answered its request with a 101: the connection becomes a tunnel. Returns the
    /// bytes read past the request (the client's first bytes through the tunnel, which must not be
    /// lost), or nil when the connection is not waiting for a handled request's answer. The body's
    /// budget is given back: an upgrade request has none, and the tunnel bounds its own buffers.
    mutating func tunnel() -> [UInt8]? {
        guard phase == .waiting, !refusing else { return nil }
        let early = Array(buffer.bytes)
        releaseBudget()
        buffer = RequestBuffer(capacity: 0)
        phase = .tunneled
        return early
    }

    /// The server is draining: an idle connection closes now.
    mutating func drain() -> Action {
        closeAfterReply = true
        return phase == .idle ? closeNow() : .none
    }

    // MARK: parsing

    private var hasBufferedRequest: Bool { buffer.count > 0 }

    private mutating func closeNow() -> Action {
        spoolWriter = nil
        phase = .closed
        return .close
    }

    private mutating func refuse(_ error: RequestError) -> Action {
        // A body being spooled is not wanted any more: its file and disk budget go now.
        spoolWriter = nil
        phase = .waiting
        refusing = true
        closeAfterReply = true
        // After a timeout the client is slow anyway: close once the answer is out, without reading on.
        lingerAfterReply = error != .headTimeout && error != .bodyTimeout
        return .refuse(error)
    }

    private mutating func advance(_ now: Double) -> Action {
        switch parser.parse(buffer.bytes) {
        case .refused(let e):
            return refuse(e)
        case .needMore:
            if parser.atMessageStart {
                // Empty lines alone (RFC 9112 §2.2) do not start a request; drop them, but not a CR
                // whose LF is still to come (a reset parser would take that LF for a bare one).
                if buffer.count > 0 && !parser.inHead && !parser.awaitingLF {
                    droppedBlank += buffer.count
                    buffer.count = 0
                    parser.reset()
                    if droppedBlank > limits.maxHead { return refuse(.headTooLarge) }
                }
                if phase != .idle { phase = .idle; since = now }
                return .none
            }
            if !parser.headComplete {
                if droppedBlank > 0 && droppedBlank + buffer.count > limits.maxHead { return refuse(.headTooLarge) }
                if phase != .head { phase = .head; since = now }
                return .none
            }
            if phase != .body {
                phase = .body
                since = now
                headCapacity = buffer.capacity
                if let spool = limits.spool, spool.threshold > 0, !parser.chunked, parser.contentLength > spool.threshold {
                    return startSpooling(spool, now)
                }
                if let refusal = admitBody() { return refuse(refusal) }
            }
            if parser.chunked {
                buffer.count = parser.compactChunked(buffer.bytes)
                if spoolWriter == nil, let spool = limits.spool, spool.threshold > 0, parser.bodyReceived > spool.threshold,
                   let refusal = startSpoolingChunked(spool) {
                    return refuse(refusal)
                }
                if spoolWriter != nil {
                    if let refusal = moveChunkedBody() { return refuse(refusal) }
                    return checkExpectation(bodyPending: true)
                }
            }
            if let refusal = chargeBody() { return refuse(refusal) }
            return checkExpectation(bodyPending: true)
        case .complete:
            if parser.bodyReceived > 0, spoolWriter == nil, let refusal = chargeBody() { return refuse(refusal) }
            if case .refuse(let e) = checkExpectation(bodyPending: false) { return .refuse(e) }
            return dispatch(now)
        }
    }

    // RFC 9110 §10.1.1: Peel decides on `Expect` itself. A body over the limit was refused with 413
    // at the head already; other expectations get 417; 100-continue is answered once the body is
    // wanted, which is at once (HTTP/1.0 requests have their expectation ignored).
    private mutating func checkExpectation(bodyPending: Bool) -> Action {
        guard !expectChecked else { return .none }
        expectChecked = true
        guard !parser.expectFields.isEmpty, parser.minorVersion == 1 else { return .none }
        // Every Expect field counts: `Expect: foo` is not hidden by a later `Expect: 100-continue`.
        for f in parser.expectFields {
            let r = parser.fields[f]
            var only100 = true
            HeaderTokens.forEach(buffer.slice(Int(r.valueStart)..<Int(r.valueEnd))) {
                if !HeaderField.equalsLowercased($0, "100-continue") { only100 = false }
            }
            if !only100 || r.valueStart == r.valueEnd { return refuse(.expectationFailed) }
        }
        return bodyPending ? .sendContinue : .none
    }

    /// Bytes of a spooled body read at a time, between the head and the file.
    static let spoolWindow = 65_536

    /// At the end of a head declaring a body past the spool's threshold: refuses (503) a length the
    /// disk budget or this client's share of it has no room for now (nothing is taken, as for
    /// memory), answers the expectation, and opens the body's file; the bytes read with the head
    /// go to it at once.
    private mutating func startSpooling(_ spool: Spool, _ now: Double) -> Action {
        let client = clientAccount()
        switch spool.budget.admits(parser.contentLength, client: client) {
        case .full: return refuse(.overSpoolBudget)
        case .clientShare: return refuse(.overSpoolClientShare)
        case nil: break
        }
        let expectation = checkExpectation(bodyPending: true)
        if case .refuse = expectation { return expectation }
        if let refusal = chargeSpoolWindow() { return refuse(refusal) }
        switch SpoolWriter.open(spool, client: client) {
        case .failure(let e): return refuse(.spoolWrite(e))
        case .success(let writer): spoolWriter = writer
        }
        let next = spoolBody(now)
        if case .none = next { return expectation }
        return next
    }

    /// Moves the body bytes read after the head into the spool file (charged to the disk budget)
    /// and dispatches the request once the declared length is in.
    private mutating func spoolBody(_ now: Double) -> Action {
        guard let writer = spoolWriter else { return .none }
        let head = parser.headEnd
        if buffer.count > head {
            if let failure = writer.append(UnsafeRawBufferPointer(start: buffer.base + head, count: buffer.count - head)) {
                return refuse(Self.refusal(failure))
            }
            buffer.count = head
        }
        guard writer.count == parser.contentLength else { return .none }
        return dispatch(now)
    }

    /// The read window a spooled body passes through is memory like any body's: charged to the
    /// budget and this client's share until the answer is written.
    private mutating func chargeSpoolWindow() -> RequestError? {
        guard let budget = limits.budget else { return nil }
        if let refusal = Self.refusal(budget.reserve(Self.spoolWindow, client: clientAccount())) { return refusal }
        reserved = Self.spoolWindow
        return nil
    }

    /// A chunked body whose de-chunked bytes passed the spool's threshold goes to a file from here
    /// on (its length is unknown, so the disk budget is charged as its bytes are written): the bytes
    /// so far move there, the memory they held goes back, and the buffer shrinks to the head and
    /// one read window.
    private mutating func startSpoolingChunked(_ spool: Spool) -> RequestError? {
        switch SpoolWriter.open(spool, client: clientAccount()) {
        case .failure(let e): return .spoolWrite(e)
        case .success(let writer): spoolWriter = writer
        }
        if let refusal = moveChunkedBody() { return refusal }
        releaseBudget()
        if let refusal = chargeSpoolWindow() { return refusal }
        let kept = RequestBuffer(capacity: parser.headEnd + Self.spoolWindow)
        kept.append(UnsafeRawBufferPointer(start: buffer.base, count: buffer.count))
        buffer = kept
        return nil
    }

    /// Appends the de-chunked bytes in the buffer to the body's spool file and cuts the buffer back
    /// to the head (parsing goes on after it).
    private mutating func moveChunkedBody() -> RequestError? {
        guard let writer = spoolWriter else { return nil }
        let head = parser.headEnd
        let decoded = parser.bodyEnd - head
        guard decoded > 0, parser.bodyMovedOut() else { return nil }
        if let failure = writer.append(UnsafeRawBufferPointer(start: buffer.base + head, count: decoded)) {
            return Self.refusal(failure)
        }
        buffer.count = head
        return nil
    }

    private static func refusal(_ failure: SpoolWriter.Failure) -> RequestError {
        switch failure {
        case .full: return .overSpoolBudget
        case .clientShare: return .overSpoolClientShare
        case .write(let e): return .spoolWrite(e)
        }
    }

    private mutating func dispatch(_ now: Double) -> Action {
        let p = parser
        if droppedBlank > 0 && droppedBlank + p.headEnd > limits.maxHead { return refuse(.headTooLarge) }
        droppedBlank = 0
        var request = ParsedRequest(
            buffer: buffer, method: p.methodRange, target: p.targetRange, minorVersion: p.minorVersion,
            fields: p.fields, body: p.headEnd..<p.bodyEnd, keepAlive: Self.keepAlive(p, buffer))
        // Where what was read past this request starts. A declared length's spooled body passed
        // through a window that stops at its end, so nothing of it is in the buffer.
        var end = p.messageEnd
        if let writer = spoolWriter {
            spoolWriter = nil
            if p.chunked {
                // A spooled chunked body's last bytes (before its last chunk and trailers) join the file.
                if let failure = writer.append(UnsafeRawBufferPointer(start: buffer.base + p.headEnd, count: p.bodyEnd - p.headEnd)) {
                    return refuse(Self.refusal(failure))
                }
            } else {
                end = buffer.count
            }
            switch writer.finish() {
            case .success(let file): request.spooled = file
            case .failure(let failure): return refuse(Self.refusal(failure))
            }
            request.body = p.headEnd..<p.headEnd
        }
        http10 = p.minorVersion == 0
        if !request.keepAlive { closeAfterReply = true }
        // The bytes after this request (pipelined ones) start the next buffer.
        let next = RequestBuffer(capacity: max(RequestBuffer.initialCapacity, buffer.count - end))
        if buffer.count > end {
            next.append(UnsafeRawBufferPointer(start: buffer.base + end, count: buffer.count - end))
        }
        buffer.count = end
        buffer = next
        parser.reset()
        phase = .waiting
        since = now
        return .dispatch(request)
    }

    // RFC 9112 §9.3: HTTP/1.1 persists unless `close` is named; HTTP/1.0 only with `keep-alive`.
    static func keepAlive(_ p: HTTP1Parser, _ buffer: RequestBuffer) -> Bool {
        var close = false
        var keep = false
        for f in p.connectionFields {
            let r = p.fields[f]
            HeaderTokens.forEach(buffer.slice(Int(r.valueStart)..<Int(r.valueEnd))) { token in
                if HeaderField.equalsLowercased(token, "close") { close = true }
                if HeaderField.equalsLowercased(token, "keep-alive") { keep = true }
            }
        }
        if close { return false }
        return p.minorVersion == 1 || keep
    }
}

/// Comma-separated list elements (RFC 9110 §5.6.1), without the whitespace around them.
enum HeaderTokens {
    static func forEach(_ value: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Void) {
        var start = 0
        let n = value.count
        while start < n {
            var end = start
            while end < n && value[end] != UInt8(ascii: ",") { end += 1 }
            var a = start
            var z = end
            while a < z && (value[a] == 0x20 || value[a] == 0x09) { a += 1 }
            while z > a && (value[z - 1] == 0x20 || value[z - 1] == 0x09) { z -= 1 }
            if z > a { body(UnsafeRawBufferPointer(rebasing: value[a..<z])) }
            start = end + 1
        }
    }
}

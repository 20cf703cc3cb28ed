import PeelIO

/// One client connection: parses requests in arrival order and answers one at a time, so pipelining is safe.
final class DemoConnection {
    /// Bytes a busy connection may hold unread before it is dropped: one largest request and change.
    static let maxBacklog = 65_536 + (16 << 20) + 65_536
    /// Largest piece a streamed body writes per timer tick.
    static let streamPiece = 256 * 1024
    /// Seconds between streamed pieces; with no drain signal from PeelIO this paces memory use.
    static let streamTick = 0.001
    /// Seconds of quiet after a refusal before closing, so the refusal is not lost to a RST.
    static let lingerQuiet = 0.25

    private let tcp: TCPConnection
    private let loop: EventLoop
    private var parser = RequestParser()
    private let onRequest: (ParsedRequest) -> DemoReply?
    private let onGone: (DemoConnection) -> Void
    private var job = Job.idle
    private var ended = false
    private var discarded = 0
    private var timer: LoopTimer?

    /// What the connection is doing between callbacks.
    private enum Job {
        /// Parsing and answering as bytes arrive.
        case idle
        /// Waiting to send a whole response.
        case later([UInt8], keepAlive: Bool)
        /// Sending `body` from `offset`, one byte per tick.
        case trickle([UInt8], offset: Int, seconds: Double, keepAlive: Bool)
        /// Sending a generated body piece by piece.
        case stream(GeneratedBody, keepAlive: Bool)
        /// Never answering.
        case stalled
        /// About to reset after a partial answer.
        case resetting
        /// Refused: discarding input until the peer is quiet, then closing.
        case lingering
    }

    /// Wraps an accepted socket; `onRequest` sees every whole request and may answer it instead of the
    /// routes (the play-dead switch), `onGone` runs once when it closes.
    init(tcp: TCPConnection, onRequest: @escaping (ParsedRequest) -> DemoReply?, onGone: @escaping (DemoConnection) -> Void) {
        self.tcp = tcp
        self.loop = tcp.loop
        self.onRequest = onRequest
        self.onGone = onGone
        tcp.onData = { [weak self] bytes in self?.received(bytes) }
        tcp.onClose = { [weak self] in self?.closed() }
    }

    /// Ends the connection now (server shutdown): a close, or a reset when bytes are still queued.
    func shutdown() {
        timer?.cancel()
        job = .idle
        ended = true
        tcp.close()
        if tcp.isOpen { tcp.reset() }
    }

    private func received(_ bytes: ArraySlice<UInt8>) {
        if case .lingering = job {
            discarded += bytes.count
            if discarded > Self.maxBacklog { tcp.close() } else { arm(Self.lingerQuiet) }
            return
        }
        guard !ended else { return }
        parser.append(bytes)
        guard case .idle = job else {
            // A busy connection keeps pipelined bytes for later, up to one largest request.
            if parser.buffered > Self.maxBacklog { end() }
            return
        }
        pump()
    }

    /// Answers every whole request buffered, in order, until one needs time.
    private func pump() {
        while !ended, case .idle = job {
            switch parser.next() {
            case .needMore:
                if parser.takeContinueRequest() { tcp.write("HTTP/1.1 100 Continue\r\n\r\n") }
                return
            case .refused(let refusal):
                let response = DemoResponse.envelope(code: refusal.status, message: refusal.reason, data: "null",
                                                     status: refusal.status)
                tcp.write(response.serialized(keepAlive: false, http10: false, includeBody: true))
                job = .lingering
                arm(Self.lingerQuiet)
                return
            case .request(let request):
                let override = onRequest(request)
                perform(override ?? DemoRoutes.reply(to: request), for: request)
            }
        }
    }

    private func perform(_ reply: DemoReply, for request: ParsedRequest) {
        let keepAlive = request.keepAlive
        let http10 = request.isHTTP10
        let withBody = request.method != "HEAD"
        switch reply {
        case .respond(let response):
            tcp.write(response.serialized(keepAlive: keepAlive, http10: http10, includeBody: withBody))
            if !keepAlive { end() }
        case .respondLater(let response, let seconds):
            job = .later(response.serialized(keepAlive: keepAlive, http10: http10, includeBody: withBody), keepAlive: keepAlive)
            arm(seconds)
        case .trickle(let response, let seconds):
            tcp.write(response.head(keepAlive: keepAlive, http10: http10))
            if !withBody || response.body.isEmpty || response.isBodiless { return complete(keepAlive: keepAlive) }
            job = .trickle(response.body, offset: 0, seconds: seconds, keepAlive: keepAlive)
            arm(seconds)
        case .stream(let status, let contentType, let body):
            let response = DemoResponse(status: status, headers: [("Content-Type", contentType)])
            tcp.write(response.head(keepAlive: keepAlive, http10: http10, contentLength: body.total))
            if !withBody { return complete(keepAlive: keepAlive) }
            job = .stream(body, keepAlive: keepAlive)
            arm(0)
        case .stall:
            job = .stalled
        case .raw(let bytes, .close):
            tcp.write(bytes)
            end()
        case .raw(let bytes, .hold):
            tcp.write(bytes)
            job = .stalled
        case .raw(let bytes, .reset(let seconds)):
            tcp.write(bytes)
            job = .resetting
            arm(seconds)
        case .reset:
            ended = true
            tcp.reset()
        }
    }

    private func timerFired() {
        switch job {
        case .idle, .stalled:
            break
        case .later(let bytes, let keepAlive):
            tcp.write(bytes)
            complete(keepAlive: keepAlive)
        case .trickle(let body, let offset, let seconds, let keepAlive):
            tcp.write([body[offset]])
            if offset + 1 == body.count { return complete(keepAlive: keepAlive) }
            job = .trickle(body, offset: offset + 1, seconds: seconds, keepAlive: keepAlive)
            arm(seconds)
        case .stream(var body, let keepAlive):
            tcp.write(body.nextPiece(limit: Self.streamPiece))
            if body.isDone { return complete(keepAlive: keepAlive) }
            job = .stream(body, keepAlive: keepAlive)
            arm(Self.streamTick)
        case .resetting:
            job = .idle
            ended = true
            tcp.reset()
        case .lingering:
            job = .idle
            end()
        }
    }

    /// One answer is out: serve what is buffered next, or close.
    private func complete(keepAlive: Bool) {
        job = .idle
        if keepAlive { pump() } else { end() }
    }

    /// Closes once queued bytes are sent.
    private func end() {
        ended = true
        tcp.close()
    }

    private func arm(_ seconds: Double) {
        if timer == nil { timer = LoopTimer(loop: loop) { [weak self] in self?.timerFired() } }
        timer?.arm(seconds: seconds)
    }

    private func closed() {
        ended = true
        job = .idle
        timer?.cancel()
        onGone(self)
    }
}

import CEvent
import Glibc

/// The socket shell of one client connection: reads into the state machine's buffer, writes the
/// answers, arms one timer at the machine's deadline, and carries out the machine's actions. Owned
/// by its server's table from accept to close; libevent's callbacks carry an unretained pointer to
/// it, valid because every event is deleted before the table lets it go.
final class ClientConnection {
    private unowned let server: HTTPServer
    private let loop: EventLoop
    let fd: Int32
    /// The peer's address, as text.
    let clientAddress: String
    private var machine: ConnectionMachine
    private var readEvent: OpaquePointer?
    private var writeEvent: OpaquePointer?
    private var timer: OpaquePointer?
    private var readArmed = false
    private var edgeTriggered = false
    private var writeEdgeTriggered = false
    private var armedDeadline: Double?
    private(set) var closed = false
    /// The request being handled, if any (one at a time: later pipelined ones wait in the buffer).
    private var exchange: HTTPExchange?
    private var exchangeCounted = false
    // Output: head bytes (and any 100 Continue before them), then a body sent from its own array.
    private let head = ReplyHead()
    private var body: [UInt8] = []
    // What must live as long as `body` is unsent (the memory budget's hold on it).
    private var bodyOwner: AnyObject?
    private var bodyRange = 0..<0
    // A spooled body's file, the bytes of it being sent (after the head, with sendfile), and the
    // pieces after them (`nextPiece` on; `piecesPending` bytes).
    private var file: SpooledBody?
    private var fileRange = 0..<0
    private var filePieces: [FilePiece] = []
    private var nextPiece = 0
    private var piecesPending = 0
    private var replying = false
    // A streamed answer: open until `streamFinish`; chunked unless the client speaks HTTP/1.0.
    private var stream: ReplyStream?
    private var streamChunked = false
    private var streamBodyless = false
    // Body bytes still owed under a declared Content-Length; nil when the stream has none.
    private var streamRemaining: Int?
    // After a 101: the tunnel that reads and writes this socket until it closes it.
    private var tunnel: Tunnel?

    /// Output bytes queued and not yet taken by the kernel.
    var pendingOutput: Int { head.count + bodyRange.count + fileRange.count + piecesPending }

    init(server: HTTPServer, loop: EventLoop, fd: Int32, clientAddress: String, limits: ConnectionLimits) {
        self.server = server
        self.loop = loop
        self.fd = fd
        self.clientAddress = clientAddress
        machine = ConnectionMachine(limits: limits, peer: clientAddress, now: monotonicSeconds())
    }

    /// Creates the events and starts reading; false when libevent could not (the caller closes).
    func start() -> Bool {
        let me = Unmanaged.passUnretained(self).toOpaque()
        timer = event_new(loop.base, -1, 0, { _, _, arg in
            Unmanaged<ClientConnection>.fromOpaque(arg!).takeUnretainedValue().timerFired()
        }, me)
        writeEvent = event_new(loop.base, fd, Int16(EV_WRITE), { _, _, arg in
            Unmanaged<ClientConnection>.fromOpaque(arg!).takeUnretainedValue().flush()
        }, me)
        readEvent = event_new(loop.base, fd, Int16(EV_READ | EV_PERSIST), { _, _, arg in
            Unmanaged<ClientConnection>.fromOpaque(arg!).takeUnretainedValue().readable()
        }, me)
        guard timer != nil, writeEvent != nil, readEvent != nil else { return false }
        sync()
        return true
    }

    // MARK: reading

    private func readable() {
        guard !closed else { return }
        if machine.phase == .lingering { return discard() }
        if machine.peerClosed { return peerClosedEvent() }
        guard let space = machine.readSpace() else {
            // No memory for the bytes the client is sending: drop this connection, not the process.
            perform(machine.failed())
            return
        }
        guard let p = space.baseAddress, space.count > 0 else {
            if machine.dropsInput { dropInput() }
            return sync()
        }
        let n = recv(fd, p, space.count, 0)
        if n > 0 {
            perform(machine.received(n, now: monotonicSeconds()))
        } else if n == 0 {
            perform(machine.endOfInput(now: monotonicSeconds()))
        } else {
            let e = errno
            if e == EAGAIN || e == EWOULDBLOCK || e == EINTR { return }
            perform(machine.failed())
        }
        sync()
    }

    // After the client's FIN a read only ever returns 0, even once a reset has followed (Linux checks
    // the FIN before the error), so whether the client is gone or only half-closed is asked of the
    // socket: a pending error or a closed TCP state means the probe drew a reset.
    private func peerClosedEvent() {
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        var info = tcp_info()
        var infoLength = socklen_t(MemoryLayout<tcp_info>.size)
        let gone = (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error != 0)
            || (getsockopt(fd, Int32(IPPROTO_TCP), TCP_INFO, &info, &infoLength) == 0 && Int32(info.tcpi_state) == TCP_CLOSE_STATE)
        if gone { perform(machine.failed()) }
        sync()
    }

    // An endless stream's client with its read-ahead full: what it sends is dropped (nothing after
    // an event-stream request is ever answered), so that its end of input or reset is still seen.
    private func dropInput() {
        let n = server.scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n == 0 {
            perform(machine.endOfInput(now: monotonicSeconds()))
        } else if n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR {
            perform(machine.failed())
        }
    }

    // After a refusal: read out what the client still sends, so our close does not reset the
    // connection under the answer (RFC 9112 §9.6), until it closes or `lingerTime` ends.
    private func discard() {
        let n = server.scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) { close() }
    }

    // MARK: acting

    private func perform(_ action: ConnectionMachine.Action) {
        switch action {
        case .none:
            break
        case .dispatch(let request):
            hand(HTTPExchange(connection: self, request: request))
        case .refuse(let error):
            let p = machine.parser
            let buffer = machine.buffer
            // What is known of the request line, for the log (nothing when it never completed).
            let method = p.methodRange.isEmpty || p.methodRange.upperBound > buffer.count ? "" : buffer.string(p.methodRange)
            let target = p.targetRange.isEmpty || p.targetRange.upperBound > buffer.count ? "" : buffer.target(p.targetRange)
            // A refusal after a whole head (body too large, expectation, body timeout) still knows the
            // request's Origin, so a browser app can read why it was refused (CORS).
            var origin: String? = nil
            if p.headComplete {
                for f in p.fields where f.nameEnd - f.nameStart == 6 && Int(f.valueEnd) <= buffer.count && f.valueEnd >= f.valueStart {
                    if buffer.string(Int(f.nameStart)..<Int(f.nameEnd)).lowercased() == "origin" {
                        origin = buffer.string(Int(f.valueStart)..<Int(f.valueEnd))
                    }
                }
            }
            hand(HTTPExchange(connection: self, refusal: error, method: method, target: target, minorVersion: p.minorVersion,
                              origin: origin))
        case .sendContinue, .probe:
            // RFC 9110 §15.2: an HTTP/1.1 client must accept interim answers it did not ask for.
            head.put("HTTP/1.1 100 Continue\r\n\r\n")
            flush()
        case .cancel:
            let ex = exchange
            exchange = nil
            ex?.clientLeft()
            endExchange()
            close()
        case .close:
            close()
        case .linger:
            shutdown(fd, Int32(SHUT_WR))
        }
    }

    private func hand(_ ex: HTTPExchange) {
        exchange = ex
        exchangeCounted = true
        server.exchangeStarted()
        server.handler(ex)
    }

    private func endExchange() {
        if exchangeCounted {
            exchangeCounted = false
            server.exchangeEnded()
        }
    }

    /// Writes `ex`'s answer (called by the exchange, once).
    func reply(_ ex: HTTPExchange, status: Int, fields: ReplyFields, body: [UInt8], range: Range<Int>, file: SpooledBody? = nil,
               pieces: [FilePiece] = [], keeping: AnyObject? = nil, closing asked: Bool = false) {
        guard !closed, exchange === ex else { return }
        if let foreign = ex.refusal?.foreignReply {
            // A client speaking HTTP/2 or TLS: its own protocol's goodbye (or nothing), never an HTTP/1.1 head.
            _ = machine.replyStarted(closing: true, now: monotonicSeconds())
            foreign.withUnsafeBytes { head.raw($0) }
            replying = true
            flush()
            return
        }
        // The ranges are the caller's; never let one reach past the array or file it names.
        let range = range.clamped(to: 0..<body.count)
        let pieces = file.map { f in pieces.map { $0.clamped(to: f.count) } } ?? []
        let length = file == nil ? range.count : pieces.reduce(0) { $0 + $1.count }
        head.begin(status: status)
        head.fields(fields)
        let closing = machine.replyStarted(closing: asked || server.draining, now: monotonicSeconds())
        // RFC 9110 §6.4.1: 1xx, 204 and 304 answers have no body; HEAD gets the length GET would.
        let bodyless = status < 200 || status == 204 || status == 304
        // RFC 9110 §15.3.6: a 205 has no content either, but unlike 204 it must say so (Content-Length:
        // 0), or an HTTP/1.1 client would read it until the connection closes (RFC 9112 §6.3).
        let resetContent = status == 205
        let connection: StaticString? = closing ? "close" : (ex.version.minor == 0 ? "keep-alive" : nil)
        server.withDate { head.end(date: $0, contentLength: bodyless ? nil : (resetContent ? 0 : length), connection: connection) }
        if !bodyless && !resetContent && !ex.isHead && length > 0, let file {
            self.file = file
            filePieces = pieces
            piecesPending = length
            nextPiece = 0
            loadPieces()
        } else if !bodyless && !resetContent && !ex.isHead && !range.isEmpty {
            self.body = body
            bodyRange = range
            bodyOwner = keeping
        }
        replying = true
        flush()
    }

    /// Writes `ex`'s head for a streamed body and returns the stream (called by the exchange, once).
    /// With `contentLength` the body is sent as is under that length (the upstream's declared one);
    /// without it, chunked (HTTP/1.1) or ended by the close (HTTP/1.0).
    func startStream(_ ex: HTTPExchange, status: Int, fields: ReplyFields, contentLength: Int?, endless: Bool = false) -> ReplyStream? {
        guard !closed, exchange === ex else { return nil }
        head.begin(status: status)
        head.fields(fields)
        let noBody = status < 200 || status == 204 || status == 304
        let declared = noBody ? nil : contentLength
        // HTTP/1.0 has no chunked coding: a body of unknown length ends with the connection (RFC 9112 §6.3).
        let http10 = ex.version.minor == 0
        let closing = machine.replyStarted(closing: server.draining || http10, now: monotonicSeconds())
        // A 205 streams nothing and says so with Content-Length: 0 (RFC 9110 §15.3.6), as `reply` does.
        let resetContent = status == 205
        streamBodyless = noBody || resetContent || ex.isHead
        let length = resetContent ? 0 : declared
        streamChunked = !http10 && !noBody && !resetContent && declared == nil
        streamRemaining = resetContent ? nil : declared
        server.withDate { head.end(date: $0, contentLength: length, connection: closing ? "close" : nil, chunked: streamChunked) }
        if endless, case .close = machine.streamEndsWithInput() {
            close()
            return nil
        }
        let s = ReplyStream(connection: self)
        stream = s
        replying = true
        flush()
        return closed ? nil : s
    }

    func streamWrite(_ bytes: UnsafeRawBufferPointer) {
        guard !closed, stream != nil, !streamBodyless else { return }
        if streamChunked {
            head.chunk(bytes)
        } else if let remaining = streamRemaining {
            // Never past the declared length: a byte more would be read as the next answer's start.
            let n = min(remaining, bytes.count)
            streamRemaining = remaining - n
            head.raw(UnsafeRawBufferPointer(rebasing: bytes[0..<n]))
        } else {
            head.raw(bytes)
        }
        machine.wrote(now: monotonicSeconds())
        flush()
    }

    func streamAbort() {
        guard !closed, stream != nil else { return }
        stream = nil
        close()
    }

    func streamFinish() {
        guard !closed, stream != nil else { return }
        if !streamBodyless, let remaining = streamRemaining, remaining > 0 {
            // Fewer bytes than declared: only the close tells the client the body is incomplete
            // (RFC 9112 §8); ending here would leave it waiting for the rest.
            stream = nil
            close()
            return
        }
        stream = nil
        machine.streamFinished()
        if streamChunked && !streamBodyless { head.put("0\r\n\r\n") }
        flush()
    }

    /// Writes the 101 head for `ex` and hands the socket to a tunnel to `upstream` (called by the
    /// exchange, once). The bytes read past the request go to the upstream first; the exchange stays
    /// counted as pending until the tunnel closes, so a drain waits for it up to shutdown_timeout.
    /// Nil when the connection cannot become one (the upstream end is closed then).
    func startTunnel(_ ex: HTTPExchange, fields: ReplyFields, upstream: TunnelUpstream, limits: TunnelLimits,
                     onEnd: @escaping (TunnelReport) -> Void) -> Tunnel? {
        guard !closed, exchange === ex, let early = machine.tunnel() else {
            upstream.close()
            return nil
        }
        head.begin(status: 101)
        head.fields(fields)
        // RFC 9110 §7.8: the 101 names the upgrade in Connection, as the upstream's did.
        server.withDate { head.end(date: $0, contentLength: nil, connection: "Upgrade") }
        let headBytes = Array(UnsafeRawBufferPointer(start: head.bytes, count: head.count))
        head.consume(head.count)
        // The tunnel's events take over the socket: this shell's stop.
        for e in [readEvent, writeEvent, timer] where e != nil { event_del(e) }
        readArmed = false
        armedDeadline = nil
        exchange = nil
        let t = Tunnel(loop: loop, fd: fd, upstream: upstream, limits: limits, head: headBytes, clientEarly: early,
                       clientEnded: machine.peerClosed, meter: server.tunnelMeter, closeClient: { [unowned self] in close() }, onEnd: onEnd)
        tunnel = t
        guard t.start() else {
            tunnel = nil
            close()
            return nil
        }
        return closed ? nil : t
    }

    // MARK: writing

    private func flush() {
        guard !closed else { return }
        while head.count > 0 || !bodyRange.isEmpty || !fileRange.isEmpty {
            var sent = 0
            let fromFile = head.count == 0 && bodyRange.isEmpty
            if fromFile, let file {
                var offset = off_t(fileRange.lowerBound)
                sent = sendfile(fd, file.fd, &offset, min(fileRange.count, Self.sendfileChunk))
                if sent == 0 {
                    // The file ends before the length the head declared: only the close can tell the
                    // client its body is incomplete (RFC 9112 §8).
                    perform(machine.failed())
                    return
                }
            } else {
                var vectors = (iovec(), iovec())
                var count: Int32 = 0
                if head.count > 0 {
                    vectors.0 = iovec(iov_base: head.bytes, iov_len: head.count)
                    count = 1
                }
                // A file body follows the head: one segment for the head and the file's first bytes.
                let flags = Int32(MSG_NOSIGNAL) | (fileRange.isEmpty && piecesPending == 0 ? 0 : Int32(MSG_MORE))
                body.withUnsafeBytes { b in
                    if !bodyRange.isEmpty, let base = b.baseAddress {
                        let v = iovec(iov_base: UnsafeMutableRawPointer(mutating: base + bodyRange.lowerBound), iov_len: bodyRange.count)
                        if count == 0 { vectors.0 = v } else { vectors.1 = v }
                        count += 1
                    }
                    sent = withUnsafeMutablePointer(to: &vectors) { vp in
                        vp.withMemoryRebound(to: iovec.self, capacity: 2) { iov in
                            var msg = msghdr()
                            msg.msg_iov = iov
                            msg.msg_iovlen = Int(count)
                            return sendmsg(fd, &msg, flags)
                        }
                    }
                }
            }
            if sent < 0 {
                let e = errno
                if e == EINTR { continue }
                if e == EAGAIN || e == EWOULDBLOCK {
                    // epoll keeps one edge/level mode per socket: while the read is edge-triggered
                    // (after the client's end of input) the write must be too, or arming it would
                    // turn the read level-triggered and its end of input would fire without end.
                    if writeEdgeTriggered != edgeTriggered {
                        writeEdgeTriggered = edgeTriggered
                        event_assign(writeEvent, loop.base, fd, Int16(EV_WRITE) | (edgeTriggered ? Int16(EV_ET) : 0), { _, _, arg in
                            Unmanaged<ClientConnection>.fromOpaque(arg!).takeUnretainedValue().flush()
                        }, Unmanaged.passUnretained(self).toOpaque())
                    }
                    event_add(writeEvent, nil)
                    sync()
                    return
                }
                perform(machine.failed())
                return
            }
            if fromFile {
                fileRange = (fileRange.lowerBound + sent)..<fileRange.upperBound
                if fileRange.isEmpty { loadPieces() }
            } else {
                let fromHead = min(sent, head.count)
                head.consume(fromHead)
                let fromBody = sent - fromHead
                if fromBody > 0 { bodyRange = (bodyRange.lowerBound + fromBody)..<bodyRange.upperBound }
            }
            machine.wrote(now: monotonicSeconds())
        }
        file = nil
        fileRange = 0..<0
        filePieces = []
        piecesPending = 0
        body = []
        bodyRange = 0..<0
        bodyOwner = nil
        head.shrinkIfIdle()
        if let stream {
            machine.outputDrainedWhileStreaming()
            stream.drained()
            return
        }
        guard replying else { return }
        replying = false
        exchange = nil
        endExchange()
        if machine.buffer.count > 0 {
            // The next pipelined request is parsed on the next loop pass, never inside whatever wrote
            // this answer: a handler (a long pipeline must not nest handler calls), or curl's write
            // callback finishing a streamed answer (a new transfer cannot start from there; review
            // found a pipelined GET after a streamed HEAD answered 502).
            loop.defer { [self] in
                guard !closed else { return }
                perform(machine.replyFinished(now: monotonicSeconds()))
                sync()
            }
            return
        }
        perform(machine.replyFinished(now: monotonicSeconds()))
        sync()
    }

    /// Queues the pieces after the file range just sent: bytes of Peel's own go to the head buffer
    /// (they leave with the next sendmsg), up to the next range of the file.
    private func loadPieces() {
        while fileRange.isEmpty && nextPiece < filePieces.count {
            let piece = filePieces[nextPiece]
            nextPiece += 1
            piecesPending -= piece.count
            switch piece {
            case .bytes(let b): b.withUnsafeBytes { head.raw($0) }
            case .file(let r): fileRange = r
            }
        }
    }

    // MARK: timer and interest

    private func timerFired() {
        armedDeadline = nil
        guard !closed else { return }
        perform(machine.timerFired(now: monotonicSeconds()))
        sync()
    }

    /// Makes the socket's read interest and the timer match the machine.
    private func sync() {
        guard !closed else { return }
        // After the client's end of input a waiting request keeps an edge-triggered read: it fires
        // once more when a reset follows (the client had left; the probe drew the reset), where a
        // level-triggered one would fire for the end of input forever.
        let wantEdge = machine.peerClosed && machine.phase == .waiting
        let want = machine.wantsRead || wantEdge
        if want != readArmed || wantEdge != edgeTriggered {
            if readArmed { event_del(readEvent) }
            if wantEdge != edgeTriggered {
                edgeTriggered = wantEdge
                let flags = Int16(EV_READ | EV_PERSIST) | (wantEdge ? Int16(EV_ET) : 0)
                event_assign(readEvent, loop.base, fd, flags, { _, _, arg in
                    Unmanaged<ClientConnection>.fromOpaque(arg!).takeUnretainedValue().readable()
                }, Unmanaged.passUnretained(self).toOpaque())
            }
            if want { event_add(readEvent, nil) }
            readArmed = want
        }
        // The timer is re-armed only when the deadline moves earlier; a later one is found when the
        // earlier firing recomputes it (no heap work per request for a deadline that only grows).
        if let d = machine.deadline, armedDeadline == nil || d < armedDeadline! {
            var tv = timeval.peel(max(0, d - monotonicSeconds()) + 0.001)
            event_add(timer, &tv)
            armedDeadline = d
        }
    }

    /// The server is draining: close now if idle, else after the answer in progress.
    func drain() {
        guard !closed else { return }
        perform(machine.drain())
    }

    /// Closes the socket and forgets the events; an unanswered request counts as the client leaving.
    func close() {
        guard !closed else { return }
        closed = true
        machine.releaseBudget()
        for e in [readEvent, writeEvent, timer] where e != nil { event_del(e) }
        if let t = tunnel {
            tunnel = nil
            t.connectionClosing()
        }
        if let ex = exchange {
            exchange = nil
            ex.clientLeft()
        }
        if let s = stream {
            stream = nil
            s.clientLeft()
        }
        endExchange()
        Glibc.close(fd)
        body = []
        bodyOwner = nil
        file = nil
        fileRange = 0..<0
        filePieces = []
        piecesPending = 0
        server.connectionClosed(self)
    }

    /// Frees the events (after `close`, outside any of their callbacks).
    func freeEvents() {
        for e in [readEvent, writeEvent, timer] where e != nil { event_free(e) }
        readEvent = nil
        writeEvent = nil
        timer = nil
    }
}

extension ClientConnection {
    /// Most bytes one sendfile(2) call is asked for, so a client with a wide window does not keep
    /// the loop in one call while the file is read from disk (nginx's sendfile_max_chunk, 2 MiB).
    static let sendfileChunk = 2 << 20
}

// TCP_CLOSE from <netinet/tcp.h>'s state list (the kernel's enum, not exported to Swift).
private let TCP_CLOSE_STATE: Int32 = 7

/// Seconds on the monotonic clock (the coarse one: a vDSO read, no syscall).
func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1_000_000_000
}

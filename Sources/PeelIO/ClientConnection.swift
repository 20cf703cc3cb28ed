import CEvent
import Glibc

/// Peel's state for one client connection, alive from evhttp's bevcb to its close callback:
/// the RFC 9112 framing check on incoming bytes, the header deadline, the rewrite of evhttp's own
/// error pages, and hang-up and close notification for the request being answered.
final class ClientConnection {
    private unowned let server: HTTPServer
    private let bev: OpaquePointer
    private var evcon: OpaquePointer?
    private var retained: Unmanaged<ClientConnection>?
    private var framing = HTTP1Framing()
    private var violation: HTTP1Framing.Violation?
    private var headTimer: OpaquePointer?
    private var rewriting = false
    private var closed = false
    private var vectors = [iovec](repeating: iovec(), count: 8)
    /// The request evhttp handed out on this connection and has not finished with (answer not yet
    /// written), if any; evhttp reads the next request only after that. Strong: the exchange clears it
    /// in its `release`, or this connection does when evhttp frees it first.
    private(set) var exchange: HTTPExchange?
    /// EV_READ|EV_CLOSED on the socket; made on the first request, armed only while a request waits
    /// for its answer, freed when the connection closes.
    private var hangUpWatch: OpaquePointer?
    /// EV_CLOSED alone, for a request during which the client already sent more bytes (pipelining):
    /// EV_READ would fire again at once for those. Made only when that happens.
    private var closeOnlyWatch: OpaquePointer?

    init(server: HTTPServer, bev: OpaquePointer) {
        self.server = server
        self.bev = bev
        retained = Unmanaged.passRetained(self)
        let me = Unmanaged.passUnretained(self).toOpaque()
        if let input = bufferevent_get_input(bev) {
            evbuffer_add_cb(input, { buffer, info, arg in
                guard let buffer, let info, let arg else { return }
                Unmanaged<ClientConnection>.fromOpaque(arg).takeUnretainedValue().inputGrew(buffer, info.pointee)
            }, me)
        }
        if server.errorDocument != nil, let output = bufferevent_get_output(bev) {
            evbuffer_add_cb(output, { buffer, info, arg in
                guard let buffer, let info, let arg else { return }
                Unmanaged<ClientConnection>.fromOpaque(arg).takeUnretainedValue().outputGrew(buffer, info.pointee)
            }, me)
        }
    }

    /// Finds the evhttp connection (the bufferevent's callback argument) and takes its close callback.
    func attach() -> OpaquePointer? {
        var arg: UnsafeMutableRawPointer? = nil
        bufferevent_getcb(bev, nil, nil, nil, &arg)
        guard let arg else {
            server.connectionClosed(nil)
            release()
            return nil
        }
        let evcon = OpaquePointer(arg)
        self.evcon = evcon
        evhttp_connection_set_closecb(evcon, { evcon, arg in
            Unmanaged<ClientConnection>.fromOpaque(arg!).takeUnretainedValue().connectionClosed()
        }, Unmanaged.passUnretained(self).toOpaque())
        return evcon
    }

    private func connectionClosed() {
        closed = true
        // All of them stop before evhttp closes the socket (right after this callback).
        if let headTimer { event_del(headTimer) }
        if let hangUpWatch { event_del(hangUpWatch) }
        if let closeOnlyWatch { event_del(closeOnlyWatch) }
        server.connectionClosed(evcon)
        let ex = exchange
        exchange = nil
        ex?.connectionFreed()
        // Any of the events may be the caller (header deadline, hang-up); free them once this callback unwinds.
        let events = [headTimer, hangUpWatch, closeOnlyWatch]
        headTimer = nil
        hangUpWatch = nil
        closeOnlyWatch = nil
        server.eventLoop.defer { [self] in
            for case let event? in events { event_free(event) }
            release()
        }
    }

    // MARK: hang-ups

    // evhttp stops reading while a request is being answered, so it misses a client that hangs up.
    // The socket is watched meanwhile. EV_CLOSED (EPOLLRDHUP) alone is not enough: libevent reports a
    // reset (EPOLLERR/EPOLLHUP) as EV_READ|EV_WRITE and drops the close bit, so the watch also takes
    // EV_READ and a one-byte peek tells a departed client (end of stream, or an error such as
    // ECONNRESET) from the next pipelined request. After such bytes the request is watched with
    // EV_CLOSED alone. One event per connection, armed per request: no event allocation per request.

    /// `ex` was handed to the server's handler; watch for the client leaving until it is answered.
    func exchangeStarted(_ ex: HTTPExchange) {
        exchange = ex
        guard !closed else { return }
        if hangUpWatch == nil {
            hangUpWatch = makeWatch(Int16(EV_READ | EV_CLOSED))
        }
        if let hangUpWatch { event_add(hangUpWatch, nil) }
    }

    /// `ex` is being answered: a hang-up from now on is evhttp's to see while writing.
    func replyStarted(_ ex: HTTPExchange) {
        guard exchange === ex else { return }
        if let hangUpWatch { event_del(hangUpWatch) }
        if let closeOnlyWatch { event_del(closeOnlyWatch) }
    }

    /// `ex` is done with (reply written, or abandoned).
    func exchangeEnded(_ ex: HTTPExchange) {
        if exchange === ex { exchange = nil }
    }

    /// A non-persistent event on the socket that calls `watchFired`; nil when libevent cannot make one
    /// (out of memory), in which case the request is simply not watched.
    private func makeWatch(_ events: Int16) -> OpaquePointer? {
        let fd = bufferevent_getfd(bev)
        guard fd >= 0 else { return nil }
        return event_new(server.eventLoop.base, fd, events, { fd, what, arg in
            Unmanaged<ClientConnection>.fromOpaque(arg!).takeUnretainedValue().watchFired(fd, what)
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    private func watchFired(_ fd: Int32, _ what: Int16) {
        // Not persistent: firing disarmed it.
        guard !closed, let ex = exchange else { return }
        if what & Int16(EV_CLOSED) != 0 { return ex.clientHungUp() }
        var byte: UInt8 = 0
        let got = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        if got == 0 { return ex.clientHungUp() }
        if got < 0 {
            let error = errno
            if error == EAGAIN || error == EWOULDBLOCK || error == EINTR {
                if let hangUpWatch { event_add(hangUpWatch, nil) }
                return
            }
            return ex.clientHungUp()
        }
        // The next request's bytes: evhttp reads them after this answer; until then only a close counts.
        if closeOnlyWatch == nil { closeOnlyWatch = makeWatch(Int16(EV_CLOSED)) }
        if let closeOnlyWatch { event_add(closeOnlyWatch, nil) }
    }

    private func release() {
        retained?.release()
        retained = nil
    }

    // MARK: incoming bytes

    private func inputGrew(_ buffer: OpaquePointer, _ info: evbuffer_cb_info) {
        guard info.n_added > 0, violation == nil, !closed else { return }
        let wasInHead = framing.inHead
        let length = evbuffer_get_length(buffer)
        var start = evbuffer_ptr()
        guard evbuffer_ptr_set(buffer, &start, length - info.n_added, EVBUFFER_PTR_SET) == 0 else { return }
        var needed = Int(evbuffer_peek(buffer, info.n_added, &start, &vectors, Int32(vectors.count)))
        if needed > vectors.count {
            vectors = [iovec](repeating: iovec(), count: needed)
            needed = Int(evbuffer_peek(buffer, info.n_added, &start, &vectors, Int32(vectors.count)))
        }
        var left = info.n_added
        for i in 0..<min(needed, vectors.count) where left > 0 {
            let n = min(vectors[i].iov_len, left)
            left -= n
            if let v = framing.feed(UnsafeRawBufferPointer(start: vectors[i].iov_base, count: n)) {
                refuse(buffer, v)
                return
            }
        }
        let inHead = framing.inHead
        if inHead && !wasInHead {
            armHeaderDeadline()
        } else if !inHead && wasInHead, let headTimer {
            event_del(headTimer)
        }
    }

    // Replace what evhttp has not parsed yet with a line it cannot parse: evhttp then refuses the
    // request through its own error path (whatever state it is in), and the output rewrite below
    // turns that page into Peel's 400 problem document naming the violation.
    private func refuse(_ buffer: OpaquePointer, _ v: HTTP1Framing.Violation) {
        violation = v
        evbuffer_drain(buffer, evbuffer_get_length(buffer))
        _ = "X\r\n\r\n".withCString { evbuffer_add(buffer, $0, 5) }
    }

    private func armHeaderDeadline() {
        if headTimer == nil {
            headTimer = event_new(server.eventLoop.base, -1, 0, { _, _, arg in
                Unmanaged<ClientConnection>.fromOpaque(arg!).takeUnretainedValue().headerDeadlinePassed()
            }, Unmanaged.passUnretained(self).toOpaque())
        }
        var tv = timeval.peel(server.headerTimeout)
        event_add(headTimer, &tv)
    }

    private func headerDeadlinePassed() {
        // A client that trickles its head (slowloris) loses the connection; evhttp's own timeout only
        // measures the gap between reads.
        guard !closed, framing.inHead, let evcon else { return }
        evhttp_connection_free(evcon)
    }

    // MARK: evhttp's error pages

    // evhttp writes its own error page (status line, headers, then the body in one add) for requests
    // it rejects itself: a body over the limit, a malformed head. Watching the connection's output
    // buffer is the only hook; the tail check runs only for adds the size of such a page.
    private static let pageTail = Array("</BODY></HTML>\n".utf8)
    private static let pageStart = Array("<HTML><HEAD>\n<TITLE>".utf8)

    private func outputGrew(_ buffer: OpaquePointer, _ info: evbuffer_cb_info) {
        guard !rewriting, info.n_added >= 60, info.n_added <= 400, let errorDocument = server.errorDocument else { return }
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
        // evhttp answers a head over its limit with 400 or 413, like a bad head or a big body; it is 431 (RFC 6585 §5).
        let headTooLarge = (status == 413 || status == 400) && violation == nil && framing.headBytes > server.maxHeadersSize
        let doc = errorDocument(headTooLarge ? 431 : status, violation?.rawValue)
        let head = "HTTP/1.1 \(doc.status) \(HTTPServer.reason(doc.status))\r\nContent-Type: \(doc.contentType)\r\n"
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
}

import CEvent
import Glibc
import Synchronization

/// What a tunnel did, reported once when it closes (the access log's line).
public struct TunnelReport: Sendable {
    /// Seconds from the 101 to the close.
    public var duration: Double
    /// Bytes the client sent through the tunnel, and the upstream.
    public var bytesIn: Int
    public var bytesOut: Int
    /// Who or what ended it.
    public var closedBy: TunnelEnd
}

/// Bytes read from one side of a tunnel and not yet written to the other: allocated when bytes
/// come and freed once drained, so an idle tunnel holds no buffer.
private final class TunnelBuffer {
    private(set) var base: UnsafeMutableRawPointer?
    private var capacity = 0
    private(set) var start = 0
    private(set) var end = 0
    var count: Int { end - start }

    deinit { free(base) }

    /// Room for `n` more bytes at the end; nil when memory could not be had.
    func space(_ n: Int) -> UnsafeMutableRawPointer? {
        if base == nil || capacity - end < n {
            if start > 0, let base, count > 0 { memmove(base, base + start, count) }
            end -= start
            start = 0
            if capacity - end < n {
                guard let grown = realloc(base, end + n) else { return nil }
                base = grown
                capacity = end + n
            }
        }
        return base.map { $0 + end }
    }

    func filled(_ n: Int) { end += n }

    func append(_ bytes: [UInt8]) {
        guard !bytes.isEmpty, let p = space(bytes.count) else { return }
        bytes.withUnsafeBytes { p.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
        end += bytes.count
    }

    func consume(_ n: Int) {
        start += n
        if start == end {
            free(base)
            base = nil
            capacity = 0
            start = 0
            end = 0
        }
    }
}

/// One tunnel after a 101: the client's socket and the upstream's connect-only curl handle, with
/// bytes copied between them untouched until either side closes (RFC 9110 §15.2.2). Each read
/// stops while what it read before is not yet written on (`TunnelFlow`'s high-water mark), so a
/// side that does not read costs a bounded buffer. Owned by its client connection; loop-thread only.
public final class Tunnel {
    private let loop: EventLoop
    private let fd: Int32
    private let upstream: TunnelUpstream
    private var flow: TunnelFlow
    private let toClient = TunnelBuffer()
    private let toUpstream = TunnelBuffer()
    private var watches: [ReadyWatch] = []
    private var clientRead: ReadyWatch?
    private var clientWrite: ReadyWatch?
    private var upstreamRead: ReadyWatch?
    private var upstreamWrite: ReadyWatch?
    private var timer: LoopTimer?
    private var armedDeadline: Double?
    private let started: Double
    private var closeClient: (() -> Void)?
    private var onEnd: ((TunnelReport) -> Void)?
    private var pumping = false
    /// Whether a side may have bytes to read: set when its read watch fires (and at the start),
    /// cleared when a read finds the socket empty. A side is read only when set, so an event on
    /// one side does not cost a read that finds nothing on the other, and with edge watches no
    /// epoll_ctl is made per read (nginx reads the same way).
    private var clientReadable = true
    private var upstreamReadable = true
    /// The same for writing: cleared when a write would block, set when the write watch fires.
    private var clientWritable = true
    private var upstreamWritable = true
    /// Whether the watches are edge-triggered (armed once; libevent cannot mix both kinds on one
    /// descriptor) rather than one-shot.
    private var edges = false
    private let meter: TunnelMeter?
    private var counted = false

    /// A tunnel between the client socket `fd` and `upstream`; `head` (the 101) goes to the client
    /// first, then the upstream's early bytes; `clientEarly` (read past the request) to the upstream.
    /// `meter` counts it open from `start` to its end, and the bytes it reads.
    init(loop: EventLoop, fd: Int32, upstream: TunnelUpstream, limits: TunnelLimits, head: [UInt8], clientEarly: [UInt8],
         clientEnded: Bool, meter: TunnelMeter? = nil, closeClient: @escaping () -> Void,
         onEnd: @escaping (TunnelReport) -> Void) {
        self.loop = loop
        self.fd = fd
        self.upstream = upstream
        self.meter = meter
        let now = monotonicSeconds()
        started = now
        flow = TunnelFlow(limits: limits, upstreamHalfCloses: !upstream.tls, now: now, queuedToClient: head.count)
        self.closeClient = closeClient
        self.onEnd = onEnd
        toClient.append(head)
        toClient.append(upstream.early)
        flow.read(upstream.early.count, from: .upstream, now: now)
        meter?.bytesFromUpstream.add(upstream.early.count, ordering: .relaxed)
        upstream.early = []
        toUpstream.append(clientEarly)
        flow.read(clientEarly.count, from: .client, now: now)
        meter?.bytesFromClient.add(clientEarly.count, ordering: .relaxed)
        // A client that half-closed before the 101: its end is passed on once the tunnel runs
        // (the flow counts the upstream as shut from here, so it would never be asked again).
        if clientEnded { endedEarly = flow.endOfInput(.client) }
    }

    /// What the client's end of input before the 101 asks of the tunnel, done at `start`.
    private var endedEarly = TunnelFlow.Action.none

    /// Creates the events and moves what can move now; false when libevent could not (the caller closes).
    func start() -> Bool {
        edges = ReadyWatch.edgesWork(on: loop)
        clientRead = ReadyWatch(loop: loop, fd: fd, flags: Int16(EV_READ), edge: edges) { [unowned self] in
            clientReadable = true
            pump()
        }
        clientWrite = ReadyWatch(loop: loop, fd: fd, flags: Int16(EV_WRITE), edge: edges) { [unowned self] in
            clientWritable = true
            pump()
        }
        upstreamRead = ReadyWatch(loop: loop, fd: upstream.fd, flags: Int16(EV_READ), edge: edges) { [unowned self] in
            upstreamReadable = true
            pump()
        }
        upstreamWrite = ReadyWatch(loop: loop, fd: upstream.fd, flags: Int16(EV_WRITE), edge: edges) { [unowned self] in
            upstreamWritable = true
            pump()
        }
        timer = LoopTimer(loop: loop) { [unowned self] in timerFired() }
        guard let a = clientRead, let b = clientWrite, let c = upstreamRead, let d = upstreamWrite else {
            upstream.close()
            return false
        }
        watches = [a, b, c, d]
        if edges {
            for w in watches { w.arm() }
            // An edge watch that could not be added would never fire: close rather than stall.
            guard watches.allSatisfy(\.armed) else {
                for w in watches { w.disarm() }
                upstream.close()
                return false
            }
        }
        meter?.open.add(1, ordering: .relaxed)
        counted = true
        pump()
        // Not once the first pump ended the tunnel: its descriptors are gone.
        if onEnd != nil { act(endedEarly) }
        endedEarly = .none
        return true
    }

    /// Ends the tunnel now (shutdown past `shutdown_timeout`).
    public func end(_ why: TunnelEnd) {
        act(flow.end(why))
    }

    /// Bytes read from either side and not yet written to the other.
    public var buffered: Int { toClient.count + toUpstream.count }

    // MARK: moving bytes

    private func pump() {
        guard !flow.closed, !pumping else { return }
        pumping = true
        defer { pumping = false }
        var moved = true
        while moved && !flow.closed {
            moved = false
            let now = monotonicSeconds()
            // Client → buffer.
            let clientRoom = flow.readRoom(from: .client)
            if clientRoom > 0, clientReadable, let p = toUpstream.space(clientRoom) {
                let n = recv(fd, p, clientRoom, 0)
                if n > 0 {
                    toUpstream.filled(n)
                    flow.read(n, from: .client, now: now)
                    meter?.bytesFromClient.add(n, ordering: .relaxed)
                    moved = true
                    // A short read took all the socket had (but a FIN the watch saw): the next read
                    // waits for the watch, which fires for any byte that came since.
                    if n < clientRoom && !(clientRead?.peerClosed ?? false) { waitToRead(.client) }
                } else if n == 0 {
                    act(flow.endOfInput(.client))
                    moved = true
                } else if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
                    waitToRead(.client)
                } else {
                    act(flow.failed(.client))
                }
            }
            // Buffer → upstream.
            if !flow.closed, toUpstream.count > 0, upstreamWritable, let base = toUpstream.base {
                switch upstream.send(from: base + toUpstream.start, count: toUpstream.count) {
                case .moved(let n):
                    toUpstream.consume(n)
                    act(flow.wrote(n, to: .upstream, now: now))
                    moved = moved || n > 0
                case .again: waitToWrite(.upstream)
                case .ended, .failed: act(flow.failed(.upstream))
                }
            }
            // Upstream → buffer.
            let upstreamRoom = flow.readRoom(from: .upstream)
            if !flow.closed, upstreamRoom > 0, upstreamReadable, let p = toClient.space(upstreamRoom) {
                switch upstream.recv(into: p, count: upstreamRoom) {
                case .moved(let n):
                    toClient.filled(n)
                    flow.read(n, from: .upstream, now: now)
                    meter?.bytesFromUpstream.add(n, ordering: .relaxed)
                    moved = true
                    // Short of what was asked, and of what curl reads at once. Not over TLS: a short
                    // read there is one record, and curl may hold decrypted bytes the socket no
                    // longer shows.
                    if n < min(upstreamRoom, TunnelUpstream.readCap) && !upstream.tls && !(upstreamRead?.peerClosed ?? false) {
                        waitToRead(.upstream)
                    }
                case .again: waitToRead(.upstream)
                case .ended:
                    act(flow.endOfInput(.upstream))
                    moved = true
                case .failed: act(flow.failed(.upstream))
                }
            }
            // Buffer → client.
            if !flow.closed, toClient.count > 0, clientWritable, let base = toClient.base {
                let n = send(fd, base + toClient.start, toClient.count, Int32(MSG_NOSIGNAL))
                if n >= 0 {
                    toClient.consume(n)
                    act(flow.wrote(n, to: .client, now: now))
                    moved = moved || n > 0
                } else if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
                    waitToWrite(.client)
                } else {
                    act(flow.failed(.client))
                }
            }
        }
        syncTimer()
    }

    /// `side`'s socket is empty: no read until its watch fires (an edge watch is armed already).
    private func waitToRead(_ side: TunnelFlow.Side) {
        if side == .client {
            clientReadable = false
            if !edges { clientRead?.arm() }
        } else {
            upstreamReadable = false
            if !edges { upstreamRead?.arm() }
        }
    }

    /// A write to `side` would block: no write until its watch fires. Only a blocked write clears
    /// the flag (a short one may just be a TLS record's end): an edge comes only after a full buffer.
    private func waitToWrite(_ side: TunnelFlow.Side) {
        if side == .client {
            clientWritable = false
            if !edges { clientWrite?.arm() }
        } else {
            upstreamWritable = false
            if !edges { upstreamWrite?.arm() }
        }
    }

    private func act(_ action: TunnelFlow.Action) {
        switch action {
        case .none: break
        case .shutdownWrite(.client): shutdown(fd, Int32(SHUT_WR))
        case .shutdownWrite(.upstream): upstream.shutdownWrite()
        case .close: finish(closingClient: true)
        }
    }

    // MARK: idle timer

    // Re-armed only when the deadline moves earlier; a later one is found when the earlier firing
    // recomputes it (as ClientConnection's timer).
    private func syncTimer() {
        guard let d = flow.deadline else { return }
        if armedDeadline == nil || d < armedDeadline! {
            timer?.arm(seconds: max(0, d - monotonicSeconds()) + 0.001)
            armedDeadline = d
        }
    }

    private func timerFired() {
        armedDeadline = nil
        act(flow.timerFired(now: monotonicSeconds()))
        if !flow.closed { syncTimer() }
    }

    // MARK: the end

    /// The client connection is closing by itself (server close): the tunnel goes with it.
    func connectionClosing() {
        if !flow.closed { _ = flow.end(.shutdown) }
        finish(closingClient: false)
    }

    private func finish(closingClient: Bool) {
        guard let onEnd else { return }
        self.onEnd = nil
        for w in watches { w.disarm() }
        timer?.cancel()
        upstream.close()
        if counted { meter?.open.subtract(1, ordering: .relaxed) }
        counted = false
        let report = TunnelReport(duration: monotonicSeconds() - started, bytesIn: flow.bytesIn, bytesOut: flow.bytesOut,
                                  closedBy: flow.closedBy ?? .shutdown)
        let close = closeClient
        closeClient = nil
        if closingClient { close?() }
        // The events go on the next pass: one of them may be the one whose callback is running.
        let held = (watches, timer)
        watches = []
        clientRead = nil; clientWrite = nil; upstreamRead = nil; upstreamWrite = nil
        timer = nil
        loop.defer { _ = held }
        onEnd(report)
    }
}

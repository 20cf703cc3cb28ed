/// Who or what ended a tunnel, as the access log names it (`closed_by`).
public enum TunnelEnd: String, Sendable, Equatable {
    /// The client closed (or reset) its connection first.
    case client
    /// The upstream closed (or reset) its connection first.
    case upstream
    /// Neither side sent a byte for `tunnel_idle_timeout`.
    case idle
    /// The gateway ended it: shutdown past `shutdown_timeout`.
    case shutdown
}

/// The bounds of one tunnel (`tunnel_*` options; each in the README's limits table).
public struct TunnelLimits: Sendable, Equatable {
    /// Bytes read from one side and not yet written to the other before reading from it pauses
    /// (default 64 KiB).
    public var highWater = 65_536
    /// Seconds without a byte in either direction before the tunnel is closed (default 600).
    public var idleTimeout: Double = 600

    /// Creates the defaults.
    public init() {}
}

/// One tunnel's two byte streams after a 101 (RFC 9110 §15.2.2, RFC 6455 §4): how many bytes
/// each side sent that the other has not taken, which ends have closed, and when it goes idle.
/// Pure: events in, one action out; time is whatever the caller passes as `now`, so tests drive it
/// with a fake clock. Bytes are never looked at (frames pass untouched).
struct TunnelFlow {
    /// One end of the tunnel.
    enum Side: Equatable {
        case client, upstream
        var other: Side { self == .client ? .upstream : .client }
    }

    /// What the shell does next.
    enum Action: Equatable {
        case none
        /// Shut the sending side of this end (pass a half-close on).
        case shutdownWrite(Side)
        /// Close both ends now.
        case close
    }

    let limits: TunnelLimits
    /// Whether the upstream end can be half-closed: plain TCP can; a TLS session cannot be shut
    /// one way through curl, so there a client's end of input closes the tunnel once drained.
    let upstreamHalfCloses: Bool
    /// Bytes read from the upstream not yet written to the client, and the other way.
    private(set) var toClient = 0
    private(set) var toUpstream = 0
    private(set) var clientEnded = false
    private(set) var upstreamEnded = false
    private var clientShut = false
    private var upstreamShut = false
    /// Set when the tunnel must close but bytes are still queued: nothing more is read, and it
    /// closes once both directions are written out.
    private(set) var flushingToClose = false
    /// Set once the tunnel is over; says who ended it.
    private(set) var closedBy: TunnelEnd?
    /// The end that closed first, before the tunnel itself closed.
    private var firstEnd: TunnelEnd?
    private var lastActivity: Double
    /// Bytes the client sent through the tunnel, and the upstream.
    private(set) var bytesIn = 0
    private(set) var bytesOut = 0

    /// `queuedToClient`: bytes of Peel's own (the 101 head) waiting for the client before any of the upstream's.
    init(limits: TunnelLimits, upstreamHalfCloses: Bool, now: Double, queuedToClient: Int = 0) {
        self.limits = limits
        self.upstreamHalfCloses = upstreamHalfCloses
        lastActivity = now
        toClient = queuedToClient
    }

    var closed: Bool { closedBy != nil }

    /// When the idle timer should fire, if at all.
    var deadline: Double? { closed ? nil : lastActivity + limits.idleTimeout }

    /// Bytes read from `side` and not yet written to the other side.
    func pending(from side: Side) -> Int { side == .client ? toUpstream : toClient }

    /// Whether to read from `side` now: it has not ended, and what it sent before is under the
    /// high-water mark (a side that does not read costs no more than that).
    func wantsRead(from side: Side) -> Bool {
        !closed && !flushingToClose && !ended(side) && pending(from: side) < limits.highWater
    }

    /// Room to read from `side` now.
    func readRoom(from side: Side) -> Int { wantsRead(from: side) ? limits.highWater - pending(from: side) : 0 }

    private func ended(_ side: Side) -> Bool { side == .client ? clientEnded : upstreamEnded }

    // MARK: events

    /// `n` bytes were read from `side`.
    mutating func read(_ n: Int, from side: Side, now: Double) {
        guard n > 0 else { return }
        if side == .client {
            toUpstream += n
            bytesIn += n
        } else {
            toClient += n
            bytesOut += n
        }
        lastActivity = now
    }

    /// `n` bytes were written to `side`; when that drained what the other side sent before it
    /// ended, its end is passed on.
    mutating func wrote(_ n: Int, to side: Side, now: Double) -> Action {
        guard n > 0 else { return .none }
        if side == .client { toClient -= n } else { toUpstream -= n }
        lastActivity = now
        if flushingToClose { return toClient == 0 && toUpstream == 0 ? close(by: firstEnd ?? .client) : .none }
        let source = side.other
        return ended(source) && pending(from: source) == 0 ? passEnd(from: source) : .none
    }

    /// `side` sent its end of input (a read returned 0).
    mutating func endOfInput(_ side: Side) -> Action {
        guard !closed, !ended(side) else { return .none }
        if side == .client { clientEnded = true } else { upstreamEnded = true }
        if firstEnd == nil { firstEnd = side == .client ? .client : .upstream }
        return pending(from: side) == 0 ? passEnd(from: side) : .none
    }

    /// A read or write on `side` failed (a reset): nothing more can pass, the tunnel closes.
    mutating func failed(_ side: Side) -> Action {
        guard !closed else { return .none }
        return close(by: firstEnd ?? (side == .client ? .client : .upstream))
    }

    /// The timer fired; acts only when `deadline` has passed.
    mutating func timerFired(now: Double) -> Action {
        guard let d = deadline, now >= d else { return .none }
        return close(by: .idle)
    }

    /// The gateway ends the tunnel (shutdown).
    mutating func end(_ why: TunnelEnd) -> Action {
        guard !closed else { return .none }
        return close(by: why)
    }

    // Everything `side` sent has reached the other side: its end goes on as a half-close where the
    // other end can take one (RFC 9293 §3.6), or the tunnel closes once both ends are done.
    private mutating func passEnd(from side: Side) -> Action {
        let other = side.other
        if ended(other) && pending(from: other) == 0 { return close(by: firstEnd ?? .client) }
        if other == .upstream && !upstreamHalfCloses {
            // The TLS session cannot be half-closed: the tunnel closes, but only after what the
            // upstream sent before is written to the client (a close frame, the last message).
            if pending(from: .upstream) == 0 { return close(by: firstEnd ?? .client) }
            flushingToClose = true
            return .none
        }
        if other == .client ? clientShut : upstreamShut { return .none }
        if other == .client { clientShut = true } else { upstreamShut = true }
        return .shutdownWrite(other)
    }

    private mutating func close(by why: TunnelEnd) -> Action {
        closedBy = why
        return .close
    }
}

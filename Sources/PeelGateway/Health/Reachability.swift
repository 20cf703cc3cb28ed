import PeelIO
import Synchronization

/// What Peel believes about the upstream.
public enum ReachabilityState: UInt8, Sendable, CustomStringConvertible {
    /// No verdict yet: calls are forwarded.
    case unknown = 0
    /// Probes pass: calls are forwarded.
    case reachable = 1
    /// `fall` consecutive failures: calls get the offline problem at once.
    case unreachable = 2

    public var description: String {
        switch self {
        case .unknown: return "unknown"
        case .reachable: return "reachable"
        case .unreachable: return "unreachable"
        }
    }
}

/// A change of state, returned by the machine for the caller to log and count.
public struct ReachabilityTransition: Sendable, Equatable {
    /// State before.
    public var from: ReachabilityState
    /// State after.
    public var to: ReachabilityState
    /// Clock reading when it happened (seconds).
    public var at: Double
    /// Why: the last failure for a move to unreachable, the passing evidence for a move to reachable.
    /// The detailed words (curl's text, addresses): for the log and the admin `/status` only.
    public var reason: String?
    /// The same reason, coarse (`connect refused`, `dns`, `probe status 503`): what anonymous clients
    /// read on `/_peel/reachability`, never an address, a port, a host name or curl's text.
    public var publicReason: String?
    /// Creates a transition record; `publicReason` defaults to `reason`.
    public init(from: ReachabilityState, to: ReachabilityState, at: Double, reason: String? = nil, publicReason: String? = nil) {
        self.from = from
        self.to = to
        self.at = at
        self.reason = reason
        self.publicReason = publicReason ?? reason
    }
}

/// Why a piece of evidence counts: a coarse label anyone may read, and the details only the
/// operator sees. A string literal gives both the same words (tests, and passes such as "probe passed").
public struct FailureCause: Sendable, Equatable, ExpressibleByStringLiteral, CustomStringConvertible {
    /// Coarse, safe for anonymous clients: `connect refused`, `connect timeout`, `dns`, `tls`, `probe status 503`.
    public var coarse: String
    /// Full words for the log and `/status` (curl's text with the address, port, certificate names).
    public var detail: String
    /// Creates a cause.
    public init(coarse: String, detail: String) {
        self.coarse = coarse
        self.detail = detail
    }
    /// The same words for both.
    public init(stringLiteral value: String) { self.init(coarse: value, detail: value) }
    public var description: String { detail }
}

/// One piece of evidence about the upstream, from a probe or from a live call.
///
/// Issue 17: offline means the upstream cannot be reached, and nothing else. Only a failure to reach
/// it (refused, no route, connect timeout, DNS, TLS handshake) or a probe answered 5xx (the operator
/// chose that path for the upstream to say it is down) counts toward `fall`. An upstream that took
/// the connection is there, however slowly or badly it then answers or however it closes: counting
/// an "empty reply" let one anonymous client take Peel offline for everyone with three calls to a
/// path whose worker dies, and counting a probe queued behind busy gunicorn sync workers called a
/// busy upstream offline. nginx never marks the only server of an upstream down; Envoy caps ejection.
public enum ReachabilityEvidence: Sendable, Equatable {
    /// A probe got an HTTP answer below 500 (or an answer Peel could not use: it came).
    case probePassed
    /// A probe connected but got no answer in time, or the upstream closed without one: busy, not
    /// gone. It counts as reachable (the network and the host are there); `/status` says busy.
    case probeBusy(FailureCause)
    /// A probe could not reach the upstream (refused, DNS, TLS, no route) or was answered 5xx.
    case probeFailed(FailureCause)
    /// A probe's connect did not finish within its timeout. Counts, except while live calls are
    /// being answered (an accept queue that is full, not a host that is gone).
    case probeTimedOut(FailureCause)
    /// A live call reached the upstream: any HTTP answer, or a connection that was taken and then
    /// answered slowly, badly or not at all.
    case liveAnswer
    /// A live call could not reach the upstream (refused, DNS, TLS).
    case liveFailed(FailureCause)
    /// A live call's connect did not finish within the connect timeout: excused like a probe's while
    /// other live calls are being answered (an accept queue that is full).
    case liveConnectTimedOut(FailureCause)
}

/// The pure state machine: evidence in, transitions out; time is passed in, so tests need no sleeps.
public struct ReachabilityMachine: Sendable {
    /// Consecutive failures that make the upstream unreachable.
    public private(set) var fall: Int
    /// Consecutive successes that make it reachable again.
    public private(set) var rise: Int
    /// How recent a live answer must be (seconds) for a probe timeout not to count.
    public private(set) var liveWindow: Double
    /// Current state.
    public private(set) var state: ReachabilityState = .unknown
    /// When the current state began (seconds on the injected clock).
    public private(set) var since: Double
    /// Why the current state began (see `ReachabilityTransition.reason`); nil while unknown.
    public private(set) var reason: String?
    /// The same, coarse, for anonymous clients (see `ReachabilityTransition.publicReason`).
    public private(set) var publicReason: String?
    /// Probes that connected but got no answer in time, in a row (0 after any other probe result).
    public private(set) var busyProbes = 0
    /// The most recent failure that counted, and when.
    public private(set) var lastFailure: (reason: String, at: Double)?
    /// When a live call last got an answer.
    public private(set) var lastLiveAnswer: Double?
    private var failures = 0
    private var successes = 0

    /// New thresholds (a configuration reload); the state and the counts so far stay.
    public mutating func setThresholds(fall: Int, rise: Int, liveWindow: Double? = nil) {
        self.fall = max(1, fall)
        self.rise = max(1, rise)
        if let liveWindow { self.liveWindow = max(0, liveWindow) }
    }

    /// True while nothing a live answer could change is pending: reachable with no failure run. The
    /// shared wrapper skips its lock for live answers then (the hot path).
    public var isSettled: Bool { state == .reachable && failures == 0 }

    /// Starts in `unknown` at time `now`; `liveWindow` is normally the probe interval.
    public init(fall: Int, rise: Int, liveWindow: Double = 0, now: Double) {
        self.fall = max(1, fall)
        self.rise = max(1, rise)
        self.liveWindow = max(0, liveWindow)
        since = now
    }

    /// Feeds one piece of evidence; returns the transition it caused, if any.
    public mutating func record(_ evidence: ReachabilityEvidence, at now: Double) -> ReachabilityTransition? {
        switch evidence {
        case .probePassed:
            busyProbes = 0
            return pass(at: now, why: "probe passed")
        case .probeBusy(let why):
            // Issue 17: the probe's connection was taken, so the host and the network are there; the
            // upstream is busy (its workers all held), and its calls wait for their own timeout.
            busyProbes += 1
            return pass(at: now, why: FailureCause(coarse: "probe connected, upstream busy", detail: "busy: " + why.detail))
        case .liveAnswer:
            // Issue 13: any HTTP answer on a live call proves the upstream is there, however slow or
            // whatever its status; it resets the failure run and counts toward rise like a probe.
            lastLiveAnswer = now
            return pass(at: now, why: "live call answered")
        case .probeFailed(let why):
            busyProbes = 0
            return fail(why, at: now)
        case .liveFailed(let why):
            return fail(why, at: now)
        case .probeTimedOut(let why):
            busyProbes = 0
            // A full accept queue is busy, not gone: while live calls are being answered (on
            // connections already open), a connect that waited in that queue proves nothing.
            if let last = lastLiveAnswer, now - last <= liveWindow { return nil }
            return fail(why, at: now)
        case .liveConnectTimedOut(let why):
            if let last = lastLiveAnswer, now - last <= liveWindow { return nil }
            return fail(why, at: now)
        }
    }

    /// Records a live answer's time only; the shared wrapper's fast path while `isSettled`, where a
    /// pass would change nothing else.
    public mutating func noteLiveAnswer(at time: Double) {
        if time > (lastLiveAnswer ?? -.infinity) { lastLiveAnswer = time }
    }

    private mutating func pass(at now: Double, why: FailureCause) -> ReachabilityTransition? {
        failures = 0
        successes += 1
        // From unknown one pass is enough: nothing was being refused yet.
        let needed = state == .unknown ? 1 : rise
        if state != .reachable && successes >= needed { return move(to: .reachable, at: now, reason: why) }
        return nil
    }

    private mutating func fail(_ why: FailureCause, at now: Double) -> ReachabilityTransition? {
        successes = 0
        failures += 1
        lastFailure = (why.detail, now)
        if state != .unreachable && failures >= fall { return move(to: .unreachable, at: now, reason: why) }
        return nil
    }

    private mutating func move(to next: ReachabilityState, at now: Double, reason: FailureCause) -> ReachabilityTransition {
        let t = ReachabilityTransition(from: state, to: next, at: now, reason: reason.detail, publicReason: reason.coarse)
        state = next
        since = now
        self.reason = reason.detail
        publicReason = reason.coarse
        return t
    }
}

/// The last probe's outcome, for /status.
public struct ProbeReport: Sendable {
    /// Whether it passed.
    public var ok: Bool
    /// HTTP status when one arrived.
    public var status: Int?
    /// Failure reason when it failed.
    public var error: String?
    /// Seconds it took.
    public var latency: Double
    /// Wall-clock time it finished (seconds since 1970).
    public var at: Double
    /// True when its connect ran out of the probe timeout.
    public var timedOut: Bool
    /// True when it connected but got no answer in time, or the upstream closed without one (issue
    /// 17: busy, which counts as reachable; `ok` is false so /status shows the probe did not pass).
    public var busy: Bool
    /// The coarse words for `error` (`connect refused`, `dns`, `probe status 503`), for anonymous clients.
    public var coarseError: String?
    /// Creates a report.
    public init(ok: Bool, status: Int?, error: String?, latency: Double, at: Double, timedOut: Bool = false,
                busy: Bool = false, coarseError: String? = nil) {
        self.ok = ok
        self.status = status
        self.error = error
        self.latency = latency
        self.at = at
        self.timedOut = timedOut
        self.busy = busy
        self.coarseError = coarseError ?? error
    }
}

/// What /status and `/_peel/reachability` show: the state, since when, and why.
public struct ReachabilitySnapshot: Sendable {
    /// Current state.
    public var state: ReachabilityState
    /// When it began (seconds on the injected clock).
    public var since: Double
    /// Why it began; nil while unknown.
    public var reason: String?
    /// Why it began, coarse (for `/_peel/reachability`); nil while unknown.
    public var publicReason: String?
    /// Probes in a row that connected but got no answer in time.
    public var busyProbes: Int = 0
    /// The most recent failure that counted, and when (seconds on the injected clock).
    public var lastFailure: (reason: String, at: Double)?
}

/// The machine shared by all workers: the hot path reads one atomic; updates take a lock (rare).
public final class Reachability: Sendable {
    private let machine: Locked<ReachabilityMachine>
    private let published = Atomic<UInt8>(ReachabilityState.unknown.rawValue)
    /// Mirrors `machine.isSettled`, so a live answer costs no lock while there is nothing to change.
    private let settled = Atomic<Bool>(false)
    /// The latest live answer's clock reading (bit pattern of a Double), written without the lock.
    private let lastLive = Atomic<UInt64>((-Double.infinity).bitPattern)
    private let lastProbe = Locked<ProbeReport?>(nil)
    private let transitions = Locked<[ReachabilityState: Int]>([:])
    /// Probes by result, for /metrics: passed, busy, failed.
    private let probeCounts = Locked<(passed: Int, busy: Int, failed: Int)>((0, 0, 0))
    private let clock: @Sendable () -> Double
    private let onTransition: @Sendable (ReachabilityTransition) -> Void

    /// Creates the shared state; `onTransition` runs (on the reporting thread) for each change.
    /// `liveWindow` (normally the probe interval): how recent a live answer excuses a probe timeout.
    public init(fall: Int, rise: Int, liveWindow: Double = 0, clock: @escaping @Sendable () -> Double,
                onTransition: @escaping @Sendable (ReachabilityTransition) -> Void) {
        self.clock = clock
        self.onTransition = onTransition
        machine = Locked(ReachabilityMachine(fall: fall, rise: rise, liveWindow: liveWindow, now: clock()))
    }

    /// Current state (one relaxed atomic load: the hot path).
    public var state: ReachabilityState {
        ReachabilityState(rawValue: published.load(ordering: .relaxed)) ?? .unknown
    }

    /// True while calls must get the offline problem.
    public var isDown: Bool { published.load(ordering: .relaxed) == ReachabilityState.unreachable.rawValue }

    /// When the current state began.
    public var since: Double { machine.withLock { $0.since } }

    /// State, since, reason and last failure, read together.
    public var snapshot: ReachabilitySnapshot {
        machine.withLock { ReachabilitySnapshot(state: $0.state, since: $0.since, reason: $0.reason, publicReason: $0.publicReason,
                                        busyProbes: $0.busyProbes, lastFailure: $0.lastFailure) }
    }

    /// The most recent probe result.
    public var lastProbeReport: ProbeReport? { lastProbe.withLock { $0 } }

    /// Transition counts by target state.
    public var transitionCounts: [ReachabilityState: Int] { transitions.withLock { $0 } }

    /// Probes so far by result.
    public var probeTotals: (passed: Int, busy: Int, failed: Int) { probeCounts.withLock { $0 } }

    /// Records an active probe.
    public func recordProbe(_ report: ProbeReport) {
        lastProbe.withLock { $0 = report }
        probeCounts.withLock {
            if report.ok { $0.passed += 1 } else if report.busy { $0.busy += 1 } else { $0.failed += 1 }
        }
        let detail = report.error ?? report.status.map { "probe status \($0)" } ?? "probe failed"
        let why = FailureCause(coarse: report.coarseError ?? detail, detail: detail)
        record(report.ok ? .probePassed : report.busy ? .probeBusy(why) : report.timedOut ? .probeTimedOut(why) : .probeFailed(why))
    }

    /// New fall and rise thresholds (and live window), from the next probe or call on.
    public func setThresholds(fall: Int, rise: Int, liveWindow: Double? = nil) {
        machine.withLock { $0.setThresholds(fall: fall, rise: rise, liveWindow: liveWindow) }
    }

    /// Records a failure to reach the upstream seen on a live call (counts as a failed probe).
    public func recordPassiveFailure(_ reason: FailureCause) {
        record(.liveFailed(reason))
    }

    /// Records a live call's connect timeout (counts unless live calls are being answered).
    public func recordLiveConnectTimeout(_ reason: FailureCause) {
        record(.liveConnectTimedOut(reason))
    }

    /// Records that a live call got an HTTP answer. Called for every answer: while the machine is
    /// settled it is one clock read and one relaxed store, no lock.
    public func recordLiveAnswer() {
        let now = clock()
        // Every worker writes here; skipping writes within a millisecond of the last keeps the cache
        // line shared instead of bouncing between cores at full load.
        if now - Double(bitPattern: lastLive.load(ordering: .relaxed)) > 0.001 {
            lastLive.store(now.bitPattern, ordering: .relaxed)
        }
        if settled.load(ordering: .relaxed) { return }
        record(.liveAnswer, at: now)
    }

    private func record(_ evidence: ReachabilityEvidence, at time: Double? = nil) {
        let now = time ?? clock()
        let live = Double(bitPattern: lastLive.load(ordering: .relaxed))
        let t = machine.withLock { m -> ReachabilityTransition? in
            // Live answers taken on the fast path reach the machine here, before it judges a timeout.
            m.noteLiveAnswer(at: live)
            let t = m.record(evidence, at: now)
            if let t { published.store(t.to.rawValue, ordering: .relaxed) }
            settled.store(m.isSettled, ordering: .relaxed)
            return t
        }
        if let t {
            transitions.withLock { $0[t.to, default: 0] += 1 }
            onTransition(t)
        }
    }
}

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
    /// Creates a transition record.
    public init(from: ReachabilityState, to: ReachabilityState, at: Double) {
        self.from = from
        self.to = to
        self.at = at
    }
}

/// The pure state machine: results in, transitions out; time is passed in, so tests need no sleeps.
public struct ReachabilityMachine: Sendable {
    /// Consecutive failures that make the upstream unreachable.
    public private(set) var fall: Int
    /// Consecutive successes that make it reachable again.
    public private(set) var rise: Int
    /// Current state.
    public private(set) var state: ReachabilityState = .unknown
    /// When the current state began (seconds on the injected clock).
    public private(set) var since: Double
    private var failures = 0
    private var successes = 0

    /// Starts in `unknown` at time `now`.
    /// New thresholds (a configuration reload); the state and the counts so far stay.
    public mutating func setThresholds(fall: Int, rise: Int) {
        self.fall = max(1, fall)
        self.rise = max(1, rise)
    }

    public init(fall: Int, rise: Int, now: Double) {
        self.fall = max(1, fall)
        self.rise = max(1, rise)
        since = now
    }

    /// Feeds one probe result (or a passive failure); returns the transition it caused, if any.
    public mutating func record(success: Bool, at now: Double) -> ReachabilityTransition? {
        if success {
            failures = 0
            successes += 1
            // From unknown one pass is enough: nothing was being refused yet.
            let needed = state == .unknown ? 1 : rise
            if state != .reachable && successes >= needed { return move(to: .reachable, at: now) }
        } else {
            successes = 0
            failures += 1
            if state != .unreachable && failures >= fall { return move(to: .unreachable, at: now) }
        }
        return nil
    }

    private mutating func move(to next: ReachabilityState, at now: Double) -> ReachabilityTransition {
        let t = ReachabilityTransition(from: state, to: next, at: now)
        state = next
        since = now
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
    /// Creates a report.
    public init(ok: Bool, status: Int?, error: String?, latency: Double, at: Double) {
        self.ok = ok
        self.status = status
        self.error = error
        self.latency = latency
        self.at = at
    }
}

/// The machine shared by all workers: the hot path reads one atomic; updates take a lock (rare).
public final class Reachability: Sendable {
    private let machine: Locked<ReachabilityMachine>
    private let published = Atomic<UInt8>(ReachabilityState.unknown.rawValue)
    private let lastProbe = Locked<ProbeReport?>(nil)
    private let transitions = Locked<[ReachabilityState: Int]>([:])
    private let clock: @Sendable () -> Double
    private let onTransition: @Sendable (ReachabilityTransition) -> Void

    /// Creates the shared state; `onTransition` runs (on the reporting thread) for each change.
    public init(fall: Int, rise: Int, clock: @escaping @Sendable () -> Double,
                onTransition: @escaping @Sendable (ReachabilityTransition) -> Void) {
        self.clock = clock
        self.onTransition = onTransition
        machine = Locked(ReachabilityMachine(fall: fall, rise: rise, now: clock()))
    }

    /// Current state (one relaxed atomic load: the hot path).
    public var state: ReachabilityState {
        ReachabilityState(rawValue: published.load(ordering: .relaxed)) ?? .unknown
    }

    /// True while calls must get the offline problem.
    public var isDown: Bool { published.load(ordering: .relaxed) == ReachabilityState.unreachable.rawValue }

    /// When the current state began.
    public var since: Double { machine.withLock { $0.since } }

    /// The most recent probe result.
    public var lastProbeReport: ProbeReport? { lastProbe.withLock { $0 } }

    /// Transition counts by target state.
    public var transitionCounts: [ReachabilityState: Int] { transitions.withLock { $0 } }

    /// Records an active probe.
    public func recordProbe(_ report: ProbeReport) {
        lastProbe.withLock { $0 = report }
        record(success: report.ok)
    }

    /// New fall and rise thresholds, from the next probe or call on.
    public func setThresholds(fall: Int, rise: Int) {
        machine.withLock { $0.setThresholds(fall: fall, rise: rise) }
    }

    /// Records a transport failure seen on a live call (counts as a failed probe).
    public func recordPassiveFailure() {
        record(success: false)
    }

    private func record(success: Bool) {
        let now = clock()
        let t = machine.withLock { m -> ReachabilityTransition? in
            let t = m.record(success: success, at: now)
            if let t { published.store(t.to.rawValue, ordering: .relaxed) }
            return t
        }
        if let t {
            transitions.withLock { $0[t.to, default: 0] += 1 }
            onTransition(t)
        }
    }
}

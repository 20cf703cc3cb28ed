import PeelIO
import Synchronization

/// One endpoint of a group as every worker shares it: what its probes (and, in a group without
/// passive ejection, its live calls) say about it, and its calls in flight. Kept across reloads
/// while its group keeps it, so a reload forgets neither its state nor its ejection.
final class EndpointState: Sendable {
    let url: UpstreamURL
    /// Its own machine: probes, live answers (which excuse a probe timeout), and live failures in a
    /// group without passive ejection.
    let reachability: Reachability
    /// Calls on it now, all workers (`least_request`, /status).
    let inFlight = Atomic<Int>(0)
    /// Mirrors "in the pool" (not unreachable, not ejected) for the hot path.
    let available = Atomic<Bool>(true)
    /// Set while live connect failures are counting, so a live answer takes no lock otherwise.
    let failing = Atomic<Bool>(false)
    /// The latest failure, for /status.
    let lastError = Locked<String?>(nil)
    /// Live calls that could not connect to it (metrics).
    let connectFailures = Atomic<Int>(0)
    /// The group that holds it now (a reload moves it to the next generation's).
    let owner = Locked<GroupLink>(GroupLink())

    struct GroupLink {
        weak var group: UpstreamGroupState?
    }

    init(url: UpstreamURL, reachability: Reachability) {
        self.url = url
        self.reachability = reachability
    }

    /// A live call could not connect to it (refused, DNS, TLS, connect timeout).
    func liveFailed(_ failure: UpstreamFailure) {
        connectFailures.add(1, ordering: .relaxed)
        lastError.withLock { $0 = failureReason(failure) }
        withOwner { $0.liveFailed(self, failure) }
    }

    /// A live call reached it: any answer, however bad.
    func liveAnswered() {
        reachability.recordLiveAnswer()
        if failing.load(ordering: .relaxed) { withOwner { $0.liveAnswered(self) } }
    }

    /// A probe's outcome.
    func probed(_ report: ProbeReport) {
        if !report.ok { lastError.withLock { $0 = report.error ?? report.status.map { "probe status \($0)" } } }
        reachability.recordProbe(report)
        withOwner { $0.probed(self, passed: report.ok || report.busy) }
    }

    /// Hands evidence to the group that holds it now. `apply` returns false when, under that group's
    /// lock, the endpoint turned out to belong to a newer generation (a reload handed it over after
    /// the owner was read): it is then applied there, so no failure or answer is lost to a reload.
    func withOwner(_ apply: (UpstreamGroupState) -> Bool) {
        // A handover happens once per reload; more than a few in a row while one piece of evidence
        // is applied would mean reloads faster than a lock, and the evidence is dropped.
        for _ in 0..<4 {
            guard let group = owner.withLock({ $0.group }) else { return }
            if apply(group) { return }
        }
    }

    /// Whether `group` holds it now.
    func isHeld(by group: UpstreamGroupState) -> Bool { owner.withLock { $0.group } === group }
}

/// One upstream group as every worker shares it: its endpoints and the group's own state, which
/// apps read (one backend going down leaves the others' routes alone). Immutable but for the
/// evidence it keeps; a reload that changes the group makes a new one that carries the endpoints
/// that stay.
final class UpstreamGroupState: Sendable {
    /// The group's name in the config file; `default` for the group `--upstream` makes.
    let name: String
    let endpoints: [EndpointState]
    /// Each endpoint's weight: its share of calls (round robin, and least_request when they differ).
    let weights: [Int]
    let balance: UpstreamGroup.Balance
    /// Whether live connect failures eject endpoints (a config file's group). Without it (the group
    /// `--upstream` makes) they count toward `fall` as they always have.
    let ejects: Bool

    private struct Book {
        var ejection: EjectionBook
        var state: ReachabilityState
        var since: Double
        var reason: String?
        var publicReason: String?
        /// Set once a reload replaced the group: it keeps serving the calls already on its routes,
        /// but its endpoints' pool flags and the group's announced state are the new group's.
        var retired = false
    }
    private let book: Locked<Book>
    private let published: Atomic<UInt8>
    private let onTransition: @Sendable (UpstreamGroupState, ReachabilityTransition) -> Void

    /// `prior`: the state of the group this one replaces at a reload, if any.
    init(name: String, endpoints: [EndpointState], weights: [Int], balance: UpstreamGroup.Balance, ejection: EjectionBook?,
         prior: ReachabilitySnapshot?, onTransition: @escaping @Sendable (UpstreamGroupState, ReachabilityTransition) -> Void) {
        self.name = name
        self.endpoints = endpoints
        self.weights = weights
        self.balance = balance
        ejects = ejection != nil
        self.onTransition = onTransition
        let settings = EjectionBook.Settings(UpstreamGroup.Eject(), rise: 1)
        let ejection = ejection ?? EjectionBook(count: endpoints.count, settings: settings)
        let state = GroupVerdict.state(available: endpoints.indices.map { !ejection.isEjected($0) && endpoints[$0].reachability.state != .unreachable },
                                       states: endpoints.map(\.reachability.state))
        let since = prior?.state == state ? prior!.since : monotonicNow()
        book = Locked(Book(ejection: ejection, state: state, since: since,
                           reason: prior?.state == state ? prior?.reason : nil, publicReason: prior?.state == state ? prior?.publicReason : nil))
        published = Atomic(state.rawValue)
        // A reload that changed the group's endpoints may change its state: announced like any move,
        // once the reload is in place (`UpstreamGroups.announceReload`).
        if let prior, prior.state != state {
            reloadMove = ReachabilityTransition(from: prior.state, to: state, at: since, reason: "the endpoints changed (reload)",
                                                publicReason: "configuration changed")
        } else {
            reloadMove = nil
        }
        for (i, e) in endpoints.enumerated() {
            e.available.store(!ejection.isEjected(i) && e.reachability.state != .unreachable, ordering: .relaxed)
            e.owner.withLock { $0.group = self }
        }
    }

    /// The move a reload caused, announced once the workers serve the new generation.
    private let reloadMove: ReachabilityTransition?

    /// Announces the move a reload caused, if any.
    func announceReload() {
        // Evidence may have moved the group again since it was built; a stale move is not sent
        // after a newer one.
        guard let t = reloadMove, state == t.to else { return }
        onTransition(self, t)
    }

    /// The group's state (one relaxed atomic load: the hot path).
    var state: ReachabilityState { ReachabilityState(rawValue: published.load(ordering: .relaxed)) ?? .unknown }
    /// True while its calls get the offline problem: no endpoint is available.
    var isDown: Bool { published.load(ordering: .relaxed) == ReachabilityState.unreachable.rawValue }

    /// The group's state, since when and why. A group of one endpoint without ejection is that
    /// endpoint's machine, as the one upstream always was.
    var snapshot: ReachabilitySnapshot {
        if endpoints.count == 1 && !ejects { return endpoints[0].reachability.snapshot }
        return book.withLock { ReachabilitySnapshot(state: $0.state, since: $0.since, reason: $0.reason, publicReason: $0.publicReason) }
    }

    /// Builds the group that replaces this one at a reload from its ejection book and state, under
    /// its lock: the new group takes the endpoints over (their owner) before the lock is let go, so
    /// evidence this group would record after the book was read waits, finds the endpoint moved,
    /// and goes to the new group (`EndpointState.withOwner`).
    func handOver(_ build: (EjectionBook, ReachabilitySnapshot) -> UpstreamGroupState) -> UpstreamGroupState {
        book.withLock { b in
            b.retired = true
            return build(b.ejection, ReachabilitySnapshot(state: b.state, since: b.since, reason: b.reason, publicReason: b.publicReason))
        }
    }

    /// A reload replaced or removed the group (see `Book.retired`).
    func retire() {
        book.withLock { $0.retired = true }
    }

    /// The ejection entries, for /status and tests.
    var ejection: EjectionBook { book.withLock { $0.ejection } }

    /// The position of `endpoint` in this group.
    private func index(_ endpoint: EndpointState) -> Int? { endpoints.firstIndex { $0 === endpoint } }

    // The evidence methods return false when the endpoint was handed to a newer generation
    // (`handOver`) and the evidence belongs there; true when it was taken (or has nowhere to go).

    func liveFailed(_ endpoint: EndpointState, _ failure: UpstreamFailure) -> Bool {
        guard ejects else {
            if case .connectTimeout = failure {
                endpoint.reachability.recordLiveConnectTimeout(failureCause(failure))
            } else {
                endpoint.reachability.recordPassiveFailure(failureCause(failure))
            }
            return true
        }
        guard let i = index(endpoint) else { return true }
        let cause = failureCause(failure)
        return update(endpoint, FailureCause(coarse: "endpoint ejected: " + cause.coarse, detail: "\(endpoint.url) ejected: " + cause.detail)) {
            // Under the book's lock, with the count it mirrors.
            endpoint.failing.store(true, ordering: .relaxed)
            return $0.liveFailed(i, at: monotonicNow())
        }
    }

    func liveAnswered(_ endpoint: EndpointState) -> Bool {
        guard let i = index(endpoint) else { return true }
        return whileHeld(endpoint) { (b: inout Book) -> Void in
            b.ejection.liveAnswered(i)
            endpoint.failing.store(false, ordering: .relaxed)
        } != nil
    }

    func probed(_ endpoint: EndpointState, passed: Bool) -> Bool {
        guard ejects, let i = index(endpoint) else { return true }
        if passed {
            return update(endpoint, FailureCause(coarse: "endpoint back", detail: "\(endpoint.url) back after passing probes")) {
                $0.probePassed(i, at: monotonicNow())
            }
        }
        return whileHeld(endpoint) { $0.ejection.probeFailed(i) } != nil
    }

    /// An endpoint's machine moved: the group's state may follow.
    func endpointChanged(_ endpoint: EndpointState, _ t: ReachabilityTransition) -> Bool {
        // Callbacks run outside the machine's lock: a later move may have overtaken this one, and
        // the group must not take one move's state with another's reason. The latest one announces.
        guard endpoint.reachability.state == t.to else { return true }
        return update(endpoint, FailureCause(coarse: t.publicReason ?? t.to.description, detail: t.reason ?? t.to.description), at: t.at) { _ in true }
    }

    /// Applies `change` to the ejection book; when it reports a change, recomputes which endpoints
    /// are available and the group's state, and announces a move with `why`. False, with nothing
    /// changed, when `endpoint` was handed to a newer generation.
    private func update(_ endpoint: EndpointState, _ why: FailureCause, at time: Double? = nil,
                        _ change: (inout EjectionBook) -> Bool) -> Bool {
        var moved: [(EndpointState, Bool)] = []
        let held = whileHeld(endpoint) { b -> ReachabilityTransition? in
            // An endpoint a reload removed still reports to its old group: nothing that serves
            // reads that group's book any more, and its verdict must not touch shared flags.
            guard !b.retired, change(&b.ejection) else { return nil }
            var available: [Bool] = []
            for (i, e) in endpoints.enumerated() {
                let ok = !b.ejection.isEjected(i) && e.reachability.state != .unreachable
                if e.available.exchange(ok, ordering: .relaxed) != ok { moved.append((e, ok)) }
                available.append(ok)
            }
            let next = GroupVerdict.state(available: available, states: endpoints.map(\.reachability.state))
            guard next != b.state else { return nil }
            let now = time ?? monotonicNow()
            let t = ReachabilityTransition(from: b.state, to: next, at: now, reason: why.detail, publicReason: why.coarse)
            b.state = next
            b.since = now
            b.reason = why.detail
            b.publicReason = why.coarse
            published.store(next.rawValue, ordering: .relaxed)
            return t
        }
        guard let t = held else { return false }
        // An endpoint entering or leaving the pool is the operator's to see, with the full reason.
        for (e, ok) in moved {
            EventLog.emit("endpoint", [("group", jsonEscaped(name)), ("endpoint", jsonEscaped(e.url.description)),
                                       ("in_pool", ok ? "true" : "false"), ("reason", jsonEscaped(why.detail))])
        }
        if let t { onTransition(self, t) }
        return true
    }

    /// `body` on the book, under its lock, while `endpoint` is this group's; nil, with nothing done,
    /// when a reload handed it to a newer generation.
    private func whileHeld<T>(_ endpoint: EndpointState, _ body: (inout Book) -> T) -> T? {
        book.withLock { b in endpoint.isHeld(by: self) ? body(&b) : nil }
    }
}

/// A reference that does not keep its endpoint alive.
struct WeakEndpoint {
    weak var endpoint: EndpointState?
}

/// How one endpoint is probed: its group's `probe` settings over the global ones.
struct ProbeSettings: Equatable {
    /// The probe's whole URL: the endpoint, its base path and the probe path.
    var url: String
    var interval: Double
    var timeout: Double
    var connectTimeout: Double
    var caFile: String?
    var fall: Int
    var rise: Int

    /// What `group` sets, else the global `probe` section and the connect timeout and CA file of `calls`.
    init(_ probe: GatewayConfig.Probe, calls: GatewayConfig.Calls, group: UpstreamGroup?, url: UpstreamURL) {
        let own = group?.probe
        self.url = url.origin + url.basePath + (own?.path ?? probe.path)
        interval = own?.interval ?? probe.interval
        timeout = own?.timeout ?? probe.timeout
        let asCalls = TransferLimits(calls, group: group)
        connectTimeout = min(asCalls.connectTimeout, timeout)
        caFile = asCalls.caFile
        fall = own?.fall ?? probe.fall
        rise = own?.rise ?? probe.rise
    }

    /// A probe timeout is excused while live calls got answers within the last probe interval (or
    /// the probe timeout, when longer: the probe's own wait must fit in the window).
    var liveWindow: Double { max(interval, timeout) }
}

/// Every upstream group of one configuration generation, in the config file's order (the group
/// `--upstream` makes first). Immutable; a reload makes a new one that carries the endpoints (and
/// their states) of groups that stay.
final class UpstreamGroups: Sendable {
    let all: [UpstreamGroupState]
    /// Each endpoint's probe settings, by group and endpoint position.
    let probes: [[ProbeSettings]]
    /// Whether the config file's `routes` choose among the groups (else one group serves every call).
    let routed: Bool

    /// The groups `config` names. An endpoint of a group of `previous` with the same name and URL
    /// keeps its state (with the new thresholds); a new one starts unknown. `onTransition` hears
    /// every group's changes, with the group.
    init(_ config: GatewayConfig, previous: UpstreamGroups? = nil,
         onTransition: @escaping @Sendable (UpstreamGroupState, ReachabilityTransition) -> Void) {
        var wanted: [(name: String, endpoints: [UpstreamGroup.Endpoint], group: UpstreamGroup?)] = []
        if config.routing?.hasDefaultGroup ?? true { wanted.append(("default", [.init(url: config.upstream)], nil)) }
        for g in config.routing?.upstreams ?? [] { wanted.append((g.name, g.endpoints, g)) }
        var groups: [UpstreamGroupState] = []
        var probes: [[ProbeSettings]] = []
        for w in wanted {
            let old = previous?.all.first { $0.name == w.name }
            var settings: [ProbeSettings] = []
            var states: [EndpointState] = []
            var carriedFrom: [Int?] = []
            for endpoint in w.endpoints {
                let s = ProbeSettings(config.probe, calls: config.calls, group: w.group, url: endpoint.url)
                settings.append(s)
                if let j = old?.endpoints.firstIndex(where: { RoutingConfig.sameEndpoint($0.url, endpoint.url) }), let kept = old?.endpoints[j] {
                    kept.reachability.setThresholds(fall: s.fall, rise: s.rise, liveWindow: s.liveWindow)
                    states.append(kept)
                    carriedFrom.append(j)
                    continue
                }
                // Weak: the endpoint holds its machine, which holds this callback.
                let holder = Locked(WeakEndpoint())
                let reachability = Reachability(fall: s.fall, rise: s.rise, liveWindow: s.liveWindow, clock: { monotonicNow() }) { t in
                    guard let e = holder.withLock({ $0.endpoint }) else { return }
                    e.withOwner { $0.endpointChanged(e, t) }
                }
                let state = EndpointState(url: endpoint.url, reachability: reachability)
                holder.withLock { $0.endpoint = state }
                states.append(state)
                carriedFrom.append(nil)
            }
            // Runs under the old group's lock in `handOver`: it must not call anything of `old`.
            let make = { (ejection: EjectionBook?, prior: ReachabilitySnapshot?) in
                UpstreamGroupState(name: w.name, endpoints: states, weights: w.endpoints.map(\.weight),
                                   balance: w.group?.balance ?? .roundRobin, ejection: ejection, prior: prior,
                                   onTransition: onTransition)
            }
            if let g = w.group {
                let eject = EjectionBook.Settings(g.eject, rise: settings.first?.rise ?? config.probe.rise)
                if let old, old.ejects {
                    // The book is read and the endpoints taken over under the old group's lock.
                    groups.append(old.handOver { book, prior in make(book.carried(to: carriedFrom, settings: eject), prior) })
                } else {
                    groups.append(make(EjectionBook(count: states.count, settings: eject), old?.snapshot))
                }
            } else {
                groups.append(make(nil, old?.snapshot))
            }
            probes.append(settings)
        }
        // Every group of the previous generation is replaced or gone.
        for g in previous?.all ?? [] { g.retire() }
        all = groups
        self.probes = probes
        routed = config.routing != nil
    }

    /// The group named `name`.
    func named(_ name: String) -> UpstreamGroupState? { all.first { $0.name == name } }

    /// Announces what the reload that made this generation changed of each group's state.
    func announceReload() {
        for g in all { g.announceReload() }
    }

    /// What apps read as the top-level state: the only group's as it is; across several, unreachable
    /// only when every group is (since the latest of them went), reachable when any is (since the
    /// earliest of those), else unknown.
    var overall: ReachabilitySnapshot {
        if all.count == 1 { return all[0].snapshot }
        let snaps = all.map(\.snapshot)
        if snaps.allSatisfy({ $0.state == .unreachable }) {
            let latest = snaps.max { $0.since < $1.since }!
            return ReachabilitySnapshot(state: .unreachable, since: latest.since, reason: "every upstream group is unreachable",
                                        publicReason: "every upstream group is unreachable")
        }
        let state: ReachabilityState = snaps.contains { $0.state == .reachable } ? .reachable : .unknown
        let since = snaps.filter { $0.state == state }.map(\.since).min() ?? snaps[0].since
        return ReachabilitySnapshot(state: state, since: since, reason: nil, publicReason: nil)
    }
}

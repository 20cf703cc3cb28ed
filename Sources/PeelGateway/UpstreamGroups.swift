import PeelIO

/// One upstream group as every worker shares it: where its calls go and what Peel believes about it
/// (its probes and its live calls feed its own `Reachability`, so one backend going down leaves the
/// others' routes alone). Kept across reloads while the group keeps its name and endpoint, so a
/// reload does not forget that a backend is down.
final class UpstreamGroupState: Sendable {
    /// The group's name in the config file; `default` for the group `--upstream` makes.
    let name: String
    /// Its endpoint's URL (each worker parses its own copy into an `UpstreamEndpoint`).
    let url: UpstreamURL
    let reachability: Reachability

    init(name: String, url: UpstreamURL, reachability: Reachability) {
        self.name = name
        self.url = url
        self.reachability = reachability
    }
}

/// How one group is probed: its own `probe` settings over the global ones.
struct ProbeSettings: Equatable {
    /// The probe's whole URL: the endpoint, its base path and the probe path.
    var url: String
    var interval: Double
    var timeout: Double
    var connectTimeout: Double
    var caFile: String?
    var fall: Int
    var rise: Int

    init(_ config: GatewayConfig, group: UpstreamGroup?, url: UpstreamURL) {
        let probe = group?.probe
        self.url = url.origin + url.basePath + (probe?.path ?? config.probePath)
        interval = probe?.interval ?? config.probeInterval
        timeout = probe?.timeout ?? config.probeTimeout
        connectTimeout = min(config.connectTimeout, timeout)
        caFile = config.caFile
        fall = probe?.fall ?? config.fall
        rise = probe?.rise ?? config.rise
    }

    /// A probe timeout is excused while live calls got answers within the last probe interval (or
    /// the probe timeout, when longer: the probe's own wait must fit in the window).
    var liveWindow: Double { max(interval, timeout) }
}

/// Every upstream group of one configuration generation, in the config file's order (the group
/// `--upstream` makes first). Immutable; a reload makes a new one that keeps the states of groups
/// that stay.
final class UpstreamGroups: Sendable {
    let all: [UpstreamGroupState]
    /// Each group's probe settings, by position in `all`.
    let probes: [ProbeSettings]
    /// Whether the config file's `routes` choose among the groups (else one group serves every call).
    let routed: Bool

    /// The groups `config` names. A group of `previous` with the same name and endpoint keeps its
    /// state (with the new thresholds); a new one starts unknown. `onTransition` hears every
    /// group's changes, with the group.
    init(_ config: GatewayConfig, previous: UpstreamGroups? = nil,
         onTransition: @escaping @Sendable (UpstreamGroupState, ReachabilityTransition) -> Void) {
        var wanted: [(name: String, url: UpstreamURL, group: UpstreamGroup?)] = []
        if config.routing?.hasDefaultGroup ?? true { wanted.append(("default", config.upstream, nil)) }
        for g in config.routing?.upstreams ?? [] {
            guard let first = g.endpoints.first else { continue }
            wanted.append((g.name, first.url, g))
        }
        var states: [UpstreamGroupState] = []
        var probes: [ProbeSettings] = []
        for w in wanted {
            let settings = ProbeSettings(config, group: w.group, url: w.url)
            probes.append(settings)
            if let kept = previous?.all.first(where: { $0.name == w.name && RoutingConfig.sameEndpoint($0.url, w.url) }) {
                kept.reachability.setThresholds(fall: settings.fall, rise: settings.rise, liveWindow: settings.liveWindow)
                states.append(kept)
                continue
            }
            let holder = Locked<UpstreamGroupState?>(nil)
            let reachability = Reachability(fall: settings.fall, rise: settings.rise, liveWindow: settings.liveWindow,
                                            clock: { monotonicNow() }) { t in
                if let g = holder.withLock({ $0 }) { onTransition(g, t) }
            }
            let state = UpstreamGroupState(name: w.name, url: w.url, reachability: reachability)
            holder.withLock { $0 = state }
            states.append(state)
        }
        all = states
        self.probes = probes
        routed = config.routing != nil
    }

    /// The group named `name`.
    func named(_ name: String) -> UpstreamGroupState? { all.first { $0.name == name } }

    /// What apps read as the top-level state: the only group's as it is; across several, unreachable
    /// only when every group is (each since its own transition: the latest of them), reachable when
    /// any is, else unknown.
    var overall: ReachabilitySnapshot {
        if all.count == 1 { return all[0].reachability.snapshot }
        let snaps = all.map(\.reachability.snapshot)
        if snaps.allSatisfy({ $0.state == .unreachable }) {
            let latest = snaps.max { $0.since < $1.since }!
            return ReachabilitySnapshot(state: .unreachable, since: latest.since, reason: "every upstream group is unreachable",
                                        publicReason: "every upstream group is unreachable")
        }
        let state: ReachabilityState = snaps.contains { $0.state == .reachable } ? .reachable : .unknown
        // Since the earliest group in that state began it.
        let since = snaps.filter { $0.state == state }.map(\.since).min() ?? snaps[0].since
        return ReachabilitySnapshot(state: state, since: since, reason: nil, publicReason: nil)
    }
}

/// Passive ejection of a group's endpoints, pure: evidence from live calls and probes in, which
/// endpoints are out of the pool for it; the clock is passed in, so tests need no sleeps.
///
/// Evidence is connect-level only (issue 17's rule: a busy or buggy endpoint is never ejected).
/// After `after` consecutive connect-level failures of live calls an endpoint is ejected for `base`
/// seconds, doubling with each ejection that follows within `max` seconds of its return, up to
/// `max`. `maxShare` caps how many endpoints ejection holds out at once (rounded down; one may
/// always be). An ejected endpoint comes back after `rise` passing probes, no sooner than its
/// ejection ends.
struct EjectionBook: Equatable {
    struct Settings: Equatable {
        var after: Int
        var base: Double
        var max: Double
        var maxShare: Double
        var rise: Int

        init(_ eject: UpstreamGroup.Eject, rise: Int) {
            after = Swift.max(1, eject.after)
            base = eject.base
            max = Swift.max(eject.base, eject.max)
            maxShare = eject.maxShare
            self.rise = Swift.max(1, rise)
        }
    }

    struct Entry: Equatable {
        /// Connect-level failures of live calls in a row.
        var failures = 0
        /// Ejected until then (clock seconds); nil while in the pool.
        var until: Double?
        /// Probes passed since the ejection began.
        var passes = 0
        /// Ejections so far (for /status).
        var ejections = 0
        /// Ejections in a row, each within `max` seconds of the last return (the doubling count).
        var streak = 0
        /// When it last came back.
        var returned: Double?
    }

    var settings: Settings
    private(set) var entries: [Entry]

    init(count: Int, settings: Settings) {
        self.settings = settings
        entries = Array(repeating: Entry(), count: count)
    }

    /// Endpoints ejection holds out now.
    var ejectedCount: Int { entries.reduce(0) { $0 + ($1.until == nil ? 0 : 1) } }

    func isEjected(_ i: Int) -> Bool { entries[i].until != nil }

    /// How many endpoints ejection may hold out at once: `maxShare` of them, rounded down, at least one.
    var cap: Int { Swift.max(1, Int((Double(entries.count) * settings.maxShare).rounded(.down))) }

    /// A live call to endpoint `i` could not connect. True when this ejects it.
    mutating func liveFailed(_ i: Int, at now: Double) -> Bool {
        entries[i].failures += 1
        guard entries[i].until == nil, entries[i].failures >= settings.after, ejectedCount < cap else { return false }
        var e = entries[i]
        if let back = e.returned, now - back > settings.max { e.streak = 0 }
        let length = Swift.min(settings.max, settings.base * Double(1 << Swift.min(e.streak, 30)))
        e.until = now + length
        e.passes = 0
        e.ejections += 1
        e.streak += 1
        e.failures = 0
        entries[i] = e
        return true
    }

    /// A live call to endpoint `i` reached it (any answer): its failure run ends.
    mutating func liveAnswered(_ i: Int) {
        entries[i].failures = 0
    }

    /// A probe of endpoint `i` passed. True when this brings it back.
    mutating func probePassed(_ i: Int, at now: Double) -> Bool {
        guard let until = entries[i].until else { return false }
        entries[i].passes += 1
        guard now >= until, entries[i].passes >= settings.rise else { return false }
        entries[i].until = nil
        entries[i].passes = 0
        // Failures of calls that were in flight while it was out do not count toward the next one.
        entries[i].failures = 0
        entries[i].returned = now
        return true
    }

    /// A probe of endpoint `i` failed: the passes towards its return start over.
    mutating func probeFailed(_ i: Int) {
        if entries[i].until != nil { entries[i].passes = 0 }
    }

    /// The same endpoints' entries under new settings (a reload): an endpoint that stays keeps its
    /// entry; `map[i]` is the old position of new endpoint `i`, nil for a new one.
    func carried(to map: [Int?], settings: Settings) -> EjectionBook {
        var next = EjectionBook(count: map.count, settings: settings)
        for (i, old) in map.enumerated() { if let old { next.entries[i] = entries[old] } }
        return next
    }
}

/// A group's state from its endpoints': unreachable when none is available (each is out when its
/// probes say unreachable or ejection holds it out), reachable when an available one is reachable,
/// else unknown. The reason is the last endpoint's words when the group goes down.
enum GroupVerdict {
    static func state(available: [Bool], states: [ReachabilityState]) -> ReachabilityState {
        var anyAvailable = false
        for (i, ok) in available.enumerated() where ok {
            anyAvailable = true
            if states[i] == .reachable { return .reachable }
        }
        return anyAvailable ? .unknown : .unreachable
    }
}

import PeelIO

/// One worker's view of a group for one configuration generation: each endpoint parsed for curl,
/// and the choice of endpoint for each attempt of a call. Loop-thread only, so the balancing state
/// needs no lock; each worker balances its own share of the calls.
final class EndpointPicker {
    let group: UpstreamGroupState
    /// Parallel to `group.endpoints`.
    let endpoints: [UpstreamEndpoint]
    /// Smooth weighted round robin's running weights (nginx's algorithm: every endpoint gains its
    /// weight per pick, the highest is taken and loses the total, so weights 1 and 2 go b a b, never
    /// a burst of b).
    private var current: [Int]
    private var random = SystemRandomNumberGenerator()
    /// Whether every endpoint has the same weight, which decides how `least_request` draws.
    private let equalWeights: Bool

    /// `worker`: which worker's picker this is; each starts at another point of the cycle.
    init(_ group: UpstreamGroupState, worker: Int = 0) throws(PeelIOError) {
        self.group = group
        var built: [UpstreamEndpoint] = []
        for e in group.endpoints { built.append(try UpstreamEndpoint(origin: e.url.origin, basePath: e.url.basePath)) }
        endpoints = built
        current = Array(repeating: 0, count: built.count)
        equalWeights = Set(group.weights).count <= 1
        // Each worker starts at its own point of the cycle: starting every one at the first
        // endpoint would send that one the first call of each worker (and, after each reload under
        // light traffic, more than its share).
        let cycle = group.weights.reduce(0, +)
        if built.count > 1 && cycle > 0 {
            for _ in 0..<(worker % cycle) { advance() }
        }
    }

    /// One step of smooth weighted round robin over every endpoint, available or not.
    private func advance() {
        var best = 0
        var total = 0
        for i in current.indices {
            current[i] += group.weights[i]
            total += group.weights[i]
            if current[i] > current[best] { best = i }
        }
        current[best] -= total
    }

    /// The endpoint for the next attempt of a call that has tried the endpoints in `tried` (a bit
    /// per position); nil when no endpoint it has not tried is available.
    func pick(tried: UInt64 = 0) -> Int? {
        let all = group.endpoints
        if all.count == 1 { return tried == 0 && all[0].available.load(ordering: .relaxed) ? 0 : nil }
        switch group.balance {
        case .roundRobin: return roundRobin(tried)
        case .leastRequest: return leastRequest(tried)
        }
    }

    private func candidate(_ i: Int, _ tried: UInt64) -> Bool {
        (i >= 64 || tried & (1 << UInt64(i)) == 0) && group.endpoints[i].available.load(ordering: .relaxed)
    }

    private func roundRobin(_ tried: UInt64) -> Int? {
        smooth(tried) { group.weights[$0] }
    }

    /// One pick of smooth weighted round robin among the candidates, with `weight` read per pick.
    @inline(__always)
    private func smooth(_ tried: UInt64, _ weight: (Int) -> Int) -> Int? {
        var best: Int?
        var total = 0
        for i in current.indices where candidate(i, tried) {
            let w = weight(i)
            current[i] += w
            total += w
            if best == nil || current[i] > current[best!] { best = i }
        }
        if let best { current[best] -= total }
        return best
    }

    /// Equal weights: power of two choices (Mitzenmacher): two endpoints at random, the one with
    /// fewer calls in flight (all workers') wins; a tie goes to the first drawn. Unequal weights:
    /// two random draws would ignore them while nothing is in flight, so each endpoint's weight is
    /// divided by its calls in flight plus one and the smooth round robin above takes turns by that
    /// (Envoy's rule for weighted least request, with its default bias of 1): idle endpoints share
    /// calls by weight, a loaded one gets fewer.
    private func leastRequest(_ tried: UInt64) -> Int? {
        if !equalWeights {
            // Scaled by 2^20 so that the quotient keeps its precision under thousands of calls in
            // flight (long streams count until they end); at least 1, so that a group loaded past
            // that still takes turns instead of sending everything to one endpoint.
            return smooth(tried) { i in
                max(1, (group.weights[i] << 20) / (group.endpoints[i].inFlight.load(ordering: .relaxed) + 1))
            }
        }
        let open = group.endpoints.indices.filter { candidate($0, tried) }
        guard let only = open.first else { return nil }
        if open.count == 1 { return only }
        let a = Int.random(in: 0..<open.count, using: &random)
        var b = Int.random(in: 0..<(open.count - 1), using: &random)
        if b >= a { b += 1 }
        let x = open[a], y = open[b]
        return group.endpoints[y].inFlight.load(ordering: .relaxed) < group.endpoints[x].inFlight.load(ordering: .relaxed) ? y : x
    }
}

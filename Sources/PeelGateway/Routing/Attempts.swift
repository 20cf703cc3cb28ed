import PeelIO

/// One call's attempts across its route's group, beside the `EndpointPicker` that chooses for
/// them (Envoy's load-balancer context: the picker balances, the context remembers the hosts a
/// request tried and what it sent, and says whether another may be chosen). A failed attempt is
/// followed by another only when `next` says so, and the forwarder schedules it; nothing here sends.
struct Attempts {
    /// Attempts one call may make across a group's endpoints.
    static let limit = 3

    /// What the first attempt sent, kept only where another endpoint could take it.
    private(set) var sent: UpstreamRequest?

    /// Endpoints tried, a bit per position.
    private(set) var tried: UInt64 = 0
    /// Attempts so far (the access log's `attempts`).
    private(set) var count = 0
    /// The endpoint of the latest attempt, and its position in the group.
    private(set) var endpoint: EndpointState?
    private(set) var index = 0
    /// Whether the latest attempt still counts in its endpoint's calls in flight.
    private var holding = false

    /// Keeps the request the first attempt sends when the group has another endpoint to try.
    mutating func keep(_ request: UpstreamRequest, endpoints: Int) {
        if endpoints > 1 { sent = request }
    }

    /// An attempt starts on `e` (position `i`): it counts in `e`'s calls in flight until `end`.
    mutating func start(on e: EndpointState, at i: Int) {
        end()
        endpoint = e
        index = i
        if i < 64 { tried |= 1 << UInt64(i) }
        count += 1
        e.inFlight.add(1, ordering: .relaxed)
        holding = true
    }

    /// The latest attempt ended (answered, failed or cancelled); once only.
    mutating func end() {
        guard holding, let e = endpoint else { return }
        holding = false
        e.inFlight.subtract(1, ordering: .relaxed)
    }

    /// The endpoint for another attempt after the latest failed with `failure`, or nil. A
    /// connection that could not be made sent nothing, so any method moves on; one that was lost
    /// after the request went out and before any answer byte moves an idempotent method only
    /// (RFC 9110 §9.2.2), never POST or PATCH. At most `limit` attempts, each on an endpoint the call
    /// has not tried. `wentOut`: the request reached a connection (curl's own retry of it on a
    /// reused connection that died counts as sent).
    func next(after failure: UpstreamFailure, wentOut: Bool, idempotent: Bool, picker: EndpointPicker) -> Int? {
        guard count < Self.limit, sent != nil else { return nil }
        switch failure {
        case .refused, .connectTimeout, .dns, .tls:
            if wentOut && !idempotent { return nil }
        case .reset, .notResent:
            guard idempotent else { return nil }
        default:
            return nil
        }
        return picker.pick(tried: tried)
    }
}

import PeelIO
import Synchronization

/// One group's event: `{"upstream":…,"state":…,"since":…,"reason":…}`. `since` is on the
/// monotonic clock and is written as wall-clock RFC 3339, like /status.
func reachabilityDocument(state: ReachabilityState, since: Double, reason: String?, upstream: String) -> String {
    "{\"upstream\":\(jsonEscaped(upstream))," + reachabilityMembers(state: state, since: since, reason: reason) + "}"
}

/// The document's three members, without braces.
func reachabilityMembers(state: ReachabilityState, since: Double, reason: String?) -> String {
    reachabilityMembers(state: state.description, since: since, reason: reason)
}

/// The same, for a state word of the stream's own (`removed`).
private func reachabilityMembers(state: String, since: Double, reason: String?) -> String {
    let wall = wallNow() - (monotonicNow() - since)
    return "\"state\":\"\(state)\",\"since\":\"\(rfc3339(wall))\",\"reason\":\(reason.map(jsonEscaped) ?? "null")"
}

/// The group's announcement when a reload removed it: its last event, so an app drops its flag.
func reachabilityRemovedDocument(upstream: String, at: Double) -> String {
    "{\"upstream\":\(jsonEscaped(upstream))," + reachabilityMembers(state: "removed", since: at, reason: "configuration changed") + "}"
}

/// The public document: the top-level state, and every group's own under `upstreams` (the group
/// `--upstream` makes is `default`), so an app reads one shape whatever the configuration.
func reachabilityOverview(_ groups: UpstreamGroups) -> String {
    let top = groups.overall
    // Each backend's own state, with coarse reasons only (no address, port or URL).
    return "{" + reachabilityMembers(state: top.state, since: top.since, reason: top.publicReason) + ",\"upstreams\":{"
        + groups.all.map { g in
            let s = g.snapshot
            return jsonEscaped(g.name) + ":{" + reachabilityMembers(state: s.state, since: s.since, reason: s.publicReason) + "}"
        }.joined(separator: ",") + "}}"
}

/// One group's state as an event stream sends it.
struct ReachabilityEvent {
    var upstream: String
    var state: ReachabilityState
    var since: Double
    var reason: String?
}

/// Whose share of the event-stream places a connection takes (`IPNetwork.clientGroup`).
func streamClient(_ address: String) -> String { IPNetwork.clientGroup(address) }

/// Open event streams across all workers, held to `--max-streams` in all and to
/// `--max-streams-per-client` for each client address (1000 streams that never read,
/// from one address, locked every real app out). Both bounds change on reload.
final class StreamBudget: Sendable {
    /// Why a place was refused.
    enum Refusal: Error, Equatable {
        /// Every one of `limit` places is taken.
        case full
        /// This client already holds `perClient` places.
        case clientFull
    }

    private struct State {
        var open = 0
        var byClient: [String: Int] = [:]
        var limit: Int
        var perClient: Int
    }
    private let state: Locked<State>

    init(limit: Int, perClient: Int = .max) {
        state = Locked(State(limit: limit, perClient: perClient))
    }

    /// The bound in all.
    var limit: Int { state.withLock { $0.limit } }
    /// The bound for one client.
    var perClient: Int { state.withLock { $0.perClient } }

    /// New bounds (a reload); streams already open stay open.
    func setLimits(total: Int, perClient: Int) {
        state.withLock {
            $0.limit = total
            $0.perClient = perClient
        }
    }

    /// Takes a place for `client`, or says which bound refused it.
    func take(client: String) -> Result<Void, Refusal> {
        state.withLock { s in
            let mine = s.byClient[client, default: 0]
            if mine >= s.perClient { return .failure(.clientFull) }
            if s.open >= s.limit { return .failure(.full) }
            s.open += 1
            s.byClient[client] = mine + 1
            return .success(())
        }
    }

    /// Gives `client`'s place back.
    func give(client: String) {
        state.withLock { s in
            s.open -= 1
            let left = s.byClient[client, default: 1] - 1
            s.byClient[client] = left > 0 ? left : nil
        }
    }

    /// Streams open now.
    var count: Int { state.withLock { $0.open } }
    /// Distinct clients holding streams now.
    var clients: Int { state.withLock { $0.byClient.count } }
}

/// One worker's server-sent-event streams of reachability (WHATWG HTML §9.2): the current state at
/// once, then every transition, and a comment line as a heartbeat so idle intermediaries and clients
/// can tell a quiet stream from a dead one. Loop-thread only.
final class ReachabilityStreams {
    private let loop: EventLoop
    private let budget: StreamBudget
    private let heartbeatInterval: Double
    private var streams: [ObjectIdentifier: Subscriber] = [:]
    private var heartbeat: LoopTimer?
    /// Set at drain start: every stream is finished and no new one opens.
    private(set) var closed = false

    /// A stream unread past this many bytes belongs to a client that stopped reading: it is ended
    /// rather than buffered without bound (events are ~150 bytes, so this is hundreds of them).
    static let maxBuffered = 64 * 1024

    private final class Subscriber {
        let stream: ReplyStream
        /// Whose place it holds in the budget.
        let client: String
        /// Clock reading of the newest state sent, by group, so an older transition that arrives
        /// late (the workers' mailboxes are not ordered with each other) is not sent after a newer one.
        var sentAt: [String: Double]
        init(stream: ReplyStream, client: String, sentAt: [String: Double]) {
            self.stream = stream
            self.client = client
            self.sentAt = sentAt
        }
    }

    init(loop: EventLoop, budget: StreamBudget, heartbeat: Double) {
        self.loop = loop
        self.budget = budget
        heartbeatInterval = heartbeat
    }

    /// Streams open on this worker.
    var count: Int { streams.count }

    /// Takes a place in the budget for a new stream of `client`'s; refused while draining (as full)
    /// or over a bound.
    func reserve(client: String) -> Result<Void, StreamBudget.Refusal> {
        closed ? .failure(.full) : budget.take(client: client)
    }

    /// Adopts `stream` (its place already reserved for `client`) and sends it the current states,
    /// one event per group.
    func adopt(_ stream: ReplyStream, client: String, current: [ReachabilityEvent]) {
        let key = ObjectIdentifier(stream)
        var sentAt: [String: Double] = [:]
        for e in current { sentAt[e.upstream] = e.since }
        let subscriber = Subscriber(stream: stream, client: client, sentAt: sentAt)
        streams[key] = subscriber
        stream.onClientGone = { [weak self] in self?.forget(key) }
        var bytes: [UInt8] = []
        for e in current { bytes += event(e) }
        send(subscriber, bytes)
        if streams.count == 1 { armHeartbeat() }
    }

    /// Gives the place back when the reserved stream could not be started.
    func release(client: String) { budget.give(client: client) }

    /// Sends group `group`'s transition to every stream on this worker.
    func broadcast(_ t: ReachabilityTransition, group: String) {
        send(group: group, at: t.at, event(ReachabilityEvent(upstream: group, state: t.to, since: t.at, reason: t.publicReason)))
    }

    /// Tells every stream on this worker that a reload removed group `group` (at `at`): nothing
    /// more comes of it, unless a later reload brings it back.
    func announceRemoved(group: String, at: Double) {
        send(group: group, at: at, event(reachabilityRemovedDocument(upstream: group, at: at)))
    }

    private func send(group: String, at: Double, _ bytes: [UInt8]) {
        guard !closed, !streams.isEmpty else { return }
        for s in Array(streams.values) where at > s.sentAt[group, default: -.infinity] {
            s.sentAt[group] = at
            send(s, bytes)
        }
    }

    /// Ends every stream cleanly (the last chunk goes out) and refuses new ones: drain start.
    func finishAll() {
        closed = true
        heartbeat?.cancel()
        for key in Array(streams.keys) {
            let s = streams[key]
            forget(key)
            s?.stream.finish()
        }
    }

    private func event(_ e: ReachabilityEvent) -> [UInt8] {
        event(reachabilityDocument(state: e.state, since: e.since, reason: e.reason, upstream: e.upstream))
    }

    private func event(_ document: String) -> [UInt8] {
        Array("event: reachability\ndata: \(document)\n\n".utf8)
    }

    private func send(_ s: Subscriber, _ bytes: [UInt8]) {
        if s.stream.bufferedBytes > Self.maxBuffered {
            forget(ObjectIdentifier(s.stream))
            s.stream.finish()
            return
        }
        s.stream.write(bytes)
    }

    private func forget(_ key: ObjectIdentifier) {
        guard let s = streams.removeValue(forKey: key) else { return }
        s.stream.onClientGone = nil
        budget.give(client: s.client)
        if streams.isEmpty { heartbeat?.cancel() }
    }

    private func armHeartbeat() {
        if heartbeat == nil {
            heartbeat = LoopTimer(loop: loop) { [weak self] in self?.beat() }
        }
        heartbeat?.arm(seconds: heartbeatInterval)
    }

    private func beat() {
        guard !closed, !streams.isEmpty else { return }
        let comment = Array(": heartbeat\n\n".utf8)
        for s in Array(streams.values) { send(s, comment) }
        if !streams.isEmpty { armHeartbeat() }
    }
}

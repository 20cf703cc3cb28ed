import PeelEnvelope
import PeelIO

/// One worker's tunnels: those opening (their dial) and those open, by call, and the process-wide
/// bound they are held to (`max_tunnels`, `max_tunnels_per_client`). Loop-thread only.
final class TunnelTable {
    /// The places, shared by every worker; the worker sets it once at start.
    var budget = StreamBudget(limit: 10_000, perClient: 256)
    var dialing: [ObjectIdentifier: Dialing] = [:]
    var open: [ObjectIdentifier: Tunnel] = [:]
    /// Set from SIGTERM on, before the listeners close (`drain_delay`): no new tunnel opens.
    var refusing = false

    /// A tunnel still dialing its upstream: the client waits for an answer.
    struct Dialing {
        let dial: TunnelDial
        let call: Call
        /// The client's place in `budget`.
        let client: String
    }

    /// Shutdown past `shutdown_timeout`: every open tunnel closes (each reports, and is logged, as
    /// it goes); the dials stop, and are handed back for their clients to be answered.
    func closeAll() -> [Dialing] {
        for t in Array(open.values) { t.end(.shutdown) }
        let stopped = Array(dialing.values)
        dialing = [:]
        for d in stopped {
            d.dial.cancel()
            budget.give(client: d.client)
        }
        return stopped
    }
}

// Upgrades (WebSockets) passed through: the route's group is dialed like a call's (the picker,
// ejection, another endpoint only while nothing went out), the 101 is relayed and the connection
// becomes a tunnel; any other answer is judged like a call's.
extension Forwarder {
    func openTunnel(_ call: Call, _ request: UpstreamRequest, protocol name: String) {
        // From the start of a drain, no new tunnel: it would only be cut at shutdown_timeout.
        if draining || tunnels.refusing { return refuseDraining(call) }
        let client = streamClient(call.exchange.clientAddress)
        if case .failure(let refusal) = tunnels.budget.take(client: client) {
            metrics.recordRefusal(refusal == .clientFull ? "max_tunnels_per_client" : "max_tunnels")
            return answer(call, .tooManyTunnels(perClient: refusal == .clientFull))
        }
        dial(call, request, protocol: name, client: client)
    }

    /// The drain's answer to an upgrade: 503 `server-busy`, counted as `tunnel_draining`.
    func refuseDraining(_ call: Call) {
        metrics.recordRefusal("tunnel_draining")
        answer(call, .serverBusy("Peel is shutting down; open the WebSocket again"))
    }

    /// Shutdown past `shutdown_timeout`: open tunnels close; those still dialing get the drain's
    /// 503 (the client is waiting for an answer to its upgrade, as a call waits for its answer).
    func endTunnels() {
        for d in tunnels.closeAll() where !d.call.done {
            d.call.exchange.onClientGone = nil
            refuseDraining(d.call)
        }
    }

    private func dial(_ call: Call, _ request: UpstreamRequest, protocol name: String, client: String) {
        let picker = call.route.picker
        guard let i = picker.pick(tried: call.attempts.tried) else {
            tunnels.budget.give(client: client)
            return answerUnavailable(call)
        }
        call.attempts.start(on: call.route.group.endpoints[i], at: i)
        let key = ObjectIdentifier(call)
        let sent = i == 0 ? request : request.retargeted(to: picker.endpoints[i])
        // A non-101 answer is held under the memory budget, as a call's answer is.
        var defaults = UpstreamOptions()
        defaults.budget = upstream.budget
        let d = TunnelDial(loop: upstream.loop, request: sent, upgrade: name, defaults: defaults,
                           clientAddress: call.plan.clientAddress) { [self] opening in
            tunnels.dialing[key] = nil
            opened(call, opening, request, protocol: name, client: client)
        }
        tunnels.dialing[key] = TunnelTable.Dialing(dial: d, call: call, client: client)
        call.exchange.onClientGone = { [self] in
            tunnels.dialing.removeValue(forKey: key)?.dial.cancel()
            tunnels.budget.give(client: client)
            record(call, status: 499, kind: "client-closed", bytes: 0, code: nil)
        }
    }

    private func opened(_ call: Call, _ opening: TunnelOpening, _ request: UpstreamRequest, protocol name: String, client: String) {
        guard !call.done else {
            tunnels.budget.give(client: client)
            if case .switched(let up) = opening { up.close() }
            return
        }
        switch opening {
        case .failed(let failure, _) where failure == .overBudget || failure == .overClientShare:
            // Peel's own bound, not the upstream's failure: refused as a call's answer would be.
            tunnels.budget.give(client: client)
            upstreamFinished(call, .failure(failure))
        case .failed(let failure, let wentOut):
            metrics.recordUpstreamError(failure.reason)
            if failure.isTransportFailure { call.attempts.endpoint?.liveFailed(failure) }
            if failure.answeredBadly { call.attempts.endpoint?.liveAnswered() }
            if call.attempts.next(after: failure, wentOut: wentOut, idempotent: true, picker: call.route.picker) != nil {
                return dial(call, request, protocol: name, client: client)
            }
            tunnels.budget.give(client: client)
            call.exchange.onClientGone = nil
            answer(call, Self.outcome(of: failure))
        case .answered(let response):
            // Refused (or answered otherwise): judged like any answer, with the backend's words.
            tunnels.budget.give(client: client)
            upstreamFinished(call, .success(response))
        case .switched(let up):
            call.attempts.endpoint?.liveAnswered()
            call.upstream.status = 101
            call.attempts.end()
            var fields = ReplyFields(capacity: up.fields.count + 1)
            for f in up.fields where !Self.notRelayedOn101.contains(f.name.lowercased()) { fields.add(f.name, f.value) }
            fields.add("X-Request-Id", call.plan.requestId)
            var limits = TunnelLimits()
            limits.idleTimeout = call.route.tunnels.idleTimeout
            let key = ObjectIdentifier(call)
            let t = call.exchange.startTunnel(fields: fields, upstream: up, limits: limits) { [self] report in
                tunnels.open[key] = nil
                tunnels.budget.give(client: client)
                call.notes.tunnel = report
                record(call, status: 101, kind: "tunnel", bytes: report.bytesOut, code: nil)
            }
            if let t {
                if !call.done { tunnels.open[key] = t }
            } else if !call.done {
                tunnels.budget.give(client: client)
                record(call, status: 499, kind: "client-closed", bytes: 0, code: nil)
            }
        }
    }

    /// The upstream 101's fields that are its hop's, not the tunnel's (RFC 9110 §7.6.1); Connection
    /// is written by the connection layer, and X-Request-Id is Peel's.
    static let notRelayedOn101: Set<String> = ["connection", "keep-alive", "proxy-connection", "transfer-encoding",
                                                "content-length", "x-request-id", "date"]
}

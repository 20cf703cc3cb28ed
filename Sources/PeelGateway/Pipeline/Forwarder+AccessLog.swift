import PeelEnvelope
import PeelIO

extension Forwarder {
    /// A code as the log writes it: a string code from a failure body is bounded like a message.
    static func logged(_ code: EnvelopeCode) -> String {
        if case .string(let s) = code, s.utf8.count > privateMessageBytes { return jsonEscaped(bounded(s)) }
        return code.json
    }

    /// Counts the answer and writes its access-log line: `code` is the one Peel answered with (a
    /// problem's), `upstream_code` the envelope code as the upstream sent it, null when it sent none.
    func record(_ call: Call, status: Int, kind: String, bytes: Int, code: EnvelopeCode?, cut: String? = nil) {
        guard !call.done else { return }
        // A cancelled attempt (the client left, a shutdown cut it) ends here.
        call.attempts.end()
        // The one place a call ends: what it ended as follows from how it is logged.
        switch kind {
        case "client-closed": call.state = .clientGone
        case "passthrough-cut": call.state = .cut
        default: call.state = .answered
        }
        let plan = call.plan
        let duration = monotonicNow() - plan.started
        // Counted before it leaves the in-flight gauge (released, read acquiring by /metrics):
        // whoever sees the gauge drop sees the count.
        metrics.recordRequest(kind: kind, status: status, duration: duration, upstreamDuration: call.upstream.duration,
                              route: plan.routed ? plan.route.metricsPosition : nil)
        metrics.inflight.subtract(1, ordering: .releasing)
        guard call.route.accessLog, let accessLog = log else { return }
        var line = "{\"time\":\"\(rfc3339(wallNow()))\",\"request_id\":\(jsonEscaped(plan.requestId))"
        line += ",\"method\":\(jsonEscaped(call.exchange.method)),\"path\":\(jsonEscaped(plan.path.isEmpty ? call.exchange.target : plan.path))"
        line += ",\"status\":\(status),\"kind\":\"\(kind)\",\"code\":" + (code.map(\.json) ?? "null")
        line += ",\"upstream_status\":" + (call.upstream.status.map(String.init) ?? "null")
        line += ",\"upstream_code\":" + (call.upstream.code.map(Self.logged) ?? "null")
        line += ",\"duration_ms\":\((duration * 1_000_000).rounded() / 1000),\"bytes\":\(bytes)"
        line += ",\"client\":\(jsonEscaped(call.exchange.clientAddress))"
        // Names from the config only (never from the request); a call no route took (Peel's own
        // answers, no-route) has neither.
        if plan.routed, let name = plan.route.name {
            line += ",\"route\":\(jsonEscaped(name)),\"upstream\":\(jsonEscaped(call.route.group.name))"
        } else {
            line += ",\"route\":null,\"upstream\":null"
        }
        line += ",\"endpoint\":" + (call.attempts.endpoint.map { jsonEscaped($0.url.description) } ?? "null")
            + ",\"attempts\":\(call.attempts.count)"
        // Why a streamed answer was cut short (`upstream_idle`, `reset`, …), on those lines only.
        if let cut { line += ",\"cut\":\(jsonEscaped(cut))" }
        if let reason = call.notes.reason { line += ",\"reason\":" + jsonEscaped(reason) }
        if let excerpt = call.notes.excerpt { line += ",\"excerpt\":" + jsonEscaped(excerpt) }
        if let message = call.notes.privateMessage { line += ",\"upstream_message\":" + jsonEscaped(message) }
        if let t = call.notes.tunnel {
            line += ",\"tunnel_ms\":\((t.duration * 1_000_000).rounded() / 1000),\"bytes_in\":\(t.bytesIn),\"bytes_out\":\(t.bytesOut)"
            line += ",\"closed_by\":\"\(t.closedBy.rawValue)\""
        }
        line += "}"
        accessLog.append(line)
    }
}

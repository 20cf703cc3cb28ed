import PeelEnvelope
import PeelIO

/// Wires one worker's listener → upstream client → envelope → response. Loop-thread only.
/// This file takes a call's plan (`CallPlan.make`) and makes its attempts; `Forwarder+Answer`
/// makes the one decision on the upstream's head and judges its answer, `Forwarder+Reply` shapes and
/// writes it, `Forwarder+Offline` answers while offline and keeps the stale store,
/// `Forwarder+AccessLog` counts and logs. `Call` is what changes while a call runs.
final class Forwarder {
    let upstream: UpstreamClient
    let metrics: WorkerMetrics
    let log: AccessLog?
    let streams: ReachabilityStreams
    /// Stale answers for while offline: the memory cache shared by the workers, or this worker's
    /// view of the shared store; off while `--offline-cache` is 0.
    let cache: OfflineStore
    let idPrefix: String
    /// The configuration generation's routes; a call that starts now is pinned to one of them (or
    /// to their fallback); `apply` replaces them.
    var routes: RouteSet
    /// The generation's upstream groups, for the reachability document.
    var groups: UpstreamGroups
    var idCounter: UInt64 = 0
    /// Set while shutting down: no new event stream opens. (The connection layer closes
    /// connections after their answers by itself.)
    var draining = false
    /// The published contract, served at `ContractPublishing.path` when the configuration makes it
    /// public; set before the worker's loop starts.
    var contract: ContractPublisher?
    /// Authorities (lowercased `host:port`) that name this listener in an absolute-form target.
    var selfAuthorities: Set<String> = []

    /// Sets the authorities that name this gateway, once the listening port is known.
    func listening(on address: HostPort) {
        var hosts: Set<String> = ["localhost", "127.0.0.1", "[::1]", address.host.lowercased()]
        if address.host.contains(":") { hosts.insert("[\(address.host.lowercased())]") }
        selfAuthorities = Set(hosts.map { "\($0):\(address.port)" })
        if address.port == 80 { selfAuthorities.formUnion(hosts) }
    }

    init(config: GatewayConfig, upstream: UpstreamClient, groups: UpstreamGroups, labels: RouteLabels, metrics: WorkerMetrics,
         accessLog: AccessLog?, streams: ReachabilityStreams, cache: OfflineStore, workerIndex: Int) throws(PeelIOError) {
        self.streams = streams
        self.cache = cache
        self.upstream = upstream
        self.metrics = metrics
        log = accessLog
        routes = try RouteSet(config, groups: groups, labels: labels, worker: workerIndex)
        self.groups = groups
        let random = UInt64.random(in: 0...UInt64.max)
        idPrefix = String(random, radix: 16).leftPadded(to: 16) + "-" + String(workerIndex, radix: 16) + "-"
    }

    /// A request field's value as `Vary` compares it: every line combined (RFC 9111 §4.1), Cookie's
    /// with `; ` (the first line alone let bob's second Cookie line pass for alice's).
    static func requestValue(_ ex: HTTPExchange, _ name: String) -> String? {
        ex.combinedHeader(name, separator: name == "cookie" ? "; " : ", ")
    }

    /// Calls waiting for the upstream, so a shutdown past its timeout can answer them.
    var waiting: [ObjectIdentifier: Call] = [:]
    /// Tunnels opening and open (WebSockets), so a shutdown past its timeout can close them.
    let tunnels = TunnelTable()

    /// Shutdown past `shutdown_timeout`: every call still waiting for the upstream is cancelled and
    /// answered 503 (with `Connection: close`, as while draining) instead of being cut off bare.
    func cutWaitingCalls() {
        endTunnels()
        let calls = waiting.values
        waiting = [:]
        for call in calls {
            call.transfer?.cancel()
            call.exchange.onClientGone = nil
            if let stream = call.stream {
                // Already answering: the body is cut (the client can tell an unfinished one).
                stream.onClientGone = nil
                record(call, status: call.upstream.status ?? 200, kind: "passthrough-cut", bytes: call.streamedBytes, code: nil)
                stream.abort()
            } else {
                answer(call, .shuttingDown)
            }
        }
    }

    /// The one path for a client that hangs up before its answer is whole: its upstream transfer is
    /// cancelled (on the next loop pass when this runs inside curl's write callback, which must not
    /// call curl), the call leaves the shutdown table, and it is logged 499.
    func clientLeft(_ call: Call, insideCurl: Bool) {
        waiting[ObjectIdentifier(call)] = nil
        if insideCurl { call.transfer?.cancelSoon() } else { call.transfer?.cancel() }
        record(call, status: 499, kind: "client-closed", bytes: call.streamedBytes, code: nil)
    }

    /// Takes a reloaded generation (its routes, and through them its encoder, timeouts and cache
    /// terms) for the requests that arrive from now on.
    func apply(routes: RouteSet, groups: UpstreamGroups) {
        self.routes = routes
        self.groups = groups
    }


    /// A call's stages: the plan (`CallPlan.make`: the request's fields read once, the route, the
    /// cache keys, the upstream request), then an answer without the upstream or the first attempt.
    func handle(_ ex: HTTPExchange) {
        let started = monotonicNow()
        metrics.inflight.add(1, ordering: .relaxed)
        // The generation this call is planned under: every stage below reads its route, never the live one.
        let planned = CallPlan.make(ex, started: started, routes: routes, selfAuthorities: selfAuthorities,
                                    caching: cache.isEnabled, newId: nextRequestId)
        switch consume planned {
        case .forward(let plan, let request):
            ex.clientAddress = plan.clientAddress
            let call = Call(plan)
            call.attempts.keep(request, endpoints: plan.route.picker.endpoints.count)
            attempt(call, request)
        case .early(let plan, let early):
            ex.clientAddress = plan.clientAddress
            answerEarly(Call(plan), early)
        case .tunnel(let plan, let request, let name):
            ex.clientAddress = plan.clientAddress
            openTunnel(Call(plan), request, protocol: name)
        }
    }

    /// Answers a call the plan settled without the upstream.
    func answerEarly(_ call: Call, _ early: EarlyAnswer) {
        switch early {
        case .refused(let refusal):
            // The log says why, whatever the wire says (an HTTP/2 or TLS client gets no HTTP/1.1 answer).
            call.notes.reason = refusal.detail
            switch refusal {
            case .overBudget, .overClientShare:
                metrics.recordRefusal(refusal == .overBudget ? "max_buffered" : "max_buffered_per_client")
                answer(call, .serverBusy(refusal.detail))
            case .overSpoolBudget: refuseSpooling(call, .overSpoolBudget)
            case .overSpoolClientShare: refuseSpooling(call, .overSpoolClientShare)
            case .spoolWrite(let e): refuseSpooling(call, .spoolWrite(e.description))
            default:
                answer(call, .refused(status: refusal.status, tooLarge: refusal.isTooLarge, detail: refusal.detail))
            }
        case .badRequest(let why): refuse(call, why)
        case .preflight(let fields):
            emit(call, Reply(status: 204, kind: .preflight, fields: fields, body: .bytes([], range: nil, hold: nil)), log: "preflight")
        case .reachability(let events): answerReachability(call, events: events)
        case .noRoute: answer(call, .noRoute)
        case .offline: answerUnavailable(call)
        case .contract:
            // The bytes are the publisher's, shared and never copied per answer; not compressed on
            // the loop (a large document would hold it for tens of milliseconds).
            guard let document = contract?.document else {
                return answer(call, .serverBusy("the OpenAPI document has not been read yet"))
            }
            emit(call, Reply(status: 200, kind: .own, fields: [("Content-Type", "application/json"), ("Cache-Control", "no-cache")],
                             body: .bytes(document, range: nil, hold: nil), compressible: false), log: "contract")
        case .forbiddenOrigin:
            metrics.recordRefusal("tunnel_origin")
            answer(call, .refused(status: 403, tooLarge: false, detail: "the WebSocket's Origin is not one cors_origins allows"))
        }
    }

    /// One attempt of the call on endpoint `chosen`, else on the one its route's picker chooses;
    /// `request` names the group's first endpoint and is retargeted to another.
    func attempt(_ call: Call, _ request: UpstreamRequest, on chosen: Int? = nil) {
        let picker = call.route.picker
        // The group went down since it was checked: answered as offline.
        // A failover's endpoint was chosen a loop pass ago: taken only if it is still available.
        let kept = chosen.flatMap { call.route.group.endpoints[$0].available.load(ordering: .relaxed) ? $0 : nil }
        guard let i = kept ?? picker.pick(tried: call.attempts.tried) else { return answerUnavailable(call) }
        let ex = call.exchange
        call.attempts.start(on: call.route.group.endpoints[i], at: i)
        call.head = nil
        let finished = { [self] (result: Result<UpstreamResponse, UpstreamFailure>) in self.upstreamFinished(call, result) }
        let transfer = i == 0 ? upstream.send(request, completion: finished)
                              : upstream.send(request.retargeted(to: picker.endpoints[i]), completion: finished)
        call.state = .awaitingHead(transfer)
        // A buffered answer past MemoryBudget.answerAllowance counts against its client's share: the
        // client its request body is charged to (the peer, or the one a trusted proxy names).
        transfer.clientAddress = ex.clientAddress
        waiting[ObjectIdentifier(call)] = call
        transfer.onHead = { [self] facts, head in self.headArrived(call, facts: facts, head: head) }
        ex.onClientGone = { [self] in self.clientLeft(call, insideCurl: false) }
    }

    /// The call's group has no endpoint to take it: the offline answer (a stored one when there is).
    func answerUnavailable(_ call: Call) {
        if let key = call.plan.cacheKey { return answerOffline(call, key) }
        answer(call, .offline)
    }

    /// Another attempt for a call whose attempt failed with `failure`, when `Attempts` allows one:
    /// scheduled for the next loop pass, never sent from inside curl's completion. True when one is.
    func failOver(_ call: Call, after failure: UpstreamFailure, wentOut: Bool) -> Bool {
        guard let next = call.attempts.next(after: failure, wentOut: wentOut, idempotent: call.exchange.methodToken.isIdempotent,
                                            picker: call.route.picker) else { return false }
        call.state = .betweenAttempts
        waiting[ObjectIdentifier(call)] = call
        call.exchange.onClientGone = { [self] in self.clientLeft(call, insideCurl: false) }
        upstream.loop.defer { [self] in
            // Answered meanwhile: the client left, or a shutdown cut the waiting calls.
            guard case .betweenAttempts = call.state, let request = call.attempts.sent else { return }
            attempt(call, request, on: next)
        }
        return true
    }

    /// Trace Context fields, dropped together when traceparent is not in its W3C form.
    static let traceFields = FieldSet([.traceparent, .tracestate])

    /// The Forwarded field sent upstream (RFC 7239 §4): `kept` (a trusted proxy's), then Peel's own
    /// element for the hop that connected to it. IPv6 nodes and hosts are quoted (§6, §5.3).
    /// Built in bytes, on every forwarded call: String's `contains` on a String argument goes
    /// through Foundation, and with interpolation this cost 7.4k instructions of a /small request
    /// (callgrind).
    static func forwardedElement(kept: String?, peer: String, host: String?) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((kept?.utf8.count ?? 0) + peer.utf8.count + (host?.utf8.count ?? 0) + 32)
        if let kept {
            out += kept.utf8
            out += ", ".utf8
        }
        out += "for=".utf8
        if peer.utf8.contains(0x3A) {
            out += "\"[".utf8
            out += peer.utf8
            out += "]\"".utf8
        } else {
            out += peer.utf8
        }
        if let host, !host.isEmpty, !host.utf8.contains(where: { $0 == 0x22 || $0 == 0x5C || $0 < 0x21 || $0 > 0x7E }) {
            out += ";host=\"".utf8
            out += host.utf8
            out.append(0x22)
        }
        out += ";proto=http".utf8
        return String(decoding: out, as: UTF8.self)
    }


    func nextRequestId() -> String {
        idCounter &+= 1
        return Self.requestId(prefix: idPrefix, counter: idCounter)
    }

    /// `prefix` and `counter` in lowercase hex, written into one new String: no intermediate String
    /// for the number, no concatenation.
    static func requestId(prefix: String, counter: UInt64) -> String {
        let digits = max(1, (64 - counter.leadingZeroBitCount + 3) / 4)
        var prefix = prefix
        return prefix.withUTF8 { head in
            String(unsafeUninitializedCapacity: head.count + digits) { out in
                _ = out.initialize(from: head)
                var v = counter
                var at = head.count + digits
                repeat {
                    at -= 1
                    let d = UInt8(truncatingIfNeeded: v & 0xF)
                    out[at] = d < 10 ? 0x30 + d : 0x57 + d
                    v >>= 4
                } while v != 0
                return head.count + digits
            }
        }
    }
}

/// Strips optional whitespace (SP / HTAB, RFC 9110 §5.6.3) from both ends.
func trimOWS<S: StringProtocol>(_ s: S) -> String {
    var bytes = Substring(s).utf8[...]
    while let f = bytes.first, f == 0x20 || f == 0x09 { bytes = bytes.dropFirst() }
    while let l = bytes.last, l == 0x20 || l == 0x09 { bytes = bytes.dropLast() }
    return String(Substring(bytes))
}

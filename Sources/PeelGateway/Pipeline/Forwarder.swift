import PeelEnvelope
import PeelIO

/// Wires one worker's listener → upstream client → envelope → response. Loop-thread only.
/// This file plans a call and sends it; `Forwarder+Answer` decides what the upstream's answer
/// becomes, `Forwarder+Reply` writes it, `Forwarder+Offline` answers while offline and keeps the
/// stale store, `Forwarder+AccessLog` counts and logs, `Forwarder+Call` is the per-call state.
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

    /// Shutdown past `shutdown_timeout`: every call still waiting for the upstream is cancelled and
    /// answered 503 (with `Connection: close`, as while draining) instead of being cut off bare.
    func cutWaitingCalls() {
        let calls = waiting.values
        waiting = [:]
        for call in calls {
            call.transfer?.cancel()
            call.exchange.onClientGone = nil
            if let stream = call.stream {
                // Already answering: the body is cut (the client can tell an unfinished one).
                stream.onClientGone = nil
                record(call, status: call.upstreamStatus ?? 200, kind: "passthrough-cut", bytes: call.streamedBytes, code: nil)
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


    /// A call's stages: the request's fields read once (`RequestFacts`), what to do with it
    /// (`RequestPlan`), the offline/cache decision, the upstream call, the judge, and one reply
    /// shaper for whatever the answer is.
    func handle(_ ex: HTTPExchange) {
        let started = monotonicNow()
        // The generation this call is planned under: every stage below reads its route, never the live one.
        let routes = self.routes
        // Until a route is chosen (and for Peel's own answers), the generation's fallback.
        let general = routes.fallback
        metrics.inflight.add(1, ordering: .relaxed)
        // Key fields are read for every method while the cache is on (an unsafe method's success
        // invalidates its user's entries); lookups and stores are for GET and HEAD only. Every
        // route's key fields are read: the route is chosen from what these fields say.
        let caching = cache.isEnabled
        // Forwarded fields are believed only from a trusted proxy: from anyone else they
        // are dropped, Peel writes its own, and redirects are rewritten from Host alone; a client
        // could otherwise steer rewritten Locations (redirect poisoning behind a shared cache) and
        // forge the chain the upstream sees.
        let peer = ex.peerAddress
        let trusted = IPNetwork.any(general.trustedProxies, contain: peer)
        // Read once; the plan names its host (an absolute-form target's authority), then the stages borrow it.
        var facts = RequestFacts(ex, keys: caching ? routes.keyFields : nil, trustingForwarding: trusted)
        if trusted {
            ex.clientAddress = Self.realClient(peer: peer, forwardedFor: facts.xForwardedFor, trusted: general.trustedProxies)
        }
        let id = facts.requestId.flatMap { RequestPolicy.acceptableRequestId($0) ? $0 : nil } ?? nextRequestId()
        let call = Call(exchange: ex, route: general, started: started, requestId: id,
                        language: Language(acceptLanguage: facts.acceptLanguage))
        call.origin = facts.origin ?? ex.refusedOrigin
        call.acceptEncoding = facts.acceptEncoding.map { AcceptedCodings($0) }

        // Refused by the server's parser (framing, limits, timeouts, Expect): answered like any failure.
        if let refusal = ex.refusal {
            // The log says why, whatever the wire says (an HTTP/2 or TLS client gets no HTTP/1.1 answer).
            call.reason = refusal.detail
            switch refusal {
            case .overBudget, .overClientShare:
                metrics.recordRefusal(refusal == .overBudget ? "max_buffered" : "max_buffered_per_client")
                return answer(call, .serverBusy(refusal.detail))
            default: break
            }
            return answer(call, .refused(status: refusal.status, tooLarge: refusal.isTooLarge, detail: refusal.detail))
        }

        let (plan, path) = RequestPlan.decide(method: ex.method, target: ex.target, http11: ex.version.major == 1 && ex.version.minor >= 1,
                                              &facts, selfAuthorities: selfAuthorities, managesCORS: general.cors != nil,
                                              reachabilityPath: general.reachabilityPath, accept: { ex.header(.accept) })
        call.path = path
        call.addressFields = (facts.host, facts.xForwardedProto, facts.xForwardedHost)
        let target: (path: String, query: String?)
        switch plan {
        case .refuse(let why): return refuse(call, why)
        case .preflight:
            let fields = general.cors?.preflightFields(origin: facts.origin, requestMethod: facts.accessControlRequestMethod,
                                                 requestHeaders: facts.accessControlRequestHeaders) ?? []
            return emit(call, Reply(status: 204, kind: .preflight, fields: fields, body: .bytes([], range: nil, hold: nil)),
                        log: "preflight")
        case .reachability(let events): return answerReachability(call, events: events)
        case .forward(let p, let q): target = (p, q)
        }
        // The route: chosen from Host and path once the request is known to be forwarded (the
        // reachability path was matched above, before any route).
        guard let route = routes.choose(host: facts.host, path: target.path) else { return answer(call, .noRoute) }
        // Dot-segments must not carry a call out of its route: `/pay/../admin` would take the /pay/
        // route (its group, dialect and keys) to a path its upstream resolves to /admin. nginx
        // matches locations on the resolved path; Peel forwards the path as sent, so it refuses one
        // that resolves under another route.
        if routes.routed, let resolved = RequestPolicy.resolvingDotSegments(target.path),
           routes.choose(host: facts.host, path: resolved) !== route {
            return refuse(call, "the path's dot-segments leave its route")
        }
        call.route = route
        call.routed = true
        guard let upstreamPath = route.upstreamPath(target.path) else {
            return refuse(call, "the path climbs above the route's prefix once it is stripped")
        }

        if caching {
            // The Host as forwarded, with a trusted proxy's X-Forwarded-Host beside it:
            // two tenants behind one Peel never share an entry; nor do two groups.
            var tenant = (facts.host?.lowercased() ?? "") + (facts.xForwardedHost.map { " " + $0.lowercased() } ?? "")
            if !route.keyGroup.isEmpty { tenant += " @" + route.keyGroup }
            let user = route.keyPositions.map { positions in positions.map { facts.keyValues[$0] } } ?? facts.keyValues
            let key = OfflineCacheKey(host: tenant, target: target.path + (target.query.map { "?" + $0 } ?? ""),
                                      acceptLanguage: facts.acceptLanguage, fieldNames: route.keyFields.names, user: user)
            call.userKey = key
            if ex.methodToken.readsResource { call.cacheKey = key }
            call.cacheRequest = facts.cacheRequest
            call.hasAuthorization = facts.hasAuthorization
        }

        if route.group.isDown { return answerUnavailable(call) }
        forward(call, facts, target: (upstreamPath, target.query), peer: peer)
    }

    /// Sends the call upstream and waits for its head.
    func forward(_ call: Call, _ facts: borrowing RequestFacts, target: (path: String, query: String?), peer: String) {
        let ex = call.exchange
        let picker = call.route.picker
        // The group went down since it was checked: answered as offline.
        guard let i = picker.pick() else { return answerUnavailable(call) }
        let request = Self.upstreamRequest(ex, method: ex.method, ex.methodToken, facts, route: call.route, endpoint: picker.endpoints[i],
                                           target: target, peer: peer, requestId: call.requestId, accepted: call.acceptEncoding,
                                           body: .exchange(ex))
        // Kept only where another endpoint could take it.
        if picker.endpoints.count > 1 { call.request = request }
        send(call, request, endpoint: i)
    }

    /// One attempt of the call on endpoint `i` of its route's group.
    func send(_ call: Call, _ request: UpstreamRequest, endpoint i: Int) {
        let ex = call.exchange
        call.onEndpoint(call.route.group.endpoints[i], at: i)
        let transfer = upstream.send(request) { [self] result in self.upstreamFinished(call, result) }
        call.state = .awaitingHead(transfer)
        // A buffered answer past MemoryBudget.answerAllowance counts against its client's share: the
        // client its request body is charged to (the peer, or the one a trusted proxy names).
        transfer.clientAddress = ex.clientAddress
        waiting[ObjectIdentifier(call)] = call
        transfer.onHead = { [self] facts, head in self.headArrived(call, facts: facts, head: head) }
        transfer.keepsCoding = { [self] facts in self.keepsCoding(call, facts: facts) }
        ex.onClientGone = { [self] in self.clientLeft(call, insideCurl: false) }
    }

    /// The call's group has no endpoint to take it: the offline answer (a stored one when there is).
    func answerUnavailable(_ call: Call) {
        if let key = call.cacheKey { return answerOffline(call, key) }
        answer(call, .offline)
    }

    /// Another attempt for a call whose attempt failed with `failure`, when one is allowed: a
    /// connection that could not be made sent nothing, so any method moves on; one that was lost
    /// after the request went out and before any answer byte moves an idempotent method only
    /// (RFC 9110 §9.2.2), never POST or PATCH. At most `maxAttempts`, each on an endpoint the call
    /// has not tried. True when it was sent again.
    func failOver(_ call: Call, after failure: UpstreamFailure, wentOut: Bool) -> Bool {
        guard let request = call.request, call.attempts < Self.maxAttempts else { return false }
        switch failure {
        case .refused, .connectTimeout, .dns, .tls:
            // Failing to connect sends nothing, unless this was curl's own retry of a request that
            // already went out on a reused connection that died: then only an idempotent one moves.
            if wentOut && !call.exchange.methodToken.isIdempotent { return false }
        case .reset, .notResent: guard call.exchange.methodToken.isIdempotent else { return false }
        default: return false
        }
        guard let i = call.route.picker.pick(tried: call.tried) else { return false }
        send(call, request.retargeted(to: call.route.picker.endpoints[i]), endpoint: i)
        return true
    }

    /// Attempts one call may make across a group's endpoints.
    static let maxAttempts = 3

    /// Trace Context fields, dropped together when traceparent is not in its W3C form.
    static let traceFields = FieldSet([.traceparent, .tracestate])
    /// The client behind a trusted `peer` (see `IPNetwork.realClient`).
    static func realClient(peer: String, forwardedFor: String?, trusted: [IPNetwork]) -> String {
        IPNetwork.realClient(peer: peer, forwardedFor: forwardedFor, trusted: trusted)
    }

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
        return idPrefix + String(idCounter, radix: 16)
    }
}

/// Strips optional whitespace (SP / HTAB, RFC 9110 §5.6.3) from both ends.
func trimOWS<S: StringProtocol>(_ s: S) -> String {
    var bytes = Substring(s).utf8[...]
    while let f = bytes.first, f == 0x20 || f == 0x09 { bytes = bytes.dropFirst() }
    while let l = bytes.last, l == 0x20 || l == 0x09 { bytes = bytes.dropLast() }
    return String(Substring(bytes))
}

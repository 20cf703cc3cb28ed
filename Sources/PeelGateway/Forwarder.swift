import PeelEnvelope
import PeelIO

/// Wires one worker's listener → upstream client → envelope → response. Loop-thread only.
final class Forwarder {
    private let upstream: UpstreamClient
    private let reachability: Reachability
    private let metrics: WorkerMetrics
    private let log: AccessLog?
    private let streams: ReachabilityStreams
    /// Stale answers for while offline: the memory cache shared by the workers, or this worker's
    /// view of the shared store (issue 21); off while `--offline-cache` is 0.
    private let cache: OfflineStore
    private let idPrefix: String
    /// The configuration generation calls that start now are pinned to; `apply` replaces it.
    private var route: Route
    /// This worker's gzip/br encoder (loop-thread only, like the forwarder).
    private var encoder: ContentEncoder
    private var idCounter: UInt64 = 0
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

    init(config: GatewayConfig, upstream: UpstreamClient, reachability: Reachability, metrics: WorkerMetrics,
         accessLog: AccessLog?, streams: ReachabilityStreams, cache: OfflineStore, workerIndex: Int) {
        self.streams = streams
        self.cache = cache
        self.upstream = upstream
        self.reachability = reachability
        self.metrics = metrics
        log = accessLog
        route = Route(config)
        encoder = ContentEncoder(gzipLevel: config.gzipLevel, brotliQuality: config.brotliQuality)
        let random = UInt64.random(in: 0...UInt64.max)
        idPrefix = String(random, radix: 16).leftPadded(to: 16) + "-" + String(workerIndex, radix: 16) + "-"
    }

    /// A request field's value as `Vary` compares it: every line combined (RFC 9111 §4.1), Cookie's
    /// with `; ` (review of issue 17: the first line alone let bob's second Cookie line pass for alice's).
    static func requestValue(_ ex: HTTPExchange, _ name: String) -> String? {
        ex.combinedHeader(name, separator: name == "cookie" ? "; " : ", ")
    }

    /// Calls waiting for the upstream, so a shutdown past its timeout can answer them.
    private var waiting: [ObjectIdentifier: Call] = [:]

    /// Shutdown past `shutdown_timeout`: every call still waiting for the upstream is cancelled and
    /// answered 503 (with `Connection: close`, as while draining) instead of being cut off bare.
    func cutWaitingCalls() {
        let calls = waiting.values
        waiting = [:]
        for call in calls {
            call.transfer?.cancel()
            call.transfer = nil
            call.exchange.onClientGone = nil
            if let stream = call.stream {
                // Already answering: the body is cut (the client can tell an unfinished one).
                stream.onClientGone = nil
                stream.abort()
                record(call, status: call.upstreamStatus ?? 200, kind: "passthrough-cut", bytes: call.streamedBytes, code: nil)
            } else {
                answer(call, .shuttingDown)
            }
        }
    }

    /// Takes a reloaded configuration for the requests that arrive from now on.
    func apply(_ config: GatewayConfig) {
        route = Route(config)
        encoder = ContentEncoder(gzipLevel: config.gzipLevel, brotliQuality: config.brotliQuality)
    }

    /// Per-call state, alive from request to answer.
    private final class Call {
        let exchange: HTTPExchange
        /// The configuration generation the call was planned under, for all of its stages.
        let route: Route
        let started: Double
        let requestId: String
        let language: Language
        var path = ""
        var transfer: UpstreamTransfer?
        var upstreamDuration: Double?
        var upstreamStatus: Int?
        /// Set for GET and HEAD when the offline cache is on.
        var cacheKey: OfflineCacheKey?
        /// What the request asks of caches, with its validators; set with `cacheKey`.
        var cacheRequest = CacheRequest()
        /// Whether the request carried Authorization (RFC 9111 §3.5, when it is not a key field).
        var hasAuthorization = false
        /// This request's user as the cache keys it (any method, while the cache is on): an unsafe
        /// method's success drops that user's entries and the shared ones for its target.
        var userKey: OfflineCacheKey?
        /// The upstream's answer fields, kept for a problem document made from its answer.
        var upstreamHeaders: ResponseHeaders?
        /// The envelope code as the upstream sent it; nil when there was no envelope.
        var upstreamCode: EnvelopeCode?
        /// The request's Origin (CORS).
        var origin: String?
        /// Host, X-Forwarded-Proto and X-Forwarded-Host as sent, for `publicOrigin`.
        var addressFields: (host: String?, proto: String?, forwardedHost: String?) = (nil, nil, nil)
        /// Peel's own origin as the client named it, for rewritten URLs; nil when unknown. Worked out
        /// only for the few answers that carry a URL to rewrite.
        lazy var publicOrigin: String? = ProxyRewrite.publicOrigin(
            host: addressFields.host, forwardedProto: addressFields.proto, forwardedHost: addressFields.forwardedHost)
        /// The request's Accept-Encoding, negotiated only for answers worth compressing.
        var acceptEncoding: String?
        /// The answer being streamed from the upstream as it arrives, if it is.
        var stream: ReplyStream?
        /// Body bytes streamed so far.
        var streamedBytes = 0
        /// Counted and logged: the call is over for the forwarder.
        var done = false
        /// `passesUnjudged` as decided when the head arrived (nil when no body byte came).
        var passesUnjudged: Bool?
        /// The upstream's Content-Encoding when its body passes in that coding (the client takes it).
        var keptCoding: String?
        /// Why the answer was refused or cut (Peel's diagnosis), for the access log.
        var reason: String?
        /// The start of a non-envelope upstream body that was refused, escaped, for the access log only.
        var excerpt: String?

        init(exchange: HTTPExchange, route: Route, started: Double, requestId: String, language: Language) {
            self.exchange = exchange
            self.route = route
            self.started = started
            self.requestId = requestId
            self.language = language
        }
    }

    /// A call's stages: the request's fields read once (`RequestFacts`), what to do with it
    /// (`RequestPlan`), the offline/cache decision, the upstream call, the judge, and one reply
    /// shaper for whatever the answer is.
    func handle(_ ex: HTTPExchange) {
        let started = monotonicNow()
        // The generation this call is planned under: every stage below reads it, never the live one.
        let route = self.route
        metrics.inflight.add(1, ordering: .relaxed)
        // Key fields are read for every method while the cache is on (an unsafe method's success
        // invalidates its user's entries); lookups and stores are for GET and HEAD only.
        let caching = cache.isEnabled
        var facts = RequestFacts(ex, keys: caching ? route.keyFields : nil)
        // Forwarded fields are believed only from a trusted proxy (issue 18): from anyone else they
        // are dropped, Peel writes its own, and redirects are rewritten from Host alone; a client
        // could otherwise steer rewritten Locations (redirect poisoning behind a shared cache) and
        // forge the chain the upstream sees.
        let peer = ex.peerAddress
        if IPNetwork.any(route.trustedProxies, contain: peer) {
            ex.clientAddress = Self.realClient(peer: peer, forwardedFor: facts.xForwardedFor, trusted: route.trustedProxies)
        } else {
            facts.distrustForwardingFields()
        }
        let id = facts.requestId.flatMap { RequestPolicy.acceptableRequestId($0) ? $0 : nil } ?? nextRequestId()
        let call = Call(exchange: ex, route: route, started: started, requestId: id,
                        language: Language(acceptLanguage: facts.acceptLanguage))
        call.origin = facts.origin ?? ex.refusedOrigin
        call.acceptEncoding = facts.acceptEncoding
        call.addressFields = (facts.host, facts.xForwardedProto, facts.xForwardedHost)

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
                                              facts, selfAuthorities: selfAuthorities, managesCORS: route.cors != nil,
                                              reachabilityPath: route.reachabilityPath, accept: { ex.header(.accept) })
        call.path = path
        let target: (path: String, query: String?)
        switch plan {
        case .refuse(let why): return refuse(call, why)
        case .preflight:
            let fields = route.cors?.preflightFields(origin: facts.origin, requestMethod: facts.accessControlRequestMethod,
                                               requestHeaders: facts.accessControlRequestHeaders) ?? []
            return emit(call, Reply(status: 204, kind: .preflight, fields: fields, body: .bytes([], range: nil, hold: nil)),
                        log: "preflight")
        case .reachability(let events): return answerReachability(call, events: events)
        case .forward(let p, let q): target = (p, q)
        }

        if caching {
            // The Host as forwarded (issue 17), with a trusted proxy's X-Forwarded-Host beside it:
            // two tenants behind one Peel never share an entry.
            let tenant = (facts.host?.lowercased() ?? "") + (facts.xForwardedHost.map { " " + $0.lowercased() } ?? "")
            let key = OfflineCacheKey(host: tenant, target: target.path + (target.query.map { "?" + $0 } ?? ""),
                                      acceptLanguage: facts.acceptLanguage, fieldNames: route.keyFields.names, user: facts.keyValues)
            call.userKey = key
            if ex.method == "GET" || ex.method == "HEAD" { call.cacheKey = key }
            call.cacheRequest = facts.cacheRequest
            call.hasAuthorization = facts.hasAuthorization
        }

        if reachability.isDown {
            if let key = call.cacheKey { return answerOffline(call, key) }
            return answer(call, .offline)
        }
        forward(call, facts, target: target, peer: peer)
    }

    /// The upstream call: the request's fields minus hop-by-hop ones and those Peel sets, then
    /// Peel's own forwarding fields.
    private func forward(_ call: Call, _ facts: borrowing RequestFacts, target: (path: String, query: String?), peer: String) {
        let ex = call.exchange
        // Options a Connection field names (RFC 9110 §7.6.1): by token where they have one, by bytes otherwise.
        var namedTokens = FieldSet([])
        var namedOthers: [String] = []
        for option in facts.connectionOptions {
            let t = FieldToken.identify(option)
            if t == .other { namedOthers.append(option) } else { namedTokens.insert(t) }
        }
        var dropped = RequestPolicy.droppedRequestFields.union(namedTokens)
        if !facts.traceOK { dropped = dropped.union(Self.traceFields) }
        let namedOther = namedOthers.isEmpty ? nil : HeaderNameSet(namedOthers)
        // HEAD answers what GET would (status, fields, the unwrapped length): it goes upstream as GET,
        // is judged like one, and the server writes the answer without its body.
        let method = ex.method == "HEAD" ? "GET" : ex.method
        // Codings follow the client (issue 19): the upstream is asked for what the client accepts and
        // Peel can decode, and for none when the client named none.
        let preserveHost = call.route.preserveHost
        let upstreamCodings = CompressionPolicy.upstreamAcceptEncoding(facts.acceptEncoding, decodable: UpstreamClient.decodableCodings)
        // The closure below captures these, not the facts (a copy of every String in them).
        let host = facts.host
        let forwardedFor = facts.xForwardedFor
        let forwarded = facts.forwarded
        let id = call.requestId
        let transfer = upstream.send(method: method, path: call.route.basePath + target.path, query: target.query, body: .exchange(ex),
                                     acceptEncoding: upstreamCodings, headers: { lines in
            var sawAccept = false
            var sawContentType = false
            ex.forEachField { field in
                if field.isIn(dropped) { return }
                if field.token == .other, let namedOther, field.isIn(namedOther) { return }
                if field.token == .accept { sawAccept = true } else if field.token == .contentType { sawContentType = true }
                lines.append(field)
            }
            // The hop that connected to Peel is appended; from a trusted proxy the chain it sent is
            // kept before it. Proto and host are always this hop's (http, the Host Peel was sent):
            // absolute URLs the upstream builds from them name its own origin, which Peel rewrites
            // to the public one (a trusted proxy's X-Forwarded-Host/-Proto, see publicOrigin).
            lines.append("X-Forwarded-For", forwardedFor.map { $0 + ", " + peer } ?? peer)
            lines.append("X-Forwarded-Proto", "http")
            if let host { lines.append("X-Forwarded-Host", host) }
            lines.append("Forwarded", Self.forwardedElement(kept: forwarded, peer: peer, host: host))
            // nginx's `proxy_set_header Host $host`: curl sends this one instead of the upstream's.
            if preserveHost, let host { lines.append("Host", host) }
            lines.append("X-Request-Id", id)
            // curl would invent these when the client sent none; an empty value tells it not to.
            if !sawAccept { lines.append("Accept", "") }
            // Only a request curl sends as a POST gets its form Content-Type: one with a body, or
            // POST/PUT/PATCH (see UpstreamClient.send).
            if !sawContentType && (ex.bodyCount > 0 || method == "POST" || method == "PUT" || method == "PATCH") {
                lines.append("Content-Type", "")
            }
        }) { [self] result in
            self.upstreamFinished(call, result)
        }
        call.transfer = transfer
        // A buffered answer past MemoryBudget.answerAllowance counts against its client's share: the
        // client its request body is charged to (the peer, or the one a trusted proxy names).
        transfer.clientAddress = ex.clientAddress
        waiting[ObjectIdentifier(call)] = call
        transfer.onHead = { [self] status, head in self.headArrived(call, status: status, head: head) }
        transfer.keepsCoding = { [self] status, head in self.keepsCoding(call, status: status, head: head) }
        ex.onClientGone = { [self] in
            waiting[ObjectIdentifier(call)] = nil
            call.transfer?.cancel()
            call.transfer = nil
            self.record(call, status: 499, kind: "client-closed", bytes: 0, code: nil)
        }
    }

    /// Trace Context fields, dropped together when traceparent is not in its W3C form.
    private static let traceFields = FieldSet([.traceparent, .tracestate])
    /// The client behind a trusted `peer` (see `IPNetwork.realClient`).
    static func realClient(peer: String, forwardedFor: String?, trusted: [IPNetwork]) -> String {
        IPNetwork.realClient(peer: peer, forwardedFor: forwardedFor, trusted: trusted)
    }

    /// The Forwarded field sent upstream (RFC 7239 §4): `kept` (a trusted proxy's), then Peel's own
    /// element for the hop that connected to it. IPv6 nodes and hosts are quoted (§6, §5.3).
    /// Built in bytes, on every forwarded call: String's `contains` on a String argument goes
    /// through Foundation, and with interpolation this cost 7.4k instructions of a /small request
    /// (callgrind, session 4).
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

    private func upstreamFinished(_ call: Call, _ result: Result<UpstreamResponse, UpstreamFailure>) {
        waiting[ObjectIdentifier(call)] = nil
        call.transfer = nil
        call.exchange.onClientGone = nil
        if call.done { return }
        if let stream = call.stream { return streamFinished(call, stream, result) }
        // The client left as the answer started (see headArrived): nothing is left to send.
        if call.exchange.answered { return record(call, status: 499, kind: "client-closed", bytes: 0, code: nil) }
        switch result {
        case .failure(let failure):
            // Peel's own budget is no failure of the upstream's: counted as Peel's refusal.
            switch failure {
            case .overBudget: metrics.recordRefusal("max_buffered_upstream")
            case .overClientShare: metrics.recordRefusal("max_buffered_per_client_upstream")
            default: metrics.recordUpstreamError(failure.reason)
            }
            // Issue 17: only failing to reach the upstream counts toward fall. A broken or oversized
            // answer came with a status line: the upstream is there. A timeout or a close before any
            // status line on a connection it took counts neither way: a client can cause it (a path
            // whose worker dies), and calls in flight when a host drops off the network end so long
            // after it went.
            if failure.isTransportFailure {
                if case .connectTimeout = failure {
                    reachability.recordLiveConnectTimeout(failureCause(failure))
                } else {
                    reachability.recordPassiveFailure(failureCause(failure))
                }
            }
            if failure.answeredBadly { reachability.recordLiveAnswer() }
            answer(call, Self.outcome(of: failure))
        case .success(let response):
            // Whatever it says, the upstream answered: evidence that it is there (issue 13).
            reachability.recordLiveAnswer()
            call.upstreamDuration = response.duration
            call.upstreamStatus = response.status
            call.upstreamHeaders = response.headers
            invalidateAfterUnsafe(call, status: response.status, headers: response.headers)
            if response.status == 304, call.exchange.method == "GET", let key = call.cacheKey {
                // RFC 9111 §4.3.4: the stored answer is current again, or its validator is worth keeping.
                let ex = call.exchange
                cache.refresh(key: key, request: call.cacheRequest, hasAuthorization: call.hasAuthorization,
                              requestField: { Self.requestValue(ex, $0) }, notModified: response.headers)
            }
            let contentType = response.headers.first(.contentType)
            let answer = UpstreamAnswer(status: response.status, contentType: contentType, path: call.path, isHead: false,
                                        isOptions: call.exchange.method == "OPTIONS",
                                        contentDisposition: response.headers.first(.contentDisposition))
            let judged = response.body.withUnsafeBufferPointer {
                judgeWithCode(answer, body: $0, config: call.route.envelope, passesThrough: call.passesUnjudged)
            }
            call.upstreamCode = judged.upstreamCode
            switch judged.verdict {
            case .unwrap(let status, let range):
                // The data member's bytes are sent from the upstream body itself: no copy in Swift.
                let status = range == nil ? 204 : status
                // A HEAD's answer has no body to keep for a later GET (issue 17).
                if let key = call.cacheKey, call.exchange.method == "GET" {
                    store(key, call, status: status, response, range: range)
                }
                pass(call, status: status, response, range: range ?? 0..<0, kind: "ok",
                     contentType: range == nil ? nil : "application/json")
            case .unwrapRest(let status, let body):
                // The rest of the envelope object: built from the upstream's member bytes, verbatim.
                if let key = call.cacheKey, call.exchange.method == "GET" {
                    store(key, call, status: status, response, range: nil, built: body)
                }
                emit(call, Reply(status: status, kind: .relayed, upstream: response.headers, contentType: "application/json",
                                 body: .bytes(body, range: nil, hold: response.hold)), log: "ok")
            case .passthrough:
                // A newer answer that is not stored must not leave the older one servable (a 304
                // refreshed it above; a 5xx is what stale-if-error keeps it for).
                if let key = call.cacheKey { cache.answeredUnstored(key: key, status: response.status, request: call.cacheRequest) }
                pass(call, status: response.status, response, range: nil, kind: "passthrough", contentType: nil)
            case .problem(let p):
                // An error the upstream chose to answer (a 4xx, a business or auth code) replaces
                // what was stored: a revoked token's stale `/me`, a deleted resource, must not come
                // back while offline. A 5xx keeps it: that is what stale answers are for; and a
                // precondition's answer (412) or a no-store request's leaves it (RFC 9111 §4).
                if let key = call.cacheKey { cache.answeredUnstored(key: key, status: response.status, request: call.cacheRequest) }
                // A body that is not an envelope: its start goes to the log (never to the client), so
                // a developer sees the CSRF page or the plain-text error that was refused.
                if p.kind == .badUpstreamFormat || (p.kind == .upstreamError && judged.upstreamCode == nil) {
                    call.excerpt = Self.excerpt(response.body)
                }
                answerProblem(call, p)
            }
        }
    }

    /// Decides, when the final head is whole, whether the body passes in the coding it came in: a
    /// passthrough answer whose Content-Encoding the client accepts is relayed as it came, with its
    /// length; judged answers and codings the client cannot take are decoded. Inside curl's header
    /// callback: nothing here may call curl.
    private func keepsCoding(_ call: Call, status: Int, head: ResponseHeadView) -> Bool {
        guard let coding = head.first(.contentEncoding).map({ trimOWS($0) }), !coding.isEmpty,
              coding.lowercased() != "identity",
              CompressionPolicy.accepts(call.acceptEncoding, contentEncoding: coding) else { return false }
        let answer = UpstreamAnswer(status: status, contentType: head.first(.contentType), path: call.path, isHead: false,
                                    isOptions: call.exchange.method == "OPTIONS",
                                    contentDisposition: head.first(.contentDisposition))
        guard passesUnjudged(answer, config: call.route.envelope) else { return false }
        call.keptCoding = coding
        return true
    }

    /// Decides, when the first body bytes arrive, whether the answer streams: a passthrough answer
    /// (decided from status and fields alone) of unknown length, declared over `stream_threshold`, or
    /// an event stream is sent as it arrives, pausing the upstream transfer while the client is slow;
    /// anything else is buffered whole (judged, or passed with its length and maybe compressed).
    /// Runs inside curl's write callback: nothing here may call curl.
    private func headArrived(_ call: Call, status: Int, head: ResponseHeadView) -> StreamSink? {
        let contentType = head.first(.contentType)
        let answer = UpstreamAnswer(status: status, contentType: contentType, path: call.path, isHead: false,
                                    isOptions: call.exchange.method == "OPTIONS",
                                    contentDisposition: head.first(.contentDisposition))
        // The call's own rules (a reload mid-call must not mix two), decided once for this answer.
        let passes = passesUnjudged(answer, config: call.route.envelope)
        call.passesUnjudged = passes
        guard passes else { return nil }
        let isEventStream = contentType.map { trimOWS($0).lowercased().hasPrefix("text/event-stream") } ?? false
        // An answer curl decodes has a Content-Length that says nothing of its decoded size, so it
        // streams like one of unknown length (chunked) rather than meet max_upstream_body. Any other
        // declared length is the body's, and is kept (issue 19: downloads keep their length).
        let coding = head.first(.contentEncoding).map { trimOWS($0) }
        let decoded = call.keptCoding == nil && coding.map { !$0.isEmpty && $0.lowercased() != "identity" } ?? false
        let declared = decoded ? nil : head.first(.contentLength).flatMap { Int(trimOWS($0)) }.flatMap { $0 >= 0 ? $0 : nil }
        if !isEventStream, let length = declared, length <= call.route.streamThreshold {
            return nil
        }
        guard let transfer = call.transfer, !call.exchange.answered else { return nil }
        let headers = head.copy()
        call.upstreamStatus = status
        call.upstreamHeaders = headers
        let shaped = call.route.shaper.shape(Reply(status: status, kind: .relayed, upstream: headers, body: .stream(contentLength: declared)),
                                  context(call), encode: { _, _ in nil })
        let rewrite = call.route.rewrite
        guard let stream = call.exchange.startStream(status: status, contentLength: declared, headers: { out in
            shaped.forEachField(rewrite: rewrite, publicOrigin: { call.publicOrigin }, { out.add($0) }, { out.add($0, $1) })
        }) else {
            return { _ in .abort }
        }
        call.stream = stream
        // A streamed answer is never stored, so it makes the older entry for its request stale, and
        // an unsafe method's success invalidates as a buffered one does (the final review of session
        // 4: streamed answers skipped both).
        invalidateAfterUnsafe(call, status: status, headers: headers)
        if let key = call.cacheKey { cache.answeredUnstored(key: key, status: status, request: call.cacheRequest) }
        // The head arrived: the upstream answered (evidence for reachability, like a buffered answer).
        reachability.recordLiveAnswer()
        if call.exchange.isHead {
            // HEAD answers what GET would: the head is all of it, and the rest is not fetched.
            stream.finish()
            record(call, status: status, kind: "passthrough", bytes: 0, code: nil)
            return { _ in .abort }
        }
        stream.onDrained = { [weak transfer] in transfer?.resume() }
        stream.onClientGone = { [self] in
            // Its completion never runs now (cancelSoon drops it): the call leaves the table here.
            waiting[ObjectIdentifier(call)] = nil
            // Possibly inside the sink, so inside curl's write callback: the transfer ends on the next pass.
            call.transfer?.cancelSoon()
            call.transfer = nil
            self.record(call, status: 499, kind: "client-closed", bytes: call.streamedBytes, code: nil)
        }
        return { bytes in
            guard stream.isOpen else { return .abort }
            // Back-pressure: while the client has this much unread, the upstream waits (its bytes stay
            // in curl), so a connection holds at most this plus one curl buffer whatever the size.
            if stream.bufferedBytes >= Self.streamHighWater { return .pause }
            stream.write(bytes)
            call.streamedBytes += bytes.count
            return .taken
        }
    }

    /// Unread reply bytes at which a streamed upstream transfer pauses.
    static let streamHighWater = 256 * 1024

    /// A streamed answer's transfer ended: the body ends, or is cut short so the client can tell.
    private func streamFinished(_ call: Call, _ stream: ReplyStream, _ result: Result<UpstreamResponse, UpstreamFailure>) {
        switch result {
        case .success(let response):
            call.upstreamDuration = response.duration
            stream.finish()
            record(call, status: call.upstreamStatus ?? 200, kind: "passthrough", bytes: call.streamedBytes, code: nil)
        case .failure(let failure):
            metrics.recordUpstreamError(failure.reason)
            call.reason = failure.message
            stream.abort()
            record(call, status: call.upstreamStatus ?? 502, kind: "passthrough-cut", bytes: call.streamedBytes, code: nil,
                   cut: failure.reason)
        }
    }

    /// What an upstream transfer's failure means; `problem(for:config:)` gives it its status.
    static func outcome(of failure: UpstreamFailure) -> Outcome {
        switch failure {
        case .dns, .refused, .reset, .tls, .other: return .unreachable
        case .timeout, .connectTimeout: return .timedOut
        case .tooLarge: return .upstreamTooLarge
        case .protocolError(let why): return .brokenFraming(reason: why)
        // Peel's own shortage; reachability never hears of it (it is not a transport failure).
        case .localResources(let why): return .shortOfResources(why)
        case .overloaded: return .overloaded
        case .notResent(let why): return .notResent(why)
        case .overBudget: return .upstreamOverBudget
        case .overClientShare: return .upstreamOverClientShare
        // Only a flowing stream is cut for idleness, and its head is long sent: never a problem document.
        case .streamIdle: return .timedOut
        }
    }

    /// Answers with the upstream's fields minus hop-by-hop and envelope-describing ones (SPEC), the
    /// rewritten ones, then Peel's own, and `response.body[range]` (all of it when nil), compressed
    /// when the client accepts a coding Peel offers. `contentType` replaces the upstream's when set.
    private func pass(_ call: Call, status: Int, _ response: UpstreamResponse, range: Range<Int>?, kind: String,
                      contentType: String?) {
        emit(call, Reply(status: status, kind: .relayed, upstream: response.headers, contentType: contentType,
                         body: .bytes(response.body, range: range, hold: response.hold)), log: kind)
    }

    /// The shaper's view of `call`.
    private func context(_ call: Call) -> ReplyContext {
        ReplyContext(requestId: call.requestId, origin: call.origin, acceptEncoding: call.acceptEncoding, keptCoding: call.keptCoding)
    }

    /// Shapes `reply` and writes it: the one way every buffered answer leaves the forwarder.
    private func emit(_ call: Call, _ reply: Reply, log kind: String, code: EnvelopeCode? = nil) {
        guard !call.exchange.answered else { return }
        let shaped = call.route.shaper.shape(reply, context(call), encode: { [encoder] in encoder.encode($0, as: $1) })
        let rewrite = call.route.rewrite
        guard case .bytes(let body, let range, let hold) = shaped.body else {
            // Streams start in headArrived and answerReachability, never here.
            preconditionFailure("emit takes buffered answers only")
        }
        call.exchange.respond(status: shaped.status, body: body, range: range, keeping: hold, closing: shaped.closing) { out in
            shaped.forEachField(rewrite: rewrite, publicOrigin: { call.publicOrigin }, { out.add($0) }, { out.add($0, $1) })
        }
        record(call, status: shaped.status, kind: kind, bytes: shaped.bodyCount, code: code)
    }

    /// Methods whose non-error answers invalidate stored ones (RFC 9111 §4.4; RFC 9110 §9.2.1).
    private static let unsafeMethods: Set<String> = ["POST", "PUT", "PATCH", "DELETE"]

    /// RFC 9111 §4.4: a 2xx or 3xx to an unsafe method makes what is stored for its target stale,
    /// and for the same-host paths its Location and Content-Location name: this user's entries and
    /// the shared ones go. Another user's own entries stay (no client changes what another gets;
    /// the final review of session 4 showed any user's `PUT /me` wiping everyone's stored /me).
    private func invalidateAfterUnsafe(_ call: Call, status: Int, headers: ResponseHeaders) {
        guard status < 400, let user = call.userKey, Self.unsafeMethods.contains(call.exchange.method) else { return }
        var targets = [user.target]
        for name in ["location", "content-location"] as [StaticString] {
            guard let value = headers.first(name) else { continue }
            // A path, or an absolute URL naming the upstream: as Peel's own target, without the base path.
            let path = call.route.rewrite.location(value, publicOrigin: nil)
            if path.hasPrefix("/") && !path.hasPrefix("//") && !targets.contains(path) { targets.append(path) }
        }
        for target in targets {
            var mine = user
            mine.target = target
            cache.invalidate(key: mine)
            if !mine.isShared {
                mine.user = mine.user.map { _ in nil }
                cache.invalidate(key: mine)
            }
        }
    }

    /// Keeps a successful unwrapped GET answer for while offline, when RFC 9111 and the key rules
    /// allow (OfflineCache.store): the upstream's fields, Peel's Content-Type and the body.
    private func store(_ key: OfflineCacheKey, _ call: Call, status: Int, _ response: UpstreamResponse, range: Range<Int>?,
                       built: [UInt8]? = nil) {
        // Too large for the whole cache (or a shared-store value): not worth the copy, and the older
        // answer must go.
        if (built?.count ?? range?.count ?? 0) > cache.maxBody {
            return cache.answeredUnstored(key: key, status: status, request: call.cacheRequest)
        }
        let body = built ?? range.map { Array(response.body[$0]) } ?? []
        let ex = call.exchange
        let hasBody = built != nil || range != nil
        cache.store(key: key, request: call.cacheRequest, hasAuthorization: call.hasAuthorization, requestField: { Self.requestValue(ex, $0) },
                    status: status, fields: response.headers, contentType: hasBody ? "application/json" : nil, body: body)
    }

    /// While offline: the stored answer, else the offline problem. The shared store answers within
    /// its read bound rather than at once, so the call waits for it, is answered exactly once, and a
    /// client that hangs up meanwhile is logged 499 and never written to.
    private func answerOffline(_ call: Call, _ key: OfflineCacheKey) {
        let ex = call.exchange
        ex.onClientGone = { [self] in self.record(call, status: 499, kind: "client-closed", bytes: 0, code: nil) }
        cache.lookup(key: key, request: call.cacheRequest, requestField: { call.done ? nil : Self.requestValue(ex, $0) }) { [self] result in
            guard !call.done else { return }
            ex.onClientGone = nil
            switch result {
            case .hit(let hit), .notModified(let hit): answerStale(call, hit)
            case .miss: answer(call, .offline)
            }
        }
    }

    /// A stored answer while offline, shaped as a fresh one would be (issue 17: the same CORS fields,
    /// rewriting, compression and Vary), plus `Age` (RFC 9111 §5.1) and `Cache-Status` (RFC 9211
    /// §2: Peel's cache answered, a hit, served because the upstream is offline). A 304 answers a
    /// conditional request whose validator matches: the app's own copy is current.
    private func answerStale(_ call: Call, _ hit: OfflineCacheHit) {
        if hit.status == 304 {
            let kind = Reply.Kind.staleNotModified(age: hit.age, storedType: hit.contentType, storedCount: hit.storedBodyCount)
            return emit(call, Reply(status: 304, kind: kind, upstream: hit.fields, body: .bytes([], range: nil, hold: nil)),
                        log: "offline-cache")
        }
        emit(call, Reply(status: hit.status, kind: .stale(age: hit.age), upstream: hit.fields, contentType: hit.contentType,
                         body: .bytes(hit.body, range: nil, hold: nil)), log: "offline-cache")
    }

    /// The reachability document, or with `Accept: text/event-stream` a stream of it (issue 13).
    private func answerReachability(_ call: Call, events: Bool) {
        let ex = call.exchange
        guard ex.method == "GET" || ex.method == "HEAD" else {
            let p = Problem(kind: .badRequest, status: 405, detail: "\(call.route.reachabilityPath ?? "") answers GET and HEAD only")
            let body = renderProblem(p, requestId: call.requestId, language: call.language, typeBase: call.route.envelope.problemTypeBase)
            return emit(call, Reply(status: 405, kind: .own, fields: [("Content-Type", "application/problem+json"),
                                                                      ("Cache-Control", "no-store"), ("Allow", "GET, HEAD")],
                                    body: .bytes(body, range: nil, hold: nil), compressible: false),
                        log: p.kind.rawValue, code: p.code)
        }
        let snap = reachability.snapshot
        // While draining, a new stream would only be cut at once: the document answers instead.
        if events && ex.method == "GET" && !draining {
            let client = streamClient(call.exchange.clientAddress)
            if case .failure(let refusal) = streams.reserve(client: client) {
                // Peel's own bounds, not the upstream's fault: the problem names which one.
                return answer(call, .tooManyStreams(perClient: refusal == .clientFull))
            }
            let shaped = call.route.shaper.shape(Reply(status: 200, kind: .own, fields: [("Content-Type", "text/event-stream"),
                                                                              ("Cache-Control", "no-store")],
                                            body: .stream(contentLength: nil)), context(call), encode: { _, _ in nil })
            let rewrite = call.route.rewrite
            guard let stream = ex.startStream(status: 200, headers: { out in
                shaped.forEachField(rewrite: rewrite, publicOrigin: { nil }, { out.add($0) }, { out.add($0, $1) })
            }) else {
                streams.release(client: client)
                return record(call, status: 499, kind: "client-closed", bytes: 0, code: nil)
            }
            streams.adopt(stream, client: client, state: snap.state, since: snap.since, reason: snap.publicReason)
            // Logged and counted when it opens: a stream may stay open for days.
            return record(call, status: 200, kind: "reachability-stream", bytes: 0, code: nil)
        }
        let body = Array(reachabilityDocument(state: snap.state, since: snap.since, reason: snap.publicReason).utf8)
        emit(call, Reply(status: 200, kind: .own, fields: [("Content-Type", "application/json"), ("Cache-Control", "no-store")],
                         body: .bytes(body, range: nil, hold: nil), compressible: false), log: "reachability")
    }

    private func refuse(_ call: Call, _ why: String) {
        answer(call, .refused(status: 400, tooLarge: false, detail: why))
    }

    /// Answers an outcome with its problem document.
    private func answer(_ call: Call, _ outcome: Outcome) {
        answerProblem(call, problem(for: outcome, config: call.route.envelope))
    }

    private func answerProblem(_ call: Call, _ problem: Problem) {
        var p = problem
        if let reason = p.reason { call.reason = reason }
        if p.upstreamStatus == nil { p.upstreamStatus = call.upstreamStatus }
        let body = renderProblem(p, requestId: call.requestId, language: call.language, typeBase: call.route.envelope.problemTypeBase)
        var fields: [(String, String)] = []
        if p.kind == .offline { fields.append(("Retry-After", call.route.retryAfter)) }
        // Bodies held now are answered within seconds; a client may try again after one.
        if p.kind == .serverBusy { fields.append(("Retry-After", "1")) }
        // The upstream's fields that clients act on stay (a 429's Retry-After, a logout's Set-Cookie):
        // the shaper keeps them for a problem.
        emit(call, Reply(status: p.status, kind: .problem(p.kind), upstream: call.upstreamHeaders, fields: fields,
                         body: .bytes(body, range: nil, hold: nil), closing: p.kind == .badRequest),
             log: p.kind.rawValue, code: p.code)
    }

    /// Longest excerpt of a refused upstream body in the access log, in bytes of the body.
    static let excerptBytes = 120

    /// The first `excerptBytes` of `body` as text with control characters (C0, DEL, C1) and
    /// backslashes escaped (`\x0a`), so one log line stays one line whatever the upstream sent.
    static func excerpt(_ body: [UInt8]) -> String? {
        guard !body.isEmpty else { return nil }
        let text = String(decoding: body.prefix(excerptBytes), as: UTF8.self)
        var out = ""
        for scalar in text.unicodeScalars {
            let v = scalar.value
            if v < 0x20 || (v >= 0x7F && v <= 0x9F) {
                let hex = String(v, radix: 16)
                out += "\\x" + (hex.count < 2 ? "0" + hex : hex)
            } else if scalar == "\\" {
                out += "\\\\"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return body.count > excerptBytes ? out + "…" : out
    }

    /// Counts the answer and writes its access-log line: `code` is the one Peel answered with (a
    /// problem's), `upstream_code` the envelope code as the upstream sent it, null when it sent none.
    private func record(_ call: Call, status: Int, kind: String, bytes: Int, code: EnvelopeCode?, cut: String? = nil) {
        guard !call.done else { return }
        call.done = true
        let duration = monotonicNow() - call.started
        metrics.inflight.subtract(1, ordering: .relaxed)
        metrics.recordRequest(kind: kind, status: status, duration: duration, upstreamDuration: call.upstreamDuration)
        guard call.route.accessLog, let accessLog = log else { return }
        var line = "{\"time\":\"\(rfc3339(wallNow()))\",\"request_id\":\(jsonEscaped(call.requestId))"
        line += ",\"method\":\(jsonEscaped(call.exchange.method)),\"path\":\(jsonEscaped(call.path.isEmpty ? call.exchange.target : call.path))"
        line += ",\"status\":\(status),\"kind\":\"\(kind)\",\"code\":" + (code.map(\.json) ?? "null")
        line += ",\"upstream_status\":" + (call.upstreamStatus.map(String.init) ?? "null")
        line += ",\"upstream_code\":" + (call.upstreamCode.map(\.json) ?? "null")
        line += ",\"duration_ms\":\((duration * 1_000_000).rounded() / 1000),\"bytes\":\(bytes)"
        line += ",\"client\":\(jsonEscaped(call.exchange.clientAddress))"
        // Why a streamed answer was cut short (`upstream_idle`, `reset`, …), on those lines only.
        if let cut { line += ",\"cut\":\(jsonEscaped(cut))" }
        if let reason = call.reason { line += ",\"reason\":" + jsonEscaped(reason) }
        if let excerpt = call.excerpt { line += ",\"excerpt\":" + jsonEscaped(excerpt) }
        line += "}"
        accessLog.append(line)
    }
}

/// Strips optional whitespace (SP / HTAB, RFC 9110 §5.6.3) from both ends.
func trimOWS<S: StringProtocol>(_ s: S) -> String {
    var bytes = Substring(s).utf8[...]
    while let f = bytes.first, f == 0x20 || f == 0x09 { bytes = bytes.dropFirst() }
    while let l = bytes.last, l == 0x20 || l == 0x09 { bytes = bytes.dropLast() }
    return String(Substring(bytes))
}

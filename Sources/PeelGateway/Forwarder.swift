import PeelEnvelope
import PeelIO

/// Wires one worker's listener → upstream client → envelope → response. Loop-thread only.
final class Forwarder {
    private var config: GatewayConfig
    private let upstream: UpstreamClient
    private let reachability: Reachability
    private let metrics: WorkerMetrics
    private let log: AccessLog?
    /// The access log while `access_log` is on.
    private var accessLog: AccessLog?
    private let streams: ReachabilityStreams
    /// Stale answers for while offline: the memory cache shared by the workers, or this worker's
    /// view of the shared store (issue 21); off while `--offline-cache` is 0.
    private let cache: OfflineStore
    /// The request fields the cache reads (see `cacheFieldNames`), by position: the key fields
    /// (`--offline-cache-key`) first, then Cache-Control, Pragma, If-None-Match, If-Modified-Since.
    private var cacheFields: HeaderNameSet
    /// `--offline-cache-key`, lowercased, in order.
    private var keyFieldNames: [String]
    private var basePath: String
    private var retryAfter: String
    private let idPrefix: String
    /// Peel's own CORS answers; nil when the upstream's CORS fields pass as they are.
    private var cors: CORSPolicy?
    /// URL and cookie rewriting towards Peel's own address.
    private var rewrite: ProxyRewrite
    /// Upstream fields left out of the bulk copy: rewritten ones, and CORS ones when Peel manages CORS.
    private var droppedResponse: HeaderNameSet
    private var droppedResponseAndType: HeaderNameSet
    /// The same, plus ETag, for compressed answers (their ETag is weakened, see `pass`).
    private var droppedResponseEncoded: HeaderNameSet
    private var droppedResponseAndTypeEncoded: HeaderNameSet
    /// Which answers are compressed, and how.
    private var compression: CompressionPolicy
    /// This worker's gzip/br encoder (loop-thread only, like the forwarder).
    private var encoder: ContentEncoder
    /// Upstream fields rewritten before they are passed (see `rewritten`), by position.
    private static let rewrittenFields = HeaderNameSet(["location", "content-location", "refresh", "set-cookie"])
    /// Upstream fields a problem document keeps: those clients act on (RFC 9110 §10.2.3 Retry-After,
    /// §11.6.1 WWW-Authenticate, §12.5.5 Vary; RFC 9111 §5.2 Cache-Control; RFC 6265 Set-Cookie).
    private var keptOnProblem: HeaderNameSet
    private var idCounter: UInt64 = 0
    /// Set while shutting down: answers carry `Connection: close`.
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
        self.config = config
        self.streams = streams
        self.cache = cache
        self.upstream = upstream
        self.reachability = reachability
        self.metrics = metrics
        log = accessLog
        self.accessLog = config.accessLog ? accessLog : nil
        basePath = config.upstream.basePath
        retryAfter = String(max(1, Int(config.probeInterval.rounded(.up))))
        let random = UInt64.random(in: 0...UInt64.max)
        idPrefix = String(random, radix: 16).leftPadded(to: 16) + "-" + String(workerIndex, radix: 16) + "-"
        keyFieldNames = config.offlineCacheKey
        cacheFields = HeaderNameSet(config.offlineCacheKey + Self.cacheRequestFields)
        let d = Self.derived(from: config)
        (cors, rewrite, droppedResponse, droppedResponseAndType, droppedResponseEncoded, droppedResponseAndTypeEncoded,
         compression, encoder, keptOnProblem) = (d.cors, d.rewrite, d.dropped, d.droppedAndType, d.droppedEncoded,
                                                 d.droppedAndTypeEncoded, d.compression, d.encoder, d.kept)
    }

    /// A request field's value as `Vary` compares it: every line combined (RFC 9111 §4.1), Cookie's
    /// with `; ` (review of issue 17: the first line alone let bob's second Cookie line pass for alice's).
    static func requestValue(_ ex: HTTPExchange, _ name: String) -> String? {
        ex.combinedHeader(name, separator: name == "cookie" ? "; " : ", ")
    }

    /// Request fields the offline cache reads besides the key fields (RFC 9111 §5.2.1, §5.4; RFC
    /// 9110 §13.1.2, §13.1.3).
    private static let cacheRequestFields = ["cache-control", "pragma", "if-none-match", "if-modified-since"]

    /// Everything the forwarder derives from the configuration, built in one place so a reload
    /// (`apply`) changes CORS, rewriting, compression and kept fields together with the options.
    private static func derived(from config: GatewayConfig) -> (
        cors: CORSPolicy?, rewrite: ProxyRewrite, dropped: HeaderNameSet, droppedAndType: HeaderNameSet,
        droppedEncoded: HeaderNameSet, droppedAndTypeEncoded: HeaderNameSet, compression: CompressionPolicy,
        encoder: ContentEncoder, kept: HeaderNameSet
    ) {
        let cors = CORSPolicy(config: config)
        var dropped = RequestPolicy.droppedResponseHeaders
        // Vary is written once by Peel, the upstream's names merged with its own (see `varyValue`).
        dropped.insert("vary")
        if config.rewriteRedirects { dropped.formUnion(["location", "content-location", "refresh"]) }
        if config.rewriteCookies { dropped.insert("set-cookie") }
        if cors != nil { dropped.formUnion(CORSPolicy.upstreamFields) }
        var kept = ["retry-after", "set-cookie", "www-authenticate", "vary", "cache-control"]
        if cors == nil { kept += CORSPolicy.upstreamFields }
        return (cors, ProxyRewrite(upstream: config.upstream), HeaderNameSet(dropped), HeaderNameSet(dropped.union(["content-type"])),
                HeaderNameSet(dropped.union(["etag"])), HeaderNameSet(dropped.union(["content-type", "etag"])),
                CompressionPolicy(offered: config.compression, minSize: config.compressionMinSize),
                ContentEncoder(gzipLevel: config.gzipLevel, brotliQuality: config.brotliQuality), HeaderNameSet(kept))
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
        self.config = config
        rules = Rules(config.envelope)
        accessLog = config.accessLog ? log : nil
        basePath = config.upstream.basePath
        retryAfter = String(max(1, Int(config.probeInterval.rounded(.up))))
        keyFieldNames = config.offlineCacheKey
        cacheFields = HeaderNameSet(config.offlineCacheKey + Self.cacheRequestFields)
        let d = Self.derived(from: config)
        (cors, rewrite, droppedResponse, droppedResponseAndType, droppedResponseEncoded, droppedResponseAndTypeEncoded,
         compression, encoder, keptOnProblem) = (d.cors, d.rewrite, d.dropped, d.droppedAndType, d.droppedEncoded,
                                                 d.droppedAndTypeEncoded, d.compression, d.encoder, d.kept)
    }

    /// The envelope rules a call is judged by, shared by reference so each call keeps the ones it
    /// started under across a reload (one retain per call, not a copy of the rules).
    private final class Rules {
        let envelope: EnvelopeConfig
        init(_ envelope: EnvelopeConfig) { self.envelope = envelope }
    }

    /// The rules for calls that start now; `apply` replaces them.
    private lazy var rules = Rules(config.envelope)

    /// Per-call state, alive from request to answer.
    private final class Call {
        let exchange: HTTPExchange
        let rules: Rules
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
        var upstreamCode: Int64?
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

        init(exchange: HTTPExchange, rules: Rules, started: Double, requestId: String, language: Language) {
            self.exchange = exchange
            self.rules = rules
            self.started = started
            self.requestId = requestId
            self.language = language
        }
    }

    func handle(_ ex: HTTPExchange) {
        let started = monotonicNow()
        metrics.inflight.add(1, ordering: .relaxed)
        var requestId: String? = nil
        var host: String? = nil
        var xff: String? = nil
        var acceptLanguage: String? = nil
        var hasAuthorization = false
        // Key fields are read for every method while the cache is on (an unsafe method's success
        // invalidates its user's entries); lookups and stores are for GET and HEAD only.
        let caching = cache.isEnabled
        // The key fields' values, then Cache-Control (all of them), Pragma, If-None-Match, If-Modified-Since.
        var cacheValues: [String?] = caching ? Array(repeating: nil, count: keyFieldNames.count + 4) : []
        var cacheControl: [String] = []
        var origin: String? = nil
        var requestMethod: String? = nil
        var requestHeaders: String? = nil
        var forwardedProto: String? = nil
        var forwardedHost: String? = nil
        var forwarded: String? = nil
        var sawTraceparent = false
        var traceOK = true
        var acceptEncoding: String? = nil
        var connectionTokens: [String] = []
        var badHeader: String? = nil
        // Fields are read in place: only the few Peel acts on become Strings.
        ex.forEachField { field in
            // Whose answer it is, and what the request asks of caches (issue 17): read only while
            // the cache is on.
            if caching, let i = field.index(in: cacheFields) {
                let value = field.valueString
                let keys = keyFieldNames.count
                if i == keys {
                    cacheControl.append(value)
                } else {
                    // RFC 6265 §5.4 joins Cookie fields with `; `; other list fields join with `, ` (RFC 9110 §5.3).
                    let separator = i < keys && keyFieldNames[i] == "cookie" ? "; " : ", "
                    cacheValues[i] = cacheValues[i].map { $0 + separator + value } ?? value
                }
            }
            switch field.index(in: Self.inspected) {
            case 0: requestId = field.valueString
            case 1: if host == nil { host = field.valueString } else { badHeader = "more than one Host header" }
            case 2: xff = xff.map { $0 + ", " + field.valueString } ?? field.valueString
            case 3: acceptLanguage = field.valueString
            case 4:
                // `keep-alive` and `close` (nearly every client's value) name nothing that is not dropped anyway.
                if field.valueEquals("keep-alive") || field.valueEquals("close") { break }
                for t in field.valueString.split(separator: ",") { connectionTokens.append(trimOWS(t).lowercased()) }
            case 5: origin = field.valueString
            case 6: requestMethod = field.valueString
            case 7: requestHeaders = requestHeaders.map { $0 + ", " + field.valueString } ?? field.valueString
            case 8: forwardedProto = field.valueString
            case 9: forwardedHost = field.valueString
            case 10: acceptEncoding = acceptEncoding.map { $0 + ", " + field.valueString } ?? field.valueString
            case 11: hasAuthorization = true
            case 12: forwarded = forwarded.map { $0 + ", " + field.valueString } ?? field.valueString
            // W3C Trace Context §3.2: one traceparent in its exact form, else it goes, with tracestate.
            case 13: traceOK = !sawTraceparent && RequestPolicy.isTraceparent(Array(field.valueString.utf8)); sawTraceparent = true
            default: break
            }
        }
        // Forwarded fields are believed only from a trusted proxy (issue 18): from anyone else they
        // are dropped, Peel writes its own, and redirects are rewritten from Host alone; a client
        // could otherwise steer rewritten Locations (redirect poisoning behind a shared cache) and
        // forge the chain the upstream sees.
        let peer = ex.peerAddress
        let fromTrustedProxy = IPNetwork.any(config.trustedProxies, contain: peer)
        if fromTrustedProxy {
            ex.clientAddress = Self.realClient(peer: peer, forwardedFor: xff, trusted: config.trustedProxies)
        } else {
            xff = nil
            forwardedProto = nil
            forwardedHost = nil
            forwarded = nil
        }
        let id = requestId.flatMap { RequestPolicy.acceptableRequestId($0) ? $0 : nil } ?? nextRequestId()
        let call = Call(exchange: ex, rules: rules, started: started, requestId: id, language: Language(acceptLanguage: acceptLanguage))
        call.origin = origin ?? ex.refusedOrigin
        call.acceptEncoding = acceptEncoding
        call.addressFields = (host, forwardedProto, forwardedHost)

        // Refused by the server's parser (framing, limits, timeouts, Expect): answered like any failure.
        if let refusal = ex.refusal {
            // The log says why, whatever the wire says (an HTTP/2 or TLS client gets no HTTP/1.1 answer).
            call.reason = refusal.detail
            if refusal == .overBudget { return answer(call, .serverBusy(refusal.detail)) }
            return answer(call, .refused(status: refusal.status, tooLarge: refusal.isTooLarge, detail: refusal.detail))
        }

        // RFC 9112 §3.2: a 1.1 request without Host, or with two, is refused.
        if let badHeader { return refuse(call, badHeader) }
        if ex.version.major == 1 && ex.version.minor >= 1 && host == nil { return refuse(call, "HTTP/1.1 request without Host") }
        if let host, let why = RequestPolicy.hostProblem(host) { return refuse(call, why) }
        // Content-Length and Transfer-Encoding framing was judged by the server's parser.

        let target: (path: String, query: String?)
        switch RequestPolicy.check(method: ex.method, target: ex.target, selfAuthorities: selfAuthorities) {
        case .refuse(let why): return refuse(call, why)
        case .forward(let p, let q): target = (p, q)
        }
        call.path = target.path

        // A preflight is Peel's to answer when it manages CORS: the upstream is not contacted.
        if let cors, CORSPolicy.isPreflight(method: ex.method, origin: origin, requestMethod: requestMethod) {
            let fields = cors.preflightFields(origin: origin, requestMethod: requestMethod, requestHeaders: requestHeaders)
            return send(call, status: 204, headers: fields + [("X-Request-Id", id)], body: [], kind: "preflight", code: nil)
        }

        // Peel's own path: answered here, never forwarded (issue 13).
        if let own = config.reachabilityPath, target.path == own {
            // Accept is read only here: Foundation's `contains` on every request's Accept cost ~4k
            // instructions of a /small request (callgrind).
            let wantsEvents = ex.header("accept").map { $0.lowercased().contains("text/event-stream") } ?? false
            return answerReachability(call, events: wantsEvents)
        }

        if caching {
            let keys = keyFieldNames.count
            // The Host as forwarded (issue 17), with a trusted proxy's X-Forwarded-Host beside it:
            // two tenants behind one Peel never share an entry.
            let tenant = (host?.lowercased() ?? "") + (forwardedHost.map { " " + $0.lowercased() } ?? "")
            let key = OfflineCacheKey(host: tenant, target: target.path + (target.query.map { "?" + $0 } ?? ""),
                                      acceptLanguage: acceptLanguage, fieldNames: keyFieldNames,
                                      user: Array(cacheValues[0..<keys]))
            call.userKey = key
            if ex.method == "GET" || ex.method == "HEAD" { call.cacheKey = key }
            call.cacheRequest = CacheRequest(cacheControl: cacheControl, pragma: cacheValues[keys + 1],
                                             ifNoneMatch: cacheValues[keys + 2], ifModifiedSince: cacheValues[keys + 3])
            call.hasAuthorization = hasAuthorization
        }

        if reachability.isDown {
            if let key = call.cacheKey { return answerOffline(call, key) }
            return answer(call, .offline)
        }

        // `Connection: keep-alive` (what HTTP/1.0 clients send) names nothing that is not dropped anyway.
        let extraHopByHop = connectionTokens.filter { !RequestPolicy.droppedRequestHeaders.contains($0) }
        let connectionNamed = extraHopByHop.isEmpty ? nil : HeaderNameSet(extraHopByHop)
        // HEAD answers what GET would (status, fields, the unwrapped length): it goes upstream as GET,
        // is judged like one, and the server writes the answer without its body.
        let method = ex.method == "HEAD" ? "GET" : ex.method
        // Codings follow the client (issue 19): the upstream is asked for what the client accepts and
        // Peel can decode, and for none when the client named none.
        let preserveHost = config.preserveHost
        let upstreamCodings = CompressionPolicy.upstreamAcceptEncoding(acceptEncoding, decodable: UpstreamClient.decodableCodings)
        let transfer = upstream.send(method: method, path: basePath + target.path, query: target.query, body: .exchange(ex),
                                     acceptEncoding: upstreamCodings, headers: { lines in
            var sawAccept = false
            var sawContentType = false
            ex.forEachField { field in
                if field.isIn(Self.droppedRequest) { return }
                if let connectionNamed, field.isIn(connectionNamed) { return }
                if !traceOK && field.isIn(Self.traceFields) { return }
                switch field.index(in: Self.curlDefaults) {
                case 0: sawAccept = true
                case 1: sawContentType = true
                default: break
                }
                lines.append(field)
            }
            // The hop that connected to Peel is appended; from a trusted proxy the chain it sent is
            // kept before it. Proto and host are always this hop's (http, the Host Peel was sent):
            // absolute URLs the upstream builds from them name its own origin, which Peel rewrites
            // to the public one (a trusted proxy's X-Forwarded-Host/-Proto, see publicOrigin).
            lines.append("X-Forwarded-For", xff.map { $0 + ", " + peer } ?? peer)
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

    /// Request fields Peel reads, by position: see `handle`.
    private static let inspected = HeaderNameSet(["x-request-id", "host", "x-forwarded-for", "accept-language",
                                                  "connection", "origin", "access-control-request-method",
                                                  "access-control-request-headers", "x-forwarded-proto",
                                                  "x-forwarded-host", "accept-encoding", "authorization", "forwarded",
                                                  "traceparent"])
    /// Trace Context fields, dropped together when traceparent is not in its W3C form.
    private static let traceFields = HeaderNameSet(["traceparent", "tracestate"])
    /// The client behind a trusted `peer`: X-Forwarded-For walked from the right past every trusted
    /// hop, the first untrusted one (nginx realip with `real_ip_recursive on`). All trusted: the
    /// leftmost. An entry that is not an address ends the walk at the hop after it, which a trusted
    /// proxy vouched for, so no forged text ever becomes the client.
    static func realClient(peer: String, forwardedFor: String?, trusted: [IPNetwork]) -> String {
        guard let forwardedFor else { return peer }
        var client = peer
        for hop in forwardedFor.split(separator: ",").reversed() {
            let a = trimOWS(hop)
            guard IPNetwork.address(a) != nil else { return client }
            client = a
            if !IPNetwork.any(trusted, contain: a) { return a }
        }
        return client
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

    /// Fields curl would add itself when the client sent none.
    private static let curlDefaults = HeaderNameSet(["accept", "content-type"])
    private static let droppedRequest = HeaderNameSet(RequestPolicy.droppedRequestHeaders)

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
            metrics.recordUpstreamError(failure.reason)
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
            let contentType = response.headers.first("content-type")
            let answer = UpstreamAnswer(status: response.status, contentType: contentType, path: call.path, isHead: false,
                                        isOptions: call.exchange.method == "OPTIONS",
                                        contentDisposition: response.headers.first("content-disposition"))
            let judged = response.body.withUnsafeBufferPointer {
                judgeWithCode(answer, body: $0, config: call.rules.envelope, passesThrough: call.passesUnjudged)
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
            case .passthrough:
                // A newer answer that is not stored must not leave the older one servable (a 304
                // refreshed it above; a 5xx is what stale-if-error keeps it for).
                if let key = call.cacheKey, response.status != 304, response.status < 500 { cache.invalidate(key: key) }
                pass(call, status: response.status, response, range: nil, kind: "passthrough", contentType: nil)
            case .problem(let p):
                // An error the upstream chose to answer (a 4xx, a business or auth code) replaces
                // what was stored: a revoked token's stale `/me`, a deleted resource, must not come
                // back while offline. A 5xx keeps it: that is what stale answers are for.
                if let key = call.cacheKey, response.status < 500 { cache.invalidate(key: key) }
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
        guard let coding = head.first("content-encoding").map({ trimOWS($0) }), !coding.isEmpty,
              coding.lowercased() != "identity",
              CompressionPolicy.accepts(call.acceptEncoding, contentEncoding: coding) else { return false }
        let answer = UpstreamAnswer(status: status, contentType: head.first("content-type"), path: call.path, isHead: false,
                                    isOptions: call.exchange.method == "OPTIONS",
                                    contentDisposition: head.first("content-disposition"))
        guard passesUnjudged(answer, config: call.rules.envelope) else { return false }
        call.keptCoding = coding
        return true
    }

    /// Decides, when the first body bytes arrive, whether the answer streams: a passthrough answer
    /// (decided from status and fields alone) of unknown length, declared over `stream_threshold`, or
    /// an event stream is sent as it arrives, pausing the upstream transfer while the client is slow;
    /// anything else is buffered whole (judged, or passed with its length and maybe compressed).
    /// Runs inside curl's write callback: nothing here may call curl.
    private func headArrived(_ call: Call, status: Int, head: ResponseHeadView) -> StreamSink? {
        let contentType = head.first("content-type")
        let answer = UpstreamAnswer(status: status, contentType: contentType, path: call.path, isHead: false,
                                    isOptions: call.exchange.method == "OPTIONS",
                                    contentDisposition: head.first("content-disposition"))
        // The call's own rules (a reload mid-call must not mix two), decided once for this answer.
        let passes = passesUnjudged(answer, config: call.rules.envelope)
        call.passesUnjudged = passes
        guard passes else { return nil }
        let isEventStream = contentType.map { trimOWS($0).lowercased().hasPrefix("text/event-stream") } ?? false
        // An answer curl decodes has a Content-Length that says nothing of its decoded size, so it
        // streams like one of unknown length (chunked) rather than meet max_upstream_body. Any other
        // declared length is the body's, and is kept (issue 19: downloads keep their length).
        let coding = head.first("content-encoding").map { trimOWS($0) }
        let decoded = call.keptCoding == nil && coding.map { !$0.isEmpty && $0.lowercased() != "identity" } ?? false
        let declared = decoded ? nil : head.first("content-length").flatMap { Int(trimOWS($0)) }.flatMap { $0 >= 0 ? $0 : nil }
        if !isEventStream, let length = declared, length <= config.streamThreshold {
            return nil
        }
        guard let transfer = call.transfer, !call.exchange.answered else { return nil }
        let headers = head.copy()
        call.upstreamStatus = status
        call.upstreamHeaders = headers
        let corsFields = cors?.answerFields(origin: call.origin, upstreamExposed: Self.exposedNames(headers)) ?? []
        let draining = self.draining
        let kept = call.keptCoding
        let vary = Self.varyValue(headers, adding: (kept != nil ? ["Accept-Encoding"] : []) + Self.varyNames(corsFields))
        guard let stream = call.exchange.startStream(status: status, contentLength: declared, headers: { [self] out in
            out.add(headers, dropping: droppedResponse)
            addRewritten(headers, call, to: &out)
            out.add("X-Request-Id", call.requestId)
            for (name, value) in corsFields where !Self.isVary(name) { out.add(name, value) }
            if let vary { out.add("Vary", vary) }
            if let kept { out.add("Content-Encoding", kept) }
            if draining { out.add("Connection", "close") }
        }) else {
            return { _ in .abort }
        }
        call.stream = stream
        // A streamed answer is never stored, so it makes the older entry for its request stale, and
        // an unsafe method's success invalidates as a buffered one does (the final review of session
        // 4: streamed answers skipped both).
        invalidateAfterUnsafe(call, status: status, headers: headers)
        if let key = call.cacheKey, status != 304, status < 500 { cache.invalidate(key: key) }
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
        // Only a flowing stream is cut for idleness, and its head is long sent: never a problem document.
        case .streamIdle: return .timedOut
        }
    }

    /// Answers with the upstream's fields minus hop-by-hop and envelope-describing ones (SPEC), the
    /// rewritten ones, then Peel's own, and `response.body[range]` (all of it when nil), compressed
    /// when the client accepts a coding Peel offers. `contentType` replaces the upstream's when set.
    private func pass(_ call: Call, status: Int, _ response: UpstreamResponse, range: Range<Int>?, kind: String,
                      contentType: String?) {
        pass(call, status: status, headers: response.headers, body: response.body, hold: response.hold, range: range,
             kind: kind, contentType: contentType)
    }

    /// `pass` for a body and fields from anywhere (the offline cache's too), with `extra` fields after Peel's.
    private func pass(_ call: Call, status: Int, headers upstreamHeaders: ResponseHeaders, body: [UInt8], hold: BudgetHold?,
                      range: Range<Int>?, kind: String, contentType: String?, extra: [(String, String)] = []) {
        guard !call.exchange.answered else { return }
        let draining = self.draining
        let corsFields = cors?.answerFields(origin: call.origin, upstreamExposed: Self.exposedNames(upstreamHeaders)) ?? []
        let slice = range ?? 0..<body.count
        let effectiveType = contentType ?? upstreamHeaders.first("content-type")
        // A body kept in the upstream's coding is not compressed again.
        let kept = call.keptCoding
        // A candidate's representation depends on Accept-Encoding, whether or not this client sent one.
        let candidate = kept == nil && compression.isCandidate(status: status, contentType: effectiveType, count: slice.count)
            && upstreamHeaders.first("content-range") == nil
        var encoded: (coding: ContentCoding, body: [UInt8])? = nil
        if candidate, let coding = CompressionPolicy.negotiate(call.acceptEncoding, offered: compression.offered) {
            let body = body.withUnsafeBytes { all in
                encoder.encode(UnsafeRawBufferPointer(rebasing: all[slice]), as: coding)
            }
            if let body { encoded = (coding, body) }
        }
        // A 204 has no content, so no Content-Type (RFC 9110 §15.3.5, §8.3): not the envelope's either.
        let dropsType = contentType != nil || status == 204
        let vary = Self.varyValue(upstreamHeaders, adding: (candidate || kept != nil ? ["Accept-Encoding"] : []) + Self.varyNames(corsFields))
        let dropping = switch (dropsType, encoded != nil) {
        case (false, false): droppedResponse
        case (true, false): droppedResponseAndType
        case (false, true): droppedResponseEncoded
        case (true, true): droppedResponseAndTypeEncoded
        }
        let headers: (inout ReplyHeaders) -> Void = { [self] out in
            out.add(upstreamHeaders, dropping: dropping)
            addRewritten(upstreamHeaders, call, to: &out)
            out.add("X-Request-Id", call.requestId)
            for (name, value) in corsFields where !Self.isVary(name) { out.add(name, value) }
            if draining { out.add("Connection", "close") }
            if let contentType { out.add("Content-Type", contentType) }
            for (name, value) in extra { out.add(name, value) }
            if let vary { out.add("Vary", vary) }
            if let kept { out.add("Content-Encoding", kept) }
            if let encoded {
                out.add("Content-Encoding", encoded.coding.rawValue)
                // A strong validator names one exact representation; the encoded one differs from the
                // upstream's, so its ETag is weakened, as nginx's gzip does (RFC 9110 §8.8.1, §8.8.3).
                if let etag = upstreamHeaders.first("etag") { out.add("ETag", etag.hasPrefix("W/") ? etag : "W/" + etag) }
            }
        }
        if let encoded {
            call.exchange.respond(status: status, body: encoded.body, range: nil, headers: headers)
            record(call, status: status, kind: kind, bytes: encoded.body.count, code: nil)
        } else {
            call.exchange.respond(status: status, body: body, range: range, keeping: hold, headers: headers)
            record(call, status: status, kind: kind, bytes: slice.count, code: nil)
        }
    }

    /// Adds the upstream's Location, Content-Location, Refresh and Set-Cookie fields rewritten to name
    /// Peel (when those rewrites are on; otherwise the bulk copy passed them as they were).
    private func addRewritten(_ headers: ResponseHeaders, _ call: Call, to out: inout ReplyHeaders) {
        let redirects = config.rewriteRedirects
        let cookies = config.rewriteCookies
        guard redirects || cookies else { return }
        headers.forEachField { f in
            switch f.index(in: Self.rewrittenFields) {
            case 0?, 1?: if redirects { out.add(f.nameString, rewrite.location(f.valueString, publicOrigin: call.publicOrigin)) }
            case 2?: if redirects { out.add(f.nameString, rewrite.refresh(f.valueString, publicOrigin: call.publicOrigin)) }
            case 3?: if cookies { out.add(f.nameString, rewrite.setCookie(f.valueString)) }
            default: break
            }
        }
    }

    /// Fields every answer Peel writes itself carries (the upstream's answers carry their own). The
    /// hook for cross-origin fields: CORS (Fetch §3.2) must apply to `/_peel/reachability` as to any
    /// answer, so whatever the Forwarder adds for CORS belongs here too.
    private func ownFields(_ call: Call) -> [(String, String)] {
        [("X-Request-Id", call.requestId)] + (cors?.answerFields(origin: call.origin) ?? [])
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
            let path = rewrite.location(value, publicOrigin: nil)
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
    private func store(_ key: OfflineCacheKey, _ call: Call, status: Int, _ response: UpstreamResponse, range: Range<Int>?) {
        // Too large for the whole cache (or a shared-store value): not worth the copy, and the older
        // answer must go.
        if (range?.count ?? 0) > cache.maxBody { return cache.invalidate(key: key) }
        let body = range.map { Array(response.body[$0]) } ?? []
        let ex = call.exchange
        cache.store(key: key, request: call.cacheRequest, hasAuthorization: call.hasAuthorization, requestField: { Self.requestValue(ex, $0) },
                    status: status, fields: response.headers, contentType: range == nil ? nil : "application/json", body: body)
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
        let extra = [("Age", String(hit.age)), ("Cache-Status", "Peel; hit; detail=offline")]
        if hit.status == 304 {
            // RFC 9110 §15.4.5: the fields a 200 would carry that describe the stored answer, no body:
            // its ETag weakened and `Vary: Accept-Encoding` where the 200 would have been compressed.
            let candidate = hit.contentType != nil
                && compression.isCandidate(status: 200, contentType: hit.contentType, count: hit.storedBodyCount)
            let compressed = candidate && CompressionPolicy.negotiate(call.acceptEncoding, offered: compression.offered) != nil
            // The upstream's own CORS fields too, when it manages CORS (Peel's come below otherwise).
            let upstreamCORS = cors == nil ? Set(CORSPolicy.upstreamFields) : []
            var fields = hit.fields.pairs.filter {
                let name = $0.0.lowercased()
                return (Self.keptOnNotModified.contains(name) || upstreamCORS.contains(name)) && name != "vary"
            }
            if compressed {
                fields = fields.map { $0.0.lowercased() == "etag" && !$0.1.hasPrefix("W/") ? ($0.0, "W/" + $0.1) : $0 }
            }
            let corsFields = cors?.answerFields(origin: call.origin, upstreamExposed: Self.exposedNames(hit.fields)) ?? []
            // One Vary field, as the 200 would carry: the stored names, Accept-Encoding, CORS's.
            let vary = Self.varyValue(hit.fields, adding: (candidate ? ["Accept-Encoding"] : []) + Self.varyNames(corsFields))
            var headers = fields + extra + [("X-Request-Id", call.requestId)] + corsFields.filter { !Self.isVary($0.0) }
            if let vary { headers.append(("Vary", vary)) }
            if draining { headers.append(("Connection", "close")) }
            return send(call, status: 304, headers: headers, body: [], kind: "offline-cache", code: nil)
        }
        pass(call, status: hit.status, headers: hit.fields, body: hit.body, hold: nil, range: nil, kind: "offline-cache",
             contentType: hit.contentType, extra: extra)
    }

    /// RFC 9110 §15.4.5: what a 304 carries of the answer it stands for.
    private static let keptOnNotModified: Set<String> = ["cache-control", "content-location", "date", "etag", "expires", "vary",
                                                         "last-modified"]

    /// The reachability document, or with `Accept: text/event-stream` a stream of it (issue 13).
    private func answerReachability(_ call: Call, events: Bool) {
        let ex = call.exchange
        guard ex.method == "GET" || ex.method == "HEAD" else {
            let p = Problem(kind: .badRequest, status: 405, detail: "\(config.reachabilityPath ?? "") answers GET and HEAD only")
            let body = renderProblem(p, requestId: call.requestId, language: call.language, typeBase: config.envelope.problemTypeBase)
            let headers = [("Content-Type", "application/problem+json"), ("Cache-Control", "no-store"), ("Allow", "GET, HEAD")]
                + ownFields(call)
            return send(call, status: 405, headers: headers, body: body, kind: p.kind.rawValue, code: p.code)
        }
        let snap = reachability.snapshot
        // While draining, a new stream would only be cut at once: the document answers instead.
        if events && ex.method == "GET" && !draining {
            let client = streamClient(call.exchange.clientAddress)
            if case .failure(let refusal) = streams.reserve(client: client) {
                // Peel's own bounds, not the upstream's fault: the problem names which one.
                return answer(call, .tooManyStreams(perClient: refusal == .clientFull))
            }
            let fields = ownFields(call)
            guard let stream = ex.startStream(status: 200, headers: { out in
                out.add("Content-Type", "text/event-stream")
                out.add("Cache-Control", "no-store")
                for (name, value) in fields { out.add(name, value) }
            }) else {
                streams.release(client: client)
                return record(call, status: 499, kind: "client-closed", bytes: 0, code: nil)
            }
            streams.adopt(stream, client: client, state: snap.state, since: snap.since, reason: snap.publicReason)
            // Logged and counted when it opens: a stream may stay open for days.
            return record(call, status: 200, kind: "reachability-stream", bytes: 0, code: nil)
        }
        let body = Array(reachabilityDocument(state: snap.state, since: snap.since, reason: snap.publicReason).utf8)
        var headers = [("Content-Type", "application/json"), ("Cache-Control", "no-store")] + ownFields(call)
        if draining { headers.append(("Connection", "close")) }
        send(call, status: 200, headers: headers, body: body, kind: "reachability", code: nil)
    }

    private func refuse(_ call: Call, _ why: String) {
        answer(call, .refused(status: 400, tooLarge: false, detail: why))
    }

    /// Answers an outcome with its problem document.
    private func answer(_ call: Call, _ outcome: Outcome) {
        answerProblem(call, problem(for: outcome, config: call.rules.envelope))
    }

    private func answerProblem(_ call: Call, _ problem: Problem) {
        var p = problem
        if let reason = p.reason { call.reason = reason }
        if p.upstreamStatus == nil { p.upstreamStatus = call.upstreamStatus }
        let body = renderProblem(p, requestId: call.requestId, language: call.language, typeBase: call.rules.envelope.problemTypeBase)
        var headers: [(String, String)] = [("Content-Type", "application/problem+json"), ("X-Request-Id", call.requestId)]
        // The upstream's fields that clients act on stay (a 429's Retry-After, a logout's Set-Cookie).
        var sawCacheControl = false
        var sawChallenge = false
        call.upstreamHeaders?.forEachField { f in
            guard let i = f.index(in: keptOnProblem) else { return }
            switch i {
            case 1: headers.append((f.nameString, config.rewriteCookies ? rewrite.setCookie(f.valueString) : f.valueString))
            case 2: sawChallenge = true; headers.append((f.nameString, f.valueString))
            case 4: sawCacheControl = true; headers.append((f.nameString, f.valueString))
            default: headers.append((f.nameString, f.valueString))
            }
        }
        if !sawCacheControl { headers.append(("Cache-Control", "no-store")) }
        // RFC 9110 §15.5.2: a 401 carries a challenge; the Bearer scheme's for an expired token (RFC 6750 §3).
        if p.status == 401 && !sawChallenge { headers.append(("WWW-Authenticate", "Bearer error=\"invalid_token\"")) }
        if p.kind == .offline { headers.append(("Retry-After", retryAfter)) }
        // Bodies held now are answered within seconds; a client may try again after one.
        if p.kind == .serverBusy { headers.append(("Retry-After", "1")) }
        if let cors { headers += cors.answerFields(origin: call.origin, upstreamExposed: call.upstreamHeaders.map(Self.exposedNames) ?? []) }
        if draining || p.kind == .badRequest { headers.append(("Connection", "close")) }
        var sent = body
        if compression.isCandidate(status: p.status, contentType: "application/problem+json", count: body.count) {
            headers.append(("Vary", "Accept-Encoding"))
            if let coding = CompressionPolicy.negotiate(call.acceptEncoding, offered: compression.offered),
               let encoded = body.withUnsafeBytes({ encoder.encode($0, as: coding) }) {
                headers.append(("Content-Encoding", coding.rawValue))
                sent = encoded
            }
        }
        send(call, status: p.status, headers: Self.foldingVary(headers), body: sent, kind: p.kind.rawValue, code: p.code)
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

    /// Whether a field name is Vary.
    static func isVary(_ name: String) -> Bool { name.utf8.count == 4 && name.lowercased() == "vary" }

    /// The names listed by the Vary fields among `fields`.
    static func varyNames(_ fields: [(String, String)]) -> [String] {
        fields.filter { isVary($0.0) }.flatMap { $0.1.split(separator: ",").map { trimOWS($0) } }
    }

    /// One Vary value: the upstream's names, then `adding`, each once whatever its case (RFC 9110
    /// §12.5.5; two Vary fields, or a name twice, confuse caches); `*` alone when anyone said `*`.
    static func varyValue(_ upstream: ResponseHeaders, adding: [String]) -> String? {
        var names: [String] = []
        upstream.forEachField { f in
            if f.isIn(varyField) { names += f.valueString.split(separator: ",").map { trimOWS($0) } }
        }
        return mergedVary(names + adding)
    }

    /// `names` without empty ones and repeats (case-insensitive), joined; `*` when one is `*`.
    static func mergedVary(_ names: [String]) -> String? {
        var seen: Set<String> = []
        var out: [String] = []
        for name in names where !name.isEmpty {
            if name == "*" { return "*" }
            if seen.insert(name.lowercased()).inserted { out.append(name) }
        }
        return out.isEmpty ? nil : out.joined(separator: ", ")
    }

    /// `headers` with every Vary field folded into one, where the first one was.
    static func foldingVary(_ headers: [(String, String)]) -> [(String, String)] {
        let names = varyNames(headers)
        guard let merged = mergedVary(names) else { return headers.filter { !isVary($0.0) } }
        var out: [(String, String)] = []
        var placed = false
        for (name, value) in headers {
            if isVary(name) {
                if !placed { out.append(("Vary", merged)); placed = true }
            } else {
                out.append((name, value))
            }
        }
        return out
    }

    private static let varyField = HeaderNameSet(["vary"])

    /// The names in the upstream's Access-Control-Expose-Headers fields (Express's pagination list),
    /// merged into Peel's own when it manages CORS.
    static func exposedNames(_ headers: ResponseHeaders) -> [String] {
        var names: [String] = []
        headers.forEachField { f in
            if f.isIn(exposeField) { names += f.valueString.split(separator: ",").map { trimOWS($0) } }
        }
        return names
    }

    private static let exposeField = HeaderNameSet(["access-control-expose-headers"])

    private func send(_ call: Call, status: Int, headers: [(String, String)], body: [UInt8], kind: String, code: Int64?) {
        guard !call.exchange.answered else { return }
        call.exchange.respond(status: status, headers: headers, body: body)
        record(call, status: status, kind: kind, bytes: body.count, code: code)
    }

    /// Counts the answer and writes its access-log line: `code` is the one Peel answered with (a
    /// problem's), `upstream_code` the envelope code as the upstream sent it, null when it sent none.
    private func record(_ call: Call, status: Int, kind: String, bytes: Int, code: Int64?, cut: String? = nil) {
        guard !call.done else { return }
        call.done = true
        let duration = monotonicNow() - call.started
        metrics.inflight.subtract(1, ordering: .relaxed)
        metrics.recordRequest(kind: kind, status: status, duration: duration, upstreamDuration: call.upstreamDuration)
        guard let accessLog else { return }
        var line = "{\"time\":\"\(rfc3339(wallNow()))\",\"request_id\":\(jsonEscaped(call.requestId))"
        line += ",\"method\":\(jsonEscaped(call.exchange.method)),\"path\":\(jsonEscaped(call.path.isEmpty ? call.exchange.target : call.path))"
        line += ",\"status\":\(status),\"kind\":\"\(kind)\",\"code\":" + (code.map { String($0) } ?? "null")
        line += ",\"upstream_status\":" + (call.upstreamStatus.map(String.init) ?? "null")
        line += ",\"upstream_code\":" + (call.upstreamCode.map { String($0) } ?? "null")
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

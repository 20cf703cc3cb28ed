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
    private var basePath: String
    private var retryAfter: String
    private let idPrefix: String
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
         accessLog: AccessLog?, workerIndex: Int) {
        self.config = config
        self.upstream = upstream
        self.reachability = reachability
        self.metrics = metrics
        log = accessLog
        self.accessLog = config.accessLog ? accessLog : nil
        basePath = config.upstream.basePath
        retryAfter = String(max(1, Int(config.probeInterval.rounded(.up))))
        let random = UInt64.random(in: 0...UInt64.max)
        idPrefix = String(random, radix: 16).leftPadded(to: 16) + "-" + String(workerIndex, radix: 16) + "-"
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
            answerProblem(call, Problem(kind: .upstreamUnreachable, status: 503,
                                        detail: "Peel is shutting down and the upstream did not answer within shutdown_timeout"))
        }
    }

    /// Takes a reloaded configuration for the requests that arrive from now on.
    func apply(_ config: GatewayConfig) {
        self.config = config
        rules = Rules(config.envelope)
        accessLog = config.accessLog ? log : nil
        basePath = config.upstream.basePath
        retryAfter = String(max(1, Int(config.probeInterval.rounded(.up))))
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
        var connectionTokens: [String] = []
        var badHeader: String? = nil
        // Fields are read in place: only the few Peel acts on become Strings.
        ex.forEachField { field in
            switch field.index(in: Self.inspected) {
            case 0: requestId = field.valueString
            case 1: if host == nil { host = field.valueString } else { badHeader = "more than one Host header" }
            case 2: xff = xff.map { $0 + ", " + field.valueString } ?? field.valueString
            case 3: acceptLanguage = field.valueString
            case 4:
                // `keep-alive` and `close` (nearly every client's value) name nothing that is not dropped anyway.
                if field.valueEquals("keep-alive") || field.valueEquals("close") { break }
                for t in field.valueString.split(separator: ",") { connectionTokens.append(trimOWS(t).lowercased()) }
            default: break
            }
        }
        let id = requestId.flatMap { RequestPolicy.acceptableRequestId($0) ? $0 : nil } ?? nextRequestId()
        let call = Call(exchange: ex, rules: rules, started: started, requestId: id, language: Language(acceptLanguage: acceptLanguage))

        // Refused by the server's parser (framing, limits, timeouts, Expect): answered like any failure.
        if let refusal = ex.refusal { return answerProblem(call, Self.problem(for: refusal)) }

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

        if reachability.isDown {
            return answerProblem(call, Problem(kind: .offline))
        }

        // `Connection: keep-alive` (what HTTP/1.0 clients send) names nothing that is not dropped anyway.
        let extraHopByHop = connectionTokens.filter { !RequestPolicy.droppedRequestHeaders.contains($0) }
        let connectionNamed = extraHopByHop.isEmpty ? nil : HeaderNameSet(extraHopByHop)
        // HEAD answers what GET would (status, fields, the unwrapped length): it goes upstream as GET,
        // is judged like one, and the server writes the answer without its body.
        let method = ex.method == "HEAD" ? "GET" : ex.method
        let transfer = upstream.send(method: method, path: basePath + target.path, query: target.query, body: .exchange(ex),
                                     headers: { lines in
            var sawAccept = false
            var sawContentType = false
            ex.forEachField { field in
                if field.isIn(Self.droppedRequest) { return }
                if let connectionNamed, field.isIn(connectionNamed) { return }
                switch field.index(in: Self.curlDefaults) {
                case 0: sawAccept = true
                case 1: sawContentType = true
                default: break
                }
                lines.append(field)
            }
            let client = ex.clientAddress
            lines.append("X-Forwarded-For", xff.map { $0 + ", " + client } ?? client)
            lines.append("X-Forwarded-Proto", "http")
            if let host { lines.append("X-Forwarded-Host", host) }
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
        ex.onClientGone = { [self] in
            waiting[ObjectIdentifier(call)] = nil
            call.transfer?.cancel()
            call.transfer = nil
            self.record(call, status: 499, kind: "client-closed", bytes: 0, upstreamCode: nil)
        }
    }

    /// Request fields Peel reads, by position: see `handle`.
    private static let inspected = HeaderNameSet(["x-request-id", "host", "x-forwarded-for", "accept-language",
                                                  "connection"])
    /// Fields curl would add itself when the client sent none.
    private static let curlDefaults = HeaderNameSet(["accept", "content-type"])
    private static let droppedRequest = HeaderNameSet(RequestPolicy.droppedRequestHeaders)
    private static let droppedResponse = HeaderNameSet(RequestPolicy.droppedResponseHeaders)
    private static let droppedResponseAndType = HeaderNameSet(RequestPolicy.droppedResponseHeaders.union(["content-type"]))

    func nextRequestId() -> String {
        idCounter &+= 1
        return idPrefix + String(idCounter, radix: 16)
    }

    private func upstreamFinished(_ call: Call, _ result: Result<UpstreamResponse, UpstreamFailure>) {
        waiting[ObjectIdentifier(call)] = nil
        call.transfer = nil
        call.exchange.onClientGone = nil
        switch result {
        case .failure(let failure):
            metrics.recordUpstreamError(failure.reason)
            if failure.isTransportFailure { reachability.recordPassiveFailure() }
            answerProblem(call, Self.problem(for: failure))
        case .success(let response):
            call.upstreamDuration = response.duration
            call.upstreamStatus = response.status
            let contentType = response.headers.first("content-type")
            let answer = UpstreamAnswer(status: response.status, contentType: contentType, path: call.path, isHead: false)
            switch judge(answer, body: response.body, config: call.rules.envelope) {
            case .unwrap(let status, let range):
                // The data member's bytes are sent from the upstream body itself: no copy in Swift.
                let status = range == nil ? 204 : status
                pass(call, status: status, response, dropping: Self.droppedResponseAndType, range: range ?? 0..<0,
                     kind: "ok", contentType: range == nil ? nil : "application/json")
            case .passthrough:
                pass(call, status: response.status, response, dropping: Self.droppedResponse, range: nil,
                     kind: "passthrough", contentType: nil)
            case .problem(let p):
                answerProblem(call, p)
            }
        }
    }

    /// The one place upstream failures become problem documents (SPEC error table).
    static func problem(for failure: UpstreamFailure) -> Problem {
        switch failure {
        case .dns, .refused, .reset, .tls, .other:
            return Problem(kind: .upstreamUnreachable)
        case .timeout, .connectTimeout:
            return Problem(kind: .upstreamTimeout)
        case .tooLarge:
            return Problem(kind: .upstreamTooLarge)
        case .overBudget:
            return Problem(kind: .upstreamTooLarge, detail: "The upstream body would pass Peel's memory budget (max_buffered)")
        case .protocolError:
            return Problem(kind: .badUpstreamFormat)
        case .notResent(let why):
            return Problem(kind: .upstreamUnreachable, detail: why)
        case .localResources(let why):
            // Peel's own shortage (descriptors, memory): 503 like the in-flight limit; the upstream is
            // not to blame, so reachability never hears of it (it is not a transport failure).
            return Problem(kind: .upstreamUnreachable, status: 503, detail: "Peel is short of resources: \(why)")
        case .overloaded:
            return Problem(kind: .upstreamUnreachable, status: 503, detail: "Peel has too many upstream calls in flight")
        }
    }

    /// The one place the server's refusals become problem documents: too large is `request-too-large`
    /// (413, 414, 431), everything else `bad-request` with the server's status (400, 408, 417, 505).
    static func problem(for refusal: RequestError) -> Problem {
        if refusal == .overBudget {
            return Problem(kind: .serverBusy, detail: refusal.detail)
        }
        if refusal.isTooLarge {
            return Problem(kind: .requestTooLarge, status: refusal.status, detail: refusal.detail)
        }
        return Problem(kind: .badRequest, status: refusal.status, detail: refusal.detail)
    }

    /// Answers with the upstream's fields minus `dropping` (SPEC: hop-by-hop and envelope-describing
    /// ones), then Peel's own, and `response.body[range]` (all of it when nil).
    private func pass(_ call: Call, status: Int, _ response: UpstreamResponse, dropping: HeaderNameSet, range: Range<Int>?,
                      kind: String, contentType: String?) {
        guard !call.exchange.answered else { return }
        let draining = self.draining
        call.exchange.respond(status: status, body: response.body, range: range) { out in
            out.add(response.headers, dropping: dropping)
            out.add("X-Request-Id", call.requestId)
            if draining { out.add("Connection", "close") }
            if let contentType { out.add("Content-Type", contentType) }
        }
        record(call, status: status, kind: kind, bytes: range?.count ?? response.body.count, upstreamCode: nil)
    }

    private func refuse(_ call: Call, _ why: String) {
        answerProblem(call, Problem(kind: .badRequest, detail: why))
    }

    private func answerProblem(_ call: Call, _ problem: Problem) {
        var p = problem
        if p.upstreamStatus == nil { p.upstreamStatus = call.upstreamStatus }
        let body = renderProblem(p, requestId: call.requestId, language: call.language, typeBase: call.rules.envelope.problemTypeBase)
        var headers: [(String, String)] = [
            ("Content-Type", "application/problem+json"),
            ("Cache-Control", "no-store"),
            ("X-Request-Id", call.requestId),
        ]
        if p.kind == .offline { headers.append(("Retry-After", retryAfter)) }
        // Bodies held now are answered within seconds; a client may try again after one.
        if p.kind == .serverBusy { headers.append(("Retry-After", "1")) }
        if draining || p.kind == .badRequest { headers.append(("Connection", "close")) }
        send(call, status: p.status, headers: headers, body: body, kind: p.kind.rawValue, upstreamCode: p.code)
    }

    private func send(_ call: Call, status: Int, headers: [(String, String)], body: [UInt8], kind: String, upstreamCode: Int64?) {
        guard !call.exchange.answered else { return }
        call.exchange.respond(status: status, headers: headers, body: body)
        record(call, status: status, kind: kind, bytes: body.count, upstreamCode: upstreamCode)
    }

    private func record(_ call: Call, status: Int, kind: String, bytes: Int, upstreamCode: Int64?) {
        let duration = monotonicNow() - call.started
        metrics.inflight.subtract(1, ordering: .relaxed)
        metrics.recordRequest(kind: kind, status: status, duration: duration, upstreamDuration: call.upstreamDuration)
        guard let accessLog else { return }
        var line = "{\"time\":\"\(rfc3339(wallNow()))\",\"request_id\":\(jsonEscaped(call.requestId))"
        line += ",\"method\":\(jsonEscaped(call.exchange.method)),\"path\":\(jsonEscaped(call.path.isEmpty ? call.exchange.target : call.path))"
        line += ",\"status\":\(status),\"kind\":\"\(kind)\""
        line += ",\"upstream_status\":" + (call.upstreamStatus.map(String.init) ?? "null")
        line += ",\"upstream_code\":" + (upstreamCode.map { String($0) } ?? "null")
        line += ",\"duration_ms\":\((duration * 1_000_000).rounded() / 1000),\"bytes\":\(bytes)"
        line += ",\"client\":\(jsonEscaped(call.exchange.clientAddress))}"
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

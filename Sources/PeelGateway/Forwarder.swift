import PeelEnvelope
import PeelIO

/// Wires one worker's listener → upstream client → envelope → response. Loop-thread only.
final class Forwarder {
    private let config: GatewayConfig
    private let upstream: UpstreamClient
    private let reachability: Reachability
    private let metrics: WorkerMetrics
    private let accessLog: AccessLog?
    private let urlPrefix: String
    private let retryAfter: String
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
        self.accessLog = accessLog
        urlPrefix = config.upstream.origin + config.upstream.basePath
        retryAfter = String(max(1, Int(config.probeInterval.rounded(.up))))
        let random = UInt64.random(in: 0...UInt64.max)
        idPrefix = String(random, radix: 16).leftPadded(to: 16) + "-" + String(workerIndex, radix: 16) + "-"
    }

    /// Per-call state, alive from request to answer.
    private final class Call {
        let exchange: HTTPExchange
        let started: Double
        let requestId: String
        let language: Language
        var path = ""
        var transfer: UpstreamTransfer?
        var upstreamDuration: Double?
        var upstreamStatus: Int?

        init(exchange: HTTPExchange, started: Double, requestId: String, language: Language) {
            self.exchange = exchange
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
        var headers: [(String, String, String)] = []  // (name, lowercased name, value)
        var contentLengths: [String] = []
        var transferEncoding: String? = nil
        var badHeader: String? = nil
        ex.forEachHeader { name, value in
            let lower = name.lowercased()
            switch lower {
            case "x-request-id": requestId = value
            case "host": if host == nil { host = value } else { badHeader = "more than one Host header" }
            case "x-forwarded-for": xff = xff.map { $0 + ", " + value } ?? value
            case "accept-language": acceptLanguage = value
            case "connection":
                for t in value.split(separator: ",") { connectionTokens.append(trimOWS(t).lowercased()) }
            case "content-length": contentLengths.append(value)
            case "transfer-encoding": transferEncoding = (transferEncoding.map { $0 + "," } ?? "") + value
            default: break
            }
            headers.append((name, lower, value))
        }
        let id = requestId.flatMap { RequestPolicy.acceptableRequestId($0) ? $0 : nil } ?? nextRequestId()
        let call = Call(exchange: ex, started: started, requestId: id, language: Language(acceptLanguage: acceptLanguage))

        // RFC 9112 §3.2: a 1.1 request without Host, and framing that could be read two ways, are refused.
        if let badHeader { return refuse(call, badHeader) }
        if ex.version.major == 1 && ex.version.minor >= 1 && host == nil { return refuse(call, "HTTP/1.1 request without Host") }
        if transferEncoding != nil && !contentLengths.isEmpty {
            return refuse(call, "both Transfer-Encoding and Content-Length")
        }
        if let te = transferEncoding, trimOWS(te).lowercased() != "chunked" {
            return refuse(call, "Transfer-Encoding must be exactly chunked")
        }
        if contentLengths.count > 1 { return refuse(call, "more than one Content-Length") }

        let target: (path: String, query: String?)
        switch RequestPolicy.check(method: ex.method, target: ex.target, selfAuthorities: selfAuthorities) {
        case .refuse(let why): return refuse(call, why)
        case .forward(let p, let q): target = (p, q)
        }
        call.path = target.path

        if reachability.isDown {
            return answerProblem(call, Problem(kind: .offline))
        }

        var lines: [String] = []
        lines.reserveCapacity(headers.count + 5)
        var sawAccept = false
        var sawContentType = false
        for (name, lower, value) in headers {
            if RequestPolicy.droppedRequestHeaders.contains(lower) || connectionTokens.contains(lower) { continue }
            if lower == "accept" { sawAccept = true }
            if lower == "content-type" { sawContentType = true }
            lines.append(name + ": " + value)
        }
        let client = ex.clientAddress
        lines.append("X-Forwarded-For: " + (xff.map { $0 + ", " + client } ?? client))
        lines.append("X-Forwarded-Proto: http")
        if let host { lines.append("X-Forwarded-Host: " + host) }
        lines.append("X-Request-Id: " + id)
        // curl would invent these when the client sent none; an empty value tells it not to.
        if !sawAccept { lines.append("Accept:") }
        if !sawContentType { lines.append("Content-Type:") }

        var url = urlPrefix
        url += target.path
        if let q = target.query { url += "?" + q }

        let transfer = upstream.send(method: ex.method, url: url, headers: lines, body: .exchange(ex)) { [self] result in
            self.upstreamFinished(call, result)
        }
        call.transfer = transfer
        ex.onClientGone = { [self] in
            call.transfer?.cancel()
            call.transfer = nil
            self.record(call, status: 499, kind: "client-closed", bytes: 0, upstreamCode: nil)
        }
    }

    func nextRequestId() -> String {
        idCounter &+= 1
        return idPrefix + String(idCounter, radix: 16)
    }

    private func upstreamFinished(_ call: Call, _ result: Result<UpstreamResponse, UpstreamFailure>) {
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
            let contentType = Self.header(response.headers, "content-type")
            let isHead = call.exchange.method == "HEAD"
            let answer = UpstreamAnswer(status: response.status, contentType: contentType, path: call.path, isHead: isHead)
            switch judge(answer, body: response.body, config: config.envelope) {
            case .unwrap(let status, let range):
                var headers = passHeaders(response.headers, keepContentType: false, call: call)
                if let range {
                    headers.append(("Content-Type", "application/json"))
                    send(call, status: status, headers: headers, body: Array(response.body[range]), kind: "ok", upstreamCode: nil)
                } else {
                    send(call, status: 204, headers: headers, body: [], kind: "ok", upstreamCode: nil)
                }
            case .passthrough:
                var headers = passHeaders(response.headers, keepContentType: true, call: call)
                if isHead, let length = Self.header(response.headers, "content-length") {
                    headers.append(("Content-Length", length))
                }
                send(call, status: response.status, headers: headers, body: response.body, kind: "passthrough", upstreamCode: nil)
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
        case .protocolError:
            return Problem(kind: .badUpstreamFormat)
        case .overloaded:
            return Problem(kind: .upstreamUnreachable, status: 503, detail: "Peel has too many upstream calls in flight")
        }
    }

    private func passHeaders(_ upstream: [(String, String)], keepContentType: Bool, call: Call) -> [(String, String)] {
        var out: [(String, String)] = []
        out.reserveCapacity(upstream.count + 3)
        for (name, value) in upstream {
            let lower = name.lowercased()
            if RequestPolicy.droppedResponseHeaders.contains(lower) { continue }
            if !keepContentType && lower == "content-type" { continue }
            out.append((name, value))
        }
        out.append(("X-Request-Id", call.requestId))
        if draining { out.append(("Connection", "close")) }
        return out
    }

    private func refuse(_ call: Call, _ why: String) {
        answerProblem(call, Problem(kind: .badRequest, detail: why))
    }

    private func answerProblem(_ call: Call, _ problem: Problem) {
        var p = problem
        if p.upstreamStatus == nil { p.upstreamStatus = call.upstreamStatus }
        let body = renderProblem(p, requestId: call.requestId, language: call.language, typeBase: config.envelope.problemTypeBase)
        var headers: [(String, String)] = [
            ("Content-Type", "application/problem+json"),
            ("Cache-Control", "no-store"),
            ("X-Request-Id", call.requestId),
        ]
        if p.kind == .offline { headers.append(("Retry-After", retryAfter)) }
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

    static func header(_ headers: [(String, String)], _ lowerName: String) -> String? {
        for (n, v) in headers where n.lowercased() == lowerName { return v }
        return nil
    }
}

/// Strips optional whitespace (SP / HTAB, RFC 9110 §5.6.3) from both ends.
func trimOWS<S: StringProtocol>(_ s: S) -> String {
    var bytes = Substring(s).utf8[...]
    while let f = bytes.first, f == 0x20 || f == 0x09 { bytes = bytes.dropFirst() }
    while let l = bytes.last, l == 0x20 || l == 0x09 { bytes = bytes.dropLast() }
    return String(Substring(bytes))
}

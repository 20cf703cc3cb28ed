/// Every way a call can end other than a good answer, before it has a status. `problem(for:config:)`
/// is the one place each becomes an HTTP status and problem document (SPEC's error table), as
/// Caddy's reverse proxy does in its one `statusError`.
public enum Outcome: Sendable, Equatable {
    // What the upstream's answer said (decided by `judge`).
    /// A 2xx whose body is not a well-formed envelope.
    case malformedEnvelope(upstreamStatus: Int, reason: String? = nil)
    /// The envelope code is an auth code, its auth flag is set (unless 403), or the upstream answered 401: the client's token expired.
    case authCode(EnvelopeCode?, message: String?, upstreamStatus: Int, extras: [UpstreamMember] = [], errors: [UInt8]? = nil)
    /// The envelope says the call failed, with its code when it has one.
    case businessCode(EnvelopeCode?, message: String?, upstreamStatus: Int, extras: [UpstreamMember] = [], errors: [UInt8]? = nil)
    /// The upstream answered a status outside 2xx, or a 2xx whose envelope says the server failed
    /// (JSend `error`), with the envelope's code and message when it sent them.
    case upstreamStatus(Int, code: EnvelopeCode?, message: String?, reason: String? = nil, extras: [UpstreamMember] = [],
                        errors: [UInt8]? = nil)

    // What happened to the upstream exchange itself.
    /// DNS, refused, reset, TLS or any other transport failure.
    case unreachable
    /// No whole answer within the timeout (connect or whole exchange).
    case timedOut
    /// The upstream's body is over `max_upstream_body`.
    case upstreamTooLarge
    /// The upstream's body would pass Peel's memory budget (`max_buffered`).
    case upstreamOverBudget
    /// The upstream's body would pass its client's share of Peel's memory budget (`max_buffered_per_client`).
    case upstreamOverClientShare
    /// The upstream's answer broke HTTP framing or its content coding (`reason`: how).
    case brokenFraming(reason: String? = nil)
    /// Peel itself ran out of a resource (descriptors, memory) opening the upstream socket.
    case shortOfResources(String)
    /// Peel's own in-flight limit was reached.
    case overloaded
    /// The connection died after a non-idempotent request went out; it is not sent again.
    case notResent(String)
    /// The call was still waiting for the upstream when `shutdown_timeout` ended.
    case shuttingDown
    /// Peel's bound on reachability event streams was reached: in all, or this client's share.
    case tooManyStreams(perClient: Bool)
    /// Peel's bound on tunnels (WebSockets) was reached: in all, or this client's share.
    case tooManyTunnels(perClient: Bool)

    // What was decided before any upstream work.
    /// The reachability state is down.
    case offline
    /// No route applies to the request's Host and path; no upstream is contacted.
    case noRoute
    /// A declared request body would pass Peel's memory budget; refused before it is read.
    case serverBusy(String)
    /// The request was refused: by the server's parser (with its status) or by Peel's policy (400).
    case refused(status: Int, tooLarge: Bool, detail: String)
}

/// The one place an outcome becomes a status and problem document.
public func problem(for outcome: Outcome, config: EnvelopeConfig) -> Problem {
    switch outcome {
    case .malformedEnvelope(let upstreamStatus, let reason):
        return Problem(kind: .badUpstreamFormat, upstreamStatus: upstreamStatus, reason: reason)
    case .authCode(let code, let message, let upstreamStatus, let extras, let errors):
        return Problem(kind: .authExpired, code: code, detail: message, upstreamStatus: upstreamStatus, upstream: extras,
                       errors: errors)
    case .businessCode(let code, let message, let upstreamStatus, let extras, let errors):
        let status = code.flatMap { config.dialect.codeStatus.status(for: $0) } ?? config.businessStatus
        return Problem(kind: .businessError, status: status, code: code, detail: message, upstreamStatus: upstreamStatus,
                       upstream: extras, errors: errors)
    case .upstreamStatus(let status, let code, let message, let reason, let extras, let errors):
        // A 4xx is the client's own fault and keeps its status; anything else (5xx, or a status outside
        // 100...599) is a bad gateway from the client's point of view (RFC 9110 §15.6.3).
        let clientStatus = status >= 400 && status <= 499 ? status : 502
        return Problem(kind: .upstreamError, status: clientStatus, code: code ?? ProblemKind.upstreamError.defaultCode,
                       detail: message, upstreamStatus: status, reason: reason, upstream: extras, errors: errors)
    case .unreachable:
        return Problem(kind: .upstreamUnreachable)
    case .timedOut:
        return Problem(kind: .upstreamTimeout)
    case .upstreamTooLarge:
        return Problem(kind: .upstreamTooLarge)
    case .upstreamOverBudget:
        // Peel's own shortage, not the upstream's fault: other calls hold the budget now,
        // and the same call may well fit in a moment.
        return Problem(kind: .serverBusy, detail: "Peel's memory budget (max_buffered) is held by other calls; try again shortly")
    case .upstreamOverClientShare:
        // Peel's own bound, not the upstream's fault: this client's other answers, held until it
        // reads them, take its share now.
        return Problem(kind: .serverBusy,
                       detail: "this client already holds its share of Peel's memory budget (max_buffered_per_client) in answers it has not read; try again shortly")
    case .serverBusy(let why):
        return Problem(kind: .serverBusy, detail: why)
    case .brokenFraming(let reason):
        return Problem(kind: .badUpstreamFormat, reason: reason)
    case .shortOfResources(let why):
        // Peel's own shortage: 503 like the in-flight limit (RFC 9110 §15.6.4); the upstream is not to blame.
        return Problem(kind: .upstreamUnreachable, status: 503, detail: "Peel is short of resources: \(why)")
    case .overloaded:
        return Problem(kind: .upstreamUnreachable, status: 503, detail: "Peel has too many upstream calls in flight")
    case .notResent(let why):
        return Problem(kind: .upstreamUnreachable, detail: why)
    case .shuttingDown:
        // The answer the client would have had is lost either way; a 503 with Connection: close says
        // why, where a bare close would look like a network failure.
        return Problem(kind: .upstreamUnreachable, status: 503,
                       detail: "Peel is shutting down and the upstream did not answer within shutdown_timeout")
    case .tooManyStreams(let perClient):
        // Issue 17: Peel's own bounds, never the upstream's fault. One client over its share is told
        // so with 429 (RFC 6585 §4); every place taken is Peel's busy.
        return perClient
            ? Problem(kind: .tooManyStreams, detail: "This client has too many reachability streams open")
            : Problem(kind: .serverBusy, detail: "Peel has too many reachability streams open")
    case .tooManyTunnels(let perClient):
        // As for the streams: one client over its share is told so with 429 (RFC 6585 §4).
        return perClient
            ? Problem(kind: .tooManyStreams, detail: "This client has too many WebSockets open (max_tunnels_per_client)")
            : Problem(kind: .serverBusy, detail: "Peel has too many WebSockets open (max_tunnels)")
    case .offline:
        return Problem(kind: .offline)
    case .noRoute:
        return Problem(kind: .noRoute)
    case .refused(let status, let tooLarge, let detail):
        // Too large is `request-too-large` (413, 414, 431); everything else `bad-request` (400, 408, 417, 505).
        return Problem(kind: tooLarge ? .requestTooLarge : .badRequest, status: status, detail: detail)
    }
}

/// Decides how to answer the client from the upstream's answer and whole body.
public func judge(_ answer: UpstreamAnswer, body: [UInt8], config: EnvelopeConfig) -> Verdict {
    body.withUnsafeBufferPointer { judge(answer, body: $0, config: config) }
}

/// Decides how to answer the client from the upstream's answer and a borrowed body buffer.
public func judge(_ answer: UpstreamAnswer, body: UnsafeBufferPointer<UInt8>, config: EnvelopeConfig) -> Verdict {
    let status = answer.status
    if passesThrough(answer, config) { return .passthrough }
    let envelope = Envelope.read(body, config: config)

    if status >= 200 && status <= 299 {
        guard let envelope else {
            return .problem(Problem(kind: .badUpstreamFormat, upstreamStatus: status))
        }
        // Success is checked first, so a code listed as both success and auth still succeeds.
        if config.successCodes.contains(envelope.code) {
            // No data means nothing to send: 204 whatever 2xx the upstream used (RFC 9110 §15.3.5).
            return .unwrap(status: envelope.data == nil ? 204 : status, data: envelope.data)
        }
        if config.authCodes.contains(envelope.code) {
            return .problem(Problem(kind: .authExpired, code: envelope.code, detail: envelope.message, upstreamStatus: status))
        }
        let businessStatus = config.codeStatus[envelope.code] ?? config.businessStatus
        return .problem(
            Problem(
                kind: .businessError, status: businessStatus, code: envelope.code, detail: envelope.message,
                upstreamStatus: status))
    }

    if let envelope, config.authCodes.contains(envelope.code) {
        return .problem(Problem(kind: .authExpired, code: envelope.code, detail: envelope.message, upstreamStatus: status))
    }
    // A 4xx is the client's own fault and keeps its status; anything else (5xx, or a status outside
    // 100...599) is a bad gateway from the client's point of view (RFC 9110 §15.6.3).
    let clientStatus = status >= 400 && status <= 499 ? status : 502
    return .problem(
        Problem(
            kind: .upstreamError, status: clientStatus, code: envelope?.code, detail: envelope?.message, upstreamStatus: status))
}

/// Whether the answer goes to the client untouched.
func passesThrough(_ answer: UpstreamAnswer, _ config: EnvelopeConfig) -> Bool {
    let status = answer.status
    // HEAD, 1xx, 204, 205, 304 answers carry no content to unwrap (RFC 9110 §9.3.2, §15.3.5, §15.3.6, §15.4.5);
    // 3xx are redirects the client must see.
    if answer.isHead || (status >= 100 && status <= 399 && !(status >= 200 && status <= 299)) { return true }
    if status == 204 || status == 205 { return true }
    for prefix in config.passthroughPaths where answer.path.utf8.starts(with: prefix.utf8) {
        return true
    }
    if let contentType = answer.contentType, MediaType.matchesAny(contentType, config.passthroughContentTypes) {
        return true
    }
    return false
}

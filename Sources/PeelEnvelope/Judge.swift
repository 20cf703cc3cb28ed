/// Decides how to answer the client from the upstream's answer and whole body.
public func judge(_ answer: UpstreamAnswer, body: [UInt8], config: EnvelopeConfig) -> Verdict {
    body.withUnsafeBufferPointer { judge(answer, body: $0, config: config) }
}

/// Decides how to answer the client from the upstream's answer and a borrowed body buffer.
public func judge(_ answer: UpstreamAnswer, body: UnsafeBufferPointer<UInt8>, config: EnvelopeConfig) -> Verdict {
    judgeWithCode(answer, body: body, config: config).verdict
}

/// `judge`, plus the envelope code the upstream sent (nil when there was none), for the access log.
/// `passesThrough` is `passesUnjudged`'s answer when the caller already has it (decided when the
/// head arrived), so the passthrough rules are not matched twice per answer.
public func judgeWithCode(_ answer: UpstreamAnswer, body: UnsafeBufferPointer<UInt8>, config: EnvelopeConfig,
                          passesThrough known: Bool? = nil) -> (verdict: Verdict, upstreamCode: EnvelopeCode?)
{
    if known ?? passesThrough(answer, config) { return (.passthrough, nil) }
    let reading = Envelope.read(body, config: config)
    let code: EnvelopeCode? = if case .envelope(let e) = reading { e.code } else { nil }
    return (verdict(answer, reading, body, config), code)
}

/// The verdict on an answer that is not passed through, from its status and what its body says.
private func verdict(_ answer: UpstreamAnswer, _ reading: Envelope.Reading, _ body: UnsafeBufferPointer<UInt8>,
                     _ config: EnvelopeConfig) -> Verdict {
    let status = answer.status
    // Read through the shared reference where needed: a copy of the dialect costs a retain per array.
    let compiled = config.compiled
    guard status >= 200 && status <= 299 else {
        // An upstream non-2xx is `upstream-error` whatever its envelope says, unless its code is an auth code.
        guard case .envelope(let e) = reading else {
            return .problem(problem(for: .upstreamStatus(status, code: nil, message: nil, reason: upstreamErrorReason(answer, nil)),
                                    config: config))
        }
        if isAuthExpired(e, status: status, compiled) {
            return .problem(problem(for: .authCode(e.code, message: e.message, upstreamStatus: status, extras: e.extras), config: config))
        }
        return .problem(problem(for: .upstreamStatus(status, code: e.code, message: e.message,
                                                     reason: upstreamErrorReason(answer, e.code), extras: e.extras), config: config))
    }
    let envelope: Envelope
    switch reading {
    case .malformed(let reason):
        // Only now, on the refusal, is the body walked again to say why (the fast scan only decides).
        let why = reason ?? Envelope.diagnose(body, config: config)
        return .problem(problem(for: .malformedEnvelope(upstreamStatus: status, reason: why), config: config))
    case .envelope(let e):
        envelope = e
    }
    switch envelope.judgement {
    case .success(let payload):
        switch payload {
        // No payload means nothing to send: 204 whatever 2xx the upstream used (RFC 9110 §15.3.5).
        case .none: return .unwrap(status: 204, data: nil)
        case .range(let r): return .unwrap(status: status, data: r)
        case .built(let bytes): return .unwrapRest(status: status, body: bytes)
        }
    case .failure:
        // Success is decided first, so a code listed as both success and auth still succeeds.
        if isAuthExpired(envelope, status: status, compiled) {
            return .problem(problem(for: .authCode(envelope.code, message: envelope.message, upstreamStatus: status, extras: envelope.extras),
                                    config: config))
        }
        return .problem(problem(for: .businessCode(envelope.code, message: envelope.message, upstreamStatus: status,
                                                   extras: envelope.extras), config: config))
    case .error:
        if isAuthExpired(envelope, status: status, compiled) {
            return .problem(problem(for: .authCode(envelope.code, message: envelope.message, upstreamStatus: status, extras: envelope.extras),
                                    config: config))
        }
        return .problem(problem(for: .upstreamStatus(status, code: envelope.code, message: envelope.message,
                                                     reason: "upstream \(status), envelope says the server failed",
                                                     extras: envelope.extras), config: config))
    }
}

/// Whether a failure means the user must sign in again: its code is an auth code, or the dialect's
/// auth flag is set on an answer other than a 403 (ABP sets it for a missing permission too).
func isAuthExpired(_ envelope: Envelope, status: Int, _ compiled: CompiledDialect) -> Bool {
    // Through the shared reference: a copy of the dialect costs a retain per array.
    if let code = envelope.code, compiled.dialect.authCodes.contains(code) { return true }
    return envelope.authFlagged && status != 403
}

/// `upstream 403 text/html`, or `upstream 500, envelope code 1001`: what Peel saw of a non-2xx answer.
func upstreamErrorReason(_ answer: UpstreamAnswer, _ code: EnvelopeCode?) -> String {
    if let code { return "upstream \(answer.status), envelope code \(code.json)" }
    guard let type = answer.contentType, let media = type.split(separator: ";").first else {
        return "upstream \(answer.status) without Content-Type"
    }
    // The media type alone: parameters are the upstream's text and say nothing more here.
    // Token characters and the slash only (RFC 9110 §8.3.1), at most 80: a field value is the upstream's.
    let name = String(String.UnicodeScalarView(media.unicodeScalars.filter { s in
        s.isASCII && (s.properties.isAlphabetic || ("0"..."9").contains(s) || "!#$%&'*+-.^_`|~/".unicodeScalars.contains(s))
    }).prefix(80)).lowercased()
    return "upstream \(answer.status) " + (name.isEmpty ? "without Content-Type" : name)
}

/// Whether the answer goes to the client untouched: decided from its status and fields alone, so a
/// caller may decide before the body arrives (and stream it).
public func passesUnjudged(_ answer: UpstreamAnswer, config: EnvelopeConfig) -> Bool {
    passesThrough(answer, config)
}

/// Whether the answer goes to the client untouched.
func passesThrough(_ answer: UpstreamAnswer, _ config: EnvelopeConfig) -> Bool {
    let status = answer.status
    // HEAD, 1xx, 204, 205, 304 answers carry no content to unwrap (RFC 9110 §9.3.2, §15.3.5, §15.3.6, §15.4.5);
    // 3xx are redirects the client must see.
    // An answer to OPTIONS describes the resource's communication options (RFC 9110 §9.3.7), often
    // an empty CORS preflight answer: it is never an envelope.
    if answer.isHead || answer.isOptions || (status >= 100 && status <= 399 && !(status >= 200 && status <= 299)) { return true }
    if status == 204 || status == 205 { return true }
    // A download is meant to be saved as it is (RFC 6266 §4.2), whatever its media type.
    if let disposition = answer.contentDisposition, MediaType.isAttachment(disposition) { return true }
    for prefix in config.passthroughPaths where answer.path.utf8.starts(with: prefix.utf8) {
        return true
    }
    if let contentType = answer.contentType, config.passthroughRanges.matches(contentType) {
        return true
    }
    return false
}

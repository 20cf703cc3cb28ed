/// Decides how to answer the client from the upstream's answer and whole body.
public func judge(_ answer: UpstreamAnswer, body: [UInt8], config: EnvelopeConfig) -> Verdict {
    body.withUnsafeBufferPointer { judge(answer, body: $0, config: config) }
}

/// Decides how to answer the client from the upstream's answer and a borrowed body buffer.
public func judge(_ answer: UpstreamAnswer, body: UnsafeBufferPointer<UInt8>, config: EnvelopeConfig) -> Verdict {
    judgeWithCode(answer, body: body, config: config).verdict
}

/// `judge`, plus the code the upstream sent (nil when there was none), for the access log.
/// `passesThrough` is `passesUnjudged`'s answer when the caller already has it (decided when the
/// head arrived), so the passthrough rules are not matched twice per answer.
public func judgeWithCode(_ answer: UpstreamAnswer, body: UnsafeBufferPointer<UInt8>, config: EnvelopeConfig,
                          passesThrough known: Bool? = nil) -> (verdict: Verdict, upstreamCode: EnvelopeCode?)
{
    var runs: RestOfObject?
    return judgeWithCode(answer, body: body, config: config, passesThrough: known, asRuns: false, runs: &runs)
}

/// `judgeWithCode` for a body sent from where it lies (a spool file): a rest-of-object success is
/// `unwrapRest` with no bytes, and `restRuns` holds the body's ranges it is made of instead of a copy.
public func judgeWithCode(_ answer: UpstreamAnswer, body: UnsafeBufferPointer<UInt8>, config: EnvelopeConfig,
                          passesThrough known: Bool? = nil, restRuns: inout RestOfObject?) -> (verdict: Verdict, upstreamCode: EnvelopeCode?)
{
    judgeWithCode(answer, body: body, config: config, passesThrough: known, asRuns: true, runs: &restRuns)
}

private func judgeWithCode(_ answer: UpstreamAnswer, body: UnsafeBufferPointer<UInt8>, config: EnvelopeConfig,
                           passesThrough known: Bool?, asRuns: Bool, runs: inout RestOfObject?) -> (verdict: Verdict, upstreamCode: EnvelopeCode?)
{
    if known ?? passesThrough(answer, config) { return (.passthrough, nil) }
    let status = answer.status
    let succeeded = status >= 200 && status <= 299
    // Read through the shared reference where needed: a copy of the dialect costs a retain per array.
    let compiled = config.compiled
    if case .httpStatus = compiled.dialect.success {
        if succeeded { return (wholeBody(status, body, config), nil) }
        // A dialect that names no member of its own reads nothing: the well-known shapes do.
        if compiled.dialect.code == nil && compiled.dialect.messages.isEmpty { return failure(answer, nil, body, config) }
    }
    let reading = Envelope.read(body, config: config)
    guard succeeded else { return failure(answer, reading, body, config) }
    let envelope: Envelope
    switch reading {
    case .malformed(let reason):
        // Only now, on the refusal, is the body walked again to say why (the fast scan only decides).
        let why = reason ?? Envelope.diagnose(body, config: config)
        return (.problem(problem(for: .malformedEnvelope(upstreamStatus: status, reason: why), config: config)), nil)
    case .envelope(let e):
        envelope = e
    }
    switch envelope.judgement {
    case .success(let payload):
        switch payload {
        // No payload means nothing to send: 204 whatever 2xx the upstream used (RFC 9110 §15.3.5).
        case .none: return (.unwrap(status: 204, data: nil), envelope.code)
        case .range(let r): return (.unwrap(status: status, data: r), envelope.code)
        case .rest(let rest) where asRuns:
            runs = rest
            return (.unwrapRest(status: status, body: []), envelope.code)
        case .rest(let rest): return (.unwrapRest(status: status, body: rest.bytes(in: body)), envelope.code)
        }
    case .failure, .error:
        let (errors, omitted) = fieldErrors(envelope, body, compiled.dialect)
        var p: Problem
        // Success is decided first, so a code listed as both success and auth still succeeds.
        if isAuthExpired(envelope, status: status, compiled) {
            p = problem(for: .authCode(envelope.code, message: envelope.message, upstreamStatus: status,
                                       extras: envelope.extras, errors: errors), config: config)
        } else if envelope.judgement == .failure {
            p = problem(for: .businessCode(envelope.code, message: envelope.message, upstreamStatus: status,
                                           extras: envelope.extras, errors: errors), config: config)
        } else {
            p = problem(for: .upstreamStatus(status, code: envelope.code, message: envelope.message,
                                             reason: "upstream \(status), envelope says the server failed",
                                             extras: envelope.extras, errors: errors), config: config)
        }
        p.errorsOmitted = omitted
        return (.problem(p), envelope.code)
    }
}

/// Whether a failure means the user must sign in again: its code is an auth code, or the dialect's
/// auth flag is set on an answer other than a 403 (ABP sets it for a missing permission too).
func isAuthExpired(_ envelope: Envelope, status: Int, _ compiled: CompiledDialect) -> Bool {
    // Through the shared reference: a copy of the dialect costs a retain per array.
    if let code = envelope.code, compiled.dialect.authCodes.contains(code) { return true }
    return envelope.authFlagged && status != 403
}

/// A 2xx under the `status` rule: any JSON text is the answer byte for byte (a BOM aside, RFC 8259
/// §8.1); an empty body is relayed as it came; anything else is not what a JSON API answers.
private func wholeBody(_ status: Int, _ body: UnsafeBufferPointer<UInt8>, _ config: EnvelopeConfig) -> Verdict {
    guard body.count > 0 else { return .passthrough }
    var members = EnvelopeMembers()
    guard ScanCore.run(body, maxDepth: config.maxDepth, names: nil, members: &members) else {
        let why: String
        switch ScanDiagnosis.diagnose(body, maxDepth: config.maxDepth, names: nil) {
        case .error(let e): why = e.description
        case .tooDeepIn(let e, _): why = e.description
        case .notObject, .duplicate, .valid: why = "not a JSON text"
        }
        return .problem(problem(for: .malformedEnvelope(upstreamStatus: status, reason: why), config: config))
    }
    let bom = body.count >= 3 && body[0] == 0xEF && body[1] == 0xBB && body[2] == 0xBF
    return .unwrap(status: status, data: (bom ? 3 : 0)..<body.count)
}

/// An upstream non-2xx: the route's dialect reads it first (an envelope with a code or a message
/// keeps the dialect's rules), else the well-known failure shapes. A 401 is `auth-expired`
/// whatever the body says, so an app's "sign in again" path is one kind for every backend; a 5xx
/// read by a well-known shape shows nothing of its body unless the dialect says so (it may hold
/// a stack trace or SQL): its message goes to the access log only.
private func failure(_ answer: UpstreamAnswer, _ reading: Envelope.Reading?, _ body: UnsafeBufferPointer<UInt8>,
                     _ config: EnvelopeConfig) -> (verdict: Verdict, upstreamCode: EnvelopeCode?) {
    let status = answer.status
    let dialect = config.compiled.dialect
    // A 5xx read by the shapes shows nothing: its field errors are not even written out.
    let shown = (status >= 400 && status <= 499) || dialect.exposes5xxMessages
    var words = FailureWords()
    var read = false
    if case .envelope(let e)? = reading, e.code != nil || e.message != nil {
        words = FailureWords(code: e.code, message: e.message, upstream: e.extras)
        (words.errors, words.errorsOmitted) = fieldErrors(e, body, dialect)
        if isAuthExpired(e, status: status, config.compiled) {
            var p = problem(for: .authCode(e.code, message: e.message, upstreamStatus: status, extras: e.extras,
                                           errors: words.errors), config: config)
            p.errorsOmitted = words.errorsOmitted
            return (.problem(p), e.code)
        }
    } else if let shaped = readShapes(answer, body, config, checked: reading.map(scanned) ?? false, errors: shown || status == 401) {
        words = shaped
        read = true
    } else if case .envelope(let e)? = reading {
        words.upstream = e.extras
    }
    let reason = upstreamErrorReason(answer, read ? nil : words.code, shape: words.shape)
    var p: Problem
    if status == 401 {
        p = problem(for: .authCode(words.code, message: words.message, upstreamStatus: status, extras: words.upstream,
                                   errors: words.errors), config: config)
    } else if read && !shown {
        p = problem(for: .upstreamStatus(status, code: nil, message: nil, reason: reason), config: config)
        p.privateMessage = words.message
        return (.problem(p), words.code)
    } else {
        p = problem(for: .upstreamStatus(status, code: words.code, message: words.message, reason: reason,
                                         extras: words.upstream, errors: words.errors), config: config)
    }
    p.errorsOmitted = words.errorsOmitted
    return (.problem(p), words.code)
}

/// The words of a failure body by the well-known shapes: only a valid JSON object is read.
private func readShapes(_ answer: UpstreamAnswer, _ body: UnsafeBufferPointer<UInt8>, _ config: EnvelopeConfig,
                        checked: Bool, errors: Bool) -> FailureWords? {
    guard let base = body.baseAddress else { return nil }
    // A body the dialect's scan did not pass is checked before anything in it is walked; only its
    // first byte is looked at here.
    let object = Envelope.topObject(base, body.count)
    guard !object.isEmpty, base[object.lowerBound] == UInt8(ascii: "{") else { return nil }
    let problemType = answer.contentType.map(MediaType.isProblem) ?? false
    return FailureShapes.read(body, object, maxDepth: config.maxDepth, checked: checked, problemType: problemType,
                              errors: errors)
}

/// Whether a reading came from a body the strict scan passed as an object: an envelope, or a fault
/// found after the scan (one with a reason; a scan refusal has none until diagnosed).
private func scanned(_ reading: Envelope.Reading) -> Bool {
    switch reading {
    case .envelope: true
    case .malformed(let why): why != nil
    }
}

/// The field errors at the dialect's `field_errors` path in an envelope, as RFC 9457's `errors`,
/// and how many its bounds left out.
private func fieldErrors(_ envelope: Envelope, _ body: UnsafeBufferPointer<UInt8>, _ dialect: Dialect) -> ([UInt8]?, Int) {
    guard let rule = dialect.fieldErrors, let base = body.baseAddress,
          let value = ValidJSON.lookup(base, envelope.object, rule.path) else { return (nil, 0) }
    var reader = FieldErrorReader(base, count: body.count)
    switch base[value.lowerBound] {
    case UInt8(ascii: "{"): reader.map(value, dotted: true, nonField: true)
    case UInt8(ascii: "["): reader.list(value, messageKey: rule.message, fieldKey: rule.field)
    case UInt8(ascii: "\""): reader.list.add(base, detail: value, place: .none)
    default: return (nil, 0)
    }
    return (reader.list.finished(), reader.list.omitted)
}

/// `upstream 403 text/html`, `upstream 500, envelope code 1001`, or `upstream 422 application/json,
/// read as fastapi`: what Peel saw of a non-2xx answer.
func upstreamErrorReason(_ answer: UpstreamAnswer, _ code: EnvelopeCode?, shape: FailureShape? = nil) -> String {
    if let code { return "upstream \(answer.status), envelope code \(code.json)" }
    let seen = upstreamErrorReason(answer)
    return shape.map { seen + ", read as " + $0.rawValue } ?? seen
}

/// `upstream 403 text/html`: the status and the media type alone.
private func upstreamErrorReason(_ answer: UpstreamAnswer) -> String {
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

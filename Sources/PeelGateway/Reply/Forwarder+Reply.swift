import PeelEnvelope
import PeelIO

// The one way answers leave the forwarder: shaped by the call's route, written once, logged.
extension Forwarder {
    /// Answers with the upstream's fields minus hop-by-hop and envelope-describing ones (SPEC), the
    /// rewritten ones, then Peel's own, and `response.body[range]` (all of it when nil), compressed
    /// when the client accepts a coding Peel offers. `contentType` replaces the upstream's when set.
    func pass(_ call: Call, status: Int, _ response: UpstreamResponse, range: Range<Int>?, kind: String,
                      contentType: String?) {
        let body: Reply.Body
        if let file = response.spooled {
            body = .file(file, pieces: [.file(range ?? 0..<file.count)])
        } else {
            body = .bytes(response.body, range: range, hold: response.hold)
        }
        emit(call, Reply(status: status, kind: .relayed, upstream: response.headers, contentType: contentType,
                         upstreamFacts: response.facts, body: body), log: kind)
    }

    /// The shaper's view of `call`, URLs rewritten by `rewrite`.
    func context(_ call: Call, rewrite: ProxyRewrite) -> ReplyContext {
        let plan = call.plan
        return ReplyContext(requestId: plan.requestId, origin: plan.origin, acceptEncoding: plan.acceptEncoding,
                            keptCoding: call.head?.keptCoding, rewrite: rewrite, host: plan.host,
                            forwardedProto: plan.forwardedProto, forwardedHost: plan.forwardedHost)
    }

    /// Shapes `reply` and writes it: the one way every buffered answer leaves the forwarder.
    func emit(_ call: Call, _ reply: Reply, log kind: String, code: EnvelopeCode? = nil) {
        guard !call.exchange.answered else { return }
        // The encoder of the call's generation: a reload from gzip level 1 to 9 does not reach it.
        let encoder = call.route.generation.encoder
        // A stored answer came from whichever endpoint answered then; a live one from this call's.
        let rewrite: ProxyRewrite
        switch reply.kind {
        case .stale, .staleNotModified: rewrite = call.route.rewrite
        default: rewrite = call.rewrite
        }
        var shaped = call.route.shaper.shape(reply, context(call, rewrite: rewrite), encode: { encoder.encode($0, as: $1) })
        if case .encodedFile(let file, let pieces, let coding) = shaped.body {
            if sendEncoded(call, shaped, file: file, pieces: pieces, coding: coding, encoder: encoder, log: kind, code: code) { return }
            // No memory for the encoder now: the answer goes as it is, from the file.
            var plain = reply
            plain.encodesFile = false
            shaped = call.route.shaper.shape(plain, context(call, rewrite: rewrite), encode: { encoder.encode($0, as: $1) })
        }
        // Counted before the bytes leave: a client that has its answer finds it in /metrics (the
        // write may hand the whole answer over at once). Its access-log line is queued here too,
        // and reaches the sink with the worker's next flush.
        record(call, status: shaped.status, kind: kind, bytes: shaped.bodyCount, code: code)
        switch shaped.body {
        case .bytes(let body, let range, let hold):
            call.exchange.respond(status: shaped.status, fields: shaped.fields, body: body, range: range, keeping: hold,
                                  closing: shaped.closing)
        case .file(let file, let pieces):
            call.exchange.respond(status: shaped.status, fields: shaped.fields, file: file, pieces: pieces, closing: shaped.closing)
        case .stream, .encodedFile:
            // Streams start in headArrived and answerReachability, never here; a compressed file
            // was sent above or shaped again without compression.
            preconditionFailure("emit takes buffered answers only")
        }
    }

    /// A spooled answer compressed while it is sent (`EncodedFileStream`), logged with the bytes
    /// written once the last is queued (or 499 when the client leaves first). False, having sent
    /// nothing, when the memory budget or the client's share has no room for the encoder, or the
    /// library could not start one.
    private func sendEncoded(_ call: Call, _ shaped: ShapedReply, file: SpooledBody, pieces: [FilePiece], coding: ContentCoding,
                             encoder: ContentEncoder, log kind: String, code: EnvelopeCode?) -> Bool {
        if call.exchange.isHead {
            // A HEAD's answer has no body: its fields say what GET's would (compressed, chunked, as
            // RFC 9110 §9.3.2 allows a length only known once the content is made), and nothing is
            // compressed to be thrown away.
            guard let stream = call.exchange.startStream(status: shaped.status, fields: shaped.fields, contentLength: nil) else {
                clientLeft(call, insideCurl: false)
                return true
            }
            record(call, status: shaped.status, kind: kind, bytes: 0, code: code)
            stream.finish()
            return true
        }
        var hold: BudgetHold?
        if let budget = upstream.budget {
            guard case .success(let h) = BudgetHold.take(EncodedFileStream.memory(coding, brotliQuality: encoder.brotliQuality), from: budget,
                                                         client: IPNetwork.clientGroup(call.exchange.clientAddress)) else { return false }
            hold = h
        }
        guard let streamEncoder = ContentStreamEncoder(coding: coding, gzipLevel: encoder.gzipLevel, brotliQuality: encoder.brotliQuality) else {
            return false
        }
        guard let stream = call.exchange.startStream(status: shaped.status, fields: shaped.fields, contentLength: nil) else {
            // The client left before the head: nothing was sent.
            clientLeft(call, insideCurl: false)
            return true
        }
        let status = shaped.status
        let pump = EncodedFileStream(file: file, pieces: pieces, encoder: streamEncoder, stream: stream, hold: hold,
                                     loop: upstream.loop) { [self] sent, complete in
            call.streamedBytes = sent
            record(call, status: status, kind: kind, bytes: sent, code: code, cut: complete ? nil : "compression")
        }
        // The stream holds the pump through its callbacks until it ends (or the client leaves).
        stream.onClientGone = { [self] in
            call.streamedBytes = pump.sent
            clientLeft(call, insideCurl: false)
        }
        pump.start()
        return true
    }

    func refuse(_ call: Call, _ why: String) {
        answer(call, .refused(status: 400, tooLarge: false, detail: why))
    }

    /// Answers an outcome with its problem document.
    func answer(_ call: Call, _ outcome: Outcome) {
        answerProblem(call, problem(for: outcome, config: call.route.envelope))
    }

    func answerProblem(_ call: Call, _ problem: Problem) {
        var p = problem
        if let reason = p.reason { call.notes.reason = reason }
        if p.upstreamStatus == nil { p.upstreamStatus = call.upstream.status }
        let body = renderProblem(p, requestId: call.plan.requestId, language: call.plan.language, typeBase: call.route.envelope.problemTypeBase)
        var fields: [(String, String)] = []
        if p.kind == .offline { fields.append(("Retry-After", call.route.retryAfter)) }
        // Bodies held now are answered within seconds; a client may try again after one.
        if p.kind == .serverBusy { fields.append(("Retry-After", "1")) }
        // The upstream's fields that clients act on stay (a 429's Retry-After, a logout's Set-Cookie):
        // the shaper keeps them for a problem.
        emit(call, Reply(status: p.status, kind: .problem(p.kind), upstream: call.upstream.headers, fields: fields,
                         body: .bytes(body, range: nil, hold: nil), closing: p.kind == .badRequest),
             log: p.kind.rawValue, code: p.code)
    }

    /// Longest upstream message or string code in the access log, in UTF-8 bytes.
    static let privateMessageBytes = 200

    /// `text` cut to at most `privateMessageBytes` UTF-8 bytes on a character boundary, a closing
    /// `…` (3 bytes) marking a cut.
    static func bounded(_ text: String) -> String {
        guard text.utf8.count > privateMessageBytes else { return text }
        var out = ""
        var bytes = 0
        for ch in text {
            let n = ch.utf8.count
            guard bytes + n <= privateMessageBytes - 3 else { break }
            out.append(ch)
            bytes += n
        }
        return out + "…"
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

}

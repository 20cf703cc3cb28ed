import PeelEnvelope
import PeelIO

// What the upstream answered, and what the client gets for it: the head decision (stream or
// buffer, keep the coding or not), the judge on the whole body, and failures mapped to outcomes.
extension Forwarder {
    func upstreamFinished(_ call: Call, _ result: Result<UpstreamResponse, UpstreamFailure>) {
        waiting[ObjectIdentifier(call)] = nil
        call.exchange.onClientGone = nil
        call.attempts.end()
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
            case .overSpoolBudget, .overSpoolClientShare, .spoolWrite:
                return refuseSpooling(call, failure)
            default: metrics.recordUpstreamError(failure.reason)
            }
            // Issue 17: only failing to reach the upstream counts, as evidence against the endpoint
            // tried (toward `fall`, or toward its ejection). A broken or oversized answer came with a
            // status line: the endpoint is there. A timeout or a close before any status line on a
            // connection it took counts neither way: a client can cause it (a path whose worker
            // dies), and calls in flight when a host drops off the network end so long after it went.
            if failure.isTransportFailure { call.attempts.endpoint?.liveFailed(failure) }
            if failure.answeredBadly { call.attempts.endpoint?.liveAnswered() }
            if failOver(call, after: failure, wentOut: call.transfer?.requestWentOut ?? true) { return }
            answer(call, Self.outcome(of: failure))
        case .success(let response):
            // Whatever it says, the upstream answered: evidence that it is there.
            call.attempts.endpoint?.liveAnswered()
            call.upstream.duration = response.duration
            call.upstream.status = response.status
            call.upstream.headers = response.headers
            invalidateAfterUnsafe(call, status: response.status, headers: response.headers)
            if response.status == 304, call.exchange.methodToken == .get, let key = call.plan.cacheKey {
                // RFC 9111 §4.3.4: the stored answer is current again, or its validator is worth keeping.
                let ex = call.exchange
                cache.refresh(key: key, request: call.plan.cacheRequest, hasAuthorization: call.plan.hasAuthorization,
                              requestField: { Self.requestValue(ex, $0) }, notModified: response.headers,
                              terms: call.route.generation.cacheTerms)
            }
            // The judge's view of the head, as the head decision made it (made here for a head that
            // was never handed over).
            let answer = call.head?.answer ?? judgedAnswer(call, response.facts)
            let judged: (verdict: Verdict, upstreamCode: EnvelopeCode?)
            // The rest of a spooled object: the file's ranges it is made of, sent from the file.
            var restRuns: RestOfObject?
            if let file = response.spooled {
                // The same judge over the file's bytes, mapped only while it runs.
                switch file.withBytes({ judgeWithCode(answer, body: $0, config: call.route.envelope, passesThrough: call.head?.passesUnjudged,
                                                      restRuns: &restRuns) }) {
                case .success(let j): judged = (j.verdict, j.upstreamCode)
                case .failure(let e): return refuseSpooling(call, .spoolWrite(e.description))
                }
            } else {
                let j = response.body.withUnsafeBufferPointer {
                    judgeWithCode(answer, body: $0, config: call.route.envelope, passesThrough: call.head?.passesUnjudged)
                }
                judged = (j.verdict, j.upstreamCode)
            }
            call.upstream.code = judged.upstreamCode
            switch judged.verdict {
            case .unwrap(let status, let range):
                // The data member's bytes are sent from the upstream body itself: no copy in Swift.
                let status = range == nil ? 204 : status
                // A HEAD's answer has no body to keep for a later GET.
                if let key = call.plan.cacheKey, call.exchange.methodToken == .get {
                    store(key, call, status: status, response, range: range)
                }
                pass(call, status: status, response, range: range ?? 0..<0, kind: "ok",
                     contentType: range == nil ? nil : "application/json")
            case .unwrapRest(let status, let body):
                if let rest = restRuns, let file = response.spooled {
                    // The rest of a spooled envelope object: its kept members sent from the file.
                    if let key = call.plan.cacheKey, call.exchange.methodToken == .get {
                        store(key, call, status: status, response, range: nil, rest: rest)
                    }
                    emit(call, Reply(status: status, kind: .relayed, upstream: response.headers, contentType: "application/json",
                                     body: .file(file, pieces: FilePiece.pieces(of: rest))), log: "ok")
                    return
                }
                // The rest of the envelope object: built from the upstream's member bytes, verbatim.
                if let key = call.plan.cacheKey, call.exchange.methodToken == .get {
                    store(key, call, status: status, response, range: nil, built: body)
                }
                emit(call, Reply(status: status, kind: .relayed, upstream: response.headers, contentType: "application/json",
                                 body: .bytes(body, range: nil, hold: response.hold)), log: "ok")
            case .passthrough:
                // A newer answer that is not stored must not leave the older one servable (a 304
                // refreshed it above; a 5xx is what stale-if-error keeps it for).
                if let key = call.plan.cacheKey {
                    // A 4xx refuses the resource: revoked or deleted, whatever the request carried.
                    cache.answeredUnstored(key: key, status: response.status, request: call.plan.cacheRequest)
                }
                pass(call, status: response.status, response, range: nil, kind: "passthrough", contentType: nil)
            case .problem(let p):
                // An error the upstream chose to answer (a 4xx, a business or auth code) replaces
                // what was stored: a revoked token's stale `/me`, a deleted resource, must not come
                // back while offline, whatever the request carried. A 5xx keeps it: that is what stale
                // answers are for; a precondition's answer (412) leaves it (RFC 9111 §4). A body that
                // is no envelope says nothing of the resource: only a plain request's drops it.
                if let key = call.plan.cacheKey {
                    cache.answeredUnstored(key: key, status: response.status, request: call.plan.cacheRequest,
                                           revokes: p.kind == .businessError || p.kind == .authExpired)
                }
                // A body that is not an envelope: its start goes to the log (never to the client), so
                // a developer sees the CSRF page or the plain-text error that was refused.
                if p.kind == .badUpstreamFormat || (p.kind == .upstreamError && judged.upstreamCode == nil && p.privateMessage == nil) {
                    call.notes.excerpt = Self.excerpt(response.spooled?.read(0..<Self.excerptBytes + 1) ?? response.body)
                }
                // A 5xx's words, kept from the client, reach the operator.
                call.notes.privateMessage = p.privateMessage.map(Self.bounded)
                answerProblem(call, p)
            }
        }
    }

    /// The one decision on an answer's head, made when the final head is whole: whether the answer
    /// passes unjudged (from status and fields alone), whether its body keeps the coding it came in
    /// (a passthrough answer whose Content-Encoding the client accepts is relayed as it came, with
    /// its length), and whether it streams. A passthrough answer of unknown length, declared over
    /// `stream_threshold`, or an event stream is sent as it arrives, pausing the upstream transfer
    /// while the client is slow; anything else is buffered whole (judged, or passed with its length
    /// and maybe compressed). Runs inside curl's header callback: nothing here may call curl.
    func headArrived(_ call: Call, facts: ResponseFacts, head: ResponseHeadView) -> HeadPlan {
        guard case .awaitingHead(let transfer) = call.state else { return .buffer }
        call.state = .buffering(transfer)
        let answer = judgedAnswer(call, facts)
        // The call's own rules (a reload mid-call must not mix two), decided once for this answer.
        let passes = passesUnjudged(answer, config: call.route.envelope)
        let kept = HeadDecision.keptCoding(facts, accepted: call.plan.acceptEncoding, passesUnjudged: passes)
        call.head = HeadTerms(answer: answer, passesUnjudged: passes, keptCoding: kept)
        guard passes, case .stream(let declared) = HeadDecision.body(facts, keptCoding: kept, threshold: call.route.streamThreshold),
              !call.exchange.answered
        else { return HeadPlan(keepsCoding: kept != nil, sink: nil) }
        let status = facts.status
        let headers = head.copy()
        if call.exchange.isHead {
            // HEAD answers what GET would: the head is all of it, and the rest is not fetched (the
            // transfer ends here rather than wait for a body byte that may be minutes away).
            answerHeadOnly(call, status, declared, headers)
            return .stopped
        }
        if facts.isEventStream {
            // An event stream's head goes at once: an app sees its stream open while the upstream
            // has nothing to say yet, and the idle timeout takes over from `timeout` now.
            return HeadPlan(keepsCoding: kept != nil, sink: startStream(call, transfer, status, declared, headers), flowsFromHead: true)
        }
        // Anything else commits to the client with its first body byte: until then a stall is still
        // `timeout`'s 504 and a close a 502 problem, not a 200 cut short.
        var started: StreamSink?
        return HeadPlan(keepsCoding: kept != nil, sink: { [self] bytes in
            if started == nil { started = startStream(call, transfer, status, declared, headers) }
            return started!(bytes)
        })
    }

    /// A HEAD request's streamable answer: its head alone, counted before it leaves.
    private func answerHeadOnly(_ call: Call, _ status: Int, _ declared: Int?, _ headers: ResponseHeaders) {
        call.upstream.status = status
        call.upstream.headers = headers
        call.attempts.endpoint?.liveAnswered()
        let shaped = call.route.shaper.shape(Reply(status: status, kind: .relayed, upstream: headers, body: .stream(contentLength: declared)),
                                             context(call, rewrite: call.rewrite), encode: { _, _ in nil })
        waiting[ObjectIdentifier(call)] = nil
        record(call, status: status, kind: "passthrough", bytes: 0, code: nil)
        call.exchange.startStream(status: status, fields: shaped.fields, contentLength: declared)?.finish()
    }

    /// Writes a streamed answer's head and returns the sink its body goes through.
    private func startStream(_ call: Call, _ transfer: UpstreamTransfer, _ status: Int, _ declared: Int?,
                             _ headers: ResponseHeaders) -> StreamSink {
        call.upstream.status = status
        call.upstream.headers = headers
        let shaped = call.route.shaper.shape(Reply(status: status, kind: .relayed, upstream: headers, body: .stream(contentLength: declared)),
                                             context(call, rewrite: call.rewrite), encode: { _, _ in nil })
        guard let stream = call.exchange.startStream(status: status, fields: shaped.fields, contentLength: declared) else {
            return { _ in .abort }
        }
        call.state = .streaming(transfer, stream)
        // A streamed answer is never stored, so it makes the older entry for its request stale, and
        // an unsafe method's success invalidates as a buffered one does.
        invalidateAfterUnsafe(call, status: status, headers: headers)
        if let key = call.plan.cacheKey { cache.answeredUnstored(key: key, status: status, request: call.plan.cacheRequest) }
        // The answer flows: the upstream answered (evidence for reachability, like a buffered answer).
        call.attempts.endpoint?.liveAnswered()
        stream.onDrained = { [weak transfer] in transfer?.resume() }
        // Possibly inside the sink, so inside curl's write callback: the transfer ends on the next
        // pass, and its completion never runs (cancelSoon drops it).
        stream.onClientGone = { [self] in self.clientLeft(call, insideCurl: true) }
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

    /// What the judge needs of the upstream's head.
    func judgedAnswer(_ call: Call, _ facts: ResponseFacts) -> UpstreamAnswer {
        UpstreamAnswer(status: facts.status, contentType: facts.contentType, path: call.plan.path, isHead: false,
                       isOptions: call.exchange.methodToken == .options, contentDisposition: facts.contentDisposition)
    }

    /// Unread reply bytes at which a streamed upstream transfer pauses.
    static let streamHighWater = 256 * 1024

    /// A streamed answer's transfer ended: the body ends, or is cut short so the client can tell.
    func streamFinished(_ call: Call, _ stream: ReplyStream, _ result: Result<UpstreamResponse, UpstreamFailure>) {
        switch result {
        case .success(let response):
            call.upstream.duration = response.duration
            // Counted before the end is written (a chunked body's last chunk), as a buffered answer
            // is (`emit`); under a declared length the last bytes may already be out.
            record(call, status: call.upstream.status ?? 200, kind: "passthrough", bytes: call.streamedBytes, code: nil)
            stream.finish()
        case .failure(let failure):
            metrics.recordUpstreamError(failure.reason)
            call.notes.reason = failure.message
            record(call, status: call.upstream.status ?? 502, kind: "passthrough-cut", bytes: call.streamedBytes, code: nil,
                   cut: failure.reason)
            stream.abort()
        }
    }

    /// A buffered answer the spool could not hold: Peel's own shortage (its disk budget, a client's
    /// share of it, or a file system that refused the bytes), answered 503 server-busy before any
    /// byte of it is sent, counted as a refusal, and its reason logged.
    func refuseSpooling(_ call: Call, _ failure: UpstreamFailure) {
        let bound: String
        switch failure {
        case .overSpoolBudget: bound = "max_spooled"
        case .overSpoolClientShare: bound = "max_spooled_per_client"
        default: bound = "spool_write"
        }
        metrics.recordRefusal(bound)
        if bound == "spool_write" {
            EventLog.emit("spool_write_failed", [("request_id", jsonEscaped(call.plan.requestId)), ("error", jsonEscaped(failure.message))])
        }
        call.notes.reason = failure.message
        answer(call, .serverBusy(failure.message))
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
        case .overSpoolBudget, .overSpoolClientShare, .spoolWrite: return .serverBusy(failure.message)
        // Only a flowing stream is cut for idleness, and its head is long sent: never a problem document.
        case .streamIdle: return .timedOut
        }
    }

}

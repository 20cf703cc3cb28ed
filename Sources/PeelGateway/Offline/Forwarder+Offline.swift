import PeelEnvelope
import PeelIO

// Stale answers while offline (RFC 9111, RFC 5861), invalidation after unsafe methods (§4.4),
// storing successful answers, and the public reachability endpoint.
extension Forwarder {
    /// RFC 9111 §4.4: a 2xx or 3xx to an unsafe method makes what is stored for its target stale,
    /// and for the same-host paths its Location and Content-Location name: this user's entries and
    /// the shared ones go. Another user's own entries stay: no client changes what another gets
    /// (one user's `PUT /me` must not wipe everyone's stored /me).
    func invalidateAfterUnsafe(_ call: Call, status: Int, headers: ResponseHeaders) {
        guard status < 400, let user = call.plan.userKey, call.exchange.methodToken.isUnsafe else { return }
        var targets = [user.target]
        for token in [FieldToken.location, .contentLocation] {
            guard let value = headers.first(token) else { continue }
            // A path, or an absolute URL naming the upstream: as Peel's own target, without the base path.
            let path = call.rewrite.location(value, publicOrigin: nil)
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
    func store(_ key: OfflineCacheKey, _ call: Call, status: Int, _ response: UpstreamResponse, range: Range<Int>?,
                       built: [UInt8]? = nil, rest: RestOfObject? = nil) {
        // Too large for the whole cache (or a shared-store value): not worth the copy, and the older
        // answer must go.
        if (built?.count ?? rest?.count ?? range?.count ?? 0) > cache.maxBody {
            return cache.answeredUnstored(key: key, status: status, request: call.plan.cacheRequest)
        }
        let body: [UInt8]
        if let rest {
            // The rest of a spooled object, read from its file.
            guard let file = response.spooled, case .success(let bytes) = file.withBytes({ rest.bytes(in: $0) }) else {
                return cache.answeredUnstored(key: key, status: status, request: call.plan.cacheRequest)
            }
            body = bytes
        } else {
            body = built ?? range.map { response.spooled?.read($0) ?? Array(response.body[$0]) } ?? []
        }
        let ex = call.exchange
        let hasBody = built != nil || rest != nil || range != nil
        cache.store(key: key, request: call.plan.cacheRequest, hasAuthorization: call.plan.hasAuthorization, requestField: { Self.requestValue(ex, $0) },
                    status: status, fields: response.headers, contentType: hasBody ? "application/json" : nil, body: body,
                    terms: call.route.generation.cacheTerms)
    }

    /// While offline: the stored answer, else the offline problem. The shared store answers within
    /// its read bound rather than at once, so the call waits for it, is answered exactly once, and a
    /// client that hangs up meanwhile is logged 499 and never written to.
    func answerOffline(_ call: Call, _ key: OfflineCacheKey) {
        let ex = call.exchange
        ex.onClientGone = { [self] in self.clientLeft(call, insideCurl: false) }
        cache.lookup(key: key, request: call.plan.cacheRequest, requestField: { call.done ? nil : Self.requestValue(ex, $0) },
                     terms: call.route.generation.cacheTerms) { [self] result in
            guard !call.done else { return }
            ex.onClientGone = nil
            switch result {
            case .hit(let hit), .notModified(let hit): answerStale(call, hit)
            case .miss: answer(call, .offline)
            }
        }
    }

    /// A stored answer while offline, shaped as a fresh one would be (the same CORS fields,
    /// rewriting, compression and Vary), plus `Age` (RFC 9111 §5.1) and `Cache-Status` (RFC 9211
    /// §2: Peel's cache answered, a hit, served because the upstream is offline). A 304 answers a
    /// conditional request whose validator matches: the app's own copy is current.
    func answerStale(_ call: Call, _ hit: OfflineCacheHit) {
        if hit.status == 304 {
            let kind = Reply.Kind.staleNotModified(age: hit.age, storedType: hit.contentType, storedCount: hit.storedBodyCount)
            return emit(call, Reply(status: 304, kind: kind, upstream: hit.fields, body: .bytes([], range: nil, hold: nil)),
                        log: "offline-cache")
        }
        emit(call, Reply(status: hit.status, kind: .stale(age: hit.age), upstream: hit.fields, contentType: hit.contentType,
                         body: .bytes(hit.body, range: nil, hold: nil)), log: "offline-cache")
    }

    /// The reachability document, or with `Accept: text/event-stream` a stream of it.
    func answerReachability(_ call: Call, events: Bool) {
        let ex = call.exchange
        guard ex.methodToken.readsResource else {
            let p = Problem(kind: .badRequest, status: 405, detail: "\(call.route.reachabilityPath ?? "") answers GET and HEAD only")
            let body = renderProblem(p, requestId: call.plan.requestId, language: call.plan.language, typeBase: call.route.envelope.problemTypeBase)
            return emit(call, Reply(status: 405, kind: .own, fields: [("Content-Type", "application/problem+json"),
                                                                      ("Cache-Control", "no-store"), ("Allow", "GET, HEAD")],
                                    body: .bytes(body, range: nil, hold: nil), compressible: false),
                        log: p.kind.rawValue, code: p.code)
        }
        let groups = self.groups
        // While draining, a new stream would only be cut at once: the document answers instead.
        if events && ex.methodToken == .get && !draining {
            let client = streamClient(call.exchange.clientAddress)
            if case .failure(let refusal) = streams.reserve(client: client) {
                // Peel's own bounds, not the upstream's fault: the problem names which one.
                return answer(call, .tooManyStreams(perClient: refusal == .clientFull))
            }
            let shaped = call.route.shaper.shape(Reply(status: 200, kind: .own, fields: [("Content-Type", "text/event-stream"),
                                                                              ("Cache-Control", "no-store")],
                                            body: .stream(contentLength: nil)), context(call, rewrite: call.route.rewrite),
                                            encode: { _, _ in nil })
            guard let stream = ex.startStream(status: 200, fields: shaped.fields, endless: true) else {
                streams.release(client: client)
                return record(call, status: 499, kind: "client-closed", bytes: 0, code: nil)
            }
            let current = groups.all.map { g in
                let s = g.snapshot
                return ReachabilityEvent(upstream: g.name, state: s.state, since: s.since, reason: s.publicReason)
            }
            streams.adopt(stream, client: client, current: current)
            // Logged and counted when it opens: a stream may stay open for days.
            return record(call, status: 200, kind: "reachability-stream", bytes: 0, code: nil)
        }
        let body = Array(reachabilityOverview(groups).utf8)
        emit(call, Reply(status: 200, kind: .own, fields: [("Content-Type", "application/json"), ("Cache-Control", "no-store")],
                         body: .bytes(body, range: nil, hold: nil), compressible: false), log: "reachability")
    }

}

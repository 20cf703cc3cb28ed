import CCurl
import CPeelShims

/// The transfer pool: a transfer's lifetime from `send` to `finish`, on pooled easy handles.
extension UpstreamClient {
    /// Starts `request`; `completion` runs once on this loop. Every refusal fails this transfer
    /// alone, through its completion, with the handle back in the pool.
    @discardableResult
    public func send(_ request: UpstreamRequest,
                     completion: @escaping (Result<UpstreamResponse, UpstreamFailure>) -> Void) -> UpstreamTransfer {
        let t = UpstreamTransfer()
        t.client = self
        t.limit = request.limits?.maxResponseBody ?? options.maxResponseBody
        t.idleSeconds = request.limits?.idleTimeout ?? options.idleTimeout
        t.budget = options.budget
        t.spool = options.spool
        t.completion = completion
        t.method = request.method
        t.allowedSends = request.methodToken.isIdempotent ? 2 : 1
        guard inFlight < options.maxInFlight else {
            failSoon(t, .overloaded)
            return t
        }
        let h: EasyHandle
        do throws(PeelIOError) {
            h = try takeHandle()
        } catch {
            failSoon(t, .other(error.description))
            return t
        }
        t.handle = h
        lastSerial &+= 1
        t.serial = lastSerial
        h.running = lastSerial
        var list = UpstreamHeaderList(block: h.headers)
        request.writeFields(into: &list)
        h.errorBuffer.pointee = 0
        h.localSocketError = 0
        h.head.reset()
        t.started = loop.now
        let ptr = Unmanaged.passRetained(t).toOpaque()
        do throws(PeelIOError) {
            try setTarget(request.target, on: h)
            if h.acceptEncoding != request.acceptEncoding {
                // curl sends this value and still decodes whatever coding arrives (the switch below
                // turns decoding off for a body that passes in its coding).
                try h.set(CURLOPT_ACCEPT_ENCODING, request.acceptEncoding)
                h.acceptEncoding = request.acceptEncoding
            }
            try prepare(t, on: h, request: request, context: ptr)
            try curlCheck(curl_multi_add_handle(multi, h.easy), "curl_multi_add_handle")
        } catch {
            // Never in the multi, so the handle can go straight back to the pool.
            unhook(t, handle: h)
            failSoon(t, .other(error.description))
            return t
        }
        inFlight += 1
        return t
    }

    /// Points the handle at the request's target.
    private func setTarget(_ target: UpstreamTarget, on h: EasyHandle) throws(PeelIOError) {
        switch target {
        case .url(let url):
            h.endpoint = nil
            try h.set(CURLOPT_CURLU, nil)
            try h.set(CURLOPT_REQUEST_TARGET, nil)
            try h.set(CURLOPT_URL, url)
        case .origin(let endpoint, let path, let query):
            // The handle's URL is the endpoint's origin, parsed once; the path and query go in as the
            // request target, copied into the request line as they are. (Setting them as URL parts
            // would make curl lowercase %-escapes: `%C3%A9` → `%c3%a9`, which breaks signed queries.)
            if h.endpoint !== endpoint {
                // Some libcurl versions keep the URL they read from an earlier CURLU when a new one
                // is set; clearing CURLOPT_URL makes this transfer read the endpoint's.
                try h.set(CURLOPT_URL, nil)
                try h.set(CURLOPT_CURLU, UnsafeRawPointer(endpoint.url))
                h.endpoint = endpoint
            }
            let rc = scratch.target(base: endpoint.basePath, path: path, query: query) {
                peel_easy_setopt_ptr(h.easy, CURLOPT_REQUEST_TARGET, $0)
            }
            try curlCheck(rc, setoptSite(CURLOPT_REQUEST_TARGET))
        }
    }

    /// Sets the per-transfer options: the transfer as callback context, the method, the body and the header list.
    private func prepare(_ t: UpstreamTransfer, on h: EasyHandle, request: UpstreamRequest,
                         context ptr: UnsafeMutableRawPointer) throws(PeelIOError) {
        try h.set(CURLOPT_PRIVATE, UnsafeRawPointer(ptr))
        // The call's timeouts (its route's, or the client's), set only when the handle holds others.
        let timeout = Int((request.limits?.timeout ?? options.timeout) * 1000)
        if h.timeoutMs != timeout {
            try h.set(CURLOPT_TIMEOUT_MS, timeout)
            h.timeoutMs = timeout
        }
        let connect = Int((request.limits?.connectTimeout ?? options.connectTimeout) * 1000)
        if h.connectTimeoutMs != connect {
            try h.set(CURLOPT_CONNECTTIMEOUT_MS, connect)
            h.connectTimeoutMs = connect
        }
        // The CA bundle likewise; curl does not reuse a connection checked against another one.
        let ca = request.limits.map { $0.caFile ?? h.defaultCAFile } ?? options.caFile ?? h.defaultCAFile
        if h.caFile != ca {
            if let ca { try h.set(CURLOPT_CAINFO, ca) } else { try h.set(CURLOPT_CAINFO, nil as UnsafeRawPointer?) }
            h.caFile = ca
        }
        try h.set(CURLOPT_WRITEDATA, UnsafeRawPointer(ptr))
        try h.set(CURLOPT_HEADERDATA, UnsafeRawPointer(ptr))
        try h.set(CURLOPT_PREREQDATA, UnsafeRawPointer(ptr))

        var bodyPtr: UnsafeRawPointer? = nil
        var bodyLen = 0
        switch request.body {
        case .none: break
        case .exchange(let ex):
            (bodyPtr, bodyLen) = ex.bodyPointer()
            t.requestBodyOwner = ex
            if let file = ex.spooledBody {
                t.requestFile = file
                t.requestFileOffset = 0
                bodyLen = file.count
            }
        case .bytes(let b):
            t.ownedRequestBody = b
            bodyLen = b.count
            bodyPtr = t.ownedRequestBody.withUnsafeBytes { UnsafeRawPointer($0.baseAddress) }
        }
        try h.set(CURLOPT_NOBODY, 0)
        if request.methodToken == .head {
            try h.set(CURLOPT_NOBODY, 1)
            try h.set(CURLOPT_CUSTOMREQUEST, nil)
        } else if request.sentAsPost {
            try h.set(CURLOPT_POST, 1)
            try h.set(CURLOPT_POSTFIELDSIZE_LARGE, offset: curl_off_t(bodyLen))
            if t.requestFile != nil {
                // No POSTFIELDS: curl reads the spooled body through the read callback.
                try h.set(CURLOPT_POSTFIELDS, nil as UnsafeRawPointer?)
                try h.set(CURLOPT_READDATA, UnsafeRawPointer(ptr))
                try h.set(CURLOPT_SEEKDATA, UnsafeRawPointer(ptr))
            } else {
                // POSTFIELDS must not be NULL or curl would read the body from the read callback.
                try h.set(CURLOPT_POSTFIELDS, bodyPtr ?? UnsafeRawPointer(emptyBody))
            }
            try h.set(CURLOPT_CUSTOMREQUEST, request.methodToken == .post ? nil : request.method)
        } else {
            try h.set(CURLOPT_HTTPGET, 1)
            try h.set(CURLOPT_CUSTOMREQUEST, request.methodToken == .get ? nil : request.method)
        }
        try h.set(CURLOPT_HTTPHEADER, h.headers.list().map { UnsafeRawPointer($0) })
    }

    /// Runs `t`'s completion with `failure` on the next loop pass, never inside `send` (whose caller
    /// has not kept the transfer yet); `cancel()` before then silences it, as for any transfer.
    private func failSoon(_ t: UpstreamTransfer, _ failure: UpstreamFailure) {
        loop.defer {
            guard let completion = t.completion else { return }
            t.completion = nil
            completion(.failure(failure))
        }
    }

    /// Takes a transfer out of the multi and completes it with `failure` (a stream gone idle); loop
    /// thread, never from inside a curl callback.
    func expire(_ t: UpstreamTransfer, _ failure: UpstreamFailure) {
        guard let h = t.handle else { return }
        guard removeFromMulti(h.easy) else { return }
        inFlight -= 1
        finish(t, handle: h, result: .failure(failure))
    }

    /// Takes a cancelled transfer out of the multi; its completion does not run.
    func abort(_ t: UpstreamTransfer) {
        guard let h = t.handle else { return }
        // If curl keeps the handle, the transfer stays in flight, silenced (its completion is
        // already gone), and drainDone retires it when curl reports it done.
        guard removeFromMulti(h.easy) else { return }
        inFlight -= 1
        finish(t, handle: h, result: nil)
    }

    /// Unhooks the transfer from `h`, returns `h` to the pool and runs the completion with `result`;
    /// `stillInMulti` when curl would not let go of `h`.
    func finish(_ t: UpstreamTransfer, handle h: EasyHandle, result: Result<UpstreamResponse, UpstreamFailure>?,
                stillInMulti: Bool = false) {
        unhook(t, handle: h, stillInMulti: stillInMulti)
        let completion = t.completion
        t.completion = nil
        if let result, let completion { completion(result) }
    }

    /// Frees what the transfer lent `h`, drops the reference CURLOPT_PRIVATE held, and pools `h`.
    private func unhook(_ t: UpstreamTransfer, handle h: EasyHandle, stillInMulti: Bool = false) {
        if !pausedBySink.isEmpty { pausedBySink[ObjectIdentifier(t)] = nil }
        h.running = 0
        t.handle = nil
        t.sink = nil
        t.idleTimer?.cancel()
        t.idleTimer = nil
        t.onHead = nil
        // The body is the completion's now (or dropped); it stops counting against the budget.
        t.releaseBudget()
        t.spoolWriter = nil
        h.headers.reset()
        t.requestBodyOwner = nil
        t.ownedRequestBody = []
        t.requestFile = nil
        Unmanaged.passUnretained(t).release()
        // A handle curl still holds is let go, neither pooled (adding it again would fail) nor
        // cleaned up (the multi would keep a dangling pointer); only a recursive API call gets here.
        if stillInMulti { return }
        // A call that outlived the removal of its endpoint leaves its connection idle now: closed
        // too (`keepConnections`). One flag on the endpoint, so calls pay no lookup.
        if let e = h.endpoint, e.isRetired || (h.generation != generation && isRemoved(e)) { closeIdleToRemoved() }
        // Set up under settings a reload has replaced: not pooled.
        if h.generation != generation {
            h.cleanup()
            return
        }
        do throws(PeelIOError) {
            try h.set(CURLOPT_HTTPHEADER, nil)
            try h.set(CURLOPT_PRIVATE, nil)
            try h.set(CURLOPT_WRITEDATA, nil)
            try h.set(CURLOPT_HEADERDATA, nil)
            try h.set(CURLOPT_PREREQDATA, nil)
            try h.set(CURLOPT_READDATA, nil)
            try h.set(CURLOPT_SEEKDATA, nil)
            if h.decodingOff {
                try h.set(CURLOPT_HTTP_CONTENT_DECODING, 1)
                h.decodingOff = false
            }
            freeHandles.append(h)
        } catch {
            // A handle that may still point at this transfer's freed list must not carry the next one.
            record(error)
            h.cleanup()
        }
    }

    /// A pooled handle, or a new one set up once; throws the step curl refused.
    func takeHandle() throws(PeelIOError) -> EasyHandle {
        if let h = freeHandles.popLast() { return h }
        return try EasyHandle.make(for: self, options: options)
    }
}

/// A zero-length body still needs a non-NULL POSTFIELDS pointer; a static C string is immutable.
private nonisolated(unsafe) let emptyBody: UnsafePointer<CChar> = {
    let p = UnsafeMutablePointer<CChar>.allocate(capacity: 1)
    p.pointee = 0
    return UnsafePointer(p)
}()

import CCurl
import CPeelShims

/// The transfer pool: a transfer's lifetime from `send` to `finish`, on pooled easy handles.
extension UpstreamClient {
    /// Starts `method url` with `headers` ("Name: value" lines); `completion` runs once on this loop.
    @discardableResult
    public func send(method: String, url: String, headers: [String], body: UpstreamBody,
                     completion: @escaping (Result<UpstreamResponse, UpstreamFailure>) -> Void) -> UpstreamTransfer {
        var list = UpstreamHeaderList(scratch: scratch)
        for line in headers { list.append(line: line) }
        return start(method: method, headers: list.list, body: body, completion: completion) { h in
            peel_easy_setopt_ptr(h.easy, CURLOPT_CURLU, nil)
            peel_easy_setopt_ptr(h.easy, CURLOPT_REQUEST_TARGET, nil)
            peel_easy_setopt_ptr(h.easy, CURLOPT_URL, url)
            return true
        }
    }

    /// Starts `method` on `options.origin` + `path` (already validated, sent as is) and `query`
    /// (without `?`) with the header lines `headers` adds; `completion` runs once on this loop.
    @discardableResult
    public func send(method: String, path: String, query: String?, body: UpstreamBody,
                     headers: (inout UpstreamHeaderList) -> Void,
                     completion: @escaping (Result<UpstreamResponse, UpstreamFailure>) -> Void) -> UpstreamTransfer {
        var list = UpstreamHeaderList(scratch: scratch)
        headers(&list)
        return start(method: method, headers: list.list, body: body, completion: completion) { h in
            // The handle's URL is the origin, parsed once; the path and query go in as the request
            // target, copied into the request line as they are. (Setting them as URL parts would
            // make curl lowercase %-escapes: `%C3%A9` → `%c3%a9`, which breaks signed queries.)
            guard let url = h.url else { return false }
            peel_easy_setopt_ptr(h.easy, CURLOPT_CURLU, UnsafeRawPointer(url))
            return scratch.target(path: path, query: query) { peel_easy_setopt_ptr(h.easy, CURLOPT_REQUEST_TARGET, $0) } == CURLE_OK
        }
    }

    /// Takes a handle, points it at the new transfer and adds it to the multi; `target` sets the URL.
    func start(method: String, headers: UnsafeMutablePointer<curl_slist>?, body: UpstreamBody,
               completion: @escaping (Result<UpstreamResponse, UpstreamFailure>) -> Void,
               target: (EasyHandle) -> Bool) -> UpstreamTransfer {
        let t = UpstreamTransfer()
        t.client = self
        t.limit = options.maxResponseBody
        var list = headers
        guard inFlight < options.maxInFlight, let h = takeHandle() else {
            curl_slist_free_all(list)
            loop.defer { completion(.failure(.overloaded)) }
            return t
        }
        guard target(h) else {
            curl_slist_free_all(list)
            freeHandles.append(h)
            loop.defer { completion(.failure(.other("the request target was refused by curl"))) }
            return t
        }
        let easy = h.easy
        t.handle = h
        t.completion = completion
        h.errorBuffer.pointee = 0
        h.head.reset()
        t.started = loop.now
        let ptr = Unmanaged.passRetained(t).toOpaque()
        peel_easy_setopt_ptr(easy, CURLOPT_PRIVATE, ptr)
        peel_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, ptr)
        peel_easy_setopt_ptr(easy, CURLOPT_HEADERDATA, ptr)

        var bodyPtr: UnsafeRawPointer? = nil
        var bodyLen = 0
        switch body {
        case .none: break
        case .exchange(let ex):
            (bodyPtr, bodyLen) = ex.bodyPointer()
            t.requestBodyOwner = ex
        case .bytes(let b):
            t.ownedRequestBody = b
            bodyLen = b.count
            bodyPtr = t.ownedRequestBody.withUnsafeBytes { UnsafeRawPointer($0.baseAddress) }
        }
        peel_easy_setopt_long(easy, CURLOPT_NOBODY, 0)
        switch method {
        case "GET" where bodyLen == 0:
            peel_easy_setopt_long(easy, CURLOPT_HTTPGET, 1)
            peel_easy_setopt_ptr(easy, CURLOPT_CUSTOMREQUEST, nil)
        case "HEAD":
            peel_easy_setopt_long(easy, CURLOPT_NOBODY, 1)
            peel_easy_setopt_ptr(easy, CURLOPT_CUSTOMREQUEST, nil)
        default:
            if bodyLen > 0 || method == "POST" || method == "PUT" || method == "PATCH" {
                // curl adds `Expect: 100-continue` to large bodies; the client already sent the whole body.
                list = curl_slist_append(list, "Expect:")
                peel_easy_setopt_long(easy, CURLOPT_POST, 1)
                peel_easy_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bodyLen))
                // POSTFIELDS must not be NULL or curl would read the body from stdin-like callbacks.
                peel_easy_setopt_ptr(easy, CURLOPT_POSTFIELDS, bodyPtr ?? UnsafeRawPointer(emptyBody))
            } else {
                peel_easy_setopt_long(easy, CURLOPT_HTTPGET, 1)
            }
            peel_easy_setopt_ptr(easy, CURLOPT_CUSTOMREQUEST, method == "POST" ? nil : method)
        }
        t.headerList = list
        peel_easy_setopt_ptr(easy, CURLOPT_HTTPHEADER, list)
        inFlight += 1
        let rc = curl_multi_add_handle(multi, easy)
        if rc != CURLM_OK {
            inFlight -= 1
            finish(t, handle: h, result: .failure(.other(String(cString: curl_multi_strerror(rc)))), removeFromMulti: false)
        }
        return t
    }

    /// Takes a cancelled transfer out of the multi; its completion does not run.
    func abort(_ t: UpstreamTransfer) {
        guard let h = t.handle else { return }
        curl_multi_remove_handle(multi, h.easy)
        inFlight -= 1
        finish(t, handle: h, result: nil, removeFromMulti: false)
    }

    /// Unhooks the transfer from `h`, returns `h` to the pool and runs the completion with `result`.
    func finish(_ t: UpstreamTransfer, handle h: EasyHandle, result: Result<UpstreamResponse, UpstreamFailure>?,
                removeFromMulti: Bool) {
        let easy = h.easy
        if removeFromMulti { curl_multi_remove_handle(multi, easy) }
        t.handle = nil
        if let list = t.headerList { curl_slist_free_all(list) }
        t.headerList = nil
        peel_easy_setopt_ptr(easy, CURLOPT_HTTPHEADER, nil)
        peel_easy_setopt_ptr(easy, CURLOPT_PRIVATE, nil)
        peel_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, nil)
        peel_easy_setopt_ptr(easy, CURLOPT_HEADERDATA, nil)
        t.requestBodyOwner = nil
        t.ownedRequestBody = []
        freeHandles.append(h)
        let completion = t.completion
        t.completion = nil
        Unmanaged.passUnretained(t).release()
        if let result, let completion { completion(result) }
    }

    /// A pooled handle, or a new one set up once.
    func takeHandle() -> EasyHandle? {
        if let h = freeHandles.popLast() { return h }
        return EasyHandle.make(for: self, options: options)
    }
}

/// A zero-length body still needs a non-NULL POSTFIELDS pointer; a static C string is immutable.
private nonisolated(unsafe) let emptyBody: UnsafePointer<CChar> = {
    let p = UnsafeMutablePointer<CChar>.allocate(capacity: 1)
    p.pointee = 0
    return UnsafePointer(p)
}()

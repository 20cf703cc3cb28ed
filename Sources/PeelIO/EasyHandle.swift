import CCurl
import CPeelShims
import Glibc

/// One pooled easy handle and what it owns: curl's error text buffer and the pre-parsed origin URL.
final class EasyHandle {
    /// The curl easy handle.
    let easy: UnsafeMutableRawPointer
    /// CURLOPT_ERRORBUFFER storage; curl writes its detailed reason here.
    let errorBuffer: UnsafeMutablePointer<CChar>
    /// `UpstreamOptions.origin`, parsed once (CURLOPT_CURLU); nil without an origin.
    var url: OpaquePointer?
    /// The response's header lines, captured by CURLOPT_HEADERFUNCTION.
    let head = HeaderCollector()

    /// Wraps `easy` with a fresh error buffer; no options set.
    init(easy: UnsafeMutableRawPointer) {
        self.easy = easy
        errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.pointee = 0
    }

    /// Frees the handle, its URL and its error buffer.
    func cleanup() {
        curl_easy_cleanup(easy)
        if let url { curl_url_cleanup(url) }
        url = nil
        errorBuffer.deallocate()
    }

    /// A new handle with the options every transfer of `client` shares, set once; callbacks reach
    /// the transfer through CURLOPT_PRIVATE/WRITEDATA/HEADERDATA and `client` through the socket data.
    static func make(for client: UpstreamClient, options: UpstreamOptions) -> EasyHandle? {
        guard let easy = curl_easy_init() else { return nil }
        let me = Unmanaged.passUnretained(client).toOpaque()
        let h = EasyHandle(easy: easy)
        if let origin = options.origin {
            h.url = curl_url()
            if let url = h.url, curl_url_set(url, CURLUPART_URL, origin, 0) != CURLUE_OK {
                h.cleanup()
                return nil
            }
        }
        peel_easy_setopt_ptr(easy, CURLOPT_ERRORBUFFER, h.errorBuffer)
        // Signals must not be used in a threaded server; DNS timeouts come from the threaded resolver.
        peel_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        // An empty proxy disables http_proxy and friends: only the configured upstream is contacted.
        peel_easy_setopt_ptr(easy, CURLOPT_PROXY, "")
        // With no proxy, no_proxy means nothing; set, curl stops reading it from the environment per call.
        peel_easy_setopt_ptr(easy, CURLOPT_NOPROXY, "")
        peel_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, Int(options.timeout * 1000))
        peel_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(options.connectTimeout * 1000))
        peel_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1))
        peel_easy_setopt_long(easy, CURLOPT_TCP_NODELAY, 1)
        // Forward the path exactly as validated; curl would otherwise squash dot-segments itself.
        peel_easy_setopt_long(easy, CURLOPT_PATH_AS_IS, 1)
        peel_easy_setopt_long(easy, CURLOPT_BUFFERSIZE, options.bufferSize)
        peel_easy_setopt_off(easy, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(options.maxResponseBody))
        // Ask for any encoding curl can decode; envelopes are judged on decoded bytes.
        peel_easy_setopt_ptr(easy, CURLOPT_ACCEPT_ENCODING, "")
        if let ca = options.caFile { peel_easy_setopt_ptr(easy, CURLOPT_CAINFO, ca) }
        peel_easy_setopt_write_cb(easy, CURLOPT_WRITEFUNCTION) { data, size, count, userdata in
            let t = Unmanaged<UpstreamTransfer>.fromOpaque(userdata!).takeUnretainedValue()
            let n = size * count
            if t.body.count + n > t.limit {
                t.tooLarge = true
                return 0
            }
            if t.body.capacity == 0, let easy = t.handle?.easy {
                // Size the buffer once from Content-Length (a hint: decoding may change it) instead of
                // growing and copying it chunk by chunk.
                var length: curl_off_t = -1
                peel_easy_getinfo_off(easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length)
                if length > 0 { t.body.reserveCapacity(min(Int(length), t.limit)) }
            }
            t.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: n))
            return n
        }
        peel_easy_setopt_write_cb(easy, CURLOPT_HEADERFUNCTION) { data, size, count, userdata in
            let t = Unmanaged<UpstreamTransfer>.fromOpaque(userdata!).takeUnretainedValue()
            let n = size * count
            t.handle?.head.addLine(UnsafeRawBufferPointer(start: data, count: n))
            return n
        }
        peel_easy_setopt_open_cb(easy) { clientp, purpose, address in
            guard let address else { return -1 }
            let a = address.pointee
            let fd = socket(a.family, a.socktype | Int32(SOCK_CLOEXEC.rawValue), a.protocol)
            if fd >= 0 {
                Unmanaged<UpstreamClient>.fromOpaque(clientp!).takeUnretainedValue().socketOpened(fd)
            }
            return fd
        }
        peel_easy_setopt_ptr(easy, CURLOPT_OPENSOCKETDATA, me)
        peel_easy_setopt_close_cb(easy) { clientp, fd in
            Unmanaged<UpstreamClient>.fromOpaque(clientp!).takeUnretainedValue().socketClosing(fd)
            return close(fd)
        }
        peel_easy_setopt_ptr(easy, CURLOPT_CLOSESOCKETDATA, me)
        return h
    }
}

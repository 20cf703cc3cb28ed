/// The demo upstream's endpoints: a pure function from request to reply, so routing needs no socket.
enum DemoRoutes {
    /// The reply for one parsed request.
    static func reply(to request: ParsedRequest) -> DemoReply {
        if request.method == "CONNECT" {
            return .respond(.envelope(code: 405, message: "method not allowed", data: "null", status: 405))
        }
        let path = routedPath(request.path)
        let query = request.query
        if path.hasPrefix("/fault/") { return fault(String(path), query: query) }
        if path == "/api/echo" || path.hasPrefix("/api/echo/") { return .respond(echo(request)) }
        if let response = fixed(String(path)) { return .respond(response) }
        if let code = statusParameter(path, prefix: "/api/status/") {
            return .respond(.envelope(code: 5001, message: "upstream said \(code)", data: "null", status: code))
        }
        if let code = statusParameter(path, prefix: "/api/status-plain/") {
            return .respond(.text("upstream said \(code)\n", status: code, contentType: "text/plain; charset=utf-8"))
        }
        switch path {
        case "/api/slow":
            let ms = intParameter("ms", in: query, default: 1000, range: 0...600_000)
            return .respondLater(.envelope(data: #"{"slow":true,"ms":\#(ms)}"#), seconds: Double(ms) / 1000)
        case "/api/large":
            return .respond(.envelope(data: largeData(kib: intParameter("kb", in: query, default: 1024, range: 0...65_536)).text))
        case "/api/table":
            // RuoYi's TableDataInfo: the page's rows and total beside its own code and msg (the
            // `ruoyi` dialect answers `{"total":…,"rows":[…]}`).
            let (rows, count) = largeData(kib: intParameter("kb", in: query, default: 1024, range: 0...65_536))
            return .respond(.text(#"{"total":\#(count),"rows":\#(rows),"code":200,"msg":"查询成功"}"#, status: 200,
                                  contentType: "application/json"))
        default:
            return .respond(.envelope(code: 404, message: "no such endpoint", data: "null", status: 404))
        }
    }

    /// The path with any base before `/api/`, `/fault/` or `/__demo/` removed, so `/v1/api/user` is `/api/user`;
    /// a bare base (`/`, `/v1/`) is the health endpoint's root.
    static func routedPath(_ path: Substring) -> Substring {
        var i = path.startIndex
        while i < path.endIndex {
            if path[i] == "/" {
                let rest = path[i...]
                if rest.hasPrefix("/api/") || rest.hasPrefix("/fault/") || rest.hasPrefix("/__demo/") { return rest }
            }
            i = path.index(after: i)
        }
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        // "/" splits to ["", ""], "/v1/" to ["", "v1", ""].
        if path.hasSuffix("/") && segments.count <= 3 { return "/" }
        return path
    }

    /// Endpoints whose answer never varies.
    private static func fixed(_ path: String) -> DemoResponse? {
        switch path {
        case "/", "/__demo/health": return .envelope(data: #""up""#)
        case "/api/user": return .envelope(data: DemoCatalog.userData)
        case "/api/items": return .envelope(data: DemoCatalog.itemsData)
        case "/api/exact": return .envelope(data: DemoCatalog.exactData)
        case "/api/null": return .envelope(data: "null")
        case "/api/nodata": return .envelope(data: nil)
        case "/api/code-string": return .text(#"{"code":"0","message":"ok","data":{"id":42}}"#)
        case "/api/created": return .envelope(data: #"{"id":43}"#, status: 201)
        case "/api/with-headers":
            // End-to-end fields a gateway keeps, and ones describing the envelope bytes or the hop it drops.
            var r = DemoResponse.envelope(data: #"{"id":44}"#)
            r.headers += [("Cache-Control", "private, max-age=60"), ("ETag", "\"v44\""), ("Set-Cookie", "a=1; Path=/"),
                          ("Set-Cookie", "b=2; Path=/"), ("X-Upstream", "demo"), ("Content-MD5", "bogus"),
                          ("Keep-Alive", "timeout=5"), ("Proxy-Authenticate", "Basic"), ("Trailer", "X-T"),
                          ("Upgrade", "h2c")]
            return r
        case "/api/code-1002": return .envelope(code: 1002, message: "not found in the ledger", data: "null")
        case "/api/business-error": return .envelope(code: 1001, message: "insufficient balance", data: "null")
        case "/api/token-expired": return .envelope(code: 7, message: "token expired", data: "null")
        case "/api/html":
            return .text("<!doctype html>\n<html><head><title>Maintenance</title></head><body><h1>Back soon</h1></body></html>\n",
                         contentType: "text/html; charset=utf-8")
        case "/api/array": return .text(#"[{"id":1},{"id":2}]"#)
        case "/api/invalid-json": return .text(#"{"code":0,"data":[1,2,],}"#)
        case "/api/duplicate": return .text(#"{"code":0,"message":"ok","code":1001,"data":{"id":1}}"#)
        case "/api/no-code": return .text(#"{"message":"ok","data":{"id":1}}"#)
        case "/api/code-float": return .text(#"{"code":0.5,"message":"ok","data":{"id":1}}"#)
        case "/api/message-number": return .text(#"{"code":0,"message":5,"data":{"id":1}}"#)
        case "/api/empty": return DemoResponse(status: 200, headers: [("Content-Type", "application/json")])
        case "/api/text-json": return .text(DemoCatalog.userEnvelope, contentType: "text/html; charset=utf-8")
        case "/api/bom":
            var r = DemoResponse.text(DemoCatalog.userEnvelope)
            r.body.insert(contentsOf: [0xEF, 0xBB, 0xBF], at: 0)
            return r
        case "/api/image": return DemoResponse(headers: [("Content-Type", "image/png")], body: DemoImage.png())
        case "/api/gzip":
            return DemoResponse(headers: [("Content-Type", "application/json"), ("Content-Encoding", "gzip")],
                                body: Deflate.gzip(Array(DemoCatalog.userEnvelope.utf8)))
        case "/api/chunked":
            var r = DemoResponse.text(DemoCatalog.userEnvelope)
            r.chunkSize = 16
            return r
        case "/fault/bad-gzip":
            return DemoResponse(headers: [("Content-Type", "application/json"), ("Content-Encoding", "gzip")],
                                body: Array("this is not gzip at all".utf8))
        case "/fault/5xx": return .envelope(code: 5000, message: "internal error", data: "null", status: 500)
        default: return nil
        }
    }

    /// `/api/echo`: the request as the upstream saw it, so tests can check what was forwarded
    /// (`?body=none`: without the body's text).
    private static func echo(_ request: ParsedRequest) -> DemoResponse {
        let headers = request.headers.map { "[\(JSONText.string($0.0)),\(JSONText.string($0.1))]" }.joined(separator: ",")
        let data = "{\"method\":\(JSONText.string(request.method))"
            + ",\"target\":\(JSONText.string(request.target))"
            + ",\"path\":\(JSONText.string(String(request.path)))"
            + ",\"query\":\(JSONText.string(String(request.query)))"
            + ",\"version\":\(JSONText.string(request.version))"
            + ",\"headers\":[\(headers)]"
            // `?body=none` leaves the body's text out (big uploads: its length and checksum say enough).
            + (request.query.split(separator: "&").contains("body=none") ? ""
               : ",\"body\":\(JSONText.string(String(decoding: request.body, as: UTF8.self)))")
            + ",\"body_length\":\(request.body.count)"
            + ",\"body_fnv1a\":\"\(JSONText.hex(Checksum.fnv1a64(request.body), width: 16))\"}"
        return .envelope(data: data)
    }

    /// An array of objects of about `kib` KiB, and how many.
    private static func largeData(kib: Int) -> (text: String, count: Int) {
        let target = kib * 1024
        var out = "["
        out.reserveCapacity(target + 128)
        var i = 0
        while out.utf8.count < target {
            if i > 0 { out += "," }
            out += #"{"id":\#(i),"name":"user \#(i)","email":"user\#(i)@example.com","score":\#(i % 100).5,"active":\#(i % 2 == 0)}"#
            i += 1
        }
        return (out + "]", i)
    }

    /// The faults: each breaks HTTP in one precise way.
    private static func fault(_ path: String, query: Substring) -> DemoReply {
        if let response = fixed(path) { return .respond(response) }
        switch path {
        case "/fault/stall":
            return .stall
        case "/fault/close-after-headers":
            return .raw(Array("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n".utf8),
                        ending: .close)
        case "/fault/close-mid-body":
            return .raw(Array("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"code\":0,".utf8),
                        ending: .close)
        case "/fault/reset":
            return .reset
        case "/fault/stall-mid-stream":
            // A streamed answer (chunked, passthrough) whose upstream goes silent after one chunk.
            return .raw(Array("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n".utf8),
                        ending: .hold)
        case "/fault/reset-mid-body":
            return .raw(Array("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"code\":0,".utf8),
                        ending: .reset(afterSeconds: 0.05))
        case "/fault/trickle":
            let ms = intParameter("ms", in: query, default: 200, range: 1...60_000)
            return .trickle(.envelope(data: #"{"trickled":true}"#), seconds: Double(ms) / 1000)
        case "/fault/bad-chunking":
            let text = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                + "zz\r\n{\"code\":0,\"message\":\"ok\",\"data\":1}\r\n0\r\n\r\n"
            return .raw(Array(text.utf8), ending: .close)
        case "/fault/huge":
            let size: Int
            if query.split(separator: "&").contains(where: { $0.hasPrefix("kb=") }) {
                size = intParameter("kb", in: query, default: 1, range: 1...4_194_304) * 1024
            } else {
                size = intParameter("mb", in: query, default: 80, range: 1...4096) * 1_048_576
            }
            return .stream(status: 200, contentType: "application/json", body: GeneratedBody(total: size))
        case "/fault/garbage":
            return .raw([0x00, 0xFF, 0xFE] + Array("SSH-2.0-not-http\r\n\u{1B}[0m garbage \n".utf8), ending: .close)
        default:
            return .respond(.envelope(code: 404, message: "no such endpoint", data: "null", status: 404))
        }
    }

    /// The status in `/api/status/NNN`; 200-599 only, since 1xx cannot be a final answer.
    private static func statusParameter(_ path: Substring, prefix: String) -> Int? {
        guard path.hasPrefix(prefix), let code = Int(path.dropFirst(prefix.count)), (200...599).contains(code) else {
            return nil
        }
        return code
    }

    /// An integer query parameter clamped to `range`; missing or malformed gives `fallback`.
    static func intParameter(_ name: String, in query: Substring, default fallback: Int, range: ClosedRange<Int>) -> Int {
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if parts.count == 2, parts[0] == name, let value = Int(parts[1]) {
                return min(max(value, range.lowerBound), range.upperBound)
            }
        }
        return fallback
    }
}

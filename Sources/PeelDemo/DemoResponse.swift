import PeelIO

/// One answer the demo sends: status, headers and a body framed by Content-Length.
struct DemoResponse {
    /// The status code.
    var status: Int
    /// Header fields other than Content-Length and Connection, which `head` adds.
    var headers: [(String, String)]
    /// The body bytes.
    var body: [UInt8]
    /// Sends the body with chunked framing in pieces of this many bytes instead of Content-Length.
    var chunkSize: Int?

    /// Creates a response.
    init(status: Int = 200, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A body of `contentType` (JSON by default).
    static func text(_ text: String, status: Int = 200, contentType: String = "application/json") -> DemoResponse {
        DemoResponse(status: status, headers: [("Content-Type", contentType)], body: Array(text.utf8))
    }

    /// An envelope `{"code","message","data"}`; `data` is raw JSON, nil leaves it out.
    static func envelope(code: Int = 0, message: String = "ok", data: String?, status: Int = 200) -> DemoResponse {
        text(JSONText.envelope(code: code, message: message, data: data), status: status)
    }

    /// True for statuses that never carry a body (RFC 9110 §6.4.1).
    var isBodiless: Bool { status == 204 || status == 304 || (100..<200).contains(status) }

    /// Status line and header section; Content-Length is `contentLength` or the body's size.
    func head(keepAlive: Bool, http10: Bool, contentLength: Int? = nil) -> [UInt8] {
        var text = "HTTP/1.1 \(status) \(ReasonPhrase.of(status))\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        // RFC 9110 §8.6: no Content-Length in a 204; a 304 leaves it out here too since there is no body.
        // HTTP/1.0 has no chunked framing (RFC 9112 §7), so those clients get Content-Length.
        if chunkSize != nil && !http10 {
            text += "Transfer-Encoding: chunked\r\n"
        } else if !isBodiless {
            text += "Content-Length: \(contentLength ?? body.count)\r\n"
        }
        if !keepAlive {
            text += "Connection: close\r\n"
        } else if http10 {
            text += "Connection: keep-alive\r\n"
        }
        text += "\r\n"
        return Array(text.utf8)
    }

    /// Head plus body, ready to write; HEAD answers keep the Content-Length but drop the body (RFC 9110 §9.3.2).
    func serialized(keepAlive: Bool, http10: Bool, includeBody: Bool) -> [UInt8] {
        var out = head(keepAlive: keepAlive, http10: http10)
        guard includeBody && !isBodiless else { return out }
        guard let chunkSize, chunkSize > 0, !http10 else { return out + body }
        // RFC 9112 §7.1: hex size, CRLF, data, CRLF; a zero-size chunk and an empty trailer section end it.
        var offset = 0
        while offset < body.count {
            let n = min(chunkSize, body.count - offset)
            out += Array("\(String(n, radix: 16))\r\n".utf8)
            out += body[offset..<offset + n]
            out += [13, 10]
            offset += n
        }
        return out + Array("0\r\n\r\n".utf8)
    }
}

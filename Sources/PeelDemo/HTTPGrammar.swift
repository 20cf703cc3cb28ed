/// How a request's body is delimited (RFC 9112 §6.3).
enum BodyFraming: Equatable {
    /// Exactly this many bytes (no body is `length(0)`).
    case length(Int)
    /// Chunked transfer coding.
    case chunked
}

/// A request head that passed every check.
struct RequestHead {
    /// The method token.
    var method: String
    /// The request-target as sent.
    var target: String
    /// `HTTP/1.0` or `HTTP/1.1`.
    var version: String
    /// Field lines in order.
    var headers: [(String, String)]
    /// Whether the connection persists after the answer (RFC 9112 §9.3).
    var keepAlive: Bool
    /// Whether to send `100 Continue` while the body is missing (RFC 9110 §10.1.1).
    var expectsContinue: Bool
    /// How the body is delimited.
    var framing: BodyFraming
}

/// The request grammar of RFC 9112, strict: every rule either accepts or names a refusal.
enum HTTPGrammar {
    /// The request line and field lines of one head, checked and interpreted (RFC 9112 §3, §5, §6, §9.3).
    static func head(_ lines: [ArraySlice<UInt8>], maxBody: Int) throws(RequestRefusal) -> RequestHead {
        guard let first = lines.first else { throw RequestRefusal(400, "empty request") }
        let (method, target, version) = try requestLine(first)
        var headers: [(String, String)] = []
        for line in lines.dropFirst() { headers.append(try field(line)) }

        func values(_ name: String) -> [String] { headers.filter { $0.0.lowercased() == name }.map(\.1) }
        let transferEncoding = values("transfer-encoding")
        let contentLength = values("content-length")
        let hosts = values("host")
        if version == "HTTP/1.1" && hosts.count != 1 {
            throw RequestRefusal(400, hosts.isEmpty ? "missing Host" : "more than one Host")  // RFC 9112 §3.2
        }
        if hosts.count > 1 { throw RequestRefusal(400, "more than one Host") }

        var framing = BodyFraming.length(0)
        if !transferEncoding.isEmpty {
            // RFC 9112 §6.1: a message with both is a smuggling attempt or a broken client; refuse it.
            if !contentLength.isEmpty { throw RequestRefusal(400, "both Content-Length and Transfer-Encoding") }
            if version == "HTTP/1.0" { throw RequestRefusal(400, "Transfer-Encoding in an HTTP/1.0 request") }
            let codings = tokens(transferEncoding)
            if codings.contains("") { throw RequestRefusal(400, "empty transfer coding") }
            guard codings.last == "chunked" else { throw RequestRefusal(400, "chunked is not the final transfer coding") }
            guard codings.count == 1 else { throw RequestRefusal(501, "transfer coding not implemented") }
            framing = .chunked
        } else if !contentLength.isEmpty {
            guard contentLength.count == 1 else { throw RequestRefusal(400, "more than one Content-Length") }
            let text = contentLength[0]
            guard !text.isEmpty, text.utf8.count <= 12, text.utf8.allSatisfy(isDigit), let length = Int(text) else {
                throw RequestRefusal(400, "invalid Content-Length")
            }
            if length > maxBody { throw RequestRefusal(413, "request body over \(maxBody) bytes") }
            framing = .length(length)
        }

        let connection = tokens(values("connection"))
        let keepAlive: Bool
        if connection.contains("close") {
            keepAlive = false
        } else {
            keepAlive = version == "HTTP/1.1" || connection.contains("keep-alive")
        }
        // RFC 9110 §10.1.1: 100-continue is ignored in HTTP/1.0 requests.
        let expects = version == "HTTP/1.1" && tokens(values("expect")).contains("100-continue")
        return RequestHead(method: method, target: target, version: version, headers: headers, keepAlive: keepAlive,
                           expectsContinue: expects && framing != .length(0), framing: framing)
    }

    /// `method SP request-target SP HTTP-version` with single spaces (RFC 9112 §3).
    static func requestLine(_ line: ArraySlice<UInt8>) throws(RequestRefusal) -> (String, String, String) {
        let parts = line.split(separator: sp, omittingEmptySubsequences: false)
        guard parts.count == 3, parts.allSatisfy({ !$0.isEmpty }) else { throw RequestRefusal(400, "malformed request line") }
        guard parts[0].allSatisfy(isTChar) else { throw RequestRefusal(400, "invalid method") }
        guard parts[1].allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { throw RequestRefusal(400, "invalid request target") }
        let method = String(decoding: parts[0], as: UTF8.self)
        let target = String(decoding: parts[1], as: UTF8.self)
        let v = Array(parts[2])
        guard v.count == 8, v[0...4].elementsEqual("HTTP/".utf8), isDigit(v[5]), v[6] == UInt8(ascii: "."), isDigit(v[7]) else {
            throw RequestRefusal(400, "malformed HTTP version")
        }
        guard v[5] == UInt8(ascii: "1") else { throw RequestRefusal(505, "HTTP version not supported") }
        let version = v[7] == UInt8(ascii: "0") ? "HTTP/1.0" : "HTTP/1.1"
        // RFC 9112 §3.2: origin-form, absolute-form, authority-form (CONNECT only), asterisk-form (OPTIONS only).
        let lower = target.lowercased()
        let valid = target.hasPrefix("/") || lower.hasPrefix("http://") || lower.hasPrefix("https://")
            || (target == "*" && method == "OPTIONS") || method == "CONNECT"
        guard valid else { throw RequestRefusal(400, "invalid request target form") }
        return (method, target, version)
    }

    /// `field-name ":" OWS field-value OWS` (RFC 9112 §5).
    static func field(_ line: ArraySlice<UInt8>) throws(RequestRefusal) -> (String, String) {
        guard let first = line.first else { throw RequestRefusal(400, "empty field line") }
        // RFC 9112 §5.2: obs-fold is rejected with 400.
        if first == sp || first == htab { throw RequestRefusal(400, "obsolete line folding") }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { throw RequestRefusal(400, "field line without colon") }
        let name = line[..<colon]
        // RFC 9112 §5.1: no whitespace between name and colon; names are tokens.
        guard !name.isEmpty, name.allSatisfy(isTChar) else { throw RequestRefusal(400, "invalid field name") }
        var value = line[(colon + 1)...]
        while let b = value.first, b == sp || b == htab { value = value.dropFirst() }
        while let b = value.last, b == sp || b == htab { value = value.dropLast() }
        // RFC 9110 §5.5: field values are VCHAR, obs-text, SP and HTAB; CR, LF and NUL are refused.
        guard value.allSatisfy({ $0 == htab || ($0 >= 0x20 && $0 != 0x7F) }) else {
            throw RequestRefusal(400, "invalid byte in field value")
        }
        return (String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self))
    }

    /// `chunk-size [ chunk-ext ]` (RFC 9112 §7.1); extensions are skipped.
    static func chunkSize(_ line: ArraySlice<UInt8>) throws(RequestRefusal) -> Int {
        var size = 0
        var digits = 0
        var rest = line[...]
        while let b = rest.first, let d = hexValue(b) {
            if digits == 15 { throw RequestRefusal(413, "chunk size too large") }
            size = size * 16 + d
            digits += 1
            rest = rest.dropFirst()
        }
        guard digits > 0 else { throw RequestRefusal(400, "invalid chunk size") }
        while let b = rest.first, b == sp || b == htab { rest = rest.dropFirst() }
        if let b = rest.first {
            guard b == UInt8(ascii: ";") else { throw RequestRefusal(400, "invalid chunk size") }
            guard rest.allSatisfy({ $0 == htab || ($0 >= 0x20 && $0 != 0x7F) }) else {
                throw RequestRefusal(400, "invalid chunk extension")
            }
        }
        return size
    }

    /// Comma-separated list members of some field values, trimmed and lowercased.
    static func tokens(_ values: [String]) -> [String] {
        values.flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }
            .map { $0.trimmingOWS().lowercased() }
    }
}

private let sp = UInt8(ascii: " ")
private let htab = UInt8(ascii: "\t")

private func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

private func hexValue(_ b: UInt8) -> Int? {
    switch b {
    case 0x30...0x39: return Int(b - 0x30)
    case 0x41...0x46: return Int(b - 0x41 + 10)
    case 0x61...0x66: return Int(b - 0x61 + 10)
    default: return nil
    }
}

/// `tchar` from RFC 9110 §5.6.2.
private func isTChar(_ b: UInt8) -> Bool {
    switch b {
    case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
    default: return Array("!#$%&'*+-.^_`|~".utf8).contains(b)
    }
}

extension Substring {
    /// Without leading and trailing spaces and tabs.
    fileprivate func trimmingOWS() -> Substring {
        var s = self
        while let c = s.first, c == " " || c == "\t" { s = s.dropFirst() }
        while let c = s.last, c == " " || c == "\t" { s = s.dropLast() }
        return s
    }
}

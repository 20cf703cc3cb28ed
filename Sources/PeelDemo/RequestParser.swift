/// Why a request was refused; `status` is the answer and the connection closes after it.
struct RequestRefusal: Error, Equatable {
    /// 400, 413, 431, 501 or 505.
    var status: Int
    /// A short English reason, sent as the envelope message.
    var reason: String

    init(_ status: Int, _ reason: String) {
        self.status = status
        self.reason = reason
    }
}

/// What the parser has for the connection after the bytes received so far.
enum ParseStep {
    /// The next request is not complete yet.
    case needMore
    /// One whole request; call `next()` again for a pipelined one.
    case request(ParsedRequest)
    /// The bytes are not a request this server accepts; every later call repeats this.
    case refused(RequestRefusal)
}

/// A strict, incremental HTTP/1.1 request parser (RFC 9112); bytes in, whole requests out, in order.
struct RequestParser {
    /// Largest request line plus header section in bytes (default 64 KiB).
    let maxHead: Int
    /// Largest body in bytes after de-chunking (default 16 MiB).
    let maxBody: Int

    private var buffer: [UInt8] = []
    /// First byte not yet consumed.
    private var start = 0
    /// Where the head scan resumes, and where its current line began (absolute indices).
    private var scan = 0
    private var lineStart = 0
    private var phase = Phase.head
    private var head: Head?
    private var body: [UInt8] = []
    private var trailerBytes = 0
    private var continuePending = false
    private var failure: RequestRefusal?

    fileprivate enum Phase {
        case head
        case fixed(Int)
        case chunkSize
        case chunkData(Int)
        case chunkDataEnd
        case trailers
    }

    /// The parts of a request known once its head is in.
    fileprivate struct Head {
        var method: String
        var target: String
        var version: String
        var headers: [(String, String)]
        var keepAlive: Bool
    }

    /// Creates a parser with the given limits.
    init(maxHead: Int = 65_536, maxBody: Int = 16 << 20) {
        self.maxHead = maxHead
        self.maxBody = maxBody
    }

    /// Bytes received and not yet consumed by a returned request.
    var buffered: Int { buffer.count - start }

    /// Adds received bytes.
    mutating func append(_ bytes: ArraySlice<UInt8>) {
        buffer.append(contentsOf: bytes)
    }

    /// True once per request whose head asked for `100-continue` while its body is still missing (RFC 9110 §10.1.1).
    mutating func takeContinueRequest() -> Bool {
        guard continuePending else { return false }
        continuePending = false
        return true
    }

    /// Parses as far as the bytes allow.
    mutating func next() -> ParseStep {
        if let failure { return .refused(failure) }
        do {
            return try advance()
        } catch {
            failure = error
            continuePending = false
            return .refused(error)
        }
    }

    private mutating func advance() throws(RequestRefusal) -> ParseStep {
        compactIfLarge()
        while true {
            switch phase {
            case .head:
                guard let h = try takeHead() else { return .needMore }
                head = h.head
                body = []
                phase = h.framing
                continuePending = h.expectsContinue
            case .fixed(let length):
                if length == 0 { return finish() }
                guard buffered >= length else { return .needMore }
                body = Array(buffer[start..<start + length])
                start += length
                return finish()
            case .chunkSize:
                guard let line = try takeLine(limit: 4096, what: "chunk size line") else { return .needMore }
                let size = try Self.chunkSize(line)
                if size == 0 {
                    phase = .trailers
                } else {
                    if size > maxBody - body.count { throw RequestRefusal(413, "request body over \(maxBody) bytes") }
                    phase = .chunkData(size)
                }
            case .chunkData(let remaining):
                let take = min(remaining, buffered)
                if take == 0 { return .needMore }
                body.append(contentsOf: buffer[start..<start + take])
                start += take
                if take < remaining {
                    phase = .chunkData(remaining - take)
                    return .needMore
                }
                phase = .chunkDataEnd
            case .chunkDataEnd:
                guard buffered >= 1 else { return .needMore }
                guard buffer[start] == cr else { throw RequestRefusal(400, "chunk data longer than its size") }
                guard buffered >= 2 else { return .needMore }
                guard buffer[start + 1] == lf else { throw RequestRefusal(400, "bare CR after chunk data") }
                start += 2
                phase = .chunkSize
            case .trailers:
                guard let line = try takeLine(limit: maxHead, what: "trailer section") else { return .needMore }
                if line.isEmpty { return finish() }
                trailerBytes += line.count + 2
                if trailerBytes > maxHead { throw RequestRefusal(431, "trailer section over \(maxHead) bytes") }
                // Trailers are checked like header fields, then dropped (RFC 9112 §7.1.2 lets a recipient discard them).
                _ = try Self.field(line)
            }
        }
    }

    private mutating func finish() -> ParseStep {
        guard let h = head else { return .needMore }
        let request = ParsedRequest(method: h.method, target: h.target, version: h.version, headers: h.headers,
                                    body: body, keepAlive: h.keepAlive)
        head = nil
        body = []
        trailerBytes = 0
        continuePending = false
        phase = .head
        if start > 0 {
            buffer.removeFirst(start)
            start = 0
        }
        scan = 0
        lineStart = 0
        return .request(request)
    }

    /// Drops consumed bytes once they are many, so a long body does not sit in memory twice.
    private mutating func compactIfLarge() {
        guard start >= 65_536 else { return }
        buffer.removeFirst(start)
        scan = max(0, scan - start)
        lineStart = max(0, lineStart - start)
        start = 0
    }

    /// One CRLF-terminated line (without its CRLF) for the chunked framing; nil until it is all in.
    private mutating func takeLine(limit: Int, what: String) throws(RequestRefusal) -> ArraySlice<UInt8>? {
        guard let lfIndex = buffer[start...].firstIndex(of: lf) else {
            if buffered > limit { throw RequestRefusal(what == "trailer section" ? 431 : 400, "\(what) too long") }
            return nil
        }
        guard lfIndex > start, buffer[lfIndex - 1] == cr else { throw RequestRefusal(400, "bare LF in \(what)") }
        let line = buffer[start..<(lfIndex - 1)]
        if line.count > limit { throw RequestRefusal(400, "\(what) too long") }
        start = lfIndex + 1
        return line
    }
}

extension RequestParser {
    fileprivate struct TakenHead {
        var head: Head
        var framing: Phase
        var expectsContinue: Bool
    }

    /// The request line and header section once both are in (RFC 9112 §2.1); nil until then.
    private mutating func takeHead() throws(RequestRefusal) -> TakenHead? {
        // RFC 9112 §2.2: a server SHOULD ignore at least one empty line received before the request-line.
        while scan <= start, buffered >= 1, buffer[start] == cr || buffer[start] == lf {
            guard buffer[start] == cr else { throw RequestRefusal(400, "bare LF before request line") }
            guard buffered >= 2 else { return nil }
            guard buffer[start + 1] == lf else { throw RequestRefusal(400, "bare CR before request line") }
            start += 2
        }
        if scan < start {
            scan = start
            lineStart = start
        }
        var end: Int?
        while scan < buffer.count {
            let i = scan
            scan += 1
            guard buffer[i] == lf else { continue }
            // RFC 9112 §2.2 lets a recipient accept a bare LF; this server is the strict kind on purpose.
            guard i > lineStart, buffer[i - 1] == cr else { throw RequestRefusal(400, "bare LF in request head") }
            if i - 1 == lineStart {
                end = i + 1
                break
            }
            lineStart = i + 1
        }
        guard let end else {
            if buffered > maxHead { throw RequestRefusal(431, "request head over \(maxHead) bytes") }
            return nil
        }
        if end - start > maxHead { throw RequestRefusal(431, "request head over \(maxHead) bytes") }
        var lines: [ArraySlice<UInt8>] = []
        var from = start
        var i = start
        while i < end - 2 {
            if buffer[i] == cr, buffer[i + 1] == lf {
                lines.append(buffer[from..<i])
                from = i + 2
                i += 2
            } else {
                i += 1
            }
        }
        start = end
        return try Self.interpret(lines, maxBody: maxBody)
    }

    private static func interpret(_ lines: [ArraySlice<UInt8>], maxBody: Int) throws(RequestRefusal) -> TakenHead {
        guard let requestLine = lines.first else { throw RequestRefusal(400, "empty request") }
        let (method, target, version) = try Self.requestLine(requestLine)
        var headers: [(String, String)] = []
        for line in lines.dropFirst() { headers.append(try Self.field(line)) }

        func values(_ name: String) -> [String] { headers.filter { $0.0.lowercased() == name }.map(\.1) }
        let transferEncoding = values("transfer-encoding")
        let contentLength = values("content-length")
        let hosts = values("host")
        if version == "HTTP/1.1" && hosts.count != 1 {
            throw RequestRefusal(400, hosts.isEmpty ? "missing Host" : "more than one Host")  // RFC 9112 §3.2
        }
        if hosts.count > 1 { throw RequestRefusal(400, "more than one Host") }

        var framing = Phase.fixed(0)
        if !transferEncoding.isEmpty {
            // RFC 9112 §6.1: a message with both is a smuggling attempt or a broken client; refuse it.
            if !contentLength.isEmpty { throw RequestRefusal(400, "both Content-Length and Transfer-Encoding") }
            if version == "HTTP/1.0" { throw RequestRefusal(400, "Transfer-Encoding in an HTTP/1.0 request") }
            let codings = tokens(transferEncoding)
            if codings.contains("") { throw RequestRefusal(400, "empty transfer coding") }
            guard codings.last == "chunked" else { throw RequestRefusal(400, "chunked is not the final transfer coding") }
            guard codings.count == 1 else { throw RequestRefusal(501, "transfer coding not implemented") }
            framing = .chunkSize
        } else if !contentLength.isEmpty {
            guard contentLength.count == 1 else { throw RequestRefusal(400, "more than one Content-Length") }
            let text = contentLength[0]
            guard !text.isEmpty, text.utf8.count <= 12, text.utf8.allSatisfy(isDigit), let length = Int(text) else {
                throw RequestRefusal(400, "invalid Content-Length")
            }
            if length > maxBody { throw RequestRefusal(413, "request body over \(maxBody) bytes") }
            framing = .fixed(length)
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
        var hasBody = true
        if case .fixed(0) = framing { hasBody = false }
        let head = Head(method: method, target: target, version: version, headers: headers, keepAlive: keepAlive)
        return TakenHead(head: head, framing: framing, expectsContinue: expects && hasBody)
    }

    /// `method SP request-target SP HTTP-version` with single spaces (RFC 9112 §3).
    private static func requestLine(_ line: ArraySlice<UInt8>) throws(RequestRefusal) -> (String, String, String) {
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
    private static func tokens(_ values: [String]) -> [String] {
        values.flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }
            .map { $0.trimmingOWS().lowercased() }
    }
}

private let cr = UInt8(ascii: "\r")
private let lf = UInt8(ascii: "\n")
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

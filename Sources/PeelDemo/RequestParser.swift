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
    private var head: RequestHead?
    private var body: [UInt8] = []
    private var trailerBytes = 0
    private var continuePending = false
    private var failure: RequestRefusal?

    private enum Phase {
        case head
        case fixed(Int)
        case chunkSize
        case chunkData(Int)
        case chunkDataEnd
        case trailers
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
                head = h
                body = []
                switch h.framing {
                case .length(let n): phase = .fixed(n)
                case .chunked: phase = .chunkSize
                }
                continuePending = h.expectsContinue
            case .fixed(let length):
                if length == 0 { return finish() }
                guard buffered >= length else { return .needMore }
                body = Array(buffer[start..<start + length])
                start += length
                return finish()
            case .chunkSize:
                guard let line = try takeLine(limit: 4096, what: "chunk size line") else { return .needMore }
                let size = try HTTPGrammar.chunkSize(line)
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
                guard let line = try takeLine(limit: maxHead, what: "trailer section", tooLong: 431) else { return .needMore }
                if line.isEmpty { return finish() }
                trailerBytes += line.count + 2
                if trailerBytes > maxHead { throw RequestRefusal(431, "trailer section over \(maxHead) bytes") }
                // Trailers are checked like header fields, then dropped (RFC 9112 §7.1.2 lets a recipient discard them).
                _ = try HTTPGrammar.field(line)
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
    private mutating func takeLine(limit: Int, what: String, tooLong: Int = 400) throws(RequestRefusal) -> ArraySlice<UInt8>? {
        guard let lfIndex = buffer[start...].firstIndex(of: lf) else {
            if buffered > limit { throw RequestRefusal(tooLong, "\(what) too long") }
            return nil
        }
        guard lfIndex > start, buffer[lfIndex - 1] == cr else { throw RequestRefusal(400, "bare LF in \(what)") }
        let line = buffer[start..<(lfIndex - 1)]
        if line.count > limit { throw RequestRefusal(tooLong, "\(what) too long") }
        start = lfIndex + 1
        return line
    }
}

extension RequestParser {
    /// The request line and header section once both are in (RFC 9112 §2.1); nil until then.
    private mutating func takeHead() throws(RequestRefusal) -> RequestHead? {
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
        return try HTTPGrammar.head(lines, maxBody: maxBody)
    }
}

private let cr = UInt8(ascii: "\r")
private let lf = UInt8(ascii: "\n")

/// One request and the promise to answer it exactly once. It owns the buffer its request was read
/// into, so fields and body stay valid (and curl may send the body from it) until it is released.
public final class HTTPExchange {
    private var connection: ClientConnection?
    /// The request as parsed, kept as its parts (nil buffer, no fields and an empty body for a
    /// refusal): an optional `ParsedRequest` is copied whole, with a retain of each part, by every
    /// read of one of them.
    private let buffer: RequestBuffer?
    private let fieldRanges: [HTTP1Parser.FieldRange]
    private let bodyRange: Range<Int>
    private let spooled: SpooledBody?
    /// Why the server refused the request before any handler looked at it; nil for a request to handle.
    public let refusal: RequestError?
    /// A refused request's Origin field, when its head was whole (a refusal has no other fields).
    public let refusedOrigin: String?
    /// True once `respond` ran or the client left; a second answer is ignored.
    public private(set) var answered = false
    /// True when the client left before the answer.
    public private(set) var clientGone = false
    /// Runs once if the client leaves before the answer (cancel the upstream call here).
    public var onClientGone: (() -> Void)?

    /// Request method as sent (GET, POST, …); empty for a refusal that came before the request line.
    public let method: String
    /// The method as a token, for the comparisons every stage makes.
    public let methodToken: MethodToken
    /// The request target as sent (origin-form `/a/b?x=1`, or absolute-form), with any byte that is
    /// not part of well-formed UTF-8 percent-encoded (`TargetText`).
    public let target: String
    /// HTTP major and minor version.
    public let version: (major: Int, minor: Int)
    /// The TCP peer's address (a proxy's, when one is in front).
    public var peerAddress: String { connection?.clientAddress ?? lastClientAddress }
    private let lastClientAddress: String
    /// The client's address, the one place it is decided: the peer, or, when the peer is a
    /// trusted proxy, the last untrusted hop of X-Forwarded-For. Set once by the handler at request
    /// start (before that it is the peer); the access log, X-Forwarded-For and per-client bounds
    /// read it.
    public var clientAddress: String
    /// True for HEAD: the answer is written without its body. A refusal keeps its body: the request
    /// was not accepted as anything, the connection closes after it, and the body says why.
    public var isHead: Bool { refusal == nil && methodToken == .head }

    init(connection: ClientConnection, request: ParsedRequest) {
        self.connection = connection
        buffer = request.buffer
        fieldRanges = request.fields
        bodyRange = request.body
        spooled = request.spooled
        refusal = nil
        refusedOrigin = nil
        method = request.buffer.string(request.method)
        methodToken = MethodToken(method)
        target = request.buffer.target(request.target)
        version = (1, request.minorVersion)
        lastClientAddress = connection.clientAddress
        clientAddress = connection.clientAddress
    }

    init(connection: ClientConnection, refusal: RequestError, method: String, target: String, minorVersion: Int,
         origin: String? = nil) {
        self.connection = connection
        buffer = nil
        fieldRanges = []
        bodyRange = 0..<0
        spooled = nil
        self.refusal = refusal
        refusedOrigin = origin
        self.method = method
        methodToken = MethodToken(method)
        self.target = target
        version = (1, minorVersion)
        lastClientAddress = connection.clientAddress
        clientAddress = connection.clientAddress
    }

    /// Calls `body` with each request header field, in order, as sent, without copying it.
    public func forEachField(_ body: (HeaderField) -> Void) {
        guard let buffer else { return }
        let base = UnsafeRawPointer(buffer.base)
        for f in fieldRanges {
            body(HeaderField(name: UnsafeRawBufferPointer(start: base + Int(f.nameStart), count: Int(f.nameEnd - f.nameStart)),
                             value: UnsafeRawBufferPointer(start: base + Int(f.valueStart), count: Int(f.valueEnd - f.valueStart)),
                             token: f.token))
        }
    }

    /// The first value of the field `token` names, if present.
    public func header(_ token: FieldToken) -> String? {
        var found: String?
        forEachField { f in
            if found == nil, f.token == token { found = f.valueString }
        }
        return found
    }

    /// Every line of header `name` (case-insensitive) combined in order (RFC 9110 §5.3), joined with
    /// `separator` (`, `, or `; ` for Cookie, RFC 6265 §5.4); nil when absent.
    public func combinedHeader(_ name: String, separator: String = ", ") -> String? {
        let set = HeaderNameSet([name])
        var found: String?
        forEachField { f in
            if f.isIn(set) { found = found.map { $0 + separator + f.valueString } ?? f.valueString }
        }
        return found
    }

    /// Request body length in bytes (chunked bodies arrive de-chunked).
    public var bodyCount: Int { spooled?.count ?? bodyRange.count }

    /// The body when it passed the spool's threshold and waits in a file (sent upstream from it);
    /// nil when it is in memory (`bodyPointer`).
    public var spooledBody: SpooledBody? { spooled }

    /// A contiguous view of the body, valid while this exchange lives.
    func bodyPointer() -> (UnsafeRawPointer?, Int) {
        guard let buffer, bodyRange.count > 0 else { return (nil, 0) }
        return (UnsafeRawPointer(buffer.base + bodyRange.lowerBound), bodyRange.count)
    }

    /// Copies the body out (for small bodies and tests).
    public func bodyBytes() -> [UInt8] {
        if let file = spooledBody { return file.read(0..<file.count) }
        let (p, n) = bodyPointer()
        guard let p, n > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: p, count: n))
    }

    /// Answers once with `headers` and `body`; later calls, and calls after the client left, do nothing.
    public func respond(status: Int, headers: [(String, String)], body: [UInt8], closing: Bool = false) {
        respond(status: status, fields: ReplyFields(headers), body: body, closing: closing)
    }

    /// Answers once with `fields` and `body[range]` (all of it when nil); later
    /// calls, and calls after the client left, do nothing. The body is sent from the array itself.
    /// `keeping` stays alive until the body is written (or the connection closes): a budget hold.
    /// `closing` asks that the connection end after this answer (a refused request); the connection
    /// layer alone writes its fate, adding its own reasons (draining, a refusal, HTTP/1.0).
    public func respond(status: Int, fields: ReplyFields, body: [UInt8], range: Range<Int>? = nil, keeping: AnyObject? = nil,
                        closing: Bool = false) {
        guard !answered else { return }
        answered = true
        onClientGone = nil
        guard let connection else { return }
        self.connection = nil
        connection.reply(self, status: status, fields: fields, body: body, range: range ?? 0..<body.count, keeping: keeping,
                         closing: closing)
    }

    /// Answers once with `fields` and bytes `range` of a spooled body, sent from its file with
    /// sendfile(2); the file stays open until they are written (or the connection closes). Later
    /// calls, and calls after the client left, do nothing.
    public func respond(status: Int, fields: ReplyFields, file: SpooledBody, range: Range<Int>, closing: Bool = false) {
        respond(status: status, fields: fields, file: file, pieces: [.file(range)], closing: closing)
    }

    /// Answers once with `fields` and `pieces` of a spooled body in order: its ranges sent from the
    /// file with sendfile(2), the bytes between them as they are; the file stays open until they
    /// are written (or the connection closes). Later calls, and calls after the client left, do nothing.
    public func respond(status: Int, fields: ReplyFields, file: SpooledBody, pieces: [FilePiece], closing: Bool = false) {
        guard !answered else { return }
        answered = true
        onClientGone = nil
        guard let connection else { return }
        self.connection = nil
        connection.reply(self, status: status, fields: fields, body: [], range: 0..<0, file: file, pieces: pieces, closing: closing)
    }

    /// Starts an answer whose body is written in pieces (`ReplyStream.write`, then `finish`). With
    /// `contentLength` (the upstream's declared length) the body goes as is under that length;
    /// without it HTTP/1.1 clients get chunked transfer coding (RFC 9112 §7.1), HTTP/1.0 ones a body
    /// ended by the close. `endless`: a stream only the client ends (server-sent events), so its
    /// end of input ends it at once (otherwise a half-closed client is still read to).
    /// Nil when the exchange was already answered or the client left.
    public func startStream(status: Int, fields: ReplyFields, contentLength: Int? = nil, endless: Bool = false) -> ReplyStream? {
        guard !answered else { return nil }
        answered = true
        onClientGone = nil
        guard let connection else { return nil }
        self.connection = nil
        return connection.startStream(self, status: status, fields: fields, contentLength: contentLength, endless: endless)
    }

    /// Answers with `101 Switching Protocols` and `fields` (the upstream's, as relayed) and turns the
    /// connection into a tunnel to `upstream` (RFC 9110 §15.2.2), bounded by `limits`; `onEnd` runs
    /// once when it closes. Nil when the exchange was already answered or the client left (the
    /// upstream end is closed then).
    public func startTunnel(fields: ReplyFields, upstream: TunnelUpstream, limits: TunnelLimits,
                            onEnd: @escaping (TunnelReport) -> Void) -> Tunnel? {
        guard !answered, let connection else {
            upstream.close()
            return nil
        }
        answered = true
        onClientGone = nil
        self.connection = nil
        return connection.startTunnel(self, fields: fields, upstream: upstream, limits: limits, onEnd: onEnd)
    }

    /// The client left before the answer: cancel the upstream call; the connection closes.
    func clientLeft() {
        guard !answered else { return }
        answered = true
        clientGone = true
        connection = nil
        let callback = onClientGone
        onClientGone = nil
        callback?()
    }
}

/// One request as the demo server received it, before routing.
struct ParsedRequest {
    /// The method token as sent (case-sensitive, RFC 9110 §9.1).
    var method: String
    /// The request-target exactly as sent.
    var target: String
    /// `HTTP/1.0` or `HTTP/1.1` (higher 1.x minors are answered as 1.1, RFC 9110 §6.2).
    var version: String
    /// Header fields in received order, names as sent.
    var headers: [(String, String)]
    /// The body after de-chunking.
    var body: [UInt8]
    /// Whether the connection stays open after the answer (RFC 9112 §9.3).
    var keepAlive: Bool

    /// True for HTTP/1.0 requests.
    var isHTTP10: Bool { version == "HTTP/1.0" }

    /// The target without its query.
    var path: Substring {
        let t = originPath
        if let q = t.firstIndex(of: "?") { return t[..<q] }
        return t
    }

    /// The query without `?`, or empty.
    var query: Substring {
        let t = originPath
        if let q = t.firstIndex(of: "?") { return t[t.index(after: q)...] }
        return ""
    }

    /// The origin-form part of the target; absolute-form targets (RFC 9112 §3.2.2) lose scheme and authority.
    private var originPath: Substring {
        let t = target[...]
        for scheme in ["http://", "https://"] where t.lowercased().hasPrefix(scheme) {
            let rest = t.dropFirst(scheme.count)
            if let slash = rest.firstIndex(of: "/") { return rest[slash...] }
            return "/"
        }
        return t
    }

    /// The first value of a header field, matched case-insensitively.
    func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    /// The record handed to tests.
    var recorded: RecordedRequest {
        RecordedRequest(method: method, target: target, version: version, headers: headers, body: body)
    }
}

/// A copy of one received request, safe to hand to any thread.
public struct RecordedRequest: Sendable {
    /// The method token as sent.
    public var method: String
    /// The request-target exactly as sent.
    public var target: String
    /// `HTTP/1.0` or `HTTP/1.1`.
    public var version: String
    /// Header fields in received order, names as sent.
    public var headers: [(String, String)]
    /// The body after de-chunking.
    public var body: [UInt8]

    /// Creates a record.
    public init(method: String, target: String, version: String, headers: [(String, String)], body: [UInt8]) {
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
        self.body = body
    }

    /// Every value of a header field, matched case-insensitively, in received order.
    public func values(_ name: String) -> [String] {
        let wanted = name.lowercased()
        return headers.filter { $0.0.lowercased() == wanted }.map(\.1)
    }

    /// The first value of a header field, matched case-insensitively.
    public func header(_ name: String) -> String? { values(name).first }
}

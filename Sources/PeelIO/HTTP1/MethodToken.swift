/// A request method as Peel acts on it, read once when the exchange is made: later stages compare
/// a byte, not a String (RFC 9110 §9; methods are case-sensitive, §9.1).
public enum MethodToken: UInt8, Sendable {
    case get, head, post, put, patch, delete, options, connect, trace, other

    /// The token for a method as sent; `other` for any method Peel has no rule for.
    public init(_ method: String) {
        switch method {
        case "GET": self = .get
        case "HEAD": self = .head
        case "POST": self = .post
        case "PUT": self = .put
        case "PATCH": self = .patch
        case "DELETE": self = .delete
        case "OPTIONS": self = .options
        case "CONNECT": self = .connect
        case "TRACE": self = .trace
        default: self = .other
        }
    }

    /// GET or HEAD: the methods whose answers the offline cache keeps and serves.
    public var readsResource: Bool { self == .get || self == .head }

    /// Whether a request may be sent a second time when a reused connection died before any answer:
    /// GET, HEAD, PUT, DELETE and OPTIONS are idempotent (RFC 9110 §9.2.2; TRACE is never
    /// forwarded). POST, PATCH and unknown methods are not, so a request the upstream may already
    /// have processed is never applied twice (nginx's `proxy_next_upstream` rule).
    public var isIdempotent: Bool {
        switch self {
        case .get, .head, .put, .delete, .options: true
        case .post, .patch, .connect, .trace, .other: false
        }
    }

    /// POST, PUT, PATCH, DELETE: a success invalidates what is stored for the target (RFC 9111 §4.4).
    public var isUnsafe: Bool { self == .post || self == .put || self == .patch || self == .delete }
}

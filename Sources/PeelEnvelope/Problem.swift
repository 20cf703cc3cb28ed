/// One error outcome, rendered as an RFC 9457 problem document.
public struct Problem: Sendable, Equatable {
    /// What went wrong.
    public var kind: ProblemKind
    /// HTTP status of the answer to the client.
    public var status: Int
    /// Business code: the upstream's envelope code as it was (number or string), Peel's own negative
    /// code, or nil (`null`) for a failure judged from a body that carried no code.
    public var code: EnvelopeCode?
    /// The upstream's message when it gave one; nil means Peel's own text.
    public var detail: String?
    /// Status the upstream answered with, when one answered.
    public var upstreamStatus: Int?
    /// Peel's own diagnosis for `bad-upstream-format` and `upstream-error` (SPEC): why the answer was
    /// refused, never the upstream's body.
    public var reason: String?
    /// What the upstream said beyond code, message and field errors, byte-exact, for the `upstream`
    /// object: the dialect's extras (`sub_code`, `showType`), or a well-known shape's other members.
    public var upstream: [UpstreamMember]
    /// RFC 9457 `errors`: the upstream's field errors as a finished JSON array, or nil.
    public var errors: [UInt8]?
    /// Field errors left out of `errors` past its bounds (10,000 entries, 1 MiB), said as `errors_omitted`.
    public var errorsOmitted = 0
    /// What a 5xx said that is not shown to the client (its body may hold internals): for the access log only.
    public var privateMessage: String?

    /// Creates a problem; a nil status or code takes the kind's default.
    public init(kind: ProblemKind, status: Int? = nil, code: EnvelopeCode? = nil, detail: String? = nil, upstreamStatus: Int? = nil,
                reason: String? = nil, upstream: [UpstreamMember] = [], errors: [UInt8]? = nil) {
        self.upstream = upstream
        self.errors = errors
        self.reason = reason
        self.kind = kind
        self.status = status ?? kind.defaultStatus
        self.code = code ?? kind.defaultCode
        self.detail = detail
        self.upstreamStatus = upstreamStatus
    }
}

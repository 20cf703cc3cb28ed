/// One error outcome, rendered as an RFC 9457 problem document.
public struct Problem: Sendable, Equatable {
    /// What went wrong.
    public var kind: ProblemKind
    /// HTTP status of the answer to the client.
    public var status: Int
    /// Business code: the upstream's envelope code, or Peel's own negative code.
    public var code: Int64
    /// The upstream's message when it gave one; nil means Peel's own text.
    public var detail: String?
    /// Status the upstream answered with, when one answered.
    public var upstreamStatus: Int?
    /// Peel's own diagnosis for `bad-upstream-format` and `upstream-error` (SPEC): why the answer was
    /// refused, never the upstream's body.
    public var reason: String?

    /// Creates a problem; a nil status or code takes the kind's default.
    public init(kind: ProblemKind, status: Int? = nil, code: Int64? = nil, detail: String? = nil, upstreamStatus: Int? = nil,
                reason: String? = nil) {
        self.reason = reason
        self.kind = kind
        self.status = status ?? kind.defaultStatus
        self.code = code ?? kind.defaultCode
        self.detail = detail
        self.upstreamStatus = upstreamStatus
    }
}

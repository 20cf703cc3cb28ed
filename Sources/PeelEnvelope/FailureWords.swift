/// What a failure body said, read by a dialect or by a well-known shape.
public struct FailureWords: Sendable, Equatable {
    /// The code as the upstream wrote it.
    public var code: EnvelopeCode?
    /// The message the backend meant for the user.
    public var message: String?
    /// RFC 9457 `errors`: the finished JSON array, or nil when there were none.
    public var errors: [UInt8]?
    /// The members kept byte for byte under `upstream`.
    public var upstream: [UpstreamMember]
    /// The shape that read them; nil when the route's dialect did.
    public var shape: FailureShape?
    /// Field errors past the `errors` array's bounds, left out.
    public var errorsOmitted = 0

    /// Creates the words of a failure.
    public init(code: EnvelopeCode? = nil, message: String? = nil, errors: [UInt8]? = nil, upstream: [UpstreamMember] = [],
                shape: FailureShape? = nil) {
        self.code = code
        self.message = message
        self.errors = errors
        self.upstream = upstream
        self.shape = shape
    }
}

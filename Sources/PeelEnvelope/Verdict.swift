/// What the upstream answered, minus the body.
public struct UpstreamAnswer: Sendable {
    /// The upstream's HTTP status.
    public var status: Int
    /// The upstream's Content-Type header, if any.
    public var contentType: String?
    /// The client's request path without the query, matched against `passthroughPaths`.
    public var path: String
    /// Whether the client's request was HEAD.
    public var isHead: Bool
    /// Whether the client's request was OPTIONS: its answer passes unjudged.
    public var isOptions: Bool
    /// The upstream's Content-Disposition header, if any: an `attachment` is a download, passed unjudged.
    public var contentDisposition: String?

    /// Creates an answer description.
    public init(status: Int, contentType: String?, path: String, isHead: Bool, isOptions: Bool = false,
                contentDisposition: String? = nil) {
        self.status = status
        self.contentType = contentType
        self.path = path
        self.isHead = isHead
        self.isOptions = isOptions
        self.contentDisposition = contentDisposition
    }
}

/// How to answer the client, decided from the upstream's answer and body.
public enum Verdict: Sendable, Equatable {
    /// Answer `status` with the body's bytes in `data`; nil → 204 with no body (status is then 204).
    case unwrap(status: Int, data: Range<Int>?)
    /// Answer `status` with these bytes: the rest of the envelope object, each member verbatim
    /// (empty when the judge was asked for the body's ranges instead: `judgeWithCode(restRuns:)`).
    case unwrapRest(status: Int, body: [UInt8])
    /// Send the upstream's status, headers and body as they are.
    case passthrough
    /// Answer with this problem document.
    case problem(Problem)
}

/// How upstream envelopes are recognised and how their codes map to HTTP answers.
public struct EnvelopeConfig: Sendable {
    /// Top-level member holding the business code; default `"code"`.
    public var codeField: String = "code"
    /// Top-level member holding the human-readable message; default `"message"`.
    public var messageField: String = "message"
    /// Top-level member whose raw value is the unwrapped body; default `"data"`.
    public var dataField: String = "data"
    /// Envelope codes meaning success; default `[0]` (the seed's `code == 0`).
    public var successCodes: Set<Int64> = [0]
    /// Envelope codes meaning "token expired"; default `[7]` (the seed logs the user out on 7).
    public var authCodes: Set<Int64> = [7]
    /// Business code → HTTP status override for business errors; default empty.
    public var codeStatus: [Int64: Int] = [:]
    /// HTTP status for business errors without an override; default 422.
    public var businessStatus: Int = 422
    /// Media ranges answered without unwrapping (`type/*` wildcards, case-insensitive, parameters ignored).
    public var passthroughContentTypes: [String] = ["image/*", "audio/*", "video/*", "application/octet-stream", "text/csv",
                                                    "application/pdf", "application/zip", "text/event-stream"]
    /// Request path prefixes answered without unwrapping (plain byte prefix); default none.
    public var passthroughPaths: [String] = []
    /// Prefix of every problem document's `type`; default `"urn:peel:problem:"`.
    public var problemTypeBase: String = "urn:peel:problem:"
    /// Deepest nesting of arrays and objects accepted in an upstream body; default 512 levels.
    public var maxDepth: Int = 512

    /// Creates the default configuration.
    public init() {}
}

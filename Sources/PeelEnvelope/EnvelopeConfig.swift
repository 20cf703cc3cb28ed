/// How upstream envelopes are recognised and how their codes map to HTTP answers.
public struct EnvelopeConfig: Sendable {
    /// How the upstream's envelopes look; default the seed's (`Dialect.peel`).
    public var dialect: Dialect {
        get { compiled.dialect }
        set { compiled = CompiledDialect(newValue) }
    }
    /// The dialect with its name tables and slots, prepared once per configuration, never per call.
    var compiled = CompiledDialect.peel
    /// HTTP status for business errors without an override; default 422.
    public var businessStatus: Int = 422
    /// Media ranges answered without unwrapping (`type/*` wildcards, case-insensitive, parameters ignored).
    public var passthroughContentTypes: [String] {
        get { passthroughRanges.patterns }
        set { passthroughRanges = MediaRanges(newValue) }
    }
    /// The ranges, read once per configuration, never per call.
    var passthroughRanges = MediaRanges(["image/*", "audio/*", "video/*", "application/octet-stream", "text/csv",
                                         "application/pdf", "application/zip", "text/event-stream"])
    /// Request path prefixes answered without unwrapping (plain byte prefix); default none.
    public var passthroughPaths: [String] = []
    /// Prefix of every problem document's `type`; default `"urn:peel:problem:"`.
    public var problemTypeBase: String = "urn:peel:problem:"
    /// Deepest nesting of arrays and objects accepted in an upstream body; default 512 levels.
    public var maxDepth: Int = 512

    /// Creates the default configuration.
    public init() {}
}

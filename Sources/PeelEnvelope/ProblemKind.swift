/// Every way a call can end in an error document; the raw value is the problem's `kind`.
public enum ProblemKind: String, Sendable, CaseIterable {
    /// The envelope code is neither a success nor an auth code.
    case businessError = "business-error"
    /// The envelope code is an auth code: the client's token expired.
    case authExpired = "auth-expired"
    /// The upstream body is not a well-formed envelope.
    case badUpstreamFormat = "bad-upstream-format"
    /// DNS, connection refused or reset, or TLS failure.
    case upstreamUnreachable = "upstream-unreachable"
    /// No whole answer arrived within the timeout.
    case upstreamTimeout = "upstream-timeout"
    /// The reachability checker says the upstream is down.
    case offline
    /// The upstream answered with a non-2xx status.
    case upstreamError = "upstream-error"
    /// The client's request body is over the limit.
    case requestTooLarge = "request-too-large"
    /// The client's request was refused before forwarding.
    case badRequest = "bad-request"
    /// The upstream's body is over the limit.
    case upstreamTooLarge = "upstream-too-large"
    /// Peel holds as many bodies as its memory budget (`max_buffered`) allows; try again shortly.
    case serverBusy = "server-busy"
    /// One client holds its whole share of reachability event streams.
    case tooManyStreams = "too-many-streams"
    /// No route of the configuration applies to the request's Host and path.
    case noRoute = "no-route"

    /// Short, fixed summary of the kind (RFC 9457 §3.1.3 `title`).
    public var title: String {
        switch self {
        case .businessError: "Business error"
        case .authExpired: "Authentication expired"
        case .badUpstreamFormat: "Bad upstream format"
        case .upstreamUnreachable: "Upstream unreachable"
        case .upstreamTimeout: "Upstream timeout"
        case .offline: "Upstream offline"
        case .upstreamError: "Upstream error"
        case .requestTooLarge: "Request too large"
        case .badRequest: "Bad request"
        case .upstreamTooLarge: "Upstream response too large"
        case .serverBusy: "Server busy"
        case .tooManyStreams: "Too many streams"
        case .noRoute: "No route"
        }
    }

    /// HTTP status from SPEC.md's table when nothing more specific applies.
    public var defaultStatus: Int {
        switch self {
        case .businessError: 422
        case .authExpired: 401
        case .badUpstreamFormat: 502
        case .upstreamUnreachable: 502
        case .upstreamTimeout: 504
        case .offline: 503
        case .upstreamError: 502
        case .requestTooLarge: 413
        case .badRequest: 400
        case .upstreamTooLarge: 502
        case .serverBusy: 503
        case .tooManyStreams: 429
        case .noRoute: 404
        }
    }

    /// Peel's own code for the kind; nil (`null`) for the two kinds whose code comes from the upstream.
    public var defaultCode: EnvelopeCode? {
        switch self {
        case .businessError, .authExpired: nil
        // -100 is the seed's "server data structure error"; the rest continue downwards.
        case .badUpstreamFormat: -100
        case .upstreamUnreachable: -101
        case .upstreamTimeout: -102
        case .offline: -103
        case .upstreamError: -104
        case .requestTooLarge: -105
        case .badRequest: -106
        case .upstreamTooLarge: -107
        case .serverBusy: -108
        case .tooManyStreams: -109
        case .noRoute: -110
        }
    }

    /// Peel's own `detail` text for the kind, used when the upstream gave no message.
    public func detail(in language: Language) -> String {
        switch language {
        case .english: englishDetail
        case .chinese: chineseDetail
        }
    }

    private var englishDetail: String {
        switch self {
        case .businessError: "The server could not complete the request"
        case .authExpired: "Your sign-in has expired, please sign in again"
        case .badUpstreamFormat: "The server returned data in an unexpected format"
        case .upstreamUnreachable: "The server could not be reached, please try again later"
        case .upstreamTimeout: "The server did not answer in time, please try again later"
        case .offline: "The network is unavailable, please try again later"
        case .upstreamError: "The server returned an error"
        case .requestTooLarge: "The request is too large"
        case .badRequest: "The request is not valid"
        case .upstreamTooLarge: "The server's response is too large"
        case .serverBusy: "The service is busy, please try again shortly"
        case .tooManyStreams: "Too many reachability streams are open from this client"
        case .noRoute: "Nothing is served at this address"
        }
    }

    private var chineseDetail: String {
        switch self {
        case .businessError: "请求未能完成"
        case .authExpired: "登录已失效，请重新登录"
        // The seed's own wording for a body that is not a JSON object.
        case .badUpstreamFormat: "服务器数据结构错误"
        case .upstreamUnreachable: "无法连接服务器，请稍后再试"
        case .upstreamTimeout: "服务器响应超时，请稍后再试"
        // The seed's toast when the network is unreachable.
        case .offline: "当前网络不可用，请检查网络稍后再试"
        case .upstreamError: "服务器返回错误"
        case .requestTooLarge: "请求内容过大"
        case .badRequest: "请求无效"
        case .upstreamTooLarge: "服务器响应内容过大"
        case .serverBusy: "服务繁忙，请稍后再试"
        case .tooManyStreams: "此客户端打开的连接状态订阅过多"
        case .noRoute: "此地址没有对应的服务"
        }
    }
}

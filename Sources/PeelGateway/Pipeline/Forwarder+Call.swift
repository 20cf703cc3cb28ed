import PeelEnvelope
import PeelIO

extension Forwarder {
    /// Where a call is, from its plan to its end: one value, so no two flags can disagree.
    enum CallState {
        /// Planned; no upstream work yet (or answered without any: offline, refused, preflight).
        case planned
        /// Sent upstream; no head yet.
        case awaitingHead(UpstreamTransfer)
        /// The head came and the body is being buffered whole (to be judged or passed with its length).
        case buffering(UpstreamTransfer)
        /// The answer is streamed to the client as it arrives.
        case streaming(UpstreamTransfer, ReplyStream)
        /// Answered whole and counted.
        case answered
        /// A streamed answer was cut short (upstream failure or shutdown) and counted.
        case cut
        /// The client left before its answer was whole; counted as 499.
        case clientGone

        /// Whether the call is over for the forwarder: counted and logged.
        var isOver: Bool {
            switch self {
            case .answered, .cut, .clientGone: true
            case .planned, .awaitingHead, .buffering, .streaming: false
            }
        }
    }

    /// Per-call state, alive from request to answer.
    final class Call {
        /// Where the call is.
        var state = CallState.planned
        /// Counted and logged: the call is over for the forwarder.
        var done: Bool { state.isOver }
        /// The upstream transfer while one runs.
        var transfer: UpstreamTransfer? {
            switch state {
            case .awaitingHead(let t), .buffering(let t), .streaming(let t, _): t
            case .planned, .answered, .cut, .clientGone: nil
            }
        }
        /// The answer being streamed from the upstream as it arrives, if it is.
        var stream: ReplyStream? {
            if case .streaming(_, let s) = state { return s }
            return nil
        }
        let exchange: HTTPExchange
        /// The configuration generation the call was planned under, for all of its stages.
        /// The route it takes: the generation's fallback until one is chosen, then that one.
        var route: Route
        /// Whether `route` was chosen for it (false while it is the fallback).
        var routed = false
        /// The request as built, kept while another endpoint could take it (failing over).
        var request: UpstreamRequest?
        /// The endpoint of the latest attempt, and its position in the group.
        private(set) var endpoint: EndpointState?
        private(set) var endpointIndex = 0
        /// The rewriting for what this call's live answer names: a bare path is read under the base
        /// path of the endpoint that answered (before an answer, under any endpoint's).
        var rewrite: ProxyRewrite { route.rewrite(answeredBy: upstreamStatus == nil ? nil : endpointIndex) }
        /// Whether the latest attempt still counts in its endpoint's calls in flight.
        private var holdsEndpoint = false
        /// Endpoints tried, a bit per position.
        private(set) var tried: UInt64 = 0
        /// Attempts so far (the access log's `attempts`).
        private(set) var attempts = 0

        /// An attempt starts on `e` (position `i`): it counts in `e`'s calls in flight until it ends.
        func onEndpoint(_ e: EndpointState, at i: Int) {
            leaveEndpoint()
            endpoint = e
            endpointIndex = i
            if i < 64 { tried |= 1 << UInt64(i) }
            attempts += 1
            e.inFlight.add(1, ordering: .relaxed)
            holdsEndpoint = true
        }

        /// The attempt ended (answered, failed or cancelled); once only.
        func leaveEndpoint() {
            guard holdsEndpoint, let e = endpoint else { return }
            holdsEndpoint = false
            e.inFlight.subtract(1, ordering: .relaxed)
        }
        let started: Double
        let requestId: String
        let language: Language
        var path = ""
        var upstreamDuration: Double?
        var upstreamStatus: Int?
        /// Set for GET and HEAD when the offline cache is on.
        var cacheKey: OfflineCacheKey?
        /// What the request asks of caches, with its validators; set with `cacheKey`.
        var cacheRequest = CacheRequest()
        /// Whether the request carried Authorization (RFC 9111 §3.5, when it is not a key field).
        var hasAuthorization = false
        /// This request's user as the cache keys it (any method, while the cache is on): an unsafe
        /// method's success drops that user's entries and the shared ones for its target.
        var userKey: OfflineCacheKey?
        /// The upstream's answer fields, kept for a problem document made from its answer.
        var upstreamHeaders: ResponseHeaders?
        /// The envelope code as the upstream sent it; nil when there was no envelope.
        var upstreamCode: EnvelopeCode?
        /// The request's Origin (CORS).
        var origin: String?
        /// Host, X-Forwarded-Proto and X-Forwarded-Host as sent, for `publicOrigin`.
        var addressFields: (host: String?, proto: String?, forwardedHost: String?) = (nil, nil, nil)
        /// Peel's own origin as the client named it, for rewritten URLs; nil when unknown. Worked out
        /// only for the few answers that carry a URL to rewrite.
        lazy var publicOrigin: String? = ProxyRewrite.publicOrigin(
            host: addressFields.host, forwardedProto: addressFields.proto, forwardedHost: addressFields.forwardedHost)
        /// The request's Accept-Encoding, parsed once.
        var acceptEncoding: AcceptedCodings?
        /// Body bytes streamed so far.
        var streamedBytes = 0
        /// The judge's view of the final head, made once from its facts (`judgedAnswer`).
        var answer: UpstreamAnswer?
        /// `passesUnjudged` as decided when the head arrived (nil when no body byte came).
        var passesUnjudged: Bool?
        /// The upstream's Content-Encoding when its body passes in that coding (the client takes it).
        var keptCoding: String?
        /// Why the answer was refused or cut (Peel's diagnosis), for the access log.
        var reason: String?
        /// The start of a non-envelope upstream body that was refused, escaped, for the access log only.
        var excerpt: String?
        /// A 5xx's message that the client is not shown, for the access log only.
        var privateMessage: String?

        init(exchange: HTTPExchange, route: Route, started: Double, requestId: String, language: Language) {
            self.exchange = exchange
            self.route = route
            self.started = started
            self.requestId = requestId
            self.language = language
        }
    }
}

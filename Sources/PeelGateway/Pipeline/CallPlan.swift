import PeelEnvelope
import PeelIO

/// Everything decided about a call before anything is sent: made once by `CallPlan.make`, never
/// changed afterwards. What changes while the call runs is the `Call`'s. A class: the plan is
/// handed from stage to stage, and copying its twenty members at each hand-over cost more than
/// the whole plan (callgrind).
final class CallPlan {
    let exchange: HTTPExchange
    /// Monotonic seconds when the call's head was taken.
    let started: Double
    let requestId: String
    let language: Language
    /// The request's Origin (CORS).
    let origin: String?
    /// The request's Accept-Encoding, parsed once.
    let acceptEncoding: AcceptedCodings?
    /// The client the call is for: the peer, or the one a trusted proxy names.
    let clientAddress: String
    /// The route the call takes under the generation it was planned in; the generation's fallback
    /// for Peel's own answers and refusals.
    let route: Route
    /// Whether `route` was chosen for the call (false while it is the fallback).
    let routed: Bool
    /// The request path as sent (without the query); empty before the target was read.
    let path: String
    /// Host, X-Forwarded-Proto and X-Forwarded-Host as sent, for `publicOrigin`.
    let host: String?
    let forwardedProto: String?
    let forwardedHost: String?
    /// This request's user as the offline cache keys it (any method, while the cache is on): an
    /// unsafe method's success drops that user's entries and the shared ones for its target.
    let userKey: OfflineCacheKey?
    /// The key a GET or HEAD is looked up and stored under while the cache is on.
    let cacheKey: OfflineCacheKey?
    /// What the request asks of caches, with its validators.
    let cacheRequest: CacheRequest
    /// Whether the request carried Authorization (RFC 9111 §3.5, when it is not a key field).
    let hasAuthorization: Bool

    init(exchange: HTTPExchange, started: Double, requestId: String, language: Language, origin: String?,
         acceptEncoding: AcceptedCodings?, clientAddress: String, route: Route, routed: Bool, path: String, host: String?,
         forwardedProto: String?, forwardedHost: String?, userKey: OfflineCacheKey?,
         cacheKey: OfflineCacheKey?, cacheRequest: CacheRequest, hasAuthorization: Bool) {
        self.exchange = exchange
        self.started = started
        self.requestId = requestId
        self.language = language
        self.origin = origin
        self.acceptEncoding = acceptEncoding
        self.clientAddress = clientAddress
        self.route = route
        self.routed = routed
        self.path = path
        self.host = host
        self.forwardedProto = forwardedProto
        self.forwardedHost = forwardedHost
        self.userKey = userKey
        self.cacheKey = cacheKey
        self.cacheRequest = cacheRequest
        self.hasAuthorization = hasAuthorization
    }

    /// Peel's own origin as the client named it, for rewritten URLs; nil when unknown. Worked out
    /// only for the few answers that carry a URL to rewrite.
    var publicOrigin: String? {
        ProxyRewrite.publicOrigin(host: host, forwardedProto: forwardedProto, forwardedHost: forwardedHost)
    }
}

/// What planning decided: an answer Peel gives without the upstream, or a call to send with the
/// request as it goes upstream (built for the group's first endpoint; an attempt on another
/// retargets it).
enum Planned {
    case early(CallPlan, EarlyAnswer)
    case forward(CallPlan, UpstreamRequest)
    /// An upgrade to tunnel to the route's group; `protocol` is the Upgrade value that goes upstream.
    case tunnel(CallPlan, UpstreamRequest, protocol: String)
}

/// The answers a call gets without the upstream.
enum EarlyAnswer {
    /// The server's parser refused the request (framing, limits, timeouts, Expect).
    case refused(RequestError)
    /// Peel refuses the request itself (400), saying why.
    case badRequest(String)
    /// A CORS preflight Peel answers, with its fields.
    case preflight([(String, String)])
    /// The reachability document, or its event stream.
    case reachability(events: Bool)
    /// No route takes the request.
    case noRoute
    /// The route's group is down: a stored answer or the offline problem.
    case offline
    /// The published contract, on the client listener.
    case contract
    /// An upgrade whose Origin `cors_origins` does not allow (cross-site WebSocket hijacking).
    case forbiddenOrigin
}

extension CallPlan {
    /// Plans one call: a function of the exchange, the generation's `routes` and what the worker
    /// knows of itself (`selfAuthorities`, whether the offline cache is on, the group's health as
    /// read now). `newId` is asked only when the request brings no acceptable X-Request-Id.
    static func make(_ ex: HTTPExchange, started: Double, routes: RouteSet, selfAuthorities: Set<String>, caching: Bool,
                     newId: () -> String) -> Planned {
        // Until a route is chosen (and for Peel's own answers), the generation's fallback.
        let general = routes.fallback
        // Forwarded fields are believed only from a trusted proxy: from anyone else they are
        // dropped, Peel writes its own, and redirects are rewritten from Host alone; a client could
        // otherwise steer rewritten Locations (redirect poisoning behind a shared cache) and forge
        // the chain the upstream sees.
        let peer = ex.peerAddress
        let trusted = IPNetwork.any(general.trustedProxies, contain: peer)
        // Key fields are read for every method while the cache is on (an unsafe method's success
        // invalidates its user's entries); lookups and stores are for GET and HEAD only. Every
        // route's key fields are read: the route is chosen from what these fields say.
        // Read once; the target's reading names its host (an absolute-form target's authority).
        var facts = RequestFacts()
        facts.read(ex, keys: caching ? routes.keyFields : nil, trustingForwarding: trusted)
        let client = trusted ? IPNetwork.realClient(peer: peer, forwardedFor: facts.xForwardedFor, trusted: general.trustedProxies)
                             : ex.clientAddress
        let id = facts.requestId.flatMap { RequestPolicy.acceptableRequestId($0) ? $0 : nil } ?? newId()
        let origin = facts.origin ?? ex.refusedOrigin
        let accepted = facts.acceptEncoding.map { AcceptedCodings($0) }
        let language = Language(acceptLanguage: facts.acceptLanguage)

        /// The plan so far, for an answer without the upstream.
        func early(_ answer: EarlyAnswer, path: String = "", route: Route = general, routed: Bool = false,
                   user: OfflineCacheKey? = nil, key: OfflineCacheKey? = nil) -> Planned {
            .early(CallPlan(exchange: ex, started: started, requestId: id, language: language, origin: origin,
                            acceptEncoding: accepted, clientAddress: client, route: route, routed: routed, path: path,
                            host: facts.host, forwardedProto: facts.xForwardedProto, forwardedHost: facts.xForwardedHost,
                            userKey: user, cacheKey: key, cacheRequest: caching ? facts.cacheRequest : CacheRequest(),
                            hasAuthorization: facts.hasAuthorization), answer)
        }

        if let refusal = ex.refusal { return early(.refused(refusal)) }
        let (decided, path) = RequestPlan.decide(method: ex.method, target: ex.target, http11: ex.version.major == 1 && ex.version.minor >= 1,
                                                 &facts, selfAuthorities: selfAuthorities, managesCORS: general.cors != nil,
                                                 reachabilityPath: general.reachabilityPath, accept: { ex.header(.accept) })
        let target: (path: String, query: String?)
        switch decided {
        case .refuse(let why): return early(.badRequest(why), path: path)
        case .preflight:
            let fields = general.cors?.preflightFields(origin: facts.origin, requestMethod: facts.accessControlRequestMethod,
                                                       requestHeaders: facts.accessControlRequestHeaders) ?? []
            return early(.preflight(fields), path: path)
        case .reachability(let events): return early(.reachability(events: events), path: path)
        case .forward(let p, let q): target = (p, q)
        }
        if let contract = general.contractPath, target.path == contract, ex.methodToken.readsResource {
            return early(.contract, path: path)
        }
        // The route: chosen from Host and path once the request is known to be forwarded (the
        // reachability path was matched above, before any route).
        guard let route = routes.choose(host: facts.host, path: target.path) else { return early(.noRoute, path: path) }
        // Dot-segments must not carry a call out of its route: `/pay/../admin` would take the /pay/
        // route (its group, dialect and keys) to a path its upstream resolves to /admin. nginx
        // matches locations on the resolved path; Peel forwards the path as sent, so it refuses one
        // that resolves under another route.
        if routes.routed, let resolved = RequestPolicy.resolvingDotSegments(target.path),
           routes.choose(host: facts.host, path: resolved) !== route {
            return early(.badRequest("the path's dot-segments leave its route"), path: path)
        }
        guard let upstreamPath = route.upstreamPath(target.path) else {
            return early(.badRequest("the path climbs above the route's prefix once it is stripped"), path: path, route: route, routed: true)
        }

        var userKey: OfflineCacheKey?
        if caching {
            // The Host as forwarded, with a trusted proxy's X-Forwarded-Host beside it: two tenants
            // behind one Peel never share an entry; nor do two groups.
            var tenant = (facts.host?.lowercased() ?? "") + (facts.xForwardedHost.map { " " + $0.lowercased() } ?? "")
            if !route.keyGroup.isEmpty { tenant += " @" + route.keyGroup }
            let user = route.keyPositions.map { positions in positions.map { facts.keyValues[$0] } } ?? facts.keyValues
            userKey = OfflineCacheKey(host: tenant, target: target.path + (target.query.map { "?" + $0 } ?? ""),
                                      acceptLanguage: facts.acceptLanguage, fieldNames: route.keyFields.names, user: user)
        }
        let cacheKey = ex.methodToken.readsResource ? userKey : nil
        let upgrade = Self.upgrade(method: ex.methodToken, http11: ex.version.minor == 1, bodyBytes: ex.bodyCount, facts,
                                   protocols: route.tunnels.protocols, cors: general.cors)
        if upgrade == .forbiddenOrigin { return early(.forbiddenOrigin, path: path, route: route, routed: true) }
        if route.group.isDown { return early(.offline, path: path, route: route, routed: true, user: userKey, key: cacheKey) }

        let request = Forwarder.upstreamRequest(ex, method: ex.method, ex.methodToken, facts, route: route,
                                                endpoint: route.picker.endpoints[0], target: (upstreamPath, target.query),
                                                peer: peer, requestId: id, accepted: accepted, body: .exchange(ex))
        let plan = CallPlan(exchange: ex, started: started, requestId: id, language: language, origin: origin,
                                 acceptEncoding: accepted, clientAddress: client, route: route, routed: true, path: path,
                                 host: facts.host, forwardedProto: facts.xForwardedProto, forwardedHost: facts.xForwardedHost,
                                 userKey: userKey, cacheKey: cacheKey, cacheRequest: caching ? facts.cacheRequest : CacheRequest(),
                                 hasAuthorization: facts.hasAuthorization)
        if case .tunnel(let name) = upgrade { return .tunnel(plan, request, protocol: name) }
        return .forward(plan, request)
    }

    /// What a request asking to upgrade becomes.
    enum Upgrade: Equatable {
        /// Tunneled to the route's group, asking upstream with this Upgrade value: the request's
        /// tokens the route tunnels, as the client sent them (versions included).
        case tunnel(String)
        /// Refused 403: `cors_origins` does not allow its Origin.
        case forbiddenOrigin
    }

    /// Whether a request is an upgrade to tunnel: an HTTP/1.1 GET without a body, with `upgrade`
    /// among Connection's options (RFC 9110 §7.8) and an Upgrade protocol in `protocols` (the
    /// route's). Nil for anything else, answered over HTTP/1.1 with the Upgrade ignored (`h2c`, say).
    static func upgrade(method: MethodToken, http11: Bool, bodyBytes: Int, _ facts: borrowing RequestFacts,
                        protocols: [String], cors: CORSPolicy?) -> Upgrade? {
        guard !facts.upgrade.isEmpty, method == .get, http11, bodyBytes == 0,
              facts.connectionOptions.contains("upgrade") else { return nil }
        // RFC 9110 §7.8: a token is protocol-name ["/" protocol-version]; the route's list names
        // protocols, so a token is matched by its name, and goes upstream as sent (`websocket/13`
        // stays whole). Tokens the route does not tunnel are not offered to the backend: it could
        // switch to one of them.
        let offered = facts.upgrade.filter { protocols.contains(Self.protocolName($0)) }
        guard !offered.isEmpty else { return nil }
        // RFC 6455 §10.2: a browser's WebSocket is not held to CORS; with an allow-list, an Origin it
        // does not name is refused (cross-site WebSocket hijacking). No Origin (a native app) passes;
        // without a list the backend judges.
        if let cors, let origin = facts.origin, !cors.allows(origin) { return .forbiddenOrigin }
        return .tunnel(offered.joined(separator: ", "))
    }

    /// An Upgrade token's protocol-name, lowercased (RFC 9110 §7.8; names compare without case).
    static func protocolName(_ token: String) -> String {
        String(token.lowercased().split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
    }
}

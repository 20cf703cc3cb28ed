import PeelIO

extension Forwarder {
    /// The upstream request for a call, built whole before sending: the client's fields minus
    /// hop-by-hop ones (RFC 9110 §7.6.1), those it names in Connection and those Peel sets, then
    /// Peel's own forwarding fields. `fields` is where the client's fields are read (its exchange).
    /// Pure: the unit tests build requests from fields held as a value.
    static func upstreamRequest(_ fields: any FieldSource, method: String, _ token: MethodToken, _ facts: borrowing RequestFacts,
                                route: Route, endpoint: UpstreamEndpoint, target: (path: String, query: String?), peer: String, requestId: String,
                                accepted: AcceptedCodings?, body: UpstreamBody = .none) -> UpstreamRequest {
        // Options a Connection field names: by token where they have one, by bytes otherwise.
        var namedTokens = FieldSet([])
        var namedOthers: [String] = []
        for option in facts.connectionOptions {
            let t = FieldToken.identify(option)
            if t == .other { namedOthers.append(option) } else { namedTokens.insert(t) }
        }
        var dropped = RequestPolicy.droppedRequestFields.union(namedTokens)
        let droppingNamed = RequestPolicy.droppedByName(trusted: facts.forwardingTrusted, stripping: route.stripsPrefix,
                                                        connectionNamed: namedOthers)
        if !facts.traceOK { dropped = dropped.union(traceFields) }
        // HEAD answers what GET would (status, fields, the unwrapped length): it goes upstream as GET,
        // is judged like one, and the server writes the answer without its body.
        let sent = token == .head ? "GET" : method
        // The hop that connected to Peel is appended; from a trusted proxy the chain it sent is kept
        // before it. Proto and host are always this hop's (http, the Host Peel was sent): absolute
        // URLs the upstream builds from them name its own origin, which Peel rewrites to the public
        // one (a trusted proxy's X-Forwarded-Host/-Proto, see publicOrigin). A family of fields
        // `--forward-fields` leaves out is still written when a trusted proxy sent one of it (the
        // facts hold only a trusted proxy's): what the client sent is carried on, never dropped to
        // save bytes.
        let host = facts.host
        let writesX = route.forwardFields.writesXForwarded
            || facts.xForwardedFor != nil || facts.xForwardedProto != nil || facts.xForwardedHost != nil
        let writesRFC = route.forwardFields.writesForwarded || facts.forwarded != nil
        let forwarding = ForwardingFields(
            forwardedFor: writesX ? facts.xForwardedFor.map { $0 + ", " + peer } ?? peer : nil,
            forwardedProto: writesX ? "http" : nil, forwardedHost: writesX ? host : nil,
            forwarded: writesRFC ? forwardedElement(kept: facts.forwarded, peer: peer, host: host) : nil,
            // nginx's `proxy_set_header Host $host`: curl sends this one instead of the upstream's.
            host: route.preserveHost ? host : nil, requestId: requestId)
        // Codings follow the client: the upstream is asked for what the client accepts and Peel can
        // decode, and for none when the client named none.
        return UpstreamRequest(method: sent, target: .origin(endpoint, path: target.path, query: target.query), body: body,
                               acceptEncoding: CompressionPolicy.upstreamAcceptEncoding(accepted, decodable: UpstreamClient.decodableCodings),
                               relayed: fields, dropping: dropped, droppingNamed: droppingNamed,
                               forwarding: forwarding, limits: route.limits)
    }
}

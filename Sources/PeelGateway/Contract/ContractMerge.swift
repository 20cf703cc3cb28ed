import PeelEnvelope

/// One document for every route: each group's document transformed under each route that leads to
/// the group (its dialect and passthrough paths), its paths moved to where clients call them, and
/// the results merged. A path only routes with a `host` lead to is served for those hosts alone: its
/// path item says so with `servers` (OpenAPI 3.1 §4.8.9: they override the document's) and
/// `x-peel-hosts`. Pure.
enum ContractMerge {
    /// The published document, or nil when no group's document has been read.
    static func published(_ config: GatewayConfig, documents: [String: ConfigJSON]) -> ConfigJSON? {
        guard let routing = config.routing else { return nil }
        var merged: ConfigJSON?
        var paths: [ConfigJSON.Member] = []
        /// Each path's position in `paths`, and the hosts it is served for (nil among them: every host).
        var pathAt: [String: Int] = [:]
        var hosts: [[String?]] = []
        var schemas: [ConfigJSON.Member] = []
        var otherComponents: [ConfigJSON.Member] = []
        for group in routing.upstreams {
            guard let document = documents[group.name] else { continue }
            for route in routing.routes where route.upstream == group.name {
                var envelope = config.envelope
                if let d = route.dialect { envelope.dialect = d }
                if let p = route.passthroughPaths { envelope.passthroughPaths = p }
                var contract = OpenAPIContract(envelope: envelope, reachabilityPath: nil)
                guard var doc = try? contract.transform(document) else { continue }
                doc = renamingCollisions(doc, group: group.name, against: schemas)
                if merged == nil { merged = doc }
                let base = group.endpoints.first?.url.basePath ?? ""
                for item in doc["paths"]?.members ?? [] {
                    guard let path = publicPath(item.name, route: route, basePath: base) else { continue }
                    if let k = pathAt[path] {
                        // The same operations behind another route's host are served there too.
                        if paths[k].value == item.value && !hosts[k].contains(route.host) { hosts[k].append(route.host) }
                        continue
                    }
                    pathAt[path] = paths.count
                    paths.append(.init(name: path, value: item.value))
                    hosts.append([route.host])
                }
                for s in doc["components"]?["schemas"]?.members ?? [] where !schemas.contains(where: { $0.name == s.name }) {
                    schemas.append(s)
                }
                for section in doc["components"]?.members ?? [] where section.name != "schemas" {
                    for entry in section.value.members where !otherComponents.contains(where: { $0.name == section.name + "/" + entry.name }) {
                        otherComponents.append(.init(name: section.name + "/" + entry.name, value: entry.value))
                    }
                }
            }
        }
        guard var doc = merged else { return nil }
        for k in paths.indices {
            paths[k].value = servedFor(paths[k].value, hosts: hosts[k], server: config.contract.server)
        }
        if let reachability = config.reachability.path {
            paths.append(.init(name: reachability, value: OpenAPIContract.reachabilityItem))
        }
        var sections: [ConfigJSON.Member] = [.init(name: "schemas", value: .object(schemas))]
        for entry in otherComponents {
            let parts = entry.name.split(separator: "/", maxSplits: 1).map(String.init)
            if let i = sections.firstIndex(where: { $0.name == parts[0] }) {
                sections[i].value = .object(sections[i].value.members + [.init(name: parts[1], value: entry.value)])
            } else {
                sections.append(.init(name: parts[0], value: .object([.init(name: parts[1], value: entry.value)])))
            }
        }
        doc = doc.setting("paths", .object(paths)).setting("components", .object(sections)).removing("servers")
        if let server = config.contract.server { doc = doc.setting("servers", .array([.obj(["url": .string(server)])])) }
        return doc
    }

    /// Where a client calls the backend's `path` through `route`, or nil when the route does not
    /// lead there: under the endpoint's base path, then behind the route's prefix (put back when
    /// the route strips it).
    static func publicPath(_ path: String, route: RouteRule, basePath: String) -> String? {
        var own = path
        if !basePath.isEmpty {
            guard own == basePath || own.hasPrefix(basePath + "/") else { return nil }
            own = String(own.dropFirst(basePath.count))
            if own.isEmpty { own = "/" }
        }
        if route.stripPrefix {
            let prefix = route.prefix.hasSuffix("/") ? String(route.prefix.dropLast()) : route.prefix
            return prefix + own
        }
        return own.hasPrefix(route.prefix) ? own : nil
    }

    /// A path item as served for `hosts` (nil among them: every host): for hosts alone, `servers`
    /// names each exact one (a wildcard's names cannot be listed) and `x-peel-hosts` every one as
    /// its route writes it; else it has neither. The upstream's own `servers` name the upstream,
    /// where clients do not call.
    static func servedFor(_ item: ConfigJSON, hosts: [String?], server: String?) -> ConfigJSON {
        let item = item.removing("servers").removing("x-peel-hosts")
        let named = hosts.compactMap { $0 }
        guard named.count == hosts.count else { return item }
        let exact = named.filter { !$0.hasPrefix("*.") }
        var out = item
        if !exact.isEmpty { out = out.setting("servers", .array(exact.map { .obj(["url": .string(serverURL(host: $0, configured: server))]) })) }
        return out.setting("x-peel-hosts", .array(named.map { .string($0) }))
    }

    /// Where clients call `host`: the configured server with the host swapped (its scheme, port and
    /// path kept), else a network-path reference (`//host`, RFC 3986 §4.2) read against the URL the
    /// document was fetched from, so under its scheme.
    static func serverURL(host: String, configured: String?) -> String {
        guard let configured, let scheme = configured.range(of: "://") else { return "//" + host }
        let rest = configured[scheme.upperBound...]
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        var port = ""
        if let colon = authority.lastIndex(of: ":"), !authority[colon...].contains("]") { port = String(authority[colon...]) }
        return configured[..<scheme.upperBound] + host + port + rest[authorityEnd...]
    }

    /// `doc` with each schema whose name another group already took for a different schema renamed
    /// `GROUP.NAME`, references included.
    static func renamingCollisions(_ doc: ConfigJSON, group: String, against taken: [ConfigJSON.Member]) -> ConfigJSON {
        var renamed: [String: String] = [:]
        var out: [ConfigJSON.Member] = []
        for s in doc["components"]?["schemas"]?.members ?? [] {
            if let other = taken.first(where: { $0.name == s.name }), other.value != s.value {
                let name = ComponentNames.cleaned(group) + "." + s.name
                renamed["#/components/schemas/" + s.name] = "#/components/schemas/" + name
                out.append(.init(name: name, value: s.value))
            } else {
                out.append(s)
            }
        }
        guard !renamed.isEmpty, let components = doc["components"] else { return doc }
        let doc = doc.setting("components", components.setting("schemas", .object(out)))
        return ComponentNames.rewritingRefs(doc) { renamed[$0] ?? $0 }
    }
}

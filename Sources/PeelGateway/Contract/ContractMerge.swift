import PeelEnvelope

/// One document for every route: each group's document transformed under each route that leads to
/// the group (its dialect and passthrough paths), its paths moved to where clients call them, and
/// the results merged. A path is described as the route that takes it serves it (as `RouteTable`
/// chooses: the longest prefix, then the most specific host), for a client whose Host no route
/// names when a route without a host takes it. A path only routes with a `host` take is served for
/// those hosts alone: its path item says so with `servers` (OpenAPI 3.1 §4.8.9: they override the
/// document's) and `x-peel-hosts`. Where hosts' routes serve one path differently (another dialect),
/// the other ways are under the path item's `x-peel-host-variants`, each marked so. Pure.
enum ContractMerge {
    /// The published document, or nil when no group's document has been read.
    static func published(_ config: GatewayConfig, documents: [String: ConfigJSON]) -> ConfigJSON? {
        guard let routing = config.routing else { return nil }
        var merged: ConfigJSON?
        /// Each path, where it was first met, and each way it is served with the hosts served so
        /// (nil among them: every host no route names).
        var order: [String] = []
        var variants: [String: [(item: ConfigJSON, hosts: [String?])]] = [:]
        var schemas: [ConfigJSON.Member] = []
        var otherComponents: [ConfigJSON.Member] = []
        for group in routing.upstreams {
            guard let document = documents[group.name] else { continue }
            for (index, route) in routing.routes.enumerated() where route.upstream == group.name {
                var envelope = config.envelope
                if let d = route.dialect { envelope.dialect = d }
                if let p = route.passthroughPaths { envelope.passthroughPaths = p }
                var contract = OpenAPIContract(envelope: envelope, reachabilityPath: nil)
                guard var doc = try? contract.transform(document) else { continue }
                doc = renamingCollisions(doc, group: group.name, against: schemas)
                if merged == nil { merged = doc }
                let base = group.endpoints.first?.url.basePath ?? ""
                for item in doc["paths"]?.members ?? [] {
                    guard let path = publicPath(item.name, route: route, basePath: base),
                          takes(routing.routes, index, path: path) else { continue }
                    guard var ways = variants[path] else {
                        order.append(path)
                        variants[path] = [(item: item.value, hosts: [route.host])]
                        continue
                    }
                    if let k = ways.firstIndex(where: { $0.item == item.value }) {
                        if !ways[k].hosts.contains(route.host) { ways[k].hosts.append(route.host) }
                    } else {
                        ways.append((item: item.value, hosts: [route.host]))
                    }
                    variants[path] = ways
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
        var paths: [ConfigJSON.Member] = order.map { path in
            var ways = variants[path] ?? []
            let main = ways.remove(at: ways.firstIndex { $0.hosts.contains(nil) } ?? 0)
            var item = servedFor(main.item, hosts: main.hosts, server: config.contract.server)
            if !ways.isEmpty {
                item = item.setting("x-peel-host-variants", .array(ways.map { servedFor($0.item, hosts: $0.hosts, server: config.contract.server) }))
            }
            return .init(name: path, value: item)
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

    /// Whether `routes[index]` takes a request for `path` for some of its hosts: no route tried
    /// before it (a longer prefix, or the same with a more specific host, or listed first) takes
    /// every host it names there.
    static func takes(_ routes: [RouteRule], _ index: Int, path: String) -> Bool {
        let route = routes[index]
        let own = RouteTable<Int>.HostMatch(route.host)
        let length = route.prefix.utf8.count
        for (j, other) in routes.enumerated() where j != index && path.utf8.starts(with: other.prefix.utf8) {
            let theirs = RouteTable<Int>.HostMatch(other.host)
            let otherLength = other.prefix.utf8.count
            let before = otherLength != length ? otherLength > length : (theirs.rank != own.rank ? theirs.rank > own.rank : j < index)
            if before && theirs.covers(own) { return false }
        }
        return true
    }

    /// A path item as served for `hosts` (nil among them: every host): for hosts alone, `servers`
    /// names each exact one (a wildcard's names cannot be listed) and `x-peel-hosts` every one as
    /// its route writes it; else it has neither. The upstream's own `servers` name the upstream,
    /// where clients do not call.
    static func servedFor(_ item: ConfigJSON, hosts: [String?], server: String?) -> ConfigJSON {
        let item = item.removing("servers").removing("x-peel-hosts").removing("x-peel-host-variants")
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

extension RouteTable.HostMatch {
    /// Whether every host `other` matches, this matches too.
    func covers(_ other: Self) -> Bool {
        switch (self, other) {
        case (.any, _): true
        case (_, .any): false
        case (.exact(let a), .exact(let b)): a == b
        case (.exact, .wildcard): false
        case (.wildcard, .exact(let name)): matches(name[...])
        case (.wildcard(let s), .wildcard(let t)): t.count >= s.count && t.suffix(s.count).elementsEqual(s)
        }
    }
}

import PeelEnvelope

/// One document for every route: each group's document transformed under each route that leads to
/// the group (its dialect and passthrough paths), its paths moved to where clients call them, and
/// the results merged. Pure.
enum ContractMerge {
    /// The published document, or nil when no group's document has been read.
    static func published(_ config: GatewayConfig, documents: [String: ConfigJSON]) -> ConfigJSON? {
        guard let routing = config.routing else { return nil }
        var merged: ConfigJSON?
        var paths: [ConfigJSON.Member] = []
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
                    guard let path = publicPath(item.name, route: route, basePath: base),
                          !paths.contains(where: { $0.name == path }) else { continue }
                    paths.append(.init(name: path, value: item.value))
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

/// A Swagger 2.0 document (springfox's `/v2/api-docs`) read as OpenAPI 3.0: definitions become
/// component schemas, body and form parameters request bodies, response schemas content by the
/// operation's `produces`, and `host`/`basePath`/`schemes` the servers.
enum SwaggerUpgrade {
    static func upgrade(_ doc: ConfigJSON) -> ConfigJSON {
        let consumes = strings(doc["consumes"]) ?? ["application/json"]
        let produces = strings(doc["produces"]) ?? ["application/json"]
        var out: [ConfigJSON.Member] = [.init(name: "openapi", value: .string("3.0.3"))]
        for key in ["info", "tags", "externalDocs", "security"] { if let v = doc[key] { out.append(.init(name: key, value: v)) } }
        if let host = doc["host"]?.string {
            let scheme = strings(doc["schemes"])?.first ?? "https"
            out.append(.init(name: "servers", value: .array([.obj(["url": .string("\(scheme)://\(host)\(doc["basePath"]?.string ?? "")")])])))
        } else if let base = doc["basePath"]?.string, base != "/" {
            out.append(.init(name: "servers", value: .array([.obj(["url": .string(base)])])))
        }
        var paths: [ConfigJSON.Member] = []
        for item in doc["paths"]?.members ?? [] {
            var members: [ConfigJSON.Member] = []
            for m in item.value.members {
                switch m.name {
                case "parameters": members.append(.init(name: m.name, value: .array(parameterList(m.value).compactMap(parameter))))
                case "get", "put", "post", "delete", "options", "head", "patch":
                    members.append(.init(name: m.name, value: operation(m.value, consumes: consumes, produces: produces)))
                default: members.append(m)
                }
            }
            paths.append(.init(name: item.name, value: .object(members)))
        }
        out.append(.init(name: "paths", value: .object(paths)))
        var components: [ConfigJSON.Member] = []
        if let d = doc["definitions"] { components.append(.init(name: "schemas", value: d)) }
        if let p = doc["parameters"] {
            components.append(.init(name: "parameters", value: .object(p.members.compactMap { m in
                parameter(m.value).map { .init(name: m.name, value: $0) }
            })))
        }
        if let r = doc["responses"] {
            components.append(.init(name: "responses", value: .object(r.members.map { .init(name: $0.name, value: response($0.value, produces: produces)) })))
        }
        if let s = doc["securityDefinitions"] {
            components.append(.init(name: "securitySchemes", value: .object(s.members.map { .init(name: $0.name, value: securityScheme($0.value)) })))
        }
        if !components.isEmpty { out.append(.init(name: "components", value: .object(components))) }
        return ComponentNames.rewritingRefs(.object(out)) { ref in
            for (old, new) in [("#/definitions/", "#/components/schemas/"), ("#/parameters/", "#/components/parameters/"),
                               ("#/responses/", "#/components/responses/")] where ref.hasPrefix(old) {
                return new + ref.dropFirst(old.count)
            }
            return ref
        }
    }

    private static func strings(_ v: ConfigJSON?) -> [String]? {
        guard case .array(let items)? = v else { return nil }
        let s = items.compactMap(\.string)
        return s.isEmpty ? nil : s
    }

    private static func parameterList(_ v: ConfigJSON) -> [ConfigJSON] {
        if case .array(let items) = v { return items }
        return []
    }

    /// Keywords a 2.0 parameter or header carries that belong to its schema in 3.0.
    private static let schemaKeys: Set<String> = ["type", "format", "items", "enum", "default", "maximum", "minimum",
                                                  "exclusiveMaximum", "exclusiveMinimum", "maxLength", "minLength",
                                                  "pattern", "maxItems", "minItems", "uniqueItems", "multipleOf"]

    /// A non-body parameter in 3.0's form; nil for body and form parameters (they become a request body).
    private static func parameter(_ p: ConfigJSON) -> ConfigJSON? {
        if p["$ref"] != nil { return p }
        let location = p["in"]?.string
        if location == "body" || location == "formData" { return nil }
        var members: [ConfigJSON.Member] = []
        var schema: [ConfigJSON.Member] = []
        for m in p.members {
            if schemaKeys.contains(m.name) { schema.append(m) } else if m.name != "collectionFormat" && m.name != "allowEmptyValue" { members.append(m) }
        }
        if !schema.isEmpty { members.append(.init(name: "schema", value: .object(schema))) }
        return .object(members)
    }

    private static func operation(_ op: ConfigJSON, consumes: [String], produces: [String]) -> ConfigJSON {
        let consumes = strings(op["consumes"]) ?? consumes
        let produces = strings(op["produces"]) ?? produces
        var members: [ConfigJSON.Member] = []
        var body: ConfigJSON?
        var form: [ConfigJSON.Member] = []
        var formRequired: [ConfigJSON] = []
        for m in op.members {
            switch m.name {
            case "consumes", "produces", "schemes": continue
            case "parameters":
                var kept: [ConfigJSON] = []
                for p in parameterList(m.value) {
                    switch p["in"]?.string {
                    case "body":
                        var request: [ConfigJSON.Member] = [.init(name: "content", value: .object(consumes.map {
                            .init(name: $0, value: .obj(["schema": p["schema"] ?? .object([])]))
                        }))]
                        if let d = p["description"] { request.insert(.init(name: "description", value: d), at: 0) }
                        if case .bool(true)? = p["required"] { request.append(.init(name: "required", value: .bool(true))) }
                        body = .object(request)
                    case "formData":
                        let name = p["name"]?.string ?? "field"
                        var schema = p.members.filter { schemaKeys.contains($0.name) }
                        if p["type"]?.string == "file" { schema = [.init(name: "type", value: .string("string")), .init(name: "format", value: .string("binary"))] }
                        form.append(.init(name: name, value: .object(schema)))
                        if case .bool(true)? = p["required"] { formRequired.append(.string(name)) }
                    default:
                        if let converted = parameter(p) { kept.append(converted) }
                    }
                }
                if !kept.isEmpty { members.append(.init(name: "parameters", value: .array(kept))) }
            case "responses":
                members.append(.init(name: "responses", value: .object(m.value.members.map {
                    .init(name: $0.name, value: response($0.value, produces: produces))
                })))
            default:
                members.append(m)
            }
        }
        if body == nil && !form.isEmpty {
            let type = consumes.first { $0.contains("multipart") } ?? "application/x-www-form-urlencoded"
            var schema: [ConfigJSON.Member] = [.init(name: "type", value: .string("object")), .init(name: "properties", value: .object(form))]
            if !formRequired.isEmpty { schema.append(.init(name: "required", value: .array(formRequired))) }
            body = .obj(["content": .obj([type: .obj(["schema": .object(schema)])])])
        }
        if let body { members.append(.init(name: "requestBody", value: body)) }
        return .object(members)
    }

    private static func response(_ r: ConfigJSON, produces: [String]) -> ConfigJSON {
        if r["$ref"] != nil { return r }
        var members: [ConfigJSON.Member] = [.init(name: "description", value: r["description"] ?? .string(""))]
        if let headers = r["headers"] {
            members.append(.init(name: "headers", value: .object(headers.members.map { h in
                var header = h.value.members.filter { !schemaKeys.contains($0.name) }
                let schema = h.value.members.filter { schemaKeys.contains($0.name) }
                if !schema.isEmpty { header.append(.init(name: "schema", value: .object(schema))) }
                return .init(name: h.name, value: .object(header))
            })))
        }
        if let schema = r["schema"] {
            let examples = r["examples"]
            members.append(.init(name: "content", value: .object(produces.map { type in
                var media: [ConfigJSON.Member] = [.init(name: "schema", value: schema)]
                if let example = examples?[type] { media.append(.init(name: "example", value: example)) }
                return .init(name: type, value: .object(media))
            })))
        }
        return .object(members)
    }

    private static func securityScheme(_ s: ConfigJSON) -> ConfigJSON {
        switch s["type"]?.string {
        case "basic":
            return .obj(["type": .string("http"), "scheme": .string("basic")])
        case "oauth2":
            let flowName: String
            switch s["flow"]?.string {
            case "implicit": flowName = "implicit"
            case "password": flowName = "password"
            case "application": flowName = "clientCredentials"
            default: flowName = "authorizationCode"
            }
            var flow: [ConfigJSON.Member] = []
            for key in ["authorizationUrl", "tokenUrl"] { if let v = s[key] { flow.append(.init(name: key, value: v)) } }
            flow.append(.init(name: "scopes", value: s["scopes"] ?? .object([])))
            return .obj(["type": .string("oauth2"), "flows": .object([.init(name: flowName, value: .object(flow))])])
        default:
            return s
        }
    }
}

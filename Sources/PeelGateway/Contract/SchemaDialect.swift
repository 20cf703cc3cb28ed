/// OpenAPI 3.0's schema spellings in 3.1's (JSON Schema 2020-12), so a 3.0 document can be
/// written out as 3.1.0: `nullable` becomes a `null` type, boolean exclusive bounds become numbers.
enum SchemaDialect {
    static func upgrade30(_ doc: ConfigJSON) -> ConfigJSON {
        var out = doc
        if let components = doc["components"], let schemas = components["schemas"] {
            out = out.setting("components", components.setting("schemas", .object(schemas.members.map {
                .init(name: $0.name, value: schema($0.value))
            })))
        }
        if let paths = doc["paths"] { out = out.setting("paths", walk(paths)) }
        return out
    }

    /// Every `schema` member below `value` upgraded.
    private static func walk(_ value: ConfigJSON) -> ConfigJSON {
        switch value {
        case .object(let members):
            return .object(members.map { m in
                .init(name: m.name, value: m.name == "schema" ? schema(m.value) : walk(m.value))
            })
        case .array(let items): return .array(items.map(walk))
        default: return value
        }
    }

    /// One schema and the schemas inside it.
    static func schema(_ value: ConfigJSON) -> ConfigJSON {
        guard case .object(var members) = value else { return value }
        let nested: Set<String> = ["items", "additionalProperties", "not"]
        let lists: Set<String> = ["allOf", "anyOf", "oneOf"]
        members = members.map { m in
            if nested.contains(m.name) { return .init(name: m.name, value: schema(m.value)) }
            if lists.contains(m.name), case .array(let items) = m.value { return .init(name: m.name, value: .array(items.map(schema))) }
            if m.name == "properties" { return .init(name: m.name, value: .object(m.value.members.map { .init(name: $0.name, value: schema($0.value)) })) }
            return m
        }
        var out = ConfigJSON.object(members)
        if case .bool(let nullable)? = out["nullable"] {
            out = out.removing("nullable")
            if nullable {
                if case .string(let type)? = out["type"] {
                    out = out.setting("type", .array([.string(type), .string("null")]))
                } else if out["$ref"] != nil || out["allOf"] != nil {
                    out = .obj(["anyOf": .array([out, .obj(["type": .string("null")])])])
                }
            }
        }
        for (flag, bound) in [("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")] {
            if case .bool(let on)? = out[flag] {
                out = out.removing(flag)
                if on, let limit = out[bound] { out = out.removing(bound).setting(flag, limit) }
            }
        }
        return out
    }
}

import PeelEnvelope

/// The document of what Peel answers, made from the upstream's OpenAPI 3.0 or 3.1 document: each
/// 2xx envelope declared as its payload, the upstream's failures and Peel's own as one `Problem`
/// (RFC 9457), always as OpenAPI 3.1.0. Pure: a document in, a document and a report out.
struct OpenAPIContract {
    let envelope: EnvelopeConfig
    /// Peel's reachability path, declared beside the upstream's operations; nil when it is off.
    let reachabilityPath: String?
    /// Names of the upstream's schemas, cleaned (`CommonResult«UserVO»` → `CommonResult_UserVO`).
    private var schemas: [String: ConfigJSON] = [:]
    /// What could not be unwrapped, and why: one line per operation.
    private(set) var report: [String] = []
    private var problemName = "Problem"
    /// Set by `success` when the payload may be absent: the operation may answer 204 too.
    private var emptyAnswer = false

    /// Why a document could not be read at all.
    struct Refusal: Error, CustomStringConvertible {
        let description: String
    }

    init(envelope: EnvelopeConfig, reachabilityPath: String?) {
        self.envelope = envelope
        self.reachabilityPath = reachabilityPath
    }

    /// The methods whose operations are rewritten: HEAD is left as it is, and Peel passes OPTIONS
    /// answers through unjudged.
    static let methods = ["get", "put", "post", "delete", "patch", "trace"]

    /// Transforms `document`; the report lists each operation that kept its envelope, and why.
    mutating func transform(_ document: ConfigJSON) throws(Refusal) -> ConfigJSON {
        guard case .object = document else { throw Refusal(description: "the document is not a JSON object") }
        var doc = document
        if let swagger = doc["swagger"]?.string {
            guard swagger.hasPrefix("2.") else { throw Refusal(description: "swagger \(swagger) is not Swagger 2.0") }
            doc = SwaggerUpgrade.upgrade(doc)
        }
        guard let version = doc["openapi"]?.string, version.hasPrefix("3.0") || version.hasPrefix("3.1") else {
            throw Refusal(description: "the document names neither \"openapi\": \"3.x\" nor \"swagger\": \"2.0\"")
        }
        let from30 = version.hasPrefix("3.0")
        doc = ComponentNames.clean(doc)
        schemas = [:]
        for m in doc["components"]?["schemas"]?.members ?? [] { schemas[m.name] = m.value }
        memo.shapes = [:]
        if schemas[problemName] != nil { problemName = "PeelProblem" }

        var paths: [ConfigJSON.Member] = []
        for item in doc["paths"]?.members ?? [] {
            var pathItem = item.value
            for method in Self.methods {
                guard let op = pathItem[method] else { continue }
                pathItem = pathItem.setting(method, operation(op, path: item.name, method: method))
            }
            paths.append(.init(name: item.name, value: pathItem))
        }
        if let reachability = reachabilityPath {
            paths.append(.init(name: reachability, value: Self.reachabilityItem))
        }
        doc = doc.setting("paths", .object(paths)).setting("openapi", .string("3.1.0"))
        var components = doc["components"] ?? .object([])
        var schemaMembers = components["schemas"]?.members ?? []
        schemaMembers.append(.init(name: problemName, value: ProblemContract.schema))
        components = components.setting("schemas", .object(schemaMembers))
        doc = doc.setting("components", components)
        doc = ComponentNames.pruned(doc)
        if from30 { doc = SchemaDialect.upgrade30(doc) }
        return doc
    }

    /// How many of the document's operations answer a 2xx in this dialect's envelope, of those that
    /// declare a 2xx schema at all: `peel openapi --detect`.
    mutating func envelopeMatches(_ document: ConfigJSON) throws(Refusal) -> (matched: Int, operations: Int) {
        var doc = document
        if doc["swagger"]?.string?.hasPrefix("2.") == true { doc = SwaggerUpgrade.upgrade(doc) }
        guard doc["openapi"]?.string?.hasPrefix("3.") == true else {
            throw Refusal(description: "the document names neither \"openapi\": \"3.x\" nor \"swagger\": \"2.0\"")
        }
        doc = ComponentNames.clean(doc)
        schemas = [:]
        for m in doc["components"]?["schemas"]?.members ?? [] { schemas[m.name] = m.value }
        memo.shapes = [:]
        var matched = 0
        var operations = 0
        for item in doc["paths"]?.members ?? [] {
            for method in Self.methods {
                guard let op = item.value[method] else { continue }
                let schemas = (op["responses"]?.members ?? []).filter { $0.name.hasPrefix("2") }
                    .flatMap { ($0.value["content"]?.members ?? []).compactMap { $0.value["schema"] } }
                guard !schemas.isEmpty else { continue }
                operations += 1
                if schemas.contains(where: { if case .payload = payload(of: $0) { true } else if case .empty = payload(of: $0) { true } else { false } }) {
                    matched += 1
                }
            }
        }
        return (matched, operations)
    }

    /// One operation: its 2xx answers unwrapped, its failures and Peel's declared as problems.
    private mutating func operation(_ op: ConfigJSON, path: String, method: String) -> ConfigJSON {
        let passthrough = envelope.passthroughPaths.contains { path.hasPrefix($0) }
        var responses: [ConfigJSON.Member] = []
        var defer204 = false
        for r in op["responses"]?.members ?? [] {
            let status = r.name
            // 1xx and 3xx pass as they came (a redirect keeps its Location); only failures become problems.
            if status.hasPrefix("1") || status.hasPrefix("3") {
                responses.append(r)
                continue
            }
            if status.hasPrefix("2") || passthrough {
                guard !passthrough else {
                    responses.append(r)
                    continue
                }
                emptyAnswer = false
                let unwrapped = success(r.value, status: status, at: "\(method.uppercased()) \(path)")
                if emptyAnswer && !(op["responses"]?.members.contains { $0.name == "204" } ?? false)
                    && !responses.contains(where: { $0.name == "204" }) {
                    emptyAnswer = false
                    defer204 = true
                }
                // A bare envelope answers 204 (no content).
                let empty = r.value["content"] != nil && unwrapped["content"] == nil
                let name = empty && !(op["responses"]?.members.contains { $0.name == "204" } ?? false) ? "204" : status
                responses.append(.init(name: name, value: unwrapped))
            } else {
                let description = r.value["description"]?.string ?? "The upstream refused the request."
                responses.append(.init(name: status, value: ProblemContract.response(description, schemaName: problemName)))
            }
        }
        if defer204 {
            responses.append(.init(name: "204", value: .obj(["description": .string("The envelope carried no payload.")])))
        }
        for (status, description, headers) in ProblemContract.peelResponses(envelope: envelope, passthrough: passthrough)
        where !responses.contains(where: { $0.name == status }) {
            responses.append(.init(name: status, value: ProblemContract.response(description, schemaName: problemName, headers: headers)))
        }
        if !passthrough && !responses.contains(where: { $0.name == "default" }) {
            responses.append(.init(name: "default", value: ProblemContract.response("Any other failure, as a problem document.",
                                                                                     schemaName: problemName)))
        }
        return op.setting("responses", .object(responses))
    }

    /// A 2xx response: the envelope's payload, or as it was (marked, and reported) when the schema
    /// says too little to unwrap.
    private mutating func success(_ response: ConfigJSON, status: String, at where_: String) -> ConfigJSON {
        guard let content = response["content"], !content.members.isEmpty else { return response }
        let dialect = envelope.dialect
        // A dialect without code or flag (`rest`) answers 2xx bodies as they are.
        guard !dialect.codes.isEmpty || dialect.success.path != nil else { return response }
        var unwrapped: [ConfigJSON.Member] = []
        var empty = false
        var mayBeEmpty = false
        for media in content.members {
            // A media type Peel passes through (`passthrough_content_types`) is answered as it came.
            guard media.name.contains("json") || media.name == "*/*",
                  !Self.passesThrough(media.name, envelope.passthroughContentTypes) else {
                unwrapped.append(media)
                continue
            }
            guard let schema = media.value["schema"] else {
                unwrapped.append(media)
                continue
            }
            switch payload(of: schema) {
            case .payload(let p, let optional):
                if optional { mayBeEmpty = true }
                var value = media.value.setting("schema", optional ? .obj(["anyOf": .array([p, .obj(["type": .string("null")])])]) : p)
                value = Self.unwrappingExamples(value, dialect: dialect)
                unwrapped.append(.init(name: "application/json", value: value))
            case .empty:
                empty = true
            case .untyped(let why):
                report.append("\(where_) \(status): \(why)")
                unwrapped.append(.init(name: media.name, value: media.value.setting("x-peel-unwrap", .string("untyped"))))
            case .notEnvelope:
                report.append("\(where_) \(status): the schema is not the \(dialect.preset) envelope; declared as the upstream wrote it")
                unwrapped.append(media)
            }
        }
        if empty && unwrapped.isEmpty { return response.removing("content") }
        var seen: Set<String> = []
        emptyAnswer = mayBeEmpty
        return response.setting("content", .object(unwrapped.filter { seen.insert($0.name).inserted }))
    }

    private enum Unwrapped {
        /// The payload's schema; `optional` when the envelope may come without it (null, or absent:
        /// Peel answers `null` or 204).
        case payload(ConfigJSON, optional: Bool = false)
        case empty
        case untyped(String)
        case notEnvelope
    }

    /// What a 2xx schema's payload is under the dialect.
    private func payload(of schema: ConfigJSON) -> Unwrapped {
        guard let shape = shape(schema, depth: 0) else { return .notEnvelope }
        if shape.properties.isEmpty { return .untyped("the schema is an untyped map (no properties): Peel cannot tell what it unwraps to") }
        let dialect = envelope.dialect
        let names = Set(shape.properties.map(\.name))
        for code in dialect.codes where !names.contains(code.head) { return .notEnvelope }
        if let member = dialect.success.path, !names.contains(member.head) { return .notEnvelope }
        if !dialect.messages.isEmpty && !dialect.messages.contains(where: { names.contains($0.head) }) { return .notEnvelope }
        let roles = Set(dialect.roleHeadsForContract)
        switch dialect.payload {
        case .member(let path) where dialect.siblings == .drop && names.contains(path.head):
            guard let member = member(path, in: shape) else { return .untyped("the payload `\(path)` is not declared member by member") }
            if Self.isBareObject(member) { return .untyped("the payload `\(path)` is declared as a bare object") }
            // springdoc never lists `data` as required: a yudao `getUser` answers `data: null` for
            // a user that is not there.
            let required = path.steps.count == 1 && shape.required.contains(path.head)
            return .payload(member, optional: !required)
        case .pattern:
            return .untyped("the \(dialect.preset) envelope's payload member is named by a pattern")
        case .member, .rest:
            let rest = shape.properties.filter { !roles.contains($0.name) }
            if rest.isEmpty { return .empty }
            var object: [ConfigJSON.Member] = [.init(name: "type", value: .string("object")),
                                               .init(name: "properties", value: .object(rest))]
            let required = shape.required.filter { name in rest.contains { $0.name == name } }
            if !required.isEmpty { object.append(.init(name: "required", value: .array(required.map { .string($0) }))) }
            return .payload(.object(object))
        }
    }

    /// An object schema's declared members, through local `$ref`s and `allOf`.
    private struct Shape {
        var properties: [ConfigJSON.Member] = []
        var required: [String] = []
    }

    /// Each named schema's shape once worked out, and the names being worked out now: a schema
    /// that refers to itself (`A: {allOf: [A, A]}`) has no shape instead of an endless one, and
    /// one referred to a thousand times is read once.
    private final class ShapeMemo {
        var shapes: [String: Shape?] = [:]
        var visiting: Set<String> = []
    }

    private let memo = ShapeMemo()

    private func shape(_ schema: ConfigJSON, depth: Int) -> Shape? {
        guard depth < 64 else { return nil }
        if let ref = schema["$ref"]?.string {
            if let known = memo.shapes[ref] { return known }
            guard !memo.visiting.contains(ref), let target = resolve(ref) else { return nil }
            memo.visiting.insert(ref)
            let s = shape(target, depth: depth + 1)
            memo.visiting.remove(ref)
            memo.shapes[ref] = s
            return s
        }
        var out = Shape()
        var found = false
        if case .array(let parts)? = schema["allOf"] {
            for part in parts {
                guard let s = shape(part, depth: depth + 1) else { continue }
                found = true
                for p in s.properties where !out.properties.contains(where: { $0.name == p.name }) { out.properties.append(p) }
                out.required += s.required
            }
        }
        if let properties = schema["properties"] {
            found = true
            for p in properties.members where !out.properties.contains(where: { $0.name == p.name }) { out.properties.append(p) }
        }
        if case .array(let required)? = schema["required"] { out.required += required.compactMap(\.string) }
        if !found && schema["type"]?.string != "object" && schema["additionalProperties"] == nil { return nil }
        return out
    }

    /// The schema of the payload at `path` (a dotted path walks into nested objects).
    private func member(_ path: MemberPath, in shape: Shape) -> ConfigJSON? {
        var current = shape
        for (i, step) in path.steps.enumerated() {
            guard let value = current.properties.first(where: { $0.name == step })?.value else { return nil }
            if i == path.steps.count - 1 { return value }
            guard let next = self.shape(value, depth: 0) else { return nil }
            current = next
        }
        return nil
    }

    private func resolve(_ ref: String) -> ConfigJSON? {
        let prefix = "#/components/schemas/"
        guard ref.hasPrefix(prefix) else { return nil }
        return schemas[ComponentNames.unescape(String(ref.dropFirst(prefix.count)))]
    }

    /// Whether a media type is among the patterns Peel passes through (`image/*`, `text/csv`).
    static func passesThrough(_ media: String, _ patterns: [String]) -> Bool {
        let type = media.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        return patterns.contains { p in
            let p = p.lowercased()
            return p.hasSuffix("/*") ? type.hasPrefix(String(p.dropLast())) : type == p
        }
    }

    /// `{"type": "object"}` and `{}` alone: a payload that says nothing of its members.
    private static func isBareObject(_ schema: ConfigJSON) -> Bool {
        let names = Set(schema.members.map(\.name)).subtracting(["description", "title", "type", "example"])
        return names.isEmpty && (schema["type"]?.string ?? "object") == "object"
    }

    /// A media type's `example` and `examples` values unwrapped as the answers are.
    private static func unwrappingExamples(_ media: ConfigJSON, dialect: Dialect) -> ConfigJSON {
        guard case .member(let path) = dialect.payload, dialect.siblings == .drop else { return media }
        func unwrap(_ v: ConfigJSON) -> ConfigJSON {
            var current = v
            for step in path.steps {
                guard let next = current[step] else { return v }
                current = next
            }
            return current
        }
        var out = media
        if let example = media["example"] { out = out.setting("example", unwrap(example)) }
        if let examples = media["examples"] {
            out = out.setting("examples", .object(examples.members.map { m in
                guard let value = m.value["value"] else { return m }
                return .init(name: m.name, value: m.value.setting("value", unwrap(value)))
            }))
        }
        return out
    }

    /// One state as the reachability document writes it (`reachabilityMembers`).
    private static let stateSchema: [(String, ConfigJSON)] = [
        ("state", .obj(["type": .string("string"), "enum": .array(["unknown", "reachable", "unreachable"].map { .string($0) })])),
        ("since", .obj(["type": .string("string"), "format": .string("date-time")])),
        ("reason", .obj(["type": .array([.string("string"), .string("null")])])),
    ]

    /// Peel's reachability path: the document (the overall state, and each group's under
    /// `upstreams`), or with `Accept: text/event-stream` a stream of it.
    static let reachabilityItem: ConfigJSON = {
        let group = ConfigJSON.object([.init(name: "type", value: .string("object")),
                                       .init(name: "required", value: .array(stateSchema.map { .string($0.0) })),
                                       .init(name: "properties", value: .object(stateSchema.map { .init(name: $0.0, value: $0.1) }))])
        let document = ConfigJSON.object([
            .init(name: "type", value: .string("object")),
            .init(name: "required", value: .array((stateSchema.map(\.0) + ["upstreams"]).map { .string($0) })),
            .init(name: "properties", value: .object(stateSchema.map { .init(name: $0.0, value: $0.1) }
                + [.init(name: "upstreams", value: .obj(["type": .string("object"), "additionalProperties": group]))])),
        ])
        return .obj([
            "get": .obj([
                "summary": .string("Whether Peel can reach its upstreams"),
                "operationId": .string("peelReachability"),
                "responses": .obj([
                    "200": .obj([
                        "description": .string("The reachability document, or with Accept: text/event-stream a stream of it."),
                        "content": .obj([
                            "application/json": .obj(["schema": document]),
                            "text/event-stream": .obj(["schema": .obj(["type": .string("string")])]),
                        ]),
                    ]),
                ]),
            ]),
        ])
    }()
}

extension Dialect {
    /// The envelope's own top-level members, which a rest-of-object payload leaves out.
    var roleHeadsForContract: [String] {
        var heads = codes.map(\.head) + messages.map(\.head)
        if let m = success.path { heads.append(m.head) }
        if let authFlag { heads.append(authFlag.head) }
        return heads + ignore
    }
}

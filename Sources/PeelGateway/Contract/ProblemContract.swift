import PeelEnvelope

/// Peel's problem documents as OpenAPI declares them: the one schema every problem answer follows
/// (exactly the members `renderProblem` writes, RFC 9457 §3) and the problem responses each
/// operation can get from Peel itself.
enum ProblemContract {
    /// The `Problem` schema.
    static let schema: ConfigJSON = .obj([
        "type": .string("object"),
        "description": .string("An RFC 9457 problem document, as Peel answers every failure."),
        "required": .array(["type", "title", "status", "detail", "code", "kind", "request_id"].map { .string($0) }),
        "properties": .obj([
            "type": .obj(["type": .string("string"), "description": .string("The problem type: the problem type base and the kind.")]),
            "title": .obj(["type": .string("string")]),
            "status": .obj(["type": .string("integer")]),
            "detail": .obj(["type": .string("string"), "description": .string("What the app shows the user: the upstream's message when it gave one.")]),
            "code": .obj(["type": .array([.string("integer"), .string("string"), .string("null")]),
                          "description": .string("The upstream's business code, or Peel's own negative code.")]),
            "kind": .obj(["type": .string("string"), "enum": .array(ProblemKind.allCases.map { .string($0.rawValue) })]),
            "request_id": .obj(["type": .string("string")]),
            "upstream_status": .obj(["type": .string("integer"), "description": .string("The upstream's HTTP status, when it answered.")]),
            "reason": .obj(["type": .string("string")]),
            "errors": .obj([
                "type": .string("array"),
                "description": .string("Field errors (RFC 9457 §3): each with its message and the JSON pointer or parameter it is about."),
                "items": .obj([
                    "type": .string("object"),
                    "properties": .obj([
                        "detail": .obj(["type": .string("string")]),
                        "pointer": .obj(["type": .string("string")]),
                        "parameter": .obj(["type": .string("string")]),
                        "header": .obj(["type": .string("string")]),
                    ]),
                ]),
            ]),
            "errors_omitted": .obj(["type": .string("integer"), "minimum": .number("1")]),
            "upstream": .obj(["type": .string("object"), "description": .string("What the upstream said beyond its code and message.")]),
        ]),
    ])

    /// A problem response with `description`, pointing at the schema named `name`.
    static func response(_ description: String, schemaName: String, headers: [(String, String)] = []) -> ConfigJSON {
        var members: [ConfigJSON.Member] = [.init(name: "description", value: .string(description))]
        if !headers.isEmpty {
            members.append(.init(name: "headers", value: .object(headers.map { name, text in
                .init(name: name, value: .obj(["description": .string(text), "schema": .obj(["type": .string("string")])]))
            })))
        }
        members.append(.init(name: "content", value: .obj([
            "application/problem+json": .obj(["schema": .obj(["$ref": .string("#/components/schemas/" + schemaName)])]),
        ])))
        return .object(members)
    }

    /// The problems Peel may answer on an operation, by status: its own refusals and the
    /// upstream's failures as the dialect maps them; a passthrough operation gets only what Peel
    /// says when the upstream does not answer.
    static func peelResponses(envelope: EnvelopeConfig, passthrough: Bool) -> [(String, String, [(String, String)])] {
        let offline = ("503", "Offline, or Peel is busy: the upstream is unreachable (a stored answer may come instead).",
                       [("Retry-After", "Seconds to wait before trying again.")])
        let unreachable = ("502", "The upstream could not be reached or answered badly.", [(String, String)]())
        let timeout = ("504", "The upstream did not answer in time.", [(String, String)]())
        if passthrough { return [unreachable, offline, timeout] }
        var out: [(String, String, [(String, String)])] = [
            ("400", "Peel refused the request (malformed, or a path it does not forward).", []),
            ("401", "The token expired or was refused: sign in again.",
             [("WWW-Authenticate", "The challenge (RFC 9110 §11.6.1).")]),
            ("413", "The request body is over Peel's limit.", []),
        ]
        var statuses = Set(envelope.dialect.codeStatus.entries.values)
        statuses.insert(envelope.businessStatus)
        for status in statuses.sorted() where !out.contains(where: { $0.0 == String(status) }) && ![502, 503, 504].contains(status) {
            out.append((String(status), "The upstream refused the request: its message and field errors.", []))
        }
        out += [unreachable, offline, timeout]
        return out
    }
}

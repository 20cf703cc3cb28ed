import PeelEnvelope
import XCTest

/// The one-pass judge against the tree-building reference, on generated envelopes under every preset.
final class DialectReferenceTests: XCTestCase {
    func testGeneratedEnvelopes_agreeWithTheReference_underEveryPreset() {
        var generator = EnvelopeGenerator(seed: 25)
        var disagreements: [String] = []
        var judged = 0
        var outcomes: [String: Int] = [:]
        for _ in 0..<800 {
            let random = generator.envelope()
            for dialect in Dialect.presets + Self.custom {
                let body = generator.next(4) == 0 ? random : generator.envelope(for: dialect)
                var config = EnvelopeConfig()
                config.dialect = dialect
                for status in [200, 404, 500] {
                    judged += 1
                    switch DialectReference(bytes: body, dialect: dialect, config: config).expectation(status: status) {
                    case .members: outcomes["members", default: 0] += 1
                    case .verdict(.unwrap(204, nil)): outcomes["204", default: 0] += 1
                    case .verdict(.unwrap): outcomes["unwrap", default: 0] += 1
                    case .verdict(.problem(let p)): outcomes[p.kind.rawValue, default: 0] += 1
                    default: outcomes["other", default: 0] += 1
                    }
                    if let d = DialectReference(bytes: body, dialect: dialect, config: config).disagreement(status: status) {
                        disagreements.append(String(decoding: body, as: UTF8.self) + " — " + d)
                    }
                }
            }
        }
        XCTAssertEqual(judged, 800 * (Dialect.presets.count + Self.custom.count) * 3)
        // The generator must reach every outcome, or agreement would prove little.
        for (outcome, n) in outcomes.sorted(by: { $0.key < $1.key }) { print("dialect reference: \(outcome) \(n)") }
        for outcome in ["members", "unwrap", "204", "business-error", "auth-expired", "bad-upstream-format", "upstream-error"] {
            XCTAssertGreaterThan(outcomes[outcome] ?? 0, 20, outcome)
        }
        XCTAssertEqual(disagreements.count, 0, disagreements.prefix(5).joined(separator: "\n"))
    }

    /// Failure bodies in every well-known shape, envelopes and 2xx bodies for the status rule, at
    /// 200, 401, 404, 422 and 500, under every preset and the custom dialects: the judge must give
    /// exactly the problem the reference builds from the tree (kind, status, code, detail, upstream
    /// members, field errors byte for byte, the 5xx's private message).
    func testFailureBodies_agreeWithTheReference_underEveryDialect() {
        var generator = EnvelopeGenerator(seed: 33)
        var disagreements: [String] = []
        var seen: [String: Int] = [:]
        let dialects = DialectReference.allDialects
        let rounds = 700
        for _ in 0..<rounds {
            let (made, failureBody, problemType) = generator.failureBody()
            for dialect in dialects {
                var body = failureBody
                var type: String? = problemType ? "application/problem+json" : "application/json"
                switch generator.next(8) {
                case 0: body = generator.envelope(for: dialect)
                case 1: body = generator.statusRuleBody()
                case 2: type = nil
                default: break
                }
                var config = EnvelopeConfig()
                config.dialect = dialect
                for status in [200, 401, 404, 422, 500] {
                    let reference = DialectReference(bytes: body, dialect: dialect, config: config, contentType: type)
                    let (expected, shape) = reference.explain(status: status)
                    if let shape { seen["shape " + shape, default: 0] += 1 }
                    if body == failureBody { seen["generated " + made, default: 0] += 1 }
                    switch expected {
                    case .members: seen["outcome members", default: 0] += 1
                    case .verdict(.passthrough): seen["outcome passthrough", default: 0] += 1
                    case .verdict(.unwrap(204, nil)): seen["outcome 204", default: 0] += 1
                    case .verdict(.unwrap(_, let r?)) where r.count == body.count || r.count == body.count - 3:
                        seen["outcome whole body", default: 0] += 1
                    case .verdict(.unwrap): seen["outcome unwrap", default: 0] += 1
                    case .verdict(.problem(let p)):
                        seen["outcome " + p.kind.rawValue, default: 0] += 1
                        if p.privateMessage != nil { seen["feature private 5xx message", default: 0] += 1 }
                        if p.detail != nil && p.kind == .upstreamError { seen["feature upstream detail", default: 0] += 1 }
                        if !p.upstream.isEmpty && shape != nil { seen["feature upstream members", default: 0] += 1 }
                        if case .string? = p.code, shape != nil { seen["feature string code", default: 0] += 1 }
                        if let e = p.errors {
                            let text = String(decoding: e, as: UTF8.self)
                            seen["feature errors", default: 0] += 1
                            if text.contains("\"pointer\":\"#/") { seen["feature pointer", default: 0] += 1 }
                            if text.contains("%") { seen["feature percent-encoded pointer", default: 0] += 1 }
                            if text.contains("~0") || text.contains("~1") { seen["feature escaped pointer", default: 0] += 1 }
                            if text.contains("\"parameter\":") { seen["feature parameter", default: 0] += 1 }
                            if text.contains("\"}") && !text.contains("pointer") && !text.contains("parameter") {
                                seen["feature errors without a place", default: 0] += 1
                            }
                            if dialect.fieldErrors != nil && shape == nil { seen["feature dialect field errors", default: 0] += 1 }
                        }
                    default: seen["outcome other", default: 0] += 1
                    }
                    if let d = reference.disagreement(status: status) {
                        disagreements.append(String(decoding: body, as: UTF8.self) + " (\(type ?? "no type")) — " + d)
                    }
                }
            }
        }
        for (what, n) in seen.sorted(by: { $0.key < $1.key }) { print("failure reference: \(what) \(n)") }
        // Agreement proves something only where the generator went: every shape, outcome and feature, often.
        for shape in ["problem", "error-object", "oauth", "spring", "kratos", "flask", "fastapi", "laravel", "nestjs", "errors-array",
                      "drf", "message", "error"] {
            XCTAssertGreaterThan(seen["shape " + shape] ?? 0, 100, shape)
        }
        for outcome in ["members", "unwrap", "whole body", "204", "passthrough", "business-error", "auth-expired", "bad-upstream-format",
                        "upstream-error"] {
            XCTAssertGreaterThan(seen["outcome " + outcome] ?? 0, 20, outcome)
        }
        for feature in ["private 5xx message", "upstream detail", "upstream members", "string code", "errors", "pointer",
                        "percent-encoded pointer", "escaped pointer", "parameter", "errors without a place", "dialect field errors"] {
            XCTAssertGreaterThan(seen["feature " + feature] ?? 0, 20, feature)
        }
        XCTAssertEqual(disagreements.count, 0, disagreements.prefix(40).joined(separator: "\n"))
    }

    /// Dialects no preset has: array-index paths (GraphQL), several code members (PayPal), a prefix
    /// auth code and an auth flag on one dialect, and extras beside a rest-of-object payload.
    static let custom: [Dialect] = {
        let graphQL = Dialect(preset: "peel", code: "errors.0.extensions.code", success: .errorMember("errors"),
                              authCodes: CodeSet(["UNAUTH*"]), messages: ["errors.0.message", "errors.1.message"], payload: .member("data"))
        var paypal = Dialect(preset: "peel", code: "name", success: .codeOrAbsent, authCodes: CodeSet(["invalid_token", "AUTH*"]),
                             messages: ["message", "error_description"], payload: .rest, ignore: ["links"], extras: ["debug_id", "details"])
        paypal.codes = ["name", "error"]
        let flagged = Dialect(preset: "peel", code: "code", success: .code, successCodes: CodeSet([0]), authCodes: CodeSet(["A0*", 7]),
                              messages: ["msg"], payload: .member("data"), siblings: .keep, extras: ["trace"], authFlag: "meta.unauth")
        return [graphQL, paypal, flagged]
    }()

    func testCustomDialects_areValid() {
        for d in Self.custom { XCTAssertNil(d.problem(), "\(d)") }
    }

    func testTheReferenceSeesWhatTheIssueDescribes() {
        // The reference is a test of the judge only if it can tell outcomes apart: one sample each.
        var c = EnvelopeConfig()
        c.dialect = .ruoyi
        let login = Array(#"{"msg":"ok","code":200,"token":"t"}"#.utf8)
        XCTAssertEqual(DialectReference(bytes: login, dialect: .ruoyi, config: c).expectation(status: 200),
                       .members(status: 200, [#"token="t""#]))
        let error = Array(#"{"msg":"no","code":500}"#.utf8)
        guard case .verdict(.problem(let p)) = DialectReference(bytes: error, dialect: .ruoyi, config: c).expectation(status: 200) else {
            return XCTFail()
        }
        XCTAssertEqual(p.kind, .businessError)
    }
}

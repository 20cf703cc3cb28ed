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

import PeelEnvelope
import XCTest

/// Dialect edge cases the contract promises: null codes, error members that say nothing, dotted
/// success members, payload paths whose last step is absent.
final class DialectEdgeTests: XCTestCase {
    private func verdict(_ body: String, _ dialect: Dialect, status: Int = 200) -> (Verdict, [UInt8]) {
        var c = EnvelopeConfig()
        c.dialect = dialect
        let bytes = Array(body.utf8)
        return (judge(UpstreamAnswer(status: status, contentType: "application/json", path: "/", isHead: false), body: bytes, config: c),
                bytes)
    }

    /// The bytes a success sends, or a description of what Peel answered instead.
    private func sent(_ body: String, _ dialect: Dialect) -> String {
        let (v, bytes) = verdict(body, dialect)
        switch v {
        case .unwrap(200, let r?): return String(decoding: bytes[r], as: UTF8.self)
        case .unwrapRest(200, let b): return String(decoding: b, as: UTF8.self)
        case .problem(let p): return "problem \(p.status) \(p.kind.rawValue): \(p.reason ?? "")"
        default: return "\(v)"
        }
    }

    // Finding 2: a code member that is `null` is read as malformed (502), not as absent. Java
    // backends serialise unset fields as null (Jackson's default), so an Ant Design Pro success
    // `{"success":true,"data":…,"errorCode":null,"errorMessage":null}` fails every call, although
    // under a flag or status predicate the code only reports a failure and the message members
    // right beside it already treat null as absent (README: "`null` counts as absent").
    func testnullCodeMember_isAbsentNotMalformed() {
        XCTAssertEqual(sent(#"{"success":true,"data":{"name":"Serati Ma"},"errorCode":null,"errorMessage":null,"showType":null}"#, .antd),
                       #"{"name":"Serati Ma"}"#)
        XCTAssertEqual(sent(#"{"status":"success","data":{"id":1},"code":null,"message":null}"#, .jsend), #"{"id":1}"#)
        let (v, _) = verdict(#"{"success":false,"errorCode":null,"errorMessage":"Insufficient permissions"}"#, .antd)
        guard case .problem(let p) = v else { return XCTFail("\(v)") }
        XCTAssertEqual(p.kind, .businessError, "a failure whose code is null is a business error with code null")
        XCTAssertNil(p.code)
    }

    // Finding 3: the error-member predicate. README and SuccessRule: an error member that is
    // `null`, `false`, `""`, `{}` or `[]` is no error. Only `null` and `{}` work: `false`, `""` and
    // `[]` are bad-upstream-format 502 ("error is not an object"), because the code path
    // `error.code` is read, and refused, before the predicate runs.
    func testerrorObject_falseEmptyStringAndEmptyArrayAreNoError() {
        XCTAssertEqual(sent(#"{"error":false,"data":{"id":1}}"#, .errorObject), #"{"id":1}"#)
        XCTAssertEqual(sent(#"{"error":"","data":{"id":1}}"#, .errorObject), #"{"id":1}"#)
        XCTAssertEqual(sent(#"{"error":[],"data":{"id":1}}"#, .errorObject), #"{"id":1}"#)
    }

    // Finding 3 (b): the issue: "an error member is present and neither null nor empty … failure,
    // with error.code (a scalar) as the code and error.message as the message". An error member
    // that is a plain string (`{"error":"invalid_token"}`, the OAuth 2 / many REST APIs' shape) is
    // present and not empty, so it is a business error (with code null), not a 502.
    // (DialectTests.testErrorObject_googleStripeStrapi asserts the opposite.)
    func testerrorObject_aStringErrorIsAFailure() {
        let (v, _) = verdict(#"{"error":"invalid_token"}"#, .errorObject)
        guard case .problem(let p) = v else { return XCTFail("\(v)") }
        XCTAssertEqual(p.kind, .businessError, p.reason ?? "")
        XCTAssertNil(p.code)
    }

    // Finding 1 (b): a success member with a dot was matched as one top-level name, then read as a
    // path, and could never succeed. It is a dotted path like every other member the dialect names.
    func testflagNameWithADot_isReadAsAPath() {
        var d = Dialect.peel
        d.success = .flag("meta.ok")
        d.successCodes = CodeSet()
        XCTAssertNil(d.problem())
        XCTAssertEqual(sent(#"{"meta":{"ok":true},"code":0,"data":1}"#, d), "1")
        XCTAssertEqual(sent(#"{"meta":{"ok":false},"code":5,"data":1}"#, d), "problem 422 business-error: ")
    }

    // Finding 1: a flag/status/error member name with an empty dotted step (`ok.`, `.ok`, `a..b`)
    // passes Dialect.problem() (and so config loading), and the first judged answer then traps in
    // MemberPath(stringLiteral:)'s force unwrap (Envelope.swift:275/284/295 → Dialect.swift:16),
    // killing the gateway. This test does not judge (it would crash the test process): it holds
    // problem() to refusing such a dialect.
    func testsuccessMemberNameThatIsNotAPath_isRefused() {
        // A success member is a MemberPath now: a name with an empty step cannot be made at all.
        for name in ["ok.", ".status", "error..x", ""] {
            XCTAssertNil(MemberPath(dotted: name), name)
        }
    }

    // Lesser: "Nothing is dropped without a rule" (issue 25 §4, SPEC). With a dotted payload path
    // whose head is present but whose last step is absent, the head's whole value is dropped and
    // the answer is 204: `{"code":0,"result":{"y":1}}` under payload `result.data` sends nothing.
    func testdottedPayloadWithAnAbsentLastStep_dropsNothing() {
        var d = Dialect.peel
        d.payload = .member("result.data")
        let (v, _) = verdict(#"{"code":0,"message":"ok","result":{"y":1}}"#, d)
        XCTAssertNotEqual(v, .unwrap(status: 204, data: nil), "the result member's bytes are dropped without a rule")
    }
}

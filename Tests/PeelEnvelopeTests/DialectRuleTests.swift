import PeelEnvelope
import XCTest

/// The dialect rules of issue 33: array indices in member paths, several code members, auth codes
/// by prefix, extras that only copy, `*Response` matching `Response`, duplicate members named, the
/// auth flag, and the settings refused because they can never take effect.
final class DialectRuleTests: XCTestCase {
    private func judged(_ body: String, _ dialect: Dialect, status: Int = 200) -> (Verdict, String?) {
        var c = EnvelopeConfig()
        c.dialect = dialect
        let bytes = Array(body.utf8)
        let v = judge(UpstreamAnswer(status: status, contentType: "application/json", path: "/x", isHead: false), body: bytes, config: c)
        switch v {
        case .unwrap(_, let r?): return (v, String(decoding: bytes[r], as: UTF8.self))
        case .unwrapRest(_, let b): return (v, String(decoding: b, as: UTF8.self))
        default: return (v, nil)
        }
    }

    private func sent(_ body: String, _ dialect: Dialect, status: Int = 200) -> String? { judged(body, dialect, status: status).1 }

    private func problem(_ body: String, _ dialect: Dialect, status: Int = 200, file: StaticString = #filePath,
                         line: UInt = #line) -> Problem? {
        guard case .problem(let p) = judged(body, dialect, status: status).0 else {
            XCTFail("not a problem", file: file, line: line)
            return nil
        }
        return p
    }

    // MARK: array indices

    /// GraphQL over HTTP: failure when `errors` says something, code and message in its first element.
    private var graphQL: Dialect {
        Dialect(preset: "peel", code: "errors.0.extensions.code", success: .errorMember("errors"),
                messages: ["errors.0.message"], payload: .member("data"))
    }

    func testArrayIndex_readsCodeAndMessageFromTheFirstError() {
        let body = #"{"errors":[{"message":"Cannot query field \"nme\" on type \"User\". Did you mean \"name\"?","locations":[{"line":1,"column":9}],"extensions":{"code":"GRAPHQL_VALIDATION_FAILED"}}]}"#
        let p = problem(body, graphQL)
        XCTAssertEqual(p?.kind, .businessError)
        XCTAssertEqual(p?.code, "GRAPHQL_VALIDATION_FAILED")
        XCTAssertEqual(p?.detail, #"Cannot query field "nme" on type "User". Did you mean "name"?"#)
    }

    func testArrayIndex_secondElementAndWhitespace() {
        var d = graphQL
        d.messages = ["errors.1.message"]
        let p = problem("{\"errors\": [ {\"message\": \"first\"} ,\n  {\"message\" : \"second\"} ]}", d)
        XCTAssertEqual(p?.detail, "second")
    }

    func testArrayIndex_pastTheEndOrIntoANonArray_isAbsent() {
        var d = graphQL
        d.messages = ["errors.1.message", "errors.0.message"]
        XCTAssertEqual(problem(#"{"errors":[{"message":"only one"}]}"#, d)?.detail, "only one", "index 1 past the end is absent")
        let p = problem(#"{"errors":{"message":"not a list","extensions":{"code":"X"}}}"#, graphQL)
        XCTAssertEqual(p?.kind, .businessError)
        XCTAssertNil(p?.detail, "an index into an object is absent")
        XCTAssertNil(p?.code)
        XCTAssertNil(problem(#"{"errors":[1]}"#, graphQL)?.code, "a step into a number is absent")
    }

    func testArrayIndex_successIsTheDataWhenErrorsAreEmpty() {
        XCTAssertEqual(sent(#"{"errors":[],"data":{"user":{"name":"Ada"}}}"#, graphQL), #"{"user":{"name":"Ada"}}"#)
    }

    func testArrayIndex_inThePayloadPath() {
        var d = Dialect.peel
        d.payload = .member("data.0")
        XCTAssertEqual(sent(#"{"code":0,"data":[{"id":1},{"id":2}]}"#, d), #"{"id":1}"#)
        guard case .problem(let p) = judged(#"{"code":0,"data":{"0":1}}"#, d).0 else { return XCTFail("an object is not an array") }
        XCTAssertEqual(p.kind, .badUpstreamFormat)
        XCTAssertEqual(p.reason, "data is not an array")
    }

    func testMemberPath_refusesBracketsSignsAndLeadingZeros() {
        XCTAssertEqual(MemberPath(dotted: "errors.0.extensions.code")?.index(1), 0)
        XCTAssertNil(MemberPath(dotted: "errors.0.extensions.code")?.index(2))
        XCTAssertEqual(MemberPath(dotted: "0.a")?.index(0), nil, "a head is a member name")
        XCTAssertEqual(MemberPath(dotted: "a.12")?.index(1), 12)
        for bad in ["errors[0].code", "errors.[0]", "errors.01.code", "errors.-1", "errors.+1", "errors.99999999999"] {
            XCTAssertNil(MemberPath(dotted: bad), bad)
            XCTAssertNotNil(MemberPath.refusal(bad), bad)
        }
        XCTAssertTrue(MemberPath.refusal("errors.01")?.contains("leading zero") ?? false)
        XCTAssertTrue(MemberPath.refusal("errors[0]")?.contains("brackets") ?? false)
        XCTAssertTrue(MemberPath.refusal("errors.-1")?.contains("sign") ?? false)
        XCTAssertNil(MemberPath.refusal("-1.x-y.+z"), "a name may start with a sign")
    }
}

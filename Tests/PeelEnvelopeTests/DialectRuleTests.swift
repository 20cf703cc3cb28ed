import PeelEnvelope
import XCTest

/// The dialect rules of issue 33: array indices in member paths, several code members, auth codes
/// by prefix, extras that only copy, `*Response` matching `Response`, duplicate members named, the
/// auth flag, and the settings refused because they can never take effect.
final class DialectRuleTests: XCTestCase {
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

    // MARK: several code members

    /// PayPal: REST errors name themselves in `name`, its OAuth endpoint in `error` (RFC 6749 §5.2).
    private var paypal: Dialect {
        var d = Dialect(preset: "peel", code: "name", success: .codeOrAbsent, messages: ["message", "error_description"],
                        payload: .rest, extras: ["debug_id", "details"])
        d.codes = ["name", "error"]
        return d
    }

    func testCodeList_restErrorReadsName() {
        let body = #"{"name":"UNPROCESSABLE_ENTITY","details":[{"field":"/purchase_units/@reference_id=='default'/amount/value","value":"-1","location":"body","issue":"CANNOT_BE_NEGATIVE","description":"Must be greater than or equal to zero."}],"message":"The requested action could not be performed, semantically incorrect, or failed business validation.","debug_id":"b6b9a374802ea"}"#
        let p = problem(body, paypal, status: 422)
        XCTAssertEqual(p?.code, "UNPROCESSABLE_ENTITY")
        XCTAssertEqual(p?.detail, "The requested action could not be performed, semantically incorrect, or failed business validation.")
        XCTAssertEqual(p?.upstream.map(\.name), ["debug_id", "details"])
    }

    func testCodeList_oauthErrorReadsTheSecondMember() {
        let p = problem(#"{"error":"invalid_client","error_description":"Client Authentication failed"}"#, paypal, status: 401)
        XCTAssertEqual(p?.code, "invalid_client")
        XCTAssertEqual(p?.detail, "Client Authentication failed")
    }

    func testCodeList_firstPresentWins_nullIsAbsent() {
        XCTAssertEqual(problem(#"{"error":"invalid_token","name":"AUTHENTICATION_FAILURE"}"#, paypal)?.code, "AUTHENTICATION_FAILURE")
        XCTAssertEqual(problem(#"{"name":null,"error":"invalid_token"}"#, paypal)?.code, "invalid_token")
        // A success has neither: the whole object is the answer, both members cut if they were there.
        XCTAssertEqual(sent(#"{"scope":"openid","access_token":"A21AAF","token_type":"Bearer","expires_in":32400}"#, paypal),
                       #"{"scope":"openid","access_token":"A21AAF","token_type":"Bearer","expires_in":32400}"#)
    }

    func testCodeList_missingUnderTheCodeRuleNamesEveryMember() {
        var d = paypal
        d.success = .code
        d.successCodes = CodeSet(["OK"])
        guard case .problem(let p) = judged(#"{"message":"x"}"#, d).0 else { return XCTFail() }
        XCTAssertEqual(p.reason, "name or error missing")
    }

    func testCodeList_aMemberNamedTwiceIsRefused() {
        var d = paypal
        d.codes = ["name", "name"]
        XCTAssertNotNil(d.problem())
    }

    // MARK: auth codes by prefix

    func testCodeSetPrefix_matchesStringCodesThatStartWithIt() {
        let set = CodeSet(["AuthFailure.*", 401])
        XCTAssertEqual(set.prefixes, ["AuthFailure."])
        XCTAssertTrue(set.contains("AuthFailure.SignatureExpire"))
        XCTAssertTrue(set.contains("AuthFailure."), "the prefix itself is a code that starts with it")
        XCTAssertFalse(set.contains("AuthFailure"), "without the dot it does not start with AuthFailure.")
        XCTAssertFalse(set.contains("authfailure.SignatureExpire"), "names compare by code units")
        XCTAssertFalse(set.contains("InvalidParameter.AuthFailure.X"))
        XCTAssertTrue(set.contains(401))
        XCTAssertTrue(set.contains("401"))
        XCTAssertEqual(set.json, #"[401,"AuthFailure.*"]"#, "written back as it was read")
        XCTAssertFalse(set.isEmpty)
        XCTAssertFalse(CodeSet(["A*"]).isEmpty)
    }

    func testCodeSetPrefix_overlapIsFoundWhereverAnUpstreamCodeMatchesBoth() {
        let auth = CodeSet(["AuthFailure.*"])
        XCTAssertFalse(auth.isDisjoint(with: CodeSet(["AuthFailure.TokenFailure"])))
        XCTAssertFalse(CodeSet(["AuthFailure.TokenFailure"]).isDisjoint(with: auth), "either side")
        XCTAssertFalse(auth.isDisjoint(with: CodeSet(["Auth*"])), "a shorter prefix covers the longer")
        XCTAssertFalse(CodeSet(["4*"]).isDisjoint(with: CodeSet([401])), "an upstream \"401\" matches both")
        XCTAssertFalse(CodeSet([-1]).isDisjoint(with: CodeSet(["-*"])))
        XCTAssertTrue(auth.isDisjoint(with: CodeSet(["Auth", "InvalidParameter.AuthFailure.X", 0])))
        XCTAssertTrue(auth.isDisjoint(with: CodeSet(["AuthFailureX*"])))
    }

    func testAuthPrefix_failureWhoseCodeStartsWithItIsAuthExpired() {
        var d = Dialect(preset: "peel", code: "code", success: .code, successCodes: CodeSet([0]), authCodes: CodeSet(["AuthFailure.*"]),
                        messages: ["message"], payload: .member("data"))
        d.codeStatus = CodeStatusMap(["InvalidParameter": 400])
        XCTAssertEqual(problem(#"{"code":"AuthFailure.SignatureExpire","message":"签名过期"}"#, d)?.kind, .authExpired)
        XCTAssertEqual(problem(#"{"code":"InvalidParameter","message":"x"}"#, d)?.kind, .businessError)
    }

    // MARK: extras copy, ignore removes

    func testExtras_stayInASuccessRestAnswer_andOnlyIgnoreRemoves() {
        let d = Dialect(preset: "peel", code: "error", success: .flag("ok"), messages: [], payload: .rest,
                        ignore: ["warning"], extras: ["response_metadata", "warning"])
        let list = #"{"ok":true,"channels":[{"id":"C012AB3CD","name":"general"}],"response_metadata":{"next_cursor":"dGVhbTpDMDYxRkE1UEI="},"warning":"superfluous_charset"}"#
        XCTAssertEqual(sent(list, d), #"{"channels":[{"id":"C012AB3CD","name":"general"}],"response_metadata":{"next_cursor":"dGVhbTpDMDYxRkE1UEI="}}"#)
        let p = problem(#"{"ok":false,"error":"invalid_cursor","warning":"missing_charset","response_metadata":{"warnings":["missing_charset"]}}"#, d)
        XCTAssertEqual(p?.upstream.map(\.name), ["response_metadata", "warning"], "extras are copied into the problem")
    }

    func testExtras_aloneBesideTheEnvelope_areTheAnswer() {
        // Before issue 33 an extra was cut from successes, so this answered 204 and lost showType.
        XCTAssertEqual(sent(#"{"success":true,"showType":0}"#, .antd), #"{"showType":0}"#)
    }

    // MARK: patterns

    func testPattern_suffixAlsoMatchesAMemberNamedExactlyThat() {
        let d = Dialect(preset: "peel", code: "Error.Code", success: .errorMember("Error"), messages: ["Error.Message"],
                        payload: .pattern(suffix: "Response", failure: nil))
        XCTAssertEqual(sent(#"{"Response":{"TotalCount":0,"InstanceSet":[],"RequestId":"b5b41468-520d-4192-b42f-595cc34b6c1c"}}"#, d),
                       #"{"TotalCount":0,"InstanceSet":[],"RequestId":"b5b41468-520d-4192-b42f-595cc34b6c1c"}"#)
        XCTAssertEqual(sent(#"{"DescribeInstancesResponse":{"TotalCount":0}}"#, d), #"{"TotalCount":0}"#)
        guard case .problem(let p) = judged(#"{"Response":{"TotalCount":0},"xResponse":{}}"#, d).0 else { return XCTFail() }
        XCTAssertEqual(p.kind, .badUpstreamFormat, "two members end that way: which one is meant is unknown")
    }

    func testPattern_duplicateMemberInsideTheMatchedObject_isNamed() {
        let body = #"{"alipay_trade_query_response":{"code":"10000","msg":"Success","code":"40004"},"sign":"c2ln"}"#
        guard case .problem(let p) = judged(body, .alipay).0 else { return XCTFail() }
        XCTAssertEqual(p.kind, .badUpstreamFormat)
        XCTAssertEqual(p.reason, #"duplicate member "alipay_trade_query_response.code""#)
        guard case .problem(let q) = judged(#"{"error_response":{"code":"20001","sub_msg":"a","sub_msg":"b"}}"#, .alipay).0 else {
            return XCTFail()
        }
        XCTAssertEqual(q.reason, #"duplicate member "error_response.sub_msg""#)
    }

    // MARK: the auth flag

    private var abpLike: Dialect {
        Dialect(preset: "peel", code: "error.code", success: .flag("success"), messages: ["error.message"], payload: .member("result"),
                authFlag: "unAuthorizedRequest")
    }

    func testAuthFlag_trueOnAFailure_isAuthExpired_unlessTheStatusIs403() {
        let body = #"{"result":null,"targetUrl":null,"success":false,"error":{"code":0,"message":"当前用户没有登录到系统！","details":null,"validationErrors":null},"unAuthorizedRequest":true,"__abp":true}"#
        for status in [200, 401] {
            let p = problem(body, abpLike, status: status)
            XCTAssertEqual(p?.kind, .authExpired, "\(status)")
            XCTAssertEqual(p?.code, 0)
            XCTAssertEqual(p?.detail, "当前用户没有登录到系统！")
        }
        XCTAssertEqual(problem(body, abpLike, status: 403)?.kind, .upstreamError, "a signed-in user without the permission")
        let plain = body.replacingOccurrences(of: #""unAuthorizedRequest":true"#, with: #""unAuthorizedRequest":false"#)
        XCTAssertEqual(problem(plain, abpLike)?.kind, .businessError)
    }

    func testAuthFlag_withoutACode_isAuthExpiredWithANullCode() {
        let p = problem(#"{"success":false,"unAuthorizedRequest":true}"#, abpLike)
        XCTAssertEqual(p?.kind, .authExpired)
        XCTAssertNil(p?.code)
    }

    func testAuthFlag_onlyTrueCounts_andItIsLeftOutOfASuccess() {
        XCTAssertEqual(problem(#"{"success":false,"unAuthorizedRequest":"true"}"#, abpLike)?.kind, .businessError)
        XCTAssertEqual(problem(#"{"success":false,"unAuthorizedRequest":null}"#, abpLike)?.kind, .businessError)
        XCTAssertEqual(sent(#"{"success":true,"unAuthorizedRequest":false,"items":[1]}"#, abpLike), #"{"items":[1]}"#)
    }
}

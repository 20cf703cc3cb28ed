import PeelEnvelope
import XCTest

/// Every preset and predicate, on bodies shaped as the named backends answer (DIALECTS.md).
final class DialectTests: XCTestCase {
    private func config(_ dialect: Dialect) -> EnvelopeConfig {
        var c = EnvelopeConfig()
        c.dialect = dialect
        return c
    }

    /// The verdict and, for a success, the exact bytes sent.
    private func judge(_ body: String, _ dialect: Dialect, status: Int = 200) -> (Verdict, String?) {
        let bytes = Array(body.utf8)
        let v = PeelEnvelope.judge(UpstreamAnswer(status: status, contentType: "application/json", path: "/x", isHead: false),
                                   body: bytes, config: config(dialect))
        switch v {
        case .unwrap(_, let r?): return (v, String(decoding: bytes[r], as: UTF8.self))
        case .unwrapRest(_, let b): return (v, String(decoding: b, as: UTF8.self))
        default: return (v, nil)
        }
    }

    private func assertSends(_ body: String, _ dialect: Dialect, _ expected: String, status: Int = 200,
                             file: StaticString = #filePath, line: UInt = #line) {
        let (v, sent) = judge(body, dialect, status: status)
        XCTAssertEqual(sent, expected, "\(v)", file: file, line: line)
        switch v {
        case .unwrap(let s, _), .unwrapRest(let s, _): XCTAssertEqual(s, status, file: file, line: line)
        default: XCTFail("not a success: \(v)", file: file, line: line)
        }
    }

    private func assertNoContent(_ body: String, _ dialect: Dialect, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(judge(body, dialect).0, .unwrap(status: 204, data: nil), file: file, line: line)
    }

    private func problem(_ body: String, _ dialect: Dialect, status: Int = 200, file: StaticString = #filePath,
                         line: UInt = #line) -> Problem? {
        guard case .problem(let p) = judge(body, dialect, status: status).0 else {
            XCTFail("not a problem", file: file, line: line)
            return nil
        }
        return p
    }

    // MARK: RuoYi-Vue

    func testRuoyi_loginTokenBesideTheEnvelope() {
        assertSends(#"{"msg":"操作成功","code":200,"token":"eyJhbGciOiJIUzUxMiJ9.eyJsb2dpbl91c2VyX2tleSI6IjEifQ.sig"}"#, .ruoyi,
                    #"{"token":"eyJhbGciOiJIUzUxMiJ9.eyJsb2dpbl91c2VyX2tleSI6IjEifQ.sig"}"#)
    }

    func testRuoyi_pagedListRowsAndTotal() {
        assertSends(#"{"total":2,"rows":[{"userId":1,"userName":"admin","balance":1.10},{"userId":2,"userName":"ry"}],"code":200,"msg":"查询成功"}"#,
                    .ruoyi, #"{"total":2,"rows":[{"userId":1,"userName":"admin","balance":1.10},{"userId":2,"userName":"ry"}]}"#)
    }

    func testRuoyi_dataWithSiblingsKeepsThemAll() {
        // GET /system/user/1 puts posts, roles and their ids beside data.
        assertSends(#"{"msg":"操作成功","code":200,"data":{"userId":1},"postIds":[1],"roleIds":[1],"posts":[{"postId":1}],"roles":[]}"#,
                    .ruoyi, #"{"data":{"userId":1},"postIds":[1],"roleIds":[1],"posts":[{"postId":1}],"roles":[]}"#)
    }

    func testRuoyi_dataAloneIsThePayload() {
        assertSends(#"{"msg":"操作成功","code":200,"data":["a","b"]}"#, .ruoyi, #"["a","b"]"#)
    }

    func testRuoyi_missingCodeIsSuccess_andBareEnvelopeIs204() {
        assertSends(#"{"rows":[],"total":0}"#, .ruoyi, #"{"rows":[],"total":0}"#)
        assertNoContent(#"{"msg":"操作成功","code":200}"#, .ruoyi)
    }

    func testRuoyi_errorsAndAuth() {
        let e = problem(#"{"msg":"用户不存在/密码错误","code":500}"#, .ruoyi)
        XCTAssertEqual(e?.kind, .businessError)
        XCTAssertEqual(e?.code, 500)
        XCTAssertEqual(e?.detail, "用户不存在/密码错误")
        let a = problem(#"{"msg":"认证失败，无法访问系统资源","code":401}"#, .ruoyi)
        XCTAssertEqual(a?.kind, .authExpired)
        XCTAssertEqual(a?.status, 401)
    }

    // MARK: string codes

    func testAlibaba_stringCodesWithLeadingZeros() {
        assertSends(#"{"code":"00000","data":{"userId":2},"msg":"一切ok"}"#, .alibaba, #"{"userId":2}"#)
        let wrongType = problem(#"{"code":0,"data":{"userId":2},"msg":"ok"}"#, .alibaba)
        XCTAssertEqual(wrongType?.kind, .businessError, "0 is not \"00000\"")
        XCTAssertEqual(wrongType?.code, .integer(0))
        let auth = problem(#"{"code":"A0230","data":null,"msg":"访问令牌无效或已过期"}"#, .alibaba)
        XCTAssertEqual(auth?.kind, .authExpired)
        XCTAssertEqual(auth?.code, "A0230")
        XCTAssertEqual(auth?.detail, "访问令牌无效或已过期")
        let business = problem(#"{"code":"B0001","data":null,"msg":"系统执行出错"}"#, .alibaba)
        XCTAssertEqual(business?.code, "B0001")
        XCTAssertEqual(business?.status, 422)
    }

    func testCodeSet_integerMatchesItsDecimalStringOnly() {
        let set = CodeSet([0, "00000"])
        XCTAssertTrue(set.contains(0))
        XCTAssertTrue(set.contains("0"))
        XCTAssertTrue(set.contains("00000"))
        XCTAssertFalse(set.contains("00"))
        XCTAssertFalse(set.contains("-0"))
        XCTAssertFalse(CodeSet(["200"]).contains(200), "a string in the list matches that exact string only")
        XCTAssertFalse(CodeSet([200]).isDisjoint(with: CodeSet(["200"])))
        XCTAssertEqual(CodeStatusMap([1001: 409]).status(for: "1001"), 409)
        XCTAssertEqual(CodeStatusMap(["A0230": 401]).status(for: "A0230"), 401)
        XCTAssertNil(CodeStatusMap(["1001": 409]).status(for: 1001))
    }

    func testFlagCodes_parseIntegersAndQuotedStringsOnly() {
        XCTAssertEqual(EnvelopeCode.parse(flag: "200"), 200)
        XCTAssertEqual(EnvelopeCode.parse(flag: "-1"), -1)
        XCTAssertEqual(EnvelopeCode.parse(flag: #""00000""#), "00000")
        for bad in ["00000", "1e3", "0x10", "A0230", "+1", "1.0", "", #"""#, #""a"b""#] {
            XCTAssertNil(EnvelopeCode.parse(flag: bad), bad)
        }
    }

    // MARK: WeChat

    func testWechat_successWithoutErrcodeIsTheWholeObject() {
        let body = #"{"access_token":"ACCESS_TOKEN","expires_in":7200}"#
        assertSends(body, .wechat, body)
    }

    func testWechat_errcodeZeroIsCutFromTheRest() {
        assertSends(#"{"errcode":0,"errmsg":"ok","auth_url":"https:\/\/example.com\/a?b=1"}"#, .wechat,
                    #"{"auth_url":"https:\/\/example.com\/a?b=1"}"#)
        assertNoContent(#"{"errcode":0,"errmsg":"ok"}"#, .wechat)
    }

    func testWechat_errorsAndExpiredToken() {
        let e = problem(#"{"errcode":40013,"errmsg":"invalid appid"}"#, .wechat)
        XCTAssertEqual(e?.kind, .businessError)
        XCTAssertEqual(e?.code, 40013)
        XCTAssertEqual(e?.detail, "invalid appid")
        XCTAssertEqual(problem(#"{"errcode":42001,"errmsg":"access_token expired"}"#, .wechat)?.kind, .authExpired)
    }

    // MARK: flags, status, error objects

    func testAntd_successFlagAndShowTypeExtra() {
        assertSends(#"{"success":true,"data":{"name":"Serati Ma"}}"#, .antd, #"{"name":"Serati Ma"}"#)
        // Ant Design Pro's ResponseStructure: errorCode is a number.
        let p = problem(#"{"success":false,"data":null,"errorCode":1001,"errorMessage":"Insufficient permissions","showType":2}"#, .antd)
        XCTAssertEqual(p?.kind, .businessError)
        XCTAssertEqual(p?.code, 1001, "as the upstream wrote it")
        XCTAssertEqual(p?.detail, "Insufficient permissions")
        XCTAssertEqual(p?.upstream, [UpstreamMember(name: "showType", raw: Array("2".utf8))])
        let noCode = problem(#"{"success":false,"errorMessage":"x"}"#, .antd)
        XCTAssertNil(noCode?.code, "a failure without a code has code null")
    }

    func testJeecg_successDecidesAndCodeIsReported() {
        assertSends(#"{"success":true,"message":"","code":200,"result":{"records":[],"total":0},"timestamp":1700000000000}"#,
                    .jeecg, #"{"records":[],"total":0}"#)
        assertNoContent(#"{"success":true,"message":"添加成功！","code":200,"result":null,"timestamp":1700000000000}"#
            .replacingOccurrences(of: #""result":null,"#, with: ""), .jeecg)
        let p = problem(#"{"success":false,"message":"用户名或密码错误","code":500,"result":null,"timestamp":1700000000000}"#, .jeecg)
        XCTAssertEqual(p?.code, 500)
        XCTAssertEqual(p?.kind, .businessError)
        XCTAssertEqual(problem(#"{"success":false,"message":"Token失效","code":401,"result":null,"timestamp":1}"#, .jeecg)?.kind,
                       .authExpired)
        XCTAssertEqual(problem(#"{"success":"yes","code":200,"result":1}"#, .jeecg)?.reason, "success is not a boolean")
    }

    func testJsend_successFailAndError() {
        assertSends(#"{"status":"success","data":{"post":{"id":1,"title":"A blog post"}}}"#, .jsend,
                    #"{"post":{"id":1,"title":"A blog post"}}"#)
        assertSends(#"{"status":"success","data":null}"#, .jsend, "null")
        let fail = problem(#"{"status":"fail","data":{"title":"A title is required"}}"#, .jsend)
        XCTAssertEqual(fail?.kind, .businessError)
        XCTAssertEqual(fail?.status, 422)
        XCTAssertEqual(fail?.upstream, [UpstreamMember(name: "data", raw: Array(#"{"title":"A title is required"}"#.utf8))])
        let error = problem(#"{"status":"error","message":"Unable to communicate with database"}"#, .jsend)
        XCTAssertEqual(error?.kind, .upstreamError)
        XCTAssertEqual(error?.status, 502)
        XCTAssertEqual(error?.detail, "Unable to communicate with database")
        XCTAssertEqual(problem(#"{"status":"error","message":"x"}"#, .jsend, status: 503)?.status, 502)
        XCTAssertEqual(problem(#"{"status":"ok"}"#, .jsend)?.kind, .badUpstreamFormat)
    }

    func testErrorObject_googleStripeStrapi() {
        assertSends(#"{"apiVersion":"2.0","data":{"items":[1,2]}}"#, .errorObject, #"{"items":[1,2]}"#)
        let charge = #"{"id":"ch_3MmlLr","object":"charge","amount":1099,"metadata":{}}"#
        assertSends(charge, .errorObject, charge)
        assertSends(#"{"data":[1],"error":null}"#, .errorObject, "[1]")
        let google = problem(#"{"apiVersion":"2.0","error":{"code":404,"message":"File Not Found","errors":[{"domain":"Calendar"}]}}"#,
                             .errorObject)
        XCTAssertEqual(google?.code, 404)
        XCTAssertEqual(google?.detail, "File Not Found")
        let stripe = problem(#"{"error":{"type":"card_error","code":"card_declined","message":"Your card was declined."}}"#,
                             .errorObject)
        XCTAssertEqual(stripe?.code, "card_declined")
        // A string error says something: a failure without a code, the string kept in `upstream`.
        let bare = problem(#"{"error":"boom"}"#, .errorObject)
        XCTAssertEqual(bare?.kind, .businessError)
        XCTAssertNil(bare?.code)
        XCTAssertEqual(bare?.upstream, [UpstreamMember(name: "error", raw: Array(#""boom""#.utf8))])
        XCTAssertEqual(stripe?.upstream.first?.name, "error", "Stripe's type and decline_code reach the app")
        // A payload path that steps into a non-object is refused, naming the step.
        var nested = Dialect.peel
        nested.payload = .member("result.data")
        XCTAssertEqual(problem(#"{"code":0,"result":[1]}"#, nested)?.reason, "result is not an object")
    }

    // MARK: Alipay's method-named member

    func testAlipay_successIsTheResponseObjectMinusCodeAndMessage() {
        assertSends(#"{"alipay_trade_query_response":{"code":"10000","msg":"Success","trade_no":"2013112011001004330000121536","total_amount":"88.88"},"sign":"ERITJKEIJKJHKKKKKKKHJEREEEEEEEEEEE"}"#,
                    .alipay, #"{"trade_no":"2013112011001004330000121536","total_amount":"88.88"}"#)
    }

    func testAlipay_businessFailureCarriesSubCodeAndSubMsg() {
        let p = problem(#"{"alipay_trade_query_response":{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_NOT_EXIST","sub_msg":"交易不存在","buyer_pay_amount":"0.00"},"sign":"x"}"#,
                        .alipay)
        XCTAssertEqual(p?.kind, .businessError)
        XCTAssertEqual(p?.code, "40004")
        XCTAssertEqual(p?.detail, "交易不存在", "sub_msg before msg")
        XCTAssertEqual(p?.upstream, [UpstreamMember(name: "sub_code", raw: Array(#""ACQ.TRADE_NOT_EXIST""#.utf8)),
                                     UpstreamMember(name: "sub_msg", raw: Array(#""交易不存在""#.utf8))])
    }

    func testAlipay_errorResponseAndAuth() {
        let p = problem(#"{"error_response":{"code":"20001","msg":"Insufficient Token Permissions","sub_code":"aop.invalid-auth-token"},"sign":"x"}"#,
                        .alipay)
        XCTAssertEqual(p?.kind, .authExpired)
        XCTAssertEqual(p?.code, "20001")
        let gateway = problem(#"{"error_response":{"code":"40002","msg":"Invalid Arguments","sub_code":"isv.code-invalid","sub_msg":"授权码code无效"}}"#,
                              .alipay)
        XCTAssertEqual(gateway?.kind, .businessError)
        XCTAssertEqual(problem(#"{"sign":"x"}"#, .alipay)?.reason, "no member named *_response or error_response")
        XCTAssertEqual(problem(#"{"a_response":{"code":"10000"},"b_response":{"code":"10000"}}"#, .alipay)?.kind, .badUpstreamFormat)
        XCTAssertEqual(problem(#"{"a_response":[1]}"#, .alipay)?.reason, "a_response is not an object")
    }

    func testJdMisspelledSuffix_isACustomPattern() {
        var jd = Dialect.alipay
        jd.payload = .pattern(suffix: "_responce", failure: "error_response")
        jd.successCodes = CodeSet(["0"])
        assertSends(#"{"jingdong_ads_dsp_rtb_kuaiche_batchUpdateDifferentDmpPrice_responce":{"code":"0","result":{"ok":true}}}"#, jd,
                    #"{"result":{"ok":true}}"#)
    }

    // MARK: the rest of the object, byte-exact

    func testRest_keepsEveryPayloadShapeVerbatim() {
        for value in ["[1,\"two\",3.0,null]", "12345678901234567890", "1.10", "-0.0", "1e400", "null", "{}", "[]", "true",
                      #""a\"b\\c\/d\u00e9\ud83d\ude00\n""#, "\"你好\""] {
            assertSends(#"{"errcode":0,"errmsg":"ok","v":"# + value + #","w":1}"#, .wechat, #"{"v":"# + value + #","w":1}"#)
            assertSends(#"{"v":"# + value + "}", .wechat, #"{"v":"# + value + "}")
        }
    }

    func testRest_prettyPrintedAndEscapedNames() {
        let body = "{\n  \"total\" : 2 ,\n  \"co\\u0064e\" : 200,\n  \"rows\": [ 1, 2 ],\n  \"msg\": \"ok\"\n}\n"
        assertSends(body, .ruoyi, "{\"total\" : 2,\"rows\": [ 1, 2 ]}")
    }

    func testRest_envelopeMembersFirstLastAndAdjacent() {
        assertSends(#"{"code":200,"msg":"ok","a":1}"#, .ruoyi, #"{"a":1}"#)
        assertSends(#"{"a":1,"code":200,"msg":"ok"}"#, .ruoyi, #"{"a":1}"#)
        assertSends(#"{"a":1,"code":200,"b":2,"msg":"ok","c":3}"#, .ruoyi, #"{"a":1,"b":2,"c":3}"#)
    }

    func testDefaultDialect_dropsNothingWithoutARule() {
        assertSends(#"{"code":0,"message":"ok","token":"t"}"#, .peel, #"{"token":"t"}"#)
        assertNoContent(#"{"code":0,"message":"ok"}"#, .peel)
        assertSends(#"{"code":0,"message":"ok","data":[1],"total":1}"#, .peel, "[1]")
    }

    // MARK: malformed envelopes

    func testMalformed_namesTheMember() {
        XCTAssertEqual(problem(#"{"code":200,"code":200,"msg":"a"}"#, .ruoyi)?.reason, #"duplicate member "code""#)
        XCTAssertEqual(problem(#"{"errcode":0,"errmsg":1}"#, .wechat)?.reason, "errmsg is not a string")
        var deep = EnvelopeConfig()
        deep.maxDepth = 3
        deep.dialect = .wechat
        let v = PeelEnvelope.judge(UpstreamAnswer(status: 200, contentType: nil, path: "/", isHead: false),
                                   body: Array(#"{"a":[[[1]]]}"#.utf8), config: deep)
        guard case .problem(let p) = v else { return XCTFail("\(v)") }
        XCTAssertEqual(p.kind, .badUpstreamFormat)
        XCTAssertEqual(p.reason, #"nested deeper than 3 levels at byte 7 in member "a""#, "the member is named")
    }

    func testNon2xx_keepsTheUpstreamErrorRule() {
        let p = problem(#"{"code":"A0400","msg":"用户请求参数错误","data":null}"#, .alibaba, status: 400)
        XCTAssertEqual(p?.kind, .upstreamError)
        XCTAssertEqual(p?.status, 400)
        XCTAssertEqual(p?.code, "A0400")
        XCTAssertEqual(problem(#"{"code":"A0230","msg":"expired"}"#, .alibaba, status: 401)?.kind, .authExpired)
        XCTAssertEqual(problem("<html>", .alibaba, status: 500)?.code, -104)
    }

    // MARK: presets

    func testPresets_areValidAndTheirSamplesJudgeAsLabelled() {
        XCTAssertEqual(Dialect.presets.map(\.preset),
                       ["peel", "ruoyi", "yudao", "alibaba", "wechat", "jsend", "antd", "jeecg", "alipay", "error-object", "rest",
                        "tencent", "baidu", "slack", "telegram", "gin-vue-admin", "abp"])
        for d in Dialect.presets {
            XCTAssertNil(d.problem(), d.preset)
            let samples = Dialect.samples(for: d.preset)
            XCTAssertGreaterThanOrEqual(samples.count, 2, d.preset)
            for s in samples {
                let (v, _) = judge(s.body, d, status: s.status)
                switch s.label {
                case "auth error":
                    guard case .problem(let p) = v, p.kind == .authExpired else { return XCTFail("\(d.preset) \(s.label): \(v)") }
                case "business error", "fail":
                    guard case .problem(let p) = v, p.kind == .businessError else { return XCTFail("\(d.preset) \(s.label): \(v)") }
                case let shape where d.preset == "rest" && FailureShape(rawValue: shape) != nil:
                    // Each well-known failure shape is read by that shape, and says so in the reason.
                    guard case .problem(let p) = v, p.reason?.hasSuffix("read as " + shape) == true, p.detail != nil else {
                        return XCTFail("\(d.preset) \(s.label): \(v)")
                    }
                case "HTTP 401":
                    guard case .problem(let p) = v, p.status == 401 else { return XCTFail("\(d.preset) \(s.label): \(v)") }
                case _ where s.label == "error" || s.label == "server error" || !(200...299).contains(s.status):
                    guard case .problem(let p) = v, p.kind == .upstreamError else { return XCTFail("\(d.preset) \(s.label): \(v)") }
                default:
                    switch v {
                    case .unwrap, .unwrapRest: break
                    default: XCTFail("\(d.preset) \(s.label): \(v)")
                    }
                }
            }
        }
    }

    func testRender_stringCodeNullCodeAndUpstreamObject() {
        let p = Problem(kind: .businessError, code: "ACQ.X", upstream: [UpstreamMember(name: "sub_code", raw: Array(#""ACQ.TRADE_NOT_EXIST""#.utf8))])
        let text = String(decoding: renderProblem(p, requestId: "r", language: .english, typeBase: "urn:peel:problem:"), as: UTF8.self)
        XCTAssertTrue(text.contains(#""code":"ACQ.X","#), text)
        XCTAssertTrue(text.hasSuffix(#","upstream":{"sub_code":"ACQ.TRADE_NOT_EXIST"}}"#), text)
        XCTAssertTrue(JSONScanner.validate(Array(text.utf8)))
        let none = String(decoding: renderProblem(Problem(kind: .businessError), requestId: "r", language: .english,
                                                  typeBase: "urn:peel:problem:"), as: UTF8.self)
        XCTAssertTrue(none.contains(#""code":null,"#), none)
    }
}

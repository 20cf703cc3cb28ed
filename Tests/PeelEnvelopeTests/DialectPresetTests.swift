import PeelEnvelope
import XCTest

/// The presets issue 33 adds, on bodies shaped as each service answers (member order, escapes,
/// big integers, non-ASCII messages), and the error-object preset's Stripe lists.
final class DialectPresetTests: XCTestCase {
    // MARK: Tencent Cloud API 3.0

    func testTencent_successIsTheWholeResponse_requestIdIncluded() {
        let body = #"{"Response":{"TotalCount":1,"InstanceStatusSet":[{"InstanceId":"ins-5d8a23rs","InstanceState":"RUNNING"}],"RequestId":"b5b41468-520d-4192-b42f-595cc34b6c1c"}}"#
        XCTAssertEqual(sent(body, .tencent),
                       #"{"TotalCount":1,"InstanceStatusSet":[{"InstanceId":"ins-5d8a23rs","InstanceState":"RUNNING"}],"RequestId":"b5b41468-520d-4192-b42f-595cc34b6c1c"}"#)
    }

    func testTencent_authFailurePrefix_isAuthExpired() {
        for code in ["AuthFailure.SignatureFailure", "AuthFailure.SignatureExpire", "AuthFailure.SecretIdNotFound", "AuthFailure.TokenFailure"] {
            let body = #"{"Response":{"Error":{"Code":"\#(code)","Message":"签名过期。Timestamp 和服务器时间相差不得超过五分钟。"},"RequestId":"ed93f3cb-f35e-473f-b9f3-0d451b8b79c6"}}"#
            let p = problem(body, .tencent)
            XCTAssertEqual(p?.kind, .authExpired, code)
            XCTAssertEqual(p?.code, .string(code))
            XCTAssertEqual(p?.detail, "签名过期。Timestamp 和服务器时间相差不得超过五分钟。")
        }
    }

    func testTencent_otherErrorIsABusinessErrorWithItsStringCode() {
        let body = #"{"Response":{"Error":{"Code":"InvalidParameterValue","Message":"The value `ins-1` of parameter \"InstanceIds\" is invalid."},"RequestId":"4f6e3bd3-8d49-4ed6-b2e7-9e6d1b7a2c11"}}"#
        let p = problem(body, .tencent)
        XCTAssertEqual(p?.kind, .businessError)
        XCTAssertEqual(p?.code, "InvalidParameterValue")
        XCTAssertEqual(p?.detail, #"The value `ins-1` of parameter "InstanceIds" is invalid."#)
        XCTAssertEqual(problem(body.replacingOccurrences(of: "InvalidParameterValue", with: "AuthFailure"), .tencent)?.kind, .businessError,
                       "AuthFailure without its dot does not start with the prefix")
    }

    func testTencent_rolePathsInsideThePayload_onlyUnderTheErrorMember() {
        XCTAssertNil(Dialect.tencent.problem())
        var d = Dialect.tencent
        d.codes = ["Response.Code"]
        XCTAssertEqual(d.problem()?.part, .payload, "a code inside the payload but outside Error would be sent on success")
        d = .tencent
        d.success = .errorMember("Response")
        XCTAssertEqual(d.problem()?.part, .payload, "the error member cannot be the payload itself")
    }

    // MARK: Baidu AI open platform

    func testBaidu_successWithoutErrorCode_keepsLogIdAndItsDigits() {
        let body = #"{"log_id":1787326409348117203,"words_result_num":2,"words_result":[{"words":" TSINGTAO"},{"words":"青島睥酒"}]}"#
        XCTAssertEqual(sent(body, .baidu), body)
    }

    func testBaidu_errorCodeZeroIsSuccess_andCutFromTheAnswer() {
        let body = #"{"error_code":0,"error_msg":"SUCCESS","log_id":5575101525179,"timestamp":1700000000,"cached":0,"result":{"face_num":1}}"#
        XCTAssertEqual(sent(body, .baidu), #"{"log_id":5575101525179,"timestamp":1700000000,"cached":0,"result":{"face_num":1}}"#)
    }

    func testBaidu_invalidOrExpiredAccessToken_isAuthExpired() {
        XCTAssertEqual(problem(#"{"error_code":110,"error_msg":"Access token invalid or no longer valid"}"#, .baidu)?.kind, .authExpired)
        XCTAssertEqual(problem(#"{"error_code":111,"error_msg":"Access token expired"}"#, .baidu)?.kind, .authExpired)
    }

    func testBaidu_requestLimitsAre429_withLogIdInTheProblem() {
        let p = problem(#"{"error_code":18,"error_msg":"Open api qps request limit reached","log_id":1787326409348117204}"#, .baidu)
        XCTAssertEqual(p?.kind, .businessError)
        XCTAssertEqual(p?.status, 429)
        XCTAssertEqual(p?.upstream, [UpstreamMember(name: "log_id", raw: Array("1787326409348117204".utf8))])
        XCTAssertEqual(problem(#"{"error_code":216201,"error_msg":"image format error"}"#, .baidu)?.status, 422)
    }

    // MARK: Slack Web API

    func testSlack_listKeepsResponseMetadata_andWarningStays() {
        let list = #"{"ok":true,"channels":[{"id":"C012AB3CD","name":"general"}],"response_metadata":{"next_cursor":"dGVhbTpDMDYxRkE1UEI="}}"#
        XCTAssertEqual(sent(list, .slack), #"{"channels":[{"id":"C012AB3CD","name":"general"}],"response_metadata":{"next_cursor":"dGVhbTpDMDYxRkE1UEI="}}"#)
        let posted = #"{"ok":true,"channel":"C123ABC456","ts":"1503435956.000247","warning":"superfluous_charset","response_metadata":{"warnings":["superfluous_charset"]}}"#
        XCTAssertEqual(sent(posted, .slack), #"{"channel":"C123ABC456","ts":"1503435956.000247","warning":"superfluous_charset","response_metadata":{"warnings":["superfluous_charset"]}}"#)
    }

    func testSlack_tokenErrorsAreAuthExpired_otherCodesAreBusinessErrors() {
        for code in ["invalid_auth", "not_authed", "token_expired", "token_revoked"] {
            let p = problem(#"{"ok":false,"error":"\#(code)"}"#, .slack)
            XCTAssertEqual(p?.kind, .authExpired, code)
            XCTAssertEqual(p?.code, .string(code))
        }
        let p = problem(#"{"ok":false,"error":"missing_scope","needed":"chat:write","provided":"channels:read"}"#, .slack)
        XCTAssertEqual(p?.kind, .businessError)
        XCTAssertEqual(p?.code, "missing_scope")
        XCTAssertEqual(p?.upstream.map(\.name), ["needed", "provided"])
    }

    // MARK: Telegram Bot API

    func testTelegram_resultIsAnyJSONValue() {
        XCTAssertEqual(sent(#"{"ok":true,"result":{"id":7012345678,"is_bot":true,"first_name":"Peel"}}"#, .telegram),
                       #"{"id":7012345678,"is_bot":true,"first_name":"Peel"}"#)
        XCTAssertEqual(sent(#"{"ok":true,"result":true,"description":"Webhook was set"}"#, .telegram), "true")
        XCTAssertEqual(sent(#"{"ok":true,"result":[]}"#, .telegram), "[]")
    }

    func testTelegram_unauthorizedIsAuthExpired_and429KeepsRetryAfter() {
        XCTAssertEqual(problem(#"{"ok":false,"error_code":401,"description":"Unauthorized"}"#, .telegram, status: 401)?.kind, .authExpired)
        let p = problem(#"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 35","parameters":{"retry_after":35}}"#,
                        .telegram, status: 429)
        XCTAssertEqual(p?.status, 429)
        XCTAssertEqual(p?.detail, "Too Many Requests: retry after 35")
        XCTAssertEqual(p?.upstream, [UpstreamMember(name: "parameters", raw: Array(#"{"retry_after":35}"#.utf8))])
        XCTAssertEqual(problem(#"{"ok":false,"error_code":400,"description":"Bad Request: chat not found"}"#, .telegram, status: 400)?.detail,
                       "Bad Request: chat not found")
    }

    // MARK: gin-vue-admin

    func testGinVueAdmin_code7IsAnOrdinaryFailure_notAuth() {
        let body = #"{"code":7,"data":{},"msg":"获取失败"}"#
        let p = problem(body, .ginVueAdmin)
        XCTAssertEqual(p?.kind, .businessError)
        XCTAssertEqual(p?.code, 7)
        XCTAssertEqual(p?.detail, "获取失败")
        // Why the preset exists: under the default dialect the same body logs the user out.
        XCTAssertEqual(problem(body, .peel)?.kind, .authExpired)
        XCTAssertEqual(sent(#"{"code":0,"data":{"list":[],"total":0,"page":1,"pageSize":10},"msg":"获取成功"}"#, .ginVueAdmin),
                       #"{"list":[],"total":0,"page":1,"pageSize":10}"#)
    }

    // MARK: ABP

    private let abpDenied = #"{"result":null,"targetUrl":null,"success":false,"error":{"code":0,"message":"Current user did not login to the application!","details":null,"validationErrors":null},"unAuthorizedRequest":true,"__abp":true}"#

    func testAbp_successIsTheResult() {
        let body = #"{"result":{"totalCount":1,"items":[{"userName":"admin","isActive":true,"id":1}]},"targetUrl":null,"success":true,"error":null,"unAuthorizedRequest":false,"__abp":true}"#
        XCTAssertEqual(sent(body, .abp), #"{"totalCount":1,"items":[{"userName":"admin","isActive":true,"id":1}]}"#)
        XCTAssertEqual(sent(#"{"targetUrl":null,"success":true,"error":null,"unAuthorizedRequest":false,"__abp":true}"#, .abp),
                       #"{"targetUrl":null}"#, "without a result the rest is sent, the envelope's own members and __abp left out")
    }

    func testAbp_unAuthorizedRequest_signsOut_unlessTheStatusIs403() {
        XCTAssertEqual(problem(abpDenied, .abp)?.kind, .authExpired, "older ajax calls answer 200")
        XCTAssertEqual(problem(abpDenied, .abp, status: 401)?.kind, .authExpired)
        let forbidden = problem(abpDenied.replacingOccurrences(of: "Current user did not login to the application!",
                                                               with: "Required permissions are not granted."), .abp, status: 403)
        XCTAssertEqual(forbidden?.kind, .upstreamError)
        XCTAssertEqual(forbidden?.status, 403)
        XCTAssertEqual(forbidden?.detail, "Required permissions are not granted.")
    }

    func testAbp_failureKeepsItsMessageAndATargetUrl() {
        let body = #"{"result":null,"targetUrl":"/Account/Login","success":false,"error":{"code":0,"message":"Your request is not valid!","details":"The following errors were detected during validation.\r\n - The Name field is required.\r\n","validationErrors":[{"message":"The Name field is required.","members":["name"]}]},"unAuthorizedRequest":false,"__abp":true}"#
        let p = problem(body, .abp)
        XCTAssertEqual(p?.kind, .businessError)
        XCTAssertEqual(p?.detail, "Your request is not valid!")
        XCTAssertEqual(p?.upstream, [UpstreamMember(name: "targetUrl", raw: Array(#""/Account/Login""#.utf8))])
        XCTAssertEqual(problem(abpDenied, .abp)?.upstream, [], "a null targetUrl says nothing")
    }

    func testAbp_validationErrorsAreFieldErrors() {
        let body = #"{"result":null,"targetUrl":null,"success":false,"error":{"code":0,"message":"Your request is not valid!","details":null,"validationErrors":[{"message":"The Name field is required.","members":["name"]},{"message":"The field EmailAddress must be a string with a maximum length of 256.","members":["emailAddress"]}]},"unAuthorizedRequest":false,"__abp":true}"#
        let p = problem(body, .abp, status: 400)
        XCTAssertEqual(p?.errors.map { String(decoding: $0, as: UTF8.self) },
                       ##"[{"detail":"The Name field is required.","pointer":"#/name"},{"detail":"The field EmailAddress must be a string with a maximum length of 256.","pointer":"#/emailAddress"}]"##)
    }

    // MARK: error-object (Stripe)

    func testErrorObject_stripeListKeepsItsPagination() {
        let list = #"{"object":"list","url":"/v1/charges","has_more":false,"data":[{"id":"ch_3MmlLrLkdIwHu7ix0snN0B15","object":"charge","amount":1099}]}"#
        XCTAssertEqual(sent(list, .errorObject), list)
        XCTAssertEqual(sent(#"{"data":{"id":"evt_1"}}"#, .errorObject), #"{"id":"evt_1"}"#, "data alone is still unwrapped")
        XCTAssertEqual(sent(#"{"data":[1],"error":null,"meta":{"page":2}}"#, .errorObject), #"{"data":[1],"meta":{"page":2}}"#)
    }
}

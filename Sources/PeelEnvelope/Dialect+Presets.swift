// The named dialects: each is the envelope one family of backends really answers with
// (shared/DIALECTS.md lists where each shape is documented), with sample envelopes written for
// Peel's README, `peel dialects` and tests.

extension Dialect {
    /// The seed's envelope: `code` 0 is success, `message`, `data`; code 7 means the token expired.
    public static let peel = Dialect(
        preset: "peel", code: "code", success: .code, successCodes: CodeSet([0]), authCodes: CodeSet([7]),
        messages: ["message"], payload: .member("data"))

    /// RuoYi-Vue's `AjaxResult` and `TableDataInfo`: `code` 200 (its client takes a missing code as
    /// 200), `msg`, `data` or members beside the envelope (`token`, `rows`/`total`, `roles`); 401 re-login.
    public static let ruoyi = Dialect(
        preset: "ruoyi", code: "code", success: .codeOrAbsent, successCodes: CodeSet([200]), authCodes: CodeSet([401]),
        messages: ["msg"], payload: .member("data"), siblings: .keep)

    /// ruoyi-vue-pro / yudao `CommonResult`: `code` 0, `msg`, `data`; 401 unauthorized.
    public static let yudao = Dialect(
        preset: "yudao", code: "code", success: .code, successCodes: CodeSet([0]), authCodes: CodeSet([401]),
        messages: ["msg"], payload: .member("data"))

    /// The Alibaba Java manual's codes (youlai-boot): string `code` "00000", `msg`, `data`; "A0230"
    /// and "A0231" mean the token is invalid or expired.
    public static let alibaba = Dialect(
        preset: "alibaba", code: "code", success: .code, successCodes: CodeSet(["00000"]),
        authCodes: CodeSet(["A0230", "A0231"]), messages: ["msg"], payload: .member("data"))

    /// WeChat server APIs: `errcode` absent or 0 is success, `errmsg`, the payload is the rest of the
    /// object (`access_token`, `expires_in`); 40001, 40014 and 42001 are invalid or expired tokens.
    public static let wechat = Dialect(
        preset: "wechat", code: "errcode", success: .codeOrAbsent, successCodes: CodeSet([0]),
        authCodes: CodeSet([40001, 40014, 42001]), messages: ["errmsg"], payload: .rest)

    /// JSend: `status` is "success", "fail" (the request was wrong) or "error" (the server failed);
    /// `data` is the payload, and a failure's `data` is kept in the problem.
    public static let jsend = Dialect(
        preset: "jsend", code: "code", success: .status("status"), messages: ["message"], payload: .member("data"),
        extras: ["data"])

    /// Ant Design Pro / umi `request`: `success` boolean, `errorCode`, `errorMessage`, `data`;
    /// `showType` tells the page how to show the error.
    public static let antd = Dialect(
        preset: "antd", code: "errorCode", success: .flag("success"), messages: ["errorMessage"], payload: .member("data"),
        extras: ["showType"])

    /// JeecgBoot `Result`: `success` decides, `code` (200, 500) is reported, `message`, `result`;
    /// `timestamp` is envelope.
    public static let jeecg = Dialect(
        preset: "jeecg", code: "code", success: .flag("success"), authCodes: CodeSet([401]), messages: ["message"],
        payload: .member("result"), ignore: ["timestamp"])

    /// Alipay OpenAPI: the answer sits in a member named for the method (`alipay_trade_query_response`),
    /// gateway failures in `error_response`; string code "10000" is success, "20001" means the
    /// authorization is not enough; `sub_msg` explains better than `msg`. `sign` and `sign_type`
    /// beside the method's member are never part of the answer.
    public static let alipay = Dialect(
        preset: "alipay", code: "code", success: .code, successCodes: CodeSet(["10000"]), authCodes: CodeSet(["20001"]),
        messages: ["sub_msg", "msg"], payload: .pattern(suffix: "_response", failure: "error_response"),
        extras: ["sub_code", "sub_msg"])

    /// Google JSON style, Strapi, Stripe: an `error` member that says something is the failure
    /// (`error.code`, `error.message`, the whole `error` kept in the problem: Stripe's `type` and
    /// `decline_code`, Google's `errors`); otherwise the body minus `error`, which is `data` alone
    /// when nothing sits beside it (a Stripe list keeps `object`, `url` and `has_more`). Google's
    /// `apiVersion` describes the envelope, not the data.
    public static let errorObject = Dialect(
        preset: "error-object", code: "error.code", success: .errorMember("error"), messages: ["error.message"],
        payload: .member("data"), siblings: .keep, ignore: ["apiVersion"], extras: ["error"])

    /// Tencent Cloud API 3.0: everything is inside `Response`, which is the answer (its `RequestId`
    /// included); `Response.Error` present is the failure, its `Code` a string; every
    /// `AuthFailure.…` code means the credentials or the signature are no good.
    public static let tencent = Dialect(
        preset: "tencent", code: "Response.Error.Code", success: .errorMember("Response.Error"),
        authCodes: CodeSet(["AuthFailure.*"]), messages: ["Response.Error.Message"], payload: .member("Response"))

    /// Baidu AI open platform: `error_code` absent (or 0) is success, `error_msg`, the payload is the
    /// rest of the object (`log_id` kept); 110 and 111 are an invalid or expired access token, 17
    /// and 18 the daily and per-second limits.
    public static let baidu = Dialect(
        preset: "baidu", code: "error_code", success: .codeOrAbsent, successCodes: CodeSet([0]), authCodes: CodeSet([110, 111]),
        codeStatus: CodeStatusMap([17: 429, 18: 429]), messages: ["error_msg"], payload: .rest, extras: ["log_id"])

    /// Slack Web API: `ok` decides, `error` is a string code, the payload is the rest of the object
    /// (`response_metadata.next_cursor` and `warning` stay); a missing scope says what was `needed`.
    public static let slack = Dialect(
        preset: "slack", code: "error", success: .flag("ok"),
        authCodes: CodeSet(["invalid_auth", "not_authed", "token_expired", "token_revoked"]), messages: [], payload: .rest,
        extras: ["needed", "provided", "response_metadata"])

    /// Telegram Bot API: `ok` decides, `result` (any JSON value) is the payload, `error_code` and
    /// `description` say what failed; `parameters.retry_after` comes with a 429.
    public static let telegram = Dialect(
        preset: "telegram", code: "error_code", success: .flag("ok"), authCodes: CodeSet([401]), messages: ["description"],
        payload: .member("result"), extras: ["parameters"])

    /// gin-vue-admin: `code` 0, `msg`, `data`; every ordinary failure is code 7, so 7 is no auth code
    /// here (its token errors come as HTTP 401).
    public static let ginVueAdmin = Dialect(
        preset: "gin-vue-admin", code: "code", success: .code, successCodes: CodeSet([0]), messages: ["msg"], payload: .member("data"))

    /// ASP.NET Boilerplate `AjaxResponse`: `success` decides, `result`, `error.code` and
    /// `error.message`; `unAuthorizedRequest` means sign in again, except on a 403 (a permission the
    /// signed-in user lacks); `targetUrl` kept in a problem, `__abp` (the wrapper's signature) ignored;
    /// `error.validationErrors` (`message`, `members`) are the field errors.
    public static let abp: Dialect = {
        var d = Dialect(
            preset: "abp", code: "error.code", success: .flag("success"), messages: ["error.message"], payload: .member("result"),
            ignore: ["__abp"], extras: ["targetUrl"], authFlag: "unAuthorizedRequest")
        d.fieldErrors = FieldErrorRule(path: "error.validationErrors")
        return d
    }()

    /// REST backends without an envelope: the HTTP status decides, a 2xx's JSON (arrays, strings,
    /// numbers included) is the answer byte for byte, and failures are read by the well-known shapes.
    public static let rest = Dialect(preset: "rest", code: nil, success: .httpStatus, messages: [], payload: .rest)

    /// Every preset, in the README's order.
    public static let presets: [Dialect] = [peel, ruoyi, yudao, alibaba, wechat, jsend, antd, jeecg, alipay, errorObject, rest,
                                            tencent, baidu, slack, telegram, ginVueAdmin, abp]

    /// The preset with this name.
    public static func preset(named name: String) -> Dialect? {
        presets.first { $0.preset == name }
    }
}

/// A sample envelope of a preset and what it shows.
public struct DialectSample: Sendable {
    /// What the sample is (`success`, `business error`, `auth error`, …).
    public var label: String
    /// The upstream's status.
    public var status: Int
    /// The upstream's body.
    public var body: String

    /// Creates a sample.
    public init(_ label: String, _ body: String, status: Int = 200) {
        self.label = label
        self.status = status
        self.body = body
    }
}

extension Dialect {
    /// Sample envelopes for a preset, shaped as its backend answers: success, business error, auth error.
    public static func samples(for preset: String) -> [DialectSample] {
        switch preset {
        case "peel":
            return [DialectSample("success", #"{"code":0,"message":"ok","data":{"id":42,"price":1.10}}"#),
                    DialectSample("business error", #"{"code":1001,"message":"Insufficient balance","data":null}"#),
                    DialectSample("auth error", #"{"code":7,"message":"Token expired"}"#)]
        case "ruoyi":
            return [DialectSample("login", #"{"msg":"操作成功","code":200,"token":"eyJhbGciOiJIUzUxMiJ9.e30.c2ln"}"#),
                    DialectSample("paged list", #"{"total":2,"rows":[{"userId":1,"userName":"admin"},{"userId":2,"userName":"ry"}],"code":200,"msg":"查询成功"}"#),
                    DialectSample("business error", #"{"msg":"用户不存在/密码错误","code":500}"#),
                    DialectSample("auth error", #"{"msg":"请求访问：/system/user/list，认证失败，无法访问系统资源","code":401}"#)]
        case "yudao":
            return [DialectSample("success", #"{"code":0,"data":{"list":[{"id":1}],"total":1},"msg":""}"#),
                    DialectSample("business error", #"{"code":1002000000,"data":null,"msg":"登录失败，账号密码不正确"}"#),
                    DialectSample("auth error", #"{"code":401,"data":null,"msg":"账号未登录"}"#)]
        case "alibaba":
            return [DialectSample("success", #"{"code":"00000","data":{"userId":2,"nickname":"系统管理员"},"msg":"一切ok"}"#),
                    DialectSample("business error", #"{"code":"A0400","data":null,"msg":"用户请求参数错误"}"#),
                    DialectSample("auth error", #"{"code":"A0230","data":null,"msg":"访问令牌无效或已过期"}"#)]
        case "wechat":
            return [DialectSample("success", #"{"access_token":"ACCESS_TOKEN","expires_in":7200}"#),
                    DialectSample("business error", #"{"errcode":40013,"errmsg":"invalid appid"}"#),
                    DialectSample("auth error", #"{"errcode":42001,"errmsg":"access_token expired rid: 6581f0d3-1b2c"}"#)]
        case "jsend":
            return [DialectSample("success", #"{"status":"success","data":{"post":{"id":1,"title":"A blog post"}}}"#),
                    DialectSample("fail", #"{"status":"fail","data":{"title":"A title is required"}}"#),
                    DialectSample("error", #"{"status":"error","message":"Unable to communicate with database"}"#)]
        case "antd":
            return [DialectSample("success", #"{"success":true,"data":{"name":"Serati Ma","userid":"00000001"}}"#),
                    DialectSample("business error", #"{"success":false,"data":null,"errorCode":1001,"errorMessage":"Insufficient permissions","showType":2}"#)]
        case "jeecg":
            return [DialectSample("success", #"{"success":true,"message":"查询成功","code":200,"result":{"records":[],"total":0},"timestamp":1700000000000}"#),
                    DialectSample("business error", #"{"success":false,"message":"用户名或密码错误","code":500,"result":null,"timestamp":1700000000000}"#),
                    DialectSample("auth error", #"{"success":false,"message":"Token失效，请重新登录","code":401,"result":null,"timestamp":1700000000000}"#)]
        case "alipay":
            return [DialectSample("success", #"{"alipay_trade_query_response":{"code":"10000","msg":"Success","trade_no":"2013112011001004330000121536","out_trade_no":"6823789339978248","total_amount":"88.88"},"sign":"ERITJKEIJKJHKKKKKKKHJEREEEEEEEEEEE"}"#),
                    DialectSample("business error", #"{"alipay_trade_query_response":{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_NOT_EXIST","sub_msg":"交易不存在"},"sign":"ERITJKEIJKJHKKKKKKKHJEREEEEEEEEEEE"}"#),
                    DialectSample("auth error", #"{"error_response":{"code":"20001","msg":"Insufficient Token Permissions","sub_code":"aop.invalid-auth-token","sub_msg":"无效的访问令牌"},"sign":"ERITJKEIJKJHKKKKKKKHJEREEEEEEEEEEE"}"#)]
        case "error-object":
            return [DialectSample("success", #"{"data":{"id":"evt_1","items":[1,2]}}"#),
                    DialectSample("whole body", #"{"id":"ch_3MmlLrLkdIwHu7ix0snN0B15","object":"charge","amount":1099}"#),
                    DialectSample("Stripe list", #"{"object":"list","url":"/v1/charges","has_more":false,"data":[{"id":"ch_3MmlLrLkdIwHu7ix0snN0B15","object":"charge","amount":1099,"currency":"usd"}]}"#),
                    DialectSample("business error", #"{"error":{"code":404,"message":"File not found"}}"#),
                    DialectSample("Stripe not found", #"{"error":{"code":"resource_missing","doc_url":"https://stripe.com/docs/error-codes/resource-missing","message":"No such customer: 'cus_NffrFeUfNV2Hib'","param":"customer","type":"invalid_request_error"}}"#, status: 404)]
        case "rest":
            return [DialectSample("list", ##"[{"id":1,"name":"Ada"},{"id":2,"name":"Grace"}]"##),
                    DialectSample("object", ##"{"id":1,"name":"Ada","balance":12345678901234567890}"##, status: 201)]
                + FailureShape.allCases.map(\.sample)
                + [DialectSample("auth error", ##"{"error":"invalid_token","error_description":"The access token expired"}"##, status: 401),
                   DialectSample("server error", ##"{"message":"SQLSTATE[42S02]: Base table or view not found"}"##, status: 500)]
        case "tencent":
            return [DialectSample("success", #"{"Response":{"TotalCount":1,"InstanceStatusSet":[{"InstanceId":"ins-5d8a23rs","InstanceState":"RUNNING"}],"RequestId":"b5b41468-520d-4192-b42f-595cc34b6c1c"}}"#),
                    DialectSample("business error", #"{"Response":{"Error":{"Code":"InvalidInstanceId.NotFound","Message":"实例`ins-5d8a23rs`不存在。"},"RequestId":"4f6e3bd3-8d49-4ed6-b2e7-9e6d1b7a2c11"}}"#),
                    DialectSample("auth error", #"{"Response":{"Error":{"Code":"AuthFailure.SignatureFailure","Message":"The provided credentials could not be validated. Please check your signature is correct."},"RequestId":"ed93f3cb-f35e-473f-b9f3-0d451b8b79c6"}}"#)]
        case "baidu":
            return [DialectSample("success", #"{"log_id":1787326409348117203,"words_result_num":2,"words_result":[{"words":" TSINGTAO"},{"words":"青島睥酒"}]}"#),
                    DialectSample("business error", #"{"error_code":17,"error_msg":"Open api daily request limit reached","log_id":1787326409348117204}"#),
                    DialectSample("auth error", #"{"error_code":110,"error_msg":"Access token invalid or no longer valid"}"#)]
        case "slack":
            return [DialectSample("paged list", #"{"ok":true,"channels":[{"id":"C012AB3CD","name":"general","is_channel":true}],"response_metadata":{"next_cursor":"dGVhbTpDMDYxRkE1UEI="}}"#),
                    DialectSample("success with a warning", #"{"ok":true,"channel":"C123ABC456","ts":"1503435956.000247","message":{"type":"message","text":"Here's a message for you"},"warning":"superfluous_charset","response_metadata":{"warnings":["superfluous_charset"]}}"#),
                    DialectSample("business error", #"{"ok":false,"error":"missing_scope","needed":"chat:write","provided":"channels:read"}"#),
                    DialectSample("auth error", #"{"ok":false,"error":"invalid_auth"}"#)]
        case "telegram":
            return [DialectSample("success", #"{"ok":true,"result":{"id":7012345678,"is_bot":true,"first_name":"Peel","username":"peel_demo_bot","can_join_groups":true,"can_read_all_group_messages":false,"supports_inline_queries":false}}"#),
                    DialectSample("result true", #"{"ok":true,"result":true,"description":"Webhook was set"}"#),
                    DialectSample("bad request", #"{"ok":false,"error_code":400,"description":"Bad Request: chat not found"}"#, status: 400),
                    DialectSample("rate limited", #"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 35","parameters":{"retry_after":35}}"#, status: 429),
                    DialectSample("auth error", #"{"ok":false,"error_code":401,"description":"Unauthorized"}"#, status: 401)]
        case "gin-vue-admin":
            return [DialectSample("success", #"{"code":0,"data":{"list":[{"ID":1,"userName":"admin","nickName":"Mr.奇淼"}],"total":1,"page":1,"pageSize":10},"msg":"获取成功"}"#),
                    DialectSample("business error", #"{"code":7,"data":{},"msg":"获取失败"}"#),
                    DialectSample("HTTP 401", #"{"code":7,"data":{"reload":true},"msg":"未登录或非法访问"}"#, status: 401)]
        case "abp":
            return [DialectSample("success", #"{"result":{"totalCount":1,"items":[{"userName":"admin","name":"admin","surname":"admin","emailAddress":"admin@defaulttenant.com","isActive":true,"id":1}]},"targetUrl":null,"success":true,"error":null,"unAuthorizedRequest":false,"__abp":true}"#),
                    DialectSample("validation error", #"{"result":null,"targetUrl":null,"success":false,"error":{"code":0,"message":"Your request is not valid!","details":"The following errors were detected during validation.\r\n - The Name field is required.\r\n","validationErrors":[{"message":"The Name field is required.","members":["name"]}]},"unAuthorizedRequest":false,"__abp":true}"#, status: 400),
                    DialectSample("auth error", #"{"result":null,"targetUrl":null,"success":false,"error":{"code":0,"message":"当前用户没有登录到系统！","details":null,"validationErrors":null},"unAuthorizedRequest":true,"__abp":true}"#),
                    DialectSample("permission", #"{"result":null,"targetUrl":null,"success":false,"error":{"code":0,"message":"Required permissions are not granted. At least one of these permissions must be granted: Pages.Users","details":null,"validationErrors":null},"unAuthorizedRequest":true,"__abp":true}"#, status: 403)]
        default:
            return []
        }
    }
}

extension Dialect {
    /// Which backends a preset is for, in one line.
    public static func summary(for preset: String) -> String {
        switch preset {
        case "peel": "the seed's envelope: code 0 is success, message, data; code 7 logs the user out"
        case "ruoyi": "RuoYi-Vue AjaxResult and TableDataInfo: code 200 or absent, msg, data or the members beside it; 401"
        case "yudao": "ruoyi-vue-pro (yudao) CommonResult: code 0, msg, data; 401"
        case "alibaba": "Alibaba Java manual codes (youlai-boot): code \"00000\", msg, data; \"A0230\", \"A0231\""
        case "wechat": "WeChat server APIs: errcode absent or 0, errmsg, the rest of the object; 40001, 40014, 42001"
        case "jsend": "JSend: status success, fail or error; data; message"
        case "antd": "Ant Design Pro / umi: success flag, errorCode, errorMessage, data; showType kept"
        case "jeecg": "JeecgBoot Result: success flag decides, code reported, message, result; timestamp ignored; 401"
        case "alipay": "Alipay OpenAPI: the *_response member or error_response, code \"10000\", sub_msg then msg; \"20001\""
        case "error-object": "Google JSON style, Stripe, Strapi: an error object fails, else data, or the whole body when members sit beside it"
        case "rest": "REST without an envelope: the HTTP status decides, any JSON on a 2xx is the answer, failures read by their shape"
        case "tencent": "Tencent Cloud API 3.0: Response is the answer, Response.Error the failure; \"AuthFailure.*\""
        case "baidu": "Baidu AI open platform: error_code absent or 0, error_msg, the rest of the object (log_id kept); 110, 111; 17, 18 are 429"
        case "slack": "Slack Web API: ok flag, string error codes, the rest of the object; invalid_auth, not_authed, token_expired, token_revoked"
        case "telegram": "Telegram Bot API: ok flag, result, error_code, description; parameters kept; 401"
        case "gin-vue-admin": "gin-vue-admin: code 0, msg, data; code 7 is an ordinary failure (its sign-in errors are HTTP 401)"
        case "abp": "ASP.NET Boilerplate AjaxResponse: success flag, result, error.message; unAuthorizedRequest signs out unless 403"
        default: ""
        }
    }
}

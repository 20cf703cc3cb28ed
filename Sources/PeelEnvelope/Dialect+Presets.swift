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
    /// `decline_code`, Google's `errors`); otherwise `data` when present, else the body minus `error`.
    public static let errorObject = Dialect(
        preset: "error-object", code: "error.code", success: .errorMember("error"), messages: ["error.message"],
        payload: .member("data"), extras: ["error"])

    /// Every preset, in the README's order.
    public static let presets: [Dialect] = [peel, ruoyi, yudao, alibaba, wechat, jsend, antd, jeecg, alipay, errorObject]

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
                    DialectSample("business error", #"{"error":{"code":404,"message":"File not found"}}"#)]
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
        case "error-object": "Google JSON style, Stripe, Strapi: an error object fails, else data, else the whole body"
        default: ""
        }
    }
}

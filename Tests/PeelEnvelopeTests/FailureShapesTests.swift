import PeelEnvelope
import XCTest

/// Failure bodies of common frameworks, written as each one answers, read when the dialect reads no
/// envelope: message, code, field errors and the members kept under `upstream`.
final class FailureShapesTests: XCTestCase {
    /// The problem Peel answers for `body` at `status`.
    func problem(_ body: String, status: Int, type: String = "application/json", dialect: Dialect = .peel) -> Problem? {
        var config = EnvelopeConfig()
        config.dialect = dialect
        let answer = UpstreamAnswer(status: status, contentType: type, path: "/", isHead: false)
        guard case .problem(let p) = judge(answer, body: Array(body.utf8), config: config) else { return nil }
        return p
    }

    func errors(_ p: Problem?) -> String? { p?.errors.map { String(decoding: $0, as: UTF8.self) } }

    func kept(_ p: Problem?) -> [String] { p?.upstream.map { $0.name + "=" + String(decoding: $0.raw, as: UTF8.self) } ?? [] }

    // MARK: RFC 9457

    func testProblem_keepsDetailTypeAndExtensions_andItsOwnErrorsByteForByte() {
        let body = ##"{"type":"https://example.com/probs/out-of-credit","title":"You do not have enough credit.","status":400,"detail":"Your current balance is 30, but that costs 50.","instance":"/account/12345/msgs/abc","balance":30,"errors":[{"detail":"must be a positive integer","pointer":"#/age"}]}"##
        let p = problem(body, status: 400, type: "application/problem+json")
        XCTAssertEqual(p?.kind, .upstreamError)
        XCTAssertEqual(p?.status, 400)
        XCTAssertEqual(p?.detail, "Your current balance is 30, but that costs 50.")
        XCTAssertEqual(p?.code, -104)
        XCTAssertEqual(errors(p), ##"[{"detail":"must be a positive integer","pointer":"#/age"}]"##)
        XCTAssertEqual(kept(p), [##"type="https://example.com/probs/out-of-credit""##, ##"title="You do not have enough credit.""##,
                                 ##"instance="/account/12345/msgs/abc""##, "balance=30"])
    }

    func testProblem_withoutItsMediaType_isRecognisedByTypeAndTitle() {
        let p = problem(##"{"type":"about:blank","title":"Not Found","status":404}"##, status: 404)
        XCTAssertEqual(p?.detail, "Not Found")
        XCTAssertEqual(kept(p), [##"type="about:blank""##])
    }

    func testProblem_typeURIWithStatus_isAProblem_butAWordTypeIsNot() {
        let p = problem(##"{"type":"https://errors.example.com/quota","status":429}"##, status: 429)
        XCTAssertEqual(kept(p), [##"type="https://errors.example.com/quota""##])
        XCTAssertTrue(p?.reason?.hasSuffix("read as problem") == true)
        let q = problem(##"{"type":"error","status":500,"message":"Order 7 is locked"}"##, status: 409)
        XCTAssertEqual(q?.detail, "Order 7 is locked")
        XCTAssertTrue(q?.reason?.hasSuffix("read as message") == true)
    }

    func testASPNetValidationProblem_errorsMapBecomesPointers() {
        // ASP.NET Core's ValidationProblemDetails, with System.Text.Json's member paths.
        let body = ##"{"type":"https://tools.ietf.org/html/rfc9110#section-15.5.1","title":"One or more validation errors occurred.","status":400,"errors":{"Name":["The Name field is required."],"$.items[0].price":["The JSON value could not be converted to System.Decimal."]},"traceId":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}"##
        let p = problem(body, status: 400, type: "application/problem+json; charset=utf-8")
        XCTAssertEqual(p?.detail, "One or more validation errors occurred.")
        XCTAssertEqual(errors(p), ##"[{"detail":"The Name field is required.","pointer":"#/Name"},{"detail":"The JSON value could not be converted to System.Decimal.","pointer":"#/items/0/price"}]"##)
        XCTAssertEqual(kept(p).map { String($0.prefix(8)) }, ["type=\"ht", "traceId="])
    }

    // MARK: Error objects

    func testGoogleAIP193_codeIsTheStatusString_andFieldViolationsArePointers() {
        let body = ##"{"error":{"code":400,"message":"Invalid book.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"book.title","description":"Title must not be empty."}]}]}}"##
        let p = problem(body, status: 400)
        XCTAssertEqual(p?.code, "INVALID_ARGUMENT")
        XCTAssertEqual(p?.detail, "Invalid book.")
        XCTAssertEqual(errors(p), ##"[{"detail":"Title must not be empty.","pointer":"#/book/title"}]"##)
        XCTAssertEqual(kept(p), ["code=400"])
    }

    func testMicrosoftError_codeTargetAndInnerError() {
        let body = ##"{"error":{"code":"BadArgument","message":"Multiple errors in ContactInfo data","target":"ContactInfo","details":[{"code":"NullValue","target":"PhoneNumber","message":"Phone number must not be null"},{"code":"MalformedValue","target":"Address","message":"Address is not valid"}],"innererror":{"code":"ContactInfoError"}}}"##
        let p = problem(body, status: 400)
        XCTAssertEqual(p?.code, "BadArgument")
        XCTAssertEqual(errors(p), ##"[{"detail":"Phone number must not be null","pointer":"#/PhoneNumber"},{"detail":"Address is not valid","pointer":"#/Address"}]"##)
        XCTAssertEqual(kept(p), [##"target="ContactInfo""##, ##"innererror={"code":"ContactInfoError"}"##])
    }

    func testStripeError_paramPointsAtTheField_andTheRestIsKept() {
        let body = ##"{"error":{"code":"card_declined","decline_code":"insufficient_funds","doc_url":"https://stripe.com/docs/error-codes/card-declined","message":"Your card has insufficient funds.","param":"card[number]","type":"card_error"}}"##
        let p = problem(body, status: 402)
        XCTAssertEqual(p?.status, 402)
        XCTAssertEqual(p?.code, "card_declined")
        XCTAssertEqual(errors(p), ##"[{"detail":"Your card has insufficient funds.","pointer":"#/card/number"}]"##)
        XCTAssertEqual(kept(p).map { $0.split(separator: "=")[0] }, ["decline_code", "doc_url", "type"])
    }

    // MARK: OAuth and 401

    func testOAuthTokenError_codeIsTheErrorString() {
        let p = problem(##"{"error":"invalid_grant","error_description":"Refresh token expired","error_uri":"https://id.example.com/errors#invalid_grant"}"##,
                        status: 400)
        XCTAssertEqual(p?.kind, .upstreamError)
        XCTAssertEqual(p?.code, "invalid_grant")
        XCTAssertEqual(p?.detail, "Refresh token expired")
        XCTAssertEqual(kept(p), [##"error_uri="https://id.example.com/errors#invalid_grant""##])
    }

    func testUpstream401_isAuthExpired_whateverTheBody() {
        XCTAssertEqual(problem(##"{"error":"invalid_token"}"##, status: 401)?.kind, .authExpired)
        XCTAssertEqual(problem(##"{"error":"invalid_token"}"##, status: 401)?.code, "invalid_token")
        XCTAssertEqual(problem("<html>Unauthorized</html>", status: 401)?.kind, .authExpired)
        XCTAssertNil(problem("<html>Unauthorized</html>", status: 401)?.code)
        // An envelope the dialect reads keeps its words, and a 401 is still auth-expired.
        let p = problem(##"{"code":1001,"message":"签名已过期","data":null}"##, status: 401)
        XCTAssertEqual(p?.kind, .authExpired)
        XCTAssertEqual(p?.code, 1001)
        XCTAssertEqual(p?.detail, "签名已过期")
    }

    // MARK: Frameworks

    func testLaravelValidation_underTheDefaultDialect_keepsMessageAndDottedFields() {
        let body = ##"{"message":"The email field is required. (and 1 more error)","errors":{"email":["The email field is required."],"items.0.name":["The items.0.name field is required."]}}"##
        let p = problem(body, status: 422)
        XCTAssertEqual(p?.status, 422)
        XCTAssertEqual(p?.detail, "The email field is required. (and 1 more error)")
        XCTAssertEqual(errors(p), ##"[{"detail":"The email field is required.","pointer":"#/email"},{"detail":"The items.0.name field is required.","pointer":"#/items/0/name"}]"##)
        XCTAssertEqual(kept(p), [])
    }

    func testRailsErrors_withoutMessage_takesTheFirstFieldMessage() {
        let p = problem(##"{"errors":{"email":["can't be blank","is invalid"]}}"##, status: 422)
        XCTAssertEqual(p?.detail, "can't be blank")
        XCTAssertEqual(errors(p), ##"[{"detail":"can't be blank","pointer":"#/email"},{"detail":"is invalid","pointer":"#/email"}]"##)
    }

    func testDRFFieldMap_nestedSerializersAndNonFieldErrors() {
        let body = ##"{"email":["Enter a valid email address."],"address":{"city":["This field is required."]},"items":[{},{"name":["This field may not be blank."]}],"non_field_errors":["The two passwords do not match."]}"##
        let p = problem(body, status: 400)
        XCTAssertEqual(p?.detail, "Enter a valid email address.")
        XCTAssertEqual(errors(p), ##"[{"detail":"Enter a valid email address.","pointer":"#/email"},{"detail":"This field is required.","pointer":"#/address/city"},{"detail":"This field may not be blank.","pointer":"#/items/1/name"},{"detail":"The two passwords do not match."}]"##)
    }

    func testDRFDetail_isTheMessage() {
        let p = problem(##"{"detail":"Not found."}"##, status: 404)
        XCTAssertEqual(p?.detail, "Not found.")
        XCTAssertEqual(p?.code, -104)
        XCTAssertNil(p?.errors)
    }

    func testFastAPIValidation_bodyPointersAndQueryParameters() {
        let body = ##"{"detail":[{"type":"missing","loc":["body","items",0,"name"],"msg":"Field required","input":{"quantity":0}},{"type":"greater_than_equal","loc":["query","limit"],"msg":"Input should be greater than or equal to 1","input":"0","ctx":{"ge":1}}]}"##
        let p = problem(body, status: 422)
        XCTAssertEqual(p?.detail, "Field required")
        XCTAssertEqual(errors(p), ##"[{"detail":"Field required","pointer":"#/items/0/name"},{"detail":"Input should be greater than or equal to 1","parameter":"limit"}]"##)
        XCTAssertEqual(kept(p), [])
    }

    func testSpringBootValidation_bindingErrorsAndKeptAttributes() {
        let body = ##"{"timestamp":"2026-12-05T03:10:00.000+00:00","status":400,"error":"Bad Request","message":"Validation failed for object='userDto'. Error count: 1","errors":[{"codes":["NotBlank.userDto.email","NotBlank.email"],"arguments":null,"defaultMessage":"must not be blank","objectName":"userDto","field":"email","rejectedValue":"","bindingFailure":false,"code":"NotBlank"}],"path":"/api/users"}"##
        let p = problem(body, status: 400)
        XCTAssertEqual(p?.detail, "Validation failed for object='userDto'. Error count: 1")
        XCTAssertEqual(errors(p), ##"[{"detail":"must not be blank","pointer":"#/email"}]"##)
        XCTAssertEqual(kept(p), [##"timestamp="2026-12-05T03:10:00.000+00:00""##, ##"error="Bad Request""##, ##"path="/api/users""##])
    }

    func testSpringBootDefault_withoutMessage_takesTheReasonPhrase() {
        let p = problem(##"{"timestamp":"2026-12-05T03:10:00.000+00:00","status":404,"error":"Not Found","path":"/api/x"}"##, status: 404)
        XCTAssertEqual(p?.detail, "Not Found")
        XCTAssertEqual(kept(p), [##"timestamp="2026-12-05T03:10:00.000+00:00""##, ##"path="/api/x""##])
    }

    // kratos and Flask write a `code` member, which the default dialect reads as its own envelope's:
    // these run under `rest`, whose dialect reads nothing.
    func testKratos_codeIsTheReason_andMetadataIsKept() {
        let p = problem(##"{"code":404,"reason":"USER_NOT_FOUND","message":"user 42 not found","metadata":{"uid":"42"}}"##, status: 404, dialect: .rest)
        XCTAssertEqual(p?.code, "USER_NOT_FOUND")
        XCTAssertEqual(p?.detail, "user 42 not found")
        XCTAssertEqual(kept(p), [##"metadata={"uid":"42"}"##])
    }

    func testNestJSClassValidator_messageListBecomesFieldlessErrors() {
        let p = problem(##"{"message":["email must be an email","password should not be empty"],"error":"Bad Request","statusCode":400}"##, status: 400)
        XCTAssertEqual(p?.detail, "email must be an email")
        XCTAssertEqual(errors(p), ##"[{"detail":"email must be an email"},{"detail":"password should not be empty"}]"##)
        XCTAssertEqual(kept(p), [##"error="Bad Request""##])
    }

    func testGraphQLErrors_firstMessageAndExtensionsCode() {
        let p = problem(##"{"errors":[{"message":"Not authorised!","locations":[{"line":2,"column":3}],"path":["me"],"extensions":{"code":"FORBIDDEN"}}],"data":null}"##,
                        status: 403)
        XCTAssertEqual(p?.code, "FORBIDDEN")
        XCTAssertEqual(p?.detail, "Not authorised!")
        XCTAssertNil(p?.errors)
        XCTAssertEqual(kept(p), ["data=null"])
    }

    func testJSONAPIErrors_sourcePointerIsKept() {
        let p = problem(##"{"errors":[{"status":"422","code":"invalid","source":{"pointer":"/data/attributes/firstName"},"title":"Invalid Attribute","detail":"First name must contain at least two characters."}]}"##,
                        status: 422)
        XCTAssertEqual(p?.code, "invalid")
        XCTAssertEqual(p?.detail, "First name must contain at least two characters.")
        XCTAssertEqual(errors(p), ##"[{"detail":"First name must contain at least two characters.","pointer":"#/data/attributes/firstName"}]"##)
    }

    func testExpressValidator_bodyFieldsAndQueryParameters() {
        let p = problem(##"{"errors":[{"type":"field","value":"x","msg":"Invalid value","path":"email","location":"body"},{"type":"field","value":"-1","msg":"Must be positive","path":"page","location":"query"}]}"##,
                        status: 400)
        XCTAssertEqual(p?.detail, "Invalid value")
        XCTAssertEqual(errors(p), ##"[{"detail":"Invalid value","pointer":"#/email"},{"detail":"Must be positive","parameter":"page"}]"##)
    }

    func testFlaskErrorHandler_descriptionIsTheMessage_andTheStatusMirrorIsDropped() {
        let p = problem(##"{"code": 404, "name": "Not Found", "description": "The requested URL was not found on the server."}"##, status: 404,
                        dialect: .rest)
        XCTAssertEqual(p?.detail, "The requested URL was not found on the server.")
        XCTAssertEqual(p?.code, -104)
        XCTAssertEqual(kept(p), [##"name="Not Found""##])
    }

    // MARK: Escapes, pointers, privacy

    func testMessagesAreCopiedAsWritten_andPointersEscapedForAFragment() {
        let body = ##"{"message":"Donn\u00e9es invalides","errors":{"a/b~c":["\u00e9tait \"vide\""],"名字":["必填"],"":["blank key"]}}"##
        let p = problem(body, status: 422)
        XCTAssertEqual(p?.detail, "Données invalides")
        XCTAssertEqual(errors(p), ##"[{"detail":"\u00e9tait \"vide\"","pointer":"#/a~1b~0c"},{"detail":"必填","pointer":"#/%E5%90%8D%E5%AD%97"},{"detail":"blank key","pointer":"#"}]"##)
    }

    func testDottedKeys_shortAndLong_plainAndNot_giveTheSamePointers() {
        // 4 to 16 plain bytes take a 16-byte path; the rest go byte by byte: both must agree.
        let keys: [(String, String)] = [
            ("items.0.name", "#/items/0/name"), ("a.b", "#/a/b"), ("user_name-x.y", "#/user_name-x/y"),
            ("x..y", "#/x/y"), (".lead", "#/lead"), ("trail.", "#/trail"), ("abcdefghij.klmno", "#/abcdefghij/klmno"),
            ("abcdefghij.klmnop", "#/abcdefghij/klmnop"), ("Ab9_", "#/Ab9_"), ("a b.c", "#/a%20b/c"), ("k[0].v", "#/k/0/v"),
            ("é.x", "#/%C3%A9/x"), ("a~b.c/d", "#/a~0b/c~1d"),
        ]
        for (key, pointer) in keys {
            let p = problem(##"{"errors":{"\##(key)":["bad"]}}"##, status: 422)
            XCTAssertEqual(errors(p), ##"[{"detail":"bad","pointer":"\##(pointer)"}]"##, key)
        }
    }

    func testALongKeyInFrontOfManyMessages_staysWithinTheErrorsBounds_andSaysHowManyWereLeftOut() {
        // 41 KB in: each of 10,000 messages would repeat a 3,000-byte pointer (30 MB out).
        let key = String(repeating: "%", count: 1_000)
        let messages = Array(repeating: #""x""#, count: 10_000).joined(separator: ",")
        let p = problem(##"{"message":"m","errors":{"\##(key)":[\##(messages)]}}"##, status: 422)
        let bytes = p?.errors?.count ?? 0
        XCTAssertGreaterThan(bytes, 0)
        XCTAssertLessThanOrEqual(bytes, 1 << 20)
        let kept = (errors(p) ?? "").components(separatedBy: #"{"detail":"#).count - 1
        XCTAssertGreaterThan(kept, 100)
        XCTAssertEqual(kept + (p?.errorsOmitted ?? 0), 10_000)
        let doc = String(decoding: renderProblem(p!, requestId: "r", language: .english, typeBase: "urn:peel:problem:"), as: UTF8.self)
        XCTAssertTrue(doc.contains(#","errors_omitted":\#(p!.errorsOmitted)"#), String(doc.suffix(80)))
    }

    func testMoreThan10000FieldErrors_keepTheFirst10000() {
        let fields = (0..<10_050).map { #""f\#($0)":["bad"]"# }.joined(separator: ",")
        let p = problem(##"{"errors":{\##(fields)}}"##, status: 422)
        XCTAssertEqual(p?.errorsOmitted, 50)
        XCTAssertTrue(errors(p)?.hasSuffix(##"{"detail":"bad","pointer":"#/f9999"}]"##) == true)
    }

    func testFieldMapsNestedPast16Levels_areLeftOut_theShallowerOnesKept() {
        // DRF's nested serializers, 20 deep: a message at every level.
        var body = #"["deep"]"#
        for _ in 0..<20 { body = #"{"a":\#(body),"m":["here"]}"# }
        let p = problem(body, status: 400)
        let text = errors(p) ?? ""
        XCTAssertTrue(text.hasSuffix(##"{"detail":"here","pointer":"#/m"}]"##), text)
        XCTAssertFalse(text.contains("deep"), text)
        // The map itself and 16 levels below it.
        XCTAssertEqual(text.components(separatedBy: "here").count - 1, 17)
    }

    func test5xxFieldErrors_areNotWrittenOut() {
        let p = problem(#"{"message":"boom","errors":{"a":["b"]}}"#, status: 500)
        XCTAssertNil(p?.errors)
        XCTAssertEqual(p?.privateMessage, "boom")
    }

    func testEmptyErrors_fallBackToTheMessage() {
        let p = problem(##"{"message":"Unprocessable","errors":[]}"##, status: 422)
        XCTAssertEqual(p?.detail, "Unprocessable")
        XCTAssertNil(p?.errors)
        XCTAssertEqual(kept(p), ["errors=[]"])
    }

    func test5xx_readByAShape_showsNothing_andKeepsTheMessageForTheLog() {
        let p = problem(##"{"message":"SQLSTATE[42S02]: Table 'shop.orders' doesn't exist","errors":{"sql":["select * from orders"]}}"##,
                        status: 500)
        XCTAssertEqual(p?.status, 502)
        XCTAssertNil(p?.detail)
        XCTAssertEqual(p?.code, -104)
        XCTAssertNil(p?.errors)
        XCTAssertEqual(p?.upstream, [])
        XCTAssertEqual(p?.privateMessage, "SQLSTATE[42S02]: Table 'shop.orders' doesn't exist")
    }

    func test5xx_exposedByTheDialect_showsItsWords() {
        var d = Dialect.rest
        d.exposes5xxMessages = true
        let p = problem(##"{"message":"Payment provider down","code":"PSP_DOWN"}"##, status: 503, dialect: d)
        XCTAssertEqual(p?.detail, "Payment provider down")
        XCTAssertEqual(p?.code, "PSP_DOWN")
        XCTAssertNil(p?.privateMessage)
    }

    func test5xx_readByTheDialect_keepsTodaysRules() {
        let p = problem(##"{"code":5001,"message":"库存服务繁忙"}"##, status: 500)
        XCTAssertEqual(p?.detail, "库存服务繁忙")
        XCTAssertEqual(p?.code, 5001)
    }

    func testDuplicateMessageMember_readsNothing() {
        let p = problem(##"{"message":"a","message":"b"}"##, status: 400)
        XCTAssertNil(p?.detail)
        XCTAssertEqual(p?.code, -104)
    }

    func testNotJSONOrNotAnObject_readsNothing() {
        XCTAssertNil(problem("<html><body>Bad Gateway</body></html>", status: 400)?.detail)
        XCTAssertNil(problem(##"["a","b"]"##, status: 400)?.detail)
        XCTAssertNil(problem(##"{"message":"cut"##, status: 400)?.detail)
    }

    // MARK: A dialect's own field errors

    func testDialectFieldErrors_fromAListWithNamedMembers() {
        var d = Dialect.peel
        d.fieldErrors = FieldErrorRule(path: "data.violations", message: "reason", field: "name")
        let p = problem(##"{"code":40001,"message":"参数错误","data":{"violations":[{"name":"mobile","reason":"手机号格式不正确"}]}}"##, status: 200, dialect: d)
        XCTAssertEqual(p?.kind, .businessError)
        XCTAssertEqual(errors(p), ##"[{"detail":"手机号格式不正确","pointer":"#/mobile"}]"##)
    }

    func testDialectFieldErrors_fromAMap() {
        var d = Dialect.yudao
        d.fieldErrors = FieldErrorRule(path: "data")
        let p = problem(##"{"code":400,"msg":"请求参数不正确","data":{"user.nickname":["不能为空"]}}"##, status: 200, dialect: d)
        XCTAssertEqual(errors(p), ##"[{"detail":"不能为空","pointer":"#/user/nickname"}]"##)
    }

    // MARK: The status rule

    func testRest_anyJSONOn2xxIsTheAnswerByteForByte() {
        var config = EnvelopeConfig()
        config.dialect = .rest
        let ok = UpstreamAnswer(status: 200, contentType: "application/json", path: "/", isHead: false)
        for body in [##"[1,2,{"a":1.10}]"##, ##""text""##, "42", "true", "false", "null", "{\"big\":12345678901234567890}\n"] {
            XCTAssertEqual(judge(ok, body: Array(body.utf8), config: config), .unwrap(status: 200, data: 0..<body.utf8.count), body)
        }
        XCTAssertEqual(judge(ok, body: [0xEF, 0xBB, 0xBF] + Array("[]".utf8), config: config), .unwrap(status: 200, data: 3..<5))
        XCTAssertEqual(judge(ok, body: [], config: config), .passthrough)
        guard case .problem(let p) = judge(ok, body: Array("<html>".utf8), config: config) else { return XCTFail() }
        XCTAssertEqual(p.kind, .badUpstreamFormat)
        XCTAssertEqual(p.code, -100)
    }
}

import PeelEnvelope
import XCTest

/// Every branch of judge(): passthrough, unwrap, auth, business, bad format, upstream errors.
/// `PeelEnvelope.judge` without the problem's `reason`: these tests are about the verdict; the
/// reasons have their own (DiagnosisTests).
private func judge(_ answer: UpstreamAnswer, body: [UInt8], config: EnvelopeConfig) -> Verdict {
    guard case .problem(var p) = PeelEnvelope.judge(answer, body: body, config: config) else {
        return PeelEnvelope.judge(answer, body: body, config: config)
    }
    p.reason = nil
    return .problem(p)
}

final class JudgeTests: XCTestCase {
    private let config = EnvelopeConfig()

    private func verdict(
        _ body: String, status: Int = 200, contentType: String? = "application/json", path: String = "/api/x",
        isHead: Bool = false, config: EnvelopeConfig? = nil
    ) -> Verdict {
        judge(
            UpstreamAnswer(status: status, contentType: contentType, path: path, isHead: isHead), body: Array(body.utf8),
            config: config ?? self.config)
    }

    private func formatError(_ status: Int = 200) -> Verdict {
        .problem(Problem(kind: .badUpstreamFormat, status: 502, code: -100, detail: nil, upstreamStatus: status))
    }

    /// Asserts the body unwraps to exactly `data`'s bytes.
    private func assertUnwraps(_ data: String, status: Int = 200, file: StaticString = #filePath, line: UInt = #line) {
        let body = Array(("{\"code\":0,\"message\":\"ok\",\"data\":" + data + "}").utf8)
        let result = judge(
            UpstreamAnswer(status: status, contentType: "text/html", path: "/", isHead: false), body: body, config: config)
        guard case .unwrap(let unwrappedStatus, let range?) = result else {
            return XCTFail("expected unwrap, got \(result)", file: file, line: line)
        }
        XCTAssertEqual(unwrappedStatus, status, file: file, line: line)
        XCTAssertEqual(Array(body[range]), Array(data.utf8), file: file, line: line)
    }

    // MARK: unwrap, byte-exact

    func testUnwrap_whenDataIsDecimalWithTrailingZero() { assertUnwraps("1.10") }
    func testUnwrap_whenDataIsIntegerBeyondInt64() { assertUnwraps("12345678901234567890") }
    func testUnwrap_whenDataIsNegativeZero() { assertUnwraps("-0.0") }
    func testUnwrap_whenDataOverflowsDouble() { assertUnwraps("1e400") }
    func testUnwrap_whenDataIsEscapedString() { assertUnwraps(#""a\"b\\c\/d\u00e9\ud83d\ude00\n""#) }
    func testUnwrap_whenDataHoldsLoneSurrogateEscapes() {
        assertUnwraps(#"{"cut":"emoji \ud83d","low":"\udc00"}"#)
        // Over 512 bytes: the block kernels judge it.
        assertUnwraps(#"["\ud83d","# + String(repeating: #""\udc00 x","#, count: 80) + "1]")
    }
    func testProblem_messageWithLoneSurrogateIsDecodedToReplacementCharacter() {
        let result = verdict(#"{"code":3,"message":"cut \ud83d here \udc00 \ud83d\ude00"}"#)
        guard case .problem(let p) = result else { return XCTFail("\(result)") }
        XCTAssertEqual(p.detail, "cut \u{FFFD} here \u{FFFD} 😀")
    }
    func testUnwrap_whenDataIsNonASCII() { assertUnwraps("\"你好，世界 😀 é\"") }
    func testUnwrap_whenDataIsArray() { assertUnwraps(#"[1,"two",3.0,null,true,false]"#) }
    func testUnwrap_whenDataIsNestedWithKeyOrderKept() { assertUnwraps(#"{"z":1,"a":{"y":[{"k":"v"}],"b":{}},"m":[]}"#) }
    func testUnwrap_whenDataHasInnerWhitespace() { assertUnwraps("[ 1 ,\n\t2 ]") }
    func testUnwrap_whenDataIsTrue() { assertUnwraps("true") }
    func testUnwrap_whenDataIsEmptyString() { assertUnwraps("\"\"") }
    func testUnwrap_keepsUpstream2xxStatus() { assertUnwraps("{\"id\":9}", status: 201) }

    func testUnwrap_whenDataIsNull_givesRangeOfNull() {
        let body = Array(#"{"code":0,"data":null}"#.utf8)
        let result = judge(UpstreamAnswer(status: 200, contentType: nil, path: "/", isHead: false), body: body, config: config)
        XCTAssertEqual(result, .unwrap(status: 200, data: 17..<21))
        XCTAssertEqual(String(decoding: body[17..<21], as: UTF8.self), "null")
    }

    func testUnwrap_whenDataIsAbsent_gives204WithoutRange() {
        XCTAssertEqual(verdict(#"{"code":0,"message":"done"}"#), .unwrap(status: 204, data: nil))
        XCTAssertEqual(verdict(#"{"code":0}"#, status: 201), .unwrap(status: 204, data: nil))
    }

    func testUnwrap_rangeExcludesSurroundingWhitespace() {
        let body = #"{ "data" :  [1]  , "code" : 0 }"#
        guard case .unwrap(200, let range?) = verdict(body) else { return XCTFail() }
        XCTAssertEqual(String(decoding: Array(body.utf8)[range], as: UTF8.self), "[1]")
    }

    func testUnwrap_whenBodyIsPrettyPrinted() {
        let body =
            "\u{FEFF}\r\n{\r\n\t\"code\" :\t0 ,\r\n\t\"message\" : \"ok\",\r\n\t\"data\" : {\r\n\t\t\"a\" : [ 1 , 2 ]\r\n\t}\r\n}\r\n"
        guard case .unwrap(200, let range?) = verdict(body) else { return XCTFail() }
        XCTAssertEqual(String(decoding: Array(body.utf8)[range], as: UTF8.self), "{\r\n\t\t\"a\" : [ 1 , 2 ]\r\n\t}")
    }

    func testUnwrap_whenCodeIsStringZero() {
        XCTAssertEqual(verdict(#"{"code":"0","data":1}"#), .unwrap(status: 200, data: 19..<20))
    }

    func testUnwrap_whenCodeIsEscapedStringZero() {
        guard case .unwrap(200, _) = verdict(#"{"code":"\u0030","data":1}"#) else { return XCTFail() }
    }

    func testUnwrap_whenCodeIsNegativeZero() {
        guard case .unwrap(200, _) = verdict(#"{"code":-0,"data":1}"#) else { return XCTFail() }
    }

    func testUnwrap_withBOM_rangeCountsTheBOM() {
        let body: [UInt8] = [0xEF, 0xBB, 0xBF] + Array(#"{"code":0,"data":[7]}"#.utf8)
        let result = judge(UpstreamAnswer(status: 200, contentType: nil, path: "/", isHead: false), body: body, config: config)
        guard case .unwrap(200, let range?) = result else { return XCTFail("\(result)") }
        XCTAssertEqual(range, 20..<23)
        XCTAssertEqual(Array(body[range]), Array("[7]".utf8))
    }

    func testUnwrap_whenDataMemberNameIsEscaped() {
        let body = #"{"code":0,"d\u0061ta":"x"}"#
        guard case .unwrap(200, let range?) = verdict(body) else { return XCTFail() }
        XCTAssertEqual(String(decoding: Array(body.utf8)[range], as: UTF8.self), "\"x\"")
    }

    func testUnwrap_ignoresEnvelopeNamesBelowTopLevel() {
        let body = #"{"data":{"code":5,"data":[1],"message":2},"code":0}"#
        guard case .unwrap(200, let range?) = verdict(body) else { return XCTFail() }
        XCTAssertEqual(String(decoding: Array(body.utf8)[range], as: UTF8.self), #"{"code":5,"data":[1],"message":2}"#)
    }

    func testUnwrap_ignoresOtherTopLevelMembers() {
        guard case .unwrap(200, _) = verdict(#"{"trace":{"id":[1,2]},"code":0,"data":1,"code2":"x"}"#) else { return XCTFail() }
    }

    func testUnwrap_withCustomFieldNames() {
        var custom = EnvelopeConfig()
        custom.dialect.code = "errno"
        custom.dialect.messages = ["msg"]
        custom.dialect.payload = .member("result")
        custom.dialect.successCodes = CodeSet([200])
        let body = #"{"errno":200,"msg":"ok","result":{"a":1},"data":5,"code":9}"#
        guard case .unwrap(200, let range?) = verdict(body, config: custom) else { return XCTFail() }
        XCTAssertEqual(String(decoding: Array(body.utf8)[range], as: UTF8.self), #"{"a":1}"#)
    }

    func testUnwrap_matchesNonASCIIFieldNames() {
        var custom = EnvelopeConfig()
        custom.dialect.code = "状态"
        custom.dialect.payload = .member("数据")
        let body = #"{"\u72b6\u6001":0,"数据":[1]}"#
        guard case .unwrap(200, let range?) = verdict(body, config: custom) else { return XCTFail() }
        XCTAssertEqual(String(decoding: Array(body.utf8)[range], as: UTF8.self), "[1]")
    }

    func testUnwrap_withSeveralSuccessCodes() {
        var custom = EnvelopeConfig()
        custom.dialect.successCodes = CodeSet([0, 200])
        guard case .unwrap(200, _) = verdict(#"{"code":200,"data":1}"#, config: custom) else { return XCTFail() }
    }

    // MARK: auth and business errors on 2xx

    func testAuthExpired_whenCodeIs7() {
        XCTAssertEqual(
            verdict(#"{"code":7,"message":"token expired"}"#),
            .problem(Problem(kind: .authExpired, status: 401, code: 7, detail: "token expired", upstreamStatus: 200)))
    }

    func testAuthExpired_whenCodeIsStringSeven() {
        XCTAssertEqual(
            verdict(#"{"code":"7"}"#), .problem(Problem(kind: .authExpired, status: 401, code: "7", upstreamStatus: 200)),
            "the integer 7 in the list matches the string holding its decimal text; the problem keeps the code as sent")
    }

    func testSuccessWins_whenCodeIsBothSuccessAndAuth() {
        var custom = EnvelopeConfig()
        custom.dialect.authCodes = CodeSet([0, 7])
        guard case .unwrap = verdict(#"{"code":0,"data":1}"#, config: custom) else { return XCTFail() }
    }

    func testBusinessError_usesDefault422AndUpstreamMessage() {
        XCTAssertEqual(
            verdict(#"{"code":1001,"message":"余额不足","data":null}"#),
            .problem(Problem(kind: .businessError, status: 422, code: 1001, detail: "余额不足", upstreamStatus: 200)))
    }

    func testBusinessError_usesCodeStatusOverride() {
        var custom = EnvelopeConfig()
        custom.dialect.codeStatus = CodeStatusMap([404: 404, 42: 409])
        custom.businessStatus = 400
        XCTAssertEqual(
            verdict(#"{"code":42}"#, config: custom),
            .problem(Problem(kind: .businessError, status: 409, code: 42, upstreamStatus: 200)))
        XCTAssertEqual(
            verdict(#"{"code":43}"#, config: custom),
            .problem(Problem(kind: .businessError, status: 400, code: 43, upstreamStatus: 200)))
    }

    func testBusinessError_whenCodeIsNegativeString() {
        XCTAssertEqual(
            verdict(#"{"code":"-3"}"#), .problem(Problem(kind: .businessError, status: 422, code: "-3", upstreamStatus: 200)))
    }

    func testBusinessError_acceptsInt64Limits() {
        XCTAssertEqual(
            verdict(#"{"code":9223372036854775807}"#),
            .problem(Problem(kind: .businessError, code: .integer(.max), upstreamStatus: 200)))
        XCTAssertEqual(
            verdict(#"{"code":-9223372036854775808}"#),
            .problem(Problem(kind: .businessError, code: .integer(.min), upstreamStatus: 200)))
        XCTAssertEqual(
            verdict(#"{"code":"-9223372036854775808"}"#),
            .problem(Problem(kind: .businessError, code: "-9223372036854775808", upstreamStatus: 200)))
    }

    func testBusinessError_decodesEscapedMessage() {
        let result = verdict(#"{"code":3,"message":"\u4f60\u597d \ud83d\ude00 \"q\"\n\\ é"}"#)
        XCTAssertEqual(result, .problem(Problem(kind: .businessError, code: 3, detail: "你好 😀 \"q\"\n\\ é", upstreamStatus: 200)))
    }

    func testBusinessError_whenMessageIsEmpty_detailIsNil() {
        XCTAssertEqual(
            verdict(#"{"code":3,"message":""}"#), .problem(Problem(kind: .businessError, code: 3, upstreamStatus: 200)))
    }

    // MARK: bad upstream format on 2xx

    func testBadFormat_whenBodyIsNotJSON() {
        XCTAssertEqual(verdict("<html>oops</html>", contentType: "text/html"), formatError())
        XCTAssertEqual(verdict(""), formatError())
        XCTAssertEqual(verdict("{\"code\":0,\"data\":[1,]}"), formatError())
    }

    func testBadFormat_whenBodyIsNotAnObject() {
        XCTAssertEqual(verdict("[{\"code\":0}]"), formatError())
        XCTAssertEqual(verdict("0"), formatError())
        XCTAssertEqual(verdict("\"code\""), formatError())
        XCTAssertEqual(verdict("null"), formatError())
    }

    func testBadFormat_whenCodeIsMissing() {
        XCTAssertEqual(verdict(#"{"data":1,"message":"ok"}"#), formatError())
        XCTAssertEqual(verdict("{}"), formatError())
        XCTAssertEqual(verdict(#"{"Code":0}"#), formatError())
    }

    func testBadFormat_whenCodeIsNeitherAnIntegerNorAString() {
        for code in [
            "1.0", "1e2", "0.5", "-0.0", "true", "null", "[0]", "{}", "9223372036854775808", "-9223372036854775809",
            "99999999999999999999999",
        ] {
            XCTAssertEqual(verdict("{\"code\":\(code),\"data\":1}"), formatError(), "code \(code)")
        }
    }

    func testBusinessError_whenCodeIsAStringThatIsNotAListedInteger_keepsItAsSent() {
        // A string matches an integer in the list only when it is exactly that integer's decimal text.
        for code in ["", " 0", "0 ", "+1", "00", "01", "0x1", "1.0", "abc", "٣", "9223372036854775808", "00000", "-0"] {
            XCTAssertEqual(verdict("{\"code\":\(JSONString.quoted(code)),\"data\":1}"),
                           .problem(Problem(kind: .businessError, code: .string(code), upstreamStatus: 200)), "code \"\(code)\"")
        }
    }

    func testBadFormat_whenMessageIsNotAString() {
        for message in ["1", "true", "[\"a\"]", "{\"a\":\"b\"}"] {
            XCTAssertEqual(verdict("{\"code\":0,\"message\":\(message),\"data\":1}"), formatError(), "message \(message)")
        }
    }

    func testNullMessage_isNoMessage() {
        guard case .problem(let p) = verdict(#"{"code":5,"message":null}"#) else { return XCTFail() }
        XCTAssertNil(p.detail, "Peel's own text")
    }

    func testBadFormat_whenEnvelopeMembersRepeat() {
        XCTAssertEqual(verdict(#"{"code":0,"code":0,"data":1}"#), formatError())
        XCTAssertEqual(verdict(#"{"code":0,"data":1,"data":2}"#), formatError())
        XCTAssertEqual(verdict(#"{"code":0,"message":"a","message":"b"}"#), formatError())
    }

    func testBadFormat_whenEnvelopeMembersRepeatAfterUnescaping() {
        XCTAssertEqual(verdict(#"{"code":0,"data":1,"d\u0061ta":2}"#), formatError())
        XCTAssertEqual(verdict(#"{"\u0063ode":0,"code":1}"#), formatError())
        XCTAssertEqual(verdict(#"{"code":0,"m\u0065ssage":"a","message":"b"}"#), formatError())
    }

    func testBadFormat_whenDepthExceedsConfig() {
        var custom = EnvelopeConfig()
        custom.maxDepth = 3
        XCTAssertEqual(verdict(#"{"code":0,"data":[[1]]}"#, config: custom), .unwrap(status: 200, data: 17..<22))
        XCTAssertEqual(verdict(#"{"code":0,"data":[[[1]]]}"#, config: custom), formatError())
    }

    func testBadFormat_carriesTheUpstream2xxStatus() {
        XCTAssertEqual(verdict("nope", status: 203), formatError(203))
    }

    // MARK: non-2xx answers

    func testUpstreamError_keeps4xxStatusAndEnvelopeCodeAndMessage() {
        XCTAssertEqual(
            verdict(#"{"code":12,"message":"no such user"}"#, status: 404),
            .problem(Problem(kind: .upstreamError, status: 404, code: 12, detail: "no such user", upstreamStatus: 404)))
    }

    func testUpstreamError_maps5xxTo502WithPeelCode() {
        XCTAssertEqual(
            verdict("Internal Server Error", status: 500, contentType: "text/plain"),
            .problem(Problem(kind: .upstreamError, status: 502, code: -104, detail: nil, upstreamStatus: 500)))
        XCTAssertEqual(
            verdict("", status: 503), .problem(Problem(kind: .upstreamError, status: 502, code: -104, upstreamStatus: 503)))
    }

    func testUpstreamError_5xxWithEnvelopeKeepsItsCode() {
        XCTAssertEqual(
            verdict(#"{"code":"-9","message":"db down"}"#, status: 500),
            .problem(Problem(kind: .upstreamError, status: 502, code: "-9", detail: "db down", upstreamStatus: 500)))
    }

    func testUpstreamError_whenEnvelopeHoldsSuccessCode() {
        XCTAssertEqual(
            verdict(#"{"code":0,"data":1}"#, status: 400),
            .problem(Problem(kind: .upstreamError, status: 400, code: 0, upstreamStatus: 400)))
    }

    func testUpstreamError_whenEnvelopeIsMalformedUsesPeelCode() {
        XCTAssertEqual(
            verdict(#"{"code":1.5,"message":"x"}"#, status: 409),
            // Not the dialect's envelope (its code is no code), so read as a bare message; the
            // fraction is no code either and stays under `upstream`.
            .problem(Problem(kind: .upstreamError, status: 409, code: -104, detail: "x", upstreamStatus: 409,
                             upstream: [UpstreamMember(name: "code", raw: Array("1.5".utf8))])))
        XCTAssertEqual(
            verdict(#"{"code":1,"message":2}"#, status: 409),
            .problem(Problem(kind: .upstreamError, status: 409, code: -104, upstreamStatus: 409)))
    }

    func testAuthExpired_whenNon2xxCarriesAuthCode() {
        XCTAssertEqual(
            verdict(#"{"code":7,"message":"please log in"}"#, status: 401),
            .problem(Problem(kind: .authExpired, status: 401, code: 7, detail: "please log in", upstreamStatus: 401)))
        XCTAssertEqual(
            verdict(#"{"code":7}"#, status: 500),
            .problem(Problem(kind: .authExpired, status: 401, code: 7, upstreamStatus: 500)))
    }

    func testUpstreamError_whenStatusIsOutsideHTTPRange() {
        XCTAssertEqual(
            verdict("x", status: 600), .problem(Problem(kind: .upstreamError, status: 502, code: -104, upstreamStatus: 600)))
        XCTAssertEqual(
            verdict("x", status: 0), .problem(Problem(kind: .upstreamError, status: 502, code: -104, upstreamStatus: 0)))
    }

    // MARK: passthrough

    func testPassthrough_whenContentTypeIsImage() {
        XCTAssertEqual(verdict("\u{89}PNG", contentType: "image/png"), .passthrough)
        XCTAssertEqual(verdict("x", contentType: "IMAGE/PNG; charset=binary"), .passthrough)
        XCTAssertEqual(verdict("x", contentType: "  video/mp4  "), .passthrough)
        XCTAssertEqual(verdict("x", contentType: "audio/ogg;codecs=opus"), .passthrough)
        XCTAssertEqual(verdict("x", contentType: "Application/Octet-Stream"), .passthrough)
    }

    func testPassthrough_evenForErrorStatuses() {
        XCTAssertEqual(verdict("x", status: 404, contentType: "image/png"), .passthrough)
    }

    func testNoPassthrough_whenContentTypeOnlyLooksSimilar() {
        XCTAssertEqual(verdict("x", contentType: "imagex/png"), formatError())
        XCTAssertEqual(verdict("x", contentType: "application/octet-streams"), formatError())
        XCTAssertEqual(verdict("x", contentType: "image"), formatError())
        XCTAssertEqual(verdict("x", contentType: "application/json"), formatError())
        XCTAssertEqual(verdict("x", contentType: ""), formatError())
        XCTAssertEqual(verdict("x", contentType: nil), formatError())
    }

    func testPassthrough_withCustomMediaRanges() {
        var custom = EnvelopeConfig()
        custom.passthroughContentTypes = ["application/pdf", "text/*"]
        XCTAssertEqual(verdict("x", contentType: "application/PDF", config: custom), .passthrough)
        XCTAssertEqual(verdict("x", contentType: "text/csv; header=present", config: custom), .passthrough)
        XCTAssertEqual(verdict("x", contentType: "image/png", config: custom), formatError())
        custom.passthroughContentTypes = ["*/*"]
        XCTAssertEqual(verdict("x", contentType: "application/json", config: custom), .passthrough)
        custom.passthroughContentTypes = ["*/png", "", "/", "image/"]
        XCTAssertEqual(verdict("x", contentType: "image/png", config: custom), formatError())
    }

    func testPassthrough_whenPathHasConfiguredPrefix() {
        var custom = EnvelopeConfig()
        custom.passthroughPaths = ["/files/", "/raw"]
        XCTAssertEqual(verdict("x", path: "/files/a.bin", config: custom), .passthrough)
        XCTAssertEqual(verdict("x", path: "/raw", config: custom), .passthrough)
        XCTAssertEqual(verdict("x", path: "/files", config: custom), formatError())
        XCTAssertEqual(verdict("x", path: "/api/files/a", config: custom), formatError())
    }

    func testPassthrough_when204Or205Or304() {
        XCTAssertEqual(verdict("", status: 204), .passthrough)
        XCTAssertEqual(verdict("", status: 205), .passthrough)
        XCTAssertEqual(verdict("", status: 304), .passthrough)
    }

    func testPassthrough_when1xxOr3xx() {
        XCTAssertEqual(verdict("", status: 101), .passthrough)
        XCTAssertEqual(verdict("<a href=x>moved</a>", status: 301), .passthrough)
        XCTAssertEqual(verdict("", status: 302), .passthrough)
        XCTAssertEqual(verdict("", status: 399), .passthrough)
    }

    func testPassthrough_whenHead() {
        XCTAssertEqual(verdict("", isHead: true), .passthrough)
        XCTAssertEqual(verdict("", status: 500, isHead: true), .passthrough)
    }

    func testJudge_acceptsBorrowedBuffer() {
        let body = Array(#"{"code":0,"data":"x"}"#.utf8)
        let answer = UpstreamAnswer(status: 200, contentType: nil, path: "/", isHead: false)
        let result = body.withUnsafeBufferPointer { judge(answer, body: $0, config: config) }
        XCTAssertEqual(result, .unwrap(status: 200, data: 17..<20))
    }
}

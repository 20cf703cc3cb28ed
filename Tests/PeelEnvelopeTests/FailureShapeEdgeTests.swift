import PeelEnvelope
import XCTest

/// Failure bodies whose only words are field errors: the first field error is the detail.
final class FailureShapeDetailTests: XCTestCase {
    private func judged(_ body: String, status: Int = 400, dialect: Dialect = .rest) -> Problem? {
        var config = EnvelopeConfig()
        config.dialect = dialect
        let answer = UpstreamAnswer(status: status, contentType: "application/json", path: "/", isHead: false)
        guard case .problem(let p) = judge(answer, body: Array(body.utf8), config: config) else { return nil }
        return p
    }

    /// Google's BadRequest without a top-level message: the first violation's description is the
    /// detail, as for every shape whose only words are field errors (contract: `detail`).
    func testErrorObject_withoutMessage_takesTheFirstFieldErrorAsDetail() {
        let body = #"{"error":{"code":400,"status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"email","description":"caf\u00e9 is taken"}]}]}}"#
        let p = judged(body)
        XCTAssertEqual(p?.detail, "café is taken")
        XCTAssertEqual(p?.code, "INVALID_ARGUMENT")
        XCTAssertEqual(p?.errors.map { String(decoding: $0, as: UTF8.self) }, ##"[{"detail":"caf\u00e9 is taken","pointer":"#/email"}]"##)
        // At a 5xx that first message is what the access log keeps.
        XCTAssertEqual(judged(body, status: 500)?.privateMessage, "café is taken")
    }

    /// A JSON:API list whose first error has no words but a later one points at a field.
    func testErrorsArray_withoutWordsInTheFirstError_takesTheFirstFieldError() {
        let body = #"{"errors":[{"status":"422","code":"E1"},{"detail":"must be a number","source":{"pointer":"/data/attributes/age"}}]}"#
        let p = judged(body, status: 422)
        XCTAssertEqual(p?.detail, "must be a number")
        XCTAssertEqual(p?.code, "E1")
    }
}

/// Member names in failure bodies are JSON strings: an escape spells the same name.
final class FailureShapeEscapedNameTests: XCTestCase {
    private func judged(_ body: String, status: Int = 404, dialect: Dialect = .rest) -> Problem? {
        var config = EnvelopeConfig()
        config.dialect = dialect
        let answer = UpstreamAnswer(status: status, contentType: "application/json", path: "/", isHead: false)
        guard case .problem(let p) = judge(answer, body: Array(body.utf8), config: config) else { return nil }
        return p
    }

    /// `"m\u0065ssage"` is `message`: its words reach the app.
    func testEscapedMessageName_isTheMessage() {
        let p = judged(#"{"m\u0065ssage":"No such order","c\u006fde":"E404"}"#)
        XCTAssertEqual(p?.detail, "No such order")
        XCTAssertEqual(p?.code, "E404")
        XCTAssertEqual(p?.upstream, [])
    }

    /// `code` twice, once escaped: which one the backend meant is unknown, so no shape reads the body.
    func testEscapedDuplicateName_isADuplicate() {
        let p = judged(#"{"message":"ok","code":401,"co\u0064e":{}}"#)
        XCTAssertNil(p?.detail)
        XCTAssertEqual(p?.code, -104)
        XCTAssertNil(judged(#"{"message":"ok","code":401,"co\u0064e":{}}"#, status: 500)?.privateMessage)
    }

    /// Inside field errors too: DRF's escaped `non_field_errors` points nowhere, an escaped `msg` is read.
    func testEscapedNamesInsideFieldErrors() {
        let drf = judged(#"{"non_field_err\u006frs":["Passwords differ."],"email":["Taken."]}"#, status: 400)
        XCTAssertEqual(drf?.errors.map { String(decoding: $0, as: UTF8.self) },
                       ##"[{"detail":"Passwords differ."},{"detail":"Taken.","pointer":"#/email"}]"##)
        let express = judged(#"{"errors":[{"type":"field","m\u0073g":"Invalid value","path":"email","location":"body"}]}"#, status: 400)
        XCTAssertEqual(express?.errors.map { String(decoding: $0, as: UTF8.self) }, ##"[{"detail":"Invalid value","pointer":"#/email"}]"##)
    }
}

/// A pointer the upstream wrote becomes a URI fragment per RFC 6901 §6.
final class FailureShapeWrittenPointerTests: XCTestCase {
    private func errors(_ pointer: String) -> String? {
        var config = EnvelopeConfig()
        config.dialect = .rest
        let body = #"{"errors":[{"detail":"bad","source":{"pointer":""# + pointer + #""}}]}"#
        let answer = UpstreamAnswer(status: 422, contentType: "application/json", path: "/", isHead: false)
        guard case .problem(let p) = judge(answer, body: Array(body.utf8), config: config) else { return nil }
        return p.errors.map { String(decoding: $0, as: UTF8.self) }
    }

    func testFragmentPointer_keepsOnlyRealPercentEscapes() {
        XCTAssertEqual(errors("#/a%20b"), ##"[{"detail":"bad","pointer":"#/a%20b"}]"##)
        // `%zz` is no escape: a fragment cannot hold it as it is.
        XCTAssertEqual(errors("#/100%zz"), ##"[{"detail":"bad","pointer":"#/100%25zz"}]"##)
    }

    func testBarePointer_percentIsAPercentSign() {
        // JSON:API's `source.pointer` is a JSON Pointer in its string form (§5): `%20` is three characters.
        XCTAssertEqual(errors("/data/a%20b"), ##"[{"detail":"bad","pointer":"#/data/a%2520b"}]"##)
    }
}

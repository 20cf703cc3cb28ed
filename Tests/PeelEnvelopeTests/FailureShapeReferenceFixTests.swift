import PeelEnvelope
import XCTest

/// Judge bugs the tree-building reference found in failure bodies, each pinned by one body.
final class FailureShapeReferenceFixTests: XCTestCase {
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


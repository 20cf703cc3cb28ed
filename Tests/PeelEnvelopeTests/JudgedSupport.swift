import PeelEnvelope
import XCTest

// What a body is judged to under a dialect, for the dialect rule and preset tests.

/// The verdict on `body` at `status`, and the bytes a success sends (nil for anything else).
func judged(_ body: String, _ dialect: Dialect, status: Int = 200) -> (Verdict, String?) {
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

/// The bytes a success sends.
func sent(_ body: String, _ dialect: Dialect, status: Int = 200) -> String? { judged(body, dialect, status: status).1 }

/// The problem Peel answers, failing the test when the answer is not one.
func problem(_ body: String, _ dialect: Dialect, status: Int = 200, file: StaticString = #filePath,
             line: UInt = #line) -> Problem? {
    guard case .problem(let p) = judged(body, dialect, status: status).0 else {
        XCTFail("not a problem", file: file, line: line)
        return nil
    }
    return p
}

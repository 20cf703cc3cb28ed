import Foundation
@testable import PeelEnvelope
import XCTest

/// Issue 19: every refusal says why. The diagnosis names the first fault and its byte offset.
final class DiagnosisTests: XCTestCase {
    private let config = EnvelopeConfig()
    private let get = UpstreamAnswer(status: 200, contentType: "application/json", path: "/x", isHead: false)

    private func reason(_ text: String) -> String? {
        reason(Array(text.utf8))
    }

    private func reason(_ bytes: [UInt8], status: Int = 200, contentType: String? = "application/json") -> String? {
        let answer = UpstreamAnswer(status: status, contentType: contentType, path: "/x", isHead: false)
        guard case .problem(let p) = judge(answer, body: bytes, config: config) else { return nil }
        return p.reason
    }

    func testNotJSONAtAll_namesTheFirstByte() {
        XCTAssertEqual(reason("<html>oops</html>"), "not JSON at byte 0 (0x3c '<')")
        XCTAssertEqual(reason("  Internal error"), "not JSON at byte 2 (0x49 'I')")
        XCTAssertEqual(reason(""), "empty body")
        XCTAssertEqual(reason(" \n"), "empty body")
        XCTAssertEqual(reason([0xEF, 0xBB, 0xBF, 0x01]), "not JSON at byte 3 (0x01)", "the BOM counts in offsets")
    }

    func testTrailingData_namesWhereItStarts() {
        let line = "{\"code\":0,\"message\":\"ok\",\"data\":1}"
        XCTAssertEqual(reason(line + "\n" + line + "\n"), "trailing data at byte \(line.utf8.count + 1)", "NDJSON")
        let big = "{\"code\":0,\"data\":\"" + String(repeating: "x", count: 1200) + "\"}"
        XCTAssertEqual(reason(big + "x"), "trailing data at byte \(big.utf8.count)")
    }

    func testValidJSONThatIsNotAnObject() {
        XCTAssertEqual(reason("[1,2]"), "not an object (a JSON array)")
        XCTAssertEqual(reason("\"text\""), "not an object (a JSON string)")
        XCTAssertEqual(reason("42"), "not an object (a JSON number)")
        XCTAssertEqual(reason("null"), "not an object (JSON null)")
    }

    func testBrokenJSON_namesTheOffendingByte() {
        XCTAssertEqual(reason("{\"code\":0,}"), "invalid JSON at byte 10 (0x7d '}')")
        XCTAssertEqual(reason("{\"code\":01}"), "invalid JSON at byte 9 (0x31 '1')")
        XCTAssertEqual(reason("{\"code\":0"), "JSON cut short at byte 9")
        XCTAssertEqual(reason("{\"code\":\"a\u{01}\"}"), "invalid JSON at byte 10 (0x01)")
        XCTAssertEqual(reason([0x7B, 0x22, 0xC0, 0xAE, 0x22, 0x3A, 0x30, 0x7D]), "invalid JSON at byte 2 (0xc0)", "overlong UTF-8")
        XCTAssertEqual(reason("{\"code\":tru}"), "invalid JSON at byte 11 (0x7d '}')")
        let deep = String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
        XCTAssertEqual(reason("{\"code\":0,\"data\":" + deep + "}"), "nested deeper than 512 levels at byte 528 in member \"data\"")
    }

    func testEnvelopeMembers_sayWhichIsWrong() {
        XCTAssertEqual(reason("{\"message\":\"ok\",\"data\":1}"), "code missing")
        XCTAssertEqual(reason("{\"code\":true}"), "code is not an integer or a string")
        XCTAssertEqual(reason("{\"code\":1.5}"), "code is not an integer or a string")
        XCTAssertEqual(reason("{\"code\":0,\"message\":7}"), "message is not a string")
        XCTAssertEqual(reason("{\"code\":0,\"code\":1}"), "duplicate member \"code\"")
        var c = EnvelopeConfig()
        c.dialect.code = "errno"
        let answer = UpstreamAnswer(status: 200, contentType: nil, path: "/x", isHead: false)
        guard case .problem(let p) = judge(answer, body: Array("{\"code\":0}".utf8), config: c) else { return XCTFail("not refused") }
        XCTAssertEqual(p.reason, "errno missing", "the configured name")
    }

    func testUpstreamErrors_sayWhatCame_neverTheBody() {
        XCTAssertEqual(reason(Array("<html>CSRF verification failed</html>".utf8), status: 403, contentType: "text/html; charset=utf-8"),
                       "upstream 403 text/html")
        XCTAssertEqual(reason(Array("{\"code\":1001,\"message\":\"no\"}".utf8), status: 500), "upstream 500, envelope code 1001")
        XCTAssertEqual(reason(Array("x".utf8), status: 400, contentType: nil), "upstream 400 without Content-Type")
    }

    func testAGoodEnvelope_hasNoReason() {
        guard case .unwrap = judge(get, body: Array("{\"code\":0,\"data\":1}".utf8), config: config) else { return XCTFail() }
    }

    func testTheReasonIsAProblemMember() {
        let p = problem(for: .malformedEnvelope(upstreamStatus: 200, reason: "trailing data at byte 12"), config: config)
        let text = String(decoding: renderProblem(p, requestId: "r", language: .english, typeBase: "urn:peel:problem:"), as: UTF8.self)
        XCTAssertTrue(text.hasSuffix(",\"upstream_status\":200,\"reason\":\"trailing data at byte 12\"}"), text)
    }

    func testTheDiagnosisAgreesWithTheScanner_onTheConformanceCorpusShapes() {
        // Whatever the fast scanner accepts, the diagnosis finds no JSON fault in, and the reverse.
        let samples = ["{}", "[]", "{\"a\":[1,2,{\"b\":null}],\"c\":\"\\u00e9\\n\"}", "[1e5,-0.5,true,false]", "{\"a\":1,}", "[01]",
                       "{\"a\"1}", "[\"\\x\"]", "[1.]", "[-]", "{\"a\":\"\u{7F}\"}", "[\"\\ud800\"]", "[\"\\ud83d\\ude00\"]", "[\"\\ude00\"]",
                       "[\"\\ud83d\\u0041\"]", "\u{FEFF}{}", "[1] x", "{\"a\":tr}"]
        for s in samples {
            let bytes = Array(s.utf8)
            let scanned = JSONScanner.validate(bytes)
            let diagnosed = bytes.withUnsafeBufferPointer { ScanDiagnosis.diagnose($0, maxDepth: 512, names: nil) }
            XCTAssertEqual(scanned, diagnosed == .valid, "\(s): scanner \(scanned), diagnosis \(diagnosed)")
        }
    }

    func testTheDiagnosisAgreesWithTheScanner_onTheJSONTestSuiteCorpus() throws {
        // The shared corpus (see JSONTestSuiteConformanceTests); without it the samples above stand.
        let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("../shared/testdata/JSONTestSuite/test_parsing").standardizedFileURL
        let names = (try? FileManager.default.contentsOfDirectory(atPath: corpus.path))?.sorted() ?? []
        guard !names.isEmpty else { return print("DiagnosisTests: corpus absent at \(corpus.path); samples still ran") }
        var disagree: [String] = []
        for name in names where name.hasSuffix(".json") {
            let bytes = [UInt8](try Data(contentsOf: corpus.appendingPathComponent(name)))
            let scanned = JSONScanner.validate(bytes)
            let diagnosed = bytes.withUnsafeBufferPointer { ScanDiagnosis.diagnose($0, maxDepth: 512, names: nil) }
            if scanned != (diagnosed == .valid) { disagree.append("\(name): scanner \(scanned), diagnosis \(diagnosed)") }
        }
        XCTAssertEqual(disagree, [], "the diagnosis must explain exactly the bodies the scanner refuses")
        XCTAssertGreaterThan(names.count, 300)
    }
}

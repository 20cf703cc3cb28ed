import Foundation
import PeelEnvelope
import XCTest

/// RFC 9457 problem documents: member order, escaping, languages, and the SPEC table.
final class ProblemRenderingTests: XCTestCase {
    private let base = "urn:peel:problem:"

    private func render(_ problem: Problem, requestId: String = "req-1", language: Language = .english) -> [UInt8] {
        renderProblem(problem, requestId: requestId, language: language, typeBase: base)
    }

    private func parse(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) -> [String: Any] {
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else {
            XCTFail("not a JSON object: \(String(decoding: bytes, as: UTF8.self))", file: file, line: line)
            return [:]
        }
        return object
    }

    func testRender_offlineMatchesSpecExampleByteForByte() {
        let text = String(decoding: render(Problem(kind: .offline), requestId: "abc"), as: UTF8.self)
        XCTAssertEqual(
            text,
            #"{"type":"urn:peel:problem:offline","title":"Upstream offline","status":503,"#
                + #""detail":"The network is unavailable, please try again later","code":-103,"#
                + #""kind":"offline","request_id":"abc"}"#)
    }

    func testRender_offlineInChineseUsesSeedText() {
        let object = parse(render(Problem(kind: .offline), language: .chinese))
        XCTAssertEqual(object["detail"] as? String, "当前网络不可用，请检查网络稍后再试")
    }

    func testRender_badFormatInChineseUsesSeedText() {
        let object = parse(render(Problem(kind: .badUpstreamFormat, upstreamStatus: 200), language: .chinese))
        XCTAssertEqual(object["detail"] as? String, "服务器数据结构错误")
        XCTAssertEqual(object["code"] as? Int, -100)
        XCTAssertEqual(object["upstream_status"] as? Int, 200)
    }

    func testRender_keepsNonASCIIAsUTF8() {
        let bytes = render(Problem(kind: .businessError, code: 1001, detail: "余额不足"), language: .english)
        let text = String(decoding: bytes, as: UTF8.self)
        XCTAssertTrue(text.contains("\"detail\":\"余额不足\""), text)
        XCTAssertFalse(text.contains("\\u"))
    }

    func testRender_addsUpstreamStatusLastOnlyWhenSet() {
        let with = String(
            decoding: render(Problem(kind: .upstreamError, status: 404, code: 12, upstreamStatus: 404)), as: UTF8.self)
        XCTAssertTrue(with.hasSuffix(#""request_id":"req-1","upstream_status":404}"#), with)
        let without = String(decoding: render(Problem(kind: .upstreamTimeout)), as: UTF8.self)
        XCTAssertFalse(without.contains("upstream_status"))
        XCTAssertTrue(without.hasSuffix(#""request_id":"req-1"}"#), without)
    }

    func testRender_membersInFixedOrder() {
        let text = String(decoding: render(Problem(kind: .authExpired, code: 7, detail: "x", upstreamStatus: 200)), as: UTF8.self)
        var cursor = text.startIndex
        for name in [
            "\"type\":", "\"title\":", "\"status\":", "\"detail\":", "\"code\":", "\"kind\":", "\"request_id\":",
            "\"upstream_status\":",
        ] {
            guard let found = text.range(of: name, range: cursor..<text.endIndex) else {
                return XCTFail("\(name) missing or out of order in \(text)")
            }
            cursor = found.upperBound
        }
    }

    func testRender_escapesQuotesBackslashesAndControlCharacters() {
        var nasty = "q\"b\\s/\u{8}\u{C}\n\r\t"
        for scalar in 0..<0x20 { nasty.unicodeScalars.append(Unicode.Scalar(UInt8(scalar))) }
        nasty += "\u{7F}\u{2028}😀"
        let bytes = render(Problem(kind: .businessError, code: 1, detail: nasty), requestId: nasty)
        XCTAssertTrue(JSONScanner.validate(bytes))
        let object = parse(bytes)
        XCTAssertEqual(object["detail"] as? String, nasty)
        XCTAssertEqual(object["request_id"] as? String, nasty)
        let text = String(decoding: bytes, as: UTF8.self)
        XCTAssertTrue(text.contains(#"q\"b\\s/\b\f\n\r\t\u0000\u0001"#), text)
        XCTAssertTrue(text.contains(#"\u001f"#), text)
    }

    func testRender_everyKindIsValidJSONWithTheRightMembers() {
        for kind in ProblemKind.allCases {
            for language in [Language.english, .chinese] {
                let problem = Problem(kind: kind, upstreamStatus: 500)
                let bytes = render(problem, requestId: "id-\(kind.rawValue)", language: language)
                XCTAssertTrue(JSONScanner.validate(bytes), kind.rawValue)
                let object = parse(bytes)
                XCTAssertEqual(object.count, 8)
                XCTAssertEqual(object["type"] as? String, base + kind.rawValue)
                XCTAssertEqual(object["title"] as? String, kind.title)
                XCTAssertEqual(object["status"] as? Int, kind.defaultStatus)
                XCTAssertEqual(object["detail"] as? String, kind.detail(in: language))
                XCTAssertEqual((object["code"] as? NSNumber).map { EnvelopeCode.integer($0.int64Value) }, kind.defaultCode)
                XCTAssertEqual(object["kind"] as? String, kind.rawValue)
                XCTAssertEqual(object["request_id"] as? String, "id-\(kind.rawValue)")
                XCTAssertEqual(object["upstream_status"] as? Int, 500)
                XCTAssertFalse(kind.detail(in: language).isEmpty)
            }
        }
    }

    func testRender_upstreamMessageReplacesPeelText() {
        let object = parse(render(Problem(kind: .authExpired, code: 7, detail: "token expired"), language: .chinese))
        XCTAssertEqual(object["detail"] as? String, "token expired")
    }

    func testRender_usesTheGivenTypeBase() {
        let bytes = renderProblem(
            Problem(kind: .badRequest), requestId: "r", language: .english, typeBase: "https://errors.example.com/\"x\"/")
        XCTAssertEqual(parse(bytes)["type"] as? String, "https://errors.example.com/\"x\"/bad-request")
    }

    func testRender_integersAtTheirLimits() {
        for code in [Int64.min, Int64.min + 1, -1, 0, 9, 10, 99, 100, Int64.max] {
            let bytes = render(Problem(kind: .businessError, code: .integer(code)))
            let text = String(decoding: bytes, as: UTF8.self)
            XCTAssertTrue(text.contains("\"code\":\(code),"), text)
        }
    }

    func testProblemKind_tableMatchesSpec() {
        let expected: [ProblemKind: (Int, EnvelopeCode?)] = [
            .businessError: (422, nil), .authExpired: (401, nil), .badUpstreamFormat: (502, -100), .upstreamUnreachable: (502, -101),
            .upstreamTimeout: (504, -102), .offline: (503, -103), .upstreamError: (502, -104), .requestTooLarge: (413, -105),
            .badRequest: (400, -106), .upstreamTooLarge: (502, -107), .serverBusy: (503, -108),
            // Issue 17: one client over its share of reachability streams (README's table; SPEC's lags).
            .tooManyStreams: (429, -109),
            // Issue 27: no route applies to the Host and path.
            .noRoute: (404, -110),
        ]
        XCTAssertEqual(expected.count, ProblemKind.allCases.count)
        for kind in ProblemKind.allCases {
            XCTAssertEqual(kind.defaultStatus, expected[kind]?.0, kind.rawValue)
            XCTAssertEqual(kind.defaultCode, expected[kind]?.1, kind.rawValue)
        }
        XCTAssertEqual(ProblemKind.offline.title, "Upstream offline")
        XCTAssertEqual(ProblemKind.offline.rawValue, "offline")
    }

    func testProblem_nilStatusAndCodeTakeKindDefaults() {
        let problem = Problem(kind: .requestTooLarge)
        XCTAssertEqual(problem.status, 413)
        XCTAssertEqual(problem.code, -105)
        XCTAssertNil(problem.detail)
        XCTAssertNil(problem.upstreamStatus)
        let custom = Problem(kind: .businessError, status: 409, code: 42, detail: "d", upstreamStatus: 200)
        XCTAssertEqual(custom.status, 409)
        XCTAssertEqual(custom.code, 42)
    }
}

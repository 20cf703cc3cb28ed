import PeelEnvelope
import XCTest

/// The one outcome → status and problem mapping (SPEC's error table), and what judge hands it.
final class OutcomeTests: XCTestCase {
    private let config = EnvelopeConfig()

    private func status(_ o: Outcome, _ c: EnvelopeConfig? = nil) -> Int { problem(for: o, config: c ?? config).status }

    func testTransportOutcomes_mapToTheErrorTable() {
        XCTAssertEqual(problem(for: .unreachable, config: config), Problem(kind: .upstreamUnreachable, status: 502, code: -101))
        XCTAssertEqual(problem(for: .timedOut, config: config), Problem(kind: .upstreamTimeout, status: 504, code: -102))
        XCTAssertEqual(problem(for: .upstreamTooLarge, config: config), Problem(kind: .upstreamTooLarge, status: 502, code: -107))
        XCTAssertEqual(problem(for: .brokenFraming(), config: config), Problem(kind: .badUpstreamFormat, status: 502, code: -100))
        XCTAssertEqual(problem(for: .offline, config: config), Problem(kind: .offline, status: 503, code: -103))
    }

    func testPeelsOwnShortage_is503NotTheUpstreamsFault() {
        let over = problem(for: .overloaded, config: config)
        XCTAssertEqual(over.status, 503)
        XCTAssertEqual(over.kind, .upstreamUnreachable)
        let short = problem(for: .shortOfResources("EMFILE"), config: config)
        XCTAssertEqual(short.status, 503)
        XCTAssertEqual(short.detail, "Peel is short of resources: EMFILE")
    }

    func testRefusals_keepTheServersStatus_tooLargeIsItsOwnKind() {
        XCTAssertEqual(problem(for: .refused(status: 431, tooLarge: true, detail: "head"), config: config),
                       Problem(kind: .requestTooLarge, status: 431, code: -105, detail: "head"))
        XCTAssertEqual(problem(for: .refused(status: 408, tooLarge: false, detail: "slow"), config: config),
                       Problem(kind: .badRequest, status: 408, code: -106, detail: "slow"))
    }

    func testBusinessCode_usesTheCodeStatusMapThenTheDefault() {
        var c = config
        c.dialect.codeStatus = CodeStatusMap([1001: 409])
        c.businessStatus = 400
        XCTAssertEqual(status(.businessCode(1001, message: nil, upstreamStatus: 200), c), 409)
        XCTAssertEqual(status(.businessCode(1002, message: nil, upstreamStatus: 200), c), 400)
        XCTAssertEqual(problem(for: .businessCode(5, message: "no", upstreamStatus: 200), config: config),
                       Problem(kind: .businessError, status: 422, code: 5, detail: "no", upstreamStatus: 200))
    }

    func testUpstreamStatus_keeps4xx_turnsEverythingElseInto502() {
        XCTAssertEqual(status(.upstreamStatus(429, code: nil, message: nil)), 429)
        XCTAssertEqual(status(.upstreamStatus(503, code: nil, message: nil)), 502)
        XCTAssertEqual(status(.upstreamStatus(700, code: nil, message: nil)), 502)
        XCTAssertEqual(problem(for: .upstreamStatus(404, code: nil, message: nil), config: config).code, -104)
        XCTAssertEqual(problem(for: .upstreamStatus(404, code: 44, message: nil), config: config).code, 44)
    }

    func testAuthCode_is401WithTheUpstreamsCode() {
        XCTAssertEqual(problem(for: .authCode(7, message: "expired", upstreamStatus: 200), config: config),
                       Problem(kind: .authExpired, status: 401, code: 7, detail: "expired", upstreamStatus: 200))
    }

    func testJudge_passesAnswersToOPTIONSUnjudged() {
        // A CORS preflight's empty 200 is not an envelope (it used to be a 502 bad-upstream-format).
        let answer = UpstreamAnswer(status: 200, contentType: nil, path: "/x", isHead: false, isOptions: true)
        XCTAssertEqual(judge(answer, body: [], config: config), .passthrough)
        let get = UpstreamAnswer(status: 200, contentType: nil, path: "/x", isHead: false)
        XCTAssertEqual(judge(get, body: [], config: config), .problem(problem(for: .malformedEnvelope(upstreamStatus: 200, reason: "empty body"), config: config)))
    }

    func testJudgeWithCode_reportsTheEnvelopeCodeAsSent_zeroIncluded() {
        let answer = UpstreamAnswer(status: 200, contentType: "application/json", path: "/x", isHead: false)
        func code(_ body: String) -> EnvelopeCode? {
            Array(body.utf8).withUnsafeBufferPointer { judgeWithCode(answer, body: $0, config: config).upstreamCode }
        }
        XCTAssertEqual(code(#"{"code":0,"data":1}"#), 0)
        XCTAssertEqual(code(#"{"code":"0","data":1}"#), "0", "as the upstream sent it")
        XCTAssertEqual(code(#"{"code":1001,"message":"x"}"#), 1001)
        XCTAssertNil(code("<html>"))
    }
}

/// Downloads pass unjudged whatever their media type, and the default passthrough types cover common files.
final class DownloadPassthroughTests: XCTestCase {
    private let config = EnvelopeConfig()

    func testAttachment_passesWhateverItsType() {
        for disposition in ["attachment", "Attachment; filename=\"r.csv\"", " attachment ;filename=x"] {
            let a = UpstreamAnswer(status: 200, contentType: "text/html", path: "/r", isHead: false, contentDisposition: disposition)
            XCTAssertEqual(judge(a, body: Array("a,b\n".utf8), config: config), .passthrough, disposition)
        }
        let inline = UpstreamAnswer(status: 200, contentType: "text/html", path: "/r", isHead: false, contentDisposition: "inline")
        XCTAssertNotEqual(judge(inline, body: Array("a,b\n".utf8), config: config), .passthrough)
    }

    func testDefaultPassthroughTypes_includeCSVPDFZipAndEventStreams() {
        for type in ["text/csv; charset=utf-8", "application/pdf", "application/zip", "text/event-stream"] {
            let a = UpstreamAnswer(status: 200, contentType: type, path: "/r", isHead: false)
            XCTAssertEqual(judge(a, body: Array("x".utf8), config: config), .passthrough, type)
        }
    }
}

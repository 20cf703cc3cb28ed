@testable import PeelDemo
import XCTest

/// The strict parser without sockets: feeding, framing and refusals.
final class RequestParserTests: XCTestCase {
    private func parse(_ chunks: [String], maxHead: Int = 65_536, maxBody: Int = 16 << 20) -> [ParseStep] {
        var parser = RequestParser(maxHead: maxHead, maxBody: maxBody)
        var steps: [ParseStep] = []
        for chunk in chunks {
            parser.append(Array(chunk.utf8)[...])
            while true {
                let step = parser.next()
                steps.append(step)
                if case .request = step { continue }
                break
            }
        }
        return steps
    }

    private func requests(_ steps: [ParseStep]) -> [ParsedRequest] {
        steps.compactMap { if case .request(let r) = $0 { r } else { nil } }
    }

    private func refusal(_ steps: [ParseStep]) -> RequestRefusal? {
        steps.compactMap { if case .refused(let r) = $0 { r } else { nil } }.first
    }

    func testParse_oneByteAtATimeGivesTheSameRequest() {
        let text = "POST /x?y=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"
        let found = requests(parse(text.map { String($0) }))
        XCTAssertEqual(found.count, 1)
        XCTAssertEqual(found.first?.target, "/x?y=1")
        XCTAssertEqual(found.first?.body, Array("hello".utf8))
    }

    func testParse_pipelinedRequestsComeOutInOrder() {
        let text = "GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\nGET /c HTTP/1.1\r\nHost: h\r\n\r\n"
        XCTAssertEqual(requests(parse([text])).map(\.target), ["/a", "/b", "/c"])
    }

    func testParse_fieldValuesAreTrimmedAndNamesKeptAsSent() {
        let r = requests(parse(["GET / HTTP/1.1\r\nHost: h\r\nX-Thing: \t spaced value \t\r\n\r\n"])).first
        XCTAssertEqual(r?.headers.last?.0, "X-Thing")
        XCTAssertEqual(r?.headers.last?.1, "spaced value")
    }

    func testKeepAlive_followsVersionAndConnectionTokens() {
        let cases: [(String, Bool)] = [
            ("GET / HTTP/1.1\r\nHost: h\r\n\r\n", true),
            ("GET / HTTP/1.1\r\nHost: h\r\nConnection: Keep-Alive, close\r\n\r\n", false),
            ("GET / HTTP/1.0\r\n\r\n", false),
            ("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true),
        ]
        for (text, keepAlive) in cases { XCTAssertEqual(requests(parse([text])).first?.keepAlive, keepAlive, text) }
    }

    func testHigherMinorVersion_isTreatedAsHTTP11() {
        XCTAssertEqual(requests(parse(["GET / HTTP/1.7\r\nHost: h\r\n\r\n"])).first?.version, "HTTP/1.1")
    }

    func testHeadLimit_refusesWith431BeforeTheHeadEnds() {
        let steps = parse(["GET / HTTP/1.1\r\nHost: h\r\nX: " + String(repeating: "a", count: 200)], maxHead: 128)
        XCTAssertEqual(refusal(steps)?.status, 431)
    }

    func testBodyLimit_refusesContentLengthAndChunkedAlike() {
        XCTAssertEqual(refusal(parse(["POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n"], maxBody: 10))?.status, 413)
        let chunked = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n6\r\n"
        XCTAssertEqual(refusal(parse([chunked], maxBody: 10))?.status, 413)
    }

    func testBareLF_isRefusedAsSoonAsItArrives() {
        XCTAssertEqual(refusal(parse(["GET / HTTP/1.1\n"]))?.status, 400)
    }

    func testRefusal_isStickyForLaterBytes() {
        var parser = RequestParser()
        parser.append(Array("GET / HTTP/1.1\r\nHost h\r\n\r\n".utf8)[...])
        guard case .refused = parser.next() else { return XCTFail("accepted a field without colon") }
        parser.append(Array("GET / HTTP/1.1\r\nHost: h\r\n\r\n".utf8)[...])
        guard case .refused = parser.next() else { return XCTFail("recovered after a refusal") }
    }

    func testExpectContinue_isOfferedOnceWhileTheBodyIsMissing() {
        var parser = RequestParser()
        parser.append(Array("POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n".utf8)[...])
        guard case .needMore = parser.next() else { return XCTFail("complete without a body") }
        XCTAssertTrue(parser.takeContinueRequest())
        XCTAssertFalse(parser.takeContinueRequest())
    }

    func testChunkSize_acceptsExtensionsAndRejectsJunk() throws {
        XCTAssertEqual(try HTTPGrammar.chunkSize(Array("1aF;x=y".utf8)[...]), 0x1AF)
        XCTAssertEqual(try HTTPGrammar.chunkSize(Array("10 ;x".utf8)[...]), 16)
        XCTAssertThrowsError(try HTTPGrammar.chunkSize(Array("-1".utf8)[...]))
        XCTAssertThrowsError(try HTTPGrammar.chunkSize(Array("1 2".utf8)[...]))
        XCTAssertThrowsError(try HTTPGrammar.chunkSize(Array("".utf8)[...]))
    }
}

@testable import PeelIO
import XCTest

final class HTTP1FramingTests: XCTestCase {
    private func run(_ text: String, splitEvery: Int = 0) -> HTTP1Framing.Violation? {
        var f = HTTP1Framing()
        let bytes = Array(text.utf8)
        if splitEvery == 0 {
            return bytes.withUnsafeBytes { f.feed($0) }
        }
        var i = 0
        while i < bytes.count {
            let piece = Array(bytes[i..<min(bytes.count, i + splitEvery)])
            if let v = piece.withUnsafeBytes({ f.feed($0) }) { return v }
            i += splitEvery
        }
        return nil
    }

    func testValidRequests_passWholeAndByteByByte() {
        let ok = [
            "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
            "\r\nGET /a?b=1 HTTP/1.0\r\n\r\n",
            "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /next HTTP/1.1\r\nHost: x\r\n\r\n",
            "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\nGET / HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1\r\nX-Empty:\r\nX-Tab:\tv\talue\r\nContent-Length: 0\r\n\r\n",
            "GET /\(String(repeating: "p", count: 500))?q=%C3%A9 HTTP/1.1\r\nX-Utf8: caf\u{E9} \u{4E2D}\r\nX-Long: \(String(repeating: "v", count: 900))\r\n\r\n",
            "PUT /b HTTP/1.1\r\ncontent-length:  3 \r\n\r\n\r\n\n",
            "GET /search HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}DELETE /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        ]
        for text in ok {
            XCTAssertNil(run(text), text)
            XCTAssertNil(run(text, splitEvery: 1), "byte by byte: \(text)")
            XCTAssertNil(run(text, splitEvery: 7), "in sevens: \(text)")
        }
    }

    func testSmugglingAndMalformedHeads_areRefused() {
        let cases: [(String, HTTP1Framing.Violation)] = [
            ("GET / HTTP/1.1\nHost: x\r\n\r\n", .bareLF),
            ("GET / HTTP/1.1\r\nHost: x\n\r\n", .bareLF),
            ("GET / HTTP/1.1\r\nHost: x\rY\r\n\r\n", .bareLF),
            ("GET / HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n", .obsFold),
            ("GET / HTTP/1.1\r\n Host: x\r\n\r\n", .obsFold),
            ("GET / HTTP/1.1\r\nX-A: a\u{0}b\r\n\r\n", .controlCharacter),
            ("GET /a\u{0}b HTTP/1.1\r\n\r\n", .controlCharacter),
            ("GET /\(String(repeating: "a", count: 300))\u{7F} HTTP/1.1\r\n\r\n", .controlCharacter),
            ("GET / HTTP/1.1\r\nX-Long: \(String(repeating: "v", count: 300))\u{1B}x\r\n\r\n", .controlCharacter),
            ("GET / HTTP/1.1\r\nX-Long: \(String(repeating: "v", count: 300))\nX: y\r\n\r\n", .bareLF),
            ("GET  / HTTP/1.1\r\n\r\n", .badRequestLine),
            ("GET / HTTP/1.1 \r\n\r\n", .badRequestLine),
            ("GET /\r\n\r\n", .badRequestLine),
            ("GET / HTTP/2.0\r\n\r\n", .badVersion),
            ("GET / HTTP/1.1\r\nHost : x\r\n\r\n", .spaceBeforeColon),
            ("GET / HTTP/1.1\r\nBad[Name]: x\r\n\r\n", .badFieldName),
            ("GET / HTTP/1.1\r\nNoColon\r\n\r\n", .badFieldName),
            ("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", .duplicateContentLength),
            ("POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\nhello", .badContentLength),
            ("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", .badContentLength),
            ("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", .badContentLength),
            ("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", .lengthAndChunked),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", .lengthAndChunked),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", .badTransferEncoding),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n", .badTransferEncoding),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n", .badTransferEncoding),
            ("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", .badTransferEncoding),
            ("HEAD / HTTP/1.1\r\nContent-Length: 30\r\n\r\nGET /admin HTTP/1.1\r\n\r\n1234567", .bodyNotAllowed),
            ("TRACE / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", .bodyNotAllowed),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", .badChunk),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX", .badChunk),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello", .bareLF),
        ]
        for (text, expected) in cases {
            XCTAssertEqual(run(text), expected, text.debugDescription)
            XCTAssertEqual(run(text, splitEvery: 1), expected, "byte by byte: \(text.debugDescription)")
        }
    }

    func testInHead_tracksHeadArrival() {
        var f = HTTP1Framing()
        XCTAssertFalse(f.inHead)
        _ = Array("GET / HT".utf8).withUnsafeBytes { f.feed($0) }
        XCTAssertTrue(f.inHead)
        _ = Array("TP/1.1\r\nHost: x\r\n\r\n".utf8).withUnsafeBytes { f.feed($0) }
        XCTAssertFalse(f.inHead)
    }
}

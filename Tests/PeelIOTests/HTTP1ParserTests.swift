@testable import PeelIO
import XCTest

final class HTTP1ParserTests: XCTestCase {
    /// Parses `text` (split into pieces of `splitEvery` bytes, whole when 0) as a stream of requests;
    /// returns the first refusal and the messages completed before it.
    private func parseAll(_ text: String, splitEvery: Int = 0, limits: HTTP1Parser.Limits = .init())
        -> (error: RequestError?, messages: [Parsed]) {
        var p = HTTP1Parser(limits: limits)
        let bytes = Array(text.utf8)
        var buf = RequestBuffer()
        var messages: [Parsed] = []
        var i = 0
        let step = splitEvery == 0 ? max(1, bytes.count) : splitEvery
        while i < bytes.count {
            bytes[i..<min(bytes.count, i + step)].withUnsafeBytes { buf.append($0) }
            i += step
            parsing: while true {
                switch p.parse(buf.bytes) {
                case .refused(let e):
                    return (e, messages)
                case .needMore:
                    if p.chunked { buf.count = p.compactChunked(buf.bytes) }
                    break parsing
                case .complete:
                    messages.append(Parsed(p, buf))
                    let next = RequestBuffer()
                    next.append(UnsafeRawBufferPointer(start: buf.base + p.messageEnd, count: buf.count - p.messageEnd))
                    buf = next
                    p.reset()
                }
            }
        }
        return (nil, messages)
    }

    /// What a test checks of one parsed message.
    struct Parsed: Equatable {
        var method: String
        var target: String
        var minor: Int
        var fields: [String]
        var body: String

        init(_ p: HTTP1Parser, _ b: RequestBuffer) {
            method = b.string(p.methodRange)
            target = b.string(p.targetRange)
            minor = p.minorVersion
            fields = p.fields.map { b.string(Int($0.nameStart)..<Int($0.nameEnd)) + "=" + b.string(Int($0.valueStart)..<Int($0.valueEnd)) }
            body = b.string(p.headEnd..<p.bodyEnd)
        }

        init(_ method: String, _ target: String, _ minor: Int = 1, _ fields: [String] = [], _ body: String = "") {
            self.method = method
            self.target = target
            self.minor = minor
            self.fields = fields
            self.body = body
        }
    }

    private func run(_ text: String, splitEvery: Int = 0) -> HTTP1Parser.Violation? {
        switch parseAll(text, splitEvery: splitEvery).error {
        case nil: return nil
        case .malformed(let v)?: return v
        case let other?:
            XCTFail("refused for another reason: \(other)")
            return nil
        }
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
        let cases: [(String, HTTP1Parser.Violation)] = [
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
        var f = HTTP1Parser()
        let buf = RequestBuffer()
        XCTAssertFalse(f.inHead)
        Array("GET / HT".utf8).withUnsafeBytes { buf.append($0) }
        XCTAssertEqual(f.parse(buf.bytes), .needMore)
        XCTAssertTrue(f.inHead)
        Array("TP/1.1\r\nHost: x\r\n\r\n".utf8).withUnsafeBytes { buf.append($0) }
        XCTAssertEqual(f.parse(buf.bytes), .complete)
        XCTAssertFalse(f.inHead)
    }

    func testPositions_methodTargetFieldsAndBody_wholeAndByteByByte() {
        let text = "\r\nPOST /a/b?x=1 HTTP/1.1\r\nHost: h\r\nX-Empty:\r\nX-Pad: \t v a l \t\r\nContent-Length: 5\r\n\r\nhello"
            + "GET /next HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
        let expected = [
            Parsed("POST", "/a/b?x=1", 1, ["Host=h", "X-Empty=", "X-Pad=v a l", "Content-Length=5"], "hello"),
            Parsed("GET", "/next", 0, ["Connection=keep-alive"]),
        ]
        for split in [0, 1, 3, 7] {
            let r = parseAll(text, splitEvery: split)
            XCTAssertNil(r.error, "split \(split)")
            XCTAssertEqual(r.messages, expected, "split \(split)")
        }
    }

    func testChunkedBody_isDechunkedInPlace_extensionsAndTrailersDropped() {
        let text = "POST /p HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1;q=\"x\"\r\nhello\r\n1\r\n \r\n"
            + "6\r\nworld!\r\n0\r\nX-Trailer: 1\r\n\r\nGET / HTTP/1.1\r\n\r\n"
        for split in [0, 1, 2, 5] {
            let r = parseAll(text, splitEvery: split)
            XCTAssertNil(r.error, "split \(split)")
            XCTAssertEqual(r.messages.map(\.body), ["hello world!", ""], "split \(split)")
            XCTAssertEqual(r.messages.last?.method, "GET")
        }
    }

    func testLimits_eachGetsItsOwnRefusal() {
        var limits = HTTP1Parser.Limits()
        limits.maxHead = 1024
        limits.maxRequestLine = 256
        limits.maxBody = 100
        limits.maxFields = 4
        let cases: [(String, RequestError)] = [
            ("GET /\(String(repeating: "a", count: 300)) HTTP/1.1\r\n\r\n", .targetTooLong),
            ("GET / HTTP/1.1\r\nX: \(String(repeating: "v", count: 1100))\r\n\r\n", .headTooLarge),
            ("GET / HTTP/1.1\r\nA: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\nE: 1\r\n\r\n", .headTooLarge),
            ("POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", .bodyTooLarge),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n\(String(repeating: "x", count: 64))\r\n40\r\n", .bodyTooLarge),
            ("\(String(repeating: "\r\n", count: 600))GET / HTTP/1.1\r\n\r\n", .headTooLarge),
        ]
        for (text, expected) in cases {
            for split in [0, 1, 13] {
                XCTAssertEqual(parseAll(text, splitEvery: split, limits: limits).error, expected, "\(text.prefix(40).debugDescription) split \(split)")
            }
        }
        // A declared body at the limit is fine, and the refusal comes before any body byte arrives.
        XCTAssertNil(parseAll("POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n\(String(repeating: "b", count: 100))", limits: limits).error)
    }

    func testRefusals_mapToTheirStatuses() {
        XCTAssertEqual(RequestError.malformed(.bareLF).status, 400)
        XCTAssertEqual(RequestError.malformed(.badVersion).status, 505)
        XCTAssertEqual(RequestError.targetTooLong.status, 414)
        XCTAssertEqual(RequestError.headTooLarge.status, 431)
        XCTAssertEqual(RequestError.bodyTooLarge.status, 413)
        XCTAssertEqual(RequestError.expectationFailed.status, 417)
        XCTAssertEqual(RequestError.headTimeout.status, 408)
        XCTAssertEqual(ReasonPhrase.of(422).description, "Unprocessable Content")
        XCTAssertEqual(ReasonPhrase.of(429).description, "Too Many Requests")
    }

    func testFieldNamesOver24Bytes_andNearMisses_areNotMistakenForFramingFields() {
        let text = "POST / HTTP/1.1\r\nTransfer-Encodinx: chunked\r\nContent-Lengthy: 5\r\n"
            + "X-Very-Long-Field-Name-Over-24-Bytes: 1\r\nContent-Length: 2\r\n\r\nok"
        let r = parseAll(text)
        XCTAssertNil(r.error)
        XCTAssertEqual(r.messages.first?.body, "ok")
    }

    // From the review: leniencies a proxy in front of Peel could read differently.
    func testChunkSizeJunk_trailerJunkAndLaterMinorVersions() {
        XCTAssertEqual(run("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5 6\r\nhello\r\n0\r\n\r\n"), .badChunk)
        XCTAssertNil(run("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5 \t; a=b\r\nhello\r\n0\r\n\r\n"))
        XCTAssertEqual(run("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nnot a field\r\n\r\n"), .spaceBeforeColon)
        XCTAssertEqual(run("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n: x\r\n\r\n"), .badFieldName)
        XCTAssertEqual(run("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nNoColon\r\n\r\n"), .badFieldName)
        var limits = HTTP1Parser.Limits()
        limits.maxHead = 256
        let longTrailer = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: \(String(repeating: "t", count: 300))\r\n\r\n"
        XCTAssertEqual(parseAll(longTrailer, splitEvery: 7, limits: limits).error, .headTooLarge)
        XCTAssertEqual(parseAll("GET / HTTP/1.2\r\n\r\n").messages.first?.minor, 1, "RFC 9110 §2.5: a later 1.x is read as 1.1")
        XCTAssertEqual(run("GET / HTTP/1.a\r\n\r\n"), .badVersion)
    }

    // MARK: issue 19: another protocol on this listener

    func testAnHTTP2Preface_isItsOwnRefusal_evenByteByByte() {
        let preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
        XCTAssertEqual(parseAll(preface).error, .http2Preface)
        XCTAssertEqual(parseAll(preface, splitEvery: 1).error, .http2Preface)
        XCTAssertEqual(parseAll("GET / HTTP/2.0\r\n\r\n").error, .malformed(.badVersion), "only the preface is HTTP/2's")
        XCTAssertEqual(RequestError.http2Preface.foreignReply?.suffix(8), [0, 0, 0, 0, 0, 0, 0, 0x0d], "GOAWAY HTTP_1_1_REQUIRED")
    }

    func testATLSClientHello_isTold_fromAStrayControlByte() {
        let hello = "\u{16}\u{03}\u{01}\u{02}\u{00}\u{01}"
        XCTAssertEqual(parseAll(hello).error, .tlsHandshake)
        XCTAssertEqual(parseAll(hello, splitEvery: 1).error, .tlsHandshake, "waits for the version bytes")
        XCTAssertEqual(parseAll("\u{16}GET / HTTP/1.1\r\n\r\n").error, .malformed(.controlCharacter))
        XCTAssertEqual(parseAll("\u{16}\u{03}\u{09}").error, .malformed(.controlCharacter), "not a TLS version")
        XCTAssertEqual(RequestError.tlsHandshake.detail, "tls handshake on a plain-HTTP listener")
        XCTAssertEqual(RequestError.tlsHandshake.foreignReply, [], "nothing HTTP is written to a TLS client")
    }
}

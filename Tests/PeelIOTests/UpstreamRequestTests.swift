@testable import PeelIO
import XCTest

/// The upstream request as a value (issue 26): the field lines curl gets, and the one rule for what
/// curl sends as a POST, checked without a socket or a handle in the multi.
final class UpstreamRequestTests: XCTestCase {
    private let client = ResponseHeaders([("Host", "a.example"), ("Accept", "application/json"), ("Connection", "x-secret"),
                                          ("X-Secret", "1"), ("Cookie", "s=1"), ("TE", "trailers")])
    // Parsed by curl, never contacted.
    private static let endpoint = try! UpstreamEndpoint(origin: "http://127.0.0.1:9")

    func testRelayedFieldsLoseWhatIsDroppedByTokenAndByName_thenPeelsOwnFollowInOrder() {
        let r = UpstreamRequest(method: "GET", target: .origin(Self.endpoint, path: "/a", query: nil), relayed: client,
                                dropping: FieldSet([.host, .connection, .te]), droppingNamed: HeaderNameSet(["x-secret"]),
                                added: [FieldLine("X-Request-Id", "r1"), FieldLine("Host", "")])
        XCTAssertEqual(r.fieldLines, ["Accept: application/json", "Cookie: s=1", "X-Request-Id: r1", "Host:"])
        XCTAssertFalse(r.sentAsPost)
    }

    // The codings asked for go as one line of Peel's own (curl then writes none); a line already
    // relayed or added is the only one, and "" leaves the line to curl (every coding it decodes).
    func testTheCodingsGoAsOneLine_unlessOneIsAlreadyThere() {
        let target = UpstreamTarget.origin(Self.endpoint, path: "/a", query: nil)
        XCTAssertEqual(UpstreamRequest(method: "GET", target: target, acceptEncoding: "gzip").fieldLines,
                       ["Accept-Encoding: gzip", "Accept:"])
        XCTAssertEqual(UpstreamRequest(method: "GET", target: target, acceptEncoding: "").fieldLines, ["Accept:"])
        XCTAssertEqual(UpstreamRequest(method: "GET", target: target, acceptEncoding: "gzip",
                                       relayed: ResponseHeaders([("Accept-Encoding", "br")])).fieldLines,
                       ["Accept-Encoding: br", "Accept:"])
        XCTAssertEqual(UpstreamRequest(method: "GET", target: target, acceptEncoding: "gzip",
                                       added: [FieldLine("accept-encoding", "identity")]).fieldLines,
                       ["accept-encoding: identity", "Accept:"])
    }

    func testWithoutAnAcceptCurlIsToldNotToInventOne() {
        let r = UpstreamRequest(method: "DELETE", target: .origin(Self.endpoint, path: "/a", query: nil), relayed: ResponseHeaders([("X-A", "1")]))
        XCTAssertEqual(r.fieldLines, ["X-A: 1", "Accept:"])
    }

    func testARequestCurlSendsAsAPost_getsNoFormTypeAndNoExpect() {
        // POST, PUT and PATCH go out as curl POSTs even when empty; so does anything with a body.
        for method in ["POST", "PUT", "PATCH"] {
            let r = UpstreamRequest(method: method, target: .origin(Self.endpoint, path: "/a", query: nil))
            XCTAssertTrue(r.sentAsPost, method)
            XCTAssertEqual(r.fieldLines, ["Accept:", "Content-Type:", "Expect:"], method)
        }
        let withBody = UpstreamRequest(method: "DELETE", target: .origin(Self.endpoint, path: "/a", query: nil), body: .bytes([1, 2]))
        XCTAssertTrue(withBody.sentAsPost)
        // The client's own Content-Type is kept, and no empty one is added after it.
        let typed = UpstreamRequest(method: "POST", target: .origin(Self.endpoint, path: "/a", query: nil), body: .bytes([0x7B, 0x7D]),
                                    relayed: ResponseHeaders([("Content-Type", "application/json"), ("Accept", "*/*")]))
        XCTAssertEqual(typed.fieldLines, ["Content-Type: application/json", "Accept: */*", "Expect:"])
        // HEAD is never a POST, whatever it carries (the handle asks for no body).
        XCTAssertFalse(UpstreamRequest(method: "HEAD", target: .url("http://h/"), body: .bytes([1])).sentAsPost)
        XCTAssertFalse(UpstreamRequest(method: "GET", target: .url("http://h/")).sentAsPost)
        XCTAssertFalse(UpstreamRequest(method: "OPTIONS", target: .url("http://h/")).sentAsPost)
    }

    func testOnlyIdempotentMethodsMayBeSentTwice() {
        XCTAssertEqual(["GET", "HEAD", "PUT", "DELETE", "OPTIONS", "POST", "PATCH", "PURGE", "get"].map { MethodToken($0).isIdempotent },
                       [true, true, true, true, true, false, false, false, false])
    }
}

/// The head's facts, read once by the collector as the lines come (issue 26).
final class ResponseFactsTests: XCTestCase {
    private func collect(_ lines: [String]) -> HeaderCollector {
        let c = HeaderCollector()
        for line in lines {
            let l = Array(line.utf8)
            XCTAssertTrue(l.withUnsafeBytes { c.addLine($0) }, line)
        }
        return c
    }

    func testTheFinalHeadsFirstValuesAreRead_whenItsEmptyLineArrives() {
        let c = collect(["HTTP/1.1 103 Early Hints\r\n", "Content-Type: text/html\r\n", "\r\n",
                         "HTTP/1.1 201 Created\r\n", "content-type: application/json\r\n", "Content-Type: text/plain\r\n",
                         "Content-Length: 42\r\n", "Content-Encoding: gzip\r\n",
                         "Content-Disposition: attachment;\r\n", " filename=a.json\r\n", "ETag: \"v1\"\r\n"])
        XCTAssertNil(c.facts, "not before the head is whole")
        let empty = Array("\r\n".utf8)
        XCTAssertTrue(empty.withUnsafeBytes { c.addLine($0) })
        XCTAssertEqual(c.facts, ResponseFacts(status: 201, contentType: "application/json", contentLength: "42", contentEncoding: "gzip",
                                              contentDisposition: "attachment; filename=a.json"))
        XCTAssertTrue(c.facts?.isCoded ?? false)
        // The same facts from the head kept as a value.
        XCTAssertEqual(ResponseFacts(status: 201, headers: c.take()), ResponseFacts(status: 201, contentType: "application/json",
                       contentLength: "42", contentEncoding: "gzip", contentDisposition: "attachment; filename=a.json"))
        XCTAssertNil(c.facts, "a new transfer starts with none")
    }

    // RFC 9110 §5.5: CR, LF and NUL in a value refuse the head, wherever they sit (the check reads
    // eight bytes at a time); every other byte, controls from 0x0E up and obs-text included, passes.
    func testCRLFAndNULAreRefusedAtEveryPosition_andOtherBytesPass() {
        for length in [1, 7, 8, 9, 15, 16, 17, 40] {
            for at in 0..<length {
                for (bad, word) in [(UInt8(0x00), "NUL"), (0x0A, "LF"), (0x0D, "CR")] {
                    let c = HeaderCollector()
                    let status = Array("HTTP/1.1 200 OK\r\n".utf8)
                    XCTAssertTrue(status.withUnsafeBytes { c.addLine($0) })
                    var value = [UInt8](repeating: 0x61, count: length)
                    value[at] = bad
                    let line = Array("X-V: ".utf8) + value + Array("\r\n".utf8)
                    XCTAssertFalse(line.withUnsafeBytes { c.addLine($0) }, "\(word) at \(at) of \(length)")
                    XCTAssertEqual(c.violation, "the upstream sent a field value with \(word) in it")
                }
            }
        }
        let c = HeaderCollector()
        let status = Array("HTTP/1.1 200 OK\r\n".utf8)
        XCTAssertTrue(status.withUnsafeBytes { c.addLine($0) })
        let value = [UInt8](0x0E...0x7E) + [0x01, 0x09, 0x0B, 0x0C, 0x7F, 0x80, 0xFF, 0x0E]
        let line = Array("X-V: x".utf8) + value + Array("x\r\n".utf8)
        XCTAssertTrue(line.withUnsafeBytes { c.addLine($0) }, "\(c.violation ?? "")")
    }

    func testAnInterimHeadHasNoFacts_andTheFinalOneStartsAfresh() {
        let c = collect(["HTTP/1.1 100 Continue\r\n", "\r\n"])
        XCTAssertNil(c.facts)
        let d = collect(["HTTP/1.1 100 Continue\r\n", "Content-Length: 9\r\n", "\r\n", "HTTP/1.1 204 No Content\r\n", "\r\n"])
        XCTAssertEqual(d.facts, ResponseFacts(status: 204))
    }

    func testALengthIsDigitsOnly_andIdentityIsNoCoding() {
        XCTAssertEqual(ResponseFacts(status: 200, contentLength: "0").contentLength, 0)
        XCTAssertEqual(ResponseFacts(status: 200, contentLength: " 42\t").contentLength, 42, "optional whitespace around")
        for bad in ["+5", "-1", "5, 5", "0x10", "", " ", "99999999999999999999"] {
            XCTAssertNil(ResponseFacts(status: 200, contentLength: bad).contentLength, bad)
        }
        XCTAssertFalse(ResponseFacts(status: 200, contentEncoding: "identity").isCoded)
        XCTAssertFalse(ResponseFacts(status: 200, contentEncoding: "IDENTITY").isCoded)
        XCTAssertFalse(ResponseFacts(status: 200, contentEncoding: "").isCoded)
        XCTAssertFalse(ResponseFacts(status: 200).isCoded)
        XCTAssertTrue(ResponseFacts(status: 200, contentEncoding: "br").isCoded)
        XCTAssertTrue(ResponseFacts(status: 200, contentType: "Text/Event-Stream; charset=utf-8").isEventStream)
        XCTAssertFalse(ResponseFacts(status: 200, contentType: "text/plain").isEventStream)
    }

    func testFactsAgreeWithTheHeadThatIsRelayed() {
        // RFC 9110 §7.6.1: fields the upstream names in Connection are dropped, so no decision reads them.
        let c = collect(["HTTP/1.1 200 OK\r\n", "Connection: content-type, content-encoding\r\n",
                         "Content-Type: text/html\r\n", "Content-Encoding: gzip\r\n", "Content-Length: 7\r\n", "\r\n"])
        let facts = c.facts
        XCTAssertNil(facts?.contentType)
        XCTAssertEqual(facts?.isCoded, false)
        XCTAssertEqual(facts?.contentLength, 7)
        XCTAssertEqual(facts, ResponseFacts(status: 200, headers: c.take()))
        let keepAlive = collect(["HTTP/1.1 200 OK\r\n", "Connection: keep-alive\r\n", "Content-Type: text/html\r\n", "\r\n"])
        XCTAssertEqual(keepAlive.facts?.contentType, "text/html")
        let folded = collect(["HTTP/1.1 200 OK\r\n", "Connection: keep-alive,\r\n", " content-type\r\n", "Content-Type: text/html\r\n", "\r\n"])
        XCTAssertNil(folded.facts?.contentType, "a folded Connection line names fields too")
    }

    func testAFoldedLengthIsStillALength() {
        let c = collect(["HTTP/1.1 200 OK\r\n", "Content-Length:\r\n", " 5\r\n", "\r\n"])
        XCTAssertEqual(c.facts?.contentLength, 5)
        XCTAssertNil(ResponseFacts(status: 200, contentLength: "5 5").contentLength)
    }
}

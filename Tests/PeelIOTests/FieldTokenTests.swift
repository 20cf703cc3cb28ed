import XCTest
@testable import PeelIO

/// Field names are identified once (issue 20): by the request parser and the upstream head
/// collector, into tokens every later stage tests by bit.
final class FieldTokenTests: XCTestCase {
    func testEveryTokenIsFoundFromItsNameInAnyCase() {
        for token in FieldToken.allCases where token != .other {
            let name = token.name
            XCTAssertEqual(FieldToken.identify(name), token, name)
            XCTAssertEqual(FieldToken.identify(name.uppercased()), token, name)
            // Title-Case, as most clients send.
            let title = name.split(separator: "-").map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined(separator: "-")
            XCTAssertEqual(FieldToken.identify(title), token, title)
        }
        XCTAssertLessThanOrEqual(FieldToken.allCases.count, 64, "FieldSet holds 64 tokens")
        XCTAssertEqual(FieldToken.allCases.map(\.name).max { $0.utf8.count < $1.utf8.count }?.utf8.count, FieldToken.longestName)
    }

    func testNamesPeelDoesNotActOnAreOther() {
        for name in ["", "x-custom", "hos", "hosts", "content-lengthx", "xcontent-length", "content_length",
                     "access-control-allow-credentialsX", String(repeating: "a", count: 40), "ag", "agE1",
                     // `^` folds onto `~` and `_` onto DEL under `| 0x20`; no token name holds either.
                     "x-request^id", "x~request-id", "set-cookie2", "vary ",
                     // Not field names: CR folds onto `-` and 0x15 onto `5` under `| 0x20`.
                     "content\rlength", "content-md\u{15}", "Host\u{0}"] {
            XCTAssertEqual(FieldToken.identify(name), .other, name)
        }
    }

    func testTheTokenCharacterBitsAreRFC9110s() {
        let tchar = Set(Array("!#$%&'*+-.^_`|~0123456789".utf8) + Array(UInt8(ascii: "a")...UInt8(ascii: "z"))
                        + Array(UInt8(ascii: "A")...UInt8(ascii: "Z")))
        for b in 0...255 { XCTAssertEqual(isTokenByte(UInt8(b)), tchar.contains(UInt8(b)), "byte \(b)") }
    }

    func testFieldSetMembership() {
        let set = FieldSet([.host, .vary, .age])
        XCTAssertTrue(set.contains(.host))
        XCTAssertTrue(set.contains(.age))
        XCTAssertFalse(set.contains(.etag))
        XCTAssertFalse(set.contains(.other), ".other is never in a set")
        var more = set
        more.insert(.other)
        XCTAssertEqual(more, set)
        more.insert(.etag)
        XCTAssertTrue(more.contains(.etag))
        XCTAssertFalse(more.subtracting(FieldSet([.etag])).contains(.etag))
        XCTAssertTrue(FieldSet.hopByHop.contains(.transferEncoding))
        XCTAssertFalse(FieldSet.hopByHop.contains(.contentType))
    }

    func testTheRequestParserTokenizesEachField() {
        let head = "GET / HTTP/1.1\r\nHOST: a\r\nX-Forwarded-For: 1.2.3.4\r\nX-Custom: 1\r\n"
            + "Access-Control-Request-Headers: x\r\nCoNnEcTiOn: keep-alive\r\n\r\n"
        var bytes = Array(head.utf8)
        var parser = HTTP1Parser(limits: .init())
        let progress = bytes.withUnsafeMutableBytes { parser.parse($0) }
        XCTAssertEqual(progress, .complete)
        XCTAssertEqual(parser.fields.map(\.token), [.host, .xForwardedFor, .other, .accessControlRequestHeaders, .connection])
    }

    func testTheHeadCollectorTokenizesAndRecordsWhatIsPresent() {
        let c = HeaderCollector()
        for line in ["HTTP/1.1 200 OK\r\n", "Content-Type: application/json\r\n", "ETAG: \"1\"\r\n", "X-Thing: y\r\n",
                     "Vary: Origin\r\n", "\r\n"] {
            let l = Array(line.utf8)
            XCTAssertTrue(l.withUnsafeBytes { c.addLine($0) }, line)
        }
        let h = c.take()
        var tokens: [FieldToken] = []
        h.forEachField { tokens.append($0.token) }
        XCTAssertEqual(tokens, [.contentType, .etag, .other, .vary])
        XCTAssertTrue(h.has(.etag))
        XCTAssertTrue(h.has(.vary))
        XCTAssertFalse(h.has(.location))
        XCTAssertEqual(h.first(.etag), "\"1\"")
        XCTAssertNil(h.first(.location))
        XCTAssertEqual(h.first("x-thing"), "y")
    }

    func testFieldsAUpstreamNamesInConnectionGoWithTheirTokens() {
        let h = ResponseHeaders([("Connection", "x-secret, etag"), ("X-Secret", "1"), ("ETag", "\"e\""), ("Age", "3")])
            .droppingConnectionOptions()
        XCTAssertEqual(h.pairs.map(\.0), ["Connection", "Age"])
        XCTAssertFalse(h.has(.etag))
        XCTAssertTrue(h.has(.age))
    }

    func testBlocksBuiltFromPairsHoldOnlyFieldsSafeToCopy() {
        let h = ResponseHeaders([("Good", "1"), ("Bad", "a\r\nInjected: 1"), ("Bad Name", "2"), ("", "3"), ("Nul", "a\u{0}b"),
                                 ("Location", "/x")])
        XCTAssertEqual(h.pairs.map(\.0), ["Good", "Location"])
        XCTAssertTrue(h.has(.location))
    }

    func testTheReplyWriterOwnsFramingAndTheConnectionsFate() {
        let head = ReplyHead()
        head.begin(status: 200)
        var out = ReplyFields()
        out.add(ResponseHeaders([("Content-Length", "9"), ("Transfer-Encoding", "chunked"), ("Date", "then"), ("Date", "again"),
                                 ("Connection", "close"), ("X-Kept", "1")]), dropping: FieldSet([]))
        out.add("connection", "close")
        out.add("X-Bad", "a\r\nb")
        XCTAssertEqual(out.pairs.map(\.0), ["Date", "X-Kept"])
        head.fields(out)
        let text = String(decoding: UnsafeRawBufferPointer(start: head.bytes, count: head.count), as: UTF8.self)
        XCTAssertEqual(text, "HTTP/1.1 200 OK\r\nDate: then\r\nX-Kept: 1\r\n")
    }
}

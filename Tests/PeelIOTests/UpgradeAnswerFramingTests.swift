@testable import PeelIO
import XCTest

/// How a tunnel's dial reads the upstream's answer to the upgrade (RFC 9112): where its head ends,
/// its status and fields, and the body of an answer other than 101.
final class UpgradeAnswerFramingTests: XCTestCase {
    private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

    /// Where the dial's reader finds the end of the head in `b` read at once; nil while it has not come.
    private func headEnd(_ b: [UInt8]) -> Int? {
        var reader = UpgradeAnswer(maxBody: 1 << 20)
        _ = b.withUnsafeBytes { reader.take($0) }
        return reader.head?.end
    }

    /// A chunked body, all its bytes fed at once to the decoder the dial feeds as they arrive.
    private func dechunk(_ b: ArraySlice<UInt8>) -> UpgradeAnswer.Body {
        var decoder = ChunkedDecoder()
        return decoder.feed(b)
    }

    func testHeadEnd_isAfterTheEmptyLine_andNilUntilItCame() {
        XCTAssertNil(headEnd(bytes("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n")))
        XCTAssertNil(headEnd(bytes("\r\n\r")))
        XCTAssertNil(headEnd([]))
        let head = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"
        XCTAssertEqual(headEnd(bytes(head + "\u{81}\u{05}hello")), head.utf8.count,
                       "the bytes after the head are the tunnel's, not the head's")
        XCTAssertNil(headEnd(bytes("HTTP/1.1 101 x\n\n")), "bare line feeds do not end a head")
    }

    func testParseHead_readsTheStatusAndFields_trimmingWhitespace() throws {
        let head = try XCTUnwrap(UpgradeAnswer.parseHead(bytes(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade:  websocket \r\nConnection: Upgrade\r\nSec-WebSocket-Accept:\tabc=\r\n\r\n")[...]))
        XCTAssertEqual(head.status, 101)
        XCTAssertEqual(head.fields.map(\.name), ["Upgrade", "Connection", "Sec-WebSocket-Accept"])
        XCTAssertEqual(head.fields.map(\.value), ["websocket", "Upgrade", "abc="])
    }

    func testParseHead_takesAStatusLineWithoutReason_andHTTP10() {
        XCTAssertEqual(UpgradeAnswer.parseHead(bytes("HTTP/1.1 101\r\n\r\n")[...])?.status, 101)
        XCTAssertEqual(UpgradeAnswer.parseHead(bytes("HTTP/1.0 403 Forbidden\r\n\r\n")[...])?.status, 403)
    }

    func testParseHead_refusesWhatIsNotAnHTTP1Head() {
        for text in ["HTTP/2 101\r\n\r\n", "HTTP/1.1 1O1 x\r\n\r\n", "HTTP/1.1 99 x\r\n\r\n", "HTTP/1.1 1010 x\r\n\r\n",
                     "SSH-2.0-OpenSSH\r\n\r\n", "HTTP/1.1 101 x\r\nno colon here\r\n\r\n",
                     "HTTP/1.1 101 x\r\n: empty name\r\n\r\n", "HTTP/1.1 101 x\r\nUpgrade : websocket\r\n\r\n",
                     "HTTP/1.1 101 x\r\n folded: line\r\n\r\n",
                     // As for a call's answer: a name that is not a token, a value with NUL or a bare LF.
                     "HTTP/1.1 101 x\r\nUp(grade): websocket\r\n\r\n", "HTTP/1.1 101 x\r\nUpgrade: web\u{0}socket\r\n\r\n",
                     "HTTP/1.1 101 x\r\nUpgrade: web\nsocket\r\n\r\n"] {
            XCTAssertNil(UpgradeAnswer.parseHead(bytes(text)[...]), text)
        }
    }

    func testBody_byContentLength_waitsForAllOfIt_andLeavesWhatFollows() {
        let fields = [(name: "Content-Length", value: "5")]
        XCTAssertEqual(UpgradeAnswer.body(of: 403, fields, bytes("hel")[...]), .needMore)
        XCTAssertEqual(UpgradeAnswer.body(of: 403, fields, bytes("hello")[...]), .whole(bytes("hello")))
        XCTAssertEqual(UpgradeAnswer.body(of: 403, fields, bytes("helloEXTRA")[...]), .whole(bytes("hello")))
        XCTAssertEqual(UpgradeAnswer.body(of: 403, [(name: "content-length", value: "0")], []), .whole([]))
    }

    func testBody_refusesALengthThatIsNotANumber() {
        for v in ["five", "-1", "1e3", ""] {
            guard case .broken = UpgradeAnswer.body(of: 400, [(name: "Content-Length", value: v)], bytes("x")[...]) else {
                return XCTFail("Content-Length: \(v) was taken")
            }
        }
    }

    func testBody_of204And304_isEmpty_whateverTheFieldsSay() {
        XCTAssertEqual(UpgradeAnswer.body(of: 204, [(name: "Content-Length", value: "10")], []), .whole([]))
        XCTAssertEqual(UpgradeAnswer.body(of: 304, [], bytes("junk")[...]), .whole([]))
        XCTAssertFalse(UpgradeAnswer.runsToClose(204, []))
        XCTAssertFalse(UpgradeAnswer.runsToClose(304, []))
    }

    func testBody_withoutLengthOrChunking_runsToTheClose() {
        XCTAssertEqual(UpgradeAnswer.body(of: 400, [], bytes("so far")[...]), .needMore)
        XCTAssertTrue(UpgradeAnswer.runsToClose(400, [(name: "Content-Type", value: "text/plain")]))
        XCTAssertFalse(UpgradeAnswer.runsToClose(400, [(name: "Content-Length", value: "3")]))
        XCTAssertFalse(UpgradeAnswer.runsToClose(400, [(name: "Transfer-Encoding", value: "chunked")]))
    }

    func testChunked_isDechunked_onceItsLastChunkAndTrailersCame() {
        // The dial decodes such a body as it arrives.
        XCTAssertTrue(UpgradeAnswer.isChunked([(name: "Transfer-Encoding", value: "chunked")]))
        XCTAssertEqual(dechunk(bytes("5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n")[...]),
                       .whole(bytes("hello world")))
        XCTAssertEqual(dechunk(bytes("5\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n")[...]), .whole(bytes("hello")))
        for partial in ["", "5", "5\r\nhel", "5\r\nhello", "5\r\nhello\r\n", "5\r\nhello\r\n0\r\n", "5\r\nhello\r\n0\r\nX: 1\r\n"] {
            XCTAssertEqual(dechunk(bytes(partial)[...]), .needMore, partial)
        }
    }

    func testChunked_refusesBrokenFraming() {
        for text in ["zz\r\nhello\r\n0\r\n\r\n", "5\r\nhelloXX0\r\n\r\n", "\r\nhello\r\n"] {
            guard case .broken = dechunk(bytes(text)[...]) else { return XCTFail(text) }
        }
    }

    func testChunked_aSizeTooBigForAnInt_orWithASign_isRefused_notACrash() {
        // The upstream is a peer: a size near Int.max overflowed the arithmetic (a trap).
        for size in ["7fffffffffffffff", "7ffffffffffffffe", "ffffffffffffffffff", "+5", "-5", "0x5"] {
            guard case .broken = dechunk(bytes("\(size)\r\nhello\r\n0\r\n\r\n")[...]) else { return XCTFail(size) }
        }
        XCTAssertEqual(dechunk(bytes("fffffffffffffff\r\nhello")[...]), .needMore,
                       "a big chunk waits for its bytes (the dial's body bound ends the wait)")
        XCTAssertEqual(dechunk(bytes("A\r\n0123456789\r\n0\r\n\r\n")[...]), .whole(bytes("0123456789")))
    }

    func testChunked_worksOnASliceThatDoesNotStartAtZero() {
        let all = bytes("HEAD3\r\nabc\r\n0\r\n\r\n")
        XCTAssertEqual(dechunk(all[4...]), .whole(bytes("abc")))
    }

    func testEncoded_percentEncodesBytesAbove0x7F_only() {
        XCTAssertEqual(TunnelDial.encoded("/chat/room?x=1%20"), "/chat/room?x=1%20")
        XCTAssertEqual(TunnelDial.encoded("/caf\u{E9}"), "/caf%C3%A9")
    }
}

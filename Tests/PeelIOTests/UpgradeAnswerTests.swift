@testable import PeelIO
import XCTest

/// The upgrade answer read as its bytes arrive: the same result however it is cut into reads,
/// with each byte looked at a bounded number of times.
final class UpgradeAnswerTests: XCTestCase {
    private func feed(_ bytes: [UInt8], in piece: Int, maxBody: Int = 64 << 20) -> (UpgradeAnswer.Progress, UpgradeAnswer) {
        var reader = UpgradeAnswer(maxBody: maxBody)
        var i = 0
        var last = UpgradeAnswer.Progress.needMore
        while i < bytes.count {
            let end = min(bytes.count, i + piece)
            last = bytes[i..<end].withUnsafeBytes { reader.take($0) }
            i = end
            if last != .needMore { break }
        }
        return (last, reader)
    }

    func testAChunkedBodyOfManySmallChunks_readInSmallPieces_isLookedAtOnce() {
        // 2 MiB of one-byte chunks (12 MiB of framing) read 16 KiB at a time, as the dial reads:
        // rescanning from the body's start on every read looked at about 4,600 times as many bytes.
        var framed = Array("HTTP/1.1 403 Forbidden\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
        let one = Array("1;x=y\r\na\r\n".utf8)
        let chunks = 2 << 20
        framed.reserveCapacity(framed.count + chunks * one.count + 5)
        for _ in 0..<chunks { framed += one }
        framed += Array("0\r\n\r\n".utf8)
        let (progress, reader) = feed(framed, in: 16_384)
        XCTAssertEqual(progress, .whole([UInt8](repeating: 0x61, count: chunks)))
        XCTAssertLessThanOrEqual(reader.examined, framed.count, "bytes were looked at again")
    }

    func testAnAnswerCutAnywhere_readsAsTheWholeDoes() {
        let answers = [
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 403 Forbidden\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-T: 1\r\n\r\n",
            "HTTP/1.1 404 Not Found\r\nContent-Length: 5\r\n\r\nhello",
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n\u{81}\u{02}hi",
        ]
        for text in answers {
            let bytes = Array(text.utf8)
            let (whole, all) = feed(bytes, in: bytes.count)
            XCTAssertNotEqual(whole, .needMore, text)
            if whole == .switched { XCTAssertEqual(Array(all.early), Array("\u{81}\u{02}hi".utf8)) }
            for piece in 1..<bytes.count {
                let (cut, reader) = feed(bytes, in: piece)
                XCTAssertEqual(cut, whole, "\(text) in pieces of \(piece)")
                XCTAssertEqual(reader.head?.status, all.head?.status)
                // The bytes that came with the 101's head, and no more: later ones are the tunnel's to read.
                if whole == .switched { XCTAssertTrue(Array("\u{81}\u{02}hi".utf8).starts(with: reader.early)) }
            }
        }
    }

    func testAHeadOver64KiB_andABodyOverTheLimit_areRefused() {
        let long = Array("HTTP/1.1 403 Forbidden\r\nX: ".utf8) + [UInt8](repeating: 0x62, count: 70_000)
        XCTAssertEqual(feed(long, in: 16_384).0, .broken(.protocolError("the upstream's head is over 64 KiB")))
        let big = Array("HTTP/1.1 403 Forbidden\r\nContent-Length: 20\r\n\r\n".utf8) + [UInt8](repeating: 0x62, count: 20)
        XCTAssertEqual(feed(big, in: 8, maxBody: 10).0, .broken(.tooLarge))
    }

    func testTheCloseEndsABodyWithoutLength_andCutsAnyOther() {
        var reader = UpgradeAnswer(maxBody: 1 << 20)
        _ = Array("HTTP/1.1 400 Bad Request\r\n\r\nsorry".utf8).withUnsafeBytes { reader.take($0) }
        XCTAssertEqual(reader.ended(), .whole(Array("sorry".utf8)))
        var cut = UpgradeAnswer(maxBody: 1 << 20)
        _ = Array("HTTP/1.1 400 Bad Request\r\nContent-Length: 9\r\n\r\nsorry".utf8).withUnsafeBytes { cut.take($0) }
        XCTAssertEqual(cut.ended(), .broken(.protocolError("the upstream's answer to the upgrade was cut short")))
    }
}

@testable import PeelIO
import XCTest

/// A request target's bytes as every later stage reads them: well-formed UTF-8 as sent, every other
/// byte percent-encoded on its own, nothing replaced.
final class TargetTextTests: XCTestCase {
    private func text(_ bytes: [UInt8]) -> String {
        bytes.withUnsafeBytes { TargetText.string($0) }
    }

    private func text(_ ascii: String, _ raw: [UInt8], _ tail: String = "") -> String {
        text(Array(ascii.utf8) + raw + Array(tail.utf8))
    }

    func testBytesThatAreNotUTF8_arePercentEncodedByteForByte_soDistinctTargetsStayDistinct() {
        XCTAssertEqual(text("/pay/", [0xFF]), "/pay/%ff")
        XCTAssertEqual(text("/pay/", [0xFE]), "/pay/%fe")
        XCTAssertEqual(text("/q?name=", [0xD6, 0xD0], "&x=1"), "/q?name=%d6%d0&x=1", "a GBK query keeps its octets")
        XCTAssertEqual(text("/a/", [0x80, 0xBF], "/b"), "/a/%80%bf/b", "stray continuation bytes")
    }

    func testOverlongSurrogateAndTruncatedForms_areEncodedEachByte() {
        XCTAssertEqual(text("/", [0xC0, 0xAE, 0xC0, 0xAE], "/x"), "/%c0%ae%c0%ae/x")
        XCTAssertEqual(text("/", [0xE0, 0x80, 0xAF]), "/%e0%80%af")
        XCTAssertEqual(text("/", [0xF0, 0x80, 0x80, 0xAE]), "/%f0%80%80%ae")
        XCTAssertEqual(text("/", [0xED, 0xA0, 0x80]), "/%ed%a0%80", "a surrogate")
        XCTAssertEqual(text("/", [0xF4, 0x90, 0x80, 0x80]), "/%f4%90%80%80", "past U+10FFFF")
        XCTAssertEqual(text("/", [0xE2, 0x82]), "/%e2%82", "cut at the end")
        XCTAssertEqual(text("/", [0xE2, 0x82], "/"), "/%e2%82/", "cut by ASCII")
        XCTAssertEqual(text("/", [0xE2, 0xC3, 0xA9]), "/%e2\u{E9}", "a well-formed sequence after a broken lead stays")
    }

    func testASCII_andWellFormedRawUTF8_stayAsSent() {
        XCTAssertEqual(text(Array("/api/user?x=%FF&y=1".utf8)), "/api/user?x=%FF&y=1", "escapes the client wrote stay as written")
        XCTAssertEqual(text("/caf", [0xC3, 0xA9]), "/café")
        XCTAssertEqual(text("/", [0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0x98, 0x80]), "/€😀")
        XCTAssertEqual(text([]), "")
    }
}

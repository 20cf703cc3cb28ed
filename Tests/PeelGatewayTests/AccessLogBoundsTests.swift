import PeelEnvelope
@testable import PeelGateway
import XCTest

/// What a failure body puts in the access log is bounded: a 5xx's hidden message and a string code
/// read from the body take at most 200 bytes, cut on a character boundary.
final class AccessLogBoundsTests: XCTestCase {
    func testAHiddenMessage_isCutTo200BytesWithItsEllipsis_onACharacterBoundary() {
        let long = String(repeating: "数据库连接失败", count: 40)  // 840 bytes
        let cut = Forwarder.bounded(long)
        XCTAssertLessThanOrEqual(cut.utf8.count, 200)
        XCTAssertTrue(cut.hasSuffix("…"))
        XCTAssertTrue(long.hasPrefix(String(cut.dropLast())))
        XCTAssertEqual(Forwarder.bounded("short"), "short")
        let exact = String(repeating: "a", count: 200)
        XCTAssertEqual(Forwarder.bounded(exact), exact)
    }

    func testAStringCodeFromTheBody_isBoundedInTheLog_anIntegerIsNot() {
        let huge = EnvelopeCode.string(String(repeating: "E", count: 5_000))
        let logged = Forwarder.logged(huge)
        XCTAssertLessThanOrEqual(logged.utf8.count, 202)  // the quotes around 200 bytes
        XCTAssertTrue(logged.hasPrefix("\"EEE"))
        XCTAssertEqual(Forwarder.logged(.integer(-104)), "-104")
        XCTAssertEqual(Forwarder.logged("A0230"), #""A0230""#)
    }
}

@testable import PeelGateway
import PeelIO
import XCTest

/// The head decisions from the head's facts alone, without a socket (issue 26).
final class HeadDecisionTests: XCTestCase {
    private let mib = 1 << 20

    func testACodedPassthroughKeepsItsCoding_onlyWhenTheClientTakesItAndItPassesUnjudged() {
        let gz = ResponseFacts(status: 200, contentType: "image/png", contentLength: "900", contentEncoding: " gzip")
        XCTAssertEqual(HeadDecision.keptCoding(gz, accepted: "gzip, br", passesUnjudged: true), "gzip")
        XCTAssertNil(HeadDecision.keptCoding(gz, accepted: "br", passesUnjudged: true), "a coding the client cannot take is decoded")
        XCTAssertNil(HeadDecision.keptCoding(gz, accepted: nil, passesUnjudged: true), "no Accept-Encoding takes no coding")
        XCTAssertNil(HeadDecision.keptCoding(gz, accepted: "gzip", passesUnjudged: false), "a judged answer is read decoded")
        let plain = ResponseFacts(status: 200, contentType: "image/png", contentEncoding: "identity")
        var asked = false
        XCTAssertNil(HeadDecision.keptCoding(plain, accepted: "gzip", passesUnjudged: { asked = true; return true }()))
        XCTAssertFalse(asked, "the envelope rules are not asked about an answer with no coding")
    }

    func testDeclaredLengthsUpToTheThresholdAreBuffered_theRestStreams() {
        let small = ResponseFacts(status: 200, contentType: "application/pdf", contentLength: "1000")
        XCTAssertEqual(HeadDecision.body(small, keptCoding: nil, threshold: mib), .buffer)
        let big = ResponseFacts(status: 200, contentType: "application/pdf", contentLength: String(mib + 1))
        XCTAssertEqual(HeadDecision.body(big, keptCoding: nil, threshold: mib), .stream(contentLength: mib + 1))
        let unknown = ResponseFacts(status: 200, contentType: "application/pdf")
        XCTAssertEqual(HeadDecision.body(unknown, keptCoding: nil, threshold: mib), .stream(contentLength: nil))
        let events = ResponseFacts(status: 200, contentType: "text/event-stream", contentLength: "10")
        XCTAssertEqual(HeadDecision.body(events, keptCoding: nil, threshold: mib), .stream(contentLength: 10))
    }

    func testADecodedBodysLengthSaysNothing_soItStreamsChunked_aKeptOneKeepsIt() {
        let coded = ResponseFacts(status: 200, contentType: "text/csv", contentLength: "500", contentEncoding: "gzip")
        XCTAssertEqual(HeadDecision.body(coded, keptCoding: nil, threshold: mib), .stream(contentLength: nil))
        XCTAssertEqual(HeadDecision.body(coded, keptCoding: "gzip", threshold: mib), .buffer)
    }

    func testAStatusWithNoContent_isAnsweredWhole_whateverItsFieldsSay() {
        // Made once the head is whole, the decision must not stream what has no body: a 304 refreshes
        // a stored answer only on the buffered path, and a chunked 204 would be a framing error.
        for status in [101, 204, 205, 304] {
            let facts = ResponseFacts(status: status, contentType: "text/event-stream")
            XCTAssertEqual(HeadDecision.body(facts, keptCoding: nil, threshold: mib), .buffer, "\(status)")
        }
        let empty = ResponseFacts(status: 200, contentType: "application/pdf", contentLength: "0")
        XCTAssertEqual(HeadDecision.body(empty, keptCoding: nil, threshold: mib), .buffer)
    }
}

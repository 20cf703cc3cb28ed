@testable import PeelGateway
import PeelIO
import XCTest

/// Findings of the review of issue 20's reply shaper, each reproduced live first.
final class Review20Tests: XCTestCase {
    /// A passthrough kept in the upstream's gzip that breaks mid-body (fewer bytes than its
    /// Content-Length) is answered with a problem: plain JSON, which must not say it is gzip, or
    /// `curl --compressed` and every browser fail to read the error.
    func testAProblemAfterAKeptCoding_isNotMarkedWithThatCoding() throws {
        let h = try RawHarness { r in
            if r.path == "/probe" { return .send(RawUpstream.answer("ok")) }
            return .sendThenClose("HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Encoding: gzip\r\n"
                                  + "Content-Length: 100\r\n\r\n0123456789")
        }
        defer { h.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 10)
        try c.send(Array("GET /img HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n".utf8))
        let r = try c.readResponse(head: false)
        XCTAssertEqual(r.status, 502)
        XCTAssertNil(r.header("content-encoding"), "a problem document is Peel's JSON")
        XCTAssertEqual(r.header("content-type"), "application/problem+json")
        XCTAssertNotNil(try? JSONSerialization.jsonObject(with: Data(r.body)), "the body reads as JSON, uncompressed")
    }
}

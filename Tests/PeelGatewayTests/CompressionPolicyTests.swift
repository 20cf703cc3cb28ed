@testable import PeelGateway
import PeelIO
import XCTest

/// Accept-Encoding negotiation with q-values (RFC 9110 §12.5.3) and which answers are compressed.
final class CompressionPolicyTests: XCTestCase {
    private func pick(_ header: String?, _ offered: [ContentCoding] = [.gzip, .br]) -> ContentCoding? {
        CompressionPolicy.negotiate(header.map { AcceptedCodings($0) }, offered: offered)
    }

    func testNoHeaderOrNothingOffered_meansIdentity() {
        XCTAssertNil(pick(nil))
        XCTAssertNil(pick("gzip", []))
        XCTAssertNil(pick(""))
        XCTAssertNil(pick("identity"))
        XCTAssertNil(pick("deflate, compress"))
    }

    func testTies_goToPeelsOrder() {
        XCTAssertEqual(pick("gzip, deflate, br"), .gzip)
        XCTAssertEqual(pick("br, gzip"), .gzip)
        XCTAssertEqual(pick("gzip, br", [.br, .gzip]), .br)
    }

    func testQValues_rankCodings() {
        XCTAssertEqual(pick("gzip;q=0.5, br;q=0.9"), .br)
        XCTAssertEqual(pick("gzip; q=1.0, br;q=0.999"), .gzip)
        XCTAssertEqual(pick("br;q=1, gzip;Q=0.2"), .br)
        XCTAssertEqual(pick("x-gzip"), .gzip)
        XCTAssertEqual(pick("GZIP"), .gzip)
    }

    func testQZero_refuses() {
        XCTAssertEqual(pick("gzip;q=0, br"), .br)
        XCTAssertNil(pick("gzip;q=0"))
        XCTAssertNil(pick("*;q=0"))
        XCTAssertNil(pick("gzip;q=0, br;q=0.000"))
    }

    func testStar_coversUnlistedCodings() {
        XCTAssertEqual(pick("*"), .gzip)
        XCTAssertEqual(pick("gzip;q=0.1, *;q=0.5"), .br)
        XCTAssertEqual(pick("br;q=0, *"), .gzip)
    }

    func testIdentityRankedFirst_winsOverCodings() {
        XCTAssertNil(pick("identity;q=1, gzip;q=0.5"))
        XCTAssertEqual(pick("identity;q=0.5, gzip"), .gzip)
        XCTAssertEqual(pick("identity;q=0, gzip;q=0.1"), .gzip)
    }

    func testMalformedQValues_dropTheirElement() {
        XCTAssertNil(pick("gzip;q=2"))
        XCTAssertNil(pick("gzip;q=abc"))
        XCTAssertNil(pick("gzip;q=0.12345"))
        XCTAssertEqual(pick("gzip;q=-1, br"), .br)
    }

    func testCompressibleTypes() {
        for t in ["application/json", "application/problem+json", "application/vnd.api+json; charset=utf-8",
                  "text/html", "TEXT/CSV", "text/plain;charset=utf-8", "application/javascript", "application/xml",
                  "image/svg+xml"] {
            XCTAssertTrue(CompressionPolicy.isCompressible(t), t)
        }
        for t in ["image/png", "application/octet-stream", "application/zip", "text/event-stream", "video/mp4", "application/pdf"] {
            XCTAssertFalse(CompressionPolicy.isCompressible(t), t)
        }
        XCTAssertFalse(CompressionPolicy.isCompressible(nil))
    }

    func testCandidates_needSizeStatusAndType() {
        let p = CompressionPolicy(offered: [.gzip], minSize: 1024)
        XCTAssertTrue(p.isCandidate(status: 200, contentType: "application/json", count: 1024))
        XCTAssertFalse(p.isCandidate(status: 200, contentType: "application/json", count: 1023))
        XCTAssertFalse(p.isCandidate(status: 206, contentType: "text/plain", count: 5000))
        XCTAssertFalse(p.isCandidate(status: 304, contentType: "text/plain", count: 5000))
        XCTAssertFalse(p.isCandidate(status: 200, contentType: "image/png", count: 5000))
        XCTAssertFalse(CompressionPolicy(offered: [], minSize: 1).isCandidate(status: 200, contentType: "text/plain", count: 5000))
    }

    func testConfig_compressionOffAndOrder() throws {
        let env = ["PEEL_UPSTREAM": "http://u.example"]
        XCTAssertEqual(try ConfigLoader.load(arguments: ["--compression", "off"], environment: env).compression.codings, [])
        XCTAssertEqual(try ConfigLoader.load(arguments: ["--compression", "br,gzip"], environment: env).compression.codings, [.br, .gzip])
        XCTAssertEqual(try ConfigLoader.load(arguments: [], environment: env).compression.codings, [.gzip, .br])
        XCTAssertThrowsError(try ConfigLoader.load(arguments: ["--compression", "zstd"], environment: env))
        XCTAssertThrowsError(try ConfigLoader.load(arguments: ["--gzip-level", "0"], environment: env))
    }
}

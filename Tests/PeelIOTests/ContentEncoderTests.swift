import PeelIO
import PeelTestSupport
import XCTest

/// gzip output decodes with zlib back to the input, and the reused stream stays correct across answers.
final class ContentEncoderTests: XCTestCase {
    func testGzip_roundTripsAndShrinksJSON_acrossReusedStreams() throws {
        let encoder = ContentEncoder(gzipLevel: 3, brotliQuality: 3)
        for n in [1, 1024, 100_000] {
            let json = Array(("[" + (0..<n).map { "{\"id\":\($0),\"name\":\"item \($0)\"}" }.joined(separator: ",") + "]").utf8)
            let gz = try XCTUnwrap(json.withUnsafeBytes { encoder.encode($0, as: .gzip) })
            XCTAssertEqual(Array(gz.prefix(2)), [0x1F, 0x8B], "gzip magic (RFC 1952 §2.3.1)")
            XCTAssertEqual(gunzip(gz), json)
            if n > 1 { XCTAssertLessThan(gz.count, json.count / 4) }
        }
    }

    func testBrotli_shrinksJSON() throws {
        let encoder = ContentEncoder(gzipLevel: 3, brotliQuality: 3)
        let json = Array(("[" + (0..<5000).map { "{\"id\":\($0)}" }.joined(separator: ",") + "]").utf8)
        let br = try XCTUnwrap(json.withUnsafeBytes { encoder.encode($0, as: .br) })
        XCTAssertLessThan(br.count, json.count / 4)
    }

    func testEmptyInput_isLeftUnencoded() {
        XCTAssertNil(ContentEncoder(gzipLevel: 1, brotliQuality: 1).encode(UnsafeRawBufferPointer(start: nil, count: 0), as: .gzip))
    }
}

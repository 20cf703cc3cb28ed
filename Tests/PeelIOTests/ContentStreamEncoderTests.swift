@testable import PeelIO
import PeelTestSupport
import XCTest

/// Compression in pieces (a spooled answer compressed as it is sent): one gzip member however the
/// input is cut, equal to the input once inflated; Brotli's stream ends; nothing after the end.
final class ContentStreamEncoderTests: XCTestCase {
    private let input: [UInt8] = (0..<700_000).map { i in Array(#"{"id":1234,"name":"用户","ok":true},"#.utf8)[i % 38] &+ UInt8(i / 38_000 % 3) }

    private func encode(_ coding: ContentCoding, pieces: Int) throws -> [UInt8] {
        let e = try XCTUnwrap(ContentStreamEncoder(coding: coding, gzipLevel: 3, brotliQuality: 4))
        var out: [UInt8] = []
        var i = 0
        while i < input.count {
            let n = min(pieces, input.count - i)
            XCTAssertTrue(input[i..<(i + n)].withUnsafeBytes { e.encode($0, finish: false) { out += $0 } })
            i += n
        }
        XCTAssertTrue(e.encode(UnsafeRawBufferPointer(start: nil, count: 0), finish: true) { out += $0 })
        XCTAssertFalse(e.encode(UnsafeRawBufferPointer(start: nil, count: 0), finish: true) { out += $0 }, "a second end")
        return out
    }

    func testGzip_inAnyPieces_inflatesToTheInput() throws {
        for size in [7, 4096, 131_072, 1 << 20] {
            let gz = try encode(.gzip, pieces: size)
            XCTAssertLessThan(gz.count, input.count / 5, "\(size)")
            XCTAssertEqual(gunzip(gz), input, "pieces of \(size)")
        }
    }

    func testGzip_ofNothing_isAnEmptyMember() throws {
        let e = try XCTUnwrap(ContentStreamEncoder(coding: .gzip, gzipLevel: 3, brotliQuality: 4))
        var out: [UInt8] = []
        XCTAssertTrue(e.encode(UnsafeRawBufferPointer(start: nil, count: 0), finish: true) { out += $0 })
        XCTAssertEqual(gunzip(out), [])
    }

    func testBrotli_endsItsStream_andCompresses() throws {
        let br = try encode(.br, pieces: 50_000)
        XCTAssertGreaterThan(br.count, 0)
        XCTAssertLessThan(br.count, input.count / 5)
        // Decoded end to end by curl in scripts/spool.sh (libbrotlidec is not linked into Peel).
    }
}

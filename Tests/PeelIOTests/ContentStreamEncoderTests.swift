import CZlib
@testable import PeelIO
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

    /// `bytes` gunzipped, nil when they are not one whole gzip member.
    private func gunzip(_ bytes: [UInt8]) -> [UInt8]? {
        var stream = z_stream()
        guard inflateInit2_(&stream, 15 + 16, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK else { return nil }
        defer { inflateEnd(&stream) }
        var out = [UInt8](repeating: 0, count: 4 << 20)
        var input = bytes
        let rc = input.withUnsafeMutableBufferPointer { i in
            out.withUnsafeMutableBufferPointer { o in
                stream.next_in = i.baseAddress
                stream.avail_in = uInt(i.count)
                stream.next_out = o.baseAddress
                stream.avail_out = uInt(o.count)
                return inflate(&stream, Z_FINISH)
            }
        }
        return rc == Z_STREAM_END ? Array(out[0..<Int(stream.total_out)]) : nil
    }
}

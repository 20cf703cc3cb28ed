import CZlib
import PeelIO
import XCTest

/// gzip output decodes with zlib back to the input, and the reused stream stays correct across answers.
final class ContentEncoderTests: XCTestCase {
    private func gunzip(_ data: [UInt8], expected: Int) -> [UInt8]? {
        var stream = z_stream()
        guard inflateInit2_(&stream, 15 + 16, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK else { return nil }
        defer { inflateEnd(&stream) }
        var out = [UInt8](repeating: 0, count: expected + 16)
        var input = data
        let rc = input.withUnsafeMutableBufferPointer { inp in
            out.withUnsafeMutableBufferPointer { o in
                stream.next_in = inp.baseAddress
                stream.avail_in = uInt(inp.count)
                stream.next_out = o.baseAddress
                stream.avail_out = uInt(o.count)
                return inflate(&stream, Z_FINISH)
            }
        }
        guard rc == Z_STREAM_END else { return nil }
        return Array(out[0..<Int(stream.total_out)])
    }

    func testGzip_roundTripsAndShrinksJSON_acrossReusedStreams() throws {
        let encoder = ContentEncoder(gzipLevel: 3, brotliQuality: 3)
        for n in [1, 1024, 100_000] {
            let json = Array(("[" + (0..<n).map { "{\"id\":\($0),\"name\":\"item \($0)\"}" }.joined(separator: ",") + "]").utf8)
            let gz = try XCTUnwrap(json.withUnsafeBytes { encoder.encode($0, as: .gzip) })
            XCTAssertEqual(Array(gz.prefix(2)), [0x1F, 0x8B], "gzip magic (RFC 1952 §2.3.1)")
            XCTAssertEqual(gunzip(gz, expected: json.count), json)
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

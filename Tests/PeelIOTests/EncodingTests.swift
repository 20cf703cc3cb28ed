@testable import PeelDemo
import XCTest

/// The demo's hand-written encoders against published check values and an independent reader.
final class EncodingTests: XCTestCase {
    func testCRC32_matchesTheStandardCheckValue() {
        XCTAssertEqual(Checksum.crc32(Array("123456789".utf8)), 0xCBF4_3926)
        XCTAssertEqual(Checksum.crc32([]), 0)
    }

    func testAdler32_matchesTheWikipediaExample() {
        XCTAssertEqual(Checksum.adler32(Array("Wikipedia".utf8)), 0x11E6_0398)
    }

    func testFNV1a64_matchesReferenceVectors() {
        XCTAssertEqual(JSONText.hex(Checksum.fnv1a64([]), width: 16), "cbf29ce484222325")
        XCTAssertEqual(JSONText.hex(Checksum.fnv1a64(Array("a".utf8)), width: 16), "af63dc4c8601ec8c")
        XCTAssertEqual(JSONText.hex(Checksum.fnv1a64(Array("foobar".utf8)), width: 16), "85944171f73967e8")
    }

    func testGzip_roundTripsAcrossSeveralStoredBlocks() throws {
        for size in [0, 1, 65_535, 65_536, 200_000] {
            let input = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
            XCTAssertEqual(try StoredInflate.gunzip(Deflate.gzip(input)), input, "size \(size)")
        }
    }

    func testJSONString_escapesQuotesBackslashesAndControls() {
        XCTAssertEqual(JSONText.string("a\"b\\c\n\t\u{01}中"), #""a\"b\\c\n\t\u0001中""#)
    }

    func testGeneratedBody_isExactlyTheSizeAndValidJSONWhateverThePieceSize() throws {
        for (total, piece) in [(GeneratedBody.minimumSize, 10), (1000, 7), (100_000, 4096), (1 << 20, 256 * 1024)] {
            var body = GeneratedBody(total: total)
            var bytes: [UInt8] = []
            while !body.isDone { bytes += body.nextPiece(limit: piece) }
            XCTAssertEqual(bytes.count, total)
            XCTAssertEqual(body.total, total)
            let json = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
            XCTAssertEqual(json?["code"] as? Int, 0, "total \(total)")
        }
    }

    func testRoutedPath_stripsAnyBaseBeforeTheKnownRoots() {
        XCTAssertEqual(DemoRoutes.routedPath("/v1/api/user"), "/api/user")
        XCTAssertEqual(DemoRoutes.routedPath("/a/b/fault/reset"), "/fault/reset")
        XCTAssertEqual(DemoRoutes.routedPath("/v1/__demo/health"), "/__demo/health")
        XCTAssertEqual(DemoRoutes.routedPath("/v1/"), "/")
        XCTAssertEqual(DemoRoutes.routedPath("/nope"), "/nope")
        XCTAssertEqual(DemoRoutes.routedPath("/apiary/user"), "/apiary/user")
    }

    func testIntParameter_clampsAndFallsBack() {
        XCTAssertEqual(DemoRoutes.intParameter("ms", in: "a=1&ms=250", default: 1, range: 0...1000), 250)
        XCTAssertEqual(DemoRoutes.intParameter("ms", in: "ms=99999", default: 1, range: 0...1000), 1000)
        XCTAssertEqual(DemoRoutes.intParameter("ms", in: "ms=x", default: 7, range: 0...1000), 7)
    }
}

/// An independent reader for gzip members made of stored deflate blocks (RFC 1952, RFC 1951 §3.2.4).
enum StoredInflate {
    struct Malformed: Error {}

    static func gunzip(_ bytes: [UInt8]) throws -> [UInt8] {
        guard bytes.count >= 18, bytes[0] == 0x1F, bytes[1] == 0x8B, bytes[2] == 8, bytes[3] == 0 else { throw Malformed() }
        var i = 10
        var out: [UInt8] = []
        while true {
            let header = bytes[i]
            guard header & 0b110 == 0 else { throw Malformed() }
            let length = Int(bytes[i + 1]) | Int(bytes[i + 2]) << 8
            let inverse = Int(bytes[i + 3]) | Int(bytes[i + 4]) << 8
            guard length ^ 0xFFFF == inverse else { throw Malformed() }
            out += bytes[(i + 5)..<(i + 5 + length)]
            i += 5 + length
            if header & 1 == 1 { break }
        }
        let le = { (at: Int) in bytes[at..<at + 4].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) } }
        guard i + 8 == bytes.count, le(i) == Checksum.crc32(out), le(i + 4) == UInt32(out.count) else { throw Malformed() }
        return out
    }
}

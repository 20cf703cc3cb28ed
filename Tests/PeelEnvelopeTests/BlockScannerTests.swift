import Foundation
import XCTest

@testable import PeelEnvelope

/// The block scanners (64-byte SIMD blocks, x86-64: SSE2 in Swift, AVX2 and AVX-512 in CPeelScan)
/// against the portable token scanner and against each other: same verdict and same envelope
/// ranges, with everything that can straddle a block edge put at every offset. Every kernel this
/// CPU runs is compared; KernelTests checks that this is every kernel the CPU's flags promise.
final class BlockScannerTests: XCTestCase {
    /// The block kernels this CPU runs.
    static let kernels = [ScanCore.Path.sse2, .avx2, .avx512].filter { ScanCore.available($0) }

    private struct Outcome: Equatable {
        var valid: Bool
        var members: EnvelopeMembers?
    }

    private func scan(_ bytes: [UInt8], _ path: ScanCore.Path, maxDepth: Int = 512, envelope: Bool = false) -> Outcome {
        EnvelopeNames.with(code: "code", message: "message", data: "data") { names in
            bytes.withUnsafeBufferPointer { buffer in
                var members = EnvelopeMembers()
                let valid = ScanCore.run(buffer, maxDepth: maxDepth, names: envelope ? names : nil, members: &members, path: path)
                return Outcome(valid: valid, members: valid && envelope ? members : nil)
            }
        }
    }

    /// Every kernel agrees with the token scanner (and so with every other kernel), with and
    /// without envelope names; returns the verdict.
    @discardableResult
    private func agree(_ bytes: [UInt8], maxDepth: Int = 512, file: StaticString = #filePath, line: UInt = #line) -> Bool {
        let portable = scan(bytes, .portable, maxDepth: maxDepth)
        let portableEnvelope = scan(bytes, .portable, maxDepth: maxDepth, envelope: true)
        for kernel in Self.kernels {
            let blocks = scan(bytes, kernel, maxDepth: maxDepth)
            if blocks != portable {
                XCTFail("\(kernel) says \(blocks), tokens \(portable) on \(String(decoding: bytes, as: UTF8.self).debugDescription)", file: file, line: line)
            }
            let blocksEnvelope = scan(bytes, kernel, maxDepth: maxDepth, envelope: true)
            if blocksEnvelope != portableEnvelope {
                XCTFail(
                    "\(kernel) says \(blocksEnvelope), tokens \(portableEnvelope) (envelope) on \(String(decoding: bytes, as: UTF8.self).debugDescription)",
                    file: file, line: line)
            }
        }
        return portable.valid
    }

    private func agree(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> Bool {
        agree(Array(text.utf8), file: file, line: line)
    }

    // MARK: the escape bitmap

    /// Sequential reference: which bytes of a run of blocks a backslash escapes.
    private func referenceEscaped(_ blocks: [UInt64]) -> [UInt64] {
        var out = [UInt64](repeating: 0, count: blocks.count)
        var escapeNext = false
        for (b, block) in blocks.enumerated() {
            for bit in 0..<64 {
                if escapeNext {
                    out[b] |= 1 << UInt64(bit)
                    escapeNext = false
                } else if block & (1 << UInt64(bit)) != 0 {
                    escapeNext = true
                }
            }
        }
        return out
    }

    func testEscapedBits_matchSequentialReading() {
        var generator = SystemRandomNumberGenerator()
        var cases: [[UInt64]] = [[0], [~0], [~0, ~0], [1 << 63, 0], [1 << 63, 1], [0x5555_5555_5555_5555, 0xAAAA_AAAA_AAAA_AAAA]]
        for _ in 0..<3000 {
            // Dense and sparse backslash runs, several blocks long.
            let count = Int.random(in: 1...4, using: &generator)
            cases.append(
                (0..<count).map { _ in
                    let a = UInt64.random(in: .min ... .max, using: &generator)
                    let b = UInt64.random(in: .min ... .max, using: &generator)
                    switch Int.random(in: 0..<3, using: &generator) {
                    case 0: return a | b
                    case 1: return a & b
                    default: return a
                    }
                })
        }
        for blocks in cases {
            var carry: UInt64 = 0
            let got = blocks.map { ScanCore.escapedBits($0, &carry) }
            XCTAssertEqual(got, referenceEscaped(blocks), "backslashes \(blocks.map { String($0, radix: 2) })")
        }
    }

    func testPrefixXor_marksFromEachOpeningQuoteToItsClosingOne() {
        XCTAssertEqual(ScanCore.prefixXor(0b1001), 0b0111)
        XCTAssertEqual(ScanCore.prefixXor(1 << 63), 1 << 63)
        XCTAssertEqual(ScanCore.prefixXor(1), ~0)
        XCTAssertEqual(ScanCore.prefixXor(0b1_0010_0100), 0b0_0001_1100 | ~0 << 8)
    }

    // MARK: block edges

    /// Snippets that may straddle a block edge, valid and not.
    private let snippets: [String] = [
        #""""#, #""abc""#, #""a\"b""#, #""a\\""#, #""a\\\"b""#, #""\\\\\\\\""#, #""\\\\\\\"""#, #""\/\b\f\n\r\t""#,
        #""\u00e9t\u00E9""#, #""\uD83D\uDE00""#, #""\ud83d\ude00x""#, #""\uDE00""#, #""\uD83D""#, #""\uD83Dx""#,
        #""\uD83D\u0041""#, #""\u12""#, #""\u12G4""#, #""\x""#, #""\"#, #""\\"#, #""a"#, "\"é\"", "\"商品\"", "\"😀\"",
        "1", "-0", "12.5e-3", "1E+9", "0.1", "-", "01", "1.", "1e", "1.e3", "--1", "+1", "2x", "true", "false", "null",
        "tru", "nul", "falsey", "truefalse", "{}", "[]", "[1,2]", "{\"a\":1}", "[1,]", "{\"a\"1}", "{\"a\"::1}", "[1:2]",
        "{\"a\":1,}", "\"a\"\"b\"", "\"a\"1", "1\"a\"", "[\"a\" \"b\"]", "[\"a\",\"b\"]", "[ 1 , 2 ]", "[1 2]",
    ]

    /// Raw byte snippets: controls, invalid UTF-8 and whitespace that is not JSON's.
    private let byteSnippets: [[UInt8]] = [
        [0x22, 0x01, 0x22], [0x22, 0x09, 0x22], [0x22, 0x7F, 0x22], [0x22, 0xC3, 0xA9, 0x22], [0x22, 0xC3, 0x22],
        [0x22, 0xC0, 0x80, 0x22], [0x22, 0xE0, 0x80, 0x80, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22], [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22],
        [0x22, 0xF0, 0x9F, 0x98, 0x80, 0x22], [0x22, 0xE5, 0x95, 0x22], [0x22, 0x80, 0x22], [0x22, 0xFF, 0x22], [0x31, 0x0C],
        [0x0C, 0x31], [0xC3, 0xA9], [0x31, 0x00], [0x5B, 0x09, 0x0A, 0x0D, 0x20, 0x5D], [0x5B, 0x0B, 0x5D], [0x22, 0x5C, 0x0A, 0x22],
        [0x22, 0x5C, 0xC3, 0xA9, 0x22],
    ]

    func testSnippetsAtEveryOffsetAroundTwoBlockEdges() {
        let all = snippets.map { Array($0.utf8) } + byteSnippets
        for snippet in all {
            for offset in 0..<140 {
                // As an array element after padding, inside an object member after a filler string, and at the very end.
                let spaces = [UInt8](repeating: 0x20, count: offset)
                agree([0x5B] + spaces + snippet + [0x5D])
                let filler = Array(#"{"f":""#.utf8) + [UInt8](repeating: 0x78, count: offset) + Array(#"","v":"#.utf8)
                agree(filler + snippet + [0x7D])
                agree(spaces + snippet)
                agree(Array(#"["#.utf8) + [UInt8](repeating: 0x5C, count: offset % 7) + spaces + snippet + [0x5D])
            }
        }
    }

    func testBackslashRunsOfEveryLengthAtEveryOffset() {
        for run in 0..<10 {
            for offset in 0..<130 {
                let body = [UInt8](repeating: 0x61, count: offset) + [UInt8](repeating: 0x5C, count: run)
                // A quote after the run ends the string only when the run is even.
                let closed = [0x22] + body + [0x22]
                XCTAssertEqual(agree(closed), run % 2 == 0, "run \(run) offset \(offset)")
                agree([0x5B] + closed + [0x2C, 0x22, 0x78, 0x22, 0x5D])
                agree([0x22] + body + [0x6E, 0x22])
                agree([0x22] + body + [0x75, 0x30, 0x30, 0x65, 0x39, 0x22])
            }
        }
    }

    func testEveryPrefixOfDocumentsAroundBlockSizes() {
        let docs = [
            #"{"code":0,"message":"ok","data":{"id":12345,"name":"Alice \u00e9 Zhang","tags":["vip","beta"],"x":[1.5e3,-0,true,false,null]}}"#,
            #"{"code":1,"message":"商品描述：高品质 \"quoted\" \\ \/","data":[{"a":"\uD83D\uDE00"},{"b":{}},{"c":[]},"😀",0.25]}"#,
            "  \t\n{ \"code\" : 0 ,\r\n \"message\" : \"ok\" , \"data\" : [ 1 , 2 , { \"k\" : \"v\" } ] }  \n",
        ]
        for doc in docs {
            let bytes = Array(doc.utf8)
            XCTAssertTrue(agree(bytes))
            for length in 0...bytes.count { agree(Array(bytes[..<length])) }
            // Grown past 200 bytes with leading whitespace, so the document's end moves across edges.
            for pad in 0..<80 { agree([UInt8](repeating: 0x20, count: pad) + bytes) }
            agree([0xEF, 0xBB, 0xBF] + bytes)
            agree([0xEF, 0xBB, 0xBF, 0xEF, 0xBB, 0xBF] + bytes)
        }
        for length in 0...200 {
            // Long strings ending at, just before and just after an edge.
            let text = String(repeating: "a", count: length)
            XCTAssertTrue(agree("\"\(text)\""))
            XCTAssertFalse(agree("\"\(text)"))
            XCTAssertFalse(agree("\"\(text)\\"))
            XCTAssertTrue(agree("[\"\(text)\",1]"))
            XCTAssertTrue(agree(String(repeating: " ", count: length) + "1"))
            XCTAssertFalse(agree(String(repeating: " ", count: length)))
        }
    }

    func testSingleByteChangesOfALargeEnvelope() {
        var text = #"{"code":0,"message":"success","data":["#
        for i in 0..<40 {
            if i > 0 { text += "," }
            text += #"{"id":\#(i),"title":"Item \#(i) \u00e9t\u00e9 商品","price":\#(i).5,"tags":["a","b"],"ok":\#(i % 2 == 0)}"#
        }
        text += "]}"
        let bytes = Array(text.utf8)
        XCTAssertTrue(agree(bytes))
        let replacements: [UInt8] = [0x22, 0x5C, 0x7B, 0x7D, 0x5B, 0x5D, 0x3A, 0x2C, 0x20, 0x0A, 0x01, 0x31, 0x2D, 0x65, 0x80, 0xC3, 0x00]
        for index in stride(from: 0, to: bytes.count, by: 1) {
            var copy = bytes
            copy[index] = replacements[index % replacements.count]
            agree(copy)
            copy.remove(at: index)
            agree(copy)
        }
    }

    func testEnvelopeRangesAgreeAtEveryShift() {
        for pad in 0..<130 {
            let filler = String(repeating: "x", count: pad)
            let doc = #"{"f":"\#(filler)","co\u0064e":7,"message":"a\"b","data":{"k":[1,2,{"z":null}]},"n":1}"#
            XCTAssertTrue(agree(Array(doc.utf8)))
            let duplicate = Array((doc.dropLast() + #","data":1}"#).utf8)
            XCTAssertTrue(agree(duplicate))
            for kernel in Self.kernels {
                let members = scan(Array(doc.utf8), kernel, envelope: true).members
                // The default dialect's slots: data, code, message.
                XCTAssertNotNil(members?[1], "\(kernel)")
                XCTAssertNotNil(members?[0], "\(kernel)")
                XCTAssertEqual(members?.count, 5, "\(kernel)")
                // A duplicate envelope member fails on every path.
                XCTAssertFalse(scan(duplicate, kernel, envelope: true).valid, "\(kernel)")
            }
        }
    }

    func testDepthLimitOnBothPaths() {
        for depth in [1, 2, 63, 64, 65, 127, 128, 129, 511, 512, 513, 600] {
            let nested = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
            XCTAssertEqual(agree(Array(nested.utf8)), depth <= 512, "depth \(depth)")
            let objects = String(repeating: "{\"a\":", count: depth) + "1" + String(repeating: "}", count: depth)
            XCTAssertEqual(agree(Array(objects.utf8)), depth <= 512, "depth \(depth)")
            for limit in [0, 1, depth - 1, depth] where limit >= 0 {
                XCTAssertEqual(agree(Array(nested.utf8), maxDepth: limit), depth <= limit)
            }
        }
        // Closers that do not match their openers, past a block edge.
        let mismatched = String(repeating: "[", count: 70) + "}" + String(repeating: "]", count: 69)
        XCTAssertFalse(agree(Array(mismatched.utf8)))
    }

    func testJSONTestSuiteOnBothPaths() throws {
        let corpus = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("../shared/testdata/JSONTestSuite/test_parsing").standardizedFileURL
        let names = (try? FileManager.default.contentsOfDirectory(atPath: corpus.path))?.sorted() ?? []
        for name in names where name.hasSuffix(".json") {
            let bytes = [UInt8](try Data(contentsOf: corpus.appendingPathComponent(name)))
            let valid = agree(bytes)
            if name.hasPrefix("y_") { XCTAssertTrue(valid, name) }
            if name.hasPrefix("n_") { XCTAssertFalse(valid, name) }
            // Shifted across a block edge as well.
            agree([UInt8](repeating: 0x20, count: 61) + bytes)
        }
    }

    func testAutomaticPathUsesBlocksOnlyForLargeBodies() {
        XCTAssertEqual(ScanCore.scanner(.automatic, ScanCore.blockThreshold - 1), .tokens)
        XCTAssertEqual(ScanCore.scanner(.portable, 1 << 20), .tokens)
        #if arch(x86_64)
            let best: ScanCore.Scanner = ScanCore.available(.avx512) ? .avx512 : ScanCore.available(.avx2) ? .avx2 : .sse2
            XCTAssertEqual(ScanCore.scanner(.automatic, ScanCore.blockThreshold), best)
            XCTAssertEqual(ScanCore.scanner(.sse2, 1), .sse2)
        #endif
    }
}

@testable import PeelEnvelope
import XCTest

/// Each RFC 8259 rule, with documents that must pass and documents that must fail; every case runs
/// through JSONScanner.validate and through every scanner (the block kernels and portable) directly.
final class JSONScannerTests: XCTestCase {
    /// The verdicts of validate(), each block kernel this CPU runs and the portable scanner, which must agree.
    private func verdict(_ bytes: [UInt8], file: StaticString, line: UInt) -> Bool {
        let public_ = JSONScanner.validate(bytes)
        for path in ScanCore.Path.allCases where ScanCore.available(path) {
            var members = EnvelopeMembers()
            let direct = bytes.withUnsafeBufferPointer { ScanCore.run($0, maxDepth: 512, names: nil, members: &members, path: path) }
            XCTAssertEqual(direct, public_, "\(path) disagrees on \(bytes)", file: file, line: line)
        }
        return public_
    }

    private func accepts(_ text: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(verdict(Array(text.utf8), file: file, line: line), "should accept: \(text.debugDescription)", file: file, line: line)
    }

    private func rejects(_ text: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertFalse(verdict(Array(text.utf8), file: file, line: line), "should reject: \(text.debugDescription)", file: file, line: line)
    }

    private func rejects(bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertFalse(verdict(bytes, file: file, line: line), "should reject bytes: \(bytes)", file: file, line: line)
    }

    private func accepts(bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(verdict(bytes, file: file, line: line), "should accept bytes: \(bytes)", file: file, line: line)
    }

    // RFC 8259 §2: a JSON text is any one value, surrounded by optional whitespace.
    func testValidate_acceptsEveryKindOfValueAtTopLevel() {
        for text in ["{}", "[]", "0", "\"\"", "true", "false", "null", "-1", "\"x\"", "{\"a\":1}", "[1,\"a\",null]"] {
            accepts(text)
        }
    }

    func testValidate_acceptsTheFourWhitespaceBytesEverywhere() {
        accepts(" \t\n\r{ \t\n\r\"a\" \t\n\r: \t\n\r[ \t\n\r1 \t\n\r, \t\n\r2 \t\n\r] \t\n\r} \t\n\r")
    }

    func testValidate_rejectsOtherWhitespace() {
        rejects("\u{0B}1")  // vertical tab
        rejects("\u{0C}1")  // form feed
        rejects("[1,\u{A0}2]")  // no-break space
        rejects("\u{3000}1")  // ideographic space
        rejects(bytes: [0x00, 0x31])
    }

    func testValidate_rejectsEmptyInput() {
        rejects("")
        rejects("   ")
        rejects(bytes: [0xEF, 0xBB, 0xBF])
        rejects(bytes: [0xEF, 0xBB, 0xBF, 0x20])
    }

    func testValidate_rejectsGarbageAfterTheValue() {
        for text in ["{} x", "[1] [2]", "1 2", "{}}", "nullx", "[1]]", "\"a\"\"b\"", "0 0", "{},", "truefalse", "1/", "[]\u{0}"] {
            rejects(text)
        }
    }

    // RFC 8259 §4: objects.
    func testValidate_rejectsMalformedObjects() {
        for text in [
            "{", "}", "{\"a\"}", "{\"a\" 1}", "{\"a\":}", "{1:2}", "{a:1}", "{'a':1}", "{\"a\":1 \"b\":2}",
            "{\"a\"::1}", "{:1}", "{\"a\":1,}", "{,}", "{,\"a\":1}", "{\"a\",1}", "{null:1}", "{\"a\":1,,\"b\":2}",
        ] {
            rejects(text)
        }
    }

    func testValidate_acceptsDuplicateNamesOutsideEnvelopes() {
        // RFC 8259 §4 only says names SHOULD be unique; plain validation does not judge that.
        accepts("{\"a\":1,\"a\":2}")
    }

    // RFC 8259 §5: arrays.
    func testValidate_rejectsMalformedArrays() {
        for text in ["[", "]", "[1", "[1,]", "[,1]", "[1,,2]", "[,]", "[1 2]", "[1:2]", "[\"a\":1]", "[}", "{]", "[{]}", "[[]"] {
            rejects(text)
        }
    }

    func testValidate_trailingCommaRejectedAtEveryDepth() {
        rejects("[[1,],2]")
        rejects("{\"a\":{\"b\":1,}}")
        rejects("[{\"a\":[1,2,],\"b\":3}]")
    }

    // RFC 8259 §6: numbers.
    func testValidate_acceptsNumberForms() {
        for text in [
            "0", "-0", "1", "-1", "1.10", "12345678901234567890", "-0.0", "1e400", "1E400", "1e+2", "1e-2", "0.5e0", "-1.5E-07",
            "0e0",
        ] {
            accepts(text)
        }
    }

    func testValidate_rejectsLeadingZeros() {
        for text in ["01", "-01", "00", "[01]", "{\"a\":00}", "-00.5", "001.5"] {
            rejects(text)
        }
    }

    func testValidate_rejectsOtherNumberForms() {
        for text in [
            "+1", ".1", "1.", "1.e1", "1e", "1e+", "1E-", "-", "--1", "-.1", "0x1", "Infinity", "-Infinity", "NaN",
            "1.0.0", "1e1.5", "1ee1", "- 1", "1.-1", "[1.]", "[-]", "1e+-1", "\u{FF11}",
        ] {
            rejects(text)
        }
    }

    // RFC 8259 §3: literals are lowercase and exact.
    func testValidate_rejectsMalformedLiterals() {
        for text in [
            "tru", "nul", "fals", "True", "NULL", "nulll", "truee", "[tru]", "[nul", "f", "t", "n", "falsee", "undefined",
        ] {
            rejects(text)
        }
    }

    // RFC 8259 §7: strings.
    func testValidate_acceptsEveryEscape() {
        accepts(#"["\"\\\/\b\f\n\r\t"]"#)
        accepts(#""\u0000\u001f\u00e9\u4E2D\uFFFF""#)
    }

    func testValidate_acceptsSurrogatePairEscapes() {
        accepts(#""\ud83d\ude00""#)
        accepts(#""\uD834\uDD1E""#)
        accepts(#""\udbff\udfff""#)
    }

    func testValidate_rejectsBadEscapes() {
        for text in [
            #""\x""#, #""\u12""#, #""\u12G4""#, #""\U0041""#, #""\'""#, #""\a""#, #""\0""#, #""\""#, "\"\\", #""\u""#, #""\u00"#,
            "\"\\\u{E9}\"",
        ] {
            rejects(text)
        }
    }

    func testValidate_uEscapeTakesExactlyTheHexDigitsInEveryPosition() {
        // The four digits are checked as one word; sweep every byte value through each position, with
        // padding so the fast path (16 bytes left) and the tail both see it.
        let hex = Set(Array("0123456789abcdefABCDEF".utf8))
        for position in 0..<4 {
            for byte in UInt8(0)...UInt8(255) {
                var digits = Array("00e9".utf8)
                digits[position] = byte
                for padding in [0, 20] {
                    let text = Array("[\"\\u".utf8) + digits + Array(repeating: UInt8(ascii: "x"), count: padding) + Array("\"]".utf8)
                    let expected = hex.contains(byte)
                    XCTAssertEqual(
                        JSONScanner.validate(text), expected, "byte \(byte) at digit \(position), padding \(padding)")
                }
            }
        }
    }

    // RFC 8259 §7: `\u` and four hex digits, whatever they name; §8.2 leaves a lone surrogate's
    // meaning to the receiver. Node's JSON.stringify and Python's json.dumps write them for a string
    // cut inside an emoji.
    func testValidate_acceptsLoneOrMismatchedSurrogateEscapes() {
        for text in [
            #""\ud83d""#, #""\ud800""#, #""\udc00""#, #""\ud800\u0041""#, #""\udc00\ud800""#, #""\ud800x""#,
            #""\ud800\ud800""#, #""\ud800\n""#, #""a\udfff""#, #"{"\ud800":1}"#, #"["\uDBFF","\uDFFF"]"#,
        ] {
            accepts(text)
        }
        // Every path agrees at each block edge too: the escape at each offset of a 64-byte block.
        for pad in 0..<70 {
            accepts("[\"" + String(repeating: "a", count: pad) + #"\ud83d","\udc00"]"# + String(repeating: " ", count: 600))
        }
    }

    func testValidate_rejectsSurrogateEscapesWithBadDigits() {
        for text in [#""\ud800\u""#, #""\ud800\udc0""#, #""\ud800\""#, #""\ud8""#, #""\ud80g""#] {
            rejects(text)
        }
    }

    func testValidate_rejectsUnescapedControlCharacters() {
        for byte: UInt8 in 0..<0x20 {
            rejects(bytes: [0x22, 0x61, byte, 0x62, 0x22])
        }
        accepts(bytes: [0x22, 0x7F, 0x22])  // DEL is not a control character in RFC 8259's sense
    }

    func testValidate_rejectsUnterminatedStrings() {
        for text in ["\"abc", "\"", "[\"a]", "{\"a:1}", "\"abcdefghijklmnopqrstuvwxyz"] {
            rejects(text)
        }
    }

    func testValidate_rejectsSingleQuotes() {
        rejects("'a'")
        rejects("['a']")
    }

    // RFC 8259 §8.1: UTF-8, checked as RFC 3629 §4 defines it.
    func testValidate_acceptsUTF8Boundaries() {
        for scalar in [
            "\u{80}", "\u{7FF}", "\u{800}", "\u{D7FF}", "\u{E000}", "\u{FFFD}", "\u{FFFF}", "\u{10000}", "\u{10FFFF}", "中文😀é",
        ] {
            accepts("\"\(scalar)\"")
        }
    }

    func testValidate_rejectsInvalidUTF8() {
        let cases: [[UInt8]] = [
            [0x80],  // lone continuation
            [0xBF],
            [0xC0, 0x80],  // overlong NUL
            [0xC1, 0xBF],  // overlong 2-byte
            [0xE0, 0x80, 0x80],  // overlong 3-byte
            [0xE0, 0x9F, 0xBF],
            [0xF0, 0x80, 0x80, 0x80],  // overlong 4-byte
            [0xF0, 0x8F, 0xBF, 0xBF],
            [0xED, 0xA0, 0x80],  // U+D800 encoded in UTF-8
            [0xED, 0xBF, 0xBF],  // U+DFFF encoded in UTF-8
            [0xF4, 0x90, 0x80, 0x80],  // past U+10FFFF
            [0xF5, 0x80, 0x80, 0x80],
            [0xF8, 0x88, 0x80, 0x80, 0x80],  // old 5-byte form
            [0xFC, 0x84, 0x80, 0x80, 0x80, 0x80],
            [0xFE], [0xFF],
            [0xE4, 0xB8],  // truncated 3-byte
            [0xC3],  // truncated 2-byte
            [0xF0, 0x9F, 0x98],  // truncated 4-byte
            [0xC3, 0x41],  // bad continuation
            [0xE4, 0x41, 0x80],
            [0xF0, 0x9F, 0x41, 0x80],
            [0xE9],  // ISO-8859-1 é
        ]
        for sequence in cases {
            rejects(bytes: [0x22] + sequence + [0x22])
            // Same inside a long string so the word-at-a-time path meets it too.
            rejects(bytes: [0x22] + Array(repeating: 0x61, count: 21) + sequence + Array(repeating: 0x61, count: 9) + [0x22])
        }
    }

    func testValidate_stringsEndingAtEveryDistanceFromTheBufferEnd() {
        for length in 0..<40 {
            let body = String(repeating: "x", count: length)
            accepts("\"\(body)\"")
            accepts("[\"\(body)\",\"\(body)é\"]")
            rejects("\"\(body)\\\"")  // the closing quote is escaped
            rejects(bytes: Array("\"\(body)".utf8) + [0xE4, 0xB8])  // truncated UTF-8 at the very end
        }
    }

    func testValidate_rejectsNonASCIIOutsideStrings() {
        rejects("é")
        rejects("[1,é]")
        rejects(bytes: [0x5B, 0xC3, 0xA9, 0x5D])
    }

    func testValidate_rejectsUTF16() {
        rejects(bytes: [0xFF, 0xFE, 0x5B, 0x00, 0x5D, 0x00])
        rejects(bytes: [0x00, 0x5B, 0x00, 0x5D])
        rejects(bytes: [0x5B, 0x00, 0x5D, 0x00])
    }

    func testValidate_findsSpecialBytesAtEveryOffsetOfALongString() {
        // Walk a quote, escape, control byte and multi-byte char across every lane of two 16-byte
        // blocks and the word-sized and byte-sized tails after them.
        for offset in 0..<41 {
            let pad = String(repeating: "a", count: offset)
            accepts("[\"\(pad)\",\"\(pad)\"]")
            accepts("\"\(pad)\\n\(pad)\"")
            accepts("\"\(pad)é\(pad)\"")
            rejects(bytes: Array("\"\(pad)".utf8) + [0x0A] + Array("\(pad)\"".utf8))
            rejects(bytes: Array("\"\(pad)".utf8) + [0x80] + Array("\(pad)\"".utf8))
            rejects("\"\(pad)")
        }
    }

    // RFC 8259 §8.1: a byte order mark may be ignored; Peel ignores exactly one.
    func testValidate_ignoresOneLeadingBOM() {
        accepts(bytes: [0xEF, 0xBB, 0xBF] + Array("{}".utf8))
        accepts(bytes: [0xEF, 0xBB, 0xBF] + Array(" [1] ".utf8))
    }

    func testValidate_rejectsASecondOrMisplacedBOM() {
        rejects(bytes: [0xEF, 0xBB, 0xBF, 0xEF, 0xBB, 0xBF] + Array("{}".utf8))
        rejects(bytes: Array(" ".utf8) + [0xEF, 0xBB, 0xBF] + Array("{}".utf8))
        rejects(bytes: Array("{}".utf8) + [0xEF, 0xBB, 0xBF])
        rejects(bytes: [0xEF, 0xBB] + Array("{}".utf8))
    }

    // RFC 8259 §9: implementations may limit nesting depth.
    func testValidate_acceptsNestingUpToMaxDepth() {
        let depth = 512
        accepts(String(repeating: "[", count: depth) + String(repeating: "]", count: depth))
        XCTAssertTrue(JSONScanner.validate(Array("[[1]]".utf8), maxDepth: 2))
        XCTAssertTrue(JSONScanner.validate(Array("1".utf8), maxDepth: 0))
    }

    func testValidate_rejectsNestingBeyondMaxDepth() {
        rejects(String(repeating: "[", count: 513) + String(repeating: "]", count: 513))
        XCTAssertFalse(JSONScanner.validate(Array("[[[1]]]".utf8), maxDepth: 2))
        XCTAssertFalse(JSONScanner.validate(Array("{\"a\":{\"b\":{}}}".utf8), maxDepth: 2))
        XCTAssertFalse(JSONScanner.validate(Array("[]".utf8), maxDepth: 0))
        XCTAssertFalse(JSONScanner.validate(Array("[]".utf8), maxDepth: -5))
    }

    func testValidate_100000OpeningBracketsReturnsFalseFast() {
        let bytes = [UInt8](repeating: UInt8(ascii: "["), count: 100_000)
        let start = ContinuousClock.now
        XCTAssertFalse(JSONScanner.validate(bytes))
        XCTAssertFalse(JSONScanner.validate(bytes, maxDepth: .max))
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(1))
    }

    func testValidate_millionLevelsDeepDoesNotRecurse() {
        let depth = 1_000_000
        let bytes = [UInt8](repeating: UInt8(ascii: "["), count: depth) + [UInt8](repeating: UInt8(ascii: "]"), count: depth)
        XCTAssertTrue(JSONScanner.validate(bytes, maxDepth: .max))
        XCTAssertFalse(JSONScanner.validate(bytes))
    }

    func testValidate_tracksObjectsAndArraysAcrossStackWords() {
        // 150 alternating levels cross two 64-bit words of the container stack.
        var open = ""
        var close = ""
        for level in 0..<150 {
            if level % 2 == 0 {
                open += "{\"k\":"
                close = "}" + close
            } else {
                open += "["
                close = "]" + close
            }
        }
        accepts(open + "1" + close)
        accepts(open + "[]" + close)
        // Swap one closer 20 levels below the top: the 130th container closes with the wrong bracket.
        var wrong = Array(close)
        let k = 20
        wrong[k] = wrong[k] == "}" ? "]" : "}"
        rejects(open + "1" + String(wrong))
    }

    func testValidate_everyProperPrefixOfAnObjectIsRejected() {
        let document = Array(#"{"a":[1,-2.5e3,"x\u00e9\ud83d\ude00y",true,false,null,{}],"中":"文","b":{"c":[[]]}}"#.utf8)
        XCTAssertTrue(JSONScanner.validate(document))
        for length in 0..<document.count {
            XCTAssertFalse(JSONScanner.validate(Array(document[..<length])), "prefix \(length)")
        }
    }

    func testValidate_acceptsNestedMixedDocument() {
        accepts(#"{"a":[{"b":null,"c":[true,false,{"d":"e"}]},[],{}],"f":-0.5e-3,"g":"\u00e9"}"#)
    }

    func testValidate_acceptsUnsafeBufferOverload() {
        let bytes = Array("[1,2]".utf8)
        XCTAssertTrue(bytes.withUnsafeBufferPointer { JSONScanner.validate($0) })
        XCTAssertFalse(JSONScanner.validate(UnsafeBufferPointer<UInt8>(start: nil, count: 0)))
    }
}

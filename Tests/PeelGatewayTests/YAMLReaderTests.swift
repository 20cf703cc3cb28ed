@testable import PeelGateway
import XCTest

/// The YAML OpenAPI documents are written in, read into the JSON tree (issue 34).
final class YAMLReaderTests: XCTestCase {
    private func read(_ text: String) throws -> ConfigJSON { try YAMLReader.read(text) }

    func testBlockMappingsAndSequences_eitherIndentation_andCompactMappingsInSequences() throws {
        let doc = try read("""
            openapi: 3.0.3   # springdoc writes this
            info:
              title: "Pet store: v2"
              version: '1.0'
            paths:
              /pets/{id}:
                get:
                  parameters:
                    - name: id
                      in: path
                      required: true
                      schema: {type: integer, format: int64}
                  tags:
                  - pets
                  - 'it''s'
            """)
        XCTAssertEqual(doc["openapi"], .string("3.0.3"), "not a number JSON can carry: a string")
        XCTAssertEqual(doc["info"]?["title"], .string("Pet store: v2"))
        XCTAssertEqual(doc["info"]?["version"], .string("1.0"), "a quoted number stays a string")
        let get = try XCTUnwrap(doc["paths"]?["/pets/{id}"]?["get"])
        guard case .array(let params)? = get["parameters"] else { return XCTFail("parameters") }
        XCTAssertEqual(params.count, 1)
        XCTAssertEqual(params[0]["name"], .string("id"))
        XCTAssertEqual(params[0]["required"], .bool(true))
        XCTAssertEqual(params[0]["schema"], .obj(["type": .string("integer"), "format": .string("int64")]))
        XCTAssertEqual(get["tags"], .array([.string("pets"), .string("it's")]))
    }

    func testScalarsResolveAsTheCoreSchema_andNumbersKeepTheirText() throws {
        let doc = try read("""
            a: 10
            b: -2.50
            c: 1e3
            d: ~
            e: null
            f: true
            g: 0x1F
            h: 007
            i: "\\u00e9\\n"
            j: plain text with: a colon
            k: []
            l: {}
            """)
        XCTAssertEqual(doc["a"], .number("10"))
        XCTAssertEqual(doc["b"], .number("-2.50"))
        XCTAssertEqual(doc["c"], .number("1e3"))
        XCTAssertEqual(doc["d"], .null)
        XCTAssertEqual(doc["e"], .null)
        XCTAssertEqual(doc["f"], .bool(true))
        XCTAssertEqual(doc["g"], .string("0x1F"), "not a number JSON can carry")
        XCTAssertEqual(doc["h"], .string("007"))
        XCTAssertEqual(doc["i"], .string("é\n"))
        XCTAssertEqual(doc["j"], .string("plain text with: a colon"))
        XCTAssertEqual(doc["k"], .array([]))
        XCTAssertEqual(doc["l"], .object([]))
    }

    func testBlockScalars_keepOrFoldTheirLines() throws {
        let doc = try read("""
            literal: |
              line one
              # not a comment
              line two
            folded: >-
              one
              two

              three
            after: x
            """)
        XCTAssertEqual(doc["literal"], .string("line one\n# not a comment\nline two\n"))
        XCTAssertEqual(doc["folded"], .string("one two\nthree"))
        XCTAssertEqual(doc["after"], .string("x"))
    }

    func testWhatIsNotRead_isRefusedWithItsLine() {
        func failure(_ text: String) -> String? {
            do { _ = try YAMLReader.read(text); return nil } catch { return error.description }
        }
        XCTAssertEqual(failure("a: &anchor 1\nb: *anchor\n"), "YAML line 1: anchors and aliases are not read")
        XCTAssertEqual(failure("a: !!str 1\n"), "YAML line 1: tags are not read")
        XCTAssertEqual(failure("a: 1\n---\nb: 2\n"), "YAML line 2: a second document in one stream")
        XCTAssertEqual(failure("a: 1\na: 2\n"), "YAML line 2: the key a appears twice")
        XCTAssertEqual(failure("a:\n\t- 1\n"), "YAML line 2: indentation with a tab")
        XCTAssertEqual(failure("a: [1, 2\n"), "YAML line 1: an unclosed [")
    }

    func testQuotesThatEscapeTheirQuote_keepAHashInside() throws {
        let doc = try read("""
            a: 'it''s # not a comment'   # a comment
            b: "say \\"hi\\" # not a comment either"
            "c \\": d": 1
            """)
        XCTAssertEqual(doc["a"], .string("it's # not a comment"))
        XCTAssertEqual(doc["b"], .string("say \"hi\" # not a comment either"))
        XCTAssertEqual(doc["c \": d"], .number("1"))
    }

    func testCRLFLines_andMultiLineScalars() throws {
        let doc = try read("a: 1\r\nb:\r\n  - x\r\n  - plain scalar\r\n    over two lines\r\nc: [1,\r\n  2]\r\nd: é\r\n")
        XCTAssertEqual(doc, .obj(["a": .number("1"), "b": .array([.string("x"), .string("plain scalar over two lines")]),
                                  "c": .array([.number("1"), .number("2")]), "d": .string("é")]))
    }

    func testADoubleQuotedScalarBrokenAfterABackslash_joinsWithoutASpace() throws {
        // PyYAML's way of breaking a long double-quoted scalar: `\` at the line's end, `\ ` to keep a space.
        let doc = try read("a: \"\\u6BCF\\u9875\\\n    \\ 100\"\nb: \"ends in a backslash \\\\\"\nc: \"folded\n  here\"\n")
        XCTAssertEqual(doc["a"], .string("每页 100"))
        XCTAssertEqual(doc["b"], .string("ends in a backslash \\"))
        XCTAssertEqual(doc["c"], .string("folded here"))
    }

    func testAnEmptyLineInAScalarOverLines_isANewline_asPyYAMLWritesOne() throws {
        // yaml.safe_dump({"d": "line\nbreak", "e": "a\n\nb", "f": ["p\nq"], "g": {"h": "x\ny"}}, default_flow_style=None)
        let doc = try read("d: 'line\n\n  break'\ne: \"a\n\n\n  b\"\nf:\n- 'p\n\n  q'\ng: {h: 'x\n\n    y'}\ni: plain\n\n  text\n")
        XCTAssertEqual(doc["d"], .string("line\nbreak"))
        XCTAssertEqual(doc["e"], .string("a\n\nb"))
        XCTAssertEqual(doc["f"], .array([.string("p\nq")]))
        XCTAssertEqual(doc["g"], .obj(["h": .string("x\ny")]))
        XCTAssertEqual(doc["i"], .string("plain\ntext"))
    }

    func testABlockScalarsIndentationIndicator_keepsItsContentsLeadingSpaces() throws {
        // yaml.safe_dump({"a": " lead", "b": [" x", {"c": " y"}]}, default_style="|")
        let doc = try read("\"a\": |2-\n   lead\n\"b\":\n- |2-\n   x\n- \"c\": |2-\n     y\n")
        XCTAssertEqual(doc["a"], .string(" lead"))
        XCTAssertEqual(doc["b"], .array([.string(" x"), .obj(["c": .string(" y")])]))
    }

    func testADuplicateKey_isRefused_inAMappingOfThousandsToo() {
        let keys = (0..<5000).map { "k\($0): \($0)" }
        var text = keys.joined(separator: "\n") + "\nk4321: again\n"
        XCTAssertThrowsError(try read(text)) { XCTAssertEqual(($0 as? YAMLReader.Failure)?.description, "YAML line 5001: the key k4321 appears twice") }
        text = keys.joined(separator: "\n")
        XCTAssertEqual(try read(text).members.count, 5000)
        let json = "{" + (0..<5000).map { #""k\#($0)": \#($0)"# }.joined(separator: ",") + #", "k17": 0}"#
        guard case .failure(let d) = ConfigJSON.parse(Array(json.utf8)) else { return XCTFail("a duplicate name was taken") }
        XCTAssertEqual(d.path, "k17")
    }

    func testAByteOrderMark_isNoPartOfTheFirstKey() throws {
        let doc = try ContractDocument.parse([0xEF, 0xBB, 0xBF] + Array("openapi: 3.1.0\n".utf8)).get()
        XCTAssertEqual(doc["openapi"], .string("3.1.0"))
    }

    func testAYAMLDocument_andItsJSON_giveOneContract() throws {
        let json = Array(#"{"openapi": "3.0.1", "info": {"title": "t", "version": "1"}, "paths": {"/x": {"get": {"responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object", "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": {"type": "string"}}}}}}}}}}}"#.utf8)
        let yaml = Array("""
            openapi: "3.0.1"
            info: {title: t, version: "1"}
            paths:
              /x:
                get:
                  responses:
                    "200":
                      description: OK
                      content:
                        application/json:
                          schema:
                            type: object
                            properties:
                              code: {type: integer}
                              message: {type: string}
                              data: {type: string}
            """.utf8)
        let a = try ContractDocument.parse(json).get()
        let b = try ContractDocument.parse(yaml).get()
        XCTAssertEqual(a, b)
    }

    func testAQuotedScalarOverLines_hasNoComments_whereverAHashFalls() throws {
        // PyYAML reads each so. `c` is yaml.dump({"c": "café au lait, …"}, width=60): non-ASCII
        // double-quoted and broken before an escaped space; `a` a single-quoted line wrapped before `#`.
        let doc = try read("""
            a: 'the first part of a long string that goes on and on and
              # which is not a comment'   # but this is
            c: "caf\\xE9 au lait, the first part of a long string which goes\\
              \\ # on here"
            d: {x: 1,
              y: 'p # q'}
            e: "one
              # two"
            f: "x\\\u{20}
              y"
            g: 'x
              # y
              z'
            """)
        XCTAssertEqual(doc["a"], .string("the first part of a long string that goes on and on and # which is not a comment"))
        XCTAssertEqual(doc["c"], .string("café au lait, the first part of a long string which goes # on here"))
        XCTAssertEqual(doc["d"], .obj(["x": .number("1"), "y": .string("p # q")]))
        XCTAssertEqual(doc["e"], .string("one # two"))
        XCTAssertEqual(doc["f"], .string("x  y"), "an escaped space ending a line, then the break folded to one")
        XCTAssertEqual(doc["g"], .string("x # y z"), "not the line dropped")
    }

    func testAQuoteInsideAPlainScalar_isText() throws {
        let doc = try read("""
            description: rock 'n roll # a comment
            say: say "hi # there
            long: a plain scalar wrapped
              'tis here # a comment
            list:
            - it's "x # y
            - 'quoted # kept'
            """)
        XCTAssertEqual(doc["description"], .string("rock 'n roll"))
        XCTAssertEqual(doc["say"], .string("say \"hi"))
        XCTAssertEqual(doc["long"], .string("a plain scalar wrapped 'tis here"))
        XCTAssertEqual(doc["list"], .array([.string("it's \"x"), .string("quoted # kept")]))
    }

    func testYAML12sDoubleQuotedEscapes_andSurrogatePairs() throws {
        // PyYAML reads these alike but keeps a pair's halves apart (a str no UTF-8 can carry); as in
        // JSON, the pair is one character here.
        let doc = try read("a: \"\\_\\N\\L\\P|\\e\\a\\b\\f\\v\\\t\\/|\\ud83d\\ude00|\\U0001F600\"\n"
            // yaml.safe_dump({"n": "no\u00a0break and a long tail of words to make it wrap around"}, width=40)
            + "n: \"no\\_break and a long tail of words to\\\n  \\ make it wrap around\"\n")
        XCTAssertEqual(doc["a"], .string("\u{A0}\u{85}\u{2028}\u{2029}|\u{1B}\u{07}\u{08}\u{0C}\u{0B}\t/|😀|😀"))
        XCTAssertEqual(doc["n"], .string("no\u{A0}break and a long tail of words to make it wrap around"))
        func failure(_ text: String) -> String? {
            do { _ = try YAMLReader.read(text); return nil } catch { return error.description }
        }
        XCTAssertEqual(failure("a: \"\\ud83d\"\n"), "YAML line 1: a lone UTF-16 surrogate \\ud83d")
        XCTAssertEqual(failure("a: \"\\ude00\\ud83d\"\n"), "YAML line 1: a lone UTF-16 surrogate \\ude00")
        XCTAssertEqual(failure("a: \"\\ud83dx\"\n"), "YAML line 1: a lone UTF-16 surrogate \\ud83d")
        XCTAssertEqual(failure("a: \"\\q\"\n"), "YAML line 1: an unknown escape \\q")
    }

    func testBlockScalars_keepABlankLinesDeeperSpaces_andFoldAroundMoreIndentedLinesAsPyYAML() throws {
        let doc = try read("a: |\n  a\n     \n  b\nb: >\n  a\n\n    b\n\n  c\nc: >-\n  one\n  two\n\n  three\n")
        XCTAssertEqual(doc["a"], .string("a\n   \nb\n"))
        XCTAssertEqual(doc["b"], .string("a\n\n  b\n\nc\n"))
        XCTAssertEqual(doc["c"], .string("one two\nthree"))
    }
}

import Foundation
@testable import PeelDemo
import PeelTestSupport
import XCTest

/// The shape of every normal endpoint, read over a real socket.
final class DemoEndpointTests: DemoTestCase {
    func testUser_returnsEnvelopeWithBalanceWrittenLiterally() throws {
        let r = try get("/api/user")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.header("Content-Type"), "application/json")
        XCTAssertEqual(r.header("Content-Length"), String(r.body.count))
        XCTAssertEqual(r.text, #"{"code":0,"message":"ok","data":{"id":42,"name":"Ada Lovelace","balance":1024.50,"tags":["admin","beta"],"active":true}}"#)
    }

    func testItems_dataIsAnArray() throws {
        let json = try object(try get("/api/items"))
        XCTAssertEqual(json["code"] as? Int, 0)
        XCTAssertEqual((json["data"] as? [Any])?.count, 3)
    }

    func testExact_keepsNumbersEscapesAndNonASCIIByteForByte() throws {
        let r = try get("/api/exact")
        let expected = Array(#"{"code":0,"message":"ok","data":"#.utf8) + Array(DemoCatalog.exactData.utf8) + [UInt8(ascii: "}")]
        XCTAssertEqual(r.body, expected)
        for fragment in ["1.10", "12345678901234567890", "-0.0", "1e400", #"caf\u00e9\n\"quoted\""#, "中文"] {
            XCTAssertTrue(r.text.contains(fragment), fragment)
        }
        XCTAssertTrue(r.body.contains(0xE4), "中 is sent as raw UTF-8")
    }

    func testEcho_describesMethodTargetVersionHeadersAndBody() throws {
        let body = Array("user=ada&amount=10".utf8)
        let client = try connect()
        try client.send(RawClient.request("POST", "/api/echo?x=1&y=2", headers: [
            ("Content-Type", "application/x-www-form-urlencoded"), ("X-Second", "b"), ("x-first", "a"),
        ], body: body))
        let json = try object(try client.readResponse())
        let data = try XCTUnwrap(json["data"] as? [String: Any])
        XCTAssertEqual(data["method"] as? String, "POST")
        XCTAssertEqual(data["target"] as? String, "/api/echo?x=1&y=2")
        XCTAssertEqual(data["path"] as? String, "/api/echo")
        XCTAssertEqual(data["query"] as? String, "x=1&y=2")
        XCTAssertEqual(data["version"] as? String, "HTTP/1.1")
        XCTAssertEqual(data["body"] as? String, "user=ada&amount=10")
        XCTAssertEqual(data["body_length"] as? Int, body.count)
        XCTAssertEqual(data["body_fnv1a"] as? String, JSONText.hex(Checksum.fnv1a64(body), width: 16))
        let headers = try XCTUnwrap(data["headers"] as? [[String]])
        XCTAssertEqual(headers.map { $0[0] }, ["Host", "Content-Type", "X-Second", "x-first", "Content-Length"])
        XCTAssertEqual(headers[2], ["X-Second", "b"])
    }

    func testEcho_escapesControlCharactersAndQuotesInBody() throws {
        let client = try connect()
        try client.send(RawClient.request("PUT", "/api/echo", body: Array("a\"b\\c\n\u{01}é".utf8)))
        let data = try XCTUnwrap(try object(try client.readResponse())["data"] as? [String: Any])
        XCTAssertEqual(data["body"] as? String, "a\"b\\c\n\u{01}é")
        XCTAssertEqual(data["method"] as? String, "PUT")
    }

    func testEcho_underABasePathStillRoutes() throws {
        let data = try XCTUnwrap(try object(try get("/v1/api/echo/a/b?q=1"))["data"] as? [String: Any])
        XCTAssertEqual(data["target"] as? String, "/v1/api/echo/a/b?q=1")
    }

    func testEcho_withAbsoluteFormTargetRoutesOnItsPath() throws {
        let data = try XCTUnwrap(try object(try get("http://127.0.0.1/v2/api/echo?z=9"))["data"] as? [String: Any])
        XCTAssertEqual(data["query"] as? String, "z=9")
    }

    func testNull_dataIsNull() throws {
        XCTAssertEqual(try get("/api/null").text, #"{"code":0,"message":"ok","data":null}"#)
    }

    func testNoData_envelopeHasNoDataMember() throws {
        XCTAssertEqual(try get("/api/nodata").text, #"{"code":0,"message":"ok"}"#)
    }

    func testCodeString_codeIsTheStringZero() throws {
        XCTAssertEqual(try object(try get("/api/code-string"))["code"] as? String, "0")
    }

    func testCreated_is201WithSuccessEnvelope() throws {
        let r = try get("/api/created")
        XCTAssertEqual(r.status, 201)
        XCTAssertEqual(try object(r)["code"] as? Int, 0)
    }

    func testBusinessError_isCode1001WithStatus200() throws {
        let r = try get("/api/business-error")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.text, #"{"code":1001,"message":"insufficient balance","data":null}"#)
    }

    func testTokenExpired_isCode7() throws {
        let json = try object(try get("/api/token-expired"))
        XCTAssertEqual(json["code"] as? Int, 7)
        XCTAssertEqual(json["message"] as? String, "token expired")
    }

    func testHTML_isATextHTMLPage() throws {
        let r = try get("/api/html")
        XCTAssertEqual(r.status, 200)
        XCTAssertTrue(r.header("Content-Type")?.hasPrefix("text/html") ?? false)
        XCTAssertTrue(r.text.hasPrefix("<!doctype html>"))
    }

    func testArray_isABareJSONArray() throws {
        let r = try get("/api/array")
        XCTAssertTrue(try JSONSerialization.jsonObject(with: Data(r.body)) is [Any])
    }

    func testMalformedEnvelopes_areSentAsWritten() throws {
        XCTAssertEqual(try get("/api/invalid-json").text, #"{"code":0,"data":[1,2,],}"#)
        XCTAssertEqual(try get("/api/duplicate").text.components(separatedBy: #""code":"#).count, 3)
        XCTAssertFalse(try get("/api/no-code").text.contains("code"))
        XCTAssertTrue(try get("/api/code-float").text.hasPrefix(#"{"code":0.5"#))
        XCTAssertTrue(try get("/api/message-number").text.contains(#""message":5"#))
        let empty = try get("/api/empty")
        XCTAssertEqual(empty.status, 200)
        XCTAssertEqual(empty.header("Content-Length"), "0")
    }

    func testTextJSON_isAValidEnvelopeLabelledTextHTML() throws {
        let r = try get("/api/text-json")
        XCTAssertTrue(r.header("Content-Type")?.hasPrefix("text/html") ?? false)
        XCTAssertEqual(r.text, DemoCatalog.userEnvelope)
    }

    func testBOM_envelopeFollowsAUTF8BOM() throws {
        let r = try get("/api/bom")
        XCTAssertEqual(Array(r.body.prefix(3)), [0xEF, 0xBB, 0xBF])
        XCTAssertEqual(String(decoding: r.body.dropFirst(3), as: UTF8.self), DemoCatalog.userEnvelope)
    }

    func testImage_isAPNGWithValidChunkCRCs() throws {
        let r = try get("/api/image")
        XCTAssertEqual(r.header("Content-Type"), "image/png")
        XCTAssertEqual(Array(r.body.prefix(8)), [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        var offset = 8
        var types: [String] = []
        while offset < r.body.count {
            let length = r.body[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
            let typed = Array(r.body[offset + 4..<offset + 8 + length])
            let crc = r.body[offset + 8 + length..<offset + 12 + length].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            XCTAssertEqual(crc, Checksum.crc32(typed))
            types.append(String(decoding: typed.prefix(4), as: UTF8.self))
            offset += 12 + length
        }
        XCTAssertEqual(types, ["IHDR", "IDAT", "IEND"])
    }

    func testStatus_answersThatStatusWithAnEnvelope() throws {
        for code in [201, 404, 418, 500, 503] {
            let r = try get("/api/status/\(code)")
            XCTAssertEqual(r.status, code)
            XCTAssertEqual(r.text, #"{"code":5001,"message":"upstream said \#(code)","data":null}"#)
        }
    }

    func testStatus_204HasNoBodyAndNoContentLength() throws {
        let r = try get("/api/status/204")
        XCTAssertEqual(r.status, 204)
        XCTAssertNil(r.header("Content-Length"))
    }

    func testStatusPlain_answersThatStatusWithPlainText() throws {
        let r = try get("/api/status-plain/502")
        XCTAssertEqual(r.status, 502)
        XCTAssertEqual(r.header("Content-Type"), "text/plain; charset=utf-8")
        XCTAssertEqual(r.text, "upstream said 502\n")
    }

    func testSlow_answersAfterTheDelay() throws {
        let started = Date()
        let r = try get("/api/slow?ms=300")
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.28)
        XCTAssertEqual(try object(r)["code"] as? Int, 0)
    }

    func testSlow_doesNotBlockOtherConnections() throws {
        let slow = try connect()
        try slow.send(RawClient.request("GET", "/api/slow?ms=1500"))
        let started = Date()
        XCTAssertEqual(try get("/api/user").status, 200)
        XCTAssertLessThan(Date().timeIntervalSince(started), 1.0)
        XCTAssertEqual(try slow.readResponse().status, 200)
    }

    func testLarge_returnsAboutTheRequestedSize() throws {
        let r = try get("/api/large?kb=64")
        XCTAssertGreaterThanOrEqual(r.body.count, 64 * 1024)
        XCTAssertLessThan(r.body.count, 66 * 1024)
        let data = try XCTUnwrap(try object(r)["data"] as? [[String: Any]])
        XCTAssertGreaterThan(data.count, 100)
    }

    func testGzip_decodesToTheUserEnvelope() throws {
        let r = try get("/api/gzip")
        XCTAssertEqual(r.header("Content-Encoding"), "gzip")
        XCTAssertEqual(Array(r.body.prefix(2)), [0x1F, 0x8B])
        XCTAssertEqual(gunzip(r.body), Array(DemoCatalog.userEnvelope.utf8))
    }

    func testBadGzip_claimsGzipOverGarbage() throws {
        let r = try get("/fault/bad-gzip")
        XCTAssertEqual(r.header("Content-Encoding"), "gzip")
        XCTAssertNotEqual(Array(r.body.prefix(2)), [0x1F, 0x8B])
    }

    func testChunked_isAValidEnvelopeInChunks() throws {
        let r = try get("/api/chunked")
        XCTAssertEqual(r.header("Transfer-Encoding"), "chunked")
        XCTAssertNil(r.header("Content-Length"))
        XCTAssertEqual(r.text, DemoCatalog.userEnvelope)
    }

    func testHealth_answersUpOnRootAndDemoPath() throws {
        for target in ["/", "/__demo/health", "/v1/", "/v1/__demo/health"] {
            let r = try get(target)
            XCTAssertEqual(r.status, 200, target)
            XCTAssertEqual(r.text, #"{"code":0,"message":"ok","data":"up"}"#, target)
        }
    }

    func testUnknownPath_is404WithEnvelope() throws {
        for target in ["/nope", "/api/nope", "/fault/nope", "/api"] {
            let r = try get(target)
            XCTAssertEqual(r.status, 404, target)
            XCTAssertEqual(r.text, #"{"code":404,"message":"no such endpoint","data":null}"#, target)
        }
    }

    func testHead_keepsContentLengthWithoutBody() throws {
        let client = try connect()
        try client.send(RawClient.request("HEAD", "/api/user"))
        let head = try client.readResponse(forHead: true)
        XCTAssertEqual(head.header("Content-Length"), String(DemoCatalog.userEnvelope.utf8.count))
        // The next answer starts right away, so no body bytes were sent.
        XCTAssertEqual(try client.get("/api/null").text, #"{"code":0,"message":"ok","data":null}"#)
    }
}

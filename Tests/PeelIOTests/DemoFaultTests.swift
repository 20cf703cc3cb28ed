import Foundation
import PeelDemo
import XCTest

/// The endpoints that misbehave on purpose, observed from the client's side of the socket.
final class DemoFaultTests: DemoTestCase {
    func testStall_readsTheRequestButNeverAnswers() throws {
        let client = try connect(timeout: 0.4)
        try client.send(RawClient.request("GET", "/fault/stall"))
        let (bytes, end) = client.readToEnd()
        XCTAssertEqual(end, .timeout)
        XCTAssertTrue(bytes.isEmpty)
        XCTAssertEqual(upstream.requestCount, 1)
    }

    func testReset_clientSeesConnectionReset() throws {
        let client = try connect()
        try client.send(RawClient.request("GET", "/fault/reset"))
        let (bytes, end) = client.readToEnd()
        XCTAssertEqual(end, .reset)
        XCTAssertTrue(bytes.isEmpty)
    }

    func testResetMidBody_sendsPartOfTheBodyThenResets() throws {
        let client = try connect()
        try client.send(RawClient.request("GET", "/fault/reset-mid-body"))
        let (bytes, end) = client.readToEnd()
        XCTAssertEqual(end, .reset)
        XCTAssertTrue(String(decoding: bytes, as: UTF8.self).hasPrefix("HTTP/1.1 200 OK\r\n"))
        XCTAssertTrue(String(decoding: bytes, as: UTF8.self).contains("Content-Length: 1000\r\n"))
    }

    func testCloseAfterHeaders_promisesABodyThenCloses() throws {
        let client = try connect()
        try client.send(RawClient.request("GET", "/fault/close-after-headers"))
        let head = try client.readHead()
        XCTAssertEqual(head.status, 200)
        XCTAssertTrue(head.headers.contains { $0 == ("Content-Length", "100") })
        let (rest, end) = client.readToEnd()
        XCTAssertEqual(end, .eof)
        XCTAssertTrue(rest.isEmpty)
    }

    func testCloseMidBody_sendsTenOfAThousandBytesThenCloses() throws {
        let client = try connect()
        try client.send(RawClient.request("GET", "/fault/close-mid-body"))
        let head = try client.readHead()
        XCTAssertTrue(head.headers.contains { $0 == ("Content-Length", "1000") })
        let (rest, end) = client.readToEnd()
        XCTAssertEqual(end, .eof)
        XCTAssertEqual(rest.count, 10)
    }

    func testTrickle_sendsTheEnvelopeOneByteAtATime() throws {
        let client = try connect()
        let started = Date()
        try client.send(RawClient.request("GET", "/fault/trickle?ms=20"))
        let head = try client.readHead()
        let length = try XCTUnwrap(head.headers.first { $0.0 == "Content-Length" }.flatMap { Int($0.1) })
        var reads = 0
        var body: [UInt8] = []
        while body.count < length {
            if client.buffer.isEmpty {
                try client.fill()
                reads += 1
            }
            body += try client.take(min(client.buffer.count, length - body.count))
        }
        XCTAssertGreaterThan(reads, length / 4, "bytes arrive spread out")
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), Double(length - 1) * 0.02 * 0.8)
        XCTAssertEqual(String(decoding: body, as: UTF8.self), #"{"code":0,"message":"ok","data":{"trickled":true}}"#)
        XCTAssertEqual(try client.get("/api/null").status, 200, "the connection stays usable")
    }

    func testBadChunking_sendsAnInvalidChunkSizeLine() throws {
        let client = try connect()
        try client.send(RawClient.request("GET", "/fault/bad-chunking"))
        let (bytes, end) = client.readToEnd()
        XCTAssertEqual(end, .eof)
        let text = String(decoding: bytes, as: UTF8.self)
        XCTAssertTrue(text.contains("Transfer-Encoding: chunked\r\n\r\nzz\r\n"))
    }

    func testHuge_streamsAValidEnvelopeOfExactlyTheRequestedSize() throws {
        let client = try connect(timeout: 10)
        try client.send(RawClient.request("GET", "/fault/huge?mb=3"))
        let r = try client.readResponse()
        XCTAssertEqual(r.header("Content-Length"), String(3 << 20))
        XCTAssertEqual(r.body.count, 3 << 20)
        let json = try object(r)
        XCTAssertEqual(json["code"] as? Int, 0)
        XCTAssertGreaterThan((json["data"] as? [Any])?.count ?? 0, 10_000)
        XCTAssertEqual(try client.get("/api/null").status, 200, "the connection stays usable")
    }

    func testHuge_defaultIs80MiBAndAClientMayHangUpEarly() throws {
        let client = try connect()
        try client.send(RawClient.request("GET", "/fault/huge"))
        let head = try client.readHead()
        XCTAssertTrue(head.headers.contains { $0 == ("Content-Length", String(80 << 20)) })
        _ = try client.take(1 << 20)
        // Hanging up must stop the stream; the server keeps serving others.
        _ = consume client
        XCTAssertEqual(try get("/api/null").status, 200)
    }

    func testFiveHundred_isAnEnvelopeWithStatus500() throws {
        let r = try get("/fault/5xx")
        XCTAssertEqual(r.status, 500)
        XCTAssertEqual(try object(r)["code"] as? Int, 5000)
    }

    func testGarbage_sendsBytesThatAreNotHTTPThenCloses() throws {
        let client = try connect()
        try client.send(RawClient.request("GET", "/fault/garbage"))
        let (bytes, end) = client.readToEnd()
        XCTAssertEqual(end, .eof)
        XCTAssertFalse(bytes.isEmpty)
        XCTAssertFalse(String(decoding: bytes, as: UTF8.self).hasPrefix("HTTP/"))
    }

    func testFaults_workUnderABasePath() throws {
        let client = try connect()
        try client.send(RawClient.request("GET", "/v1/fault/reset"))
        XCTAssertEqual(client.readToEnd().end, .reset)
    }
}

/// The play-dead switch `make demo` uses to show the offline experience (issue 13).
final class DemoSwitchTests: DemoTestCase {
    func testDownResetsEveryRequest_upAnswersAgain() throws {
        let down = try connect()
        try down.send(RawClient.request("POST", "/_demo/down"))
        XCTAssertEqual(try down.readHead().status, 200)
        XCTAssertTrue(upstream.isPlayingDead)

        let dead = try connect()
        try dead.send(RawClient.request("GET", "/api/user"))
        let (bytes, end) = dead.readToEnd()
        XCTAssertEqual(end, .reset)
        XCTAssertTrue(bytes.isEmpty)

        let up = try connect()
        try up.send(RawClient.request("POST", "/_demo/up"))
        XCTAssertEqual(try up.readHead().status, 200)
        let alive = try connect()
        try alive.send(RawClient.request("GET", "/api/user"))
        XCTAssertEqual(try alive.readHead().status, 200)
    }
}

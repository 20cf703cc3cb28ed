import Dispatch
import Foundation
import PeelDemo
import PeelIO
import XCTest

/// HTTP/1.1 behaviour of the demo server: persistence, pipelining, framing, refusals, counting.
final class DemoProtocolTests: DemoTestCase {
    func testKeepAlive_servesTwoRequestsOnOneConnection() throws {
        let client = try connect()
        let first = try client.get("/api/user")
        XCTAssertNil(first.header("Connection"))
        XCTAssertEqual(try client.get("/api/null").status, 200)
        XCTAssertEqual(upstream.requestCount, 2)
    }

    func testPipelining_answersInRequestOrderEvenWhenTheFirstIsSlow() throws {
        let client = try connect()
        let batch = RawClient.request("GET", "/api/slow?ms=200") + RawClient.request("GET", "/api/user")
            + RawClient.request("POST", "/api/echo", body: Array("third".utf8))
        try client.send(batch)
        XCTAssertTrue(try object(try client.readResponse()).description.contains("slow"))
        XCTAssertEqual(try client.readResponse().text, DemoCatalog.userEnvelope)
        let echo = try XCTUnwrap(try object(try client.readResponse())["data"] as? [String: Any])
        XCTAssertEqual(echo["body"] as? String, "third")
    }

    func testEcho_returnsChunkedBodyDechunked() throws {
        let client = try connect()
        let head = RawClient.request("POST", "/api/echo", headers: [("Transfer-Encoding", "chunked")])
        try client.send(head + Array("5;name=value\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n".utf8))
        let data = try XCTUnwrap(try object(try client.readResponse())["data"] as? [String: Any])
        XCTAssertEqual(data["body"] as? String, "hello 0123456789")
        XCTAssertEqual(data["body_length"] as? Int, 16)
    }

    func testEcho_chunkedBodyArrivingInPiecesIsReassembled() throws {
        let client = try connect()
        try client.send(RawClient.request("POST", "/api/echo", headers: [("Transfer-Encoding", "chunked")]))
        for piece in ["4\r", "\nab", "cd\r\n", "2\r\nef", "\r\n0\r\n", "\r\n"] {
            usleep(20_000)
            try client.send(piece)
        }
        let data = try XCTUnwrap(try object(try client.readResponse())["data"] as? [String: Any])
        XCTAssertEqual(data["body"] as? String, "abcdef")
    }

    func testEcho_largeBodyKeepsEveryByte() throws {
        let body = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        // Generous: under AddressSanitizer a debug build needs several seconds to echo 3 MiB as JSON.
        let client = try connect(timeout: 60)
        try client.send(RawClient.request("POST", "/api/echo", body: body))
        let data = try XCTUnwrap(try object(try client.readResponse())["data"] as? [String: Any])
        XCTAssertEqual(data["body_length"] as? Int, body.count)
        XCTAssertEqual(upstream.lastRequest?.body, body)
    }

    func testExpectContinue_sends100BeforeTheBody() throws {
        let client = try connect()
        try client.send(RawClient.request("POST", "/api/echo", headers: [("Content-Length", "3"), ("Expect", "100-continue")]))
        let interim = try client.readHead()
        XCTAssertEqual(interim.status, 100)
        try client.send("abc")
        let data = try XCTUnwrap(try object(try client.readResponse())["data"] as? [String: Any])
        XCTAssertEqual(data["body"] as? String, "abc")
    }

    func testHTTP10_closesAfterTheAnswerByDefault() throws {
        let client = try connect()
        try client.send(RawClient.request("GET", "/api/user", version: "HTTP/1.0"))
        let r = try client.readResponse()
        XCTAssertEqual(r.header("Connection"), "close")
        XCTAssertEqual(client.readToEnd().end, .eof)
    }

    func testHTTP10_keepAliveHeaderKeepsTheConnection() throws {
        let client = try connect()
        let request = RawClient.request("GET", "/api/user", version: "HTTP/1.0", headers: [("Connection", "keep-alive")])
        try client.send(request)
        XCTAssertEqual(try client.readResponse().header("Connection"), "keep-alive")
        try client.send(request)
        XCTAssertEqual(try client.readResponse().status, 200)
    }

    func testConnectionClose_closesAfterTheAnswer() throws {
        let client = try connect()
        try client.send(RawClient.request("GET", "/api/user", headers: [("Connection", "close")]))
        XCTAssertEqual(try client.readResponse().header("Connection"), "close")
        XCTAssertEqual(client.readToEnd().end, .eof)
    }

    func testBadRequests_areRefusedWith400AndClosed() throws {
        let cases: [(String, String)] = [
            ("bare LF", "GET /api/user HTTP/1.1\nHost: x\n\n"),
            ("bare LF in a field", "GET /api/user HTTP/1.1\r\nHost: x\nX: y\r\n\r\n"),
            ("obs-fold", "GET /api/user HTTP/1.1\r\nHost: x\r\nX-A: one\r\n two\r\n\r\n"),
            ("both framings", "POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
            ("missing Host", "GET /api/user HTTP/1.1\r\n\r\n"),
            ("two Hosts", "GET /api/user HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
            ("space before colon", "GET /api/user HTTP/1.1\r\nHost : x\r\n\r\n"),
            ("bad Content-Length", "POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3x\r\n\r\nabc"),
            ("two Content-Lengths", "POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc"),
            ("bad chunk size", "POST /api/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
            ("chunk longer than size", "POST /api/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n"),
            ("chunked not final", "POST /api/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"),
            ("double space", "GET  /api/user HTTP/1.1\r\nHost: x\r\n\r\n"),
            ("lowercase version", "GET /api/user http/1.1\r\nHost: x\r\n\r\n"),
            ("relative target", "GET api/user HTTP/1.1\r\nHost: x\r\n\r\n"),
            ("control byte in value", "GET /api/user HTTP/1.1\r\nHost: x\r\nX: a\u{01}b\r\n\r\n"),
            ("TE in HTTP/1.0", "POST /api/echo HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        ]
        for (name, request) in cases {
            let client = try connect()
            try client.send(request)
            let r = try client.readResponse()
            XCTAssertEqual(r.status, 400, name)
            XCTAssertEqual(r.header("Connection"), "close", name)
            XCTAssertEqual(try object(r)["code"] as? Int, 400, name)
            XCTAssertEqual(client.readToEnd().end, .eof, name)
        }
        XCTAssertEqual(upstream.requestCount, 0)
    }

    func testOtherRefusals_useTheirOwnStatus() throws {
        let cases: [(Int, String)] = [
            (505, "GET /api/user HTTP/2.0\r\nHost: x\r\n\r\n"),
            (501, "POST /api/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
            (413, "POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 16777217\r\n\r\n"),
        ]
        for (status, request) in cases {
            let client = try connect()
            try client.send(request)
            XCTAssertEqual(try client.readResponse().status, status, request)
        }
    }

    func testHugeHead_isRefusedWith431() throws {
        let client = try connect()
        try client.send("GET /api/user HTTP/1.1\r\nHost: x\r\nX-Big: " + String(repeating: "a", count: 70_000))
        let r = try client.readResponse()
        XCTAssertEqual(r.status, 431)
        XCTAssertEqual(client.readToEnd().end, .eof)
    }

    func testLeadingEmptyLine_isIgnored() throws {
        let client = try connect()
        try client.send([13, 10] + RawClient.request("GET", "/api/null"))
        XCTAssertEqual(try client.readResponse().status, 200)
    }

    func testRequestCount_countsWholeRequestsButNotProbes() throws {
        let client = try connect()
        try client.send("POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab")
        usleep(100_000)
        XCTAssertEqual(upstream.requestCount, 0, "a partial request is not counted")
        try client.send("cd")
        _ = try client.readResponse()
        XCTAssertEqual(upstream.requestCount, 1)
        _ = try client.get("/")
        _ = try client.get("/__demo/health")
        XCTAssertEqual(upstream.requestCount, 1)
        XCTAssertEqual(upstream.probeCount, 2)
        upstream.resetCount()
        XCTAssertEqual(upstream.requestCount, 0)
        XCTAssertNil(upstream.lastRequest)
    }

    func testLastRequest_recordsMethodTargetHeadersInOrderAndBody() throws {
        let client = try connect()
        try client.send(RawClient.request("PATCH", "/api/echo?a=1", headers: [("B", "2"), ("A", "1")], body: Array("xyz".utf8)))
        _ = try client.readResponse()
        let last = try XCTUnwrap(upstream.lastRequest)
        XCTAssertEqual(last.method, "PATCH")
        XCTAssertEqual(last.target, "/api/echo?a=1")
        XCTAssertEqual(last.version, "HTTP/1.1")
        XCTAssertEqual(last.headers.map(\.0), ["Host", "B", "A", "Content-Length"])
        XCTAssertEqual(last.header("b"), "2")
        XCTAssertEqual(last.body, Array("xyz".utf8))
    }

    func testStop_closesOpenConnectionsAndTheListener() throws {
        let client = try connect()
        XCTAssertEqual(try client.get("/api/user").status, 200)
        let port = upstream.port
        upstream.stop()
        XCTAssertNotEqual(client.readToEnd().end, .timeout)
        XCTAssertThrowsError(try RawClient(port: port)) { error in
            XCTAssertEqual(error as? ClientError, .connect(ECONNREFUSED))
        }
        upstream.stop()
    }

    func testStop_whileAnswersAreInFlight() throws {
        let stalled = try connect()
        try stalled.send(RawClient.request("GET", "/fault/stall"))
        let slow = try connect()
        try slow.send(RawClient.request("GET", "/api/slow?ms=5000"))
        let trickle = try connect()
        try trickle.send(RawClient.request("GET", "/fault/trickle?ms=50"))
        XCTAssertTrue(eventually { self.upstream.requestCount == 3 })
        upstream.stop()
        for client in [stalled, slow, trickle] { XCTAssertNotEqual(client.readToEnd().end, .timeout) }
    }

    func testBaseURL_namesLoopbackAndThePort() throws {
        XCTAssertEqual(upstream.baseURL, "http://127.0.0.1:\(upstream.port)")
        let wildcard = try DemoUpstream(listen: HostPort(host: "0.0.0.0", port: 0))
        try wildcard.start()
        defer { wildcard.stop() }
        XCTAssertEqual(wildcard.baseURL, "http://127.0.0.1:\(wildcard.port)")
        XCTAssertEqual(try RawClient(port: wildcard.port).get("/api/null").status, 200)
    }

    func testCurlLines_pointAtTheGateway() {
        let lines = DemoCatalog.curlLines(gateway: "http://127.0.0.1:8080/")
        XCTAssertTrue(lines.contains("curl -s http://127.0.0.1:8080/api/user"))
        XCTAssertTrue(lines.allSatisfy { $0.hasPrefix("curl ") && $0.contains("http://127.0.0.1:8080/api/") })
    }

    func testStop_returnsPromptlyWithOrWithoutOpenConnections() throws {
        for withTraffic in [false, true] {
            let demo = try DemoUpstream(listen: HostPort(host: "127.0.0.1", port: 0))
            try demo.start()
            let client = withTraffic ? try RawClient(port: demo.port) : nil
            if let client { XCTAssertEqual(try client.get("/api/user").status, 200) }
            let started = Date()
            demo.stop()
            XCTAssertLessThan(Date().timeIntervalSince(started), 0.5)
            if let client { XCTAssertEqual(client.readToEnd().end, .eof, "an idle keep-alive connection gets a FIN") }
        }
    }

    func testStart_leavesSIGPIPEIgnoredSoAHangUpCannotKillTheProcess() {
        var current = sigaction()
        XCTAssertEqual(sigaction(SIGPIPE, nil, &current), 0)
        XCTAssertNotNil(current.__sigaction_handler.sa_handler)
    }

    func testStartAndStop_racingFromManyThreadsEndWithNothingRunning() throws {
        for _ in 0..<20 {
            let demo = try DemoUpstream(listen: HostPort(host: "127.0.0.1", port: 0))
            DispatchQueue.concurrentPerform(iterations: 6) { i in
                if i % 2 == 0 { try? demo.start() } else { demo.stop() }
            }
            demo.stop()
            if demo.port != 0 {
                XCTAssertThrowsError(try RawClient(port: demo.port), "a listener survived stop")
            }
        }
    }
}

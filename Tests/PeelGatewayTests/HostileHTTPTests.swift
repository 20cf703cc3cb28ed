import Foundation
import PeelDemo
import PeelGateway
import PeelIO
import XCTest

/// Requests RFC 9112 says to refuse: each gets a 400 problem document and never reaches the upstream.
final class HostileHTTPTests: XCTestCase {
    var h: Harness!

    override func setUpWithError() throws { h = try Harness { c in c.clients.headerTimeout = 0.5 } }
    override func tearDown() { h.stop() }

    func testSmugglingProbes_areRefusedBeforeTheUpstream() throws {
        let probes = [
            "POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            "POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nhello",
            "POST /api/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
            "POST /api/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
            "GET /api/echo HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n",
            "GET /api/echo HTTP/1.1\nHost: x\n\n",
            "GET /api/echo HTTP/1.1\r\nHost: x\r\nX-Nul: a\u{0}b\r\n\r\n",
            "GET /api/echo HTTP/1.1\r\nHost : x\r\n\r\n",
            "GET /api/echo HTTP/1.1\r\n\r\n",
            "HEAD /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 38\r\n\r\nGET /api/user HTTP/1.1\r\nHost: x\r\n\r\n",
        ]
        for raw in probes {
            let before = h.upstream.requestCount
            guard let r = try? h.raw(raw) else { XCTFail("no answer to \(raw.debugDescription)"); continue }
            XCTAssertEqual(r.status, 400, raw.debugDescription)
            let p = problem(r)
            XCTAssertEqual(p["kind"] as? String, "bad-request", raw.debugDescription)
            XCTAssertEqual(p["code"] as? Int, -106)
            XCTAssertEqual(r.header("Connection")?.lowercased(), "close")
            XCTAssertEqual(h.upstream.requestCount, before, "reached the upstream: \(raw.debugDescription)")
        }
    }

    func testHostWithUserinfoAndOverlongOrSemicolonDotSegments_are400BeforeTheUpstream() throws {
        for raw in ["GET /api/echo HTTP/1.1\r\nHost: user:pw@evil.example\r\n\r\n",
                    "GET /..;/secret HTTP/1.1\r\nHost: x\r\n\r\n",
                    "GET /%c0%ae%c0%ae/secret HTTP/1.1\r\nHost: x\r\n\r\n"] {
            let before = h.upstream.requestCount
            let r = try h.raw(raw)
            XCTAssertEqual(r.status, 400, raw.debugDescription)
            XCTAssertEqual(problem(r)["kind"] as? String, "bad-request", raw.debugDescription)
            XCTAssertEqual(h.upstream.requestCount, before, "reached the upstream: \(raw.debugDescription)")
        }
    }

    func testHeaderInjection_throughForwardedValuesIsImpossible() throws {
        // A header value cannot carry CR LF past the framing check, so nothing new can be spliced in.
        let r = try h.raw("GET /api/echo HTTP/1.1\r\nHost: x\r\nX-A: 1\rX-Injected: yes\r\n\r\n")
        XCTAssertEqual(r.status, 400)
        let e = echo(try h.request("GET", "/api/echo", headers: [("X-Request-Id", "a b")]))
        XCTAssertFalse(echoedHeaders(e).contains { $0.0 == "X-Request-Id" && $0.1 == "a b" }, "unsafe request id forwarded")
    }

    func testSlowHeaders_getA408AtTheHeaderDeadlineAndTheConnectionCloses() throws {
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        let started = Date()
        try c.send("GET /api/user HTTP/1.1\r\n")
        var answer: BlockingClient.Response?
        for _ in 0..<20 {
            // Data to read (the answer) or a close both make peerClosed's poll return.
            if c.peerClosed(within: 0.1) { break }
            if c.readable(within: 0) { answer = try? c.readResponse(); break }
            try? c.send("X")  // one byte at a time: only a deadline on the whole head stops this
        }
        XCTAssertEqual(answer?.status, 408, "a trickled head was not cut off with 408")
        if let answer { XCTAssertEqual(problem(answer)["kind"] as? String, "bad-request") }
        XCTAssertTrue(c.peerClosed(within: 1), "the connection stays open after the 408")
        XCTAssertLessThan(Date().timeIntervalSince(started), 1.5)
        XCTAssertEqual(try h.request("GET", "/api/user").status, 200)
    }

    func testPipelinedValidRequests_allAnsweredInOrder() throws {
        let c = try BlockingClient(host: "127.0.0.1", port: h.port)
        try c.send("GET /api/user HTTP/1.1\r\nHost: x\r\n\r\nPOST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhiGET /api/null HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(try c.readResponse().text, DemoCatalog.userData)
        XCTAssertEqual(echo(try c.readResponse())["body"] as? String, "hi")
        XCTAssertEqual(try c.readResponse().text, "null")
    }

    func testGarbageAndHugeHeads_getProblemDocuments() throws {
        let garbage = try h.raw("\u{01}\u{02}\u{00}\u{01}\u{00}\r\n\r\n")
        XCTAssertEqual(garbage.status, 400)
        // A TLS record is not garbage but a client on the wrong port: closed, no HTTP answer (issue 19).
        XCTAssertThrowsError(try h.raw("\u{16}\u{03}\u{01}\u{02}\u{00}\u{01}\u{00}\r\n\r\n")) { e in
            XCTAssertEqual(e as? BlockingClient.Failure, .closed)
        }
        XCTAssertEqual(problem(garbage)["kind"] as? String, "bad-request")
        let big = String(repeating: "a", count: 70_000)
        let huge = try h.raw("GET /api/user HTTP/1.1\r\nHost: x\r\nX-Big: \(big)\r\n\r\n")
        XCTAssertEqual(huge.header("Content-Type"), "application/problem+json")
        XCTAssertEqual(huge.status, 431)
        XCTAssertEqual(problem(huge)["kind"] as? String, "request-too-large")
    }

    // Closing right after an answer while the client's next bytes sit unread makes the kernel send a
    // reset that discards the answer's undelivered tail (found in review: 12 KB of 1 MB arrived).
    func testConnectionCloseAnswer_survivesUnreadPipelinedBytes() throws {
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 10)
        let upload = String(repeating: "u", count: 200_000)
        try c.send("GET /api/large?kb=1024 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            + "POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: \(upload.utf8.count)\r\n\r\n" + upload)
        usleep(500_000)
        let r = try c.readResponse()
        XCTAssertEqual(r.status, 200)
        XCTAssertGreaterThan(r.body.count, 1_000_000, "the answer was cut short")
        XCTAssertEqual(r.header("Content-Length").flatMap(Int.init), r.body.count)
    }

    func testEmptyLinesBeforeTheRequestLine_countTowardTheHeadBound() throws {
        let h = try Harness(workers: 1)
        defer { h.stop() }
        // A few are fine (RFC 9112 §2.2).
        let ok = try h.raw(String(repeating: "\r\n", count: 500) + "GET /api/user HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        XCTAssertEqual(ok.status, 200)
        // 64 KiB of them and more, sent in pieces the server reads one by one: refused as an oversized head.
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        let piece = String(repeating: "\r\n", count: 4096)
        for _ in 0..<9 {
            try c.send(piece)
            usleep(2_000)
        }
        try? c.send("GET /api/user HTTP/1.1\r\nHost: x\r\n\r\n")
        let r = try c.readResponse()
        XCTAssertEqual(r.status, 431)
        XCTAssertEqual(problem(r)["kind"] as? String, "request-too-large")
    }
}

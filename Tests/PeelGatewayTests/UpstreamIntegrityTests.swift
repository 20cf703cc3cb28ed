import Foundation
import PeelGateway
import PeelIO
import XCTest

/// Upstreams that misbehave on raw sockets: what Peel sends them, and what it relays from them.
final class UpstreamIntegrityTests: XCTestCase {
    /// The fake answers every request except `path` on a reused connection (its second request or
    /// later), which it reads, counts and then closes without a byte: processed, answer lost.
    private func harness(dyingOnReuse path: String) throws -> RawHarness {
        try RawHarness { r in
            r.path == path && r.number > 1 ? .close : .send(RawUpstream.envelope("{\"n\":\(r.number)}"))
        }
    }

    func testPostProcessedThenClosedOnAReusedConnection_isNotSentAgain() throws {
        let h = try harness(dyingOnReuse: "/charge")
        defer { h.stop() }
        XCTAssertEqual(try h.request("GET", "/warm").status, 200)
        let r = try h.request("POST", "/charge", body: Array("amount=100".utf8))
        XCTAssertEqual(h.seen("/charge").count, 1, "the POST reached the upstream more than once")
        XCTAssertEqual(r.status, 502, r.text)
        let p = problem(r)
        XCTAssertEqual(p["kind"] as? String, "upstream-unreachable")
        XCTAssertEqual(p["code"] as? Int, -101)
        XCTAssertEqual(p["detail"] as? String,
                       "the connection died after the request was sent; not re-sent because POST is not idempotent")
    }

    func testPatchProcessedThenClosedOnAReusedConnection_isNotSentAgain() throws {
        let h = try harness(dyingOnReuse: "/order")
        defer { h.stop() }
        XCTAssertEqual(try h.request("GET", "/warm").status, 200)
        let r = try h.request("PATCH", "/order", body: Array("{}".utf8))
        XCTAssertEqual(h.seen("/order").count, 1, "the PATCH reached the upstream more than once")
        XCTAssertEqual(r.status, 502, r.text)
    }

    func testGetOnAReusedConnectionThatDies_isRetriedOnceOnAFreshOne() throws {
        let h = try harness(dyingOnReuse: "/read")
        defer { h.stop() }
        XCTAssertEqual(try h.request("GET", "/warm").status, 200)
        let r = try h.request("GET", "/read")
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(r.text, "{\"n\":1}", "answered by the fresh connection's first request")
        XCTAssertEqual(h.seen("/read").map(\.number), [2, 1])
    }

    func testGetOnReusedConnectionsThatAllDie_isNeverSentAThirdTime() throws {
        // Two kept-alive connections (/slow-warm is answered late, so the second call cannot wait
        // for the first one's connection), then /read dies on every reused connection. curl 7.88
        // retries on another pooled connection or on a fresh one, as it finds them: on a fresh one
        // the retry is answered; on the other dead one a third attempt would follow, and Peel
        // refuses it. Either way the GET is sent at most twice.
        let h = try RawHarness { r in
            let ok = RawUpstream.envelope("{\"n\":\(r.number)}")
            if r.path == "/slow-warm" { return .sendInTwoParts("", after: 1.0, ok) }
            return r.path == "/read" && r.number > 1 ? .close : .send(ok)
        }
        defer { h.stop() }
        let a = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        let b = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try a.send("GET /slow-warm HTTP/1.1\r\nHost: x\r\n\r\n")
        try b.send("GET /slow-warm HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(try a.readResponse().status, 200)
        XCTAssertEqual(try b.readResponse().status, 200)
        XCTAssertEqual(Set(h.seen("/slow-warm").map(\.connection)).count, 2, "the two calls shared one upstream connection")
        let r = try h.request("GET", "/read")
        let reads = h.seen("/read").map { "conn \($0.connection) #\($0.number)" }
        XCTAssertEqual(reads.count, 2, "\(reads)")
        if h.seen("/read").allSatisfy({ $0.number > 1 }) {
            XCTAssertEqual(r.status, 502, r.text)
            XCTAssertEqual(problem(r)["detail"] as? String,
                           "the connection died after the request was sent, twice; GET is re-sent once only")
        } else {
            XCTAssertEqual(r.text, "{\"n\":1}", "the retry on a fresh connection is answered")
        }
    }

    func testNotResent_doesNotCountAgainstReachability() throws {
        let h = try RawHarness(configure: { $0.probe.fall = 1 }) { r in
            r.path == "/charge" && r.number > 1 ? .close : .send(RawUpstream.envelope("1"))
        }
        defer { h.stop() }
        XCTAssertEqual(try h.request("GET", "/warm").status, 200)
        XCTAssertEqual(try h.request("POST", "/charge", body: [0x31]).status, 502)
        XCTAssertEqual(try h.request("GET", "/after").status, 200, "one closed keep-alive connection took the upstream offline")
    }

    /// A passthrough kept in the upstream's gzip that breaks mid-body (fewer bytes than its
    /// Content-Length) is answered with a problem: plain JSON, which must not say it is gzip, or
    /// `curl --compressed` and every browser fail to read the error.
    func testAProblemAfterAKeptCoding_isNotMarkedWithThatCoding() throws {
        let h = try RawHarness { r in
            if r.path == "/probe" { return .send(RawUpstream.answer("ok")) }
            return .sendThenClose("HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Encoding: gzip\r\n"
                                  + "Content-Length: 100\r\n\r\n0123456789")
        }
        defer { h.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 10)
        try c.send(Array("GET /img HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n".utf8))
        let r = try c.readResponse(head: false)
        XCTAssertEqual(r.status, 502)
        XCTAssertNil(r.header("content-encoding"), "a problem document is Peel's JSON")
        XCTAssertEqual(r.header("content-type"), "application/problem+json")
        XCTAssertNotNil(try? JSONSerialization.jsonObject(with: Data(r.body)), "the body reads as JSON, uncompressed")
    }
}

/// Upstream heads are checked before a byte of them is relayed.
final class UpstreamHeadTests: XCTestCase {
    static let badNames = ["Bad Name", "X(A)@", "X\u{80}Y", "Content-Length\u{0b}", "X-A\u{7f}"]
    static let forged = "HTTP/1.1 200 OK\r\nSet-Cookie: session=attacker\r\nContent-Length: 38\r\n\r\n{\"code\":0,\"message\":\"\",\"data\":\"evil\"}"
    static let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n23\r\n{\"code\":0,\"message\":\"ok\",\"data\":1}\r\n0\r\n\r\n"
    var h: RawHarness!

    override func setUpWithError() throws {
        h = try RawHarness(configure: { $0.calls.timeout = 3 }) { r in
            let ok = RawUpstream.envelope("{\"conn\":\(r.connection),\"n\":\(r.number)}")
            switch r.path {
            case "/switch":
                return .send("HTTP/1.1 101 Switching Protocols\r\nUpgrade: evil\r\nConnection: upgrade\r\n\r\n" + Self.forged)
            case "/interim199":
                return .send("HTTP/1.1 199 Whatever\r\n\r\n" + ok)
            case "/interim103":
                return .send("HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n" + ok)
            case let p where p.hasPrefix("/badname/"):
                let i = Int(p.dropFirst(9)) ?? 0
                return .send(RawUpstream.envelope("1", fields: ["\(Self.badNames[i]): 1"]))
            case "/badvalue-cr":
                return .send(RawUpstream.envelope("1", fields: ["X-A: a\rSet-Cookie: b"]))
            case "/badvalue-nul":
                return .send(RawUpstream.envelope("1", fields: ["X-A: a\u{0}b"]))
            case "/nocolon":
                return .send(RawUpstream.envelope("1", fields: ["X-A"]))
            case "/many":
                return .send(RawUpstream.envelope("1", fields: (0..<10_000).map { "X-F\($0): v" }))
            case "/bighead":
                return .send(RawUpstream.envelope("1", fields: ["X-Big: " + String(repeating: "a", count: 70_000)]))
            case "/fields256":
                return .send(RawUpstream.envelope("1", fields: (0..<250).map { "X-F\($0): v" }))
            case "/conn":
                return .send(RawUpstream.envelope("1", fields: ["Connection: X-Secret, close", "X-Secret: 1", "X-Kept: 2"]))
            case "/excess":
                return .send(ok + Self.forged)
            case "/chunked-excess":
                return .send(Self.chunked + Self.forged)
            case "/chunked-late":
                return .sendInTwoParts(Self.chunked, after: 0.2, Self.forged)
            default:
                return .send(ok)
            }
        }
    }

    override func tearDown() { h.stop() }

    private func assertBadFormat(_ path: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let r = try h.request("GET", path)
        XCTAssertEqual(r.status, 502, "\(path): \(r.text)", file: file, line: line)
        XCTAssertEqual(problem(r, file: file, line: line)["code"] as? Int, -100, path, file: file, line: line)
        XCTAssertNil(r.header("Set-Cookie"), path, file: file, line: line)
    }

    /// The next call is answered by a new connection's first request: nothing was left to desynchronise.
    private func assertNextCallOnAFreshConnection(after path: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let before = h.upstream.connections
        let r = try h.request("GET", "/next")
        XCTAssertEqual(r.status, 200, file: file, line: line)
        XCTAssertEqual(r.text, "{\"conn\":\(before + 1),\"n\":1}", "after \(path)", file: file, line: line)
        XCTAssertNil(r.header("Set-Cookie"), file: file, line: line)
    }

    func testSwitchingProtocolsWithAForgedAnswerAfterIt_is502AndTheConnectionIsDiscarded() throws {
        XCTAssertEqual(try h.request("GET", "/warm").status, 200)
        try assertBadFormat("/switch")
        try assertNextCallOnAFreshConnection(after: "/switch")
    }

    func testUnknownInterimStatus_is502() throws {
        try assertBadFormat("/interim199")
    }

    func testEarlyHints_areSkippedAndTheFinalAnswerIsJudged() throws {
        let r = try h.request("GET", "/interim103")
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertNil(r.header("Link"), "an interim answer's fields were relayed")
    }

    func testFieldNamesThatAreNotTokens_are502() throws {
        for i in Self.badNames.indices { try assertBadFormat("/badname/\(i)") }
    }

    func testFieldValuesWithCROrNULOrALineWithoutColon_are502() throws {
        try assertBadFormat("/badvalue-cr")
        try assertBadFormat("/badvalue-nul")
        try assertBadFormat("/nocolon")
    }

    func testATenThousandFieldHead_is502() throws {
        try assertBadFormat("/many")
    }

    func testAHeadOver64KiB_is502() throws {
        try assertBadFormat("/bighead")
    }

    func testAHeadWithinTheBounds_isRelayed() throws {
        let r = try h.request("GET", "/fields256")
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(r.header("X-F249"), "v")
    }

    func testFieldsNamedInConnection_areDropped() throws {
        let r = try h.request("GET", "/conn")
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertNil(r.header("X-Secret"))
        XCTAssertEqual(r.header("X-Kept"), "2")
    }

    func testBytesAfterAContentLengthAnswer_closeTheConnection() throws {
        let r = try h.request("GET", "/excess")
        XCTAssertEqual(r.status, 200, r.text)
        try assertNextCallOnAFreshConnection(after: "/excess")
    }

    func testBytesInTheSameReadAfterAChunkedAnswer_areNeverRelayed() throws {
        // libcurl 7.88 drops what follows the last chunk in the same read ("Leftovers after
        // chunking") and keeps the connection: the forged answer must not reach the next call.
        let r = try h.request("GET", "/chunked-excess")
        XCTAssertEqual(r.status, 200, r.text)
        let next = try h.request("GET", "/next")
        XCTAssertEqual(next.status, 200)
        XCTAssertTrue(next.text.hasPrefix("{\"conn\":"), next.text)
        XCTAssertNil(next.header("Set-Cookie"))
    }

    func testBytesArrivingAfterAChunkedAnswer_closeTheConnection() throws {
        let r = try h.request("GET", "/chunked-late")
        XCTAssertEqual(r.status, 200, r.text)
        // The forged bytes come 0.2 s after the answer; Peel's watch on the idle socket then closes it.
        let served = try XCTUnwrap(h.seen("/chunked-late").first).connection
        let deadline = Date().addingTimeInterval(5)
        while !h.upstream.closed.contains(served), Date() < deadline { usleep(20_000) }
        XCTAssertTrue(h.upstream.closed.contains(served), "the connection that sent bytes after its answer was kept")
        try assertNextCallOnAFreshConnection(after: "/chunked-late")
    }
}

/// An upstream that sent a status line is there: a broken answer after it is its fault (-100), and
/// never evidence that it is unreachable.
final class BrokenAnswerTests: XCTestCase {
    static let envelope = "{\"code\":0,\"message\":\"ok\",\"data\":1}"

    func testTruncatedAnswersFiveTimesWithFallThree_areBadFormatAndTheUpstreamStaysOnline() throws {
        let h = try RawHarness(configure: { $0.probe.fall = 3 }) { r in
            switch r.path {
            case "/truncated":
                // Content-Length promises 100 bytes more than arrive, then the upstream closes.
                return .sendThenClose("HTTP/1.1 200 OK\r\nContent-Length: \(Self.envelope.utf8.count + 100)\r\n\r\n" + Self.envelope)
            default:
                return .send(RawUpstream.envelope("\"good\""))
            }
        }
        defer { h.stop() }
        for i in 1...5 {
            let r = try h.request("GET", "/truncated")
            XCTAssertEqual(r.status, 502, "call \(i): \(r.text)")
            XCTAssertEqual(problem(r)["code"] as? Int, -100, "call \(i)")
        }
        let good = try h.request("GET", "/good")
        XCTAssertEqual(good.status, 200, "a healthy upstream with a bug was taken offline: \(good.text)")
        XCTAssertEqual(good.text, "\"good\"")
    }

    func testBrokenFramingAndEncodingAfterTheStatusLine_areBadFormat() throws {
        let cases: [String: String] = [
            "/bad-chunk": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n" + Self.envelope + "\r\n0\r\n\r\n",
            "/cut-chunked": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n64\r\n" + Self.envelope,
            "/bad-gzip": "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 12\r\n\r\nnot gzip at ",
            "/cut-head": "HTTP/1.1 200 OK\r\nContent-Type: appl",
        ]
        let h = try RawHarness(configure: { $0.probe.fall = 1 }) { r in
            if let bytes = cases[r.path] { return .sendThenClose(bytes) }
            return .send(RawUpstream.envelope("\"good\""))
        }
        defer { h.stop() }
        for path in cases.keys.sorted() {
            let r = try h.request("GET", path)
            XCTAssertEqual(r.status, 502, "\(path): \(r.text)")
            XCTAssertEqual(problem(r)["kind"] as? String, "bad-upstream-format", path)
        }
        XCTAssertEqual(try h.request("GET", "/good").status, 200, "counted towards fall 1")
    }

    func testAnUpstreamThatClosesBeforeAnyAnswer_neverCountsTowardsFall() throws {
        // Issue 17: three calls to a path whose worker dies took Peel offline for everyone. The
        // upstream took the connection, so it is there: its calls get -101, the state stays.
        let h = try RawHarness(configure: { $0.probe.fall = 2 }) { r in
            r.path == "/probe" || r.path == "/good" ? .send(RawUpstream.envelope("1")) : .close
        }
        defer { h.stop() }
        let deadline = Date().addingTimeInterval(3)
        while h.gateway.reachability.lastProbeReport == nil && Date() < deadline { usleep(10_000) }
        for _ in 1...10 { XCTAssertEqual(problem(try h.request("GET", "/x"))["code"] as? Int, -101) }
        XCTAssertFalse(h.gateway.reachability.isDown, "closes without an answer took Peel offline")
        let good = try h.request("GET", "/good")
        XCTAssertEqual(good.status, 200, good.text)
    }
}

import Foundation
import PeelGateway
import PeelIO
import XCTest

/// Issue 19: Peel changes the envelope and nothing else. Declared lengths are kept, codings follow
/// the client, a 204 has no Content-Type and Vary names each field once.
final class EnvelopeOnlyTests: XCTestCase {
    private let body = String(repeating: "b", count: 200)

    func testAStreamedAnswerWithADeclaredLength_keepsItAndIsNotChunked() throws {
        let body = self.body
        let h = try RawHarness(configure: { $0.calls.streamThreshold = 16 }) { _ in
            .send("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 200\r\n\r\n" + body)
        }
        defer { h.stop() }
        let r = try h.request("GET", "/file")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.header("Content-Length"), "200")
        XCTAssertNil(r.header("Transfer-Encoding"))
        XCTAssertEqual(r.text, body)
        let head = try h.request("HEAD", "/file")
        XCTAssertEqual(head.header("Content-Length"), "200", "HEAD answers what GET would")
        XCTAssertNil(head.header("Transfer-Encoding"))
    }

    func testAnAnswerOfUnknownLength_isStillChunked() throws {
        let h = try RawHarness(configure: { $0.calls.streamThreshold = 16 }) { _ in
            .send("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        }
        defer { h.stop() }
        let r = try h.request("GET", "/file")
        XCTAssertEqual(r.header("Transfer-Encoding"), "chunked")
        XCTAssertNil(r.header("Content-Length"))
        XCTAssertEqual(r.text, "hello")
    }

    func testADeclaredLengthTheUpstreamCutsShort_leavesTheClientABrokenConnection() throws {
        let h = try RawHarness(configure: { $0.calls.streamThreshold = 16 }) { _ in
            .sendThenClose("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 400\r\n\r\n"
                           + String(repeating: "c", count: 100))
        }
        defer { h.stop() }
        XCTAssertThrowsError(try h.request("GET", "/file"), "a body cut short must not look whole") { error in
            XCTAssertEqual(error as? BlockingClient.Failure, .closed)
        }
    }

    func testTheUpstreamIsAskedForTheClientsCodingsOnly() throws {
        let h = try RawHarness { _ in .send(RawUpstream.envelope("1")) }
        defer { h.stop() }
        let cases: [(String?, String)] = [
            (nil, "identity"), ("identity", "identity"), ("zstd", "identity"), ("gzip;q=0, br;q=0", "identity"),
            ("gzip, zstd", "gzip"), ("br;q=0.5, gzip", "gzip, br"), ("*", "gzip, deflate, br"), ("x-gzip", "gzip"),
        ]
        for (i, (client, upstream)) in cases.enumerated() {
            let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
            try c.send("GET /ae\(i) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + (client.map { "Accept-Encoding: \($0)\r\n" } ?? "") + "\r\n")
            XCTAssertEqual(try c.readResponse().status, 200)
            let sent = h.seen("/ae\(i)").first?.headers.filter { $0.0.lowercased() == "accept-encoding" }.map(\.1)
            XCTAssertEqual(sent, [upstream], "client Accept-Encoding \(client ?? "none")")
        }
    }

    private func gzipHarness(_ plain: [UInt8], type: String, threshold: Int = 1 << 20) throws -> RawHarness {
        let gz = plain.withUnsafeBytes { ContentEncoder(gzipLevel: 6, brotliQuality: 3).encode($0, as: .gzip) }!
        // A misbehaving upstream sends gzip to everyone: Peel must decode it for clients that cannot take it.
        return try RawHarness(configure: { $0.calls.streamThreshold = threshold }) { _ in
            .sendBytes(Array("HTTP/1.1 200 OK\r\nContent-Type: \(type)\r\nContent-Encoding: gzip\r\nContent-Length: \(gz.count)\r\n\r\n".utf8) + gz)
        }
    }

    func testAPassthroughAnswerInACodingTheClientTakes_passesAsItCame() throws {
        let plain = Array(String(repeating: "%PDF row\n", count: 4000).utf8)
        for threshold in [1 << 20, 16] {  // buffered, then streamed
            let h = try gzipHarness(plain, type: "application/pdf", threshold: threshold)
            defer { h.stop() }
            let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
            try c.send("GET /r.pdf HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n")
            let r = try c.readResponse()
            XCTAssertEqual(r.header("Content-Encoding"), "gzip", "threshold \(threshold)")
            XCTAssertEqual(r.header("Content-Length"), String(r.body.count), "threshold \(threshold)")
            XCTAssertNil(r.header("Transfer-Encoding"))
            XCTAssertLessThan(r.body.count, plain.count / 5, "the gzip bytes, not decoded")
            XCTAssertEqual(Array(r.body.prefix(2)), [0x1f, 0x8b])

            // A client that takes no gzip gets it decoded (its length unknown once decoded, so chunked when streamed).
            let d = try h.request("GET", "/r.pdf")
            XCTAssertNil(d.header("Content-Encoding"))
            XCTAssertEqual(d.body, plain, "threshold \(threshold)")
        }
    }

    func testAJudgedAnswerInGzip_isStillDecodedAndJudged() throws {
        let env = Array("{\"code\":0,\"message\":\"ok\",\"data\":{\"n\":1}}".utf8)
        let h = try gzipHarness(env, type: "application/json")
        defer { h.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try c.send("GET /u HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n")
        let r = try c.readResponse()
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.text, "{\"n\":1}")
    }

    func testA204FromAnEnvelopeWithoutData_hasNoContentType() throws {
        let h = try RawHarness { _ in .send(RawUpstream.answer("{\"code\":0,\"message\":\"ok\"}")) }
        defer { h.stop() }
        let r = try h.request("GET", "/nothing")
        XCTAssertEqual(r.status, 204)
        XCTAssertNil(r.header("Content-Type"))
    }

    func testVary_namesEachFieldOnce() throws {
        let big = "[" + Array(repeating: "{\"id\":1,\"name\":\"item\"}", count: 200).joined(separator: ",") + "]"
        let h = try RawHarness(configure: { $0.cors.origins = ["https://app.example"] }) { _ in
            .send(RawUpstream.envelope(big, fields: ["Vary: accept-encoding, Origin", "Vary: Cookie"]))
        }
        defer { h.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try c.send("GET /big HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n")
        let r = try c.readResponse()
        XCTAssertEqual(r.status, 200)
        let vary = r.headers.filter { $0.0.lowercased() == "vary" }.map(\.1)
        XCTAssertEqual(vary, ["accept-encoding, Origin, Cookie"])
    }

    func testPreserveHost_forwardsTheClientsHost() throws {
        for preserve in [false, true] {
            let h = try RawHarness(configure: { $0.calls.preserveHost = preserve }) { _ in .send(RawUpstream.envelope("1")) }
            defer { h.stop() }
            let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
            try c.send("GET /h HTTP/1.1\r\nHost: app.example.com\r\nConnection: close\r\n\r\n")
            XCTAssertEqual(try c.readResponse().status, 200)
            let hosts = h.seen("/h").first?.headers.filter { $0.0.lowercased() == "host" }.map(\.1)
            XCTAssertEqual(hosts, [preserve ? "app.example.com" : "127.0.0.1:\(h.upstream.port)"], "preserve-host \(preserve)")
        }
    }

    func testRefusals_carryPeelsReason_neverTheBody() throws {
        let h = try RawHarness { r in
            switch r.path {
            case "/html": return .send(RawUpstream.answer("<html>oops</html>", fields: []))
            case "/csrf": return .send(RawUpstream.answer("<html>CSRF verification failed. secret=42</html>", status: "403 Forbidden"))
            default: return .sendThenClose("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{\"code\":0")
            }
        }
        defer { h.stop() }
        let html = problem(try h.request("GET", "/html"))
        XCTAssertEqual(html["kind"] as? String, "bad-upstream-format")
        XCTAssertEqual(html["reason"] as? String, "not JSON at byte 0 (0x3c '<')")
        let csrf = try h.request("GET", "/csrf")
        XCTAssertEqual(csrf.status, 403)
        XCTAssertEqual(problem(csrf)["reason"] as? String, "upstream 403 application/json")
        XCTAssertFalse(csrf.text.contains("secret"), "the upstream's body reached the client: \(csrf.text)")
        let cut = problem(try h.request("GET", "/cut"))
        XCTAssertEqual(cut["kind"] as? String, "bad-upstream-format")
        XCTAssertTrue((cut["reason"] as? String)?.contains("bytes remaining") == true, "\(cut)")
    }

    func testAPausedDownloadOnAReusedConnection_isNeverCutByTheIdleGuard() throws {
        // 8 MiB at once, then 1 MiB more while the client is not reading: the transfer pauses, curl
        // stops watching the socket, and the rest arrives while it is parked. The idle-connection
        // guard must see a running transfer there, on a fresh and on a reused upstream connection.
        let first = String(repeating: "a", count: 8 << 20), second = String(repeating: "b", count: 1 << 20)
        let h = try RawHarness(configure: { $0.calls.streamThreshold = 16 }) { _ in
            .sendInTwoParts("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: \(9 << 20)\r\n\r\n" + first,
                            after: 0.3, second)
        }
        defer { h.stop() }
        for round in 1...2 {
            let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 20)
            try c.send("GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            usleep(900_000)  // not reading: Peel's output fills and the upstream transfer pauses
            let r = try c.readResponse()
            XCTAssertEqual(r.body.count, 9 << 20, "round \(round) was cut")
            XCTAssertEqual(r.body.last, UInt8(ascii: "b"))
        }
        let connections = h.seen("/big").map(\.connection)
        XCTAssertEqual(connections.count, 2)
        XCTAssertEqual(Set(connections).count, 1, "the second download did not reuse the connection: \(connections)")
    }

    func testResetContent_isRelayedWithoutItsBody() throws {
        for answer in ["HTTP/1.1 205 Reset Content\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello",
                       "HTTP/1.1 205 Reset Content\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"] {
            let h = try RawHarness { _ in .send(answer) }
            defer { h.stop() }
            let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
            try c.send("POST /form HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\nGET /again HTTP/1.1\r\nHost: x\r\n\r\n")
            let r = try c.readResponse()
            XCTAssertEqual(r.status, 205)
            XCTAssertEqual(r.header("Content-Length"), "0", "a 205 says it has no content (RFC 9110 §15.3.6)")
            XCTAssertNil(r.header("Transfer-Encoding"))
            XCTAssertEqual(r.body, [])
            // The connection's framing held: the next answer on it is read as its own.
            XCTAssertEqual(try c.readResponse().status, 205)
        }
    }
}

import Foundation
import PeelGateway
import PeelIO
import XCTest

/// `/_peel/reachability` on the client listener: the document, the event stream, its bounds (issue 13).
final class ReachabilityFeedTests: XCTestCase {
    private func openStream(_ h: Harness, timeout: Double = 5) throws -> BlockingClient {
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: timeout)
        try c.send("GET /_peel/reachability HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
        return c
    }

    func testDocument_namesStateSinceAndReason_andIsNeverForwarded() throws {
        let h = try Harness()
        defer { h.stop() }
        XCTAssertTrue(h.eventually { h.gateway.reachability.state == .reachable })
        h.upstream.resetCount()
        let r = try h.request("GET", "/_peel/reachability?x=1")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.header("Content-Type"), "application/json")
        XCTAssertNotNil(r.header("X-Request-Id"))
        let doc = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any])
        XCTAssertEqual(doc["state"] as? String, "reachable")
        XCTAssertEqual(doc["reason"] as? String, "probe passed")
        XCTAssertNotNil(doc["since"] as? String)
        XCTAssertEqual(h.upstream.requestCount, 0, "the reserved path reached the upstream")
        XCTAssertEqual(try h.request("POST", "/_peel/reachability").status, 405)
    }

    func testDocument_answersWhileOffline() throws {
        let h = try Harness { c in c.probeInterval = 3600; c.fall = 1 }
        defer { h.stop() }
        XCTAssertTrue(h.eventually { h.gateway.reachability.state == .reachable })
        h.gateway.reachability.recordPassiveFailure("connect refused")
        let r = try h.request("GET", "/_peel/reachability")
        XCTAssertEqual(r.status, 200, "the offline short-circuit must not hide Peel's own path")
        XCTAssertTrue(r.text.contains(#""state":"unreachable""#), r.text)
        XCTAssertTrue(r.text.contains(#""reason":"connect refused""#), r.text)
    }

    func testPathOff_isForwarded() throws {
        let h = try Harness { c in c.reachabilityPath = nil }
        defer { h.stop() }
        h.upstream.resetCount()
        let r = try h.request("GET", "/_peel/reachability")
        XCTAssertEqual(problem(r)["kind"] as? String, "upstream-error")
        XCTAssertEqual(h.upstream.requestCount, 1)
    }

    func testEventStream_sendsTheStateAtOnce_thenEachTransition() throws {
        let h = try Harness { c in c.probeInterval = 3600; c.fall = 2; c.rise = 1 }
        defer { h.stop() }
        XCTAssertTrue(h.eventually { h.gateway.reachability.state == .reachable })
        let c = try openStream(h)
        let first = try c.readUntil("\r\n\r\n")
        XCTAssertTrue(first.hasPrefix("HTTP/1.1 200"), first)
        XCTAssertTrue(first.lowercased().contains("content-type: text/event-stream"), first)
        XCTAssertTrue(first.lowercased().contains("transfer-encoding: chunked"), first)
        let current = try c.readUntil("\n\n")
        XCTAssertTrue(current.contains("event: reachability\ndata: {\"state\":\"reachable\""), current)

        // Transitions happen on whichever thread observes them; here the test's own.
        h.gateway.reachability.recordPassiveFailure("connect refused")
        h.gateway.reachability.recordPassiveFailure("connect refused")
        let detected = Date()
        let down = try c.readUntil("\n\n")
        XCTAssertLessThan(Date().timeIntervalSince(detected), 1)
        XCTAssertTrue(down.contains(#"data: {"state":"unreachable""#), down)
        XCTAssertTrue(down.contains(#""reason":"connect refused"}"#), down)
        h.gateway.reachability.recordProbe(ProbeReport(ok: true, status: 200, error: nil, latency: 0.001, at: 0))
        let up = try c.readUntil("\n\n")
        XCTAssertTrue(up.contains(#"data: {"state":"reachable""#), up)
        XCTAssertEqual(try h.admin("/status").text.contains("\"streams\":1"), true)
    }

    func testEventStream_heartbeat() throws {
        let h = try Harness { c in c.streamHeartbeat = 0.1 }
        defer { h.stop() }
        let c = try openStream(h)
        _ = try c.readUntil("event: reachability")
        XCTAssertTrue(try c.readUntil(": heartbeat\n\n").contains(": heartbeat"))
        XCTAssertTrue(try c.readUntil(": heartbeat\n\n").contains(": heartbeat"))
    }

    func testMaxStreams_overTheBoundIs503_andAPlaceFreesWhenAClientLeaves() throws {
        let h = try Harness { c in c.maxStreams = 1 }
        defer { h.stop() }
        let c = try openStream(h)
        _ = try c.readUntil("event: reachability")
        let over = try h.request("GET", "/_peel/reachability", headers: [("Accept", "text/event-stream")])
        XCTAssertEqual(over.status, 503)
        XCTAssertEqual(problem(over)["kind"] as? String, "upstream-unreachable")
        XCTAssertEqual(try h.request("GET", "/_peel/reachability").status, 200, "the document needs no place")
        // A reset is seen at once; a FIN only at the next write (a half-closed client still reads).
        c.close(reset: true)
        XCTAssertTrue(h.eventually(2) { (try? h.admin("/status").text.contains("\"streams\":0")) == true })
        let again = try openStream(h)
        XCTAssertTrue(try again.readUntil("event: reachability").hasPrefix("HTTP/1.1 200"))
    }

    func testDrain_endsStreamsCleanly_andDoesNotWaitForThem() throws {
        let h = try Harness()
        defer { h.stop() }
        let c = try openStream(h)
        _ = try c.readUntil("event: reachability")
        let started = Date()
        let clean = Locked<Bool?>(nil)
        let gateway = h.gateway
        Thread.detachNewThread { clean.withLock { $0 = gateway.shutdown() } }
        _ = try c.readUntil("0\r\n\r\n")  // the last chunk: the stream ended, not cut
        XCTAssertTrue(h.eventually(3) { clean.withLock { $0 } != nil })
        XCTAssertEqual(clean.withLock { $0 }, true)
        XCTAssertLessThan(Date().timeIntervalSince(started), 2, "shutdown waited for the stream")
    }
}

import Foundation
@testable import PeelGateway
import PeelIO
import XCTest

/// Answers relayed as they arrive: an upstream that goes silent is cut after
/// `upstream_idle_timeout`, a client that leaves mid-stream leaves nothing behind, and a streamed
/// HEAD answer does not swallow the request pipelined after it.
final class StreamedAnswerTests: XCTestCase {
    private static let head = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n"

    func testStallingUpstream_streamIsCutAfterTheIdleTimeout_withoutItsEnd() throws {
        let h = try RawHarness(configure: { $0.calls.idleTimeout = 0.5; $0.calls.timeout = 10 }) { _ in
            .send(Self.head + "5\r\nhello\r\n")   // then nothing, the connection kept open
        }
        defer { h.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try c.send("GET /stall HTTP/1.1\r\nHost: x\r\n\r\n")
        let got = try c.readUntil("hello\r\n")
        XCTAssertTrue(got.hasPrefix("HTTP/1.1 200"), got)
        let flowing = Date()
        XCTAssertTrue(c.peerClosed(within: 4), "the stream was not cut")
        let after = Date().timeIntervalSince(flowing)
        XCTAssertGreaterThan(after, 0.4, "cut before the idle timeout")
        XCTAssertLessThan(after, 2, "cut long after the idle timeout")
        // peerClosed read nothing more: the last chunk (0\r\n\r\n) never came, so the client can tell.
    }

    func testAnEventStreamsHead_reachesTheClientAsSoonAsTheUpstreamsDoes_beforeItsFirstEvent() throws {
        // The head is decided once, when it is whole: a stream's head is written then, not with its
        // first body bytes, so an app sees its event stream open while the upstream has nothing to say.
        let sse = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n"
        let h = try RawHarness(configure: { $0.calls.idleTimeout = 10 }) { _ in
            .sendInTwoParts(sse, after: 1.5, "data: first\n\n")
        }
        defer { h.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        let sent = Date()
        try c.send("GET /events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
        let head = try c.readUntil("\r\n\r\n")
        let waited = Date().timeIntervalSince(sent)
        XCTAssertTrue(head.hasPrefix("HTTP/1.1 200"), head)
        XCTAssertTrue(head.lowercased().contains("content-type: text/event-stream"), head)
        XCTAssertTrue(head.lowercased().contains("transfer-encoding: chunked"), head)
        XCTAssertLessThan(waited, 1.2, "the head waited for the first event")
        let event = try c.readUntil("data: first\n\n")
        XCTAssertTrue(event.contains("data: first"), event)
    }

    func testAHeadThenAStall_isTimeoutsProblem_notA200CutShort() throws {
        // Committing to the client waits for the first body byte: until then the call is still
        // under `timeout`, and its failure is a problem document.
        let h = try RawHarness(configure: { $0.calls.timeout = 1; $0.calls.idleTimeout = 4 }) { _ in .send(Self.head) }
        defer { h.stop() }
        let started = Date()
        let r = try h.request("GET", "/stall-after-head")
        XCTAssertEqual(r.status, 504, r.text)
        XCTAssertEqual(r.header("content-type"), "application/problem+json")
        XCTAssertLessThan(Date().timeIntervalSince(started), 3.5, "waited for the idle timeout instead of `timeout`")
    }

    func testAHeadThenAClose_isA502Problem() throws {
        let h = try RawHarness { _ in .sendThenClose(Self.head) }
        defer { h.stop() }
        let r = try h.request("GET", "/close-after-head")
        XCTAssertEqual(r.status, 502, r.text)
        XCTAssertEqual(r.header("content-type"), "application/problem+json")
    }

    func testAnEmptyChunkedPassthrough_isAnsweredWithItsLength() throws {
        let h = try RawHarness { _ in .send(Self.head + "0\r\n\r\n") }
        defer { h.stop() }
        let r = try h.request("GET", "/empty")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.header("content-length"), "0")
        XCTAssertNil(r.header("transfer-encoding"))
    }

    func testAHeadRequestOnAnEventStream_isAnsweredAtOnce_andItsUpstreamConnectionEnds() throws {
        // HEAD goes upstream as GET; its answer is whole with the head, so the transfer ends there
        // instead of holding a connection (and a place in max_inflight) until a body byte comes.
        let sse = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
        let h = try RawHarness(configure: { $0.calls.idleTimeout = 30 }) { _ in .send(sse) }
        defer { h.stop() }
        let r = try h.request("HEAD", "/events")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.header("content-type"), "text/event-stream")
        let deadline = Date().addingTimeInterval(3)
        while h.upstream.closed.isEmpty && Date() < deadline { usleep(20_000) }
        XCTAssertFalse(h.upstream.closed.isEmpty, "the upstream connection of an answered HEAD stayed open")
    }

    func testUpstreamSendingWithinTheBound_isNotCut() throws {
        // A pause well inside the bound: a loop thread held up on a busy machine stays inside it too.
        let h = try RawHarness(configure: { $0.calls.idleTimeout = 1.5 }) { _ in
            .sendInTwoParts(Self.head + "5\r\nhello\r\n", after: 0.3, "5\r\nworld\r\n0\r\n\r\n")
        }
        defer { h.stop() }
        let r = try h.request("GET", "/slow-but-alive")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.text, "helloworld")
    }

    func testStreamedHeadThenAPipelinedGetInOneWrite_areBothAnswered() throws {
        // application/octet-stream passes unjudged; 200 bytes over a 16-byte threshold is streamed.
        let body = String(repeating: "b", count: 200)
        let h = try RawHarness(configure: { $0.calls.streamThreshold = 16 }) { r in
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
            return .send(r.method == "HEAD" ? head : head + body)
        }
        defer { h.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try c.send("HEAD /file HTTP/1.1\r\nHost: x\r\n\r\nGET /file HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let head = try c.readResponse(head: true)
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.header("Content-Type"), "application/octet-stream")
        let get = try c.readResponse()
        XCTAssertEqual(get.status, 200, "the pipelined GET after a streamed HEAD: \(get.text)")
        XCTAssertEqual(get.text, body)
    }

    /// Calls in the forwarders' waiting tables (private: read by reflection, on each worker's loop thread).
    private func waitingCalls(_ gateway: Gateway) -> Int {
        let workers = Mirror(reflecting: gateway).children.first { $0.label == "workers" }?.value as? [Worker] ?? []
        XCTAssertFalse(workers.isEmpty, "Gateway.workers not found by reflection")
        var total = 0
        for w in workers {
            let count = Locked(-1)
            let done = DispatchSemaphore(value: 0)
            w.loop.execute {
                let forwarder = Mirror(reflecting: w).children.first { $0.label == "forwarder" }?.value
                if let forwarder = forwarder as? Forwarder,
                   let waiting = Mirror(reflecting: forwarder).children.first(where: { $0.label == "waiting" })?.value {
                    count.withLock { $0 = Mirror(reflecting: waiting).children.count }
                }
                done.signal()
            }
            done.wait()
            let n = count.withLock { $0 }
            XCTAssertGreaterThanOrEqual(n, 0, "Forwarder.waiting not found by reflection")
            total += max(0, n)
        }
        return total
    }

    func testAClientLeavingMidStream_leavesNoCallWaiting_andLaterRequestsWork() throws {
        // 1 MB of octet-stream (over the 16-byte threshold: streamed): 64 KiB at once, the rest 1 s later.
        let total = 1 << 20
        let first = 64 * 1024
        let h = try RawHarness(configure: { $0.calls.streamThreshold = 16 }) { r in
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: \(total)\r\n\r\n"
            if r.path == "/small" { return .send(RawUpstream.envelope("1")) }
            return .sendInTwoParts(head + String(repeating: "a", count: first), after: 1.0,
                                   String(repeating: "a", count: total - first))
        }
        defer { h.stop() }
        for _ in 0..<3 {
            let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
            try c.send("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
            let head = try c.readUntil("\r\n\r\n")
            XCTAssertTrue(head.hasPrefix("HTTP/1.1 200"), head)
            c.close(reset: true)
        }
        let deadline = Date().addingTimeInterval(5)
        while h.gateway.inflight > 0 && Date() < deadline { usleep(20_000) }
        XCTAssertEqual(h.gateway.inflight, 0, "departed streams still in flight")
        usleep(200_000)
        XCTAssertEqual(waitingCalls(h.gateway), 0, "departed streams left their calls in the forwarder's waiting table")
        let r = try h.request("GET", "/small")
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(waitingCalls(h.gateway), 0)
    }
}

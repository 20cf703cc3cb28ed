import Foundation
@testable import PeelGateway
import PeelIO
import XCTest

/// `/_peel/reachability` on the client listener: the document, the event stream, its bounds (issue 13).
final class ReachabilityFeedTests: XCTestCase {
    private func openStream(_ h: Harness, timeout: Double = 5, from: String? = nil) throws -> BlockingClient {
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: timeout, from: from)
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
        let h = try Harness { c in c.probe.interval = 3600; c.probe.fall = 1 }
        defer { h.stop() }
        XCTAssertTrue(h.eventually { h.gateway.reachability.state == .reachable })
        h.gateway.reachability.recordPassiveFailure("connect refused")
        let r = try h.request("GET", "/_peel/reachability")
        XCTAssertEqual(r.status, 200, "the offline short-circuit must not hide Peel's own path")
        XCTAssertTrue(r.text.contains(#""state":"unreachable""#), r.text)
        XCTAssertTrue(r.text.contains(#""reason":"connect refused""#), r.text)
    }

    func testPathOff_isForwarded() throws {
        let h = try Harness { c in c.reachability.path = nil }
        defer { h.stop() }
        h.upstream.resetCount()
        let r = try h.request("GET", "/_peel/reachability")
        XCTAssertEqual(problem(r)["kind"] as? String, "upstream-error")
        XCTAssertEqual(h.upstream.requestCount, 1)
    }

    func testEventStream_sendsTheStateAtOnce_thenEachTransition() throws {
        let h = try Harness { c in c.probe.interval = 3600; c.probe.fall = 2; c.probe.rise = 1 }
        defer { h.stop() }
        XCTAssertTrue(h.eventually { h.gateway.reachability.state == .reachable })
        let c = try openStream(h)
        let first = try c.readUntil("\r\n\r\n")
        XCTAssertTrue(first.hasPrefix("HTTP/1.1 200"), first)
        XCTAssertTrue(first.lowercased().contains("content-type: text/event-stream"), first)
        XCTAssertTrue(first.lowercased().contains("transfer-encoding: chunked"), first)
        let current = try c.readUntil("\n\n")
        XCTAssertTrue(current.contains("event: reachability\ndata: " + #"{"upstream":"default","state":"reachable""#), current)

        // Transitions happen on whichever thread observes them; here the test's own.
        h.gateway.reachability.recordPassiveFailure("connect refused")
        h.gateway.reachability.recordPassiveFailure("connect refused")
        let detected = Date()
        let down = try c.readUntil("\n\n")
        XCTAssertLessThan(Date().timeIntervalSince(detected), 1)
        XCTAssertTrue(down.contains(#"data: {"upstream":"default","state":"unreachable""#), down)
        XCTAssertTrue(down.contains(#""reason":"connect refused"}"#), down)
        h.gateway.reachability.recordProbe(ProbeReport(ok: true, status: 200, error: nil, latency: 0.001, at: 0))
        let up = try c.readUntil("\n\n")
        XCTAssertTrue(up.contains(#"data: {"upstream":"default","state":"reachable""#), up)
        XCTAssertEqual(try h.admin("/status").text.contains("\"streams\":1"), true)
    }

    func testEventStream_heartbeat() throws {
        let h = try Harness { c in c.reachability.heartbeat = 0.1 }
        defer { h.stop() }
        let c = try openStream(h)
        _ = try c.readUntil("event: reachability")
        XCTAssertTrue(try c.readUntil(": heartbeat\n\n").contains(": heartbeat"))
        XCTAssertTrue(try c.readUntil(": heartbeat\n\n").contains(": heartbeat"))
    }

    func testMaxStreams_overTheBoundIs503_andAPlaceFreesWhenAClientLeaves() throws {
        let h = try Harness { c in c.reachability.maxStreams = 1 }
        defer { h.stop() }
        let c = try openStream(h)
        _ = try c.readUntil("event: reachability")
        let over = try h.request("GET", "/_peel/reachability", headers: [("Accept", "text/event-stream")])
        XCTAssertEqual(over.status, 503)
        // Issue 17: Peel's own bound, named as such (it said upstream-unreachable).
        XCTAssertEqual(problem(over)["kind"] as? String, "server-busy")
        XCTAssertNotNil(over.header("Retry-After"))
        XCTAssertEqual(try h.request("GET", "/_peel/reachability").status, 200, "the document needs no place")
        c.close(reset: true)
        XCTAssertTrue(h.eventually(2) { (try? h.admin("/status").text.contains("\"streams\":0")) == true })
        let again = try openStream(h)
        XCTAssertTrue(try again.readUntil("event: reachability").hasPrefix("HTTP/1.1 200"))
    }

    func testStreamPlace_isFreedAtOnceWhenItsClientCloses_soReconnectsAreNotRefused() throws {
        // A client's FIN ends its stream: its place was held until the second heartbeat after it
        // (~28 s), so an app that reconnected 8 times within half a minute got 429.
        let h = try Harness { c in c.reachability.maxStreamsPerClient = 8 }
        defer { h.stop() }
        for i in 0..<10 {
            let c = try openStream(h)
            let opened = try c.readUntil("event: reachability")
            XCTAssertTrue(opened.hasPrefix("HTTP/1.1 200"), "reconnect \(i): \(opened)")
            c.close()
            XCTAssertTrue(h.eventually(1) { (try? h.admin("/status").text.contains("\"streams\":0")) == true },
                          "reconnect \(i): the place was still taken a second after the client closed")
        }
    }

    func testStreamPlace_isFreedAtOnce_evenWhenTheClientFilledItsReadAhead() throws {
        // 100 KiB sent behind the request fills what Peel reads ahead (64 KiB); reading stopped
        // there, so the client's close went unseen until a write failed.
        let h = try Harness { c in c.reachability.maxStreams = 1 }
        defer { h.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try c.send("GET /_peel/reachability HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
        XCTAssertTrue(try c.readUntil("event: reachability").hasPrefix("HTTP/1.1 200"))
        try c.send(String(repeating: "x", count: 100 * 1024))
        c.close()
        XCTAssertTrue(h.eventually(1) { (try? h.admin("/status").text.contains("\"streams\":0")) == true },
                      "the place was still taken a second after the client closed")
    }

    func testDocumentAndStream_withUpstreamAlone_carryUpstreamsWithTheGroupDefault() throws {
        // One shape for apps: the groups are under `upstreams` whether or not the config has routes.
        let h = try Harness()
        defer { h.stop() }
        XCTAssertTrue(h.eventually { h.gateway.reachability.state == .reachable })
        let r = try h.request("GET", "/_peel/reachability")
        let doc = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any])
        XCTAssertEqual(doc["state"] as? String, "reachable")
        let upstreams = try XCTUnwrap(doc["upstreams"] as? [String: [String: Any]], r.text)
        XCTAssertEqual(Array(upstreams.keys), ["default"])
        XCTAssertEqual(upstreams["default"]?["state"] as? String, "reachable")
        XCTAssertEqual(upstreams["default"]?["reason"] as? String, "probe passed")
        let c = try openStream(h)
        _ = try c.readUntil("\r\n\r\n")
        let event = try c.readUntil("\n\n")
        XCTAssertTrue(event.contains(#"data: {"upstream":"default","state":"reachable""#), event)
    }

    func testStreamsPerClient_oneAddressCannotHoldEverySlot() throws {
        // Issue 17: 1000 streams that never read, from one address, locked every app out. Here 1000
        // from 127.0.0.1 against a per-client bound of 4: the rest get 429, and 127.0.0.2 still gets in.
        let h = try Harness { c in
            c.reachability.maxStreams = 10
            c.reachability.maxStreamsPerClient = 4
        }
        defer { h.stop() }
        var held: [BlockingClient] = []
        var refused = 0
        for _ in 0..<1000 {
            let c = try openStream(h)
            let head = try c.readUntil("\r\n\r\n")
            if head.hasPrefix("HTTP/1.1 200") { held.append(c) } else {
                XCTAssertTrue(head.hasPrefix("HTTP/1.1 429"), head)
                refused += 1
            }
        }
        XCTAssertEqual(held.count, 4)
        XCTAssertEqual(refused, 996)
        let over = try h.request("GET", "/_peel/reachability", headers: [("Accept", "text/event-stream")])
        XCTAssertEqual(over.status, 429)
        XCTAssertEqual(problem(over)["kind"] as? String, "too-many-streams")
        XCTAssertEqual(problem(over)["code"] as? Int, -109)
        let other = try openStream(h, from: "127.0.0.2")
        XCTAssertTrue(try other.readUntil("event: reachability").hasPrefix("HTTP/1.1 200"), "another address was locked out")
        let metrics = try h.admin("/metrics").text
        XCTAssertTrue(metrics.contains("peel_reachability_streams 5"), metrics)
        XCTAssertTrue(metrics.contains("peel_reachability_stream_clients 2"), metrics)
        // The bounds follow a reload (issue 17: max_streams kept its start-up value).
        var next = h.gateway.config
        next.reachability.maxStreamsPerClient = 5
        XCTAssertEqual(h.gateway.reload(next), [])
        let fifth = try openStream(h)
        XCTAssertTrue(try fifth.readUntil("event: reachability").hasPrefix("HTTP/1.1 200"))
        withExtendedLifetime(held) {}
    }

    func testStreamClient_isTheIPv4Address_orTheIPv6Slash64() {
        XCTAssertEqual(streamClient("127.0.0.1"), "127.0.0.1")
        XCTAssertEqual(streamClient("2001:db8:1:2:aaaa::1"), streamClient("2001:db8:1:2:bbbb::9"), "one /64, one share")
        XCTAssertNotEqual(streamClient("2001:db8:1:2::1"), streamClient("2001:db8:1:3::1"))
        XCTAssertEqual(streamClient("::ffff:192.0.2.7"), "192.0.2.7")
        XCTAssertEqual(streamClient("not an address"), "not an address")
    }

    func testPublicDocument_givesACoarseReason_neverCurlsTextOrAnAddress() throws {
        // Issue 17: /_peel/reachability is public; the address, port and curl's words stay on /status.
        let h = try Harness { c in
            c.upstream = try! UpstreamURL.parse("http://127.0.0.1:1").get()
            c.probe.interval = 0.1
            c.probe.fall = 1
        }
        defer { h.stop() }
        XCTAssertTrue(h.eventually(3) { h.gateway.reachability.isDown })
        let doc = try h.request("GET", "/_peel/reachability").text
        XCTAssertTrue(doc.contains(#""reason":"connect refused""#), doc)
        XCTAssertFalse(doc.contains("127.0.0.1"), doc)
        let c = try openStream(h)
        let event = try c.readUntil("\n\n")
        XCTAssertTrue(event.contains(#""reason":"connect refused""#), event)
        XCTAssertFalse(event.contains("127.0.0.1"), event)
        let status = try h.admin("/status").text
        XCTAssertTrue(status.contains(#""public_reason":"connect refused""#), status)
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

import Foundation
import PeelGateway
import PeelIO
import XCTest

/// `max_buffered`: one budget for every body the process holds.
final class MemoryBudgetTests: XCTestCase {
    func testReserve_refusesPastTheLimitAndReleaseGivesBack() {
        let b = MemoryBudget(limit: 100)
        XCTAssertTrue(b.reserve(60))
        XCTAssertFalse(b.reserve(41))
        XCTAssertEqual(b.bytes, 60, "a refused reservation takes nothing")
        XCTAssertTrue(b.reserve(40))
        b.release(60)
        XCTAssertEqual(b.bytes, 40)
        XCTAssertFalse(b.reserve(Int.max), "no overflow")
    }

    func testDeclaredBodyOverTheBudget_gets503WithRetryAfterBeforeItIsRead() throws {
        let h = try Harness(workers: 2) { c in c.maxBody = 1000; c.maxBuffered = 1900 }
        defer { h.stop() }
        // Uploads go to /api/user, whose small answer fits what is left of the budget.
        // The first upload declares 1000 bytes and sends 10: they stay reserved while it trickles.
        let slow = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try slow.send("POST /api/user HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n0123456789")
        XCTAssertTrue(h.eventually { (try? h.admin("/metrics").text)?.contains("peel_buffered_bytes 1000\n") == true },
                      "the declared body is not counted")

        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try c.send("POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n")
        let r = try c.readResponse()
        XCTAssertEqual(r.status, 503, "not refused before its body (no 100 Continue first): \(r.text)")
        let p = problem(r)
        XCTAssertEqual(p["kind"] as? String, "server-busy")
        XCTAssertEqual(p["code"] as? Int, -108)
        XCTAssertEqual(r.header("Retry-After"), "1")
        XCTAssertEqual(h.upstream.requestCount, 0)

        // A small one still fits, and the slow upload is answered once its body is whole.
        XCTAssertEqual(try h.request("POST", "/api/user", body: Array(repeating: 0x61, count: 400)).status, 200)
        try slow.send(String(repeating: "x", count: 990))
        XCTAssertEqual(try slow.readResponse().status, 200)
        XCTAssertTrue(h.eventually { (try? h.admin("/metrics").text)?.contains("peel_buffered_bytes 0\n") == true },
                      "the reservation was not given back")
        XCTAssertEqual(try h.request("POST", "/api/user", body: Array(repeating: 0x61, count: 1000)).status, 200)
    }

    func testClientLeavingMidBody_givesItsReservationBack() throws {
        let h = try Harness(workers: 1) { c in c.maxBody = 1000; c.maxBuffered = 1500 }
        defer { h.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try c.send("POST /api/user HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc")
        XCTAssertTrue(h.eventually { (try? h.admin("/metrics").text)?.contains("peel_buffered_bytes 1000\n") == true })
        c.close()
        XCTAssertTrue(h.eventually { (try? h.admin("/metrics").text)?.contains("peel_buffered_bytes 0\n") == true })
        XCTAssertEqual(try h.request("POST", "/api/user", body: Array(repeating: 0x61, count: 1000)).status, 200)
    }

    func testChunkedBody_isCountedAsItArrivesAndRefusedPastTheBudget() throws {
        let h = try Harness(workers: 1) { c in c.maxBody = 1000; c.maxBuffered = 1200 }
        defer { h.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try c.send("POST /api/user HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n12c\r\n" + String(repeating: "a", count: 300) + "\r\n")
        XCTAssertTrue(h.eventually { (try? h.admin("/metrics").text)?.contains("peel_buffered_bytes 300\n") == true },
                      "the de-chunked bytes are not counted")
        let big = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try big.send("POST /api/user HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
        let r = try big.readResponse()
        XCTAssertEqual(r.status, 503, r.text)
        XCTAssertEqual(problem(r)["kind"] as? String, "server-busy")
        try c.send("0\r\n\r\n")
        XCTAssertEqual(try c.readResponse().status, 200)
        XCTAssertTrue(h.eventually { (try? h.admin("/metrics").text)?.contains("peel_buffered_bytes 0\n") == true })
    }

    func testUpstreamBodyOverTheBudget_isServerBusy() throws {
        let h = try Harness(workers: 1) { c in c.maxBody = 1000; c.maxBuffered = 100_000 }
        defer { h.stop() }
        let r = try h.request("GET", "/api/large?kb=512")
        XCTAssertEqual(r.status, 503, r.text)
        let p = problem(r)
        XCTAssertEqual(p["kind"] as? String, "server-busy")
        XCTAssertEqual(r.header("Retry-After"), "1")
        XCTAssertEqual(p["detail"] as? String, "Peel's memory budget (max_buffered) is held by other calls; try again shortly")
        XCTAssertTrue(h.eventually { (try? h.admin("/metrics").text)?.contains("peel_buffered_bytes 0\n") == true })
        XCTAssertEqual(try h.request("GET", "/api/user").status, 200)
    }

    /// Issue 18: slow readers holding the budget make Peel busy; the others' judged answers get 503
    /// server-busy with Retry-After, not 502 upstream-too-large (the upstream did nothing wrong).
    func testSlowReadersExhaustingTheBudget_othersGetServerBusy() throws {
        let h = try Harness(workers: 1) { c in c.maxBody = 1000; c.maxBuffered = 24 << 20 }
        defer { h.stop() }
        // Three clients ask for 7 MiB judged answers and do not read them: each answer's bytes stay
        // held until written, which a full socket buffer stops.
        var slow: [BlockingClient] = []
        for _ in 0..<3 {
            let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 10)
            try c.send("GET /api/large?kb=7168 HTTP/1.1\r\nHost: x\r\n\r\n")
            slow.append(c)
        }
        XCTAssertTrue(h.eventually(5) {
            let held = (try? h.admin("/metrics").text)?.split(separator: "\n").first { $0.hasPrefix("peel_buffered_bytes ") }
            return held.flatMap { Int($0.split(separator: " ")[1]) }.map { $0 > 18 << 20 } ?? false
        }, "the slow readers hold most of the budget")
        let r = try h.request("GET", "/api/large?kb=4096")
        XCTAssertEqual(r.status, 503, r.text)
        XCTAssertEqual(problem(r)["kind"] as? String, "server-busy")
        XCTAssertEqual(r.header("Retry-After"), "1")
        // Once they read (here: leave), the budget is free and the same call is answered.
        slow.removeAll()
        XCTAssertTrue(h.eventually(5) { (try? h.request("GET", "/api/large?kb=4096").status) == 200 })
    }
}

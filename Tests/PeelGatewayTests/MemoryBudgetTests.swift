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

    func testPerClientReserve_refusesPastTheShareAndKeepsOthersApart() {
        let b = MemoryBudget(limit: 100, perClient: 40)
        XCTAssertNil(b.reserve(30, client: "a"))
        XCTAssertEqual(b.reserve(11, client: "a"), .clientShare)
        XCTAssertEqual(b.admits(11, client: "a"), .clientShare)
        XCTAssertNil(b.reserve(40, client: "b"))
        XCTAssertEqual(b.reserve(31, client: "c"), .full, "the whole budget still bounds every client")
        XCTAssertEqual(b.admits(31, client: "c"), .full)
        XCTAssertEqual(b.bytes, 70, "a refused reservation takes nothing")
        XCTAssertEqual(b.held(by: "a"), 30)
        b.release(30, client: "a")
        XCTAssertEqual(b.held(by: "a"), 0)
        XCTAssertEqual(b.clientCount, 1, "a client holding nothing is forgotten")
        XCTAssertEqual(b.bytes, 40)
    }

    /// An upstream answer counts against its client's share, but one answer alone always fits it
    /// (as one request body does), so only a client holding other bytes is refused.
    func testReserveAnswer_oneAnswerAloneFitsTheShareAndASecondDoesNot() {
        let b = MemoryBudget(limit: 1000, perClient: 100)
        XCTAssertTrue(b.reserve(30), "the first bytes of an answer: the whole budget alone")
        XCTAssertNil(b.reserveAnswer(90, client: "a", held: 30, charged: false), "one answer alone passes the share")
        XCTAssertEqual(b.held(by: "a"), 120, "the bytes carried so far are charged with the new ones")
        XCTAssertEqual(b.bytes, 120)
        XCTAssertEqual(b.reserveAnswer(10, client: "a", held: 0, charged: false), .clientShare, "a second answer does not")
        XCTAssertNil(b.reserveAnswer(200, client: "a", held: 120, charged: true), "the lone answer goes on growing")
        XCTAssertEqual(b.held(by: "a"), 320)
        XCTAssertNil(b.reserve(60, client: "b"))
        XCTAssertEqual(b.reserveAnswer(50, client: "b", held: 0, charged: false), .clientShare, "a request body counts too")
        XCTAssertNil(b.reserveAnswer(40, client: "b", held: 0, charged: false))
        XCTAssertEqual(b.reserveAnswer(700, client: "c", held: 0, charged: false), .full, "the whole budget bounds every client")
        XCTAssertEqual(b.bytes, 420, "a refused reservation takes nothing")
        b.release(320, client: "a")
        XCTAssertEqual(b.clientCount, 1)
        XCTAssertEqual(b.bytes, 100)
    }

    private func refusals(_ h: Harness, _ bound: String) -> Int {
        let prefix = "peel_refusals_total{bound=\"\(bound)\"} "
        let line = (try? h.admin("/metrics").text)?.split(separator: "\n").first { $0.hasPrefix(prefix) }
        return line.flatMap { Int($0.split(separator: " ")[1]) } ?? 0
    }

    private func buffered(_ h: Harness) -> Int? {
        let line = (try? h.admin("/metrics").text)?.split(separator: "\n").first { $0.hasPrefix("peel_buffered_bytes ") }
        return line.flatMap { Int($0.split(separator: " ")[1]) }
    }

    /// Issue 28: a declared length is a promise, not bytes. Heads that declare nearly `max_body` and
    /// never send a body byte (with or without 100-continue) hold nothing, so everyone else's
    /// uploads and judged answers go on.
    func testHeadsThatDeclareAndNeverSend_holdNothing() throws {
        let h = try Harness(workers: 2) { c in c.memory.maxBody = 1000; c.memory.maxBuffered = 3000 }
        defer { h.stop() }
        var heads: [BlockingClient] = []
        for i in 0..<6 {
            let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5, from: "127.0.0.\(2 + i)")
            try c.send("POST /api/user HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n" + (i % 2 == 0 ? "Expect: 100-continue\r\n" : "") + "\r\n")
            heads.append(c)
        }
        XCTAssertTrue(try heads[0].readUntil("\r\n\r\n").hasPrefix("HTTP/1.1 100 Continue"), "an admitted body is asked for")
        XCTAssertTrue(h.eventually { h.gateway.budget.clientCount == 0 && self.buffered(h) == 0 }, "a declared length was reserved")
        for _ in 0..<3 {
            XCTAssertEqual(try h.request("POST", "/api/echo", body: Array(repeating: 0x61, count: 1000)).status, 200)
            // The budget this small fits one upload and its answer: the last answer's bytes are given
            // back as its call unwinds, just after the client has them.
            XCTAssertTrue(h.eventually { self.buffered(h) == 0 }, "an answer's bytes were not given back")
        }
        // A body that arrives is counted as it arrives, and given back when its answer is written.
        try heads[1].send(String(repeating: "x", count: 400))
        XCTAssertTrue(h.eventually { self.buffered(h) == 400 }, "arrived bytes are not counted: \(self.buffered(h) ?? -1)")
        try heads[1].send(String(repeating: "x", count: 600))
        XCTAssertEqual(try heads[1].readResponse().status, 200)
        XCTAssertTrue(h.eventually { self.buffered(h) == 0 }, "the body's bytes were not given back")
    }

    /// A declared length that the budget has no room for now is refused at once, before 100 Continue
    /// (nothing is taken for it), and counted as Peel's own refusal.
    func testDeclaredBodyTheBudgetHasNoRoomFor_gets503BeforeItIsRead() throws {
        let h = try Harness(workers: 2) { c in c.memory.maxBody = 1000; c.memory.maxBuffered = 2500 }
        defer { h.stop() }
        // Two clients (two addresses, each within its share) hold 1800 bytes that did arrive; the
        // 700 left are room for small calls and their answers, not for a 1000-byte body.
        var slow: [BlockingClient] = []
        for from in ["127.0.0.2", "127.0.0.3"] {
            let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5, from: from)
            try c.send("POST /api/user HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + String(repeating: "y", count: 900))
            slow.append(c)
        }
        XCTAssertTrue(h.eventually { self.buffered(h) == 1800 }, "arrived bytes are not counted: \(self.buffered(h) ?? -1)")

        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5, from: "127.0.0.4")
        try c.send("POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n")
        let r = try c.readResponse()
        XCTAssertEqual(r.status, 503, "not refused before its body (no 100 Continue first): \(r.text)")
        let p = problem(r)
        XCTAssertEqual(p["kind"] as? String, "server-busy")
        XCTAssertEqual(p["code"] as? Int, -108)
        XCTAssertEqual(r.header("Retry-After"), "1")
        XCTAssertEqual(h.upstream.requestCount, 0)
        let metrics = try h.admin("/metrics").text
        XCTAssertTrue(metrics.contains("peel_refusals_total{bound=\"max_buffered\"} 1\n"), metrics)
        XCTAssertFalse(metrics.contains("peel_upstream_errors_total{"), "a refusal of Peel's own is no upstream error")

        // A small one still fits, and the slow uploads are answered once their bodies are whole.
        XCTAssertEqual(try h.request("POST", "/api/user", body: Array(repeating: 0x61, count: 90)).status, 200)
        for s in slow {
            try s.send(String(repeating: "x", count: 100))
            XCTAssertEqual(try s.readResponse().status, 200)
        }
        XCTAssertTrue(h.eventually { self.buffered(h) == 0 }, "the bytes were not given back")
        XCTAssertEqual(try h.request("POST", "/api/user", body: Array(repeating: 0x61, count: 1000)).status, 200)
    }

    /// Issue 28: one address opening many connections that each send part of a body holds at most
    /// its share (`max_buffered_per_client`); another address still uploads whole bodies.
    func testOneAddressWithManyPartialBodies_holdsAtMostItsShare() throws {
        let h = try Harness(workers: 2) { c in c.memory.maxBody = 1000; c.memory.maxBuffered = 8000; c.memory.maxBufferedPerClient = 2000 }
        defer { h.stop() }
        var open: [BlockingClient] = []
        var refused = 0
        for _ in 0..<40 {
            let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 0.3, from: "127.0.0.9")
            try c.send("POST /api/user HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + String(repeating: "z", count: 300))
            open.append(c)
        }
        // Each connection holds its 300 arrived bytes while the address is within its share; the
        // others are refused, at once (no room for the declared length) or as their bytes arrive.
        func refusals() -> Int {
            let line = (try? h.admin("/metrics").text)?.split(separator: "\n").first { $0.hasPrefix("peel_refusals_total{bound=\"max_buffered_per_client\"} ") }
            return line.flatMap { Int($0.split(separator: " ")[1]) } ?? 0
        }
        XCTAssertTrue(h.eventually(5) { refusals() + h.gateway.budget.held(by: "127.0.0.9") / 300 == 40 }, "\(refusals())")
        let held = h.gateway.budget.held(by: "127.0.0.9")
        XCTAssertLessThanOrEqual(held, 2000, "one address holds more than its share")
        XCTAssertGreaterThan(held, 0)
        XCTAssertEqual(buffered(h), held)
        for c in open {
            guard let r = try? c.readResponse() else { continue }  // still sending: no answer yet
            XCTAssertEqual(r.status, 503)
            XCTAssertEqual(problem(r)["kind"] as? String, "server-busy")
            XCTAssertTrue((problem(r)["detail"] as? String ?? "").contains("max_buffered_per_client"))
            refused += 1
        }
        XCTAssertEqual(refused, refusals())
        // Another client is not starved: its whole bodies fit the rest of the budget.
        for _ in 0..<3 {
            XCTAssertEqual(try h.request("POST", "/api/echo", body: Array(repeating: 0x62, count: 1000)).status, 200)
        }
        open.removeAll()
        XCTAssertTrue(h.eventually { self.buffered(h) == 0 && h.gateway.budget.clientCount == 0 })
    }

    /// Behind a trusted proxy every peer is the proxy: the share is the forwarded client's.
    func testBehindTrustedProxy_theShareIsTheForwardedClients() throws {
        let h = try Harness(workers: 1) { c in
            c.memory.maxBody = 1000; c.memory.maxBuffered = 8000; c.memory.maxBufferedPerClient = 1000
            c.clients.trustedProxies = [IPNetwork("127.0.0.0/8")!]
        }
        defer { h.stop() }
        let a = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try a.send("POST /api/user HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.1\r\nContent-Length: 1000\r\n\r\n" + String(repeating: "a", count: 900))
        XCTAssertTrue(h.eventually { h.gateway.budget.held(by: "203.0.113.1") == 900 })
        // The share is never under one whole body with its framing room (2000 here): a second
        // partial body still fits, a third does not.
        let b = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try b.send("POST /api/user HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.1\r\nContent-Length: 1000\r\n\r\n" + String(repeating: "a", count: 900))
        XCTAssertTrue(h.eventually { h.gateway.budget.held(by: "203.0.113.1") == 1800 })
        let again = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try again.send("POST /api/user HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.1\r\nContent-Length: 1000\r\n\r\n")
        XCTAssertEqual(try again.readResponse().status, 503, "the same forwarded client is past its share")
        let other = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try other.send("POST /api/user HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.2\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n"
                       + String(repeating: "b", count: 1000))
        XCTAssertEqual(try other.readResponse().status, 200, "another client behind the same proxy has its own share")
    }

    func testClientLeavingMidBody_givesItsBytesBack() throws {
        let h = try Harness(workers: 1) { c in c.memory.maxBody = 1000; c.memory.maxBuffered = 1500 }
        defer { h.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try c.send("POST /api/user HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc")
        XCTAssertTrue(h.eventually { self.buffered(h) == 3 })
        c.close()
        XCTAssertTrue(h.eventually { self.buffered(h) == 0 && h.gateway.budget.clientCount == 0 })
        XCTAssertEqual(try h.request("POST", "/api/user", body: Array(repeating: 0x61, count: 1000)).status, 200)
    }

    func testChunkedBody_isCountedAsItArrivesAndRefusedPastTheBudget() throws {
        let h = try Harness(workers: 1) { c in c.memory.maxBody = 1000; c.memory.maxBuffered = 1200 }
        defer { h.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        try c.send("POST /api/user HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n12c\r\n" + String(repeating: "a", count: 300) + "\r\n")
        XCTAssertTrue(h.eventually { self.buffered(h) == 300 }, "the de-chunked bytes are not counted")
        let big = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5, from: "127.0.0.2")
        try big.send("POST /api/user HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
        let r = try big.readResponse()
        XCTAssertEqual(r.status, 503, r.text)
        XCTAssertEqual(problem(r)["kind"] as? String, "server-busy")
        try c.send("0\r\n\r\n")
        XCTAssertEqual(try c.readResponse().status, 200)
        XCTAssertTrue(h.eventually { self.buffered(h) == 0 })
    }

    func testUpstreamBodyOverTheBudget_isServerBusy() throws {
        let h = try Harness(workers: 1) { c in c.memory.maxBody = 1000; c.memory.maxBuffered = 100_000 }
        defer { h.stop() }
        let r = try h.request("GET", "/api/large?kb=512")
        XCTAssertEqual(r.status, 503, r.text)
        let p = problem(r)
        XCTAssertEqual(p["kind"] as? String, "server-busy")
        XCTAssertEqual(r.header("Retry-After"), "1")
        XCTAssertEqual(p["detail"] as? String, "Peel's memory budget (max_buffered) is held by other calls; try again shortly")
        let metrics = try h.admin("/metrics").text
        XCTAssertTrue(metrics.contains("peel_refusals_total{bound=\"max_buffered_upstream\"} 1\n"), metrics)
        XCTAssertFalse(metrics.contains("peel_upstream_errors_total{reason=\"over_budget\"}"), "the upstream did nothing wrong")
        XCTAssertTrue(h.eventually { (try? h.admin("/metrics").text)?.contains("peel_buffered_bytes 0\n") == true })
        XCTAssertEqual(try h.request("GET", "/api/user").status, 200)
    }

    /// Slow readers at many addresses holding the budget make Peel busy; the others' judged answers
    /// get 503 server-busy with Retry-After, not 502 upstream-too-large (the upstream did nothing
    /// wrong). Each holds one answer, more than its share: one answer alone always fits the share.
    func testSlowReadersExhaustingTheBudget_othersGetServerBusy() throws {
        let h = try Harness(workers: 1) { c in c.memory.maxBody = 1000; c.memory.maxBuffered = 24 << 20 
            // Answers held in memory, which these bounds are about: spooling off.
            c.spooling.threshold = 0
        }
        defer { h.stop() }
        // Three clients ask for 7 MiB judged answers and do not read them: each answer's bytes stay
        // held until written, which a full socket buffer stops.
        var slow: [BlockingClient] = []
        for i in 0..<3 {
            let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 10, from: "127.0.0.\(2 + i)")
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

    /// Issue 28: one address opening many connections that ask for large judged answers and never
    /// read them holds at most its share (`max_buffered_per_client`) of the budget: its further
    /// answers get 503 server-busy, counted as Peel's refusal, while another address is answered.
    func testOneAddressWithManySlowReaders_holdsAtMostItsShareAndOthersAreAnswered() throws {
        let h = try Harness(workers: 2) { c in c.memory.maxBody = 1000; c.memory.maxBuffered = 48 << 20; c.memory.maxBufferedPerClient = 16 << 20 
            // Answers held in memory, which these bounds are about: spooling off.
            c.spooling.threshold = 0
        }
        defer { h.stop() }
        let share = "max_buffered_per_client_upstream"
        var slow: [BlockingClient] = []
        for _ in 0..<6 {
            let before = (held: buffered(h) ?? 0, refused: refusals(h, share) + refusals(h, "max_buffered_upstream"))
            let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 10, from: "127.0.0.9")
            try c.send("GET /api/large?kb=7168 HTTP/1.1\r\nHost: x\r\n\r\n")
            slow.append(c)
            // One at a time: each answer is held unread, or refused, before the next call starts.
            XCTAssertTrue(h.eventually(5) {
                (self.buffered(h) ?? 0) >= before.held + (7 << 20)
                    || self.refusals(h, share) + self.refusals(h, "max_buffered_upstream") > before.refused
            }, "neither held nor refused: \(self.buffered(h) ?? -1)")
        }
        // Two 7 MiB answers fit the 16 MiB share; the third passes it, as does every later one.
        XCTAssertEqual(refusals(h, share), 4)
        let held = h.gateway.budget.held(by: "127.0.0.9")
        XCTAssertLessThanOrEqual(held, 16 << 20, "one address holds more than its share")
        XCTAssertGreaterThan(held, 14 << 20, "the answers within the share are not charged to it")
        // Another address is not starved: its large answer fits the rest of the budget.
        let other = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 10, from: "127.0.0.2")
        try other.send("GET /api/large?kb=7168 HTTP/1.1\r\nHost: x\r\n\r\n")
        let r = try other.readResponse()
        XCTAssertEqual(r.status, 200, String(r.text.prefix(300)))
        XCTAssertGreaterThan(r.body.count, 7 << 20)
        // The answers past the share were refused, as Peel's own bound.
        let refused = try slow[2...].map { try $0.readResponse() }
        XCTAssertEqual(refused.map(\.status), [503, 503, 503, 503], refused.map { String($0.text.prefix(300)) }.joined(separator: "\n"))
        if let busy = refused.first, busy.status == 503 {
            XCTAssertEqual(problem(busy)["kind"] as? String, "server-busy")
            XCTAssertEqual(busy.header("Retry-After"), "1")
            XCTAssertTrue((problem(busy)["detail"] as? String ?? "").contains("max_buffered_per_client"), busy.text)
        }
        // The upstream did nothing wrong: no upstream error, and it stays reachable.
        let metrics = try h.admin("/metrics").text
        XCTAssertFalse(metrics.contains("peel_upstream_errors_total{"), metrics)
        XCTAssertTrue(metrics.contains("peel_upstream_up 1\n"), metrics)
        slow.removeAll()
        XCTAssertTrue(h.eventually(5) { self.buffered(h) == 0 && h.gateway.budget.clientCount == 0 }, "the held answers were not given back")
    }
}

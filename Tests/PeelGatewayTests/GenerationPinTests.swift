import Foundation
import PeelEnvelope
import PeelGateway
import PeelIO
import XCTest

/// Issue 36: a reload lands between a call's send and its answer, and every part of the answer the
/// configuration decides (the coding's level, the timeout, the offline cache's max age, CORS, the
/// dialect) comes from the generation the call started under. The upstream holds each answer until
/// the test releases it, after the reload has returned (every worker has the new generation then).
final class GenerationPinTests: XCTestCase {
    /// One side of the reload: the parts of a configuration an answer is shaped by.
    private struct Side {
        let name: String
        let gzipLevel: Int
        let brotliQuality: Int
        /// The whole-exchange timeout, seconds.
        let timeout: Double
        /// The one origin allowed.
        let origin: String
        let dialect: Dialect
        /// The envelope member `dialect` reads the payload from.
        let member: String
        /// `offline_cache_max_age`, seconds.
        let maxAge: Double

        func apply(to c: inout GatewayConfig) {
            c.compression.gzipLevel = gzipLevel
            c.compression.brotliQuality = brotliQuality
            c.calls.timeout = timeout
            c.cors.origins = [origin]
            c.envelope.dialect = dialect
            c.offline.maxAge = maxAge
        }
    }

    // A keeps the upstream's 100 s old answer (an hour's max age) and waits 5 s for it; B refuses to
    // keep it (10 s) and gives up after 2 s. Every other part differs too.
    private static let a = Side(name: "A", gzipLevel: 1, brotliQuality: 1, timeout: 5, origin: "https://a.example",
                                dialect: .peel, member: "data", maxAge: 3600)
    private static let b = Side(name: "B", gzipLevel: 9, brotliQuality: 11, timeout: 2, origin: "https://b.example",
                                dialect: .jeecg, member: "result", maxAge: 10)

    /// Each side's payload: compressible text, large enough that the two sides' levels code it differently.
    private static func payload(_ side: Side) -> String {
        let words = ["peel", "gateway", "generation", "reload", "answer", "envelope", "route", side.name]
        var x: UInt64 = side.name == "A" ? 36 : 63
        var out: [String] = []
        for _ in 0..<1500 {
            x = x &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            out.append(words[Int(x >> 61)])
        }
        return "\"" + out.joined(separator: " ") + "\""
    }

    /// One envelope both dialects accept, with a different payload for each: `peel` reads `code` and
    /// `data`, `jeecg` reads `success` and `result`.
    private static let envelope = #"{"code":0,"success":true,"message":"ok","#
        + "\"\(a.member)\":\(payload(a)),\"\(b.member)\":\(payload(b))}"

    /// The envelope, public and already 100 s old (RFC 9111 §5.1): A keeps it, B refuses to.
    private static let answer = RawUpstream.answer(envelope, fields: ["Cache-Control: public", "Age: 100"])

    /// The envelope answered just now: both sides keep it, each for its own max age.
    private static let freshAnswer = RawUpstream.answer(envelope, fields: ["Cache-Control: public"])

    /// `text` coded as `coding` at `side`'s level.
    private static func coded(_ text: String, _ coding: ContentCoding, by side: Side) -> [UInt8] {
        let encoder = ContentEncoder(gzipLevel: side.gzipLevel, brotliQuality: side.brotliQuality)
        return Array(text.utf8).withUnsafeBytes { encoder.encode($0, as: coding) } ?? []
    }

    /// Whose level and whose dialect `body` is, as "A's level, B's dialect", or "neither side's".
    private static func whose(_ body: [UInt8], _ coding: ContentCoding) -> String {
        for level in [a, b] {
            for dialect in [a, b] where coded(payload(dialect), coding, by: level) == body {
                return "\(level.name)'s level, \(dialect.name)'s dialect"
            }
        }
        return "neither side's (\(body.count) bytes)"
    }

    /// A gateway in front of `upstream` configured as `side`: compression of any size, the offline
    /// cache on, probes fast enough to see the upstream go within a second.
    private func gateway(_ upstream: HeldUpstream, _ side: Side, _ configure: (inout GatewayConfig) -> Void = { _ in }) throws -> Gateway {
        var c = GatewayConfig()
        c.upstream = try UpstreamURL.parse(upstream.baseURL).get()
        c.listeners.client = HostPort(host: "127.0.0.1", port: 0)
        c.listeners.admin = nil
        c.listeners.workers = 2
        c.logs.access = false
        c.probe.path = "/probe"
        c.probeQuickly()
        c.compression.codings = [.gzip, .br]
        c.compression.minSize = 1
        c.offline.capacity = 1 << 20
        side.apply(to: &c)
        configure(&c)
        let g = Gateway(config: c)
        try g.start()
        return g
    }

    /// Reloads `gateway` as `side`; returns once every worker has it.
    private func reload(_ gateway: Gateway, to side: Side, file: StaticString = #filePath, line: UInt = #line) {
        var next = gateway.config
        side.apply(to: &next)
        XCTAssertEqual(gateway.reload(next), [], "settings that needed a restart", file: file, line: line)
    }

    /// A GET of `path` from `origin`, accepting `coding` (nil: no coding), sent on a fresh
    /// connection and not yet read.
    private func send(_ gateway: Gateway, _ path: String, origin: String, _ coding: ContentCoding?) throws -> BlockingClient {
        let c = try BlockingClient(host: "127.0.0.1", port: gateway.port, timeout: 10)
        let accept = coding.map { "Accept-Encoding: \($0.rawValue)\r\n" } ?? ""
        try c.send("GET \(path) HTTP/1.1\r\nHost: api.example\r\nOrigin: \(origin)\r\n\(accept)\r\n")
        return c
    }

    /// Checks `r` is the answer as `side` shapes it in every part it decides.
    private func assertShaped(_ r: BlockingClient.Response, _ coding: ContentCoding, by side: Side, _ what: String,
                              file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(r.status, 200, "\(what): \(r.text)", file: file, line: line)
        XCTAssertEqual(r.header("Content-Encoding"), coding.rawValue, what, file: file, line: line)
        XCTAssertEqual(Self.whose(r.body, coding), "\(side.name)'s level, \(side.name)'s dialect",
                       "\(what): coded at the level and unwrapped by the dialect of \(side.name)", file: file, line: line)
        XCTAssertEqual(r.header("Access-Control-Allow-Origin"), side.origin, "\(what): CORS of \(side.name)", file: file, line: line)
    }

    /// Takes the upstream away and waits until the gateway counts it unreachable.
    private func goOffline(_ gateway: Gateway, _ upstream: HeldUpstream, file: StaticString = #filePath, line: UInt = #line) {
        upstream.closeListener()
        XCTAssertTrue(waitFor(3) { gateway.reachability.isDown }, "not offline within 3 s", file: file, line: line)
    }

    func testTheSidesDiffer_inEveryPartTheAnswersAreCheckedBy() {
        // Otherwise the tests below could not tell A's answer from B's.
        for coding in ContentCoding.allCases {
            let all = [Self.a, Self.b].flatMap { level in [Self.a, Self.b].map { Self.coded(Self.payload($0), coding, by: level) } }
            XCTAssertEqual(Set(all).count, 4, "\(coding): two levels × two payloads must give four different bodies")
            XCTAssertFalse(all.contains([]), "\(coding): the encoder failed")
        }
        XCTAssertNotEqual(Self.a.origin, Self.b.origin)
        XCTAssertGreaterThan(Self.a.timeout, Self.b.timeout)
        XCTAssertTrue(Self.b.maxAge < 100 && 100 < Self.a.maxAge, "the answer's Age must be kept by A only")
    }

    // Started under A, answered after the reload to B and after B's 2 s timeout: the answer is
    // still A's in every part, and stored under A's hour, where B's 10 s would refuse an answer
    // already 100 s old.
    func testReloadWhileTheAnswerIsHeld_theAnswerKeepsTheGenerationItsCallStartedUnder() throws {
        let upstream = try HeldUpstream()
        defer { upstream.stop() }
        let g = try gateway(upstream, Self.a)
        defer { g.shutdown() }
        let gzip = try send(g, "/held/gzip", origin: Self.a.origin, .gzip)
        let br = try send(g, "/held/br", origin: Self.a.origin, .br)
        XCTAssertTrue(upstream.waitForRequests(["/held/gzip", "/held/br"]), "the calls did not reach the upstream")
        let sent = Date()
        reload(g, to: Self.b)

        // B's timeout passes while the answers are held: under it, Peel would have given up by now.
        let deadline = sent.addingTimeInterval(Self.b.timeout + 0.5)
        while Date() < deadline { usleep(20_000) }
        XCTAssertFalse(upstream.lost("/held/gzip") || upstream.lost("/held/br"), "Peel gave up at B's timeout, not A's")
        XCTAssertTrue(upstream.release("/held/gzip", with: Self.answer), "not held")
        XCTAssertTrue(upstream.release("/held/br", with: Self.answer), "not held")
        assertShaped(try gzip.readResponse(), .gzip, by: Self.a, "gzip, started under A")
        assertShaped(try br.readResponse(), .br, by: Self.a, "br, started under A")
        // Stored before the answer is written.
        XCTAssertEqual(g.offlineCache.entries, 2, "not stored under A's hour: B's 10 s refuses an answer 100 s old")

        // What was stored is A's payload: served while offline, once lookups take an hour again
        // (B's 10 s would refuse it at lookup too).
        reload(g, to: Self.a)
        goOffline(g, upstream)
        let stale = try send(g, "/held/gzip", origin: Self.a.origin, .gzip).readResponse()
        XCTAssertEqual(stale.header("Cache-Status"), "Peel; hit; detail=offline", stale.text)
        assertShaped(stale, .gzip, by: Self.a, "the stored answer, served under A")
    }

    // The reverse: started under B, answered after the reload to A. B's level, dialect and CORS
    // shape it, B's 10 s refuses to keep it (A's hour would have), and a call left unanswered ends
    // at B's 2 s, not A's 5 s.
    func testReloadWhileTheAnswerIsHeld_aCallStartedUnderTheStricterGenerationKeepsItsRules() throws {
        let upstream = try HeldUpstream()
        defer { upstream.stop() }
        let g = try gateway(upstream, Self.b)
        defer { g.shutdown() }
        let answered = try send(g, "/held/gzip", origin: Self.b.origin, .gzip)
        let unanswered = try send(g, "/held/never", origin: Self.b.origin, .gzip)
        XCTAssertTrue(upstream.waitForRequests(["/held/gzip", "/held/never"]), "the calls did not reach the upstream")
        let sent = Date()
        reload(g, to: Self.a)
        XCTAssertTrue(upstream.release("/held/gzip", with: Self.answer), "not held")
        assertShaped(try answered.readResponse(), .gzip, by: Self.b, "gzip, started under B")
        XCTAssertEqual(g.offlineCache.entries, 0, "stored under A's hour: B's 10 s refuses an answer 100 s old")

        let timedOut = try unanswered.readResponse()
        let waited = Date().timeIntervalSince(sent)
        XCTAssertEqual(timedOut.status, 504, timedOut.text)
        XCTAssertLessThan(waited, Self.a.timeout - 1, "timed out at A's 5 s, not B's 2 s")
        XCTAssertEqual(timedOut.header("Access-Control-Allow-Origin"), Self.b.origin, "the problem has B's CORS")

        // Nothing was kept, so offline under A (which would serve it) there is nothing to serve.
        goOffline(g, upstream)
        let offline = try send(g, "/held/gzip", origin: Self.a.origin, nil).readResponse()
        XCTAssertEqual(problem(offline)["kind"] as? String, "offline", "a stored answer was served: \(offline.status)")
    }

    // The shared store writes on a later loop pass and gives each entry a TTL of how long it may be
    // served: the TTL of the call's generation. One call starts under A, one under B, and both are
    // answered once A is back in force; each entry lives for its own call's max age.
    func testReloadWhileTheAnswerIsHeld_theSharedStoreKeepsEachAnswerForItsCallsMaxAge() throws {
        let redis = try RedisServer()
        defer { redis.stop() }
        let upstream = try HeldUpstream()
        defer { upstream.stop() }
        let g = try gateway(upstream, Self.a) { c in
            c.offline.store = .redis(.tcp(host: "127.0.0.1", port: redis.port), database: 0)
            c.offline.storeSecret = Array("a generation test secret, 32 b..".utf8)
        }
        defer { g.shutdown() }
        let underA = try send(g, "/held/a", origin: Self.a.origin, .gzip)
        XCTAssertTrue(upstream.waitForRequests(["/held/a"]), "the call did not reach the upstream")
        reload(g, to: Self.b)
        let underB = try send(g, "/held/b", origin: Self.b.origin, .gzip)
        XCTAssertTrue(upstream.waitForRequests(["/held/b"]), "the call did not reach the upstream")
        reload(g, to: Self.a)

        XCTAssertTrue(upstream.release("/held/b", with: Self.freshAnswer), "not held")
        assertShaped(try underB.readResponse(), .gzip, by: Self.b, "started under B")
        XCTAssertTrue(waitFor(3) { ((try? Self.timesToLive(redis)) ?? [:]).count == 1 }, "B's call was not stored")
        let first = try Self.timesToLive(redis)
        XCTAssertEqual(first.count, 1)
        let keptB = try XCTUnwrap(first.values.first)
        XCTAssertTrue(0 < keptB && keptB <= 10_000, "B's call kept for \(keptB) ms, not B's 10 s")

        XCTAssertTrue(upstream.release("/held/a", with: Self.freshAnswer), "not held")
        assertShaped(try underA.readResponse(), .gzip, by: Self.a, "started under A")
        XCTAssertTrue(waitFor(3) { ((try? Self.timesToLive(redis)) ?? [:]).count == 2 }, "A's call was not stored")
        let keptA = try XCTUnwrap(try Self.timesToLive(redis).first { first[$0.key] == nil }?.value)
        XCTAssertTrue(3_000_000 < keptA && keptA <= 3_600_000, "A's call kept for \(keptA) ms, not A's hour")
    }

    /// Every key in `redis`'s database 0 with its time to live in milliseconds (RESP `KEYS`, `PTTL`).
    private static func timesToLive(_ redis: RedisServer) throws -> [String: Int] {
        let c = try BlockingClient(host: "127.0.0.1", port: redis.port, timeout: 2)
        // RESP lines end in CRLF, which Swift reads as one Character.
        func line() throws -> String { try c.readUntil("\r\n").trimmingCharacters(in: .newlines) }
        try c.send("*2\r\n$4\r\nKEYS\r\n$1\r\n*\r\n")
        let count = Int(try line().dropFirst()) ?? 0
        var keys: [String] = []
        for _ in 0..<count {
            _ = try line()
            keys.append(try line())
        }
        var out: [String: Int] = [:]
        for k in keys {
            try c.send("*2\r\n$4\r\nPTTL\r\n$\(k.utf8.count)\r\n\(k)\r\n")
            out[k] = Int(try line().dropFirst()) ?? -3
        }
        return out
    }
}

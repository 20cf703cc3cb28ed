@testable import PeelGateway
import PeelEnvelope
import PeelIO
import XCTest

/// The one reply shaper (issue 20): every kind of answer × CORS on/off × compression × stale, and
/// what each must and must not carry.
final class ReplyShaperTests: XCTestCase {
    private let origin = "https://app.example.com"
    private let rewrite = ProxyRewrite(upstream: try! UpstreamURL.parse("http://up.internal:9000/api").get())

    private func shaper(cors: Bool, compression: Bool) -> ReplyShaper {
        var s = GatewayConfig.CORS()
        if cors { s.origins = [origin] }
        return ReplyShaper(cors: CORSPolicy(s),
                           compression: CompressionPolicy(offered: compression ? [.gzip] : [], minSize: 64),
                           rewriteRedirects: true, rewriteCookies: true)
    }

    /// A large enough JSON body to be worth compressing.
    private let body = Array(("{\"items\":[" + String(repeating: "{\"a\":1},", count: 40) + "{}]}").utf8)

    private let upstreamFields = ResponseHeaders([
        ("Content-Type", "application/json"), ("Content-Length", "999"), ("Connection", "keep-alive"),
        ("Transfer-Encoding", "chunked"), ("ETag", "\"v1\""), ("Vary", "Accept-Language"), ("Cache-Control", "max-age=60"),
        ("Location", "http://up.internal:9000/api/next"), ("Content-Location", "http://up.internal:9000/api/item/1"), ("Set-Cookie", "s=1; Domain=up.internal; Path=/api"),
        ("Access-Control-Allow-Origin", "*"), ("Access-Control-Expose-Headers", "X-Page"), ("X-Page", "2"),
        ("Retry-After", "5"), ("X-Request-Id", "upstream-id"), ("Content-Encoding", "gzip"), ("Proxy-Authenticate", "Basic"),
        ("Date", "Tue, 01 Dec 2026 10:00:00 GMT"), ("Last-Modified", "Mon, 30 Nov 2026 10:00:00 GMT"),
    ])

    private enum Case: CaseIterable {
        case unwrapped, passthrough, stale, staleNotModified, problem, offlineProblem, preflight, reachability
    }

    private func reply(_ c: Case) -> Reply {
        switch c {
        case .unwrapped:
            return Reply(status: 200, kind: .relayed, upstream: upstreamFields, contentType: "application/json",
                         body: .bytes(body, range: 0..<body.count, hold: nil))
        case .passthrough:
            return Reply(status: 200, kind: .relayed, upstream: upstreamFields, body: .bytes(body, range: nil, hold: nil))
        case .stale:
            return Reply(status: 200, kind: .stale(age: 7), upstream: upstreamFields, contentType: "application/json",
                         body: .bytes(body, range: nil, hold: nil))
        case .staleNotModified:
            return Reply(status: 304, kind: .staleNotModified(age: 7, storedType: "application/json", storedCount: body.count),
                         upstream: upstreamFields, body: .bytes([], range: nil, hold: nil))
        case .problem:
            return Reply(status: 401, kind: .problem(.authExpired), upstream: upstreamFields, body: .bytes(body, range: nil, hold: nil))
        case .offlineProblem:
            return Reply(status: 503, kind: .problem(.offline), fields: [("Retry-After", "3")],
                         body: .bytes(body, range: nil, hold: nil))
        case .preflight:
            return Reply(status: 204, kind: .preflight, fields: [("Access-Control-Allow-Origin", origin), ("Vary", "Origin")],
                         body: .bytes([], range: nil, hold: nil))
        case .reachability:
            return Reply(status: 200, kind: .own, fields: [("Content-Type", "application/json"), ("Cache-Control", "no-store")],
                         body: .bytes(body, range: nil, hold: nil), compressible: false)
        }
    }

    private func render(_ s: ShapedReply) -> [(String, String)] { s.fields.pairs }

    /// A call's context as the forwarder makes it: Peel's public origin is https://peel.example (a
    /// trusted proxy's X-Forwarded-Proto), and URLs naming the upstream are rewritten.
    private func context(requestId: String, origin: String?, acceptEncoding: AcceptedCodings?, keptCoding: String?) -> ReplyContext {
        ReplyContext(requestId: requestId, origin: origin, acceptEncoding: acceptEncoding, keptCoding: keptCoding, rewrite: rewrite,
                     host: "peel.example", forwardedProto: "https")
    }

    func testEveryKindOfAnswer_timesCORS_timesCompression() throws {
        var rows = 0
        for c in Case.allCases {
            for cors in [false, true] {
                for compression in [false, true] {
                    for acceptsGzip in [false, true] {
                        let ctx = context(requestId: "rid-1", origin: origin, acceptEncoding: acceptsGzip ? "gzip" : nil,
                                               keptCoding: nil)
                        let shaped = shaper(cors: cors, compression: compression).shape(reply(c), ctx) { bytes, _ in
                            Array(bytes.prefix(10))  // a stand-in coding: the shaper only routes the bytes
                        }
                        let fields = render(shaped)
                        let label = "\(c) cors=\(cors) compression=\(compression) gzip=\(acceptsGzip): \(fields)"
                        func all(_ name: String) -> [String] { fields.filter { $0.0.lowercased() == name }.map(\.1) }
                        rows += 1

                        // Every answer: exactly one X-Request-Id, Peel's; at most one Vary; nothing hop-by-hop.
                        XCTAssertEqual(all("x-request-id"), ["rid-1"], label)
                        XCTAssertLessThanOrEqual(all("vary").count, 1, label)
                        for hop in ["connection", "transfer-encoding", "content-length", "proxy-authenticate"] {
                            XCTAssertEqual(all(hop), [], label)
                        }
                        let vary = all("vary").first ?? ""

                        // CORS: Peel's decision when it manages CORS, the upstream's otherwise (never both).
                        let allowOrigin = all("access-control-allow-origin")
                        if cors {
                            XCTAssertEqual(allowOrigin, [origin], label)
                            XCTAssertTrue(vary.contains("Origin"), label)
                            if c != .preflight {
                                let exposed = all("access-control-expose-headers").first ?? ""
                                XCTAssertTrue(exposed.contains("X-Request-Id"), label)
                                if c == .unwrapped || c == .passthrough || c == .stale {
                                    XCTAssertTrue(exposed.contains("X-Page"), "the upstream's exposed names are merged: \(label)")
                                }
                            }
                        } else if c == .preflight {
                            XCTAssertEqual(allowOrigin, [origin], label)
                        } else if c == .reachability || c == .offlineProblem {
                            XCTAssertEqual(allowOrigin, [], label)
                        } else {
                            XCTAssertEqual(allowOrigin, ["*"], "the upstream's CORS fields pass: \(label)")
                        }

                        // Compression: only for bodies worth it, when the client takes a coding Peel offers.
                        let compressible = c == .unwrapped || c == .passthrough || c == .stale || c == .problem
                            || c == .offlineProblem
                        let encoded = compressible && compression && acceptsGzip
                        XCTAssertEqual(all("content-encoding"), encoded ? ["gzip"] : [], label)
                        if case .bytes(let b, let range, _) = shaped.body, encoded {
                            XCTAssertEqual(b, Array(body.prefix(10)), label)
                            XCTAssertNil(range, label)
                        }
                        let variesByCoding = (compressible && compression) || (c == .staleNotModified && compression)
                        XCTAssertEqual(vary.contains("Accept-Encoding"), variesByCoding, label)

                        // Stale answers say so; nothing else does.
                        let stale = c == .stale || c == .staleNotModified
                        XCTAssertEqual(all("age"), stale ? ["7"] : [], label)
                        XCTAssertEqual(all("cache-status"), stale ? ["Peel; hit; detail=offline"] : [], label)

                        switch c {
                        case .unwrapped, .passthrough, .stale:
                            XCTAssertEqual(all("content-type"), ["application/json"], label)
                            XCTAssertTrue(vary.contains("Accept-Language"), "the upstream's Vary names are kept: \(label)")
                            XCTAssertEqual(all("etag"), [encoded ? "W/\"v1\"" : "\"v1\""], label)
                            XCTAssertEqual(all("location"), ["https://peel.example/next"], label)
                            XCTAssertEqual(all("content-location"), ["https://peel.example/item/1"], label)
                            XCTAssertEqual(all("set-cookie"), ["s=1; Path=/"], label)
                            XCTAssertEqual(all("x-page"), ["2"], label)
                            XCTAssertEqual(all("date").count, 1, label)
                        case .staleNotModified:
                            let weak = compression && acceptsGzip
                            XCTAssertEqual(all("etag"), [weak ? "W/\"v1\"" : "\"v1\""], label)
                            XCTAssertEqual(all("cache-control"), ["max-age=60"], label)
                            XCTAssertEqual(all("last-modified").count, 1, label)
                            XCTAssertEqual(all("content-location"), ["https://peel.example/item/1"],
                                           "rewritten as the 200's would be: \(label)")
                            XCTAssertEqual(all("content-type"), [], "a 304 describes, it has no content: \(label)")
                            XCTAssertEqual(all("x-page"), [], label)
                            XCTAssertEqual(all("set-cookie"), [], label)
                        case .problem:
                            XCTAssertEqual(all("content-type"), ["application/problem+json"], label)
                            XCTAssertEqual(all("cache-control"), ["max-age=60"], "the upstream's Cache-Control is kept: \(label)")
                            XCTAssertEqual(all("retry-after"), ["5"], label)
                            XCTAssertEqual(all("set-cookie"), ["s=1; Path=/"], "a logout's cookie stays, rewritten: \(label)")
                            XCTAssertEqual(all("www-authenticate"), ["Bearer error=\"invalid_token\""], label)
                            XCTAssertEqual(all("etag"), [], label)
                            XCTAssertEqual(all("location"), [], label)
                            XCTAssertEqual(all("content-location"), [], label)
                            XCTAssertEqual(all("x-page"), [], label)
                        case .offlineProblem:
                            XCTAssertEqual(all("content-type"), ["application/problem+json"], label)
                            XCTAssertEqual(all("cache-control"), ["no-store"], label)
                            XCTAssertEqual(all("retry-after"), ["3"], label)
                        case .preflight:
                            XCTAssertEqual(all("content-type"), [], label)
                        case .reachability:
                            XCTAssertEqual(all("content-type"), ["application/json"], label)
                            XCTAssertEqual(all("cache-control"), ["no-store"], label)
                        }
                    }
                }
            }
        }
        XCTAssertEqual(rows, Case.allCases.count * 8)
    }

    /// Review of issue 20: a call whose upstream body was to pass in its coding (kept gzip) and then
    /// broke is answered with a problem, which is Peel's JSON and must not claim that coding.
    func testOnlyARelayedAnswer_carriesTheKeptCoding() {
        for c in Case.allCases {
            let ctx = context(requestId: "i", origin: nil, acceptEncoding: "gzip", keptCoding: "gzip")
            var encoded = false
            let shaped = shaper(cors: false, compression: true).shape(reply(c), ctx) { bytes, _ in
                encoded = true
                return Array(bytes.prefix(3))
            }
            let fields = render(shaped)
            let codings = fields.filter { $0.0 == "Content-Encoding" }.map(\.1)
            switch c {
            case .unwrapped, .passthrough:
                XCTAssertEqual(codings, ["gzip"], "\(c)")
                XCTAssertFalse(encoded, "a body in its upstream coding is not encoded again: \(c)")
            case .problem, .offlineProblem:
                XCTAssertEqual(codings, encoded ? ["gzip"] : [], "only Peel's own compression names a coding: \(c)")
                XCTAssertTrue(encoded, "a problem is compressed on its own terms: \(c)")
            default:
                XCTAssertEqual(codings, encoded ? ["gzip"] : [], "\(c): \(fields)")
            }
        }
    }

    func testAProblemFromA206_isStillCompressible() {
        let r = Reply(status: 502, kind: .problem(.badUpstreamFormat),
                      upstream: ResponseHeaders([("Content-Range", "bytes 0-9/100")]), body: .bytes(body, range: nil, hold: nil))
        let fields = render(shaper(cors: false, compression: true).shape(r, context(requestId: "i", origin: nil,
                                                                                          acceptEncoding: "gzip", keptCoding: nil)) { b, _ in Array(b) })
        XCTAssertEqual(fields.filter { $0.0 == "Content-Encoding" }.map(\.1), ["gzip"])
    }

    func testA204_carriesNoContentType_notEvenTheEnvelopes() {
        let r = Reply(status: 204, kind: .relayed, upstream: ResponseHeaders([("Content-Type", "application/json"), ("X-A", "1")]),
                      body: .bytes([], range: nil, hold: nil))
        let fields = render(shaper(cors: false, compression: true).shape(r, context(requestId: "i", origin: nil,
                                                                                          acceptEncoding: "gzip", keptCoding: nil)) { _, _ in nil })
        XCTAssertEqual(fields.map(\.0), ["X-A", "X-Request-Id"])
    }

    func testAKeptCoding_isNamedOnce_andTheBodyIsNotCompressedAgain() {
        let r = Reply(status: 200, kind: .relayed, upstream: ResponseHeaders([("Content-Type", "text/plain"), ("Content-Encoding", "br")]),
                      body: .stream(contentLength: 120))
        let shaped = shaper(cors: false, compression: true).shape(r, context(requestId: "i", origin: nil, acceptEncoding: "br, gzip",
                                                                                  keptCoding: "br")) { _, _ in
            XCTFail("a body in its upstream coding is not encoded again")
            return nil
        }
        let fields = render(shaped)
        XCTAssertEqual(fields.filter { $0.0 == "Content-Encoding" }.map(\.1), ["br"])
        XCTAssertEqual(fields.filter { $0.0 == "Vary" }.map(\.1), ["Accept-Encoding"])
    }

    func testAStar_inAnyVary_isTheWholeVary() {
        let r = Reply(status: 200, kind: .relayed, upstream: ResponseHeaders([("Vary", "*"), ("Vary", "Cookie")]),
                      body: .bytes(body, range: nil, hold: nil))
        let fields = render(shaper(cors: true, compression: true).shape(r, context(requestId: "i", origin: origin,
                                                                                         acceptEncoding: nil, keptCoding: nil)) { _, _ in nil })
        XCTAssertEqual(fields.filter { $0.0 == "Vary" }.map(\.1), ["*"])
    }

    func testOnlyARefusalAsksForTheConnectionToClose() {
        let s = shaper(cors: false, compression: false)
        let ctx = context(requestId: "i", origin: nil, acceptEncoding: nil, keptCoding: nil)
        var r = Reply(status: 400, kind: .problem(.badRequest), body: .bytes([], range: nil, hold: nil), closing: true)
        XCTAssertTrue(s.shape(r, ctx) { _, _ in nil }.closing)
        r.closing = false
        XCTAssertFalse(s.shape(r, ctx) { _, _ in nil }.closing)
        XCTAssertFalse(render(s.shape(r, ctx) { _, _ in nil }).contains { $0.0.lowercased() == "connection" },
                       "the connection layer states the connection's fate, not the shaper")
    }
}

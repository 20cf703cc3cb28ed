@testable import PeelIO
import XCTest

/// The upgrade request a tunnel sends upstream.
final class TunnelHeadTests: XCTestCase {
    func testAPreservedHost_isWrittenOnce() throws {
        let endpoint = try UpstreamEndpoint(origin: "http://127.0.0.1:8081", basePath: "/base")
        let client = ResponseHeaders([("Host", "app.example"), ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
                                      ("Sec-WebSocket-Version", "13")])
        let forwarding = ForwardingFields(forwardedFor: "10.0.0.1", forwardedProto: "http", forwardedHost: "app.example",
                                          forwarded: "for=10.0.0.1", host: "app.example", requestId: "r1")
        let request = UpstreamRequest(method: "GET", target: .origin(endpoint, path: "/ws", query: "t=1"), relayed: client,
                                      forwarding: forwarding)
        let (origin, head) = TunnelDial.requestHead(request, upgrade: "websocket")
        XCTAssertEqual(origin, "http://127.0.0.1:8081")
        XCTAssertTrue(head.hasPrefix("GET /base/ws?t=1 HTTP/1.1\r\nHost: app.example\r\n"), head)
        let hosts = head.split(separator: "\r\n").filter { $0.lowercased().hasPrefix("host:") }
        XCTAssertEqual(hosts.count, 1, "RFC 9112 §3.2: one Host field\n\(head)")
        XCTAssertTrue(head.contains("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"), head)
        XCTAssertTrue(head.hasSuffix("Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n"), head)

        let plain = UpstreamRequest(method: "GET", target: .origin(endpoint, path: "/ws", query: nil), relayed: client)
        let (_, own) = TunnelDial.requestHead(plain, upgrade: "websocket")
        XCTAssertEqual(own.split(separator: "\r\n").filter { $0.lowercased().hasPrefix("host:") }, ["Host: 127.0.0.1:8081"])
    }
}

import Foundation
@testable import PeelGateway
import PeelIO
import XCTest

/// Issue 18: X-Forwarded-* and Forwarded are believed only from `trusted_proxies`.
final class TrustedProxyTests: XCTestCase {
    private static let forged: [(String, String)] = [
        ("X-Forwarded-For", "203.0.113.7, 10.0.0.2"), ("X-Forwarded-Host", "evil.example"),
        ("X-Forwarded-Proto", "https"), ("Forwarded", "for=198.51.100.1;host=evil.example;proto=https"),
        ("X-Forwarded-Port", "31337"), ("X-Forwarded-Prefix", "/evil"), ("X-Real-IP", "198.51.100.2"),
    ]

    /// A gateway whose upstream redirects every call to its own /next; returns the client's answer
    /// and the fields the upstream saw.
    private func redirected(trusted: [String], listen: String = "127.0.0.1",
                            forwardFields: GatewayConfig.ForwardFields = .xForwarded) throws -> (BlockingClient.Response, [(String, String)], port: Int) {
        let box = Locked<Int>(0)
        let h = try RawHarness(configure: { c in
            c.clients.trustedProxies = trusted.compactMap(IPNetwork.init)
            c.listeners.client = HostPort(host: listen, port: 0)
            c.calls.forwardFields = forwardFields
        }) { _ in
            .send("HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:\(box.withLock { $0 })/next\r\nContent-Length: 0\r\n\r\n")
        }
        defer { h.stop() }
        box.withLock { $0 = h.upstream.port }
        let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 5)
        var head = "GET /start HTTP/1.1\r\nHost: 127.0.0.1:\(h.port)\r\nConnection: close\r\n"
        for (k, v) in Self.forged { head += "\(k): \(v)\r\n" }
        try c.send(head + "\r\n")
        let r = try c.readResponse()
        return (r, h.upstream.requests.last?.headers ?? [], h.port)
    }

    private func field(_ headers: [(String, String)], _ name: String) -> String? {
        let all = headers.filter { $0.0.lowercased() == name }.map(\.1)
        return all.isEmpty ? nil : all.joined(separator: ", ")
    }

    func testUntrustedPeer_forwardedFieldsIgnored_redirectUsesHost() throws {
        let (r, seen, port) = try redirected(trusted: [])
        XCTAssertEqual(r.status, 302)
        XCTAssertEqual(r.header("Location"), "http://127.0.0.1:\(port)/next", "rewritten from Host, not X-Forwarded-Host/-Proto")
        XCTAssertEqual(field(seen, "x-forwarded-for"), "127.0.0.1")
        XCTAssertEqual(field(seen, "x-forwarded-host"), "127.0.0.1:\(port)")
        XCTAssertEqual(field(seen, "x-forwarded-proto"), "http")
        // The forged Forwarded is dropped, and Peel writes none of its own by default (--forward-fields).
        XCTAssertNil(field(seen, "forwarded"))
        // Nor do the other fields a proxy writes about the client and its hop (Spring would take the
        // port and prefix for its absolute URLs, RuoYi the address).
        XCTAssertNil(field(seen, "x-forwarded-port"))
        XCTAssertNil(field(seen, "x-forwarded-prefix"))
        XCTAssertNil(field(seen, "x-real-ip"))
    }

    func testTrustedPeer_forwardedFieldsKept_redirectUsesThem() throws {
        let (r, seen, port) = try redirected(trusted: ["127.0.0.0/8", "10.0.0.0/8"])
        XCTAssertEqual(r.header("Location"), "https://evil.example/next")
        XCTAssertEqual(field(seen, "x-forwarded-for"), "203.0.113.7, 10.0.0.2, 127.0.0.1")
        // This hop's proto and host, as before: the upstream's own absolute URLs stay rewritable.
        XCTAssertEqual(field(seen, "x-forwarded-host"), "127.0.0.1:\(port)")
        XCTAssertEqual(field(seen, "x-forwarded-proto"), "http")
        XCTAssertEqual(field(seen, "forwarded"),
                       "for=198.51.100.1;host=evil.example;proto=https, for=127.0.0.1;host=\"127.0.0.1:\(port)\";proto=http")
        // A trusted proxy's client address and stripped prefix go on; its port was its own hop's.
        XCTAssertEqual(field(seen, "x-real-ip"), "198.51.100.2")
        XCTAssertEqual(field(seen, "x-forwarded-prefix"), "/evil")
        XCTAssertNil(field(seen, "x-forwarded-port"))
    }

    // A dual-stack `[::]` listener sees an IPv4 client as ::ffff:127.0.0.1: the upstream is told
    // 127.0.0.1, as a plain IPv4 listener would tell it (X-Forwarded-For, Forwarded).
    func testDualStackListener_IPv4PeerIsForwardedAsPlainIPv4() throws {
        let (r, seen, port) = try redirected(trusted: [], listen: "::", forwardFields: .both)
        XCTAssertEqual(r.status, 302)
        XCTAssertEqual(field(seen, "x-forwarded-for"), "127.0.0.1")
        XCTAssertEqual(field(seen, "forwarded"), "for=127.0.0.1;host=\"127.0.0.1:\(port)\";proto=http")
    }

    // An IPv4-mapped range trusts the IPv4 peers it maps, on either kind of listener.
    func testMappedTrustedRange_trustsIPv4Peer() throws {
        for listen in ["127.0.0.1", "::"] {
            let (_, seen, _) = try redirected(trusted: ["::ffff:127.0.0.1/128"], listen: listen)
            XCTAssertEqual(field(seen, "x-forwarded-for"), "203.0.113.7, 10.0.0.2, 127.0.0.1", listen)
        }
    }

    func testIPNetwork_mappedRangesLeadingZerosAndHostBits() throws {
        XCTAssertEqual(IPNetwork("::ffff:127.0.0.1/128")?.description, "::ffff:127.0.0.1/128")
        XCTAssertTrue(IPNetwork("::ffff:127.0.0.1/128")!.contains(IPNetwork.address("127.0.0.1")!))
        XCTAssertFalse(IPNetwork("::ffff:127.0.0.1/128")!.contains(IPNetwork.address("127.0.0.2")!))
        XCTAssertTrue(IPNetwork("::ffff:10.0.0.0/104")!.contains(IPNetwork.address("::ffff:10.9.8.7")!))
        XCTAssertTrue(IPNetwork("::ffff:0:0/96")!.contains(IPNetwork.address("8.8.8.8")!))
        XCTAssertEqual(IPNetwork("::ffff:127.0.0.1")?.description, "::ffff:127.0.0.1/128")
        let env = ["PEEL_UPSTREAM": "http://127.0.0.1:1"]
        func refusal(_ value: String) -> String? {
            do {
                _ = try ConfigLoader.load(arguments: ["--trusted-proxies", value], environment: env)
                return nil
            } catch {
                XCTAssertEqual(error.option, "--trusted-proxies", value)
                return error.problem
            }
        }
        XCTAssertEqual(refusal("1.2.3.4/08"), "1.2.3.4/08: the prefix has a leading zero; write 1.2.3.4/8")
        XCTAssertEqual(refusal("10.0.0.1/8"), "10.0.0.1/8 has host bits set; write 10.0.0.0/8 for the network, or 10.0.0.1 for the one address")
        XCTAssertEqual(refusal("fd00::1/8"), "fd00::1/8 has host bits set; write fd00::/8 for the network, or fd00::1 for the one address")
        XCTAssertEqual(refusal("::ffff:10.0.0.1/104"),
                       "::ffff:10.0.0.1/104 has host bits set; write ::ffff:10.0.0.0/104 for the network, or ::ffff:10.0.0.1 for the one address")
        XCTAssertNotNil(refusal("::ffff:10.0.0.0/64"))
        XCTAssertNotNil(refusal("10.0.0.0/"))
        XCTAssertNil(refusal("10.0.0.0/8, ::ffff:127.0.0.1/128, 0.0.0.0/0, ::/0"))
    }

    func testRealClient_walksForwardedForRightToLeftPastTrustedHops() {
        let trusted = ["127.0.0.0/8", "10.0.0.0/8", "fd00::/8"].compactMap(IPNetwork.init)
        XCTAssertEqual(IPNetwork.realClient(peer: "127.0.0.1", forwardedFor: "203.0.113.7, 10.0.0.2", trusted: trusted), "203.0.113.7")
        // A client forging entries left of the real one does not move it (nginx real_ip_recursive on).
        XCTAssertEqual(IPNetwork.realClient(peer: "127.0.0.1", forwardedFor: "1.1.1.1, 203.0.113.7, 10.0.0.2", trusted: trusted), "203.0.113.7")
        XCTAssertEqual(IPNetwork.realClient(peer: "127.0.0.1", forwardedFor: "2001:db8::1, fd00::5", trusted: trusted), "2001:db8::1")
        XCTAssertEqual(IPNetwork.realClient(peer: "127.0.0.1", forwardedFor: "10.0.0.9, 10.0.0.2", trusted: trusted), "10.0.0.9", "all trusted: leftmost")
        XCTAssertEqual(IPNetwork.realClient(peer: "127.0.0.1", forwardedFor: "<script>, 10.0.0.2", trusted: trusted), "10.0.0.2",
                       "text that is not an address never becomes the client")
        XCTAssertEqual(IPNetwork.realClient(peer: "127.0.0.1", forwardedFor: nil, trusted: trusted), "127.0.0.1")
    }

    func testIPNetwork_parsesAndMatchesIPv4AndIPv6() throws {
        let v4 = try XCTUnwrap(IPNetwork("10.1.0.0/16"))
        XCTAssertTrue(v4.contains(IPNetwork.address("10.1.255.3")!))
        XCTAssertFalse(v4.contains(IPNetwork.address("10.2.0.1")!))
        XCTAssertTrue(v4.contains(IPNetwork.address("::ffff:10.1.2.3")!), "IPv4-mapped addresses match IPv4 networks")
        let v6 = try XCTUnwrap(IPNetwork("2001:db8::/33"))
        XCTAssertTrue(v6.contains(IPNetwork.address("2001:db8:7fff::1")!))
        XCTAssertFalse(v6.contains(IPNetwork.address("2001:db8:8000::1")!))
        XCTAssertFalse(v6.contains(IPNetwork.address("10.1.2.3")!))
        XCTAssertEqual(IPNetwork("192.168.1.7")?.description, "192.168.1.7/32")
        XCTAssertTrue(IPNetwork("0.0.0.0/0")!.contains(IPNetwork.address("8.8.8.8")!))
        for bad in ["10.0.0.0/33", "::/129", "10.0.0/8", "host.example", "10.0.0.0/-1", "10.0.0.0/+8", ""] {
            XCTAssertNil(IPNetwork(bad), bad)
        }
        let env = ["PEEL_UPSTREAM": "http://127.0.0.1:1", "PEEL_TRUSTED_PROXIES": "10.0.0.0/8, ::1"]
        XCTAssertEqual(try ConfigLoader.load(arguments: [], environment: env).clients.trustedProxies.map(\.description), ["10.0.0.0/8", "::1/128"])
        XCTAssertThrowsError(try ConfigLoader.load(arguments: ["--trusted-proxies", "10.0.0.0/8,nope"], environment: env)) { e in
            XCTAssertEqual((e as? ConfigError)?.option, "--trusted-proxies")
        }
    }
}
